//! The Python canaries: where a unittest or pytest canary goes so the command collects it,
//! what it says, and how a command naming its tests is widened to name it too.

use super::parse::{self, PytestConfig};
use super::planner::{Refusal, Widening, basename, dir_exists, join, normalize_dir, parent, plant, under};
use super::{CanaryPlan, Framework, Nonce, RepoView};
use crate::protect::glob_match;

/// Whether `name` matches one of pytest's patterns (`python_files`, `norecursedirs`): they
/// are `fnmatch` patterns, in which braces are literal (`{arch}` is a directory name).
fn fnmatch(pattern: &str, name: &str) -> bool {
    glob_match(&pattern.replace('{', "\\{").replace('}', "\\}"), name)
}

/// A Python module file name matching the glob `pattern` (`test*.py` → `test_walrus_harbor.py`).
fn python_name(pattern: &str, stem: &str) -> Option<String> {
    let name = match pattern.find('*') {
        Some(0) => format!("{stem}{}", &pattern[1..]),
        Some(i) if pattern[..i].ends_with('_') => format!("{}{stem}{}", &pattern[..i], &pattern[i + 1..]),
        Some(i) => format!("{}_{stem}{}", &pattern[..i], &pattern[i + 1..]),
        None => return None,
    }
    .replace('*', "")
    .replace('?', "x");
    let module = name.strip_suffix(".py")?;
    let ident = module.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && module.bytes().next().is_some_and(|b| !b.is_ascii_digit());
    (ident && fnmatch(pattern, &name)).then_some(name)
}

pub(super) fn unittest(args: &[String], repo: &dyn RepoView, nonce: &Nonce) -> Result<(CanaryPlan, Widening), Refusal> {
    let (mut start, mut pattern, mut top): (Option<String>, Option<String>, Option<String>) = (None, None, None);
    let mut positional: Vec<String> = Vec::new();
    let mut last_positional = 0;
    let mut discover = false;
    let mut filtered = false;
    let mut i = 0;
    while let Some(a) = args.get(i) {
        let value = |i: usize| args.get(i + 1).cloned().ok_or(format!("`{a}` needs a value"));
        match a.as_str() {
            "discover" if i == 0 => discover = true,
            "-v" | "--verbose" | "-q" | "--quiet" | "-c" | "--catch" | "-b" | "--buffer" | "--locals" => {}
            "-f" | "--failfast" => {
                return Err(
                    "it stops at the first failure (-f): the canary could stop the run before the base's tests".into(),
                );
            }
            "-k" => {
                value(i)?;
                filtered = true;
                i += 1;
            }
            s if s.starts_with("-k") => filtered = true,
            "--durations" => i += 1,
            "-s" | "--start-directory" => {
                start = Some(value(i)?);
                i += 1;
            }
            "-p" | "--pattern" => {
                pattern = Some(value(i)?);
                i += 1;
            }
            "-t" | "--top-level-directory" => {
                top = Some(value(i)?);
                i += 1;
            }
            s if s.starts_with("--start-directory=") => start = s.split_once('=').map(|x| x.1.to_string()),
            s if s.starts_with("--pattern=") => pattern = s.split_once('=').map(|x| x.1.to_string()),
            s if s.starts_with("--top-level-directory=") => top = s.split_once('=').map(|x| x.1.to_string()),
            s if s.starts_with('-') => return Err(format!("unittest option `{s}` is not understood")),
            s => {
                positional.push(s.to_string());
                last_positional = i;
            }
        }
        i += 1;
    }
    let class = format!("{}Test", nonce.camel());
    let method = format!("test_{}", nonce.snake());
    let content = format!(
        "import unittest\n\n\nclass {class}(unittest.TestCase):\n    def {method}(self):\n        self.assertEqual({}, {})\n",
        nonce.numbers[0], nonce.numbers[1]
    );
    let mut widening = Widening::default();
    if !discover && !positional.is_empty() {
        // Named tests load in this process from the root (`python -m` puts it first on
        // sys.path): the canary is a module there, named beside them.
        let module = format!("test_{}", nonce.snake());
        // Right after the last name: unittest's names are one run of positional arguments.
        widening.replace.push((last_positional, vec![args[last_positional].clone(), module.clone()]));
        if filtered {
            // unittest runs what matches any of its -k patterns.
            widening.append.extend(["-k".to_string(), method.clone()]);
        }
        return Ok((plant(Framework::Unittest, format!("{module}.py"), content, method, Some(class)), widening));
    }
    let mut pos = positional.into_iter();
    let start = normalize_dir(&start.or_else(|| pos.next()).unwrap_or_else(|| ".".into()));
    let pattern = pattern.or_else(|| pos.next()).unwrap_or_else(|| "test*.py".into());
    let _top = top.or_else(|| pos.next());
    if !dir_exists(repo, &start) {
        return Err(format!("the start directory `{start}` has no tracked files"));
    }
    let name = python_name(&pattern, &nonce.snake())
        .ok_or(format!("no module name can match the discovery pattern `{pattern}`"))?;
    if filtered {
        widening.append.extend(["-k".to_string(), method.clone()]);
    }
    Ok((plant(Framework::Unittest, join(&start, &name), content, method, Some(class)), widening))
}

