//! Comparing a normalized document with its golden: ordered keys and types,
//! exact values, and timing values within their bands.

use super::*;

fn compare_ordered(what: &str, want: &Value, got: &Map<String, Value>, errs: &mut Vec<String>) {
    let want = want
        .as_object()
        .unwrap_or_else(|| panic!("golden {what} is not an object"));
    let wk: Vec<&String> = want.keys().collect();
    let gk: Vec<&String> = got.keys().collect();
    if wk != gk {
        for k in &wk {
            if !got.contains_key(*k) {
                errs.push(format!("{what}: path {k} is gone"));
            }
        }
        for k in &gk {
            if !want.contains_key(*k) {
                errs.push(format!("{what}: new path {k}"));
            }
        }
        if let Some((i, (w, g))) = wk.iter().zip(&gk).enumerate().find(|(_, (w, g))| w != g) {
            errs.push(format!(
                "{what}: order differs at entry {i}: golden {w}, now {g}"
            ));
        }
    }
    for (k, w) in want {
        if let Some(g) = got.get(k) {
            if what != "timing" && w != g {
                let (w, g) = (short(w), short(g));
                errs.push(format!("{what} {k}: golden {w}, now {g}"));
            }
        }
    }
}

/// The numbers of a (nested) array, or `None` when its shape is not `want`'s.
fn same_shape_numbers(want: &Value, got: &Value, out: &mut Vec<(f64, f64)>) -> bool {
    match (want, got) {
        (Value::Array(w), Value::Array(g)) => {
            w.len() == g.len() && w.iter().zip(g).all(|(w, g)| same_shape_numbers(w, g, out))
        }
        (Value::Number(w), Value::Number(g)) => {
            out.push((w.as_f64().unwrap(), g.as_f64().unwrap()));
            true
        }
        _ => false,
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v[v.len() / 2]
}

/// Why a timing value is outside its band (see [`band`]), if it is.
fn timing_error(want: &Value, got: &Value, unit: Unit, kind: Kind) -> Option<String> {
    match (want, got) {
        (Value::Number(w), Value::Number(g)) => {
            let (w, g) = (w.as_f64().unwrap(), g.as_f64().unwrap());
            let (lo, hi) = band(w, unit, kind);
            (!(g >= lo && g <= hi)).then(|| format!("outside [{lo}, {hi}]"))
        }
        (Value::Array(_), Value::Array(_)) => {
            let mut pairs = Vec::new();
            if !same_shape_numbers(want, got, &mut pairs) {
                return Some("the per-request array changed shape".into());
            }
            if let Some((i, (w, g))) = pairs
                .iter()
                .enumerate()
                .find(|(_, (w, g))| !(*g >= 0.0 && *g <= w * 10.0 + 1000.0 * ms(unit)))
            {
                return Some(format!("element {i} (flattened) is {g}, golden {w}"));
            }
            if pairs.is_empty() {
                return None;
            }
            let wm = median(pairs.iter().map(|p| p.0).collect());
            let gm = median(pairs.iter().map(|p| p.1).collect());
            let (lo, hi) = band(wm, unit, Central);
            (!(gm >= lo && gm <= hi))
                .then(|| format!("median {gm} outside [{lo}, {hi}] (golden median {wm})"))
        }
        (w, g) => (w != g).then(|| "differs".into()),
    }
}

/// Every difference between a golden (`want`, as stored) and a document.
pub(super) fn differences(want: &Value, got: &Norm) -> Vec<String> {
    let mut errs = Vec::new();
    compare_ordered("types", &want["types"], &got.types, &mut errs);
    compare_ordered("exact", &want["exact"], &got.exact, &mut errs);
    compare_ordered("timing", &want["timing"], &got.timing, &mut errs);
    for (path, unit, kind) in &got.units {
        let (Some(w), Some(g)) = (want["timing"].get(path), got.timing.get(path)) else {
            continue;
        };
        if let Some(why) = timing_error(w, g, *unit, *kind) {
            let (w, g) = (short(w), short(g));
            errs.push(format!(
                "timing {path} ({unit:?}, {kind:?}): {why}: golden {w}, now {g}"
            ));
        }
    }
    errs
}

// ---------------------------------------------------------------- goldens
