//! Tests for `slo.rs` (kept apart to keep the module short).
use super::*;
use crate::metrics::{ErrorKind, RequestRecord};
use crate::sweep::testing::{failed, ms, ok};

fn slo(text: &str) -> Slo {
    text.parse().expect("valid SLO")
}

/// `n` successful one-token requests with the given TTFTs (ms).
fn with_ttfts(ttfts: &[u64]) -> Vec<RequestRecord> {
    ttfts.iter().map(|&t| ok(0, t, &[], 1)).collect()
}

fn want(metric: SloMetric, stat: SloStat, op: SloOp, threshold_ms: f64) -> Slo {
    Slo {
        metric,
        stat,
        op,
        threshold_ms,
    }
}

#[test]
fn parses_every_documented_spelling_into_its_parts() {
    use SloMetric::{E2el, Itl, Tpot, Ttft};
    use SloOp::{Le, Lt};
    use SloStat::{Attainment, Mean, Median, Percentile};
    let cases = [
        ("p99_ttft_ms<=500", want(Ttft, Percentile(99.0), Le, 500.0)),
        ("p99.9_itl_ms<50", want(Itl, Percentile(99.9), Lt, 50.0)),
        (
            "p50_e2el_ms<=2000",
            want(E2el, Percentile(50.0), Le, 2000.0),
        ),
        ("mean_tpot_ms<=30", want(Tpot, Mean, Le, 30.0)),
        ("median_ttft_ms<=200", want(Ttft, Median, Le, 200.0)),
        (" p99_ttft <= 500 ", want(Ttft, Percentile(99.0), Le, 500.0)),
        ("P95_TPOT_MS < 12.5", want(Tpot, Percentile(95.0), Lt, 12.5)),
        (
            "p99_ttft_ms<=500ms",
            want(Ttft, Percentile(99.0), Le, 500.0),
        ),
        ("ttft:500", want(Ttft, Attainment(0.99), Le, 500.0)),
        ("e2el : 2000 @ 0.9", want(E2el, Attainment(0.9), Le, 2000.0)),
    ];
    for (text, expected) in cases {
        assert_eq!(slo(text), expected, "{text}");
    }
}

#[test]
fn display_writes_the_canonical_form_and_parses_back_to_the_same_slo() {
    for text in [
        "p99_ttft_ms<=500",
        "p99.9_itl_ms<50",
        "p50_e2el_ms<=2000",
        "mean_tpot_ms<=30",
        "median_ttft_ms<=200",
        "p99_tpot_ms<12.5",
        "ttft:500@0.99",
        "tpot:30@0.95",
    ] {
        let parsed = slo(text);
        assert_eq!(parsed.to_string(), text);
        assert_eq!(slo(&parsed.to_string()), parsed);
    }
    assert_eq!(slo("p99_ttft<=500").to_string(), "p99_ttft_ms<=500");
}

#[test]
fn parse_errors_quote_the_input_and_show_an_example() {
    for text in [
        "p99_ttft_ms>500",
        "p99_foo_ms<=1",
        "p101_ttft_ms<=1",
        "q99_ttft_ms<=1",
        "p99_ttft_ms<=-3",
        "p99_ttft_ms<=abc",
        "ttft",
        "itl:5",
        "ttft:500@1.5",
        "",
    ] {
        let err = text.parse::<Slo>().expect_err(text);
        assert!(err.contains(&format!("`{text}`")), "{err}");
        assert!(err.contains("p99_ttft_ms<=500"), "{err}");
    }
}

#[test]
fn goodput_items_become_inclusive_attainment_slos_at_the_given_ratio() {
    let s = from_goodput("tpot:30", 0.95).expect("valid");
    assert_eq!(
        s,
        want(SloMetric::Tpot, SloStat::Attainment(0.95), SloOp::Le, 30.0)
    );
    assert!(from_goodput("itl:5", 0.99).is_err());
    assert!(from_goodput("ttft:500", 0.0).is_err());
    assert!(from_goodput("ttft:500@0.9", 0.99).is_err());
}

#[test]
fn tail_samples_counts_samples_at_or_above_the_percentile_rank() {
    assert_eq!(tail_samples(10_000, 99.0), 100);
    assert_eq!(tail_samples(10_000, 99.9), 10);
    assert_eq!(tail_samples(101, 99.0), 2); // rank exactly 99: indices 99 and 100
    assert_eq!(tail_samples(100, 50.0), 50); // rank 49.5: indices 50..99
    assert_eq!(tail_samples(100, 100.0), 1);
    assert_eq!(tail_samples(100, 0.0), 100);
    assert_eq!(tail_samples(1, 99.0), 1);
    assert_eq!(tail_samples(0, 99.0), 0);
}

