//! vLLM's defaults kept (issue 13): `kneecap bench serve` with no target talks
//! to `127.0.0.1:8000` as `vllm bench serve` does, never to the simulator;
//! `kneecap run` with no target starts the simulator and says so.

use crate::common;

use common::cli::{run, strings};
use common::Behaviour;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn bench_serve_without_a_target_sends_every_request_to_port_8000() {
    // vLLM's default port is fixed, so this test must bind it; it skips when
    // something else already listens there.
    let listener = match tokio::net::TcpListener::bind("127.0.0.1:8000").await {
        Ok(l) => l,
        Err(e) => {
            println!("skipped: 127.0.0.1:8000 is busy ({e}); this test needs vLLM's default port");
            return;
        }
    };
    let server = common::start_on(
        listener,
        Behaviour {
            model: "m".into(),
            per_token: std::time::Duration::from_millis(1),
            ..Behaviour::default()
        },
    );
    let out = run(
        strings(&[
            "bench",
            "serve",
            "--model",
            "m",
            "--num-prompts",
            "20",
            "--disable-tqdm",
        ]),
        vec![],
    )
    .await;
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        !stderr.contains("simulator"),
        "bench serve must not start the simulator: {stderr}"
    );
    // Server-side evidence: the 20 timed requests arrived here (a ready check
    // or warm-up would add more, and none was asked for).
    let truths = server.truths.lock().unwrap();
    assert_eq!(truths.len(), 20, "requests received on 127.0.0.1:8000");
    assert!(truths.iter().all(|t| t.body["model"] == "m"));
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
