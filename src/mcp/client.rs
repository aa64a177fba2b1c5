//! Connecting to the contract's servers, calling their tools, noticing when they die,
//! and recording all of it.

use std::collections::VecDeque;
use std::io::Read;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Condvar, Mutex, PoisonError};
use std::time::{Duration, Instant};

use rmcp::model::{CallToolRequestParams, ClientCapabilities, ClientConfig, Implementation};
use rmcp::service::{Peer, RoleClient, RunningService, ServiceError, ServiceExt};
use rmcp::transport::StreamableHttpClientTransport;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;

use super::config::{McpServerSpec, McpTransport};
use super::tool::{McpTool, adapt_schema, qualified_name};
use crate::contract::{NetworkSetting, SandboxSettings};
use crate::policy::{Act, Action, Decision, PolicyDecision, PolicyGate};
use crate::sandbox::{NetworkPosture, RunSpec, Sandbox, SandboxChild, SandboxLimits};
use crate::store::{McpEvent, PolicyEvent, SandboxEvent, Store};
use crate::tools::{Tool, ToolError};

/// Bytes of a stdio server's stderr kept (the tail).
const STDERR_TAIL: usize = 4096;
/// Bytes of that tail quoted in a failure record.
const STDERR_QUOTED: usize = 1024;
/// Longest tool description offered to the model (server text is untrusted).
const MAX_DESCRIPTION: usize = 1024;
/// Most tools offered per server; the rest are withheld (narrow with `allow_tools`).
const MAX_TOOLS_PER_SERVER: usize = 128;

/// What connecting needs from the run. Built by the run at start; `mcp list` builds
/// one without a store.
#[derive(Clone)]
pub struct McpEnv {
    /// Where events go; `None` records nothing (`io-harness mcp list`).
    pub store: Option<Store>,
    /// The run the events belong to.
    pub run_id: i64,
    /// Decides starting, connecting and (through the dispatcher) each call.
    pub gate: Arc<dyn PolicyGate>,
    /// The run's sandbox; a stdio server that asks for the sandbox fails to start
    /// without one.
    pub sandbox: Option<Arc<dyn Sandbox>>,
    /// The directory a stdio server runs in (the run's workspace).
    pub workdir: PathBuf,
    /// The contract's sandbox settings: network posture, env names, limits, extra
    /// read-only paths.
    pub settings: SandboxSettings,
    /// Workspace paths the policy denies for reading, masked inside the sandbox.
    pub masked: Vec<PathBuf>,
    /// Host paths hidden inside the sandbox (the store, the audit log).
    pub hidden: Vec<PathBuf>,
    /// The step events are recorded under until [`McpServers::set_step`] says otherwise.
    pub step: u32,
    /// Where a sandboxed server's session is logged when it ends (C18); `None` logs
    /// nothing.
    pub audit: Option<crate::audit::AuditLog>,
}

/// One tool as offered, for listings.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ToolListing {
    /// The name the model calls (`mcp__server__tool`).
    pub qualified: String,
    /// The server's own name.
    pub name: String,
    /// The server's description (bounded).
    pub description: String,
}

/// One server as connected (or not), for `io-harness mcp list`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ServerListing {
    /// Its name in the contract.
    pub name: String,
    /// `stdio` or `http`.
    pub transport: &'static str,
    /// What the handshake said (implementation name, version, protocol version,
    /// where it runs), as recorded in the `connected` event; `None` if it failed.
    pub info: Option<serde_json::Value>,
    /// Tools offered.
    pub tools: Vec<ToolListing>,
    /// Tools withheld by the allow/deny lists (or past the cap of 128 per server).
    pub hidden: Vec<String>,
    /// Why it is not available, if it is not.
    pub failure: Option<String>,
}

/// Records events for one run; the step moves as the run goes.
struct Recorder {
    store: Option<Store>,
    run_id: i64,
    step: AtomicU32,
    audit: Option<crate::audit::AuditLog>,
}

impl Recorder {
    fn step(&self) -> u32 {
        self.step.load(Ordering::SeqCst)
    }

