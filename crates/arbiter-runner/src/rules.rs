//! The rules engine's effects: reading rule files, the files to check and the project's
//! root files, and parsing Python with the user's own `python3` (its `ast` module) — the
//! judgement itself is `arbiter_core::rules`.
//!
//! Python parsing runs `python3 -I -S -c <script>` in a temporary directory with an empty
//! environment (but `PATH`): isolated mode ignores `PYTHON*` variables, the user's site
//! directory and the working directory, `-S` skips `site` (so no `.pth` file runs), and
//! `ast.parse` never executes the code it reads. The sources go in on stdin as JSON and the
//! syntax-tree facts come back on stdout; the process is killed at its time limit.
//!
//! Files are read without following symbolic links, only when regular, and only up to
//! `max_file_bytes`: a candidate's link to `/dev/zero` or to a secret outside its tree, or
//! a huge file, is reported as skipped, never read.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::time::Duration;

use arbiter_core::rules::{
    Groups, Language, ProjectView, PythonParse, RuleBook, RuleFile, RuleFileError, RuleFileRole, RuleOptions,
    Violation, project::safe_root_path,
};
use serde::{Deserialize, Serialize};
use tokio::io::AsyncWriteExt;

/// Largest rule file read.
const MAX_RULE_FILE_BYTES: u64 = 1 << 20;

/// How long the Python parser may take for one batch of files.
const PARSE_TIMEOUT: Duration = Duration::from_secs(120);

/// Where orch.py-style extra rule files live in the repository's `.arbiter/`.
pub const EXTRA_RULES_DIR: &str = ".arbiter/rules";

/// What stops a rules check.
#[derive(Debug, thiserror::Error)]
pub enum RulesError {
    #[error(transparent)]
    RuleFile(#[from] RuleFileError),
    #[error(
        "`{python}` is not installed (or not on PATH): the py-ast checks ({checks}) need Python's own parser; install python3, set `python = \"/path/to/python3\"` under [rules] in .arbiter/config.toml, or select groups without py-ast checks"
    )]
    PythonMissing { python: String, checks: String },
    #[error("the Python parser (`{python}`) failed: {why}")]
    PythonFailed { python: String, why: String },
    #[error("{path}: {why}")]
    Path { path: String, why: String },
    #[error("i/o error: {0}")]
    Io(#[from] std::io::Error),
}

impl RulesError {
    /// Whether the user's input (a rule file, a path) is at fault, rather than the machine.
    pub fn is_usage(&self) -> bool {
        matches!(self, RulesError::RuleFile(_) | RulesError::Path { .. })
    }
}

/// The rule book of the repository at `root`: the shipped sets (unless turned off), every
/// `<dir>/<lang>/core.json` of the configured directories, and `.arbiter/rules/<lang>/*.json`.
pub fn load_book(root: &Path, options: &RuleOptions) -> Result<RuleBook, RulesError> {
    let mut files = Vec::new();
    for dir in &options.dirs {
        if !safe_root_path(dir) {
            return Err(RulesError::Path {
                path: dir.clone(),
                why: "a rule directory must be inside the repository ([rules] dirs)".into(),
            });
        }
        for lang in Language::ALL {
            let path = root.join(dir).join(lang.dir_name()).join("core.json");
            if path.is_file() {
                files.push(read_rule_file(root, &path, lang, RuleFileRole::Core)?);
            }
        }
    }
    let extra = root.join(EXTRA_RULES_DIR);
    for lang in Language::ALL {
        let dir = extra.join(lang.dir_name());
        let Ok(entries) = std::fs::read_dir(&dir) else { continue };
        let mut paths: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "json") && p.is_file())
            .collect();
        paths.sort();
        for path in paths {
            files.push(read_rule_file(root, &path, lang, RuleFileRole::Extra)?);
        }
    }
    Ok(RuleBook::assemble(options.shipped, &files)?)
}

