//! The simulator's GPU gauges (`--gpu-watts-idle W --gpu-watts-busy W`),
//! served on `/metrics` under NVIDIA DCGM exporter's names for one GPU
//! (`gpu="0"`). The rule: during a batch step the GPU draws
//! `idle + (busy − idle) × occupancy`, occupancy being the step's sequences
//! over `max_num_seqs` (at most 1); between batch steps it draws `idle`.
//! `DCGM_FI_DEV_POWER_USAGE` is that power now,
//! `DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION` (mJ) its exact integral since the
//! simulator started, and `DCGM_FI_DEV_GPU_UTIL` the percentage of time a
//! batch step ran over the last second or more. Pure: times are passed in.

use std::fmt::Write as _;
use std::time::Duration;

/// `--gpu-watts-idle` and `--gpu-watts-busy`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct GpuWatts {
    /// Power with no batch step running, W.
    pub idle: f64,
    /// Power while a full batch (`max_num_seqs` sequences) runs, W.
    pub busy: f64,
}

impl GpuWatts {
    /// Checks `0 <= idle <= busy`, both finite.
    pub fn validate(&self) -> Result<(), String> {
        let ok = self.idle.is_finite() && self.busy.is_finite() && self.idle >= 0.0;
        if !ok || self.busy < self.idle {
            return Err(format!(
                "--gpu-watts-idle {} and --gpu-watts-busy {} must be finite with 0 <= idle <= busy",
                self.idle, self.busy
            ));
        }
        Ok(())
    }

    /// The power of a batch step at `occupancy` (clamped to 0..=1).
    pub fn power(&self, occupancy: f64) -> f64 {
        self.idle + (self.busy - self.idle) * occupancy.clamp(0.0, 1.0)
    }
}

/// How long the utilisation gauge looks back, at least.
const UTIL_WINDOW: Duration = Duration::from_secs(1);

/// The GPU's energy and busy time, integrated batch step by batch step.
#[derive(Debug, Clone, PartialEq)]
pub struct GpuMeter {
    watts: GpuWatts,
    /// Energy (J) and busy time (s) from the start up to `at`.
    energy_j: f64,
    busy_s: f64,
    at: Duration,
    /// The latest batch step: start, end, power.
    step: Option<(Duration, Duration, f64)>,
    /// The utilisation window's start and the busy time then.
    window: (Duration, f64),
    /// The last closed window's utilisation, 0..=1.
    util: f64,
}

impl GpuMeter {
    /// A meter at time zero, idle.
    pub fn new(watts: GpuWatts) -> Self {
        Self {
            watts,
            energy_j: 0.0,
            busy_s: 0.0,
            at: Duration::ZERO,
            step: None,
            window: (Duration::ZERO, 0.0),
            util: 0.0,
        }
    }

    /// A batch step from `start` for `duration` at `occupancy` begins.
    pub fn batch_step(&mut self, start: Duration, duration: Duration, occupancy: f64) {
        let (e, b) = self.since_at(start);
        self.energy_j += e;
        self.busy_s += b;
        self.at = self.at.max(start);
        if self.at - self.window.0 >= UTIL_WINDOW {
            self.util = (self.busy_s - self.window.1) / (self.at - self.window.0).as_secs_f64();
            self.window = (self.at, self.busy_s);
        }
        self.step = Some((start, start + duration, self.watts.power(occupancy)));
    }

    /// Energy (J) and busy time (s) from `at` to `now`.
    fn since_at(&self, now: Duration) -> (f64, f64) {
        let span = now.saturating_sub(self.at).as_secs_f64();
        let (busy, power) = match self.step {
            Some((s, e, p)) => {
                let from = s.max(self.at);
                let to = e.min(now);
                (to.saturating_sub(from).as_secs_f64(), p)
            }
            None => (0.0, 0.0),
        };
        (busy * power + (span - busy) * self.watts.idle, busy)
    }

    /// Energy since the start, J, at `now`.
    pub fn energy_j(&self, now: Duration) -> f64 {
        self.energy_j + self.since_at(now).0
    }

