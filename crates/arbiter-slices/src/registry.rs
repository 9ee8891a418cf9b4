//! `.features.json`, orch.py's registry, as a model (pure): every field it has —
//! `features_dir`, `known_features` (`{Feature: domain}`), `domain_keywords`
//! (`{keyword: [domain, Feature]}`), `apps` (`{key: {features_dir, config, domains}}`, each
//! app's own config file contributing more features and keywords) — read, validated and
//! changed here; [`crate::layout`] finds and writes the files. Fields arbiter does not use
//! (orch.py's historical `standalone`) are kept as they are.
//!
//! Every name and directory in a registry becomes a path, so each is validated: a registry
//! naming `../..` as a domain or `/etc` as its `features_dir` is refused, never followed.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Map, Value, json};

use crate::names::{valid_component, valid_dir};

/// The registry's file name.
pub const FILE: &str = ".features.json";
/// Where slices live when the registry does not say.
pub const DEFAULT_FEATURES_DIR: &str = "features";
/// The domain of a slice created without one (and of a flat slice).
pub const NO_DOMAIN: &str = "nodomain";

/// One registry file, as read (relative path and JSON object).
#[derive(Clone, Debug, PartialEq)]
pub struct RegistryFile {
    /// Relative to the repository root.
    pub path: String,
    pub doc: Map<String, Value>,
    /// Whether it exists on disk (a new one is written on the first registration).
    pub exists: bool,
}

/// An app of a registry: its own features directory, config file and domains.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct App {
    pub key: String,
    pub features_dir: String,
    pub config: String,
    pub domains: Vec<String>,
}

fn bad(path: &str, what: String, fix: &str) -> String {
    format!("{path}: {what}; {fix}")
}

impl RegistryFile {
    /// A registry that does not exist yet.
    pub fn empty(path: &str) -> RegistryFile {
        RegistryFile { path: path.to_string(), doc: Map::new(), exists: false }
    }

    /// Parses and validates a registry file's text.
    pub fn parse(path: &str, text: &str) -> Result<RegistryFile, String> {
        let value: Value = serde_json::from_str(text).map_err(|e| {
            bad(
                path,
                format!("not valid JSON ({e})"),
                "fix the file (arbiter never writes over a registry it cannot read)",
            )
        })?;
        let Value::Object(doc) = value else {
            return Err(bad(
                path,
                "not a JSON object".into(),
                "write {\"features_dir\": \"features\", \"known_features\": {}}",
            ));
        };
        let file = RegistryFile { path: path.to_string(), doc, exists: true };
        file.validate()?;
        Ok(file)
    }

