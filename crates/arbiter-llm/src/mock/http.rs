//! HTTP/1.1 on a `TcpStream`, as much as the mock needs: one request read with its body,
//! one answer written whole or in chunks.

use std::collections::BTreeMap;
use std::io;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A parsed request.
pub(super) struct Incoming {
    pub method: String,
    /// The target without its query string.
    pub path: String,
    /// What followed `?` in the target, if anything.
    pub query: Option<String>,
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
    pub keep_alive: bool,
}

const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 32 * 1024 * 1024;

fn invalid(message: &str) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.to_string())
}

/// Reads one request (a `content-length` or chunked body; `Expect: 100-continue` is
/// answered); `Ok(None)` when the client closed the connection between requests.
pub(super) async fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> io::Result<Option<Incoming>> {
    let head_end = loop {
        if let Some(at) = find(buffer, 0, b"\r\n\r\n") {
            break at;
        }
        if buffer.len() > MAX_HEAD {
            return Err(invalid("request head too large"));
        }
        if read_more(stream, buffer).await? == 0 {
            return if buffer.is_empty() { Ok(None) } else { Err(io::ErrorKind::UnexpectedEof.into()) };
        }
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let mut lines = head.split("\r\n");
    let request_line = lines.next().unwrap_or_default();
    let mut parts = request_line.split_whitespace();
    let (Some(method), Some(target), Some(version)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(invalid("bad request line"));
    };
    let mut headers = BTreeMap::new();
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
        }
    }
    if headers.get("expect").is_some_and(|v| v.eq_ignore_ascii_case("100-continue")) {
        stream.write_all(b"HTTP/1.1 100 Continue\r\n\r\n").await?;
        stream.flush().await?;
    }
    let body_start = head_end + 4;
    let chunked = headers.get("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked"));
    let (body, end) = if chunked {
        read_chunked(stream, buffer, body_start).await?
    } else {
        let length: usize = match headers.get("content-length") {
            Some(v) => v.parse().map_err(|_| invalid("bad content-length"))?,
            None => 0,
        };
        if length > MAX_BODY {
            return Err(invalid("request body too large"));
        }
        fill(stream, buffer, body_start + length).await?;
        (buffer[body_start..body_start + length].to_vec(), body_start + length)
    };
    buffer.drain(..end);
    let connection = headers.get("connection").map(|v| v.to_ascii_lowercase()).unwrap_or_default();
    let keep_alive =
        if version == "HTTP/1.0" { connection.contains("keep-alive") } else { !connection.contains("close") };
    let (path, query) = match target.split_once('?') {
        Some((path, query)) => (path.to_string(), Some(query.to_string())),
        None => (target.to_string(), None),
    };
    Ok(Some(Incoming { method: method.to_string(), path, query, headers, body, keep_alive }))
}

/// A chunked body starting at `at`: the body and where the request ends.
async fn read_chunked(stream: &mut TcpStream, buffer: &mut Vec<u8>, mut at: usize) -> io::Result<(Vec<u8>, usize)> {
    let mut body = Vec::new();
    loop {
        let line_end = read_line(stream, buffer, at).await?;
        let size_text = String::from_utf8_lossy(&buffer[at..line_end]).into_owned();
        let size_text = size_text.split(';').next().unwrap_or_default().trim();
        let size = usize::from_str_radix(size_text, 16).map_err(|_| invalid("bad chunk size"))?;
        at = line_end + 2;
        if size == 0 {
            // Trailers, up to an empty line.
            loop {
                let end = read_line(stream, buffer, at).await?;
                let empty = end == at;
                at = end + 2;
                if empty {
                    return Ok((body, at));
                }
            }
        }
        if size > MAX_BODY - body.len() {
            return Err(invalid("request body too large"));
        }
        fill(stream, buffer, at + size + 2).await?;
        body.extend_from_slice(&buffer[at..at + size]);
        at += size + 2;
    }
}

/// Where the line starting at `at` ends (the position of its `\r\n`).
async fn read_line(stream: &mut TcpStream, buffer: &mut Vec<u8>, at: usize) -> io::Result<usize> {
    loop {
        if let Some(end) = find(buffer, at, b"\r\n") {
            return Ok(end);
        }
        if buffer.len() - at > MAX_HEAD {
            return Err(invalid("chunk line too long"));
        }
        if read_more(stream, buffer).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    }
}

