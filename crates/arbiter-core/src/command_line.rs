//! Shell command lines: the program one starts (for checking it exists before a run
//! spends anything), and quoting a word for one.
//!
//! Only the simple, common shape is understood: optional `NAME=value` assignments, then a
//! program word. Anything more complex (a subshell, a compound command) yields `None` and is
//! left to the shell.

/// What a command line starts with.
#[derive(Debug, PartialEq, Eq)]
pub enum Program<'a> {
    /// A shell builtin or keyword: always available.
    Builtin(&'a str),
    /// A path containing `/`, relative to the working directory or absolute.
    Path(&'a str),
    /// A bare name looked up on `PATH`.
    Name(&'a str),
}

/// `word` as one `sh` word: as it is when it holds only characters the shell takes
/// literally, else single-quoted.
pub fn shell_word(word: &str) -> String {
    let plain = !word.is_empty() && word.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_./=:,@+%".contains(&b));
    if plain { word.to_string() } else { format!("'{}'", word.replace('\'', r"'\''")) }
}

const BUILTINS: &[&str] = &[
    ".", ":", "[", "alias", "cd", "command", "echo", "eval", "exec", "exit", "export", "false", "if", "for", "while",
    "until", "case", "printf", "pwd", "read", "set", "shift", "test", "true", "type", "ulimit", "umask", "unset",
    "wait", "{", "(", "!",
];

/// The program a command line runs, or `None` when the line is not a simple command.
pub fn first_program(line: &str) -> Option<Program<'_>> {
    for word in line.split_whitespace() {
        if is_assignment(word) {
            continue;
        }
        if word.starts_with('(') || word.starts_with('{') || word.contains('$') || word.contains('`') {
            return None;
        }
        let word = word.trim_matches(|c| c == '"' || c == '\'');
        if word.is_empty() {
            return None;
        }
        if BUILTINS.contains(&word) {
            return Some(Program::Builtin(word));
        }
        if word.contains('/') {
            return Some(Program::Path(word));
        }
        return Some(Program::Name(word));
    }
    None
}

/// Whether `word` is a shell variable assignment (`NAME=value`, the name a letter or `_`
/// followed by letters, digits and `_`): the words a simple command starts with before its
/// program.
pub(crate) fn is_assignment(word: &str) -> bool {
    word.split_once('=').is_some_and(|(name, _)| {
        name.bytes().next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
            && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_')
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn finds_the_program() {
        assert_eq!(first_program("python3 -m unittest -q"), Some(Program::Name("python3")));
        assert_eq!(first_program("FOO=1 BAR=x ./run.sh a"), Some(Program::Path("./run.sh")));
        assert_eq!(first_program("  test -f x"), Some(Program::Builtin("test")));
        assert_eq!(first_program("$CMD x"), None);
        assert_eq!(first_program("(cd a && make)"), None);
        assert_eq!(first_program(""), None);
    }
}
