//! Files that ordinary changes edit (dependencies, metadata) and that also hold test
//! settings: only the settings are machinery. A change to them is put back as the base has
//! it within the candidate's file, the rest of which stays the candidate's.

use serde_json::Value;

use super::{Change, Family, Restore};
use crate::canary::{RepoView, parse::ini_section};
use crate::protect::Touch;

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Format {
    Toml,
    Ini,
    Json,
    GoMod,
}

/// A file of this name, at any level, holds these settings of a framework.
pub(super) struct Spec {
    pub(super) name: &'static str,
    pub(super) family: Family,
    format: Format,
    /// The settings, as key paths (an INI file's are section names).
    keys: &'static [&'static [&'static str]],
    what: &'static str,
}

/// pytest reads `[tool.pytest.ini_options]` (and pytest 9's `[tool.pytest]`) from any
/// `pyproject.toml` it takes as its configuration, `[tool:pytest]` from `setup.cfg` and
/// `[pytest]` from `tox.ini`; Jest reads the `jest` key of `package.json`, babel-jest its
/// `babel` key, and `npm test` runs `scripts.test` between `pretest` and `posttest`; Cargo
/// builds a package's build script (`build =`) before its tests, and `[lib]`/`[[test]]`
/// decide which targets are tests and whether libtest runs them (`harness`); Go builds
/// against a module's `replace` directives.
pub(super) const SPECS: &[Spec] = &[
    Spec {
        name: "pyproject.toml",
        family: Family::Python,
        format: Format::Toml,
        keys: &[&["tool", "pytest"]],
        what: "pytest's settings",
    },
    Spec {
        name: "setup.cfg",
        family: Family::Python,
        format: Format::Ini,
        keys: &[&["tool:pytest"]],
        what: "pytest's settings",
    },
    Spec {
        name: "tox.ini",
        family: Family::Python,
        format: Format::Ini,
        keys: &[&["pytest"]],
        what: "pytest's settings",
    },
    Spec {
        name: "package.json",
        family: Family::JavaScript,
        format: Format::Json,
        keys: &[
            &["jest"],
            &["vitest"],
            &["babel"],
            &["scripts", "test"],
            &["scripts", "pretest"],
            &["scripts", "posttest"],
        ],
        what: "how the tests are run, configured and transformed",
    },
    Spec {
        name: "Cargo.toml",
        family: Family::Cargo,
        format: Format::Toml,
        keys: &[&["package", "build"], &["package", "autotests"], &["lib", "test"], &["lib", "harness"], &["test"]],
        what: "the build script and the test targets",
    },
    Spec {
        name: "go.mod",
        family: Family::Go,
        format: Format::GoMod,
        keys: &[&["replace"]],
        what: "the modules the tests are built against",
    },
];

/// The spec of the file at `path`, when its framework is in play.
pub(super) fn spec_for(path: &str, in_play: &dyn Fn(Family) -> bool) -> Option<&'static Spec> {
    let name = path.rsplit('/').next().unwrap_or(path);
    SPECS.iter().find(|s| s.name == name && in_play(s.family))
}

