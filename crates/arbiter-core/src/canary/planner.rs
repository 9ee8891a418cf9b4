//! Recognising the framework a verify command runs and planning its canary: the file(s),
//! where they go so the command collects them, and the command to run.

use super::parse::{self, PytestConfig};
use super::shell::{self, Word};
use super::{CanaryFile, CanaryPlan, Framework, Invocation, Nonce, Planned, Recognition, RepoView};
use crate::protect::glob_match;

type Refusal = String;

/// Which framework `command` runs, when it is one plain test-runner invocation.
pub fn recognise(command: &str, repo: &dyn RepoView) -> Recognition {
    match recognise_words(command, repo) {
        Ok(r) => Recognition::Recognised(r.invocation),
        Err(reason) => Recognition::NotApplicable { reason },
    }
}

/// A recognised invocation and where its words are in the command's text.
struct Recognised {
    invocation: Invocation,
    /// For `cargo test`, where its `test` word ends.
    test_word_end: Option<usize>,
    /// Where each of the runner's arguments is in the text, when they are all there (not
    /// when `npm test` takes them from `package.json`'s script).
    spans: Option<Vec<(usize, usize)>>,
}

fn recognise_words(command: &str, repo: &dyn RepoView) -> Result<Recognised, Refusal> {
    let parsed = shell::split(command)?;
    let words = parsed.program_words()?;
    let values: Vec<String> = words.iter().map(|w| w.value.clone()).collect();
    let (invocation, test_word_end) = recognise_values(&values, words, repo, true)?;
    let through_script = values.first().is_some_and(|p| matches!(basename(p), "npm" | "yarn" | "pnpm"));
    let spans = (!through_script && invocation.args.len() <= words.len())
        .then(|| words[words.len() - invocation.args.len()..].iter().map(|w| (w.start, w.end)).collect());
    Ok(Recognised { invocation, test_word_end, spans })
}

/// How a command that names its tests is widened to name the canary too.
#[derive(Debug, Default)]
struct Widening {
    /// Words added at the end.
    append: Vec<String>,
    /// Arguments replaced: (index among the runner's arguments, the words in its place).
    replace: Vec<(usize, Vec<String>)>,
}

impl Widening {
    fn is_empty(&self) -> bool {
        self.append.is_empty() && self.replace.is_empty()
    }
}

/// `word` as the shell reads it back: bare when it holds only safe characters, otherwise
/// in single quotes.
fn quote(word: &str) -> String {
    let safe = |c: char| c.is_ascii_alphanumeric() || "_-./:=,+@%^".contains(c);
    if !word.is_empty() && word.chars().all(safe) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', "'\\''"))
    }
}

pub(crate) fn basename(p: &str) -> &str {
    p.rsplit('/').next().unwrap_or(p)
}

fn is_python(prog: &str) -> bool {
    let b = basename(prog);
    b.strip_prefix("python").is_some_and(|v| v.bytes().all(|c| c.is_ascii_digit() || c == b'.'))
}