    fn mcp(&self, make: impl FnOnce(i64, u32) -> McpEvent) {
        if let Some(s) = &self.store
            && let Err(e) = s.record_mcp_event(&make(self.run_id, self.step()))
        {
            tracing::warn!(error = %e, "could not record an MCP event");
        }
    }

    fn sandbox(&self, make: impl FnOnce(i64, u32) -> SandboxEvent) {
        if let Some(s) = &self.store
            && let Err(e) = s.record_sandbox_event(&make(self.run_id, self.step()))
        {
            tracing::warn!(error = %e, "could not record a sandbox event");
        }
    }

    /// The sandbox session of a server that ended, like a command's: a
    /// `sandbox_sessions` row (purpose `mcp`) and an audit line. Best effort.
    fn session(
        &self,
        spec: &RunSpec,
        out: &crate::sandbox::SandboxOutcome,
        proxy: Option<&crate::egress::EgressProxy>,
    ) {
        let step = self.step();
        let egress = crate::exec::EgressRecord::of(spec, out, proxy);
        let facts = crate::exec::SessionFacts {
            run_id: self.run_id,
            step,
            purpose: "mcp",
            workdir: &spec.workdir,
            spec,
            out,
            egress: &egress,
        };
        if let Some(s) = &self.store
            && let Err(e) = s.record_sandbox_session(&facts.row())
        {
            tracing::warn!(error = %e, "could not record an MCP server's sandbox session");
        }
        if let Some(log) = &self.audit {
            let run = self.store.as_ref().map(|_| (self.run_id, step));
            if let Err(e) = log.append(&facts.audit_line(run)) {
                tracing::warn!(error = %e, "could not append to the audit log");
            }
        }
    }

    fn policy(&self, d: &PolicyDecision) {
        if let Some(s) = &self.store {
            let _ = s.record_policy_event(&PolicyEvent {
                run_id: self.run_id,
                step: self.step(),
                act: d.action.act.as_str().into(),
                target: d.action.target.clone(),
                decision: d.decision.as_str().into(),
                rule: d.rule.clone(),
                layer: d.layer.clone(),
            });
        }
    }
}

/// The process behind a stdio server.
enum Proc {
    Sandboxed(SandboxChild),
    Plain(std::process::Child),
}

impl Proc {
    fn pid(&self) -> Option<u32> {
        match self {
            Self::Sandboxed(c) => Some(c.id()),
            Self::Plain(c) => Some(c.id()),
        }
    }

    /// How it ended, if it has.
    fn exit(&mut self) -> Option<String> {
        match self {
            Self::Sandboxed(c) => match c.try_wait() {
                Ok(Some(o)) => Some(match (o.exit_code, o.signal) {
                    (_, Some(sig)) => format!("killed by signal {sig}"),
                    (Some(code), None) => format!("exit code {code}"),
                    (None, None) => "ended".into(),
                }),
                _ => None,
            },
            Self::Plain(c) => match c.try_wait() {
                Ok(Some(st)) => Some(st.to_string()),
                _ => None,
            },
        }
    }

    fn kill(&mut self) {
        match self {
            Self::Sandboxed(c) => c.kill(),
            Self::Plain(c) => {
                let _ = c.kill();
                let _ = c.wait();
            }
        }
    }
}

/// The tail of a server's stderr, filled by a drain thread until end-of-file.
#[derive(Default)]
struct Stderr {
    tail: Mutex<Tail>,
    closed: Condvar,
}

#[derive(Default)]
struct Tail {
    bytes: VecDeque<u8>,
    closed: bool,
}

impl Stderr {
    fn push(&self, bytes: &[u8]) {
        let mut t = lock(&self.tail);
        t.bytes.extend(bytes);
        let extra = t.bytes.len().saturating_sub(STDERR_TAIL);
        t.bytes.drain(..extra);
    }

    fn close(&self) {
        lock(&self.tail).closed = true;
        self.closed.notify_all();
    }

    fn text(&self, max: usize) -> String {
        let t = lock(&self.tail);
        let skip = t.bytes.len().saturating_sub(max);
        let bytes: Vec<u8> = t.bytes.iter().skip(skip).copied().collect();
        String::from_utf8_lossy(&bytes).into_owned()
    }

