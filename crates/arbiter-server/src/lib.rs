//! arbiter-server: the control plane's HTTP side (`arbiter serve`) and the client that
//! talks to it.
//!
//! - [`router`] composes the routes of [`routes`] (one module per area: health, workers,
//!   metrics, events, git, artifacts; the work protocol and plan administration plug in the
//!   same way) over one [`AppState`].
//! - [`serve`] binds, speaks HTTP or HTTPS (rustls), refuses plain HTTP off loopback unless
//!   told `insecure`, and shuts down gracefully.
//! - [`auth`] holds the three kinds of bearer token and their extractors: the bootstrap
//!   token only registers workers, the admin token administers, a worker's own token
//!   (stored only as its SHA-256 by the [`WorkerRegistry`](arbiter_store::workers::WorkerRegistry))
//!   does a worker's work.
//! - The protocol's bodies and the clients live in `arbiter-wire` (re-exported here as
//!   [`api`], [`work_api`], [`plan_api`], [`client`], [`work_client`], [`plan_client`]).
//! - [`web`] is the dashboard: server-rendered pages, sessions, live updates, actions.
//!
//! See `docs/protocol.md` for every route, its auth, limits and errors.

#![forbid(unsafe_code)]

pub mod auth;
pub mod error;
pub mod git;
pub mod metrics;
pub mod routes;
pub mod serve;
pub mod state;
pub mod web;
pub mod work;

pub use arbiter_wire::{api, client, plan_api, plan_client, work_api, work_client};
pub use error::ApiError;
pub use metrics::Metrics;
pub use routes::router;
pub use serve::{ServeConfig, ServeError, TlsFiles, serve};
pub use state::{AppState, DataDirRepos, Limits, RepoResolver, Tokens};