#[test]
fn a_percentile_slo_uses_numpy_linear_interpolation_over_ttft_from_sent() {
    // TTFTs 1..=100 ms: np.percentile(.., 99) == 99.01 ms.
    let ttfts: Vec<u64> = (1..=100).collect();
    let mut records = with_ttfts(&ttfts);
    for r in &mut records {
        r.due = ms(0);
        r.sent += ms(30); // sent late: TTFT is still measured from sent
        r.first_token = r.first_token.map(|t| t + ms(30));
        r.last_token = r.first_token;
    }
    let fail = evaluate(&slo("p99_ttft_ms<=99"), &records);
    let pass = evaluate(&slo("p99_ttft_ms<=99.02"), &records);
    let observed = fail.observed_ms.expect("observed");
    assert!((observed - 99.01).abs() < 1e-9, "{observed}");
    assert!(!fail.pass && pass.pass);
    assert_eq!((fail.samples, fail.tail_samples), (100, 1));
    assert!(fail.warning.as_deref().unwrap_or("").contains("1 of 100"));
}

#[test]
fn strict_and_inclusive_bounds_differ_exactly_at_the_threshold() {
    let records = with_ttfts(&[100, 100, 100]);
    assert!(evaluate(&slo("median_ttft_ms<=100"), &records).pass);
    assert!(!evaluate(&slo("median_ttft_ms<100"), &records).pass);
}

#[test]
fn mean_tpot_ignores_single_token_requests_and_itl_is_flattened() {
    let records = vec![
        ok(0, 100, &[40, 40], 5), // TPOT 20 ms
        ok(0, 100, &[], 1),       // no TPOT
        ok(0, 100, &[10, 10, 10], 4),
        ok(0, 100, &[50], 2),
    ];
    let tpot = evaluate(&slo("mean_tpot_ms<=100"), &records);
    // (20 + 10 + 50) / 3 requests with > 1 token
    assert!((tpot.observed_ms.unwrap_or(0.0) - 80.0 / 3.0).abs() < 1e-9);
    assert_eq!(tpot.samples, 3);
    // Gaps 40,40,10,10,10,50 flattened: median of six = (10+40)/2 = 25.
    let itl = evaluate(&slo("median_itl_ms<=25"), &records);
    assert_eq!(itl.samples, 6);
    assert!((itl.observed_ms.unwrap_or(0.0) - 25.0).abs() < 1e-9);
    assert!(itl.pass);
}

#[test]
fn a_failed_request_is_a_sample_over_every_bound_whatever_it_received() {
    let mut records = with_ttfts(&[100, 200]);
    let mut broken = failed(0, ErrorKind::Reset);
    broken.first_token = Some(ms(5)); // a fast first token, then the stream broke
    records.push(broken);
    let o = evaluate(&slo("p100_ttft_ms<=200"), &records);
    assert_eq!(
        (o.samples, o.failures, o.tail_samples, o.failed_in_tail),
        (3, 1, 1, 1)
    );
    assert_eq!(o.observed_ms, None, "the maximum is the failure: +∞");
    assert!(!o.pass);
    assert_eq!(
        o.vllm_observed_ms,
        Some(200.0),
        "vLLM's p100 over the successes"
    );
    assert_eq!(
        o.describe(),
        "p100_ttft_ms ∞ (failed) > 200; 1 failed request counted as misses \
         (1 of 1 tail samples); 200.0 ms over successes"
    );
}

#[test]
fn with_no_samples_the_slo_fails_and_says_why() {
    let o = evaluate(&slo("p99_ttft_ms<=500"), &[]);
    assert!(!o.pass);
    assert_eq!(o.observed_ms, None);
    assert!(o
        .warning
        .as_deref()
        .unwrap_or("")
        .contains("no ttft samples"));
    assert_eq!(o.describe(), "p99_ttft_ms<=500: no samples");
}