    /// Waits, at most `limit`, for the pipe to close, so a failure record quotes all
    /// a process that ended said (its last write may still be in the pipe).
    fn settle(&self, limit: Duration) {
        let guard = lock(&self.tail);
        let _ = self
            .closed
            .wait_timeout_while(guard, limit, |t| !t.closed)
            .map_err(|e| e.into_inner());
    }
}

/// How long a failure record waits for an ended process's stderr.
const STDERR_SETTLE: Duration = Duration::from_secs(2);

type Service = RunningService<RoleClient, ClientConfig>;

/// One connected server.
pub(super) struct Server {
    pub(super) spec: McpServerSpec,
    peer: Peer<RoleClient>,
    service: Mutex<Option<Service>>,
    proc: Mutex<Option<Proc>>,
    /// What a sandboxed server was started with, for its session record.
    launched: Option<RunSpec>,
    /// The egress proxy of a server under `network = "allowlist"`: its only way out,
    /// alive as long as the server.
    proxy: Option<crate::egress::EgressProxy>,
    stderr: Arc<Stderr>,
    dead: Mutex<Option<String>>,
    info: serde_json::Value,
    tools: Vec<rmcp::model::Tool>,
    hidden: Vec<String>,
    shared: Arc<Shared>,
}

/// State shared by the servers of one run.
struct Shared {
    rec: Recorder,
    required_failed: Mutex<Option<String>>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(PoisonError::into_inner)
}

fn ms(d: Duration) -> u64 {
    u64::try_from(d.as_millis()).unwrap_or(u64::MAX)
}

impl Server {
    /// Marks the server dead once, recording why (with how the process ended and the
    /// tail of its stderr).
    fn mark_dead(&self, why: &str) {
        let mut dead = lock(&self.dead);
        if dead.is_some() {
            return;
        }
        let mut reason = why.to_string();
        if let Some(exit) = lock(&self.proc).as_mut().and_then(Proc::exit) {
            reason.push_str(&format!(" ({exit})"));
        }
        self.stderr.settle(STDERR_SETTLE);
        let tail = self.stderr.text(STDERR_QUOTED);
        if !tail.trim().is_empty() {
            reason.push_str(&format!("; stderr tail: {}", tail.trim()));
        }
        self.shared
            .rec
            .mcp(|r, s| McpEvent::failed(r, s, &self.spec.name, &reason));
        if self.spec.required {
            lock(&self.shared.required_failed).get_or_insert_with(|| self.spec.name.clone());
        }
        *dead = Some(reason);
    }

    /// Whether the transport has gone away (a stdio server that exited, a closed
    /// HTTP session); marks it dead if so.
    fn check_alive(&self) -> bool {
        if lock(&self.dead).is_some() {
            return false;
        }
        if self.peer.is_transport_closed() {
            self.mark_dead("the server closed its connection");
            return false;
        }
        true
    }

    /// Calls `tool` with `input` under the call timeout; records the call.
    pub(super) async fn call(
        &self,
        tool: &str,
        input: &serde_json::Value,
    ) -> Result<String, ToolError> {
        let name = &self.spec.name;
        let args = match input {
            serde_json::Value::Object(m) => Some(m.clone()),
            serde_json::Value::Null => None,
            _ => return Err(ToolError::BadInput("arguments must be an object".into())),
        };
        if !self.check_alive() {
            let why = lock(&self.dead).clone().unwrap_or_default();
            self.shared
                .rec
                .mcp(|r, s| McpEvent::called(r, s, name, tool, 0, "unavailable"));
            return Err(ToolError::Failed(format!(
                "MCP server {name} is not running: {why}"
            )));
        }
        let mut params = CallToolRequestParams::new(tool.to_string());
        params.arguments = args;
        let started = Instant::now();
        let result =
            tokio::time::timeout(self.spec.call_timeout, self.peer.call_tool(params)).await;
        let took = ms(started.elapsed());
        let (outcome, out) = match result {
            Err(_) => (
                "timeout",
                Err(ToolError::Failed(format!(
                    "MCP tool {tool} of server {name} timed out after {}; the server was asked to cancel it",
                    humantime::format_duration(self.spec.call_timeout)
                ))),
            ),
            Ok(Ok(r)) => {
                let value = serde_json::to_value(&r).unwrap_or_default();
                let text = super::tool::render_result(&value);
                if r.is_error == Some(true) {
                    ("error", Err(ToolError::Failed(text)))
                } else {
                    ("ok", Ok(text))
                }
            }
            Ok(Err(e)) => {
                let closed = matches!(
                    e,
                    ServiceError::TransportClosed | ServiceError::TransportSend(_)
                ) || self.peer.is_transport_closed();
                if closed {
                    self.mark_dead(&format!("the server went away during a call: {e}"));
                }
                (
                    "error",
                    Err(ToolError::Failed(format!("MCP server {name}: {e}"))),
                )
            }
        };
        self.shared
            .rec
            .mcp(|r, s| McpEvent::called(r, s, name, tool, took, outcome));
        out
    }

