//! The environment given to agents, setup and verify commands: an allowlist.
//!
//! Nothing is inherited by default. Arbiter's own secrets (database URLs, worker tokens,
//! model keys of other backends) never reach a candidate because they are simply not on the
//! list; a runner or a repository that needs another variable names it explicitly
//! (`env_passthrough`).

/// Variables passed through when set.
const ALLOWED: &[&str] = &[
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "TERM",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TMPDIR",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "ALL_PROXY",
    "all_proxy",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
];

/// Variables never passed, even when asked for: arbiter's own credentials.
const NEVER: &[&str] = &["ARBITER_DATABASE_URL", "DATABASE_URL", "ARBITER_WORKER_TOKEN", "ARBITER_BOOTSTRAP_TOKEN"];

/// Builds the environment from `source` (normally the process environment): the allowlist,
/// `LC_*`, the explicitly passed-through names, then `extra` (arbiter's own variables).
pub fn build<I>(source: I, passthrough: &[String], extra: Vec<(String, String)>) -> Vec<(String, String)>
where
    I: IntoIterator<Item = (String, String)>,
{
    let mut env: Vec<(String, String)> = source
        .into_iter()
        .filter(|(k, _)| {
            !NEVER.contains(&k.as_str())
                && (ALLOWED.contains(&k.as_str()) || k.starts_with("LC_") || passthrough.iter().any(|p| p == k))
        })
        .collect();
    if !env.iter().any(|(k, _)| k == "PATH") {
        env.push(("PATH".into(), "/usr/local/bin:/usr/bin:/bin".into()));
    }
    env.extend(extra);
    env.sort();
    env
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_allowed_and_requested_variables_pass() {
        let src = vec![
            ("PATH".to_string(), "/bin".to_string()),
            ("DATABASE_URL".to_string(), "postgres://u:p@h/d".to_string()),
            ("OPENAI_API_KEY".to_string(), "sk-x".to_string()),
            ("LC_ALL".to_string(), "C".to_string()),
            ("MY_TOKEN".to_string(), "t".to_string()),
        ];
        let env = build(
            src,
            &["MY_TOKEN".to_string(), "DATABASE_URL".to_string()],
            vec![("ARBITER_RUN_ID".into(), "r".into())],
        );
        let names: Vec<&str> = env.iter().map(|(k, _)| k.as_str()).collect();
        assert_eq!(names, vec!["ARBITER_RUN_ID", "LC_ALL", "MY_TOKEN", "PATH"]);
    }
}
