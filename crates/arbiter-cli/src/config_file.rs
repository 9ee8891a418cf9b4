//! Editing `.arbiter/config.toml` and the repository's secrets file (`~/.config/arbiter/secrets/`).
//!
//! The config file belongs to the user: edits go through `toml_edit`, so comments, order
//! and formatting survive. Keys live only in `secrets.toml`, created with mode 0600 and
//! kept at 0600 whenever it is written.

use std::fs;
use std::io::Write;
use std::os::unix::fs::{DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::Path;

use arbiter_core::backends::{BackendSection, SecretsFile};
use toml_edit::{Array, DocumentMut, Item, Table, value};

use crate::error::CliError;

fn load(path: &Path) -> Result<DocumentMut, CliError> {
    let text = match fs::read_to_string(path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(CliError::environment(format!("cannot read {}: {e}", path.display()))),
    };
    text.parse::<DocumentMut>().map_err(|e| CliError::usage(format!("cannot parse {}: {e}", path.display())))
}

fn save(path: &Path, doc: &DocumentMut) -> Result<(), CliError> {
    if let Some(parent) = path.parent() {
        fs::create_dir_all(parent)?;
    }
    arbiter_runner::rundir::write_atomic(path, doc.to_string().as_bytes())?;
    Ok(())
}

/// The `[backends]` table of `doc`, made when it is missing (an inline `backends = {…}`
/// becomes a table, its backends kept).
fn backends_table<'d>(doc: &'d mut DocumentMut, path: &Path) -> Result<&'d mut Table, CliError> {
    let mut made = Table::new();
    made.set_implicit(true);
    let item = doc.entry("backends").or_insert(Item::Table(made));
    if let Some(inline) = item.as_inline_table() {
        *item = Item::Table(inline.clone().into_table());
    }
    item.as_table_mut().ok_or_else(|| {
        CliError::usage(format!(
            "`backends` in {} is not a table; write each backend as a `[backends.NAME]` table \
             (docs/configuration.md), then run the command again",
            path.display()
        ))
    })
}

/// Writes (or replaces) `[backends.NAME]`.
pub fn put_backend(path: &Path, name: &str, b: &BackendSection) -> Result<(), CliError> {
    let mut doc = load(path)?;
    let mut t = Table::new();
    t.insert("provider", value(&b.provider));
    t.insert("model", value(&b.model));
    if let Some(u) = &b.base_url {
        t.insert("base_url", value(u));
    }
    if let Some(v) = &b.api_key_env {
        t.insert("api_key_env", value(v));
    }
    if let Some(p) = b.input_cost {
        t.insert("input_cost", value(p.decimal()));
    }
    if let Some(p) = b.output_cost {
        t.insert("output_cost", value(p.decimal()));
    }
    t.insert("roles", value(b.roles.iter().collect::<Array>()));
    t.insert("capability", value(b.capability as i64));
    t.insert("max_parallel", value(b.max_parallel as i64));
    if let Some(m) = b.max_tokens {
        t.insert("max_tokens", value(m as i64));
    }
    if let Some(s) = b.timeout_seconds {
        t.insert("timeout_seconds", value(s as i64));
    }
    t.insert("enabled", value(b.enabled));
    if backends_table(&mut doc, path)?.contains_key(name) {
        // Replaced in place: the table keeps its position and surrounding comments.
        backends_table(&mut doc, path)?.insert(name, Item::Table(t));
        return save(path, &doc);
    }
    // A new table goes at the end of the file, after everything the user wrote.
    let mut fragment = DocumentMut::new();
    backends_table(&mut fragment, path)?.insert(name, Item::Table(t));
    let mut text = fs::read_to_string(path).unwrap_or_default();
    if !text.is_empty() && !text.ends_with('\n') {
        text.push('\n');
    }
    text.push('\n');
    text.push_str(&fragment.to_string());
    text.parse::<DocumentMut>().map_err(|e| CliError::usage(format!("cannot update {}: {e}", path.display())))?;
    arbiter_runner::rundir::write_atomic(path, text.as_bytes())?;
    Ok(())
}

