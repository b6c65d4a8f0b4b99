//! `kneecap run`: the orchestration of one load level, from validated config
//! to saved result. Reads like a table of contents; the work is in the
//! modules it calls.

use crate::cli::run::{Backend, RampUp, RunArgs};
use crate::client::http::{ClientConfig, HttpClient};
use crate::client::openai::{self, BodyOptions};
use crate::config::{LoadConfig, RunConfig};
use crate::engine::{self, LoadPlan, Releases};
use crate::metrics::hist::RunHists;
use crate::metrics::stats::{self, Summary};
use crate::metrics::RequestRecord;
use crate::report::shard::{ShardCounters, ShardIdentity, ShardPart, ShardRun};
use crate::report::{self, GeneratorVerdict, KneecapInfo, RunResult};
use crate::schedule::{self, Arrival};
use crate::shard;
use crate::target::{self, Server};
use crate::workload::{dataset, tokenizer::TokenCounter, RequestSpec};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use rand::{rngs::StdRng, Rng, SeedableRng};
use std::process::ExitCode;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Percentiles kneecap always computes for its own block.
pub const KNEECAP_PERCENTILES: [f64; 4] = [50.0, 90.0, 99.0, 99.9];
/// Runtime scheduling-lag probe period.
const LAG_PROBE_EVERY: Duration = Duration::from_millis(10);
/// Time in-flight requests get to finish after Ctrl-C.
const GRACE: Duration = Duration::from_secs(5);
/// How many failure messages the summary and JSON keep.
const FIRST_ERRORS: usize = 10;

/// Run `kneecap run` / `kneecap bench serve`.
pub async fn execute(args: &RunArgs, interrupt: watch::Receiver<bool>) -> Result<ExitCode> {
    let cfg = RunConfig::try_from(args)?;
    if let Some(start) = cfg.start_at {
        shard::wait_for_start(start, shard::apply::now()).map_err(anyhow::Error::msg)?;
    }
    check_os_limits(&cfg)?;
    if cfg.output.save_result {
        report::save::check_writable(cfg.output.result_dir.as_deref(), "--result-dir")?;
    }
    let server = target::start(&cfg.target).await?;
    let outcome = run_against(&cfg, &server, interrupt).await;
    server.shutdown().await;
    let result = outcome?;
    print!("{}", report::console::render(&result));
    save_result(&cfg, &result)?;
    Ok(if result.kneecap.interrupted {
        ExitCode::from(2)
    } else {
        ExitCode::SUCCESS
    })
}

/// Raise the open-file limit and refuse a concurrency the OS cannot hold.
pub fn check_os_limits(cfg: &RunConfig) -> Result<()> {
    let limit = engine::limits::raise_open_file_limit();
    let sim = matches!(cfg.target, crate::config::Target::Sim { .. });
    match cfg.load.max_concurrency {
        Some(n) => engine::limits::check_concurrency(n, sim, limit),
        None => Ok(()),
    }
}

/// What a run needs once the target answered: client, model, workload.
pub struct Prepared {
    pub client: Arc<HttpClient>,
    pub specs: Arc<Vec<RequestSpec>>,
    pub tokenizer: Option<TokenCounter>,
    pub model_id: String,
    pub request_id_prefix: String,
    pub warmups_ok: Option<(usize, usize)>,
    /// `--save-detailed`: keep every ITL gap (no folding).
    pub save_detailed: bool,
}

/// Connect, resolve the model, build the workload, ready-check and warm up.
pub async fn prepare(cfg: &RunConfig, server: &Server) -> Result<Prepared> {
    let mut client = HttpClient::new(client_config(cfg, &server.base_url))?;
    let (served, model_id) = resolve_model(&client, cfg, &server.base_url).await?;
    client.set_body_options(BodyOptions {
        model: served,
        ..cfg.body.clone()
    });
    let client = Arc::new(client);
    let tokenizer = cfg
        .tokenizer
        .as_deref()
        .map(TokenCounter::from_path)
        .transpose()?;
    let specs = dataset::load(&cfg.dataset, tokenizer.as_ref())?;
    if specs.is_empty() {
        bail!("the dataset produced no requests (check --dataset-path and --num-prompts)");
    }
    let request_id_prefix = request_id_prefix(cfg);
    ready_check(&client, &specs[0], cfg.load.ready_check_timeout).await?;
    let warmups_ok = warm_up(&client, &specs[0], cfg, &request_id_prefix).await;
    Ok(Prepared {
        save_detailed: cfg.output.save_detailed,
        client,
        specs: Arc::new(specs),
        tokenizer,
        model_id,
        request_id_prefix,
        warmups_ok,
    })
}

