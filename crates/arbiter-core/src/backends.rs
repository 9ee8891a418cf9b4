//! Model backends as configured: `[backends.NAME]` tables, the `[roles]` chains, and where
//! each backend's key comes from. Keys themselves never appear here: a backend names an
//! environment variable (`api_key_env`) or has its key in the repository's secrets file (`~/.config/arbiter/secrets/<repo>.toml`, mode
//! 0600), which is read by the caller.

use std::collections::BTreeMap;
use std::fmt;

use serde::{Deserialize, Deserializer, Serialize};

use crate::money::Usd;

/// What a backend is used for.
pub const ROLES: &[&str] = &["coding", "review", "selection", "spec", "planning", "analysis"];

/// Providers arbiter speaks to.
pub const PROVIDERS: &[&str] = &["openai-compatible", "openai", "anthropic"];

/// A `[backends.NAME]` table.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendSection {
    pub provider: String,
    pub model: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
    /// The environment variable holding the key.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub api_key_env: Option<String>,
    /// USD per million input tokens.
    #[serde(default, deserialize_with = "price", skip_serializing_if = "Option::is_none")]
    pub input_cost: Option<Usd>,
    /// USD per million output tokens.
    #[serde(default, deserialize_with = "price", skip_serializing_if = "Option::is_none")]
    pub output_cost: Option<Usd>,
    #[serde(default = "default_roles")]
    pub roles: Vec<String>,
    #[serde(default)]
    pub capability: u32,
    #[serde(default = "one")]
    pub max_parallel: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub max_tokens: Option<u32>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub timeout_seconds: Option<u64>,
    #[serde(default = "yes")]
    pub enabled: bool,
}

fn default_roles() -> Vec<String> {
    vec!["coding".into()]
}
fn one() -> u32 {
    1
}
fn yes() -> bool {
    true
}

/// Prices are written as decimal strings (`"0.15"`) to stay exact; plain TOML numbers are
/// accepted too and read through their shortest decimal form.
fn price<'de, D: Deserializer<'de>>(d: D) -> Result<Option<Usd>, D::Error> {
    crate::money::deserialize_amount(d, "a price in USD per million tokens")
}

/// Why a backend definition is unusable.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum BackendError {
    #[error("invalid backend name '{0}': use letters, digits, '-' and '_'")]
    BadName(String),
    #[error("unknown provider '{0}' for backend {1}: use one of openai-compatible, openai, anthropic")]
    BadProvider(String, String),
    #[error("backend {0} has no model: pass --model NAME")]
    NoModel(String),
    #[error("backend {0} (openai-compatible) needs --base-url, e.g. http://127.0.0.1:8080/v1")]
    NoBaseUrl(String),
    #[error("unknown role '{0}' for backend {1}: roles are coding, review, selection, spec, planning, analysis")]
    BadRole(String, String),
    #[error("backend {0}: max_parallel must be between 1 and 64")]
    BadParallel(String),
    #[error("base URL '{0}' of backend {1} must start with http:// or https://")]
    BadUrl(String, String),
    #[error("no backend named '{0}'; `arbiter backend list` shows the configured ones")]
    Unknown(String),
    #[error(
        "role {role} names backend '{name}', which is not configured; add it with `arbiter backend add {name} ...`"
    )]
    ChainUnknown { role: String, name: String },
}

/// Checks a name is safe as a TOML key and in file names.
pub fn check_name(name: &str) -> Result<(), BackendError> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-' || b == b'_');
    if ok { Ok(()) } else { Err(BackendError::BadName(name.to_string())) }
}

impl BackendSection {
    /// Validates the definition of backend `name`.
    pub fn validate(&self, name: &str) -> Result<(), BackendError> {
        check_name(name)?;
        if !PROVIDERS.contains(&self.provider.as_str()) {
            return Err(BackendError::BadProvider(self.provider.clone(), name.to_string()));
        }
        if self.model.trim().is_empty() {
            return Err(BackendError::NoModel(name.to_string()));
        }
        match &self.base_url {
            None if self.provider == "openai-compatible" => return Err(BackendError::NoBaseUrl(name.to_string())),
            Some(u) if !(u.starts_with("http://") || u.starts_with("https://")) => {
                return Err(BackendError::BadUrl(u.clone(), name.to_string()));
            }
            _ => {}
        }
        if let Some(r) = self.roles.iter().find(|r| !ROLES.contains(&r.as_str())) {
            return Err(BackendError::BadRole(r.clone(), name.to_string()));
        }
        if !(1..=64).contains(&self.max_parallel) {
            return Err(BackendError::BadParallel(name.to_string()));
        }
        Ok(())
    }

    /// `0.15/0.60` or `unpriced`.
    pub fn describe_prices(&self) -> String {
        match (self.input_cost, self.output_cost) {
            (Some(i), Some(o)) => format!("{}/{}", i.decimal(), o.decimal()),
            (Some(i), None) => format!("{}/?", i.decimal()),
            (None, Some(o)) => format!("?/{}", o.decimal()),
            (None, None) => "unpriced".into(),
        }
    }
}

/// Where a backend's key comes from, as shown to users (never the key itself).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "source", rename_all = "snake_case")]
pub enum KeyStatus {
    /// `api_key_env` names a variable that is set.
    Env { var: String },
    /// `api_key_env` names a variable that is not set.
    EnvMissing { var: String },
    /// The key is in the repository's secrets file.
    SecretsFile,
    /// No key configured (fine for local servers).
    None,
}

