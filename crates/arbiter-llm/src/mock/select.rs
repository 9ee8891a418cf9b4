//! Which scripted response answers a request: the conversation whose `match` fits it,
//! then in that conversation the next unused response (queue mode) or the turn the
//! request's own history has reached (history mode).

use serde_json::Value;

use super::Api;
use super::history::History;
use super::script::{MockMatch, MockResponse, MockScript, MockTurns};

/// What answers a request.
#[derive(Debug)]
pub(super) enum Choice {
    /// A scripted response; the tool-call ids generated for it are `{id_base}_{k}`.
    Scripted { response: Box<MockResponse>, id_base: String },
    /// History mode's plain "OK" for a request that gets no turn.
    Ok,
    /// Nothing is left to answer with.
    Exhausted { status: u16, message: String },
}

/// The choice and a short description of it for the request log.
#[derive(Debug)]
pub(super) struct Selected {
    pub choice: Choice,
    pub served: String,
}

/// The parts of a request selection looks at.
pub(super) struct Request<'a> {
    pub api: Api,
    pub method: &'a str,
    pub path: &'a str,
    pub body_text: &'a str,
    pub body: &'a Value,
    pub history: &'a History,
    /// 1-based number of the request.
    pub number: usize,
}

/// `used[0]` marks the script's `responses`, `used[i + 1]` those of conversation `i`.
pub(super) fn used_flags(script: &MockScript) -> Vec<Vec<bool>> {
    std::iter::once(script.responses.len())
        .chain(script.conversations.iter().map(|c| c.responses.len()))
        .map(|n| vec![false; n])
        .collect()
}

pub(super) fn select(script: &MockScript, used: &mut [Vec<bool>], request: &Request) -> Selected {
    let model = request.body.get("model").and_then(Value::as_str);
    let conversation = script.conversations.iter().position(|c| c.matcher.fits(request.path, model, request.body_text));
    let (slot, responses, label) = match conversation {
        Some(i) => {
            let matcher = script.conversations[i].matcher.describe();
            (i + 1, &script.conversations[i].responses, format!("conversation {} ({matcher})", i + 1))
        }
        None if script.conversations.is_empty() => (0, &script.responses, "the script".to_string()),
        None => (0, &script.responses, "the default responses".to_string()),
    };
    let used = &mut used[slot];
    match script.turns {
        MockTurns::Queue => from_queue(responses, used, request, &label),
        MockTurns::History => from_history(responses, used, request, &label),
    }
}

/// The first unused response whose match fits, else the next unused one without a match.
fn from_queue(responses: &[MockResponse], used: &mut [bool], request: &Request, label: &str) -> Selected {
    let available = |i: usize, r: &MockResponse| r.repeat || !used[i];
    let fits = |m: &MockMatch| {
        m.contains.as_ref().is_none_or(|c| request.body_text.contains(c.as_str()))
            && m.path.as_ref().is_none_or(|p| p == request.path)
    };
    let index = responses
        .iter()
        .enumerate()
        .position(|(i, r)| available(i, r) && r.matcher.as_ref().is_some_and(fits))
        .or_else(|| responses.iter().enumerate().position(|(i, r)| available(i, r) && r.matcher.is_none()));
    let Some(index) = index else {
        let message = format!(
            "mock script exhausted: request #{} ({} {}) matched no unused response of {label}; \
             add responses to the script or mark one \"repeat\": true",
            request.number, request.method, request.path
        );
        return Selected { choice: Choice::Exhausted { status: 500, message }, served: "exhausted".into() };
    };
    let response = responses[index].clone();
    if !response.repeat {
        used[index] = true;
    }
    let prefix = if request.api == Api::Anthropic { "toolu" } else { "call" };
    let id_base = format!("{prefix}_{}", request.number);
    Selected {
        choice: Choice::Scripted { response: Box::new(response), id_base },
        served: format!("response {} of {label}", index + 1),
    }
}