/// Removes `[backends.NAME]`; returns whether it existed.
pub fn remove_backend(path: &Path, name: &str) -> Result<bool, CliError> {
    let mut doc = load(path)?;
    let existed = backends_table(&mut doc, path)?.remove(name).is_some();
    save(path, &doc)?;
    Ok(existed)
}

/// Sets `enabled` of `[backends.NAME]`.
pub fn set_enabled(path: &Path, name: &str, enabled: bool) -> Result<(), CliError> {
    let mut doc = load(path)?;
    // `[backends.NAME]`, or `NAME = { … }` inside `[backends]`.
    match backends_table(&mut doc, path)?.get_mut(name).and_then(Item::as_table_like_mut) {
        Some(t) => {
            t.insert("enabled", value(enabled));
            save(path, &doc)
        }
        None => Err(CliError::usage(format!("no backend named '{name}'; `arbiter backend list` shows them"))),
    }
}

/// Moves an older `.arbiter/secrets.toml` to `to`: its keys join those already there (a key
/// already at `to` wins), the result is written with mode 0600, and only then is the old file
/// removed — nothing is lost when any step fails.
pub fn migrate_secrets(from: &Path, to: &Path) -> Result<(), CliError> {
    let old = read_secrets(from)?;
    let mut merged = read_secrets(to)?;
    for (name, secret) in old.backends {
        merged.backends.entry(name).or_insert(secret);
    }
    write_secrets(to, &merged)?;
    fs::remove_file(from)?;
    Ok(())
}

/// Reads a secrets file (empty when absent).
pub fn read_secrets(path: &Path) -> Result<SecretsFile, CliError> {
    match fs::read_to_string(path) {
        Ok(text) => toml::from_str(&text).map_err(|e| CliError::usage(format!("cannot parse {}: {e}", path.display()))),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(SecretsFile::default()),
        Err(e) => Err(CliError::environment(format!("cannot read {}: {e}", path.display()))),
    }
}

/// Writes a secrets file with mode 0600 (its directory 0700).
pub fn write_secrets(path: &Path, secrets: &SecretsFile) -> Result<(), CliError> {
    let text = toml::to_string(secrets).map_err(|e| CliError::environment(format!("cannot encode secrets: {e}")))?;
    if let Some(dir) = path.parent() {
        fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)?;
    }
    let tmp = path.with_extension("toml.tmp");
    {
        let mut f = fs::OpenOptions::new().create(true).write(true).truncate(true).mode(0o600).open(&tmp)?;
        f.set_permissions(fs::Permissions::from_mode(0o600))?;
        f.write_all(b"# Backend keys written by `arbiter backend add --api-key-stdin`. Keep this file private.\n")?;
        f.write_all(text.as_bytes())?;
        f.sync_data()?;
    }
    fs::rename(&tmp, path)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backends_written_inline_are_kept_and_a_backends_value_is_refused_by_name() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("config.toml");
        fs::write(&path, "backends = { a = { provider = \"openai\", model = \"m\", enabled = true } }\n").unwrap();
        set_enabled(&path, "a", false).unwrap();
        let doc = load(&path).unwrap();
        assert_eq!(doc["backends"]["a"]["model"].as_str(), Some("m"));
        assert_eq!(doc["backends"]["a"]["enabled"].as_bool(), Some(false));

        fs::write(&path, "backends = \"a\"\n").unwrap();
        let e = remove_backend(&path, "a").unwrap_err().to_string();
        assert!(e.contains("`backends` in") && e.contains("is not a table") && e.contains("[backends.NAME]"), "{e}");
        assert_eq!(fs::read_to_string(&path).unwrap(), "backends = \"a\"\n", "nothing was lost");

        // Following the hint: the backend as a `[backends.NAME]` table, and the command again.
        fs::write(&path, "[backends.a]\nprovider = \"openai\"\nmodel = \"m\"\n").unwrap();
        assert!(remove_backend(&path, "a").unwrap());
        let doc = load(&path).unwrap();
        assert!(doc.get("backends").and_then(Item::as_table_like).is_none_or(|t| t.is_empty()), "{doc}");
    }
}