/// Run one load level with prepared state; output counts resolved (vLLM §2.3).
pub async fn run_level(
    p: &Prepared,
    releases: Releases,
    max_concurrency: Option<usize>,
    cancel_at: Option<Duration>,
    progress: ProgressBar,
    interrupt: watch::Receiver<bool>,
) -> engine::EngineOutput {
    let specs = p.specs.clone();
    let level = Level {
        releases,
        specs,
        max_concurrency,
        cancel_at,
    };
    run_level_with(p, level, progress, interrupt).await
}

/// One load level's releases, prompts and limits.
pub struct Level {
    pub releases: Releases,
    /// Request k uses `specs[k % len]` (a shard passes its reordered prompts).
    pub specs: Arc<Vec<RequestSpec>>,
    pub max_concurrency: Option<usize>,
    pub cancel_at: Option<Duration>,
}

/// [`run_level`] with explicit prompts (a shard's share of the workload).
pub async fn run_level_with(
    p: &Prepared,
    level: Level,
    progress: ProgressBar,
    interrupt: watch::Receiver<bool>,
) -> engine::EngineOutput {
    let Level {
        releases,
        specs,
        max_concurrency,
        cancel_at,
    } = level;
    let plan = LoadPlan {
        specs,
        releases,
        max_concurrency,
        request_id_prefix: p.request_id_prefix.clone(),
        grace: GRACE,
        // A sweep step (cancel_at set) slices records by time: keep them whole.
        fold_itl: cancel_at.is_none() && !p.save_detailed,
        cancel_at,
    };
    let mut out = engine::run(p.client.clone(), plan, progress, interrupt).await;
    resolve_output_counts(&mut out.records, p.tokenizer.as_ref());
    out
}

async fn run_against(
    cfg: &RunConfig,
    server: &Server,
    interrupt: watch::Receiver<bool>,
) -> Result<RunResult> {
    let p = prepare(cfg, server).await?;
    let global = releases(&cfg.load, p.specs.len())?;
    let (level, globals) = shard_level(cfg, &p, global)?;
    announce(cfg, server, &p.model_id, &level.releases);
    let progress = progress_bar(cfg.output.progress, &level.releases);
    let scheduled =
        matches!(&level.releases, Releases::Scheduled(_)) && cfg.load.request_rate.is_finite();
    if let Some(start) = cfg.start_at {
        shard::apply::wait_until(start).await?;
    }
    let level = run_level_with(&p, level, progress, interrupt);
    let (mut out, check) = engine::probe::self_checked(level, LAG_PROBE_EVERY).await;
    if let Some(s) = cfg.shard {
        shard::apply::renumber(s, &mut out.records, globals.as_deref());
    }
    let summary = summarize(&out, cfg);
    let generator = generator_verdict(&summary, cfg, scheduled, &check);
    let shard_run = cfg
        .shard
        .map(|s| shard_run(cfg, s, &p.model_id, &out, generator.health.limited));
    let mut result = build_result(cfg, server, p.model_id, summary, out, p.warmups_ok);
    result.kneecap.generator = Some(generator);
    result.kneecap.shard = shard_run;
    Ok(result)
}

/// The whole load, or this shard's part of it (`--shard`): releases, prompts
/// reordered to their global numbers, and this shard's concurrency share.
fn shard_level(
    cfg: &RunConfig,
    p: &Prepared,
    global: Releases,
) -> Result<(Level, Option<Vec<usize>>)> {
    let Some(s) = cfg.shard else {
        let level = Level {
            releases: global,
            specs: p.specs.clone(),
            max_concurrency: cfg.load.max_concurrency,
            cancel_at: None,
        };
        return Ok((level, None));
    };
    let max_concurrency = cfg
        .load
        .max_concurrency
        .map(|c| s.concurrency(c, "--max-concurrency"))
        .transpose()
        .map_err(anyhow::Error::msg)?;
    let load = shard::apply::select(s, cfg.load.seed, global, &p.specs);
    eprintln!("kneecap: shard {s}: sending this shard's share of the seeded global load");
    let level = Level {
        releases: load.releases,
        specs: load.specs,
        max_concurrency,
        cancel_at: None,
    };
    Ok((level, load.globals))
}

