//! Opening connections to the target: TCP, then through an HTTP proxy when
//! the environment names one ([`proxy`]), then TLS for `https://` ([`tls`]).
//! A [`Conn`] is plain TCP or TLS over TCP, both over a [`StampedTcp`]
//! ([`crate::rxstamp`]): every socket read also brings the kernel's receive time,
//! where the platform gives one. Through TLS the stamp is that of the
//! socket read that delivered the record.
//!
//! Proxies: an https target is reached through an HTTP `CONNECT` tunnel; an
//! http target is sent to the proxy as absolute-form requests
//! (`POST http://host:port/path`), as curl and aiohttp do.

pub mod proxy;
pub mod tls;
mod tls_refusal;
mod tls_verify;
mod x509;

use crate::rxstamp::StampedTcp;
use base64::Engine as _;
use proxy::ProxyUrl;
use rustls::pki_types::ServerName;
use std::io;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::client::TlsStream;
use tokio_rustls::TlsConnector;

/// Longest proxy answer to `CONNECT` accepted.
const MAX_CONNECT_REPLY: usize = 16 * 1024;

/// One open connection to the target.
#[derive(Debug)]
pub enum Conn {
    Plain(StampedTcp),
    /// Boxed: a TLS session is a few kilobytes.
    Tls(Box<TlsStream<StampedTcp>>),
}

impl Conn {
    fn stamped(&self) -> &StampedTcp {
        match self {
            Conn::Plain(s) => s,
            Conn::Tls(s) => s.get_ref().0,
        }
    }

    /// The TCP socket underneath.
    pub fn tcp(&self) -> &TcpStream {
        self.stamped().get_ref()
    }

    /// The kernel's receive time of the latest socket read (real-time clock
    /// since the Unix epoch), when the socket gives stamps. Through TLS,
    /// decrypted bytes come from records the latest socket read completed
    /// (rustls reads the socket only when no plaintext is pending).
    pub fn last_rx(&self) -> Option<std::time::Duration> {
        self.stamped().last_rx()
    }
}

impl AsyncRead for Conn {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_read(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_read(cx, buf),
        }
    }
}

impl AsyncWrite for Conn {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_write(cx, buf),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_write(cx, buf),
        }
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_flush(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_flush(cx),
        }
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        match self.get_mut() {
            Conn::Plain(s) => Pin::new(s).poll_shutdown(cx),
            Conn::Tls(s) => Pin::new(s.as_mut()).poll_shutdown(cx),
        }
    }
}

/// How to reach one target: where to connect, whether to tunnel, whether
/// to speak TLS. Built once per run, shared by every request.
pub struct Dialer {
    /// Target host (IPv6 without brackets) and port.
    host: String,
    port: u16,
    tls: Option<(TlsConnector, ServerName<'static>)>,
    proxy: Option<ProxyUrl>,
    connect_timeout: Duration,
    /// Ask the kernel for receive timestamps (on by default).
    kernel_stamps: bool,
}

impl Dialer {
    /// A dialer for `host:port` without TLS; `proxy` from
    /// [`proxy::ProxyEnv::proxy_for`].
    pub fn plain(
        host: &str,
        port: u16,
        proxy: Option<ProxyUrl>,
        connect_timeout: Duration,
    ) -> Self {
        Dialer {
            host: host
                .trim_start_matches('[')
                .trim_end_matches(']')
                .to_string(),
            port,
            tls: None,
            proxy,
            connect_timeout,
            kernel_stamps: true,
        }
    }

    /// Off: reads are stamped on the task only (`--rx-timestamps task`).
    pub fn set_kernel_stamps(&mut self, on: bool) {
        self.kernel_stamps = on;
    }

    /// A dialer for `host:port` speaking TLS with `config`; SNI is `host`.
    pub fn tls(
        host: &str,
        port: u16,
        config: Arc<rustls::ClientConfig>,
        proxy: Option<ProxyUrl>,
        connect_timeout: Duration,
    ) -> Result<Self, String> {
        let mut dialer = Self::plain(host, port, proxy, connect_timeout);
        let name = ServerName::try_from(dialer.host.clone())
            .map_err(|e| format!("'{}' cannot be a TLS server name: {e}", dialer.host))?;
        dialer.tls = Some((TlsConnector::from(config), name));
        Ok(dialer)
    }

    /// `host:port` as the `Host` header and `CONNECT` target write it.
    pub fn authority(&self) -> String {
        if self.host.contains(':') {
            format!("[{}]:{}", self.host, self.port)
        } else {
            format!("{}:{}", self.host, self.port)
        }
    }

    /// True when requests go to a proxy in absolute form (http via proxy).
    pub fn absolute_form(&self) -> bool {
        self.proxy.is_some() && self.tls.is_none()
    }

    /// The request target for `path`: itself, or `http://authority/path`
    /// when an http proxy forwards it.
    pub fn request_target(&self, path: &str) -> String {
        if self.absolute_form() {
            format!("http://{}{path}", self.authority())
        } else {
            path.to_string()
        }
    }

    /// `Proxy-Authorization` for absolute-form requests, when the proxy URL
    /// carries credentials.
    pub fn proxy_authorization(&self) -> Option<String> {
        if !self.absolute_form() {
            return None;
        }
        self.proxy.as_ref().and_then(basic_auth)
    }

    /// The proxy in use (for messages).
    pub fn proxy(&self) -> Option<&ProxyUrl> {
        self.proxy.as_ref()
    }

