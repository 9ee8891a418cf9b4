//! The conversation with the `planning` role that turns an idea (or an issue) into a PRD and
//! a plan: the clarifying questions, the PRD, the plan with one repair round. Every call is
//! recorded with its cost ([`Planner::calls`]); what the prompts say and how answers are
//! checked is `arbiter_core::intake`'s.

use arbiter_core::cost::CallRecord;
use arbiter_core::intake::draft::{self, Draft, Grounding, Header};
use arbiter_core::intake::prompts::{self, RepoFacts};
use arbiter_llm::{ChatRequest, Endpoint, LlmClient, Message, chat_with_fallback};
use serde_json::Value;

use crate::git::{Git, GitError};

/// Output limits of the planning calls.
const QUESTIONS_TOKENS: u32 = 1024;
const PRD_TOKENS: u32 = 4096;
const PLAN_TOKENS: u32 = 8192;

/// Why planning stopped.
#[derive(Debug, thiserror::Error)]
pub enum PlanningError {
    #[error(
        "no backend has the `planning` role: add one with `arbiter backend add NAME --provider P --model M --roles planning` (or name a chain under [roles] planning = [...] in .arbiter/config.toml)"
    )]
    NoBackend,
    #[error("the planning model could not be reached: {0}")]
    Unreachable(String),
    #[error("the planning model's plan is still not usable after one repair round:\n{}", .0.iter().map(|p| format!("  - {p}")).collect::<Vec<_>>().join("\n"))]
    Unusable(Vec<String>),
}

/// A plan as drafted, and whether it needed the repair round.
pub struct Drafted {
    pub draft: Draft,
    pub repaired: bool,
    /// The model's last answer (kept beside the plan when it was not usable).
    pub answer: String,
}

/// The planning role's chain, and the calls made on it.
pub struct Planner<'a> {
    client: &'a LlmClient,
    chain: &'a [Endpoint],
    calls: Vec<CallRecord>,
}

impl<'a> Planner<'a> {
    pub fn new(client: &'a LlmClient, chain: &'a [Endpoint]) -> Result<Self, PlanningError> {
        if chain.is_empty() {
            return Err(PlanningError::NoBackend);
        }
        Ok(Planner { client, chain, calls: Vec::new() })
    }

    /// Every call made so far, with what it cost.
    pub fn calls(&self) -> &[CallRecord] {
        &self.calls
    }

    async fn ask(&mut self, system: &str, messages: Vec<Message>, max_tokens: u32) -> Result<String, PlanningError> {
        let request = ChatRequest {
            system: Some(system.to_string()),
            messages,
            tools: Vec::new(),
            temperature: Some(0.2),
            max_tokens: Some(max_tokens),
        };
        let (i, response) = chat_with_fallback(self.client, self.chain, &request, |_| {})
            .await
            .map_err(|e| PlanningError::Unreachable(e.to_string()))?;
        self.calls.push(arbiter_llm::call_record("planning", &self.chain[i], None, response.usage.as_ref()));
        Ok(response.text)
    }

    /// The clarifying questions that matter for `idea` (none when it is clear).
    pub async fn questions(&mut self, idea: &str, facts: &RepoFacts) -> Result<Vec<String>, PlanningError> {
        let answer = self
            .ask(prompts::QUESTIONS_SYSTEM, vec![Message::User(prompts::questions(idea, facts))], QUESTIONS_TOKENS)
            .await?;
        Ok(prompts::read_questions(&answer))
    }

    /// The PRD for `idea`, with the clarifications.
    pub async fn prd(&mut self, idea: &str, clarifications: &str, facts: &RepoFacts) -> Result<String, PlanningError> {
        let answer = self
            .ask(prompts::PRD_SYSTEM, vec![Message::User(prompts::prd(idea, clarifications, facts))], PRD_TOKENS)
            .await?;
        Ok(prompts::read_prd(&answer))
    }

    /// The plan decomposed from `prd`: checked against the plan file's schema
    /// (`schema_problems`), the drafting rules and the plan checks; its problems go back to
    /// the model once; after that what breaks the drafting rules is dropped, and anything
    /// else fails it.
    pub async fn plan(
        &mut self,
        prd: &str,
        facts: &RepoFacts,
        header: &Header,
        ground: &Grounding<'_>,
        schema_problems: &dyn Fn(&Value) -> Vec<String>,
    ) -> Result<Drafted, PlanningError> {
        let mut messages = vec![Message::User(prompts::plan(prd, facts))];
        let answer = self.ask(prompts::PLAN_SYSTEM, messages.clone(), PLAN_TOKENS).await?;
        let problems = match draft::assemble(&answer, header) {
            Ok(plan) => {
                let mut found = schema_problems(&plan);
                found.extend(draft::problems(&plan, ground));
                if found.is_empty() {
                    let draft = draft::finish(&plan, ground).map_err(PlanningError::Unusable)?;
                    return Ok(Drafted { draft, repaired: false, answer });
                }
                found
            }
            Err(found) => found,
        };
        messages.push(Message::Assistant { text: answer, tool_calls: Vec::new() });
        messages.push(Message::User(prompts::repair(&problems)));
        let answer = self.ask(prompts::PLAN_SYSTEM, messages, PLAN_TOKENS).await?;
        let plan = draft::assemble(&answer, header).map_err(PlanningError::Unusable)?;
        let draft = draft::finish(&plan, ground).map_err(PlanningError::Unusable)?;
        let exported = serde_json::to_value(&draft.spec).unwrap_or_default();
        let still = schema_problems(&exported);
        if !still.is_empty() {
            return Err(PlanningError::Unusable(still));
        }
        Ok(Drafted { draft, repaired: true, answer })
    }
}

/// What the planner is told about the repository at `commit`: its tracked paths and its own
/// test command.
pub async fn repo_facts(repo: &Git, commit: &str) -> Result<RepoFacts, GitError> {
    let listing = repo.run(["ls-tree", "-r", "-z", "--name-only", commit]).await?;
    let files: Vec<String> =
        String::from_utf8_lossy(&listing.stdout).split('\0').filter(|f| !f.is_empty()).map(str::to_string).collect();
    let detected = crate::verify_detect::at_commit(repo, commit).await?;
    Ok(RepoFacts { files, test_command: detected.map(|d| (d.command, d.from)) })
}
