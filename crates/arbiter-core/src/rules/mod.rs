//! The rules engine's pure half: declarative code-standard checks, read from orch.py's
//! JSON rule files as they are, and judged on text, on a Python syntax tree's facts and on
//! a project's root files.
//!
//! A rule file is `{"lang": "...", "checks": [...]}`; each check has an `id`, a `group`
//! (a selector: `standards`, `structure`, ...), a `kind`, a `message` and optional filters
//! (`only`, `except`, `skip`). Kinds:
//! - `line`: a regex searched on each line, lines holding an `exclude` string exempt;
//! - `text-required`: the text must contain every `contains` string;
//! - `balanced`: bracket pairs counted, and tokens that must occur an even number of times,
//!   outside strings and comments (see [`lexer`]);
//! - `py-ast`: one of four named checks judged on the file's Python syntax tree (see
//!   [`python`]);
//! - `project`: files the project must have or must not have (see [`project`]).
//!
//! What the engine reads (files, the syntax tree, which files exist) is handed in by the
//! runner's adapter (`arbiter_runner::rules`); everything here is a function of it.
//! Violations print as `path:line message` (`path: message` for a whole file).

pub mod lexer;
pub mod project;
pub mod python;

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Serialize};

pub use project::{ProjectCheck, ProjectView};
pub use python::{PyCheck, PythonParse};

/// Longest regex a `line` check may have.
pub const MAX_PATTERN_BYTES: usize = 4096;

/// Compiled size a `line` check's regex may reach (a pattern that explodes when compiled,
/// like `(a{500}){500}`, is refused instead).
const REGEX_SIZE_LIMIT: usize = 1 << 20;

/// The rule sets arbiter ships: orch.py's Python rules (`core.json`) and its project
/// "constitution" (`constitution.json`).
pub const SHIPPED: &[(&str, &str, &str)] = &[
    ("python", "core.json", include_str!("defaults/python/core.json")),
    ("python", "constitution.json", include_str!("defaults/python/constitution.json")),
];

/// A language rules apply to, chosen by a file's extension (orch.py's map, plus the
/// TypeScript/JavaScript module extensions).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Language {
    Python,
    /// TypeScript and JavaScript (orch.py's `ts`).
    Ts,
    Vue,
    Jinja,
}

impl Language {
    pub const ALL: [Language; 4] = [Language::Python, Language::Ts, Language::Vue, Language::Jinja];

    /// The directory its rule files live in (`rules/<dir>/`).
    pub fn dir_name(self) -> &'static str {
        match self {
            Language::Python => "python",
            Language::Ts => "ts",
            Language::Vue => "vue",
            Language::Jinja => "jinja",
        }
    }

    pub fn from_dir_name(name: &str) -> Option<Language> {
        Language::ALL.into_iter().find(|l| l.dir_name() == name)
    }

    /// The language of a path, by its extension; `None` for files no rules apply to.
    pub fn of_path(path: &str) -> Option<Language> {
        let name = base_name(path);
        let ext = name.rsplit_once('.').map(|(_, e)| e)?;
        match ext {
            "py" => Some(Language::Python),
            "ts" | "tsx" | "js" | "jsx" | "mjs" | "cjs" => Some(Language::Ts),
            "vue" => Some(Language::Vue),
            "jinja" | "jinja2" | "j2" => Some(Language::Jinja),
            _ => None,
        }
    }
}

/// The last component of a `/`-separated path: what `only`, `except` and `skip` match.
pub fn base_name(path: &str) -> &str {
    path.rsplit('/').next().unwrap_or(path)
}

/// One rule broken in one place. `line` 0 means the whole file (or, for a project check,
/// the project).
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Violation {
    pub path: String,
    pub line: u32,
    pub rule: String,
    pub message: String,
}

impl fmt::Display for Violation {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if self.line == 0 {
            write!(f, "{}: {}", self.path, self.message)
        } else {
            write!(f, "{}:{} {}", self.path, self.line, self.message)
        }
    }
}

/// Which groups a check run selects (`None`: every group).
pub type Groups<'a> = Option<&'a [String]>;