fn find(buffer: &[u8], from: usize, needle: &[u8]) -> Option<usize> {
    buffer.get(from..)?.windows(needle.len()).position(|w| w == needle).map(|at| from + at)
}

/// Reads until `buffer` holds at least `len` bytes.
async fn fill(stream: &mut TcpStream, buffer: &mut Vec<u8>, len: usize) -> io::Result<()> {
    while buffer.len() < len {
        if read_more(stream, buffer).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    }
    Ok(())
}

async fn read_more(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> io::Result<usize> {
    let mut chunk = [0u8; 8192];
    let n = stream.read(&mut chunk).await?;
    buffer.extend_from_slice(&chunk[..n]);
    Ok(n)
}

/// An answer to write.
pub(super) struct Reply {
    pub status: u16,
    pub content_type: &'static str,
    pub headers: Vec<(&'static str, String)>,
    pub body: ReplyBody,
}

pub(super) enum ReplyBody {
    Full(Vec<u8>),
    /// Written with chunked transfer encoding, one HTTP chunk per piece.
    Pieces(Vec<Vec<u8>>),
    /// Close without answering.
    Drop,
}

impl Reply {
    pub fn json(status: u16, value: &Value) -> Reply {
        Reply {
            status,
            content_type: "application/json",
            headers: Vec::new(),
            body: ReplyBody::Full(value.to_string().into_bytes()),
        }
    }
}

fn reason_phrase(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        401 => "Unauthorized",
        403 => "Forbidden",
        404 => "Not Found",
        429 => "Too Many Requests",
        500 => "Internal Server Error",
        502 => "Bad Gateway",
        503 => "Service Unavailable",
        529 => "Overloaded",
        _ => "Status",
    }
}

/// Writes `reply` (only its head when `head_only`, the answer to a `HEAD`); `finished` is
/// told the status just before the last bytes go out.
pub(super) async fn write_reply(
    stream: &mut TcpStream,
    reply: Reply,
    keep_alive: bool,
    head_only: bool,
    mut finished: impl FnMut(u16),
) -> io::Result<()> {
    let mut head = format!(
        "HTTP/1.1 {} {}\r\ncontent-type: {}\r\n",
        reply.status,
        reason_phrase(reply.status),
        reply.content_type
    );
    for (name, value) in &reply.headers {
        head.push_str(&format!("{name}: {value}\r\n"));
    }
    head.push_str(if keep_alive { "connection: keep-alive\r\n" } else { "connection: close\r\n" });
    match reply.body {
        ReplyBody::Drop => {
            finished(0);
            Err(io::Error::new(io::ErrorKind::ConnectionAborted, "scripted disconnect"))
        }
        ReplyBody::Full(body) => {
            head.push_str(&format!("content-length: {}\r\n\r\n", body.len()));
            let mut bytes = head.into_bytes();
            if !head_only {
                bytes.extend_from_slice(&body);
            }
            finished(reply.status);
            stream.write_all(&bytes).await?;
            stream.flush().await
        }
        ReplyBody::Pieces(_) if head_only => {
            head.push_str("content-length: 0\r\n\r\n");
            finished(reply.status);
            stream.write_all(head.as_bytes()).await?;
            stream.flush().await
        }
        ReplyBody::Pieces(pieces) => {
            head.push_str("transfer-encoding: chunked\r\n\r\n");
            stream.write_all(head.as_bytes()).await?;
            stream.flush().await?;
            let last = pieces.len().saturating_sub(1);
            for (i, piece) in pieces.iter().enumerate() {
                if i == last {
                    finished(reply.status);
                }
                let mut chunk = format!("{:x}\r\n", piece.len()).into_bytes();
                chunk.extend_from_slice(piece);
                chunk.extend_from_slice(b"\r\n");
                stream.write_all(&chunk).await?;
                stream.flush().await?;
                tokio::task::yield_now().await;
            }
            if pieces.is_empty() {
                finished(reply.status);
            }
            stream.write_all(b"0\r\n\r\n").await?;
            stream.flush().await
        }
    }
}
