//! HTTP client: the only module that talks to the server. Sends one request
//! (streaming, or a pooling API's single JSON answer), stamps the arrival
//! time of every body frame *before* any parsing (the kernel's receive time
//! where the socket gives it, else the task's), and fills in a
//! [`RequestRecord`] (through `super::reader`). Statistics happen elsewhere.

use super::h1::{Event, H1Client, H1Error};
use super::net::proxy::ProxyEnv;
use super::net::tls::TlsOptions;
use super::net::{self, Dialer};
use super::openai::{self, Api, BodyOptions};
use super::reader::StreamReader;
use crate::metrics::{ErrorKind, RequestError, RequestRecord, StampSource};
use crate::workload::RequestSpec;
use anyhow::{Context, Result};
use bytes::Bytes;
use http::header::{HeaderName, HeaderValue, AUTHORIZATION, CONTENT_TYPE};
use http::{HeaderMap, Method, Request, StatusCode, Uri};
use http_body_util::{BodyExt, Full};
use hyper_util::rt::TokioIo;
use std::ops::ControlFlow;
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Everything needed to build requests for one run.
#[derive(Debug, Clone)]
pub struct ClientConfig {
    /// Server root without trailing slash, e.g. `http://127.0.0.1:8000`.
    pub base_url: String,
    pub endpoint: String,
    pub api: Api,
    pub body: BodyOptions,
    pub headers: Vec<(String, String)>,
    pub api_key: Option<String>,
    pub request_timeout: Duration,
    pub connect_timeout: Duration,
    /// Keep generated text (needed for the tokenizer fallback or --save-detailed).
    pub keep_text: bool,
    /// `--ca-cert`, `--insecure` (used for https only).
    pub tls: TlsOptions,
    /// Proxy variables of the environment (empty for the built-in simulator).
    pub proxies: ProxyEnv,
    /// Ask the kernel for receive timestamps (`--rx-timestamps kernel`).
    pub kernel_stamps: bool,
}

/// A keep-alive HTTP/1.1 client bound to one server.
pub struct HttpClient {
    /// Opens every connection (TCP, proxy, TLS); plain GETs use one each.
    dialer: Arc<Dialer>,
    /// The streaming POSTs of the run.
    h1: H1Client,
    cfg: ClientConfig,
    url: Uri,
    headers: HeaderMap,
}

/// Offset of `t` from the run's start.
fn since(t0: Instant, t: Instant) -> Duration {
    t.saturating_duration_since(t0)
}

impl HttpClient {
    /// Build the client; validates the URL and headers.
    pub fn new(cfg: ClientConfig) -> Result<Self> {
        let url: Uri = format!("{}{}", cfg.base_url, cfg.endpoint)
            .parse()
            .with_context(|| format!("'{}{}' is not a valid URL", cfg.base_url, cfg.endpoint))?;
        let headers = build_headers(&cfg)?;
        let dialer = Arc::new(dialer(&url, &cfg)?);
        let h1 = stream_client(dialer.clone(), &url, &headers)?;
        Ok(HttpClient {
            dialer,
            h1,
            cfg,
            url,
            headers,
        })
    }

    /// The request URL (base + endpoint).
    pub fn url(&self) -> &Uri {
        &self.url
    }

    /// Replace the body options (e.g. once the model name is known).
    pub fn set_body_options(&mut self, body: BodyOptions) {
        self.cfg.body = body;
    }

    /// Plain GET of `path` under the base URL, on a connection of its own
    /// (same proxy and TLS as the run); returns status and body.
    pub async fn get(&self, path: &str) -> Result<(u16, Bytes)> {
        self.plain(Method::GET, path).await
    }

    /// Plain POST of `path` with an empty JSON object (vLLM's `/start_profile`).
    pub async fn post_empty(&self, path: &str) -> Result<(u16, Bytes)> {
        self.plain(Method::POST, path).await
    }

    async fn plain(&self, method: Method, path: &str) -> Result<(u16, Bytes)> {
        let base_path = self
            .url
            .path()
            .strip_suffix(&self.cfg.endpoint)
            .unwrap_or("");
        let target = self.dialer.request_target(&format!("{base_path}{path}"));
        let post = method == Method::POST;
        let mut req = Request::builder()
            .method(method)
            .uri(target.as_str())
            .header(http::header::HOST, self.dialer.authority());
        for (k, v) in self.headers.iter() {
            if post || k != CONTENT_TYPE {
                req = req.header(k, v);
            }
        }
        if let Some(auth) = self.dialer.proxy_authorization() {
            req = req.header(http::header::PROXY_AUTHORIZATION, auth);
        }
        let body = if post {
            Bytes::from_static(b"{}")
        } else {
            Bytes::new()
        };
        let req = req.body(Full::new(body))?;
        let fut = async {
            let conn = self.dialer.connect().await?;
            let (mut sender, driver) =
                hyper::client::conn::http1::handshake(TokioIo::new(conn)).await?;
            let driver = tokio::spawn(driver);
            let resp = sender.send_request(req).await?;
            let status = resp.status().as_u16();
            let body = resp.into_body().collect().await?.to_bytes();
            drop(sender);
            driver.abort();
            anyhow::Ok((status, body))
        };
        tokio::time::timeout(self.cfg.connect_timeout.max(Duration::from_secs(5)), fut)
            .await
            .context("timed out")?
    }

