//! Prefill cost and prefix caching from lone requests (concurrency 1). Pure.
//!
//! With nothing else running, a prompt of `n` tokens takes
//! `⌈n / budget⌉ × step_base + per_prefill_token × n + per_prefill_pair ×
//! n(n+1)/2` to its first token (`sim::params`: each token attends over the
//! ones before it), plus the server's own per-request overhead. The probe
//! sends distinct prompts at three or more lengths, each several times, and
//! fits that curve by least squares: the linear coefficient is the cost per
//! token, the quadratic one the cost per attention pair, the intercept the
//! fixed cost. When the probes cannot tell the pair cost from 0 (its
//! standard error not below its value: the simulator, a GPU's short
//! prompts), the straight line ([`super::line`]) gives the cost per token
//! and the pair cost is a range from 0; a line that does not describe the
//! data (a budget the prompts crossed) is flagged, and its interval covers
//! every local slope. On vLLM on CPU the line over 16..2,045 tokens read
//! 376-420 µs a token; the curve 280-314 µs and about 100 ns a pair, as
//! prompts sent together cost (sixteen 128-token prompts in one step: 250 µs
//! a token).
//!
//! Prefix caching: some prompts are sent twice in a row. With caching on,
//! the second one computes (almost) nothing: it saves about the whole
//! prefill, `per_prefill_token × n`; with caching off it saves nothing.

use super::extra_costs::least_squares;
use super::line;
use super::profile::{Estimate, PrefixCaching};
use crate::metrics::stats::{mean, median, robust_sigma};
use serde::{Deserialize, Serialize};

/// One lone request.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TtftSample {
    pub prompt_tokens: u32,
    pub ttft_s: f64,
    /// The same prompt as the sample just before it.
    pub repeat: bool,
}

/// One burst of prompts computed in one step ([`super::prefill_batch`]).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BatchSample {
    pub prompts: u32,
    /// Tokens of each prompt.
    pub tokens: u32,
    /// The step, seconds: the blocker's first token to the burst's.
    pub step_s: f64,
}

impl BatchSample {
    /// The step's prompt tokens and attention pairs.
    pub fn load(&self) -> (f64, f64) {
        let (k, n) = (f64::from(self.prompts), f64::from(self.tokens));
        (k * n, k * n * (n + 1.0) / 2.0)
    }
}

/// The prefill line.
#[derive(Debug, Clone, PartialEq)]
pub struct PrefillFit {
    /// Cost per prompt token, microseconds.
    pub per_token_us: Estimate,
    /// Time to first token of an empty prompt, milliseconds.
    pub fixed_ms: Estimate,
    /// Cost per attention pair of a prompt token, nanoseconds.
    pub pair_ns: Estimate,
    /// The fixed cost of a step of prompts sent together, milliseconds
    /// (with [`super::prefill_batch`]'s steps in the fit).
    pub batch_step: Option<(f64, f64)>,
    /// The longest prompt fitted.
    pub longest: u32,
    /// Whether the line (or the curve) described the data.
    pub linear: bool,
}

impl PrefillFit {
    /// The prefill of `n` prompt tokens at the central costs, seconds.
    pub fn cost_s(&self, n: u32) -> f64 {
        let n = f64::from(n);
        self.per_token_us.value * 1e-6 * n + self.pair_ns.value * 1e-9 * n * (n + 1.0) / 2.0
    }
}

/// The smallest departure from the line that counts (the resolution of a
/// TTFT over HTTP), seconds.
const FLOOR_S: f64 = 0.001;

/// A lone request is taken as held up by a host stall when its TTFT lies
/// more than this many robust σ (and [`FLOOR_S`]) above the median of its
/// length's.
const STALL_SIGMAS: f64 = 3.0;

