//! Template sets (pure): the files `feature new` scaffolds. The default set, `python`, is
//! orch.py's slice (`Schema.py`, `Handler.py`, `Controller.py`, `Tests.py`, `__init__.py`);
//! other sets are the files of `.arbiter/templates/<set>/`, read by [`crate::layout`].
//!
//! A template's text and its file name may use variables written `{{name}}`:
//! `name` (the feature, `Invoice`), `domain` (`billing`), `domain_title` (`Billing`),
//! `dir` (the slice directory, `features/billing/Invoice`), `module` (its dotted module path,
//! `features.billing.Invoice`) and `name_lower` (`invoice`). A set's `spec.md`, if it has
//! one, is the spec template used without a model, with `{{overview}}` as well.

use std::collections::BTreeMap;

/// The set `feature new` uses unless told otherwise.
pub const DEFAULT_SET: &str = "python";

/// The file `--no-controller` leaves out.
pub const CONTROLLER: &str = "Controller.py";

/// The variables a template may use.
pub const VARIABLES: &[&str] = &["name", "domain", "domain_title", "dir", "module", "name_lower", "overview"];

/// orch.py's slice, as `(file, template)`.
pub const PYTHON_SET: &[(&str, &str)] = &[
    ("Schema.py", "from pydantic import BaseModel\n\n\nclass {{name}}Schema(BaseModel):\n    pass\n"),
    (
        "Handler.py",
        "from typing import Any, Dict\n\nfrom shared.logger import logging_func\n\nlogger = logging_func(__name__)\n\n\n\
class {{name}}Handler:\n    def execute(self, **kwargs: Any) -> Dict[str, Any]:\n        logger.info(\"{{name}}.execute called\")\n        return {\"status\": \"ok\"}\n",
    ),
    (
        "Controller.py",
        "from typing import Any, Dict\n\nfrom shared.logger import logging_func\n\nfrom .Handler import {{name}}Handler\n\n\
logger = logging_func(__name__)\n\n\nclass {{name}}Controller:\n    def handle(self, request: Dict[str, Any]) -> Dict[str, Any]:\n        \
logger.info(\"{{name}}.handle called\")\n        return {{name}}Handler().execute(**request)\n",
    ),
    (
        "Tests.py",
        "import pytest\n\nfrom .Handler import {{name}}Handler\n\n\nclass Test{{name}}Handler:\n    \
def test_execute_returns_ok(self) -> None:\n        assert {{name}}Handler().execute()[\"status\"] == \"ok\"\n",
    ),
    ("__init__.py", ""),
];

/// The values of the variables for one slice.
pub fn variables(name: &str, domain: &str, dir: &str, overview: &str) -> BTreeMap<&'static str, String> {
    let domain_title: String = domain
        .split(['_', '-'])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ");
    BTreeMap::from([
        ("name", name.to_string()),
        ("domain", domain.to_string()),
        ("domain_title", domain_title),
        ("dir", dir.to_string()),
        ("module", dir.trim_start_matches("./").replace('/', ".")),
        ("name_lower", name.to_lowercase()),
        ("overview", overview.trim().to_string()),
    ])
}

/// `text` with every `{{variable}}` replaced; an unknown variable is an error naming it and
/// the known ones.
pub fn render(text: &str, vars: &BTreeMap<&'static str, String>) -> Result<String, String> {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(start) = rest.find("{{") {
        out.push_str(&rest[..start]);
        let after = &rest[start + 2..];
        let Some(end) = after.find("}}") else {
            out.push_str(&rest[start..]);
            return Ok(out);
        };
        let key = after[..end].trim();
        match vars.get(key) {
            Some(v) => out.push_str(v),
            None => {
                return Err(format!("{{{{{key}}}}} is not a template variable (known: {})", VARIABLES.join(", ")));
            }
        }
        rest = &after[end + 2..];
    }
    out.push_str(rest);
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_set_renders_orch_py_s_slice() {
        let vars = variables("Invoice", "billing", "features/billing/Invoice", "");
        let handler = render(PYTHON_SET[1].1, &vars).unwrap();
        assert!(handler.contains("class InvoiceHandler:"), "{handler}");
        assert!(handler.contains("from shared.logger import logging_func"));
        assert!(handler.contains("return {\"status\": \"ok\"}"), "Python braces are kept: {handler}");
        assert_eq!(vars["module"], "features.billing.Invoice");
        assert_eq!(
            PYTHON_SET.iter().map(|(f, _)| *f).collect::<Vec<_>>(),
            vec!["Schema.py", "Handler.py", "Controller.py", "Tests.py", "__init__.py"]
        );
    }

    #[test]
    fn an_unknown_variable_names_the_known_ones() {
        let err = render("x {{nmae}}", &variables("A", "d", "f/d/A", "")).unwrap_err();
        assert!(err.contains("{{nmae}}") && err.contains("domain_title"), "{err}");
    }
}
