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
    pub path: String,
    pub headers: BTreeMap<String, String>,
    pub body: Vec<u8>,
    pub keep_alive: bool,
}

const MAX_HEAD: usize = 64 * 1024;
const MAX_BODY: usize = 32 * 1024 * 1024;

/// Reads one request; `Ok(None)` when the client closed the connection between requests.
pub(super) async fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> io::Result<Option<Incoming>> {
    let head_end = loop {
        if let Some(at) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break at;
        }
        if buffer.len() > MAX_HEAD {
            return Err(io::Error::new(io::ErrorKind::InvalidData, "request head too large"));
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
        return Err(io::Error::new(io::ErrorKind::InvalidData, "bad request line"));
    };
    let mut headers = BTreeMap::new();
    for line in lines {
        if let Some((name, value)) = line.split_once(':') {
            headers.insert(name.trim().to_ascii_lowercase(), value.trim().to_string());
        }
    }
    if headers.get("transfer-encoding").is_some_and(|v| v.to_ascii_lowercase().contains("chunked")) {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "chunked request bodies are not supported"));
    }
    let length: usize = match headers.get("content-length") {
        Some(v) => v.parse().map_err(|_| io::Error::new(io::ErrorKind::InvalidData, "bad content-length"))?,
        None => 0,
    };
    if length > MAX_BODY {
        return Err(io::Error::new(io::ErrorKind::InvalidData, "request body too large"));
    }
    let body_start = head_end + 4;
    while buffer.len() < body_start + length {
        if read_more(stream, buffer).await? == 0 {
            return Err(io::ErrorKind::UnexpectedEof.into());
        }
    }
    let body = buffer[body_start..body_start + length].to_vec();
    buffer.drain(..body_start + length);
    let connection = headers.get("connection").map(|v| v.to_ascii_lowercase()).unwrap_or_default();
    let keep_alive =
        if version == "HTTP/1.0" { connection.contains("keep-alive") } else { !connection.contains("close") };
    let path = target.split('?').next().unwrap_or(target).to_string();
    Ok(Some(Incoming { method: method.to_string(), path, headers, body, keep_alive }))
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

/// Writes `reply`; `finished` is told the status just before the last bytes go out.
pub(super) async fn write_reply(
    stream: &mut TcpStream,
    reply: Reply,
    keep_alive: bool,
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
            bytes.extend_from_slice(&body);
            finished(reply.status);
            stream.write_all(&bytes).await?;
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
