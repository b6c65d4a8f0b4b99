//! What the server says about itself beside what the probes measured
//! (issue 38, item 2): vLLM publishes its KV cache and whether it caches
//! prefixes (`vllm:cache_config_info`). The profile takes the server's
//! figure as `reported`, keeps what the probes saw in `how`, and warns when
//! the two disagree by more than [`DISAGREE`]. Pure: the command layer
//! reads the metric and passes the values.

use super::profile::{Estimate, PrefixCaching, Status};

/// A probe this far (relative) from the server's own figure disagrees.
pub const DISAGREE: f64 = 0.25;

/// Where the figures come from.
const SOURCE: &str = "vllm:cache_config_info";

/// The KV cache: the server's `kv_cache_size_tokens` when it reports one
/// (with the probes' estimate in `how`), else the probes' estimate; and a
/// warning when the probes disagree.
pub fn kv(probed: Estimate, reported: Option<u64>) -> (Estimate, Option<String>) {
    let Some(r) = reported.filter(|&r| r > 0).map(|r| r as f64) else {
        return (probed, None);
    };
    let (v, s) = (probed.value, probed.uncertainty);
    let seen = match probed.status {
        Status::Measured | Status::Misfit => format!("{v:.0} ± {s:.0} tokens"),
        Status::LowerBound => format!("at least {v:.0} tokens"),
        Status::NotIdentifiable => format!("{v:.0} tokens, not identifiable"),
        Status::Reported | Status::Assumed => format!("{v:.0} tokens"),
    };
    let off = match probed.status {
        Status::Measured | Status::Misfit => (v - r).abs() / r > DISAGREE,
        Status::LowerBound => v > r * (1.0 + DISAGREE),
        _ => false,
    };
    let mut e = Estimate::reported(
        r,
        format!("kv_cache_size_tokens in {SOURCE}; the probes measured {seen}"),
    );
    let warning = off.then(|| {
        format!(
            "KV cache: the server reports {r:.0} tokens ({SOURCE}) but the probes measured {seen}, {:.0}% {}: the profile uses the server's figure; the usage gauge against the tokens in flight did not describe this server's cache",
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
}
