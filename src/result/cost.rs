//! Cost at the knee (`--gpu-hour-cost`, `--gpus`): what the serving
//! hardware costs, the sweep JSON's `cost` block, and dollars per million
//! output tokens at a measured output rate. A sweep is priced by
//! [`super::sweep::SweepResult::price`]. Pure.

use serde::{Deserialize, Serialize};

/// What the serving hardware costs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Pricing {
    /// Dollars per GPU-hour.
    pub gpu_hour_cost: f64,
    /// GPUs serving the model.
    pub gpus: u32,
}

/// The sweep JSON's `cost` block.
#[derive(Debug, Clone, PartialEq, Default, Serialize, Deserialize)]
pub struct CostSummary {
    pub gpu_hour_cost: f64,
    pub gpus: u32,
    /// The knee's load, when there is one.
    pub knee_load: Option<f64>,
    /// Output tokens/s measured at the knee.
    pub knee_output_token_rate: Option<f64>,
    /// Dollars per million output tokens at the knee.
    pub usd_per_million_output_tokens_at_knee: Option<f64>,
}

/// Dollars per million output tokens while producing `tokens_per_s`
/// (`None` when nothing was produced).
pub fn usd_per_million_output_tokens(p: Pricing, tokens_per_s: f64) -> Option<f64> {
    let dollars_per_s = p.gpu_hour_cost * f64::from(p.gpus) / 3600.0;
    (tokens_per_s.is_finite() && tokens_per_s > 0.0).then(|| dollars_per_s / tokens_per_s * 1e6)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn two_gpus_at_2_50_an_hour_making_1000_tokens_a_second_cost_1_39_per_million() {
        let p = Pricing {
            gpu_hour_cost: 2.5,
            gpus: 2,
        };
        // $5/h = $0.0013889/s; 1000 tok/s → $1.3889 per million tokens.
        let usd = usd_per_million_output_tokens(p, 1000.0).unwrap();
        assert!((usd - 5.0 / 3.6).abs() < 1e-9, "{usd}");
        assert_eq!(usd_per_million_output_tokens(p, 0.0), None);
    }
}
