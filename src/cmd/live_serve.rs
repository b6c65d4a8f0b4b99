//! The live view's two outlets: the HTTP server of `--metrics-listen`
//! (hyper, `GET /metrics`) and the dashboard's drawing thread (crossterm,
//! the alternate screen, no raw mode so Ctrl-C stays a signal).

use crate::live::state::View;
use crate::live::{dashboard, prom, Aggregator};
use bytes::Bytes;
use http_body_util::Full;
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use ratatui::backend::{Backend, CrosstermBackend};
use ratatui::crossterm::{cursor, execute, terminal};
use ratatui::layout::Rect;
use ratatui::{Terminal, TerminalOptions, Viewport};
use std::convert::Infallible;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};
use tokio::net::TcpListener;
use tokio::sync::watch;

/// How often the dashboard is redrawn.
const FRAME_EVERY: Duration = Duration::from_millis(250);
/// Redraw everything this often (stderr lines may have landed on the screen).
const FULL_REDRAW_EVERY: u32 = 20;

/// Bind `addr` and serve the exposition until `stop`; returns the bound
/// address (port 0 picks a free one).
pub async fn serve(
    addr: SocketAddr,
    agg: Arc<Aggregator>,
    origin: Instant,
    mut stop: watch::Receiver<bool>,
) -> std::io::Result<SocketAddr> {
    let listener = TcpListener::bind(addr).await?;
    let bound = listener.local_addr()?;
    tokio::spawn(async move {
        loop {
            let stream = tokio::select! {
                accepted = listener.accept() => match accepted {
                    Ok((stream, _)) => stream,
                    Err(_) => continue,
                },
                _ = stop.changed() => return,
            };
            let agg = agg.clone();
            let svc = service_fn(move |req| {
                let agg = agg.clone();
                async move { Ok::<_, Infallible>(answer(&req, agg, origin).await) }
            });
            tokio::spawn(async move {
                let _ = http1::Builder::new()
                    .serve_connection(TokioIo::new(stream), svc)
                    .await;
            });
        }
    });
    Ok(bound)
}

async fn answer(
    req: &Request<hyper::body::Incoming>,
    agg: Arc<Aggregator>,
    origin: Instant,
) -> Response<Full<Bytes>> {
    let (status, kind, body) = match (req.method(), req.uri().path()) {
        (&Method::GET, "/metrics") => (
            StatusCode::OK,
            prom::CONTENT_TYPE,
            // On a blocking thread: the state's lock may be held by the
            // drawing thread, which runs at the lowest priority.
            tokio::task::spawn_blocking(move || exposition(&agg, origin))
                .await
                .unwrap_or_default(),
        ),
        _ => (
            StatusCode::NOT_FOUND,
            "text/plain",
            "kneecap serves GET /metrics only\n".to_string(),
        ),
    };
    let mut resp = Response::new(Full::new(Bytes::from(body)));
    *resp.status_mut() = status;
    if let Ok(v) = http::HeaderValue::from_str(kind) {
        resp.headers_mut().insert(http::header::CONTENT_TYPE, v);
    }
    resp
}

/// What the next frame shows: the phase's step (a new one wants a full
/// redraw) and the view, from a fresh snapshot.
fn next_frame(agg: &Aggregator, origin: Instant) -> (Option<usize>, View) {
    let now = origin.elapsed();
    // Drawn from the state in place: a copy of a busy step's window (every
    // token gap of the last seconds) would cost more than the frame.
    agg.with(|s| {
        s.prune(now);
        (s.phase.step, s.view(now))
    })
}

/// Redraw everything when the step changes and every few seconds: lines
/// written to stderr (a step's verdict, a warning) may have landed on the screen.
fn full_redraw(n: u32, step: Option<usize>, last: Option<Option<usize>>) -> bool {
    last != Some(step) || n % FULL_REDRAW_EVERY == 0
}

/// Render the exposition from a fresh snapshot.
fn exposition(agg: &Aggregator, origin: Instant) -> String {
    let now = origin.elapsed();
    prom::render(&agg.snapshot(now), now)
}

/// Set while the dashboard holds the terminal, for the exit hook.
static ON_SCREEN: AtomicBool = AtomicBool::new(false);

