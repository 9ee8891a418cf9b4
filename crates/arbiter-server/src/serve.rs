//! Binding, serving and stopping: HTTP/1.1 over plain TCP or TLS (rustls), one accept loop
//! for both, graceful shutdown.
//!
//! TLS is `tokio-rustls` under `hyper-util`'s connection driver: both were in the build
//! already (reqwest's rustls stack), so HTTPS adds no crate and no C code. The certificate
//! chain and key are PEM files read at start (`--tls-cert`, `--tls-key`).
//!
//! Plain HTTP is served only on a loopback address (127.0.0.0/8, ::1) unless the operator
//! says `insecure`: bearer tokens cross the wire in every request.
//!
//! Shutdown: when the token is cancelled the listener closes, [`AppState::stopping`] ends
//! long-lived responses (event streams), connections finish the requests they are serving
//! (idle keep-alive connections close at once), and whatever still runs after the grace
//! period is dropped.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use axum::extract::ConnectInfo;
use hyper::body::Incoming;
use hyper_util::rt::{TokioIo, TokioTimer};
use hyper_util::server::graceful::GracefulShutdown;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};
use tokio::net::TcpListener;
use tokio_rustls::TlsAcceptor;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use crate::state::AppState;

/// The certificate chain and private key of an HTTPS server (PEM files).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    pub cert: PathBuf,
    pub key: PathBuf,
}

/// Where and how to serve.
#[derive(Clone, Debug)]
pub struct ServeConfig {
    pub bind: SocketAddr,
    pub tls: Option<TlsFiles>,
    /// Serve plain HTTP on an address that is not loopback.
    pub insecure: bool,
    /// How long requests in flight may take to finish once shutdown begins.
    pub grace: Duration,
    /// How long a client may take to send a request's headers (or to finish a TLS
    /// handshake) before its connection is closed.
    pub header_timeout: Duration,
}

impl ServeConfig {
    pub fn new(bind: SocketAddr) -> Self {
        ServeConfig {
            bind,
            tls: None,
            insecure: false,
            grace: Duration::from_secs(10),
            header_timeout: Duration::from_secs(30),
        }
    }
}

/// Why the server could not start (or stopped).
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error(
        "refusing to serve plain HTTP on {addr}: tokens would cross the network unencrypted; serve HTTPS with --tls-cert FILE --tls-key FILE, bind a loopback address (127.0.0.1, ::1) behind a TLS proxy, or pass --insecure on a network you trust"
    )]
    PlainHttpOffLoopback { addr: SocketAddr },
    #[error("cannot read the TLS {what} {path}: {reason}")]
    TlsFile { what: &'static str, path: PathBuf, reason: String },
    #[error("the TLS certificate and key do not make a usable server configuration: {0}")]
    TlsConfig(String),
    #[error("cannot listen on {addr}: {source}")]
    Bind { addr: SocketAddr, source: std::io::Error },
}

impl ServeError {
    /// The operator's mistake (as opposed to the environment's): exit code 2, not 3.
    pub fn is_usage(&self) -> bool {
        !matches!(self, ServeError::Bind { .. })
    }
}

/// Whether `addr` is a loopback address (127.0.0.0/8, ::1, or either mapped into IPv6).
pub fn is_loopback(addr: &SocketAddr) -> bool {
    addr.ip().to_canonical().is_loopback()
}

/// A bound listener, ready to serve.
pub struct Bound {
    listener: TcpListener,
    tls: Option<TlsAcceptor>,
    addr: SocketAddr,
    config: ServeConfig,
}

