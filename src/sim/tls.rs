//! `kneecap sim --tls-cert FILE --tls-key FILE`: serve https with rustls, so
//! the client's TLS path has a server with ground truth (its server log).

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use std::path::Path;
use std::sync::Arc;
use tokio_rustls::TlsAcceptor;

/// The certificate chain and key files of `--tls-cert` / `--tls-key`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SimTls {
    pub cert: std::path::PathBuf,
    pub key: std::path::PathBuf,
}

/// Load the PEM files into an acceptor; errors name the flag and the file.
pub fn acceptor(files: &SimTls) -> anyhow::Result<TlsAcceptor> {
    let certs = read_certs(&files.cert)?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| {
        anyhow::anyhow!(
            "--tls-key {}: no usable PEM private key: {e}",
            files.key.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| anyhow::anyhow!("--tls-cert/--tls-key do not make a usable pair: {e}"))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn read_certs(path: &Path) -> anyhow::Result<Vec<CertificateDer<'static>>> {
    let shown = path.display();
    let certs: Vec<CertificateDer<'static>> = CertificateDer::pem_file_iter(path)
        .map_err(|e| anyhow::anyhow!("--tls-cert {shown}: cannot read it as PEM: {e}"))?
        .collect::<Result<_, _>>()
        .map_err(|e| anyhow::anyhow!("--tls-cert {shown}: not valid PEM: {e}"))?;
    if certs.is_empty() {
        anyhow::bail!("--tls-cert {shown}: holds no PEM certificate");
    }
    Ok(certs)
}
