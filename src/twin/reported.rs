//! What the server says about itself beside what the probes measured
//! (issue 38, item 2): vLLM publishes its KV cache and whether it caches
//! prefixes (`vllm:cache_config_info`) and, in dev mode, its scheduler's
//! batch limit and token budget (`/server_info`). The profile takes the server's
//! figure as `reported`, keeps what the probes saw in `how`, and warns when
//! the two disagree by more than [`DISAGREE`]. Pure: the command layer
//! reads the metric and passes the values.

use super::profile::{Estimate, PrefixCaching, Status};

/// A probe this far (relative) from the server's own figure disagrees.
pub const DISAGREE: f64 = 0.25;

/// Where the cache figures come from.
const SOURCE: &str = "vllm:cache_config_info";

/// One figure a server can report about itself: its parameter's name in
/// the warnings, the server's key, where the key is read, and the unit.
#[derive(Debug, Clone, Copy)]
pub struct Figure {
    pub name: &'static str,
    pub key: &'static str,
    pub source: &'static str,
    pub unit: &'static str,
}

/// vLLM's KV cache in `vllm:cache_config_info`.
pub const KV_CACHE: Figure = Figure {
    name: "KV cache",
    key: "kv_cache_size_tokens",
    source: SOURCE,
    unit: "tokens",
};

/// vLLM's running-batch limit, in a dev-mode server's `/server_info`.
pub const MAX_NUM_SEQS: Figure = Figure {
    name: "batch limit",
    key: "max_num_seqs",
    source: "/server_info",
    unit: "sequences",
};

/// vLLM's token budget of one engine step, in a dev-mode `/server_info`.
pub const TOKEN_BUDGET: Figure = Figure {
    name: "token budget per step",
    key: "max_num_batched_tokens",
    source: "/server_info",
    unit: "tokens",
};

/// The KV cache: the server's `kv_cache_size_tokens` when it reports one
/// (with the probes' estimate in `how`), else the probes' estimate; and a
/// warning when the probes disagree.
pub fn kv(probed: Estimate, reported: Option<u64>) -> (Estimate, Option<String>) {
    figure(KV_CACHE, probed, reported)
}

/// A figure the server reports, taken over the probes' estimate of it (kept
/// in `how`); a warning when the probes measured it more than [`DISAGREE`]
/// away (a lower bound: only when it lies above the server's figure).
pub fn figure(f: Figure, probed: Estimate, reported: Option<u64>) -> (Estimate, Option<String>) {
    let Some(r) = reported.filter(|&r| r > 0).map(|r| r as f64) else {
        return (probed, None);
    };
    let (v, s, unit) = (probed.value, probed.uncertainty, f.unit);
    let seen = match probed.status {
        Status::Measured | Status::Misfit => format!("{v:.0} ± {s:.0} {unit}"),
        Status::LowerBound => format!("at least {v:.0} {unit}"),
        Status::NotIdentifiable => format!("{v:.0} {unit}, not identifiable"),
        Status::Reported | Status::Assumed => format!("{v:.0} {unit}"),
    };
    let off = match probed.status {
        Status::Measured | Status::Misfit => (v - r).abs() / r > DISAGREE,
        Status::LowerBound => v > r * (1.0 + DISAGREE),
        _ => false,
    };
    let mut e = Estimate::reported(
        r,
        format!("{} in {}; the probes measured {seen}", f.key, f.source),
    );
    let warning = off.then(|| {
        format!(
            "{}: the server reports {r:.0} {unit} ({} in {}) but the probes measured {seen}, {:.0}% {}: the profile uses the server's figure",
            f.name,
            f.key,
            f.source,
            100.0 * (v - r).abs() / r,
            if v < r { "lower" } else { "higher" },
        )
    });
    e.note.clone_from(&warning);
    (e, warning)
}