/// Start the dashboard thread: it draws every frame period until `stop`.
pub fn frames(
    agg: Arc<Aggregator>,
    origin: Instant,
    stop: Arc<AtomicBool>,
) -> anyhow::Result<std::thread::JoinHandle<()>> {
    let thread = std::thread::Builder::new()
        .name("kneecap-dashboard".into())
        .spawn(move || {
            lower_priority();
            if enter().is_err() {
                return;
            }
            let _ = draw_until(&stop, &agg, origin);
            leave();
        })?;
    Ok(thread)
}

/// Give this thread the lowest CPU priority (nice 19), so that on a busy
/// machine drawing waits for the dispatcher and the request tasks, never
/// the other way round. Linux applies nice per thread; best effort.
#[allow(unsafe_code)]
fn lower_priority() {
    #[cfg(target_os = "linux")]
    // SAFETY: gettid and setpriority take and return plain integers and
    // touch no memory of ours; raising nice needs no privilege and only
    // affects the calling thread.
    unsafe {
        let tid = libc::gettid();
        libc::setpriority(libc::PRIO_PROCESS, tid as libc::id_t, 19);
    }
}

/// Draw a frame every period until `stop`. A full redraw clears the screen
/// and starts a fresh terminal (ratatui's own `clear` asks the terminal for
/// the cursor position, which without raw mode would echo the answer).
fn draw_until(stop: &AtomicBool, agg: &Aggregator, origin: Instant) -> std::io::Result<()> {
    let mut term = terminal()?;
    let (mut n, mut last) = (0u32, None);
    while !stop.load(Ordering::Relaxed) {
        let (step, view) = next_frame(agg, origin);
        if full_redraw(n, step, last) {
            execute!(std::io::stdout(), terminal::Clear(terminal::ClearType::All))?;
            term = self::terminal()?;
            last = Some(step);
        }
        term.draw(|f| dashboard::draw(f, &view))?;
        n = n.wrapping_add(1);
        std::thread::park_timeout(FRAME_EVERY);
    }
    Ok(())
}

/// The terminal, full screen; a fixed 100-column frame when the terminal
/// reports no size (some pseudo-terminals start at 0x0).
fn terminal() -> std::io::Result<Terminal<CrosstermBackend<std::io::Stdout>>> {
    let backend = CrosstermBackend::new(std::io::stdout());
    match backend.size() {
        Ok(s) if s.width >= 40 && s.height >= 10 => Terminal::new(backend),
        _ => Terminal::with_options(
            backend,
            TerminalOptions {
                viewport: Viewport::Fixed(Rect::new(0, 0, 100, dashboard::HEIGHT)),
            },
        ),
    }
}

fn enter() -> std::io::Result<()> {
    restore_on_exit();
    execute!(
        std::io::stdout(),
        terminal::EnterAlternateScreen,
        cursor::Hide
    )?;
    ON_SCREEN.store(true, Ordering::SeqCst);
    Ok(())
}

fn leave() {
    if ON_SCREEN.swap(false, Ordering::SeqCst) {
        let _ = execute!(
            std::io::stdout(),
            cursor::Show,
            terminal::LeaveAlternateScreen
        );
    }
}

/// A second Ctrl-C exits the process at once (`main`): give the terminal back
/// then too. `process::exit` runs the C `atexit` handlers.
#[allow(unsafe_code)]
fn restore_on_exit() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    extern "C" fn on_exit() {
        leave();
    }
    ONCE.call_once(|| {
        // SAFETY: registers a plain `extern "C" fn()` with no captured state;
        // it only writes escape sequences to stdout.
        unsafe {
            libc::atexit(on_exit);
        }
    });
}

#[cfg(all(test, target_os = "linux"))]
mod tests {
    /// The nice value of the calling thread, from `/proc/thread-self/stat`
    /// (field 19; the fields after the command name, which may hold spaces).
    fn own_nice() -> i64 {
        let stat = std::fs::read_to_string("/proc/thread-self/stat").unwrap();
        let after_name = &stat[stat.rfind(')').unwrap() + 2..];
        after_name.split(' ').nth(16).unwrap().parse().unwrap()
    }

    #[test]
    fn the_drawing_thread_runs_at_the_lowest_priority_and_only_it() {
        let before = own_nice();
        let drawn = std::thread::spawn(|| {
            super::lower_priority();
            own_nice()
        })
        .join()
        .unwrap();
        assert_eq!(drawn, 19);
        assert_eq!(own_nice(), before, "the caller's own priority is untouched");
    }
}
