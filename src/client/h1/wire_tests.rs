//! Tests for the HTTP/1.1 response decoder: every response is also fed split
//! at every byte offset, and must decode to the same head, body and end.

use super::*;

/// What a response decoded to: (head, body, ended, leftover bytes).
type Decoded = (Option<Head>, Vec<u8>, bool, Vec<u8>);

/// Decode a response fed in the given pieces.
fn decode(pieces: &[&[u8]]) -> Result<Decoded, WireError> {
    let mut dec = ResponseDecoder::new();
    let mut pending: Vec<u8> = Vec::new();
    let (mut head, mut body, mut ended) = (None, Vec::new(), false);
    for piece in pieces {
        pending.extend_from_slice(piece);
        let mut pos = 0;
        while !ended {
            let (used, got) = dec.next(&pending[pos..])?;
            pos += used;
            match got {
                Piece::NeedMore if used == 0 => break,
                Piece::NeedMore => {}
                Piece::Head(h) => head = Some(h),
                Piece::Data(d) => body.extend_from_slice(d),
                Piece::End => ended = true,
            }
        }
        pending.drain(..pos);
    }
    Ok((head, body, ended, pending))
}

/// Same result whole and split at every offset into two or three pieces.
fn check_all_splits(raw: &[u8]) -> Decoded {
    let whole = decode(&[raw]).expect("whole input decodes");
    for i in 0..=raw.len() {
        assert_eq!(
            decode(&[&raw[..i], &raw[i..]]).unwrap(),
            whole,
            "split at {i}"
        );
        let j = (i + 7).min(raw.len());
        assert_eq!(
            decode(&[&raw[..i], &raw[i..j], &raw[j..]]).unwrap(),
            whole,
            "split at {i} and {j}"
        );
    }
    let bytes: Vec<&[u8]> = raw.chunks(1).collect();
    assert_eq!(decode(&bytes).unwrap(), whole, "byte by byte");
    whole
}

const CHUNKED: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
Transfer-Encoding: chunked\r\n\r\n\
1d\r\ndata: {\"choices\":[{\"x\":1}]}\n\n\r\n\
5;name=value\r\nhello\r\n\
0\r\nX-Trailer: yes\r\n\r\n";

#[test]
fn chunked_body_with_extension_and_trailer() {
    let (head, body, ended, left) = check_all_splits(CHUNKED);
    assert_eq!(
        head,
        Some(Head {
            status: 200,
            keep_alive: true
        })
    );
    assert_eq!(body, b"data: {\"choices\":[{\"x\":1}]}\n\nhello".to_vec());
    assert!(ended);
    assert!(left.is_empty());
}

#[test]
fn content_length_body_leaves_following_bytes_alone() {
    let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nabcdeHTTP/1.1 200";
    let (head, body, ended, left) = check_all_splits(raw);
    assert_eq!(head.unwrap().status, 200);
    assert_eq!(body, b"abcde");
    assert!(ended);
    assert_eq!(left, b"HTTP/1.1 200");
}

#[test]
fn body_until_close_needs_eof_and_is_not_reusable() {
    let raw = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\ndata: a\n\n";
    let (head, body, ended, _) = check_all_splits(raw);
    assert!(!head.unwrap().keep_alive);
    assert_eq!(body, b"data: a\n\n");
    assert!(!ended, "only EOF ends a close-delimited body");
    let mut dec = ResponseDecoder::new();
    dec.next(raw).unwrap();
    assert!(dec.eof().is_ok());
}

#[test]
fn eof_mid_body_or_before_head_is_an_error() {
    let mut dec = ResponseDecoder::new();
    assert!(dec.eof().is_err());
    let mut dec = ResponseDecoder::new();
    let raw = b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\nabc";
    let (n, _) = dec.next(raw).unwrap();
    dec.next(&raw[n..]).unwrap();
    assert!(dec.eof().unwrap_err().0.contains("mid-body"));
}

#[test]
fn interim_100_continue_is_skipped() {
    let raw = b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 429 Too Many Requests\r\ncontent-length: 2\r\n\r\nno";
    let (head, body, ended, _) = check_all_splits(raw);
    assert_eq!(head.unwrap().status, 429);
    assert_eq!(body, b"no");
    assert!(ended);
}

#[test]
fn connection_close_and_http10_are_not_kept_alive() {
    let raw = b"HTTP/1.1 200 OK\r\nConnection: close\r\ncontent-length: 0\r\n\r\n";
    let (head, _, ended, _) = check_all_splits(raw);
    assert!(!head.unwrap().keep_alive);
    assert!(ended);
    let raw = b"HTTP/1.0 200 OK\r\ncontent-length: 1\r\n\r\nx";
    assert!(!check_all_splits(raw).0.unwrap().keep_alive);
    let raw = b"HTTP/1.0 200 OK\r\nConnection: Keep-Alive\r\ncontent-length: 1\r\n\r\nx";
    assert!(check_all_splits(raw).0.unwrap().keep_alive);
}

#[test]
fn no_body_statuses_end_at_the_head() {
    let raw = b"HTTP/1.1 204 No Content\r\n\r\n";
    let (_, body, ended, _) = check_all_splits(raw);
    assert!(body.is_empty() && ended);
}

#[test]
fn framing_violations_are_errors() {
    let bad: &[&[u8]] = &[
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n2\r\nabX",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: gzip\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: 1\r\ncontent-length: 2\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ncontent-length: -1\r\n\r\n",
        b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nffffffffffffffff\r\n",
        b"SMTP ready\r\n\r\n",
    ];
    for raw in bad {
        assert!(decode(&[raw]).is_err(), "{}", String::from_utf8_lossy(raw));
    }
}

#[test]
fn oversized_head_is_refused_not_buffered_forever() {
    let mut raw = b"HTTP/1.1 200 OK\r\nx: ".to_vec();
    raw.resize(MAX_HEAD_BYTES + 10, b'a');
    let mut dec = ResponseDecoder::new();
    assert!(dec.next(&raw).unwrap_err().0.contains("longer than"));
}

#[test]
fn request_bytes_carry_prefix_id_and_length() {
    let prefix = request_prefix(
        "/v1/completions",
        "server.test:8000",
        &[("authorization".into(), "Bearer k".into())],
    );
    let raw = request_bytes(&prefix, "bench-7", b"{\"a\":1}");
    let mut headers = [httparse::EMPTY_HEADER; 8];
    let mut req = httparse::Request::new(&mut headers);
    let n = match req.parse(&raw).unwrap() {
        httparse::Status::Complete(n) => n,
        httparse::Status::Partial => panic!("incomplete request"),
    };
    assert_eq!(req.method, Some("POST"));
    assert_eq!(req.path, Some("/v1/completions"));
    let get = |name: &str| {
        req.headers
            .iter()
            .find(|h| h.name.eq_ignore_ascii_case(name))
            .map(|h| h.value.to_vec())
    };
    assert_eq!(get("host").unwrap(), b"server.test:8000");
    assert_eq!(get("x-request-id").unwrap(), b"bench-7");
    assert_eq!(get("content-length").unwrap(), b"7");
    assert_eq!(&raw[n..], b"{\"a\":1}");
}