#[test]
fn a_step_whose_every_request_failed_misses_its_slo_at_infinity() {
    let all_failed = [failed(0, ErrorKind::Connect), failed(5, ErrorKind::Timeout)];
    let o = evaluate(&slo("p50_ttft_ms<=500"), &all_failed);
    assert_eq!((o.samples, o.failures, o.observed_ms), (2, 2, None));
    assert!(!o.pass);
    assert_eq!(o.vllm_observed_ms, None, "no success: vLLM has no value");
    assert!(o
        .describe()
        .starts_with("p50_ttft_ms ∞ (failed) > 500; 2 failed requests"));
}

/// TTFTs 1, 2, …, `n` ms (successes) and `failures` failed requests.
fn ramp_with_failures(n: u64, failures: u64) -> Vec<RequestRecord> {
    let mut records = with_ttfts(&(1..=n).collect::<Vec<_>>());
    records.extend((0..failures).map(|i| failed(i, ErrorKind::Timeout)));
    records
}

#[test]
fn a_percentile_ranks_failures_last_and_is_infinite_once_its_tail_is_all_failures() {
    // 98 successes (1..98 ms) and 2 failures: 100 samples.
    let records = ramp_with_failures(98, 2);
    // p99: rank 99·0.99 = 98.01, between sample 98 (a failure) and 99: +∞.
    // vLLM's p99 over the 98: rank 97·0.99 = 96.03 → 97 + 0.03 = 97.03 ms.
    let p99 = evaluate(&slo("p99_ttft_ms<=500"), &records);
    assert_eq!(p99.observed_ms, None);
    assert!(!p99.pass);
    assert_eq!((p99.tail_samples, p99.failed_in_tail), (1, 1));
    assert!(
        (p99.vllm_observed_ms.unwrap() - 97.03).abs() < 1e-9,
        "{p99:?}"
    );
    // p90: rank 99·0.9 = 89.1 → 90 + 0.1·(91 − 90) = 90.1 ms, where vLLM's
    // over the 98 is rank 97·0.9 = 87.3 → 88.3 ms. Its tail (10) holds both failures.
    let p90 = evaluate(&slo("p90_ttft_ms<=90.05"), &records);
    assert!((p90.observed_ms.unwrap() - 90.1).abs() < 1e-9, "{p90:?}");
    assert!(
        (p90.vllm_observed_ms.unwrap() - 88.3).abs() < 1e-9,
        "{p90:?}"
    );
    assert_eq!(
        (p90.samples, p90.tail_samples, p90.failed_in_tail),
        (100, 10, 2)
    );
    assert!(
        !p90.pass,
        "90.1 ms > 90.05 ms with the failures; vLLM's 88.3 would pass"
    );
    // The same successes without failures: exactly vLLM's value, nothing extra.
    let clean = evaluate(&slo("p90_ttft_ms<=90.05"), &ramp_with_failures(98, 0));
    assert_eq!(clean.observed_ms, p90.vllm_observed_ms);
    assert_eq!((clean.failures, clean.vllm_observed_ms), (0, None));
    assert!(clean.pass);
}

#[test]
fn a_median_is_infinite_only_when_at_least_half_the_tail_failed() {
    // 3 successes and 2 failures: the median is the third success.
    let o = evaluate(&slo("median_ttft_ms<=100"), &ramp_with_failures(3, 2));
    assert_eq!(
        (o.observed_ms, o.tail_samples, o.failed_in_tail),
        (Some(3.0), 3, 2)
    );
    assert_eq!(o.vllm_observed_ms, Some(2.0));
    // 2 successes and 3 failures: the median is a failure.
    let o = evaluate(&slo("median_ttft_ms<=100"), &ramp_with_failures(2, 3));
    assert_eq!(o.observed_ms, None);
    assert!(!o.pass);
}

#[test]
fn a_mean_has_no_finite_value_once_one_request_failed() {
    let o = evaluate(&slo("mean_ttft_ms<=500"), &ramp_with_failures(3, 1));
    assert_eq!((o.observed_ms, o.vllm_observed_ms), (None, Some(2.0)));
    assert_eq!((o.samples, o.tail_samples, o.failed_in_tail), (4, 4, 1));
    assert!(!o.pass);
}