/// The change to the settings of `spec` in the file at `path`, if any.
pub(super) fn change(
    spec: &Spec,
    path: &str,
    how: Touch,
    base: &dyn RepoView,
    candidate: &dyn RepoView,
) -> Option<Change> {
    let made = |settings: Vec<String>, restore: Restore| Change {
        path: path.to_string(),
        settings,
        family: spec.family,
        what: spec.what.to_string(),
        restore,
    };
    let base_text = base.files().iter().any(|f| f == path).then(|| base.read(path)).flatten();
    let cand_text = match how {
        Touch::Deleted => None,
        Touch::Added | Touch::Modified => match candidate.read(path) {
            Some(t) => Some(t),
            None => {
                let why = format!("{path} cannot be read as text, so {} in it cannot be put back", spec.what);
                return Some(made(Vec::new(), Restore::Reject { why }));
            }
        },
    };
    let keys = keys(spec, base_text.as_deref(), cand_text.as_deref());
    // A base whose file does not parse has no settings the gates could keep: its own run
    // fails on it as a candidate's would.
    let base_values = base_text.as_deref().and_then(|t| values(spec.format, t, &keys).ok()).unwrap_or_default();
    let base_at = |i: usize| base_values.get(i).cloned().flatten();
    let cand_values = match cand_text.as_deref().map(|t| values(spec.format, t, &keys)) {
        None => vec![None; keys.len()],
        Some(Ok(v)) => v,
        Some(Err(e)) => {
            let why = format!("{path} cannot be read ({e}), so {} in it cannot be put back", spec.what);
            return Some(made(Vec::new(), Restore::Reject { why }));
        }
    };
    let mut labels = Vec::new();
    let mut differing = Vec::new();
    for (i, key) in keys.iter().enumerate() {
        let before = base_at(i);
        if before != cand_values[i] {
            differing.push(i);
            leaves(spec.format, key, before.as_ref(), cand_values[i].as_ref(), &mut labels);
        }
    }
    if differing.is_empty() {
        return None;
    }
    let Some(mut content) = cand_text else { return Some(made(labels, Restore::BaseFile)) };
    for &i in &differing {
        match put_back(spec.format, &content, &keys[i], base_text.as_deref()) {
            Ok(c) => content = c,
            Err(e) => {
                let why = format!("{} in {path} cannot be put back as the base has it: {e}", labels.join(", "));
                return Some(made(labels, Restore::Reject { why }));
            }
        }
    }
    // What the gates will read must be what the base says, whatever the rewriting did.
    let after = values(spec.format, &content, &keys).unwrap_or_default();
    if (0..keys.len()).any(|i| after.get(i).cloned().flatten() != base_at(i)) {
        let why = format!("{} in {path} cannot be put back as the base has it", labels.join(", "));
        return Some(made(labels, Restore::Reject { why }));
    }
    Some(made(labels, Restore::Settings { content }))
}

/// The settings of `spec` to compare: its own, and for `package.json` every script the test
/// scripts run through the package manager (with their `pre` and `post` scripts).
fn keys(spec: &Spec, base: Option<&str>, candidate: Option<&str>) -> Vec<Vec<String>> {
    let mut keys: Vec<Vec<String>> = spec.keys.iter().map(|k| k.iter().map(|s| s.to_string()).collect()).collect();
    if spec.format != Format::Json {
        return keys;
    }
    let scripts: Vec<Value> = [base, candidate]
        .into_iter()
        .flatten()
        .filter_map(|t| serde_json::from_str::<Value>(t).ok())
        .filter_map(|v| v.get("scripts").cloned())
        .collect();
    let mut i = 0;
    while let Some(key) = keys.get(i).cloned() {
        i += 1;
        if key.len() != 2 || key[0] != "scripts" || keys.len() > 64 {
            continue;
        }
        for s in &scripts {
            let Some(text) = s.get(&key[1]).and_then(Value::as_str) else { continue };
            for name in scripts_run_by(text) {
                for n in [format!("pre{name}"), name.clone(), format!("post{name}")] {
                    let k = vec!["scripts".to_string(), n];
                    if !keys.contains(&k) {
                        keys.push(k);
                    }
                }
            }
        }
    }
    keys
}

/// The package scripts a script runs: `npm run NAME`, `npm test`, `yarn NAME`, `pnpm NAME`,
/// `run-s NAME...`.
fn scripts_run_by(text: &str) -> Vec<String> {
    let words: Vec<&str> = text
        .split(|c: char| c.is_whitespace() || matches!(c, ';' | '&' | '|' | '(' | ')'))
        .filter(|w| !w.is_empty())
        .collect();
    let mut out = Vec::new();
    let mut i = 0;
    while let Some(&w) = words.get(i) {
        i += 1;
        match w {
            "npm" | "yarn" | "pnpm" | "bun" => {
                let mut j = i;
                while words.get(j).is_some_and(|a| a.starts_with('-')) {
                    j += 1;
                }
                let next = words.get(j).copied().unwrap_or("");
                let name = match next {
                    "run" | "run-script" => words.get(j + 1).copied(),
                    "test" | "t" => Some("test"),
                    "install" | "ci" | "exec" | "x" | "dlx" | "add" => None,
                    other if w != "npm" && !other.is_empty() => Some(other),
                    _ => None,
                };
                out.extend(name.map(str::to_string));
            }
            "run-s" | "run-p" | "npm-run-all" => {
                while let Some(&a) = words.get(i) {
                    if a.contains('=') || a.contains('/') {
                        break;
                    }
                    i += 1;
                    if !a.starts_with('-') {
                        out.push(a.to_string());
                    }
                }
            }
            _ => {}
        }
    }
    out
}