fn selected(groups: Groups<'_>, group: &str) -> bool {
    groups.is_none_or(|g| g.iter().any(|s| s == group))
}

/// A rule file that cannot be used, with what to fix.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{source_name}: {problem}; {fix}")]
pub struct RuleFileError {
    /// The file (its path, or `shipped:<lang>/<file>`).
    pub source_name: String,
    pub problem: String,
    pub fix: String,
}

/// Where a check applies: orch.py's three filters, on the file's name.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Filters {
    /// Apply only to these file names.
    pub only: Vec<String>,
    /// Never apply to these file names.
    pub except: Vec<String>,
    /// Skip a file whose name is listed here and whose text contains every string of
    /// `skip_contains`.
    pub skip_names: Vec<String>,
    pub skip_contains: Vec<String>,
}

impl Filters {
    /// Whether the check applies to the file `name` holding `text`.
    pub fn applies(&self, name: &str, text: &str) -> bool {
        if !self.only.is_empty() && !self.only.iter().any(|o| o == name) {
            return false;
        }
        if self.except.iter().any(|e| e == name) {
            return false;
        }
        let skipped = self.skip_names.iter().any(|n| n == name) && self.skip_contains.iter().all(|c| text.contains(c));
        !skipped
    }
}

/// One token pair of a `balanced` check.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Pair {
    /// As many `open` as `close`; the message may say `{open}` and `{close}` (the counts).
    Counted { open: String, close: String, message: String },
    /// `token` must occur an even number of times (an odd count is an unterminated string).
    Odd { token: String, message: String },
}

/// What a check looks at.
#[derive(Clone, Debug)]
pub enum CheckKind {
    Line { pattern: regex::Regex, exclude: Vec<String> },
    TextRequired { contains: Vec<String> },
    Balanced { pairs: Vec<Pair> },
    PyAst(PyCheck),
    Project(ProjectCheck),
}

/// One check of a rule set.
#[derive(Clone, Debug)]
pub struct Check {
    pub id: String,
    pub group: String,
    pub message: String,
    pub filters: Filters,
    pub kind: CheckKind,
}

/// The checks of one language from one file.
#[derive(Clone, Debug)]
pub struct RuleSet {
    pub lang: Language,
    /// Where it was read from (a path, or `shipped:python/core.json`).
    pub source: String,
    pub checks: Vec<Check>,
}