    fn validate(&self) -> Result<(), String> {
        let p = &self.path;
        match self.doc.get("features_dir") {
            None => {}
            Some(Value::String(d)) if valid_dir(d) => {}
            Some(other) => {
                return Err(bad(
                    p,
                    format!("features_dir {other} is not a directory inside the repository"),
                    "give a relative path such as \"features\" (no '..', no leading '/')",
                ));
            }
        }
        let object = |key: &str| -> Result<Option<&Map<String, Value>>, String> {
            match self.doc.get(key) {
                None => Ok(None),
                Some(Value::Object(m)) => Ok(Some(m)),
                Some(_) => Err(bad(p, format!("{key} is not an object"), "write it as {\"Name\": ...}")),
            }
        };
        for (name, domain) in object("known_features")?.into_iter().flatten() {
            let ok = valid_component(name) && domain.as_str().is_some_and(valid_component);
            if !ok {
                return Err(bad(
                    p,
                    format!("known_features has \"{name}\": {domain}, which is not a feature name and a domain"),
                    "names and domains are letters, digits, '-' and '_'",
                ));
            }
        }
        // A keyword's domain and feature become a path as the target of `feature new`.
        for (keyword, entry) in object("domain_keywords")?.into_iter().flatten() {
            let named: Vec<&str> =
                entry.as_array().map(|a| a.iter().take(2).filter_map(Value::as_str).collect()).unwrap_or_default();
            if named.len() == 2 && !named.iter().all(|n| valid_component(n)) {
                return Err(bad(
                    p,
                    format!("domain_keywords has \"{keyword}\": {entry}, which is not a domain and a feature name"),
                    "domains and names are letters, digits, '-' and '_'",
                ));
            }
        }
        for (key, app) in object("apps")?.into_iter().flatten() {
            let Value::Object(app) = app else {
                return Err(bad(
                    p,
                    format!("apps.{key} is not an object"),
                    "write {\"features_dir\": ..., \"domains\": [...]}",
                ));
            };
            if let Some(d) = app.get("features_dir")
                && !d.as_str().is_some_and(valid_dir)
            {
                return Err(bad(
                    p,
                    format!("apps.{key}.features_dir {d} is not a directory inside the repository"),
                    "give a relative path",
                ));
            }
            if let Some(c) = app.get("config")
                && !c.as_str().is_some_and(|c| c.ends_with(".json") && arbiter_core::rules::project::safe_root_path(c))
            {
                return Err(bad(
                    p,
                    format!("apps.{key}.config {c} is not a .json file inside the repository"),
                    "give a relative path",
                ));
            }
            if let Some(domains) = app.get("domains") {
                let ok = domains.as_array().is_some_and(|a| a.iter().all(|d| d.as_str().is_some_and(valid_component)));
                if !ok {
                    return Err(bad(
                        p,
                        format!("apps.{key}.domains is not a list of domain names"),
                        "write [\"billing\", ...]",
                    ));
                }
            }
        }
        Ok(())
    }

    /// The text to write: the object, two-space indented, with a final newline (orch.py's).
    pub fn render(&self) -> String {
        serde_json::to_string_pretty(&Value::Object(self.doc.clone())).unwrap_or_else(|_| "{}".into()) + "\n"
    }

    pub fn features_dir(&self) -> String {
        self.doc
            .get("features_dir")
            .and_then(Value::as_str)
            .unwrap_or(DEFAULT_FEATURES_DIR)
            .trim_end_matches('/')
            .to_string()
    }

    pub fn known_features(&self) -> BTreeMap<String, String> {
        self.doc
            .get("known_features")
            .and_then(Value::as_object)
            .map(|m| m.iter().filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_string()))).collect())
            .unwrap_or_default()
    }

    /// `{keyword: (domain, Feature)}`; entries shorter than two are dropped, as orch.py does.
    pub fn domain_keywords(&self) -> BTreeMap<String, (String, String)> {
        self.doc
            .get("domain_keywords")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| {
                        let a = v.as_array()?;
                        Some((k.clone(), (a.first()?.as_str()?.to_string(), a.get(1)?.as_str()?.to_string())))
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    pub fn apps(&self) -> Vec<App> {
        let root_dir = self.features_dir();
        self.doc
            .get("apps")
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(key, v)| {
                        let v = v.as_object()?;
                        Some(App {
                            key: key.clone(),
                            features_dir: v
                                .get("features_dir")
                                .and_then(Value::as_str)
                                .unwrap_or(&root_dir)
                                .trim_end_matches('/')
                                .to_string(),
                            config: v.get("config").and_then(Value::as_str).unwrap_or(&self.path).to_string(),
                            domains: v
                                .get("domains")
                                .and_then(Value::as_array)
                                .map(|a| a.iter().filter_map(|d| d.as_str().map(str::to_string)).collect())
                                .unwrap_or_default(),
                        })
                    })
                    .collect()
            })
            .unwrap_or_default()
    }

    fn object_mut(&mut self, key: &str) -> &mut Map<String, Value> {
        let entry = self.doc.entry(key.to_string()).or_insert_with(|| Value::Object(Map::new()));
        if !entry.is_object() {
            *entry = Value::Object(Map::new());
        }
        match entry {
            Value::Object(m) => m,
            // Made an object just above.
            _ => unreachable!("the entry was made an object"),
        }
    }

    /// orch.py's `register_target`: a name not yet known is recorded with its domain, and
    /// its keyword (the lower-cased name without `feature`, `handler`, `controller`) when
    /// that is free. Returns whether anything changed.
    pub fn register(&mut self, name: &str, domain: &str) -> bool {
        if self.known_features().contains_key(name) {
            return false;
        }
        self.object_mut("known_features").insert(name.to_string(), json!(domain));
        let keyword = keyword_of(name);
        if keyword.len() >= 2 && !self.domain_keywords().contains_key(&keyword) {
            self.object_mut("domain_keywords").insert(keyword, json!([domain, name]));
        }
        true
    }

    /// orch.py's `unregister_feature`: the name and its keywords removed. Returns whether
    /// anything changed.
    pub fn unregister(&mut self, name: &str) -> bool {
        let mut changed = false;
        if let Some(Value::Object(known)) = self.doc.get_mut("known_features") {
            changed |= known.remove(name).is_some();
        }
        if let Some(Value::Object(keywords)) = self.doc.get_mut("domain_keywords") {
            let before = keywords.len();
            keywords.retain(|_, v| v.get(1).and_then(Value::as_str) != Some(name));
            changed |= keywords.len() != before;
        }
        changed
    }
}