fn read_rule_file(root: &Path, path: &Path, lang: Language, role: RuleFileRole) -> Result<RuleFile, RulesError> {
    let source = path.strip_prefix(root).unwrap_or(path).display().to_string();
    let size = std::fs::metadata(path)?.len();
    if size > MAX_RULE_FILE_BYTES {
        return Err(RulesError::RuleFile(RuleFileError {
            source_name: source,
            problem: format!("{size} bytes, more than a rule file may have ({MAX_RULE_FILE_BYTES})"),
            fix: "split it, or remove what is not a check".into(),
        }));
    }
    let text =
        std::fs::read_to_string(path).map_err(|e| RulesError::Path { path: source.clone(), why: e.to_string() })?;
    Ok(RuleFile { lang, source, role, text })
}

/// A file left out of a check, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Skipped {
    pub path: String,
    pub why: String,
}

/// What a rules check found.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RulesReport {
    pub files_checked: usize,
    pub violations: Vec<Violation>,
    pub skipped: Vec<Skipped>,
}

impl RulesReport {
    pub fn passed(&self) -> bool {
        self.violations.is_empty()
    }

    /// One violation per line, `path:line message`.
    pub fn lines(&self) -> String {
        self.violations.iter().map(|v| format!("{v}\n")).collect()
    }
}

/// How a check runs.
pub struct CheckRun<'a> {
    pub root: &'a Path,
    pub book: &'a RuleBook,
    pub options: &'a RuleOptions,
    /// Overrides `options.groups` when given.
    pub groups: Option<&'a [String]>,
    /// Run the project checks of the languages of the files checked.
    pub project: bool,
}

impl CheckRun<'_> {
    fn groups(&self) -> Groups<'_> {
        self.groups.or(self.options.groups.as_deref())
    }
}

/// Checks `files` (relative to the root, `/`-separated; files no rule applies to are left
/// out) and, when asked, the project checks of their languages.
pub async fn check_files(run: &CheckRun<'_>, files: &[String]) -> Result<RulesReport, RulesError> {
    let groups = run.groups();
    let mut report = RulesReport::default();
    let mut sources = Vec::new();
    for rel in files {
        let Some(lang) = Language::of_path(rel) else { continue };
        if run.book.checks(lang, groups).next().is_none() {
            continue;
        }
        match read_source(run.root, rel, run.options.max_file_bytes) {
            Ok(text) => sources.push((rel.clone(), lang, text)),
            Err(why) => report.skipped.push(Skipped { path: rel.clone(), why }),
        }
    }
    let python: Vec<(String, String)> = sources
        .iter()
        .filter(|(_, lang, _)| *lang == Language::Python && run.book.needs_syntax_tree(Language::Python, groups))
        .map(|(p, _, t)| (p.clone(), t.clone()))
        .collect();
    let parses = if python.is_empty() { Vec::new() } else { parse_python(&run.options.python, &python).await? };
    let parse_of = |path: &str| python.iter().position(|(p, _)| p == path).and_then(|i| parses.get(i));
    let mut langs = BTreeSet::new();
    let mut imports = Vec::new();
    for (rel, lang, text) in &sources {
        langs.insert(*lang);
        let parse = parse_of(rel);
        if let Some(PythonParse::Parsed(facts)) = parse {
            imports.extend(facts.imports.iter().map(|i| (rel.clone(), i.top_module().to_string())));
        }
        report.violations.extend(run.book.check_file(rel, text, parse, groups));
        report.files_checked += 1;
    }
    if run.project {
        for lang in langs {
            if !run.book.has_project_checks(lang, groups) {
                continue;
            }
            let mut view = project_view(run.root, &run.book.project_files(lang, groups), run.options.max_file_bytes);
            view.imports = imports.clone();
            report.violations.extend(run.book.check_project(lang, &view, groups));
        }
    }
    report.violations.sort();
    report.violations.dedup();
    Ok(report)
}

