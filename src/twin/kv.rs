//! KV-cache capacity from the server's usage gauge against the tokens held
//! in flight. Pure.
//!
//! A server that reports its KV usage (`vllm:kv_cache_usage_perc`,
//! `llamacpp:kv_cache_usage_ratio`) as a fraction `u` of its capacity gives
//! `u = u₀ + T / KV` for `T` tokens in flight (every decoding request's
//! prompt plus the tokens it has received, counted by the client at each
//! scrape). The fit's slope is `1 / KV`; its standard error carries over as
//! `se(KV) = se(slope) / slope²`. vLLM counts whole 16-token blocks, so a
//! caller whose server may round passes the relative systematic error that
//! rounding could add. Without the gauge, the capacity is only known to be
//! at least the most tokens the probes held at once.
//!
//! The client cannot see whether the server reads its gauge between steps
//! (vLLM, the built-in simulator: the last sampled token of each stream has
//! no KV yet) or after scheduling the next one (it has): the capacity is fit
//! on the first count, and half the difference to the second joins its
//! uncertainty.

use super::line;
use super::observe::KvPoint;
use super::profile::Estimate;

/// Usage must reach this much for its slope to mean anything (a few
/// 16-token blocks of a two-million-token cache).
const MIN_USAGE: f64 = 2e-5;

/// Fits `(tokens in flight, usage)` pairs (one per decode level, each a mean
/// over its scrapes); `most_held` is the most tokens
/// in flight the probes saw (the lower bound when there is no fit), and
/// `systematic` the relative error the server's counting may add.
pub fn fit(points: &[KvPoint], most_held: f64, systematic: f64) -> Estimate {
    let unknown = |why: &str| {
        let mut e = Estimate::lower_bound(
            most_held.round(),
            format!("{why}: the KV cache held at least {most_held:.0} tokens (the most the probes had in flight)"),
        );
        e.note = Some("KV capacity unknown: the profile uses the lower bound, so a prediction for a workload that needs more KV is pessimistic".into());
        e
    };
    if points.is_empty() {
        return unknown("the server reports no KV-cache usage");
    }
    if points.iter().map(|p| p.usage).fold(0.0, f64::max) < MIN_USAGE {
        return unknown("the KV usage the probes caused was too small to measure");
    }
    let line_of = |x: fn(&KvPoint) -> f64| {
        let xy: Vec<(f64, f64)> = points.iter().map(|p| (x(p), p.usage)).collect();
        line::fit(&xy, 1e-4)
    };
    let (Some(l), Some(other)) = (line_of(|p| p.tokens), line_of(|p| p.scheduled)) else {
        return unknown("too few KV usage readings");
    };
    if l.slope <= 0.0 || other.slope <= 0.0 {
        return unknown("KV usage did not grow with the tokens in flight");
    }
    let (kv, b) = (1.0 / l.slope, 1.0 / other.slope);
    let sigma = (l.se_slope / (l.slope * l.slope))
        .hypot((kv - b) / 2.0)
        .hypot(systematic * kv);
    let how = format!(
        "1 / slope of the KV usage gauge against the tokens in flight (prompt + received, counted by the client): means over the scrapes of {} decode levels",
        l.n
    );
    let e = Estimate::fitted(kv.round(), sigma, most_held, how);
    match &l.not_linear {
        Some(why) => e.misfit(sigma, most_held, format!("KV usage against tokens is {why}")),
        None if l.intercept.abs() > 0.02 => e.misfit(
            sigma.max(l.intercept.abs() * kv),
            most_held,
            format!("KV usage is {:.1}% with no token in flight: the server holds KV the client does not see", l.intercept * 100.0),
        ),
        None => e,
    }
}

/// The capacity of a server whose every slot holds a context of its own
/// (llama.cpp: `-c` split over `-np` slots, `meta.n_ctx` in its model
/// listing): `slot_context` tokens per slot, for as many slots as the batch
/// limit holds. No request then waits for KV that another one holds; a
/// request longer than one slot's context is refused (`max_model_len`).
/// A lower bound when the batch limit is one.
pub fn per_slot(slot_context: u32, slots: &Estimate) -> Estimate {
    let seqs = slots.value.round().max(1.0);
    let kv = seqs * f64::from(slot_context);
    let how = format!(
        "each slot holds its own context of {slot_context} tokens (meta.n_ctx in GET /v1/models) x {seqs:.0} slots (the batch limit)"
    );
    match slots.status {
        super::Status::LowerBound => Estimate::lower_bound(kv, how),
        _ => Estimate::reported(kv, how),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::twin::Status;

    fn point(tokens: f64, scheduled: f64, usage: f64) -> KvPoint {
        KvPoint {
            tokens,
            scheduled,
            usage,
        }
    }

    #[test]
    fn the_slope_of_usage_gives_the_capacity() {
        let pts: Vec<KvPoint> = (1..=20)
            .map(|k| {
                let t = 500.0 * f64::from(k);
                // ±100 tokens of timing error on alternate levels; the last
                // received tokens are 2% of them.
                let err = if k % 2 == 0 { 100.0 } else { -100.0 };
                point(t + err, (t + err) * 1.02, t / 50_000.0)
            })
            .collect();
        let e = fit(&pts, 10_000.0, 0.0);
        assert_eq!(e.status, Status::Measured);
        assert!((e.value - 50_000.0).abs() < 400.0, "{e:?}");
        // Half the 2% between the two counts joins the uncertainty.
        assert!(e.uncertainty > 450.0 && e.uncertainty < 1000.0, "{e:?}");
        // A rounding server's systematic error widens it.
        let wide = fit(&pts, 10_000.0, 0.05);
        assert!(wide.uncertainty > 2_400.0, "{wide:?}");
    }

    #[test]
    fn without_the_gauge_only_a_lower_bound_with_its_consequence() {
        let e = fit(&[], 17_000.0, 0.0);
        assert_eq!(
            (e.status, e.value, e.high),
            (Status::LowerBound, 17_000.0, None)
        );
        assert!(e.how.contains("reports no KV"));
        assert!(e.note.unwrap().contains("pessimistic"));
        let tiny = fit(
            &[point(10.0, 10.0, 0.0), point(30.0, 30.0, 1e-5)],
            30.0,
            0.0,
        );
        assert_eq!(tiny.status, Status::LowerBound);
    }

    #[test]
    fn a_context_per_slot_gives_the_capacity_of_the_slots() {
        let slots = Estimate::fitted(2.0, 0.5, 1.0, "gauge");
        let e = per_slot(2048, &slots);
        assert_eq!(
            (e.status, e.value, e.high),
            (Status::Reported, 4096.0, Some(4096.0))
        );
        assert!(
            e.how.contains("2048 tokens") && e.how.contains("2 slots"),
            "{}",
            e.how
        );
        assert_eq!(e.note, None);
        let unsure = per_slot(2048, &Estimate::lower_bound(4.0, "never saturated"));
        assert_eq!((unsure.status, unsure.value), (Status::LowerBound, 8192.0));
    }

    #[test]
    fn usage_with_nothing_in_flight_is_a_misfit() {
        let pts: Vec<KvPoint> = (1..=10)
            .map(|k| {
                let t = 1000.0 * f64::from(k);
                point(t, t, 0.1 + t / 100_000.0)
            })
            .collect();
        let e = fit(&pts, 10_000.0, 0.0);
        assert_eq!(e.status, Status::Misfit);
        assert!(e.note.unwrap().contains("10.0%"));
    }
}
