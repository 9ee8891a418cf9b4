//! `feature new`: the branch from the default branch with a clean tree, `spec.md` by the
//! `spec` role and checked by spec QA (or orch.py's template, said so), the scaffold from a
//! template set, the registry entry — in one commit. An existing slice or branch is never
//! written over without `--force`.

use serde::Serialize;

use super::Workspace;
use crate::layout::{self, records_dir};
use crate::names::TargetSpec;
use crate::writer::{self, SpecModel};
use crate::{Result, SliceError, spec};

/// What `feature new` is asked.
pub struct NewRequest<'a> {
    pub target: &'a str,
    pub prompt: &'a str,
    pub template: Option<&'a str>,
    pub app: Option<&'a str>,
    pub no_controller: bool,
    pub force: bool,
}

/// Where `spec.md` came from.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum SpecSource {
    /// The `spec` role wrote it (and spec QA checked it).
    Model,
    /// The template: no `spec` backend is configured.
    TemplateNoModel,
    /// The template: the model failed.
    TemplateModelFailed,
}

/// What `feature new` did.
#[derive(Clone, Debug, Serialize)]
pub struct NewOutcome {
    pub slice: String,
    pub dir: String,
    pub branch: String,
    pub spec_source: SpecSource,
    /// Why the template was used when a model was configured.
    pub model_problem: Option<String>,
    pub spec_qa: Option<writer::QaOutcome>,
    pub files: Vec<String>,
    pub registry: Vec<String>,
    pub commit: Option<String>,
    /// Where the spec drafts and QA rounds are recorded.
    pub records: String,
}

pub async fn new_slice(
    ws: &Workspace,
    req: NewRequest<'_>,
    model: Option<&SpecModel>,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<NewOutcome> {
    let spec_t = TargetSpec::parse(req.target).map_err(SliceError::refused)?;
    if req.prompt.trim().is_empty() {
        return Err(SliceError::refused(format!(
            "`arbiter feature new {spec_t}` needs a prompt saying what the slice does: arbiter feature new {spec_t} \"Create an invoice from an order\" (or --prompt-file FILE)"
        )));
    }
    let mut project = ws.project()?;
    if let Some(app) = req.app
        && !project.apps().iter().any(|a| a.key == app)
    {
        let known: Vec<String> = project.apps().into_iter().map(|a| a.key).collect();
        return Err(SliceError::refused(format!(
            "there is no app '{app}' in {} (apps: {}); drop --app or add it under \"apps\"",
            project.root.path,
            if known.is_empty() { "none".into() } else { known.join(", ") }
        )));
    }
    let target = project.target_for_new(&spec_t.name, spec_t.domain.as_deref(), req.app);
    let branch = target.branch();
    if layout::slice_exists(ws.root(), &target.dir) && !req.force {
        return Err(SliceError::refused(format!(
            "{} already exists; change it with `arbiter feature modify {branch} \"...\"`, or pass --force to write the scaffold over it",
            target.dir
        )));
    }
    let branch_exists = ws.repo.branch_exists(&branch).await?;
    if branch_exists && !req.force {
        return Err(SliceError::refused(format!(
            "the branch {branch} already exists (the slice is in progress); `git switch {branch}` and use `arbiter feature modify`, or pass --force to scaffold on it"
        )));
    }
    ws.repo.require_clean(&format!("creating the slice {branch}")).await?;
    let default = ws.repo.default_branch().await?;
    let set_name = req.template.unwrap_or(&ws.repo.settings.template);
    let set = layout::template_set(ws.root(), set_name)?;

    let records = records_dir(ws.root(), &target);
    std::fs::create_dir_all(&records)?;
    std::fs::write(records.join("request.md"), format!("{}\n", req.prompt.trim()))?;
    let template_spec = layout::spec_template(&set, &target, req.prompt)?;
    let (spec_text, source, model_problem, qa) = match model {
        None => (template_spec, SpecSource::TemplateNoModel, None, None),
        Some(m) => {
            progress(&format!("writing {}/spec.md with the spec role ({} backend(s))", target.dir, m.chain.len()));
            let blueprint = std::fs::read_to_string(ws.root().join("SPEC.md")).ok();
            let written = m
                .ask(
                    &spec::writer_system(blueprint.as_deref()),
                    &spec::writer_request(&target.name, &target.domain, req.prompt),
                )
                .await
                .and_then(|a| spec::accept_written_spec(&a.text));
            match written {
                Err(why) => (template_spec, SpecSource::TemplateModelFailed, Some(why), None),
                Ok(draft) => {
                    std::fs::write(records.join("spec-draft.md"), &draft)?;
                    progress("checking the spec (spec QA)");
                    let qa =
                        writer::qa(m, ws.repo.settings.spec_qa_rounds, req.prompt, &[], &draft, &records, "new").await;
                    (qa.spec.clone(), SpecSource::Model, None, Some(qa))
                }
            }
        }
    };

    if branch_exists {
        ws.enter_branch(&branch, "creating the slice").await?;
    } else {
        ws.repo.create_branch(&branch, &default).await?;
    }
    let files = layout::scaffold(ws.root(), &target, &set, &spec_text, req.no_controller)?;
    let registry: Vec<String> = project.register(&target).into_iter().collect();
    layout::save(ws.root(), &project, &registry)?;
    let mut paths = vec![target.dir.clone()];
    paths.extend(registry.iter().cloned());
    let commit = ws.repo.commit(&paths, &format!("new: {branch}")).await?;
    Ok(NewOutcome {
        slice: branch.clone(),
        dir: target.dir.clone(),
        branch,
        spec_source: source,
        model_problem,
        spec_qa: qa,
        files,
        registry,
        commit,
        records: records.strip_prefix(ws.root()).unwrap_or(&records).display().to_string(),
    })
}