/// Every file under `paths` (files or directories relative to `root`; none: the whole
/// repository) a rule could apply to, in name order: ignored files (`.gitignore`), hidden
/// directories (`.git`, `.venv`, `.agents`, `.arbiter`), `__pycache__`, `node_modules` and
/// `venv` are left out, and links are not followed.
pub fn files_under(root: &Path, paths: &[String]) -> Result<Vec<String>, RulesError> {
    let starts: Vec<String> = if paths.is_empty() { vec![".".into()] } else { paths.to_vec() };
    let mut out = BTreeSet::new();
    for start in &starts {
        let rel = start.trim_start_matches("./");
        let rel = if rel.is_empty() { "." } else { rel };
        if rel != "." && !safe_root_path(rel) {
            return Err(RulesError::Path { path: start.clone(), why: "not a path inside the repository".into() });
        }
        let target = root.join(rel);
        let meta = std::fs::symlink_metadata(&target)
            .map_err(|e| RulesError::Path { path: start.clone(), why: format!("cannot be read ({e})") })?;
        if meta.is_file() {
            out.insert(rel.to_string());
            continue;
        }
        let mut walk = ignore::WalkBuilder::new(&target);
        walk.hidden(true).parents(true).require_git(false).git_global(false).follow_links(false);
        walk.filter_entry(|e| {
            let name = e.file_name().to_string_lossy();
            !matches!(name.as_ref(), "__pycache__" | "node_modules" | "venv" | "env")
        });
        for entry in walk.build().flatten() {
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                continue;
            }
            let Ok(path) = entry.path().strip_prefix(root) else { continue };
            let path = path.to_string_lossy().replace('\\', "/");
            if Language::of_path(&path).is_some() {
                out.insert(path);
            }
        }
    }
    Ok(out.into_iter().collect())
}

/// The text of `rel` under `root`, or why it is not read.
pub fn read_source(root: &Path, rel: &str, max_bytes: u64) -> Result<String, String> {
    if !safe_root_path(rel) {
        return Err("not a path inside the tree".into());
    }
    let path = root.join(rel);
    let meta = std::fs::symlink_metadata(&path).map_err(|e| format!("cannot be read ({e})"))?;
    if meta.file_type().is_symlink() {
        return Err("a symbolic link (not followed)".into());
    }
    if !meta.is_file() {
        return Err("not a regular file".into());
    }
    if meta.len() > max_bytes {
        return Err(format!("{} bytes, more than [rules] max_file_bytes ({max_bytes})", meta.len()));
    }
    let bytes = std::fs::read(&path).map_err(|e| format!("cannot be read ({e})"))?;
    String::from_utf8(bytes).map_err(|_| "not UTF-8 text".to_string())
}

/// Which of `files` exist at the root (links count, not followed), and the text of those
/// that are regular files of at most `max_bytes`.
pub fn project_view(root: &Path, files: &[String], max_bytes: u64) -> ProjectView {
    let mut view = ProjectView::default();
    for f in files {
        if std::fs::symlink_metadata(root.join(f)).is_ok() {
            view.present.insert(f.clone());
            if let Ok(text) = read_source(root, f, max_bytes) {
                view.texts.insert(f.clone(), text);
            }
        }
    }
    view
}

#[derive(Serialize)]
struct ParseInput<'a> {
    files: Vec<ParseFile<'a>>,
}

#[derive(Serialize)]
struct ParseFile<'a> {
    path: &'a str,
    text: &'a str,
}

#[derive(Deserialize)]
struct ParseOutput {
    results: Vec<PythonParse>,
}

/// Parses each `(path, text)` with `python`'s `ast` module; one result per file, in order.
pub async fn parse_python(python: &str, files: &[(String, String)]) -> Result<Vec<PythonParse>, RulesError> {
    let failed = |why: String| RulesError::PythonFailed { python: python.to_string(), why };
    let input =
        serde_json::to_vec(&ParseInput { files: files.iter().map(|(p, t)| ParseFile { path: p, text: t }).collect() })
            .map_err(|e| failed(e.to_string()))?;
    let mut cmd = tokio::process::Command::new(python);
    cmd.args(["-I", "-S", "-c", PARSER])
        .current_dir(std::env::temp_dir())
        .env_clear()
        .env("PATH", std::env::var_os("PATH").unwrap_or_default())
        .env("PYTHONIOENCODING", "utf-8")
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .kill_on_drop(true);
    let mut child = cmd.spawn().map_err(|e| match e.kind() {
        std::io::ErrorKind::NotFound | std::io::ErrorKind::PermissionDenied => RulesError::PythonMissing {
            python: python.to_string(),
            checks: arbiter_core::rules::PyCheck::NAMES.join(", "),
        },
        _ => failed(format!("cannot start it: {e}")),
    })?;
    let mut stdin = child.stdin.take().ok_or_else(|| failed("no stdin".into()))?;
    let writer = tokio::spawn(async move {
        let _ = stdin.write_all(&input).await;
        let _ = stdin.shutdown().await;
    });
    let output = match tokio::time::timeout(PARSE_TIMEOUT, child.wait_with_output()).await {
        Ok(out) => out.map_err(|e| failed(e.to_string()))?,
        Err(_) => return Err(failed(format!("it took more than {}s", PARSE_TIMEOUT.as_secs()))),
    };
    let _ = writer.await;
    if !output.status.success() {
        let stderr = String::from_utf8_lossy(&output.stderr);
        let last = stderr.lines().last().unwrap_or("").trim().to_string();
        return Err(failed(format!("it exited with {} ({last})", output.status)));
    }
    let parsed: ParseOutput = serde_json::from_slice(&output.stdout)
        .map_err(|e| failed(format!("its output is not what arbiter's parser script prints ({e})")))?;
    if parsed.results.len() != files.len() {
        return Err(failed(format!("{} results for {} files", parsed.results.len(), files.len())));
    }
    Ok(parsed.results)
}

