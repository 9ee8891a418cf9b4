//! `arbiter completions SHELL` and `arbiter man [--dir DIR]`: shell completions and man
//! pages, generated from the command-line grammar itself (so they never drift from it).

use std::path::Path;

use clap::CommandFactory;

use crate::cli::Cli;
use crate::error::CliError;
use crate::output::note;

pub fn completions(shell: clap_complete::Shell) -> Result<u8, CliError> {
    let mut cmd = Cli::command();
    // Generated whole, then written by the printer: clap_complete panics on a failed write,
    // and a reader that stops early (`| head`) must end the command quietly.
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "arbiter", &mut script);
    crate::output::bytes(&script);
    Ok(0)
}

/// The man page of `arbiter` on stdout, or with `dir` one page per command
/// (`arbiter.1`, `arbiter-plan.1`, `arbiter-plan-run.1`, ...) written there.
pub fn man(dir: Option<&Path>) -> Result<u8, CliError> {
    let cmd = Cli::command();
    let Some(dir) = dir else {
        let mut page = Vec::new();
        clap_mangen::Man::new(cmd).render(&mut page)?;
        crate::output::bytes(&page);
        return Ok(0);
    };
    std::fs::create_dir_all(dir)
        .map_err(|e| CliError::usage(format!("--dir {}: cannot create it: {e}", dir.display())))?;
    let mut written = 0;
    write_pages(&cmd.clone(), "arbiter", dir, &mut written)?;
    note!("arbiter: wrote {written} man page(s) to {}", dir.display());
    Ok(0)
}

fn write_pages(cmd: &clap::Command, name: &str, dir: &Path, written: &mut usize) -> Result<(), CliError> {
    let page = cmd.clone().name(name.to_string());
    let mut out = Vec::new();
    clap_mangen::Man::new(page).render(&mut out)?;
    std::fs::write(dir.join(format!("{name}.1")), out)?;
    *written += 1;
    for sub in cmd.get_subcommands().filter(|s| s.get_name() != "help") {
        write_pages(sub, &format!("{name}-{}", sub.get_name()), dir, written)?;
    }
    Ok(())
}
