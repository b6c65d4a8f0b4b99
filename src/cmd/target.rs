//! Target: the server a run talks to — a URL the user gave, or the built-in
//! simulator started in-process on a free loopback port.

use crate::config::Target;
use anyhow::Result;

/// A server ready to take requests.
pub struct Server {
    /// Root URL, e.g. `http://127.0.0.1:8000`.
    pub base_url: String,
    /// True when this is the built-in simulator (numbers are simulated).
    pub simulated: bool,
    pub preset: Option<String>,
    /// The simulator's configuration (its capacity μ can be computed).
    pub sim_config: Option<crate::sim::SimConfig>,
    sim: Option<crate::sim::SimHandle>,
}

/// Resolve the target: connect to a URL, or start the simulator in-process.
pub async fn start(target: &Target) -> Result<Server> {
    match target {
        Target::Url(url) => Ok(Server {
            base_url: url.clone(),
            simulated: false,
            preset: None,
            sim_config: None,
            sim: None,
        }),
        Target::Sim { preset } => start_sim(preset).await,
    }
}

async fn start_sim(preset: &str) -> Result<Server> {
    let cfg = crate::sim::SimConfig::from_preset(preset)
        .map_err(|e| anyhow::anyhow!("--sim-preset: {e:#}"))?;
    start_sim_config(cfg).await
}

/// Start the built-in simulator with `cfg` on a free loopback port.
pub async fn start_sim_config(cfg: crate::sim::SimConfig) -> Result<Server> {
    let preset = cfg.preset.clone();
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await?;
    let handle = crate::sim::start(cfg.clone(), listener).await?;
    let base_url = format!("http://{}", handle.addr());
    eprintln!("kneecap: no --base-url given; started the built-in simulator (preset {preset}) on {base_url}");
    Ok(Server {
        base_url,
        simulated: true,
        preset: Some(preset),
        sim_config: Some(cfg),
        sim: Some(handle),
    })
}

impl Server {
    /// Stop the embedded simulator, if any.
    pub async fn shutdown(self) {
        if let Some(h) = self.sim {
            if let Err(e) = h.shutdown().await {
                eprintln!("kneecap: the built-in simulator did not shut down cleanly: {e:#}");
            }
        }
    }
}
