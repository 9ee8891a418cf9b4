//! Recognising the framework a verify command runs and planning its canary: the file(s),
//! where they go so the command collects them, and the command to run. Where each framework's
//! canary goes and what it says is in the sibling modules `python`, `js`, `rust` and `go`; the
//! path helpers they share are here.

use super::go::go;
use super::js::js;
use super::parse;
use super::python::{pytest, unittest};
use super::rust::cargo;
use super::shell::{self, Word};
use super::{CanaryFile, CanaryPlan, Framework, Invocation, Nonce, Planned, Recognition, RepoView};

pub(super) type Refusal = String;

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
pub(super) struct Widening {
    /// Words added at the end.
    pub(super) append: Vec<String>,
    /// Arguments replaced: (index among the runner's arguments, the words in its place).
    pub(super) replace: Vec<(usize, Vec<String>)>,
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

pub(super) fn plant(
    framework: Framework,
    path: String,
    content: String,
    test: String,
    class: Option<String>,
) -> CanaryPlan {
    CanaryPlan { framework, command: String::new(), files: vec![CanaryFile { path, content }], test, class }
}

pub(super) fn join(dir: &str, name: &str) -> String {
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

pub(super) fn under(dir: &str, path: &str) -> bool {
    dir.is_empty() || path.strip_prefix(dir).is_some_and(|r| r.starts_with('/'))
}

pub(super) fn dir_exists(repo: &dyn RepoView, dir: &str) -> bool {
    repo.files().iter().any(|f| under(dir, f))
}
