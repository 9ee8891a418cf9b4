//! The tools of the built-in agent, confined to one candidate's worktree.
//!
//! A [`Toolbox`] is built for one worktree; [`specs`] describes its tools to the model
//! (name, description, JSON Schema of the arguments) and [`Toolbox::call`] runs one call with
//! the model's JSON arguments. A call never fails: bad or missing arguments, unknown tools and
//! every failure come back as a [`ToolOutcome`] with `is_error: true` and a message telling
//! the model what was wrong and what to do instead, so the agent loop can carry on.
//!
//! Every path argument is relative to the worktree root and confined to it (see the `paths`
//! submodule): absolute paths, `..` that leaves the root and symbolic links that resolve
//! outside it are refused, and nothing is written inside `.git`. `run_shell` is not confined
//! in the same way: it runs `sh -c` with the worktree as its working directory and the
//! toolbox's environment (an allowlist), in its own process group with a timeout; it is a
//! convenience for the model, not a sandbox.

mod files;
mod paths;
mod search;
mod shell;

use std::io;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Serialize;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

/// How long a `run_shell` command may run when the model does not say.
pub const DEFAULT_SHELL_TIMEOUT: Duration = Duration::from_secs(120);
/// The longest `timeout_seconds` a model may ask for.
pub const MAX_SHELL_TIMEOUT: Duration = Duration::from_secs(1800);
/// How many bytes of output one tool call returns at most (before its notes).
pub const DEFAULT_OUTPUT_LIMIT: usize = 30_000;

/// The description of one tool, for the model.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ToolSpec {
    pub name: &'static str,
    pub description: &'static str,
    /// A JSON Schema object describing the arguments.
    pub parameters: Value,
}

/// What one tool call produced.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct ToolOutcome {
    /// The text returned to the model.
    pub content: String,
    /// The call failed; `content` says why and what to do.
    pub is_error: bool,
    /// `finish` was called with this summary: the loop should end.
    pub finished: Option<String>,
    /// The path (relative to the worktree root) this call wrote.
    pub touched: Option<String>,
}

impl ToolOutcome {
    pub fn ok(content: impl Into<String>) -> Self {
        ToolOutcome { content: content.into(), ..Default::default() }
    }

    pub fn error(content: impl Into<String>) -> Self {
        ToolOutcome { content: content.into(), is_error: true, ..Default::default() }
    }
}

/// Why a tool call failed.
#[derive(Debug)]
struct ToolError {
    message: String,
    /// The arguments were wrong: the message is followed by an example call.
    bad_arguments: bool,
}

type ToolResult = Result<ToolOutcome, ToolError>;

fn bad_args(message: impl Into<String>) -> ToolError {
    ToolError { message: message.into(), bad_arguments: true }
}

fn failed(message: impl Into<String>) -> ToolError {
    ToolError { message: message.into(), bad_arguments: false }
}

/// The tools, operating inside one worktree.
#[derive(Clone, Debug)]
pub struct Toolbox {
    root: PathBuf,
    shell_timeout: Duration,
    output_limit: usize,
    env: Vec<(String, String)>,
    cancel: CancellationToken,
    /// The sandbox `run_shell` commands run in.
    jail: Option<arbiter_sandbox::Jail>,
}

impl Toolbox {
    /// A toolbox for the worktree at `root` (which must be an existing directory).
    /// `env` is the complete environment of `run_shell` commands (nothing is inherited);
    /// cancelling `cancel` kills a running command.
    pub fn new(root: impl AsRef<Path>, env: Vec<(String, String)>, cancel: CancellationToken) -> io::Result<Self> {
        let root = std::fs::canonicalize(root.as_ref())?;
        if !root.is_dir() {
            return Err(io::Error::new(
                io::ErrorKind::InvalidInput,
                format!("the worktree {} is not a directory", root.display()),
            ));
        }
        Ok(Toolbox {
            root,
            shell_timeout: DEFAULT_SHELL_TIMEOUT,
            output_limit: DEFAULT_OUTPUT_LIMIT,
            env,
            cancel,
            jail: None,
        })
    }

    /// Runs `run_shell` commands in `jail` (the candidate's sandbox).
    pub fn with_jail(mut self, jail: Option<arbiter_sandbox::Jail>) -> Self {
        self.jail = jail;
        self
    }

