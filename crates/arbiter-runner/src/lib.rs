//! arbiter-runner: the effects of a tournament.
//!
//! This crate owns everything that touches the outside world while a task runs: git and
//! candidate workspaces ([`git`], [`pool`], [`workspace`], [`capture`]), child processes
//! ([`process`], [`agent_env`]) and the sandbox they run in ([`confinement`], [`user_dirs`]),
//! agents (the [`agent`] seam, [`command_runner`], [`builtin_agent`] with its [`builtin`]
//! tools, the agent CLIs of [`cli_runner`], chosen by [`runners`]), verify commands ([`gates`], the rules engine's reading of files and Python syntax trees: [`rules`],
//! the JUnit XML reports they write: [`test_reports`])
//! and the canaries planted in them ([`canary`]), the run directory and
//! its event log ([`rundir`], [`events`]), the run's spending limit ([`budget`]), putting a patch into the repository
//! ([`materialize`]), the tournament itself ([`engine`]), and plans: their integration
//! branch ([`integration`]), who may move it ([`plan_branch`]), the worker loop that runs their
//! units of work ([`worker`]) against a [`coordinator`] (the local one over the store, or a
//! control plane's), the local `plan run` built on them ([`plan_run`]), and a remote worker's
//! copies of the plans' repositories ([`repo_cache`]). Every decision is delegated to
//! `arbiter-core`; every record goes through the `arbiter-store` port.

#![forbid(unsafe_code)]

pub mod agent;
pub mod agent_env;
pub mod budget;
pub mod builtin;
pub mod builtin_agent;
pub mod canary;
pub mod capture;
pub mod cli_runner;
pub mod command_runner;
pub mod confinement;
pub mod coordinator;
pub mod engine;
pub mod events;
pub mod failure_analysis;
pub mod forge;
pub mod gates;
pub mod git;
pub mod include;
pub mod inherited_setup;
pub mod integration;
pub mod judge;
pub mod materialize;
pub mod outside_copy;
pub mod plan_admin;
pub mod plan_branch;
pub mod plan_push;
pub mod plan_repos;
pub mod plan_run;
pub mod planning;
pub mod pool;
pub mod preflight;
pub mod process;
pub mod publish;
pub mod repo_cache;
pub mod rules;
pub mod run_record;
pub mod rundir;
pub mod runners;
pub mod sweeper;
pub mod task_settings;
pub mod test_reports;
#[cfg(test)]
mod testing;
pub mod user_dirs;
pub mod verify_detect;
pub mod worker;
pub mod workspace;

/// A random 24-bit run id suffix (run ids must not collide between concurrent runs).
pub fn random_suffix() -> u32 {
    let mut b = [0u8; 4];
    if getrandom::fill(&mut b).is_err() {
        // No entropy source: fall back on the process id and the clock, still unique enough
        // between concurrent runs in one repository.
        let nanos =
            std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
        return nanos ^ std::process::id();
    }
    u32::from_le_bytes(b)
}

/// The system clock.
pub struct SystemClock;

impl arbiter_core::Clock for SystemClock {
    fn now(&self) -> arbiter_core::time::Timestamp {
        let micros = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_micros() as i64)
            .unwrap_or(0);
        arbiter_core::time::Timestamp(micros)
    }
}
