//! TLS for `https://` targets: rustls with the `ring` provider, trusting the
//! platform's root store, Mozilla's bundled roots (webpki-roots) and any
//! `--ca-cert FILE` (whose certificates are also pinned: `tls_verify`);
//! or, with `--insecure`, trusting any certificate at all. Also turns
//! handshake failures into one line that says what was wrong and the fix.

use super::tls_verify::{self, Verifier};
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    AlertDescription, ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme,
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
    let verifier: Arc<dyn ServerCertVerifier> = if insecure {
        Arc::new(AcceptAnyCertificate(provider))
    } else {
        let pinned = match ca_cert {
            Some(path) => read_ca_file(path)?,
            None => Vec::new(),
        };
        let roots = root_store(&pinned, ca_cert)?;
        let ca_file = ca_cert.map(Path::to_path_buf);
        Arc::new(Verifier::new(roots, pinned, ca_file, provider)?)
    };
    let mut config = builder
        .dangerous()
        .with_custom_certificate_verifier(verifier)
        .with_no_client_auth();
    // The streaming client speaks HTTP/1.1 only; say so, so that a server
    // offering h2 does not pick it.
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

/// The certificates of `--ca-cert FILE`: at least one, all PEM.
fn read_ca_file(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
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
    Ok(certs)
}

/// Platform roots (unreadable ones skipped), webpki roots, then the
/// certificates of `--ca-cert`.
fn root_store(
    ca_certs: &[CertificateDer<'static>],
    ca_file: Option<&Path>,
) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    // A platform store that cannot be read (no CA bundle installed) still
    // leaves the bundled roots: not an error.
    let native = rustls_native_certs::load_native_certs();
    roots.add_parsable_certificates(native.certs);
    for cert in ca_certs {
        roots.add(cert.clone()).map_err(|e| {
            let shown = ca_file.map(|f| f.display().to_string()).unwrap_or_default();
            format!("--ca-cert {shown}: not a usable CA certificate: {e}")
        })?;
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

/// A failed TLS handshake, as one line, carried inside an `io::Error` so
/// callers can tell it from other connect failures
/// ([`super::handshake_failure`]).
#[derive(Debug)]
pub struct HandshakeFailed(pub String);

impl std::fmt::Display for HandshakeFailed {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for HandshakeFailed {}

/// One line for a failed handshake with `host`: what was wrong (the
/// certificate, or the server's TLS) and what to do.
pub fn handshake_error(host: &str, e: io::Error) -> io::Error {
    let rustls_error = e
        .get_ref()
        .and_then(|inner| inner.downcast_ref::<rustls::Error>());
    let line = match rustls_error {
        Some(err) => handshake_line(host, err),
        None if e.kind() == io::ErrorKind::UnexpectedEof => format!(
            "TLS handshake with {host} failed: the server closed the connection; does it serve https on this port? (use http:// if it serves plain HTTP)"
        ),
        None => return io::Error::new(e.kind(), format!("TLS handshake with {host} failed: {e}")),
    };
    io::Error::new(io::ErrorKind::InvalidData, HandshakeFailed(line))
}

/// The line for a handshake error that rustls reported.
fn handshake_line(host: &str, err: &rustls::Error) -> String {
    if let Some(refusal) = tls_verify::refusal(err) {
        return format!("TLS: the certificate of {host} was rejected: {refusal}");
    }
    let hint = match err {
        rustls::Error::InvalidCertificate(_) => "check the server's certificate, or --insecure to skip verification",
        rustls::Error::InvalidMessage(_) | rustls::Error::InappropriateMessage { .. } => {
            "the server does not answer in TLS on this port; use http:// if it serves plain HTTP"
        }
        rustls::Error::PeerIncompatible(_)
        | rustls::Error::AlertReceived(
            AlertDescription::HandshakeFailure | AlertDescription::ProtocolVersion,
        ) => "the server and kneecap share no TLS version or cipher suite (kneecap speaks TLS 1.2 and 1.3 with modern suites)",
        rustls::Error::AlertReceived(AlertDescription::NoApplicationProtocol) => {
            "the server does not offer HTTP/1.1 over TLS (ALPN), the only protocol kneecap speaks"
        }
        rustls::Error::AlertReceived(AlertDescription::CertificateRequired) => {
            "the server asks for a client certificate, which kneecap does not send"
        }
        rustls::Error::NoApplicationProtocol => {
            "the server chose an application protocol other than HTTP/1.1 (ALPN), the only one kneecap speaks"
        }
        _ => "check that the server serves https on this port",
    };
    format!("TLS handshake with {host} failed: {err}; {hint}")
}

/// `--ca-cert` and `--insecure` as given.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    pub ca_cert: Option<std::path::PathBuf>,
    pub insecure: bool,
}
