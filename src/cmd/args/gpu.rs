//! `--gpu-metrics-url` and `--gpu-sample-interval` to a
//! [`GpuMetricsConfig`]: each URL an `http://` URL (a bare host gets
//! `/metrics`), the interval above zero; and `kneecap sim`'s
//! `--gpu-watts-idle`/`--gpu-watts-busy` to its `GpuWatts`.

use anyhow::{bail, Result};

use crate::cli::gpu::{GpuArgs, SimGpuArgs};
use crate::config::GpuMetricsConfig;
use crate::sim::gpu::GpuWatts;

/// The GPU telemetry to sample (`None` without `--gpu-metrics-url`).
pub fn gpu_config(a: &GpuArgs) -> Result<Option<GpuMetricsConfig>> {
    if a.gpu_metrics_url.is_empty() {
        return Ok(None);
    }
    if a.gpu_sample_interval.is_zero() {
        bail!("--gpu-sample-interval must be above 0 (e.g. 1s or 500ms)");
    }
    let urls = a
        .gpu_metrics_url
        .iter()
        .map(|u| metrics_url(u))
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(GpuMetricsConfig {
        urls,
        every: a.gpu_sample_interval,
    }))
}

/// `kneecap sim --gpu-watts-idle W --gpu-watts-busy W` (`None`: no gauges).
pub fn sim_gpu_watts(a: &SimGpuArgs) -> Result<Option<GpuWatts>> {
    let (Some(idle), Some(busy)) = (a.gpu_watts_idle, a.gpu_watts_busy) else {
        return Ok(None);
    };
    let w = GpuWatts { idle, busy };
    w.validate().map_err(anyhow::Error::msg)?;
    Ok(Some(w))
}

/// `url` checked, with `/metrics` when it names no path.
fn metrics_url(url: &str) -> Result<String> {
    let bad = || {
        anyhow::anyhow!(
            "--gpu-metrics-url: '{url}' is not an http:// URL (e.g. http://gpu-host:9400/metrics)"
        )
    };
    let uri: http::Uri = url.parse().map_err(|_| bad())?;
    if uri.scheme_str() != Some("http") || uri.host().is_none() {
        return Err(bad());
    }
    Ok(match uri.path() {
        "" | "/" => format!("{}/metrics", url.trim_end_matches('/')),
        _ => url.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    fn args(urls: &[&str], every_ms: u64) -> GpuArgs {
        GpuArgs {
            gpu_metrics_url: urls.iter().map(|u| u.to_string()).collect(),
            gpu_sample_interval: Duration::from_millis(every_ms),
        }
    }

    #[test]
    fn urls_keep_their_order_and_a_bare_host_gets_metrics() {
        let c = gpu_config(&args(&["http://a:9400", "http://b:9400/m/"], 500))
            .unwrap()
            .unwrap();
        assert_eq!(c.urls, ["http://a:9400/metrics", "http://b:9400/m/"]);
        assert_eq!(c.every, Duration::from_millis(500));
        assert_eq!(gpu_config(&args(&[], 0)).unwrap(), None);
    }

    #[test]
    fn a_bad_url_or_interval_names_its_flag() {
        for bad in ["a:9400", "https://a/metrics", "not a url"] {
            let e = gpu_config(&args(&[bad], 1000)).unwrap_err().to_string();
            assert!(e.starts_with("--gpu-metrics-url: '"), "{e}");
            assert!(e.contains(bad), "{e}");
        }
        let e = gpu_config(&args(&["http://a"], 0)).unwrap_err().to_string();
        assert!(e.starts_with("--gpu-sample-interval"), "{e}");
    }

    #[test]
    fn the_simulators_watts_are_checked() {
        let w = |idle, busy| SimGpuArgs {
            gpu_watts_idle: idle,
            gpu_watts_busy: busy,
        };
        assert_eq!(sim_gpu_watts(&w(None, None)).unwrap(), None);
        let ok = sim_gpu_watts(&w(Some(100.0), Some(400.0))).unwrap();
        assert_eq!(
            ok,
            Some(GpuWatts {
                idle: 100.0,
                busy: 400.0
            })
        );
        let e = sim_gpu_watts(&w(Some(500.0), Some(400.0))).unwrap_err();
        assert!(e.to_string().starts_with("--gpu-watts-idle 500"), "{e}");
    }
}