/// The registry after merging a slice's branch: `ours` (the default branch's) with the
/// features and keywords `theirs` (the slice branch's) added or removed since `base`. Two
/// slices in progress each register themselves in the same file; their merges must not
/// conflict on it. Other fields are `ours`.
pub fn merge_three_way(base: &RegistryFile, ours: &RegistryFile, theirs: &RegistryFile) -> RegistryFile {
    let mut out = ours.clone();
    out.exists = true;
    for key in ["known_features", "domain_keywords"] {
        let map = |f: &RegistryFile| f.doc.get(key).and_then(Value::as_object).cloned().unwrap_or_default();
        let (b, t) = (map(base), map(theirs));
        let target = out.object_mut(key);
        for (k, v) in &t {
            if b.get(k) != Some(v) {
                target.insert(k.clone(), v.clone());
            }
        }
        for k in b.keys().filter(|k| !t.contains_key(*k)) {
            target.remove(k);
        }
    }
    out
}

/// The keyword orch.py registers for a feature name.
pub fn keyword_of(name: &str) -> String {
    let mut k = name.to_lowercase();
    for word in ["feature", "handler", "controller"] {
        k = k.replace(word, "");
    }
    k
}

/// The registry of a project: its root file and the config files of its apps.
#[derive(Clone, Debug, PartialEq)]
pub struct Project {
    pub root: RegistryFile,
    /// App config files other than the root, by path.
    pub app_files: BTreeMap<String, RegistryFile>,
}

/// Where a new (or moved) slice goes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    pub domain: String,
    pub name: String,
    /// Relative to the repository root.
    pub dir: String,
    /// The registry file it is registered in.
    pub config: String,
}

impl Target {
    pub fn branch(&self) -> String {
        format!("{}/{}", self.domain, self.name)
    }
}

impl Project {
    pub fn features_dir(&self) -> String {
        self.root.features_dir()
    }

    pub fn apps(&self) -> Vec<App> {
        self.root.apps()
    }

    /// Every features root: an app's own, or the default one and every app's.
    pub fn roots(&self, app: Option<&str>) -> Vec<String> {
        let apps = self.apps();
        if let Some(a) = app.and_then(|k| apps.iter().find(|a| a.key == k)) {
            return vec![a.features_dir.clone()];
        }
        let mut roots = vec![self.features_dir()];
        for a in apps {
            if !roots.contains(&a.features_dir) {
                roots.push(a.features_dir);
            }
        }
        roots
    }

    /// Every domain an app lists, sorted.
    pub fn domains(&self) -> BTreeSet<String> {
        self.apps().into_iter().flat_map(|a| a.domains).collect()
    }

    pub fn app_for_domain(&self, domain: &str) -> Option<App> {
        self.apps().into_iter().find(|a| a.domains.iter().any(|d| d == domain))
    }

    pub fn root_for_domain(&self, domain: &str) -> String {
        self.app_for_domain(domain).map(|a| a.features_dir).unwrap_or_else(|| self.features_dir())
    }