    /// The timeout of a `run_shell` call that gives none (capped at [`MAX_SHELL_TIMEOUT`]).
    pub fn with_shell_timeout(mut self, timeout: Duration) -> Self {
        self.shell_timeout = timeout.clamp(Duration::from_secs(1), MAX_SHELL_TIMEOUT);
        self
    }

    /// The most output bytes one call returns (at least 256).
    pub fn with_output_limit(mut self, bytes: usize) -> Self {
        self.output_limit = bytes.max(256);
        self
    }

    /// The tools, described for the model (the same as [`specs`]).
    pub fn specs() -> Vec<ToolSpec> {
        specs()
    }

    /// The worktree root, canonicalized.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// Runs the tool `name` with the model's `arguments` (a JSON object; a string holding
    /// one is accepted too). Never panics and never fails: see [`ToolOutcome`].
    pub async fn call(&self, name: &str, arguments: &Value) -> ToolOutcome {
        let Some(tool) = TOOLS.iter().find(|t| t.name == name) else {
            return ToolOutcome::error(format!(
                "Unknown tool `{name}`. The available tools are: {}.",
                TOOLS.iter().map(|t| t.name).collect::<Vec<_>>().join(", ")
            ));
        };
        if self.cancel.is_cancelled() {
            return ToolOutcome::error("The run was cancelled; no further tool calls are carried out.");
        }
        let args = match normalize_arguments(arguments) {
            Ok(args) => args,
            Err(e) => return render_error(tool, e),
        };
        let result = match tool.name {
            "run_shell" => shell::run_shell(self, &args).await,
            "finish" => finish(&args),
            _ => {
                let toolbox = self.clone();
                let name = tool.name;
                match tokio::task::spawn_blocking(move || toolbox.call_blocking(name, &args)).await {
                    Ok(result) => result,
                    Err(e) => Err(failed(format!("internal error while running the tool: {e}. Try another approach."))),
                }
            }
        };
        result.unwrap_or_else(|e| render_error(tool, e))
    }

    fn call_blocking(&self, name: &str, args: &Value) -> ToolResult {
        match name {
            "list_files" => files::list_files(self, args),
            "read_file" => files::read_file(self, args),
            "write_file" => files::write_file(self, args),
            "edit_file" => files::edit_file(self, args),
            "search" => search::search(self, args),
            other => Err(failed(format!("internal error: `{other}` is not a file tool"))),
        }
    }
}

fn finish(args: &Value) -> ToolResult {
    let summary = req_str(args, "summary")?.trim();
    if summary.is_empty() {
        return Err(bad_args("`summary` is empty: say what you changed and how you checked it."));
    }
    Ok(ToolOutcome { content: "Finished.".into(), finished: Some(summary.to_string()), ..Default::default() })
}

fn render_error(tool: &Tool, e: ToolError) -> ToolOutcome {
    let mut content = format!("{}: {}", tool.name, e.message);
    if e.bad_arguments {
        content.push_str(&format!("\nExample call: {} {}", tool.name, tool.example));
    }
    ToolOutcome::error(content)
}

/// The arguments as a JSON object (`null` is an empty object; a string holding an object is
/// parsed).
fn normalize_arguments(arguments: &Value) -> Result<Value, ToolError> {
    match arguments {
        Value::Object(_) => Ok(arguments.clone()),
        Value::Null => Ok(Value::Object(Default::default())),
        Value::String(s) if s.trim().is_empty() => Ok(Value::Object(Default::default())),
        Value::String(s) => match serde_json::from_str::<Value>(s) {
            Ok(v @ Value::Object(_)) => Ok(v),
            _ => Err(bad_args("the arguments must be a JSON object.")),
        },
        other => Err(bad_args(format!("the arguments must be a JSON object, not {}.", kind(other)))),
    }
}

fn kind(v: &Value) -> &'static str {
    match v {
        Value::Null => "null",
        Value::Bool(_) => "a boolean",
        Value::Number(_) => "a number",
        Value::String(_) => "a string",
        Value::Array(_) => "an array",
        Value::Object(_) => "an object",
    }
}

/// A required string argument.
fn req_str<'a>(args: &'a Value, key: &str) -> Result<&'a str, ToolError> {
    opt_str(args, key)?.ok_or_else(|| bad_args(format!("missing required argument `{key}`.")))
}

/// An optional string argument (`null` counts as absent).
fn opt_str<'a>(args: &'a Value, key: &str) -> Result<Option<&'a str>, ToolError> {
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(bad_args(format!("argument `{key}` must be a string, not {}.", kind(other)))),
    }
}

