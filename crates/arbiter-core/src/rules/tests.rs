//! The rules engine on orch.py's own examples (research file §5.1), from a rule file
//! written by hand in orch.py's format.

use super::*;

/// orch.py's format, one check of each kind and filter, as its examples write them.
const ORCH_RULES: &str = r##"{
  "lang": "python",
  "checks": [
    {"id": "comment", "group": "standards", "kind": "line", "pattern": "^\\s*#", "exclude": ["noqa", "# -*-", "#!/"], "message": "comments not allowed"},
    {"id": "no-print", "group": "standards", "kind": "line", "pattern": "print\\(", "exclude": ["logger"], "message": "print() not allowed"},
    {"id": "no-emoji", "group": "standards", "kind": "line", "pattern": "[\\U0001F600-\\U0010FFFF]", "message": "emojis not allowed"},
    {"id": "schema-basemodel", "group": "structure", "kind": "text-required", "only": ["Schema.py"], "contains": ["BaseModel"], "message": "Schema.py must import and use pydantic.BaseModel"},
    {"id": "not-in-tests", "group": "standards", "kind": "text-required", "except": ["Tests.py"], "contains": ["logging_func"], "message": "use the shared logger"},
    {"id": "skip-schemas", "group": "standards", "kind": "text-required", "skip": {"name": ["Schema.py"], "contains": ["BaseModel"]}, "contains": ["logger"], "message": "needs a logger"},
    {"id": "balanced", "group": "structure", "kind": "balanced", "pairs": [
      {"open": "(", "close": ")", "message": "unbalanced parentheses: {open} vs {close}"},
      {"token": "'''", "mode": "odd", "message": "unterminated '''"},
      {"token": "\"\"\"", "mode": "odd", "message": "unterminated \"\"\""}
    ]},
    {"id": "return-types", "group": "standards", "kind": "py-ast", "check": "return_annotations", "message": "missing return type"},
    {"id": "future", "group": "standards", "kind": "py-ast", "check": "no_such_check", "message": "x"},
    {"id": "later", "group": "standards", "kind": "yaml-lint", "message": "x"}
  ]
}"##;

fn book() -> RuleBook {
    let file = RuleFile {
        lang: Language::Python,
        source: "rules/python/core.json".into(),
        role: RuleFileRole::Core,
        text: ORCH_RULES.into(),
    };
    RuleBook::assemble(false, &[file]).expect("orch.py's format reads")
}

fn lines(vs: &[Violation]) -> Vec<String> {
    vs.iter().map(|v| v.to_string()).collect()
}

fn rules_of(vs: &[Violation]) -> Vec<&str> {
    vs.iter().map(|v| v.rule.as_str()).collect()
}

#[test]
fn unknown_kinds_and_checks_are_left_out_with_a_warning() {
    let b = book();
    assert_eq!(b.sets[0].checks.len(), 8);
    assert_eq!(b.warnings.len(), 2, "{:?}", b.warnings);
    assert!(b.warnings.iter().any(|w| w.contains("'no_such_check'")), "{:?}", b.warnings);
    assert!(b.warnings.iter().any(|w| w.contains("kind 'yaml-lint'")), "{:?}", b.warnings);
}

#[test]
fn line_rules_report_each_line_and_honour_exclusions() {
    let text =
        "#!/usr/bin/env python\n# a comment\nx = 1  # noqa\nprint(x)\nlogger.info(print(x))\ns = \"\u{1F600}\"\n";
    let v = book().check_file("pkg/Handler.py", text, None, Some(&["standards".to_string()]));
    let found: Vec<(&str, u32)> = v.iter().map(|v| (v.rule.as_str(), v.line)).collect();
    assert!(found.contains(&("comment", 2)), "{found:?}");
    assert!(!found.iter().any(|(r, l)| *r == "comment" && (*l == 1 || *l == 3)), "{found:?}");
    assert!(found.contains(&("no-print", 4)), "{found:?}");
    assert!(!found.contains(&("no-print", 5)), "a line mentioning logger is exempt: {found:?}");
    assert!(found.contains(&("no-emoji", 6)), "{found:?}");
    assert_eq!(lines(&v[..1]), vec!["pkg/Handler.py:2 comments not allowed"]);
}

