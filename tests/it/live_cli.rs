//! `kneecap run` watched live: `--metrics-listen` on 127.0.0.1:0 serves
//! valid Prometheus text during the run whose request counters end at the
//! run's own counts, and `--ui dashboard` on a pseudo-terminal draws the
//! dashboard and then prints the usual summary.

use crate::common;

use common::Behaviour;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpStream;
use std::process::{Child, Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

const BOUND: Duration = Duration::from_secs(60);

/// The lines a child writes to one of its pipes, as they come.
fn lines(pipe: impl Read + Send + 'static) -> mpsc::Receiver<String> {
    let (tx, rx) = mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(pipe).lines().map_while(Result::ok) {
            if tx.send(line).is_err() {
                break;
            }
        }
    });
    rx
}

/// `GET /metrics`, the body.
fn scrape(addr: &str) -> String {
    let mut s = TcpStream::connect(addr).expect("the exporter accepts");
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    write!(
        s,
        "GET /metrics HTTP/1.1\r\nHost: {addr}\r\nConnection: close\r\n\r\n"
    )
    .unwrap();
    let mut text = String::new();
    s.read_to_string(&mut text).unwrap();
    assert!(text.starts_with("HTTP/1.1 200"), "{text}");
    text.split_once("\r\n\r\n").expect("a body").1.to_string()
}

/// Parse with `prometheus-parse`; every `# TYPE`d family must have samples.
fn parse(body: &str) -> prometheus_parse::Scrape {
    let lines = body.lines().map(|l| Ok(l.to_string()));
    let scrape = prometheus_parse::Scrape::parse(lines).expect("valid Prometheus text");
    for line in body.lines().filter(|l| l.starts_with("# TYPE ")) {
        let name = line.split_whitespace().nth(2).unwrap();
        assert!(
            scrape.samples.iter().any(|s| s.metric.starts_with(name)),
            "{name} has a TYPE line and no samples:\n{body}"
        );
    }
    scrape
}

fn counter(s: &prometheus_parse::Scrape, name: &str, outcome: &str) -> f64 {
    s.samples
        .iter()
        .filter(|x| x.metric == name && x.labels.get("outcome") == Some(outcome))
        .map(|x| match x.value {
            prometheus_parse::Value::Counter(v) | prometheus_parse::Value::Untyped(v) => v,
            ref other => panic!("{name} is not a counter: {other:?}"),
        })
        .sum()
}

/// The number after `label` in the console summary.
fn summary_count(stdout: &[String], label: &str) -> f64 {
    let line = stdout
        .iter()
        .find(|l| l.starts_with(label))
        .unwrap_or_else(|| panic!("no {label} in\n{}", stdout.join("\n")));
    line[label.len()..].trim().parse().unwrap()
}

fn spawn(args: &[&str]) -> Child {
    Command::new(env!("CARGO_BIN_EXE_kneecap"))
        .args(args)
        .env_remove("OPENAI_API_KEY")
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("kneecap starts")
}

#[tokio::test(flavor = "multi_thread")]
async fn a_scrape_during_a_run_is_valid_prometheus_text_whose_counters_end_at_the_runs_counts() {
    // Requests after the first 12 POSTs fail with HTTP 500: both outcomes occur.
    let server = common::start(Behaviour {
        fail_after: Some(12),
        ..Behaviour::default()
    })
    .await;
    let url = server.url();
    tokio::task::spawn_blocking(move || scrape_a_run(&url))
        .await
        .unwrap();
}

fn scrape_a_run(url: &str) {
    let mut child = spawn(&[
        "run",
        "--base-url",
        url,
        "--num-prompts",
        "40",
        "--request-rate",
        "20",
        "--random-input-len",
        "16",
        "--random-output-len",
        "8",
        "--seed",
        "1",
        "--disable-tqdm",
        "--ui",
        "plain",
        "--metrics-listen",
        "127.0.0.1:0",
        "--metrics-linger",
        "30s",
    ]);
    let (out, err) = (
        lines(child.stdout.take().unwrap()),
        lines(child.stderr.take().unwrap()),
    );
    let start = Instant::now();
    let addr = loop {
        let line = err
            .recv_timeout(BOUND)
            .expect("kneecap prints the metrics address");
        if let Some(rest) = line.split_once("metrics at http://") {
            break rest.1.trim_end_matches("/metrics").to_string();
        }
    };
    assert!(
        !addr.ends_with(":0"),
        "the bound port is printed, not 0: {addr}"
    );
    let (mut stdout, mut during) = (Vec::new(), 0);
    while !stdout
        .iter()
        .any(|l: &String| l.starts_with("Failed requests:"))
    {
        assert!(start.elapsed() < BOUND, "no summary: {stdout:?}");
        parse(&scrape(&addr));
        during += 1;
        std::thread::sleep(Duration::from_millis(50));
        stdout.extend(out.try_iter());
    }
    std::thread::sleep(Duration::from_millis(100));
    stdout.extend(out.try_iter());
    let last = parse(&scrape(&addr));
    let _ = child.kill();
    let _ = child.wait();
    assert!(during >= 5, "only {during} scrapes while the run ran");
    let ok = summary_count(&stdout, "Successful requests:");
    let failed = summary_count(&stdout, "Failed requests:");
    assert!(
        ok > 0.0 && failed > 0.0,
        "both outcomes: {ok} ok, {failed} failed"
    );
    assert_eq!(counter(&last, "kneecap_requests_total", "success"), ok);
    assert_eq!(counter(&last, "kneecap_requests_total", "failure"), failed);
    let classes: Vec<&str> = last
        .samples
        .iter()
        .filter(|s| s.metric == "kneecap_requests_total")
        .filter_map(|s| s.labels.get("error_class"))
        .collect();
    assert_eq!(classes, vec!["http_status"], "HTTP 500s are http_status");
    let released = last
        .samples
        .iter()
        .find(|s| s.metric == "kneecap_requests_released_total");
    assert!(
        matches!(released.map(|s| &s.value), Some(prometheus_parse::Value::Counter(v)) if *v == ok + failed),
        "{released:?}"
    );
}

/// `script` gives kneecap a pseudo-terminal for stdout (util-linux).
fn have_script() -> bool {
    Command::new("script")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success())
}

#[test]
fn on_a_terminal_the_dashboard_draws_then_hands_back_for_the_summary() {
    if !have_script() {
        eprintln!("skipped: no `script` (util-linux) to give kneecap a terminal");
        return;
    }
    let line = format!(
        "stty cols 100 rows 30; {} run --sim-preset tiny --num-prompts 30 --request-rate 15 --random-input-len 16 --random-output-len 8 --seed 1",
        env!("CARGO_BIN_EXE_kneecap")
    );
    let out = Command::new("script")
        .args(["-q", "-e", "-c", &line, "/dev/null"])
        .env("TERM", "xterm-256color")
        .env("COLUMNS", "100")
        .env("LINES", "30")
        .stdin(Stdio::null())
        .output()
        .expect("script runs");
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{text}");
    let enter = text
        .find("\x1b[?1049h")
        .expect("enters the alternate screen");
    let leave = text.rfind("\x1b[?1049l").expect("leaves it again");
    let drawn = &text[enter..leave];
    for part in ["kneecap run", "offered", "TTFT", "waiting", "errors:"] {
        assert!(drawn.contains(part), "the dashboard shows {part:?}");
    }
    assert!(
        text[leave..].contains("Successful requests:"),
        "the summary comes after the dashboard"
    );
}
