//! Issue 27's "Explain" check: four simulator configurations, each built to
//! be bound by one resource (batch slots, KV cache, prefill compute, a TPOT
//! SLO), are each named correctly by both explanations of the knee: the
//! predicted one (`kneecap predict`, the engine model's utilisation in
//! virtual time) and the measured one (`kneecap sweep`, the server's gauges
//! at the first failing step).
//!
//! The engine flags are parsed by `kneecap sim`'s own argument path, so the
//! simulator the sweep measures (in this process, on 127.0.0.1:0) and the
//! model `predict` runs are the same. Each sweep is two short steps, one
//! well below the knee (about a third of the predicted knee or less) and one
//! well above it (2–4× the knee), so a loaded machine cannot swap the
//! verdicts; the test checks the predicted knee lies between them. Reached
//! through `--base-url`, the server's batch limit is unknown to the sweep,
//! as for any real server.

use crate::common;

use clap::Parser;
use common::cli::{run, short_steps, strings};
use kneecap::result::explain::{Binding, ExplainSource};
use kneecap::result::sweep::SweepResult;
use kneecap::twin::json::PredictJson;

/// Timing-sensitive: one sweep at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

/// One configuration and what binds it.
struct Case {
    /// `kneecap sim` engine flags on top of the `tiny` preset.
    engine: &'static [&'static str],
    /// Prompt and output tokens of every request.
    lengths: (u32, u32),
    slo: &'static str,
    /// A step well below the knee and one well above it (req/s).
    rates: (f64, f64),
    want: Binding,
}

/// Four slots, cheap steps: the batch is full long before the compute is.
const SLOTS: Case = Case {
    engine: &["--max-num-seqs", "4"],
    lengths: (64, 64),
    slo: "p99_ttft_ms<=500",
    rates: (3.0, 30.0),
    want: Binding::BatchSlots,
};

/// A 4,096-token KV cache for 960-token prompts: four sequences fit, of 32
/// slots.
const KV: Case = Case {
    engine: &["--kv-cache-tokens", "4096", "--max-model-len", "2048"],
    lengths: (960, 64),
    slo: "p99_ttft_ms<=1000",
    rates: (3.0, 30.0),
    want: Binding::KvCache,
};

/// 50 µs per prompt token, one 1,024-token prompt per step: 51 ms of
/// prefill for every request, against a 5 ms step base.
const PREFILL: Case = Case {
    engine: &[
        "--prefill-token-us",
        "50",
        "--max-num-batched-tokens",
        "1024",
        "--kv-cache-tokens",
        "200000",
    ],
    lengths: (1024, 8),
    slo: "p99_ttft_ms<=500",
    rates: (4.0, 36.0),
    want: Binding::PrefillCompute,
};

/// 1 ms per decoding sequence on a 20 ms step, 256 slots: the time per
/// output token passes 35 ms while the server still keeps up.
const TPOT: Case = Case {
    engine: &[
        "--step-base-ms",
        "20",
        "--decode-seq-us",
        "1000",
        "--max-num-seqs",
        "256",
        "--kv-cache-tokens",
        "200000",
    ],
    lengths: (128, 32),
    slo: "p99_tpot_ms<=35",
    rates: (3.0, 20.0),
    want: Binding::DecodeCompute,
};

/// The workload flags both commands take.
fn workload(c: &Case) -> Vec<String> {
    let (input, output) = c.lengths;
    strings(&[
        "--random-input-len",
        &input.to_string(),
        "--random-output-len",
        &output.to_string(),
        "--slo",
        c.slo,
    ])
}

/// `kneecap predict` for the case; its JSON.
async fn predicted(c: &Case, dir: &std::path::Path) -> PredictJson {
    let path = dir.join("predict.json");
    let mut args = strings(&["predict"]);
    args.extend(strings(c.engine));
    args.extend(workload(c));
    args.extend(strings(&[
        "--requests",
        "2000",
        "--warmup",
        "200",
        "--seeds",
        "2",
        "--no-moves",
        "-o",
        path.to_str().unwrap(),
    ]));
    let out = run(args, vec![]).await;
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap()
}

/// The simulator `kneecap sim` would serve with the case's engine flags.
fn sim_config(c: &Case) -> kneecap::sim::SimConfig {
    let mut argv = vec!["kneecap", "sim"];
    argv.extend_from_slice(c.engine);
    let cli = kneecap::cli::Cli::try_parse_from(argv).unwrap();
    let kneecap::cli::Command::Sim(args) = cli.command else {
        unreachable!("parsed as kneecap sim")
    };
    kneecap::cmd::args::sim::sim_options(*args).unwrap().config
}

/// A two-step `kneecap sweep` of the case's simulator; its JSON and stdout.
async fn measured(c: &Case, dir: &std::path::Path) -> (SweepResult, String) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let sim = kneecap::sim::start(sim_config(c), listener).await.unwrap();
    let url = format!("http://{}", sim.addr());
    let path = dir.join("sweep.json");
    let (pass, fail) = c.rates;
    let mut args = strings(&["sweep", "--base-url", &url]);
    args.extend(workload(c));
    args.extend(strings(&[
        "--rates",
        &format!("{pass},{fail}"),
        "-o",
        path.to_str().unwrap(),
    ]));
    // The verdicts are set by the server: a busy machine's dispatch
    // lateness (`predict` runs beside the sweep) must not make a step
    // generator-limited.
    args.extend(short_steps("2s", "1000"));
    let out = run(args, vec![]).await;
    sim.shutdown().await.unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    (result, stdout)
}

async fn check(c: Case) {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    // The prediction spends CPU in virtual time while the sweep waits on
    // the clock: side by side, the case takes the longer of the two.
    let (p, (r, stdout)) = tokio::join!(predicted(&c, dir.path()), measured(&c, dir.path()));
    let knee = p.knee.expect("a single prediction has a knee");
    let (pass, fail) = c.rates;
    assert!(
        pass < knee.low_req_s && knee.high_req_s < fail,
        "the rates straddle the predicted knee {knee:?}"
    );
    let e = knee.explain.expect("a predicted knee is explained");
    assert_eq!(e.binds, c.want, "predicted: {}", e.line);
    assert_eq!(e.source, ExplainSource::Model);

    let k = &r.knee;
    assert_eq!(
        (k.last_pass, k.first_fail),
        (Some(pass), Some(fail)),
        "the sweep brackets the knee: {stdout}"
    );
    let m = k.explain.as_ref().expect("a measured knee is explained");
    assert_eq!(m.binds, c.want, "measured: {}\n{stdout}", m.line);
    assert_eq!(m.source, ExplainSource::Gauges);
    assert_eq!(m.evidence.max_num_seqs, None, "a URL target's limit");
    let line = format!("binds: {}", m.line);
    assert!(
        stdout.lines().any(|l| l == line),
        "the knee block prints {line:?}:\n{stdout}"
    );
    eprintln!("predicted: {}\nmeasured:  {}", e.line, m.line);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_bound_by_its_batch_slots_is_named_so() {
    check(SLOTS).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_bound_by_its_kv_cache_is_named_so() {
    check(KV).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_bound_by_prefill_compute_is_named_so() {
    check(PREFILL).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_server_bound_by_a_tpot_slo_is_named_decode_compute() {
    check(TPOT).await;
}
