//! `project` checks: orch.py's "constitution" made declarative. They judge the project, not
//! a file: root files it must have (`require`), must not have (`forbid`), text a root file
//! must not contain (`forbid_text`), and a family of libraries of which only one may be
//! imported across the checked files (`one_import_of`: orch.py's "project time library").

use std::collections::{BTreeMap, BTreeSet};

use super::Violation;

/// One `project` check.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProjectCheck {
    pub require: Vec<String>,
    pub forbid: Vec<String>,
    pub forbid_text: BTreeMap<String, Vec<String>>,
    pub one_import_of: Vec<String>,
}

/// What a project check sees: which of the files it names exist, the text of those it
/// reads, and the top-level modules the checked files import.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProjectView {
    pub present: BTreeSet<String>,
    pub texts: BTreeMap<String, String>,
    /// `(path, top-level module)` for every import of every checked file.
    pub imports: Vec<(String, String)>,
}

/// Whether `path` stays inside the project: relative, no `..`, not empty.
pub fn safe_root_path(path: &str) -> bool {
    let p = path.trim();
    !p.is_empty() && !p.starts_with('/') && !p.split(['/', '\\']).any(|c| c == "..") && !p.contains('\0')
}

impl ProjectCheck {
    pub fn is_empty(&self) -> bool {
        self.require.is_empty()
            && self.forbid.is_empty()
            && self.forbid_text.is_empty()
            && self.one_import_of.is_empty()
    }

    /// Every root file the check looks at.
    pub fn file_names(&self) -> impl Iterator<Item = &str> {
        self.require.iter().chain(&self.forbid).chain(self.forbid_text.keys()).map(String::as_str)
    }

    /// The violations of the check `id` (reported with `message`) on `view`.
    pub fn run(&self, id: &str, message: &str, view: &ProjectView) -> Vec<Violation> {
        let v = |path: &str, line: u32, detail: String| Violation {
            path: path.to_string(),
            line,
            rule: id.to_string(),
            message: format!("{message} ({detail})"),
        };
        let mut out = Vec::new();
        for f in &self.require {
            if !view.present.contains(f) {
                out.push(v(f, 0, "missing".into()));
            }
        }
        for f in &self.forbid {
            if view.present.contains(f) {
                out.push(v(f, 0, "must not exist".into()));
            }
        }
        for (f, needles) in &self.forbid_text {
            let Some(text) = view.texts.get(f) else { continue };
            for needle in needles {
                if let Some(line) = text.lines().position(|l| l.contains(needle.as_str())) {
                    out.push(v(f, line as u32 + 1, format!("contains {needle}")));
                }
            }
        }
        if !self.one_import_of.is_empty() {
            let mut family: Vec<&(String, String)> =
                view.imports.iter().filter(|(_, m)| self.one_import_of.iter().any(|f| f == m)).collect();
            family.sort();
            if let Some((_, chosen)) = family.first() {
                for (path, module) in family.iter().filter(|(_, m)| m != chosen) {
                    out.push(v(path, 0, format!("imports {module}; the project uses {chosen}")));
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn check() -> ProjectCheck {
        ProjectCheck {
            require: vec![".python-version".into(), "pyproject.toml".into()],
            forbid: vec!["requirements.txt".into()],
            forbid_text: [("pyproject.toml".to_string(), vec!["[tool.poetry]".to_string()])].into(),
            one_import_of: vec!["pendulum".into(), "arrow".into()],
        }
    }

    #[test]
    fn every_kind_of_project_rule_reports_where() {
        let view = ProjectView {
            present: ["pyproject.toml".to_string(), "requirements.txt".to_string()].into(),
            texts: [("pyproject.toml".to_string(), "[project]\n[tool.poetry]\n".to_string())].into(),
            imports: vec![("a/A.py".into(), "pendulum".into()), ("b/B.py".into(), "arrow".into())],
        };
        let got: Vec<String> = check().run("uv", "uv project", &view).iter().map(|v| v.to_string()).collect();
        assert_eq!(
            got,
            vec![
                ".python-version: uv project (missing)",
                "requirements.txt: uv project (must not exist)",
                "pyproject.toml:2 uv project (contains [tool.poetry])",
                "b/B.py: uv project (imports arrow; the project uses pendulum)",
            ]
        );
    }

    #[test]
    fn paths_outside_the_project_are_not_safe() {
        for bad in ["../x", "/etc/passwd", "a/../../b", "", "a\\..\\b"] {
            assert!(!safe_root_path(bad), "{bad}");
        }
        assert!(safe_root_path(".python-version"));
        assert!(safe_root_path("web/pyproject.toml"));
    }
}
