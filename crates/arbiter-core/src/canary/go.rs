//! The Go canary: which package of the `go test` run gets it, beside its `_test.go` files,
//! and how a `-run` expression is widened to select it.

use super::parse;
use super::planner::{Refusal, Widening, basename, join, normalize_dir, parent, plant, under};
use super::{CanaryPlan, Framework, Nonce, RepoView};

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

pub(super) fn go(args: &[String], repo: &dyn RepoView, nonce: &Nonce) -> Result<(CanaryPlan, Widening), Refusal> {
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