    fn close(&self) {
        let live = lock(&self.dead).is_none();
        if let Some(s) = lock(&self.service).take() {
            s.cancellation_token().cancel();
        }
        let proc = lock(&self.proc).take();
        match proc {
            Some(Proc::Sandboxed(mut child)) => {
                child.kill();
                let outcome = child.wait();
                self.shared.rec.sandbox(SandboxEvent::destroy);
                if let (Ok(out), Some(spec)) = (outcome, &self.launched) {
                    self.shared.rec.session(spec, &out, self.proxy.as_ref());
                }
            }
            Some(mut p @ Proc::Plain(_)) => p.kill(),
            None => {}
        }
        if live {
            *lock(&self.dead) = Some("disconnected".into());
            self.shared
                .rec
                .mcp(|r, s| McpEvent::disconnected(r, s, &self.spec.name));
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        if let Some(p) = lock(&self.proc).as_mut() {
            p.kill();
        }
    }
}

/// The servers of one run. Cheap to clone; the last clone dropped kills what is left.
///
/// A run connects the contract's `[[mcp]]` servers itself; an embedder can connect
/// some on its own and hand their tools to a registry:
///
/// ```no_run
/// use std::sync::Arc;
/// use io_harness::mcp::{McpEnv, McpServerSpec, McpServers};
/// use io_harness::policy::{Isolation, Policy};
/// # async fn demo() {
/// let env = McpEnv {
///     store: None,
///     run_id: 0,
///     gate: Arc::new(Policy::builtin().with_exec_isolation(Isolation::Native)),
///     sandbox: io_harness::sandbox::select().ok().map(Arc::from),
///     workdir: ".".into(),
///     settings: Default::default(),
///     masked: Vec::new(),
///     hidden: Vec::new(),
///     step: 0,
///     audit: None,
/// };
/// let spec = McpServerSpec::stdio("fs", ["node", "/opt/mcp/server-filesystem/dist/index.js", "."]);
/// let servers = McpServers::connect(&[spec], env).await;
/// for tool in servers.tools() {
///     println!("{}", tool.spec().name); // mcp__fs__read_file, …
/// }
/// servers.close();
/// # }
/// ```
#[derive(Clone)]
pub struct McpServers {
    servers: Vec<Arc<Server>>,
    failures: Vec<(McpServerSpec, String)>,
    shared: Arc<Shared>,
}

impl std::fmt::Debug for McpServers {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("McpServers")
            .field(
                "connected",
                &self
                    .servers
                    .iter()
                    .map(|s| &s.spec.name)
                    .collect::<Vec<_>>(),
            )
            .field(
                "failed",
                &self.failures.iter().map(|f| &f.0.name).collect::<Vec<_>>(),
            )
            .finish()
    }
}

