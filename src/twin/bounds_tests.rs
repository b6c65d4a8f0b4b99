//! The physical ranges: a profile refused at load names its field in one
//! line, a range however wide is clamped into a valid parameter set, and an
//! estimate the probes do not pin down is marked not identifiable.

use super::*;
use crate::twin::testing::sample;

#[test]
fn a_value_outside_its_physical_range_is_refused_in_one_line_naming_the_field() {
    let mut p = sample();
    p.params.decode_seq_us.value = -5.0;
    let err = check(&p).unwrap_err();
    assert!(
        err.starts_with("profile params.decode_seq_us.value is -5"),
        "{err}"
    );
    assert!(
        err.contains("kneecap profile -o FILE") && !err.contains('\n'),
        "{err}"
    );
    let mut p = sample();
    p.params.prefill_interference.value = 3.5;
    assert!(check(&p).unwrap_err().contains("prefill_interference"));
    let mut p = sample();
    p.params.max_num_seqs.value = 0.0;
    assert!(check(&p).unwrap_err().contains("max_num_seqs.value is 0"));
    let mut p = sample();
    p.params.step_base_ms.uncertainty = -1.0;
    assert!(check(&p).unwrap_err().contains("step_base_ms.uncertainty"));
    let mut p = sample();
    p.params.max_model_len.value = 1.0;
    assert!(check(&p).unwrap_err().contains("max_model_len"));
    assert_eq!(check(&sample()), Ok(()));
}

#[test]
fn a_range_however_wide_is_clamped_into_the_physical_one() {
    assert_eq!(clamp(2, 7.06e18), 1e7);
    assert_eq!(clamp(0, -3.0), 0.0);
    assert_eq!(clamp(3, 0.0), 1.0);
    assert_eq!(clamp(6, f64::NAN), 0.0);
    assert_eq!(clamp(4, f64::INFINITY), f64::from(u32::MAX));
    assert_eq!(clamp_model_len(f64::NAN), 2.0);
    // A σ larger than the value is an honest wide range: accepted, and
    // every parameter set built from it is valid.
    let mut p = sample();
    p.params.decode_seq_us = Estimate::fitted(1504.0, 3.5e18, 0.0, "5e5ceb1");
    p.params.step_base_ms.low = -40.0;
    p.params.kv_cache_tokens.high = Some(1e300);
    assert_eq!(check(&p), Ok(()));
    for c in p.corners() {
        assert_eq!(c.params.validate(), Ok(()), "{}", c.name);
        assert!(c.params.per_decode_seq <= std::time::Duration::from_secs(10));
    }
}

#[test]
fn a_standard_error_not_below_the_value_is_not_identifiable() {
    let wide = Estimate::fitted(28.0, 48.6, 0.0, "decode line").misfit(48.6, 0.0, "not linear");
    let e = identifiable(wide, 0.0);
    assert_eq!(e.status, Status::NotIdentifiable);
    let note = e.note.as_deref().unwrap();
    assert!(
        note.starts_with("not identifiable from these probes"),
        "{note}"
    );
    assert!(note.contains("not linear"), "{note}");
    assert!(
        note.contains("(48.60) is not smaller than its value (28.00)"),
        "{note}"
    );
    assert_eq!((e.low, e.high), (0.0, Some(28.0 + 2.0 * 48.6)));
    assert!(e.uncertainty >= e.value);
    // Not finite: stored as finite numbers, with no upper end.
    let inf = identifiable(Estimate::fitted(1504.0, f64::INFINITY, 0.0, "x"), 0.0);
    assert_eq!(inf.status, Status::NotIdentifiable);
    assert!(inf.uncertainty.is_finite() && inf.high.is_none(), "{inf:?}");
    assert!(inf.note.unwrap().contains("not finite"));
    // A tight one, a bound and an assumption pass unchanged.
    let tight = Estimate::fitted(100.0, 1.0, 0.0, "x");
    assert_eq!(identifiable(tight.clone(), 0.0), tight);
    let bound = Estimate::lower_bound(7.0, "x");
    assert_eq!(identifiable(bound.clone(), 0.0), bound);
    let zero = Estimate::assumed(0.0, 0.0, None, "x");
    assert_eq!(identifiable(zero.clone(), 0.0), zero);
}
