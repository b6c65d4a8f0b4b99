//! Unit tests of `run_config`: every cross-field rule and derived default of
//! `kneecap run` has a test (or a commented table row) that fails without it.

use super::*;
use crate::cmd::args::tests_support::{
    argv, assert_err_mentions, assert_rows_rejected, run_args, SHAREGPT_SAMPLE,
};

fn config_of(args: &[&str]) -> RunConfig {
    run_config(&run_args(args)).unwrap_or_else(|e| panic!("{args:?} should be valid: {e:#}"))
}

fn config(line: &str) -> RunConfig {
    config_of(&argv(line))
}

#[track_caller]
fn rejected_of(args: &[&str], needles: &[&str]) {
    assert_err_mentions(run_config(&run_args(args)), needles);
}

/// Each row: `COMMAND LINE => a fragment of the error it must give`.
fn all_rejected(rows: &[&str]) {
    assert_rows_rejected(rows, |args| run_config(&run_args(args)));
}

/// `--dataset-name NAME --dataset-path <a file that exists>`, then `line`.
fn with_file<'a>(name: &'a str, line: &'a str) -> Vec<&'a str> {
    let mut args = vec!["--dataset-name", name, "--dataset-path", SHAREGPT_SAMPLE];
    args.extend(argv(line));
    args
}

// ---- target, backend, endpoint ----------------------------------------------

#[test]
fn no_base_url_and_no_host_or_port_means_the_simulator_with_its_preset() {
    let preset = "7b-24gb".to_string();
    assert_eq!(
        config("--sim-preset 7b-24gb").target,
        Target::Sim { preset }
    );
}

#[test]
fn bench_serve_without_a_target_means_vllms_default_never_the_simulator() {
    let bench = |line: &str| {
        run_config_for(&run_args(&argv(line)), DefaultTarget::VllmLocalhost)
            .expect("a valid command line")
            .target
    };
    let localhost = Target::Url("http://127.0.0.1:8000".into());
    assert_eq!(bench("--model m --num-prompts 20"), localhost);
    // --sim-preset does not bring the simulator back under vLLM's command.
    assert_eq!(bench("--sim-preset 7b-24gb"), localhost);
    assert_eq!(
        bench("--port 9000"),
        Target::Url("http://127.0.0.1:9000".into())
    );
    assert_eq!(
        bench("--host example.org"),
        Target::Url("http://example.org:8000".into())
    );
}

#[test]
fn host_and_port_default_and_ipv6_hosts_get_brackets() {
    for (line, url) in [
        // --host without --port means port 8000.
        ("--host example.org", "http://example.org:8000"),
        // --port without --host means 127.0.0.1.
        ("--port 9000", "http://127.0.0.1:9000"),
        // An IPv6 host gets brackets, exactly once.
        ("--host ::1 --port 9", "http://[::1]:9"),
        ("--host [::1]", "http://[::1]:8000"),
        // --base-url wins over --host/--port and loses its trailing slash.
        ("--base-url http://a:1/ --host b --port 2", "http://a:1"),
    ] {
        assert_eq!(config(line).target, Target::Url(url.into()), "{line}");
    }
}

#[test]
fn backend_and_endpoint_follow_each_other() {
    use Backend::*;
    for (line, backend, endpoint) in [
        // Neither given: OpenAI completions.
        ("", Openai, "/v1/completions"),
        ("--backend vllm", Vllm, "/v1/completions"),
        // The endpoint follows the chat backend.
        ("--backend openai-chat", OpenaiChat, "/v1/chat/completions"),
        // The backend follows a chat endpoint.
        (
            "--endpoint /v1/chat/completions",
            OpenaiChat,
            "/v1/chat/completions",
        ),
    ] {
        let c = config(line);
        assert_eq!(
            (c.backend, c.endpoint.as_str()),
            (backend, endpoint),
            "{line}"
        );
        assert_eq!(c.api, backend.api(), "{line}");
    }
}

