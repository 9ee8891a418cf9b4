//! The built-in coding agent: arbiter's own tool loop over any configured model backend.
//!
//! Each step sends the conversation to the coding role's backend chain (falling through to
//! the next backend on an error, an empty answer or malformed tool calls), executes the
//! tool calls it gets back inside the worktree (see [`crate::builtin::tools`]), and feeds
//! the results back. The loop ends when the model calls `finish` or answers without a tool
//! call, or when a limit is hit (steps, tokens, wall time): the candidate then ends with
//! status `limit_reached` and is evaluated on its patch so far. Every model call is a cost
//! record; the transcript (messages, tool calls, results, usage) is redacted.

use std::sync::Arc;
use std::time::Instant;

use arbiter_core::artifact::AgentOutcome;
use arbiter_core::cost::CallRecord;
use arbiter_llm::{ChatRequest, Endpoint, LlmClient, Message, ToolCall, ToolSpec, call_record, chat_with_fallback};
use async_trait::async_trait;
use serde_json::{Value, json};

use crate::agent::{AgentContext, AgentReport, AgentRunner, RunnerError};
use crate::builtin::tools::Toolbox;
use crate::rundir::JsonLines;

/// Limits of one candidate's loop.
#[derive(Clone, Copy, Debug)]
pub struct AgentLimits {
    pub max_steps: u32,
    /// Input plus output tokens over the whole loop.
    pub max_tokens: u64,
}

impl Default for AgentLimits {
    fn default() -> Self {
        AgentLimits { max_steps: 40, max_tokens: 400_000 }
    }
}

/// The built-in runner: a backend chain and the limits of its loop.
pub struct BuiltinRunner {
    pub name: String,
    pub chain: Vec<Endpoint>,
    pub client: Arc<LlmClient>,
    pub limits: AgentLimits,
}

const SYSTEM_PROMPT: &str = "You are a careful software engineer working alone in a git checkout of a repository. \
Use the tools to inspect the code, make the smallest correct change that completes the task, and run the \
project's checks with run_shell when useful. Paths are relative to the repository root. Edit files with \
edit_file (exact, unique text replacement) or write_file. When the work is done, call finish with a short \
summary of what you changed and why.\n\n\
If you cannot call tools natively, reply with exactly one tool call per message in a fenced block:\n\
```tool\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"src/lib.rs\"}}\n```";

/// Tool calls written in the text protocol: fenced ```tool blocks holding
/// `{"name": ..., "arguments": {...}}`. Used only when a model returns no native tool call.
pub fn parse_text_protocol(text: &str) -> Vec<ToolCall> {
    let mut calls = Vec::new();
    let mut rest = text;
    while let Some(start) = rest.find("```tool") {
        let after = &rest[start + "```tool".len()..];
        let Some(end) = after.find("```") else { break };
        let body = after[..end].trim();
        if let Ok(v) = serde_json::from_str::<Value>(body)
            && let Some(name) = v.get("name").and_then(Value::as_str)
        {
            calls.push(ToolCall {
                id: format!("text_{}", calls.len() + 1),
                name: name.to_string(),
                arguments: v.get("arguments").cloned().unwrap_or_else(|| json!({})),
            });
        }
        rest = &after[end + 3..];
    }
    calls
}

enum Ending {
    Finished,
    ModelFailed(String),
    Limit(String),
    TimedOut,
    Cancelled,
}

#[async_trait]
impl AgentRunner for BuiltinRunner {
    fn name(&self) -> &str {
        &self.name
    }

