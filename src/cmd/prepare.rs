//! Preparing and running one load level, shared by `kneecap run` and each
//! step of `kneecap sweep`: check OS limits, connect, resolve the model,
//! build the workload, ready-check and warm up, then drive the engine over
//! one level's releases and resolve output token counts (vLLM §2.3).

use super::target::Server;
use crate::client::http::{ClientConfig, HttpClient};
use crate::client::openai::{self, BodyOptions};
use crate::client::scrape::Scraper;
use crate::config::{RunConfig, Target};
use crate::engine::{self, LoadPlan, Releases};
use crate::metrics::{refusal, RequestRecord};
use crate::result::ServerInfo;
use crate::workload::session::SessionSpec;
use crate::workload::{dataset, tokenizer::TokenCounter, Prompt, RequestSpec};
use anyhow::{bail, Context, Result};
use indicatif::{ProgressBar, ProgressStyle};
use rand::Rng;
use std::sync::Arc;
use std::time::Duration;
use tokio::sync::watch;

/// Time in-flight requests get to finish after Ctrl-C.
const GRACE: Duration = Duration::from_secs(5);

/// Raise the open-file limit and refuse a concurrency the OS cannot hold.
pub fn check_os_limits(cfg: &RunConfig) -> Result<()> {
    let limit = crate::client::limits::raise_open_file_limit();
    let sim = matches!(cfg.target, Target::Sim { .. });
    match cfg.load.max_concurrency {
        Some(n) => crate::client::limits::check_concurrency(n, sim, limit),
        None => Ok(()),
    }
}

/// What a run needs once the target answered: client, model, workload.
pub struct Prepared {
    pub client: Arc<HttpClient>,
    pub specs: Arc<Vec<RequestSpec>>,
    pub tokenizer: Option<TokenCounter>,
    /// vLLM's `model_id` key: `--model`, else the first listed model's
    /// `root` (what the server loaded), as vLLM's client names it.
    pub model_id: String,
    /// The name requests carry in `model` (the listing's `id`, or
    /// `--served-model-name`/`--model`): what kneecap's own lines and a
    /// sweep's workload call the model.
    pub served_model: String,
    /// What the server said about itself (`/v1/models`, vLLM's
    /// `vllm:cache_config_info`); `None` when it said nothing.
    pub server: Option<ServerInfo>,
    pub request_id_prefix: String,
    pub warmups_ok: Option<(usize, usize)>,
    /// `--save-detailed`: keep every ITL gap (no folding).
    pub save_detailed: bool,
    /// A pooling backend: nothing is generated, so output counts stay 0.
    pub pooling: bool,
    /// A replayed trace's rows and timestamps (its requests are `specs`).
    pub trace: Option<Arc<dataset::TraceWorkload>>,
    /// `--multi-turn`: the planned sessions (`specs` holds their opening turns).
    pub sessions: Option<Arc<Vec<SessionSpec>>>,
}

/// Connect, resolve the model, build the workload, ready-check and warm up.
pub async fn prepare(cfg: &RunConfig, server: &Server) -> Result<Prepared> {
    for note in &cfg.ignored_flags {
        eprintln!("kneecap: {note}");
    }
    let mut client = HttpClient::new(client_config(cfg, &server.base_url))?;
    let model = resolve_model(&client, cfg, &server.base_url).await?;
    client.set_body_options(BodyOptions {
        model: model.served.clone(),
        ..cfg.body.clone()
    });
    let server_info = server_info(&client, model.listed.as_ref(), &server.base_url).await;
    let client = Arc::new(client);
    let tokenizer = cfg
        .tokenizer
        .as_deref()
        .map(TokenCounter::from_path)
        .transpose()?;
    let (specs, trace, sessions) = match &cfg.sessions {
        Some(sc) => {
            let sessions = super::sessions::build(cfg, sc, tokenizer.as_ref())?;
            (
                super::sessions::first_turns(&sessions),
                None,
                Some(Arc::new(sessions)),
            )
        }
        None => {
            let (specs, trace) = load_workload(cfg, tokenizer.as_ref())?;
            (specs, trace, None)
        }
    };
    if specs.is_empty() {
        bail!("the dataset produced no requests (check --dataset-path and --num-prompts)");
    }
    let request_id_prefix = request_id_prefix(cfg);
    ready_check(&client, &specs[0], cfg.load.ready_check_timeout).await?;
    let warmups_ok = warm_up(&client, &specs[0], cfg, &request_id_prefix).await;
    Ok(Prepared {
        save_detailed: cfg.output.save_detailed,
        pooling: cfg.api.is_pooling(),
        client,
        specs: Arc::new(specs),
        tokenizer,
        model_id: model.model_id,
        served_model: model.served,
        server: server_info,
        request_id_prefix,
        warmups_ok,
        trace,
        sessions,
    })
}