    pub fn config_for_domain(&self, domain: &str) -> String {
        self.app_for_domain(domain).map(|a| a.config).unwrap_or_else(|| self.root.path.clone())
    }

    /// Every known feature: the root's, with each app config's merged over it.
    pub fn known_features(&self) -> BTreeMap<String, String> {
        let mut all = self.root.known_features();
        for f in self.app_files.values() {
            all.extend(f.known_features());
        }
        all
    }

    fn domain_keywords(&self) -> BTreeMap<String, (String, String)> {
        let mut all = self.root.domain_keywords();
        for f in self.app_files.values() {
            all.extend(f.domain_keywords());
        }
        all
    }

    /// orch.py's `infer_domain`: the known feature's domain, else the first keyword equal
    /// to the name (or whose feature is the name), ignoring case.
    pub fn infer_domain(&self, name: &str) -> Option<String> {
        if let Some(d) = self.known_features().get(name) {
            return Some(d.clone());
        }
        let lower = name.to_lowercase();
        self.domain_keywords()
            .into_iter()
            .find(|(k, (_, feature))| *k == lower || feature.to_lowercase() == lower)
            .map(|(_, (d, _))| d)
    }

    /// orch.py's `target_for_new`: the given domain, else the inferred one, else `nodomain`.
    pub fn target_for_new(&self, name: &str, domain: Option<&str>, app: Option<&str>) -> Target {
        let domain = domain.map(str::to_string).or_else(|| self.infer_domain(name)).unwrap_or_else(|| NO_DOMAIN.into());
        let apps = self.apps();
        let app = app.and_then(|k| apps.iter().find(|a| a.key == k));
        let root = app.map(|a| a.features_dir.clone()).unwrap_or_else(|| self.root_for_domain(&domain));
        let config = app.map(|a| a.config.clone()).unwrap_or_else(|| self.config_for_domain(&domain));
        Target { dir: format!("{root}/{domain}/{name}"), domain, name: name.to_string(), config }
    }

    /// The registry file at `path` (the root's or an app's; a new one if absent).
    pub fn file_mut(&mut self, path: &str) -> &mut RegistryFile {
        if path == self.root.path {
            return &mut self.root;
        }
        self.app_files.entry(path.to_string()).or_insert_with(|| RegistryFile::empty(path))
    }

    /// Registers `target` in its registry file; returns the file's path when it changed.
    pub fn register(&mut self, target: &Target) -> Option<String> {
        let file = self.file_mut(&target.config);
        file.register(&target.name, &target.domain).then(|| file.path.clone())
    }

    /// Removes `name` from every registry file; returns the paths of those that changed.
    pub fn unregister(&mut self, name: &str) -> Vec<String> {
        let mut changed = Vec::new();
        if self.root.unregister(name) {
            changed.push(self.root.path.clone());
        }
        for f in self.app_files.values_mut() {
            if f.unregister(name) {
                changed.push(f.path.clone());
            }
        }
        changed
    }

