//! The server-certificate check of https targets (all but `--insecure`):
//! webpki's full verification against the root stores and `--ca-cert`, the
//! pinning of a server certificate that is byte for byte one of those in
//! `--ca-cert`, and a [`Refusal`] (what was wrong, what to do) for every
//! certificate refused.

use super::tls_refusal::{explain, Refusal, Seen};
use super::x509;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::client::WebPkiServerVerifier;
use rustls::crypto::CryptoProvider;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::server::ParsedCertificate;
use rustls::{
    CertificateError, DigitallySignedStruct, DistinguishedName, OtherError, RootCertStore,
    SignatureScheme,
};
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// webpki's verdict, with the certificates of `--ca-cert` pinned.
///
/// Why pinning is safe. Every certificate in `--ca-cert` is a trust anchor
/// already. A server completes the handshake with a certificate only if it
/// holds that certificate's private key: the handshake signature is checked
/// against the certificate's key, with the provider's algorithms, exactly as
/// for any other certificate. Whoever holds the key of a trust anchor can
/// already sign a certificate that webpki accepts for any name, so taking the
/// anchor itself as the server's certificate trusts no key and no name that
/// `--ca-cert` did not trust before. The one exception, an anchor with
/// nameConstraints (they bind what it issues, not itself), is never pinned.
/// A pinned certificate must still name the host in its subjectAltName, be
/// inside its validity period and, when it has an extendedKeyUsage, allow
/// serverAuth. Only webpki's refusals about the chain are overridden
/// (unknown issuer, a CA certificate used as the server's own); a
/// certificate webpki cannot parse, or with an unknown critical extension,
/// stays refused. Every certificate that is not byte for byte in `--ca-cert`
/// gets webpki's full verification, unchanged.
///
/// This is what curl and Python do with `--cacert`/`cafile`: OpenSSL takes a
/// self-signed certificate found in the CA file as a complete chain whether
/// or not it says CA:TRUE (and curl since 7.68, like Python 3.13, also takes
/// any certificate of the file as the chain's end, X509_V_FLAG_PARTIAL_CHAIN),
/// then checks the host name and the dates.
#[derive(Debug)]
pub struct Verifier {
    webpki: Arc<WebPkiServerVerifier>,
    pinned: Vec<CertificateDer<'static>>,
    ca_file: Option<PathBuf>,
}

impl Verifier {
    /// `roots` already hold `pinned`, the certificates of `ca_file`.
    pub fn new(
        roots: RootCertStore,
        pinned: Vec<CertificateDer<'static>>,
        ca_file: Option<PathBuf>,
        provider: Arc<CryptoProvider>,
    ) -> Result<Self, String> {
        let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
            .build()
            .map_err(|e| format!("TLS setup failed: {e}"))?;
        Ok(Self {
            webpki,
            pinned,
            ca_file,
        })
    }

    fn is_pinned(&self, cert: &CertificateDer<'_>) -> bool {
        self.pinned.iter().any(|p| p.as_ref() == cert.as_ref())
    }
}

impl ServerCertVerifier for Verifier {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        let refused = match self.webpki.verify_server_cert(
            end_entity,
            intermediates,
            server_name,
            ocsp_response,
            now,
        ) {
            Ok(verified) => return Ok(verified),
            Err(rustls::Error::InvalidCertificate(e)) => e,
            Err(other) => return Err(other),
        };
        let facts = x509::facts(end_entity.as_ref());
        let pinned = self.is_pinned(end_entity);
        let refused = match &facts {
            Some(f) if pinned && chain_only(&refused, f) => {
                match check_pinned(end_entity, f, server_name, now) {
                    Ok(()) => return Ok(ServerCertVerified::assertion()),
                    Err(e) => e,
                }
            }
            _ => refused,
        };
        let seen = Seen {
            facts: facts.as_ref(),
            host: server_name.to_str().into_owned(),
            ca_file: self.ca_file.as_deref(),
            pinned,
            now,
        };
        Err(refusal_error(explain(&refused, &seen)))
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        self.webpki.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.webpki.supported_verify_schemes()
    }

    fn root_hint_subjects(&self) -> Option<&[DistinguishedName]> {
        self.webpki.root_hint_subjects()
    }
}

/// True when webpki refused only the chain, which pinning replaces: an
/// unknown issuer, or (webpki's `CaUsedAsEndEntity`, which it reports as
/// an "other" error) a CA certificate as the server's own. webpki checks a
/// CA flag before anything else that could give an "other" error.
fn chain_only(refused: &CertificateError, facts: &x509::CertFacts) -> bool {
    if facts.name_constrained {
        return false;
    }
    match refused {
        CertificateError::UnknownIssuer => true,
        CertificateError::Other(_) => facts.is_ca,
        _ => false,
    }
}

/// What a pinned certificate must still satisfy: the host name (its
/// subjectAltNames, as webpki checks them), its validity period at `now`,
/// and serverAuth when it has an extendedKeyUsage.
fn check_pinned(
    cert: &CertificateDer<'_>,
    facts: &x509::CertFacts,
    server_name: &ServerName<'_>,
    now: UnixTime,
) -> Result<(), CertificateError> {
    let parsed = ParsedCertificate::try_from(cert).map_err(certificate_error)?;
    rustls::client::verify_server_name(&parsed, server_name).map_err(certificate_error)?;
    let secs = i64::try_from(now.as_secs()).unwrap_or(i64::MAX);
    if secs < facts.not_before {
        return Err(CertificateError::NotValidYetContext {
            time: now,
            not_before: unix_time(facts.not_before),
        });
    }
    if secs > facts.not_after {
        return Err(CertificateError::ExpiredContext {
            time: now,
            not_after: unix_time(facts.not_after),
        });
    }
    if !facts.server_auth {
        return Err(CertificateError::InvalidPurpose);
    }
    Ok(())
}

fn certificate_error(e: rustls::Error) -> CertificateError {
    match e {
        rustls::Error::InvalidCertificate(e) => e,
        other => CertificateError::Other(OtherError(Arc::new(other))),
    }
}

fn unix_time(secs: i64) -> UnixTime {
    UnixTime::since_unix_epoch(Duration::from_secs(u64::try_from(secs).unwrap_or(0)))
}

/// The error a refusal travels in through rustls and tokio-rustls.
fn refusal_error(refusal: Refusal) -> rustls::Error {
    rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(Arc::new(refusal))))
}

/// The refusal inside a handshake error, when the verifier made it.
pub fn refusal(e: &rustls::Error) -> Option<&Refusal> {
    match e {
        rustls::Error::InvalidCertificate(CertificateError::Other(OtherError(inner))) => {
            inner.downcast_ref::<Refusal>()
        }
        _ => None,
    }
}

#[cfg(test)]
#[path = "tls_verify_tests.rs"]
mod tests;
