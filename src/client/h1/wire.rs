//! HTTP/1.1 wire format for one streaming exchange, sans-IO: the request's
//! bytes, and a response decoder that turns bytes read from the socket into
//! a head, body pieces and an end (content-length, chunked, or until close).
//! Body pieces borrow the input: nothing is copied on the per-event path.

/// Longest response head accepted (status line + headers).
pub const MAX_HEAD_BYTES: usize = 64 * 1024;
const MAX_HEADERS: usize = 64;

/// The parts of a response head the client acts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Head {
    pub status: u16,
    /// False when the server said `Connection: close` (or spoke HTTP/1.0
    /// without keep-alive), or when the body runs until the connection closes.
    pub keep_alive: bool,
}

/// What one call to [`ResponseDecoder::next`] found.
#[derive(Debug, PartialEq, Eq)]
pub enum Piece<'a> {
    /// More bytes are needed; nothing was consumed beyond what `next` reports.
    NeedMore,
    Head(Head),
    /// Body bytes, after transfer decoding.
    Data(&'a [u8]),
    /// The response is complete; bytes after it belong to no one.
    End,
}

/// A violation of HTTP/1.1 framing.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WireError(pub String);

impl std::fmt::Display for WireError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum State {
    Head,
    /// `Content-Length` body with this many bytes left.
    Length(u64),
    /// Reading a chunk-size line (hex digits, then extensions, then CRLF).
    ChunkSize,
    /// Inside a chunk with this many bytes left.
    ChunkData(u64),
    /// The CRLF after a chunk's data.
    ChunkDataEnd,
    /// Trailer lines after the last (zero-size) chunk, up to an empty line.
    Trailers,
    /// Body delimited by the connection closing.
    UntilClose,
    Done,
}

/// Sans-IO response decoder. Feed it the unconsumed input each time; it
/// returns how many bytes it consumed and what it found.
#[derive(Debug)]
pub struct ResponseDecoder {
    state: State,
    /// The chunk-size line being read: its value, digit count, whether an
    /// extension started, and its length so far.
    chunk_size: u64,
    chunk_digits: usize,
    in_extension: bool,
    line_len: usize,
}

impl Default for ResponseDecoder {
    fn default() -> Self {
        Self::new()
    }
}

impl ResponseDecoder {
    pub fn new() -> Self {
        ResponseDecoder {
            state: State::Head,
            chunk_size: 0,
            chunk_digits: 0,
            in_extension: false,
            line_len: 0,
        }
    }

    /// True once [`Piece::End`] has been returned.
    pub fn is_done(&self) -> bool {
        self.state == State::Done
    }

    /// The connection reached EOF: the end of an until-close body, an error otherwise.
    pub fn eof(&mut self) -> Result<(), WireError> {
        match self.state {
            State::UntilClose | State::Done => {
                self.state = State::Done;
                Ok(())
            }
            State::Head => Err(WireError("connection closed before a response head".into())),
            _ => Err(WireError("connection closed mid-body".into())),
        }
    }