/// The value of each key in `text`; `Err` when the file does not parse.
fn values(format: Format, text: &str, keys: &[Vec<String>]) -> Result<Vec<Option<Value>>, String> {
    let at = |root: &Value, key: &[String]| key.iter().try_fold(root, |v, k| v.get(k)).cloned();
    match format {
        Format::Toml => {
            let table: toml::Table = toml::from_str(text).map_err(|e| format!("not TOML: {}", e.message()))?;
            let root = serde_json::to_value(table).map_err(|e| e.to_string())?;
            Ok(keys.iter().map(|k| at(&root, k)).collect())
        }
        Format::Json => {
            let root: Value = serde_json::from_str(text).map_err(|e| format!("not JSON: {e}"))?;
            Ok(keys.iter().map(|k| at(&root, k)).collect())
        }
        Format::Ini => Ok(keys
            .iter()
            .map(|k| {
                let pairs = ini_section(text, &k[0])?;
                Some(Value::Object(pairs.into_iter().map(|(k, v)| (k, Value::String(v))).collect()))
            })
            .collect()),
        Format::GoMod => Ok(keys
            .iter()
            .map(|_| {
                let r = go_replaces(text);
                (!r.is_empty()).then(|| Value::Array(r.into_iter().map(Value::String).collect()))
            })
            .collect()),
    }
}

/// The settings that differ under `key`, named as a user reads them: the keys within a
/// table (a table one side lacks counts as empty), or the table itself.
fn leaves(format: Format, key: &[String], a: Option<&Value>, b: Option<&Value>, out: &mut Vec<String>) {
    if a == b {
        return;
    }
    let empty = serde_json::Map::new();
    let before = out.len();
    if let (Some(x), Some(y)) = (object_or_empty(a, &empty), object_or_empty(b, &empty))
        && format != Format::GoMod
    {
        let names: std::collections::BTreeSet<&String> = x.keys().chain(y.keys()).collect();
        for n in names {
            let mut k = key.to_vec();
            k.push(n.clone());
            leaves(format, &k, x.get(n), y.get(n), out);
        }
    }
    if out.len() == before {
        let table = a.is_some_and(Value::is_object) || b.is_some_and(Value::is_object);
        out.push(label(format, key, table));
    }
}

/// The keys of a table (none when absent); `None` for a value that is not a table.
fn object_or_empty<'a>(
    v: Option<&'a Value>,
    empty: &'a serde_json::Map<String, Value>,
) -> Option<&'a serde_json::Map<String, Value>> {
    match v {
        Some(Value::Object(o)) => Some(o),
        Some(_) => None,
        None => Some(empty),
    }
}

fn label(format: Format, key: &[String], table: bool) -> String {
    match (format, key.split_last()) {
        (Format::Json, _) => key.join("."),
        (Format::GoMod, _) => "replace".into(),
        (Format::Toml, _) if table => format!("[{}]", key.join(".")),
        (_, Some((last, parents))) if !parents.is_empty() => format!("[{}] {last}", parents.join(".")),
        (Format::Ini, Some((last, _))) => format!("[{last}]"),
        _ => key.join("."),
    }
}

