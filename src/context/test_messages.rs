//! A tool call and its result, as the ledger and the assembler tests write histories.

use crate::provider::{ContentBlock, Message, Role};

pub(crate) fn call(id: &str, name: &str, input: serde_json::Value) -> Message {
    Message {
        role: Role::Assistant,
        content: vec![ContentBlock::ToolUse {
            id: id.into(),
            name: name.into(),
            input,
        }],
    }
}

pub(crate) fn result(id: &str, content: &str) -> Message {
    Message {
        role: Role::User,
        content: vec![ContentBlock::ToolResult {
            tool_use_id: id.into(),
            content: content.into(),
            is_error: false,
        }],
    }
}