    fn kind(&self) -> &'static str {
        "builtin"
    }

    fn invocation(&self) -> String {
        let chain: Vec<String> = self.chain.iter().map(|e| format!("{} ({})", e.name, e.model)).collect();
        format!("built-in agent via {}", chain.join(" → "))
    }

    async fn run(&self, ctx: &AgentContext) -> Result<AgentReport, RunnerError> {
        let started = Instant::now();
        let deadline = tokio::time::Instant::now() + ctx.timeout;
        let toolbox =
            Toolbox::new(ctx.worktree.clone(), ctx.env.clone(), ctx.cancel.clone())?.with_jail(ctx.jail.clone());
        let prompt = std::fs::read_to_string(&ctx.prompt_file)?;
        let mut transcript = JsonLines::open(&ctx.candidate_dir.join(arbiter_core::artifact::paths::TRANSCRIPT))?;
        let tools: Vec<ToolSpec> = Toolbox::specs()
            .into_iter()
            .map(|s| ToolSpec {
                name: s.name.to_string(),
                description: s.description.to_string(),
                parameters: s.parameters,
            })
            .collect();
        let mut messages = vec![Message::User(prompt.clone())];
        transcript.append(&json!({"type": "system", "text": SYSTEM_PROMPT}))?;
        transcript.append(&json!({"type": "user", "text": ctx.redactor.redact(&prompt)}))?;
        let mut calls: Vec<CallRecord> = Vec::new();
        let mut tokens_used: u64 = 0;
        let mut steps: u32 = 0;
        let ending = loop {
            if steps >= self.limits.max_steps {
                break Ending::Limit(format!("max_steps ({})", self.limits.max_steps));
            }
            if tokens_used >= self.limits.max_tokens {
                break Ending::Limit(format!("max_tokens ({} used of {})", tokens_used, self.limits.max_tokens));
            }
            // Stopped (the budget is spent, the run interrupted): no new call is made.
            if ctx.cancel.is_cancelled() {
                break Ending::Cancelled;
            }
            steps += 1;
            let request = ChatRequest {
                system: Some(SYSTEM_PROMPT.to_string()),
                messages: messages.clone(),
                tools: tools.clone(),
                temperature: Some(0.0),
                max_tokens: None,
            };
            let mut fallbacks = Vec::new();
            let result = tokio::select! {
                biased;
                _ = ctx.cancel.cancelled() => { break Ending::Cancelled; }
                r = chat_with_fallback(&self.client, &self.chain, &request, |f| fallbacks.push(f)) => Some(r),
                _ = tokio::time::sleep_until(deadline) => None,
            };
            for f in &fallbacks {
                let reason = ctx.redactor.redact(&f.reason);
                transcript.append(&json!({"type": "fallback", "from": f.from, "to": f.to, "reason": reason}))?;
                ctx.events
                    .emit(
                        Some(&ctx.candidate),
                        &arbiter_core::event::ModelFallback { from: f.from.clone(), to: f.to.clone(), reason },
                    )
                    .await;
            }
            let Some(result) = result else { break Ending::TimedOut };
            let (index, response) = match result {
                Ok(ok) => ok,
                Err(e) => break Ending::ModelFailed(ctx.redactor.redact(&e.to_string())),
            };
            let endpoint = &self.chain[index];
            let call = call_record("coding", endpoint, Some(ctx.candidate.clone()), response.usage.as_ref());
            ctx.budget.charge(&call).await;
            calls.push(call);
            if let Some(u) = &response.usage {
                tokens_used += u.input_tokens + u.output_tokens;
            }
            let tool_calls = if response.tool_calls.is_empty() {
                parse_text_protocol(&response.text)
            } else {
                response.tool_calls.clone()
            };
            transcript.append(&json!({
                "type": "assistant",
                "backend": endpoint.name,
                "model": endpoint.model,
                "text": ctx.redactor.redact(&response.text),
                "tool_calls": tool_calls.iter().map(|c| json!({"id": c.id, "name": c.name, "arguments": ctx.redactor.redact(&c.arguments.to_string())})).collect::<Vec<_>>(),
                "usage": response.usage.as_ref().map(|u| json!({"input_tokens": u.input_tokens, "output_tokens": u.output_tokens, "cached_tokens": u.cached_tokens})),
            }))?;
            messages.push(Message::Assistant { text: response.text.clone(), tool_calls: tool_calls.clone() });
            if tool_calls.is_empty() {
                break Ending::Finished;
            }
            let mut finished = false;
            for call in &tool_calls {
                let outcome = toolbox.call(&call.name, &call.arguments).await;
                transcript.append(&json!({
                    "type": "tool_result",
                    "id": call.id,
                    "name": call.name,
                    "is_error": outcome.is_error,
                    "content": ctx.redactor.redact(&outcome.content),
                }))?;
                messages.push(Message::ToolResult {
                    tool_call_id: call.id.clone(),
                    content: outcome.content,
                    is_error: outcome.is_error,
                });
                finished |= outcome.finished.is_some();
            }
            if finished {
                break Ending::Finished;
            }
        };
        let mut outcome = AgentOutcome { duration_ms: started.elapsed().as_millis() as u64, ..Default::default() };
        match &ending {
            Ending::Finished => outcome.exit_code = Some(0),
            Ending::ModelFailed(_) => outcome.exit_code = Some(1),
            Ending::Limit(why) => outcome.limit_reached = Some(why.clone()),
            Ending::TimedOut => outcome.timed_out = true,
            Ending::Cancelled => outcome.cancelled = true,
        }
        let (kind, detail) = match &ending {
            Ending::Finished => ("finished", None),
            Ending::ModelFailed(e) => ("model_failed", Some(e.clone())),
            Ending::Limit(why) => ("limit_reached", Some(why.clone())),
            Ending::TimedOut => ("timed_out", None),
            Ending::Cancelled => ("cancelled", None),
        };
        transcript
            .append(&json!({"type": "end", "reason": kind, "detail": detail, "steps": steps, "tokens": tokens_used}))?;
        Ok(AgentReport { outcome, calls, details: None, secrets: Vec::new() })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_protocol_reads_fenced_calls() {
        let text = "I will read it.\n```tool\n{\"name\": \"read_file\", \"arguments\": {\"path\": \"a.py\"}}\n```\nthen\n```tool\n{\"name\": \"finish\", \"arguments\": {\"summary\": \"done\"}}\n```";
        let calls = parse_text_protocol(text);
        assert_eq!(calls.len(), 2);
        assert_eq!(calls[0].name, "read_file");
        assert_eq!(calls[0].arguments["path"], "a.py");
        assert!(parse_text_protocol("no calls here").is_empty());
        assert!(parse_text_protocol("```tool\nnot json\n```").is_empty());
    }
}