    /// Power at `now`, W: the running batch step's, else idle.
    pub fn power_w(&self, now: Duration) -> f64 {
        match self.step {
            Some((s, e, p)) if s <= now && now < e => p,
            _ => self.watts.idle,
        }
    }

    /// Utilisation at `now`, %: busy time over the window so far when it
    /// spans a second or more, else the last closed window's.
    pub fn util_pct(&self, now: Duration) -> f64 {
        let span = now.saturating_sub(self.window.0);
        let share = if span >= UTIL_WINDOW {
            (self.busy_s + self.since_at(now).1 - self.window.1) / span.as_secs_f64()
        } else {
            self.util
        };
        (share * 100.0).clamp(0.0, 100.0)
    }

    /// The three DCGM samples at `now` (format 0.0.4), for GPU 0.
    pub fn render(&self, out: &mut String, now: Duration) {
        let samples = [
            (
                "DCGM_FI_DEV_POWER_USAGE",
                "gauge",
                "Power draw (in W).",
                self.power_w(now),
            ),
            (
                "DCGM_FI_DEV_GPU_UTIL",
                "gauge",
                "GPU utilization (in %).",
                self.util_pct(now),
            ),
            (
                "DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION",
                "counter",
                "Total energy consumption since boot (in mJ).",
                (self.energy_j(now) * 1000.0).floor(),
            ),
        ];
        for (name, kind, help, v) in samples {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            let _ = writeln!(out, "{name}{{gpu=\"0\",UUID=\"GPU-kneecap-sim\",device=\"nvidia0\",modelName=\"kneecap sim\"}} {v}");
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: u64) -> Duration {
        Duration::from_millis(v)
    }

    const W: GpuWatts = GpuWatts {
        idle: 100.0,
        busy: 400.0,
    };

    #[test]
    fn power_follows_occupancy_and_energy_is_its_integral() {
        let mut m = GpuMeter::new(W);
        // Idle 0-1 s, a half-full step 1.0-1.5 s (250 W), idle to 2 s, a full
        // step 2.0-2.2 s (400 W), then idle.
        m.batch_step(ms(1000), ms(500), 0.5);
        assert_eq!(m.power_w(ms(1200)), 250.0);
        assert_eq!(m.power_w(ms(1700)), 100.0);
        m.batch_step(ms(2000), ms(200), 1.5);
        assert_eq!(m.power_w(ms(2100)), 400.0);
        let want = 100.0 * 1.0 + 250.0 * 0.5 + 100.0 * 0.5 + 400.0 * 0.2 + 100.0 * 0.8;
        assert!((m.energy_j(ms(3000)) - want).abs() < 1e-9);
        // Mid-step, the counter has the step's share so far.
        let mid = 100.0 + 250.0 * 0.5 + 100.0 * 0.5 + 400.0 * 0.1;
        assert!((m.energy_j(ms(2100)) - mid).abs() < 1e-9);
        // The windows roll at each step a second or more after the last:
        // [1 s, 2 s] was busy 0.5 s; [2 s, 3 s] 0.2 s.
        assert!((m.util_pct(ms(2500)) - 50.0).abs() < 1e-9);
        assert!((m.util_pct(ms(3000)) - 20.0).abs() < 1e-9);
    }

    #[test]
    fn the_rendered_counter_is_in_millijoules_under_dcgm_names() {
        let mut m = GpuMeter::new(W);
        m.batch_step(ms(0), ms(1000), 1.0);
        let mut out = String::new();
        m.render(&mut out, ms(2000));
        let value = |name: &str| -> f64 {
            let line = out
                .lines()
                .find(|l| l.starts_with(&format!("{name}{{gpu=\"0\"")))
                .unwrap();
            line.rsplit(' ').next().unwrap().parse().unwrap()
        };
        assert_eq!(value("DCGM_FI_DEV_POWER_USAGE"), 100.0);
        assert_eq!(value("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION"), 500_000.0);
        assert_eq!(value("DCGM_FI_DEV_GPU_UTIL"), 50.0);
        assert!(W.validate().is_ok());
        let bad = GpuWatts {
            idle: 300.0,
            busy: 200.0,
        };
        assert!(bad
            .validate()
            .unwrap_err()
            .starts_with("--gpu-watts-idle 300"));
    }
}
