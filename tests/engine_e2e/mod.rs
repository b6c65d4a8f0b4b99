//! What both real-engine end-to-end tests (`llama_e2e`, `vllm_e2e`) share,
//! included by each through `#[path]` (a folder without `main.rs` is no test
//! target of its own): the lock that runs one CPU-bound server test at a
//! time, the engine's paths from the environment, kneecap run with a
//! timeout, the SmolLM2 tokenizer the tests carry, and reading a number.

use assert_cmd::Command;
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// The tests time a CPU-bound server: one at a time.
pub static SERIAL: Mutex<()> = Mutex::new(());

/// The two paths in `vars` (an engine's binary and its model), or `None`
/// with a skip line naming the `script` that prints them.
pub fn engine_paths(test: &str, vars: [&str; 2], script: &str) -> Option<(PathBuf, PathBuf)> {
    match (std::env::var_os(vars[0]), std::env::var_os(vars[1])) {
        (Some(a), Some(b)) => Some((a.into(), b.into())),
        _ => {
            eprintln!(
                "skipping {test}: set {} and {} (eval \"$({script} env)\")",
                vars[0], vars[1]
            );
            None
        }
    }
}

/// The SmolLM2 tokenizer kneecap's tests carry (the served model's).
pub fn tokenizer() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/data/smollm2-135m-tokenizer.json")
        .to_string_lossy()
        .into_owned()
}

/// Run kneecap with `args`; its output.
pub fn kneecap(args: &[&str], timeout: Duration) -> std::process::Output {
    Command::cargo_bin("kneecap")
        .unwrap()
        .timeout(timeout)
        .env_remove("OPENAI_API_KEY")
        .args(args)
        .output()
        .unwrap()
}

pub fn f(v: &Value) -> f64 {
    v.as_f64().unwrap_or_else(|| panic!("not a number: {v}"))
}
