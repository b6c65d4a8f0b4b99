//! A sweep's predicted knee ([`TwinKnee`], `sweep --twin` / `--predict`):
//! what the twin said before the first step (a virtual-time simulation of a
//! server profile), where the search opened, and, once the steps are in,
//! whether the measured bracket agrees ([`Agreement`]). Plain data.

use super::explain::KneeExplain;
use serde::{Deserialize, Serialize};

/// The twin's prediction for the sweep's workload, set beside the measured
/// knee.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TwinKnee {
    /// Where the model came from: `profile FILE`, or `profiled now (...)`.
    pub source: String,
    /// The profile written when the sweep measured it (`--predict`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_path: Option<String>,
    /// Wall seconds spent profiling the server first (`--predict`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile_s: Option<f64>,
    /// The predicted knee (req/s, virtual time): the central parameters'.
    pub knee_req_s: f64,
    /// The prediction's interval: every corner's and seed's knee.
    pub low_req_s: f64,
    pub high_req_s: f64,
    /// The loads the search measured first.
    pub opening: Vec<f64>,
    /// The profile's batch limit, when it measured one (the measured
    /// explanation reads the running gauge against it).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_num_seqs: Option<u32>,
    /// What binds the predicted knee (the model's utilisation).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explain: Option<KneeExplain>,
    /// CPU and wall seconds the prediction took.
    pub cpu_s: f64,
    pub wall_s: f64,
    /// The measured knee against the prediction; `None` until a step ran.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub agreement: Option<Agreement>,
}

/// How the measured knee interval compares with the predicted one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Agreement {
    /// The measured interval (last pass .. first fail) overlaps the
    /// predicted one: the measurement confirms the prediction.
    Confirmed,
    /// A load above the predicted interval passed.
    Above,
    /// A load below the predicted interval failed.
    Below,
    /// The steps do not bound the knee on both sides yet.
    Open,
}

impl Agreement {
    /// A few words for the console.
    pub fn label(self) -> &'static str {
        match self {
            Agreement::Confirmed => "the measurement confirms the prediction",
            Agreement::Above => "the measured knee is ABOVE the predicted interval",
            Agreement::Below => "the measured knee is BELOW the predicted interval",
            Agreement::Open => "the steps do not bound the knee on both sides",
        }
    }
}

impl TwinKnee {
    /// Set [`Self::agreement`] from the measured knee's ends.
    pub fn compare(&mut self, last_pass: Option<f64>, first_fail: Option<f64>) {
        self.agreement = Some(agreement(
            (self.low_req_s, self.high_req_s),
            last_pass,
            first_fail,
        ));
    }
}

/// The measured knee lies between `last_pass` and `first_fail`; the
/// prediction says between `low` and `high`.
pub fn agreement(
    (low, high): (f64, f64),
    last_pass: Option<f64>,
    first_fail: Option<f64>,
) -> Agreement {
    match (last_pass, first_fail) {
        (Some(p), _) if p > high => Agreement::Above,
        (_, Some(f)) if f < low => Agreement::Below,
        (Some(_), Some(_)) => Agreement::Confirmed,
        _ => Agreement::Open,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overlapping_intervals_confirm_and_disjoint_ones_say_which_side() {
        let p = (3.1, 3.7);
        assert_eq!(agreement(p, Some(3.1), Some(3.7)), Agreement::Confirmed);
        assert_eq!(agreement(p, Some(2.0), Some(3.2)), Agreement::Confirmed);
        assert_eq!(agreement(p, Some(3.6), Some(5.0)), Agreement::Confirmed);
        assert_eq!(agreement(p, Some(3.8), Some(4.2)), Agreement::Above);
        assert_eq!(agreement(p, Some(3.8), None), Agreement::Above);
        assert_eq!(agreement(p, Some(1.0), Some(2.9)), Agreement::Below);
        assert_eq!(agreement(p, None, Some(3.0)), Agreement::Below);
        assert_eq!(agreement(p, Some(3.2), None), Agreement::Open);
        assert_eq!(agreement(p, None, Some(3.5)), Agreement::Open);
    }
}

/// The twin's prior on one adaptive step's verdict (`sweep --twin` /
/// `--predict`, see `sweep::prior`): the step's load run in virtual time over
/// the twin's parameter sets, counted as `weight` samples beside the step's
/// own where it agrees with them. SIMULATED: the shares are the model's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct StepPriorRow {
    /// Samples the prediction counted as.
    pub weight: usize,
    /// One per SLO (`null` for means, which have no binomial test).
    pub slos: Vec<Option<SloPriorRow>>,
}

/// The twin's prediction for one SLO at a step's load, and what the step
/// made of it.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct SloPriorRow {
    /// Lowest and highest share of requests over the bound among the
    /// twin's parameter sets and seeds (0–1).
    pub share_over_low: f64,
    pub share_over_high: f64,
    pub backing: Backing,
}

/// Which way the twin leaned on one SLO, and whether the step agreed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Backing {
    /// Twin and samples lean the same way: the prior was added.
    Agrees,
    /// They lean opposite ways: the samples alone judge.
    Contradicted,
    /// The samples lean the twin's way, but not yet at even odds by
    /// themselves: the samples alone judge.
    TooFew,
    /// The twin's parameter sets straddle the bound (or it has no share for
    /// this SLO): the samples alone judge.
    Silent,
}