/// Images go out only in chat messages: a dataset with images (custom rows
/// with `images`) on another API stops rather than drop them.
fn images_need_chat(cfg: &RunConfig, specs: &[RequestSpec]) -> Result<()> {
    let with_images = specs
        .iter()
        .filter(|s| matches!(s.prompt, Prompt::Media(_)))
        .count();
    if with_images > 0 && cfg.api != openai::Api::Chat {
        bail!(
            "{with_images} of the dataset's requests carry images, which go out only in chat messages: \
             add --backend openai-chat"
        );
    }
    Ok(())
}

/// The dataset's requests, and a trace's rows when it is one (with a
/// warning for rows whose hash ids cannot cover their input length).
fn load_workload(
    cfg: &RunConfig,
    tokenizer: Option<&TokenCounter>,
) -> Result<(Vec<RequestSpec>, Option<Arc<dataset::TraceWorkload>>)> {
    let dataset::DatasetKind::TimedTrace(tc) = &cfg.dataset.kind else {
        let specs = dataset::load(&cfg.dataset, tokenizer)?;
        images_need_chat(cfg, &specs)?;
        return Ok((specs, None));
    };
    let mut t = dataset::load_trace(tc, &cfg.dataset, tokenizer)?;
    if let Some(s) = t.short {
        eprintln!(
            "kneecap: warning: {} of {} trace rows have too few hash ids for their input length, so their prompts are shorter \
             (first: {}:{}, {} of {} tokens at {} tokens per id); Mooncake traces need --timed-trace-chunk-hash-size 512",
            s.rows,
            t.rows.len(),
            tc.path.display(),
            s.first_line,
            s.covered,
            s.wanted,
            tc.chunk_size
        );
    }
    let specs = std::mem::take(&mut t.requests);
    Ok((specs, Some(Arc::new(t))))
}

/// One load level's releases, prompts and limits.
pub struct Level {
    pub releases: Releases,
    /// Request k uses `specs[k % len]` (a shard passes its reordered prompts).
    pub specs: Arc<Vec<RequestSpec>>,
    pub max_concurrency: Option<usize>,
    pub cancel_at: Option<Duration>,
    /// An adaptive sweep step's observer and early end.
    pub watch: Option<engine::Watch>,
    /// `--multi-turn`: this level's sessions (a sweep step's own draw);
    /// `None`: the prepared ones.
    pub sessions: Option<Arc<Vec<SessionSpec>>>,
}

/// Run one load level with prepared state: the engine drives it
/// ([`engine::drive_level`]), then output counts are resolved (vLLM §2.3).
/// An error when the level's first requests were all refused the same way
/// (the engine stopped it): the run or sweep stops with the server's message.
pub async fn run_level(
    p: &Prepared,
    level: Level,
    progress: ProgressBar,
    interrupt: watch::Receiver<bool>,
) -> Result<engine::EngineOutput> {
    let Level {
        releases,
        specs,
        max_concurrency,
        cancel_at,
        watch,
        sessions,
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
        watch,
        sessions: sessions.or_else(|| p.sessions.clone()),
    };
    let mut out = engine::drive_level(p.client.clone(), plan, progress, interrupt).await;
    if let Some(r) = &out.refused {
        bail!("{}", super::refused::level_refused(r));
    }
    if !p.pooling {
        resolve_output_counts(&mut out.records, p.tokenizer.as_ref());
    }
    Ok(out)
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
        // Sessions send each answer back in the next turn.
        keep_text: cfg.tokenizer.is_some() || cfg.output.save_detailed || cfg.sessions.is_some(),
        tls: cfg.tls.clone(),
        kernel_stamps: cfg.kernel_stamps,
        // The built-in simulator is in this process: never through a proxy.
        proxies: match cfg.target {
            Target::Sim { .. } => Default::default(),
            Target::Url(_) => cfg.proxies.clone(),
        },
    }
}

/// The model a run names: what goes in bodies, vLLM's `model_id`, and the
/// listing entry they came from.
struct Resolved {
    served: String,
    model_id: String,
    listed: Option<openai::ModelEntry>,
}

