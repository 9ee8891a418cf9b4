//! How the user runs this arbiter, for the next steps it prints: `arbiter` when that name on
//! `PATH` is this very binary (it was installed), else the binary's own path (run through
//! `cargo run`, or from `target/`), so that every printed command works as printed.

use std::path::{Path, PathBuf};

/// `arbiter`, or this binary's path when `arbiter` on `PATH` is not it.
pub fn arbiter() -> String {
    let Ok(me) = std::env::current_exe() else { return "arbiter".into() };
    let path = std::env::var_os("PATH").unwrap_or_default();
    let on_path = std::env::split_paths(&path).map(|d| d.join("arbiter")).find(|p| p.is_file());
    if on_path.is_some_and(|p| same_file(&p, &me)) {
        "arbiter".into()
    } else {
        arbiter_core::command_line::shell_word(&me.display().to_string())
    }
}

fn same_file(a: &Path, b: &Path) -> bool {
    let canonical = |p: &Path| p.canonicalize().unwrap_or_else(|_| PathBuf::from(p));
    canonical(a) == canonical(b)
}
