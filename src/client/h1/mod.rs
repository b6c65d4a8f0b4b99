//! A lean HTTP/1.1 client for a run's streaming POSTs. The request's own task
//! writes the request and reads the response, stamping each read the moment
//! it returns, before any parsing: no background connection task and no
//! channel between the socket and the SSE parser. Each read also carries the
//! kernel's receive time of its data when the socket gives one
//! ([`crate::rxstamp`]); over TLS, that of the socket read that delivered
//! the record. Idle
//! keep-alive connections wait in a pool. Framing is decoded by the sans-IO
//! [`wire`]; connections come from a [`Dialer`].

pub mod wire;

use super::net::{Conn, Dialer};
use std::io;
use std::ops::ControlFlow;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant, SystemTime};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use wire::{Piece, ResponseDecoder};

/// Read buffer of one exchange. SSE events are a few hundred bytes; a larger
/// burst just takes more reads. Grows only to fit a long response head.
const READ_BUF: usize = 4096;
/// After a non-200 head, each read of the (error) body may wait this long.
const ERROR_BODY_WAIT: Duration = Duration::from_secs(2);

/// What the caller is told, in order: the status, then body bytes each with
/// the time of their read.
#[derive(Debug)]
pub enum Event<'a> {
    Status(u16),
    Data(&'a [u8], Stamp),
}

/// When one read's bytes arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Stamp {
    /// When the read returned on the request's task.
    pub task: Instant,
    /// When the kernel received the read's newest segment, on the same
    /// clock; `None` where the socket gives no receive timestamps.
    pub kernel: Option<Instant>,
}

impl Stamp {
    /// The best arrival time: the kernel's, else the task's.
    pub fn best(&self) -> Instant {
        self.kernel.unwrap_or(self.task)
    }

    /// How long after the kernel the task saw the bytes (zero without a
    /// kernel stamp).
    pub fn delay(&self) -> Duration {
        self.kernel
            .map_or(Duration::ZERO, |k| self.task.saturating_duration_since(k))
    }
}

/// Why an exchange failed.
#[derive(Debug)]
pub enum H1Error {
    /// No connection could be opened.
    Connect(io::Error),
    /// The connection failed or closed while writing or reading.
    Io(io::Error),
    /// The server broke HTTP/1.1 framing.
    Wire(wire::WireError),
}

impl std::fmt::Display for H1Error {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            H1Error::Connect(e) => write!(f, "cannot connect: {e}"),
            H1Error::Io(e) => write!(f, "connection error: {e}"),
            H1Error::Wire(e) => write!(f, "malformed HTTP response: {e}"),
        }
    }
}

/// A keep-alive HTTP/1.1 client bound to one server and one endpoint.
pub struct H1Client {
    /// Opens connections (TCP, proxy tunnel, TLS).
    dialer: Arc<Dialer>,
    /// Request line, Host and the run's headers, rendered once.
    prefix: Vec<u8>,
    idle: Mutex<Vec<Conn>>,
}

/// How one attempt ended.
enum Attempt {
    /// Finished; the connection may be reused.
    Done(Option<Conn>),
    /// A reused connection turned out to be closed before any response byte.
    Stale,
}

impl H1Client {
    /// A plain-HTTP client for `authority` (`host:port`, no proxy);
    /// `path` is the endpoint path (and query).
    pub fn new(
        authority: &str,
        path: &str,
        headers: &[(String, String)],
        connect_timeout: Duration,
    ) -> Self {
        let (host, port) = authority
            .rsplit_once(':')
            .and_then(|(h, p)| Some((h, p.parse().ok()?)))
            .unwrap_or((authority, 80));
        let dialer = Dialer::plain(host, port, None, connect_timeout);
        Self::with_dialer(Arc::new(dialer), path, headers)
    }

