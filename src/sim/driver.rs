//! The real-time driver: a dedicated OS thread that runs the [`Engine`] on the
//! wall clock and hands each request's events to its connection task.
//!
//! Owns the batch-step clock. A batch step computed at model time `t` with duration `d`
//! is *released* at `epoch + t + d`: the thread sleeps with reduced timer slack
//! until ~[`SPIN`] before that instant and then spins (yielding) to it, because
//! millisecond timers are far too coarse for 5 ms steps. The next step starts
//! at model time `t + d` (not at the wake-up time), so the model's timing is
//! kept exactly and any scheduling delay shows up as *step-clock lag*
//! (observed per step in [`SimMetrics::batch_step_lag`]). When the engine runs out of
//! work the clock stops and restarts at the next arrival. Where permitted the
//! thread runs with `SCHED_FIFO` priority 1 ([`try_realtime`]), which is what
//! keeps wake-ups on time when the connection threads saturate the CPUs.
//!
//! Commands come in over a std channel. Each batch step's events go out as *one*
//! batch to the [`dispatch`] task inside the tokio runtime, which forwards
//! them to the per-request channels: one cross-thread wake-up per step instead
//! of one per stream, which is what keeps 2,000 streams cheap on two cores.
//! Sending never blocks the engine. A request whose receiver is gone (client
//! closed) is dropped by the dispatcher and aborted in the engine.

use std::collections::HashMap;
use std::sync::mpsc::{Receiver, RecvTimeoutError, Sender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::mpsc::UnboundedSender;

use super::metrics::SimMetrics;
use super::model::{BatchStep, Engine, EventKind};

/// How long before a step's end the driver stops sleeping and spins.
pub const SPIN: Duration = Duration::from_micros(100);

/// One event for a request's connection task; times are since the epoch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Delivery {
    /// First admitted to the batch, with `cached` prompt tokens served by
    /// the prefix cache.
    Scheduled { at: Duration, cached: u32 },
    /// Preempted back to the waiting queue.
    Preempted,
    /// Speculative decoding: the request's draft of `drafts` tokens in the
    /// coming step, `accepted` of them accepted (before that step's token).
    Drafted { drafts: u32, accepted: u32 },
    /// Output token `index` (1-based) released at `at`; `last` ends the
    /// request. With speculative decoding one step may advance `index` by
    /// more than 1: the tokens after the previous index leave together.
    Token {
        index: u32,
        last: bool,
        at: Duration,
    },
}

/// A request handed to the engine (its channel is registered with the
/// dispatcher first, see [`DispatchMsg::Register`]).
#[derive(Debug, Clone)]
pub struct Submission {
    /// Engine-wide request id.
    pub id: u64,
    /// Prompt length in tokens.
    pub prompt_tokens: u32,
    /// Hashes of the prompt's full KV blocks (for the prefix cache).
    pub prompt_blocks: Vec<u64>,
    /// Exact number of tokens to produce.
    pub output_tokens: u32,
    /// When the request body was fully received (since the epoch).
    pub arrival: Duration,
}

/// A message to the [`dispatch`] task.
#[derive(Debug)]
pub enum DispatchMsg {
    /// Where request `id`'s events go; sent before its [`Command::Submit`],
    /// so it is always ahead of the request's first event in the channel.
    Register(u64, UnboundedSender<Delivery>),
    /// One batch step's events, in order.
    BatchStep(Vec<(u64, Delivery)>),
    /// Request `id` was aborted: drop its channel.
    Forget(u64),
}

/// Forwards each batch step's events to the per-request channels until every sender of
/// `rx` is gone. Requests whose receiver was dropped are aborted in the engine.
pub async fn dispatch(
    mut rx: tokio::sync::mpsc::UnboundedReceiver<DispatchMsg>,
    engine: Sender<Command>,
) {
    let mut conns: HashMap<u64, UnboundedSender<Delivery>> = HashMap::new();
    while let Some(msg) = rx.recv().await {
        match msg {
            DispatchMsg::Register(id, tx) => {
                conns.insert(id, tx);
            }
            DispatchMsg::Forget(id) => {
                conns.remove(&id);
            }
            DispatchMsg::BatchStep(events) => {
                for (id, d) in events {
                    let Some(tx) = conns.get(&id) else {
                        continue;
                    };
                    let closed = tx.send(d).is_err();
                    if closed {
                        let _ = engine.send(Command::Abort(id));
                    }
                    if closed || matches!(d, Delivery::Token { last: true, .. }) {
                        conns.remove(&id);
                    }
                }
            }
        }
    }
}

/// A message to the engine thread.
#[derive(Debug)]
pub enum Command {
    /// Queue a request.
    Submit(Submission),
    /// Drop a request (its client went away).
    Abort(u64),
    /// Forget the cached prefix blocks nobody holds (`POST /reset_prefix_cache`).
    ResetPrefixCache,
    /// Stop the thread; pending requests' channels close.
    Stop,
}