    /// Send one streaming request and record what happened into `rec`.
    /// `rec.index`, `due` and `released` are set by the caller; this sets
    /// `sent` and everything observed. Never panics; failures become `rec.error`.
    pub async fn stream(
        &self,
        spec: &RequestSpec,
        request_id: &str,
        t0: Instant,
        rec: &mut RequestRecord,
    ) {
        rec.prompt_len = spec.prompt_len;
        // vLLM counts input sequences for pooling requests only.
        if self.cfg.api.is_pooling() {
            rec.input_sequences = openai::input_sequences(self.cfg.api, &spec.prompt);
        }
        // vLLM's start_time is taken before the body is serialized and sent.
        rec.sent = since(t0, Instant::now());
        let body = openai::request_body_for(
            self.cfg.api,
            &self.cfg.body,
            &spec.prompt,
            spec.output_len,
            rec.index,
        );
        if let Err(e) = HeaderValue::from_str(request_id) {
            let message = format!("request id '{request_id}' is not a valid header value: {e}");
            return fail(rec, ErrorKind::Protocol, None, message);
        }
        let timeout = self.cfg.request_timeout;
        if tokio::time::timeout(timeout, self.exchange(&body, request_id, t0, rec))
            .await
            .is_err()
        {
            fail(
                rec,
                ErrorKind::Timeout,
                None,
                format!("no complete response within --request-timeout {timeout:?}"),
            );
        }
        if let Some(e) = rec.error.as_mut() {
            e.message = self.redact(&e.message);
        }
    }

    /// Replace the API key and every `--header` value in `message` (a server
    /// may echo credentials in its error bodies).
    pub fn redact(&self, message: &str) -> String {
        let secrets = self
            .cfg
            .api_key
            .iter()
            .chain(self.cfg.headers.iter().map(|(_, v)| v));
        let mut out = message.to_string();
        for secret in secrets.filter(|s| s.len() >= 4) {
            out = out.replace(secret.as_str(), "[REDACTED]");
        }
        out
    }

    async fn exchange(&self, body: &[u8], request_id: &str, t0: Instant, rec: &mut RequestRecord) {
        let mut reader = StreamReader::new(self.cfg.keep_text, self.cfg.api);
        let mut status = None;
        let mut error_body = Vec::new();
        let mut failed = None;
        let outcome = self
            .h1
            .post(request_id, body, |event| match event {
                Event::Status(s) => {
                    status = Some(s);
                    ControlFlow::Continue(())
                }
                Event::Data(data, at) if status == Some(200) => {
                    let waiting = rec.first_token.is_none();
                    let fed = reader.feed(data, since(t0, at.best()), rec);
                    if waiting && rec.first_token.is_some() {
                        rec.stamp = at.kernel.map_or(StampSource::Task, |_| StampSource::Kernel);
                        rec.first_token_delay = at.kernel.map(|_| at.delay());
                    }
                    if let Err(e) = fed {
                        failed = Some(e);
                        return ControlFlow::Break(());
                    }
                    ControlFlow::Continue(())
                }
                Event::Data(data, _) => {
                    error_body.extend_from_slice(data);
                    if error_body.len() < 1024 {
                        ControlFlow::Continue(())
                    } else {
                        ControlFlow::Break(())
                    }
                }
            })
            .await;
        if let Some((kind, message)) = failed {
            return fail(rec, kind, None, message);
        }
        if let Err(e) = outcome {
            return fail_exchange(rec, status, e);
        }
        match status {
            Some(200) => {
                if let Err(e) = reader.finish(rec) {
                    fail(rec, e.0, None, e.1);
                }
            }
            Some(s) => http_status_error(rec, s, &error_body),
            None => fail(rec, ErrorKind::Reset, None, "no response".into()),
        }
    }
}

