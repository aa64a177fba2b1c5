//! A tool call the model got wrong is feedback, not a provider fault.
//!
//! A call whose arguments are not JSON (or not an object), or that has no tool name,
//! is what the model sent, complete and on the wire correctly: retrying the request or
//! sending it to a fallback would only ask again. The assemblers turn such a call into
//! an ordinary [`ContentBlock::ToolUse`] whose input is one object under
//! [`INVALID_CALL`] holding what was wrong and the raw arguments (cut to
//! [`RAW_KEPT`] characters), so the step records the call, the tool dispatcher answers
//! it with a tool error saying what to fix, and the stall detector counts repeats of it
//! as no progress.
//!
//! [`ContentBlock::ToolUse`]: crate::provider::ContentBlock::ToolUse

use serde_json::{Value, json};

/// The one key of the input of a call the model got wrong.
pub const INVALID_CALL: &str = "io_harness_invalid_call";

/// The name given to a call that came without one (the conversation must name it
/// when the call is sent back with its result).
pub const UNNAMED_CALL: &str = "unnamed_tool_call";

/// Characters of the raw arguments kept.
pub const RAW_KEPT: usize = 2000;

fn cut(s: &str) -> String {
    match s.char_indices().nth(RAW_KEPT) {
        Some((i, _)) => format!("{}… ({} bytes in all)", &s[..i], s.len()),
        None => s.to_string(),
    }
}

/// The tool name and input of a call with `name` and raw JSON `arguments` (empty:
/// no arguments): parsed when they are a JSON object, else the marked input.
///
/// ```
/// use io_harness::provider::invalid_call::{checked_call, problem};
/// let (name, input) = checked_call("read_file", r#"{"path": "a"#);
/// assert_eq!(name, "read_file");
/// assert!(problem(&input).unwrap().contains("not valid JSON"));
/// let (_, ok) = checked_call("read_file", r#"{"path": "a"}"#);
/// assert_eq!(problem(&ok), None);
/// ```
pub fn checked_call(name: &str, arguments: &str) -> (String, Value) {
    let args = arguments.trim();
    let parsed: Result<Value, String> = if args.is_empty() {
        Ok(json!({}))
    } else {
        serde_json::from_str(args).map_err(|e| format!("its arguments are not valid JSON ({e})"))
    };
    let checked = parsed.and_then(|v| {
        if v.is_object() {
            Ok(v)
        } else {
            Err("its arguments are JSON but not an object".to_string())
        }
    });
    checked_value(name, checked, args)
}

/// As [`checked_call`] for arguments that arrived already parsed (or failed to).
pub(crate) fn checked_value(
    name: &str,
    parsed: Result<Value, String>,
    raw: &str,
) -> (String, Value) {
    let unnamed = name.trim().is_empty();
    let mut why = Vec::new();
    if unnamed {
        why.push("it has no tool name".to_string());
    }
    match parsed {
        Ok(v) if !unnamed => return (name.to_string(), v),
        Ok(_) => {}
        Err(e) => why.push(e),
    }
    let name = if unnamed { UNNAMED_CALL } else { name };
    (
        name.to_string(),
        json!({ INVALID_CALL: { "error": why.join("; "), "raw_arguments": cut(raw) } }),
    )
}

/// Whether a recorded input (its JSON text) is the marked one.
pub fn is_marked_json(input_json: &str) -> bool {
    input_json
        .trim_start()
        .strip_prefix('{')
        .is_some_and(|rest| {
            rest.trim_start()
                .starts_with(&format!("\"{INVALID_CALL}\""))
        })
}

/// What was wrong with a call, when its input is the marked one.
pub fn problem(input: &Value) -> Option<String> {
    let marked = input.as_object()?.get(INVALID_CALL)?;
    Some(
        marked
            .get("error")
            .and_then(Value::as_str)
            .unwrap_or("the call was malformed")
            .to_string(),
    )
}

/// The tool error a marked call is answered with.
pub fn feedback(name: &str, input: &Value) -> Option<String> {
    let why = problem(input)?;
    let raw = input[INVALID_CALL]["raw_arguments"]
        .as_str()
        .unwrap_or_default();
    Some(format!(
        "your call to `{name}` was not run: {why}. The arguments as received: {raw}\n\
         Call the tool again with its name and a JSON object of arguments as its schema says."
    ))
}