#[test]
fn only_applies_a_check_to_the_files_it_names() {
    let b = book();
    let structure = Some(&["structure".to_string()][..]);
    let v = b.check_file("f/Schema.py", "class S:\n    pass\n", None, structure);
    assert_eq!(lines(&v), vec!["f/Schema.py: Schema.py must import and use pydantic.BaseModel"]);
    assert!(b.check_file("f/Handler.py", "class S:\n    pass\n", None, structure).is_empty());
}

#[test]
fn except_and_skip_exempt_files() {
    let b = book();
    let standards = Some(&["standards".to_string()][..]);
    let in_tests = b.check_file("f/Tests.py", "x = 1\n", None, standards);
    assert!(!rules_of(&in_tests).contains(&"not-in-tests"), "{in_tests:?}");
    let elsewhere = b.check_file("f/Handler.py", "x = 1\n", None, standards);
    assert!(rules_of(&elsewhere).contains(&"not-in-tests"), "{elsewhere:?}");
    // skip: the name is listed AND the text contains every listed string.
    let schema = b.check_file("f/Schema.py", "from pydantic import BaseModel\n", None, standards);
    assert!(!rules_of(&schema).contains(&"skip-schemas"), "{schema:?}");
    let plain_schema = b.check_file("f/Schema.py", "x = 1\n", None, standards);
    assert!(rules_of(&plain_schema).contains(&"skip-schemas"), "{plain_schema:?}");
}

#[test]
fn balanced_counts_outside_strings_and_comments() {
    let b = book();
    let structure = Some(&["structure".to_string()][..]);
    let fine = "x = f(\")\")  # (\ny = '''('''\n";
    assert!(b.check_file("a.py", fine, None, structure).is_empty());
    let v = b.check_file("a.py", "x = f((1)\n\"\"\"open\n", None, structure);
    assert_eq!(lines(&v), vec!["a.py: unbalanced parentheses: 2 vs 1", "a.py: unterminated \"\"\""]);
}

#[test]
fn groups_isolate_standards_from_structure() {
    let b = book();
    let text = "# c\nclass S:\n    pass\n";
    let standards = b.check_file("f/Schema.py", text, None, Some(&["standards".to_string()]));
    let structure = b.check_file("f/Schema.py", text, None, Some(&["structure".to_string()]));
    assert!(standards.iter().all(|v| v.rule != "schema-basemodel"));
    assert!(structure.iter().all(|v| v.rule != "comment"));
    assert!(rules_of(&structure).contains(&"schema-basemodel"));
    assert_eq!(b.groups(), vec!["standards", "structure"]);
}

#[test]
fn py_ast_checks_read_the_parse_and_a_syntax_error_is_reported_once() {
    let b = book();
    let facts = PythonParse::Parsed(python::PyFacts {
        functions: vec![
            python::PyFunction { name: "helper".into(), line: 3, returns: false, params: vec![] },
            python::PyFunction { name: "test_it".into(), line: 7, returns: false, params: vec![] },
        ],
        ..Default::default()
    });
    let v = b.check_file("f/Tests.py", "def helper():\n", Some(&facts), Some(&["standards".to_string()]));
    assert!(lines(&v).contains(&"f/Tests.py:3 helper missing return type".to_string()), "{v:?}");
    assert!(!lines(&v).iter().any(|l| l.contains("test_it")), "{v:?}");
    let broken = PythonParse::SyntaxError { line: 2, message: "invalid syntax".into() };
    let v = b.check_file("f/Tests.py", "def (:\n", Some(&broken), None);
    assert_eq!(v.iter().filter(|v| v.rule == "syntax").count(), 1, "{v:?}");
}