/// A check as a rule file writes it (every field orch.py reads; others are ignored).
#[derive(Deserialize)]
struct RawFile {
    #[serde(default)]
    lang: Option<String>,
    checks: Vec<serde_json::Value>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawCheck {
    id: Option<String>,
    group: Option<String>,
    kind: Option<String>,
    message: Option<String>,
    only: Vec<String>,
    #[serde(rename = "except")]
    except_names: Vec<String>,
    skip: Option<RawSkip>,
    pattern: Option<String>,
    exclude: Vec<String>,
    contains: Vec<String>,
    pairs: Vec<RawPair>,
    check: Option<String>,
    require: Vec<String>,
    forbid: Vec<String>,
    forbid_text: BTreeMap<String, Vec<String>>,
    one_import_of: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawSkip {
    name: Vec<String>,
    contains: Vec<String>,
}

#[derive(Deserialize, Default)]
#[serde(default)]
struct RawPair {
    open: Option<String>,
    close: Option<String>,
    token: Option<String>,
    mode: Option<String>,
    message: Option<String>,
}

/// Parses one rule file of language `lang` (its directory decides, as in orch.py's layout).
/// Checks of a kind (or a `py-ast` check of a name) this build does not know are left out
/// with a warning, as orch.py ignores them; a check that cannot work is an error.
pub fn parse_rule_file(lang: Language, source: &str, text: &str) -> Result<(RuleSet, Vec<String>), RuleFileError> {
    let err = |problem: String, fix: &str| RuleFileError { source_name: source.to_string(), problem, fix: fix.into() };
    let raw: RawFile = serde_json::from_str(text).map_err(|e| {
        err(format!("not a rule file ({e})"), "write {\"lang\": \"python\", \"checks\": [...]} (see docs/slices.md)")
    })?;
    let mut warnings = Vec::new();
    if let Some(declared) = raw.lang.as_deref().filter(|d| *d != lang.dir_name()) {
        warnings.push(format!(
            "{source}: says \"lang\": \"{declared}\" but sits under {}/; its checks apply to {} files",
            lang.dir_name(),
            lang.dir_name()
        ));
    }
    let mut checks = Vec::with_capacity(raw.checks.len());
    for (i, value) in raw.checks.into_iter().enumerate() {
        let c: RawCheck = serde_json::from_value(value).map_err(|e| {
            err(format!("check #{} is malformed ({e})", i + 1), "give each field the type docs/slices.md lists")
        })?;
        let id = c.id.clone().filter(|s| !s.trim().is_empty()).unwrap_or_else(|| format!("check-{}", i + 1));
        let named = |problem: &str| format!("check '{id}' {problem}");
        let Some(kind_name) = c.kind.as_deref() else {
            return Err(err(
                named("has no kind"),
                "add \"kind\": one of line, text-required, balanced, py-ast, project",
            ));
        };
        let kind = match kind_name {
            "line" => {
                let Some(pattern) = c.pattern.as_deref() else {
                    return Err(err(named("(kind line) has no pattern"), "add \"pattern\": a regular expression"));
                };
                CheckKind::Line {
                    pattern: compile_pattern(pattern).map_err(|why| {
                        err(
                            named(&format!("has a pattern arbiter cannot use ({why})")),
                            "write a regular expression without look-around or back-references, under 4096 bytes",
                        )
                    })?,
                    exclude: c.exclude.clone(),
                }
            }
            "text-required" => {
                if c.contains.is_empty() {
                    return Err(err(named("(kind text-required) has no contains"), "add \"contains\": [\"...\"]"));
                }
                CheckKind::TextRequired { contains: c.contains.clone() }
            }
            "balanced" => {
                let mut pairs = Vec::new();
                for p in &c.pairs {
                    let message = p.message.clone().unwrap_or_else(|| c.message.clone().unwrap_or_default());
                    match (&p.open, &p.close, &p.token) {
                        (Some(open), Some(close), _) if !open.is_empty() && !close.is_empty() => {
                            pairs.push(Pair::Counted { open: open.clone(), close: close.clone(), message })
                        }
                        (_, _, Some(token)) if !token.is_empty() && p.mode.as_deref().is_none_or(|m| m == "odd") => {
                            pairs.push(Pair::Odd { token: token.clone(), message })
                        }
                        _ => {
                            return Err(err(
                                named("has a pair that is neither {open, close} nor {token, mode: \"odd\"}"),
                                "write each pair as {\"open\": \"(\", \"close\": \")\"} or {\"token\": \"'''\", \"mode\": \"odd\"}",
                            ));
                        }
                    }
                }
                if pairs.is_empty() {
                    return Err(err(named("(kind balanced) has no pairs"), "add \"pairs\": [...]"));
                }
                CheckKind::Balanced { pairs }
            }
            "py-ast" => {
                let name = c.check.as_deref().unwrap_or_default();
                match PyCheck::from_name(name) {
                    Some(check) if lang == Language::Python => CheckKind::PyAst(check),
                    Some(_) => {
                        warnings.push(format!("{source}: check '{id}' is a py-ast check outside python/: left out"));
                        continue;
                    }
                    None => {
                        warnings.push(format!(
                            "{source}: check '{id}' names py-ast check '{name}', which arbiter does not know ({}): left out",
                            PyCheck::NAMES.join(", ")
                        ));
                        continue;
                    }
                }
            }
            "project" => {
                let check = ProjectCheck {
                    require: c.require.clone(),
                    forbid: c.forbid.clone(),
                    forbid_text: c.forbid_text.clone(),
                    one_import_of: c.one_import_of.clone(),
                };
                if let Some(bad) = check.file_names().find(|f| !project::safe_root_path(f)) {
                    return Err(err(
                        named(&format!("names '{bad}', which is not a path inside the project")),
                        "name files relative to the repository root, without '..' or a leading '/'",
                    ));
                }
                if check.is_empty() {
                    return Err(err(
                        named("(kind project) checks nothing"),
                        "give it require, forbid, forbid_text or one_import_of",
                    ));
                }
                CheckKind::Project(check)
            }
            other => {
                warnings
                    .push(format!("{source}: check '{id}' has kind '{other}', which arbiter does not know: left out"));
                continue;
            }
        };
        let skip = c.skip.unwrap_or_default();
        checks.push(Check {
            message: c.message.unwrap_or_else(|| format!("breaks rule {id}")),
            group: c.group.filter(|g| !g.trim().is_empty()).unwrap_or_else(|| "standards".into()),
            id,
            filters: Filters {
                only: c.only,
                except: c.except_names,
                skip_names: skip.name,
                skip_contains: skip.contains,
            },
            kind,
        });
    }
    Ok((RuleSet { lang, source: source.to_string(), checks }, warnings))
}

/// A `line` pattern as Rust's regex engine takes it: Python's `\UXXXXXXXX` and `\uXXXX`
/// escapes (orch.py's emoji range) become `\x{...}`, `\Z` becomes `\z`. The engine runs in
/// linear time, so no pattern can backtrack catastrophically; its compiled size is capped.
pub fn compile_pattern(pattern: &str) -> Result<regex::Regex, String> {
    if pattern.len() > MAX_PATTERN_BYTES {
        return Err(format!("{} bytes long", pattern.len()));
    }
    let translated = translate_python_escapes(pattern);
    regex::RegexBuilder::new(&translated)
        .size_limit(REGEX_SIZE_LIMIT)
        .dfa_size_limit(REGEX_SIZE_LIMIT)
        .build()
        .map_err(|e| e.to_string().lines().last().unwrap_or("invalid").trim().to_string())
}

fn translate_python_escapes(pattern: &str) -> String {
    let chars: Vec<char> = pattern.chars().collect();
    let mut out = String::with_capacity(pattern.len());
    let mut i = 0;
    while i < chars.len() {
        if chars[i] == '\\' && i + 1 < chars.len() {
            let hex_len = match chars[i + 1] {
                'U' => 8,
                'u' => 4,
                _ => 0,
            };
            let hex: String = chars.iter().skip(i + 2).take(hex_len).collect();
            if hex_len > 0 && hex.len() == hex_len && hex.chars().all(|c| c.is_ascii_hexdigit()) {
                out.push_str(&format!("\\x{{{hex}}}"));
                i += 2 + hex_len;
                continue;
            }
            if chars[i + 1] == 'Z' {
                out.push_str("\\z");
            } else {
                out.push(chars[i]);
                out.push(chars[i + 1]);
            }
            i += 2;
            continue;
        }
        out.push(chars[i]);
        i += 1;
    }
    out
}

/// Where a rule file comes from, which decides how it combines with the others.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RuleFileRole {
    /// orch.py's `rules/<lang>/core.json`: replaces the shipped core set of its language.
    Core,
    /// `.arbiter/rules/<lang>/*.json`: added to the language's checks.
    Extra,
}

/// A rule file as the adapter read it.
#[derive(Clone, Debug)]
pub struct RuleFile {
    pub lang: Language,
    pub source: String,
    pub role: RuleFileRole,
    pub text: String,
}

/// Every rule set in force, by language.
#[derive(Clone, Debug, Default)]
pub struct RuleBook {
    pub sets: Vec<RuleSet>,
    /// What was left out while reading (unknown kinds, misplaced checks).
    pub warnings: Vec<String>,
}

impl RuleBook {
    /// Combines the shipped sets (when `shipped` is true) with the files read: a `core.json`
    /// of a language replaces the shipped `core.json` of that language (the last one wins);
    /// extra files add their checks, in the order given.
    pub fn assemble(shipped: bool, files: &[RuleFile]) -> Result<RuleBook, RuleFileError> {
        let mut book = RuleBook::default();
        let user_core: BTreeMap<Language, &RuleFile> =
            files.iter().filter(|f| f.role == RuleFileRole::Core).map(|f| (f.lang, f)).collect();
        if shipped {
            for (dir, name, text) in SHIPPED {
                let Some(lang) = Language::from_dir_name(dir) else { continue };
                if *name == "core.json" && user_core.contains_key(&lang) {
                    continue;
                }
                book.add(lang, &format!("shipped:{dir}/{name}"), text)?;
            }
        }
        for file in user_core.values() {
            book.add(file.lang, &file.source, &file.text)?;
        }
        for file in files.iter().filter(|f| f.role == RuleFileRole::Extra) {
            book.add(file.lang, &file.source, &file.text)?;
        }
        Ok(book)
    }

