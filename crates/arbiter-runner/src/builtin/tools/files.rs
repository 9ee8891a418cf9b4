//! The file tools: `list_files`, `read_file`, `write_file` and `edit_file`.

use std::fs;
use std::io::{BufRead, BufReader};
use std::ops::ControlFlow;

use serde_json::Value;

use super::paths::{Access, relative, resolve, walk};
use super::{ToolOutcome, ToolResult, Toolbox, bad_args, cut, failed, opt_str, opt_uint, req_str};

pub(super) const DEFAULT_LIST_ENTRIES: u64 = 500;
pub(super) const MAX_LIST_ENTRIES: u64 = 5000;
/// Entries counted past the limit, to say how many were left out.
const MAX_COUNTED: usize = 100_000;
/// Longest line `read_file` shows whole.
const MAX_LINE_BYTES: usize = 2000;

pub(super) fn list_files(tb: &Toolbox, args: &Value) -> ToolResult {
    let path = opt_str(args, "path")?.unwrap_or(".");
    let max = match opt_uint(args, "max_entries")? {
        Some(0) => return Err(bad_args("`max_entries` must be at least 1.")),
        Some(n) => n.min(MAX_LIST_ENTRIES),
        None => DEFAULT_LIST_ENTRIES,
    } as usize;
    let target = resolve(&tb.root, path, Access::Read).map_err(failed)?;
    if !target.real.is_dir() {
        return Ok(ToolOutcome::ok(format!("{} (a file, not a directory)", target.shown())));
    }

    let mut lines = Vec::new();
    let mut bytes = 0;
    let mut total = 0usize;
    let info = walk(&tb.root, &target.real, |entry| {
        if entry.path() == target.real {
            return ControlFlow::Continue(());
        }
        total += 1;
        if lines.len() < max && bytes < tb.output_limit {
            let mut line = relative(&tb.root, entry.path());
            match entry.file_type() {
                Some(t) if t.is_dir() => line.push('/'),
                Some(t) if t.is_symlink() => {
                    if let Ok(to) = fs::read_link(entry.path()) {
                        line.push_str(&format!(" -> {}", to.display()));
                    }
                }
                _ => {}
            }
            bytes += line.len() + 1;
            lines.push(line);
        }
        if total >= MAX_COUNTED { ControlFlow::Break(()) } else { ControlFlow::Continue(()) }
    });

    let mut out = String::new();
    if info.target_ignored {
        out.push_str(&format!(
            "(`{}` is normally skipped (by .gitignore or as .git); listed anyway)\n",
            target.shown()
        ));
    }
    if lines.is_empty() {
        out.push_str("(empty directory)\n");
    }
    for line in &lines {
        out.push_str(line);
        out.push('\n');
    }
    if lines.len() < total {
        let total = if total >= MAX_COUNTED { format!("more than {MAX_COUNTED}") } else { total.to_string() };
        out.push_str(&format!(
            "[list truncated: {} of {total} entries shown; list a subdirectory with `path`{}]\n",
            lines.len(),
            if (lines.len() as u64) < MAX_LIST_ENTRIES { " or pass a larger `max_entries`" } else { "" }
        ));
    }
    Ok(ToolOutcome::ok(out))
}

