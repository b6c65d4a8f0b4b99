//! Why a knee is where it is ([`KneeExplain`]): the resource that binds it,
//! the evidence, one line for the console, and, for a predicted knee, what
//! moves it. One result type for both explanations: the model's
//! (`twin::explain`, from its utilisation at the knee) and the gauges'
//! (`twin::measured`, from a sweep's steps), so a prediction's JSON and a
//! sweep's knee block can carry the same `explain` object.

use serde::{Deserialize, Serialize};

/// The resource that sets the knee.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Binding {
    /// Every batch slot (`max_num_seqs`) is taken: requests queue for one.
    BatchSlots,
    /// The KV cache is full: preemptions, or requests queue for blocks.
    KvCache,
    /// Computing prompt tokens takes the step time (long prompts, TTFT).
    PrefillCompute,
    /// The fixed step cost and decoding sequences take the step time
    /// (a TPOT/ITL SLO, or long outputs).
    DecodeCompute,
    /// The load generator could not keep to its schedule.
    Client,
    /// The evidence does not say (no gauges, no failing step).
    Unknown,
}

impl Binding {
    /// A short human name (`batch slots full`, `KV-cache capacity`, ...).
    pub fn label(self) -> &'static str {
        match self {
            Binding::BatchSlots => "batch slots full",
            Binding::KvCache => "KV-cache capacity",
            Binding::PrefillCompute => "prefill compute",
            Binding::DecodeCompute => "decode compute",
            Binding::Client => "the client (generator-limited)",
            Binding::Unknown => "unknown",
        }
    }
}

/// Where an explanation's evidence comes from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ExplainSource {
    /// The engine model's utilisation at a predicted knee (virtual time).
    Model,
    /// The server's gauges during a sweep's steps around a measured knee.
    Gauges,
}

/// What each resource did at the knee; `None` where the source cannot say.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Evidence {
    /// Mean sequences in the running batch.
    pub mean_running: Option<f64>,
    /// The batch limit (`max_num_seqs`), when known.
    pub max_num_seqs: Option<u32>,
    /// Share of the time every batch slot was taken.
    pub full_slots_share: Option<f64>,
    /// Mean requests waiting for admission.
    pub mean_waiting: Option<f64>,
    /// Mean KV-cache usage, 0..=1.
    pub kv_usage: Option<f64>,
    /// Share of the time requests waited with a slot free but no KV room.
    pub kv_blocked_share: Option<f64>,
    /// Preemptions per request.
    pub preemptions_per_request: Option<f64>,
    /// Share of the engine's work (each part at its whole compute time)
    /// spent on the steps' fixed cost.
    pub base_share: Option<f64>,
    /// Share of the work spent computing prompt tokens.
    pub prefill_share: Option<f64>,
    /// Share of the work spent on decoding sequences.
    pub decode_share: Option<f64>,
}

/// The knee with the binding parameter at one value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MovedKnee {
    /// The parameter's value (in the unit of [`Moves::parameter`]).
    pub value: f64,
    /// The knee there (req/s); `None` when the model refused the value.
    pub knee: Option<f64>,
}

/// What moves the knee: the knee at ±25% of the binding parameter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Moves {
    /// The parameter, named as its simulator flag (`max_num_seqs`,
    /// `kv_cache_tokens`, `prefill_token_us`, `decode_seq_us`, `step_base_ms`).
    pub parameter: String,
    /// Its value now.
    pub value: f64,
    /// The knee at 75% of it.
    pub minus_25: MovedKnee,
    /// The knee at 125% of it.
    pub plus_25: MovedKnee,
}

/// Why the knee is where it is.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct KneeExplain {
    /// The resource that binds.
    pub binds: Binding,
    /// Model or gauges.
    pub source: ExplainSource,
    /// One line for the console: the binding and its evidence.
    pub line: String,
    /// SLOs that failed just above the knee (empty when only throughput did).
    pub failed_slos: Vec<String>,
    /// The numbers behind the line.
    pub evidence: Evidence,
    /// What moves it (predicted knees only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub moves: Option<Moves>,
}

impl Moves {
    /// `max_num_seqs 4: at 3 (−25%) 30.1 req/s, at 5 (+25%) 38.0 req/s`.
    pub fn line(&self) -> String {
        let at = |m: &MovedKnee, pct: &str| {
            let knee = m.knee.map_or("refused by the model".to_string(), |k| {
                format!("{k:.1} req/s")
            });
            format!("at {} ({pct}) {knee}", trim(m.value))
        };
        format!(
            "{} {}: {}, {}",
            self.parameter,
            trim(self.value),
            at(&self.minus_25, "−25%"),
            at(&self.plus_25, "+25%")
        )
    }
}

/// A parameter value without trailing zeros (`4`, `0.06`, `12.5`).
fn trim(v: f64) -> String {
    let s = format!("{v:.3}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bindings_serialize_as_snake_case_names() {
        let names: Vec<String> = [
            Binding::BatchSlots,
            Binding::KvCache,
            Binding::PrefillCompute,
            Binding::DecodeCompute,
            Binding::Client,
        ]
        .iter()
        .map(|b| serde_json::to_string(b).unwrap())
        .collect();
        assert_eq!(
            names,
            [
                "\"batch_slots\"",
                "\"kv_cache\"",
                "\"prefill_compute\"",
                "\"decode_compute\"",
                "\"client\""
            ]
        );
    }

    #[test]
    fn the_moves_line_names_the_parameter_and_both_knees() {
        let m = Moves {
            parameter: "max_num_seqs".into(),
            value: 4.0,
            minus_25: MovedKnee {
                value: 3.0,
                knee: Some(30.06),
            },
            plus_25: MovedKnee {
                value: 5.0,
                knee: None,
            },
        };
        assert_eq!(
            m.line(),
            "max_num_seqs 4: at 3 (−25%) 30.1 req/s, at 5 (+25%) refused by the model"
        );
    }
}