/// The `kneecap.shard` block of a sharded run.
fn shard_run(
    cfg: &RunConfig,
    s: shard::Shard,
    model_id: &str,
    out: &engine::EngineOutput,
    limited: bool,
) -> ShardRun {
    let start = shard::apply::unix_s(out.started_at);
    let part = ShardPart {
        start_lateness_ms: cfg.start_at.map(|a| (start - a.unix_s()) * 1e3),
        window_start_unix_s: start,
        window_end_unix_s: start + out.duration.as_secs_f64(),
        counters: ShardCounters::from_records(&out.records, cfg.stats.goodput.as_ref()),
        hists: RunHists::from_records_and_fold(&out.records, out.fold.as_ref()),
        generator_limited: limited,
        interrupted: out.interrupted,
    };
    let id = ShardIdentity {
        shard: s,
        fingerprint: shard::apply::run_fingerprint(cfg, model_id, &[]),
        seed: cfg.load.seed,
        start_at: cfg.start_at,
    };
    ShardRun { id, part }
}

/// Did kneecap keep to its schedule? Dispatch lateness is judged only for a
/// finite-rate schedule: with `--request-rate inf` every request is due at
/// t0 and lateness measures the burst, not the generator.
fn generator_verdict(
    s: &Summary,
    cfg: &RunConfig,
    scheduled: bool,
    check: &engine::probe::SelfCheck,
) -> GeneratorVerdict {
    use crate::sweep::health;
    let lag_p99 = check.lag_p99_ms();
    let rate = cfg.load.request_rate;
    let health = if scheduled {
        health::generator_health(&s.lateness, rate, check.cpu_busy_fraction, lag_p99)
    } else {
        let unjudged = stats::Distribution::default();
        health::generator_health_with_bound(
            &unjudged,
            health::lateness_bound_ms(rate),
            check.cpu_busy_fraction,
            lag_p99,
        )
    };
    GeneratorVerdict {
        health,
        lateness_judged: scheduled,
        cpu_busy_fraction: check.cpu_busy_fraction,
        runtime_lag_p99_ms: lag_p99,
    }
}

pub fn client_config(cfg: &RunConfig, base_url: &str) -> ClientConfig {
    ClientConfig {
        base_url: base_url.to_string(),
        endpoint: cfg.endpoint.clone(),
        api: cfg.api,
        body: cfg.body.clone(),
        headers: cfg.headers.clone(),
        api_key: cfg.api_key.clone(),
        request_timeout: cfg.request_timeout,
        connect_timeout: cfg.connect_timeout,
        keep_text: cfg.tokenizer.is_some() || cfg.output.save_detailed,
    }
}

/// `--model`, or the first entry of `GET /v1/models` (its `id` goes in bodies,
/// its `root` names the model). The GET doubles as a reachability check.
async fn resolve_model(
    client: &HttpClient,
    cfg: &RunConfig,
    base_url: &str,
) -> Result<(String, String)> {
    let probe = client.get("/v1/models").await;
    let body = match probe {
        Err(e) => bail!("cannot reach the server at {base_url} ({e:#}); is it running? Check --base-url / --host / --port"),
        Ok((200, body)) => Some(body),
        Ok(_) => None,
    };
    if let Some(model) = &cfg.model {
        let served = cfg
            .served_model_name
            .clone()
            .unwrap_or_else(|| model.clone());
        return Ok((served, model.clone()));
    }
    let body = body.with_context(|| {
        format!("GET {base_url}/v1/models did not answer 200; give the model name with --model")
    })?;
    let models = openai::parse_models(&body).map_err(|e| {
        anyhow::anyhow!("GET {base_url}/v1/models: {e}; give the model name with --model")
    })?;
    let first = models
        .into_iter()
        .next()
        .with_context(|| format!("GET {base_url}/v1/models listed no model; give --model"))?;
    let root = first.root.clone().unwrap_or_else(|| first.id.clone());
    let served = cfg.served_model_name.clone().unwrap_or(first.id);
    Ok((served, root))
}

