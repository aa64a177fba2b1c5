//! One connected server: its session, its process, and its life — noticed dead once,
//! closed at the end of the run.

use std::sync::{Arc, Mutex};

use rmcp::model::ClientConfig;
use rmcp::service::{Peer, RoleClient, RunningService};

use super::lock;
use super::process::{Proc, Stderr};
use super::record::Recorder;
use crate::mcp::McpServerSpec;
use crate::sandbox::RunSpec;
use crate::store::{McpEvent, SandboxEvent};

pub(super) type Service = RunningService<RoleClient, ClientConfig>;

/// One connected server.
pub(crate) struct Server {
    pub(crate) spec: McpServerSpec,
    /// Where a stdio server runs (the workspace): what its relative paths mean.
    pub(crate) workdir: std::path::PathBuf,
    pub(super) peer: Peer<RoleClient>,
    pub(super) service: Mutex<Option<Service>>,
    pub(super) proc: Mutex<Option<Proc>>,
    /// What a sandboxed server was started with, for its session record.
    pub(super) launched: Option<RunSpec>,
    /// The egress proxy of a server under `network = "allowlist"`: its only way out,
    /// alive as long as the server.
    pub(super) proxy: Option<crate::egress::EgressProxy>,
    pub(super) stderr: Arc<Stderr>,
    pub(super) dead: Mutex<Option<String>>,
    pub(super) info: serde_json::Value,
    /// What a stdio server's framing answered calls with (none over HTTP).
    pub(super) faults: Option<Arc<super::pipe::Faults>>,
    pub(super) tools: Vec<rmcp::model::Tool>,
    pub(super) hidden: Vec<String>,
    /// Tools `path_args` names that the server does not list.
    pub(super) path_args_unmatched: Vec<String>,
    pub(super) shared: Arc<Shared>,
}

/// State shared by the servers of one run.
pub(super) struct Shared {
    pub(super) rec: Recorder,
    pub(super) required_failed: Mutex<Option<String>>,
}

impl Shared {
    /// Remembers `server` as the first required server that failed, unless one
    /// already did.
    pub(super) fn required_failed(&self, server: &str) {
        lock(&self.required_failed).get_or_insert_with(|| server.to_string());
    }
}

impl Server {
    /// Marks the server dead once, recording why (with how the process ended and the
    /// tail of its stderr).
    pub(super) fn mark_dead(&self, why: &str) {
        let mut dead = lock(&self.dead);
        if dead.is_some() {
            return;
        }
        // The pipe closes before the process is reaped: wait a moment for its end.
        let exit = lock(&self.proc)
            .as_mut()
            .and_then(|p| p.exit_within(super::process::EXIT_SETTLE));
        let reason = self.stderr.failure(why, exit);
        self.shared
            .rec
            .mcp(|r, s| McpEvent::failed(r, s, &self.spec.name, &reason));
        if self.spec.required {
            self.shared.required_failed(&self.spec.name);
        }
        *dead = Some(reason);
    }

    /// Whether the transport has gone away (a stdio server that exited, a closed
    /// HTTP session); marks it dead if so.
    pub(super) fn check_alive(&self) -> bool {
        if lock(&self.dead).is_some() {
            return false;
        }
        if self.peer.is_transport_closed() {
            self.mark_dead("the server closed its connection");
            return false;
        }
        true
    }

    /// Cancels the session, kills the process (recording a sandboxed one's end and
    /// session), and records `disconnected` if it was still alive.
    pub(super) fn close(&self) {
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
