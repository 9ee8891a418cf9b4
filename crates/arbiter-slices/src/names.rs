//! Targets and names (pure): `<domain>/<Feature>` as typed, which names are safe to become
//! paths and branches, the slice a name resolves to among the slices found on disk — never
//! by asking: an unknown or ambiguous name is an answer listing the candidates — and the
//! feature a branch or an editor's file points at.

use std::fmt;

/// The longest domain or feature name.
const MAX_NAME: usize = 100;

/// Whether `s` can be a domain or feature name: letters, digits, `_` and `-`, starting
/// with a letter or digit (so never `.`, `..`, a hidden or `_`-prefixed directory).
pub fn valid_component(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= MAX_NAME
        && s.chars().next().is_some_and(|c| c.is_ascii_alphanumeric())
        && s.chars().all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
}

/// Whether `s` is a plain file name (no directory part, not hidden).
pub fn valid_file_name(s: &str) -> bool {
    !s.is_empty()
        && s.len() <= 255
        && !s.starts_with('.')
        && s.chars().all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-' | '.'))
}

/// Whether `s` is a relative directory inside the repository made of safe components
/// (`features`, `web/features`): what `features_dir` may be.
pub fn valid_dir(s: &str) -> bool {
    let s = s.trim_end_matches('/');
    !s.is_empty()
        && s.split('/').all(|c| c == "." || (!c.is_empty() && !c.starts_with('.') && valid_file_name(c)))
        && s.split('/').any(|c| c != ".")
}

/// A target as typed: `billing/Invoice` or `Invoice`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TargetSpec {
    pub domain: Option<String>,
    pub name: String,
}

impl TargetSpec {
    /// Parses and validates a target.
    pub fn parse(text: &str) -> Result<TargetSpec, String> {
        let t = text.trim().trim_matches('/');
        let parts: Vec<&str> = t.split('/').collect();
        let (domain, name) = match parts.as_slice() {
            [name] => (None, *name),
            [domain, name] => (Some(*domain), *name),
            _ => {
                return Err(format!(
                    "'{text}' is not a target; write <domain>/<Feature> (e.g. billing/Invoice) or just <Feature>"
                ));
            }
        };
        if let Some(d) = domain
            && !valid_component(d)
        {
            return Err(format!(
                "'{d}' is not a domain name: use letters, digits, '-' and '_', starting with a letter or digit"
            ));
        }
        if !valid_component(name) {
            return Err(format!(
                "'{name}' is not a feature name: use letters, digits, '-' and '_', starting with a letter or digit (e.g. Invoice)"
            ));
        }
        Ok(TargetSpec { domain: domain.map(str::to_string), name: name.to_string() })
    }
}

impl fmt::Display for TargetSpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.domain {
            Some(d) => write!(f, "{d}/{}", self.name),
            None => f.write_str(&self.name),
        }
    }
}

/// A slice found on disk.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord, serde::Serialize)]
pub struct Slice {
    pub domain: String,
    pub name: String,
    /// Relative to the repository root.
    pub dir: String,
    /// orch.py's flat layout: a root child holding `Handler.py` (domain `nodomain`).
    pub flat: bool,
}

impl Slice {
    /// `<domain>/<Feature>`: the slice's branch, and how it is named to the user.
    pub fn branch(&self) -> String {
        format!("{}/{}", self.domain, self.name)
    }
}

/// What a name resolves to.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Resolution {
    Found(Slice),
    /// Several slices answer to the name: the user must say which (`domain/Feature`).
    Ambiguous(Vec<Slice>),
    /// None does; the closest names, if any.
    Unknown {
        suggestions: Vec<Slice>,
    },
}

