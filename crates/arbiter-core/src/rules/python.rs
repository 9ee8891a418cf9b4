//! orch.py's four `py-ast` checks, judged on facts read from a real Python syntax tree.
//!
//! The facts ([`PyFacts`]) are what the runner's adapter reads with Python's own `ast`
//! module: every function with its parameters (annotation as a small tree, whether the
//! default is `None`), every import and the name it binds, every name the code uses (quoted
//! annotations parsed too, `__all__` entries counted), and where `logging.getLogger` is
//! used. On that tree `str | None = None` allows `None` (orch.py flagged it as "bare BinOp")
//! and `pos` is not a use of `os` (orch.py matched substrings).

use std::collections::BTreeSet;

use serde::{Deserialize, Serialize};

/// The outcome of parsing one Python file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum PythonParse {
    Parsed(PyFacts),
    SyntaxError {
        line: u32,
        message: String,
    },
    /// The parser gave up on it (nesting too deep for the parser, an encoding it refuses).
    Unreadable {
        why: String,
    },
}

/// What the syntax tree of one file says, as far as the checks need.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PyFacts {
    #[serde(default)]
    pub functions: Vec<PyFunction>,
    #[serde(default)]
    pub imports: Vec<PyImport>,
    /// Every name the code loads or deletes, names in quoted annotations and `__all__`
    /// entries included.
    #[serde(default)]
    pub used_names: BTreeSet<String>,
    /// Lines using `logging.getLogger` (or importing `getLogger` from `logging`).
    #[serde(default)]
    pub getlogger_lines: Vec<u32>,
}

/// A `def` or `async def`, nested ones and methods included.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PyFunction {
    pub name: String,
    pub line: u32,
    pub returns: bool,
    #[serde(default)]
    pub params: Vec<PyParam>,
}

/// One parameter (positional or keyword-only).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PyParam {
    pub name: String,
    pub line: u32,
    #[serde(default)]
    pub annotation: Option<Annotation>,
    /// The annotation as written (for messages).
    #[serde(default)]
    pub annotation_text: String,
    pub default_is_none: bool,
}

/// An annotation's shape, as far as "does it allow `None`" needs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum Annotation {
    /// `None`.
    NoneConst,
    /// A bare name: `str`, `Optional`, `Any`.
    Name { id: String },
    /// `x.y`: the last attribute (`typing.Optional` is `Optional`).
    Attribute { attr: String },
    /// `X[args]`: `value` is the subscripted annotation.
    Subscript { value: Box<Annotation>, args: Vec<Annotation> },
    /// `X | Y` (PEP 604).
    Or { left: Box<Annotation>, right: Box<Annotation> },
    /// Anything else (a call, a literal string that does not parse).
    Other,
}

impl Annotation {
    /// Whether a parameter so annotated may be `None`.
    pub fn allows_none(&self) -> bool {
        match self {
            Annotation::NoneConst | Annotation::Other => true,
            Annotation::Name { id } => allows_none_by_name(id),
            Annotation::Attribute { attr } => allows_none_by_name(attr),
            Annotation::Or { left, right } => left.allows_none() || right.allows_none(),
            Annotation::Subscript { value, args } => match value.name() {
                Some("Optional") => true,
                Some("Union") => args.iter().any(Annotation::allows_none),
                Some("Annotated") => args.first().is_some_and(Annotation::allows_none),
                _ => false,
            },
        }
    }

    fn name(&self) -> Option<&str> {
        match self {
            Annotation::Name { id } => Some(id),
            Annotation::Attribute { attr } => Some(attr),
            _ => None,
        }
    }
}

fn allows_none_by_name(name: &str) -> bool {
    matches!(name, "Optional" | "Any" | "object" | "None" | "NoneType")
}

/// One import: `bound` is the name it binds (`import os.path` binds `os`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PyImport {
    pub line: u32,
    /// `from MODULE import name`; `None` for `import name`.
    #[serde(default)]
    pub module: Option<String>,
    pub name: String,
    pub bound: String,
}

impl PyImport {
    /// The top-level package imported from.
    pub fn top_module(&self) -> &str {
        let full = self.module.as_deref().unwrap_or(&self.name);
        full.split('.').next().unwrap_or(full)
    }
}

/// A named `py-ast` check.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PyCheck {
    ReturnAnnotations,
    BareNone,
    UnusedImports,
    SharedLoggerImport,
}

/// The shared logger import every slice file but `__init__.py` and the tests must have.
pub const SHARED_LOGGER_IMPORT: &str = "from shared.logger import logging_func";

