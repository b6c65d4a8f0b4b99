//! μ and the queue's onset from measured steps: the throughput plateau of
//! saturated steps, and the loads where the server's waiting gauge rose.
//! PURE.
use super::point::StepPoint;

/// A step is saturated when achieved/offered is below this.
pub const SATURATED_RATIO: f64 = 0.9;
/// The server queue has formed once the mean waiting gauge reaches this.
pub const QUEUE_ONSET_WAITING: f64 = 0.5;

/// Service rate μ from the throughput plateau: the median achieved rate of
/// the saturated steps (achieved/offered < [`SATURATED_RATIO`]); all of them
/// measure the same plateau, and the median shrugs off one noisy window.
/// `None` when no step saturated. Meaningful for rate loads only (for
/// concurrency loads achieved/offered compares different units).
pub fn service_rate_estimate(points: &[StepPoint]) -> Option<f64> {
    let rates: Vec<f64> = points
        .iter()
        .filter(|p| {
            !p.steady && p.offered_rate > 0.0 && p.achieved_rate / p.offered_rate < SATURATED_RATIO
        })
        .map(|p| p.achieved_rate)
        .collect();
    median_rate(rates)
}

/// μ from the server's queue gauge: the median achieved rate of the steps
/// whose mean waiting count reached [`QUEUE_ONSET_WAITING`] — a server that
/// queues has a full batch, so it completes at its service rate. `None` when
/// the gauge was never scraped or never left zero.
pub fn service_rate_from_queue(points: &[StepPoint]) -> Option<f64> {
    let rates: Vec<f64> = points
        .iter()
        .filter(|p| p.mean_waiting.is_some_and(|w| w >= QUEUE_ONSET_WAITING))
        .map(|p| p.achieved_rate)
        .collect();
    median_rate(rates)
}

/// Median of the rates (the stats module's one definition); `None` when empty.
fn median_rate(mut rates: Vec<f64>) -> Option<f64> {
    rates.sort_by(f64::total_cmp);
    (!rates.is_empty()).then(|| crate::metrics::stats::median(&rates))
}

/// The lowest load whose mean server waiting gauge reached
/// [`QUEUE_ONSET_WAITING`]; `None` when never, or never scraped.
pub fn queue_onset(points: &[StepPoint]) -> Option<f64> {
    points
        .iter()
        .filter(|p| p.mean_waiting.is_some_and(|w| w >= QUEUE_ONSET_WAITING))
        .map(|p| p.load)
        .reduce(f64::min)
}