/// An optional non-negative integer argument (a number, or a string holding one).
fn opt_uint(args: &Value, key: &str) -> Result<Option<u64>, ToolError> {
    let wrong = |v: &Value| bad_args(format!("argument `{key}` must be a non-negative integer, not {v}."));
    match args.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(v @ Value::Number(n)) => match (n.as_u64(), n.as_f64()) {
            (Some(u), _) => Ok(Some(u)),
            (None, Some(f)) if f >= 0.0 && f.fract() == 0.0 && f <= u64::MAX as f64 => Ok(Some(f as u64)),
            _ => Err(wrong(v)),
        },
        Some(v @ Value::String(s)) => s.trim().parse::<u64>().map(Some).map_err(|_| wrong(v)),
        Some(v) => Err(wrong(v)),
    }
}

/// Cuts `s` to at most `max` bytes on a character boundary.
fn cut(s: &str, max: usize) -> &str {
    if s.len() <= max {
        return s;
    }
    let mut end = max;
    while !s.is_char_boundary(end) {
        end -= 1;
    }
    &s[..end]
}

/// One tool: its spec and an example call shown after an argument error.
struct Tool {
    name: &'static str,
    description: &'static str,
    example: &'static str,
    parameters: fn() -> Value,
}

const TOOLS: &[Tool] = &[
    Tool {
        name: "list_files",
        description: "List the files and directories under a directory of the worktree, recursively, in sorted order. \
            Files ignored by .gitignore and the .git directory are left out; hidden files are included. Directories \
            end with '/'. Paths are relative to the worktree root.",
        example: r#"{"path": "src", "max_entries": 200}"#,
        parameters: || {
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "Directory relative to the worktree root (default: the root)."},
                    "max_entries": {"type": "integer", "minimum": 1, "maximum": files::MAX_LIST_ENTRIES,
                        "description": format!("Most entries to return (default {}).", files::DEFAULT_LIST_ENTRIES)}
                },
                "additionalProperties": false
            })
        },
    },
    Tool {
        name: "read_file",
        description: "Read a text file of the worktree. Each output line is prefixed with its line number and a tab \
            (the prefix is not part of the file: leave it out of edit_file's `old`). Use start_line and end_line \
            (1-based, inclusive) to read part of a long file.",
        example: r#"{"path": "src/main.rs", "start_line": 1, "end_line": 120}"#,
        parameters: || {
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the worktree root."},
                    "start_line": {"type": "integer", "minimum": 1, "description": "First line to show (1-based, default 1)."},
                    "end_line": {"type": "integer", "minimum": 1, "description": "Last line to show, inclusive (default: the end of the file)."}
                },
                "required": ["path"],
                "additionalProperties": false
            })
        },
    },
    Tool {
        name: "search",
        description: "Search the files of the worktree for a regular expression (Rust regex syntax, like ripgrep; \
            use (?i) for case-insensitive). Files ignored by .gitignore and binary files are skipped. Each result \
            is `path:line:text`.",
        example: r#"{"pattern": "fn parse_\\w+", "path": "src", "max_results": 50}"#,
        parameters: || {
            json!({
                "type": "object",
                "properties": {
                    "pattern": {"type": "string", "description": "The regular expression to look for (matched line by line)."},
                    "path": {"type": "string", "description": "File or directory to search, relative to the worktree root (default: the root)."},
                    "max_results": {"type": "integer", "minimum": 1, "maximum": search::MAX_RESULTS,
                        "description": format!("Most matching lines to return (default {}).", search::DEFAULT_RESULTS)}
                },
                "required": ["pattern"],
                "additionalProperties": false
            })
        },
    },
    Tool {
        name: "write_file",
        description: "Create a file, or replace the whole content of an existing file, in the worktree. Missing \
            parent directories are created. To change part of an existing file, prefer edit_file.",
        example: r#"{"path": "src/util.rs", "content": "pub fn helper() {}\n"}"#,
        parameters: || {
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the worktree root."},
                    "content": {"type": "string", "description": "The complete new content of the file."}
                },
                "required": ["path", "content"],
                "additionalProperties": false
            })
        },
    },
    Tool {
        name: "edit_file",
        description: "Replace one exact piece of text in an existing file. `old` must appear exactly once in the file, \
            character for character (whitespace and indentation included, without read_file's line-number \
            prefixes); include enough surrounding lines to make it unique. Read the file first.",
        example: r#"{"path": "src/main.rs", "old": "let x = 1;\n", "new": "let x = 2;\n"}"#,
        parameters: || {
            json!({
                "type": "object",
                "properties": {
                    "path": {"type": "string", "description": "File path relative to the worktree root."},
                    "old": {"type": "string", "description": "The exact text to replace; it must occur exactly once."},
                    "new": {"type": "string", "description": "The text to put in its place."}
                },
                "required": ["path", "old", "new"],
                "additionalProperties": false
            })
        },
    },
    Tool {
        name: "run_shell",
        description: "Run a shell command (sh -c) in the worktree root, e.g. to build, run tests or inspect git. \
            Standard output and standard error are returned together (long output keeps its beginning and end), \
            followed by the exit code. The command and everything it starts are killed at the timeout. There is no \
            standard input: do not run interactive programs.",
        example: r#"{"command": "cargo test 2>&1 | tail -50", "timeout_seconds": 300}"#,
        parameters: || {
            json!({
                "type": "object",
                "properties": {
                    "command": {"type": "string", "description": "The command line, run by sh -c in the worktree root."},
                    "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": MAX_SHELL_TIMEOUT.as_secs(),
                        "description": format!("Seconds before the command is killed (default {}).", DEFAULT_SHELL_TIMEOUT.as_secs())}
                },
                "required": ["command"],
                "additionalProperties": false
            })
        },
    },
    Tool {
        name: "finish",
        description: "End your work on the task. Call it once, when the change is complete and checked, with a short \
            summary of what you changed and how you verified it.",
        example: r#"{"summary": "Fixed the off-by-one in parse_range; cargo test passes."}"#,
        parameters: || {
            json!({
                "type": "object",
                "properties": {
                    "summary": {"type": "string", "description": "What you changed and how you checked it."}
                },
                "required": ["summary"],
                "additionalProperties": false
            })
        },
    },
];

