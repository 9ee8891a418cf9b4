//! The `search` tool: a regular expression over the worktree's files, like ripgrep.

use std::ops::ControlFlow;

use grep_regex::RegexMatcher;
use grep_searcher::sinks::Lossy;
use grep_searcher::{BinaryDetection, SearcherBuilder};
use serde_json::Value;

use super::paths::{Access, relative, resolve, walk};
use super::{ToolOutcome, ToolResult, Toolbox, bad_args, cut, failed, opt_str, opt_uint, req_str};

pub(super) const DEFAULT_RESULTS: u64 = 100;
pub(super) const MAX_RESULTS: u64 = 1000;
/// Longest matching line shown whole.
const MAX_LINE_BYTES: usize = 300;

pub(super) fn search(tb: &Toolbox, args: &Value) -> ToolResult {
    let pattern = req_str(args, "pattern")?;
    if pattern.is_empty() {
        return Err(bad_args("`pattern` is empty."));
    }
    let path = opt_str(args, "path")?.unwrap_or(".");
    let max = match opt_uint(args, "max_results")? {
        Some(0) => return Err(bad_args("`max_results` must be at least 1.")),
        Some(n) => n.min(MAX_RESULTS),
        None => DEFAULT_RESULTS,
    } as usize;
    let matcher = RegexMatcher::new_line_matcher(pattern).map_err(|e| {
        bad_args(format!(
            "invalid regular expression: {e}\nThe pattern uses Rust regex syntax (like ripgrep): escape special \
             characters such as ( ) [ ] {{ }} . * + ? | \\ with a backslash to match them literally."
        ))
    })?;
    let target = resolve(&tb.root, path, Access::Read).map_err(failed)?;

    let mut searcher = SearcherBuilder::new().line_number(true).binary_detection(BinaryDetection::quit(0)).build();
    let mut results: Vec<String> = Vec::new();
    let mut bytes = 0usize;
    let mut more = false;
    let info = walk(&tb.root, &target.real, |entry| {
        if !entry.file_type().is_some_and(|t| t.is_file()) {
            return ControlFlow::Continue(());
        }
        let shown = relative(&tb.root, entry.path());
        let sink = Lossy(|line_number, line| {
            if results.len() >= max || bytes >= tb.output_limit {
                more = true;
                return Ok(false);
            }
            let text = line.trim_end_matches('\n').trim_end_matches('\r');
            let short = cut(text, MAX_LINE_BYTES);
            let result = if short.len() < text.len() {
                format!("{shown}:{line_number}:{short} [...]")
            } else {
                format!("{shown}:{line_number}:{text}")
            };
            bytes += result.len() + 1;
            results.push(result);
            Ok(true)
        });
        // An unreadable file is skipped, as ripgrep would (with a message we do not need).
        let _ = searcher.search_path(&matcher, entry.path(), sink);
        if more { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    });

    let mut out = String::new();
    if info.target_ignored {
        out.push_str(&format!(
            "(`{}` is normally skipped (by .gitignore or as .git); searched anyway)\n",
            target.shown()
        ));
    }
    if results.is_empty() {
        out.push_str(&format!("No matches for /{pattern}/ in `{}`.\n", target.shown()));
    }
    for r in &results {
        out.push_str(r);
        out.push('\n');
    }
    if more {
        out.push_str(&format!(
            "[results truncated: the first {} matching lines are shown; narrow the pattern or the path{}]\n",
            results.len(),
            if (results.len() as u64) < MAX_RESULTS { ", or pass a larger `max_results`" } else { "" }
        ));
    }
    Ok(ToolOutcome::ok(out))
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::Fixture;

    #[tokio::test]
    async fn search_finds_regex_matches_and_respects_gitignore() {
        let f = Fixture::new();
        f.put(".gitignore", "build/\n");
        f.put("src/a.rs", "fn alpha() {}\nfn beta() {}\nlet x = alpha();\n");
        f.put("src/b.rs", "// nothing here\nfn gamma_2() {}\n");
        f.put("build/gen.rs", "fn alpha_generated() {}\n");
        f.put(".git/info", "fn alpha_in_git() {}\n");
        std::fs::write(f.wt().join("blob.bin"), b"fn alpha\0binary").unwrap();

        let out = f.ok("search", json!({"pattern": r"fn \w+\(\)"})).await;
        assert_eq!(out.content, "src/a.rs:1:fn alpha() {}\nsrc/a.rs:2:fn beta() {}\nsrc/b.rs:2:fn gamma_2() {}\n");

        let out = f.ok("search", json!({"pattern": "alpha", "path": "src/a.rs"})).await;
        assert_eq!(out.content, "src/a.rs:1:fn alpha() {}\nsrc/a.rs:3:let x = alpha();\n");

        let out = f.ok("search", json!({"pattern": "(?i)GAMMA", "path": "src"})).await;
        assert_eq!(out.content, "src/b.rs:2:fn gamma_2() {}\n");

        // The ignored directory, searched by name.
        let out = f.ok("search", json!({"pattern": "alpha", "path": "build"})).await;
        assert!(out.content.contains("build/gen.rs:1:fn alpha_generated() {}"), "{}", out.content);
        assert!(out.content.contains("normally skipped"), "{}", out.content);

        let out = f.ok("search", json!({"pattern": "zeta"})).await;
        assert!(out.content.starts_with("No matches for /zeta/"), "{}", out.content);
    }

    #[tokio::test]
    async fn search_caps_results_with_a_note() {
        let f = Fixture::new();
        let text: String = (1..=50).map(|i| format!("match {i}\n")).collect();
        f.put("many.txt", &text);
        let out = f.ok("search", json!({"pattern": "^match", "max_results": 5})).await;
        let lines: Vec<_> = out.content.lines().collect();
        assert_eq!(lines.len(), 6, "{}", out.content);
        assert_eq!(lines[4], "many.txt:5:match 5");
        assert!(lines[5].starts_with("[results truncated: the first 5"), "{}", lines[5]);
    }

    #[tokio::test]
    async fn search_reports_a_bad_regex() {
        let f = Fixture::new();
        let out = f.err("search", json!({"pattern": "fn main("})).await;
        assert!(out.content.contains("invalid regular expression"), "{}", out.content);
        assert!(out.content.contains("Example call: search"), "{}", out.content);
        let out = f.err("search", json!({"pattern": ""})).await;
        assert!(out.content.contains("empty"), "{}", out.content);
    }
}
