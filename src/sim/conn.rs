//! The simulator's accept loop and one task per connection: plain HTTP/1.1,
//! or a TLS handshake (within the read timeout) first when `--tls-cert` is
//! set. Shutdown stops accepting and gives open connections [`DRAIN`].
//!
//! When each request arrived: every connection reads through a
//! [`StampedTcp`] (kernel receive stamps, `SO_TIMESTAMPNS`) that publishes
//! each read's stamp to an [`RxCell`], and each request carries that cell.
//! After a handler has read a body, the latest read delivered the request's
//! last byte (clients do not pipeline), so the cell holds when the whole
//! request was in the kernel: the server-side arrival, free of the
//! simulator's own wait to be scheduled (the server log's `arrival_rx_s`).

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::time::Duration;

use http::{Request, Response};
use hyper::body::Incoming;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio::task::JoinSet;
use tokio_rustls::TlsAcceptor;

use super::shared::Shared;
use super::stream::SimBody;
use crate::rxstamp::{RxCell, StampedTcp};

/// How long shutdown waits for in-flight responses before cutting them.
const DRAIN: Duration = Duration::from_secs(2);

/// What answers one request: the server's router.
pub(super) trait Handler:
    Fn(Request<Incoming>, Arc<Shared>) -> Self::Answer + Copy + Send + Sync + 'static
{
    /// The router's future.
    type Answer: Future<Output = Result<Response<SimBody>, Infallible>> + Send + 'static;
}

impl<H, F> Handler for H
where
    H: Fn(Request<Incoming>, Arc<Shared>) -> F + Copy + Send + Sync + 'static,
    F: Future<Output = Result<Response<SimBody>, Infallible>> + Send + 'static,
{
    type Answer = F;
}

/// Accepts connections until `stop`, serving each request with `handle`;
/// then drains the open connections for up to [`DRAIN`].
pub(super) async fn accept_loop(
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    handle: impl Handler,
) {
    let mut conns = JoinSet::new();
    loop {
        tokio::select! {
            _ = stop.changed() => break,
            res = listener.accept() => match res {
                Ok((stream, _)) => {
                    let _ = stream.set_nodelay(true);
                    let (stream, rx) = StampedTcp::publishing(stream);
                    let (shared, stop) = (shared.clone(), stop.clone());
                    match &tls {
                        None => conns.spawn(serve_conn(stream, rx, shared, stop, handle)),
                        Some(tls) => conns.spawn(serve_tls(tls.clone(), stream, rx, shared, stop, handle)),
                    };
                }
                // Out of file descriptors and the like: back off, keep serving.
                Err(_) => tokio::time::sleep(Duration::from_millis(10)).await,
            },
            Some(_) = conns.join_next(), if !conns.is_empty() => {}
        }
    }
    drop(listener);
    let drained =
        tokio::time::timeout(DRAIN, async { while conns.join_next().await.is_some() {} }).await;
    if drained.is_err() {
        conns.shutdown().await;
    }
}

/// The TLS handshake (within the read timeout), then HTTP on top.
async fn serve_tls(
    tls: TlsAcceptor,
    stream: StampedTcp,
    rx: RxCell,
    shared: Arc<Shared>,
    stop: watch::Receiver<bool>,
    handle: impl Handler,
) {
    let read_timeout = shared.cfg.read_timeout;
    if let Ok(Ok(stream)) = tokio::time::timeout(read_timeout, tls.accept(stream)).await {
        serve_conn(stream, rx, shared, stop, handle).await;
    }
}

/// HTTP/1.1 on one connection; each request carries the connection's
/// [`RxCell`] in its extensions.
async fn serve_conn<S>(
    stream: S,
    rx: RxCell,
    shared: Arc<Shared>,
    mut stop: watch::Receiver<bool>,
    handle: impl Handler,
) where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let read_timeout = shared.cfg.read_timeout;
    let svc = service_fn(move |mut req: Request<Incoming>| {
        req.extensions_mut().insert(rx.clone());
        handle(req, shared.clone())
    });
    let conn = http1::Builder::new()
        .timer(TokioTimer::new())
        .header_read_timeout(read_timeout)
        .keep_alive(true)
        .serve_connection(TokioIo::new(stream), svc);
    tokio::pin!(conn);
    tokio::select! {
        _ = conn.as_mut() => return,
        _ = stop.changed() => conn.as_mut().graceful_shutdown(),
    }
    let _ = conn.await;
}
