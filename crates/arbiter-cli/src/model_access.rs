//! Turning the configured backends into endpoints the built-in agent can call: provider,
//! base URL, key (from the named environment variable, else the repository's secrets file),
//! limits and prices.

use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use arbiter_core::backends::SecretsFile;
use arbiter_core::settings::ConfigFile;
use arbiter_llm::{Endpoint, LlmClient, Provider};
use arbiter_runner::builtin_agent::AgentLimits;
use arbiter_runner::runners::ModelAccess;

use crate::error::CliError;

/// Default request timeout when a backend sets none.
const DEFAULT_TIMEOUT_SECONDS: u64 = 300;

/// What a run needs from the configured backends (keys from the environment, else the
/// secrets file at `secrets_path`): the keys to redact, and model access (`None` when no
/// backend is configured).
pub fn for_run(
    secrets_path: &std::path::Path,
    config: &ConfigFile,
    settings: &arbiter_core::settings::RunSettings,
) -> Result<(Vec<String>, Option<Arc<ModelAccess>>), CliError> {
    let secrets = crate::config_file::read_secrets(secrets_path)?;
    let endpoints = endpoints(config, &secrets)?;
    let keys = keys(&endpoints);
    Ok((keys, access(endpoints, config, settings)?))
}

/// Every configured backend as an endpoint, keys resolved.
pub fn endpoints(config: &ConfigFile, secrets: &SecretsFile) -> Result<BTreeMap<String, Endpoint>, CliError> {
    let mut out = BTreeMap::new();
    for (name, b) in &config.backends {
        b.validate(name).map_err(CliError::usage)?;
        let provider: Provider = b.provider.parse().map_err(|e| CliError::usage(format!("backend {name}: {e}")))?;
        let mut e = Endpoint::new(name.clone(), provider, b.model.clone());
        if let Some(url) = &b.base_url {
            e.base_url = url.trim_end_matches('/').to_string();
        }
        e.api_key = b
            .api_key_env
            .as_ref()
            .and_then(|var| std::env::var(var).ok().filter(|v| !v.is_empty()))
            .or_else(|| secrets.backends.get(name).map(|s| s.api_key.clone()));
        if let Some(m) = b.max_tokens {
            e.max_tokens = m;
        }
        e.timeout = Duration::from_secs(b.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS));
        e.max_parallel = b.max_parallel;
        e.input_price = b.input_cost;
        e.output_price = b.output_cost;
        out.insert(name.clone(), e);
    }
    Ok(out)
}

/// Model access for a run, or `None` when no backend is configured.
pub fn access(
    endpoints: BTreeMap<String, Endpoint>,
    config: &arbiter_core::settings::ConfigFile,
    settings: &arbiter_core::settings::RunSettings,
) -> Result<Option<Arc<ModelAccess>>, CliError> {
    if endpoints.is_empty() {
        return Ok(None);
    }
    let client = LlmClient::new().map_err(|e| CliError::environment(format!("cannot start the HTTP client: {e}")))?;
    let limits = AgentLimits { max_steps: settings.max_steps.value, max_tokens: settings.max_tokens.value };
    let chain = |role: &str| -> Result<Vec<Endpoint>, CliError> {
        if !settings.judge.value {
            return Ok(Vec::new());
        }
        Ok(arbiter_core::backends::chain_for(role, &config.roles, &config.backends)
            .map_err(CliError::usage)?
            .iter()
            .filter_map(|name| endpoints.get(name).cloned())
            .collect())
    };
    let (judges, reviewers) = (chain("selection")?, chain("review")?);
    Ok(Some(Arc::new(ModelAccess { client: Arc::new(client), endpoints, limits, judges, reviewers })))
}

/// The chain of `role`: its configured backends, as endpoints (empty when none has it).
pub fn chain_of(
    role: &str,
    config: &ConfigFile,
    endpoints: &BTreeMap<String, Endpoint>,
) -> Result<Vec<Endpoint>, CliError> {
    Ok(arbiter_core::backends::chain_for(role, &config.roles, &config.backends)
        .map_err(CliError::usage)?
        .iter()
        .filter_map(|name| endpoints.get(name).cloned())
        .collect())
}

/// The failure analysis of a plan's failed attempts: `None` without a backend of the
/// `analysis` role, or with `[analysis] enabled = false`.
pub fn analyst(
    config: &ConfigFile,
    models: Option<&ModelAccess>,
) -> Result<Option<Arc<arbiter_runner::failure_analysis::Analyst>>, CliError> {
    let Some(models) = models else { return Ok(None) };
    if config.analysis.enabled == Some(false) {
        return Ok(None);
    }
    let limits = arbiter_runner::failure_analysis::AnalysisLimits {
        timeout: Duration::from_secs(config.analysis.timeout_seconds_or_default()),
        max_cost: config.analysis.max_cost_or_default(),
        feedback: config.analysis.feedback.unwrap_or(true),
    };
    let chain = chain_of("analysis", config, &models.endpoints)?;
    Ok(arbiter_runner::failure_analysis::Analyst::new(models.client.clone(), chain, limits))
}

/// The keys among the endpoints, for redaction.
pub fn keys(endpoints: &BTreeMap<String, Endpoint>) -> Vec<String> {
    endpoints.values().filter_map(|e| e.api_key.clone()).collect()
}
