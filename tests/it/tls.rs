//! https targets and proxies, end to end: the simulator serves TLS with a
//! certificate made in the test (its CA unknown to every root store, or a
//! self-signed CA:TRUE one as `openssl req -x509` makes), and a tiny proxy
//! on 127.0.0.1:0 counts the CONNECT tunnels and absolute-form requests it
//! forwards.

use crate::common;

use common::server_log::{client_minus_server_ttft_ms, median};
use kneecap::sim::{self, tls::SimTls, SimConfig, SimHandle};
use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DistinguishedName, DnType, IsCa, KeyPair,
};
use serde_json::Value;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// The timing check must not share the 2 cores with the other runs.
static SERIAL: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());

const PROXY_VARS: [&str; 6] = [
    "http_proxy",
    "HTTP_PROXY",
    "https_proxy",
    "HTTPS_PROXY",
    "no_proxy",
    "NO_PROXY",
];

/// A CA and a server certificate it signed for 127.0.0.1 and localhost, as
/// PEM files: (ca.pem, server.pem, server.key).
fn make_certs(dir: &Path) -> (PathBuf, PathBuf, PathBuf) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params
        .distinguished_name
        .push(DnType::CommonName, "kneecap test CA");
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let cert = CertificateParams::new(vec!["127.0.0.1".to_string(), "localhost".to_string()])
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let paths = (
        dir.join("ca.pem"),
        dir.join("server.pem"),
        dir.join("server.key"),
    );
    std::fs::write(&paths.0, ca.pem()).unwrap();
    std::fs::write(&paths.1, cert.pem()).unwrap();
    std::fs::write(&paths.2, key.serialize_pem()).unwrap();
    paths
}

/// A certificate shaped as `openssl req -x509 -newkey rsa:2048 -nodes -subj
/// /CN=localhost -addext subjectAltName=IP:127.0.0.1` makes it (self-signed,
/// basicConstraints CA:TRUE), with an ECDSA key: (cert.pem, key.pem) named
/// after `stem`.
fn make_openssl_like(dir: &Path, stem: &str) -> (PathBuf, PathBuf) {
    let mut params = CertificateParams::new(vec!["127.0.0.1".to_string()]).unwrap();
    params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    params.distinguished_name = DistinguishedName::new();
    params
        .distinguished_name
        .push(DnType::CommonName, "localhost");
    let key = KeyPair::generate().unwrap();
    let cert = params.self_signed(&key).unwrap();
    let paths = (
        dir.join(format!("{stem}.pem")),
        dir.join(format!("{stem}.key")),
    );
    std::fs::write(&paths.0, cert.pem()).unwrap();
    std::fs::write(&paths.1, key.serialize_pem()).unwrap();
    paths
}

/// The same made by the real `openssl` command line, when there is one:
/// None (with a note) when `openssl` is missing or cannot make it.
fn make_with_openssl(dir: &Path) -> Option<(PathBuf, PathBuf)> {
    let (cert, key) = (dir.join("openssl.pem"), dir.join("openssl.key"));
    let out = std::process::Command::new("openssl")
        .args([
            "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "2",
        ])
        .args([
            "-subj",
            "/CN=localhost",
            "-addext",
            "subjectAltName=IP:127.0.0.1",
        ])
        .arg("-keyout")
        .arg(&key)
        .arg("-out")
        .arg(&cert)
        .output();
    match out {
        Ok(out) if out.status.success() => Some((cert, key)),
        Ok(out) => {
            eprintln!(
                "note: skipping the openssl-made certificate: `openssl req -x509` failed: {}",
                stderr(&out)
            );
            None
        }
        Err(e) => {
            eprintln!("note: skipping the openssl-made certificate: no openssl binary ({e})");
            None
        }
    }
}

/// The simulator serving https (and a server log when asked).
async fn tls_sim(cert: &Path, key: &Path, log: Option<PathBuf>) -> SimHandle {
    let mut cfg = SimConfig::from_preset("tiny").unwrap();
    cfg.tls = Some(SimTls {
        cert: cert.to_path_buf(),
        key: key.to_path_buf(),
    });
    cfg.server_log = log;
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    sim::start(cfg, listener).await.unwrap()
}

