//! `io-harness tools [--json]`: the tools a run offers the model, with their argument
//! schemas, taken from the very definitions a run's requests are built from
//! (`ToolRegistry::standard` and the sub-agent tool), so what is printed cannot drift
//! from what a model is sent. MCP servers' tools depend on the task and are listed by
//! `io-harness mcp list <task>`.

use io_harness::provider::ToolSpec;
use io_harness::tools::{ToolRegistry, spawn_agent_spec};

use super::{CliError, ToolsArgs, output};

/// Every tool a run offers, in the order a request lists them: the workspace tools,
/// then `spawn_agent` (offered while the run's depth is under `[agents] max_depth`).
pub fn offered() -> Vec<ToolSpec> {
    let mut tools = ToolRegistry::standard().specs();
    tools.push(spawn_agent_spec());
    tools
}

pub fn execute(args: ToolsArgs) -> Result<i32, CliError> {
    let tools = offered();
    if args.json {
        let obj = serde_json::json!({ "tools": tools });
        super::json_out::print("tools", obj, &Default::default());
        return Ok(0);
    }
    for t in &tools {
        let schema = serde_json::to_string_pretty(&t.input_schema)
            .map_err(|e| CliError::Internal(e.to_string()))?;
        outln!(
            "{}\n  {}\n{}\n",
            t.name,
            output::sanitize(&t.description),
            indent(&schema)
        );
    }
    outln!(
        "(spawn_agent is offered while a run's depth is under [agents] max_depth; MCP tools: io-harness mcp list <task>)"
    );
    Ok(0)
}

fn indent(text: &str) -> String {
    text.lines()
        .map(|l| format!("  {l}"))
        .collect::<Vec<_>>()
        .join("\n")
}
