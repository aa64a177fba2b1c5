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
    // What a server says is printed without the credentials it was handed (a server
    // may echo its bearer token in a description), as a run would store it.
    let mut values = io_harness::run::credentials_of(contract);
    values.extend(
        io_harness::provider::KEY_VARIABLES
            .iter()
            .filter_map(|k| std::env::var(k).ok()),
    );
    let secrets = io_harness::redact::Redactor::default().with(&values);
    if json {
        print_json(contract, &listing, &secrets);
    } else {
        print_text(&listing, &secrets);
    }
    Ok(if all_up { 0 } else { 1 })
}

#[cfg(feature = "mcp")]
fn print_json(
    contract: &TaskContract,
    listing: &[io_harness::mcp::ServerListing],
    secrets: &io_harness::redact::Redactor,
) {
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
    super::json_out::print(
        "mcp_list",
        serde_json::json!({ "servers": servers }),
        secrets,
    );
}

#[cfg(feature = "mcp")]
fn print_text(listing: &[io_harness::mcp::ServerListing], secrets: &io_harness::redact::Redactor) {
    for line in text_lines(listing, secrets) {
        outln!("{line}");
    }
}

/// The listing as printed: every string a server gave cleaned of terminal controls and
/// of the credentials in `secrets`.
#[cfg(feature = "mcp")]
fn text_lines(
    listing: &[io_harness::mcp::ServerListing],
    secrets: &io_harness::redact::Redactor,
) -> Vec<String> {
    use super::output;
    let clean = |t: &str| output::clean(t, secrets);
    let mut out = Vec::new();
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
        out.push(clean(&head));
        if let Some(line) = s.info.as_ref().and_then(memory_line) {
            out.push(format!("  {}", clean(&line)));
        }
        if !s.path_args_unmatched.is_empty() {
            out.push(format!(
                "  warning: path_args names tools the server does not offer: {}",
                clean(&s.path_args_unmatched.join(", "))
            ));
        }
        if let Some(f) = &s.failure {
            out.push(format!("  unavailable: {}", clean(f)));
            continue;
        }
        for t in &s.tools {
            // Redacted before it is cut: a cut through a token would keep half of it.
            let first = clean(t.description.lines().next().unwrap_or(""));
            let short: String = first.chars().take(100).collect();
            out.push(format!("  {}  {short}", t.qualified));
        }
        if !s.hidden.is_empty() {
            out.push(format!(
                "  withheld by allow/deny lists: {}",
                clean(&s.hidden.join(", "))
            ));
        }
    }
    out
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

#[cfg(all(test, feature = "mcp"))]
mod tests {
    use super::*;
    use io_harness::mcp::{ServerListing, ToolListing};

    /// Issue 16's adversary (MH1): a server that echoes its bearer token in a tool's
    /// description had it printed by `mcp list`, where a run redacts it.
    #[test]
    fn a_listing_never_prints_a_credential_the_server_echoes() {
        let token = "tok-very-secret-4711-abcdef";
        let listing = vec![ServerListing {
            name: "web".into(),
            transport: "http",
            info: Some(serde_json::json!({"name": format!("srv {token}"), "version": "1"})),
            tools: vec![ToolListing {
                qualified: "mcp__web__echo".into(),
                name: "echo".into(),
                description: format!("{}your token is {token}", "x".repeat(80)),
            }],
            hidden: Vec::new(),
            path_args_unmatched: Vec::new(),
            failure: Some(format!("refused with {token}")),
        }];
        let secrets = io_harness::redact::Redactor::default().with(&[token.to_string()]);
        let text = text_lines(&listing, &secrets).join("\n");
        assert!(!text.contains("4711"), "{text}");
        assert!(text.contains("[REDACTED]"), "{text}");
        let mut ok = listing.clone();
        ok[0].failure = None;
        let text = text_lines(&ok, &secrets).join("\n");
        assert!(
            !text.contains("4711") && !text.contains("tok-very"),
            "{text}"
        );
    }
}
