//! `kneecap run` and `kneecap sweep` on bad input and hostile servers: one
//! clear line and exit status 2 for usage errors, no panics, and secrets a
//! server echoes back redacted from every output (against our own streaming
//! test server on 127.0.0.1:0).

mod common;

use common::cli::{kneecap, run, strings};
use common::Behaviour;

fn assert_usage_error(args: &[&str], needle: &str) {
    let out = kneecap().args(args).output().unwrap();
    assert_eq!(out.status.code(), Some(2), "args {args:?}");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains(needle),
        "stderr for {args:?} lacks '{needle}':\n{stderr}"
    );
    assert!(
        !stderr.contains("panicked") && !stderr.contains("RUST_BACKTRACE"),
        "{stderr}"
    );
}

#[test]
fn bad_input_gets_one_clear_line_and_exit_status_2() {
    assert_usage_error(&["run", "--no-such-flag"], "--no-such-flag");
    assert_usage_error(
        &[
            "run",
            "--base-url",
            "http://127.0.0.1:1",
            "--num-prompts",
            "1",
        ],
        "cannot reach the server",
    );
    assert_usage_error(
        &[
            "run",
            "--base-url",
            "http://127.0.0.1:1",
            "--dataset-name",
            "sharegpt",
            "--dataset-path",
            "/no/such/file.json",
        ],
        "/no/such/file.json",
    );
    assert_usage_error(
        &["run", "--ramp-up-strategy", "linear", "--request-rate", "5"],
        "--ramp-up-strategy",
    );
    assert_usage_error(&["run", "--max-concurrency", "0"], "--max-concurrency");
    assert_usage_error(
        &[
            "run",
            "--backend",
            "openai-chat",
            "--endpoint",
            "/v1/completions",
        ],
        "--endpoint",
    );
    assert_usage_error(&["run", "--goodput", "ttft=5"], "--goodput");
    assert_usage_error(&["run", "--extra-body", "[1,2]"], "--extra-body");
}

/// Every file under `dir` plus the captured output, as one string.
fn everything_written(dir: &std::path::Path, out: &std::process::Output) -> String {
    let mut all = format!(
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    for entry in std::fs::read_dir(dir).unwrap() {
        all.push_str(&std::fs::read_to_string(entry.unwrap().path()).unwrap_or_default());
    }
    all
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn secrets_echoed_back_by_a_server_are_redacted_from_every_output() {
    let server = common::start(Behaviour {
        status: Some(401),
        ..Default::default()
    })
    .await;
    let secret = "sk-live-9f8e7d6c5b4a";
    let header_secret = "hdr-token-1a2b3c4d";
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path().to_str().unwrap().to_string();
    let run_args = strings(&[
        "run",
        "--base-url",
        &server.url(),
        "--num-prompts",
        "3",
        "--random-input-len",
        "8",
        "--random-output-len",
        "2",
        "--header",
        &format!("x-api-key={header_secret}"),
        "--save-result",
        "--save-detailed",
        "--result-dir",
        &d,
        "--result-filename",
        "run.json",
        "--disable-tqdm",
    ]);
    let sweep_args = strings(&[
        "sweep",
        "--base-url",
        &server.url(),
        "--rates",
        "5",
        "--step-duration",
        "1s",
        "--step-warmup",
        "0s",
        "--step-min-requests",
        "3",
        "--random-input-len",
        "8",
        "--random-output-len",
        "2",
        "--header",
        &format!("x-api-key={header_secret}"),
        "-o",
        &format!("{d}/sweep.json"),
        "--html",
        &format!("{d}/sweep.html"),
        "--disable-tqdm",
    ]);
    let env = vec![("OPENAI_API_KEY".to_string(), secret.to_string())];
    let run_out = run(run_args, env.clone()).await;
    let sweep_out = run(sweep_args, env).await;
    let truths = server.truths.lock().unwrap().clone();
    assert!(
        truths
            .iter()
            .any(|t| t.headers.iter().any(|(_, v)| v.contains(secret))),
        "key was sent"
    );
    for out in [&run_out, &sweep_out] {
        let all = everything_written(dir.path(), out);
        assert!(
            all.contains("test failure (got"),
            "the server's error message is shown: {all}"
        );
        assert!(all.contains("[REDACTED]"), "the echoed secret is replaced");
        for s in [secret, header_secret] {
            let at = all
                .find(s)
                .map(|i| &all[i.saturating_sub(300)..(i + 50).min(all.len())]);
            assert!(at.is_none(), "secret leaked: …{}…", at.unwrap_or(""));
        }
    }
}
