//! `arbiter cache prune`: bounding the workspace pools in arbiter's cache directory.

use arbiter_runner::pool::prune_cache;
use arbiter_runner::user_dirs::UserDirs;
use serde::Serialize;

use crate::error::CliError;
use crate::output::{JsonDocument, out};

/// `cache prune --json`.
#[derive(Serialize)]
struct CachePruned {
    cache: String,
    pools_removed: usize,
    workspaces_removed: usize,
    bytes_freed: u64,
    in_use: usize,
}

impl JsonDocument for CachePruned {
    const SCHEMA: &'static str = "cache-prune";
}

pub fn prune(keep: usize, kept: bool, json: bool) -> Result<u8, CliError> {
    let dirs = UserDirs::from_process();
    let report = prune_cache(&dirs.cache, keep, kept);
    if json {
        crate::output::json(&CachePruned {
            cache: dirs.cache.display().to_string(),
            pools_removed: report.pools_removed,
            workspaces_removed: report.slots_removed,
            bytes_freed: report.bytes_freed,
            in_use: report.in_use,
        });
        return Ok(0);
    }
    out!(
        "Removed {} workspace(s) and {} pool(s) of repositories that no longer exist from {}: {} freed",
        report.slots_removed,
        report.pools_removed,
        dirs.cache.join("workspaces").display(),
        human_bytes(report.bytes_freed)
    );
    if report.in_use > 0 {
        out!("  {} workspace(s) in use were left alone", report.in_use);
    }
    if !kept {
        out!("  workspaces kept with --keep-worktrees stay; `arbiter cache prune --kept` removes them too");
    }
    Ok(0)
}

fn human_bytes(bytes: u64) -> String {
    const UNITS: [&str; 4] = ["B", "KiB", "MiB", "GiB"];
    let mut value = bytes as f64;
    let mut unit = 0;
    while value >= 1024.0 && unit < UNITS.len() - 1 {
        value /= 1024.0;
        unit += 1;
    }
    if unit == 0 { format!("{bytes} B") } else { format!("{value:.1} {}", UNITS[unit]) }
}
