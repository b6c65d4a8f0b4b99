//! Kernel receive timestamps: a TCP stream whose every read also asks the
//! kernel when the data reached the socket (`SO_TIMESTAMPNS`, read back as a
//! `recvmsg` control message), so that a latency does not include the time
//! the request's task waited to be scheduled.
//!
//! What one stamp means: Linux merges the segments queued on a TCP socket
//! and keeps the newest segment's time, so a read's stamp is when the *last*
//! byte it returns arrived. When a read returns several SSE events (the task
//! was late by more than the gap between them), they all carry that time.
//! Reading one byte at a time or peeking first would not help: the merged
//! segments have one stamp between them. The earliest arrival of such a
//! read is not known, so kneecap keeps the kernel's (an upper bound, exact
//! whenever the task keeps up with the events of its stream).
//!
//! The kernel stamps with `CLOCK_REALTIME`; the run's clock is `Instant`
//! (`CLOCK_MONOTONIC`). Each stamp is mapped by how long ago it was on the
//! real-time clock, read beside the `Instant` the task stamp is taken from
//! ([`kernel_instant`]): an NTP step between two reads moves one stamp, not
//! the run.
//!
//! [`StampedTcp::publishing`] also copies each read's stamp to an
//! [`RxCell`] for code that does not own the stream: the simulator's
//! request handlers, which run under hyper.
//!
//! Sockets that refuse the option, and every build off Linux, read through
//! the plain `TcpStream` and carry no kernel stamp (the caller falls back
//! to the task stamp). So do reads of segments that arrived before Linux
//! turned stamping on for the host: it does so a moment after the first
//! socket asks (a deferred static key), and the run's ready check and
//! warm-ups usually cover that moment.

use std::io;
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::{Duration, Instant, SystemTime};
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;

/// A TCP stream that remembers the kernel's receive time of its last read.
#[derive(Debug)]
pub struct StampedTcp {
    tcp: TcpStream,
    /// `SO_TIMESTAMPNS` is on: reads go through `recvmsg`.
    kernel: bool,
    /// Real-time clock reading (since the Unix epoch) of the last read's
    /// newest segment, when the kernel sent one.
    last: Option<Duration>,
    /// Control-message buffer, reused by every read.
    #[cfg(target_os = "linux")]
    cmsg: Vec<u8>,
    /// Where every read's stamp is also published, for code that does not
    /// own the stream (a server's request handler under hyper).
    publish: Option<RxCell>,
}

/// A shared copy of a stream's latest read stamp: the kernel's receive time
/// in nanoseconds since the Unix epoch on the real-time clock, 0 when that
/// read had none.
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

impl StampedTcp {
    /// Wrap `tcp`, asking the kernel for receive timestamps when it can.
    pub fn new(tcp: TcpStream) -> Self {
        Self::with_kernel_stamps(tcp, true)
    }

    /// Wrap `tcp` with kernel stamps, each read's stamp also copied to the
    /// returned cell.
    pub fn publishing(tcp: TcpStream) -> (Self, RxCell) {
        let cell = RxCell::default();
        let stream = StampedTcp {
            publish: Some(cell.clone()),
            ..Self::new(tcp)
        };
        (stream, cell)
    }

    /// Wrap `tcp`; `want` false keeps it on plain reads (task stamps only).
    pub fn with_kernel_stamps(tcp: TcpStream, want: bool) -> Self {
        let kernel = want && sys::enable(&tcp);
        StampedTcp {
            tcp,
            kernel,
            last: None,
            #[cfg(target_os = "linux")]
            cmsg: sys::cmsg_buffer(),
            publish: None,
        }
    }

    /// The socket underneath.
    pub fn get_ref(&self) -> &TcpStream {
        &self.tcp
    }

    /// True when reads ask the kernel for their receive time.
    pub fn kernel_stamps(&self) -> bool {
        self.kernel
    }

    /// The kernel's receive time of the last read (real-time clock since the
    /// Unix epoch), if it gave one.
    pub fn last_rx(&self) -> Option<Duration> {
        self.last
    }
}

