//! A slice's `spec.md` (pure): orch.py's template, the prompts of the `spec` role (writing
//! a spec, amending one, checking one), spec QA's structured verdict, and amendments.
//!
//! An amendment is orch.py's "CONTRACT AMENDMENT" made real: a dated section under
//! `## Amendments` at the end of `spec.md`, holding the request, its resolution and the QA
//! verdict. QA always checks the spec as a whole against the original request plus every
//! amendment (orch.py compared the whole spec with the last change only).

use serde::{Deserialize, Serialize};

/// The heading of the amendment log.
pub const AMENDMENTS_HEADING: &str = "## Amendments";

/// orch.py's default overview: an HTML comment asking for one.
pub const DEFAULT_OVERVIEW: &str = "<!-- Orchestrator: describe what this feature does, why it exists. -->";

/// orch.py's `SPEC_TEMPLATE` (its sections, in order).
pub fn template_spec(name: &str, domain: &str, overview: &str) -> String {
    let title =
        if domain.is_empty() || domain == crate::registry::NO_DOMAIN { name.to_string() } else { title_case(domain) };
    let overview = if overview.trim().is_empty() { DEFAULT_OVERVIEW } else { overview.trim() };
    format!(
        "# {name} — {title} Feature\n\n\
         ## Overview\n\n{overview}\n\n\
         ## Input / Output\n\n\
         | Direction | Format | Description |\n\
         |-----------|--------|-------------|\n\
         | Input | `dict` with fields... | |\n\
         | Output | `{{\"status\": \"ok\", ...}}` | |\n\n\
         ## Business Logic Constraints\n\n- \n\n\
         ## Error Cases\n\n\
         | Condition | Error | Message |\n\
         |-----------|-------|---------|\n\
         | | | |\n\n\
         ## Dependencies\n\n- \n\n\
         ## Code Standards\n\n\
         - PEP 484 type annotations on every function signature and module-level variable.\n\
         - Logging only through `shared.logger` (`from shared.logger import logging_func`).\n"
    )
}

fn title_case(s: &str) -> String {
    s.split(['_', '-'])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next().map(|f| f.to_uppercase().collect::<String>() + c.as_str()).unwrap_or_default()
        })
        .collect::<Vec<_>>()
        .join(" ")
}

/// The system prompt of the spec writer: the sections of the template, and the project's
/// `SPEC.md` (its architectural blueprint) when it has one.
pub fn writer_system(blueprint: Option<&str>) -> String {
    let mut s = String::from(
        "You are a spec writer for a feature slice in a vertical-slice architecture. Write the slice's spec.md in \
         markdown with exactly these sections, in order: `# <Feature> — <Domain> Feature`, `## Overview`, \
         `## Input / Output` (a table Direction | Format | Description), `## Business Logic Constraints`, \
         `## Error Cases` (a table Condition | Error | Message), `## Dependencies`, `## Code Standards` (PEP 484 \
         annotations; logging only through shared.logger). Be precise: names, fields, errors. Output ONLY the \
         markdown spec, no preamble.",
    );
    if let Some(b) = blueprint.filter(|b| !b.trim().is_empty()) {
        s.push_str("\n\nThe project's architectural blueprint (SPEC.md):\n\n");
        s.push_str(b.trim());
    }
    s
}

/// The request of the spec writer.
pub fn writer_request(name: &str, domain: &str, request: &str) -> String {
    format!("Feature: {name}\nDomain: {domain}\n\nDescription:\n{}", request.trim())
}

/// The system prompt of an amendment: the reply is JSON with the resolution and the whole
/// amended spec.
pub const AMEND_SYSTEM: &str = "You amend the spec of a feature slice. You get the current spec and a change request. \
Reply with ONLY a JSON object: {\"resolution\": \"<one paragraph: what changes in the spec and why>\", \
\"spec\": \"<the complete amended spec in markdown, every section, without any amendment log>\"}.";

/// The request of an amendment.
pub fn amend_request(spec_body: &str, request: &str) -> String {
    format!("## Current spec\n\n{}\n\n## Change request\n\n{}\n", spec_body.trim(), request.trim())
}

/// The system prompt of spec QA: a structured verdict.
pub const QA_SYSTEM: &str = "You are a spec QA validator. Compare the spec with the original request and every \
amendment request, pedantically: signatures, missing sections, terminology, input and output fields, errors, \
storage, dependencies, routes. Reply with ONLY a JSON object: {\"verdict\": \"valid\"} when the spec is correct \
and complete, or {\"verdict\": \"issues\", \"issues\": [\"one discrepancy per entry\"], \"corrected_spec\": \
\"<the COMPLETE corrected spec in markdown>\"}.";

