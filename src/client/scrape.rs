//! Server queue gauges from Prometheus `/metrics`: vLLM's
//! `vllm:num_requests_waiting` / `vllm:num_requests_running` /
//! `vllm:kv_cache_usage_perc` and llama.cpp's `llamacpp:requests_deferred` /
//! `llamacpp:requests_processing`, mapped to one waiting/running series.
//! Parsing is pure ([`parse_gauges`]); [`Scraper`] does the polling.

use serde::{Deserialize, Serialize};

use super::prom_text::parse_sample_line;
use std::time::{Duration, Instant};

/// One reading of the server's scheduler state.
#[derive(Debug, Clone, Copy, PartialEq, Default, Serialize, Deserialize)]
pub struct QueueSample {
    /// Seconds since the step's t0.
    pub t_s: f64,
    /// Requests queued for admission (summed over engines).
    pub waiting: Option<f64>,
    /// Requests in the running batch (summed over engines).
    pub running: Option<f64>,
    /// KV-cache usage 0..1 (mean over engines).
    pub kv_cache_usage: Option<f64>,
    /// `vllm:num_preemptions_total` (a counter, summed over engines), when exported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub preemptions: Option<f64>,
}

/// Which family of names the server exposes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum GaugeSource {
    Vllm,
    LlamaCpp,
}

/// Extract the queue gauges from a Prometheus text body (`None` when the body
/// has none of the known names).
pub fn parse_gauges(text: &str) -> Option<(GaugeSource, QueueSample)> {
    let samples: Vec<(&str, f64)> = text.lines().filter_map(parse_sample_line).collect();
    let values = |name: &str| -> Vec<f64> {
        samples
            .iter()
            .filter(|(n, _)| *n == name)
            .map(|(_, v)| *v)
            .collect()
    };
    let sum = |name: &str| -> Option<f64> {
        let vals = values(name);
        (!vals.is_empty()).then(|| vals.iter().sum())
    };
    let mean = |name: &str| -> Option<f64> {
        let vals = values(name);
        (!vals.is_empty()).then(|| vals.iter().sum::<f64>() / vals.len() as f64)
    };
    let vllm = QueueSample {
        t_s: 0.0,
        waiting: sum("vllm:num_requests_waiting"),
        running: sum("vllm:num_requests_running"),
        kv_cache_usage: mean("vllm:kv_cache_usage_perc")
            .or_else(|| mean("vllm:gpu_cache_usage_perc")),
        preemptions: sum("vllm:num_preemptions_total").or_else(|| sum("vllm:num_preemptions")),
    };
    if vllm.waiting.is_some() || vllm.running.is_some() {
        return Some((GaugeSource::Vllm, vllm));
    }
    let llama = QueueSample {
        t_s: 0.0,
        waiting: sum("llamacpp:requests_deferred"),
        running: sum("llamacpp:requests_processing"),
        kv_cache_usage: mean("llamacpp:kv_cache_usage_ratio"),
        preemptions: None,
    };
    (llama.waiting.is_some() || llama.running.is_some()).then_some((GaugeSource::LlamaCpp, llama))
}

/// vLLM's prefix-cache counters (tokens), summed over engines.
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct PrefixCacheCounters {
    /// `vllm:prefix_cache_queries_total` (older: `vllm:gpu_prefix_cache_queries_total`).
    pub queries: f64,
    /// `vllm:prefix_cache_hits_total` (older: `vllm:gpu_prefix_cache_hits_total`).
    pub hits: f64,
}

/// The prefix-cache counters in a Prometheus text body, if the server has them.
pub fn parse_prefix_cache(text: &str) -> Option<PrefixCacheCounters> {
    let (mut q, mut h) = (None, None);
    for (name, v) in text.lines().filter_map(parse_sample_line) {
        let slot = match name {
            "vllm:prefix_cache_queries_total" | "vllm:gpu_prefix_cache_queries_total" => &mut q,
            "vllm:prefix_cache_hits_total" | "vllm:gpu_prefix_cache_hits_total" => &mut h,
            _ => continue,
        };
        *slot = Some(slot.unwrap_or(0.0) + v);
    }
    Some(PrefixCacheCounters {
        queries: q?,
        hits: h?,
    })
}

/// Polls a `/metrics` URL on its own small HTTP client.
pub struct Scraper {
    client: hyper_util::client::legacy::Client<
        hyper_util::client::legacy::connect::HttpConnector,
        http_body_util::Empty<bytes::Bytes>,
    >,
    url: http::Uri,
}

impl Scraper {
    /// A scraper for `url` (e.g. `http://127.0.0.1:8000/metrics`).
    pub fn new(url: &str) -> anyhow::Result<Self> {
        let url: http::Uri = url
            .parse()
            .map_err(|_| anyhow::anyhow!("--metrics-url: '{url}' is not a valid URL"))?;
        let client =
            hyper_util::client::legacy::Client::builder(hyper_util::rt::TokioExecutor::new())
                .build_http();
        Ok(Scraper { client, url })
    }

    /// One reading, or `None` when the endpoint is absent or has no known gauge.
    pub async fn sample(&self) -> Option<(GaugeSource, QueueSample)> {
        parse_gauges(&self.text().await?)
    }

    /// The prefix-cache counters now, or `None` when the server has none.
    pub async fn prefix_cache(&self) -> Option<PrefixCacheCounters> {
        parse_prefix_cache(&self.text().await?)
    }