/// Resolves `spec` among `slices`: an explicit domain is honoured; a bare name must match
/// one slice (exactly, else ignoring case), or the one `known_domain` (the registry's
/// domain for it) names.
pub fn resolve(spec: &TargetSpec, slices: &[Slice], known_domain: Option<&str>) -> Resolution {
    let by = |exact: bool| -> Vec<Slice> {
        slices
            .iter()
            .filter(|s| if exact { s.name == spec.name } else { s.name.eq_ignore_ascii_case(&spec.name) })
            .filter(|s| {
                spec.domain
                    .as_deref()
                    .is_none_or(|d| if exact { s.domain == d } else { s.domain.eq_ignore_ascii_case(d) })
            })
            .cloned()
            .collect()
    };
    let mut matches = by(true);
    if matches.is_empty() {
        matches = by(false);
    }
    match matches.len() {
        0 => Resolution::Unknown { suggestions: suggestions(spec, slices) },
        1 => Resolution::Found(matches.remove(0)),
        _ => match known_domain.and_then(|d| matches.iter().find(|s| s.domain == d)) {
            Some(s) if spec.domain.is_none() => Resolution::Found(s.clone()),
            _ => Resolution::Ambiguous(matches),
        },
    }
}

/// Slices whose name is close to the one asked for: the same ignoring case and `-`/`_`,
/// one containing the other, or within two edits.
fn suggestions(spec: &TargetSpec, slices: &[Slice]) -> Vec<Slice> {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['-', '_'], "");
    let want = norm(&spec.name);
    let mut scored: Vec<(usize, &Slice)> = slices
        .iter()
        .filter_map(|s| {
            let have = norm(&s.name);
            let d = edit_distance(&want, &have);
            let close = d <= 2 || (want.len() >= 3 && (have.contains(&want) || want.contains(&have)));
            close.then_some((d, s))
        })
        .collect();
    scored.sort_by(|a, b| a.0.cmp(&b.0).then_with(|| a.1.cmp(b.1)));
    scored.into_iter().take(5).map(|(_, s)| s.clone()).collect()
}

/// Levenshtein distance between two short strings.
fn edit_distance(a: &str, b: &str) -> usize {
    let (a, b): (Vec<char>, Vec<char>) = (a.chars().collect(), b.chars().collect());
    let mut prev: Vec<usize> = (0..=b.len()).collect();
    for (i, ca) in a.iter().enumerate() {
        let mut cur = vec![i + 1; b.len() + 1];
        for (j, cb) in b.iter().enumerate() {
            cur[j + 1] = (prev[j] + usize::from(ca != cb)).min(prev[j + 1] + 1).min(cur[j] + 1);
        }
        prev = cur;
    }
    prev[b.len()]
}

/// The target a branch names: `billing/Invoice` → `billing/Invoice`; the default branch, a
/// one-segment branch or a deeper one names none.
pub fn target_from_branch(branch: &str, default_branch: &str) -> Option<TargetSpec> {
    if branch == default_branch || branch.is_empty() {
        return None;
    }
    let (domain, name) = branch.split_once('/')?;
    if name.contains('/') {
        return None;
    }
    TargetSpec::parse(&format!("{domain}/{name}")).ok()
}