/// Due offsets (open loop) or a closed loop for a fixed time.
fn releases(load: &LoadConfig, n_specs: usize) -> Result<Releases> {
    let mut rng = StdRng::seed_from_u64(load.seed);
    Ok(match (load.duration, &load.arrival) {
        (Some(d), Arrival::Infinite) => Releases::ClosedFor(d),
        (Some(d), arrival) => Releases::Scheduled(schedule::offsets_until(d, arrival, &mut rng)),
        (None, arrival) => {
            let n = if load.num_prompts == 0 {
                n_specs
            } else {
                load.num_prompts
            };
            Releases::Scheduled(schedule::offsets(n, arrival, &mut rng))
        }
    })
}

/// `--request-id-prefix`, or vLLM's `bench-<8 random hex>-`.
/// A shard adds `s<i>-` so request ids stay unique across shards.
fn request_id_prefix(cfg: &RunConfig) -> String {
    let prefix = cfg.request_id_prefix.clone().unwrap_or_else(|| {
        let n: u32 = rand::rng().random();
        format!("bench-{n:08x}-")
    });
    match cfg.shard {
        Some(s) => format!("{prefix}s{}-", s.index),
        None => prefix,
    }
}

/// vLLM's `--ready-check-timeout-sec`: retry the first request every 5 s.
async fn ready_check(
    client: &Arc<HttpClient>,
    spec: &RequestSpec,
    timeout: Duration,
) -> Result<()> {
    if timeout.is_zero() {
        return Ok(());
    }
    let deadline = tokio::time::Instant::now() + timeout;
    loop {
        let mut rec = RequestRecord::default();
        client
            .stream(spec, "ready-check", std::time::Instant::now(), &mut rec)
            .await;
        match rec.error {
            None => return Ok(()),
            Some(e) if tokio::time::Instant::now() + Duration::from_secs(5) > deadline => {
                bail!("--ready-check-timeout-sec {}: the server never answered the first request ({})", timeout.as_secs(), e.message)
            }
            Some(_) => tokio::time::sleep(Duration::from_secs(5)).await,
        }
    }
}

async fn warm_up(
    client: &Arc<HttpClient>,
    first: &RequestSpec,
    cfg: &RunConfig,
    prefix: &str,
) -> Option<(usize, usize)> {
    let n = cfg.load.num_warmups;
    if n == 0 {
        return None;
    }
    eprintln!("kneecap: warming up with {n} request(s)");
    let ok = engine::warm_up(
        client.clone(),
        first.clone(),
        n,
        cfg.load.max_concurrency,
        prefix,
    )
    .await;
    Some((ok, n))
}

fn announce(cfg: &RunConfig, server: &Server, model_id: &str, releases: &Releases) {
    let what = match releases {
        Releases::Scheduled(d) => format!("{} requests", d.len()),
        Releases::ClosedFor(d) => format!("closed loop for {d:.0?}"),
    };
    let sim = if server.simulated {
        " (built-in simulator: numbers are SIMULATED)"
    } else {
        ""
    };
    eprintln!(
        "kneecap: {what} to {}{} model {model_id}, {}{sim}",
        server.base_url,
        cfg.endpoint,
        describe_arrival(&cfg.load)
    );
}

/// A progress bar on stderr (hidden when disabled or not a terminal).
pub fn progress_bar(enabled: bool, releases: &Releases) -> ProgressBar {
    if !enabled {
        return ProgressBar::hidden();
    }
    let pb = match releases {
        Releases::Scheduled(d) => ProgressBar::new(d.len() as u64),
        Releases::ClosedFor(_) => ProgressBar::new_spinner(),
    };
    let style = ProgressStyle::with_template(
        "{bar:40} {pos}/{len} [{elapsed_precise}<{eta_precise}, {per_sec}]",
    )
    .unwrap_or_else(|_| ProgressStyle::default_bar());
    pb.with_style(style)
}

/// vLLM §2.3: server usage if non-zero; else re-encode the text with the
/// tokenizer; else 1 per successful request.
fn resolve_output_counts(records: &mut [RequestRecord], tokenizer: Option<&TokenCounter>) {
    for r in records
        .iter_mut()
        .filter(|r| r.is_ok() && r.output_tokens == 0)
    {
        r.output_tokens = tokenizer.map(|t| t.count(&r.generated_text)).unwrap_or(1);
    }
}