#[test]
fn files_of_other_languages_and_unknown_extensions_get_no_violations() {
    let b = book();
    assert!(b.check_file("a.vue", "# x\nprint(1)\n", None, None).is_empty());
    assert!(b.check_file("notes.txt", "# x\n", None, None).is_empty());
}

#[test]
fn languages_come_from_extensions() {
    assert_eq!(Language::of_path("a/b.py"), Some(Language::Python));
    assert_eq!(Language::of_path("x.ts"), Some(Language::Ts));
    assert_eq!(Language::of_path("x.js"), Some(Language::Ts));
    assert_eq!(Language::of_path("x.vue"), Some(Language::Vue));
    assert_eq!(Language::of_path("x.jinja2"), Some(Language::Jinja));
    assert_eq!(Language::of_path("Makefile"), None);
}

#[test]
fn a_core_file_replaces_the_shipped_core_and_extras_add_to_it() {
    let shipped = RuleBook::assemble(true, &[]).expect("the shipped sets read");
    assert!(shipped.warnings.is_empty(), "{:?}", shipped.warnings);
    assert!(shipped.checks(Language::Python, None).any(|c| c.id == "shared-logger"));
    assert!(shipped.checks(Language::Python, None).any(|c| c.id == "python-version"));
    let extra = RuleFile {
        lang: Language::Ts,
        source: ".arbiter/rules/ts/extra.json".into(),
        role: RuleFileRole::Extra,
        text: r#"{"checks": [{"id": "no-console", "kind": "line", "pattern": "console\\.log", "message": "no console.log"}]}"#
            .into(),
    };
    let core = RuleFile {
        lang: Language::Python,
        source: "rules/python/core.json".into(),
        role: RuleFileRole::Core,
        text: ORCH_RULES.into(),
    };
    let b = RuleBook::assemble(true, &[core, extra]).unwrap();
    assert!(!b.checks(Language::Python, None).any(|c| c.id == "shared-logger"), "the shipped core is replaced");
    assert!(b.checks(Language::Python, None).any(|c| c.id == "python-version"), "the constitution stays");
    let v = b.check_file("web/app.ts", "console.log(1)\n", None, None);
    assert_eq!(lines(&v), vec!["web/app.ts:1 no console.log"]);
}

#[test]
fn a_broken_rule_file_is_refused_with_the_check_and_the_fix() {
    let bad = |text: &str| parse_rule_file(Language::Python, "x.json", text).expect_err(text).to_string();
    assert!(bad("not json").contains("not a rule file"));
    assert!(bad(r#"{"checks": [{"id": "a", "kind": "line"}]}"#).contains("check 'a' (kind line) has no pattern"));
    let lookaround = bad(r#"{"checks": [{"id": "a", "kind": "line", "pattern": "(?<=x)y"}]}"#);
    assert!(lookaround.contains("check 'a' has a pattern arbiter cannot use"), "{lookaround}");
    let traversal = bad(r#"{"checks": [{"id": "p", "kind": "project", "require": ["../../etc/passwd"]}]}"#);
    assert!(traversal.contains("not a path inside the project"), "{traversal}");
}

#[test]
fn a_pattern_that_explodes_when_compiled_is_refused_and_none_backtracks() {
    let err = compile_pattern("(a{1000}){1000}").expect_err("too large a regex");
    assert!(!err.is_empty());
    assert!(compile_pattern(&"a".repeat(MAX_PATTERN_BYTES + 1)).is_err());
    // The classic catastrophic pattern runs in linear time on a long line.
    let re = compile_pattern("(a+)+$").unwrap();
    assert!(!re.is_match(&format!("{}b", "a".repeat(100_000))));
}

#[test]
fn python_escapes_of_the_emoji_range_are_translated() {
    assert_eq!(translate_python_escapes("[\\U0001F600-\\U0010FFFF]"), "[\\x{0001F600}-\\x{0010FFFF}]");
    assert_eq!(translate_python_escapes("\\u00e9\\Z\\d"), "\\x{00e9}\\z\\d");
}
