//! `kneecap profile`: measure a server's model within a time budget. Starts
//! the target (a URL, or the built-in simulator with `sim`'s engine flags),
//! prepares the client as `run` does, runs the probes the pure plan
//! ([`crate::twin::plan`]) sizes to the budget, fits them
//! ([`crate::twin::fit`]), prints the table and writes the profile JSON.

mod mixed_probe;
mod probes;

use super::args::profile::{profile_config, ProfileConfig};
use super::prepare::{self as runner};
use super::target::{self, Server};
use crate::cli::ProfileArgs;
use crate::client::openai;
use crate::client::scrape::{GaugeSource, Scraper};
use crate::twin::fit::{self, Header, Observations, Saved};
use crate::twin::plan::Pilot;
use crate::twin::ServerProfile;
use crate::twin::{mixed, plan, prefill, prefill_batch};
use crate::workload::dataset::DatasetKind;
use anyhow::Result;
use probes::Probe;
use std::path::Path;
use std::process::ExitCode;
use std::time::{Duration, Instant};
use tokio::sync::watch;

/// Planning assumes this `max_model_len` when `/v1/models` lists none.
const ASSUMED_MAX_LEN: u32 = 2048;

/// Run `kneecap profile`.
pub async fn execute(args: &ProfileArgs, interrupt: watch::Receiver<bool>) -> Result<ExitCode> {
    if let Some(path) = &args.refit {
        return refit(path, args.output.as_deref());
    }
    let started = Instant::now();
    let cfg = profile_config(args)?;
    let dir = cfg.output.parent().filter(|p| !p.as_os_str().is_empty());
    crate::report::save::check_writable(dir, "-o/--output")?;
    crate::client::limits::raise_open_file_limit();
    let server = match &cfg.sim {
        Some(sim) => target::start_sim_config(sim.clone()).await?,
        None => target::start(&cfg.run.target).await?,
    };
    let outcome = profile(&cfg, &server, started, interrupt).await;
    server.shutdown().await;
    let saved = outcome?;
    write(&saved, &cfg.output)
}

/// Prints the profile's table and writes it, with its observations.
fn write(saved: &Saved, output: &Path) -> Result<ExitCode> {
    print!("{}", crate::twin::table::render(&saved.profile));
    crate::report::save::write_atomic(output, saved.to_json().as_bytes())?;
    eprintln!(
        "kneecap: profile written to {} (serve it with: kneecap sim --profile {})",
        output.display(),
        output.display()
    );
    Ok(ExitCode::SUCCESS)
}

/// `--refit FILE`: the observations FILE holds, fitted again; written to
/// `-o` (FILE itself is never overwritten unless named there).
fn refit(path: &Path, output: Option<&Path>) -> Result<ExitCode> {
    let Some(output) = output else {
        anyhow::bail!("--refit needs -o FILE for the refitted profile");
    };
    let text = std::fs::read_to_string(path).map_err(|e| {
        anyhow::anyhow!(
            "--refit: cannot read '{}': {e}; give a JSON `kneecap profile -o FILE` wrote",
            path.display()
        )
    })?;
    let saved: Saved = serde_json::from_str(&text).map_err(|e| {
        anyhow::anyhow!(
            "--refit '{}': not a kneecap profile JSON: {e}",
            path.display()
        )
    })?;
    let Some(profile) = saved.refit() else {
        anyhow::bail!("--refit '{}': the profile holds no observations (written by an older kneecap); profile the server again", path.display());
    };
    write(&Saved { profile, ..saved }, output)
}

/// Profile a started server for `sweep --predict`: `run` as the sweep's
/// target and client (`ignore_eos` is set here), probes within `budget`.
pub(crate) async fn measure(
    run: &crate::config::RunConfig,
    server: &Server,
    budget: Duration,
    metrics_url: Option<String>,
    interrupt: watch::Receiver<bool>,
) -> Result<ServerProfile> {
    let mut run = run.clone();
    run.body.ignore_eos = true;
    let cfg = ProfileConfig {
        run,
        budget,
        output: std::path::PathBuf::new(),
        metrics_url,
        sim: None,
    };
    Ok(profile(&cfg, server, Instant::now(), interrupt)
        .await?
        .profile)
}

/// Prepares the client, runs the probes and fits them.
async fn profile(
    cfg: &ProfileConfig,
    server: &Server,
    started: Instant,
    interrupt: watch::Receiver<bool>,
) -> Result<Saved> {
    let mut run = cfg.run.clone();
    // The ready check sends one short request; the probes make their own.
    run.dataset.kind = DatasetKind::Random {
        input_len: 16,
        output_len: 4,
        range_ratio_input: 0.0,
        range_ratio_output: 0.0,
        prefix_len: 0,
    };
    run.dataset.num_prompts = 1;
    run.load.num_warmups = 0;
    let prepared = runner::prepare(&run, server).await?;
    let metrics_url = cfg
        .metrics_url
        .clone()
        .unwrap_or_else(|| format!("{}/metrics", server.base_url));
    let (listed, slot_context) = model_lengths(&prepared).await;
    let max_len = listed.or(slot_context).unwrap_or(ASSUMED_MAX_LEN);
    let model = prepared.model_id.clone();
    // What the server says of its cache and scheduler, read before probing;
    // still probed.
    let info = prepared.server.clone().unwrap_or_default();
    let mut probe = Probe {
        cfg: &run,
        prepared,
        scraper: Scraper::new(&metrics_url).ok(),
        deadline: started + cfg.budget,
        interrupt,
        // A fresh start for every profile: prompts an earlier profile (or
        // run) sent could be served from the server's prefix cache, and a
        // cached prompt's TTFT is not its prefill cost.
        seed: u64::from(rand::Rng::random::<u32>(&mut rand::rng())) << 20,
        summaries: Vec::new(),
        gauges: None,
    };
    let lengths = (listed, slot_context);
    let budget_reported = info.max_num_batched_tokens.map(u64::from);
    let mut obs = observe(
        &mut probe,
        cfg.budget,
        max_len,
        lengths,
        server.simulated,
        budget_reported,
    )
    .await?;
    obs.reported_kv_tokens = info.kv_cache_tokens;
    obs.reported_prefix_caching = info.prefix_caching;
    obs.reported_max_num_seqs = info.max_num_seqs.map(u64::from);
    obs.reported_token_budget = info.max_num_batched_tokens.map(u64::from);
    obs.reported_block_tokens = info.block_size;
    let header = Header {
        kneecap_version: env!("CARGO_PKG_VERSION").into(),
        base_url: server.base_url.clone(),
        simulated: server.simulated,
        model,
        gauges: probe.gauges.map(|g| match g {
            GaugeSource::Vllm => "vllm".into(),
            GaugeSource::LlamaCpp => "llama_cpp".into(),
        }),
        budget_s: cfg.budget.as_secs_f64(),
        elapsed_s: started.elapsed().as_secs_f64(),
        probes: probe.summaries.clone(),
    };
    Ok(Saved {
        profile: fit::fit(&obs, header),
        observations: Some(obs),
    })
}

