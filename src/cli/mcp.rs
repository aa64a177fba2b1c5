//! `io-harness mcp list <task.toml>`: connects to the servers a task file declares,
//! exactly as a run would (sandbox, policy, timeouts), and prints their tools.

use io_harness::TaskContract;

use super::{CliError, McpArgs, McpCommand, output};

pub async fn execute(args: McpArgs) -> Result<i32, CliError> {
    let McpCommand::List { task, json } = args.command;
    let contract = TaskContract::from_file(&task).map_err(|e| CliError::Usage(e.to_string()))?;
    if contract.mcp.is_empty() {
        return Err(CliError::Usage(format!(
            "{} declares no [[mcp]] servers",
            task.display()
        )));
    }
    let listing = io_harness::mcp::list(&contract).await?;
    let all_up = listing.iter().all(|s| s.failure.is_none());
    if json {
        let servers: Vec<serde_json::Value> = listing
            .iter()
            .map(|s| {
                serde_json::json!({
                    "name": s.name,
                    "transport": s.transport,
                    "info": s.info,
                    "failure": s.failure,
                    "hidden": s.hidden,
                    "tools": s.tools.iter().map(|t| serde_json::json!({
                        "name": t.qualified,
                        "server_name": t.name,
                        "description": t.description,
                    })).collect::<Vec<_>>(),
                })
            })
            .collect();
        println!("{}", serde_json::json!({ "servers": servers }));
        return Ok(if all_up { 0 } else { 1 });
    }
    for s in &listing {
        let head = match &s.info {
            Some(i) => format!(
                "{} ({}): {} {}, protocol {}, sandbox {}",
                s.name,
                s.transport,
                i["name"].as_str().unwrap_or("?"),
                i["version"].as_str().unwrap_or("?"),
                i["protocol_version"].as_str().unwrap_or("?"),
                i["sandbox"].as_str().unwrap_or("?"),
            ),
            None => format!("{} ({})", s.name, s.transport),
        };
        println!("{}", output::sanitize(&head));
        if let Some(f) = &s.failure {
            println!("  unavailable: {}", output::sanitize(f));
            continue;
        }
        for t in &s.tools {
            let first = t.description.lines().next().unwrap_or("");
            let short: String = first.chars().take(100).collect();
            println!("  {}  {}", t.qualified, output::sanitize(&short));
        }
        if !s.hidden.is_empty() {
            println!("  withheld by allow/deny lists: {}", s.hidden.join(", "));
        }
    }
    Ok(if all_up { 0 } else { 1 })
}