/// The script `python3` runs: reads `{"files": [{path, text}]}` on stdin and prints, per
/// file, the facts `arbiter_core::rules::python::PyFacts` holds (or the syntax error).
const PARSER: &str = r#"
import ast, json, sys

def ann(node):
    if isinstance(node, ast.Constant):
        if node.value is None:
            return {"kind": "none_const"}
        if isinstance(node.value, str):
            try:
                return ann(ast.parse(node.value.strip(), mode="eval").body)
            except Exception:
                return {"kind": "other"}
        return {"kind": "other"}
    if isinstance(node, ast.Name):
        return {"kind": "name", "id": node.id}
    if isinstance(node, ast.Attribute):
        return {"kind": "attribute", "attr": node.attr}
    if isinstance(node, ast.Subscript):
        sl = node.slice
        if sl.__class__.__name__ == "Index":
            sl = sl.value
        elts = sl.elts if isinstance(sl, ast.Tuple) else [sl]
        return {"kind": "subscript", "value": ann(node.value), "args": [ann(e) for e in elts]}
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return {"kind": "or", "left": ann(node.left), "right": ann(node.right)}
    return {"kind": "other"}

def text_of(source, node):
    try:
        return ast.unparse(node)
    except Exception:
        return ast.get_source_segment(source, node) or ""

def names_in_string(s, used):
    try:
        for n in ast.walk(ast.parse(s.strip(), mode="eval")):
            if isinstance(n, ast.Name):
                used.add(n.id)
    except Exception:
        pass

def facts(source, path):
    tree = ast.parse(source, filename=path)
    functions, imports, used, getlogger = [], [], set(), []
    for node in ast.walk(tree):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            a = node.args
            positional = list(getattr(a, "posonlyargs", [])) + list(a.args)
            defaults = [None] * (len(positional) - len(a.defaults)) + list(a.defaults)
            pairs = list(zip(positional, defaults)) + list(zip(a.kwonlyargs, a.kw_defaults))
            params = []
            for arg, default in pairs:
                params.append({
                    "name": arg.arg,
                    "line": arg.lineno,
                    "annotation": ann(arg.annotation) if arg.annotation is not None else None,
                    "annotation_text": text_of(source, arg.annotation) if arg.annotation is not None else "",
                    "default_is_none": isinstance(default, ast.Constant) and default.value is None,
                })
                if isinstance(arg.annotation, ast.Constant) and isinstance(arg.annotation.value, str):
                    names_in_string(arg.annotation.value, used)
            if isinstance(node.returns, ast.Constant) and isinstance(node.returns.value, str):
                names_in_string(node.returns.value, used)
            functions.append({"name": node.name, "line": node.lineno, "returns": node.returns is not None, "params": params})
        elif isinstance(node, ast.AnnAssign):
            if isinstance(node.annotation, ast.Constant) and isinstance(node.annotation.value, str):
                names_in_string(node.annotation.value, used)
        elif isinstance(node, ast.Import):
            for alias in node.names:
                imports.append({"line": node.lineno, "module": None, "name": alias.name,
                                "bound": alias.asname or alias.name.split(".")[0]})
        elif isinstance(node, ast.ImportFrom):
            module = "." * (node.level or 0) + (node.module or "")
            for alias in node.names:
                imports.append({"line": node.lineno, "module": module, "name": alias.name,
                                "bound": alias.asname or alias.name})
                if module == "logging" and alias.name == "getLogger":
                    getlogger.append(node.lineno)
        elif isinstance(node, ast.Name) and not isinstance(node.ctx, ast.Store):
            used.add(node.id)
        elif isinstance(node, ast.Attribute):
            if node.attr == "getLogger" and isinstance(node.value, ast.Name) and node.value.id == "logging":
                getlogger.append(node.lineno)
        elif isinstance(node, ast.Assign):
            if any(isinstance(t, ast.Name) and t.id == "__all__" for t in node.targets):
                if isinstance(node.value, (ast.List, ast.Tuple)):
                    for e in node.value.elts:
                        if isinstance(e, ast.Constant) and isinstance(e.value, str):
                            used.add(e.value)
    return {"status": "parsed", "functions": functions, "imports": imports,
            "used_names": sorted(used), "getlogger_lines": sorted(set(getlogger))}