#[test]
fn target_and_endpoint_rules_name_their_flag() {
    all_rejected(&[
        // --base-url must be http:// or https://.
        "--base-url a:8000 => --base-url: 'a:8000' must start with http:// or https://",
        // --endpoint must be a path.
        "--endpoint v1/completions => --endpoint: 'v1/completions' must start with '/'",
        // The chat backend needs a chat endpoint.
        "--backend openai-chat --endpoint /v1/completions => does not match --backend openai-chat",
        // An explicit completions backend wins over a chat endpoint, and refuses it.
        "--backend openai --endpoint /v1/chat/completions => does not match the completions backend",
        // A completions backend needs a completions endpoint.
        "--backend openai --endpoint /v1/embeddings => --endpoint /v1/embeddings does not match the completions",
    ]);
}

// ---- request options ----------------------------------------------------

#[test]
fn ignore_eos_is_forced_for_the_random_dataset_only() {
    assert!(config("").body.ignore_eos);
    assert!(!config_of(&with_file("sharegpt", "")).body.ignore_eos);
    assert!(
        config_of(&with_file("sharegpt", "--ignore-eos"))
            .body
            .ignore_eos
    );
}

#[test]
fn tokenizer_must_exist() {
    rejected_of(
        &argv("--tokenizer /no/such.json"),
        &["--tokenizer", "does not exist"],
    );
    let dir = env!("CARGO_MANIFEST_DIR");
    assert_eq!(
        config_of(&["--tokenizer", dir]).tokenizer,
        Some(PathBuf::from(dir))
    );
}

#[test]
fn headers_and_metadata_are_key_equals_value_with_a_trimmed_key() {
    let c = config_of(&["--header", " X-A =1", "X-B=b=c d", "--metadata", "gpu=a10"]);
    let pair = |k: &str, v: &str| (k.to_string(), v.to_string());
    assert_eq!(c.headers, [pair("X-A", "1"), pair("X-B", "b=c d")]);
    assert_eq!(c.output.metadata, [pair("gpu", "a10")]);
    all_rejected(&[
        "--header X-A => --header: 'X-A' should be KEY=VALUE",
        "--metadata novalue => --metadata: 'novalue' should be KEY=VALUE",
    ]);
}

#[test]
fn header_key_must_not_be_empty() {
    rejected_of(&["--header", " =v"], &["--header: ' =v' has an empty key"]);
}

#[test]
fn empty_api_key_means_no_key() {
    assert_eq!(config("--api-key=").api_key, None);
    assert_eq!(config("--api-key k").api_key.as_deref(), Some("k"));
}

#[test]
fn start_at_and_shard_parse_into_their_types() {
    let c = config("--start-at 1777636800 --shard 1/4");
    assert_eq!(c.start_at.map(|s| s.0), Some(1_777_636_800_000_000_000));
    assert_eq!(c.shard, Some(Shard { index: 1, count: 4 }));
    config("--shard 3/4 --max-concurrency 4");
}

#[test]
fn option_rules_name_their_flag() {
    all_rejected(&[
        "--request-timeout 0s => --request-timeout must be greater than 0",
        "--connect-timeout 0 => --connect-timeout must be greater than 0",
        "--start-at tomorrow => --start-at: 'tomorrow' is neither RFC 3339",
        "--shard 4/4 => --shard: '4/4' should be INDEX/COUNT",
        // A sharded closed loop must leave every shard at least one stream.
        "--shard 3/4 --max-concurrency 3 => --max-concurrency 3 split over 4 shards",
    ]);
}

// ---- load -----------------------------------------------------------------