    /// The speculative-decoding numbers now ([`super::scrape_spec`]), or
    /// `None` when the server has none.
    pub async fn spec_decode(&self) -> Option<super::scrape_spec::SpecReading> {
        super::scrape_spec::parse_spec(&self.text().await?)
    }

    /// What the server publishes about its cache ([`super::server_info`]),
    /// or `None` when it publishes nothing of it.
    pub async fn cache_config(&self) -> Option<super::server_info::CacheConfigInfo> {
        super::server_info::parse_cache_config(&self.text().await?)
    }

    /// The DCGM GPU gauges now ([`super::scrape_gpu`]), or `None` when the
    /// endpoint does not answer or has none of DCGM's names.
    pub async fn gpu(&self) -> Option<super::scrape_gpu::HostGpus> {
        super::scrape_gpu::parse_dcgm(&self.text().await?)
    }

    /// The body at the URL (2 s timeout), `None` when it does not answer 2xx.
    pub async fn body(&self) -> Option<String> {
        self.text().await
    }

    /// The `/metrics` body (2 s timeout).
    async fn text(&self) -> Option<String> {
        use http_body_util::BodyExt;
        let fut = async {
            let resp = self.client.get(self.url.clone()).await.ok()?;
            if !resp.status().is_success() {
                return None;
            }
            let body = resp.into_body().collect().await.ok()?.to_bytes();
            String::from_utf8(body.to_vec()).ok()
        };
        tokio::time::timeout(Duration::from_secs(2), fut)
            .await
            .ok()
            .flatten()
    }

    /// Sample every `every` until `stop` turns true; times relative to `t0`.
    pub async fn series(
        &self,
        t0: Instant,
        every: Duration,
        mut stop: tokio::sync::watch::Receiver<bool>,
    ) -> (Option<GaugeSource>, Vec<QueueSample>) {
        let mut out = Vec::new();
        let mut source = None;
        let mut misses = 0u32;
        let mut tick = tokio::time::interval(every);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tokio::select! {
                _ = tick.tick() => {}
                _ = stop.changed() => break,
            }
            if *stop.borrow() {
                break;
            }
            // A server without /metrics is tolerated: after a few misses with
            // no success, ask only every 8th tick.
            if source.is_none() && misses >= 3 && misses % 8 != 0 {
                misses += 1;
                continue;
            }
            match self.sample().await {
                Some((src, mut s)) => {
                    s.t_s = t0.elapsed().as_secs_f64();
                    source = Some(src);
                    out.push(s);
                }
                None => misses += 1,
            }
        }
        (source, out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prefix_cache_counters_are_summed_and_old_names_accepted() {
        let text = "vllm:prefix_cache_queries_total{engine=\"0\"} 100\n\
vllm:prefix_cache_queries_total{engine=\"1\"} 50\nvllm:prefix_cache_hits_total{engine=\"0\"} 90\n";
        let c = parse_prefix_cache(text).unwrap();
        assert_eq!((c.queries, c.hits), (150.0, 90.0));
        let old = "vllm:gpu_prefix_cache_queries_total 10\nvllm:gpu_prefix_cache_hits_total 4\n";
        assert_eq!(parse_prefix_cache(old).unwrap().hits, 4.0);
        assert_eq!(parse_prefix_cache("vllm:num_requests_running 1\n"), None);
    }

    #[test]
    fn vllm_gauges_are_summed_over_engines() {
        let text = "# HELP vllm:num_requests_waiting Waiting.\n# TYPE vllm:num_requests_waiting gauge\n\
vllm:num_requests_waiting{engine=\"0\",model_name=\"m\"} 3.0\n\
vllm:num_requests_waiting{engine=\"1\",model_name=\"m\"} 4.0\n\
# TYPE vllm:num_requests_running gauge\nvllm:num_requests_running{engine=\"0\",model_name=\"m\"} 256.0\n\
# TYPE vllm:kv_cache_usage_perc gauge\nvllm:kv_cache_usage_perc{engine=\"0\",model_name=\"m\"} 0.5\n\
vllm:kv_cache_usage_perc{engine=\"1\",model_name=\"m\"} 0.7\n";
        let (src, s) = parse_gauges(text).unwrap();
        assert_eq!(src, GaugeSource::Vllm);
        assert_eq!(s.waiting, Some(7.0));
        assert_eq!(s.running, Some(256.0));
        assert!((s.kv_cache_usage.unwrap() - 0.6).abs() < 1e-9);
    }

    #[test]
    fn llama_cpp_deferred_maps_to_waiting() {
        let text = "# TYPE llamacpp:requests_processing gauge\nllamacpp:requests_processing 4\n\
# TYPE llamacpp:requests_deferred gauge\nllamacpp:requests_deferred 2\n";
        let (src, s) = parse_gauges(text).unwrap();
        assert_eq!(src, GaugeSource::LlamaCpp);
        assert_eq!(s.waiting, Some(2.0));
        assert_eq!(s.running, Some(4.0));
    }

    #[test]
    fn unrelated_metrics_give_nothing() {
        assert!(
            parse_gauges("# TYPE http_requests_total counter\nhttp_requests_total 5\n").is_none()
        );
        assert!(parse_gauges("not prometheus at all {{{").is_none());
    }
}