/// `--model`, or the first entry of `GET /v1/models`: its `id` goes in
/// bodies, its `root` is vLLM's `model_id` (as vLLM's client takes them).
/// The GET doubles as a reachability check.
async fn resolve_model(client: &HttpClient, cfg: &RunConfig, base_url: &str) -> Result<Resolved> {
    let body = match list_models(client, cfg.load.ready_check_timeout).await {
        Err(e) => match crate::client::net::handshake_failure(&e) {
            Some(line) => bail!("{line}"),
            None => bail!(
                "cannot reach the server at {base_url} ({e:#}); is it running? Check --base-url / --host / --port \
                 (a server still starting, as vLLM before its engine is ready, refuses connections: \
                 --ready-check-timeout-sec N waits for it)"
            ),
        },
        Ok((200, body)) => Some(body),
        Ok(_) => None,
    };
    let listed = body.as_deref().and_then(|b| openai::parse_models(b).ok());
    if let Some(model) = &cfg.model {
        let served = cfg
            .served_model_name
            .clone()
            .unwrap_or_else(|| model.clone());
        let entry = listed.and_then(|m| {
            m.into_iter()
                .find(|e| e.id == served || e.root.as_deref() == Some(model))
        });
        return Ok(Resolved {
            served,
            model_id: model.clone(),
            listed: entry,
        });
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
    Ok(Resolved {
        served: cfg
            .served_model_name
            .clone()
            .unwrap_or_else(|| first.id.clone()),
        model_id: first.root.clone().unwrap_or_else(|| first.id.clone()),
        listed: Some(first),
    })
}

/// `GET /v1/models`; with `--ready-check-timeout-sec`, retried every 5 s
/// while the connection fails (a server still starting does not listen yet)
/// until the timeout.
async fn list_models(client: &HttpClient, wait: Duration) -> Result<(u16, bytes::Bytes)> {
    let deadline = tokio::time::Instant::now() + wait;
    loop {
        match client.get("/v1/models").await {
            Err(e)
                if crate::client::net::handshake_failure(&e).is_none()
                    && tokio::time::Instant::now() + Duration::from_secs(5) <= deadline =>
            {
                tokio::time::sleep(Duration::from_secs(5)).await
            }
            answer => return answer,
        }
    }
}

/// What the server publishes about itself: the listing's root and context
/// length, vLLM's cache configuration from `{base_url}/metrics` (one
/// scrape) and a dev-mode vLLM's scheduler limits; a server without them
/// gives none of those fields.
async fn server_info(
    client: &HttpClient,
    listed: Option<&openai::ModelEntry>,
    base_url: &str,
) -> Option<ServerInfo> {
    use crate::client::server_info::{parse_scheduler_limits, SERVER_INFO_PATH};
    let cache = match Scraper::new(&format!("{base_url}/metrics")) {
        Ok(s) => s.cache_config().await,
        Err(_) => None,
    };
    let limits = match client.get(SERVER_INFO_PATH).await {
        Ok((200, body)) => parse_scheduler_limits(&body),
        _ => None,
    };
    let source = (cache.is_some() || limits.is_some()).then(|| "vllm".to_string());
    let (c, l) = (cache.unwrap_or_default(), limits.unwrap_or_default());
    let info = ServerInfo {
        source,
        model_root: listed.and_then(|m| m.root.clone()),
        max_model_len: listed.and_then(|m| m.max_model_len),
        kv_cache_tokens: c.kv_cache_tokens,
        block_size: c.block_size,
        num_blocks: c.num_blocks,
        prefix_caching: c.prefix_caching,
        kv_cache_bytes: c.kv_cache_bytes,
        max_num_seqs: l.max_num_seqs,
        max_num_batched_tokens: l.max_num_batched_tokens,
        chunked_prefill: l.chunked_prefill,
    };
    (!info.is_empty()).then_some(info)
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

/// vLLM's `--ready-check-timeout-sec`: retry the first request every 5 s
/// while the server starts (connection errors, 5xx, 408, 429). A refusal of
/// the request itself (any other 4xx) will not change by waiting: it stops
/// the check at once, with the server's message.
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
        // A server that accepts the request and never answers must not hold
        // the check past its timeout.
        let left = deadline.saturating_duration_since(tokio::time::Instant::now());
        let attempt = client.stream(spec, "ready-check", std::time::Instant::now(), &mut rec);
        if tokio::time::timeout(left, attempt).await.is_err() {
            bail!(
                "--ready-check-timeout-sec {}: the server accepted the first request but did not finish answering it in time",
                timeout.as_secs()
            );
        }
        let refused = rec.error.as_ref().and_then(refusal::refusal);
        if let Some((status, message)) = refused {
            bail!("{}", super::refused::ready_check_refused(status, &message));
        }
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

/// `--profile`: POST `path` (`/start_profile` or `/stop_profile`); a failure
/// is one line on stderr and the run goes on, as the profiler is optional.
pub async fn profile(client: &HttpClient, path: &str) {
    match client.post_empty(path).await {
        Ok((200, _)) => eprintln!("kneecap: --profile: POST {path} ok"),
        Ok((status, body)) => eprintln!(
            "kneecap: --profile: POST {path} answered HTTP {status}: {} (start the server with a profiler configured)",
            String::from_utf8_lossy(&body[..body.len().min(200)]).trim()
        ),
        Err(e) => eprintln!("kneecap: --profile: POST {path} failed: {e:#}"),
    }
}