#[test]
fn arrival_follows_rate_arrival_kind_and_burstiness() {
    let gamma = |rate, burstiness| Arrival::Gamma { rate, burstiness };
    let constant = |rate| Arrival::Constant { rate };
    for (line, arrival, burstiness) in [
        // An infinite rate sends everything at once.
        ("", Arrival::Infinite, 1.0),
        // Gamma keeps the given burstiness.
        ("--request-rate 10 --burstiness 0.5", gamma(10.0, 0.5), 0.5),
        // Burstiness for poisson is 1.0, whatever --burstiness says.
        (
            "--request-rate 10 --arrival poisson --burstiness 0.5",
            gamma(10.0, 1.0),
            1.0,
        ),
        // Burstiness for constant is inf: evenly spaced arrivals.
        (
            "--request-rate 10 --arrival constant",
            constant(10.0),
            f64::INFINITY,
        ),
        // Gamma with an infinite burstiness is evenly spaced too.
        (
            "--request-rate 10 --burstiness inf",
            constant(10.0),
            f64::INFINITY,
        ),
    ] {
        let load = config(line).load;
        assert_eq!(
            (load.arrival, load.burstiness),
            (arrival, burstiness),
            "{line}"
        );
    }
}

#[test]
fn duration_and_prompt_count_bound_a_run() {
    let c = config("--num-prompts 0 --duration 5s --max-concurrency 2");
    assert_eq!(c.load.duration, Some(Duration::from_secs(5)));
    config("--duration 10s --request-rate 5");
    // custom: --num-prompts 0 means every row of the file.
    assert_eq!(
        config_of(&with_file("custom", "--num-prompts 0"))
            .dataset
            .num_prompts,
        0
    );
    let c = config("--ready-check-timeout-sec 30");
    assert_eq!(c.load.ready_check_timeout, Duration::from_secs(30));
}

#[test]
fn load_rules_name_their_flag() {
    all_rejected(&[
        "--max-concurrency 0 => --max-concurrency must be greater than 0",
        "--duration 0s --max-concurrency 4 => --duration must be greater than 0",
        // Without --duration a run needs prompts (custom excepted, above).
        "--num-prompts 0 => --num-prompts must be greater than 0 (or give --duration)",
        // --duration with --request-rate inf would send without bound.
        "--duration 10s => --duration with --request-rate inf needs --max-concurrency",
    ]);
}

// ---- ramp-up ------------------------------------------------------------

const RAMP: &str = "--ramp-up-strategy linear --ramp-up-start-rps 1 --ramp-up-end-rps 5";

#[test]
fn ramp_up_requires_an_infinite_request_rate() {
    let needs = "--ramp-up-strategy requires --request-rate to stay at inf";
    rejected_of(&argv(&format!("{RAMP} --request-rate 10")), &[needs]);
}

#[test]
fn duration_cannot_be_combined_with_ramp_up() {
    let needs = "--duration cannot be combined with --ramp-up-strategy";
    rejected_of(&argv(&format!("{RAMP} --duration 10s")), &[needs]);
}

#[test]
fn ramp_up_rules_name_their_flag() {
    all_rejected(&[
        // The rates need a strategy.
        "--ramp-up-start-rps 3 => --ramp-up-start-rps/--ramp-up-end-rps need --ramp-up-strategy",
        "--ramp-up-end-rps 3 => --ramp-up-start-rps/--ramp-up-end-rps need --ramp-up-strategy",
        // The strategy needs both rates.
        "--ramp-up-strategy linear --ramp-up-start-rps 1 => needs both --ramp-up-start-rps and",
        "--ramp-up-strategy linear --ramp-up-end-rps 5 => needs both --ramp-up-start-rps and",
        // Start must not exceed end.
        "--ramp-up-strategy linear --ramp-up-start-rps 6 --ramp-up-end-rps 5 => (6) must not exceed",
        // Start must be above 0, even for a linear ramp.
        "--ramp-up-strategy linear --ramp-up-start-rps 0 --ramp-up-end-rps 5 => --ramp-up-start-rps must be greater than 0",
    ]);
}

#[test]
fn ramp_up_becomes_a_ramp_arrival_with_the_arrival_burstiness() {
    let ramp_up = config(RAMP).load.ramp_up;
    assert_eq!(ramp_up, Some((RampStrategy::Linear, 1, 5)));
    let exp = "--ramp-up-strategy exponential --ramp-up-start-rps 2 --ramp-up-end-rps 8";
    let c = config(&format!("{exp} --arrival constant"));
    let (strategy, start, end, burstiness) = (RampStrategy::Exponential, 2.0, 8.0, f64::INFINITY);
    let want = Arrival::Ramp {
        strategy,
        start,
        end,
        burstiness,
    };
    assert_eq!(c.load.arrival, want);
}