/// `text` with the setting at `key` as `base` has it (absent when the base has none).
fn put_back(format: Format, text: &str, key: &[String], base: Option<&str>) -> Result<String, String> {
    match format {
        Format::Toml => toml_put_back(text, key, base),
        Format::Json => {
            let mut root: Value = serde_json::from_str(text).map_err(|e| e.to_string())?;
            let from_base = base
                .and_then(|b| serde_json::from_str::<Value>(b).ok())
                .and_then(|b| key.iter().try_fold(&b, |v, k| v.get(k)).cloned());
            let (last, parents) = key.split_last().ok_or("an empty key")?;
            let mut here = &mut root;
            for k in parents {
                let Value::Object(map) = here else { return Err(format!("`{k}` is not an object")) };
                if !map.contains_key(k) && from_base.is_none() {
                    return Ok(text.to_string());
                }
                here = map.entry(k.clone()).or_insert_with(|| Value::Object(Default::default()));
            }
            let Value::Object(map) = here else { return Err(format!("`{}` is not an object", parents.join("."))) };
            match from_base {
                Some(v) => map.insert(last.clone(), v),
                None => map.remove(last),
            };
            serde_json::to_string_pretty(&root).map(|s| s + "\n").map_err(|e| e.to_string())
        }
        Format::Ini => Ok(ini_put_back(text, &key[0], base)),
        Format::GoMod => {
            let mut out = go_without_replaces(text);
            for r in base.map(go_replaces).unwrap_or_default() {
                if !out.ends_with('\n') && !out.is_empty() {
                    out.push('\n');
                }
                out.push_str(&format!("replace {r}\n"));
            }
            Ok(out)
        }
    }
}

fn toml_put_back(text: &str, key: &[String], base: Option<&str>) -> Result<String, String> {
    use toml_edit::{DocumentMut, Item, Table};
    let mut doc: DocumentMut = text.parse().map_err(|e: toml_edit::TomlError| e.message().to_string())?;
    let from_base = base.and_then(|b| b.parse::<DocumentMut>().ok()).and_then(|b| {
        let mut item = key.iter().try_fold(b.as_item(), |it, k| it.get(k.as_str()))?.clone();
        unplace(&mut item);
        Some(item)
    });
    let (last, parents) = key.split_last().ok_or("an empty key")?;
    let mut here = doc.as_item_mut();
    for k in parents {
        if here.get(k.as_str()).is_none() {
            if from_base.is_none() {
                return Ok(text.to_string());
            }
            let mut t = Table::new();
            t.set_implicit(true);
            here.as_table_like_mut().ok_or(format!("`{k}` is not a table"))?.insert(k, Item::Table(t));
        }
        here = here.get_mut(k.as_str()).ok_or(format!("`{k}` is not a table"))?;
    }
    let table = here.as_table_like_mut().ok_or(format!("`{}` is not a table", parents.join(".")))?;
    match from_base {
        Some(item) => {
            table.insert(last, item);
        }
        None => {
            table.remove(last);
        }
    }
    Ok(doc.to_string())
}

/// Tables taken from another document keep their place in it; placed afresh, they follow
/// the candidate's own.
fn unplace(item: &mut toml_edit::Item) {
    match item {
        toml_edit::Item::Table(t) => {
            t.set_position(None);
            for (_, v) in t.iter_mut() {
                unplace(v);
            }
        }
        toml_edit::Item::ArrayOfTables(a) => {
            for t in a.iter_mut() {
                t.set_position(None);
                for (_, v) in t.iter_mut() {
                    unplace(v);
                }
            }
        }
        _ => {}
    }
}

fn ini_header(line: &str) -> Option<&str> {
    let t = line.trim();
    (t.starts_with('[') && t.ends_with(']') && t.len() >= 2).then(|| t[1..t.len() - 1].trim())
}

/// The lines of `[section]` in `text`, its header included.
fn ini_chunk(text: &str, section: &str) -> Option<String> {
    let mut out: Option<String> = None;
    let mut inside = false;
    for line in text.split_inclusive('\n') {
        if let Some(name) = ini_header(line) {
            inside = name == section;
        }
        if inside {
            out.get_or_insert_with(String::new).push_str(line);
        }
    }
    out.map(|mut s| {
        if !s.ends_with('\n') {
            s.push('\n');
        }
        s
    })
}

