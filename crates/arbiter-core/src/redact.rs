//! Removal of secrets from text before it is written to an artifact, an event, a log or
//! the terminal: known secret values (exact match) and common token shapes.
//!
//! [`KnownSecrets`] are the values arbiter knows to be secret, each with where it came from
//! (an environment variable's name, the secrets file): a captured patch is searched for
//! them — as they are, and hex- and base64-encoded, at any alignment — and every artifact
//! is redacted of all these forms.

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

/// Values arbiter knows to be secret, each named by where it came from (never by its value).
#[derive(Clone, Debug, Default)]
pub struct KnownSecrets {
    /// (source, value) — and, for each, the encoded forms searched and masked too.
    entries: Vec<(String, Vec<String>)>,
}

/// Forms shorter than this are not searched for: they would match ordinary text.
const MIN_FORM_LEN: usize = 12;

impl KnownSecrets {
    /// Adds `value` as the secret from `source`; a URL's password counts too. Values shorter
    /// than 6 characters are ignored (like [`Redactor::new`]).
    pub fn add(&mut self, source: impl Into<String>, value: &str) {
        let source = source.into();
        let mut values = vec![value.to_string()];
        if let Some(password) = url_password(value) {
            values.push(password.to_string());
        }
        for v in values.into_iter().filter(|v| v.len() >= 6) {
            let mut forms = vec![v.clone()];
            forms.extend(encodings(v.as_bytes()).into_iter().filter(|f| f.len() >= MIN_FORM_LEN));
            forms.sort();
            forms.dedup();
            self.entries.push((source.clone(), forms));
        }
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// The sources of the secrets `text` holds, in any form (each source once).
    pub fn found_in(&self, text: &str) -> Vec<String> {
        let mut found: Vec<String> = Vec::new();
        for (source, forms) in &self.entries {
            if !found.contains(source) && forms.iter().any(|f| text.contains(f.as_str())) {
                found.push(source.clone());
            }
        }
        found
    }

    /// A redactor of every form of every secret.
    pub fn redactor(&self) -> Redactor {
        Redactor::new(self.entries.iter().flat_map(|(_, forms)| forms.iter().cloned()))
    }
}

/// The password of `scheme://user:password@host...`.
fn url_password(value: &str) -> Option<&str> {
    let after = &value[value.find("://")? + 3..];
    let auth = &after[..after.find('/').unwrap_or(after.len())];
    let at = auth.rfind('@')?;
    let colon = auth[..at].find(':')?;
    Some(&auth[colon + 1..at])
}

/// Hex (lower and upper case) and base64 (standard and URL-safe) of `bytes`: whole, and the
/// part that stays the same wherever the value sits in a longer encoded text (base64 packs
/// 3 bytes into 4 characters, so each of the 3 alignments has its own stable core).
fn encodings(bytes: &[u8]) -> Vec<String> {
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    let mut out = vec![hex.to_uppercase(), hex];
    for offset in 0..3usize {
        let mut padded = vec![0u8; offset];
        padded.extend_from_slice(bytes);
        let full = base64(&padded, false);
        // Characters that depend only on the secret: skip those mixing in the bytes before
        // it, and the last group, which mixes in the bytes after it.
        let skip = (offset * 4).div_ceil(3);
        let stable_end = (padded.len() / 3) * 4;
        if stable_end > skip {
            let core = &full[skip..stable_end];
            out.push(core.to_string());
            out.push(core.replace('+', "-").replace('/', "_"));
        }
        if offset == 0 {
            out.push(full.trim_end_matches('=').to_string());
            out.push(base64(&padded, true).trim_end_matches('=').to_string());
        }
    }
    out
}

fn base64(bytes: &[u8], url_safe: bool) -> String {
    const STD: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    const URL: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let table = if url_safe { URL } else { STD };
    let mut out = String::with_capacity(bytes.len().div_ceil(3) * 4);
    for chunk in bytes.chunks(3) {
        let b = [chunk[0], *chunk.get(1).unwrap_or(&0), *chunk.get(2).unwrap_or(&0)];
        let n = (u32::from(b[0]) << 16) | (u32::from(b[1]) << 8) | u32::from(b[2]);
        for i in 0..4 {
            if i <= chunk.len() {
                out.push(table[((n >> (18 - 6 * i)) & 63) as usize] as char);
            } else {
                out.push('=');
            }
        }
    }
    out
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
    fn known_secrets_are_found_plain_hex_and_base64_at_any_alignment_and_redacted() {
        let mut known = KnownSecrets::default();
        known.add("OPENAI_API_KEY", "sk-live-0123456789abcdefXYZ");
        known.add("ARBITER_DATABASE_URL", "postgres://app:db-pass-98765@db.internal/prod");
        known.add("SHORT", "abc");
        let secret = b"sk-live-0123456789abcdefXYZ";
        for prefix in ["", "x", "xy", "xyz"] {
            let mut blob = prefix.as_bytes().to_vec();
            blob.extend_from_slice(secret);
            blob.extend_from_slice(b"trailing");
            let encoded = base64(&blob, false);
            let text = format!("+const data = \"{encoded}\";\n");
            assert_eq!(known.found_in(&text), vec!["OPENAI_API_KEY".to_string()], "prefix {prefix:?}: {text}");
            let redacted = known.redactor().redact(&text);
            assert!(known.found_in(&redacted).is_empty(), "{redacted}");
        }
        let hex: String = secret.iter().map(|b| format!("{b:02x}")).collect();
        assert_eq!(known.found_in(&hex), vec!["OPENAI_API_KEY".to_string()]);
        assert_eq!(known.found_in("password is db-pass-98765"), vec!["ARBITER_DATABASE_URL".to_string()]);
        assert!(known.found_in("abc and ordinary text, sk-live-0123").is_empty());
        assert_eq!(base64(b"Man", false), "TWFu");
        assert_eq!(base64(b"Ma", false), "TWE=");
        assert_eq!(base64(b"\xfb\xff", true), "-_8=");
    }

    #[test]
    fn leaves_ordinary_text() {
        let t = "task-runner sk-short https://example.com/path a:b@c";
        assert_eq!(redact_patterns(t), t);
    }
}
