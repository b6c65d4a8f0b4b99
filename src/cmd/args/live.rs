//! `--ui`, `--metrics-listen` and `--metrics-linger` to a [`LiveConfig`].

use crate::cli::run::{RunArgs, Ui};
use crate::config::{LiveConfig, UiMode};
use anyhow::{bail, Result};
use std::net::SocketAddr;

pub fn live_config(a: &RunArgs) -> Result<LiveConfig> {
    let metrics_listen = a.metrics_listen.as_deref().map(listen_addr).transpose()?;
    if metrics_listen.is_none() && !a.metrics_linger.is_zero() {
        bail!(
            "--metrics-linger needs --metrics-listen (the address to serve kneecap's metrics on)"
        );
    }
    Ok(LiveConfig {
        ui: a.ui.map(|u| match u {
            Ui::Dashboard => UiMode::Dashboard,
            Ui::Plain => UiMode::Plain,
            Ui::None => UiMode::None,
        }),
        metrics_listen,
        metrics_linger: a.metrics_linger,
    })
}

fn listen_addr(s: &str) -> Result<SocketAddr> {
    match s.trim().parse() {
        Ok(addr) => Ok(addr),
        Err(_) => bail!(
            "--metrics-listen: '{s}' is not an IP:PORT address (e.g. 127.0.0.1:9464, or 0.0.0.0:9464 to be scraped from other hosts)"
        ),
    }
}

#[cfg(test)]
mod tests {
    use crate::cmd::args::run::run_config;
    use crate::cmd::args::tests_support::{argv, run_args};
    use crate::config::UiMode;
    use std::time::Duration;

    #[test]
    fn the_live_flags_become_a_config_and_bad_values_name_the_flag() {
        let line = "--ui none --metrics-listen 127.0.0.1:0 --metrics-linger 3s";
        let cfg = run_config(&run_args(&argv(line))).unwrap();
        assert_eq!(cfg.output.live.ui, Some(UiMode::None));
        assert_eq!(cfg.output.live.metrics_listen.unwrap().port(), 0);
        assert_eq!(cfg.output.live.metrics_linger, Duration::from_secs(3));
        assert_eq!(
            run_config(&run_args(&argv(""))).unwrap().output.live.ui,
            None
        );
        let bad = run_config(&run_args(&argv("--metrics-listen localhost"))).unwrap_err();
        assert!(
            bad.to_string().starts_with("--metrics-listen: 'localhost'"),
            "{bad}"
        );
        let lonely = run_config(&run_args(&argv("--metrics-linger 2s"))).unwrap_err();
        assert!(
            lonely.to_string().contains("needs --metrics-listen"),
            "{lonely}"
        );
    }
}
