//! Fault injection for robustness tests: which requests misbehave and how.
//!
//! Pure and seeded: whether request `n` gets a fault depends only on the seed,
//! `n` and the configured fractions, never on timing. Each fault kind draws
//! independently; refusals (HTTP 500, then 429) win over stream faults, and
//! among stream faults the first that hits in the order cut, malformed,
//! stall, error event is used. Stream faults strike mid-way, just before
//! output token `⌈n_out / 2⌉`, and apply to streamed responses only (a
//! non-streamed response can still be refused or stalled).

use std::time::Duration;

use super::blocks::splitmix64;

/// Fractions (0..=1) of requests that get each fault.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Faults {
    /// Answered with HTTP 500 and an error body.
    pub http_500: f64,
    /// Answered with HTTP 429 and an error body.
    pub http_429: f64,
    /// Connection closed mid-stream, no `[DONE]`.
    pub cut_stream: f64,
    /// A garbage (non-JSON) `data:` line mid-stream; the stream then goes on.
    pub malformed: f64,
    /// How long a stalled stream pauses.
    pub stall: Duration,
    /// Fraction of streams that pause for [`Faults::stall`] mid-way.
    pub stall_rate: f64,
    /// `data: {"error":{…}}` mid-stream, then `[DONE]`.
    pub error_event: f64,
}

/// A request refused before it reaches the engine.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// HTTP 500.
    Http500,
    /// HTTP 429.
    Http429,
}

/// How a stream misbehaves.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamFault {
    /// Close the connection without finishing the body.
    Cut,
    /// Send a `data:` line that is not JSON.
    Malformed,
    /// Pause for this long.
    Stall(Duration),
    /// Send an in-stream error object, then `[DONE]`.
    ErrorEvent,
}

/// The faults chosen for one request.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FaultPlan {
    /// Refuse the request outright.
    pub refusal: Option<Refusal>,
    /// Misbehave just before this output token (1-based).
    pub stream: Option<(u32, StreamFault)>,
}

impl FaultPlan {
    /// Short name of the injected fault (for the server log), if any.
    pub fn name(&self) -> Option<&'static str> {
        if let Some(r) = self.refusal {
            return Some(match r {
                Refusal::Http500 => "http_500",
                Refusal::Http429 => "http_429",
            });
        }
        self.stream.map(|(_, f)| match f {
            StreamFault::Cut => "cut_stream",
            StreamFault::Malformed => "malformed",
            StreamFault::Stall(_) => "stall",
            StreamFault::ErrorEvent => "error_event",
        })
    }
}

impl Faults {
    /// Checks every fraction is within 0..=1; the message names the flag.
    pub fn validate(&self) -> Result<(), String> {
        for (flag, v) in [
            ("--fault-http-500", self.http_500),
            ("--fault-http-429", self.http_429),
            ("--fault-cut-stream", self.cut_stream),
            ("--fault-malformed", self.malformed),
            ("--fault-stall-rate", self.stall_rate),
            ("--fault-error-event", self.error_event),
        ] {
            if !(0.0..=1.0).contains(&v) {
                return Err(format!("{flag} must be a fraction in 0..=1, got {v}"));
            }
        }
        Ok(())
    }

    /// Whether any fault can happen.
    pub fn any(&self) -> bool {
        self.http_500 > 0.0
            || self.http_429 > 0.0
            || self.cut_stream > 0.0
            || self.malformed > 0.0
            || self.stall_rate > 0.0
            || self.error_event > 0.0
    }

    /// The faults of request number `n`, which will produce `output_tokens`.
    pub fn plan(&self, seed: u64, n: u64, output_tokens: u32) -> FaultPlan {
        let hit = |salt: u64, p: f64| p > 0.0 && draw(seed, n, salt) < p;
        let refusal = if hit(1, self.http_500) {
            Some(Refusal::Http500)
        } else if hit(2, self.http_429) {
            Some(Refusal::Http429)
        } else {
            None
        };
        let kind = if hit(3, self.cut_stream) {
            Some(StreamFault::Cut)
        } else if hit(4, self.malformed) {
            Some(StreamFault::Malformed)
        } else if hit(5, self.stall_rate) {
            Some(StreamFault::Stall(self.stall))
        } else if hit(6, self.error_event) {
            Some(StreamFault::ErrorEvent)
        } else {
            None
        };
        FaultPlan {
            refusal,
            stream: kind.map(|k| (output_tokens.div_ceil(2).max(1), k)),
        }
    }
}

/// Uniform draw in [0, 1) for (seed, request, fault kind).
fn draw(seed: u64, n: u64, salt: u64) -> f64 {
    let h = splitmix64(seed ^ splitmix64(n ^ salt.rotate_right(8)));
    (h >> 11) as f64 / (1u64 << 53) as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_faults_by_default() {
        let f = Faults::default();
        assert!(!f.any());
        assert!((0..1000).all(|n| f.plan(1, n, 10) == FaultPlan::default()));
    }

    #[test]
    fn fault_fractions_are_respected_and_seeded() {
        let f = Faults {
            http_500: 0.1,
            cut_stream: 0.2,
            ..Faults::default()
        };
        let plans: Vec<_> = (0..10_000).map(|n| f.plan(9, n, 10)).collect();
        let n500 = plans
            .iter()
            .filter(|p| p.refusal == Some(Refusal::Http500))
            .count();
        let ncut = plans
            .iter()
            .filter(|p| p.stream == Some((5, StreamFault::Cut)))
            .count();
        assert!((900..1100).contains(&n500), "{n500}");
        assert!((1800..2200).contains(&ncut), "{ncut}");
        assert_eq!(
            plans,
            (0..10_000).map(|n| f.plan(9, n, 10)).collect::<Vec<_>>()
        );
    }

    #[test]
    fn fractions_outside_unit_interval_name_the_flag() {
        let f = Faults {
            malformed: 1.5,
            ..Faults::default()
        };
        assert!(f.validate().unwrap_err().contains("--fault-malformed"));
    }
}