    /// The file at `path`, if it is one of the project's.
    pub fn file(&self, path: &str) -> Option<&RegistryFile> {
        if path == self.root.path { Some(&self.root) } else { self.app_files.get(path) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const ORCH_SHAPE: &str = r#"{"features_dir": "features", "known_features": {"SubmitBid": "auction"}, "domain_keywords": {"submitbid": ["auction", "SubmitBid"]}, "apps": {"web": {"features_dir": "web/features", "config": "web/features/.features.json", "domains": ["vps", "nodomain"]}, "admin": {"features_dir": "features", "config": "features/.features.json", "domains": ["dashboard"]}}, "standalone": ["x.py"]}"#;

    fn project() -> Project {
        let root = RegistryFile::parse(FILE, ORCH_SHAPE).unwrap();
        let web =
            RegistryFile::parse("web/features/.features.json", r#"{"known_features": {"Auctions": "vps"}}"#).unwrap();
        Project { root, app_files: [(web.path.clone(), web)].into() }
    }

    #[test]
    fn every_field_of_orch_py_s_registry_is_read() {
        let p = project();
        assert_eq!(p.features_dir(), "features");
        assert_eq!(p.roots(None), vec!["features", "web/features"]);
        assert_eq!(p.roots(Some("web")), vec!["web/features"]);
        assert_eq!(p.domains().into_iter().collect::<Vec<_>>(), vec!["dashboard", "nodomain", "vps"]);
        assert_eq!(p.app_for_domain("vps").unwrap().key, "web");
        assert_eq!(p.root_for_domain("vps"), "web/features");
        assert_eq!(p.config_for_domain("dashboard"), "features/.features.json");
        assert_eq!(p.known_features().get("Auctions").map(String::as_str), Some("vps"));
        assert_eq!(p.infer_domain("submitbid").as_deref(), Some("auction"));
        assert_eq!(p.infer_domain("SubmitBid").as_deref(), Some("auction"));
        assert_eq!(p.infer_domain("Other"), None);
    }

    #[test]
    fn targets_use_the_given_then_inferred_domain_then_nodomain() {
        let p = project();
        // `nodomain` is one of the web app's domains here, so the slice goes under its root.
        assert_eq!(p.target_for_new("Invoice", None, None).dir, "web/features/nodomain/Invoice");
        assert_eq!(p.target_for_new("Invoice", Some("billing"), None).dir, "features/billing/Invoice");
        let t = p.target_for_new("SubmitBid", None, None);
        assert_eq!((t.dir.as_str(), t.branch()), ("features/auction/SubmitBid", "auction/SubmitBid".to_string()));
        let t = p.target_for_new("Page", Some("vps"), None);
        assert_eq!((t.dir.as_str(), t.config.as_str()), ("web/features/vps/Page", "web/features/.features.json"));
    }

    #[test]
    fn registration_writes_the_keyword_once_and_unknown_fields_survive() {
        let mut p = project();
        let t = p.target_for_new("ManageCandleFeature", Some("candle"), None);
        assert_eq!(p.register(&t), Some(FILE.to_string()));
        assert_eq!(p.register(&t), None, "a known name is not registered twice");
        assert_eq!(
            p.root.domain_keywords().get("managecandle"),
            Some(&("candle".to_string(), "ManageCandleFeature".to_string()))
        );
        let text = p.root.render();
        assert!(text.contains("\"standalone\""), "{text}");
        assert!(text.ends_with("}\n"));
        assert_eq!(p.unregister("ManageCandleFeature"), vec![FILE.to_string()]);
        assert!(!p.root.domain_keywords().contains_key("managecandle"));
        assert!(p.unregister("Nope").is_empty());
    }

    #[test]
    fn merging_two_slices_registrations_keeps_both() {
        let base =
            RegistryFile::parse(FILE, r#"{"features_dir": "features", "known_features": {"Old": "a"}}"#).unwrap();
        let mut ours = base.clone();
        ours.register("Invoice", "billing");
        let mut theirs = base.clone();
        theirs.register("Refund", "billing");
        theirs.unregister("Old");
        let merged = merge_three_way(&base, &ours, &theirs);
        let known = merged.known_features();
        assert_eq!(known.keys().cloned().collect::<Vec<_>>(), vec!["Invoice", "Refund"]);
        assert_eq!(merged.domain_keywords().len(), 2);
        assert_eq!(merged.features_dir(), "features");
    }

    #[test]
    fn a_hostile_registry_is_refused_not_followed() {
        for bad in [
            r#"{"features_dir": "../../etc"}"#,
            r#"{"features_dir": "/tmp"}"#,
            r#"{"domain_keywords": {"x": ["../../../../tmp", "X"]}}"#,
            r#"{"domain_keywords": {"x": ["ok", "../X"]}}"#,
            r#"{"known_features": {"X": "../../.."}}"#,
            r#"{"apps": {"a": {"features_dir": "x/../../y"}}}"#,
            r#"{"apps": {"a": {"config": "/etc/passwd"}}}"#,
            r#"[1, 2]"#,
            "{not json",
        ] {
            let err = RegistryFile::parse(FILE, bad).expect_err(bad);
            assert!(err.starts_with(".features.json: "), "{err}");
        }
    }
}
