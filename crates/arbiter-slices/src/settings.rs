//! The `[slices]` table resolved to the values the verbs use (pure).

use arbiter_core::settings::SlicesSection;

/// The test command when none is configured: pytest on the slice's test file, from the
/// repository root (so `shared.logger` and the slice's package import as in orch.py).
pub const DEFAULT_TEST_COMMAND: &str = "python3 -m pytest -q {tests}";

/// The most repair and spec QA rounds a slice may be given.
pub const MAX_ROUNDS: u32 = 20;

/// How the slice verbs work in this repository.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceSettings {
    pub test_command: String,
    pub test_timeout_seconds: u64,
    pub tests_file: String,
    pub repair_rounds: u32,
    pub spec_qa_rounds: u32,
    pub template: String,
    /// `None`: found from the repository (`main`, else `master`, else `init.defaultBranch`).
    pub default_branch: Option<String>,
    pub remote: String,
    pub push: bool,
}

impl SliceSettings {
    /// Resolves the table, refusing values that cannot work (with the key and the fix).
    pub fn resolve(s: &SlicesSection) -> Result<SliceSettings, String> {
        let test_command = s.test_command.clone().unwrap_or_else(|| DEFAULT_TEST_COMMAND.into());
        if test_command.trim().is_empty() {
            return Err("[slices] test_command is empty; give the command that runs one slice's tests, e.g. \"python3 -m pytest -q {tests}\"".into());
        }
        let tests_file = s.tests_file.clone().unwrap_or_else(|| "Tests.py".into());
        if !crate::names::valid_file_name(&tests_file) {
            return Err(format!(
                "[slices] tests_file '{tests_file}' is not a file name; give the name of the file in each slice that holds its tests, e.g. \"Tests.py\""
            ));
        }
        let rounds = |key: &str, v: Option<u32>, default: u32| match v {
            Some(n) if n > MAX_ROUNDS => {
                Err(format!("[slices] {key} = {n} is more than {MAX_ROUNDS}; use fewer rounds"))
            }
            Some(n) => Ok(n),
            None => Ok(default),
        };
        let template = s.template.clone().unwrap_or_else(|| crate::templates::DEFAULT_SET.into());
        if !crate::names::valid_component(&template) {
            return Err(format!(
                "[slices] template '{template}' is not a template set name (letters, digits, '-' and '_'); sets live in .arbiter/templates/<set>/"
            ));
        }
        Ok(SliceSettings {
            test_command,
            test_timeout_seconds: s.test_timeout_seconds.filter(|t| *t > 0).unwrap_or(300),
            tests_file,
            repair_rounds: rounds("repair_rounds", s.repair_rounds, 3)?,
            spec_qa_rounds: rounds("spec_qa_rounds", s.spec_qa_rounds, 3)?,
            template,
            default_branch: s.default_branch.clone().filter(|b| !b.trim().is_empty()),
            remote: s.remote.clone().filter(|r| !r.trim().is_empty()).unwrap_or_else(|| "origin".into()),
            push: s.push.unwrap_or(true),
        })
    }

    /// The test command of the slice in `dir` (relative to the root).
    pub fn test_command_for(&self, dir: &str) -> String {
        self.test_command.replace("{tests}", &format!("{dir}/{}", self.tests_file)).replace("{dir}", dir)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn defaults_follow_orch_py_and_the_test_command_names_the_slice() {
        let s = SliceSettings::resolve(&SlicesSection::default()).unwrap();
        assert_eq!(
            s.test_command_for("features/billing/Invoice"),
            "python3 -m pytest -q features/billing/Invoice/Tests.py"
        );
        assert_eq!((s.repair_rounds, s.spec_qa_rounds, s.remote.as_str(), s.push), (3, 3, "origin", true));
        let bad = SlicesSection { repair_rounds: Some(99), ..Default::default() };
        assert!(SliceSettings::resolve(&bad).unwrap_err().contains("repair_rounds"));
        let traversal = SlicesSection { tests_file: Some("../x.py".into()), ..Default::default() };
        assert!(SliceSettings::resolve(&traversal).unwrap_err().contains("tests_file"));
    }
}