/// The probes in order: pilot, lone prefills, decode levels, interference
/// (after the decode levels: its decoders must leave a slot free for the
/// arriving prompts, so it needs the batch limit they show), prompts sent
/// together behind a blocker (within the batch limit and the reported
/// token budget) in what is left of the budget, or, when there are none,
/// more lone prefills.
async fn observe(
    probe: &mut Probe<'_>,
    budget: Duration,
    max_len: u32,
    listed: (Option<u32>, Option<u32>),
    simulated: bool,
    token_budget: Option<u64>,
) -> Result<Observations> {
    let pilot = probe.pilot(max_len).await?;
    let share = |s: f64| budget.mul_f64(s);
    let prefill_plan = plan::prefill(&pilot, budget, max_len);
    let prefill = probe
        .prefill(&prefill_plan, share(plan::PREFILL_SHARE * 1.5))
        .await?;
    let inter = plan::interference(&pilot, budget, max_len);
    let mut obs = Observations {
        longest_request: prefill_plan
            .lengths
            .iter()
            .max()
            .map_or(0, |n| n + plan::PREFILL_OUTPUT),
        prefill,
        max_model_len: listed.0,
        slot_context: listed.1,
        ..Default::default()
    };
    let kept = share(plan::PREFILL_BATCH_SHARE + plan::MIXED_SHARE + plan::SLACK_SHARE);
    let decode_share = probe.left().saturating_sub(inter.length + kept);
    probe
        .decode(&pilot, decode_share, max_len, &mut obs)
        .await?;
    let decoders = plan::decoders(&obs.decode);
    if decoders > 0 {
        obs.interference = probe.interference(&inter, decoders).await?;
        obs.longest_request = obs.longest_request.max(inter.prompt_tokens + 1);
    }
    let limit = plan::batch_limit(&obs.decode);
    let room = share(plan::MIXED_SHARE).min(probe.left().saturating_sub(share(plan::SLACK_SHARE)));
    if let Some(mp) = mixed::plan(limit, max_len, room, mixed_costs(&pilot, &obs)) {
        obs.mixed = probe.mixed(&mp).await?;
    }
    // Prompts sent together take what the other probes left (at least
    // their share, kept from the decode levels); without them, that time
    // goes to more lone prefills when the line is not yet precise.
    let extra = probe.left().saturating_sub(share(plan::SLACK_SHARE));
    if let Some(bp) = prefill_batch::plan(&obs.prefill, token_budget, limit) {
        obs.prefill_batch = probe.prefill_batch(&bp, extra).await?;
    } else if extra >= share(plan::MORE_PREFILL_SHARE) && !prefill::precise(&obs.prefill) {
        let more = probe.prefill(&prefill_plan.more(), extra).await?;
        obs.prefill.extend(more);
    }
    if simulated {
        // The built-in simulator counts KV token by token, as the client does.
        obs.kv_systematic = 0.0;
    }
    Ok(obs)
}

/// For the mixed level's plan: a lone prompt of its length's prefill
/// (the curve's, at least the pilot's line) and the token gap the decode
/// levels saw nearest a concurrency.
fn mixed_costs<'a>(pilot: &Pilot, obs: &'a Observations) -> (f64, impl Fn(usize) -> f64 + 'a) {
    let n = crate::twin::mixed::PROMPT;
    let curve = prefill::fit(&obs.prefill, &[]).map_or(0.0, |f| f.cost_s(n));
    let lone = curve.max(pilot.per_token_s * f64::from(n));
    let fallback = pilot.lone_gap_s;
    let gap = move |k: usize| {
        obs.decode
            .iter()
            .min_by_key(|l| l.concurrency.abs_diff(k))
            .map_or(fallback, |l| l.mean_gap_s)
    };
    (lone, gap)
}

/// `max_model_len` and the context of one slot (llama.cpp) of the served
/// model, from `GET /v1/models`.
async fn model_lengths(prepared: &runner::Prepared) -> (Option<u32>, Option<u32>) {
    let Ok((200, body)) = prepared.client.get("/v1/models").await else {
        return (None, None);
    };
    let models = openai::parse_models(&body).unwrap_or_default();
    models
        .iter()
        .find(|m| m.id == prepared.model_id || m.root.as_deref() == Some(&prepared.model_id))
        .or(models.first())
        .map_or((None, None), |m| (m.max_model_len, m.slot_context))
}