    fn add(&mut self, lang: Language, source: &str, text: &str) -> Result<(), RuleFileError> {
        let (set, warnings) = parse_rule_file(lang, source, text)?;
        self.sets.push(set);
        self.warnings.extend(warnings);
        Ok(())
    }

    /// Every check of `lang` the groups select.
    pub fn checks<'a>(&'a self, lang: Language, groups: Groups<'a>) -> impl Iterator<Item = &'a Check> + 'a {
        self.sets
            .iter()
            .filter(move |s| s.lang == lang)
            .flat_map(|s| &s.checks)
            .filter(move |c| selected(groups, &c.group))
    }

    /// Whether checking files of `lang` needs their Python syntax tree.
    pub fn needs_syntax_tree(&self, lang: Language, groups: Groups<'_>) -> bool {
        self.checks(lang, groups).any(|c| matches!(c.kind, CheckKind::PyAst(_)))
    }

    /// Every group some check belongs to, sorted.
    pub fn groups(&self) -> Vec<String> {
        let mut g: Vec<String> = self.sets.iter().flat_map(|s| &s.checks).map(|c| c.group.clone()).collect();
        g.sort();
        g.dedup();
        g
    }

    /// The checks of one file (`path` relative to the root, `/`-separated). `python` is its
    /// parse, needed when a `py-ast` check applies ([`RuleBook::needs_syntax_tree`]).
    pub fn check_file(
        &self,
        path: &str,
        text: &str,
        python: Option<&PythonParse>,
        groups: Groups<'_>,
    ) -> Vec<Violation> {
        let Some(lang) = Language::of_path(path) else { return Vec::new() };
        let name = base_name(path);
        let masked = std::cell::OnceCell::new();
        let mut out = Vec::new();
        let mut syntax_reported = false;
        for check in self.checks(lang, groups) {
            if !check.filters.applies(name, text) {
                continue;
            }
            let violation = |line: u32, message: String| Violation {
                path: path.to_string(),
                line,
                rule: check.id.clone(),
                message,
            };
            match &check.kind {
                CheckKind::Line { pattern, exclude } => {
                    for (i, line) in text.lines().enumerate() {
                        if pattern.is_match(line) && !exclude.iter().any(|e| line.contains(e.as_str())) {
                            out.push(violation(i as u32 + 1, check.message.clone()));
                        }
                    }
                }
                CheckKind::TextRequired { contains } => {
                    if !contains.iter().all(|c| text.contains(c.as_str())) {
                        out.push(violation(0, check.message.clone()));
                    }
                }
                CheckKind::Balanced { pairs } => {
                    let code: &String = masked.get_or_init(|| lexer::mask(lang, text));
                    for pair in pairs {
                        match pair {
                            Pair::Counted { open, close, message } => {
                                let (o, c) =
                                    (code.matches(open.as_str()).count(), code.matches(close.as_str()).count());
                                if o != c {
                                    let m =
                                        message.replace("{open}", &o.to_string()).replace("{close}", &c.to_string());
                                    out.push(violation(0, m));
                                }
                            }
                            Pair::Odd { token, message } => {
                                if code.matches(token.as_str()).count() % 2 == 1 {
                                    out.push(violation(0, message.clone()));
                                }
                            }
                        }
                    }
                }
                CheckKind::PyAst(py) => match python {
                    Some(PythonParse::Parsed(facts)) => {
                        for (line, message) in py.run(facts, name) {
                            out.push(violation(line, message));
                        }
                    }
                    Some(PythonParse::SyntaxError { line, message }) if !syntax_reported => {
                        syntax_reported = true;
                        out.push(Violation {
                            path: path.to_string(),
                            line: *line,
                            rule: "syntax".into(),
                            message: format!("syntax error: {message}"),
                        });
                    }
                    Some(PythonParse::SyntaxError { .. }) => {}
                    Some(PythonParse::Unreadable { why }) if !syntax_reported => {
                        syntax_reported = true;
                        out.push(Violation {
                            path: path.to_string(),
                            line: 0,
                            rule: "syntax".into(),
                            message: format!("not checked on its syntax tree: {why}"),
                        });
                    }
                    Some(PythonParse::Unreadable { .. }) | None => {}
                },
                CheckKind::Project(_) => {}
            }
        }
        out
    }

