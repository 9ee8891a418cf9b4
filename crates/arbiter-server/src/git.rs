//! Git's smart HTTP protocol, read-only, by running `git http-backend` as a CGI program.
//!
//! The request body streams to the program's standard input (a gzip body is handed over as
//! it came, with `HTTP_CONTENT_ENCODING`: `git http-backend` inflates it itself), the CGI
//! header block of its standard output becomes the response's status and headers, and the
//! rest streams back as the body. The program runs with an emptied environment: only `PATH`,
//! the CGI variables and configuration that keeps it read-only (`http.receivepack=false`,
//! `http.getanyfile=false`), never the server's own environment (its tokens, its database
//! URL). Its `GIT_PROJECT_ROOT` is the one repository being served, and `PATH_INFO` is made
//! by the server, never taken from the request, so no request reaches another path.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use axum::body::Body;
use axum::http::{HeaderName, HeaderValue, Response, StatusCode};
use futures_util::StreamExt;
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt, BufReader};

use crate::error::ApiError;

/// The services served: only fetching.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Service {
    /// `GET info/refs?service=git-upload-pack`: the refs advertisement.
    InfoRefs,
    /// `POST git-upload-pack`: the negotiation and the pack.
    UploadPack,
}

/// One request to hand to `git http-backend`.
pub struct CgiRequest {
    pub service: Service,
    pub content_type: Option<String>,
    pub content_encoding: Option<String>,
    /// The `Git-Protocol` header (protocol v2 is asked for with it).
    pub git_protocol: Option<String>,
    /// Who asks (the worker's name), for git's own logs.
    pub remote_user: String,
    pub remote_addr: Option<String>,
    pub body: Body,
    /// The most request-body bytes passed on.
    pub body_limit: u64,
}

/// The longest CGI header block read.
const MAX_HEADERS: usize = 64 * 1024;

/// Runs `git http-backend` for `repo` (a bare repository or a `.git` directory).
pub async fn http_backend(git: &Path, repo: &Path, req: CgiRequest) -> Result<Response<Body>, ApiError> {
    let (method, path_info, query) = match req.service {
        Service::InfoRefs => ("GET", "/info/refs", "service=git-upload-pack"),
        Service::UploadPack => ("POST", "/git-upload-pack", ""),
    };
    let mut cmd = tokio::process::Command::new(git);
    cmd.arg("http-backend")
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into()))
        .env("GIT_PROJECT_ROOT", repo)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("GIT_CONFIG_NOSYSTEM", "1")
        .env("GIT_CONFIG_GLOBAL", "/dev/null")
        .env("GIT_CONFIG_COUNT", "2")
        .env("GIT_CONFIG_KEY_0", "http.receivepack")
        .env("GIT_CONFIG_VALUE_0", "false")
        .env("GIT_CONFIG_KEY_1", "http.getanyfile")
        .env("GIT_CONFIG_VALUE_1", "false")
        .env("GATEWAY_INTERFACE", "CGI/1.1")
        .env("REQUEST_METHOD", method)
        .env("PATH_INFO", path_info)
        .env("QUERY_STRING", query)
        .env("REMOTE_USER", &req.remote_user)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .kill_on_drop(true);
    if let Some(ct) = &req.content_type {
        cmd.env("CONTENT_TYPE", ct);
    }
    if let Some(enc) = &req.content_encoding {
        cmd.env("HTTP_CONTENT_ENCODING", enc);
    }
    if let Some(p) = &req.git_protocol {
        cmd.env("GIT_PROTOCOL", p);
    }
    if let Some(addr) = &req.remote_addr {
        cmd.env("REMOTE_ADDR", addr);
    }
    let mut child = cmd.spawn().map_err(|e| ApiError::internal("starting git http-backend", e))?;
    let (Some(mut stdin), Some(stdout), Some(stderr)) = (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err(ApiError::internal("starting git http-backend", "its pipes were not opened"));
    };

    // The request body goes in while the response comes out: a large negotiation would
    // otherwise fill both pipes and stall.
    let limit = req.body_limit;
    let mut body = req.body.into_data_stream();
    tokio::spawn(async move {
        let mut sent = 0u64;
        while let Some(Ok(chunk)) = body.next().await {
            sent += chunk.len() as u64;
            if sent > limit {
                tracing::warn!(limit, "git request body over the limit; cut off");
                break;
            }
            if stdin.write_all(&chunk).await.is_err() {
                break;
            }
        }
        // Dropping stdin closes it: git reads to its end.
    });
    let repo_shown = repo.display().to_string();
    tokio::spawn(async move {
        let mut text = String::new();
        let _ = stderr.take(16 * 1024).read_to_string(&mut text).await;
        let status = child.wait().await;
        let text = text.trim();
        if !text.is_empty() || !status.as_ref().is_ok_and(|s| s.success()) {
            tracing::warn!(repo = %repo_shown, status = ?status.ok(), stderr = %text, "git http-backend");
        }
    });

    let mut reader = BufReader::new(stdout);
    let (status, headers) = read_cgi_headers(&mut reader).await?;
    let mut response = Response::new(Body::from_stream(tokio_util::io::ReaderStream::new(reader)));
    *response.status_mut() = status;
    for (name, value) in headers {
        response.headers_mut().append(name, value);
    }
    Ok(response)
}

