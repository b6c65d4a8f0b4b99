//! The certificate check, called directly with certificates made here:
//! what pinning accepts, what it still refuses, and the words of each
//! refusal.

use super::*;
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, ExtendedKeyUsagePurpose,
    GeneralSubtree, IsCa, KeyPair, NameConstraints,
};

const CA_FILE: &str = "/etc/certs/gateway.pem";

/// 2027-01-15, inside rcgen's default validity (1975–4096).
fn now() -> UnixTime {
    UnixTime::since_unix_epoch(Duration::from_secs(1_800_000_000))
}

/// What `openssl req -x509 -newkey rsa:2048 -nodes -subj /CN=localhost
/// -addext subjectAltName=IP:127.0.0.1` makes, with an ECDSA key.
fn openssl_like() -> CertificateParams {
    let mut p = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name = rcgen::DistinguishedName::new();
    p.distinguished_name.push(DnType::CommonName, "localhost");
    p
}

fn self_signed(p: CertificateParams) -> CertificateDer<'static> {
    p.self_signed(&KeyPair::generate().unwrap())
        .unwrap()
        .der()
        .clone()
}

/// A CA named `cn` and a leaf it signed for `names`.
fn ca_and_leaf(cn: &str, names: &[&str]) -> (CertificateDer<'static>, CertificateDer<'static>) {
    let mut p = CertificateParams::new(Vec::<String>::new()).unwrap();
    p.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    p.distinguished_name.push(DnType::CommonName, cn);
    let ca = CertifiedIssuer::self_signed(p, KeyPair::generate().unwrap()).unwrap();
    let names: Vec<String> = names.iter().map(|n| n.to_string()).collect();
    let leaf = CertificateParams::new(names)
        .unwrap()
        .signed_by(&KeyPair::generate().unwrap(), &ca)
        .unwrap();
    (ca.der().clone(), leaf.der().clone())
}

