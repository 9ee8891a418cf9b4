//! The JavaScript and TypeScript canaries: where a Jest or Vitest canary goes so the command
//! collects it, and what it says.

use super::planner::{Refusal, Widening, basename, join, normalize_dir, parent, plant, under};
use super::{CanaryPlan, Framework, Nonce, RepoView};

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

pub(super) fn js(
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