fn summarize(out: &engine::EngineOutput, cfg: &RunConfig) -> Summary {
    let (records, duration) = (&out.records, out.duration);
    let mut s = match &out.fold {
        Some(fold) => stats::summarize_folded(records, duration, &cfg.stats, fold),
        None => stats::summarize(records, duration, &cfg.stats),
    };
    // kneecap's own block always carries p50/p90/p99/p99.9, whatever --metric-percentiles says.
    let own = stats::StatsOptions {
        percentiles: KNEECAP_PERCENTILES.to_vec(),
        goodput: None,
    };
    let full = stats::summarize(records, duration, &own);
    s.lateness = full.lateness;
    s.ttft_from_due = full.ttft_from_due;
    s.e2el_from_due = full.e2el_from_due;
    s
}

fn build_result(
    cfg: &RunConfig,
    server: &Server,
    model_id: String,
    summary: Summary,
    out: engine::EngineOutput,
    warmups_ok: Option<(usize, usize)>,
) -> RunResult {
    let first_errors = out
        .records
        .iter()
        .filter_map(|r| r.error.as_ref())
        .take(FIRST_ERRORS)
        .map(|e| e.message.clone()) // redacted by the client at the source
        .collect();
    let started: chrono::DateTime<chrono::Local> = out.started_at.into();
    RunResult {
        date: started.format("%Y%m%d-%H%M%S").to_string(),
        backend: backend_name(cfg.backend).into(),
        label: cfg.output.label.clone(),
        model_id,
        tokenizer_id: cfg.tokenizer.as_ref().map(|p| p.display().to_string()),
        num_prompts: cfg.load.num_prompts,
        metadata: cfg.output.metadata.clone(),
        request_rate: cfg.load.request_rate,
        burstiness: cfg.load.burstiness,
        max_concurrency: cfg.load.max_concurrency,
        ramp_up: cfg
            .load
            .ramp_up
            .map(|(s, a, b)| (ramp_name(s).into(), a, b)),
        summary,
        percentile_metrics: cfg.output.percentile_metrics.clone(),
        percentiles: cfg.stats.percentiles.clone(),
        kneecap: KneecapInfo {
            version: env!("CARGO_PKG_VERSION").into(),
            target: server.base_url.clone(),
            simulated: server.simulated,
            sim_preset: server.preset.clone(),
            endpoint: cfg.endpoint.clone(),
            dataset: cfg.dataset_name.into(),
            arrival: describe_arrival(&cfg.load),
            seed: cfg.load.seed,
            duration_bound_s: cfg.load.duration.map(|d| d.as_secs_f64()),
            interrupted: out.interrupted,
            started_at: started.to_rfc3339(),
            first_errors,
            warmups_ok,
            generator: None,
            shard: None,
            merged: None,
        },
        records: out.records,
    }
}

fn backend_name(b: Backend) -> &'static str {
    match b {
        Backend::Vllm => "vllm",
        Backend::Openai => "openai",
        Backend::OpenaiChat => "openai-chat",
    }
}

fn ramp_name(r: RampUp) -> &'static str {
    match r {
        RampUp::Linear => "linear",
        RampUp::Exponential => "exponential",
    }
}

/// "poisson 10 req/s", "gamma(b=0.5) 10 req/s", "constant 10 req/s", "all at once".
pub fn describe_arrival(load: &LoadConfig) -> String {
    let conc = load
        .max_concurrency
        .map(|c| format!(", max concurrency {c}"))
        .unwrap_or_default();
    let base = match &load.arrival {
        Arrival::Infinite if load.max_concurrency.is_some() => "closed loop (rate inf)".to_string(),
        Arrival::Infinite => "all at once (rate inf)".to_string(),
        Arrival::Constant { rate } => format!("constant {rate} req/s"),
        Arrival::Gamma { rate, burstiness } if *burstiness == 1.0 => {
            format!("poisson {rate} req/s")
        }
        Arrival::Gamma { rate, burstiness } => {
            format!("gamma(burstiness {burstiness}) {rate} req/s")
        }
        Arrival::Ramp {
            strategy,
            start,
            end,
            ..
        } => format!("ramp-up {strategy:?} {start}→{end} req/s"),
    };
    format!("{base}{conc}")
}

fn save_result(cfg: &RunConfig, result: &RunResult) -> Result<()> {
    if !cfg.output.save_result {
        return Ok(());
    }
    let path = report::save::result_path(
        cfg.output.result_dir.as_deref(),
        cfg.output.result_filename.as_deref(),
        result,
    );
    report::save::save(
        result,
        &path,
        cfg.output.save_detailed,
        cfg.output.append_result,
    )?;
    eprintln!("kneecap: result written to {}", path.display());
    Ok(())
}