/// The verifier for `--ca-cert CA_FILE` holding `ca_certs` (None: no
/// `--ca-cert`), with one unrelated root in place of the platform's.
fn verifier(ca_certs: Option<&[CertificateDer<'static>]>) -> Verifier {
    let mut roots = RootCertStore::empty();
    roots.add(ca_and_leaf("unrelated root", &[]).0).unwrap();
    let pinned = ca_certs.unwrap_or_default().to_vec();
    for cert in &pinned {
        roots.add(cert.clone()).unwrap();
    }
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    Verifier::new(roots, pinned, ca_certs.map(|_| CA_FILE.into()), provider).unwrap()
}

/// The verdict for `cert` served as `host`, at `now`: Ok, or the line.
fn check_at(
    v: &Verifier,
    cert: &CertificateDer<'_>,
    host: &str,
    at: UnixTime,
) -> Result<(), String> {
    let name = ServerName::try_from(host.to_string()).unwrap();
    match v.verify_server_cert(cert, &[], &name, &[], at) {
        Ok(_) => Ok(()),
        Err(e) => Err(refusal(&e)
            .unwrap_or_else(|| panic!("not a refusal: {e:?}"))
            .to_string()),
    }
}

fn check(v: &Verifier, cert: &CertificateDer<'_>, host: &str) -> Result<(), String> {
    check_at(v, cert, host, now())
}

fn assert_says(line: &str, parts: &[&str]) {
    for part in parts {
        assert!(line.contains(part), "'{part}' missing from: {line}");
    }
}

#[test]
fn an_openssl_style_ca_certificate_in_ca_cert_is_pinned() {
    let cert = self_signed(openssl_like());
    let v = verifier(Some(std::slice::from_ref(&cert)));
    // webpki alone refuses it: pinning is what lets it in.
    let name = ServerName::try_from("127.0.0.1").unwrap();
    let webpki = v.webpki.verify_server_cert(&cert, &[], &name, &[], now());
    assert!(
        webpki.is_err(),
        "webpki accepted a CA:TRUE server certificate"
    );
    assert_eq!(check(&v, &cert, "127.0.0.1"), Ok(()));
}

#[test]
fn without_ca_cert_the_same_certificate_says_how_to_pin_it() {
    let cert = self_signed(openssl_like());
    let line = check(&verifier(None), &cert, "127.0.0.1").unwrap_err();
    assert_says(
        &line,
        &[
            "CA certificate",
            "CA:TRUE",
            "CN=localhost",
            "--ca-cert FILE",
            "--insecure",
        ],
    );
}

#[test]
fn a_different_certificate_of_the_same_shape_is_refused_without_ca_cert_advice() {
    let pinned = self_signed(openssl_like());
    let v = verifier(Some(std::slice::from_ref(&pinned)));
    let other = self_signed(openssl_like());
    let line = check(&v, &other, "127.0.0.1").unwrap_err();
    assert_says(
        &line,
        &[
            "CA certificate",
            &format!("not one of the certificates in --ca-cert {CA_FILE}"),
        ],
    );
    assert!(!line.contains("--ca-cert FILE"), "{line}");
    assert!(!line.contains("pass "), "{line}");

    // The same without CA:TRUE: the name matches the pinned certificate's
    // but the key does not (a certificate made again with the same name).
    let mut p = openssl_like();
    p.is_ca = IsCa::NoCa;
    let line = check(&v, &self_signed(p), "127.0.0.1").unwrap_err();
    assert_says(
        &line,
        &[
            "self-signed (CN=localhost)",
            "does not verify",
            "older or different certificate",
        ],
    );
    assert!(!line.contains("pass "), "{line}");
    // And with another name: webpki's unknown issuer, worded for a
    // self-signed certificate.
    let mut p = openssl_like();
    p.is_ca = IsCa::NoCa;
    p.distinguished_name.push(DnType::CommonName, "gateway");
    let line = check(&v, &self_signed(p), "127.0.0.1").unwrap_err();
    assert_says(
        &line,
        &[
            "self-signed (subject CN=gateway)",
            "not one of the certificates in --ca-cert",
        ],
    );
    assert!(!line.contains("pass "), "{line}");
}

#[test]
fn a_pinned_certificate_must_still_name_the_host() {
    let cert = self_signed(openssl_like());
    let v = verifier(Some(std::slice::from_ref(&cert)));
    let line = check(&v, &cert, "localhost").unwrap_err();
    assert_says(
        &line,
        &[
            "valid for IP:127.0.0.1 but not for localhost",
            "CN=localhost is not used",
        ],
    );
    assert!(check(&v, &cert, "127.0.0.2").is_err());
}

#[test]
fn a_pinned_certificate_must_be_inside_its_validity_period() {
    let mut p = openssl_like();
    p.not_before = rcgen::date_time_ymd(2030, 1, 1);
    p.not_after = rcgen::date_time_ymd(2031, 1, 1);
    let cert = self_signed(p);
    let v = verifier(Some(std::slice::from_ref(&cert)));
    let at = |secs| UnixTime::since_unix_epoch(Duration::from_secs(secs));
    // 2030-06-01 is inside; 2029-12-31 and 2031-01-02 are not.
    assert_eq!(check_at(&v, &cert, "127.0.0.1", at(1_906_502_400)), Ok(()));
    let early = check_at(&v, &cert, "127.0.0.1", at(1_893_369_600)).unwrap_err();
    assert_says(
        &early,
        &["not valid yet until 2030-01-01 00:00:00 UTC", "2029-12-31"],
    );
    let late = check_at(&v, &cert, "127.0.0.1", at(1_924_992_000 + 86_400)).unwrap_err();
    assert_says(&late, &["expired at 2031-01-01 00:00:00 UTC", "renew"]);
}

#[test]
fn a_pinned_certificate_must_allow_server_auth() {
    let mut p = openssl_like();
    p.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
    let cert = self_signed(p);
    let v = verifier(Some(std::slice::from_ref(&cert)));
    let line = check(&v, &cert, "127.0.0.1").unwrap_err();
    assert_says(&line, &["serverAuth"]);
}

#[test]
fn a_name_constrained_ca_is_never_pinned() {
    let mut p = openssl_like();
    p.name_constraints = Some(NameConstraints {
        permitted_subtrees: vec![GeneralSubtree::DnsName("corp.example".into())],
        excluded_subtrees: vec![],
    });
    let cert = self_signed(p);
    let v = verifier(Some(std::slice::from_ref(&cert)));
    let line = check(&v, &cert, "127.0.0.1").unwrap_err();
    assert_says(&line, &["nameConstraints", "trusted only as a CA"]);
}

#[test]
fn a_ca_in_ca_cert_still_gets_full_verification_of_its_leaves() {
    let (ca, leaf) = ca_and_leaf("kneecap test CA", &["127.0.0.1", "gateway.internal"]);
    let v = verifier(Some(std::slice::from_ref(&ca)));
    assert_eq!(check(&v, &leaf, "gateway.internal"), Ok(()));
    let line = check(&v, &leaf, "other.internal").unwrap_err();
    assert_says(
        &line,
        &[
            "valid for IP:127.0.0.1, DNS:gateway.internal but not for other.internal",
            "--base-url",
        ],
    );
    // A leaf of another CA is not trusted, whatever that CA's name.
    let (_, stranger) = ca_and_leaf("another CA", &["127.0.0.1"]);
    let line = check(&v, &stranger, "127.0.0.1").unwrap_err();
    assert_says(
        &line,
        &[
            "unknown authority (issuer CN=another CA)",
            CA_FILE,
            "must hold",
        ],
    );
    let (_, namesake) = ca_and_leaf("kneecap test CA", &["127.0.0.1"]);
    let line = check(&v, &namesake, "127.0.0.1").unwrap_err();
    assert_says(
        &line,
        &[
            "names CN=kneecap test CA as its issuer",
            "does not verify",
            CA_FILE,
        ],
    );
}

#[test]
fn a_leaf_given_as_ca_cert_is_pinned_as_curl_takes_a_partial_chain() {
    let (_, leaf) = ca_and_leaf("unseen CA", &["127.0.0.1"]);
    let v = verifier(Some(std::slice::from_ref(&leaf)));
    assert_eq!(check(&v, &leaf, "127.0.0.1"), Ok(()));
}

#[test]
fn without_ca_cert_an_unknown_authority_names_it_and_the_flags() {
    let (_, leaf) = ca_and_leaf("kneecap test CA", &["127.0.0.1"]);
    let line = check(&verifier(None), &leaf, "127.0.0.1").unwrap_err();
    assert_says(
        &line,
        &[
            "unknown authority (issuer CN=kneecap test CA)",
            "--ca-cert FILE",
            "--insecure",
        ],
    );
}

#[test]
fn handshake_lines_name_the_host_and_the_fix() {
    let refused = refusal_error(Refusal {
        what: "it is X".into(),
        fix: "do Y".into(),
    });
    let line = super::super::tls::handshake_error(
        "gw",
        std::io::Error::new(std::io::ErrorKind::InvalidData, refused),
    )
    .to_string();
    assert_eq!(
        line,
        "TLS: the certificate of gw was rejected: it is X; do Y"
    );
    let plain = rustls::Error::InvalidMessage(rustls::InvalidMessage::InvalidContentType);
    let line = super::super::tls::handshake_error(
        "gw",
        std::io::Error::new(std::io::ErrorKind::InvalidData, plain),
    )
    .to_string();
    assert_says(&line, &["TLS handshake with gw failed", "use http://"]);
    let mtls = rustls::Error::AlertReceived(rustls::AlertDescription::CertificateRequired);
    let line = super::super::tls::handshake_error(
        "gw",
        std::io::Error::new(std::io::ErrorKind::InvalidData, mtls),
    )
    .to_string();
    assert_says(&line, &["asks for a client certificate"]);
}
