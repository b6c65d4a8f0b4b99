//! The simulator's Prometheus state and its text rendering, with vLLM's names.
//!
//! Owns the gauges and counters the engine thread publishes once per step and
//! the histograms it observes (server-side TTFT, step-clock lag). Rendering is
//! pure; the lock around [`SimMetrics`] lives in the server.

use std::fmt::Write as _;

use super::model::Counters;

/// vLLM's `vllm:time_to_first_token_seconds` buckets.
pub const TTFT_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.02, 0.04, 0.06, 0.08, 0.1, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 7.5, 10.0,
    20.0, 40.0, 80.0, 160.0, 640.0, 2560.0,
];

/// Buckets of `kneecap_sim_step_lag_seconds`: how late a step's tokens left
/// compared with the model's step clock.
pub const LAG_BUCKETS: &[f64] = &[
    0.000_01, 0.000_025, 0.000_05, 0.000_1, 0.000_25, 0.000_5, 0.001, 0.002_5, 0.005, 0.01, 0.025,
    0.05, 0.1, 1.0,
];

/// A cumulative Prometheus histogram with fixed upper bounds.
#[derive(Debug, Clone)]
pub struct Histogram {
    bounds: &'static [f64],
    counts: Vec<u64>,
    sum: f64,
    count: u64,
}

impl Histogram {
    /// An empty histogram over `bounds` (ascending, `+Inf` implied).
    pub fn new(bounds: &'static [f64]) -> Self {
        Self {
            bounds,
            counts: vec![0; bounds.len()],
            sum: 0.0,
            count: 0,
        }
    }

    /// Records one observation.
    pub fn observe(&mut self, v: f64) {
        if let Some(i) = self.bounds.iter().position(|&b| v <= b) {
            self.counts[i] += 1;
        }
        self.sum += v;
        self.count += 1;
    }

    /// Number of observations.
    pub fn count(&self) -> u64 {
        self.count
    }

    /// Sum of observations.
    pub fn sum(&self) -> f64 {
        self.sum
    }

    fn render(&self, out: &mut String, name: &str, labels: &str) {
        let mut cum = 0;
        for (b, c) in self.bounds.iter().zip(&self.counts) {
            cum += c;
            let _ = writeln!(out, "{name}_bucket{{{labels},le=\"{b}\"}} {cum}");
        }
        let _ = writeln!(out, "{name}_bucket{{{labels},le=\"+Inf\"}} {}", self.count);
        let _ = writeln!(out, "{name}_sum{{{labels}}} {}", self.sum);
        let _ = writeln!(out, "{name}_count{{{labels}}} {}", self.count);
    }
}

/// Everything `/metrics` shows.
#[derive(Debug, Clone)]
pub struct SimMetrics {
    /// Sequences in the running batch.
    pub running: usize,
    /// Requests waiting for admission.
    pub waiting: usize,
    /// KV-cache usage, 0..=1.
    pub kv_usage: f64,
    /// Engine counters.
    pub counters: Counters,
    /// Server-side TTFT (arrival to first token), seconds.
    pub ttft: Histogram,
    /// Batch-step clock lag, seconds.
    pub batch_step_lag: Histogram,
    /// Largest step-clock lag seen, seconds.
    pub batch_step_lag_max: f64,
    /// Whether the engine thread got real-time scheduling.
    pub engine_realtime: bool,
    /// Speculative decoding's K, when it is on: the `vllm:spec_decode_*`
    /// counters are exported only then (as vLLM does).
    pub spec_draft_tokens: Option<u32>,
    /// `--gpu-watts-idle`/`--gpu-watts-busy`: the GPU's DCGM gauges.
    pub gpu: Option<super::gpu::GpuMeter>,
}

impl Default for SimMetrics {
    fn default() -> Self {
        Self {
            running: 0,
            waiting: 0,
            kv_usage: 0.0,
            counters: Counters::default(),
            ttft: Histogram::new(TTFT_BUCKETS),
            batch_step_lag: Histogram::new(LAG_BUCKETS),
            batch_step_lag_max: 0.0,
            engine_realtime: false,
            spec_draft_tokens: None,
            gpu: None,
        }
    }
}

