//! Cost at the knee (`--gpu-hour-cost`, `--gpus`): dollars per million
//! output tokens at each step's measured output rate and at the knee. Pure.

use super::sweep::{SweepResult, Verdict};
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

/// Price every step and the knee (the last passing step at the knee's load).
pub fn apply(r: &mut SweepResult, p: Pricing) {
    for s in &mut r.steps {
        s.usd_per_million_output_tokens = usd_per_million_output_tokens(p, s.output_token_rate);
    }
    let knee = r.knee.last_pass.and_then(|load| {
        r.steps
            .iter()
            .rev()
            .find(|s| s.load == load && s.verdict == Verdict::Pass)
    });
    r.cost = Some(CostSummary {
        gpu_hour_cost: p.gpu_hour_cost,
        gpus: p.gpus,
        knee_load: knee.map(|s| s.load),
        knee_output_token_rate: knee.map(|s| s.output_token_rate),
        usd_per_million_output_tokens_at_knee: knee.and_then(|s| s.usd_per_million_output_tokens),
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::report::table::fixture::sweep_with;

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

    #[test]
    fn the_knee_is_priced_at_its_passing_step() {
        let mut r = sweep_with(&[1.0, 2.0], &[4.0]);
        for (s, rate) in r.steps.iter_mut().zip([100.0, 200.0, 250.0]) {
            s.output_token_rate = rate;
        }
        let p = Pricing {
            gpu_hour_cost: 3.6,
            gpus: 1,
        };
        apply(&mut r, p);
        let c = r.cost.clone().unwrap();
        assert_eq!(c.knee_load, Some(2.0));
        // $0.001/s at 200 tok/s: $5 per million.
        assert!((c.usd_per_million_output_tokens_at_knee.unwrap() - 5.0).abs() < 1e-9);
        assert!((r.steps[0].usd_per_million_output_tokens.unwrap() - 10.0).abs() < 1e-9);
    }
}