/// The feature an editor's file points at (orch.py's rules): the directory under
/// `features/<domain>/` when the path goes through one, else the CamelCase of the file's
/// stem (`payment_flow.py` → `PaymentFlow`).
pub fn feature_name_from_path(path: &str, features_dir: &str) -> Option<String> {
    let parts: Vec<&str> = path.split('/').filter(|p| !p.is_empty()).collect();
    let root: Vec<&str> = features_dir.split('/').filter(|p| !p.is_empty() && *p != ".").collect();
    for start in 0..parts.len() {
        if parts[start..].starts_with(&root) {
            let rest = &parts[start + root.len()..];
            // <domain>/<Feature>/file: the feature; <Feature>/file (flat): the feature.
            if rest.len() >= 3 && valid_component(rest[1]) {
                return Some(rest[1].to_string());
            }
            if rest.len() == 2 && valid_component(rest[0]) {
                return Some(rest[0].to_string());
            }
        }
    }
    let file = parts.last()?;
    let stem = file.split('.').next().unwrap_or(file);
    let camel: String = stem
        .split(['_', '-', ' '])
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut c = w.chars();
            c.next().map(|f| f.to_ascii_uppercase().to_string() + c.as_str()).unwrap_or_default()
        })
        .collect();
    valid_component(&camel).then_some(camel)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn slice(domain: &str, name: &str) -> Slice {
        Slice { domain: domain.into(), name: name.into(), dir: format!("features/{domain}/{name}"), flat: false }
    }

    #[test]
    fn targets_parse_and_refuse_what_cannot_be_a_path() {
        let t = TargetSpec::parse("billing/Invoice").unwrap();
        assert_eq!((t.domain.as_deref(), t.name.as_str()), (Some("billing"), "Invoice"));
        assert_eq!(TargetSpec::parse("Invoice").unwrap().domain, None);
        for bad in ["../etc/passwd", "a/b/c", "", "billing/..", "_private/X", ".hidden", "bill ing/X", "x/$(rm)"] {
            assert!(TargetSpec::parse(bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_name_in_two_domains_is_ambiguous_unless_a_domain_or_the_registry_says() {
        let slices = vec![slice("billing", "Invoice"), slice("shipping", "Invoice"), slice("billing", "Refund")];
        let bare = TargetSpec::parse("Invoice").unwrap();
        match resolve(&bare, &slices, None) {
            Resolution::Ambiguous(c) => assert_eq!(c.len(), 2),
            other => panic!("{other:?}"),
        }
        let explicit = TargetSpec::parse("shipping/Invoice").unwrap();
        assert_eq!(resolve(&explicit, &slices, Some("billing")), Resolution::Found(slice("shipping", "Invoice")));
        assert_eq!(resolve(&bare, &slices, Some("billing")), Resolution::Found(slice("billing", "Invoice")));
        assert_eq!(
            resolve(&TargetSpec::parse("refund").unwrap(), &slices, None),
            Resolution::Found(slice("billing", "Refund"))
        );
    }

    #[test]
    fn an_unknown_name_suggests_close_ones() {
        let slices = vec![slice("billing", "Invoice"), slice("billing", "Refund")];
        match resolve(&TargetSpec::parse("Invoce").unwrap(), &slices, None) {
            Resolution::Unknown { suggestions } => assert_eq!(suggestions, vec![slice("billing", "Invoice")]),
            other => panic!("{other:?}"),
        }
        match resolve(&TargetSpec::parse("shipping/Invoice").unwrap(), &slices, None) {
            Resolution::Unknown { suggestions } => assert_eq!(suggestions, vec![slice("billing", "Invoice")]),
            other => panic!("{other:?}"),
        }
    }

    #[test]
    fn branches_and_editor_files_name_features() {
        assert_eq!(target_from_branch("shared/Payment", "main"), TargetSpec::parse("shared/Payment").ok());
        assert_eq!(target_from_branch("main", "main"), None);
        assert_eq!(target_from_branch("dev", "main"), None);
        assert_eq!(
            feature_name_from_path("/repo/features/auction/SubmitBid/Handler.py", "features").as_deref(),
            Some("SubmitBid")
        );
        assert_eq!(feature_name_from_path("/repo/web/auctions.html", "features").as_deref(), Some("Auctions"));
        assert_eq!(feature_name_from_path("payment_flow.py", "features").as_deref(), Some("PaymentFlow"));
        assert_eq!(feature_name_from_path("share-screenshot.ts", "features").as_deref(), Some("ShareScreenshot"));
    }

    #[test]
    fn features_dirs_stay_inside_the_repository() {
        assert!(valid_dir("features"));
        assert!(valid_dir("web/features"));
        for bad in ["../x", "/abs", "a/../b", ".git", "", "a/.hidden", "x y"] {
            assert!(!valid_dir(bad), "{bad}");
        }
    }
}