impl McpServers {
    /// Connects every server of `specs`, concurrently, each within its startup
    /// timeout. Never fails as a whole: a server that cannot start is recorded
    /// (`failed`) and left out; [`McpServers::required_failed`] names a required one.
    pub async fn connect(specs: &[McpServerSpec], env: McpEnv) -> Self {
        let shared = Arc::new(Shared {
            rec: Recorder {
                store: env.store.clone(),
                run_id: env.run_id,
                step: AtomicU32::new(env.step),
                audit: env.audit.clone(),
            },
            required_failed: Mutex::new(None),
        });
        let mut servers = Vec::new();
        let mut failures = Vec::new();
        // All at once: each waits on its own process or endpoint.
        let attempts = futures_util::future::join_all(
            specs.iter().map(|spec| connect_one(spec, &env, &shared)),
        )
        .await;
        for (spec, attempt) in specs.iter().zip(attempts) {
            match attempt {
                Ok(s) => servers.push(Arc::new(s)),
                Err(reason) => {
                    shared
                        .rec
                        .mcp(|r, s| McpEvent::failed(r, s, &spec.name, &reason));
                    if spec.required {
                        lock(&shared.required_failed).get_or_insert_with(|| spec.name.clone());
                    }
                    failures.push((spec.clone(), reason));
                }
            }
        }
        Self {
            servers,
            failures,
            shared,
        }
    }

    /// The tools of every connected server, as offered (qualified names unique).
    fn offered(&self) -> Vec<McpTool> {
        let mut taken = std::collections::BTreeSet::new();
        let mut out = Vec::new();
        for s in &self.servers {
            for t in &s.tools {
                let qualified = qualified_name(&s.spec.name, &t.name, &taken);
                taken.insert(qualified.clone());
                let description = t.description.as_deref().unwrap_or("");
                out.push(McpTool {
                    server: s.clone(),
                    remote: t.name.to_string(),
                    qualified,
                    description: bounded(description, MAX_DESCRIPTION),
                    schema: adapt_schema(&serde_json::Value::Object((*t.input_schema).clone())),
                });
            }
        }
        out
    }

    /// The tools to register, one per offered tool of every connected server.
    pub fn tools(&self) -> Vec<Arc<dyn Tool>> {
        self.offered()
            .into_iter()
            .map(|t| Arc::new(t) as Arc<dyn Tool>)
            .collect()
    }

    /// What each server offers, or why it is unavailable.
    pub fn listing(&self) -> Vec<ServerListing> {
        let offered = self.offered();
        let mut out: Vec<ServerListing> = self
            .servers
            .iter()
            .map(|s| ServerListing {
                name: s.spec.name.clone(),
                transport: transport_label(&s.spec),
                info: Some(s.info.clone()),
                tools: offered
                    .iter()
                    .filter(|t| Arc::ptr_eq(&t.server, s))
                    .map(|t| ToolListing {
                        qualified: t.qualified.clone(),
                        name: t.remote.clone(),
                        description: t.description.clone(),
                    })
                    .collect(),
                hidden: s.hidden.clone(),
                failure: lock(&s.dead).clone(),
            })
            .collect();
        out.extend(self.failures.iter().map(|(spec, why)| ServerListing {
            name: spec.name.clone(),
            transport: transport_label(spec),
            info: None,
            tools: Vec::new(),
            hidden: Vec::new(),
            failure: Some(why.clone()),
        }));
        out
    }

    /// Events from now on belong to `step`.
    pub fn set_step(&self, step: u32) {
        self.shared.rec.step.store(step, Ordering::SeqCst);
    }

    /// The first required server that failed to start or has died, if any. Checks
    /// whether live servers' connections are still open (a death is recorded once).
    pub fn required_failed(&self) -> Option<String> {
        for s in &self.servers {
            s.check_alive();
        }
        lock(&self.shared.required_failed).clone()
    }

    /// Names of the servers connected and still alive.
    pub fn alive(&self) -> Vec<String> {
        self.servers
            .iter()
            .filter(|s| s.check_alive())
            .map(|s| s.spec.name.clone())
            .collect()
    }

    /// Host pid of a stdio server's process (the sandbox's top process).
    pub fn pid(&self, server: &str) -> Option<u32> {
        let s = self.servers.iter().find(|s| s.spec.name == server)?;
        lock(&s.proc).as_ref().and_then(Proc::pid)
    }