/// Options of pytest that take the next word as their value (when not written `--opt=value`).
const PYTEST_VALUE_OPTIONS: &[&str] = &[
    "--tb",
    "--durations",
    "--durations-min",
    "--ignore",
    "--ignore-glob",
    "--deselect",
    "--junitxml",
    "--junit-xml",
    "--log-level",
    "--log-cli-level",
    "--log-file",
    "--log-format",
    "--import-mode",
    "--capture",
    "--color",
    "--cov",
    "--cov-report",
    "--basetemp",
    "--timeout",
    "-W",
    "--pythonwarnings",
    "-r",
];

fn pytest_refusal(opt: &str) -> Option<String> {
    let name = opt.split('=').next().unwrap_or(opt);
    Some(match name {
        "-x" | "--exitfirst" | "--maxfail" | "--sw" | "--stepwise" | "--stepwise-skip" => {
            format!("it stops at the first failure ({name}): the canary could stop the run before the base's tests")
        }
        "-m" | "--lf" | "--last-failed" | "--deselect-all" => {
            format!("it selects tests ({name}): the canary would not be selected")
        }
        "--co" | "--collect-only" | "--setup-only" | "--setup-plan" => format!("it does not run the tests ({name})"),
        "-c" | "--config-file" | "--rootdir" | "-o" | "--override-ini" | "--pyargs" | "-p" => {
            format!("it changes how tests are found ({name}), which is not read")
        }
        "-n" | "--numprocesses" | "--dist" => {
            format!("it runs tests in parallel workers ({name}), whose output is not read")
        }
        _ => return None,
    })
}

/// What pytest's arguments name: paths (files, directories, node ids) and `-k` expressions.
#[derive(Default)]
struct PytestArgs {
    /// With the index of the argument naming each.
    paths: Vec<(usize, String)>,
    /// Each `-k`: the index of the argument holding its expression, the text before the
    /// expression in that argument (`-k`, `-k=` or nothing), and the expression.
    keywords: Vec<(usize, String, String)>,
}