/// How to reach `url`: TLS for https (`--ca-cert`, `--insecure`), and the
/// proxy the environment names for it.
fn dialer(url: &Uri, cfg: &ClientConfig) -> Result<Dialer> {
    let https = match url.scheme_str() {
        Some("http") => false,
        Some("https") => true,
        _ => anyhow::bail!("--base-url: '{url}' must start with http:// or https://"),
    };
    let host = url.host().context("--base-url has no host")?;
    let port = url.port_u16().unwrap_or(if https { 443 } else { 80 });
    let proxy = cfg
        .proxies
        .proxy_for(
            https,
            host.trim_start_matches('[').trim_end_matches(']'),
            port,
        )
        .map_err(anyhow::Error::msg)?
        .cloned();
    let mut dialer = if https {
        let tls = net::tls::client_config(cfg.tls.ca_cert.as_deref(), cfg.tls.insecure)
            .map_err(anyhow::Error::msg)?;
        Dialer::tls(host, port, tls, proxy, cfg.connect_timeout).map_err(anyhow::Error::msg)?
    } else {
        Dialer::plain(host, port, proxy, cfg.connect_timeout)
    };
    dialer.set_kernel_stamps(cfg.kernel_stamps);
    Ok(dialer)
}

/// The streaming client for `url`: its path and the run's headers.
fn stream_client(dialer: Arc<Dialer>, url: &Uri, headers: &HeaderMap) -> Result<H1Client> {
    let path = url.path_and_query().map_or("/", |p| p.as_str());
    let mut rendered = Vec::new();
    for (k, v) in headers {
        let v = v
            .to_str()
            .with_context(|| format!("header {k}: the value is not visible ASCII"))?;
        rendered.push((k.as_str().to_string(), v.to_string()));
    }
    Ok(H1Client::with_dialer(dialer, path, &rendered))
}

/// A failed exchange as a classified record error.
fn fail_exchange(rec: &mut RequestRecord, status: Option<u16>, e: H1Error) {
    let kind = match &e {
        H1Error::Connect(_) => ErrorKind::Connect,
        H1Error::Wire(_) => ErrorKind::Protocol,
        H1Error::Io(_) if rec.first_token.is_some() => ErrorKind::Truncated,
        H1Error::Io(io) => classify_io(io),
    };
    let message = match (&e, status) {
        (H1Error::Connect(io), _) => match crate::client::limits::explain_fd_exhaustion(io) {
            Some(explained) => format!("cannot connect: {explained}"),
            None => e.to_string(),
        },
        (H1Error::Io(_), Some(_)) => format!("stream broke: {e}"),
        _ => e.to_string(),
    };
    fail(rec, kind, status, message);
}

fn http_status_error(rec: &mut RequestRecord, status: u16, body: &[u8]) {
    let kind = if status == 429 {
        ErrorKind::RateLimited
    } else {
        ErrorKind::Status
    };
    let text: String = String::from_utf8_lossy(body).chars().take(200).collect();
    let reason = StatusCode::from_u16(status)
        .ok()
        .and_then(|s| s.canonical_reason())
        .unwrap_or("");
    fail(
        rec,
        kind,
        Some(status),
        format!("HTTP {status} {reason}: {}", text.trim()),
    );
}

fn fail(rec: &mut RequestRecord, kind: ErrorKind, status: Option<u16>, message: String) {
    if rec.error.is_none() {
        rec.error = Some(RequestError {
            kind,
            status,
            message,
        });
    }
}

/// Reset vs anything else, for an I/O error on an open connection.
fn classify_io(e: &std::io::Error) -> ErrorKind {
    use std::io::ErrorKind as K;
    match e.kind() {
        K::ConnectionRefused => ErrorKind::Connect,
        K::TimedOut => ErrorKind::Timeout,
        _ => ErrorKind::Reset,
    }
}

/// Authorization from the API key, then the user's headers (which override it),
/// then content type. `x-request-id` is added per request and wins over all.
fn build_headers(cfg: &ClientConfig) -> Result<HeaderMap> {
    let mut h = HeaderMap::new();
    h.insert(CONTENT_TYPE, HeaderValue::from_static("application/json"));
    if let Some(key) = &cfg.api_key {
        let mut v = HeaderValue::from_str(&format!("Bearer {key}"))
            .context("OPENAI_API_KEY holds characters not allowed in an HTTP header")?;
        v.set_sensitive(true);
        h.insert(AUTHORIZATION, v);
    }
    for (k, v) in &cfg.headers {
        let name = HeaderName::from_bytes(k.as_bytes())
            .with_context(|| format!("--header: '{k}' is not a valid header name"))?;
        let value = HeaderValue::from_str(v).with_context(|| {
            format!("--header {k}: the value holds characters not allowed in a header")
        })?;
        h.insert(name, value);
    }
    Ok(h)
}

#[cfg(test)]
#[path = "http_tests.rs"]
mod tests;