/// The first sendings as (tokens, seconds), less those a host stall held
/// up, and how many those were. On vLLM on CPU a stall of about 100 ms
/// comes once a second or so (the profile's `stall_*`, which the simulator
/// adds on its own): a 2,000-token prompt meets one about every other
/// sending, and least squares would read the stalls as prefill cost.
fn unstalled(samples: &[TtftSample]) -> (Vec<(f64, f64)>, usize) {
    let first: Vec<&TtftSample> = samples.iter().filter(|s| !s.repeat).collect();
    let median_of = |n: u32| {
        let mut t: Vec<f64> = first
            .iter()
            .filter(|s| s.prompt_tokens == n)
            .map(|s| s.ttft_s)
            .collect();
        t.sort_by(f64::total_cmp);
        median(&t)
    };
    let above: Vec<f64> = first
        .iter()
        .map(|s| s.ttft_s - median_of(s.prompt_tokens))
        .collect();
    let mut sorted = above.clone();
    sorted.sort_by(f64::total_cmp);
    let limit = (STALL_SIGMAS * robust_sigma(&sorted)).max(FLOOR_S);
    let kept: Vec<(f64, f64)> = first
        .iter()
        .zip(&above)
        .filter(|(_, &a)| a <= limit)
        .map(|(s, _)| (f64::from(s.prompt_tokens), s.ttft_s))
        .collect();
    let dropped = first.len() - kept.len();
    (kept, dropped)
}

/// Fits the line over the first sending of each prompt (less the stalled
/// ones); `None` with fewer than 3 samples over at least 2 lengths.
pub fn fit(samples: &[TtftSample], bursts: &[BatchSample]) -> Option<PrefillFit> {
    let (pts, stalled) = unstalled(samples);
    let l = line::fit(&pts, FLOOR_S)?;
    let mut lengths: Vec<u32> = samples.iter().map(|s| s.prompt_tokens).collect();
    lengths.sort_unstable();
    lengths.dedup();
    let lone = format!(
        "{} lone requests at {} lengths ({}..{} tokens{})",
        l.n,
        lengths.len(),
        lengths[0],
        lengths[lengths.len() - 1],
        match stalled {
            0 => String::new(),
            k => format!("; {k} more held up by a host stall, over {STALL_SIGMAS}σ above their length's median, left out"),
        }
    );
    let probes = match bursts.len() {
        0 => lone.clone(),
        k => format!("{lone} and {k} steps of prompts sent together (prefill_batch)"),
    };
    let longest = lengths[lengths.len() - 1];
    let curve = quadratic(&pts, bursts);
    if let Some(c) = curve.as_ref().filter(|c| c.identifiable()) {
        return Some(c.fit(&probes, longest));
    }
    let how = |what: &str| {
        format!("{what} of the least-squares line of TTFT against prompt length: {lone}")
    };
    let mut per_token_us = Estimate::fitted(l.slope * 1e6, l.se_slope * 1e6, 0.0, how("slope"));
    let mut fixed_ms = Estimate::fitted(
        l.intercept * 1e3,
        l.se_intercept * 1e3,
        0.0,
        how("intercept"),
    );
    if let Some(why) = &l.not_linear {
        let why = format!("TTFT is {why} (seconds against tokens)");
        per_token_us = per_token_us.misfit(l.se_slope * 1e6, 0.0, why.clone());
        fixed_ms = fixed_ms.misfit(l.se_intercept * 1e3, 0.0, why);
    }
    // The batched steps' fixed cost stands without a pair cost.
    let batch_step = curve.as_ref().and_then(Curve::batch_step);
    Some(PrefillFit {
        per_token_us,
        fixed_ms,
        pair_ns: curve.map_or_else(
            || Estimate::assumed(0.0, 0.0, Some(0.0), "fewer than 3 lengths: 0 assumed"),
            |c| c.pair_from_zero(&probes),
        ),
        batch_step,
        longest,
        linear: l.not_linear.is_none(),
    })
}

/// The least-squares curve `TTFT = a + b·n + q·n(n+1)/2` (with the
/// batched steps, `step = s + b·N + q·pairs` beside it, the same `b` and
/// `q`): coefficients `[a, b, q(, s)]` and standard errors, seconds.
struct Curve {
    coef: Vec<f64>,
    se: Vec<f64>,
}