/// The tools, described for the model.
pub fn specs() -> Vec<ToolSpec> {
    TOOLS.iter().map(|t| ToolSpec { name: t.name, description: t.description, parameters: (t.parameters)() }).collect()
}

#[cfg(test)]
pub(crate) mod test_support {
    //! Shared helpers of the tool tests.

    use super::*;

    /// A worktree `<tmp>/wt` (so `../` from it is `<tmp>`) and its toolbox.
    pub struct Fixture {
        /// Keeps the directory alive.
        _tmp: tempfile::TempDir,
        pub toolbox: Toolbox,
    }

    impl Fixture {
        pub fn new() -> Self {
            let tmp = tempfile::tempdir().unwrap();
            std::fs::create_dir(tmp.path().join("wt")).unwrap();
            let path = std::env::var("PATH").unwrap_or_else(|_| "/usr/bin:/bin".into());
            let env = vec![("PATH".to_string(), path), ("HOME".to_string(), tmp.path().display().to_string())];
            let toolbox = Toolbox::new(tmp.path().join("wt"), env, CancellationToken::new()).unwrap();
            Fixture { _tmp: tmp, toolbox }
        }

        /// The worktree root.
        pub fn wt(&self) -> PathBuf {
            self.toolbox.root().to_path_buf()
        }

        /// The directory holding the worktree (outside it).
        pub fn outside(&self) -> PathBuf {
            self.toolbox.root().parent().unwrap().to_path_buf()
        }

        /// Writes a file relative to the worktree, creating parents.
        pub fn put(&self, rel: &str, content: &str) {
            let p = self.wt().join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, content).unwrap();
        }

        pub fn get(&self, rel: &str) -> String {
            std::fs::read_to_string(self.wt().join(rel)).unwrap()
        }

        pub async fn call(&self, name: &str, args: Value) -> ToolOutcome {
            self.toolbox.call(name, &args).await
        }

        /// Calls and asserts success.
        pub async fn ok(&self, name: &str, args: Value) -> ToolOutcome {
            let out = self.call(name, args.clone()).await;
            assert!(!out.is_error, "{name} {args} failed: {}", out.content);
            out
        }

        /// Calls and asserts failure.
        pub async fn err(&self, name: &str, args: Value) -> ToolOutcome {
            let out = self.call(name, args.clone()).await;
            assert!(out.is_error, "{name} {args} should have failed: {}", out.content);
            out
        }
    }
}

#[cfg(test)]
mod tests {
    use super::test_support::Fixture;
    use super::*;