/// Prefix caching: the server's `enable_prefix_caching` when it reports it
/// (the probes' saving kept), else the probes' verdict; and a warning when
/// the probes decided the other way.
pub fn prefix(probed: PrefixCaching, reported: Option<bool>) -> (PrefixCaching, Option<String>) {
    let Some(on) = reported else {
        return (probed, None);
    };
    let word = |b: bool| if b { "on" } else { "off" };
    let warning = (probed.enabled == Some(!on)).then(|| {
        format!(
            "prefix caching: the server reports it {} ({SOURCE}) but the probes found it {} ({}); the profile uses the server's setting",
            word(on),
            word(!on),
            probed.how
        )
    });
    let how = format!(
        "enable_prefix_caching {} in {SOURCE}; the probes: {}",
        word(on),
        probed.how
    );
    (
        PrefixCaching {
            enabled: Some(on),
            how,
            ..probed
        },
        warning,
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_servers_kv_figure_is_reported_and_a_far_probe_is_flagged() {
        // Issue 38: vLLM said 93,184 tokens, the probes 17,516 ± 28,269.
        let probed = Estimate::fitted(17_516.0, 28_269.0, 9_000.0, "gauge");
        let (e, w) = kv(probed, Some(93_184));
        assert_eq!(
            (e.status, e.value, e.high),
            (Status::Reported, 93_184.0, Some(93_184.0))
        );
        assert!(e.how.contains("17516 ± 28269"), "{}", e.how);
        let w = w.unwrap();
        assert!(w.contains("81% lower"), "{w}");
        assert_eq!(e.note.as_deref(), Some(w.as_str()));
        // Within 25%: reported, no warning.
        let close = Estimate::fitted(80_000.0, 2_000.0, 9_000.0, "gauge");
        let (e, w) = kv(close, Some(93_184));
        assert_eq!((e.status, w, e.note), (Status::Reported, None, None));
        // A lower bound disagrees only when it is above the figure.
        let (_, w) = kv(Estimate::lower_bound(20_000.0, "held"), Some(93_184));
        assert_eq!(w, None);
        let (_, w) = kv(Estimate::lower_bound(200_000.0, "held"), Some(93_184));
        assert!(w.unwrap().contains("higher"));
        // Nothing reported: the probes' estimate as it was.
        let probed = Estimate::fitted(50_000.0, 1_000.0, 0.0, "gauge");
        assert_eq!(kv(probed.clone(), None), (probed, None));
    }

    #[test]
    fn the_servers_prefix_caching_is_taken_and_a_contrary_probe_is_flagged() {
        let probed = PrefixCaching {
            enabled: Some(false),
            saved_fraction: Some(0.02),
            uncertainty: Some(0.01),
            how: "2 prompts sent twice".into(),
        };
        let (p, w) = prefix(probed.clone(), Some(true));
        assert_eq!((p.enabled, p.saved_fraction), (Some(true), Some(0.02)));
        assert!(p.how.starts_with("enable_prefix_caching on"), "{}", p.how);
        assert!(w.unwrap().contains("reports it on"));
        let (p, w) = prefix(probed.clone(), Some(false));
        assert_eq!((p.enabled, w), (Some(false), None));
        assert_eq!(prefix(probed.clone(), None), (probed, None));
    }

    #[test]
    fn the_servers_scheduler_limits_are_reported_and_a_far_budget_is_flagged() {
        // Issue 38: the probes read a token budget of 99.9 ± 15 where the
        // server's max_num_batched_tokens is 2048.
        let probed = Estimate::fitted(99.9, 15.0, 0.0, "chunk sizes");
        let (e, w) = figure(TOKEN_BUDGET, probed, Some(2048));
        assert_eq!((e.status, e.value), (Status::Reported, 2048.0));
        assert!(
            e.how.contains("max_num_batched_tokens in /server_info"),
            "{}",
            e.how
        );
        assert!(w
            .unwrap()
            .starts_with("token budget per step: the server reports 2048 tokens"));
        // The batch limit measured right: reported, no warning.
        let seen = Estimate::fitted(128.0, 1.0, 0.0, "running gauge");
        let (e, w) = figure(MAX_NUM_SEQS, seen, Some(128));
        assert_eq!((e.value, w), (128.0, None));
    }
}
