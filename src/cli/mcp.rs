//! `io-harness mcp list <task.toml>`: connects to the servers a task file declares,
//! exactly as a run would (sandbox, policy, timeouts), and prints their tools.

use io_harness::TaskContract;

use super::{CliError, McpArgs, McpCommand};

pub async fn execute(args: McpArgs) -> Result<i32, CliError> {
    let McpCommand::List { task, json } = args.command;
    let contract = TaskContract::from_file(&task).map_err(|e| CliError::Usage(e.to_string()))?;
    if contract.mcp.is_empty() {
        return Err(CliError::Usage(format!(
            "{} declares no [[mcp]] servers",
            task.display()
        )));
    }
    // Said before anything starts: running a server outside is the operator's
    // choice, and this is what it means.
    for w in unsandboxed_warnings(&contract) {
        errln!("warning: {}", super::output::sanitize(&w));
    }
    list(&contract, json).await
}

/// The warning for each stdio server the contract runs with `sandbox = false`
/// (`mcp list` and `doctor --task` print them).
pub(super) fn unsandboxed_warnings(contract: &TaskContract) -> Vec<String> {
    contract
        .mcp
        .iter()
        .filter_map(io_harness::mcp::McpServerSpec::unsandboxed_warning)
        .collect()
}

#[cfg(not(feature = "mcp"))]
async fn list(_contract: &TaskContract, _json: bool) -> Result<i32, CliError> {
    Err(CliError::Usage(format!(
        "this build of io-harness lacks the `{}` feature: it cannot start MCP servers",
        io_harness::mcp::FEATURE
    )))
}

#[cfg(feature = "mcp")]
async fn list(contract: &TaskContract, json: bool) -> Result<i32, CliError> {
    let listing = io_harness::run::list_servers(contract).await?;
    let all_up = listing.iter().all(|s| s.failure.is_none());
    if json {
        print_json(contract, &listing);
    } else {
        print_text(&listing);
    }
    Ok(if all_up { 0 } else { 1 })
}

#[cfg(feature = "mcp")]
fn print_json(contract: &TaskContract, listing: &[io_harness::mcp::ServerListing]) {
    let warning = |name: &str| {
        contract
            .mcp
            .iter()
            .find(|m| m.name == name)
            .and_then(io_harness::mcp::McpServerSpec::unsandboxed_warning)
    };
    let servers: Vec<serde_json::Value> = listing
        .iter()
        .map(|s| {
            serde_json::json!({
                "name": s.name,
                "transport": s.transport,
                "info": s.info,
                "failure": s.failure,
                "hidden": s.hidden,
                "unsandboxed_warning": warning(&s.name),
                "path_args_unmatched": s.path_args_unmatched,
                "tools": s.tools.iter().map(|t| serde_json::json!({
                    "name": t.qualified,
                    "server_name": t.name,
                    "description": t.description,
                })).collect::<Vec<_>>(),
            })
        })
        .collect();
    outln!("{}", serde_json::json!({ "servers": servers }));
}

#[cfg(feature = "mcp")]
fn print_text(listing: &[io_harness::mcp::ServerListing]) {
    use super::output;
    for s in listing {
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
        outln!("{}", output::sanitize(&head));
        if let Some(line) = s.info.as_ref().and_then(memory_line) {
            outln!("  {}", output::sanitize(&line));
        }
        if !s.path_args_unmatched.is_empty() {
            outln!(
                "  warning: path_args names tools the server does not offer: {}",
                output::sanitize(&s.path_args_unmatched.join(", "))
            );
        }
        if let Some(f) = &s.failure {
            outln!("  unavailable: {}", output::sanitize(f));
            continue;
        }
        for t in &s.tools {
            let first = t.description.lines().next().unwrap_or("");
            let short: String = first.chars().take(100).collect();
            outln!("  {}  {}", t.qualified, output::sanitize(&short));
        }
        if !s.hidden.is_empty() {
            outln!("  withheld by allow/deny lists: {}", s.hidden.join(", "));
        }
    }
}

/// What a server's `connected` record says about the harness's memory (only a
/// server run outside the sandbox has it): `show` prints the same line.
pub(super) fn memory_line(info: &serde_json::Value) -> Option<String> {
    let readable = info.get("harness_memory_readable")?;
    let why = info["harness_memory_why"].as_str().unwrap_or("?");
    Some(match readable.as_bool() {
        Some(true) => format!("outside the sandbox: could read the harness's memory ({why})"),
        Some(false) => format!("outside the sandbox: could not read the harness's memory ({why})"),
        None => format!(
            "outside the sandbox: whether it could read the harness's memory is unknown ({why})"
        ),
    })
}
