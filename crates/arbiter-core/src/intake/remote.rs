//! A repository's remote as a forge sees it: the host and the `OWNER/REPO` path of its URL
//! (`https://HOST/OWNER/REPO.git`, `git@HOST:OWNER/REPO.git`, `ssh://git@HOST/OWNER/REPO`),
//! which forge that is, and the page where a pushed branch can be turned into a pull (merge)
//! request by hand.

use super::issue::Forge;

/// Where a remote's repository lives on its forge.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ForgeRepo {
    /// `github.com`, `gitlab.example.com`, `127.0.0.1:8443`.
    pub host: String,
    /// `OWNER/REPO` (GitLab: `GROUP/SUB/PROJECT`).
    pub repo: String,
}

/// The forge repository a remote URL names, when it names one (a local path or a
/// `file://` URL does not).
pub fn parse_url(url: &str) -> Option<ForgeRepo> {
    let url = url.trim();
    let (host, path) = if let Some(rest) = url.strip_prefix("https://").or_else(|| url.strip_prefix("http://")) {
        let (authority, path) = rest.split_once('/')?;
        // Credentials in the URL are not part of the host.
        (authority.rsplit_once('@').map_or(authority, |(_, h)| h), path)
    } else if let Some(rest) = url.strip_prefix("ssh://") {
        let (authority, path) = rest.split_once('/')?;
        let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        // ssh://git@host:22/owner/repo: the port is ssh's, not the web's.
        (host.split_once(':').map_or(host, |(h, _)| h), path)
    } else if !url.contains("://") && url.contains(':') && !url.starts_with('/') {
        // scp-like: [user@]host:owner/repo
        let (authority, path) = url.split_once(':')?;
        (authority.rsplit_once('@').map_or(authority, |(_, h)| h), path)
    } else {
        return None;
    };
    let repo = path.trim_end_matches('/').trim_end_matches(".git").trim_matches('/');
    let parts: Vec<&str> = repo.split('/').collect();
    let safe = |p: &&str| {
        !p.is_empty()
            && !p.starts_with(['-', '.'])
            && p.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'_' | b'-'))
    };
    let host_ok = !host.is_empty()
        && host.bytes().all(|b| b.is_ascii_alphanumeric() || matches!(b, b'.' | b'-' | b':' | b'[' | b']'));
    (host_ok && parts.len() >= 2 && parts.iter().all(safe))
        .then(|| ForgeRepo { host: host.to_ascii_lowercase(), repo: repo.to_string() })
}

/// The issue an issue's page names: `https://HOST/OWNER/REPO/issues/N` (GitHub) or
/// `https://HOST/GROUP/PROJECT/-/issues/N` (GitLab).
pub fn issue_of_url(url: &str) -> Option<(Forge, ForgeRepo, u64)> {
    let rest = url.trim().strip_prefix("https://").or_else(|| url.trim().strip_prefix("http://"))?;
    let (host, path) = rest.split_once('/')?;
    let (repo, forge, number) = if let Some((repo, n)) = path.rsplit_once("/-/issues/") {
        (repo, Forge::GitLab, n)
    } else {
        let (repo, n) = path.rsplit_once("/issues/")?;
        (repo, Forge::GitHub, n)
    };
    let number = n_of(number)?;
    let at = parse_url(&format!("https://{host}/{repo}"))?;
    Some((forge, at, number))
}

fn n_of(text: &str) -> Option<u64> {
    text.trim_end_matches('/').parse().ok().filter(|n| *n > 0)
}

/// Which forge a host is: GitLab when its name says so, GitHub otherwise (github.com and
/// GitHub Enterprise hosts).
pub fn forge_of(host: &str) -> Forge {
    if host.split(['.', ':']).any(|part| part == "gitlab") { Forge::GitLab } else { Forge::GitHub }
}

/// The page that opens a pull (merge) request of `branch` into `base` by hand.
pub fn compare_url(forge: Forge, at: &ForgeRepo, base: &str, branch: &str) -> String {
    let enc = |s: &str| -> String {
        s.bytes()
            .map(|b| match b {
                b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'_' | b'.' | b'~' | b'/' => (b as char).to_string(),
                _ => format!("%{b:02X}"),
            })
            .collect()
    };
    match forge {
        Forge::GitHub => format!("https://{}/{}/compare/{}...{}?expand=1", at.host, at.repo, enc(base), enc(branch)),
        Forge::GitLab => format!(
            "https://{}/{}/-/merge_requests/new?merge_request%5Bsource_branch%5D={}&merge_request%5Btarget_branch%5D={}",
            at.host,
            at.repo,
            enc(branch),
            enc(base)
        ),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn remote_urls_name_their_repository() {
        let gh = |host: &str, repo: &str| Some(ForgeRepo { host: host.into(), repo: repo.into() });
        assert_eq!(parse_url("https://github.com/acme/web.git"), gh("github.com", "acme/web"));
        assert_eq!(parse_url("https://x-token:secret@github.com/acme/web"), gh("github.com", "acme/web"));
        assert_eq!(parse_url("git@github.com:acme/web.git"), gh("github.com", "acme/web"));
        assert_eq!(
            parse_url("ssh://git@gitlab.example.com:2222/grp/sub/proj.git"),
            gh("gitlab.example.com", "grp/sub/proj")
        );
        assert_eq!(parse_url("https://127.0.0.1:8443/acme/web.git"), gh("127.0.0.1:8443", "acme/web"));
        for none in
            ["/srv/git/web.git", "file:///srv/web.git", "../web", "https://github.com/onlyone", "https://h/a/-x"]
        {
            assert_eq!(parse_url(none), None, "{none}");
        }
        assert_eq!(forge_of("gitlab.example.com"), Forge::GitLab);
        let (forge, at, n) = issue_of_url("https://github.com/acme/web/issues/12").unwrap();
        assert_eq!((forge, at.repo.as_str(), n), (Forge::GitHub, "acme/web", 12));
        let (forge, at, n) = issue_of_url("https://gitlab.com/grp/sub/proj/-/issues/3").unwrap();
        assert_eq!((forge, at.repo.as_str(), n), (Forge::GitLab, "grp/sub/proj", 3));
        assert_eq!(issue_of_url("https://github.com/acme/web/pull/12"), None);
        assert_eq!(issue_of_url("file:///x/issues/1"), None);
        assert_eq!(forge_of("github.example.com"), Forge::GitHub);
    }

    #[test]
    fn compare_urls() {
        let at = ForgeRepo { host: "github.com".into(), repo: "acme/web".into() };
        assert_eq!(
            compare_url(Forge::GitHub, &at, "main", "arbiter/run 1"),
            "https://github.com/acme/web/compare/main...arbiter/run%201?expand=1"
        );
        assert!(compare_url(Forge::GitLab, &at, "main", "b").contains("/-/merge_requests/new?"));
    }
}