fn ini_put_back(text: &str, section: &str, base: Option<&str>) -> String {
    let mut chunk = base.and_then(|b| ini_chunk(b, section));
    let mut out = String::new();
    let mut skipping = false;
    for line in text.split_inclusive('\n') {
        if let Some(name) = ini_header(line) {
            skipping = name == section;
            if skipping && let Some(c) = chunk.take() {
                out.push_str(&c);
            }
        }
        if !skipping {
            out.push_str(line);
        }
    }
    if let Some(c) = chunk {
        if !out.is_empty() && !out.ends_with('\n') {
            out.push('\n');
        }
        out.push_str(&c);
    }
    out
}

/// A `go.mod` line without its comment.
fn go_code(line: &str) -> &str {
    line.split("//").next().unwrap_or("").trim()
}

/// The `replace` directives of a `go.mod`, one entry each, whitespace normalised.
fn go_replaces(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut block = false;
    for line in text.lines() {
        let code = go_code(line);
        if block {
            if code == ")" {
                block = false;
            } else if !code.is_empty() {
                out.push(code.split_whitespace().collect::<Vec<_>>().join(" "));
            }
        } else if let Some(rest) = code.strip_prefix("replace") {
            let rest = rest.trim();
            if rest == "(" {
                block = true;
            } else if !rest.is_empty() && code.starts_with("replace ") | code.starts_with("replace\t") {
                out.push(rest.split_whitespace().collect::<Vec<_>>().join(" "));
            }
        }
    }
    out
}

fn go_without_replaces(text: &str) -> String {
    let mut out = String::new();
    let mut block = false;
    for line in text.split_inclusive('\n') {
        let code = go_code(line);
        if block {
            block = code != ")";
            continue;
        }
        if code.starts_with("replace ") || code.starts_with("replace\t") || code == "replace(" {
            block = code.ends_with('(');
            continue;
        }
        out.push_str(line);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scripts_named_through_the_package_manager() {
        assert_eq!(scripts_run_by("npm run lint && npm run unit -- --ci"), ["lint", "unit"]);
        assert_eq!(scripts_run_by("yarn unit; pnpm run e2e; npm test"), ["unit", "e2e", "test"]);
        assert_eq!(scripts_run_by("run-s build unit"), ["build", "unit"]);
        assert!(scripts_run_by("jest --ci").is_empty());
    }

    #[test]
    fn ini_sections_are_put_back_in_place() {
        let base = "[metadata]\nname = x\n\n[tool:pytest]\ntestpaths = tests\n";
        let cand =
            "[metadata]\nname = y\n\n[tool:pytest]\ntestpaths = tests\naddopts = --deselect t.py::a\n[flake8]\nx=1\n";
        assert_eq!(
            ini_put_back(cand, "tool:pytest", Some(base)),
            "[metadata]\nname = y\n\n[tool:pytest]\ntestpaths = tests\n[flake8]\nx=1\n"
        );
        assert_eq!(ini_put_back("[pytest]\naddopts=-p x\n[tox]\n", "pytest", None), "[tox]\n");
        assert_eq!(ini_put_back("[tox]\n", "pytest", Some("[pytest]\nx=1")), "[tox]\n[pytest]\nx=1\n");
    }

    #[test]
    fn go_replacements_are_put_back() {
        let base = "module m\n\ngo 1.21\n\nreplace a => ./a\n";
        let cand = "module m\n\ngo 1.21\n\nrequire b v1.0.0\n\nreplace (\n\ta => ./a\n\tb => ./fake // mine\n)\n";
        assert_eq!(go_replaces(cand), ["a => ./a", "b => ./fake"]);
        let back = put_back(Format::GoMod, cand, &["replace".into()], Some(base)).unwrap_or_default();
        assert_eq!(back, "module m\n\ngo 1.21\n\nrequire b v1.0.0\n\nreplace a => ./a\n");
    }
}
