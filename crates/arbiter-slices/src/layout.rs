//! The slices on disk: finding and writing `.features.json` (the one writer of the
//! registry), scanning the features roots for slices, reading template sets and scaffolding
//! a slice. Nothing here follows a symbolic link out of the repository or writes outside it.

use std::path::{Path, PathBuf};

use crate::names::{Slice, valid_component, valid_file_name};
use crate::registry::{FILE, NO_DOMAIN, Project, RegistryFile, Target};
use crate::templates::{self, CONTROLLER, PYTHON_SET};
use crate::{Result, SliceError};

/// Directories registry discovery never enters (orch.py's list).
const SKIPPED_DIRS: &[&str] = &[
    ".venv",
    "venv",
    "env",
    "node_modules",
    "__pycache__",
    ".git",
    ".hg",
    ".svn",
    ".pytest_cache",
    ".mypy_cache",
    ".ruff_cache",
    ".agents",
    ".arbiter",
];

/// Largest registry file read.
const MAX_REGISTRY_BYTES: u64 = 4 << 20;

/// Where records of the slice verbs live (spec drafts, QA rounds, qa logs): inside
/// `.arbiter/`, which git does not track.
pub fn records_dir(root: &Path, target: &Target) -> PathBuf {
    root.join(".arbiter").join("features").join(&target.domain).join(&target.name)
}

/// orch.py's discovery: `.features.json` at the root, else the first one found less than five
/// levels down (skipping environments and caches), else a new one at the root.
fn discover(root: &Path) -> Option<String> {
    if root.join(FILE).is_file() {
        return Some(FILE.into());
    }
    let mut level = vec![PathBuf::new()];
    for _ in 0..5 {
        let mut next = Vec::new();
        for rel in level {
            let Ok(entries) = std::fs::read_dir(root.join(&rel)) else { continue };
            let mut entries: Vec<_> = entries.flatten().collect();
            entries.sort_by_key(|e| e.file_name());
            for e in entries {
                let name = e.file_name().to_string_lossy().into_owned();
                let Ok(kind) = e.file_type() else { continue };
                if kind.is_file() && name == FILE && !rel.as_os_str().is_empty() {
                    return Some(rel.join(FILE).to_string_lossy().into_owned());
                }
                if kind.is_dir() && !SKIPPED_DIRS.contains(&name.as_str()) {
                    next.push(rel.join(&name));
                }
            }
        }
        level = next;
    }
    None
}

fn read_registry(root: &Path, rel: &str) -> Result<RegistryFile> {
    let path = root.join(rel);
    let meta = match std::fs::symlink_metadata(&path) {
        Ok(m) => m,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(RegistryFile::empty(rel)),
        Err(e) => return Err(SliceError::environment(format!("cannot read {rel}: {e}"))),
    };
    if !meta.is_file() {
        return Err(SliceError::refused(format!("{rel} is not a regular file; make it one (a link is not followed)")));
    }
    if meta.len() > MAX_REGISTRY_BYTES {
        return Err(SliceError::refused(format!("{rel} is {} bytes, more than a registry may have", meta.len())));
    }
    let text = std::fs::read_to_string(&path).map_err(|e| SliceError::refused(format!("cannot read {rel}: {e}")))?;
    RegistryFile::parse(rel, &text).map_err(SliceError::refused)
}

/// The project's registry: the discovered root file and every app's config file.
pub fn load_project(root: &Path) -> Result<Project> {
    let rel = discover(root).unwrap_or_else(|| FILE.to_string());
    let root_file = read_registry(root, &rel)?;
    let mut project = Project { root: root_file, app_files: Default::default() };
    for app in project.apps() {
        if app.config != project.root.path && !project.app_files.contains_key(&app.config) {
            let file = read_registry(root, &app.config)?;
            project.app_files.insert(app.config.clone(), file);
        }
    }
    Ok(project)
}

/// Writes the registry files at `paths`; returns them (for the commit).
pub fn save(root: &Path, project: &Project, paths: &[String]) -> Result<Vec<String>> {
    for rel in paths {
        let Some(file) = project.file(rel) else { continue };
        let path = root.join(rel);
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(SliceError::refused(format!("{rel} is a symbolic link; arbiter does not write through it")));
        }
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent)?;
        }
        std::fs::write(&path, file.render())?;
    }
    Ok(paths.to_vec())
}