    /// The tail of a stdio server's stderr (bounded).
    pub fn stderr_tail(&self, server: &str) -> Option<String> {
        let s = self.servers.iter().find(|s| s.spec.name == server)?;
        Some(s.stderr.text(STDERR_TAIL))
    }

    /// Closes every live server (recording `disconnected`) and kills the processes.
    pub fn close(&self) {
        for s in &self.servers {
            s.close();
        }
    }
}

fn transport_label(spec: &McpServerSpec) -> &'static str {
    match spec.transport {
        McpTransport::Stdio { .. } => "stdio",
        McpTransport::Http { .. } => "http",
    }
}

fn bounded(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    format!("{}…", &s[..s.floor_char_boundary(max)])
}

/// The policy's answer to starting or dialing a declared server, recorded. The
/// contract naming the server is the operator's allow where only the defaults would
/// refuse (layer `mcp`); a rule an operator wrote that denies or asks wins, and the
/// server is not started (nobody can answer an ask at start).
fn gate_start(
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

fn client_config() -> ClientConfig {
    ClientConfig::new(
        ClientCapabilities::default(),
        Implementation::new("io-harness", env!("CARGO_PKG_VERSION")),
    )
}

struct Started {
    service: Service,
    proc: Option<Proc>,
    launched: Option<RunSpec>,
    proxy: Option<crate::egress::EgressProxy>,
    stderr: Arc<Stderr>,
    sandbox: String,
}

async fn connect_one(
    spec: &McpServerSpec,
    env: &McpEnv,
    shared: &Arc<Shared>,
) -> Result<Server, String> {
    let started = match &spec.transport {
        McpTransport::Stdio {
            argv,
            env: names,
            sandbox,
        } => {
            gate_start(
                shared,
                env.gate.as_ref(),
                Action::new(Act::Exec, argv[0].clone()),
                &spec.name,
            )?;
            let stderr = Arc::new(Stderr::default());
            let ((proc, stdout, stdin, label), launched, proxy) = if *sandbox {
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
            let mut proc = Some(proc);
            let service = match tokio::time::timeout(
                spec.startup_timeout,
                client_config().serve((stdout, stdin)),
            )
            .await
            {
                Ok(Ok(s)) => s,
                Ok(Err(e)) => {
                    let exit = proc.as_mut().and_then(Proc::exit);
                    abandon(shared, proc);
                    return Err(start_failure(
                        &format!("handshake failed: {e}"),
                        exit,
                        &stderr,
                    ));
                }
                Err(_) => {
                    abandon(shared, proc);
                    return Err(start_failure(
                        &format!(
                            "no handshake within the startup timeout of {}",
                            humantime::format_duration(spec.startup_timeout)
                        ),
                        None,
                        &stderr,
                    ));
                }
            };
            Started {
                service,
                proc,
                launched,
                proxy,
                stderr,
                sandbox: label,
            }
        }
        McpTransport::Http {
            url,
            bearer_token_env,
        } => {
            let parsed = reqwest::Url::parse(url).map_err(|e| format!("{url}: {e}"))?;
            let host = parsed.host_str().unwrap_or_default();
            let port = parsed.port_or_known_default().unwrap_or(0);
            gate_start(
                shared,
                env.gate.as_ref(),
                Action::new(Act::Net, format!("{host}:{port}")),
                &spec.name,
            )?;
            let mut config = StreamableHttpClientTransportConfig::with_uri(url.as_str());
            if let Some(var) = bearer_token_env {
                let token =
                    std::env::var(var).map_err(|_| format!("bearer_token_env {var} is not set"))?;
                if let Some(s) = &env.store {
                    s.redact_secrets(std::slice::from_ref(&token));
                }
                config = config.auth_header(token);
            }
            // No redirects: the policy decided this host and port, not wherever a
            // server would send us.
            let http = reqwest::Client::builder()
                .redirect(reqwest::redirect::Policy::none())
                .user_agent(concat!("io-harness/", env!("CARGO_PKG_VERSION")))
                .connect_timeout(spec.startup_timeout)
                .build()
                .map_err(|e| format!("HTTP client: {e}"))?;
            let transport = StreamableHttpClientTransport::with_client(http, config);
            let service =
                match tokio::time::timeout(spec.startup_timeout, client_config().serve(transport))
                    .await
                {
                    Ok(Ok(s)) => s,
                    Ok(Err(e)) => return Err(format!("handshake with {url} failed: {e}")),
                    Err(_) => {
                        return Err(format!(
                            "no handshake with {url} within the startup timeout of {}",
                            humantime::format_duration(spec.startup_timeout)
                        ));
                    }
                };
            Started {
                service,
                proc: None,
                launched: None,
                proxy: None,
                stderr: Arc::new(Stderr::default()),
                sandbox: "none".into(),
            }
        }
    };
    let peer = started.service.peer().clone();
    let listed = tokio::time::timeout(spec.startup_timeout, peer.list_all_tools()).await;
    let all = match listed {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => {
            started.service.cancellation_token().cancel();
            abandon(shared, started.proc);
            return Err(start_failure(
                &format!("listing tools failed: {e}"),
                None,
                &started.stderr,
            ));
        }
        Err(_) => {
            started.service.cancellation_token().cancel();
            abandon(shared, started.proc);
            return Err("listing tools did not finish within the startup timeout".into());
        }
    };
    let peer_info = peer
        .peer_info()
        .and_then(|i| serde_json::to_value(&*i).ok())
        .unwrap_or_default();
    let info = serde_json::json!({
        "name": peer_info.pointer("/serverInfo/name"),
        "version": peer_info.pointer("/serverInfo/version"),
        "protocol_version": peer_info.get("protocolVersion"),
        "transport": transport_label(spec),
        "sandbox": started.sandbox,
        "pid": started.proc.as_ref().and_then(Proc::pid),
    });
    shared
        .rec
        .mcp(|r, s| McpEvent::connected(r, s, &spec.name, &info));
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
    shared
        .rec
        .mcp(|r, s| McpEvent::discovered(r, s, &spec.name, tools.len(), hidden.len()));
    Ok(Server {
        spec: spec.clone(),
        peer,
        service: Mutex::new(Some(started.service)),
        proc: Mutex::new(started.proc),
        launched: started.launched,
        proxy: started.proxy,
        stderr: started.stderr,
        dead: Mutex::new(None),
        info,
        tools,
        hidden,
        shared: shared.clone(),
    })
}

/// Kills a server that will not be used, recording the sandbox's end.
fn abandon(shared: &Shared, proc: Option<Proc>) {
    if let Some(mut p) = proc {
        p.kill();
        if matches!(p, Proc::Sandboxed(_)) {
            shared.rec.sandbox(SandboxEvent::destroy);
        }
    }
}

fn start_failure(why: &str, exit: Option<String>, stderr: &Stderr) -> String {
    stderr.settle(STDERR_SETTLE);
    let mut s = why.to_string();
    if let Some(e) = exit {
        s.push_str(&format!(" ({e})"));
    }
    let tail = stderr.text(STDERR_QUOTED);
    if !tail.trim().is_empty() {
        s.push_str(&format!("; stderr tail: {}", tail.trim()));
    }
    s
}

/// Host variables passed in by name: the contract's sandbox env plus the server's.
fn env_values(settings: &SandboxSettings, names: &[String]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for n in settings.env.iter().chain(names) {
        if out.iter().any(|(k, _)| k == n) {
            continue;
        }
        if let Ok(v) = std::env::var(n) {
            out.push((n.clone(), v));
        }
    }
    out
}

/// Drains a blocking stderr pipe into the tail on its own thread (ends at EOF).
fn drain_stderr<R: Read + Send + 'static>(mut r: R, tail: Arc<Stderr>) {
    let _ = std::thread::Builder::new()
        .name("mcp-stderr".into())
        .spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = r.read(&mut buf) {
                if n == 0 {
                    break;
                }
                tail.push(&buf[..n]);
            }
            tail.close();
        });
}

