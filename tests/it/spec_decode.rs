//! Speculative decoding against the simulator (`--spec-draft-tokens`,
//! `--spec-acceptance`): what a run and each sweep step report (vLLM's
//! acceptance rate, mean acceptance length, per-position acceptance) equals
//! what the simulator itself counted: its engine counters, its `/metrics`
//! text (read here with a raw GET, not kneecap's scraper) and its server
//! log's per-request drafts (ground truth for each step). And speculation
//! lowers TPOT at light load.

use crate::common;

use common::cli::{run, short_steps, strings};
use kneecap::sim::spec::{SpecCounters, SpecDecode};
use kneecap::sim::SimConfig;
use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};

/// Timing-sensitive: one at a time.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const K: u32 = 4;

/// The `tiny` preset with K = 4 drafts accepted with probability 0.7.
fn speculating() -> SimConfig {
    let mut cfg = SimConfig::from_preset("tiny").unwrap();
    cfg.spec = Some(SpecDecode::new(K, 0.7));
    cfg.seed = 3;
    cfg
}

/// The simulator's `/metrics` body, by a plain HTTP/1.0 GET.
async fn metrics_text(url: &str) -> String {
    let addr = url.trim_start_matches("http://");
    let mut s = tokio::net::TcpStream::connect(addr).await.unwrap();
    s.write_all(b"GET /metrics HTTP/1.0\r\nHost: x\r\n\r\n")
        .await
        .unwrap();
    let mut body = String::new();
    s.read_to_string(&mut body).await.unwrap();
    body
}

