//! [`Estimate`]: one measured parameter of a server profile, with its
//! standard uncertainty, plausible range and how it was obtained
//! ([`Status`]). Pure data.

use serde::{Deserialize, Serialize};

/// How an [`Estimate`] was obtained.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Status {
    /// Fitted from the probes; the model explained the data.
    Measured,
    /// Fitted, but the data departed from the model more than its noise
    /// allows; the uncertainty is widened to cover the departure.
    Misfit,
    /// The probes only showed the value is at least `value` (`high` is None).
    LowerBound,
    /// The server said so (`/v1/models`, `/metrics`).
    Reported,
    /// Not measurable here; `value` is an assumption (`how` says which).
    Assumed,
    /// Fitted, but the probes do not pin it down: its standard error is not
    /// smaller than its value (or not finite). `note` says why; the range
    /// runs from the physical floor up, and `uncertainty` is at least the
    /// value.
    NotIdentifiable,
}

/// The least standard uncertainty a measured parameter's range allows, as a
/// share of its value. A fit's σ is the scatter of its probes; what every
/// probe shares (the HTTP path's timing, the client's clock) does not
/// scatter and goes unseen. Measured by `bench/twin_recovery.sh`: on the
/// simulator, where the truth is known, the median fitted prefill cost is
/// 0.1–0.5% off while its σ says 0.15%, and a range of ±2σ alone missed the
/// true value; ±1% (2 × 0.5%) holds it.
pub const SYSTEMATIC_SHARE: f64 = 0.005;

/// One measured parameter.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// Central value, in the unit the field's name says.
    pub value: f64,
    /// Standard uncertainty (1σ), widened by any misfit; 0 when reported.
    pub uncertainty: f64,
    /// Lowest plausible value.
    pub low: f64,
    /// Highest plausible value; `None` when nothing bounds it from above.
    pub high: Option<f64>,
    pub status: Status,
    /// How it was measured (which probe, which fit, how many samples).
    pub how: String,
    /// What the model did not explain, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Estimate {
    /// A fitted value with standard uncertainty `sigma`; the range is ±2σ,
    /// and at least ±2 × [`SYSTEMATIC_SHARE`] of the value, floored at
    /// `floor`.
    pub fn fitted(value: f64, sigma: f64, floor: f64, how: impl Into<String>) -> Self {
        let sigma = sigma.abs();
        let reach = 2.0 * sigma.max(SYSTEMATIC_SHARE * value.abs());
        Self {
            value,
            uncertainty: sigma,
            low: (value - reach).max(floor),
            high: Some(value + reach),
            status: Status::Measured,
            how: how.into(),
            note: None,
        }
    }

    /// A fitted cost that cannot be negative: a value below 0 is held at 0
    /// (`how` says what was fitted), and one whose σ is not below its
    /// value is named not identifiable.
    pub fn fitted_cost(value: f64, sigma: f64, how: impl Into<String>) -> Self {
        let held = value.max(0.0);
        let mut e = Self::fitted(held, sigma, 0.0, how);
        if value < 0.0 {
            e.how += &format!(" (fitted {value:.3}, below 0: held at 0)");
        }
        if sigma.partial_cmp(&held) != Some(std::cmp::Ordering::Less) {
            e = e.not_identifiable(
                0.0,
                format!("its standard error ({sigma:.3}) is not below its value ({held:.3}): the probes cannot tell it from 0"),
            );
        }
        e
    }

    /// The same estimate flagged as a misfit: `why` is recorded and the
    /// uncertainty (and range) grow to at least `sigma`.
    pub fn misfit(mut self, sigma: f64, floor: f64, why: impl Into<String>) -> Self {
        let sigma = sigma.abs().max(self.uncertainty);
        self.uncertainty = sigma;
        let reach = 2.0 * sigma.max(SYSTEMATIC_SHARE * self.value.abs());
        self.low = (self.value - reach).max(floor);
        self.high = self.high.map(|_| self.value + reach);
        self.status = Status::Misfit;
        self.note = Some(why.into());
        self
    }

    /// The same estimate marked [`Status::NotIdentifiable`]: `why` is
    /// recorded, the range opens down to `floor`, and a value that is not
    /// finite or lies below `floor` (a cost fitted negative) is held at
    /// `floor` (a file holds only numbers, and only physical ones).
    pub fn not_identifiable(mut self, floor: f64, why: impl Into<String>) -> Self {
        if !self.value.is_finite() || self.value < floor {
            self.value = floor;
        }
        let sigma = self.uncertainty.abs();
        self.uncertainty = if sigma.is_finite() {
            sigma.max(self.value.abs())
        } else {
            self.value.abs()
        };
        self.low = floor;
        let high = self.value + 2.0 * sigma;
        self.high = self.high.and(high.is_finite().then_some(high));
        self.status = Status::NotIdentifiable;
        self.note = Some(why.into());
        self
    }

    /// At least `value`, nothing above it measured.
    pub fn lower_bound(value: f64, how: impl Into<String>) -> Self {
        Self {
            value,
            uncertainty: 0.0,
            low: value,
            high: None,
            status: Status::LowerBound,
            how: how.into(),
            note: None,
        }
    }

    /// A value the server reported.
    pub fn reported(value: f64, how: impl Into<String>) -> Self {
        Self {
            status: Status::Reported,
            high: Some(value),
            ..Self::lower_bound(value, how)
        }
    }

    /// A cost an older profile did not measure: 0, as kneecap modelled it
    /// then.
    pub fn not_profiled() -> Self {
        Self::assumed(
            0.0,
            0.0,
            Some(0.0),
            "not in this profile (written before kneecap measured it): assumed 0",
        )
    }

    /// An assumption within `low ..= high`.
    pub fn assumed(value: f64, low: f64, high: Option<f64>, how: impl Into<String>) -> Self {
        Self {
            value,
            uncertainty: 0.0,
            low,
            high,
            status: Status::Assumed,
            how: how.into(),
            note: None,
        }
    }

    /// The value at one end of the range: `high` (or `unbounded` when there
    /// is none) if `up`, else `low`.
    pub fn end(&self, up: bool, unbounded: f64) -> f64 {
        if up {
            self.high.unwrap_or(unbounded)
        } else {
            self.low
        }
    }
}
