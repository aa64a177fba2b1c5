//! A reply cut at `[provider] max_reply_bytes` becomes a turn the model is told about.
//!
//! A 50 MB reply once took the harness from 22 MB to 435 MB of memory and went into
//! the store three times. The wire clients stop reading at the limit; this module turns
//! what arrived into a turn that is safe to keep and to answer: its text stays, its
//! thinking goes (a signature cut short would be refused when sent back), and every
//! tool call in it — the last one is incomplete, and the turn as a whole is not what
//! the model meant to send — becomes a marked call ([`super::invalid_call`]) that the
//! dispatcher answers with a tool error saying why, never runs. A reply cut before any
//! call gets one marked call named [`CUT_REPLY`], so the model hears of it all the same.
//! Nothing is retried: the same request would produce the same reply.

use serde_json::json;

use super::invalid_call::{INVALID_CALL, RAW_KEPT, UNNAMED_CALL};
use super::types::{ContentBlock, StopReason};

/// The name of the call a cut reply without calls is answered through.
pub const CUT_REPLY: &str = "reply_cut";

/// What the model is told about a cut reply.
fn why(limit: u64) -> String {
    format!(
        "your reply was cut at {limit} bytes ([provider] max_reply_bytes) before it ended, \
         so none of its calls was run; send smaller pieces (a large file in several writes)"
    )
}

/// The turn made of `content` received before the cut at `limit` bytes, and its stop
/// reason.
pub fn cut_turn(content: Vec<ContentBlock>, limit: u64) -> (Vec<ContentBlock>, StopReason) {
    let mut out = Vec::new();
    let mut calls = 0;
    for block in content {
        match block {
            ContentBlock::Text { .. } => out.push(block),
            ContentBlock::ToolUse { id, name, input } => {
                calls += 1;
                let name = if name.trim().is_empty() {
                    UNNAMED_CALL.to_string()
                } else {
                    name
                };
                out.push(ContentBlock::ToolUse {
                    id,
                    name,
                    input: marked(&input, limit),
                });
            }
            ContentBlock::Thinking { .. } | ContentBlock::RedactedThinking { .. } => {}
            other => out.push(other),
        }
    }
    if calls == 0 {
        out.push(ContentBlock::ToolUse {
            id: "call_io_harness_reply_cut".into(),
            name: CUT_REPLY.into(),
            input: marked(&serde_json::Value::Null, limit),
        });
    }
    (out, StopReason::ToolUse)
}

/// The marked input of a call of a cut reply, its arguments kept to [`RAW_KEPT`]
/// characters (the raw text of one already marked, else the arguments as JSON).
fn marked(input: &serde_json::Value, limit: u64) -> serde_json::Value {
    let raw = match input.get(INVALID_CALL) {
        Some(m) => m["raw_arguments"].as_str().unwrap_or_default().to_string(),
        None if input.is_null() => String::new(),
        None => input.to_string(),
    };
    let raw = match raw.char_indices().nth(RAW_KEPT) {
        Some((i, _)) => format!("{}… ({} bytes in all)", &raw[..i], raw.len()),
        None => raw,
    };
    json!({ INVALID_CALL: { "error": why(limit), "raw_arguments": raw } })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::provider::invalid_call::{feedback, problem};

    #[test]
    fn every_call_of_a_cut_reply_is_answered_not_run_and_thinking_goes() {
        let big = "x".repeat(10_000);
        let content = vec![
            ContentBlock::Thinking {
                thinking: "t".into(),
                signature: Some("sig-cut".into()),
            },
            ContentBlock::Text { text: "ok".into() },
            ContentBlock::ToolUse {
                id: "c1".into(),
                name: "write_file".into(),
                input: json!({"path": "a", "content": big}),
            },
        ];
        let (turn, stop) = cut_turn(content, 1024);
        assert_eq!(stop, StopReason::ToolUse);
        assert_eq!(turn.len(), 2, "{turn:?}");
        let ContentBlock::ToolUse { name, input, .. } = &turn[1] else {
            panic!("{turn:?}");
        };
        assert!(problem(input).unwrap().contains("cut at 1024 bytes"));
        assert!(
            input.to_string().len() < 3 * RAW_KEPT,
            "arguments kept short"
        );
        assert!(feedback(name, input).unwrap().contains("max_reply_bytes"));
    }

    #[test]
    fn a_cut_reply_without_calls_gets_one_to_answer() {
        let (turn, _) = cut_turn(vec![ContentBlock::Text { text: "aaa".into() }], 8);
        let ContentBlock::ToolUse { name, input, .. } = &turn[1] else {
            panic!("{turn:?}");
        };
        assert_eq!(name, CUT_REPLY);
        assert!(problem(input).is_some());
    }
}
