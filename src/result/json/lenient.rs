//! The loose parts of the run JSON, read as vLLM and kneecap write them:
//! numbers that may be `null` (a NaN when written), `"inf"` or absent, and the
//! ordered key/value runs spliced into an object (`--metadata` pairs,
//! per-metric statistics, a distribution's percentiles).
//!
//! Convention: a float the file does not hold (absent or `null`) reads as NaN,
//! and a NaN writes as `null` — so "not in the file" survives a round trip.

use serde::de::{self, DeserializeOwned, Deserializer, Visitor};
use serde::ser::{SerializeMap, Serializer};
use serde::{Deserialize, Serialize};
use std::fmt;

/// The value of a float field the file does not hold.
pub fn nan() -> f64 {
    f64::NAN
}

/// A number, `"inf"` / `"-inf"` (also `"Infinity"`, `"NaN"`), or `null` (NaN).
pub fn float<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
    d.deserialize_any(FloatVisitor)
}

struct FloatVisitor;

impl<'de> Visitor<'de> for FloatVisitor {
    type Value = f64;

    fn expecting(&self, f: &mut fmt::Formatter) -> fmt::Result {
        f.write_str("a number, \"inf\" or null")
    }
    fn visit_f64<E>(self, v: f64) -> Result<f64, E> {
        Ok(v)
    }
    fn visit_u64<E>(self, v: u64) -> Result<f64, E> {
        Ok(v as f64)
    }
    fn visit_i64<E>(self, v: i64) -> Result<f64, E> {
        Ok(v as f64)
    }
    fn visit_unit<E>(self) -> Result<f64, E> {
        Ok(f64::NAN)
    }
    fn visit_none<E>(self) -> Result<f64, E> {
        Ok(f64::NAN)
    }
    fn visit_some<D: Deserializer<'de>>(self, d: D) -> Result<f64, D::Error> {
        float(d)
    }
    fn visit_str<E: de::Error>(self, v: &str) -> Result<f64, E> {
        match v {
            "inf" | "+inf" | "Infinity" => Ok(f64::INFINITY),
            "-inf" | "-Infinity" => Ok(f64::NEG_INFINITY),
            "nan" | "NaN" => Ok(f64::NAN),
            _ => Err(E::invalid_value(de::Unexpected::Str(v), &self)),
        }
    }
}

/// One element of a float array, read by [`float`].
struct Lenient(f64);

impl<'de> Deserialize<'de> for Lenient {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        float(d).map(Lenient)
    }
}

/// An optional float read by [`float`]; absent or `null` is `None`.
pub fn opt_float<'de, D: Deserializer<'de>>(d: D) -> Result<Option<f64>, D::Error> {
    let v: Option<Lenient> = Option::deserialize(d)?;
    Ok(v.map(|x| x.0))
}

/// A float array whose elements read by [`float`]; absent or `null` is `None`.
pub fn floats<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<f64>>, D::Error> {
    let v: Option<Vec<Lenient>> = Option::deserialize(d)?;
    Ok(v.map(|v| v.into_iter().map(|x| x.0).collect()))
}

/// An array of float arrays (vLLM's `itls`), elements read by [`float`].
pub fn float_lists<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<Vec<f64>>>, D::Error> {
    let v: Option<Vec<Vec<Lenient>>> = Option::deserialize(d)?;
    Ok(v.map(|v| {
        v.into_iter()
            .map(|r| r.into_iter().map(|x| x.0).collect())
            .collect()
    }))
}

/// A string array whose `null` elements read as `""`.
pub fn texts<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Vec<String>>, D::Error> {
    let v: Option<Vec<Option<String>>> = Option::deserialize(d)?;
    Ok(v.map(|v| v.into_iter().map(Option::unwrap_or_default).collect()))
}

/// vLLM's rates (`request_rate`, `burstiness`): a number, `"inf"` for any
/// infinity (strict JSON has no `Infinity`), `null` for a NaN.
pub mod rate {
    use super::*;

    pub fn serialize<S: Serializer>(v: &f64, s: S) -> Result<S::Ok, S::Error> {
        match *v {
            v if v.is_finite() => s.serialize_f64(v),
            v if v.is_nan() => s.serialize_none(),
            _ => s.serialize_str("inf"),
        }
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(d: D) -> Result<f64, D::Error> {
        super::float(d)
    }
}

/// Key/value pairs spliced, in order, into the enclosing object
/// (`#[serde(flatten)]`). Reading keeps only the leftover entries whose value
/// reads as `T`: strings for metadata, numbers for statistics (a `null`
/// statistic, a NaN when written, is left out).
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Spliced<T>(pub Vec<(String, T)>);

impl<T: Serialize> Serialize for Spliced<T> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut m = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            m.serialize_entry(k, v)?;
        }
        m.end()
    }
}

impl<'de, T: DeserializeOwned> Deserialize<'de> for Spliced<T> {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let all = serde_json::Map::<String, serde_json::Value>::deserialize(d)?;
        let kept = all
            .into_iter()
            .filter_map(|(k, v)| Some((k, serde_json::from_value(v).ok()?)))
            .collect();
        Ok(Spliced(kept))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[derive(Debug, Serialize, Deserialize)]
    struct Probe {
        #[serde(default = "nan", deserialize_with = "float")]
        x: f64,
        #[serde(default = "nan", with = "rate")]
        rate: f64,
        #[serde(default, deserialize_with = "floats")]
        xs: Option<Vec<f64>>,
        #[serde(flatten)]
        texts: Spliced<String>,
        #[serde(flatten)]
        numbers: Spliced<f64>,
    }

    #[test]
    fn absent_and_null_floats_read_as_nan_and_write_as_null() {
        let p: Probe =
            serde_json::from_value(json!({"rate": "inf", "xs": [1, null, "-inf"]})).unwrap();
        assert!(p.x.is_nan());
        assert_eq!(p.rate, f64::INFINITY);
        let xs = p.xs.clone().unwrap();
        assert!(xs[0] == 1.0 && xs[1].is_nan() && xs[2] == f64::NEG_INFINITY);
        let back = serde_json::to_value(&p).unwrap();
        assert_eq!(back["x"], json!(null));
        assert_eq!(back["rate"], json!("inf"));
    }

    #[test]
    fn spliced_pairs_keep_their_order_and_split_by_type() {
        let v = json!({"b": "two", "p99": 3.5, "a": "one", "std": null, "n": 7});
        let p: Probe = serde_json::from_value(v).unwrap();
        let names = |s: &[(String, String)]| s.iter().map(|(k, _)| k.clone()).collect::<Vec<_>>();
        assert_eq!(names(&p.texts.0), ["b", "a"]);
        assert_eq!(
            p.numbers.0,
            [("p99".to_string(), 3.5), ("n".to_string(), 7.0)]
        );
        let text = serde_json::to_string(&p).unwrap();
        assert!(
            text.contains(r#""b":"two","a":"one","p99":3.5,"n":7.0"#),
            "{text}"
        );
    }
}
