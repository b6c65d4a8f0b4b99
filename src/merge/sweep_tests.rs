//! A sharded sweep step, merged from its shards' blocks, is judged as one
//! process judges the same records: a failed request is a miss in both.
use super::*;
use crate::metrics::{ErrorKind, RequestError, RequestRecord};
use crate::result::shard::{ShardCounters, ShardIdentity};
use crate::result::shard_sweep::SweepIdentity;
use crate::shard::{Shard, StartAt};
use crate::sweep::rows::slo_row;
use crate::sweep::slo;
use crate::sweep::slo_hist::attainment;
use crate::sweep::steady::SteadyThresholds;

const SLOS: [&str; 4] = [
    "p99_ttft_ms<=500",
    "p90_ttft_ms<=500",
    "ttft:500@0.99",
    "p99_itl_ms<=500",
];
const WINDOW: (Duration, Duration) = (Duration::ZERO, Duration::from_secs(10));

/// One step's requests: one due every 25 ms for 10 s, each fast (TTFT
/// 40–46 ms, five 10 ms gaps), and every 50th timed out (2%).
fn records() -> Vec<RequestRecord> {
    let ms = Duration::from_millis;
    (0..400u64)
        .map(|i| {
            let due = ms(i * 25);
            let first = due + ms(40 + i % 7);
            let failed = i % 50 == 3;
            RequestRecord {
                index: i as usize,
                due,
                released: due,
                sent: due,
                first_token: (!failed).then_some(first),
                last_token: (!failed).then_some(first + ms(50)),
                itl: if failed { vec![] } else { vec![ms(10); 5] },
                prompt_len: 10,
                output_tokens: 6,
                error: failed.then(|| RequestError {
                    kind: ErrorKind::Timeout,
                    status: None,
                    message: "timeout".into(),
                }),
                ..RequestRecord::default()
            }
        })
        .collect()
}

fn slos() -> Vec<Slo> {
    SLOS.iter().map(|s| s.parse().expect("valid SLO")).collect()
}

/// Shard `index` of 2 (the requests of its parity), as `kneecap sweep
/// --shard` writes its one step: the result and the step's shard block.
fn shard(index: usize, all: &[RequestRecord]) -> SweepShard {
    let mine: Vec<RequestRecord> = all
        .iter()
        .filter(|r| r.index % 2 == index)
        .cloned()
        .collect();
    let part = ShardPart {
        start_lateness_ms: Some(0.0),
        window_start_unix_s: 1000.0,
        window_end_unix_s: 1010.0,
        counters: ShardCounters::from_records(&mine, None),
        hists: RunHists::from_records(&mine),
        ..ShardPart::default()
    };
    let block = StepShard {
        part,
        slot_start_unix_s: 1000.0,
        overran_slot_ms: None,
        steadiness: steady::assess(&mine, WINDOW, &SteadyThresholds::default()),
        slo_attainment: slos().iter().map(|s| attainment(s, &mine)).collect(),
    };
    let id = ShardIdentity {
        shard: Shard { index, count: 2 },
        fingerprint: "f00d".into(),
        seed: 1,
        start_at: Some(StartAt(1_000_000_000_000)),
    };
    let result = SweepResult {
        slos: SLOS.iter().map(|s| s.to_string()).collect(),
        max_error_rate: 0.05,
        steps: vec![StepResult {
            load: 40.0,
            window_start_s: 0.0,
            window_end_s: 10.0,
            shard: Some(block),
            ..StepResult::default()
        }],
        shard: Some(SweepIdentity {
            id,
            slots_s: vec![0.0],
        }),
        complete: true,
        ..SweepResult::default()
    };
    read(&format!("shard{index}.json"), result).expect("a shard sweep")
}