    /// A client whose connections come from `dialer` (TLS and proxy as it
    /// says); `path` is the endpoint path (and query).
    pub fn with_dialer(dialer: Arc<Dialer>, path: &str, headers: &[(String, String)]) -> Self {
        let target = dialer.request_target(path);
        let mut all = headers.to_vec();
        if let Some(auth) = dialer.proxy_authorization() {
            all.push(("proxy-authorization".into(), auth));
        }
        H1Client {
            prefix: wire::request_prefix(&target, &dialer.authority(), &all),
            dialer,
            idle: Mutex::new(Vec::new()),
        }
    }

    /// Send one POST and report its response through `on`, which may stop
    /// the exchange early by returning `Break` (the connection is then dropped).
    pub async fn post<F>(&self, request_id: &str, body: &[u8], mut on: F) -> Result<(), H1Error>
    where
        F: FnMut(Event<'_>) -> ControlFlow<()>,
    {
        let request = wire::request_bytes(&self.prefix, request_id, body);
        if let Some(conn) = self.take_idle() {
            if let Attempt::Done(reusable) = exchange(conn, &request, true, &mut on).await? {
                self.put_idle(reusable);
                return Ok(());
            }
        }
        let conn = self.connect().await?;
        match exchange(conn, &request, false, &mut on).await? {
            Attempt::Done(reusable) => {
                self.put_idle(reusable);
                Ok(())
            }
            // Only a reused connection is called stale; a fresh one fails.
            Attempt::Stale => Err(closed("before a response head")),
        }
    }

    async fn connect(&self) -> Result<Conn, H1Error> {
        self.dialer.connect().await.map_err(H1Error::Connect)
    }

    /// The most recently used idle connection the server has not closed.
    /// Some servers (llama.cpp's) close after each response while saying
    /// keep-alive; a close that lands after this check is caught by the
    /// stale-connection retry in [`H1Client::post`]. Over TLS the probe
    /// reads the socket under the session: any byte there (a close_notify)
    /// makes the connection unusable just the same.
    fn take_idle(&self) -> Option<Conn> {
        let mut idle = self.idle.lock().ok()?;
        while let Some(conn) = idle.pop() {
            let mut probe = [0u8; 1];
            match conn.tcp().try_read(&mut probe) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => return Some(conn),
                // EOF, stray bytes or an error: not usable.
                _ => {}
            }
        }
        None
    }

    fn put_idle(&self, conn: Option<Conn>) {
        if let (Some(conn), Ok(mut idle)) = (conn, self.idle.lock()) {
            idle.push(conn);
        }
    }
}