pub(super) fn read_file(tb: &Toolbox, args: &Value) -> ToolResult {
    let path = req_str(args, "path")?;
    let start = opt_uint(args, "start_line")?;
    let end = opt_uint(args, "end_line")?;
    if start == Some(0) || end == Some(0) {
        return Err(bad_args("lines are numbered from 1."));
    }
    let start = start.unwrap_or(1);
    let end = end.unwrap_or(u64::MAX);
    if end < start {
        return Err(bad_args(format!("`end_line` ({end}) is before `start_line` ({start}).")));
    }
    let target = resolve(&tb.root, path, Access::Read).map_err(failed)?;
    if target.real.is_dir() {
        return Err(failed(format!("`{}` is a directory; use list_files to see its contents.", target.shown())));
    }
    let file = fs::File::open(&target.real).map_err(|e| failed(format!("cannot read `{}`: {e}.", target.shown())))?;
    let mut reader = BufReader::new(file);
    let io_err = |e: std::io::Error| failed(format!("cannot read `{}`: {e}.", target.shown()));
    if reader.fill_buf().map_err(io_err)?.contains(&0) {
        return Err(failed(format!("`{}` looks like a binary file; it is not shown.", target.shown())));
    }

    let mut out = String::new();
    let mut line = Vec::new();
    let mut n = 0u64;
    let mut cut_after: Option<u64> = None;
    loop {
        line.clear();
        if reader.read_until(b'\n', &mut line).map_err(io_err)? == 0 {
            break;
        }
        n += 1;
        if n < start || n > end || cut_after.is_some() {
            continue;
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end_matches('\n').trim_end_matches('\r');
        let shown = cut(text, MAX_LINE_BYTES);
        let entry = if shown.len() < text.len() {
            format!("{n:>6}\t{shown} [... line truncated: {} more bytes]\n", text.len() - shown.len())
        } else {
            format!("{n:>6}\t{text}\n")
        };
        if out.len() + entry.len() > tb.output_limit && !out.is_empty() {
            cut_after = Some(n - 1);
            continue;
        }
        out.push_str(&entry);
    }
    let total = n;
    if total == 0 {
        return Ok(ToolOutcome::ok(format!("(`{}` is empty)", target.shown())));
    }
    if start > total {
        return Err(failed(format!("`{}` has {total} lines; start_line {start} is past the end.", target.shown())));
    }
    if let Some(last) = cut_after {
        out.push_str(&format!(
            "[output truncated after line {last} of {total}: call read_file again with start_line={}]\n",
            last + 1
        ));
    } else if start > 1 || end < total {
        out.push_str(&format!("[lines {start}-{} of {total}]\n", end.min(total)));
    }
    Ok(ToolOutcome::ok(out))
}

pub(super) fn write_file(tb: &Toolbox, args: &Value) -> ToolResult {
    let path = req_str(args, "path")?;
    let content = req_str(args, "content")?;
    let target = resolve(&tb.root, path, Access::Write).map_err(failed)?;
    if target.real.is_dir() {
        return Err(failed(format!("`{}` is a directory; give a file path.", target.shown())));
    }
    if let Some(parent) = target.real.parent() {
        fs::create_dir_all(parent)
            .map_err(|e| failed(format!("cannot create the directories for `{}`: {e}.", target.shown())))?;
    }
    fs::write(&target.real, content).map_err(|e| failed(format!("cannot write `{}`: {e}.", target.shown())))?;
    let lines = content.lines().count();
    Ok(ToolOutcome {
        content: format!(
            "{} `{}` ({} bytes, {lines} lines).",
            if target.exists { "Overwrote" } else { "Created" },
            target.shown(),
            content.len()
        ),
        touched: Some(target.shown()),
        ..Default::default()
    })
}

pub(super) fn edit_file(tb: &Toolbox, args: &Value) -> ToolResult {
    let path = req_str(args, "path")?;
    let old = req_str(args, "old")?;
    let new = req_str(args, "new")?;
    if old.is_empty() {
        return Err(bad_args("`old` is empty: give the exact text to replace (use write_file to create a file)."));
    }
    if old == new {
        return Err(bad_args("`old` and `new` are the same; there is nothing to change."));
    }
    let target = resolve(&tb.root, path, Access::Write).map_err(failed)?;
    if !target.exists {
        return Err(failed(format!("`{}` does not exist; use write_file to create it.", target.shown())));
    }
    if target.real.is_dir() {
        return Err(failed(format!("`{}` is a directory, not a file.", target.shown())));
    }
    let bytes = fs::read(&target.real).map_err(|e| failed(format!("cannot read `{}`: {e}.", target.shown())))?;
    let Ok(text) = String::from_utf8(bytes) else {
        return Err(failed(format!(
            "`{}` is not UTF-8 text; edit_file cannot change it (use run_shell or write_file).",
            target.shown()
        )));
    };

    let (mut old, mut new) = (old.to_string(), new.to_string());
    let mut count = text.matches(old.as_str()).count();
    if count == 0 && text.contains("\r\n") && old.contains('\n') && !old.contains("\r\n") {
        // A file with CRLF line endings, an edit written with LF.
        let (crlf_old, crlf_new) = (old.replace('\n', "\r\n"), new.replace('\n', "\r\n"));
        count = text.matches(crlf_old.as_str()).count();
        if count > 0 {
            (old, new) = (crlf_old, crlf_new);
        }
    }
    match count {
        0 => Err(failed(format!(
            "the text in `old` was not found in `{}`. It must match the file exactly, character for character \
             (whitespace and indentation included, without read_file's line-number prefixes). Read the file again \
             with read_file and copy the text exactly.",
            target.shown()
        ))),
        1 => {
            let at = text.find(old.as_str()).unwrap_or(0);
            let line = text[..at].matches('\n').count() + 1;
            let updated = text.replacen(old.as_str(), new.as_str(), 1);
            fs::write(&target.real, &updated)
                .map_err(|e| failed(format!("cannot write `{}`: {e}.", target.shown())))?;
            Ok(ToolOutcome {
                content: format!(
                    "Edited `{}` at line {line}: replaced {} line(s) with {}.",
                    target.shown(),
                    old.lines().count().max(1),
                    new.lines().count()
                ),
                touched: Some(target.shown()),
                ..Default::default()
            })
        }
        n => Err(failed(format!(
            "the text in `old` occurs {n} times in `{}`; it must occur exactly once. Include more of the \
             surrounding lines in `old` (and the same in `new`) so that it matches only the place to change.",
            target.shown()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::super::test_support::Fixture;

    #[tokio::test]
    async fn list_files_is_sorted_respects_gitignore_and_skips_git() {
        let f = Fixture::new();
        f.put(".gitignore", "target/\n*.log\n");
        f.put(".hidden", "h");
        f.put(".git/HEAD", "ref: refs/heads/main\n");
        f.put("b.txt", "b");
        f.put("a.txt", "a");
        f.put("debug.log", "noise");
        f.put("src/lib.rs", "");
        f.put("src/main.rs", "");
        f.put("target/debug/app", "bin");
        let out = f.ok("list_files", json!({})).await;
        assert_eq!(out.content, ".gitignore\n.hidden\na.txt\nb.txt\nsrc/\nsrc/lib.rs\nsrc/main.rs\n");

        let out = f.ok("list_files", json!({"path": "src"})).await;
        assert_eq!(out.content, "src/lib.rs\nsrc/main.rs\n");

        // An ignored directory asked for by name is listed anyway, with a note.
        let out = f.ok("list_files", json!({"path": "target"})).await;
        assert!(out.content.contains("normally skipped"), "{}", out.content);
        assert!(out.content.contains("target/debug/app"), "{}", out.content);

        let out = f.ok("list_files", json!({"path": "a.txt"})).await;
        assert!(out.content.contains("a file, not a directory"));

        let out = f.err("list_files", json!({"path": "nope"})).await;
        assert!(out.content.contains("does not exist"), "{}", out.content);
    }

    #[tokio::test]
    async fn list_files_truncates_with_a_note() {
        let f = Fixture::new();
        for i in 0..30 {
            f.put(&format!("f{i:02}.txt"), "");
        }
        let out = f.ok("list_files", json!({"max_entries": 10})).await;
        let lines: Vec<_> = out.content.lines().collect();
        assert_eq!(lines.len(), 11, "{}", out.content);
        assert_eq!(lines[0], "f00.txt");
        assert_eq!(lines[9], "f09.txt");
        assert!(lines[10].contains("[list truncated: 10 of 30 entries shown"), "{}", lines[10]);

        let f = Fixture::new();
        std::fs::create_dir(f.wt().join("empty")).unwrap();
        let out = f.ok("list_files", json!({"path": "empty"})).await;
        assert_eq!(out.content, "(empty directory)\n");
    }

    #[tokio::test]
    async fn read_file_numbers_lines_and_honours_ranges() {
        let f = Fixture::new();
        f.put("a.txt", "one\ntwo\nthree\nfour\nfive");
        let out = f.ok("read_file", json!({"path": "a.txt"})).await;
        assert_eq!(out.content, "     1\tone\n     2\ttwo\n     3\tthree\n     4\tfour\n     5\tfive\n");

        let out = f.ok("read_file", json!({"path": "a.txt", "start_line": 2, "end_line": 3})).await;
        assert_eq!(out.content, "     2\ttwo\n     3\tthree\n[lines 2-3 of 5]\n");
        let out = f.ok("read_file", json!({"path": "a.txt", "start_line": 4})).await;
        assert_eq!(out.content, "     4\tfour\n     5\tfive\n[lines 4-5 of 5]\n");
        let out = f.ok("read_file", json!({"path": "a.txt", "end_line": 1})).await;
        assert_eq!(out.content, "     1\tone\n[lines 1-1 of 5]\n");
        let out = f.ok("read_file", json!({"path": "a.txt", "start_line": 5, "end_line": 99})).await;
        assert_eq!(out.content, "     5\tfive\n[lines 5-5 of 5]\n");

        let out = f.err("read_file", json!({"path": "a.txt", "start_line": 9})).await;
        assert!(out.content.contains("has 5 lines"), "{}", out.content);
        let out = f.err("read_file", json!({"path": "a.txt", "start_line": 3, "end_line": 2})).await;
        assert!(out.content.contains("before `start_line`"), "{}", out.content);
        let out = f.err("read_file", json!({"path": "a.txt", "start_line": 0})).await;
        assert!(out.content.contains("numbered from 1"), "{}", out.content);
    }

    #[tokio::test]
    async fn read_file_errors_and_limits() {
        let f = Fixture::new();
        f.put("dir/x", "");
        f.put("empty.txt", "");
        std::fs::write(f.wt().join("bin"), b"\x7fELF\0\0\x01").unwrap();
        assert!(f.err("read_file", json!({"path": "dir"})).await.content.contains("is a directory"));
        assert!(f.err("read_file", json!({"path": "missing.rs"})).await.content.contains("does not exist"));
        assert!(f.err("read_file", json!({"path": "bin"})).await.content.contains("binary"));
        assert!(f.ok("read_file", json!({"path": "empty.txt"})).await.content.contains("is empty"));

        let f = Fixture::new();
        let toolbox = f.toolbox.clone().with_output_limit(1000);
        let text: String = (1..=500).map(|i| format!("line number {i}\n")).collect();
        f.put("big.txt", &text);
        let out = toolbox.call("read_file", &json!({"path": "big.txt"})).await;
        assert!(!out.is_error);
        assert!(out.content.len() < 1200, "{}", out.content.len());
        assert!(out.content.starts_with("     1\tline number 1\n"));
        let note = out.content.lines().last().unwrap();
        assert!(note.starts_with("[output truncated after line "), "{note}");
        assert!(note.contains("of 500: call read_file again with start_line="), "{note}");

        let long = "x".repeat(5000);
        f.put("long.txt", &long);
        let out = f.ok("read_file", json!({"path": "long.txt"})).await;
        assert!(out.content.contains("[... line truncated: 3000 more bytes]"), "{}", out.content);
    }

    #[tokio::test]
    async fn write_file_creates_parents_and_reports_the_path() {
        let f = Fixture::new();
        let out = f.ok("write_file", json!({"path": "src/deep/new.rs", "content": "fn a() {}\n"})).await;
        assert_eq!(out.touched.as_deref(), Some("src/deep/new.rs"));
        assert!(out.content.starts_with("Created `src/deep/new.rs`"), "{}", out.content);
        assert_eq!(f.get("src/deep/new.rs"), "fn a() {}\n");

        let out = f.ok("write_file", json!({"path": "src/deep/new.rs", "content": ""})).await;
        assert!(out.content.starts_with("Overwrote"), "{}", out.content);
        assert_eq!(f.get("src/deep/new.rs"), "");

        let out = f.err("write_file", json!({"path": "src", "content": "x"})).await;
        assert!(out.content.contains("is a directory"), "{}", out.content);
        f.put("file", "x");
        let out = f.err("write_file", json!({"path": "file/child", "content": "x"})).await;
        assert!(out.content.contains("not a directory"), "{}", out.content);
    }

    #[tokio::test]
    async fn edit_file_replaces_a_unique_match() {
        let f = Fixture::new();
        f.put("m.rs", "fn main() {\n    let x = 1;\n    println!(\"{x}\");\n}\n");
        let out = f
            .ok(
                "edit_file",
                json!({"path": "m.rs", "old": "    let x = 1;\n", "new": "    let x = 2;\n    let y = 3;\n"}),
            )
            .await;
        assert_eq!(out.touched.as_deref(), Some("m.rs"));
        assert!(out.content.contains("at line 2"), "{}", out.content);
        assert_eq!(f.get("m.rs"), "fn main() {\n    let x = 2;\n    let y = 3;\n    println!(\"{x}\");\n}\n");
    }

    #[tokio::test]
    async fn edit_file_uniqueness_errors() {
        let f = Fixture::new();
        let original = "a = 1\nb = 1\nc = 1\n";
        f.put("v.py", original);

        let out = f.err("edit_file", json!({"path": "v.py", "old": "= 1", "new": "= 2"})).await;
        assert!(out.content.contains("occurs 3 times"), "{}", out.content);
        assert!(out.content.contains("Include more"), "{}", out.content);
        assert!(out.touched.is_none());

        let out = f.err("edit_file", json!({"path": "v.py", "old": "d = 1", "new": "d = 2"})).await;
        assert!(out.content.contains("was not found"), "{}", out.content);
        assert!(out.content.contains("read_file"), "{}", out.content);

        f.err("edit_file", json!({"path": "v.py", "old": "", "new": "x"})).await;
        f.err("edit_file", json!({"path": "v.py", "old": "a = 1", "new": "a = 1"})).await;
        let out = f.err("edit_file", json!({"path": "nope.py", "old": "a", "new": "b"})).await;
        assert!(out.content.contains("use write_file"), "{}", out.content);
        assert!(!f.wt().join("nope.py").exists());
        assert_eq!(f.get("v.py"), original);

        f.ok("edit_file", json!({"path": "v.py", "old": "b = 1", "new": "b = 2"})).await;
        assert_eq!(f.get("v.py"), "a = 1\nb = 2\nc = 1\n");
    }

    #[tokio::test]
    async fn edit_file_handles_crlf_files() {
        let f = Fixture::new();
        f.put("w.txt", "one\r\ntwo\r\nthree\r\n");
        f.ok("edit_file", json!({"path": "w.txt", "old": "one\ntwo\n", "new": "1\n2\n"})).await;
        assert_eq!(f.get("w.txt"), "1\r\n2\r\nthree\r\n");
    }
}
