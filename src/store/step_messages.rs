//! A step's messages stored without the tool outputs its tool calls already hold.
//!
//! A tool result is the same text as its call's `output` (what the model was shown),
//! and both were stored: the largest part of a step twice. At commit a tool result
//! whose content equals its call's output is written as
//! `{"type":"tool_result","tool_use_id":…,"content_from":"tool_call",…}`; reading the
//! step puts the output back, so every reader sees the messages as they were sent.
//! Rows stored before hold their content and read back unchanged.

use serde_json::Value;

use super::ToolCallRecord;

const MARK: &str = "content_from";
const FROM_CALL: &str = "tool_call";

/// `messages_json` with each tool result that repeats its call's output left out;
/// unchanged when it is not a message array or nothing repeats.
pub(crate) fn elide(messages_json: &str, calls: &[ToolCallRecord]) -> Option<String> {
    if calls.is_empty() {
        return None;
    }
    let mut msgs: Value = serde_json::from_str(messages_json).ok()?;
    let mut changed = false;
    for block in blocks(&mut msgs) {
        let Some(id) = block.get("tool_use_id").and_then(Value::as_str) else {
            continue;
        };
        let Some(content) = block.get("content").and_then(Value::as_str) else {
            continue;
        };
        let repeats = calls.iter().any(|c| c.call_id == id && c.output == content);
        if repeats && let Some(obj) = block.as_object_mut() {
            obj.remove("content");
            obj.insert(MARK.into(), Value::String(FROM_CALL.into()));
            changed = true;
        }
    }
    changed.then(|| msgs.to_string())
}

/// `messages_json` as sent: each left-out tool result's content put back from its call.
pub(crate) fn restore(messages_json: &str, calls: &[ToolCallRecord]) -> Option<String> {
    if !messages_json.contains(MARK) {
        return None;
    }
    let mut msgs: Value = serde_json::from_str(messages_json).ok()?;
    for block in blocks(&mut msgs) {
        if block.get(MARK).and_then(Value::as_str) != Some(FROM_CALL) {
            continue;
        }
        let id = block
            .get("tool_use_id")
            .and_then(Value::as_str)
            .unwrap_or("");
        let output = calls
            .iter()
            .find(|c| c.call_id == id)
            .map(|c| c.output.clone())
            .unwrap_or_default();
        if let Some(obj) = block.as_object_mut() {
            obj.remove(MARK);
            obj.insert("content".into(), Value::String(output));
        }
    }
    Some(msgs.to_string())
}

/// The tool-result blocks of a message array.
fn blocks(msgs: &mut Value) -> impl Iterator<Item = &mut Value> {
    msgs.as_array_mut()
        .into_iter()
        .flatten()
        .filter_map(|m| m.get_mut("content").and_then(Value::as_array_mut))
        .flatten()
        .filter(|b| b.get("type").and_then(Value::as_str) == Some("tool_result"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call(id: &str, output: &str) -> ToolCallRecord {
        ToolCallRecord {
            call_id: id.into(),
            name: "read_file".into(),
            input_json: "{}".into(),
            output: output.into(),
            is_error: false,
            confinement_refusal: None,
            duration_ms: 0,
        }
    }

    #[test]
    fn a_repeated_output_is_stored_once_and_read_back_whole() {
        let msgs = serde_json::json!([{
            "role": "user",
            "content": [
                {"type": "tool_result", "tool_use_id": "a", "content": "the long output", "is_error": false},
                {"type": "tool_result", "tool_use_id": "b", "content": "not what b's call holds", "is_error": true},
            ],
        }]);
        let json = msgs.to_string();
        let calls = [call("a", "the long output"), call("b", "other")];
        let stored = elide(&json, &calls).unwrap();
        assert!(!stored.contains("the long output"), "{stored}");
        assert!(stored.contains("not what b's call holds"));
        let back: Value = serde_json::from_str(&restore(&stored, &calls).unwrap()).unwrap();
        assert_eq!(back, msgs);
        assert_eq!(restore(&json, &calls), None, "old rows read unchanged");
    }
}