/// The `Instant` of a kernel stamp `rx` (real-time clock since the Unix
/// epoch), given the `Instant` and real-time clock read together just after
/// the read (`now`, `now_real`): `now` minus how long ago `rx` was. A stamp
/// from the future (the real-time clock stepped back) maps to `now`. Pure.
pub fn kernel_instant(rx: Duration, now: Instant, now_real: SystemTime) -> Instant {
    let now_real = now_real
        .duration_since(SystemTime::UNIX_EPOCH)
        .unwrap_or_default();
    let ago = now_real.saturating_sub(rx);
    now.checked_sub(ago).unwrap_or(now)
}

impl AsyncRead for StampedTcp {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        let this = self.get_mut();
        if !this.kernel {
            return Pin::new(&mut this.tcp).poll_read(cx, buf);
        }
        let before = buf.filled().len();
        let polled = sys::poll_read_stamped(this, cx, buf);
        if let Some(cell) = &this.publish {
            if matches!(polled, Poll::Ready(Ok(()))) && buf.filled().len() > before {
                cell.store(this.last);
            }
        }
        polled
    }
}

impl AsyncWrite for StampedTcp {
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

#[cfg(target_os = "linux")]
mod sys {
    //! `SO_TIMESTAMPNS` and `recvmsg` through nix's safe wrappers.
    use super::StampedTcp;
    use nix::sys::socket::{recvmsg, setsockopt, sockopt, ControlMessageOwned, MsgFlags};
    use nix::sys::time::TimeSpec;
    use std::io::{self, IoSliceMut};
    use std::os::fd::AsRawFd;
    use std::task::{ready, Context, Poll};
    use std::time::Duration;
    use tokio::io::{Interest, ReadBuf};

    pub fn enable(tcp: &tokio::net::TcpStream) -> bool {
        setsockopt(tcp, sockopt::ReceiveTimestampns, &true).is_ok()
    }

    pub fn cmsg_buffer() -> Vec<u8> {
        nix::cmsg_space!(TimeSpec)
    }

    /// One `recvmsg` into `buf`: the bytes read and the stamp, if any.
    fn recv(fd: i32, buf: &mut [u8], cmsg: &mut [u8]) -> io::Result<(usize, Option<Duration>)> {
        let mut iov = [IoSliceMut::new(buf)];
        let msg = recvmsg::<()>(fd, &mut iov, Some(cmsg), MsgFlags::MSG_DONTWAIT)
            .map_err(io::Error::from)?;
        let mut stamp = None;
        // A truncated control buffer (never expected: one timespec fits)
        // just means no stamp for this read.
        if let Ok(cmsgs) = msg.cmsgs() {
            for c in cmsgs {
                if let ControlMessageOwned::ScmTimestampns(ts) = c {
                    let (s, ns) = (ts.tv_sec(), ts.tv_nsec());
                    if s >= 0 && ns >= 0 {
                        stamp = Some(Duration::new(s as u64, ns as u32));
                    }
                }
            }
        }
        Ok((msg.bytes, stamp))
    }