/// Checks pytest's arguments; returns what they name.
fn pytest_args(args: &[String]) -> Result<PytestArgs, Refusal> {
    let mut named = PytestArgs::default();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        i += 1;
        if let Some(r) = pytest_refusal(a) {
            return Err(r);
        }
        if a == "-k" {
            let expr = args.get(i).ok_or("`-k` needs an expression")?;
            named.keywords.push((i, String::new(), expr.clone()));
            i += 1;
        } else if let Some(expr) = a.strip_prefix("-k") {
            let (prefix, expr) = match expr.strip_prefix('=') {
                Some(e) => ("-k=", e),
                None => ("-k", expr),
            };
            named.keywords.push((i - 1, prefix.to_string(), expr.to_string()));
        } else if a.starts_with("--") {
            if !a.contains('=') && PYTEST_VALUE_OPTIONS.contains(&a.as_str()) {
                i += 1;
            }
        } else if let Some(cluster) = a.strip_prefix('-').filter(|c| !c.is_empty()) {
            for (k, ch) in cluster.char_indices() {
                let flag = format!("-{ch}");
                if let Some(r) = pytest_refusal(&flag) {
                    return Err(r);
                }
                if ch == 'k' {
                    return Err(format!("`{a}` combines -k with other flags: write -k on its own"));
                }
                if PYTEST_VALUE_OPTIONS.contains(&flag.as_str()) {
                    if k + ch.len_utf8() == cluster.len() {
                        i += 1;
                    }
                    break;
                }
            }
        } else {
            named.paths.push((i - 1, a.clone()));
        }
    }
    Ok(named)
}

pub(super) fn pytest(args: &[String], repo: &dyn RepoView, nonce: &Nonce) -> Result<(CanaryPlan, Widening), Refusal> {
    let config: PytestConfig = parse::pytest_config(|p| repo.read(p))?;
    let configured = pytest_args(&config.addopts).map_err(|e| format!("the configured addopts: {e}"))?;
    if !configured.keywords.is_empty() {
        return Err("the configured addopts select tests (-k): the canary would not be selected".into());
    }
    let PytestArgs { paths, keywords } = pytest_args(args)?;
    let named: Vec<&String> = paths.iter().map(|(_, p)| p).collect();
    let func = format!("test_{}", nonce.snake());
    let content = format!("def {func}():\n    assert {} == {}\n", nonce.numbers[0], nonce.numbers[1]);
    let mut widening = Widening::default();
    // A -k expression selects the canary too (its name is a keyword of its test).
    for (index, prefix, expr) in keywords {
        if !expr.trim().is_empty() {
            widening.replace.push((index, vec![format!("{prefix}({expr}) or {func}")]));
        }
    }
    // Files and node ids named: the canary is one more file named beside the first (pytest
    // collects a file named on its command line whatever its name).
    if let Some(p) = named.iter().find(|p| p.contains("::") || p.ends_with(".py")) {
        let file = normalize_dir(p.split("::").next().unwrap_or(p));
        let path = join(parent(&file), &format!("{func}.py"));
        // Right after the last path: pytest's paths are one run of positional arguments.
        let (last, last_path) = paths.last().cloned().unwrap_or_default();
        widening.replace.push((last, vec![last_path, path.clone()]));
        return Ok((plant(Framework::Pytest, path, content, func, None), widening));
    }
    let roots: Vec<String> = if !named.is_empty() {
        named.iter().map(|d| normalize_dir(d)).collect()
    } else {
        config.testpaths.clone().unwrap_or_else(|| vec![".".into()]).iter().map(|d| normalize_dir(d)).collect()
    };
    let patterns = config.python_files.clone().unwrap_or_else(|| vec!["test_*.py".into(), "*_test.py".into()]);
    let norecurse = config.norecursedirs.clone().unwrap_or_else(|| {
        ["*.egg", ".*", "_darcs", "build", "CVS", "dist", "node_modules", "venv", "{arch}"].map(String::from).to_vec()
    });
    let mut files: Vec<&String> = repo
        .files()
        .iter()
        .filter(|f| roots.iter().any(|r| under(r, f)))
        .filter(|f| patterns.iter().any(|p| fnmatch(p, basename(f))))
        .filter(|f| !parent(f).split('/').any(|d| !d.is_empty() && norecurse.iter().any(|n| fnmatch(n, d))))
        .collect();
    files.sort();
    let first = files.first().ok_or("there is no test file the command collects to put the canary beside")?;
    let name = patterns
        .iter()
        .find_map(|p| python_name(p, &nonce.snake()))
        .ok_or(format!("no module name can match python_files ({})", patterns.join(" ")))?;
    Ok((plant(Framework::Pytest, join(parent(first), &name), content, func, None), widening))
}