/// One gauge or counter: name, type, help, value.
type Sample = (&'static str, &'static str, &'static str, String);

impl SimMetrics {
    /// Prometheus text exposition (format 0.0.4).
    pub fn render(&self, model_name: &str) -> String {
        let escaped = model_name.replace('\\', "\\\\").replace('"', "\\\"");
        let labels = format!("model_name=\"{escaped}\",engine=\"0\"");
        let mut out = String::with_capacity(4096);
        for (name, kind, help, value) in self.vllm_samples().into_iter().chain(self.sim_samples()) {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} {kind}");
            let _ = writeln!(out, "{name}{{{labels}}} {value}");
        }
        if let Some(k) = self.spec_draft_tokens {
            self.render_spec(&mut out, &labels, k);
        }
        let _ = writeln!(out, "# HELP vllm:time_to_first_token_seconds Histogram of time to first token in seconds.\n# TYPE vllm:time_to_first_token_seconds histogram");
        self.ttft
            .render(&mut out, "vllm:time_to_first_token_seconds", &labels);
        let _ = writeln!(out, "# HELP kneecap_sim_step_lag_seconds Delay of each step end behind the model's step clock.\n# TYPE kneecap_sim_step_lag_seconds histogram");
        self.batch_step_lag
            .render(&mut out, "kneecap_sim_step_lag_seconds", &labels);
        out
    }

    /// The gauges and counters vLLM exports, under vLLM's names.
    fn vllm_samples(&self) -> [Sample; 8] {
        let c = &self.counters;
        [
            (
                "vllm:num_requests_running",
                "gauge",
                "Number of requests in model execution batches.",
                self.running.to_string(),
            ),
            (
                "vllm:num_requests_waiting",
                "gauge",
                "Number of requests waiting to be processed.",
                self.waiting.to_string(),
            ),
            (
                "vllm:kv_cache_usage_perc",
                "gauge",
                "KV-cache usage. 1 means 100 percent usage.",
                self.kv_usage.to_string(),
            ),
            (
                "vllm:num_preemptions_total",
                "counter",
                "Cumulative number of preemption from the engine.",
                c.n_preemptions.to_string(),
            ),
            (
                "vllm:prompt_tokens_total",
                "counter",
                "Number of prefill tokens processed.",
                c.prompt_tokens.to_string(),
            ),
            (
                "vllm:generation_tokens_total",
                "counter",
                "Number of generation tokens processed.",
                c.generation_tokens.to_string(),
            ),
            (
                "vllm:prefix_cache_queries_total",
                "counter",
                "Prefix cache queries, in terms of number of queried tokens.",
                c.prefix_cache_queries.to_string(),
            ),
            (
                "vllm:prefix_cache_hits_total",
                "counter",
                "Prefix cache hits, in terms of number of cached tokens.",
                c.prefix_cache_hits.to_string(),
            ),
        ]
    }

    /// vLLM's speculative-decoding counters, as vLLM's Prometheus client
    /// writes them: the family name in `# TYPE`, the sample with `_total`,
    /// and the per-position counter labelled `position` 0..K.
    fn render_spec(&self, out: &mut String, labels: &str, k: u32) {
        let c = &self.counters.spec;
        for (name, help, value) in [
            (
                "vllm:spec_decode_num_drafts",
                "Number of spec decoding drafts.",
                c.drafts,
            ),
            (
                "vllm:spec_decode_num_draft_tokens",
                "Number of draft tokens.",
                c.draft_tokens,
            ),
            (
                "vllm:spec_decode_num_accepted_tokens",
                "Number of accepted tokens.",
                c.accepted_tokens,
            ),
        ] {
            let _ = writeln!(out, "# HELP {name} {help}\n# TYPE {name} counter");
            let _ = writeln!(out, "{name}_total{{{labels}}} {value}");
        }
        let name = "vllm:spec_decode_num_accepted_tokens_per_pos";
        let _ = writeln!(
            out,
            "# HELP {name} Accepted tokens per draft position.\n# TYPE {name} counter"
        );
        for (pos, value) in c.accepted_per_pos.iter().take(k as usize).enumerate() {
            let _ = writeln!(out, "{name}_total{{{labels},position=\"{pos}\"}} {value}");
        }
    }

    /// The simulator's own gauges and counters (`kneecap_sim_*`).
    fn sim_samples(&self) -> [Sample; 3] {
        [
            (
                "kneecap_sim_steps_total",
                "counter",
                "Engine steps run by the simulator.",
                self.counters.n_batch_steps.to_string(),
            ),
            (
                "kneecap_sim_step_lag_max_seconds",
                "gauge",
                "Largest delay of a step end behind the model's step clock.",
                self.batch_step_lag_max.to_string(),
            ),
            (
                "kneecap_sim_engine_realtime",
                "gauge",
                "1 if the engine thread runs with SCHED_FIFO priority, else 0.",
                u8::from(self.engine_realtime).to_string(),
            ),
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_buckets_are_cumulative() {
        let mut h = Histogram::new(TTFT_BUCKETS);
        h.observe(0.003);
        h.observe(0.003);
        h.observe(3000.0);
        let mut out = String::new();
        h.render(&mut out, "x", "a=\"b\"");
        assert!(out.contains("x_bucket{a=\"b\",le=\"0.001\"} 0\n"));
        assert!(out.contains("x_bucket{a=\"b\",le=\"0.005\"} 2\n"));
        assert!(out.contains("x_bucket{a=\"b\",le=\"2560\"} 2\n"));
        assert!(out.contains("x_bucket{a=\"b\",le=\"+Inf\"} 3\n"));
        assert!(out.contains("x_count{a=\"b\"} 3\n"));
    }

    #[test]
    fn rendering_uses_vllm_names() {
        let text = SimMetrics::default().render("m");
        for name in [
            "vllm:num_requests_running{model_name=\"m\",engine=\"0\"} 0",
            "vllm:num_requests_waiting{",
            "vllm:kv_cache_usage_perc{",
            "vllm:num_preemptions_total{",
            "vllm:prompt_tokens_total{",
            "vllm:generation_tokens_total{",
            "vllm:prefix_cache_queries_total{",
            "vllm:prefix_cache_hits_total{",
            "vllm:time_to_first_token_seconds_bucket{",
            "kneecap_sim_step_lag_seconds_count{",
        ] {
            assert!(text.contains(name), "{name} missing");
        }
    }
}