/// The value of the sample line starting with `prefix` in a `/metrics` body.
fn sample(text: &str, prefix: &str) -> u64 {
    let line = text
        .lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("{prefix} missing from /metrics"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

/// `after - before` of the simulator's counters, checked against its
/// `/metrics` text `after_text` under vLLM's exact names.
fn delta(before: &SpecCounters, after: &SpecCounters, after_text: &str) -> SpecCounters {
    let name = |n: &str| format!("vllm:spec_decode_{n}_total{{");
    assert_eq!(sample(after_text, &name("num_drafts")), after.drafts);
    assert_eq!(
        sample(after_text, &name("num_draft_tokens")),
        after.draft_tokens
    );
    assert_eq!(
        sample(after_text, &name("num_accepted_tokens")),
        after.accepted_tokens
    );
    let mut d = SpecCounters {
        drafts: after.drafts - before.drafts,
        draft_tokens: after.draft_tokens - before.draft_tokens,
        accepted_tokens: after.accepted_tokens - before.accepted_tokens,
        ..SpecCounters::default()
    };
    for pos in 0..K as usize {
        let line = after_text
            .lines()
            .find(|l| {
                l.starts_with("vllm:spec_decode_num_accepted_tokens_per_pos_total{")
                    && l.contains(&format!("position=\"{pos}\""))
            })
            .unwrap();
        let v: u64 = line.rsplit(' ').next().unwrap().parse().unwrap();
        assert_eq!(v, after.accepted_per_pos[pos]);
        d.accepted_per_pos[pos] = after.accepted_per_pos[pos] - before.accepted_per_pos[pos];
    }
    d
}

/// A reported block (`spec_decode` of a step or a run's `kneecap`) against
/// counts the simulator made: the same integers, and vLLM's rate and length
/// computed from them, to the last bit.
fn check_block(block: &Value, drafts: u64, draft_tokens: u64, accepted: u64, what: &str) {
    assert_eq!(block["source"], "vllm", "{what}: {block}");
    assert_eq!(
        block["num_drafts"].as_u64(),
        Some(drafts),
        "{what}: {block}"
    );
    assert_eq!(
        block["draft_tokens"].as_u64(),
        Some(draft_tokens),
        "{what}: {block}"
    );
    assert_eq!(
        block["accepted_tokens"].as_u64(),
        Some(accepted),
        "{what}: {block}"
    );
    let rate = accepted as f64 / draft_tokens as f64 * 100.0;
    let length = 1.0 + accepted as f64 / drafts as f64;
    assert_eq!(
        block["acceptance_rate"].as_f64(),
        Some(rate),
        "{what}: {block}"
    );
    assert_eq!(
        block["acceptance_length"].as_f64(),
        Some(length),
        "{what}: {block}"
    );
}

/// The server log's request lines with id prefix `prefix`, in arrival order.
fn logged_requests(log: &std::path::Path, prefix: &str) -> Vec<Value> {
    let (mut requests, _) = common::sim::requests(log, prefix);
    requests.sort_by(|a, b| {
        a["arrival_s"]
            .as_f64()
            .unwrap()
            .total_cmp(&b["arrival_s"].as_f64().unwrap())
    });
    requests
}

/// The server log's requests grouped by sweep step ([`common::sim::by_step`]).
fn steps_of(log: &std::path::Path, prefix: &str) -> Vec<Vec<Value>> {
    common::sim::by_step(logged_requests(log, prefix), prefix)
}

/// The sum of a per-request speculation count (absent: the request never drafted).
fn sum(requests: &[Value], field: &str) -> u64 {
    requests
        .iter()
        .map(|r| r[field].as_u64().unwrap_or(0))
        .sum()
}

/// `kneecap run` at a light 20 req/s against `cfg`: the result JSON and stdout.
async fn light_run(
    cfg: SimConfig,
    dir: &std::path::Path,
    prefix: &str,
) -> (Value, String, common::sim::LoggedSim) {
    let sim = common::sim::logged(cfg, dir.join(format!("{prefix}log.jsonl"))).await;
    let path = dir.join(format!("{prefix}run.json"));
    let args = strings(&[
        "run",
        "--base-url",
        &sim.url,
        "--num-prompts",
        "40",
        "--request-rate",
        "20",
        "--random-input-len",
        "64",
        "--random-output-len",
        "48",
        "--request-id-prefix",
        prefix,
        "--disable-tqdm",
        "--save-result",
        "--result-filename",
        path.to_str().unwrap(),
    ]);
    let out = run(args, vec![]).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    assert!(
        out.status.success(),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let result = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    (result, stdout, sim)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_runs_acceptance_equals_the_simulators_own_counters() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let (result, stdout, sim) = light_run(speculating(), dir.path(), "spr-").await;
    let after = sim.handle.metrics().counters.spec;
    // A fresh simulator: its counters started at zero.
    let d = delta(
        &SpecCounters::default(),
        &after,
        &metrics_text(&sim.url).await,
    );
    sim.handle.shutdown().await.unwrap();
    assert!(d.drafts > 0, "the run drafted");
    check_block(
        &result["kneecap"]["spec_decode"],
        d.drafts,
        d.draft_tokens,
        d.accepted_tokens,
        "run",
    );
    // vLLM's own keys, with vLLM's values.
    let k = &result["kneecap"]["spec_decode"];
    for key in [
        "acceptance_rate",
        "acceptance_length",
        "num_drafts",
        "draft_tokens",
        "accepted_tokens",
    ] {
        assert_eq!(result[format!("spec_decode_{key}")], k[key], "{key}");
    }
    let per: Vec<f64> = (0..K as usize)
        .map(|i| d.accepted_per_pos[i] as f64 / d.drafts as f64)
        .collect();
    assert_eq!(
        result["spec_decode_per_position_acceptance_rates"],
        serde_json::json!(per)
    );
    // Every drafted request is in the server log; their counts add up.
    let logged = logged_requests(&sim.log, "spr-");
    assert_eq!(logged.len(), 40);
    assert_eq!(sum(&logged, "spec_drafts"), d.drafts);
    assert_eq!(sum(&logged, "spec_accepted_tokens"), d.accepted_tokens);
    // The console block, in vLLM's layout.
    let length = format!(
        "{:<40} {:<10.2}",
        "Acceptance length:",
        1.0 + d.accepted_tokens as f64 / d.drafts as f64
    );
    assert!(
        stdout.contains("---------------Speculative Decoding---------------"),
        "{stdout}"
    );
    assert!(stdout.contains(&length), "{stdout}");
    assert!(stdout.contains("  Position 3:"), "{stdout}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn speculation_lowers_tpot_at_light_load_and_plain_runs_report_none() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let (spec, _, sim) = light_run(speculating(), dir.path(), "sps-").await;
    sim.handle.shutdown().await.unwrap();
    let (plain, stdout, sim) =
        light_run(SimConfig::from_preset("tiny").unwrap(), dir.path(), "spp-").await;
    let text = metrics_text(&sim.url).await;
    sim.handle.shutdown().await.unwrap();
    assert!(!text.contains("spec_decode"), "no speculation, no counters");
    assert!(plain.get("spec_decode_acceptance_rate").is_none());
    assert!(plain["kneecap"].get("spec_decode").is_none());
    assert!(!stdout.contains("Speculative Decoding"));
    // ~2.7 tokens per 7 ms step against 1 per 5 ms: a wide bound.
    let (with, without) = (
        spec["mean_tpot_ms"].as_f64().unwrap(),
        plain["mean_tpot_ms"].as_f64().unwrap(),
    );
    eprintln!("mean TPOT {with:.2} ms with speculation, {without:.2} ms without");
    assert!(with < 0.8 * without, "{with} vs {without}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_sweep_steps_acceptance_is_the_sum_over_its_requests() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let sim = common::sim::logged(speculating(), dir.path().join("log.jsonl")).await;
    let path = dir.path().join("sweep.json");
    let html = dir.path().join("sweep.html");
    let mut args = strings(&[
        "sweep",
        "--base-url",
        &sim.url,
        "--rates",
        "4,8",
        "--slo",
        "p99_ttft_ms<=5000",
        "--request-id-prefix",
        "sws-",
        "--random-input-len",
        "64",
        "--random-output-len",
        "32",
        "-o",
        path.to_str().unwrap(),
        "--html",
        html.to_str().unwrap(),
    ]);
    args.extend(short_steps("5s", "50"));
    let out = run(args, vec![]).await;
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{stdout}\n{stderr}"
    );
    let total = sim.handle.metrics().counters.spec;
    sim.handle.shutdown().await.unwrap();
    let result: Value = serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
    let steps = steps_of(&sim.log, "sws-");
    let reported = result["steps"].as_array().unwrap();
    assert_eq!(reported.len(), steps.len(), "one server log group per step");
    let mut drafts = 0;
    for (k, (step, logged)) in reported.iter().zip(&steps).enumerate() {
        let (n, t, a) = (
            sum(logged, "spec_drafts"),
            sum(logged, "spec_draft_tokens"),
            sum(logged, "spec_accepted_tokens"),
        );
        check_block(&step["spec_decode"], n, t, a, &format!("step {k}"));
        let per = step["spec_decode"]["per_position_acceptance_rates"]
            .as_array()
            .unwrap();
        assert_eq!(per.len(), K as usize);
        drafts += n;
        let said = format!("accept len {:.2}", 1.0 + a as f64 / n as f64);
        assert!(stderr.contains(&said), "a step line says {said}: {stderr}");
    }
    assert!(
        drafts > 0 && drafts <= total.drafts,
        "{drafts} of {}",
        total.drafts
    );
    assert!(stdout.contains("accept len"), "{stdout}");
    let page = std::fs::read_to_string(&html).unwrap();
    assert!(page.contains("<th>accept len</th>"));
}
