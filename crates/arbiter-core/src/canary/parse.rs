//! Reading the small configuration files that decide where tests are collected: an INI
//! section (`pytest.ini`, `tox.ini`, `setup.cfg`), `pyproject.toml`, `package.json`,
//! `Cargo.toml`, `go.mod`. Only what the planner needs, read simply.

/// The `key = value` pairs of `[section]` in an INI file (continuation lines joined with a
/// space), or `None` when the section is absent.
pub(crate) fn ini_section(text: &str, section: &str) -> Option<Vec<(String, String)>> {
    let mut inside = false;
    let mut found = false;
    let mut out: Vec<(String, String)> = Vec::new();
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') && trimmed.ends_with(']') {
            inside = trimmed[1..trimmed.len() - 1].trim() == section;
            found |= inside;
            continue;
        }
        if !inside || trimmed.is_empty() || trimmed.starts_with('#') || trimmed.starts_with(';') {
            continue;
        }
        if line.starts_with([' ', '\t']) {
            if let Some(last) = out.last_mut() {
                last.1 = format!("{} {trimmed}", last.1).trim().to_string();
            }
            continue;
        }
        if let Some((k, v)) = trimmed.split_once(['=', ':']) {
            out.push((k.trim().to_string(), v.trim().to_string()));
        }
    }
    found.then_some(out)
}

/// The pytest settings of a project: `python_files`, `testpaths`, `addopts`,
/// `norecursedirs`, `pythonpath`, each as a list of words, from the first configuration file pytest itself
/// would use. `Err` when a configuration file cannot be read simply.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct PytestConfig {
    pub(crate) python_files: Option<Vec<String>>,
    pub(crate) testpaths: Option<Vec<String>>,
    pub(crate) addopts: Vec<String>,
    pub(crate) norecursedirs: Option<Vec<String>>,
    /// Directories pytest puts on `sys.path` (`pythonpath`, pytest 7).
    pub(crate) pythonpath: Vec<String>,
}

fn words(v: &str) -> Vec<String> {
    v.split_whitespace().map(str::to_string).collect()
}

fn from_pairs(pairs: Vec<(String, String)>) -> PytestConfig {
    let mut c = PytestConfig::default();
    for (k, v) in pairs {
        match k.as_str() {
            "python_files" => c.python_files = Some(words(&v)),
            "testpaths" => c.testpaths = Some(words(&v)),
            "addopts" => c.addopts = words(&v),
            "norecursedirs" => c.norecursedirs = Some(words(&v)),
            "pythonpath" => c.pythonpath = words(&v),
            _ => {}
        }
    }
    c
}

fn toml_list(v: &toml::Value) -> Vec<String> {
    match v {
        toml::Value::String(s) => words(s),
        toml::Value::Array(a) => a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect(),
        _ => Vec::new(),
    }
}

fn from_toml_table(t: &toml::Table) -> PytestConfig {
    PytestConfig {
        python_files: t.get("python_files").map(toml_list),
        testpaths: t.get("testpaths").map(toml_list),
        addopts: t.get("addopts").map(toml_list).unwrap_or_default(),
        norecursedirs: t.get("norecursedirs").map(toml_list),
        pythonpath: t.get("pythonpath").map(toml_list).unwrap_or_default(),
    }
}

/// pytest's own order: `pytest.ini` (always, section or not), `.pytest.ini`, `pytest.toml`,
/// `pyproject.toml` with `[tool.pytest.ini_options]` or `[tool.pytest]`, `tox.ini` with
/// `[pytest]`, `setup.cfg` with `[tool:pytest]`.
pub(crate) fn pytest_config(read: impl Fn(&str) -> Option<String>) -> Result<PytestConfig, String> {
    for name in ["pytest.ini", ".pytest.ini"] {
        if let Some(text) = read(name) {
            return Ok(from_pairs(ini_section(&text, "pytest").unwrap_or_default()));
        }
    }
    if let Some(text) = read("pytest.toml") {
        let t: toml::Table = toml::from_str(&text).map_err(|e| format!("pytest.toml cannot be read: {e}"))?;
        return Ok(t.get("pytest").and_then(|v| v.as_table()).map(from_toml_table).unwrap_or_default());
    }
    if let Some(text) = read("pyproject.toml") {
        let t: toml::Table = toml::from_str(&text).map_err(|e| format!("pyproject.toml cannot be read: {e}"))?;
        if let Some(pytest) = t.get("tool").and_then(|t| t.get("pytest")).and_then(|v| v.as_table()) {
            let table = pytest.get("ini_options").and_then(|v| v.as_table()).unwrap_or(pytest);
            return Ok(from_toml_table(table));
        }
    }
    if let Some(pairs) = read("tox.ini").and_then(|t| ini_section(&t, "pytest")) {
        return Ok(from_pairs(pairs));
    }
    if let Some(pairs) = read("setup.cfg").and_then(|t| ini_section(&t, "tool:pytest")) {
        return Ok(from_pairs(pairs));
    }
    Ok(PytestConfig::default())
}

