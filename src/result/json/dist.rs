//! A distribution as kneecap's JSON blocks write it (`DistJson`): shared by
//! the run's `kneecap` block and the blocks beside it (sessions), and read
//! back leniently.

use super::lenient::{self, Spliced};
use crate::metrics::stats::{percentile_key, Distribution};
use serde::{Deserialize, Serialize};

/// A distribution as kneecap writes it: `count`, `mean_ms`, `median_ms`,
/// `std_ms`, `max_ms`, then `p<P>_ms` for each percentile.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct DistJson {
    pub count: usize,
    #[serde(default = "lenient::nan", deserialize_with = "lenient::float")]
    pub mean_ms: f64,
    #[serde(default = "lenient::nan", deserialize_with = "lenient::float")]
    pub median_ms: f64,
    #[serde(default = "lenient::nan", deserialize_with = "lenient::float")]
    pub std_ms: f64,
    #[serde(default = "lenient::nan", deserialize_with = "lenient::float")]
    pub max_ms: f64,
    /// `p<P>_ms` → value, in the order requested.
    #[serde(flatten)]
    pub percentiles: Spliced<f64>,
}

impl DistJson {
    pub fn of(d: &Distribution) -> Self {
        DistJson {
            count: d.count,
            mean_ms: d.mean_ms,
            median_ms: d.median_ms,
            std_ms: d.std_ms,
            max_ms: d.max_ms,
            percentiles: Spliced(
                d.percentiles_ms
                    .iter()
                    .map(|(p, v)| (format!("{}_ms", percentile_key(*p)), *v))
                    .collect(),
            ),
        }
    }
}