type Pipes = (
    Proc,
    tokio::process::ChildStdout,
    tokio::process::ChildStdin,
    String,
);

async fn start_sandboxed(
    argv: &[String],
    names: &[String],
    env: &McpEnv,
    tail: &Arc<Stderr>,
) -> Result<(Pipes, RunSpec, Option<crate::egress::EgressProxy>), String> {
    let sandbox = env
        .sandbox
        .clone()
        .ok_or("no sandbox is available to start it in (set sandbox = false to run it outside)")?;
    let mut spec = RunSpec::new(argv.to_vec(), &env.workdir);
    let l = &env.settings.limits;
    let d = SandboxLimits::default();
    // A server lives as long as the run: no wall-clock cap of its own, the other caps
    // as for commands.
    spec.limits = SandboxLimits {
        cpu_secs: l.cpu_secs.or(d.cpu_secs),
        wall_secs: None,
        memory_bytes: l.memory.or(d.memory_bytes),
        processes: l.processes.or(d.processes),
        open_files: l.open_files.or(d.open_files),
        output_bytes: None,
    };
    spec.env = env_values(&env.settings, names);
    spec.network = match env.settings.network {
        NetworkSetting::Open => NetworkPosture::Open,
        NetworkSetting::Allowlist => NetworkPosture::Allowlist,
        NetworkSetting::None => NetworkPosture::None,
    };
    // Under an allowlist the server, like a command, reaches only the harness's proxy.
    let proxy = crate::exec::start_egress(&env.settings, &mut spec)
        .await
        .map_err(|e| format!("sandbox start: {e}"))?;
    spec.read_only_paths = env.settings.read_only_paths.clone();
    spec.masked_paths = env.masked.clone();
    spec.hidden_paths = env.hidden.clone();
    spec.allow_weaker = env.settings.allow_weaker;
    let launched = spec.clone();
    let mut child = tokio::task::spawn_blocking(move || sandbox.spawn(&spec))
        .await
        .map_err(|e| format!("sandbox start: {e}"))?
        .map_err(|e| format!("sandbox start: {e}"))?;
    let label = child.backend().label().to_string();
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err("the sandbox handle has no pipes".into());
    };
    drain_stderr(stderr, tail.clone());
    let stdout =
        tokio::process::ChildStdout::from_std(stdout).map_err(|e| format!("stdout: {e}"))?;
    let stdin = tokio::process::ChildStdin::from_std(stdin).map_err(|e| format!("stdin: {e}"))?;
    Ok((
        (Proc::Sandboxed(child), stdout, stdin, label),
        launched,
        proxy,
    ))
}