impl PyCheck {
    pub const NAMES: [&'static str; 4] = ["return_annotations", "bare_none", "unused_imports", "shared_logger_import"];

    pub fn from_name(name: &str) -> Option<PyCheck> {
        match name {
            "return_annotations" => Some(PyCheck::ReturnAnnotations),
            "bare_none" => Some(PyCheck::BareNone),
            "unused_imports" => Some(PyCheck::UnusedImports),
            "shared_logger_import" => Some(PyCheck::SharedLoggerImport),
            _ => None,
        }
    }

    /// Runs the check on the facts of file `name`: `(line, message)` per violation.
    pub fn run(self, facts: &PyFacts, name: &str) -> Vec<(u32, String)> {
        match self {
            PyCheck::ReturnAnnotations => facts
                .functions
                .iter()
                .filter(|f| !f.returns && !f.name.starts_with("test_"))
                .map(|f| (f.line, format!("{} missing return type", f.name)))
                .collect(),
            PyCheck::BareNone => facts
                .functions
                .iter()
                .flat_map(|f| &f.params)
                .filter(|p| p.default_is_none && p.annotation.as_ref().is_some_and(|a| !a.allows_none()))
                .map(|p| {
                    (
                        p.line,
                        format!(
                            "{}: {} = None does not allow None; write {} | None",
                            p.name, p.annotation_text, p.annotation_text
                        ),
                    )
                })
                .collect(),
            PyCheck::UnusedImports => {
                // A package's `__init__.py` imports to re-export.
                if name == "__init__.py" {
                    return Vec::new();
                }
                facts
                    .imports
                    .iter()
                    .filter(|i| i.module.as_deref() != Some("__future__") && i.name != "*")
                    .filter(|i| !(name == "Tests.py" && i.top_module() == "pytest"))
                    .filter(|i| !facts.used_names.contains(&i.bound))
                    .map(|i| (i.line, format!("'{}' imported but unused", i.bound)))
                    .collect()
            }
            PyCheck::SharedLoggerImport => {
                let has = facts
                    .imports
                    .iter()
                    .any(|i| i.module.as_deref() == Some("shared.logger") && i.name == "logging_func");
                if has {
                    Vec::new()
                } else if let Some(line) = facts.getlogger_lines.first() {
                    vec![(*line, format!("uses logging.getLogger; use the shared logger: {SHARED_LOGGER_IMPORT}"))]
                } else {
                    vec![(0, format!("missing the shared logger import: {SHARED_LOGGER_IMPORT}"))]
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(id: &str) -> Annotation {
        Annotation::Name { id: id.into() }
    }

    fn or(l: Annotation, r: Annotation) -> Annotation {
        Annotation::Or { left: Box::new(l), right: Box::new(r) }
    }

    fn sub(v: Annotation, args: Vec<Annotation>) -> Annotation {
        Annotation::Subscript { value: Box::new(v), args }
    }

    #[test]
    fn pep_604_unions_with_none_allow_none_and_bare_types_do_not() {
        assert!(or(name("str"), Annotation::NoneConst).allows_none());
        assert!(or(Annotation::NoneConst, or(name("int"), name("str"))).allows_none());
        assert!(!or(name("int"), name("str")).allows_none());
        assert!(!name("str").allows_none());
        assert!(sub(name("Optional"), vec![name("str")]).allows_none());
        assert!(sub(Annotation::Attribute { attr: "Optional".into() }, vec![name("str")]).allows_none());
        assert!(sub(name("Union"), vec![name("str"), Annotation::NoneConst]).allows_none());
        assert!(!sub(name("Union"), vec![name("str"), name("int")]).allows_none());
        assert!(!sub(name("list"), vec![name("int")]).allows_none());
        assert!(name("Any").allows_none());
    }

    #[test]
    fn an_unused_import_is_judged_by_name_not_by_substring() {
        let facts = PyFacts {
            imports: vec![PyImport { line: 1, module: None, name: "os".into(), bound: "os".into() }],
            used_names: ["pos".to_string()].into(),
            ..Default::default()
        };
        assert_eq!(PyCheck::UnusedImports.run(&facts, "Handler.py"), vec![(1, "'os' imported but unused".into())]);
        let used = PyFacts { used_names: ["os".to_string()].into(), ..facts.clone() };
        assert!(PyCheck::UnusedImports.run(&used, "Handler.py").is_empty());
        assert!(PyCheck::UnusedImports.run(&facts, "__init__.py").is_empty());
    }
}