impl Bound {
    /// The address actually bound (the port when 0 was asked for).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// `https` or `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls.is_some() { "https" } else { "http" }
    }

    /// `scheme://addr`.
    pub fn url(&self) -> String {
        format!("{}://{}", self.scheme(), self.addr)
    }

    /// Serves `state` until `shutdown` is cancelled, then stops gracefully.
    pub async fn run(self, state: AppState, shutdown: CancellationToken) -> Result<(), ServeError> {
        let Bound { listener, tls, config, .. } = self;
        let router = crate::routes::router(state.clone());
        let graceful = GracefulShutdown::new();
        loop {
            let (tcp, peer) = tokio::select! {
                _ = shutdown.cancelled() => break,
                accepted = listener.accept() => match accepted {
                    Ok(pair) => pair,
                    Err(e) => {
                        // Out of file descriptors and the like: wait instead of spinning.
                        tracing::warn!(error = %e, "accepting a connection failed");
                        tokio::time::sleep(Duration::from_millis(100)).await;
                        continue;
                    }
                },
            };
            let router = router.clone();
            let service = hyper::service::service_fn(move |mut request: hyper::Request<Incoming>| {
                request.extensions_mut().insert(ConnectInfo(peer));
                router.clone().oneshot(request)
            });
            let mut http = hyper::server::conn::http1::Builder::new();
            http.timer(TokioTimer::new()).header_read_timeout(config.header_timeout);
            let tls = tls.clone();
            let watcher = graceful.watcher();
            let handshake_timeout = config.header_timeout;
            tokio::spawn(async move {
                let _ = tcp.set_nodelay(true);
                let served = match tls {
                    None => watcher.watch(http.serve_connection(TokioIo::new(tcp), service)).await,
                    Some(acceptor) => match tokio::time::timeout(handshake_timeout, acceptor.accept(tcp)).await {
                        Ok(Ok(stream)) => watcher.watch(http.serve_connection(TokioIo::new(stream), service)).await,
                        Ok(Err(e)) => {
                            tracing::debug!(peer = %peer, error = %e, "TLS handshake failed");
                            return;
                        }
                        Err(_) => {
                            tracing::debug!(peer = %peer, "TLS handshake timed out");
                            return;
                        }
                    },
                };
                if let Err(e) = served {
                    tracing::debug!(peer = %peer, error = %e, "connection ended with an error");
                }
            });
        }
        drop(listener);
        state.stopping.cancel();
        tracing::info!("shutting down: finishing requests in flight");
        if tokio::time::timeout(config.grace, graceful.shutdown()).await.is_err() {
            tracing::warn!(
                grace_seconds = config.grace.as_secs(),
                "requests still running after the grace period were dropped"
            );
        }
        Ok(())
    }
}

/// Checks the configuration (plain HTTP off loopback, the TLS files) and binds.
pub async fn bind(config: ServeConfig) -> Result<Bound, ServeError> {
    let tls = match &config.tls {
        Some(files) => Some(acceptor(files)?),
        None if !is_loopback(&config.bind) && !config.insecure => {
            return Err(ServeError::PlainHttpOffLoopback { addr: config.bind });
        }
        None => None,
    };
    if tls.is_none() && !is_loopback(&config.bind) {
        tracing::warn!(addr = %config.bind, "serving plain HTTP off loopback (--insecure): tokens cross the network unencrypted");
    }
    let listener =
        TcpListener::bind(config.bind).await.map_err(|source| ServeError::Bind { addr: config.bind, source })?;
    let addr = listener.local_addr().map_err(|source| ServeError::Bind { addr: config.bind, source })?;
    Ok(Bound { listener, tls, addr, config })
}

/// Binds, serves `state` until `shutdown` is cancelled, and stops gracefully.
pub async fn serve(config: ServeConfig, state: AppState, shutdown: CancellationToken) -> Result<(), ServeError> {
    bind(config).await?.run(state, shutdown).await
}

/// The TLS acceptor for a certificate chain and key in PEM files.
pub fn acceptor(files: &TlsFiles) -> Result<TlsAcceptor, ServeError> {
    let certs = read_certs(&files.cert)?;
    let key = PrivateKeyDer::from_pem_file(&files.key).map_err(|e| ServeError::TlsFile {
        what: "private key",
        path: files.key.clone(),
        reason: format!("{e}; give a PEM file holding one private key (PKCS#8, PKCS#1 or SEC1)"),
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|e| ServeError::TlsConfig(e.to_string()))?
        .with_no_client_auth()
        .with_single_cert(certs, key)
        .map_err(|e| ServeError::TlsConfig(e.to_string()))?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(TlsAcceptor::from(Arc::new(config)))
}

fn read_certs(path: &Path) -> Result<Vec<CertificateDer<'static>>, ServeError> {
    let err = |reason: String| ServeError::TlsFile { what: "certificate", path: path.to_path_buf(), reason };
    let certs = CertificateDer::pem_file_iter(path)
        .map_err(|e| err(e.to_string()))?
        .collect::<Result<Vec<_>, _>>()
        .map_err(|e| err(e.to_string()))?;
    if certs.is_empty() {
        return Err(err("no certificate in it; give a PEM file with the server's certificate chain".into()));
    }
    Ok(certs)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn loopback_addresses() {
        for ok in ["127.0.0.1:1", "127.1.2.3:1", "[::1]:1", "[::ffff:127.0.0.1]:1"] {
            assert!(is_loopback(&ok.parse().unwrap()), "{ok}");
        }
        for bad in ["0.0.0.0:1", "10.0.0.1:1", "[::]:1", "192.168.1.1:1"] {
            assert!(!is_loopback(&bad.parse().unwrap()), "{bad}");
        }
    }
}