fn start_plain(
    argv: &[String],
    names: &[String],
    env: &McpEnv,
    tail: &Arc<Stderr>,
) -> Result<Pipes, String> {
    let mut cmd = std::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(&env.workdir)
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for k in ["PATH", "HOME", "LANG", "TERM"] {
        if let Ok(v) = std::env::var(k) {
            cmd.env(k, v);
        }
    }
    for (k, v) in env_values(&env.settings, names) {
        cmd.env(k, v);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", argv[0]))?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.kill();
        let _ = child.wait();
        return Err("the child has no pipes".into());
    };
    drain_stderr(stderr, tail.clone());
    let mut proc = Proc::Plain(child);
    let stdout = match tokio::process::ChildStdout::from_std(stdout) {
        Ok(s) => s,
        Err(e) => {
            proc.kill();
            return Err(format!("stdout: {e}"));
        }
    };
    let stdin = match tokio::process::ChildStdin::from_std(stdin) {
        Ok(s) => s,
        Err(e) => {
            proc.kill();
            return Err(format!("stdin: {e}"));
        }
    };
    Ok((proc, stdout, stdin, "none".into()))
}

/// Host paths a sandboxed server must not see: the store's files and the audit log.
pub(crate) fn hidden_paths(store: &Store, audit: Option<&crate::audit::AuditLog>) -> Vec<PathBuf> {
    let mut hidden = Vec::new();
    if let Some(db) = store.path() {
        for suffix in ["", "-wal", "-shm"] {
            let mut p = db.clone().into_os_string();
            p.push(suffix);
            hidden.push(PathBuf::from(p));
        }
    }
    if let Some(a) = audit {
        hidden.push(a.dir().to_path_buf());
    }
    hidden
}