impl fmt::Display for KeyStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            KeyStatus::Env { var } => write!(f, "from ${var}"),
            KeyStatus::EnvMissing { var } => write!(f, "MISSING (${var} is not set)"),
            KeyStatus::SecretsFile => f.write_str("in the secrets file"),
            KeyStatus::None => f.write_str("none"),
        }
    }
}

/// The key status of a backend, given whether its variable is set and whether the secrets
/// file holds a key for it.
pub fn key_status(b: &BackendSection, env_is_set: impl Fn(&str) -> bool, in_secrets: bool) -> KeyStatus {
    match &b.api_key_env {
        Some(var) if env_is_set(var) => KeyStatus::Env { var: var.clone() },
        Some(var) if !in_secrets => KeyStatus::EnvMissing { var: var.clone() },
        _ if in_secrets => KeyStatus::SecretsFile,
        _ => KeyStatus::None,
    }
}

/// A repository's secrets file: backend keys by backend name.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct SecretsFile {
    #[serde(default)]
    pub backends: BTreeMap<String, BackendSecret>,
}

/// One backend's stored key.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BackendSecret {
    pub api_key: String,
}

impl fmt::Debug for BackendSecret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("BackendSecret { api_key: [REDACTED] }")
    }
}

/// The ordered backends of a role: `[roles] coding = ["a", "b"]`, or, when the role has no
/// chain, every enabled backend with that role, most capable first (ties by name).
pub fn chain_for(
    role: &str,
    roles: &BTreeMap<String, Vec<String>>,
    backends: &BTreeMap<String, BackendSection>,
) -> Result<Vec<String>, BackendError> {
    if let Some(chain) = roles.get(role) {
        for name in chain {
            if !backends.contains_key(name) {
                return Err(BackendError::ChainUnknown { role: role.to_string(), name: name.clone() });
            }
        }
        return Ok(chain.iter().filter(|n| backends.get(*n).is_some_and(|b| b.enabled)).cloned().collect());
    }
    let mut with_role: Vec<(&String, &BackendSection)> =
        backends.iter().filter(|(_, b)| b.enabled && b.roles.iter().any(|r| r == role)).collect();
    with_role.sort_by(|a, b| b.1.capability.cmp(&a.1.capability).then_with(|| a.0.cmp(b.0)));
    Ok(with_role.into_iter().map(|(n, _)| n.clone()).collect())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn backend(toml_text: &str) -> BackendSection {
        toml::from_str(toml_text).unwrap()
    }

    #[test]
    fn prices_are_exact_from_strings_and_numbers() {
        let b = backend("provider = \"openai\"\nmodel = \"m\"\ninput_cost = \"0.15\"\noutput_cost = 0.6\n");
        assert_eq!(b.input_cost.unwrap().decimal(), "0.15");
        assert_eq!(b.output_cost.unwrap().decimal(), "0.6");
        assert_eq!(b.describe_prices(), "0.15/0.6");
        assert!(
            toml::from_str::<BackendSection>("provider = \"openai\"\nmodel = \"m\"\ninput_cost = \"x\"\n").is_err()
        );
    }

    #[test]
    fn validation_names_the_problem() {
        let mut b = backend("provider = \"openai-compatible\"\nmodel = \"m\"\n");
        assert_eq!(b.validate("local"), Err(BackendError::NoBaseUrl("local".into())));
        b.base_url = Some("http://127.0.0.1:8080/v1".into());
        assert_eq!(b.validate("local"), Ok(()));
        b.roles = vec!["cooking".into()];
        assert!(matches!(b.validate("local"), Err(BackendError::BadRole(..))));
        assert!(check_name("a b").is_err());
    }

    #[test]
    fn chains_come_from_roles_or_capability() {
        let mut backends = BTreeMap::new();
        let mut a = backend("provider = \"openai\"\nmodel = \"a\"\ncapability = 1\n");
        backends.insert("a".to_string(), a.clone());
        a.capability = 5;
        backends.insert("b".to_string(), a.clone());
        let mut roles = BTreeMap::new();
        assert_eq!(chain_for("coding", &roles, &backends).unwrap(), vec!["b", "a"]);
        roles.insert("coding".to_string(), vec!["a".to_string(), "b".to_string()]);
        assert_eq!(chain_for("coding", &roles, &backends).unwrap(), vec!["a", "b"]);
        roles.insert("review".to_string(), vec!["zzz".to_string()]);
        assert!(chain_for("review", &roles, &backends).is_err());
    }

    #[test]
    fn key_status_never_shows_a_key() {
        let mut b = backend("provider = \"openai\"\nmodel = \"m\"\n");
        assert_eq!(key_status(&b, |_| false, false), KeyStatus::None);
        b.api_key_env = Some("OPENAI_API_KEY".into());
        assert_eq!(key_status(&b, |_| false, false).to_string(), "MISSING ($OPENAI_API_KEY is not set)");
        assert_eq!(key_status(&b, |_| true, false).to_string(), "from $OPENAI_API_KEY");
        let s = BackendSecret { api_key: "sk-secret".into() };
        assert!(!format!("{s:?}").contains("sk-secret"));
    }
}
