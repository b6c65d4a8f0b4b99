//! TLS for `https://` targets: rustls with the `ring` provider, trusting the
//! platform's root store, Mozilla's bundled roots (webpki-roots) and any
//! `--ca-cert FILE`; or, with `--insecure`, trusting any certificate at all.
//! Also turns handshake failures into one line that names the fix.

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
};
use std::io;
use std::path::Path;
use std::sync::Arc;

/// The client TLS configuration for a run. Errors name `--ca-cert` and the file.
pub fn client_config(ca_cert: Option<&Path>, insecure: bool) -> Result<Arc<ClientConfig>, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup failed: {e}"))?;
    let mut config = if insecure {
        builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AcceptAnyCertificate(provider)))
            .with_no_client_auth()
    } else {
        builder
            .with_root_certificates(root_store(ca_cert)?)
            .with_no_client_auth()
    };
    // The streaming client speaks HTTP/1.1 only; say so, so that a server
    // offering h2 does not pick it.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// Platform roots (unreadable ones skipped), webpki roots, then `--ca-cert`.
fn root_store(ca_cert: Option<&Path>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    // A platform store that cannot be read (no CA bundle installed) still
    // leaves the bundled roots: not an error.
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    if let Some(path) = ca_cert {
        let shown = path.display();
        let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
            .map_err(|e| format!("--ca-cert {shown}: cannot read it as PEM: {e}"))?
            .collect::<Result<_, _>>()
            .map_err(|e| format!("--ca-cert {shown}: not valid PEM: {e}"))?;
        if certs.is_empty() {
            return Err(format!(
                "--ca-cert {shown}: holds no PEM certificate (-----BEGIN CERTIFICATE-----)"
            ));
        }
        for cert in certs {
            roots
                .add(cert)
                .map_err(|e| format!("--ca-cert {shown}: not a usable CA certificate: {e}"))?;
        }
    }
    Ok(roots)
}

/// `--insecure`: a verifier that accepts every certificate and every
/// handshake signature. This really turns verification off, as the flag
/// says: anyone on the path can impersonate the server. It exists for test
/// servers with self-signed certificates, as in vLLM, curl and aiohttp.
#[derive(Debug)]
struct AcceptAnyCertificate(Arc<CryptoProvider>);

impl ServerCertVerifier for AcceptAnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn verify_tls13_signature(
        &self,
        _message: &[u8],
        _cert: &CertificateDer<'_>,
        _dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, rustls::Error> {
        Ok(HandshakeSignatureValid::assertion())
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

/// A rejected server certificate, carried inside an `io::Error` so callers
/// can tell it from other connect failures ([`super::certificate_rejection`]).
#[derive(Debug)]
pub struct CertificateRejected(pub String);

impl std::fmt::Display for CertificateRejected {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for CertificateRejected {}

/// One line for a failed handshake with `host`: for a certificate, the
/// reason and the flags that fix it.
pub fn handshake_error(host: &str, e: io::Error) -> io::Error {
    let rustls_error = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    match rustls_error {
        Some(rustls::Error::InvalidCertificate(cert)) => {
            let reason = certificate_reason(cert, host);
            io::Error::new(
                io::ErrorKind::InvalidData,
                CertificateRejected(format!(
                    "TLS: the certificate of {host} was rejected ({reason}); pass --ca-cert FILE with the CA that signed it, or --insecure to skip verification"
                )),
            )
        }
        Some(other) => io::Error::new(
            io::ErrorKind::InvalidData,
            format!(
                "TLS handshake with {host} failed: {other} (does it serve https on this port?)"
            ),
        ),
        None => io::Error::new(e.kind(), format!("TLS handshake with {host} failed: {e}")),
    }
}

fn certificate_reason(e: &CertificateError, host: &str) -> String {
    match e {
        CertificateError::UnknownIssuer => "signed by an unknown authority".into(),
        CertificateError::BadSignature => "bad signature".into(),
        CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. } => {
            format!("not valid for the name {host}")
        }
        CertificateError::Expired | CertificateError::ExpiredContext { .. } => "expired".into(),
        CertificateError::NotValidYet | CertificateError::NotValidYetContext { .. } => {
            "not valid yet".into()
        }
        CertificateError::Revoked => "revoked".into(),
        // webpki's reasons, e.g. CaUsedAsEndEntity for a CA certificate
        // served as the server's own.
        CertificateError::Other(inner) => inner.to_string(),
        other => format!("{other:?}"),
    }
}

/// `--ca-cert` and `--insecure` as given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    pub ca_cert: Option<std::path::PathBuf>,
    pub insecure: bool,
}