/// The request of spec QA: the intent (original request, then each amendment's) and the spec.
pub fn qa_request(original: &str, amendments: &[String], spec_body: &str) -> String {
    let mut s = format!("## Original request\n\n{}\n", original.trim());
    for (i, a) in amendments.iter().enumerate() {
        s.push_str(&format!("\n## Amendment {} request\n\n{}\n", i + 1, a.trim()));
    }
    s.push_str(&format!("\n## Spec\n\n{}\n", spec_body.trim()));
    s
}

/// Spec QA's answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "verdict")]
pub enum QaVerdict {
    Valid,
    Issues {
        #[serde(default)]
        issues: Vec<String>,
        #[serde(default)]
        corrected_spec: Option<String>,
    },
}

impl QaVerdict {
    /// In words, for the amendment log and the terminal.
    pub fn describe(&self) -> String {
        match self {
            QaVerdict::Valid => "valid".into(),
            QaVerdict::Issues { issues, .. } if issues.is_empty() => "issues (none listed)".into(),
            QaVerdict::Issues { issues, .. } => format!("issues: {}", issues.join("; ")),
        }
    }
}

/// The JSON object in a model's reply (a fenced block or prose around it is tolerated).
fn json_object(reply: &str) -> Option<&str> {
    let start = reply.find('{')?;
    let end = reply.rfind('}')?;
    (end > start).then(|| &reply[start..=end])
}

/// Reads a QA reply; `Err` says why it is not a verdict.
pub fn parse_verdict(reply: &str) -> Result<QaVerdict, String> {
    let json = json_object(reply).ok_or("the reply holds no JSON object")?;
    serde_json::from_str(json).map_err(|e| format!("the reply is not a verdict ({e})"))
}

/// An amendment model's answer.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
pub struct AmendReply {
    pub resolution: String,
    pub spec: String,
}

pub fn parse_amend_reply(reply: &str) -> Result<AmendReply, String> {
    let json = json_object(reply).ok_or("the reply holds no JSON object")?;
    let r: AmendReply = serde_json::from_str(json).map_err(|e| format!("the reply is not an amendment ({e})"))?;
    if r.spec.trim().is_empty() {
        return Err("the amended spec is empty".into());
    }
    Ok(r)
}

/// A model's spec: trimmed, and refused when it is not a markdown document.
pub fn accept_written_spec(reply: &str) -> Result<String, String> {
    let text = reply.trim();
    let text = text.strip_prefix("```markdown").or_else(|| text.strip_prefix("```md")).unwrap_or(text);
    let text = text.trim().trim_end_matches("```").trim();
    if !text.lines().any(|l| l.starts_with('#')) {
        return Err("the reply has no markdown heading".into());
    }
    Ok(format!("{text}\n"))
}

/// One amendment as recorded.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Amendment {
    pub number: usize,
    /// RFC 3339.
    pub at: String,
    pub request: String,
    pub resolution: String,
    pub qa: String,
}

/// `spec.md` split at the amendment log: the spec itself, and the log (possibly empty).
pub fn split_spec(spec: &str) -> (&str, &str) {
    let mut offset = 0;
    for line in spec.split_inclusive('\n') {
        if line.trim_end() == AMENDMENTS_HEADING {
            return (&spec[..offset], &spec[offset..]);
        }
        offset += line.len();
    }
    (spec, "")
}

/// The requests of the amendments recorded in `spec`, in order.
pub fn amendment_requests(spec: &str) -> Vec<String> {
    let (_, log) = split_spec(spec);
    let mut out = Vec::new();
    let mut in_request = false;
    let mut current = String::new();
    for line in log.lines() {
        if line.starts_with("### Amendment ") {
            if in_request {
                out.push(current.trim().to_string());
            }
            in_request = false;
            current.clear();
        } else if line.trim() == "#### Request" {
            in_request = true;
        } else if line.starts_with("#### ") {
            if in_request {
                out.push(current.trim().to_string());
                current.clear();
            }
            in_request = false;
        } else if in_request {
            current.push_str(line);
            current.push('\n');
        }
    }
    if in_request {
        out.push(current.trim().to_string());
    }
    out
}

/// `spec.md` with `body` as the spec and `amendment` added to the log it had.
pub fn with_amendment(spec: &str, body: &str, amendment: &Amendment) -> String {
    let (_, log) = split_spec(spec);
    let mut out = body.trim_end().to_string();
    out.push_str("\n\n");
    if log.trim().is_empty() {
        out.push_str(AMENDMENTS_HEADING);
        out.push_str("\n\n");
    } else {
        out.push_str(log.trim_end());
        out.push_str("\n\n");
    }
    out.push_str(&format!(
        "### Amendment {} — {}\n\n#### Request\n\n{}\n\n#### Resolution\n\n{}\n\n#### QA verdict\n\n{}\n",
        amendment.number,
        amendment.at,
        amendment.request.trim(),
        amendment.resolution.trim(),
        amendment.qa.trim()
    ));
    out
}