/// `scripts.test` of a `package.json`.
pub(crate) fn npm_test_script(package_json: &str) -> Result<Option<String>, String> {
    let v: serde_json::Value =
        serde_json::from_str(package_json).map_err(|e| format!("package.json is not valid JSON: {e}"))?;
    Ok(v.get("scripts").and_then(|s| s.get("test")).and_then(|t| t.as_str()).map(str::to_string))
}

/// What a `Cargo.toml` says about packages: its package name (when it has `[package]`),
/// whether its integration tests are discovered, and its workspace members.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct CargoManifest {
    pub(crate) package: Option<String>,
    pub(crate) autotests: bool,
    pub(crate) members: Vec<String>,
    pub(crate) default_members: Option<Vec<String>>,
    pub(crate) exclude: Vec<String>,
}

pub(crate) fn cargo_manifest(text: &str) -> Result<CargoManifest, String> {
    let t: toml::Table = toml::from_str(text).map_err(|e| format!("Cargo.toml cannot be read: {e}"))?;
    let list = |v: Option<&toml::Value>| -> Vec<String> {
        v.and_then(|v| v.as_array())
            .map(|a| a.iter().filter_map(|x| x.as_str().map(str::to_string)).collect())
            .unwrap_or_default()
    };
    let package = t.get("package").and_then(|p| p.as_table());
    let workspace = t.get("workspace").and_then(|w| w.as_table());
    Ok(CargoManifest {
        package: package.and_then(|p| p.get("name")).and_then(|n| n.as_str()).map(str::to_string),
        autotests: package.and_then(|p| p.get("autotests")).and_then(|a| a.as_bool()).unwrap_or(true),
        members: list(workspace.and_then(|w| w.get("members"))),
        default_members: workspace.and_then(|w| w.get("default-members")).map(|v| list(Some(v))),
        exclude: list(workspace.and_then(|w| w.get("exclude"))),
    })
}

/// The module path of a `go.mod`.
pub(crate) fn go_module(go_mod: &str) -> Option<String> {
    go_mod.lines().find_map(|l| {
        let l = l.trim();
        l.strip_prefix("module").filter(|r| r.starts_with([' ', '\t'])).map(|r| r.trim().trim_matches('"').to_string())
    })
}

/// The package clause of a Go file (`package calc` → `calc`).
pub(crate) fn go_package(source: &str) -> Option<String> {
    let mut in_block_comment = false;
    for line in source.lines() {
        let mut l = line.trim();
        if in_block_comment {
            match l.find("*/") {
                Some(end) => {
                    in_block_comment = false;
                    l = l[end + 2..].trim();
                }
                None => continue,
            }
        }
        if l.starts_with("/*") && !l.contains("*/") {
            in_block_comment = true;
            continue;
        }
        if let Some(rest) = l.strip_prefix("package ") {
            let name: String = rest.trim().chars().take_while(|c| c.is_alphanumeric() || *c == '_').collect();
            return (!name.is_empty()).then_some(name);
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_ini_sections() {
        let text = "[metadata]\nname = x\n[tool:pytest]\npython_files = check_*.py\n    *_check.py\ntestpaths=tests\n";
        let s = ini_section(text, "tool:pytest").unwrap_or_default();
        assert_eq!(
            s,
            vec![("python_files".into(), "check_*.py *_check.py".into()), ("testpaths".into(), "tests".into())]
        );
        assert_eq!(ini_section(text, "pytest"), None);
    }

    #[test]
    fn pytest_configuration_follows_pytest_precedence() {
        let files = |name: &str| match name {
            "pyproject.toml" => Some("[tool.pytest.ini_options]\ntestpaths = [\"t\"]\naddopts = \"-x\"\n".to_string()),
            "setup.cfg" => Some("[tool:pytest]\ntestpaths = other\n".to_string()),
            _ => None,
        };
        let c = pytest_config(files).unwrap_or_default();
        assert_eq!(c.testpaths, Some(vec!["t".to_string()]));
        assert_eq!(c.addopts, ["-x"]);
    }

    #[test]
    fn reads_go_and_cargo_files() {
        assert_eq!(go_module("// x\nmodule example.com/calc\n\ngo 1.19\n"), Some("example.com/calc".into()));
        assert_eq!(go_package("// Copyright\n/* block\n*/\npackage calc_test // x\n"), Some("calc_test".into()));
        let m =
            cargo_manifest("[package]\nname = \"calc\"\nautotests = false\n[workspace]\nmembers = [\"crates/*\"]\n")
                .unwrap_or_default();
        assert_eq!((m.package.as_deref(), m.autotests, m.members.len()), (Some("calc"), false, 1));
        assert_eq!(npm_test_script("{\"scripts\":{\"test\":\"jest --ci\"}}"), Ok(Some("jest --ci".into())));
    }
}
