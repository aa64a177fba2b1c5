//! Connecting one server, in phases: the policy's decision, starting it (a stdio
//! process or an HTTP session) and the handshake, then discovering its tools.

use std::sync::{Arc, Mutex};

use rmcp::model::{ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{Peer, RoleClient, ServiceExt};

use super::pipe::{Faults, Pipe};
use super::process::{EXIT_SETTLE, Proc, Stderr};
use super::server::{Server, Service, Shared};
use super::stdio::{start_plain, start_sandboxed};
use super::{McpEnv, transport_label};
use crate::mcp::{McpServerSpec, McpTransport};
use crate::policy::{Act, Action, Decision, PolicyDecision, PolicyGate};
use crate::sandbox::RunSpec;
use crate::store::{McpEvent, SandboxEvent};

/// Most tools offered per server; the rest are withheld (narrow with `allow_tools`).
const MAX_TOOLS_PER_SERVER: usize = 128;

/// The policy's answer to starting or dialing a declared server, recorded. The
/// contract naming the server is the operator's allow where only the defaults would
/// refuse (layer `mcp`); a rule an operator wrote that denies or asks wins, and the
/// server is not started (nobody can answer an ask at start).
pub(super) fn gate_start(
    shared: &Shared,
    gate: &dyn PolicyGate,
    action: Action,
    server: &str,
) -> Result<(), String> {
    let d = gate.decide(&action);
    if d.rule == "default" {
        shared.rec.policy(&PolicyDecision {
            action,
            decision: Decision::Allow,
            rule: format!("declared in [[mcp]] {server}"),
            layer: "mcp".into(),
        });
        return Ok(());
    }
    shared.rec.policy(&d);
    let what = match d.decision {
        Decision::Allow => return Ok(()),
        Decision::Deny => "denies",
        Decision::Ask => "asks about",
    };
    Err(format!(
        "policy {what} {} {} (rule {} in layer {}){}",
        action.act.as_str(),
        action.target,
        d.rule,
        d.layer,
        if d.decision == Decision::Ask {
            "; a server is not started on an unanswered ask"
        } else {
            ""
        }
    ))
}

pub(super) fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("io-harness", env!("CARGO_PKG_VERSION")),
    )
}

/// A server that answered the handshake, before its tools are listed.
pub(super) struct Started {
    pub(super) service: Service,
    pub(super) proc: Option<Proc>,
    pub(super) launched: Option<RunSpec>,
    pub(super) proxy: Option<crate::egress::EgressProxy>,
    pub(super) stderr: Arc<Stderr>,
    pub(super) sandbox: String,
    /// The faults a stdio server's framing answered calls with (none over HTTP).
    pub(super) faults: Option<Arc<Faults>>,
}

/// Starts, shakes hands with, and lists the tools of one server; records
/// `connected` and `discovered`. An `Err` is the reason it is unavailable.
pub(super) async fn connect_one(
    spec: &McpServerSpec,
    env: &McpEnv,
    shared: &Arc<Shared>,
) -> Result<Server, String> {
    let mut started = match &spec.transport {
        McpTransport::Stdio {
            argv,
            env: names,
            sandbox,
        } => start_stdio(spec, argv, names, *sandbox, env, shared).await?,
        McpTransport::Http {
            url,
            bearer_token_env,
        } => super::http::start(spec, url, bearer_token_env.as_ref(), env, shared).await?,
    };
    let peer = started.service.peer().clone();
    let all = list_tools(spec, &peer, &mut started, shared).await?;
    let info = server_info(spec, &peer, &started);
    shared
        .rec
        .mcp(|r, s| McpEvent::connected(r, s, &spec.name, &info));
    let unmatched = unmatched_path_args(spec, &all);
    let (tools, hidden) = offered_tools(spec, all);
    shared.rec.mcp(|r, s| {
        McpEvent::discovered(r, s, &spec.name, tools.len(), hidden.len())
            .with_unmatched_path_args(&unmatched)
    });
    Ok(Server {
        spec: spec.clone(),
        workdir: env.workdir.clone(),
        peer,
        service: Mutex::new(Some(started.service)),
        proc: Mutex::new(started.proc),
        launched: started.launched,
        proxy: started.proxy,
        stderr: started.stderr,
        dead: Mutex::new(None),
        info,
        faults: started.faults,
        tools,
        hidden,
        path_args_unmatched: unmatched,
        shared: shared.clone(),
    })
}

/// The tools `path_args` names that the server does not list (a typo, or a server
/// that changed): warned about once, here, and recorded with `discovered`. Not an
/// error at load: a contract cannot know a server's tools before it connects.
fn unmatched_path_args(spec: &McpServerSpec, all: &[rmcp::model::Tool]) -> Vec<String> {
    let unmatched: Vec<String> = spec
        .path_args
        .keys()
        .filter(|t| !all.iter().any(|a| a.name == t.as_str()))
        .cloned()
        .collect();
    if !unmatched.is_empty() {
        tracing::warn!(
            server = %spec.name,
            tools = %unmatched.join(", "),
            "path_args names tools the MCP server does not offer"
        );
    }
    unmatched
}