fn recognise_values(
    v: &[String],
    words: &[Word],
    repo: &dyn RepoView,
    allow_npm: bool,
) -> Result<(Invocation, Option<usize>), Refusal> {
    let Some(prog) = v.first() else { return Err("the command is empty".into()) };
    let inv = |framework, args: &[String]| Invocation { framework, args: args.to_vec() };
    let name = basename(prog);
    if is_python(prog) {
        let mut i = 1;
        while let Some(a) = v.get(i) {
            match a.as_str() {
                "-m" => break,
                "-W" | "-X" => i += 2,
                "-c" => return Err("it runs Python code given with -c, not a test runner".into()),
                s if s.starts_with('-') => i += 1,
                _ => return Err("it runs a Python script, not a test runner".into()),
            }
        }
        return match v.get(i + 1).map(String::as_str) {
            Some("unittest") => Ok((inv(Framework::Unittest, &v[i + 2..]), None)),
            Some("pytest") => Ok((inv(Framework::Pytest, &v[i + 2..]), None)),
            Some(m) => Err(format!("it runs the Python module {m}, not unittest or pytest")),
            None => Err("it runs Python without a test runner module".into()),
        };
    }
    match name {
        "pytest" | "py.test" => return Ok((inv(Framework::Pytest, &v[1..]), None)),
        "jest" => return Ok((inv(Framework::Jest, &v[1..]), None)),
        "vitest" => return Ok((inv(Framework::Vitest, &v[1..]), None)),
        _ => {}
    }
    match prog.as_str() {
        "npx" => {
            let mut i = 1;
            while v
                .get(i)
                .is_some_and(|a| matches!(a.as_str(), "--yes" | "-y" | "--no-install" | "--no" | "-q" | "--quiet"))
            {
                i += 1;
            }
            match v.get(i).map(String::as_str) {
                Some("jest") => Ok((inv(Framework::Jest, &v[i + 1..]), None)),
                Some("vitest") => Ok((inv(Framework::Vitest, &v[i + 1..]), None)),
                _ => Err("npx runs something other than jest or vitest".into()),
            }
        }
        "npm" | "yarn" | "pnpm" => {
            if !allow_npm {
                return Err("the test script runs another package script".into());
            }
            let rest: &[String] = match v.get(1..3).map(|s| [s[0].as_str(), s[1].as_str()]) {
                Some(["run" | "run-script", "test"]) => &v[3..],
                _ => match v.get(1).map(String::as_str) {
                    Some("test" | "t") => &v[2..],
                    _ => return Err(format!("{prog} runs something other than the test script")),
                },
            };
            let extra: &[String] = match rest.first().map(String::as_str) {
                None => &[],
                Some("--") => &rest[1..],
                Some(_) if prog != "npm" => rest,
                Some(o) => return Err(format!("npm option `{o}` before `--` is not understood")),
            };
            let text = repo.read("package.json").ok_or("there is no package.json at the repository root")?;
            let script = parse::npm_test_script(&text)?.ok_or("package.json has no scripts.test")?;
            let parsed = shell::split(&script).map_err(|e| format!("the test script `{script}`: {e}"))?;
            let sw = parsed.program_words().map_err(|e| format!("the test script `{script}`: {e}"))?;
            let mut sv: Vec<String> = sw.iter().map(|w| w.value.clone()).collect();
            sv.extend(extra.iter().cloned());
            let (invocation, _) = recognise_values(&sv, &[], repo, false)
                .map_err(|e| format!("the test script `{script}` is not one jest or vitest invocation: {e}"))?;
            match invocation.framework {
                Framework::Jest | Framework::Vitest => Ok((invocation, None)),
                f => Err(format!("the test script runs {f}; only jest and vitest are read through npm")),
            }
        }
        "cargo" => {
            let mut i = 1;
            while v.get(i).is_some_and(|a| {
                a.starts_with('+')
                    || matches!(
                        a.as_str(),
                        "--locked" | "--offline" | "--frozen" | "-q" | "--quiet" | "-v" | "--verbose"
                    )
            }) {
                i += 1;
            }
            match v.get(i).map(String::as_str) {
                Some("test") => Ok((inv(Framework::CargoTest, &v[i + 1..]), words.get(i).map(|w| w.end))),
                Some("nextest") => Err("cargo nextest is not supported: it stops at the first failure by default (the canary's would cut the run) and its output is not read".into()),
                _ => Err("cargo runs something other than `cargo test`".into()),
            }
        }
        "go" => match v.get(1).map(String::as_str) {
            Some("test") => Ok((inv(Framework::GoTest, &v[2..]), None)),
            _ => Err("go runs something other than `go test`".into()),
        },
        _ => Err(format!(
            "`{prog}` is not a test runner arbiter knows (unittest, pytest, jest, vitest, cargo test, go test)"
        )),
    }
}

