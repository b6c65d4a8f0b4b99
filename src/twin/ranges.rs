//! The physical ranges a profile's parameters live in, and holding a value
//! inside one ([`clamp`]): plain numbers, with no profile types, so that the
//! profile (which clamps its parameter sets) and its checks
//! ([`super::bounds`], which refuse a file outside them) both stand on it.
//!
//! The ranges are generous on purpose: a minute per engine step, a second
//! per prompt token, ten seconds per decoding sequence. They exist so that
//! no profile, however wrong, can make the virtual-time simulator's
//! arithmetic leave what a `Duration` holds (issue 38).

/// A parameter's physical range and unit, in the profile's own units.
pub struct Range {
    pub min: f64,
    pub max: f64,
    pub unit: &'static str,
}

const COUNT_MAX: f64 = u32::MAX as f64;

/// The ranges, in the order of the profile's `NAMES`.
pub const RANGES: [Range; 13] = [
    Range {
        min: 0.0,
        max: 60_000.0,
        unit: "ms per engine step",
    },
    Range {
        min: 0.0,
        max: 1e6,
        unit: "µs per prompt token",
    },
    Range {
        min: 0.0,
        max: 1e7,
        unit: "µs per decoding sequence",
    },
    Range {
        min: 1.0,
        max: COUNT_MAX,
        unit: "sequences",
    },
    Range {
        min: 1.0,
        max: COUNT_MAX,
        unit: "tokens",
    },
    Range {
        min: 1.0,
        max: COUNT_MAX,
        unit: "tokens per step",
    },
    Range {
        min: 0.0,
        max: crate::sim::params::MAX_INTERFERENCE,
        unit: "times a prompt's lone cost, beside decoders",
    },
    Range {
        min: 0.0,
        max: 1e6,
        unit: "µs per context token of a decoding sequence",
    },
    Range {
        min: 0.0,
        max: 60_000.0,
        unit: "ms per request",
    },
    Range {
        min: 0.0,
        max: 1e6,
        unit: "ns per prompt attention pair",
    },
    Range {
        min: 0.0,
        max: 60_000.0,
        unit: "ms per step computing prompt tokens",
    },
    Range {
        min: 0.0,
        max: crate::sim::stalls::MAX_RATE_PER_S,
        unit: "stalls per second of engine time",
    },
    Range {
        min: 0.0,
        max: 60_000.0,
        unit: "ms per stall",
    },
];

/// `max_model_len`'s range (a request holds at least a prompt and a token).
pub const MODEL_LEN: Range = Range {
    min: 2.0,
    max: COUNT_MAX,
    unit: "tokens",
};

/// Parameter `i` (in the order of `NAMES`) held inside its physical range; NaN
/// goes to the low end.
pub fn clamp(i: usize, v: f64) -> f64 {
    let r = &RANGES[i];
    if v.is_nan() {
        r.min
    } else {
        v.clamp(r.min, r.max)
    }
}

/// `max_model_len` held inside its range.
pub fn clamp_model_len(v: f64) -> f64 {
    if v.is_nan() {
        MODEL_LEN.min
    } else {
        v.clamp(MODEL_LEN.min, MODEL_LEN.max)
    }
}
