//! vLLM's defaults kept (issue 13): `kneecap bench serve` with no target talks
//! to `127.0.0.1:8000` as `vllm bench serve` does, never to the simulator;
//! `kneecap run` with no target starts the simulator and says so.

use crate::common;

use common::cli::{run, strings};
use common::Behaviour;

/// Every proxy variable kneecap reads (as curl does); the test sets one.
const PROXY_VARS: [&str; 6] = [
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "no_proxy",
    "NO_PROXY",
];

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_serve_without_a_target_sends_every_request_to_port_8000() {
    // vLLM's default target is a fixed port, which a test must not bind (and
    // something else may hold it). So the test server, on 127.0.0.1:0, poses
    // as the `http_proxy`: kneecap sends an http target's requests through
    // it (loopback included, as curl does), each naming in its Host header
    // the server it is meant for. Nothing connects to port 8000; the
    // simulator would not use the proxy at all, and another target would
    // name another host.
    let server = common::start(Behaviour {
        model: "m".into(),
        per_token: std::time::Duration::from_millis(1),
        ..Behaviour::default()
    })
    .await;
    let proxy = format!("http://{}", server.addr);
    let args = strings(&[
        "bench",
        "serve",
        "--model",
        "m",
        "--num-prompts",
        "20",
        "--disable-tqdm",
    ]);
    let out = tokio::task::spawn_blocking(move || {
        let mut c = common::cli::kneecap();
        for var in PROXY_VARS {
            c.env_remove(var);
        }
        c.env("http_proxy", proxy).args(args).output().unwrap()
    })
    .await
    .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        !stderr.contains("simulator"),
        "bench serve must not start the simulator: {stderr}"
    );
    assert!(
        stderr.contains("to http://127.0.0.1:8000/v1/completions"),
        "the run names vLLM's default target: {stderr}"
    );
    // Server-side evidence: the 20 timed requests arrived (a ready check or
    // warm-up would add more, and none was asked for), each for
    // 127.0.0.1:8000.
    let truths = server.truths.lock().unwrap();
    assert_eq!(truths.len(), 20, "requests received through the proxy");
    for t in truths.iter() {
        let host = t.headers.iter().find(|(k, _)| k == "host");
        assert_eq!(
            host.map(|(_, v)| v.as_str()),
            Some("127.0.0.1:8000"),
            "{:?}",
            t.headers
        );
        assert_eq!(t.body["model"], "m");
    }
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Successful requests:                     20"),
        "{stdout}"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn run_without_a_target_starts_the_simulator_and_says_so() {
    let out = run(
        strings(&[
            "run",
            "--num-prompts",
            "3",
            "--random-input-len",
            "8",
            "--random-output-len",
            "4",
            "--disable-tqdm",
        ]),
        vec![],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("started the built-in simulator"),
        "the simulator is announced on stderr: {stderr}"
    );
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        stdout.contains("Successful requests:                     3"),
        "{stdout}"
    );
}