/// Plans the canary for `command` on the base `repo`, named from `nonce`.
pub fn plan(command: &str, repo: &dyn RepoView, nonce: &Nonce) -> Planned {
    if !nonce.valid() {
        return Planned::NotApplicable {
            framework: None,
            reason: "the nonce is not usable (two distinct lowercase words and two distinct numbers are needed)".into(),
        };
    }
    let Recognised { invocation: inv, test_word_end, spans } = match recognise_words(command, repo) {
        Ok(r) => r,
        Err(reason) => return Planned::NotApplicable { framework: None, reason },
    };
    let framework = inv.framework;
    let planned = match framework {
        Framework::Unittest => unittest(&inv.args, repo, nonce),
        Framework::Pytest => pytest(&inv.args, repo, nonce),
        Framework::Jest => js(Framework::Jest, &inv.args, repo, nonce),
        Framework::Vitest => js(Framework::Vitest, &inv.args, repo, nonce),
        Framework::CargoTest => cargo(&inv.args, repo, nonce),
        Framework::GoTest => go(&inv.args, repo, nonce),
    };
    let (mut p, widening) = match planned {
        Ok(r) => r,
        Err(reason) => return Planned::NotApplicable { framework: Some(framework), reason },
    };
    if let Some(path) = p.files.iter().map(|f| &f.path).find(|path| repo.files().contains(path)) {
        return Planned::NotApplicable { framework: Some(framework), reason: format!("{path} already exists") };
    }
    let mut text = command.to_string();
    if !widening.is_empty() {
        let Some(spans) = spans else {
            return Planned::NotApplicable {
                framework: Some(framework),
                reason: "it names its tests through the package manager's test script, which arbiter does not rewrite to name the canary too".into(),
            };
        };
        let mut replace: Vec<(usize, usize, &Vec<String>)> =
            widening.replace.iter().filter_map(|(i, w)| spans.get(*i).map(|(a, b)| (*a, *b, w))).collect();
        // From the end, so the offsets before each edit hold.
        replace.sort_by_key(|(a, _, _)| std::cmp::Reverse(*a));
        for (a, b, words) in replace {
            let words: Vec<String> = words.iter().map(|w| quote(w)).collect();
            text.replace_range(a..b, &words.join(" "));
        }
        for w in &widening.append {
            text.push(' ');
            text.push_str(&quote(w));
        }
    }
    let fail_fast = framework == Framework::CargoTest && !inv.args.iter().any(|a| a == "--no-fail-fast");
    if let Some(end) = test_word_end.filter(|_| fail_fast) {
        text = format!("{} --no-fail-fast{}", &text[..end], &text[end..]);
    }
    p.command = text;
    Planned::Plant(p)
}

fn plant(framework: Framework, path: String, content: String, test: String, class: Option<String>) -> CanaryPlan {
    CanaryPlan { framework, command: String::new(), files: vec![CanaryFile { path, content }], test, class }
}

fn join(dir: &str, name: &str) -> String {
    if dir.is_empty() { name.to_string() } else { format!("{dir}/{name}") }
}

pub(crate) fn parent(path: &str) -> &str {
    path.rsplit_once('/').map(|(d, _)| d).unwrap_or("")
}

/// `./tests/` → `tests`, `.` → ``.
pub(crate) fn normalize_dir(d: &str) -> String {
    let mut s = d.trim_end_matches('/');
    while let Some(r) = s.strip_prefix("./") {
        s = r;
    }
    if s == "." { String::new() } else { s.to_string() }
}

fn under(dir: &str, path: &str) -> bool {
    dir.is_empty() || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
}

fn dir_exists(repo: &dyn RepoView, dir: &str) -> bool {
    repo.files().iter().any(|f| under(dir, f))
}

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