// ---- dataset --------------------------------------------------------------

#[test]
fn dataset_rules_name_their_flag() {
    all_rejected(&[
        "--dataset-name sharegpt => --dataset-name sharegpt needs --dataset-path FILE",
        "--dataset-name custom => --dataset-name custom needs --dataset-path FILE",
        "--dataset-name custom --dataset-path /no/such => --dataset-path: '/no/such' does not exist",
        "--random-input-len 0 => --random-input-len must be at least 1",
        // --input-len is an alias of --random-input-len.
        "--input-len 0 => --random-input-len must be at least 1",
        "--random-range-ratio 1 => --random-range-ratio: 1 must be in [0, 1)",
        "--random-range-ratio=-0.1 => --random-range-ratio: -0.1 must be in [0, 1)",
        r#"--random-range-ratio={"input":1.5} => --random-range-ratio: 1.5 must be in [0, 1)"#,
        r#"--random-range-ratio={"output":1} => --random-range-ratio: 1 must be in [0, 1)"#,
        "--random-range-ratio wide => --random-range-ratio: 'wide' is neither a number nor",
    ]);
}

#[test]
fn random_dataset_rejects_a_dataset_path() {
    let args = ["--dataset-path", SHAREGPT_SAMPLE];
    rejected_of(
        &args,
        &["--dataset-path cannot be used with --dataset-name random"],
    );
}

fn random_kind(args: &[&str]) -> (u32, u32, u32, f64, f64) {
    match config_of(args).dataset.kind {
        DatasetKind::Random {
            input_len: i,
            output_len: o,
            prefix_len: p,
            range_ratio_input: ri,
            range_ratio_output: ro,
        } => (i, o, p, ri, ro),
        other => panic!("{other:?}"),
    }
}

#[test]
fn input_and_output_len_alias_the_random_lengths() {
    let given = "--random-input-len 7 --random-output-len 8 --random-prefix-len 3";
    assert_eq!(random_kind(&argv(given)), (7, 8, 3, 0.0, 0.0));
    let aliased = format!("{given} --input-len 10 --output-len 20");
    assert_eq!(random_kind(&argv(&aliased)), (10, 20, 3, 0.0, 0.0));
}