/// Turn n + 1 for a request whose history holds n mock turns; faults (errors, drops)
/// listed before a turn are served once each, in order, before it.
fn from_history(responses: &[MockResponse], used: &mut [bool], request: &Request, label: &str) -> Selected {
    if !request.history.awaits_answer() {
        let served = "OK: the last non-system message is not a user message or a tool result".to_string();
        return Selected { choice: Choice::Ok, served };
    }
    let answers: Vec<usize> = (0..responses.len()).filter(|&i| !responses[i].is_fault()).collect();
    let texts: Vec<&str> = answers.iter().map(|&i| responses[i].text.trim()).filter(|t| !t.is_empty()).collect();
    let ids: Vec<&str> =
        answers.iter().flat_map(|&i| responses[i].tool_calls.iter().filter_map(|c| c.id.as_deref())).collect();
    let done = request.history.mock_turns(&texts, &ids);
    let turn = done + 1;

    let faults_from = match done {
        0 => 0,
        n => answers.get(n - 1).or(answers.last()).map_or(0, |&i| i + 1),
    };
    let faults_to = answers.get(done).copied().unwrap_or(responses.len());
    if let Some(i) = (faults_from..faults_to).find(|&i| responses[i].repeat || !used[i]) {
        if !responses[i].repeat {
            used[i] = true;
        }
        let choice = Choice::Scripted { response: Box::new(responses[i].clone()), id_base: String::new() };
        return Selected { choice, served: format!("fault {} of {label}, before turn {turn}", i + 1) };
    }

    let index = match (answers.get(done), answers.last()) {
        (Some(&i), _) => i,
        (None, Some(&last)) if responses[last].repeat => last,
        _ => {
            let message = format!(
                "mock script exhausted: request #{} ({} {}) has {done} mock turn(s) in its history and {label} \
                 scripts {}; add turns or mark the last one \"repeat\": true",
                request.number,
                request.method,
                request.path,
                answers.len()
            );
            return Selected { choice: Choice::Exhausted { status: 400, message }, served: "exhausted".into() };
        }
    };
    let response = &responses[index];
    if let Some(call) = response.tool_calls.iter().find(|c| !request.history.declares(&c.name)) {
        let served = format!("OK: turn {turn} of {label} calls {}, which the request does not declare", call.name);
        return Selected { choice: Choice::Ok, served };
    }
    used[index] = true;
    let prefix = if request.api == Api::Anthropic { "toolu" } else { "call" };
    let id_base = format!("{prefix}_mock_t{turn}_r{}", request.number);
    Selected {
        choice: Choice::Scripted { response: Box::new(response.clone()), id_base },
        served: format!("turn {turn} of {label}"),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;
    use crate::mock::{MockConversation, MockConversationMatch};

    fn pick(script: &MockScript, used: &mut [Vec<bool>], body: &Value, history: &History) -> Option<String> {
        let body_text = body.to_string();
        let request = Request {
            api: Api::Anthropic,
            method: "POST",
            path: "/v1/messages",
            body_text: &body_text,
            body,
            history,
            number: 1,
        };
        match select(script, used, &request).choice {
            Choice::Scripted { response, .. } if response.is_fault() => Some(format!("fault {:?}", response.status)),
            Choice::Scripted { response, .. } => Some(response.text),
            Choice::Ok => Some("OK".into()),
            Choice::Exhausted { status, .. } => Some(format!("exhausted {status}")),
        }
    }

    #[test]
    fn queue_selection_prefers_matches_then_order_and_consumes() {
        let mut matched = MockResponse::text("matched");
        matched.matcher = Some(MockMatch { contains: Some("special".into()), path: None });
        let mut repeat = MockResponse::text("again");
        repeat.repeat = true;
        let script = MockScript::new(vec![MockResponse::text("first"), matched, repeat]);
        let mut used = used_flags(&script);
        let h = History::default();
        let special = json!({"q": "a special body"});
        assert_eq!(pick(&script, &mut used, &special, &h).as_deref(), Some("matched"));
        assert_eq!(pick(&script, &mut used, &special, &h).as_deref(), Some("first"));
        assert_eq!(pick(&script, &mut used, &json!({}), &h).as_deref(), Some("again"));
        assert_eq!(pick(&script, &mut used, &json!({}), &h).as_deref(), Some("again"));
        let script = MockScript::new(vec![MockResponse::text("one")]);
        let mut used = used_flags(&script);
        assert_eq!(pick(&script, &mut used, &json!({}), &h).as_deref(), Some("one"));
        assert_eq!(pick(&script, &mut used, &json!({}), &h).as_deref(), Some("exhausted 500"));
    }

    #[test]
    fn conversations_split_queues_by_model() {
        let script = MockScript {
            conversations: vec![MockConversation {
                matcher: MockConversationMatch { model: Some("fixer".into()), ..Default::default() },
                responses: vec![MockResponse::text("fixer 1")],
            }],
            ..MockScript::new(vec![MockResponse::text("default 1")])
        };
        let mut used = used_flags(&script);
        let h = History::default();
        let fixer = json!({"model": "fixer"});
        assert_eq!(pick(&script, &mut used, &json!({"model": "other"}), &h).as_deref(), Some("default 1"));
        assert_eq!(pick(&script, &mut used, &fixer, &h).as_deref(), Some("fixer 1"));
        assert_eq!(pick(&script, &mut used, &fixer, &h).as_deref(), Some("exhausted 500"));
    }

    #[test]
    fn history_faults_are_served_once_before_their_turn_and_a_repeated_last_turn_goes_on() {
        let mut last = MockResponse::text("Done");
        last.repeat = true;
        let script = MockScript {
            turns: MockTurns::History,
            ..MockScript::new(vec![MockResponse::error(429, "slow"), MockResponse::text("Looking"), last])
        };
        let mut used = used_flags(&script);
        let body = |messages: Value| json!({"messages": messages});
        let fresh = body(json!([{"role": "user", "content": "go"}]));
        let h = History::read(Api::Anthropic, &fresh);
        assert_eq!(pick(&script, &mut used, &fresh, &h).as_deref(), Some("fault Some(429)"));
        assert_eq!(pick(&script, &mut used, &fresh, &h).as_deref(), Some("Looking"));
        assert_eq!(pick(&script, &mut used, &fresh, &h).as_deref(), Some("Looking"));
        let later = body(json!([{"role": "user", "content": "go"}, {"role": "assistant", "content": "Looking"},
            {"role": "user", "content": "more"}, {"role": "assistant", "content": "Done"},
            {"role": "user", "content": "more"}]));
        let h = History::read(Api::Anthropic, &later);
        assert_eq!(pick(&script, &mut used, &later, &h).as_deref(), Some("Done"));
        let answered = body(json!([{"role": "user", "content": "go"}, {"role": "assistant", "content": "Looking"}]));
        let h = History::read(Api::Anthropic, &answered);
        assert_eq!(pick(&script, &mut used, &answered, &h).as_deref(), Some("OK"));
        assert!(used.iter().flatten().all(|u| *u));
    }
}