/// The running engine thread.
#[derive(Debug)]
pub struct EngineThread {
    /// Where to send commands.
    pub tx: Sender<Command>,
    thread: JoinHandle<()>,
}

impl EngineThread {
    /// Starts the engine thread running `engine`, publishing into `metrics`.
    /// With `realtime`, the thread asks for `SCHED_FIFO` (see [`try_realtime`]).
    pub fn spawn(
        engine: Engine,
        epoch: Instant,
        metrics: Arc<Mutex<SimMetrics>>,
        out: UnboundedSender<DispatchMsg>,
        realtime: bool,
    ) -> std::io::Result<Self> {
        let (tx, rx) = std::sync::mpsc::channel();
        let thread = std::thread::Builder::new()
            .name("kneecap-sim-engine".into())
            .spawn(move || {
                set_fine_timer_slack();
                let realtime = realtime && try_realtime();
                if let Ok(mut m) = metrics.lock() {
                    m.engine_realtime = realtime;
                }
                Driver {
                    engine,
                    epoch,
                    metrics,
                    out,
                    arrivals: HashMap::new(),
                    realtime,
                }
                .run(&rx);
            })?;
        Ok(Self { tx, thread })
    }

    /// Stops the thread and waits for it (blocking; at most one step).
    pub fn stop(self) {
        let _ = self.tx.send(Command::Stop);
        let _ = self.thread.join();
    }
}

struct Driver {
    engine: Engine,
    epoch: Instant,
    metrics: Arc<Mutex<SimMetrics>>,
    out: UnboundedSender<DispatchMsg>,
    /// Arrival time of every request not yet finished (for server-side TTFT).
    arrivals: HashMap<u64, Duration>,
    /// Whether this thread runs with `SCHED_FIFO`.
    realtime: bool,
}

impl Driver {
    fn run(&mut self, rx: &Receiver<Command>) {
        let mut clock: Option<Duration> = None;
        loop {
            if self.engine.is_idle() {
                clock = None;
                self.publish(&[], None);
                match rx.recv_timeout(Duration::from_secs(1)) {
                    Ok(cmd) => {
                        if !self.apply(cmd) {
                            return;
                        }
                    }
                    Err(RecvTimeoutError::Timeout) => continue,
                    Err(RecvTimeoutError::Disconnected) => return,
                }
            }
            while let Ok(cmd) = rx.try_recv() {
                if !self.apply(cmd) {
                    return;
                }
            }
            let now = clock.unwrap_or_else(|| self.epoch.elapsed());
            match self.engine.step(now) {
                Some(out) if !out.duration.is_zero() => {
                    self.run_batch_step(&out);
                    clock = Some(out.end());
                }
                Some(out) => {
                    self.deliver(&out, None);
                    clock = None;
                }
                None => {
                    // Work that cannot be scheduled yet (should not happen
                    // with validated parameters): do not spin on it.
                    clock = None;
                    std::thread::sleep(Duration::from_millis(1));
                }
            }
        }
    }

    /// Applies a command; returns false on [`Command::Stop`].
    fn apply(&mut self, cmd: Command) -> bool {
        match cmd {
            Command::Submit(s) => {
                self.engine.submit_blocks(
                    s.id,
                    s.prompt_tokens,
                    s.prompt_blocks,
                    s.output_tokens,
                    s.arrival,
                );
                self.arrivals.insert(s.id, s.arrival);
            }
            Command::Abort(id) => {
                self.engine.abort(id);
                self.arrivals.remove(&id);
                let _ = self.out.send(DispatchMsg::Forget(id));
            }
            Command::ResetPrefixCache => self.engine.reset_prefix_cache(),
            Command::Stop => return false,
        }
        true
    }

    /// Releases one batch step's events at its end on the wall clock.
    fn run_batch_step(&mut self, out: &BatchStep) {
        self.meter_gpu(out);
        wait_until(self.epoch + out.end());
        let lag = self.epoch.elapsed().saturating_sub(out.end());
        self.deliver(out, Some(lag.as_secs_f64()));
        if self.realtime && lag > STARVATION_GUARD {
            // Far behind and catching up back to back: as a real-time thread
            // that would starve the connection tasks, so let them run.
            std::thread::sleep(Duration::from_millis(1));
        }
    }

