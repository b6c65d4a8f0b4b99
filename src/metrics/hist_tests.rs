//! Unit tests of [`super`] (hist.rs).

use super::*;
use crate::metrics::stats::{distribution, percentile};

fn lcg_values(n: usize, seed: u64) -> Vec<u64> {
    let mut x = seed;
    (0..n)
        .map(|_| {
            x = x
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            // 100 µs .. ~10 s, skewed towards small values
            let u = (x >> 11) as f64 / (1u64 << 53) as f64;
            (100.0 * (1e5f64).powf(u * u)) as u64
        })
        .collect()
}

#[test]
fn fixed_configuration_is_accepted() {
    assert!(Histogram::<u64>::new_with_bounds(LOWEST_US, HIGHEST_US, SIGFIG).is_ok());
}

#[test]
fn round_trip_through_v2_deflate_base64_keeps_every_count() {
    let mut h = LatencyHist::new();
    for v in lcg_values(5000, 7) {
        h.record_us(v);
    }
    h.record_us(0);
    h.record_us(u64::MAX); // clamped to 1 h
    let back = LatencyHist::from_json(&h.to_json().unwrap()).unwrap();
    assert_eq!(back, h);
    assert_eq!(back.count(), 5002);
    assert_eq!(back.max_ms(), h.max_ms());
}

#[test]
fn a_foreign_configuration_is_refused_by_name() {
    let mut v = LatencyHist::new().to_json().unwrap();
    v["config"] = json!("ms,1..1000,2sig");
    let err = LatencyHist::from_json(&v).unwrap_err();
    assert!(err.to_string().contains("ms,1..1000,2sig"), "{err}");
    let mut v = LatencyHist::new().to_json().unwrap();
    v["hdr_v2_deflate_base64"] = json!("not base64!!");
    assert!(matches!(
        LatencyHist::from_json(&v),
        Err(HistError::Base64(_))
    ));
}

#[test]
fn merged_shards_equal_one_histogram_of_the_union() {
    let values = lcg_values(9000, 3);
    let mut whole = LatencyHist::new();
    let mut parts = [LatencyHist::new(), LatencyHist::new(), LatencyHist::new()];
    for (i, &v) in values.iter().enumerate() {
        whole.record_us(v);
        parts[(v as usize ^ i) % 3].record_us(v);
    }
    let mut merged = LatencyHist::new();
    for p in &parts {
        merged.merge(p).unwrap();
    }
    assert_eq!(merged, whole);
}

#[test]
fn percentiles_match_numpy_linear_within_half_a_bucket() {
    let values = lcg_values(20_000, 11);
    let mut h = LatencyHist::new();
    values.iter().for_each(|&v| h.record_us(v));
    let mut secs: Vec<f64> = values.iter().map(|&v| v as f64 / 1e6).collect();
    secs.sort_by(f64::total_cmp);
    for p in [0.0, 1.0, 50.0, 90.0, 99.0, 99.9, 100.0] {
        let exact_ms = percentile(&secs, p) * 1e3;
        let got = h.percentile_ms(p);
        let tol = exact_ms * 0.0005 + 0.0005;
        assert!(
            (got - exact_ms).abs() <= tol,
            "p{p}: hist {got} vs exact {exact_ms}"
        );
    }
    let exact = distribution(&secs, &[]);
    assert!((h.mean_ms() - exact.mean_ms).abs() < 1e-9 * exact.mean_ms.max(1.0));
    assert!((h.std_ms() - exact.std_ms).abs() < 1e-6 * exact.std_ms);
}

#[test]
fn small_values_are_exact_to_the_microsecond() {
    let mut h = LatencyHist::new();
    for us in [1u64, 2, 3, 4, 2047] {
        h.record_us(us);
    }
    assert_eq!(h.percentile_ms(0.0), 0.001);
    assert_eq!(h.percentile_ms(50.0), 0.003);
    assert_eq!(h.percentile_ms(100.0), 2.047);
    assert_eq!(LatencyHist::new().percentile_ms(99.0), 0.0);
}

#[test]
fn run_hists_use_vllms_sample_sets() {
    use crate::metrics::{ErrorKind, RequestError};
    use std::time::Duration;
    let ms = Duration::from_millis;
    let ok = RequestRecord {
        due: ms(0),
        sent: ms(2),
        first_token: Some(ms(102)),
        last_token: Some(ms(182)),
        itl: vec![ms(40), ms(40)],
        output_tokens: 5,
        ..Default::default()
    };
    let bad = RequestRecord {
        sent: ms(1),
        first_token: Some(ms(5)),
        error: Some(RequestError {
            kind: ErrorKind::Reset,
            status: None,
            message: String::new(),
        }),
        ..Default::default()
    };
    let h = RunHists::from_records(&[ok, bad]);
    assert_eq!(h.ttft.count(), 1);
    assert_eq!(h.ttft.percentile_ms(50.0), 100.0);
    // 20 ms sits in a 16 µs wide bucket: its midpoint is within 0.05 %.
    assert!((h.tpot.percentile_ms(50.0) - 20.0).abs() <= 0.01);
    assert_eq!(h.itl.count(), 2);
    assert_eq!(h.lateness.count(), 2, "lateness counts failed sends too");
    let back = RunHists::from_json(&h.to_json().unwrap()).unwrap();
    assert_eq!(back, h);
}