/// The curve through the lone points and the batched steps; `None` with
/// fewer than 3 lone lengths (or a singular design).
fn quadratic(pts: &[(f64, f64)], bursts: &[BatchSample]) -> Option<Curve> {
    let mut ns: Vec<u64> = pts.iter().map(|p| p.0 as u64).collect();
    ns.sort_unstable();
    ns.dedup();
    if ns.len() < 3 {
        return None;
    }
    let step = usize::from(!bursts.is_empty());
    let mut x: Vec<Vec<f64>> = pts
        .iter()
        .map(|&(n, _)| [vec![1.0, n, n * (n + 1.0) / 2.0], vec![0.0; step]].concat())
        .collect();
    let mut y: Vec<f64> = pts.iter().map(|p| p.1).collect();
    for b in bursts {
        let (tokens, pairs) = b.load();
        x.push(vec![0.0, tokens, pairs, 1.0]);
        y.push(b.step_s);
    }
    let (coef, se) = least_squares(&x, &y)?;
    coef.iter()
        .chain(&se)
        .all(|v| v.is_finite())
        .then_some(Curve { coef, se })
}

impl Curve {
    /// Whether the probes pin both costs: each positive, with a standard
    /// error below its value.
    fn identifiable(&self) -> bool {
        (1..3).all(|j| self.coef[j] > 0.0 && self.se[j] < self.coef[j])
    }

    fn how(what: &str, probes: &str) -> String {
        format!("{what} of the least-squares curve TTFT = a + b·n + q·n(n+1)/2 (n the prompt's tokens; q each token's attention over the ones before it): {probes}")
    }

    fn fit(&self, probes: &str, longest: u32) -> PrefillFit {
        let (c, se) = (&self.coef, &self.se);
        PrefillFit {
            per_token_us: Estimate::fitted(c[1] * 1e6, se[1] * 1e6, 0.0, Self::how("b", probes)),
            fixed_ms: Estimate::fitted(c[0] * 1e3, se[0] * 1e3, 0.0, Self::how("a", probes)),
            pair_ns: Estimate::fitted(c[2] * 1e9, se[2] * 1e9, 0.0, Self::how("q", probes)),
            batch_step: self.batch_step(),
            longest,
            linear: true,
        }
    }

    /// The batched steps' fixed cost and its standard error, ms.
    fn batch_step(&self) -> Option<(f64, f64)> {
        Some((*self.coef.get(3)? * 1e3, *self.se.get(3)? * 1e3))
    }

    /// The pair cost when the probes cannot tell it from 0: a range from 0
    /// to twice its standard error.
    fn pair_from_zero(&self, probes: &str) -> Estimate {
        let (q, se) = (self.coef[2] * 1e9, self.se[2] * 1e9);
        let mut e = Estimate::fitted(q.max(0.0), se, 0.0, Self::how("q", probes));
        if q < 0.0 {
            e.how += &format!(" (fitted {q:.3}, below 0: held at 0)");
        }
        e.not_identifiable(
            0.0,
            format!("its standard error ({se:.3}) is not below its value ({:.3}), or the cost per token's is not: the line gives the cost per token", q.max(0.0)),
        )
    }
}

/// Whether the samples so far pin the cost per prompt token within
/// [`super::decode::PRECISE`] (1σ) on a line that describes them: then more
/// lone requests would add little.
pub fn precise(samples: &[TtftSample]) -> bool {
    fit(samples, &[]).is_some_and(|f| {
        let c = &f.per_token_us;
        f.linear && c.value > 0.0 && c.uncertainty < super::decode::PRECISE * c.value
    })
}

