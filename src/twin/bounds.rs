//! The physical ranges a profile's parameters live in, and the three guards
//! built on them: a file whose central values leave them is refused at load
//! with one line naming the field ([`check`]); the ends of a range, however
//! wide, are held inside them when the simulator's parameter sets are built
//! ([`clamp`]); and a fitted value the probes do not pin down is marked
//! not identifiable ([`identifiable`]). Pure: no file is read here (the
//! command layer passes the parsed profile).
//!
//! Reading a profile file is here too ([`ServerProfile::from_json`]): a
//! profile is read only through these checks. The ranges themselves are
//! [`super::ranges`] (issue 38: a decode cost of 1,504 µs ± 3.5e18 put one
//! corner's arrivals past what a `Duration` holds and panicked).

use super::profile::{
    Estimate, ProfileParams, ServerProfile, Status, FIRST_SCHEMA_VERSION, NAMES, SCHEMA_VERSION,
};
pub use super::ranges::{clamp, clamp_model_len};
use super::ranges::{Range, MODEL_LEN, RANGES};
use serde::Deserialize;

/// Refuses a profile whose numbers cannot describe a server: any number
/// not finite, a negative uncertainty, or a central value outside its
/// physical range. The ends of a range are not checked (they are clamped
/// when used): a wide interval is an honest answer, a wrong centre is not.
pub fn check(p: &ServerProfile) -> Result<(), String> {
    let mut fields: Vec<(&str, &Estimate, Option<&Range>)> = NAMES
        .iter()
        .zip(p.estimates())
        .zip(RANGES.iter())
        .map(|((n, e), r)| (n.0, e, Some(r)))
        .collect();
    fields.push(("max_model_len", &p.params.max_model_len, Some(&MODEL_LEN)));
    fields.push(("prefill_fixed_ms", &p.params.prefill_fixed_ms, None));
    fields.into_iter().try_for_each(|(n, e, r)| field(n, e, r))
}

fn field(name: &str, e: &Estimate, range: Option<&Range>) -> Result<(), String> {
    let fix = "profile the server again (`kneecap profile -o FILE`) or correct the field";
    let numbers = [
        ("value", e.value),
        ("uncertainty", e.uncertainty),
        ("low", e.low),
        ("high", e.high.unwrap_or(0.0)),
    ];
    if let Some((what, x)) = numbers.iter().find(|(_, x)| !x.is_finite()) {
        return Err(format!(
            "profile params.{name}.{what} is {x}, not a finite number: {fix}"
        ));
    }
    if e.uncertainty < 0.0 {
        return Err(format!(
            "profile params.{name}.uncertainty is {}, below 0: a standard uncertainty cannot be negative; {fix}",
            e.uncertainty
        ));
    }
    match range {
        Some(r) if !(r.min..=r.max).contains(&e.value) => Err(format!(
            "profile params.{name}.value is {}, outside {}..={} ({}): {fix}",
            e.value, r.min, r.max, r.unit
        )),
        _ => Ok(()),
    }
}

/// A fitted estimate whose standard error is smaller than its value (and
/// finite, the value at or above `floor`) as it is; otherwise marked
/// [`Status::NotIdentifiable`] with the reason, its range opened down to
/// `floor`. Other statuses pass unchanged (a bound, a report or an
/// assumption makes no claim of precision).
pub fn identifiable(e: Estimate, floor: f64) -> Estimate {
    if !matches!(e.status, Status::Measured | Status::Misfit) {
        return e;
    }
    let (v, s) = (e.value, e.uncertainty);
    if v.is_finite() && s.is_finite() && s < v.abs() && v >= floor {
        return e;
    }
    let size = if v < floor && s < v.abs() {
        format!(
            "its value ({}) is below what is physical ({}), held there",
            num(v),
            num(floor)
        )
    } else if s.is_finite() {
        format!(
            "its standard error ({}) is not smaller than its value ({})",
            num(s),
            num(v)
        )
    } else {
        format!("its standard error is not finite (value {})", num(v))
    };
    let why = match &e.note {
        Some(n) => format!("not identifiable from these probes: {size}; {n}"),
        None => format!(
            "not identifiable from these probes: {size}; from the {}",
            e.how
        ),
    };
    e.not_identifiable(floor, why)
}

/// A number for a sentence: two decimals, or an exponent when very large
/// or small.
fn num(x: f64) -> String {
    if x == 0.0 || (0.01..1e6).contains(&x.abs()) {
        format!("{x:.2}")
    } else {
        format!("{x:.2e}")
    }
}

/// Every fitted parameter of `p` pinned down or marked not identifiable
/// ([`identifiable`]); one warning for each so marked. The KV cache's floor
/// is `kv_floor` (the most tokens the probes held) when known, else its own
/// low end (a file read back); the others' are their physical minimum.
pub fn pin_down(p: &mut ProfileParams, kv_floor: f64) -> Vec<String> {
    let fields: [(&str, &mut Estimate, f64); 8] = [
        ("step base", &mut p.step_base_ms, 0.0),
        ("prefill per token", &mut p.prefill_token_us, 0.0),
        ("prefill fixed", &mut p.prefill_fixed_ms, 0.0),
        ("decode per sequence", &mut p.decode_seq_us, 0.0),
        ("max num seqs", &mut p.max_num_seqs, 1.0),
        ("KV cache", &mut p.kv_cache_tokens, kv_floor.max(1.0)),
        ("token budget", &mut p.max_num_batched_tokens, 1.0),
        ("prefill interference", &mut p.prefill_interference, 0.0),
    ];
    let mut warnings = Vec::new();
    for (name, e, floor) in fields {
        let was = e.status;
        *e = identifiable(e.clone(), floor);
        if e.status != was {
            warnings.push(format!("{name}: {}", e.note.as_deref().unwrap_or_default()));
        }
    }
    warnings
}

impl ServerProfile {
    /// Reads a profile; the error (one line) says what is wrong with the
    /// text, or which parameter is out of its physical range
    /// ([`check`]). A fitted parameter the file gives a ± not below
    /// its value is read as not identifiable ([`pin_down`]).
    pub fn from_json(text: &str) -> Result<Self, String> {
        #[derive(Deserialize)]
        struct Version {
            schema_version: Option<u32>,
        }
        let v: Version =
            serde_json::from_str(text).map_err(|e| format!("not a kneecap profile JSON: {e}"))?;
        match v.schema_version {
            Some(n) if (FIRST_SCHEMA_VERSION..=SCHEMA_VERSION).contains(&n) => {}
            Some(other) => {
                return Err(format!(
                    "profile schema_version {other} is not {FIRST_SCHEMA_VERSION}..={SCHEMA_VERSION}; profile the server again with this kneecap"
                ))
            }
            None => return Err("not a kneecap profile: no schema_version".into()),
        }
        let mut profile: Self =
            serde_json::from_str(text).map_err(|e| format!("invalid kneecap profile: {e}"))?;
        check(&profile)?;
        // A file written before `not_identifiable` existed (or by hand) may
        // call a parameter fitted whose ± is not below its value.
        let kv_floor = profile.params.kv_cache_tokens.low;
        pin_down(&mut profile.params, kv_floor);
        Ok(profile)
    }
}

#[cfg(test)]
#[path = "bounds_tests.rs"]
mod tests;