    /// Publishes the metrics after the batch step (`lag`: how late it was
    /// released), then sends its events to the dispatcher as one message:
    /// a client that reads `/metrics` once its last token came sees the
    /// counters of the step that sent it.
    fn deliver(&mut self, out: &BatchStep, lag: Option<f64>) {
        let mut ttfts = Vec::new();
        let mut batch = Vec::with_capacity(out.events.len());
        for ev in &out.events {
            let delivery = match ev.kind {
                EventKind::Scheduled { cached } => Delivery::Scheduled {
                    at: out.start,
                    cached,
                },
                EventKind::Preempted => Delivery::Preempted,
                EventKind::Drafted { drafts, accepted } => Delivery::Drafted { drafts, accepted },
                EventKind::Token { index, last } => {
                    if index == 1 {
                        if let Some(arrival) = self.arrivals.get(&ev.id) {
                            ttfts.push(out.end().saturating_sub(*arrival).as_secs_f64());
                        }
                    }
                    if last {
                        self.arrivals.remove(&ev.id);
                    }
                    Delivery::Token {
                        index,
                        last,
                        at: out.end(),
                    }
                }
            };
            batch.push((ev.id, delivery));
        }
        self.publish(&ttfts, lag);
        if !batch.is_empty() {
            let _ = self.out.send(DispatchMsg::BatchStep(batch));
        }
    }

    /// Starts the GPU gauges' batch step (`--gpu-watts-*`): its occupancy
    /// is the sequences it ran (those still running and those it finished)
    /// over `max_num_seqs`.
    fn meter_gpu(&self, out: &BatchStep) {
        let Ok(mut m) = self.metrics.lock() else {
            return;
        };
        let Some(gpu) = m.gpu.as_mut() else { return };
        let finished = out
            .events
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Token { last: true, .. }))
            .count();
        let seqs = self.engine.n_running() + finished;
        let occupancy = seqs as f64 / f64::from(self.engine.params().max_num_seqs);
        gpu.batch_step(out.start, out.duration, occupancy);
    }

    fn publish(&self, ttfts: &[f64], lag: Option<f64>) {
        let Ok(mut m) = self.metrics.lock() else {
            return;
        };
        m.running = self.engine.n_running();
        m.waiting = self.engine.n_waiting();
        m.kv_usage = self.engine.kv_usage();
        m.counters = self.engine.counters();
        for &t in ttfts {
            m.ttft.observe(t);
        }
        if let Some(lag) = lag {
            m.batch_step_lag.observe(lag);
            m.batch_step_lag_max = m.batch_step_lag_max.max(lag);
        }
    }
}

/// Waits until `deadline`: sleeps until [`SPIN`] before it, then busy-spins
/// (at most `SPIN` of CPU per step: 2% of a 5 ms step).
pub fn wait_until(deadline: Instant) {
    loop {
        let now = Instant::now();
        if now >= deadline {
            return;
        }
        let left = deadline - now;
        if left > SPIN {
            std::thread::sleep(left - SPIN);
        } else {
            std::hint::spin_loop();
        }
    }
}

/// Lowers this thread's timer slack to 1 ns so sleeps wake on time (the
/// default 50 µs slack would add up to 50 µs of lag to every step).
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub fn set_fine_timer_slack() {
    // SAFETY: PR_SET_TIMERSLACK takes an integer argument and only changes
    // the calling thread's timer slack; no memory is passed.
    unsafe {
        libc::prctl(libc::PR_SET_TIMERSLACK, 1 as libc::c_ulong, 0, 0, 0);
    }
}

/// No-op off Linux.
#[cfg(not(target_os = "linux"))]
pub fn set_fine_timer_slack() {}

/// Lag beyond which a real-time engine thread pauses 1 ms between steps.
pub const STARVATION_GUARD: Duration = Duration::from_millis(50);

/// Asks for `SCHED_FIFO` priority 1 for this thread; returns whether it was
/// granted (it needs `CAP_SYS_NICE` or an `RLIMIT_RTPRIO` allowance).
///
/// Why: with the connection threads saturating both cores, a normal thread's
/// timer wake-up waits for a busy thread's time slice: measured p99 step lag
/// 2.5–25 ms with 2,000 streams on 2 cores. As the lowest real-time priority
/// it preempts them on wake-up (p99 ≤ 50 µs, max ~1 ms). The thread sleeps
/// most of every step, so it takes little CPU; [`STARVATION_GUARD`] covers
/// the case where it cannot keep up at all.
#[cfg(target_os = "linux")]
#[allow(unsafe_code)]
pub fn try_realtime() -> bool {
    let param = libc::sched_param { sched_priority: 1 };
    // SAFETY: `param` is a valid `sched_param` that outlives the call; pid 0
    // is the calling thread; the kernel only reads it.
    let rc = unsafe { libc::sched_setscheduler(0, libc::SCHED_FIFO, &param) };
    rc == 0
}

/// Not available off Linux.
#[cfg(not(target_os = "linux"))]
pub fn try_realtime() -> bool {
    false
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wait_until_wakes_within_a_fraction_of_a_millisecond() {
        set_fine_timer_slack();
        let mut lags: Vec<Duration> = (0..21)
            .map(|_| {
                let deadline = Instant::now() + Duration::from_millis(2);
                wait_until(deadline);
                Instant::now() - deadline
            })
            .collect();
        lags.sort();
        // The median, so that other tests sharing the cores cannot make this
        // flaky; typical is a few microseconds.
        assert!(lags[10] < Duration::from_micros(500), "lags {lags:?}");
    }
}
