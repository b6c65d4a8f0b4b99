//! The simulator's server log stamps each request's arrival twice: when its
//! handler read the body (`arrival_s`) and when the kernel received the last
//! byte (`arrival_rx_s`, `SO_TIMESTAMPNS`). This test starves the sim's
//! runtime while a request is on the wire and checks that the kernel stamp
//! keeps the true arrival while the handler's stamp moves with the stall:
//! the ground truth the client-overhead benchmarks subtract is the server's
//! time from the socket, not from whenever the sim got scheduled.
#![cfg(target_os = "linux")]

use std::sync::mpsc;
use std::time::Duration;

use bytes::Bytes;
use http::Request;
use http_body_util::{BodyExt, Full};
use hyper::client::conn::http1;
use hyper_util::rt::TokioIo;
use kneecap::sim::{self, SimConfig};
use serde_json::Value;
use tokio::net::TcpStream;

/// How long the sim's only runtime thread is kept busy.
const STALL: Duration = Duration::from_millis(600);

fn body() -> Full<Bytes> {
    Full::new(Bytes::from_static(
        br#"{"model":"kneecap-sim","prompt":"hello","max_tokens":2,"stream":true,"ignore_eos":true}"#,
    ))
}

async fn post(sender: &mut http1::SendRequest<Full<Bytes>>, id: &str) {
    let req = Request::post("/v1/completions")
        .header("host", "localhost")
        .header("content-type", "application/json")
        .header("x-request-id", id)
        .body(body())
        .unwrap();
    let resp = tokio::time::timeout(Duration::from_secs(10), sender.send_request(req))
        .await
        .expect("response within 10 s")
        .unwrap();
    assert_eq!(resp.status(), 200);
    resp.into_body().collect().await.unwrap();
}

#[test]
fn kernel_arrival_stamp_holds_while_the_sim_runtime_is_starved() {
    let dir = tempfile::tempdir().unwrap();
    let log = dir.path().join("server_log.jsonl");
    let mut cfg = SimConfig::from_preset("tiny").unwrap();
    cfg.server_log = Some(log.clone());

    // The sim on a runtime of its own with one thread, so one busy task
    // stops all of its connections.
    let sim_rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let sim_spawner = sim_rt.handle().clone();
    let (addr_tx, addr_rx) = mpsc::channel();
    let (stop_tx, stop_rx) = tokio::sync::oneshot::channel::<()>();
    let sim_thread = std::thread::spawn(move || {
        sim_rt.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let h = sim::start(cfg, listener).await.unwrap();
            addr_tx.send(h.addr()).unwrap();
            let _ = stop_rx.await;
            h.shutdown().await.unwrap();
        })
    });
    let addr = addr_rx.recv().unwrap();

    let client = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    client.block_on(async {
        let stream = TcpStream::connect(addr).await.unwrap();
        let (mut sender, conn) = http1::handshake(TokioIo::new(stream)).await.unwrap();
        tokio::spawn(conn);
        // Warm-ups: the host turns receive stamping on a moment after the
        // first socket asks.
        for i in 0..3 {
            post(&mut sender, &format!("warm-{i}")).await;
            tokio::time::sleep(Duration::from_millis(30)).await;
        }
        let (busy_tx, busy_rx) = tokio::sync::oneshot::channel();
        sim_spawner.spawn(async move {
            busy_tx.send(()).unwrap();
            std::thread::sleep(STALL); // the starvation under test
        });
        busy_rx.await.unwrap();
        post(&mut sender, "stalled").await;
    });
    stop_tx.send(()).unwrap();
    sim_thread.join().unwrap();

    let text = std::fs::read_to_string(&log).unwrap();
    let recs: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str::<Value>(l).unwrap())
        .filter(|v| v["request_id"].is_string())
        .collect();
    assert_eq!(recs.len(), 4, "{text}");
    // Handler read minus kernel arrival, when the read had a kernel stamp.
    let gap = |v: &Value| {
        let handler = v["arrival_s"].as_f64().unwrap();
        let kernel = v["arrival_rx_s"].as_f64()?;
        assert!(
            kernel <= handler + 1e-6,
            "kernel stamp after the handler: {v}"
        );
        Some(handler - kernel)
    };
    let stalled = recs.iter().find(|v| v["request_id"] == "stalled").unwrap();
    // The request reached the socket just as the stall began; the handler
    // read it only when the stall ended.
    let stalled_gap = gap(stalled).unwrap_or_else(|| panic!("no kernel arrival stamp: {text}"));
    assert!(
        stalled_gap >= STALL.as_secs_f64() / 2.0,
        "handler − kernel arrival {stalled_gap:.3} s, expected most of the {STALL:?} stall"
    );
    // A warm-up may lack a stamp: Linux turns receive stamping on for the
    // host a moment after the first socket asks.
    let warm = recs.iter().filter(|v| v["request_id"] != "stalled");
    for g in warm.filter_map(gap) {
        assert!(g < stalled_gap, "an unstalled request waited {g:.3} s");
    }
}