/// Write the request and read the whole response on `conn`.
async fn exchange<F>(
    mut conn: Conn,
    request: &[u8],
    reused: bool,
    on: &mut F,
) -> Result<Attempt, H1Error>
where
    F: FnMut(Event<'_>) -> ControlFlow<()>,
{
    // flush: TLS may hold the last record back; a no-op on plain TCP.
    if let Err(e) = write_request(&mut conn, request).await {
        return stale_or(reused, H1Error::Io(e));
    }
    let mut dec = ResponseDecoder::new();
    let mut buf = vec![0u8; READ_BUF];
    let (mut filled, mut seen_bytes) = (0usize, false);
    let mut head = HeadSeen {
        ok_status: true,
        keep_alive: false,
    };
    loop {
        make_room(&mut buf, filled)?;
        let Some((n, at)) = read_stamped(&mut conn, &mut buf[filled..], head.ok_status).await
        else {
            return Ok(Attempt::Done(None));
        };
        let n = match n {
            Ok(n) => n,
            Err(e) if !seen_bytes => return stale_or(reused, H1Error::Io(e)),
            Err(e) => return Err(H1Error::Io(e)),
        };
        if n == 0 {
            return closed_early(&mut dec, seen_bytes, reused);
        }
        seen_bytes = true;
        filled += n;
        let ControlFlow::Continue(pos) = feed(&mut dec, &buf[..filled], at, &mut head, on)? else {
            return Ok(Attempt::Done(None));
        };
        if dec.is_done() {
            // Bytes past the response end mean the connection is out of step.
            let reusable = head.keep_alive && pos == filled;
            return Ok(Attempt::Done(reusable.then_some(conn)));
        }
        buf.copy_within(pos..filled, 0);
        filled -= pos;
    }
}

/// What the response head said, as far as the exchange cares.
struct HeadSeen {
    /// 200 (an error body gets a bounded wait per read).
    ok_status: bool,
    keep_alive: bool,
}

/// Grows a full read buffer (a long response head), up to the head limit.
fn make_room(buf: &mut Vec<u8>, filled: usize) -> Result<(), H1Error> {
    if filled == buf.len() {
        if buf.len() >= wire::MAX_HEAD_BYTES {
            return Err(H1Error::Wire(wire::WireError(
                "response head does not fit the read buffer".into(),
            )));
        }
        buf.resize(buf.len() * 2, 0);
    }
    Ok(())
}

/// One read, stamped the moment it returns (the task's clock and the
/// kernel's receive time). `None` when an error body's read waited past
/// [`ERROR_BODY_WAIT`].
async fn read_stamped(
    conn: &mut Conn,
    buf: &mut [u8],
    ok_status: bool,
) -> Option<(io::Result<usize>, Stamp)> {
    let read = conn.read(buf);
    let n = if ok_status {
        read.await
    } else {
        tokio::time::timeout(ERROR_BODY_WAIT, read).await.ok()?
    };
    let task = Instant::now();
    let kernel = conn
        .last_rx()
        .map(|rx| crate::rxstamp::kernel_instant(rx, task, SystemTime::now()));
    Some((n, Stamp { task, kernel }))
}

/// The server closed the connection: stale before any byte, else the end of
/// a body that runs until close, or a response cut short.
fn closed_early(
    dec: &mut ResponseDecoder,
    seen_bytes: bool,
    reused: bool,
) -> Result<Attempt, H1Error> {
    if !seen_bytes {
        return stale_or(reused, closed("before a response head"));
    }
    match dec.eof() {
        Ok(()) => Ok(Attempt::Done(None)),
        Err(e) => Err(closed(&e.0.replace("connection closed ", ""))),
    }
}

/// Decodes what `bytes` holds and tells `on` each piece (read at `at`).
/// Returns how many bytes were used, or `Break` when `on` stopped.
fn feed<F>(
    dec: &mut ResponseDecoder,
    bytes: &[u8],
    at: Stamp,
    head: &mut HeadSeen,
    on: &mut F,
) -> Result<ControlFlow<(), usize>, H1Error>
where
    F: FnMut(Event<'_>) -> ControlFlow<()>,
{
    let mut pos = 0;
    while !dec.is_done() {
        let (used, piece) = dec.next(&bytes[pos..]).map_err(H1Error::Wire)?;
        pos += used;
        let flow = match piece {
            Piece::NeedMore if used == 0 => break,
            Piece::NeedMore | Piece::End => ControlFlow::Continue(()),
            Piece::Head(h) => {
                head.ok_status = h.status == 200;
                head.keep_alive = h.keep_alive;
                on(Event::Status(h.status))
            }
            Piece::Data(d) => on(Event::Data(d, at)),
        };
        if flow.is_break() {
            return Ok(ControlFlow::Break(()));
        }
    }
    Ok(ControlFlow::Continue(pos))
}

async fn write_request(conn: &mut Conn, request: &[u8]) -> io::Result<()> {
    conn.write_all(request).await?;
    conn.flush().await
}

fn closed(what: &str) -> H1Error {
    H1Error::Io(io::Error::new(
        io::ErrorKind::UnexpectedEof,
        format!("connection closed {what}"),
    ))
}

/// A reused connection that fails before any response byte was probably
/// closed by the server while idle: retry on a fresh one.
fn stale_or(reused: bool, e: H1Error) -> Result<Attempt, H1Error> {
    if reused {
        Ok(Attempt::Stale)
    } else {
        Err(e)
    }
}
