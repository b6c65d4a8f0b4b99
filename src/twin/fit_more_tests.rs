//! More of the pipeline on fake time: a host that stalls (the stalls come
//! back from the decode levels' gaps, and the decode line without them),
//! a token budget the server reports, and a saved profile fitted again.

use super::tests::{close, header, observations, params, profile};
use super::{fit, Saved};
use crate::sim::params::HostStalls;
use crate::sim::ModelParams;
use crate::twin::Status;
use std::time::Duration;

fn stalling(rate_per_s: f64, mean_ms: u64) -> ModelParams {
    ModelParams {
        stalls: HostStalls {
            rate_per_s,
            mean: Duration::from_millis(mean_ms),
        },
        ..params(16, 10, 100, 200, 40_000, 1.0)
    }
}

#[test]
fn a_host_that_stalls_comes_back_with_its_decode_line() {
    // 4 stalls a second of 60 ms: a quarter more time on every step.
    let p = stalling(4.0, 60);
    let prof = profile(&p, true, Duration::from_secs(60));
    let e = &prof.params;
    assert_eq!(e.stall_rate_per_s.status, Status::Measured);
    // A stall shorter than its step's cost goes unseen (a Gamma(2) of 60
    // ms is under a 35-ms step a third of the time) and about 40 stalls
    // fall in the levels: each within ±35%, their product (the share
    // taken out of the decode line) within ±0.08, about 2σ.
    close(&e.stall_rate_per_s, 4.0, 0.35, "stall rate");
    close(&e.stall_ms, 60.0, 0.35, "stall mean");
    let share = e.stall_rate_per_s.value * e.stall_ms.value * 1e-3;
    assert!(
        (share - 0.24).abs() < 0.08,
        "share {share}: {:?} {:?}",
        e.stall_rate_per_s,
        e.stall_ms
    );
    close(&e.step_base_ms, 10.0, 0.10, "step base");
    close(&e.decode_seq_us, 200.0, 0.15, "decode");
}

#[test]
fn a_quiet_host_shows_no_stalls() {
    let prof = profile(
        &params(16, 10, 100, 200, 40_000, 1.0),
        true,
        Duration::from_secs(60),
    );
    let e = &prof.params;
    assert_eq!(e.stall_rate_per_s.value, 0.0, "{:?}", e.stall_rate_per_s);
    assert_eq!(e.stall_rate_per_s.status, Status::NotIdentifiable);
}

#[test]
fn prompts_longer_than_a_reported_token_budget_pay_a_step_base_per_chunk() {
    // 256 tokens a step: a 2,000-token prompt runs as 8 steps of 30 ms base.
    let p = ModelParams {
        max_num_batched_tokens: 256,
        ..params(8, 30, 200, 300, 40_000, 1.0)
    };
    let mut obs = observations(&p, true, Duration::from_secs(30));
    let plain = fit(&obs, header(Duration::from_secs(30)));
    // Read as one line (or curve), the chunks' bases land in the cost of
    // the prompt's tokens: over 1.3 x 200 µs each at 1,024 tokens.
    let m = plain.params();
    let n = 1024.0_f64;
    let cost = m.per_prefill_token.as_secs_f64() * n
        + m.per_prefill_pair.as_secs_f64() * n * (n + 1.0) / 2.0;
    assert!(cost > 1.3 * 200e-6 * n, "{:?}", plain.params);
    obs.reported_token_budget = Some(256);
    let prof = fit(&obs, header(Duration::from_secs(30)));
    close(&prof.params.prefill_token_us, 200.0, 0.05, "prefill");
    assert!(
        prof.params
            .prefill_token_us
            .how
            .contains("token budget (256)"),
        "{}",
        prof.params.prefill_token_us.how
    );
}

#[test]
fn a_saved_profile_fits_again_to_the_same_parameters() {
    let p = stalling(2.0, 80);
    let obs = observations(&p, true, Duration::from_secs(30));
    let first = fit(&obs, header(Duration::from_secs(30)));
    let saved = Saved {
        profile: first.clone(),
        observations: Some(obs),
    };
    let text = saved.to_json();
    // The plain profile reader takes the file as it is (the extra key
    // ignored), and the saved form reads back whole.
    let plain = crate::twin::ServerProfile::from_json(&text).unwrap();
    assert_eq!(plain.params, first.params);
    let back: Saved = serde_json::from_str(&text).unwrap();
    assert_eq!(back, saved);
    let again = back.refit().unwrap();
    assert_eq!(again.params, first.params);
    assert_eq!(again.warnings, first.warnings);
    let none = Saved {
        observations: None,
        ..back
    };
    assert_eq!(none.refit(), None);
}
