//! What the llama.cpp end-to-end tests share: the server's paths from the
//! environment, a `llama-server` started on a free loopback port (killed on
//! drop), a plain HTTP GET, and `kneecap` run with a timeout.

#[path = "../engine_e2e/mod.rs"]
mod common;
pub use common::{f, kneecap, tokenizer, SERIAL};

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

/// The binary and model paths, or `None` (with a skip line) when unset.
pub fn llama_env(test: &str) -> Option<(PathBuf, PathBuf)> {
    common::engine_paths(
        test,
        ["KNEECAP_LLAMA_SERVER", "KNEECAP_LLAMA_MODEL"],
        "scripts/llama-server.sh",
    )
}

/// A running llama-server; killed on drop.
pub struct LlamaServer {
    child: Child,
    port: u16,
    log: tempfile::NamedTempFile,
}

impl LlamaServer {
    /// Starts `server` with `model` on `slots` slots of 2048 tokens each,
    /// computing with `threads` threads; waits (60 s at most) until healthy.
    pub fn start(server: &Path, model: &Path, slots: usize, threads: usize) -> LlamaServer {
        let log = tempfile::NamedTempFile::new().unwrap();
        // Port 0 is not accepted by llama-server: take a free port from the
        // kernel and hand it over (a race only with other binds in between).
        let port = TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let ctx = (slots * 2048).to_string();
        let child = std::process::Command::new(server)
            .args(["-m", model.to_str().unwrap(), "--alias", "smollm2"])
            .args(["--host", "127.0.0.1", "--port", &port.to_string()])
            .args(["-t", &threads.to_string(), "-np", &slots.to_string()])
            .args(["-c", &ctx])
            .args(["--metrics", "--offline", "--no-webui"])
            .stdin(Stdio::null())
            .stdout(log.reopen().unwrap())
            .stderr(log.reopen().unwrap())
            .spawn()
            .unwrap_or_else(|e| panic!("cannot start {}: {e}", server.display()));
        let mut s = LlamaServer { child, port, log };
        let deadline = Instant::now() + Duration::from_secs(60);
        loop {
            if let Some(status) = s.child.try_wait().unwrap() {
                panic!(
                    "llama-server exited ({status}) during startup:\n{}",
                    s.log()
                );
            }
            if get(port, "/health").is_some_and(|b| b.contains("\"ok\"")) {
                break;
            }
            assert!(
                Instant::now() < deadline,
                "llama-server not healthy in 60 s:\n{}",
                s.log()
            );
            std::thread::sleep(Duration::from_millis(100));
        }
        s
    }

    pub fn url(&self) -> String {
        format!("http://127.0.0.1:{}", self.port)
    }

    pub fn log(&self) -> String {
        let text = std::fs::read_to_string(self.log.path()).unwrap_or_default();
        let tail: Vec<&str> = text.lines().rev().take(30).collect();
        tail.into_iter().rev().collect::<Vec<_>>().join("\n")
    }
}

impl Drop for LlamaServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// A plain HTTP/1.1 GET on loopback; the body, or `None` on any error.
fn get(port: u16, path: &str) -> Option<String> {
    let mut s = TcpStream::connect(("127.0.0.1", port)).ok()?;
    s.set_read_timeout(Some(Duration::from_secs(2))).ok()?;
    write!(
        s,
        "GET {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n"
    )
    .ok()?;
    let mut text = String::new();
    s.read_to_string(&mut text).ok()?;
    text.starts_with("HTTP/1.1 200")
        .then(|| text.split_once("\r\n\r\n").map(|(_, b)| b.to_string()))?
}
