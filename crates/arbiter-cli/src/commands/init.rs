//! `arbiter init`.

use std::path::Path;

use crate::context::RepoContext;
use crate::error::CliError;
use crate::output::out;

pub async fn init(repo: Option<&Path>) -> Result<u8, CliError> {
    let ctx = RepoContext::locate(repo).await?;
    let report = ctx.workspace.init(&ctx.git).await?;
    ctx.store().await?;
    let dir = ctx.workspace.dir();
    out!("Initialized {}", dir.display());
    if report.created_config {
        out!("  wrote {} (every setting, commented, at its default)", ctx.workspace.config_path().display());
    } else {
        out!("  kept the existing {}", ctx.workspace.config_path().display());
    }
    if report.added_exclude {
        out!("  added .arbiter/ to .git/info/exclude");
    }
    out!("  database {}", ctx.workspace.db_path().display());
    out!("Next: arbiter run --task \"...\" --verify \"your test command\" --command ./your-agent.sh");
    Ok(0)
}