#[test]
fn random_range_ratio_is_a_fraction_or_an_input_output_object() {
    let ratios = |r| {
        let (.., ri, ro) = random_kind(&["--random-range-ratio", r]);
        (ri, ro)
    };
    assert_eq!(ratios("0.5"), (0.5, 0.5));
    assert_eq!(ratios(r#"{"input": 0.1, "output": 0.2}"#), (0.1, 0.2));
    // A missing key means 0.
    assert_eq!(ratios(r#"{"output": 0.3}"#), (0.0, 0.3));
}

#[test]
fn output_len_aliases_the_file_datasets_output_lengths() {
    let sharegpt = |line| match config_of(&with_file("sharegpt", line)).dataset.kind {
        DatasetKind::ShareGpt { output_len, .. } => output_len,
        other => panic!("{other:?}"),
    };
    assert_eq!(sharegpt(""), None);
    assert_eq!(sharegpt("--sharegpt-output-len 5"), Some(5));
    assert_eq!(sharegpt("--sharegpt-output-len 5 --output-len 9"), Some(9));
    let custom = |line| match config_of(&with_file("custom", line)).dataset.kind {
        DatasetKind::Custom { output_len, .. } => output_len,
        other => panic!("{other:?}"),
    };
    assert_eq!(custom(""), 256);
    assert_eq!(custom("--custom-output-len -1"), -1);
    assert_eq!(custom("--custom-output-len -1 --output-len 9"), 9);
}

#[test]
fn chat_backend_asks_the_dataset_for_text_prompts() {
    assert!(!config("").dataset.chat);
    assert!(config("--backend openai-chat").dataset.chat);
}

#[test]
fn dataset_name_and_options_pass_through() {
    let line = "--num-prompts 7 --seed 3 --disable-shuffle --no-oversample";
    let c = config_of(&with_file("sharegpt", line));
    assert_eq!(c.dataset_name, "sharegpt");
    let d = &c.dataset;
    let got = (d.num_prompts, d.seed, d.disable_shuffle, d.no_oversample);
    assert_eq!(got, (7, 3, true, true));
    assert_eq!(config("").dataset_name, "random");
}

// ---- body, stats, output ------------------------------------------------

#[test]
fn sampling_keys_are_sent_only_when_given_in_a_fixed_order() {
    assert!(config("").body.sampling.is_empty());
    let c = config("--top-k -1 --temperature 0.5");
    let keys: Vec<_> = c
        .body
        .sampling
        .iter()
        .map(|(k, v)| (k.as_str(), v.clone()))
        .collect();
    let (half, minus_one) = (serde_json::json!(0.5), serde_json::json!(-1));
    assert_eq!(keys, [("temperature", half), ("top_k", minus_one)]);
}

#[test]
fn extra_body_must_be_a_json_object() {
    for bad in ["[1]", "{", "16"] {
        rejected_of(
            &["--extra-body", bad],
            &["--extra-body", "is not a JSON object"],
        );
    }
    let c = config_of(&["--extra-body", r#"{"min_tokens": 16}"#]);
    assert_eq!(c.body.extra_body.unwrap()["min_tokens"], 16);
}

#[test]
fn stats_and_output_lists_parse() {
    use MetricName::{E2el, Itl, Tpot, Ttft};
    let c = config("");
    assert_eq!(
        (c.stats.goodput, c.output.percentile_metrics),
        (None, vec![Ttft, Tpot, Itl])
    );
    let c = config_of(&[
        "--metric-percentiles",
        "50, 90,,99.9",
        "--percentile-metrics",
        "e2el, ttft,",
    ]);
    assert_eq!(c.stats.percentiles, [50.0, 90.0, 99.9]);
    assert_eq!(c.output.percentile_metrics, [E2el, Ttft]);
    let c = config_of(&["--goodput", "ttft:500", "tpot:50 e2el:2000"]);
    let (ttft_ms, tpot_ms, e2el_ms) = (Some(500.0), Some(50.0), Some(2000.0));
    assert_eq!(
        c.stats.goodput,
        Some(GoodputSlo {
            ttft_ms,
            tpot_ms,
            e2el_ms
        })
    );
}

#[test]
fn stats_and_output_rules_name_their_flag() {
    all_rejected(&[
        "--metric-percentiles 50,p99 => --metric-percentiles: 'p99' is not a number",
        "--metric-percentiles 101 => --metric-percentiles: 101 must be between 0 and 100",
        "--goodput ttft => --goodput: 'ttft' should be KEY:MS",
        "--goodput ttft:-1 => --goodput: '-1' in 'ttft:-1' must be a number",
        "--goodput ttft:inf => --goodput: 'inf' in 'ttft:inf' must be a number",
        "--goodput ttft:soon => --goodput: 'soon' in 'ttft:soon' must be",
        "--goodput itl:5 => --goodput: unknown key 'itl'",
        "--percentile-metrics ttft,bogus => --percentile-metrics: unknown metric 'bogus'",
    ]);
}

#[test]
fn save_result_is_implied_by_append_result() {
    assert!(!config("").output.save_result);
    let o = config("--append-result").output;
    assert!(o.save_result && o.append_result);
}

#[test]
fn disable_tqdm_turns_progress_off() {
    assert!(config("").output.progress);
    assert!(!config("--disable-tqdm").output.progress);
}

#[test]
fn underscore_spellings_are_accepted_as_main_accepts_them() {
    let c = config("--num_prompts 5 --request_rate=2.5");
    assert_eq!((c.load.num_prompts, c.load.request_rate), (5, 2.5));
}
