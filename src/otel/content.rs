//! Prompt and completion content on a model call's span, on the operator's opt-in only
//! (the GenAI conventions' rule: content is sensitive and large). It is read from the
//! store, which redacted it when it was written, and every text part is cut at
//! [`PART_LIMIT`] bytes, so one huge tool output cannot make a span a collector drops.
//!
//! `gen_ai.input.messages` holds the messages *this request added* to the conversation
//! — the goal and first messages for step 1, then the tool results and observations
//! the previous step appended — not the whole history again at every step (that grows
//! with the square of the run); `io_harness.input.messages.scope = "new"` says so.
//! `gen_ai.output.messages` holds the reply, with the step's stop reason as its
//! `finish_reason`. Both are JSON strings in the conventions' message schema: parts of
//! type `text`, `reasoning`, `tool_call` and `tool_call_response`.

use serde_json::{Value as Json, json};

use super::conventions as sc;
use super::span::Span;
use crate::provider::{ContentBlock, Message, Role};
use crate::store::{RunRecord, StepRecord};

/// The most bytes of one text part on a span (longer ones are cut, saying how much).
pub const PART_LIMIT: usize = 16 * 1024;

/// Puts the content of `step`'s model call on its span.
pub(super) fn attach(
    span: &mut Span,
    run: &RunRecord,
    step: &StepRecord,
    previous: Option<&StepRecord>,
) {
    let input = match previous {
        None => messages(run.initial_json.as_deref()),
        Some(p) => {
            let mut m = messages(Some(&p.messages_json));
            if p.reply_json.is_empty() && m.first().is_some_and(|f| f.role == Role::Assistant) {
                m.remove(0);
            }
            m
        }
    };
    let reply = reply_of(step);
    let input: Vec<Json> = input.iter().map(message).collect();
    span.str(sc::INPUT_MESSAGES, Json::Array(input).to_string());
    span.str(sc::HARNESS_INPUT_SCOPE, "new");
    if let Some(r) = reply {
        let mut m = message(&r);
        m["finish_reason"] = json!(step.stop_reason.clone().unwrap_or_default());
        span.str(sc::OUTPUT_MESSAGES, Json::Array(vec![m]).to_string());
    }
}

/// The step's reply: its own record where one was kept, else the first message the
/// step appended (how the run loop stores it, once).
fn reply_of(step: &StepRecord) -> Option<Message> {
    if !step.reply_json.is_empty() {
        let blocks: Vec<ContentBlock> = serde_json::from_str(&step.reply_json).ok()?;
        return Some(Message {
            role: Role::Assistant,
            content: blocks,
        });
    }
    messages(Some(&step.messages_json))
        .into_iter()
        .next()
        .filter(|m| m.role == Role::Assistant)
}

fn messages(json: Option<&str>) -> Vec<Message> {
    json.and_then(|j| serde_json::from_str(j).ok())
        .unwrap_or_default()
}

/// One message in the conventions' schema; a user message of tool results alone is a
/// `tool` message.
fn message(m: &Message) -> Json {
    let only_results = !m.content.is_empty()
        && m.content
            .iter()
            .all(|b| matches!(b, ContentBlock::ToolResult { .. }));
    let role = match m.role {
        Role::Assistant => "assistant",
        Role::User if only_results => "tool",
        Role::User => "user",
    };
    let parts: Vec<Json> = m.content.iter().filter_map(part).collect();
    json!({"role": role, "parts": parts})
}

fn part(b: &ContentBlock) -> Option<Json> {
    Some(match b {
        ContentBlock::Text { text } => json!({"type": "text", "content": cut(text)}),
        ContentBlock::Thinking { thinking, .. } => {
            json!({"type": "reasoning", "content": cut(thinking)})
        }
        ContentBlock::ToolUse { id, name, input } => {
            let args = input.to_string();
            let arguments = if args.len() > PART_LIMIT {
                Json::String(cut(&args))
            } else {
                input.clone()
            };
            json!({"type": "tool_call", "id": id, "name": name, "arguments": arguments})
        }
        ContentBlock::ToolResult {
            tool_use_id,
            content,
            ..
        } => json!({"type": "tool_call_response", "id": tool_use_id, "response": cut(content)}),
        // Encrypted: nothing a person could read.
        ContentBlock::RedactedThinking { .. } => return None,
    })
}

/// `text` up to [`PART_LIMIT`] bytes on a character boundary, saying what was cut.
fn cut(text: &str) -> String {
    if text.len() <= PART_LIMIT {
        return text.to_string();
    }
    let mut end = PART_LIMIT;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!(
        "{}…[{} more bytes not exported]",
        &text[..end],
        text.len() - end
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parts_follow_the_conventions_and_long_text_is_cut() {
        let m = Message {
            role: Role::User,
            content: vec![ContentBlock::ToolResult {
                tool_use_id: "c1".into(),
                content: "é".repeat(PART_LIMIT),
                is_error: false,
            }],
        };
        let j = message(&m);
        assert_eq!(j["role"], "tool");
        assert_eq!(j["parts"][0]["type"], "tool_call_response");
        let r = j["parts"][0]["response"].as_str().unwrap();
        assert!(r.len() < PART_LIMIT + 64, "{}", r.len());
        assert!(r.ends_with(&format!("…[{} more bytes not exported]", PART_LIMIT)));
        let a = message(&Message::assistant("hi"));
        assert_eq!(
            a,
            json!({"role": "assistant", "parts": [{"type": "text", "content": "hi"}]})
        );
    }
}
