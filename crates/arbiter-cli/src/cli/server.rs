//! The control plane's commands: `serve`, `worker`, `token`, `cache` and `bench`, and how
//! to reach a control plane (`ServerArgs`).

use std::path::PathBuf;

use clap::{Args, Subcommand};

use super::PlanServerArgs;

#[derive(Debug, Subcommand)]
pub enum TokenCommand {
    /// Mint a named token, written to --token-file (mode 0600) or printed once.
    Create {
        /// The token's name: who or what uses it (it names them in the event log).
        name: String,
        /// It may read every page and GET route, and change nothing.
        #[arg(long)]
        read_only: bool,
        /// Write the token to this file (mode 0600; never overwritten) instead of stdout.
        #[arg(long, value_name = "FILE")]
        token_file: Option<PathBuf>,
        #[command(flatten)]
        remote: PlanServerArgs,
    },
    /// Every named token: role, state, when it was made and last used (never its value).
    List {
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
        #[command(flatten)]
        remote: PlanServerArgs,
    },
    /// Revoke a token at once (its dashboard sessions end too).
    Revoke {
        /// The token's name (`arbiter token list` shows them).
        name: String,
        #[command(flatten)]
        remote: PlanServerArgs,
    },
}

#[derive(Debug, Subcommand)]
pub enum BenchCommand {
    /// The control plane's work protocol over real HTTP with no-op workers: claim+complete
    /// cycles per second, claim latency, wake-up latency. Needs ARBITER_TOKEN (admin) and
    /// ARBITER_BOOTSTRAP_TOKEN; leaves its plans cancelled and its workers revoked.
    Queue {
        #[command(flatten)]
        server: ServerArgs,
        /// No-op workers claiming at once.
        #[arg(long, default_value_t = 16, value_name = "N")]
        workers: usize,
        /// Tasks pending when the workers start.
        #[arg(long, default_value_t = 20_000, value_name = "M")]
        tasks: usize,
        /// Imports into an empty plan whose wake-up is measured.
        #[arg(long, default_value_t = 50, value_name = "K")]
        wakeups: usize,
        /// A git repository on the server's host for the bench plans (default: the current
        /// directory's).
        #[arg(long, value_name = "PATH")]
        repository: Option<PathBuf>,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
pub struct ServeArgs {
    /// The address to listen on. Plain HTTP only on loopback (127.0.0.0/8, ::1) unless
    /// --insecure; serve HTTPS with --tls-cert and --tls-key.
    #[arg(long, value_name = "ADDR", default_value = "127.0.0.1:7878")]
    pub bind: String,
    /// The server's certificate chain (PEM); with --tls-key, the server speaks HTTPS.
    #[arg(long, value_name = "FILE", requires = "tls_key")]
    pub tls_cert: Option<PathBuf>,
    /// The private key of --tls-cert (PEM).
    #[arg(long, value_name = "FILE", requires = "tls_cert")]
    pub tls_key: Option<PathBuf>,
    /// Serve plain HTTP on an address that is not loopback (tokens cross the network
    /// unencrypted: only on a network you trust).
    #[arg(long)]
    pub insecure: bool,
    /// Where the server keeps its SQLite database, artifacts and repositories (default:
    /// $XDG_DATA_HOME/arbiter/server, else ~/.local/share/arbiter/server). With
    /// ARBITER_DATABASE_URL the store is Postgres instead of DIR/arbiter.db.
    #[arg(long, value_name = "DIR", env = "ARBITER_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
    /// Log lines on stderr: human (coloured on a terminal) or json (one object a line).
    #[arg(long, value_name = "FORMAT", default_value = "human", value_parser = ["human", "json"])]
    pub log_format: String,
    /// Lease length: a worker seen within two lease lengths counts as connected.
    #[arg(long, default_value_t = 60, value_name = "SECONDS")]
    pub lease_seconds: u64,
    /// The largest artifact a worker may upload, in MiB.
    #[arg(long, default_value_t = 256, value_name = "MIB")]
    pub max_artifact_mib: u64,
    /// Mark the dashboard's session cookies `Secure` although this server speaks plain HTTP:
    /// a TLS proxy in front of it serves the dashboard over HTTPS (with --tls-cert they are
    /// always `Secure`).
    #[arg(long)]
    pub secure_cookies: bool,
}

/// How to reach a control plane.
#[derive(Debug, Args, Clone)]
pub struct ServerArgs {
    /// The control plane's URL, e.g. https://arbiter.example:7878 (plain http:// only to
    /// loopback unless --insecure).
    #[arg(long, value_name = "URL", env = "ARBITER_SERVER")]
    pub server: String,
    /// Trust this CA certificate (PEM) besides the system's roots: for a server with a
    /// self-signed certificate.
    #[arg(long, value_name = "FILE")]
    pub ca_cert: Option<PathBuf>,
    /// Allow plain http:// to a host that is not loopback.
    #[arg(long)]
    pub insecure: bool,
}

#[derive(Debug, Subcommand)]
pub enum WorkerCommand {
    /// Register this machine as a worker with the bootstrap token (ARBITER_BOOTSTRAP_TOKEN)
    /// and write its own token to --token-file (mode 0600); the token is never printed.
    Register {
        #[command(flatten)]
        server: ServerArgs,
        /// The worker's name (unique on the server).
        #[arg(long)]
        name: String,
        /// Where to write the worker's token (its directory is created with mode 0700).
        #[arg(long, value_name = "FILE")]
        token_file: PathBuf,
        /// A runner this worker has (repeatable), e.g. command, claude-code.
        #[arg(long = "runner", value_name = "NAME")]
        runners: Vec<String>,
        /// A model backend this worker has (repeatable).
        #[arg(long = "backend", value_name = "NAME")]
        backends: Vec<String>,
        /// Units of work it takes at once.
        #[arg(long, default_value_t = 1, value_name = "N")]
        slots: u32,
        /// Re-register a name that is taken (its old token stops working) and overwrite
        /// --token-file if it exists.
        #[arg(long)]
        replace: bool,
    },
    /// Run as a worker: claim units of work from the control plane (candidates, evaluations,
    /// whole tournaments) and run them, until stopped (SIGTERM or Ctrl-C gives back what it
    /// holds at once).
    Run {
        #[command(flatten)]
        server: ServerArgs,
        /// The worker's token, as `arbiter worker register` wrote it (mode 0600).
        #[arg(long, value_name = "FILE")]
        token_file: PathBuf,
        /// Only this plan's work (default: any plan's).
        #[arg(long, value_name = "ID")]
        plan: Option<String>,
        /// Units of work run at once.
        #[arg(long, default_value_t = 1, value_name = "N")]
        slots: u32,
        /// Take one unit of work, run it, report it and exit.
        #[arg(long)]
        once: bool,
        /// Where the worker keeps its repository copies and their runs (default:
        /// $XDG_DATA_HOME/arbiter/worker, else ~/.local/share/arbiter/worker).
        #[arg(long, value_name = "DIR", env = "ARBITER_WORKER_DATA_DIR")]
        data_dir: Option<PathBuf>,
        /// Log lines as human text or JSON objects.
        #[arg(long, value_name = "FORMAT", default_value = "human", value_parser = ["human", "json"])]
        log_format: String,
    },
    /// Every worker: capabilities, last heartbeat, what it holds (admin token: ARBITER_TOKEN).
    List {
        #[command(flatten)]
        server: ServerArgs,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
    /// Revoke a worker's token at once (admin token: ARBITER_TOKEN).
    Revoke {
        /// The worker's name, as it registered.
        name: String,
        #[command(flatten)]
        server: ServerArgs,
    },
    /// Give a worker a new token; the old one stops working (admin token: ARBITER_TOKEN).
    Rotate {
        /// The worker's name, as it registered.
        name: String,
        #[command(flatten)]
        server: ServerArgs,
        /// Write the new token here (mode 0600) instead of printing it.
        #[arg(long, value_name = "FILE")]
        token_file: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum CacheCommand {
    /// Remove idle workspaces (and the pools of repositories that no longer exist); a
    /// workspace in use is never touched.
    Prune {
        /// Keep this many idle workspaces per repository (the most recently used).
        #[arg(long, value_name = "N", default_value_t = 0)]
        keep: usize,
        /// Also remove workspaces kept with --keep-worktrees.
        #[arg(long)]
        kept: bool,
        /// Print one JSON value on stdout instead of text.
        #[arg(long)]
        json: bool,
    },
}
