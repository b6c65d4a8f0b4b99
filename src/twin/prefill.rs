//! Prefill cost and prefix caching from lone requests (concurrency 1). Pure.
//!
//! With nothing else running, a prompt of `n` tokens takes
//! `⌈n / budget⌉ × step_base + per_prefill_token × n` to its first token
//! (`sim::params`), plus the server's own per-request overhead: a straight
//! line in `n` below the budget. The probe sends distinct prompts at three
//! or more lengths, each several times, and fits the line
//! ([`super::line`]): the slope is the cost per token, the intercept the
//! fixed cost. A line that does not describe the data (attention growing
//! with the square of the length, a budget the prompts crossed) is flagged,
//! and its interval covers every local slope.
//!
//! Prefix caching: some prompts are sent twice in a row. With caching on,
//! the second one computes (almost) nothing: it saves about the whole
//! prefill, `per_prefill_token × n`; with caching off it saves nothing.

use super::line;
use super::profile::{Estimate, PrefixCaching};
use crate::metrics::stats::mean;

/// One lone request.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct TtftSample {
    pub prompt_tokens: u32,
    pub ttft_s: f64,
    /// The same prompt as the sample just before it.
    pub repeat: bool,
}

/// The prefill line.
#[derive(Debug, Clone, PartialEq)]
pub struct PrefillFit {
    /// Cost per prompt token, microseconds.
    pub per_token_us: Estimate,
    /// Time to first token of an empty prompt, milliseconds.
    pub fixed_ms: Estimate,
    /// The longest prompt fitted.
    pub longest: u32,
    /// Whether the line described the data.
    pub linear: bool,
}

/// The smallest departure from the line that counts (the resolution of a
/// TTFT over HTTP), seconds.
const FLOOR_S: f64 = 0.001;

/// Fits the line over the first sending of each prompt; `None` with fewer
/// than 3 samples over at least 2 lengths.
pub fn fit(samples: &[TtftSample]) -> Option<PrefillFit> {
    let pts: Vec<(f64, f64)> = samples
        .iter()
        .filter(|s| !s.repeat)
        .map(|s| (f64::from(s.prompt_tokens), s.ttft_s))
        .collect();
    let l = line::fit(&pts, FLOOR_S)?;
    let mut lengths: Vec<u32> = samples.iter().map(|s| s.prompt_tokens).collect();
    lengths.sort_unstable();
    lengths.dedup();
    let how = |what: &str| {
        format!(
            "{what} of the least-squares line of TTFT against prompt length: {} lone requests at {} lengths ({}..{} tokens)",
            l.n,
            lengths.len(),
            lengths[0],
            lengths[lengths.len() - 1]
        )
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
    Some(PrefillFit {
        per_token_us,
        fixed_ms,
        longest: lengths[lengths.len() - 1],
        linear: l.not_linear.is_none(),
    })
}

/// Whether the samples so far pin the cost per prompt token within
/// [`super::decode::PRECISE`] (1σ) on a line that describes them: then more
/// lone requests would add little.
pub fn precise(samples: &[TtftSample]) -> bool {
    fit(samples).is_some_and(|f| {
        let c = &f.per_token_us;
        f.linear && c.value > 0.0 && c.uncertainty < super::decode::PRECISE * c.value
    })
}

/// Prefix caching from the repeated prompts, given the cost per token in
/// seconds.
pub fn prefix_caching(samples: &[TtftSample], per_token_s: f64) -> PrefixCaching {
    let saved: Vec<f64> = samples
        .windows(2)
        .filter(|w| w[1].repeat && w[0].prompt_tokens == w[1].prompt_tokens)
        .filter(|w| per_token_s > 0.0 && w[0].prompt_tokens > 0)
        .map(|w| (w[0].ttft_s - w[1].ttft_s) / (per_token_s * f64::from(w[0].prompt_tokens)))
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
        // A busy machine: one request in three 0.3 s late, on 128 tokens at most.
        let mut busy = samples(|n| 0.01 + 6e-3 * n, &[16, 32, 64, 96, 128], 3);
        for (i, s) in busy.iter_mut().enumerate() {
            if i % 3 == 1 {
                s.ttft_s += 0.3;
            }
        }
        assert!(!precise(&busy));
        assert!(!precise(&[]));
    }

    #[test]
    fn a_linear_server_gives_its_cost_per_token() {
        // 12 ms fixed, 150 µs per token.
        let s = samples(|n| 0.012 + 150e-6 * n, &[16, 512, 1024, 2048], 4);
        let f = fit(&s).unwrap();
        assert!((f.per_token_us.value - 150.0).abs() < 0.05, "{f:?}");
        assert!((f.fixed_ms.value - 12.0).abs() < 0.2, "{f:?}");
        assert!(f.linear && f.per_token_us.uncertainty < 0.5);
        assert_eq!(f.longest, 2048);
        assert_eq!(f.per_token_us.status, crate::twin::Status::Measured);
    }

    #[test]
    fn quadratic_attention_is_flagged_and_widened() {
        // 50 µs per token plus n² × 20 ns: the local cost runs 60 → 130 µs.
        let s = samples(
            |n| 0.01 + 50e-6 * n + 2e-8 * n * n,
            &[256, 1024, 2048, 3072],
            3,
        );
        let f = fit(&s).unwrap();
        assert!(!f.linear);
        let e = &f.per_token_us;
        assert_eq!(e.status, crate::twin::Status::Misfit);
        assert!(e.note.as_deref().unwrap().contains("not linear"));
        assert!(e.low <= 75.7 && e.high.unwrap() >= 152.0, "{e:?}");
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
        let p = prefix_caching(&on, c_p);
        assert_eq!(p.enabled, Some(true), "{p:?}");
        assert!(p.saved_fraction.unwrap() > 0.95);
        let off: Vec<TtftSample> = [pair(1000, 0.1101), pair(2000, 0.2098)].concat();
        assert_eq!(prefix_caching(&off, c_p).enabled, Some(false));
        // Halfway, or nothing repeated: undecided.
        let mid: Vec<TtftSample> = [pair(1000, 0.06), pair(2000, 0.11)].concat();
        assert_eq!(prefix_caching(&mid, c_p).enabled, None);
        assert_eq!(prefix_caching(&on[..1], c_p).enabled, None);
    }
}