/// Prefix caching from the repeated prompts, given the prefill of `n`
/// tokens in seconds.
pub fn prefix_caching(samples: &[TtftSample], cost_s: impl Fn(u32) -> f64) -> PrefixCaching {
    let saved: Vec<f64> = samples
        .windows(2)
        .filter(|w| w[1].repeat && w[0].prompt_tokens == w[1].prompt_tokens)
        .filter(|w| w[0].prompt_tokens > 0 && cost_s(w[0].prompt_tokens) > 0.0)
        .map(|w| (w[0].ttft_s - w[1].ttft_s) / cost_s(w[0].prompt_tokens))
        .collect();
    if saved.is_empty() {
        return PrefixCaching {
            enabled: None,
            saved_fraction: None,
            uncertainty: None,
            how: "no prompt was sent twice (or the prefill cost is unknown)".into(),
        };
    }
    let m = mean(&saved);
    let n = saved.len() as f64;
    let se = if saved.len() > 1 {
        (saved.iter().map(|s| (s - m).powi(2)).sum::<f64>() / (n - 1.0) / n).sqrt()
    } else {
        0.0
    };
    // Decided only when the saving is clearly nearer one end than the other.
    let enabled = ((m - 0.5).abs() > 2.0 * se).then_some(m > 0.5);
    PrefixCaching {
        enabled,
        saved_fraction: Some(m),
        uncertainty: Some(se),
        how: format!(
            "{} prompts sent twice in a row: the second saved {:.0}% of the first's prefill time",
            saved.len(),
            m * 100.0
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn samples(ttft: impl Fn(f64) -> f64, lengths: &[u32], repeats: usize) -> Vec<TtftSample> {
        let mut out = Vec::new();
        for k in 0..repeats {
            for &n in lengths {
                // A deterministic ±0.3 ms jitter.
                let jitter = if (k + n as usize) % 2 == 0 {
                    3e-4
                } else {
                    -3e-4
                };
                out.push(TtftSample {
                    prompt_tokens: n,
                    ttft_s: ttft(f64::from(n)) + jitter,
                    repeat: false,
                });
            }
        }
        out
    }

    #[test]
    fn a_line_is_precise_when_its_slope_is_known_within_two_percent() {
        let lengths = [16, 512, 1024, 2048];
        let steady = samples(|n| 0.01 + 100e-6 * n, &lengths, 3);
        assert!(precise(&steady));
        // A busy machine: TTFTs spread over ±0.15 s (no outliers to leave
        // out as stalls), on 128 tokens at most.
        let mut busy = samples(|n| 0.01 + 6e-3 * n, &[16, 32, 64, 96, 128], 3);
        for (i, s) in busy.iter_mut().enumerate() {
            s.ttft_s += 0.1 * (i % 4) as f64 - 0.15;
        }
        assert!(!precise(&busy));
        assert!(!precise(&[]));
    }

    #[test]
    fn a_linear_server_gives_its_cost_per_token() {
        // 12 ms fixed, 150 µs per token.
        let s = samples(|n| 0.012 + 150e-6 * n, &[16, 512, 1024, 2048], 4);
        let f = fit(&s, &[]).unwrap();
        assert!((f.per_token_us.value - 150.0).abs() < 0.05, "{f:?}");
        assert!((f.fixed_ms.value - 12.0).abs() < 0.2, "{f:?}");
        assert!(f.linear && f.per_token_us.uncertainty < 0.5);
        assert_eq!(f.longest, 2048);
        assert_eq!(f.per_token_us.status, crate::twin::Status::Measured);
    }

    #[test]
    fn quadratic_attention_is_read_as_a_cost_per_pair() {
        // 280 µs a token and 100 ns a pair (vLLM on CPU's figures): the
        // line over 64..2040 tokens reads about 380 µs a token.
        let ttft = |n: f64| 0.06 + 280e-6 * n + 100e-9 * n * (n + 1.0) / 2.0;
        let s = samples(ttft, &[64, 512, 1024, 1536, 2040], 4);
        let f = fit(&s, &[]).unwrap();
        assert!(f.linear, "{f:?}");
        assert!((f.per_token_us.value - 280.0).abs() < 2.0, "{f:?}");
        assert!((f.pair_ns.value - 100.0).abs() < 2.0, "{f:?}");
        assert_eq!(f.pair_ns.status, crate::twin::Status::Measured);
        assert!((f.cost_s(512) - (ttft(512.0) - 0.06)).abs() < 1e-3);
        let l = line::fit(
            &s.iter()
                .map(|x| (f64::from(x.prompt_tokens), x.ttft_s))
                .collect::<Vec<_>>(),
            FLOOR_S,
        )
        .unwrap();
        assert!(l.slope > 350e-6, "the line's slope {}", l.slope);
    }

    #[test]
    fn host_stalls_on_lone_prompts_are_left_out_of_the_curve() {
        // vLLM on CPU's curve, 8 rounds, and a 100 ms stall on one sending
        // in three of the three longest lengths (a stall a second).
        let ttft = |n: f64| 0.06 + 280e-6 * n + 100e-9 * n * (n + 1.0) / 2.0;
        let mut s = samples(ttft, &[16, 511, 1022, 1533, 2045], 8);
        for (i, x) in s.iter_mut().enumerate() {
            if x.prompt_tokens > 1000 && i % 3 == 0 {
                x.ttft_s += 0.1;
            }
        }
        let f = fit(&s, &[]).unwrap();
        assert!((f.per_token_us.value - 280.0).abs() < 3.0, "{f:?}");
        assert!((f.pair_ns.value - 100.0).abs() < 3.0, "{f:?}");
        assert!(f
            .per_token_us
            .how
            .contains("8 more held up by a host stall"));
    }

    #[test]
    fn a_line_leaves_the_pair_cost_a_range_from_zero() {
        let s = samples(|n| 0.012 + 150e-6 * n, &[16, 512, 1024, 2048], 4);
        let f = fit(&s, &[]).unwrap();
        let q = &f.pair_ns;
        assert_eq!(q.status, crate::twin::Status::NotIdentifiable, "{q:?}");
        assert_eq!(q.low, 0.0);
        // 0.3 ms of jitter on 2,048 tokens: no more than a few ns a pair.
        assert!(q.high.unwrap() < 5.0, "{q:?}");
    }

    #[test]
    fn a_curve_bending_down_is_flagged_and_widened() {
        // Cheaper per token the longer the prompt (no attention model
        // fits): the pair cost comes out below 0 and the line is flagged.
        let s = samples(
            |n| 0.01 + 150e-6 * n - 2e-8 * n * n,
            &[256, 1024, 2048, 3072],
            3,
        );
        let f = fit(&s, &[]).unwrap();
        assert!(!f.linear);
        let e = &f.per_token_us;
        assert_eq!(e.status, crate::twin::Status::Misfit);
        assert!(e.note.as_deref().unwrap().contains("not linear"));
        assert_eq!(f.pair_ns.value, 0.0);
    }

    #[test]
    fn repeated_prompts_tell_whether_the_prefix_is_cached() {
        let c_p = 100e-6;
        let pair = |n: u32, second: f64| {
            [
                TtftSample {
                    prompt_tokens: n,
                    ttft_s: 0.01 + c_p * f64::from(n),
                    repeat: false,
                },
                TtftSample {
                    prompt_tokens: n,
                    ttft_s: second,
                    repeat: true,
                },
            ]
        };
        let on: Vec<TtftSample> = [pair(1000, 0.0116), pair(2000, 0.0117)].concat();
        let p = prefix_caching(&on, |n| c_p * f64::from(n));
        assert_eq!(p.enabled, Some(true), "{p:?}");
        assert!(p.saved_fraction.unwrap() > 0.95);
        let off: Vec<TtftSample> = [pair(1000, 0.1101), pair(2000, 0.2098)].concat();
        assert_eq!(
            prefix_caching(&off, |n| c_p * f64::from(n)).enabled,
            Some(false)
        );
        // Halfway, or nothing repeated: undecided.
        let mid: Vec<TtftSample> = [pair(1000, 0.06), pair(2000, 0.11)].concat();
        assert_eq!(prefix_caching(&mid, |n| c_p * f64::from(n)).enabled, None);
        assert_eq!(
            prefix_caching(&on[..1], |n| c_p * f64::from(n)).enabled,
            None
        );
    }
}
