//! The wording of a refused server certificate: what was actually wrong
//! with it (from the verifier's error and the certificate's own facts) and
//! what to do, with `--ca-cert` advice only when it can help. Pure.

use super::x509::CertFacts;
use rustls::pki_types::UnixTime;
use rustls::{CertificateError, OtherError};
use std::fmt;
use std::path::Path;

/// Why a server certificate was refused, and the fix, for one line.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Refusal {
    pub what: String,
    pub fix: String,
}

impl fmt::Display for Refusal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}; {}", self.what, self.fix)
    }
}

impl std::error::Error for Refusal {}

/// What the verifier saw besides the error.
pub struct Seen<'a> {
    /// The server certificate's facts, when it could be read.
    pub facts: Option<&'a CertFacts>,
    /// The name the client checked it against.
    pub host: String,
    /// `--ca-cert FILE`, when given.
    pub ca_file: Option<&'a Path>,
    /// The certificate is byte for byte one of those in `--ca-cert`.
    pub pinned: bool,
    pub now: UnixTime,
}

const INSECURE: &str = "or --insecure to skip verification";

/// The refusal for `error`, as `seen`.
pub fn explain(error: &CertificateError, seen: &Seen<'_>) -> Refusal {
    let facts = seen.facts;
    match error {
        CertificateError::UnknownIssuer => unknown_issuer(seen),
        CertificateError::Other(_)
            if facts.is_some_and(|f| f.is_ca && (!seen.pinned || f.name_constrained)) =>
        {
            ca_as_server(seen)
        }
        CertificateError::Other(_) if facts.is_some_and(|f| f.version < 3) => old_version(facts),
        CertificateError::NotValidForNameContext { presented, .. } => wrong_name(seen, presented),
        CertificateError::NotValidForName => wrong_name(seen, &[]),
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => expired(seen),
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            not_yet_valid(seen)
        }
        CertificateError::InvalidPurpose | CertificateError::InvalidPurposeContext { .. } => {
            Refusal {
                what: "its extendedKeyUsage does not allow serverAuth, so it may not identify a TLS server".into(),
                fix: "reissue it with extendedKeyUsage=serverAuth (or without an extendedKeyUsage)".into(),
            }
        }
        CertificateError::BadSignature => bad_signature(seen),
        CertificateError::BadEncoding => Refusal {
            what: "it is not a well-formed X.509 certificate".into(),
            fix: format!("check the server's certificate file, {INSECURE}"),
        },
        CertificateError::Other(OtherError(inner)) => Refusal {
            what: format!("webpki refused it ({inner})"),
            fix: format!("check the server's certificate, {INSECURE}"),
        },
        other => Refusal {
            what: format!("{}", rustls::Error::InvalidCertificate(other.clone())),
            fix: format!("check the server's certificate, {INSECURE}"),
        },
    }
}

/// `subject CN=x` for messages, or nothing.
fn cn(label: &str, name: Option<&String>) -> String {
    name.map(|n| format!(" ({label} CN={n})"))
        .unwrap_or_default()
}

fn unknown_issuer(seen: &Seen<'_>) -> Refusal {
    let self_signed = seen.facts.is_some_and(|f| f.self_issued);
    let issuer = cn("issuer", seen.facts.and_then(|f| f.issuer_cn.as_ref()));
    let subject = cn("subject", seen.facts.and_then(|f| f.subject_cn.as_ref()));
    match (seen.ca_file, self_signed) {
        (None, true) => Refusal {
            what: format!("it is self-signed{subject} and no root store trusts it"),
            fix: format!("pass that certificate itself with --ca-cert FILE, {INSECURE}"),
        },
        (None, false) => Refusal {
            what: format!("it is signed by an unknown authority{issuer}"),
            fix: format!("pass --ca-cert FILE with that authority's certificate (PEM), {INSECURE}"),
        },
        (Some(file), true) => Refusal {
            what: format!(
                "it is self-signed{subject} and is not one of the certificates in --ca-cert {}",
                file.display()
            ),
            fix: format!("put this server's own certificate in {} (openssl s_client -showcerts prints it), or check that --base-url names the server you meant", file.display()),
        },
        (Some(file), false) => Refusal {
            what: format!(
                "it is signed by an unknown authority{issuer}: neither --ca-cert {} nor the system's roots hold it",
                file.display()
            ),
            fix: format!("{} must hold the certificate of that authority or of a CA above it (or the server's own certificate); check that --base-url names the server you meant", file.display()),
        },
    }
}

/// An issuer of the right name was found, but its key did not sign this.
fn bad_signature(seen: &Seen<'_>) -> Refusal {
    let issuer = seen
        .facts
        .and_then(|f| f.issuer_cn.as_ref())
        .map(|n| format!("CN={n}"))
        .unwrap_or_else(|| "its issuer".into());
    let signed = match seen.facts {
        Some(f) if f.self_issued => format!("it is self-signed ({issuer}), but"),
        _ => format!("it names {issuer} as its issuer, but"),
    };
    match seen.ca_file {
        Some(file) => Refusal {
            what: format!(
                "{signed} its signature does not verify with the key of the certificate of that name in --ca-cert {} or the system's roots",
                file.display()
            ),
            fix: format!("{} probably holds an older or different certificate of the same name: put the server's current certificate (or its CA's) in it", file.display()),
        },
        None => Refusal {
            what: format!("{signed} its signature does not verify with the key of the root certificate of that name"),
            fix: format!("check the certificate files the server sends (leaf and intermediates from the same CA), {INSECURE}"),
        },
    }
}

