//! The servers of one run, as a whole: connected together, their tools offered,
//! listed, watched and closed.

use std::sync::{Arc, Mutex};

use super::connect::connect_one;
use super::record::Recorder;
use super::server::{Server, Shared};
use super::{McpEnv, ServerListing, ToolListing, lock, transport_label};
use crate::mcp::McpServerSpec;
use crate::mcp::tool::{McpTool, adapt_schema, qualified_name};
use crate::store::McpEvent;
use crate::tools::Tool;

/// Longest tool description offered to the model (server text is untrusted).
const MAX_DESCRIPTION: usize = 1024;

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
///     protected: Vec::new(),
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
            rec: Recorder::new(env.store.clone(), env.run_id, env.step, env.audit.clone()),
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
                        shared.required_failed(&spec.name);
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
                path_args_unmatched: s.path_args_unmatched.clone(),
                failure: lock(&s.dead).clone(),
            })
            .collect();
        out.extend(self.failures.iter().map(|(spec, why)| ServerListing {
            name: spec.name.clone(),
            transport: transport_label(spec),
            info: None,
            tools: Vec::new(),
            hidden: Vec::new(),
            path_args_unmatched: Vec::new(),
            failure: Some(why.clone()),
        }));
        out
    }

    /// Events from now on belong to `step`.
    pub fn set_step(&self, step: u32) {
        self.shared.rec.set_step(step);
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
        lock(&s.proc).as_ref().and_then(super::process::Proc::pid)
    }

    /// The tail of a stdio server's stderr (bounded).
    pub fn stderr_tail(&self, server: &str) -> Option<String> {
        let s = self.servers.iter().find(|s| s.spec.name == server)?;
        Some(s.stderr.text(super::process::STDERR_TAIL))
    }

    /// Closes every live server (recording `disconnected`) and kills the processes.
    pub fn close(&self) {
        for s in &self.servers {
            s.close();
        }
    }
}

fn bounded(s: &str, max: usize) -> String {
    if s.len() <= max {
        return s.to_string();
    }
    format!("{}…", &s[..s.floor_char_boundary(max)])
}