    /// Decode from `input`; returns (bytes consumed, piece).
    pub fn next<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Piece<'a>), WireError> {
        match self.state {
            State::Head => self.head(input),
            State::Length(left) => {
                if input.is_empty() {
                    return Ok((0, Piece::NeedMore));
                }
                let n = usize::try_from(left).unwrap_or(usize::MAX).min(input.len());
                let left = left - n as u64;
                self.state = if left == 0 {
                    State::Done
                } else {
                    State::Length(left)
                };
                Ok((n, Piece::Data(&input[..n])))
            }
            State::ChunkSize => self.chunk_size_line(input),
            State::ChunkData(left) => {
                if input.is_empty() {
                    return Ok((0, Piece::NeedMore));
                }
                let n = usize::try_from(left).unwrap_or(usize::MAX).min(input.len());
                let left = left - n as u64;
                self.state = if left == 0 {
                    State::ChunkDataEnd
                } else {
                    State::ChunkData(left)
                };
                Ok((n, Piece::Data(&input[..n])))
            }
            State::ChunkDataEnd => self.chunk_data_end(input),
            State::Trailers => self.trailers(input),
            State::UntilClose => {
                if input.is_empty() {
                    return Ok((0, Piece::NeedMore));
                }
                Ok((input.len(), Piece::Data(input)))
            }
            State::Done => Ok((0, Piece::End)),
        }
    }

    fn head<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Piece<'a>), WireError> {
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut resp = httparse::Response::new(&mut headers);
        let used = match resp.parse(input) {
            Ok(httparse::Status::Complete(n)) => n,
            Ok(httparse::Status::Partial) if input.len() >= MAX_HEAD_BYTES => {
                return Err(WireError(format!(
                    "response head longer than {MAX_HEAD_BYTES} bytes"
                )))
            }
            Ok(httparse::Status::Partial) => return Ok((0, Piece::NeedMore)),
            Err(e) => return Err(WireError(format!("malformed response head: {e}"))),
        };
        let status = resp.code.unwrap_or(0);
        if (100..200).contains(&status) {
            // Interim response (100 Continue, 103 Early Hints): skip it.
            return Ok((used, Piece::NeedMore));
        }
        let mut keep_alive = resp.version == Some(1);
        let mut length = None;
        let mut chunked = false;
        for h in resp.headers.iter() {
            if h.name.eq_ignore_ascii_case("content-length") {
                let v = std::str::from_utf8(h.value)
                    .ok()
                    .and_then(|s| s.trim().parse::<u64>().ok())
                    .ok_or_else(|| WireError("invalid Content-Length".into()))?;
                if length.is_some_and(|l| l != v) {
                    return Err(WireError("conflicting Content-Length headers".into()));
                }
                length = Some(v);
            } else if h.name.eq_ignore_ascii_case("transfer-encoding") {
                chunked = last_token_is(h.value, b"chunked");
                if !chunked {
                    return Err(WireError(
                        "unsupported Transfer-Encoding (only chunked)".into(),
                    ));
                }
            } else if h.name.eq_ignore_ascii_case("connection") {
                if has_token(h.value, b"close") {
                    keep_alive = false;
                } else if has_token(h.value, b"keep-alive") {
                    keep_alive = true;
                }
            }
        }
        let no_body = status == 204 || status == 304;
        self.state = if no_body {
            State::Done
        } else if chunked {
            State::ChunkSize
        } else if let Some(n) = length {
            if n == 0 {
                State::Done
            } else {
                State::Length(n)
            }
        } else {
            keep_alive = false;
            State::UntilClose
        };
        Ok((used, Piece::Head(Head { status, keep_alive })))
    }

    /// `1a;ext=v\r\n`: accumulates across calls, one byte at a time only
    /// over the short size line.
    fn chunk_size_line<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Piece<'a>), WireError> {
        for (i, &b) in input.iter().enumerate() {
            self.line_len += 1;
            if self.line_len > 1024 {
                return Err(WireError("chunk-size line too long".into()));
            }
            if b == b'\n' {
                if self.chunk_digits == 0 {
                    return Err(WireError("chunk-size line without a size".into()));
                }
                let size = self.chunk_size;
                self.reset_line();
                self.state = if size == 0 {
                    State::Trailers
                } else {
                    State::ChunkData(size)
                };
                return Ok((i + 1, Piece::NeedMore));
            }
            if self.in_extension || b == b'\r' {
                continue;
            }
            if b == b';' || b == b' ' || b == b'\t' {
                self.in_extension = true;
                continue;
            }
            let digit = (b as char)
                .to_digit(16)
                .ok_or_else(|| WireError(format!("invalid chunk-size byte 0x{b:02x}")))?;
            self.chunk_digits += 1;
            if self.chunk_digits > 15 {
                return Err(WireError("chunk size too large".into()));
            }
            self.chunk_size = self.chunk_size * 16 + u64::from(digit);
        }
        Ok((input.len(), Piece::NeedMore))
    }

    fn chunk_data_end<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Piece<'a>), WireError> {
        for (i, &b) in input.iter().enumerate() {
            match b {
                b'\r' if self.line_len == 0 => self.line_len = 1,
                b'\n' => {
                    self.reset_line();
                    self.state = State::ChunkSize;
                    return Ok((i + 1, Piece::NeedMore));
                }
                _ => return Err(WireError("chunk data not followed by CRLF".into())),
            }
        }
        Ok((input.len(), Piece::NeedMore))
    }

    /// Trailer fields are ignored; an empty line ends the response.
    fn trailers<'a>(&mut self, input: &'a [u8]) -> Result<(usize, Piece<'a>), WireError> {
        for (i, &b) in input.iter().enumerate() {
            match b {
                b'\n' if self.line_len == 0 => {
                    self.state = State::Done;
                    return Ok((i + 1, Piece::End));
                }
                b'\n' => self.line_len = 0,
                b'\r' => {}
                _ => self.line_len += 1,
            }
            if self.line_len > MAX_HEAD_BYTES {
                return Err(WireError("trailer too long".into()));
            }
        }
        Ok((input.len(), Piece::NeedMore))
    }

    fn reset_line(&mut self) {
        self.chunk_size = 0;
        self.chunk_digits = 0;
        self.in_extension = false;
        self.line_len = 0;
    }
}

fn tokens(value: &[u8]) -> impl Iterator<Item = &[u8]> {
    value.split(|&b| b == b',').map(|t| t.trim_ascii())
}

fn has_token(value: &[u8], token: &[u8]) -> bool {
    tokens(value).any(|t| t.eq_ignore_ascii_case(token))
}

fn last_token_is(value: &[u8], token: &[u8]) -> bool {
    tokens(value)
        .filter(|t| !t.is_empty())
        .last()
        .is_some_and(|t| t.eq_ignore_ascii_case(token))
}

/// The fixed part of every request of a run: request line, `Host` and the
/// run's headers (already validated), rendered once.
pub fn request_prefix(path_and_query: &str, host: &str, headers: &[(String, String)]) -> Vec<u8> {
    let mut out = Vec::with_capacity(256);
    out.extend_from_slice(b"POST ");
    out.extend_from_slice(path_and_query.as_bytes());
    out.extend_from_slice(b" HTTP/1.1\r\nhost: ");
    out.extend_from_slice(host.as_bytes());
    out.extend_from_slice(b"\r\n");
    for (k, v) in headers {
        out.extend_from_slice(k.as_bytes());
        out.extend_from_slice(b": ");
        out.extend_from_slice(v.as_bytes());
        out.extend_from_slice(b"\r\n");
    }
    out
}

/// One request's bytes: the prefix, its request id, the length, the body.
pub fn request_bytes(prefix: &[u8], request_id: &str, body: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(prefix.len() + request_id.len() + body.len() + 64);
    out.extend_from_slice(prefix);
    out.extend_from_slice(b"x-request-id: ");
    out.extend_from_slice(request_id.as_bytes());
    out.extend_from_slice(b"\r\ncontent-length: ");
    out.extend_from_slice(body.len().to_string().as_bytes());
    out.extend_from_slice(b"\r\n\r\n");
    out.extend_from_slice(body);
    out
}

#[cfg(test)]
#[path = "wire_tests.rs"]
mod tests;