/// The original request recorded in a spec: its overview (what `new` was asked for).
pub fn overview(spec: &str) -> String {
    let mut in_overview = false;
    let mut out = String::new();
    for line in spec.lines() {
        if line.starts_with("## ") {
            if in_overview {
                break;
            }
            in_overview = line.trim() == "## Overview";
            continue;
        }
        if in_overview {
            out.push_str(line);
            out.push('\n');
        }
    }
    out.trim().to_string()
}

/// The task a slice's tournament works on: implement (or, once amended, modify) the slice
/// per its spec, which is given in full.
pub fn implement_task(name: &str, dir: &str, tests_file: &str, spec: &str) -> String {
    let amended = !split_spec(spec).1.trim().is_empty();
    let verb = if amended { "Modify" } else { "Implement" };
    let what =
        if amended { "per its amended spec (the amendments at the end say what changed)" } else { "per its spec" };
    format!(
        "{verb} the feature slice {name} in {dir}/ {what}.\n\n\
         Work inside {dir}/: write the slice's code and its tests in {dir}/{tests_file} (every public behaviour \
         of the spec tested: the happy path, the empty state and each error case). Follow the project's rules \
         (type annotations, the shared logger, no comments) and keep files complete. Do not commit.\n\n\
         The spec ({dir}/spec.md):\n\n{}\n",
        spec.trim()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_template_has_orch_py_s_sections() {
        let s = template_spec("Invoice", "billing", "Create an invoice from an order.");
        assert!(s.starts_with("# Invoice — Billing Feature\n"));
        for h in [
            "## Overview",
            "## Input / Output",
            "## Business Logic Constraints",
            "## Error Cases",
            "## Dependencies",
            "## Code Standards",
        ] {
            assert!(s.contains(h), "{h}");
        }
        assert!(s.contains("shared.logger"));
        assert!(template_spec("X", "nodomain", "").contains(DEFAULT_OVERVIEW));
        assert_eq!(overview(&s), "Create an invoice from an order.");
    }

    #[test]
    fn amendments_are_recorded_and_read_back_in_order() {
        let spec = template_spec("Invoice", "billing", "Totals in cents.");
        let a1 = Amendment {
            number: 1,
            at: "2026-01-01T00:00:00.000Z".into(),
            request: "Add VAT per line".into(),
            resolution: "VAT added".into(),
            qa: "valid".into(),
        };
        let once = with_amendment(&spec, split_spec(&spec).0, &a1);
        assert!(
            once.contains(
                "## Amendments\n\n### Amendment 1 — 2026-01-01T00:00:00.000Z\n\n#### Request\n\nAdd VAT per line\n"
            ),
            "{once}"
        );
        let a2 = Amendment { number: 2, request: "Round half up".into(), ..a1.clone() };
        let twice = with_amendment(&once, "# Invoice\n\nnew body\n", &a2);
        assert!(twice.starts_with("# Invoice\n\nnew body\n\n## Amendments\n"), "{twice}");
        assert_eq!(amendment_requests(&twice), vec!["Add VAT per line".to_string(), "Round half up".to_string()]);
        assert_eq!(twice.matches(AMENDMENTS_HEADING).count(), 1);
        assert!(implement_task("Invoice", "f/b/Invoice", "Tests.py", &twice).starts_with("Modify the feature slice"));
        assert!(implement_task("Invoice", "f/b/Invoice", "Tests.py", &spec).starts_with("Implement the feature slice"));
    }

    #[test]
    fn a_verdict_is_structured_and_anything_else_is_not_one() {
        assert_eq!(parse_verdict("```json\n{\"verdict\": \"valid\"}\n```"), Ok(QaVerdict::Valid));
        let v = parse_verdict(r##"{"verdict": "issues", "issues": ["no error cases"], "corrected_spec": "# X\n"}"##)
            .unwrap();
        assert_eq!(v.describe(), "issues: no error cases");
        // orch.py passed any reply starting with VALID.
        assert!(parse_verdict("VALID-ish, mostly").is_err());
        assert!(parse_verdict("{\"verdict\": \"maybe\"}").is_err());
    }

    #[test]
    fn a_written_spec_must_be_markdown() {
        assert_eq!(accept_written_spec("```markdown\n# X\n\nbody\n```").unwrap(), "# X\n\nbody\n");
        assert!(accept_written_spec("I cannot help with that.").is_err());
    }
}
