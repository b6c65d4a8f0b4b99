//! The predicted knee over a grid of workload shapes: prompt length ×
//! output length × the share of each prompt that is one shared prefix. Each
//! cell is a [`Prediction`] (its binding resource included, what moves it
//! not); a cell the model cannot run (a shape longer than `max_model_len`)
//! carries its error instead of stopping the grid. Each cell's search
//! starts from the knee of the cell before it, scaled by the ratio of their
//! computed capacities (a knee sits at a similar share of μ from one shape
//! to the next), so only the first cell searches cold. Pure.

use super::knee::{service_rate, Hint};
use super::predict::{predict_from, PredictConfig, Prediction, Replicas};
use crate::sim::virtual_time::VirtualLoad;
use serde::{Deserialize, Serialize};

/// The shapes to predict.
#[derive(Debug, Clone, PartialEq)]
pub struct GridSpec {
    /// Prompt lengths (tokens, the shared prefix included).
    pub inputs: Vec<u32>,
    /// Output lengths (tokens).
    pub outputs: Vec<u32>,
    /// Shares (0..1) of each prompt that is a shared prefix.
    pub prefix_shares: Vec<f64>,
}

/// One shape's prediction.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GridCell {
    /// Prompt tokens, the shared prefix included.
    pub input_len: u32,
    /// Output tokens.
    pub output_len: u32,
    /// Share of the prompt that is a shared prefix.
    pub prefix_share: f64,
    /// The prediction, when the model could run the shape.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prediction: Option<Prediction>,
    /// Why it could not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
    /// Replicas for `--target-rate`, when asked.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub replicas: Option<Replicas>,
}

impl GridSpec {
    /// Cells in order: prefix share, then prompt length, then output length.
    pub fn shapes(&self) -> Vec<(u32, u32, f64)> {
        let mut out = Vec::new();
        for &share in &self.prefix_shares {
            for &input in &self.inputs {
                for &output in &self.outputs {
                    out.push((input, output, share));
                }
            }
        }
        out
    }
}

/// Tokens of a shared prefix that is `share` of a prompt of `input` tokens.
pub fn prefix_tokens(input: u32, share: f64) -> u32 {
    ((f64::from(input) * share.clamp(0.0, 1.0)).round() as u32).min(input)
}

/// The search of one shape: `base` with its load reshaped, without moves.
pub fn cell_config(base: &PredictConfig, input: u32, output: u32, share: f64) -> PredictConfig {
    let prefix = prefix_tokens(input, share);
    let mut cfg = base.clone();
    cfg.truth.load = VirtualLoad {
        input_len: input - prefix,
        output_len: output,
        shared_prefix: prefix,
        ..base.truth.load.clone()
    };
    cfg.moves = false;
    cfg
}

/// Predicts every cell of `spec` (see [`GridSpec::shapes`] for the order).
pub fn predict_grid(base: &PredictConfig, spec: &GridSpec) -> Vec<GridCell> {
    let mut last: Option<(Hint, f64)> = None;
    spec.shapes()
        .into_iter()
        .map(|(input, output, share)| {
            let cfg = cell_config(base, input, output, share);
            let mu = service_rate(&cfg.truth);
            let hint = last.map(|(h, was)| Hint {
                rate: h.rate * mu / was,
                step: NEIGHBOUR_STEP,
                slope: h.slope,
                fails_at: None,
            });
            let found = predict_from(&cfg, hint.filter(|h| h.rate.is_finite()));
            if let Ok((_, Some(h))) = &found {
                last = Some((*h, mu));
            }
            GridCell {
                input_len: input,
                output_len: output,
                prefix_share: share,
                error: found.as_ref().err().cloned(),
                prediction: found.ok().map(|(p, _)| p),
                replicas: None,
            }
        })
        .collect()
}

/// The first step out from a neighbouring cell's scaled knee.
const NEIGHBOUR_STEP: f64 = 0.1;

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::{preset, ModelParams};
    use crate::twin::knee::TruthConfig;
    use std::time::Duration;

    fn base() -> PredictConfig {
        PredictConfig {
            truth: TruthConfig {
                params: ModelParams {
                    per_prefill_token: Duration::from_micros(50),
                    ..preset::tiny()
                },
                load: VirtualLoad::fixed(1, 1, 100, 1_000),
                slos: vec!["p99_ttft_ms<=500".parse().unwrap()],
                range_ratio: (0.0, 0.0),
                burstiness: 1.0,
                seeds: vec![0],
                precision: 0.02,
                tail: crate::sim::params::HostStalls::NONE,
            },
            corners: Vec::new(),
            moves: true,
            misfit: None,
        }
    }

    #[test]
    fn a_cell_splits_its_prompt_into_prefix_and_own_tokens() {
        let c = cell_config(&base(), 1000, 64, 0.9);
        let l = &c.truth.load;
        assert_eq!((l.shared_prefix, l.input_len, l.output_len), (900, 100, 64));
        assert_eq!(l.shape(3), (1000, 64));
        assert!(!c.moves);
        assert_eq!(prefix_tokens(100, 1.0), 100);
        assert_eq!(prefix_tokens(100, 0.0), 0);
    }

    #[test]
    fn longer_prompts_lower_the_knee_and_a_shared_prefix_raises_it_again() {
        let spec = GridSpec {
            inputs: vec![256, 2048],
            outputs: vec![32],
            prefix_shares: vec![0.0, 0.9],
        };
        let cells = predict_grid(&base(), &spec);
        let shapes: Vec<(u32, f64)> = cells
            .iter()
            .map(|c| (c.input_len, c.prefix_share))
            .collect();
        assert_eq!(
            shapes,
            vec![(256, 0.0), (2048, 0.0), (256, 0.9), (2048, 0.9)]
        );
        let knee = |i: usize| cells[i].prediction.as_ref().unwrap().knee_req_s;
        assert!(knee(1) < 0.5 * knee(0), "{} vs {}", knee(1), knee(0));
        assert!(knee(3) > 2.0 * knee(1), "{} vs {}", knee(3), knee(1));
        assert!(cells
            .iter()
            .all(|c| c.prediction.as_ref().unwrap().explain.is_some()));
    }

    #[test]
    fn a_shape_the_model_refuses_keeps_its_error_and_the_rest_run() {
        let spec = GridSpec {
            inputs: vec![128, 8000],
            outputs: vec![16],
            prefix_shares: vec![0.0],
        };
        let cells = predict_grid(&base(), &spec);
        assert!(cells[0].prediction.is_some() && cells[0].error.is_none());
        assert!(cells[1].prediction.is_none());
        assert!(cells[1].error.as_ref().unwrap().contains("max_model_len"));
    }
}
