//! Running the kneecap binary from tests: a command with a time bound and no
//! inherited API key, run off the async runtime.

use assert_cmd::Command;
use std::time::Duration;

/// `kneecap` with a 120 s bound and no `OPENAI_API_KEY` from the environment.
pub fn kneecap() -> Command {
    let mut c = Command::cargo_bin("kneecap").unwrap();
    c.timeout(Duration::from_secs(120));
    c.env_remove("OPENAI_API_KEY");
    c
}

/// Run kneecap with `args` (blocking, off the runtime) and return its output.
pub async fn run(args: Vec<String>, env: Vec<(String, String)>) -> std::process::Output {
    tokio::task::spawn_blocking(move || {
        let mut c = kneecap();
        for (k, v) in env {
            c.env(k, v);
        }
        c.args(args).output().unwrap()
    })
    .await
    .unwrap()
}

/// Owned strings of a command line.
pub fn strings(v: &[&str]) -> Vec<String> {
    v.iter().map(|s| s.to_string()).collect()
}

/// The sweep flags of a test's short steps: 2 s measured after a 500 ms
/// warm-up, 8 requests at least, in-flight requests given `drain` to finish,
/// a step generator-limited only beyond `max_lateness_ms` of dispatch
/// lateness (a shared machine is noisy: the tests judge the server), no
/// progress bar.
pub fn short_steps(drain: &str, max_lateness_ms: &str) -> Vec<String> {
    strings(&[
        "--step-duration",
        "2s",
        "--step-warmup",
        "500ms",
        "--step-min-requests",
        "8",
        "--step-drain",
        drain,
        "--max-lateness-ms",
        max_lateness_ms,
        "--disable-tqdm",
    ])
}
