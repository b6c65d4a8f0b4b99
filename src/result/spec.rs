//! The server's speculative decoding over a run or a sweep step
//! (`spec_decode` in both results; in a run's JSON also vLLM's own
//! `spec_decode_*` keys): acceptance rate, mean acceptance length and
//! per-position acceptance, as `vllm bench serve` defines them.

use serde::{Deserialize, Serialize};

/// Speculative decoding between the start and the end of a run or step:
/// the delta of vLLM's `vllm:spec_decode_*` counters, or SGLang's gauges
/// at the end (it exports no counters).
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct SpecDecodeStats {
    /// `vllm` (counters' delta) or `sglang` (gauges at the end; no counts).
    pub source: String,
    /// Accepted over drafted tokens, in percent (vLLM's `Acceptance rate (%)`).
    pub acceptance_rate: f64,
    /// `1 + accepted / drafts`: tokens per draft, the bonus token included
    /// (vLLM's `Acceptance length`).
    pub acceptance_length: f64,
    /// Drafts proposed (vLLM only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub num_drafts: Option<u64>,
    /// Draft tokens proposed (vLLM only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub draft_tokens: Option<u64>,
    /// Draft tokens accepted (vLLM only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_tokens: Option<u64>,
    /// For each draft position (0-based), the share of drafts that accepted
    /// it, 0..=1 (vLLM only).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub per_position_acceptance_rates: Vec<f64>,
}

impl SpecDecodeStats {
    /// vLLM's numbers from the counters' deltas: `None` when no draft token
    /// was proposed (as `vllm bench serve` prints nothing then).
    /// `accepted_per_pos` holds each position's accepted drafts.
    pub fn from_counts(
        drafts: u64,
        draft_tokens: u64,
        accepted: u64,
        accepted_per_pos: &[u64],
    ) -> Option<Self> {
        if draft_tokens == 0 {
            return None;
        }
        let per_position = match drafts {
            0 => Vec::new(),
            n => accepted_per_pos
                .iter()
                .map(|&a| a as f64 / n as f64)
                .collect(),
        };
        Some(Self {
            source: "vllm".into(),
            acceptance_rate: accepted as f64 / draft_tokens as f64 * 100.0,
            acceptance_length: match drafts {
                0 => 0.0,
                n => 1.0 + accepted as f64 / n as f64,
            },
            num_drafts: Some(drafts),
            draft_tokens: Some(draft_tokens),
            accepted_tokens: Some(accepted),
            per_position_acceptance_rates: per_position,
        })
    }

    /// The counters of two servers added up: `None` for SGLang's gauges
    /// (a rate and a length cannot be added without their counts).
    pub fn add(&self, other: &Self) -> Option<Self> {
        let counts = |s: &Self| {
            let drafts = s.num_drafts?;
            let per_pos: Vec<u64> = s
                .per_position_acceptance_rates
                .iter()
                .map(|r| (r * drafts as f64).round() as u64)
                .collect();
            Some((drafts, s.draft_tokens?, s.accepted_tokens?, per_pos))
        };
        let (a, b) = (counts(self)?, counts(other)?);
        let positions = a.3.len().max(b.3.len());
        let at = |v: &[u64], i: usize| v.get(i).copied().unwrap_or(0);
        let per_pos: Vec<u64> = (0..positions).map(|i| at(&a.3, i) + at(&b.3, i)).collect();
        Self::from_counts(a.0 + b.0, a.1 + b.1, a.2 + b.2, &per_pos)
    }

    /// SGLang's gauges: its acceptance length and rate (0..=1).
    pub fn from_sglang(accept_length: f64, accept_rate: f64) -> Self {
        Self {
            source: "sglang".into(),
            acceptance_rate: accept_rate * 100.0,
            acceptance_length: accept_length,
            ..Self::default()
        }
    }
}

/// vLLM's top-level keys of a run's JSON (`vllm bench serve` writes them
/// only when the server exports the counters), in vLLM's order.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct VllmSpecKeys {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_decode_acceptance_rate: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_decode_acceptance_length: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_decode_num_drafts: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_decode_draft_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_decode_accepted_tokens: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub spec_decode_per_position_acceptance_rates: Option<Vec<f64>>,
}

/// The names of [`VllmSpecKeys`]' keys (a `--metadata` key may not take them).
pub const VLLM_KEYS: [&str; 6] = [
    "spec_decode_acceptance_rate",
    "spec_decode_acceptance_length",
    "spec_decode_num_drafts",
    "spec_decode_draft_tokens",
    "spec_decode_accepted_tokens",
    "spec_decode_per_position_acceptance_rates",
];

impl VllmSpecKeys {
    /// The keys for `s` (none for SGLang's gauges, which vLLM never writes).
    pub fn of(s: Option<&SpecDecodeStats>) -> Self {
        match s {
            Some(s) if s.source == "vllm" => Self {
                spec_decode_acceptance_rate: Some(s.acceptance_rate),
                spec_decode_acceptance_length: Some(s.acceptance_length),
                spec_decode_num_drafts: s.num_drafts,
                spec_decode_draft_tokens: s.draft_tokens,
                spec_decode_accepted_tokens: s.accepted_tokens,
                spec_decode_per_position_acceptance_rates: Some(
                    s.per_position_acceptance_rates.clone(),
                ),
            },
            _ => Self::default(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vllms_definitions_of_rate_length_and_positions() {
        let s = SpecDecodeStats::from_counts(100, 400, 250, &[90, 80, 50, 30]).unwrap();
        assert_eq!(s.acceptance_rate, 62.5);
        assert_eq!(s.acceptance_length, 3.5);
        assert_eq!(s.per_position_acceptance_rates, [0.9, 0.8, 0.5, 0.3]);
        assert_eq!(SpecDecodeStats::from_counts(0, 0, 0, &[]), None);
        let other = SpecDecodeStats::from_counts(50, 200, 100, &[40, 30, 20, 10]).unwrap();
        let sum = s.add(&other).unwrap();
        let want = SpecDecodeStats::from_counts(150, 600, 350, &[130, 110, 70, 40]).unwrap();
        assert_eq!(sum.num_drafts, want.num_drafts);
        assert_eq!(sum.accepted_tokens, want.accepted_tokens);
        assert!((sum.acceptance_length - want.acceptance_length).abs() < 1e-12);
        for (g, w) in sum
            .per_position_acceptance_rates
            .iter()
            .zip(&want.per_position_acceptance_rates)
        {
            assert!((g - w).abs() < 1e-12, "{g} vs {w}");
        }
        assert_eq!(s.add(&SpecDecodeStats::from_sglang(2.5, 0.6)), None);
        let keys = serde_json::to_value(VllmSpecKeys::of(Some(&s))).unwrap();
        let names: Vec<&str> = keys
            .as_object()
            .unwrap()
            .keys()
            .map(String::as_str)
            .collect();
        assert_eq!(names, VLLM_KEYS);
        assert_eq!(keys["spec_decode_num_drafts"], 100);
        let sglang = SpecDecodeStats::from_sglang(2.5, 0.5);
        assert_eq!(sglang.acceptance_rate, 50.0);
        let none = serde_json::to_value(VllmSpecKeys::of(Some(&sglang))).unwrap();
        assert_eq!(none, serde_json::json!({}));
    }
}