/// webpki's `CaUsedAsEndEntity`: a CA:TRUE certificate served as the
/// server's own, and not pinned.
fn ca_as_server(seen: &Seen<'_>) -> Refusal {
    let self_signed = seen.facts.is_some_and(|f| f.self_issued);
    let mut detail = "basicConstraints CA:TRUE".to_string();
    if let Some(name) = seen.facts.and_then(|f| f.subject_cn.as_ref()) {
        detail.push_str(&format!(", subject CN={name}"));
    }
    if self_signed {
        detail.push_str(", as `openssl req -x509` makes");
    }
    let kind = if self_signed {
        "a self-signed CA"
    } else {
        "a CA"
    };
    let what = format!("it is {kind} certificate ({detail}) served as the server's own");
    match seen.ca_file {
        None => Refusal {
            what,
            fix: format!("pass this exact certificate with --ca-cert FILE to pin it, {INSECURE}"),
        },
        Some(file) if seen.pinned => Refusal {
            what: format!("{what}, and although it is in --ca-cert {} it has nameConstraints, so it is trusted only as a CA", file.display()),
            fix: "serve a certificate it signed instead, or reissue it without nameConstraints".into(),
        },
        Some(file) => Refusal {
            what: format!("{what}, and it is not one of the certificates in --ca-cert {}", file.display()),
            fix: format!("put this server's own certificate in {} (openssl s_client -showcerts prints it), or check that --base-url names the server you meant", file.display()),
        },
    }
}

fn old_version(facts: Option<&CertFacts>) -> Refusal {
    let version = facts.map_or(1, |f| f.version);
    Refusal {
        what: format!("it is an X.509 version {version} certificate, which rustls does not accept"),
        fix: format!(
            "reissue it as version 3 with a subjectAltName (openssl: -addext subjectAltName=DNS:name,IP:address), {INSECURE}"
        ),
    }
}

fn wrong_name(seen: &Seen<'_>, presented: &[String]) -> Refusal {
    let host = &seen.host;
    let cn_is_host = seen
        .facts
        .and_then(|f| f.subject_cn.as_ref())
        .is_some_and(|n| n == host);
    let cn_note = if cn_is_host {
        format!(" (its common name CN={host} is not used: names are checked against subjectAltName only, as curl and browsers do)")
    } else {
        String::new()
    };
    let what = if presented.is_empty() {
        format!("it is not valid for {host}: it has no subjectAltName that names it{cn_note}")
    } else {
        let names: Vec<String> = presented.iter().map(|n| san(n)).collect();
        format!(
            "it is valid for {} but not for {host}{cn_note}",
            names.join(", ")
        )
    };
    let fix = if presented.is_empty() {
        format!("reissue it with subjectAltName=DNS:{host} (or IP:{host} for an address)")
    } else {
        format!("use one of those names in --base-url, or reissue the certificate with a subjectAltName for {host}")
    };
    Refusal { what, fix }
}

/// webpki's `DnsName("a.b")` / `IpAddress(1.2.3.4)` as openssl writes
/// subjectAltNames: `DNS:a.b`, `IP:1.2.3.4`.
fn san(presented: &str) -> String {
    let inner = |prefix: &str, suffix: &str| {
        presented
            .strip_prefix(prefix)
            .and_then(|s| s.strip_suffix(suffix))
            .map(str::to_string)
    };
    if let Some(dns) = inner("DnsName(\"", "\")") {
        format!("DNS:{dns}")
    } else if let Some(ip) = inner("IpAddress(", ")") {
        format!("IP:{ip}")
    } else {
        presented.to_string()
    }
}

fn expired(seen: &Seen<'_>) -> Refusal {
    let when = seen
        .facts
        .map(|f| format!(" at {}", utc(f.not_after)))
        .unwrap_or_default();
    Refusal {
        what: format!(
            "it expired{when} (this machine's clock says {})",
            utc(clock(seen.now))
        ),
        fix: "renew the server's certificate, or fix this machine's clock if it is wrong".into(),
    }
}

fn not_yet_valid(seen: &Seen<'_>) -> Refusal {
    let when = seen
        .facts
        .map(|f| format!(" until {}", utc(f.not_before)))
        .unwrap_or_default();
    Refusal {
        what: format!(
            "it is not valid yet{when} (this machine's clock says {})",
            utc(clock(seen.now))
        ),
        fix: "check the clocks of this machine and of the one that made the certificate".into(),
    }
}

fn clock(now: UnixTime) -> i64 {
    i64::try_from(now.as_secs()).unwrap_or(i64::MAX)
}

/// `2026-01-27 10:00:00 UTC`.
fn utc(secs: i64) -> String {
    chrono::DateTime::from_timestamp(secs, 0)
        .map(|t| t.format("%Y-%m-%d %H:%M:%S UTC").to_string())
        .unwrap_or_else(|| format!("{secs} s after 1970"))
}