#[test]
fn attainment_counts_failures_as_requests_never_within_the_bound() {
    // 9 fast and 1 failure: 9 of 10 within 500 ms, ⌈0.9·10⌉ = 9 needed.
    let o = evaluate(&slo("ttft:500@0.9"), &ramp_with_failures(9, 1));
    assert!(o.pass);
    assert_eq!((o.attained, o.observed_ms), (Some(0.9), Some(9.0)));
    assert_eq!((o.tail_samples, o.failed_in_tail), (2, 1));
    // 8 fast and 2 failures: 8 of 10, the 9th smallest is a failure.
    let o = evaluate(&slo("ttft:500@0.9"), &ramp_with_failures(8, 2));
    assert!(!o.pass);
    assert_eq!((o.attained, o.observed_ms), (Some(0.8), None));
    // vLLM's: ⌈0.9·8⌉ = 8th of the 8 successes.
    assert_eq!(o.vllm_observed_ms, Some(8.0));
    assert!(o
        .describe()
        .starts_with("ttft:500@0.9: 80.0% of ttft within 500 ms (need 90%); 2 failed"));
}

#[test]
fn itl_and_tpot_take_one_infinite_sample_per_failed_request() {
    let mut records = vec![ok(0, 50, &[10, 10, 10], 4), ok(0, 50, &[20, 20, 20], 4)];
    records.push(failed(0, ErrorKind::Reset));
    let itl = evaluate(&slo("p100_itl_ms<=100"), &records);
    assert_eq!((itl.samples, itl.failures, itl.observed_ms), (7, 1, None));
    assert_eq!(itl.vllm_observed_ms, Some(20.0));
    let p50 = evaluate(&slo("p50_itl_ms<=100"), &records);
    assert_eq!(p50.observed_ms, Some(20.0), "rank 3 of 7: the fourth gap");
    let tpot = evaluate(&slo("p50_tpot_ms<=100"), &records);
    assert_eq!((tpot.samples, tpot.failures), (3, 1));
}

#[test]
fn attainment_needs_the_ratio_of_requests_within_the_bound_not_the_linear_p99() {
    // 49 fast, 1 slow: 98% within 500 ms. NumPy p99 = 100 + 0.51·500 = 355 ms.
    let mut ttfts = vec![100; 49];
    ttfts.push(600);
    let records = with_ttfts(&ttfts);
    assert!(evaluate(&slo("p99_ttft_ms<=500"), &records).pass);
    let o = evaluate(&slo("ttft:500"), &records);
    assert!(!o.pass);
    assert_eq!(o.observed_ms, Some(600.0)); // the 50th of 50 (⌈0.99·50⌉ = 50)
    assert_eq!(o.attained, Some(0.98));
    assert_eq!(o.tail_samples, 1);
    // 99 fast of 100: ⌈0.99·100⌉ = 99 needed, met exactly.
    let mut ttfts = vec![100; 99];
    ttfts.push(600);
    let o = evaluate(&slo("ttft:500"), &with_ttfts(&ttfts));
    assert!(o.pass);
    assert_eq!(o.observed_ms, Some(100.0));
}

#[test]
fn attainment_bounds_are_inclusive_and_one_token_tpot_counts_as_zero() {
    let records = with_ttfts(&[500, 500]);
    assert!(evaluate(&slo("ttft:500@1"), &records).pass);
    assert!(!evaluate(&slo("ttft:499.999@1"), &records).pass);
    // Every request has one token: no TPOT statistic, but goodput TPOT is 0.
    assert!(!evaluate(&slo("mean_tpot_ms<=10"), &records).pass);
    assert!(evaluate(&slo("tpot:0@1"), &records).pass);
}

#[test]
fn describe_names_the_statistic_and_the_comparison_that_failed() {
    let records = with_ttfts(&[800, 800]);
    assert_eq!(
        evaluate(&slo("p99_ttft_ms<=500"), &records).describe(),
        "p99_ttft_ms 800.0 > 500"
    );
    assert_eq!(
        evaluate(&slo("mean_ttft_ms<800"), &records).describe(),
        "mean_ttft_ms 800.0 >= 800"
    );
    assert_eq!(
        evaluate(&slo("ttft:500@0.9"), &records).describe(),
        "ttft:500@0.9: 0.0% of ttft within 500 ms (need 90%)"
    );
}

#[test]
fn slos_serialize_as_their_canonical_string() {
    let json = serde_json::to_string(&slo("p99.9_itl_ms < 50")).expect("serializes");
    assert_eq!(json, "\"p99.9_itl_ms<50\"");
    let back: Slo = serde_json::from_str(&json).expect("deserializes");
    assert_eq!(back, slo("p99.9_itl_ms<50"));
}