/// Reads the CGI header block: `Name: value` lines up to an empty line; `Status: 404 Not
/// Found` sets the status (200 otherwise).
async fn read_cgi_headers<R: tokio::io::AsyncBufRead + Unpin>(
    reader: &mut R,
) -> Result<(StatusCode, Vec<(HeaderName, HeaderValue)>), ApiError> {
    let bad = |why: &str| {
        ApiError::new(StatusCode::BAD_GATEWAY, "git_failed", format!("git http-backend gave no usable answer ({why})"))
    };
    let mut status = StatusCode::OK;
    let mut headers = Vec::new();
    let mut read = 0usize;
    loop {
        let mut line = Vec::new();
        let n = reader.read_until(b'\n', &mut line).await.map_err(|_| bad("its output could not be read"))?;
        if n == 0 {
            return Err(bad("it ended before its headers did"));
        }
        read += n;
        if read > MAX_HEADERS {
            return Err(bad("its headers are too long"));
        }
        let line = String::from_utf8_lossy(&line);
        let line = line.trim_end_matches(['\r', '\n']);
        if line.is_empty() {
            return Ok((status, headers));
        }
        let Some((name, value)) = line.split_once(':') else { return Err(bad("a header line without ':'")) };
        let value = value.trim();
        if name.eq_ignore_ascii_case("status") {
            let code = value.split_whitespace().next().and_then(|c| c.parse::<u16>().ok());
            status = code.and_then(|c| StatusCode::from_u16(c).ok()).ok_or_else(|| bad("a bad Status line"))?;
        } else if let (Ok(name), Ok(value)) = (HeaderName::try_from(name.trim()), HeaderValue::try_from(value)) {
            headers.push((name, value));
        }
    }
}

/// The repository's directory if `path` is one git can serve: a bare repository or a
/// `.git` directory (it has `HEAD` and `objects/`).
pub async fn servable(path: &Path) -> Option<PathBuf> {
    let path = tokio::fs::canonicalize(path).await.ok()?;
    let head = tokio::fs::metadata(path.join("HEAD")).await.ok()?;
    let objects = tokio::fs::metadata(path.join("objects")).await.ok()?;
    (head.is_file() && objects.is_dir()).then_some(path)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn cgi_headers_set_the_status_and_the_rest_is_the_body() {
        let out =
            b"Status: 403 Forbidden\r\nContent-Type: text/plain\r\nExpires: Fri, 01 Jan 1980 00:00:00 GMT\r\n\r\nbody";
        let mut r = BufReader::new(&out[..]);
        let (status, headers) = read_cgi_headers(&mut r).await.unwrap();
        assert_eq!(status, StatusCode::FORBIDDEN);
        assert_eq!(headers.len(), 2);
        let mut rest = String::new();
        r.read_to_string(&mut rest).await.unwrap();
        assert_eq!(rest, "body");

        let mut r = BufReader::new(&b"Content-Type: x\n\n"[..]);
        assert_eq!(read_cgi_headers(&mut r).await.unwrap().0, StatusCode::OK);
        let mut r = BufReader::new(&b"Content-Type: x\n"[..]);
        assert_eq!(read_cgi_headers(&mut r).await.unwrap_err().status, StatusCode::BAD_GATEWAY);
    }
}
