//! The `spawn_agent` tool's name and schema. The call itself needs the run engine (a
//! child run is a run), so the engine handles it, not the registry: see
//! `crate::run` for how a child's policy, budget and resume work.

use crate::provider::ToolSpec;

/// The name the model calls a sub-agent by.
pub const SPAWN_AGENT: &str = "spawn_agent";

/// What the model is offered while its run may still spawn (its depth is below the
/// contract's `[agents] max_depth`).
pub fn spawn_agent_spec() -> ToolSpec {
    let file_needle = serde_json::json!({
        "type": "object",
        "properties": {"file": {"type": "string"}, "needle": {"type": "string"}},
        "required": ["file", "needle"],
        "additionalProperties": false
    });
    let file_content = serde_json::json!({
        "type": "object",
        "properties": {"file": {"type": "string"}, "content": {"type": "string"}},
        "required": ["file", "content"],
        "additionalProperties": false
    });
    ToolSpec {
        name: SPAWN_AGENT.into(),
        description: "Delegate a sub-goal to a sub-agent that works in a directory of your \
                      workspace until its own verification passes or its budget ends. Its \
                      budget is taken from yours; its permissions are yours or narrower. \
                      You get its outcome, what it changed and its last message."
            .into(),
        input_schema: serde_json::json!({
            "type": "object",
            "properties": {
                "name": {"type": "string", "description": "A short label: letters, digits, - and _, at most 40."},
                "goal": {"type": "string", "description": "What the sub-agent must achieve."},
                "root": {"type": "string", "description": "Its workspace: a directory inside yours, relative (default \".\")."},
                "verify": {
                    "type": "object",
                    "description": "How its result is checked, relative to its root; at least one criterion.",
                    "properties": {
                        "command": {"type": "array", "items": {"type": "string"}},
                        "expect_exit": {"type": "integer"},
                        "file_contains": file_needle,
                        "file_equals": file_content,
                        "max_attempts": {"type": "integer", "minimum": 1}
                    },
                    "additionalProperties": false
                },
                "budget": {
                    "type": "object",
                    "description": "Its slice of your remaining budget (each defaults to, and is capped at, what you have left).",
                    "properties": {
                        "max_steps": {"type": "integer", "minimum": 1},
                        "max_tokens": {"type": "integer", "minimum": 1},
                        "max_cost_usd": {"type": "number"},
                        "max_duration_secs": {"type": "integer", "minimum": 1}
                    },
                    "additionalProperties": false
                },
                "rules": {
                    "type": "array",
                    "description": "Extra policy rules that narrow what it may do (deny or ask only).",
                    "items": {
                        "type": "object",
                        "properties": {
                            "act": {"enum": ["read", "write", "exec", "net"]},
                            "target": {"type": "string"},
                            "decision": {"enum": ["deny", "ask"]}
                        },
                        "required": ["act", "target", "decision"],
                        "additionalProperties": false
                    }
                }
            },
            "required": ["name", "goal", "verify"],
            "additionalProperties": false
        }),
    }
}