    #[test]
    fn specs_are_complete_object_schemas() {
        let specs = specs();
        assert_eq!(specs, Toolbox::specs());
        let names: Vec<_> = specs.iter().map(|s| s.name).collect();
        assert_eq!(names, ["list_files", "read_file", "search", "write_file", "edit_file", "run_shell", "finish"]);
        for s in &specs {
            assert_eq!(s.parameters["type"], "object", "{}", s.name);
            assert!(s.parameters["properties"].is_object(), "{}", s.name);
            assert!(!s.description.is_empty());
            for r in s.parameters["required"].as_array().into_iter().flatten() {
                let r = r.as_str().unwrap();
                assert!(s.parameters["properties"].get(r).is_some(), "{}: required {r} not a property", s.name);
            }
        }
    }

    #[tokio::test]
    async fn unknown_tool_lists_the_tools() {
        let f = Fixture::new();
        let out = f.err("delete_everything", json!({})).await;
        assert!(out.content.contains("Unknown tool `delete_everything`"), "{}", out.content);
        assert!(out.content.contains("read_file") && out.content.contains("finish"));
    }

    #[tokio::test]
    async fn bad_arguments_are_errors_for_the_model() {
        let f = Fixture::new();
        let out = f.err("read_file", json!({})).await;
        assert!(out.content.contains("missing required argument `path`"), "{}", out.content);
        assert!(out.content.contains("Example call: read_file {"), "{}", out.content);

        let out = f.err("read_file", json!({"path": 42})).await;
        assert!(out.content.contains("`path` must be a string, not a number"), "{}", out.content);

        let out = f.err("read_file", json!({"path": "x", "start_line": -3})).await;
        assert!(out.content.contains("non-negative integer"), "{}", out.content);

        let out = f.err("write_file", json!([1, 2])).await;
        assert!(out.content.contains("must be a JSON object, not an array"), "{}", out.content);

        let out = f.err("write_file", json!("not json")).await;
        assert!(out.content.contains("must be a JSON object"), "{}", out.content);

        let out = f.err("write_file", json!({"path": "a.txt"})).await;
        assert!(out.content.contains("`content`"), "{}", out.content);
        assert!(!f.wt().join("a.txt").exists());
    }

    #[tokio::test]
    async fn lenient_argument_forms_are_accepted() {
        let f = Fixture::new();
        f.put("a.txt", "one\ntwo\nthree\n");
        // Arguments as a JSON string, numbers as strings or whole floats.
        let out = f.ok("read_file", json!(r#"{"path": "a.txt", "start_line": "2", "end_line": 2.0}"#)).await;
        assert_eq!(out.content, "     2\ttwo\n[lines 2-2 of 3]\n");
    }

    #[tokio::test]
    async fn finish_returns_the_summary() {
        let f = Fixture::new();
        let out = f.ok("finish", json!({"summary": "  Fixed it; tests pass.  "})).await;
        assert_eq!(out.finished.as_deref(), Some("Fixed it; tests pass."));
        assert!(out.touched.is_none());

        let out = f.err("finish", json!({})).await;
        assert!(out.finished.is_none());
        assert!(out.content.contains("`summary`"));
        let out = f.err("finish", json!({"summary": " "})).await;
        assert!(out.finished.is_none());
    }

    #[tokio::test]
    async fn a_cancelled_toolbox_refuses_calls() {
        let f = Fixture::new();
        f.toolbox.cancel.cancel();
        let out = f.err("write_file", json!({"path": "a.txt", "content": "x"})).await;
        assert!(out.content.contains("cancelled"), "{}", out.content);
        assert!(!f.wt().join("a.txt").exists());
    }

    #[test]
    fn new_refuses_a_missing_or_file_root() {
        let tmp = tempfile::tempdir().unwrap();
        assert!(Toolbox::new(tmp.path().join("nope"), vec![], CancellationToken::new()).is_err());
        std::fs::write(tmp.path().join("f"), "").unwrap();
        assert!(Toolbox::new(tmp.path().join("f"), vec![], CancellationToken::new()).is_err());
        let tb = Toolbox::new(tmp.path(), vec![], CancellationToken::new()).unwrap();
        assert_eq!(tb.root(), std::fs::canonicalize(tmp.path()).unwrap());
    }

    #[test]
    fn cut_respects_char_boundaries() {
        assert_eq!(cut("héllo", 2), "h");
        assert_eq!(cut("héllo", 3), "hé");
        assert_eq!(cut("abc", 10), "abc");
    }
}
