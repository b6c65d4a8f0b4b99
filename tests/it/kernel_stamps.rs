//! Kernel receive timestamps under a starved client runtime: busy tasks hog
//! the one worker thread the requests run on, so every read waits for its
//! turn. The test server (on a runtime and thread of its own) records when
//! it received each request and wrote each event: its TTFT is the truth.
//! Kernel-stamped TTFT must stay close to it while task-stamped TTFT (what
//! the same reads would give stamped on the task) drifts by the wait, and
//! the scheduling delay the self-check reports must show that wait.
//!
//! Tolerances are wide on purpose (a noisy shared 2-core machine): medians,
//! not tails, and the busy slices (4 ms each, two tasks) make the drift
//! several times the 1 ms bound the kernel stamps are held to.

use crate::common;

use kneecap::client::http::{ClientConfig, HttpClient};
use kneecap::client::openai::{Api, BodyOptions};
use kneecap::metrics::health::generator_health;
use kneecap::metrics::stats::stamps::StampStats;
use kneecap::metrics::stats::Distribution;
use kneecap::metrics::{RequestRecord, StampSource};
use kneecap::workload::{Prompt, RequestSpec};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

const REQUESTS: usize = 24;
/// Each busy task spins this long between yields.
const BUSY_SLICE: Duration = Duration::from_millis(4);

/// The test server on its own thread and runtime, so the busy client
/// runtime does not delay its stamps.
fn server_thread(b: common::Behaviour) -> common::TestServer {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            let server = common::start(b).await;
            tx.send((server.addr, server.truths.clone())).unwrap();
            std::future::pending::<()>().await;
        });
    });
    let (addr, truths) = rx.recv().unwrap();
    common::TestServer { addr, truths }
}

fn client(url: &str, kernel_stamps: bool) -> HttpClient {
    HttpClient::new(ClientConfig {
        base_url: url.into(),
        endpoint: "/v1/completions".into(),
        api: Api::Completions,
        body: BodyOptions {
            model: "test-model".into(),
            ..BodyOptions::default()
        },
        headers: vec![],
        api_key: None,
        request_timeout: Duration::from_secs(10),
        connect_timeout: Duration::from_secs(5),
        keep_text: false,
        tls: Default::default(),
        proxies: Default::default(),
        kernel_stamps,
    })
    .unwrap()
}

/// Send `REQUESTS` requests one after another (one keep-alive connection)
/// on a current-thread runtime shared with `busy` spinning tasks.
fn run_starved(url: &str, kernel_stamps: bool, busy: usize, prefix: &str) -> Vec<RequestRecord> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let client = client(url, kernel_stamps);
    let prefix = prefix.to_string();
    rt.block_on(async move {
        let stop = Arc::new(AtomicBool::new(false));
        for _ in 0..busy {
            let stop = stop.clone();
            tokio::spawn(async move {
                while !stop.load(Ordering::Relaxed) {
                    let t = Instant::now();
                    while t.elapsed() < BUSY_SLICE {
                        std::hint::spin_loop();
                    }
                    tokio::task::yield_now().await;
                }
            });
        }
        let spec = RequestSpec {
            index: 0,
            prompt: Prompt::Text("hi".into()),
            prompt_len: 1,
            output_len: 3,
        };
        let t0 = Instant::now();
        let mut records = Vec::new();
        for i in 0..REQUESTS {
            let mut rec = RequestRecord {
                index: i,
                ..Default::default()
            };
            client
                .stream(&spec, &format!("{prefix}{i}"), t0, &mut rec)
                .await;
            records.push(rec);
        }
        stop.store(true, Ordering::Relaxed);
        records
    })
}

/// Per request (by id `prefix<i>`): the server's own TTFT, ms.
fn server_ttfts(server: &common::TestServer, prefix: &str) -> Vec<f64> {
    let truths = server.truths.lock().unwrap();
    (0..REQUESTS)
        .map(|i| {
            let t = truths
                .iter()
                .find(|t| t.request_id == format!("{prefix}{i}"))
                .expect("the server saw every request");
            (t.event_times[0] - t.received) * 1e3
        })
        .collect()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1e3
}

fn median(v: Vec<f64>) -> f64 {
    common::server_log::median(v)
}

#[test]
fn kernel_stamps_hold_the_servers_ttft_while_task_stamps_drift() {
    // Events 40 ms apart: longer than any wait the busy tasks cause, so a
    // read never carries two events (which would share the later stamp).
    let server = server_thread(common::Behaviour {
        ttft: Duration::from_millis(20),
        per_token: Duration::from_millis(40),
        ..Default::default()
    });
    let records = run_starved(&server.url(), true, 2, "k-");
    for r in &records {
        assert_eq!(r.error, None, "request {}", r.index);
    }
    if !cfg!(target_os = "linux") {
        assert!(records.iter().all(|r| r.stamp == StampSource::Task));
        return;
    }
    let truth = server_ttfts(&server, "k-");
    // The host turns stamping on a moment after the first socket asks: the
    // first request may still be task-stamped; the rest must not be.
    let kernel: Vec<usize> = (1..REQUESTS)
        .filter(|&i| records[i].stamp == StampSource::Kernel)
        .collect();
    assert_eq!(kernel.len(), REQUESTS - 1, "kernel-stamped: {kernel:?}");
    let kernel_err: Vec<f64> = kernel
        .iter()
        .map(|&i| ms(records[i].ttft().unwrap()) - truth[i])
        .collect();
    let task_err: Vec<f64> = kernel
        .iter()
        .map(|&i| ms(records[i].ttft_task_stamped().unwrap()) - truth[i])
        .collect();
    let (k50, t50) = (median(kernel_err.clone()), median(task_err.clone()));
    eprintln!("TTFT minus the server's, median: kernel {k50:.3} ms, task {t50:.3} ms");
    eprintln!("kernel: {kernel_err:.2?}\ntask: {task_err:.2?}");
    assert!(k50.abs() <= 1.0, "kernel-stamped TTFT off by {k50:.3} ms");
    assert!(
        t50 >= k50 + 1.0,
        "task stamps should drift with the busy tasks: {t50:.3} vs {k50:.3} ms"
    );

    // The self-check's view: the scheduling delay is reported, and over the
    // 1 ms bound (at this rate) it is a warning.
    let stats = StampStats::of(&records, &[50.0, 99.0]);
    assert_eq!(
        stats.source(),
        if stats.task > 0 { "mixed" } else { "kernel" }
    );
    let delay = &stats.scheduling_delay;
    assert!(delay.median_ms >= 1.0, "scheduling delay {delay:?}");
    let p99 = delay.percentile_ms(99.0);
    let health =
        generator_health(&Distribution::default(), 100.0, None, None).with_scheduling_delay(p99);
    assert_eq!(health.scheduling_delay_p99_ms, p99);
    assert!(
        health
            .warnings
            .iter()
            .any(|w| w.contains("scheduling delay")),
        "{health:?}"
    );
}

#[test]
fn task_stamps_are_the_fallback_and_say_so() {
    let server = server_thread(common::Behaviour {
        ttft: Duration::from_millis(5),
        per_token: Duration::from_millis(5),
        ..Default::default()
    });
    let records = run_starved(&server.url(), false, 0, "t-");
    assert!(records.iter().all(|r| r.is_ok()));
    assert!(records
        .iter()
        .all(|r| r.stamp == StampSource::Task && r.first_token_delay.is_none()));
    let stats = StampStats::of(&records, &[50.0, 99.0]);
    assert_eq!((stats.source(), stats.task), ("task", REQUESTS));
    assert_eq!(stats.scheduling_delay.count, 0);
}