fn unittest(args: &[String], repo: &dyn RepoView, nonce: &Nonce) -> Result<(CanaryPlan, Widening), Refusal> {
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

fn pytest(args: &[String], repo: &dyn RepoView, nonce: &Nonce) -> Result<(CanaryPlan, Widening), Refusal> {
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

/// Jest and Vitest options that change which tests run, or how the run ends or reports.
fn js_refusal(framework: Framework, opt: &str) -> Option<String> {
    let name = opt.split('=').next().unwrap_or(opt);
    Some(match name {
        "--bail" | "-b" => {
            format!("it stops at the first failure ({name}): the canary could stop the run before the base's tests")
        }
        "-t"
        | "--testNamePattern"
        | "--onlyChanged"
        | "-o"
        | "--changedSince"
        | "--lastCommit"
        | "--findRelatedTests"
        | "--selectProjects"
        | "--shard"
        | "--testPathPattern"
        | "--testPathPatterns"
        | "--testMatch"
        | "--testRegex"
        | "--roots"
        | "--changed"
        | "--related"
        | "--project"
        | "--dir"
        | "--testPathIgnorePatterns" => {
            format!("it selects tests ({name}): the canary might not be selected")
        }
        "--json" | "--outputFile" | "--listTests" | "--reporters" | "--reporter" | "--list" => {
            format!("it changes what the run prints ({name}), which is then not read")
        }
        "-c" | "--config" | "--rootDir" | "--root" | "-r" => {
            format!("it changes how tests are found ({name}), which is not read")
        }
        "--watch" | "--watchAll" => format!("it watches instead of running once ({name})"),
        "-w" if framework == Framework::Vitest => format!("it watches instead of running once ({name})"),
        _ => return None,
    })
}

const JS_VALUE_OPTIONS: &[&str] = &[
    "--maxWorkers",
    "-w",
    "--testTimeout",
    "--coverageProvider",
    "--coverageReporters",
    "--env",
    "--testEnvironment",
    "--seed",
    "--maxConcurrency",
    "--pool",
    "--environment",
    "--retry",
    "--color",
];

fn js(
    framework: Framework,
    args: &[String],
    repo: &dyn RepoView,
    nonce: &Nonce,
) -> Result<(CanaryPlan, Widening), Refusal> {
    let mut rest = args;
    if framework == Framework::Vitest {
        match rest.first().map(String::as_str) {
            Some("run") => rest = &rest[1..],
            Some(s @ ("watch" | "dev" | "related" | "bench" | "list" | "init" | "typecheck")) => {
                return Err(format!("`vitest {s}` does not run the tests once"));
            }
            _ => {}
        }
    }
    let mut named: Vec<&String> = Vec::new();
    let mut i = 0;
    while let Some(a) = rest.get(i) {
        i += 1;
        if let Some(r) = js_refusal(framework, a) {
            return Err(r);
        }
        if a == "--" {
            continue;
        }
        if a.starts_with('-') {
            if !a.contains('=') && JS_VALUE_OPTIONS.contains(&a.as_str()) {
                i += 1;
            }
        } else {
            named.push(a);
        }
    }
    let exts = ["js", "jsx", "ts", "tsx", "mjs", "cjs", "mts", "cts"];
    let is_test = |f: &str| {
        let base = basename(f);
        let Some((stem, ext)) = base.rsplit_once('.') else { return false };
        if !exts.contains(&ext) {
            return false;
        }
        let suffixed = stem.ends_with(".test") || stem.ends_with(".spec");
        match framework {
            Framework::Jest => suffixed || f.split('/').any(|d| d == "__tests__"),
            _ => suffixed,
        }
    };
    let mut tests: Vec<&String> =
        repo.files().iter().filter(|f| !f.split('/').any(|d| d == "node_modules") && is_test(f)).collect();
    tests.sort();
    // Named tests (path patterns, or filters of file paths): the canary goes beside the first
    // test file they name (or that is under a directory they name), and its path is named too.
    let beside_named = named.iter().find_map(|n| {
        let n = normalize_dir(n);
        tests.iter().find(|t| **t == &n || under(&n, t)).copied()
    });
    let first = beside_named
        .or_else(|| tests.first().copied())
        .ok_or("there is no test file the command collects to put the canary beside")?;
    let base = basename(first);
    let suffix = match base.find(".test.").or_else(|| base.find(".spec.")) {
        Some(i) => &base[i..],
        None => base.rfind('.').map(|i| &base[i..]).unwrap_or(".js"),
    };
    let title = nonce.spaced();
    let body = format!("test('{title}', () => {{\n  expect({}).toBe({});\n}});\n", nonce.numbers[0], nonce.numbers[1]);
    let content = if framework == Framework::Vitest {
        format!("import {{ test, expect }} from 'vitest';\n\n{body}")
    } else {
        body
    };
    let path = join(parent(first), &format!("{}{suffix}", nonce.kebab()));
    let mut widening = Widening::default();
    if !named.is_empty() {
        widening.append.push(path.clone());
    }
    Ok((plant(framework, path, content, title, None), widening))
}

fn cargo(args: &[String], repo: &dyn RepoView, nonce: &Nonce) -> Result<(CanaryPlan, Widening), Refusal> {
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

const GO_VALUE_FLAGS: &[&str] = &[
    "count",
    "timeout",
    "p",
    "cpu",
    "tags",
    "skip",
    "bench",
    "benchtime",
    "coverprofile",
    "covermode",
    "coverpkg",
    "o",
    "parallel",
    "ldflags",
    "gcflags",
    "mod",
    "shuffle",
    "vet",
    "asmflags",
    "modfile",
    "pkgdir",
    "toolexec",
];

fn go(args: &[String], repo: &dyn RepoView, nonce: &Nonce) -> Result<(CanaryPlan, Widening), Refusal> {
    let func = format!("Test{}", nonce.camel());
    let mut widening = Widening::default();
    let mut patterns: Vec<String> = Vec::new();
    let mut i = 0;
    while let Some(a) = args.get(i) {
        i += 1;
        if let Some(flag) = a.strip_prefix("--").or_else(|| a.strip_prefix('-')) {
            let (name, inline) = match flag.split_once('=') {
                Some((n, _)) => (n, true),
                None => (flag, false),
            };
            match name {
                "run" => {
                    // The canary's name is one more alternative of the expression (whose `/`
                    // would make it a pattern for subtests: left alone).
                    let (index, expr) = match a.split_once('=') {
                        Some((_, v)) => (i - 1, v.to_string()),
                        None => {
                            i += 1;
                            (i - 1, args.get(i - 1).cloned().ok_or("`-run` needs an expression")?)
                        }
                    };
                    if expr.contains('/') {
                        return Err(format!("it selects subtests (-run {expr}): the canary would not be selected"));
                    }
                    let widened = format!("{expr}|^{func}$");
                    let word = match a.split_once('=') {
                        Some((flag, _)) => format!("{flag}={widened}"),
                        None => widened,
                    };
                    widening.replace.push((index, vec![word]));
                }
                "failfast" => {
                    return Err("it stops at the first failure (-failfast): the canary could stop the run before the base's tests".into());
                }
                "json" | "list" => {
                    return Err(format!("it changes what the run prints (-{name}), which is then not read"));
                }
                "args" | "exec" | "c" | "C" => return Err(format!("-{name} is not supported")),
                n if GO_VALUE_FLAGS.contains(&n) && !inline => i += 1,
                _ => {}
            }
        } else {
            patterns.push(a.clone());
        }
    }
    if patterns.is_empty() {
        patterns.push(".".into());
    }
    let module =
        repo.read("go.mod").and_then(|m| parse::go_module(&m)).ok_or("there is no go.mod at the repository root")?;
    // Directories of the main module (not under a nested module, testdata, vendor, `_x` or `.x`).
    let nested: Vec<&str> =
        repo.files().iter().filter(|f| basename(f) == "go.mod" && f.contains('/')).map(|f| parent(f)).collect();
    let mut dirs: Vec<&str> = repo
        .files()
        .iter()
        .filter(|f| f.ends_with("_test.go"))
        .map(|f| parent(f))
        .filter(|d| !d.split('/').any(|c| c == "testdata" || c == "vendor" || c.starts_with('_') || c.starts_with('.')))
        .filter(|d| !nested.iter().any(|n| under(n, d) || d == n))
        .collect();
    dirs.sort();
    dirs.dedup();
    let matches = |dir: &str, pattern: &str| -> bool {
        let rel = if pattern == module || pattern.starts_with(&format!("{module}/")) {
            pattern[module.len()..].trim_start_matches('/').to_string()
        } else if pattern == "." || pattern.starts_with("./") || pattern == "..." {
            normalize_dir(pattern)
        } else {
            return false;
        };
        match rel.strip_suffix("...") {
            Some(prefix) => {
                let prefix = prefix.trim_end_matches('/');
                under(prefix, dir) || dir == prefix
            }
            None => dir == rel,
        }
    };
    for p in &patterns {
        if !(p == "." || p.starts_with("./") || p == "..." || p == &module || p.starts_with(&format!("{module}/"))) {
            return Err(format!("the package pattern `{p}` is outside the module {module}"));
        }
    }
    let dir = dirs
        .iter()
        .find(|d| patterns.iter().any(|p| matches(d, p)))
        .ok_or("no package the command tests has a _test.go file to put the canary beside")?;
    let mut tests: Vec<&String> =
        repo.files().iter().filter(|f| parent(f) == *dir && f.ends_with("_test.go")).collect();
    tests.sort();
    let package = tests
        .iter()
        .find_map(|t| repo.read(t).and_then(|s| parse::go_package(&s)))
        .ok_or(format!("the package clause of the tests in `{dir}` cannot be read"))?;
    let content = format!(
        "package {package}\n\nimport \"testing\"\n\nfunc {func}(t *testing.T) {{\n\tif got, want := {}, {}; got != want {{\n\t\tt.Fatalf(\"got %d, want %d\", got, want)\n\t}}\n}}\n",
        nonce.numbers[0], nonce.numbers[1]
    );
    Ok((plant(Framework::GoTest, join(dir, &format!("{}_test.go", nonce.snake())), content, func, None), widening))
}
