//! `feature modify`: a recorded amendment of a slice's spec — the request, how the `spec`
//! role resolved it (the spec rewritten as a whole), and spec QA's verdict on the amended spec
//! against the original request plus every amendment — committed on the slice's branch.

use serde::Serialize;

use super::{BranchMove, Workspace};
use crate::layout::records_dir;
use crate::names::{TargetSpec, feature_name_from_path};
use crate::spec::{self, Amendment};
use crate::writer::{self, SpecModel};
use crate::{Result, SliceError};

/// What `feature modify` is asked.
pub struct ModifyRequest<'a> {
    pub target: Option<&'a str>,
    pub prompt: &'a str,
    /// The file open in the user's editor (`$ARBITER_CURRENT_FILE`, or the `$NVIM` server's).
    pub editor_file: Option<&'a str>,
    /// When the amendment is made (RFC 3339).
    pub now: String,
}

/// What `feature modify` did.
#[derive(Clone, Debug, Serialize)]
pub struct ModifyOutcome {
    pub slice: String,
    pub branch_move: BranchMove,
    pub amendment: usize,
    pub resolution: String,
    pub qa: String,
    pub spec_rewritten: bool,
    pub commit: Option<String>,
}

pub async fn modify(
    ws: &Workspace,
    req: ModifyRequest<'_>,
    model: Option<&SpecModel>,
    progress: &(dyn Fn(&str) + Sync),
) -> Result<ModifyOutcome> {
    let spec_t = implicit_target(ws, &req).await?;
    if req.prompt.trim().is_empty() {
        return Err(SliceError::refused(format!(
            "`arbiter feature modify {spec_t}` needs the change: arbiter feature modify {spec_t} \"Add VAT per line\" (or --prompt-file FILE)"
        )));
    }
    let (project, slice, moved) = ws.locate_and_enter(&spec_t, "amending the spec").await?;
    let target = Workspace::target_of(&project, &slice);
    let spec_path = ws.root().join(&slice.dir).join("spec.md");
    let current = std::fs::read_to_string(&spec_path).map_err(|e| {
        SliceError::refused(format!("{}/spec.md cannot be read ({e}); a slice's spec is what modify amends", slice.dir))
    })?;
    let (body, _) = spec::split_spec(&current);
    let mut amendments = spec::amendment_requests(&current);
    let number = amendments.len() + 1;
    let records = records_dir(ws.root(), &target);
    let original = std::fs::read_to_string(records.join("request.md")).unwrap_or_else(|_| spec::overview(&current));
    amendments.push(req.prompt.trim().to_string());

    let (new_body, resolution, qa, rewritten) = match model {
        None => (
            body.to_string(),
            "Recorded without a model (no `spec` role backend is configured): the spec above is unchanged; the agents that implement the slice read this request.".to_string(),
            "not run (no model)".to_string(),
            false,
        ),
        Some(m) => {
            progress(&format!("amending {}/spec.md with the spec role", slice.dir));
            match m.ask(spec::AMEND_SYSTEM, &spec::amend_request(body, req.prompt)).await.and_then(|a| spec::parse_amend_reply(&a.text)) {
                Err(why) => (
                    body.to_string(),
                    format!("The model could not amend the spec ({why}): the request is recorded as is; the agents that implement the slice read it."),
                    "not run (no amended spec)".to_string(),
                    false,
                ),
                Ok(reply) => {
                    progress("checking the amended spec (spec QA)");
                    let amended = spec::accept_written_spec(&reply.spec).unwrap_or(reply.spec);
                    let label = format!("amend-{number}");
                    let checked = writer::qa(m, ws.repo.settings.spec_qa_rounds, &original, &amendments, &amended, &records, &label).await;
                    (checked.spec, reply.resolution, checked.verdict, true)
                }
            }
        }
    };
    let amendment = Amendment {
        number,
        at: req.now.clone(),
        request: req.prompt.to_string(),
        resolution: resolution.clone(),
        qa: qa.clone(),
    };
    std::fs::write(&spec_path, spec::with_amendment(&current, &new_body, &amendment))?;
    let rel = format!("{}/spec.md", slice.dir);
    let commit = ws.repo.commit(&[rel], &format!("modify: {} (amendment {number})", slice.branch())).await?;
    Ok(ModifyOutcome {
        slice: slice.branch(),
        branch_move: moved,
        amendment: number,
        resolution,
        qa,
        spec_rewritten: rewritten,
        commit,
    })
}

/// The slice named, else the one the current branch names, else the one the editor's file
/// is in.
async fn implicit_target(ws: &Workspace, req: &ModifyRequest<'_>) -> Result<TargetSpec> {
    if req.target.is_some() {
        return ws.named_or_current(req.target, "modify").await;
    }
    if let Ok(t) = ws.named_or_current(None, "modify").await {
        return Ok(t);
    }
    let project = ws.project()?;
    if let Some(file) = req.editor_file
        && let Some(name) = feature_name_from_path(file, &project.features_dir())
    {
        return Ok(TargetSpec { domain: None, name });
    }
    Err(SliceError::refused(
        "name the slice to modify: arbiter feature modify <domain>/<Feature> \"...\" (or run it on the slice's branch, or from an editor that sets $ARBITER_CURRENT_FILE or $NVIM)",
    ))
}