/// The `exec` decision on the program, the process (sandboxed or plain, its sandbox
/// recorded), and the handshake over its pipes.
async fn start_stdio(
    spec: &McpServerSpec,
    argv: &[String],
    names: &[String],
    sandboxed: bool,
    env: &McpEnv,
    shared: &Shared,
) -> Result<Started, String> {
    gate_start(
        shared,
        env.gate.as_ref(),
        Action::new(Act::Exec, argv[0].clone()),
        &spec.name,
    )?;
    let stderr = Arc::new(Stderr::default());
    let ((proc, stdout, stdin, label), launched, proxy) = if sandboxed {
        let (pipes, spec, proxy) = start_sandboxed(argv, names, env, &stderr).await?;
        (pipes, Some(spec), proxy)
    } else {
        (start_plain(argv, names, env, &stderr)?, None, None)
    };
    if let Proc::Sandboxed(_) = &proc {
        let argv_text = argv.join(" ");
        shared
            .rec
            .sandbox(|r, s| SandboxEvent::create(r, s, &label));
        shared
            .rec
            .sandbox(|r, s| SandboxEvent::exec(r, s, &label, &argv_text));
    }
    let (pipe, faults) = Pipe::new(stdout, stdin);
    let (service, proc) = handshake_stdio(spec, proc, pipe, (&stderr, &faults), shared).await?;
    Ok(Started {
        service,
        proc,
        launched,
        proxy,
        stderr,
        sandbox: label,
        faults: Some(faults),
    })
}

/// The handshake over a started process's pipes, within the startup timeout; the
/// process is killed if it fails. A reply the framing could not use fails it at
/// once, as a protocol error.
async fn handshake_stdio(
    spec: &McpServerSpec,
    proc: Proc,
    pipe: Pipe<tokio::process::ChildStdout, tokio::process::ChildStdin>,
    (stderr, faults): (&Stderr, &Faults),
    shared: &Shared,
) -> Result<(Service, Option<Proc>), String> {
    let mut proc = Some(proc);
    match tokio::time::timeout(spec.startup_timeout, client_config().serve(pipe)).await {
        Ok(Ok(s)) => Ok((s, proc)),
        Ok(Err(e)) => {
            // A reply the framing could not use comes from a live process: there
            // is no end to wait for.
            let (why, exit) = match faults.last() {
                Some(fault) => (
                    format!("handshake failed: protocol error: {fault}"),
                    proc.as_mut().and_then(Proc::exit),
                ),
                None => (
                    format!("handshake failed: {e}"),
                    proc.as_mut().and_then(|p| p.exit_within(EXIT_SETTLE)),
                ),
            };
            abandon(shared, proc);
            Err(stderr.failure(&why, exit))
        }
        Err(_) => {
            abandon(shared, proc);
            Err(stderr.failure(
                &format!(
                    "no handshake within the startup timeout of {}",
                    humantime::format_duration(spec.startup_timeout)
                ),
                None,
            ))
        }
    }
}

/// Every tool the server lists, within the startup timeout; a server that cannot
/// list is cancelled and its process killed.
async fn list_tools(
    spec: &McpServerSpec,
    peer: &Peer<RoleClient>,
    started: &mut Started,
    shared: &Shared,
) -> Result<Vec<rmcp::model::Tool>, String> {
    let listed = tokio::time::timeout(spec.startup_timeout, peer.list_all_tools()).await;
    match listed {
        Ok(Ok(t)) => Ok(t),
        Ok(Err(e)) => {
            started.service.cancellation_token().cancel();
            abandon(shared, started.proc.take());
            Err(started
                .stderr
                .failure(&format!("listing tools failed: {e}"), None))
        }
        Err(_) => {
            started.service.cancellation_token().cancel();
            abandon(shared, started.proc.take());
            Err("listing tools did not finish within the startup timeout".into())
        }
    }
}

/// What the `connected` event and `mcp list` say about the server.
fn server_info(
    spec: &McpServerSpec,
    peer: &Peer<RoleClient>,
    started: &Started,
) -> serde_json::Value {
    let peer_info = peer
        .peer_info()
        .and_then(|i| serde_json::to_value(&*i).ok())
        .unwrap_or_default();
    let mut info = serde_json::json!({
        "name": peer_info.pointer("/serverInfo/name"),
        "version": peer_info.pointer("/serverInfo/version"),
        "protocol_version": peer_info.get("protocolVersion"),
        "transport": transport_label(spec),
        "sandbox": started.sandbox,
        "pid": started.proc.as_ref().and_then(Proc::pid),
    });
    // Only a plain child is claimed about: what a sandboxed one can reach is the
    // sandbox's record, and an HTTP server is no process of ours.
    if let Some(Proc::Plain(_)) = &started.proc {
        let exposure = super::process::memory_exposure();
        info["harness_memory_readable"] = exposure.readable().into();
        info["harness_memory_why"] = exposure.why().into();
    }
    info
}

/// The tools offered (allow/deny lists, then the cap per server) and the names of
/// those withheld.
fn offered_tools(
    spec: &McpServerSpec,
    all: Vec<rmcp::model::Tool>,
) -> (Vec<rmcp::model::Tool>, Vec<String>) {
    let (mut tools, hidden): (Vec<_>, Vec<_>) = all.into_iter().partition(|t| spec.offers(&t.name));
    let mut hidden: Vec<String> = hidden.into_iter().map(|t| t.name.to_string()).collect();
    // Every offered tool's schema goes into every request: a server cannot flood them.
    if tools.len() > MAX_TOOLS_PER_SERVER {
        hidden.extend(
            tools
                .drain(MAX_TOOLS_PER_SERVER..)
                .map(|t| t.name.to_string()),
        );
    }
    (tools, hidden)
}

/// Kills a server that will not be used, recording the sandbox's end.
pub(super) fn abandon(shared: &Shared, proc: Option<Proc>) {
    if let Some(mut p) = proc {
        p.kill();
        if matches!(p, Proc::Sandboxed(_)) {
            shared.rec.sandbox(SandboxEvent::destroy);
        }
    }
}