    /// The project checks of `lang` on the project `view`.
    pub fn check_project(&self, lang: Language, view: &ProjectView, groups: Groups<'_>) -> Vec<Violation> {
        let mut out = Vec::new();
        for check in self.checks(lang, groups) {
            if let CheckKind::Project(p) = &check.kind {
                out.extend(p.run(&check.id, &check.message, view));
            }
        }
        out
    }

    /// The root files the project checks of `lang` look at (for the adapter to read).
    pub fn project_files(&self, lang: Language, groups: Groups<'_>) -> Vec<String> {
        let mut files: Vec<String> = self
            .checks(lang, groups)
            .filter_map(|c| match &c.kind {
                CheckKind::Project(p) => Some(p.file_names().map(str::to_string).collect::<Vec<_>>()),
                _ => None,
            })
            .flatten()
            .collect();
        files.sort();
        files.dedup();
        files
    }

    /// Whether `lang` has project checks the groups select.
    pub fn has_project_checks(&self, lang: Language, groups: Groups<'_>) -> bool {
        self.checks(lang, groups).any(|c| matches!(c.kind, CheckKind::Project(_)))
    }
}

/// The `[rules]` table of `.arbiter/config.toml`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct RulesSection {
    /// Directories holding orch.py-style `<lang>/core.json` files, relative to the
    /// repository root (default `[".agents/rules"]`, orch.py's install through its symlink).
    pub dirs: Option<Vec<String>>,
    /// Use the rule sets arbiter ships (default true).
    pub shipped: Option<bool>,
    /// The groups a run's rules gate and `arbiter rules check` select (default: all).
    pub groups: Option<Vec<String>>,
    /// The Python interpreter whose `ast` module parses Python files (default `python3`).
    pub python: Option<String>,
    /// Files larger than this are reported, not read (default 1 MiB).
    pub max_file_bytes: Option<u64>,
}

