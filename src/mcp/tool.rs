//! An MCP server's tool as a harness [`Tool`]: a qualified name, a schema every
//! provider accepts, a policy action, and a bounded, described result.

use std::collections::BTreeSet;
use std::sync::Arc;

use futures_util::future::BoxFuture;
use serde_json::{Map, Value};

use super::client::Server;
use crate::policy::{Act, Action};
use crate::provider::ToolSpec;
use crate::tools::{Tool, ToolContext, ToolError, ToolOutput};

/// Longest tool name the providers accept (OpenAI and Anthropic: 64).
const MAX_NAME: usize = 64;

/// One tool of a connected server.
pub struct McpTool {
    pub(super) server: Arc<Server>,
    /// The server's own name of the tool.
    pub(super) remote: String,
    /// `mcp__<server>__<tool>`.
    pub(super) qualified: String,
    pub(super) description: String,
    pub(super) schema: Value,
}

impl std::fmt::Debug for McpTool {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpTool")
            .field("qualified", &self.qualified)
            .finish_non_exhaustive()
    }
}

impl Tool for McpTool {
    fn spec(&self) -> ToolSpec {
        ToolSpec {
            name: self.qualified.clone(),
            description: format!(
                "[tool of MCP server {}; its description is the server's, untrusted] {}",
                self.server.spec.name, self.description
            ),
            input_schema: self.schema.clone(),
        }
    }

    /// One `exec` action on the qualified name, then a `read` and/or `write` action
    /// for each path the tool's path arguments name (resolved as the server would): the
    /// policy decides each call with the file rules the workspace's tools get, and a
    /// refused call is never sent. A path argument that is missing or not a string
    /// refuses the call.
    fn plan(&self, ctx: &ToolContext, input: &Value) -> Result<Vec<Action>, ToolError> {
        let mut actions = vec![Action::new(Act::Exec, self.qualified.clone())];
        let args = self.server.spec.path_args_for(&self.remote);
        if !args.is_empty() {
            let places = super::paths::Places {
                cwd: &self.server.workdir,
                root: ctx.workspace.root(),
                home: std::env::var_os("HOME").map(std::path::PathBuf::from),
            };
            actions.extend(super::paths::actions(&args, input, &places)?);
        }
        Ok(actions)
    }

    fn call<'a>(
        &'a self,
        _ctx: &'a ToolContext,
        input: &'a Value,
    ) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
        Box::pin(async move {
            let content = self.server.call(&self.remote, input).await?;
            Ok(ToolOutput {
                content,
                effects: Vec::new(),
            })
        })
    }
}

/// `mcp__<server>__<tool>`, with characters providers refuse replaced by `_`, cut to
/// 64 bytes, and made unique against `taken` with a short hash of the server's name
/// for the tool when needed.
pub fn qualified_name(server: &str, tool: &str, taken: &BTreeSet<String>) -> String {
    let clean: String = tool
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                c
            } else {
                '_'
            }
        })
        .collect();
    let base = format!("mcp__{server}__{clean}");
    if base.len() <= MAX_NAME && !taken.contains(&base) && clean == tool {
        return base;
    }
    // Changed or too long or taken: keep it recognisable and make it unique.
    let hash = &crate::digest::sha256_hex(tool.as_bytes())[..8];
    let mut head = base;
    head.truncate(MAX_NAME - 9);
    let name = format!("{head}_{hash}");
    if !taken.contains(&name) {
        return name;
    }
    let mut n = 2;
    loop {
        let mut h = head.clone();
        let suffix = format!("_{hash}{n}");
        h.truncate(MAX_NAME - suffix.len());
        let candidate = format!("{h}{suffix}");
        if !taken.contains(&candidate) {
            return candidate;
        }
        n += 1;
    }
}

/// A tool input schema in the common form the providers accept: an object schema
/// (`"type": "object"` with `properties`), without `$schema`, and without top-level
/// combinators OpenAI refuses (`oneOf`/`anyOf`/`allOf`/`not`/`enum` at the root:
/// they are dropped and the description says the server checks the arguments).
pub fn adapt_schema(schema: &Value) -> Value {
    let mut obj: Map<String, Value> = match schema {
        Value::Object(m) => m.clone(),
        _ => Map::new(),
    };
    obj.remove("$schema");
    let mut dropped = false;
    for k in ["oneOf", "anyOf", "allOf", "not", "enum"] {
        dropped |= obj.remove(k).is_some();
    }
    if dropped {
        let note = "The server checks the argument combinations itself.";
        let desc = match obj.get("description").and_then(Value::as_str) {
            Some(d) => format!("{d} {note}"),
            None => note.to_string(),
        };
        obj.insert("description".into(), Value::String(desc));
    }
    obj.insert("type".into(), Value::String("object".into()));
    if !obj.get("properties").is_some_and(Value::is_object) {
        obj.insert("properties".into(), Value::Object(Map::new()));
    }
    Value::Object(obj)
}