def one(f):
    try:
        return facts(f["text"], f["path"])
    except SyntaxError as e:
        return {"status": "syntax_error", "line": e.lineno or 0, "message": e.msg or "invalid syntax"}
    except (RecursionError, MemoryError, ValueError, OverflowError) as e:
        return {"status": "unreadable", "why": type(e).__name__ + ": " + str(e)[:200]}

data = json.loads(sys.stdin.buffer.read().decode("utf-8"))
json.dump({"results": [one(f) for f in data["files"]]}, sys.stdout)
"#;

#[cfg(test)]
mod tests {
    use super::*;

    async fn parse(text: &str) -> PythonParse {
        parse_python("python3", &[("f.py".into(), text.into())]).await.expect("python3 parses").remove(0)
    }

    #[tokio::test]
    async fn the_syntax_tree_judges_pep_604_and_names() {
        let PythonParse::Parsed(facts) = parse(
            "import os\nimport os.path as p\n\ndef f(pos: str | None = None, q: int = None) -> None:\n    return pos\n",
        )
        .await
        else {
            panic!("parsed");
        };
        assert!(facts.used_names.contains("pos"));
        assert!(!facts.used_names.contains("os"));
        let f = &facts.functions[0];
        assert!(f.params[0].annotation.as_ref().unwrap().allows_none(), "{f:?}");
        assert!(!f.params[1].annotation.as_ref().unwrap().allows_none(), "{f:?}");
        assert_eq!(f.params[1].annotation_text, "int");
        assert_eq!(facts.imports[1].bound, "p");
    }

    #[tokio::test]
    async fn syntax_errors_and_hostile_nesting_are_results_not_failures() {
        assert!(matches!(parse("def (:\n").await, PythonParse::SyntaxError { line: 1, .. }));
        let deep = format!("x = {}1{}\n", "(".repeat(5000), ")".repeat(5000));
        let parsed = parse(&deep).await;
        assert!(!matches!(parsed, PythonParse::Parsed(_)), "{parsed:?}");
    }

    #[tokio::test]
    async fn a_missing_interpreter_says_what_to_do() {
        let err = parse_python("/nonexistent/python3", &[("f.py".into(), "x = 1\n".into())]).await.unwrap_err();
        assert!(matches!(err, RulesError::PythonMissing { .. }), "{err}");
        assert!(err.to_string().contains("[rules]"), "{err}");
    }

    #[test]
    fn links_fifos_and_large_files_are_not_read() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("big.py"), "x = 1\n".repeat(100)).unwrap();
        std::os::unix::fs::symlink("/etc/passwd", dir.path().join("link.py")).unwrap();
        assert!(read_source(dir.path(), "big.py", 10).unwrap_err().contains("max_file_bytes"));
        assert!(read_source(dir.path(), "link.py", 1 << 20).unwrap_err().contains("symbolic link"));
        assert!(read_source(dir.path(), "../x.py", 1 << 20).is_err());
        assert_eq!(read_source(dir.path(), "big.py", 1 << 20).unwrap().lines().count(), 100);
    }
}