/// The `[rules]` table resolved: where rules come from and how files are read.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[cfg_attr(feature = "arbitrary", derive(proptest_derive::Arbitrary))]
pub struct RuleOptions {
    pub dirs: Vec<String>,
    pub shipped: bool,
    /// `None`: every group.
    pub groups: Option<Vec<String>>,
    pub python: String,
    pub max_file_bytes: u64,
}

impl Default for RuleOptions {
    fn default() -> Self {
        RuleOptions::from_section(&RulesSection::default())
    }
}

/// The directory orch.py's rules are read from by default (its `.agents` symlink).
pub const DEFAULT_RULE_DIR: &str = ".agents/rules";

impl RuleOptions {
    pub fn from_section(s: &RulesSection) -> RuleOptions {
        RuleOptions {
            dirs: s.dirs.clone().unwrap_or_else(|| vec![DEFAULT_RULE_DIR.to_string()]),
            shipped: s.shipped.unwrap_or(true),
            groups: s.groups.clone().filter(|g| !g.is_empty()),
            python: s.python.clone().filter(|p| !p.trim().is_empty()).unwrap_or_else(|| "python3".into()),
            max_file_bytes: s.max_file_bytes.filter(|b| *b > 0).unwrap_or(1 << 20),
        }
    }

    /// The `dirs` entry that is not a path inside the repository, if any.
    pub fn outside_dir(&self) -> Option<&str> {
        self.dirs.iter().map(String::as_str).find(|d| !project::safe_root_path(d))
    }
}

#[cfg(test)]
mod tests;