#[test]
fn a_merged_step_counts_the_shards_failures_as_misses_like_one_process() {
    let all = records();
    let merged = merge(vec![shard(1, &all), shard(0, &all)]).expect("merges");
    let step = &merged.steps[0];
    assert_eq!((step.n_requests, step.failed), (400, 8));
    assert!(step.error_rate <= 0.05, "the error bound is not what fails");
    let single: Vec<_> = slos()
        .iter()
        .map(|s| slo_row(&slo::evaluate(s, &all)))
        .collect();
    for (got, want) in step.slo_outcomes.iter().zip(&single) {
        let what = format!("{got:?} vs one process {want:?}");
        assert_eq!((&got.slo, got.pass), (&want.slo, want.pass), "{what}");
        assert_eq!(
            (
                got.samples,
                got.tail_samples,
                got.failures,
                got.failed_in_tail
            ),
            (
                want.samples,
                want.tail_samples,
                want.failures,
                want.failed_in_tail
            ),
            "{what}"
        );
        assert_eq!(
            got.observed_ms.is_none(),
            want.observed_ms.is_none(),
            "{what}"
        );
        let (g, w) = (
            got.vllm_observed_ms.unwrap(),
            want.vllm_observed_ms.unwrap(),
        );
        assert!((g - w).abs() <= w * 0.0005 + 0.001, "{what}");
    }
    // The p99 TTFT lands on the failures (8 > its tail of 4): missed, while
    // vLLM's p99 over the successes (≈ 46 ms) would pass; the p90 holds.
    let p99 = &step.slo_outcomes[0];
    assert_eq!((p99.pass, p99.observed_ms, p99.failures), (false, None, 8));
    assert!(p99.vllm_observed_ms.is_some_and(|v| v < 50.0), "{p99:?}");
    assert!(step.slo_outcomes[1].pass);
    assert!(
        step.reasons
            .iter()
            .any(|r| r.starts_with("p99_ttft_ms ∞ (failed) > 500")),
        "{:?}",
        step.reasons
    );
}

/// A GPU block at `host`: `energy_j` over 10 s, paid for by `tokens`
/// output tokens and `requests` requests.
fn gpu_at(host: &str, energy_j: f64, tokens: u64, requests: u64) -> GpuStats {
    let at = |t_s: f64| crate::result::gpu::GpuSample {
        t_s,
        hosts: vec![Some(
            [(
                "0".to_string(),
                crate::client::scrape_gpu::GpuGauges {
                    power_w: Some(energy_j / 10.0),
                    ..Default::default()
                },
            )]
            .into(),
        )],
    };
    let g = GpuStats::from_samples(&[at(0.0), at(10.0)]).expect("two samples");
    GpuStats {
        hosts: vec![host.to_string()],
        ..g
    }
    .with_work(tokens, requests)
}

#[test]
fn a_merged_steps_gpu_blocks_add_and_the_knee_reads_its_energy_per_token() {
    let ok: Vec<RequestRecord> = records()
        .into_iter()
        .filter(|r| r.error.is_none())
        .collect();
    let (mut a, mut b) = (shard(0, &ok), shard(1, &ok));
    // Distinct hosts: 1000 J + 3000 J over 100 + 300 tokens = 10 J/token.
    a.result.steps[0].gpu = Some(gpu_at("http://a:9400/metrics", 1000.0, 100, 10));
    b.result.steps[0].gpu = Some(gpu_at("http://b:9400/metrics", 3000.0, 300, 30));
    let merged = merge(vec![a.clone(), b.clone()]).expect("merges");
    let g = merged.steps[0].gpu.as_ref().expect("a merged block");
    assert_eq!((g.energy_j, g.gpus, g.mean_power_w), (4000.0, 2, 400.0));
    assert_eq!(g.joules_per_output_token, Some(10.0));
    assert_eq!(g.joules_per_request, Some(100.0));
    let knee = &merged.knee;
    assert_eq!(knee.last_pass, Some(40.0));
    assert_eq!(knee.energy_per_token_j, Some(10.0));
    let notes = &merged.merged.as_ref().unwrap().notes;
    assert!(notes.iter().any(|n| n == gpu::NOTE), "{notes:?}");
    // One shard without a block: none, and a note naming the step.
    b.result.steps[0].gpu = None;
    let merged = merge(vec![a, b]).expect("merges");
    assert_eq!(merged.steps[0].gpu, None);
    assert_eq!(merged.knee.energy_per_token_j, None);
    let notes = &merged.merged.as_ref().unwrap().notes;
    assert!(
        notes
            .iter()
            .any(|n| n.starts_with("gpu: 1 of 2 shards have no GPU block")
                && n.ends_with("(steps at load 40)")),
        "{notes:?}"
    );
}
