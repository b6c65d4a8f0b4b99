//! The streaming HTTP/1.1 client against raw TCP servers of our own: keep-alive
//! reuse, servers that close after each response while advertising
//! keep-alive (llama.cpp's does), and error bodies.

use kneecap::client::h1::{Event, H1Client};
use std::ops::ControlFlow;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::Duration;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// How the raw server answers.
#[derive(Clone, Copy)]
struct Server {
    /// Close the connection after each response (still saying keep-alive).
    close_after: bool,
    status: u16,
}

/// Read one request (head + content-length body); false at EOF.
async fn read_request(conn: &mut TcpStream) -> bool {
    let mut buf = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        if let Some(end) = buf.windows(4).position(|w| w == b"\r\n\r\n") {
            let head = String::from_utf8_lossy(&buf[..end]).to_ascii_lowercase();
            let len: usize = head
                .lines()
                .find_map(|l| l.strip_prefix("content-length: "))
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(0);
            if buf.len() >= end + 4 + len {
                return true;
            }
        }
        match conn.read(&mut chunk).await {
            Ok(0) | Err(_) => return false,
            Ok(n) => buf.extend_from_slice(&chunk[..n]),
        }
    }
}

async fn serve(server: Server) -> (String, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        while let Ok((mut conn, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            tokio::spawn(async move {
                while read_request(&mut conn).await {
                    let body = if server.status == 200 {
                        "data: {\"choices\":[{\"text\":\"a\"}]}\n\ndata: [DONE]\n\n"
                    } else {
                        "{\"error\":\"busy\"}"
                    };
                    let resp = format!(
                        "HTTP/1.1 {} X\r\nconnection: keep-alive\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{body}\r\n0\r\n\r\n",
                        server.status,
                        body.len()
                    );
                    if conn.write_all(resp.as_bytes()).await.is_err() || server.close_after {
                        return;
                    }
                }
            });
        }
    });
    (addr, accepted)
}

/// Post once; returns (status, body).
async fn post(client: &H1Client, id: &str) -> (Option<u16>, Vec<u8>) {
    let (mut status, mut body) = (None, Vec::new());
    client
        .post(id, b"{}", |event| {
            match event {
                Event::Status(s) => status = Some(s),
                Event::Data(d, _) => body.extend_from_slice(d),
            }
            ControlFlow::Continue(())
        })
        .await
        .unwrap_or_else(|e| panic!("request {id} failed: {e}"));
    (status, body)
}

fn client(addr: &str) -> H1Client {
    H1Client::new(addr, "/v1/completions", &[], Duration::from_secs(5))
}

#[tokio::test]
async fn keep_alive_connections_are_reused() {
    let (addr, accepted) = serve(Server {
        close_after: false,
        status: 200,
    })
    .await;
    let c = client(&addr);
    for i in 0..5 {
        let (status, body) = post(&c, &format!("r{i}")).await;
        assert_eq!(status, Some(200));
        assert!(body.ends_with(b"data: [DONE]\n\n"));
    }
    assert_eq!(
        accepted.load(Ordering::SeqCst),
        1,
        "one connection for five requests"
    );
}

#[tokio::test]
async fn server_closing_after_each_response_costs_no_failed_request() {
    let (addr, accepted) = serve(Server {
        close_after: true,
        status: 200,
    })
    .await;
    let c = client(&addr);
    for i in 0..5 {
        // Give the FIN time to arrive for some requests and not for others.
        if i % 2 == 0 {
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        let (status, _) = post(&c, &format!("r{i}")).await;
        assert_eq!(status, Some(200), "request {i}");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 5);
}

#[tokio::test]
async fn error_status_and_its_body_are_reported() {
    let (addr, _) = serve(Server {
        close_after: false,
        status: 503,
    })
    .await;
    let (status, body) = post(&client(&addr), "e").await;
    assert_eq!(status, Some(503));
    assert_eq!(body, b"{\"error\":\"busy\"}");
}

#[tokio::test]
async fn refused_connection_is_a_connect_error() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap().to_string();
    drop(listener);
    let err = client(&addr)
        .post("x", b"{}", |_| ControlFlow::Continue(()))
        .await
        .expect_err("nothing listens there");
    assert!(
        matches!(err, kneecap::client::h1::H1Error::Connect(_)),
        "{err}"
    );
}
