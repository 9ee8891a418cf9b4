//! The names a plan gets from an idea (`arbiter plan new`) or an issue (`arbiter intake`):
//! its id, the PRD file `docs/PRD-<slug>.md`, the plan file and the integration branch
//! `arbiter/<slug>`. A slug is lower-case ASCII letters, digits and single dashes, so it is a
//! safe file name (no `/`, no `..`), a plan id and a branch component.

/// The longest slug.
pub const MAX_LEN: usize = 48;

/// Why a slug given on the command line cannot be one, with what to write instead.
pub fn check(slug: &str) -> Result<(), String> {
    let ok = !slug.is_empty()
        && slug.len() <= MAX_LEN
        && slug.bytes().all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'-')
        && !slug.starts_with('-')
        && !slug.ends_with('-')
        && !slug.contains("--");
    if ok {
        Ok(())
    } else {
        let shown: String = crate::intake::text::one_line(slug, 60);
        Err(format!(
            "'{shown}' is not a slug: use lower-case letters, digits and single dashes, at most {MAX_LEN} characters, not starting or ending with a dash (like `csv-export`); it names docs/PRD-<slug>.md and the plan"
        ))
    }
}

/// A slug from free text: its first eight words, lower-cased, every run of other characters
/// one dash, at most [`MAX_LEN`] characters; `plan` when nothing is left.
pub fn from_text(text: &str) -> String {
    let words: Vec<&str> = text.split_whitespace().take(8).collect();
    let slug = dashed(&words.join(" "), MAX_LEN);
    if slug.is_empty() { "plan".to_string() } else { slug }
}

/// The slug of an issue: `issue-<owner>-<repo>-<number>` (shortened in the middle when long,
/// never losing the number).
pub fn for_issue(owner: &str, repo: &str, number: u64) -> String {
    let tail = format!("-{number}");
    let head = dashed(&format!("issue {owner} {repo}"), MAX_LEN - tail.len());
    format!("{head}{tail}")
}

/// `text` lower-cased with every run of characters that are not ASCII letters or digits made
/// one dash, no dash at either end, at most `max` bytes.
fn dashed(text: &str, max: usize) -> String {
    let mut out = String::new();
    for c in text.chars() {
        if c.is_ascii_alphanumeric() {
            out.push(c.to_ascii_lowercase());
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.truncate(max);
    out.trim_end_matches('-').to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs_come_from_the_first_words() {
        assert_eq!(from_text("Add CSV export to the reports page"), "add-csv-export-to-the-reports-page");
        assert_eq!(from_text("  ../../etc/passwd  "), "etc-passwd");
        assert_eq!(from_text("¿¡!"), "plan");
        assert_eq!(
            from_text("one two three four five six seven eight nine"),
            "one-two-three-four-five-six-seven-eight"
        );
        assert!(from_text(&"x".repeat(200)).len() <= MAX_LEN);
    }

    #[test]
    fn hostile_slugs_are_refused_with_the_fix() {
        for bad in ["../x", "a/b", "", "-a", "a-", "A", "a--b", "a b", "a.b", &"a".repeat(49), "a\u{1b}[2J"] {
            let err = check(bad).unwrap_err();
            assert!(err.contains("like `csv-export`"), "{bad}: {err}");
            assert!(!err.contains('\u{1b}'));
        }
        check("csv-export").unwrap();
        check("issue-acme-web-12").unwrap();
    }

    #[test]
    fn issue_slugs_keep_the_number() {
        assert_eq!(for_issue("Acme", "web.app", 12), "issue-acme-web-app-12");
        let long = for_issue(&"o".repeat(60), &"r".repeat(60), 123456);
        assert!(long.len() <= MAX_LEN && long.ends_with("-123456"), "{long}");
        check(&long).unwrap();
    }
}