/// Run kneecap with `args`, no proxy variables but those in `env`.
async fn run(args: Vec<String>, env: Vec<(&'static str, String)>) -> std::process::Output {
    tokio::task::spawn_blocking(move || {
        let mut c = common::cli::kneecap();
        for var in PROXY_VARS {
            c.env_remove(var);
        }
        for (k, v) in env {
            c.env(k, v);
        }
        c.args(args).output().unwrap()
    })
    .await
    .unwrap()
}

fn small_run(url: &str, extra: &[&str]) -> Vec<String> {
    let mut args = common::cli::strings(&[
        "run",
        "--base-url",
        url,
        "--num-prompts",
        "6",
        "--request-rate",
        "20",
        "--random-input-len",
        "16",
        "--random-output-len",
        "4",
        "--disable-tqdm",
    ]);
    args.extend(common::cli::strings(extra));
    args
}

fn stderr(out: &std::process::Output) -> String {
    String::from_utf8_lossy(&out.stderr).into_owned()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_unknown_ca_fails_in_one_line_and_ca_cert_or_insecure_fix_it() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = make_certs(dir.path());
    let sim = tls_sim(&cert, &key, None).await;
    let url = format!("https://{}", sim.addr());

    let out = run(small_run(&url, &[]), vec![]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let text = stderr(&out);
    let line = text
        .lines()
        .find(|l| l.contains("certificate"))
        .unwrap_or_else(|| panic!("no certificate error in:\n{text}"));
    for part in [
        "127.0.0.1",
        "unknown authority",
        "--ca-cert FILE",
        "--insecure",
    ] {
        assert!(line.contains(part), "'{part}' missing from: {line}");
    }

    let ca = ca.to_str().unwrap();
    let out = run(small_run(&url, &["--ca-cert", ca]), vec![]).await;
    assert!(out.status.success(), "--ca-cert: {}", stderr(&out));
    let out = run(small_run(&url, &["--insecure"]), vec![]).await;
    assert!(out.status.success(), "--insecure: {}", stderr(&out));
    // A --ca-cert file without a certificate names the flag.
    let out = run(
        small_run(&url, &["--ca-cert", key.to_str().unwrap()]),
        vec![],
    )
    .await;
    assert_eq!(out.status.code(), Some(2));
    assert!(stderr(&out).contains("--ca-cert"), "{}", stderr(&out));
    sim.shutdown().await.unwrap();
}

/// The line of `out`'s stderr that names the certificate.
fn certificate_line(out: &std::process::Output) -> String {
    let text = stderr(out);
    text.lines()
        .find(|l| l.contains("certificate"))
        .unwrap_or_else(|| panic!("no certificate error in:\n{text}"))
        .to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_openssl_req_x509_certificate_works_with_ca_cert() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let mut made = vec![make_openssl_like(dir.path(), "rcgen")];
    made.extend(make_with_openssl(dir.path()));
    for (cert, key) in made {
        let sim = tls_sim(&cert, &key, None).await;
        let url = format!("https://{}", sim.addr());
        let shown = cert.display();
        // Without --ca-cert: refused, and told to pin it.
        let out = run(small_run(&url, &[]), vec![]).await;
        assert_eq!(out.status.code(), Some(2), "{shown}: {}", stderr(&out));
        let line = certificate_line(&out);
        for part in ["127.0.0.1", "CA:TRUE", "--ca-cert FILE", "--insecure"] {
            assert!(
                line.contains(part),
                "{shown}: '{part}' missing from: {line}"
            );
        }
        // With it: pinned, the run completes.
        let out = run(
            small_run(&url, &["--ca-cert", cert.to_str().unwrap()]),
            vec![],
        )
        .await;
        assert!(
            out.status.success(),
            "{shown} with --ca-cert: {}",
            stderr(&out)
        );
        sim.shutdown().await.unwrap();
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_different_self_signed_certificate_for_the_same_address_is_refused() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let (pinned, _) = make_openssl_like(dir.path(), "pinned");
    let (served, key) = make_openssl_like(dir.path(), "impostor");
    let sim = tls_sim(&served, &key, None).await;
    let url = format!("https://{}", sim.addr());
    let ca = pinned.to_str().unwrap();
    let out = run(small_run(&url, &["--ca-cert", ca]), vec![]).await;
    assert_eq!(out.status.code(), Some(2), "{}", stderr(&out));
    let line = certificate_line(&out);
    let expected = [
        "TLS: the certificate of 127.0.0.1 was rejected",
        "CA certificate",
        &format!("not one of the certificates in --ca-cert {ca}"),
    ];
    for part in expected {
        assert!(line.contains(part), "'{part}' missing from: {line}");
    }
    assert!(
        !line.contains("--ca-cert FILE"),
        "advises --ca-cert, given: {line}"
    );
    let lines = stderr(&out)
        .lines()
        .filter(|l| !l.trim().is_empty())
        .count();
    assert_eq!(lines, 1, "one line:\n{}", stderr(&out));
    sim.shutdown().await.unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn ttft_over_tls_agrees_with_the_server_log_within_a_millisecond() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = make_certs(dir.path());
    let log = dir.path().join("server_log.jsonl");
    let sim = tls_sim(&cert, &key, Some(log.clone())).await;
    let url = format!("https://{}", sim.addr());
    let args = common::cli::strings(&[
        "run",
        "--base-url",
        &url,
        "--ca-cert",
        ca.to_str().unwrap(),
        "--num-prompts",
        "40",
        "--request-rate",
        "8",
        "--random-input-len",
        "128",
        "--random-output-len",
        "16",
        "--save-result",
        "--save-detailed",
        "--result-dir",
        dir.path().to_str().unwrap(),
        "--result-filename",
        "r.json",
        "--request-id-prefix",
        "t-",
        "--disable-tqdm",
    ]);
    let out = run(args, vec![]).await;
    assert!(out.status.success(), "{}", stderr(&out));
    sim.shutdown().await.unwrap();
    let result: Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("r.json")).unwrap()).unwrap();
    assert_eq!(result["completed"], 40);
    let diffs = client_minus_server_ttft_ms(&result, &log, "t-");
    assert_eq!(diffs.len(), 40, "one server log line per request");
    let m = median(diffs.clone());
    assert!(
        (0.0..1.0).contains(&m),
        "client TTFT minus server TTFT over TLS (ms), median {m}: {diffs:?}"
    );
}

/// What the test proxy forwarded.
#[derive(Default)]
struct ProxyCounts {
    tunnels: AtomicUsize,
    absolute: AtomicUsize,
}

/// A tiny HTTP proxy: `CONNECT host:port` opens a tunnel; an absolute-form
/// request (`POST http://host:port/...`) is forwarded to its host, and the
/// rest of the connection with it. Returns its address and its counts.
async fn start_proxy() -> (String, Arc<ProxyCounts>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let counts = Arc::new(ProxyCounts::default());
    let seen = counts.clone();
    tokio::spawn(async move {
        while let Ok((client, _)) = listener.accept().await {
            tokio::spawn(forward(client, seen.clone()));
        }
    });
    (addr, counts)
}

async fn forward(mut client: TcpStream, counts: Arc<ProxyCounts>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if client.read(&mut byte).await.unwrap_or(0) == 0 {
            return;
        }
        head.push(byte[0]);
    }
    let line = String::from_utf8_lossy(&head)
        .lines()
        .next()
        .unwrap_or_default()
        .to_string();
    let mut words = line.split(' ');
    let (method, target) = (words.next().unwrap_or(""), words.next().unwrap_or(""));
    let origin = if method == "CONNECT" {
        counts.tunnels.fetch_add(1, Ordering::SeqCst);
        target.to_string()
    } else {
        counts.absolute.fetch_add(1, Ordering::SeqCst);
        let rest = target.strip_prefix("http://").unwrap_or(target);
        rest.split('/').next().unwrap_or_default().to_string()
    };
    let Ok(mut upstream) = TcpStream::connect(&origin).await else {
        let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
        return;
    };
    if method == "CONNECT" {
        let ok = b"HTTP/1.1 200 Connection established\r\n\r\n";
        if client.write_all(ok).await.is_err() {
            return;
        }
    } else if upstream.write_all(&head).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn https_goes_through_a_connect_tunnel_and_http_in_absolute_form() {
    let _serial = SERIAL.lock().await;
    let dir = tempfile::tempdir().unwrap();
    let (ca, cert, key) = make_certs(dir.path());
    let tls = tls_sim(&cert, &key, None).await;
    let (proxy, counts) = start_proxy().await;
    let proxy_url = format!("http://{proxy}");

    let url = format!("https://{}", tls.addr());
    let args = small_run(&url, &["--ca-cert", ca.to_str().unwrap()]);
    let out = run(args, vec![("HTTPS_PROXY", proxy_url.clone())]).await;
    assert!(out.status.success(), "via CONNECT: {}", stderr(&out));
    let tunnels = counts.tunnels.load(Ordering::SeqCst);
    assert!(tunnels >= 1, "the proxy saw no tunnel");
    assert_eq!(counts.absolute.load(Ordering::SeqCst), 0);
    tls.shutdown().await.unwrap();

    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let plain = sim::start(SimConfig::from_preset("tiny").unwrap(), listener)
        .await
        .unwrap();
    let url = format!("http://{}", plain.addr());
    let out = run(
        small_run(&url, &[]),
        vec![("http_proxy", proxy_url.clone())],
    )
    .await;
    assert!(out.status.success(), "via absolute form: {}", stderr(&out));
    let forwarded = counts.absolute.load(Ordering::SeqCst);
    assert!(forwarded >= 1, "the proxy forwarded no http request");
    assert_eq!(
        counts.tunnels.load(Ordering::SeqCst),
        tunnels,
        "http needs no tunnel"
    );

    // NO_PROXY exempts the target: the proxy sees nothing more.
    let env = vec![
        ("HTTP_PROXY", proxy_url),
        ("NO_PROXY", "127.0.0.1".to_string()),
    ];
    let out = run(small_run(&url, &[]), env).await;
    assert!(out.status.success(), "NO_PROXY: {}", stderr(&out));
    assert_eq!(counts.absolute.load(Ordering::SeqCst), forwarded);
    plain.shutdown().await.unwrap();
}
