//! The Rust canary: which package of the `cargo test` run gets it as an integration test,
//! and its source, in modules matching the command's test name filter.

use super::parse;
use super::planner::{Refusal, Widening, basename, join, normalize_dir, parent, plant};
use super::{CanaryPlan, Framework, Nonce, RepoView};
use crate::protect::glob_match;

pub(super) fn cargo(args: &[String], repo: &dyn RepoView, nonce: &Nonce) -> Result<(CanaryPlan, Widening), Refusal> {
    let mut filters: Vec<String> = Vec::new();
    let mut skips: Vec<String> = Vec::new();
    let mut packages: Vec<String> = Vec::new();
    let mut workspace = false;
    let mut manifest: Option<String> = None;
    let mut i = 0;
    let mut after_dashes = false;
    while let Some(a) = args.get(i) {
        i += 1;
        if after_dashes {
            match a.as_str() {
                "--format" | "-Z" => return Err(format!("it changes libtest's output ({a}), which is then not read")),
                "--exact" => {
                    return Err("it matches test names exactly (--exact): the canary would not be selected".into());
                }
                "--skip" => {
                    skips.extend(args.get(i).cloned());
                    i += 1;
                }
                "--test-threads" | "--color" => i += 1,
                s if s.starts_with('-') => {}
                s => filters.push(s.to_string()),
            }
            continue;
        }
        let (name, inline) = match a.split_once('=') {
            Some((n, v)) if a.starts_with("--") => (n, Some(v.to_string())),
            _ => (a.as_str(), None),
        };
        let mut value = || -> Result<String, Refusal> {
            match &inline {
                Some(v) => Ok(v.clone()),
                None => {
                    i += 1;
                    args.get(i - 1).cloned().ok_or(format!("`{name}` needs a value"))
                }
            }
        };
        match name {
            "--" => after_dashes = true,
            "-p" | "--package" => packages.push(value()?),
            "--workspace" | "--all" => workspace = true,
            "--manifest-path" => manifest = Some(value()?),
            "--no-run" | "--doc" => return Err(format!("it does not run integration tests ({name})")),
            "--lib" | "--bin" | "--bins" | "--test" | "--example" | "--examples" | "--bench" | "--benches" => {
                return Err(format!(
                    "it selects test targets ({name}): the canary's integration test would not be built"
                ));
            }
            "--message-format" => {
                return Err("it changes cargo's output (--message-format), which is then not read".into());
            }
            "--exclude" | "--features" | "-F" | "--target" | "--target-dir" | "--profile" | "-j" | "--jobs"
            | "--color" | "--config" | "-Z" => {
                value()?;
            }
            s if s.starts_with('-') => {}
            s => filters.insert(0, s.to_string()),
        }
    }
    let (test, content) = cargo_canary(filters.first().map(String::as_str), nonce)?;
    if let Some(skip) = skips.iter().find(|k| test.contains(k.as_str())) {
        return Err(format!("it skips tests named like the canary (--skip {skip})"));
    }
    let root_dir = match &manifest {
        Some(m) => {
            let m = normalize_dir(m);
            if basename(&m) != "Cargo.toml" {
                return Err(format!("--manifest-path {m} is not a Cargo.toml"));
            }
            parent(&m).to_string()
        }
        None => String::new(),
    };
    let read_manifest = |dir: &str| -> Result<Option<parse::CargoManifest>, Refusal> {
        repo.read(&join(dir, "Cargo.toml")).map(|t| parse::cargo_manifest(&t)).transpose()
    };
    let root = read_manifest(&root_dir)?.ok_or(format!("there is no {} to read", join(&root_dir, "Cargo.toml")))?;
    // The workspace members, as directories (globs expanded against the tracked manifests).
    let mut members: Vec<String> = Vec::new();
    for pattern in &root.members {
        let pattern = join(&root_dir, &normalize_dir(pattern));
        for f in repo.files() {
            if basename(f) == "Cargo.toml"
                && glob_match(&pattern, parent(f))
                && !members.contains(&parent(f).to_string())
            {
                let excluded = root.exclude.iter().any(|e| join(&root_dir, &normalize_dir(e)) == parent(f));
                if !excluded {
                    members.push(parent(f).to_string());
                }
            }
        }
    }
    members.sort();
    let mut candidates: Vec<String> = Vec::new();
    if !packages.is_empty() {
        for dir in std::iter::once(root_dir.clone()).chain(members.iter().cloned()) {
            let named = read_manifest(&dir)?.is_some_and(|m| m.package.as_ref().is_some_and(|p| packages.contains(p)));
            if named {
                candidates.push(dir);
            }
        }
    } else if workspace || root.package.is_none() {
        if root.package.is_some() {
            candidates.push(root_dir.clone());
        }
        match (&root.default_members, workspace) {
            (Some(defaults), false) => {
                candidates.extend(defaults.iter().map(|d| join(&root_dir, &normalize_dir(d))));
            }
            _ => candidates.extend(members.iter().cloned()),
        }
    } else {
        candidates.push(root_dir.clone());
    }
    for dir in candidates {
        let Some(m) = read_manifest(&dir)? else { continue };
        if m.package.is_none() || !m.autotests {
            continue;
        }
        let path = join(&join(&dir, "tests"), &format!("{}.rs", nonce.snake()));
        return Ok((plant(Framework::CargoTest, path, content, test, None), Widening::default()));
    }
    Err("no package the command tests discovers integration tests (tests/*.rs)".into())
}

/// The canary's test path and source for `cargo test`: a test whose path contains the name
/// filter (libtest runs the tests whose path contains it), in modules named after its
/// `::`-separated parts (`calc::ad` → `mod calc { fn ad_walrus_harbor }`).
fn cargo_canary(filter: Option<&str>, nonce: &Nonce) -> Result<(String, String), Refusal> {
    let assertion = format!("assert_eq!({}, {});", nonce.numbers[0], nonce.numbers[1]);
    let Some(filter) = filter else {
        let name = nonce.snake();
        return Ok((name.clone(), format!("#[test]\nfn {name}() {{\n    {assertion}\n}}\n")));
    };
    let parts: Vec<&str> = filter.split("::").collect();
    let (last, modules) = parts.split_last().ok_or("an empty test name filter")?;
    let ident = |s: &str| {
        !s.is_empty()
            && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
            && !s.as_bytes()[0].is_ascii_digit()
            && !RUST_KEYWORDS.contains(&s)
    };
    if let Some(bad) = modules.iter().find(|m| !ident(m)) {
        return Err(format!("its test name filter `{filter}` has a part (`{bad}`) no module can be named"));
    }
    let func = if last.is_empty() { nonce.snake() } else { format!("{last}_{}", nonce.snake()) };
    if !ident(&func) {
        return Err(format!("its test name filter `{filter}` cannot be part of a test function's name"));
    }
    let mut source = format!("#[test]\nfn {func}() {{\n    {assertion}\n}}\n");
    for m in modules.iter().rev() {
        let inner: String = source.lines().map(|l| format!("    {l}\n")).collect();
        source = format!("mod {m} {{\n{inner}}}\n");
    }
    let mut test = modules.join("::");
    if !test.is_empty() {
        test.push_str("::");
    }
    test.push_str(&func);
    Ok((test, source))
}

const RUST_KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "crate", "dyn", "else", "enum", "extern", "false", "fn",
    "for", "if", "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "self", "Self",
    "static", "struct", "super", "trait", "true", "type", "unsafe", "use", "where", "while", "abstract", "become",
    "box", "do", "final", "gen", "macro", "override", "priv", "try", "typeof", "unsized", "virtual", "yield",
];
