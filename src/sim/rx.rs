//! When each request reached the simulator's socket: every connection reads
//! through a [`StampedTcp`] (kernel receive stamps, `SO_TIMESTAMPNS`), and
//! an [`RxCell`] shared with the connection's requests keeps the stamp of
//! its latest read. After a handler has read a body, that read delivered
//! the request's last byte (clients do not pipeline), so the cell holds
//! when the whole request was in the kernel: the server-side arrival, free
//! of the simulator's own wait to be scheduled. The trace writes it as
//! `arrival_rx_s` beside the handler's `arrival_s`.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

use crate::rxstamp::{kernel_instant, StampedTcp};

/// The kernel's receive time of a connection's latest read, in nanoseconds
/// since the Unix epoch on the real-time clock; 0 when that read had none.
#[derive(Debug, Clone, Default)]
pub struct RxCell(Arc<AtomicU64>);

impl RxCell {
    fn store(&self, rx: Option<Duration>) {
        let ns = rx.map_or(0, |d| u64::try_from(d.as_nanos()).unwrap_or(0));
        self.0.store(ns, Ordering::Relaxed);
    }

    /// The latest read's kernel receive time as an `Instant`, if it had one.
    pub fn instant(&self) -> Option<Instant> {
        match self.0.load(Ordering::Relaxed) {
            0 => None,
            ns => Some(kernel_instant(
                Duration::from_nanos(ns),
                Instant::now(),
                SystemTime::now(),
            )),
        }
    }
}

/// A connection's socket: reads stamped by the kernel, each stamp published
/// to the connection's [`RxCell`].
#[derive(Debug)]
pub struct RxTap {
    tcp: StampedTcp,
    cell: RxCell,
}

impl RxTap {
    /// Wrap an accepted socket; the cell goes to every request it carries.
    pub fn new(tcp: TcpStream) -> (Self, RxCell) {
        let cell = RxCell::default();
        let tap = RxTap {
            tcp: StampedTcp::new(tcp),
            cell: cell.clone(),
        };
        (tap, cell)
    }
}

impl AsyncRead for RxTap {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        let before = buf.filled().len();
        let polled = Pin::new(&mut this.tcp).poll_read(cx, buf);
        if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
            this.cell.store(this.tcp.last_rx());
        }
        polled
    }
}

impl AsyncWrite for RxTap {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().tcp).poll_write(cx, buf)
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().tcp).poll_shutdown(cx)
    }
}