    pub fn poll_read_stamped(
        this: &mut StampedTcp,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        loop {
            ready!(this.tcp.poll_read_ready(cx))?;
            let fd = this.tcp.as_raw_fd();
            let cmsg = &mut this.cmsg;
            let unfilled = buf.initialize_unfilled();
            // try_io clears the readiness on WouldBlock; poll again then.
            match this
                .tcp
                .try_io(Interest::READABLE, || recv(fd, unfilled, cmsg))
            {
                Ok((n, stamp)) => {
                    buf.advance(n);
                    if n > 0 {
                        this.last = stamp;
                    }
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

#[cfg(not(target_os = "linux"))]
mod sys {
    //! No kernel stamps off Linux: reads stay plain.
    use super::StampedTcp;
    use std::io;
    use std::task::{Context, Poll};
    use tokio::io::ReadBuf;

    pub fn enable(_tcp: &tokio::net::TcpStream) -> bool {
        false
    }

    pub fn poll_read_stamped(
        this: &mut StampedTcp,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        tokio::io::AsyncRead::poll_read(std::pin::Pin::new(&mut this.tcp), cx, buf)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A connected loopback pair: (client side, server side).
    async fn pair() -> (TcpStream, TcpStream) {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let client = TcpStream::connect(listener.local_addr().unwrap())
            .await
            .unwrap();
        let (server, _) = listener.accept().await.unwrap();
        (client, server)
    }

    #[test]
    fn a_stamp_maps_to_now_minus_how_long_ago_it_was() {
        let now = Instant::now();
        let real = SystemTime::UNIX_EPOCH + Duration::from_secs(1_000_000);
        let rx = Duration::from_secs(1_000_000) - Duration::from_micros(1500);
        assert_eq!(
            kernel_instant(rx, now, real),
            now - Duration::from_micros(1500)
        );
        // A stamp ahead of the clock (a step back) is taken as now.
        let ahead = Duration::from_secs(1_000_001);
        assert_eq!(kernel_instant(ahead, now, real), now);
    }

    #[tokio::test]
    async fn reads_carry_the_kernel_time_their_data_arrived() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (client, mut server) = pair().await;
        let mut conn = StampedTcp::new(client);
        let mut buf = [0u8; 16];
        // The kernel turns stamping on for the whole host a moment after the
        // first socket asks (a deferred static key): segments arriving before
        // then carry no stamp. Wait for one that does.
        for _ in 0..100 {
            server.write_all(b"x").await.unwrap();
            assert_eq!(conn.read(&mut buf).await.unwrap(), 1);
            if conn.last_rx().is_some() || !conn.kernel_stamps() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        server.write_all(b"hello").await.unwrap();
        let written = Instant::now();
        // The task reads 30 ms late; the kernel stamp does not move with it.
        tokio::time::sleep(Duration::from_millis(30)).await;
        let n = conn.read(&mut buf).await.unwrap();
        let (now, real) = (Instant::now(), SystemTime::now());
        assert_eq!(&buf[..n], b"hello");
        if !cfg!(target_os = "linux") {
            assert!(!conn.kernel_stamps() && conn.last_rx().is_none());
            return;
        }
        assert!(conn.kernel_stamps());
        let at = kernel_instant(conn.last_rx().expect("a kernel stamp"), now, real);
        let late = now.saturating_duration_since(at);
        assert!(late >= Duration::from_millis(25), "stamp only {late:?} old");
        // Arrival is at most a few ms after the write returned, on any load
        // a test survives; the task stamp is ≥ 30 ms after it.
        assert!(
            at <= written + Duration::from_millis(20),
            "{:?}",
            at - written
        );
    }

    #[tokio::test]
    async fn a_publishing_stream_copies_each_reads_stamp_to_its_cell() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (client, mut server) = pair().await;
        let (mut conn, cell) = StampedTcp::publishing(client);
        assert_eq!(cell.instant(), None, "nothing read yet");
        let mut buf = [0u8; 4];
        // Until the host's stamping is on (see above), reads have no stamp.
        for _ in 0..100 {
            server.write_all(b"x").await.unwrap();
            assert_eq!(conn.read(&mut buf).await.unwrap(), 1);
            // The cell follows every read, with or without a stamp.
            assert_eq!(cell.instant().is_some(), conn.last_rx().is_some());
            if conn.last_rx().is_some() || !conn.kernel_stamps() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if let Some(rx) = conn.last_rx() {
            let (at, now) = (cell.instant().unwrap(), Instant::now());
            let direct = kernel_instant(rx, now, SystemTime::now());
            let apart = at.max(direct) - at.min(direct);
            // Two mappings of one stamp, read a moment apart.
            assert!(apart < Duration::from_millis(5), "{apart:?}");
        }
    }

    #[tokio::test]
    async fn without_the_option_reads_carry_no_stamp() {
        use tokio::io::{AsyncReadExt, AsyncWriteExt};
        let (client, mut server) = pair().await;
        let mut conn = StampedTcp::with_kernel_stamps(client, false);
        server.write_all(b"x").await.unwrap();
        let mut buf = [0u8; 4];
        assert_eq!(conn.read(&mut buf).await.unwrap(), 1);
        assert!(!conn.kernel_stamps());
        assert_eq!(conn.last_rx(), None);
    }
}
