//! What the vLLM end-to-end tests share: a `vllm serve` started through
//! `scripts/vllm-server.sh` (the one place that knows its flags and
//! environment) on a free loopback port and stopped on drop, the server's
//! own counters and histograms read from its `/metrics`, and `kneecap` or
//! vLLM's own client run with a timeout.

#[path = "../engine_e2e/mod.rs"]
mod common;
pub use common::{f, kneecap, tokenizer, SERIAL};

use serde_json::Value;
use std::io::{Read, Write};
use std::net::TcpStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

/// vLLM's CLI and the model directory (`scripts/vllm-server.sh env`), or
/// `None` with a skip line when unset.
pub fn vllm_env(test: &str) -> Option<(PathBuf, PathBuf)> {
    common::engine_paths(
        test,
        ["KNEECAP_VLLM", "KNEECAP_VLLM_MODEL"],
        "scripts/vllm-server.sh",
    )
}

/// A running `vllm serve`; its process group is stopped on drop.
pub struct VllmServer {
    pgid: i32,
    pub url: String,
    pub log: PathBuf,
}

impl VllmServer {
    /// Starts vLLM with `engine` flags passed through (and dev mode, which
    /// serves `POST /reset_prefix_cache` and `/server_info`, when `dev`);
    /// returns once `/health` answers (the script waits, 10 min at most).
    pub fn start(dev: bool, engine: &[&str]) -> VllmServer {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/vllm-server.sh");
        let mut cmd = std::process::Command::new(script);
        cmd.arg("start");
        if dev {
            cmd.arg("--dev-mode");
        }
        // Its own process group: the script's `vllm serve` and the engine
        // core it spawns are stopped together.
        cmd.args(engine)
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::inherit())
            .process_group(0);
        let started = Instant::now();
        let child = cmd.spawn().expect("cannot run scripts/vllm-server.sh");
        let pgid = child.id() as i32;
        let out = child.wait_with_output().unwrap();
        let text = String::from_utf8_lossy(&out.stdout).into_owned();
        let field = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(k))
                .map(str::to_string)
        };
        let server = VllmServer {
            pgid,
            url: field("URL=").unwrap_or_default(),
            log: field("LOG=").unwrap_or_default().into(),
        };
        assert!(
            out.status.success() && !server.url.is_empty(),
            "vllm-server.sh start failed: {text}"
        );
        eprintln!(
            "vLLM ready at {} after {:.0} s ({engine:?}, dev mode {dev})",
            server.url,
            started.elapsed().as_secs_f64()
        );
        server
    }

    /// The last lines of the server's log.
    pub fn log_tail(&self) -> String {
        let text = std::fs::read_to_string(&self.log).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(30).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }

    /// The KV cache the engine logged at its start ("KV cache size: N tokens").
    pub fn logged_kv_tokens(&self) -> u64 {
        self.log_text()
            .lines()
            .find_map(|l| l.split("KV cache size: ").nth(1))
            .and_then(|rest| rest.split(" tokens").next())
            .and_then(|n| n.replace(',', "").parse().ok())
            .expect("the engine logs its KV cache size")
    }

    /// The whole log (the engine prints its KV cache size there).
    pub fn log_text(&self) -> String {
        std::fs::read_to_string(&self.log).unwrap_or_default()
    }

    pub fn port(&self) -> u16 {
        self.url.rsplit(':').next().unwrap().parse().unwrap()
    }

    /// `GET path`: the status and body, or `None` on a connection error.
    pub fn get(&self, path: &str) -> Option<(u16, String)> {
        http(self.port(), "GET", path)
    }

    /// The server's `/metrics` now.
    pub fn metrics(&self) -> Metrics {
        let (status, body) = self.get("/metrics").expect("GET /metrics");
        assert_eq!(status, 200, "{body}");
        Metrics(body)
    }
}

impl Drop for VllmServer {
    fn drop(&mut self) {
        // SIGTERM lets vLLM stop its engine core; SIGKILL what is left.
        let group = format!("-{}", self.pgid);
        let kill = |sig: &str| {
            std::process::Command::new("kill")
                .args([sig, "--", &group])
                .stderr(Stdio::null())
                .status()
                .is_ok_and(|s| s.success())
        };
        kill("-TERM");
        let deadline = Instant::now() + Duration::from_secs(15);
        while Instant::now() < deadline && kill("-0") {
            std::thread::sleep(Duration::from_millis(200));
        }
        kill("-KILL");
    }
}

/// A plain HTTP/1.1 request on loopback: status and body.
fn http(port: u16, method: &str, path: &str) -> Option<(u16, String)> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
    write!(
        s,
        "{method} {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    let status = text.get(9..12)?.parse().ok()?;
    let (_, body) = text.split_once("\r\n\r\n")?;
    Some((status, body.to_string()))
}

/// One `/metrics` text, read by the tests themselves (not through kneecap).
pub struct Metrics(pub String);

impl Metrics {
    /// The sum of every sample named exactly `name` (over its labels).
    pub fn sum(&self, name: &str) -> f64 {
        self.0
            .lines()
            .filter(|l| !l.starts_with('#'))
            .filter_map(|l| {
                let (head, value) = l.rsplit_once(' ')?;
                let metric = head.split('{').next()?;
                (metric == name).then(|| value.parse::<f64>().ok())?
            })
            .sum()
    }

    /// A histogram's mean over the window from `before` to `self`, seconds.
    pub fn mean_since(&self, before: &Metrics, histogram: &str) -> f64 {
        let delta = |suffix: &str| {
            let name = format!("{histogram}_{suffix}");
            self.sum(&name) - before.sum(&name)
        };
        delta("sum") / delta("count")
    }

    /// A counter's increase from `before` to `self`.
    pub fn delta(&self, before: &Metrics, counter: &str) -> f64 {
        self.sum(counter) - before.sum(counter)
    }
}

/// kneecap's arguments from one line (no argument holds a space).
pub fn kneecap_line(line: &str, timeout: Duration) -> std::process::Output {
    let args: Vec<&str> = line.split_whitespace().collect();
    kneecap(&args, timeout)
}

pub fn json(path: &Path) -> Value {
    let text = std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_str(&text).unwrap()
}

pub fn text(out: &std::process::Output) -> (String, String) {
    (
        String::from_utf8_lossy(&out.stdout).into_owned(),
        String::from_utf8_lossy(&out.stderr).into_owned(),
    )
}