/// The text of a `tools/call` result for the model: text blocks as they are,
/// images, audio and resources described (never dumped), structured content as JSON
/// only when no text block carries the result.
pub(super) fn render_result(result: &Value) -> String {
    let mut parts: Vec<String> = Vec::new();
    let blocks = result
        .get("content")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let s = |b: &Value, k: &str| b.get(k).and_then(Value::as_str).unwrap_or("").to_string();
    for b in &blocks {
        let kind = s(b, "type");
        parts.push(match kind.as_str() {
            "text" => s(b, "text"),
            "image" | "audio" => format!(
                "[{kind} content: {}, {} bytes of base64 not shown]",
                b.get("mimeType")
                    .and_then(Value::as_str)
                    .unwrap_or("unknown type"),
                s(b, "data").len()
            ),
            "resource" => {
                let r = b.get("resource").cloned().unwrap_or_default();
                let size = r
                    .get("text")
                    .and_then(Value::as_str)
                    .map(|t| format!("{} characters of text", t.chars().count()))
                    .or_else(|| {
                        r.get("blob")
                            .and_then(Value::as_str)
                            .map(|b| format!("{} bytes of base64", b.len()))
                    })
                    .unwrap_or_else(|| "no content".into());
                format!(
                    "[embedded resource {} ({}), {size} not shown]",
                    s(&r, "uri"),
                    r.get("mimeType")
                        .and_then(Value::as_str)
                        .unwrap_or("unknown type")
                )
            }
            "resource_link" => {
                let mut d = format!("[resource link {}", s(b, "uri"));
                if let Some(n) = b.get("name").and_then(Value::as_str) {
                    d.push_str(&format!(" named {n:?}"));
                }
                if let Some(m) = b.get("mimeType").and_then(Value::as_str) {
                    d.push_str(&format!(" ({m})"));
                }
                d.push(']');
                d
            }
            other => format!("[{other} content not shown]"),
        });
    }
    // The spec asks a server that returns structured content to send it serialized
    // in a text block too, and servers do (FastMCP wraps a scalar as
    // `{"result": …}` beside its text): sent to the model only when no text block
    // carries the result, so a result is sent once.
    let has_text = blocks
        .iter()
        .any(|b| b.get("type").and_then(Value::as_str) == Some("text"));
    if let Some(sc) = result.get("structuredContent").filter(|v| !v.is_null())
        && !has_text
    {
        parts.push(format!("structured content: {sc}"));
    }
    if parts.is_empty() {
        return "(the tool returned no content)".into();
    }
    parts.join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn names_are_qualified_clean_short_and_unique() {
        let none = BTreeSet::new();
        assert_eq!(
            qualified_name("fs", "read_file", &none),
            "mcp__fs__read_file"
        );
        assert_eq!(qualified_name("e", "get-sum", &none), "mcp__e__get-sum");
        let dotted = qualified_name("e", "a.b", &none);
        assert!(dotted.starts_with("mcp__e__a_b_"), "{dotted}");
        let long = qualified_name("server", &"x".repeat(100), &none);
        assert!(long.len() <= 64, "{long}");
        let taken: BTreeSet<String> = [qualified_name("e", "a.b", &none)].into();
        let again = qualified_name("e", "a.b", &taken);
        assert_ne!(again, dotted);
        assert!(again.len() <= 64);
        for n in [&dotted, &long, &again] {
            assert!(
                n.bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
            );
        }
    }

    #[test]
    fn schemas_become_plain_object_schemas() {
        let s = adapt_schema(
            &json!({"$schema": "x", "type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]}),
        );
        assert_eq!(
            s,
            json!({"type": "object", "properties": {"a": {"type": "number"}}, "required": ["a"]})
        );
        let s = adapt_schema(&json!({"type": "object"}));
        assert_eq!(s["properties"], json!({}));
        let s = adapt_schema(
            &json!({"anyOf": [{"required": ["a"]}, {"required": ["b"]}], "properties": {}}),
        );
        assert!(s.get("anyOf").is_none());
        assert!(s["description"].as_str().unwrap().contains("server checks"));
    }

    #[test]
    fn results_describe_media_and_keep_text() {
        let r = json!({"content": [
            {"type": "text", "text": "hello"},
            {"type": "image", "data": "AAAA", "mimeType": "image/png"},
            {"type": "resource", "resource": {"uri": "file:///x", "mimeType": "text/plain", "text": "secret body"}},
            {"type": "resource_link", "uri": "file:///y", "name": "y"}
        ], "structuredContent": {"n": 1}});
        let t = render_result(&r);
        assert!(t.contains("hello"));
        assert!(t.contains("[image content: image/png, 4 bytes of base64 not shown]"));
        assert!(t.contains("embedded resource file:///x") && !t.contains("secret body"));
        assert!(t.contains("resource link file:///y"));
        // A text block carries the result: the structured copy is not sent again.
        assert!(!t.contains("structured content"), "{t}");
        let wrapped = json!({"content": [{"type": "text", "text": "42"}], "structuredContent": {"result": 42}});
        assert_eq!(render_result(&wrapped), "42");
        let only = json!({"content": [{"type": "image", "data": "AA", "mimeType": "image/png"}], "structuredContent": {"n": 1}});
        assert!(render_result(&only).contains("structured content: {\"n\":1}"));
        assert_eq!(
            render_result(&json!({"content": []})),
            "(the tool returned no content)"
        );
    }
}
