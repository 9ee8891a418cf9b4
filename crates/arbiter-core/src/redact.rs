//! Removal of secrets from text before it is written to an artifact, an event, a log or
//! the terminal: known secret values (exact match) and common token shapes.

/// What replaces a secret.
pub const MASK: &str = "[REDACTED]";

/// Token prefixes that mark a secret when followed by a long run of token characters.
const TOKEN_PREFIXES: &[&str] =
    &["sk-", "sk_live_", "ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_", "xoxb-", "xoxp-", "glpat-"];

/// Redacts a fixed set of secret values plus recognizable token shapes.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    secrets: Vec<String>,
}

impl Redactor {
    /// A redactor for these secret values (values shorter than 6 characters are ignored:
    /// masking them would mangle ordinary text and they protect nothing).
    pub fn new<I: IntoIterator<Item = String>>(secrets: I) -> Self {
        let mut secrets: Vec<String> = secrets.into_iter().filter(|s| s.len() >= 6).collect();
        secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
        secrets.dedup();
        Redactor { secrets }
    }

    /// This redactor's secrets and `more`.
    pub fn with<I: IntoIterator<Item = String>>(&self, more: I) -> Self {
        Redactor::new(self.secrets.iter().cloned().chain(more))
    }

    pub fn redact(&self, text: &str) -> String {
        let mut out = text.to_string();
        for s in &self.secrets {
            if out.contains(s.as_str()) {
                out = out.replace(s.as_str(), MASK);
            }
        }
        redact_patterns(&out)
    }
}

fn is_token_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_' || c == '-'
}

/// Masks token-shaped secrets, `Bearer` credentials and passwords in URLs.
pub fn redact_patterns(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    'outer: while !rest.is_empty() {
        for prefix in TOKEN_PREFIXES {
            if rest.starts_with(prefix) && boundary_before(text, rest) {
                let body_len = rest[prefix.len()..].chars().take_while(|c| is_token_char(*c)).count();
                if body_len >= 16 {
                    out.push_str(prefix);
                    out.push_str(MASK);
                    rest = &rest[prefix.len() + body_len..];
                    continue 'outer;
                }
            }
        }
        for scheme in ["Bearer ", "bearer "] {
            if let Some(after) = rest.strip_prefix(scheme) {
                let len = after.chars().take_while(|c| !c.is_whitespace() && *c != '"' && *c != '\'').count();
                if len >= 8 {
                    out.push_str(scheme);
                    out.push_str(MASK);
                    rest = &after[len..];
                    continue 'outer;
                }
            }
        }
        if let Some(after) = rest.strip_prefix("://") {
            // scheme://user:password@host
            let auth_len = after.find(|c: char| c == '/' || c.is_whitespace()).unwrap_or(after.len());
            let auth = &after[..auth_len];
            if let (Some(at), Some(colon)) = (auth.rfind('@'), auth.find(':'))
                && colon < at
            {
                out.push_str("://");
                out.push_str(&auth[..=colon]);
                out.push_str(MASK);
                rest = &after[at..];
                continue 'outer;
            }
        }
        let ch = rest.chars().next().unwrap_or(' ');
        out.push(ch);
        rest = &rest[ch.len_utf8()..];
    }
    out
}

fn boundary_before(whole: &str, rest: &str) -> bool {
    let offset = whole.len() - rest.len();
    whole[..offset].chars().next_back().is_none_or(|c| !is_token_char(c))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn masks_known_values_and_shapes() {
        let r = Redactor::new(vec!["hunter2-secret".to_string(), "abc".to_string()]);
        let s = r.redact(
            "key=hunter2-secret abc sk-ABCDEFGHIJKLMNOPQRSTUV Authorization: Bearer tok_12345678 postgres://u:pw@db/x",
        );
        assert!(!s.contains("hunter2"));
        assert!(s.contains("abc"));
        assert!(!s.contains("ABCDEFGHIJKLMNOP"));
        assert!(!s.contains("tok_12345678"));
        assert!(!s.contains(":pw@"));
        assert!(s.contains("postgres://u:[REDACTED]@db/x"), "{s}");
    }

    #[test]
    fn leaves_ordinary_text() {
        let t = "task-runner sk-short https://example.com/path a:b@c";
        assert_eq!(redact_patterns(t), t);
    }
}