    /// Open a connection (TCP, tunnel, TLS handshake), all within the
    /// connect timeout.
    pub async fn connect(&self) -> io::Result<Conn> {
        tokio::time::timeout(self.connect_timeout, self.open())
            .await
            .map_err(|_| {
                io::Error::new(
                    io::ErrorKind::TimedOut,
                    format!("no connection within {:?}", self.connect_timeout),
                )
            })?
    }

    async fn open(&self) -> io::Result<Conn> {
        let tcp = match &self.proxy {
            None => TcpStream::connect((self.host.as_str(), self.port)).await?,
            Some(p) => TcpStream::connect((p.host.as_str(), p.port))
                .await
                .map_err(|e| {
                    with_context(e, &format!("proxy {}:{} (from {})", p.host, p.port, p.var))
                })?,
        };
        tcp.set_nodelay(true)?;
        let Some((connector, name)) = &self.tls else {
            return Ok(Conn::Plain(StampedTcp::with_kernel_stamps(
                tcp,
                self.kernel_stamps,
            )));
        };
        let mut tcp = tcp;
        if let Some(p) = &self.proxy {
            tunnel(&mut tcp, p, &self.authority()).await?;
        }
        let tcp = StampedTcp::with_kernel_stamps(tcp, self.kernel_stamps);
        let tls = connector
            .connect(name.clone(), tcp)
            .await
            .map_err(|e| tls::handshake_error(&self.host, e))?;
        Ok(Conn::Tls(Box::new(tls)))
    }
}

/// `CONNECT authority` through the proxy; Ok once it answers 2xx.
async fn tunnel(tcp: &mut TcpStream, p: &ProxyUrl, authority: &str) -> io::Result<()> {
    let mut req = format!("CONNECT {authority} HTTP/1.1\r\nHost: {authority}\r\n");
    if let Some(auth) = basic_auth(p) {
        req.push_str(&format!("Proxy-Authorization: {auth}\r\n"));
    }
    req.push_str("\r\n");
    tcp.write_all(req.as_bytes()).await?;
    let proxy_name = format!("proxy {}:{} (from {})", p.host, p.port, p.var);
    // Read byte by byte up to the blank line: nothing after the reply head
    // may be consumed (the TLS handshake follows on the same socket).
    let mut head = Vec::with_capacity(256);
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() >= MAX_CONNECT_REPLY || tcp.read(&mut byte).await? == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!(
                    "{proxy_name} closed the connection instead of answering CONNECT {authority}"
                ),
            ));
        }
        head.push(byte[0]);
    }
    let mut headers = [httparse::EMPTY_HEADER; 32];
    let mut reply = httparse::Response::new(&mut headers);
    let status = match reply.parse(&head) {
        Ok(httparse::Status::Complete(_)) => reply.code.unwrap_or(0),
        _ => 0,
    };
    if (200..300).contains(&status) {
        return Ok(());
    }
    let reason = reply.reason.unwrap_or("");
    Err(io::Error::new(
        io::ErrorKind::ConnectionRefused,
        format!("{proxy_name} refused CONNECT {authority}: HTTP {status} {reason}; check the proxy or exempt the host in NO_PROXY"),
    ))
}

/// `Basic base64(user:password)` from the proxy URL, percent-decoded.
fn basic_auth(p: &ProxyUrl) -> Option<String> {
    let userinfo = p.userinfo.as_deref()?;
    let decoded = percent_decode(userinfo);
    Some(format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(decoded)
    ))
}

fn percent_decode(s: &str) -> Vec<u8> {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = bytes
            .get(i + 1..i + 3)
            .and_then(|h| std::str::from_utf8(h).ok());
        match (bytes[i], hex.and_then(|h| u8::from_str_radix(h, 16).ok())) {
            (b'%', Some(v)) => {
                out.push(v);
                i += 3;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    out
}

fn with_context(e: io::Error, what: &str) -> io::Error {
    io::Error::new(e.kind(), format!("{what}: {e}"))
}

/// The one-line message of a failed TLS handshake (a refused certificate,
/// a server that does not speak TLS...) somewhere in `err`'s chain, if that
/// is why it failed.
pub fn handshake_failure(err: &anyhow::Error) -> Option<String> {
    err.chain().find_map(|cause| {
        let io = cause.downcast_ref::<io::Error>()?;
        let inner = io.get_ref()?.downcast_ref::<tls::HandshakeFailed>()?;
        Some(inner.0.clone())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn basic_auth_decodes_percent_escapes() {
        let p = ProxyUrl {
            host: "p".into(),
            port: 1,
            userinfo: Some("user:p%40ss%zz".into()),
            var: "HTTPS_PROXY",
        };
        let expected = base64::engine::general_purpose::STANDARD.encode("user:p@ss%zz");
        assert_eq!(basic_auth(&p), Some(format!("Basic {expected}")));
    }

    #[test]
    fn http_through_a_proxy_uses_absolute_form() {
        let proxy = ProxyUrl {
            host: "p".into(),
            port: 3128,
            userinfo: Some("u:p".into()),
            var: "HTTP_PROXY",
        };
        let d = Dialer::plain("::1", 8000, Some(proxy), Duration::from_secs(1));
        assert_eq!(d.request_target("/v1/x"), "http://[::1]:8000/v1/x");
        assert!(d.proxy_authorization().unwrap().starts_with("Basic "));
        let direct = Dialer::plain("h", 80, None, Duration::from_secs(1));
        assert_eq!(direct.request_target("/v1/x"), "/v1/x");
        assert_eq!(direct.proxy_authorization(), None);
    }
}