/// Every slice under the project's features roots, sorted: `<root>/<domain>/<Feature>/`,
/// and orch.py's flat `<root>/<Feature>/` holding `Handler.py` (domain `nodomain`).
/// Directories starting with `_` or `.`, and links, are left out.
pub fn scan(root: &Path, project: &Project) -> Vec<Slice> {
    let mut out = Vec::new();
    for features in project.roots(None) {
        for (domain, domain_dir) in child_dirs(&root.join(&features)) {
            if domain_dir.join("Handler.py").is_file() {
                out.push(Slice {
                    domain: NO_DOMAIN.into(),
                    dir: format!("{features}/{domain}"),
                    name: domain,
                    flat: true,
                });
                continue;
            }
            for (name, _) in child_dirs(&domain_dir) {
                out.push(Slice {
                    dir: format!("{features}/{domain}/{name}"),
                    domain: domain.clone(),
                    name,
                    flat: false,
                });
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

/// The directories directly in `dir` whose names can be domains or features (no links).
fn child_dirs(dir: &Path) -> Vec<(String, PathBuf)> {
    let Ok(entries) = std::fs::read_dir(dir) else { return Vec::new() };
    let mut out: Vec<(String, PathBuf)> = entries
        .flatten()
        .filter(|e| e.file_type().is_ok_and(|t| t.is_dir()))
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            valid_component(&name).then(|| (name, e.path()))
        })
        .collect();
    out.sort();
    out
}

/// Whether a slice directory exists and holds anything.
pub fn slice_exists(root: &Path, dir: &str) -> bool {
    std::fs::read_dir(root.join(dir)).is_ok_and(|mut e| e.next().is_some())
}

/// The files of template set `set`: the built-in `python` set, or `.arbiter/templates/<set>/`
/// (which replaces it when it is also called `python`).
pub fn template_set(root: &Path, set: &str) -> Result<Vec<(String, String)>> {
    let dir = root.join(".arbiter").join("templates").join(set);
    if !dir.is_dir() {
        if set == templates::DEFAULT_SET {
            return Ok(PYTHON_SET.iter().map(|(f, t)| (f.to_string(), t.to_string())).collect());
        }
        return Err(SliceError::refused(format!(
            "there is no template set '{set}': create .arbiter/templates/{set}/ with the slice's files, or use the built-in set '{}'",
            templates::DEFAULT_SET
        )));
    }
    let mut files = Vec::new();
    let mut entries: Vec<_> = std::fs::read_dir(&dir)?.flatten().collect();
    entries.sort_by_key(|e| e.file_name());
    for e in entries {
        let name = e.file_name().to_string_lossy().into_owned();
        if !e.file_type().is_ok_and(|t| t.is_file()) {
            continue;
        }
        let text = std::fs::read_to_string(e.path()).map_err(|err| {
            SliceError::refused(format!(".arbiter/templates/{set}/{name} cannot be read as text: {err}"))
        })?;
        files.push((name, text));
    }
    if files.is_empty() {
        return Err(SliceError::refused(format!(
            ".arbiter/templates/{set}/ holds no file; put the slice's templates in it"
        )));
    }
    Ok(files)
}

/// Writes a slice's files: `spec.md` and the rendered templates (`--no-controller` leaves
/// out `Controller.py`). Returns the files written, relative to the root.
pub fn scaffold(
    root: &Path,
    target: &Target,
    set: &[(String, String)],
    spec: &str,
    no_controller: bool,
) -> Result<Vec<String>> {
    let dir = root.join(&target.dir);
    for (i, _) in target.dir.match_indices('/').chain([(target.dir.len(), "")]) {
        let part = root.join(&target.dir[..i]);
        if std::fs::symlink_metadata(&part).is_ok_and(|m| m.file_type().is_symlink()) {
            return Err(SliceError::refused(format!(
                "{} is a symbolic link; arbiter does not write through it",
                &target.dir[..i]
            )));
        }
    }
    std::fs::create_dir_all(&dir)?;
    let vars = templates::variables(&target.name, &target.domain, &target.dir, "");
    let mut written = Vec::new();
    std::fs::write(dir.join("spec.md"), spec)?;
    written.push(format!("{}/spec.md", target.dir));
    for (file, template) in set {
        if file == "spec.md" || (no_controller && file == CONTROLLER) {
            continue;
        }
        let name = templates::render(file, &vars)
            .map_err(|e| SliceError::refused(format!("template file name {file}: {e}")))?;
        if !valid_file_name(&name) {
            return Err(SliceError::refused(format!(
                "template file name {file} becomes '{name}', which is not a file name"
            )));
        }
        let text =
            templates::render(template, &vars).map_err(|e| SliceError::refused(format!("template {file}: {e}")))?;
        std::fs::write(dir.join(&name), text)?;
        written.push(format!("{}/{name}", target.dir));
    }
    Ok(written)
}

/// The spec template of a set: its `spec.md` rendered, or orch.py's.
pub fn spec_template(set: &[(String, String)], target: &Target, overview: &str) -> Result<String> {
    match set.iter().find(|(f, _)| f == "spec.md") {
        Some((_, t)) => {
            templates::render(t, &templates::variables(&target.name, &target.domain, &target.dir, overview))
                .map_err(|e| SliceError::refused(format!("template spec.md: {e}")))
        }
        None => Ok(crate::spec::template_spec(&target.name, &target.domain, overview)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nested_and_flat_slices_are_found_and_underscored_dirs_skipped() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        for d in
            ["features/auction/SubmitBid", "features/_shared/Helper", "features/auction/_draft", "features/Payment"]
        {
            std::fs::create_dir_all(root.join(d)).unwrap();
        }
        std::fs::write(root.join("features/Payment/Handler.py"), "").unwrap();
        std::fs::create_dir_all(root.join("web/features")).unwrap();
        std::fs::write(root.join("web/features/.features.json"), "{\"features_dir\": \"features\"}").unwrap();
        let project = load_project(root).unwrap();
        assert_eq!(project.root.path, "web/features/.features.json");
        let names: Vec<String> = scan(root, &project).iter().map(|s| format!("{}:{}", s.branch(), s.flat)).collect();
        assert_eq!(names, vec!["auction/SubmitBid:false", "nodomain/Payment:true"]);
    }
}
