//! The `spawn_agent` call: a child run started inside a parent's step — or, when the
//! parent resumes, the child that call already spawned, resumed or adopted. See
//! `run::subagent` for containment.

use std::sync::Arc;
use std::time::Instant;

use futures_util::future::BoxFuture;

use super::stored::stored_contract;
use super::{Session, SessionKind, StepEnd, ms};
use crate::policy::{Act, Action, Decision, PolicyDecision, PolicyGate};
use crate::provider::{Completion, Provider};
use crate::run::outcome::RunOutcome;
use crate::run::subagent::{self, AgentSpec, ParentView, Remaining};
use crate::run::{RunError, RunOptions, RunResult};
use crate::store::{AgentLink, ChildRun};
use crate::tools::{Dispatched, SPAWN_AGENT};

fn refused(reason: String, started: Instant, decisions: Vec<PolicyDecision>) -> Dispatched {
    Dispatched {
        content: format!("spawn_agent refused: {reason}"),
        is_error: true,
        decisions,
        confinement_refusal: None,
        effects: Vec::new(),
        duration_ms: ms(started.elapsed()),
        asked: Vec::new(),
    }
}

/// What became of the call before its report.
enum Spawned {
    /// A child ran (or had run) as this run id.
    Child(i64),
    /// Nothing ran; the reason goes to the model.
    Refused(String),
}

impl Session<'_> {
    /// Whether this run may still spawn (its depth is below `[agents] max_depth`).
    pub(super) fn agents_offered(&self) -> bool {
        self.run.depth < self.run.contract.agents.max_depth
    }

    /// What the parent has left, counting the step in progress (its model call and
    /// the step itself).
    fn remaining(&self, reply: &Completion) -> Remaining {
        let b = &self.run.contract.budget;
        let t = &self.progress.totals;
        let u = &reply.usage;
        let reply_tokens = u.total();
        Remaining {
            steps: b.max_steps.saturating_sub(t.steps + t.agent_steps + 1),
            tokens: b
                .max_tokens
                .map(|m| m.saturating_sub(t.total_tokens() + reply_tokens)),
            cost_usd: b
                .max_cost_usd
                .map(|m| (m - t.cost_known_usd - reply.cost.usd.unwrap_or(0.0)).max(0.0)),
            duration: b.max_duration.map(|d| d.saturating_sub(self.elapsed())),
        }
    }

    fn child_options(&self, gate: Arc<dyn PolicyGate>) -> RunOptions {
        let mut o = self.opts.clone();
        o.policy = Some(gate);
        o.breaker = Some(self.progress.state.breaker);
        o
    }

    /// Runs the `spawn_agent` call `id` of `step`: adopts the child this call already
    /// has (a resumed parent), or checks the spec and starts one; then reports the
    /// child's outcome and adds its usage to this run's totals. A child that ends
    /// cancelled or awaiting approval ends this step the same way, uncommitted, so a
    /// resume of the parent continues the child.
    pub(super) async fn spawn_agent(
        &mut self,
        step: u32,
        id: &str,
        input: &serde_json::Value,
        reply: &Completion,
    ) -> Result<Dispatched, StepEnd> {
        let started = Instant::now();
        let d = self
            .tools
            .policy
            .gate
            .decide(&Action::new(Act::Exec, SPAWN_AGENT));
        if d.rule != "default" && d.decision != Decision::Allow {
            let why = format!(
                "your policy says {} to spawning sub-agents (rule {} in layer {})",
                d.decision.as_str(),
                d.rule,
                d.layer
            );
            return Ok(refused(why, started, vec![d]));
        }
        let spec: AgentSpec = match serde_json::from_value(input.clone()) {
            Ok(s) => s,
            Err(e) => return Ok(refused(format!("bad input: {e}"), started, Vec::new())),
        };
        if !self.agents_offered() {
            let why = format!(
                "depth limit: this run is at depth {} and [agents] max_depth = {}",
                self.run.depth, self.run.contract.agents.max_depth
            );
            return Ok(refused(why, started, Vec::new()));
        }
        let owned = self.provider.for_agent(&spec.name);
        let child_provider: &dyn Provider = owned.as_deref().unwrap_or(self.provider);
        let existing = self
            .store
            .child_for_call(self.run.id, step, id.to_string())
            .await
            .map_err(StepEnd::Store)?;
        let spawned = match existing {
            Some(child) => self.adopt(&child, child_provider).await?,
            None => {
                self.start_child(step, id, &spec, reply, child_provider)
                    .await?
            }
        };
        match spawned {
            Spawned::Refused(why) => Ok(refused(why, started, Vec::new())),
            Spawned::Child(child_id) => {
                crate::failpoint::hit("agent.after_child", step);
                self.report(child_id, started).await
            }
        }
    }

    async fn start_child(
        &mut self,
        step: u32,
        id: &str,
        spec: &AgentSpec,
        reply: &Completion,
        provider: &dyn Provider,
    ) -> Result<Spawned, StepEnd> {
        let view = ParentView {
            depth: self.run.depth,
            contract: &self.run.contract,
            work: &self.run.dirs.work,
            gate: self.tools.policy.gate.clone(),
            remaining: self.remaining(reply),
        };
        let prepared = match subagent::prepare(spec, &view) {
            Ok(p) => p,
            Err(why) => return Ok(Spawned::Refused(why)),
        };
        // The reply goes on record before the child exists: a resume replays it and
        // finds the child by this call.
        self.store
            .record_spawn_reply(
                self.run.id,
                step,
                serde_json::to_string(reply).unwrap_or_default(),
            )
            .await
            .map_err(StepEnd::Store)?;
        let link = AgentLink {
            parent_run_id: self.run.id,
            depth: self.run.depth + 1,
            step,
            call_id: id.to_string(),
            name: spec.name.clone(),
        };
        let opts = self.child_options(prepared.gate);
        let kind = SessionKind::Child {
            contract: &prepared.contract,
            link,
        };
        let child = match Session::open(kind, provider, self.store.sync(), opts).await {
            Ok(s) => s,
            Err(RunError::Store(e)) => return Err(StepEnd::Store(e)),
            Err(e) => {
                return Ok(Spawned::Refused(format!(
                    "the sub-agent could not start: {e}"
                )));
            }
        };
        let child_id = child.run_id();
        crate::failpoint::hit("agent.after_spawn", step);
        Self::drive_child(child).await?;
        Ok(Spawned::Child(child_id))
    }

    /// The child this call already spawned: resumed if it was interrupted (or
    /// cancelled, or stopped for an approval since decided), else taken as it ended.
    async fn adopt(
        &mut self,
        child: &ChildRun,
        provider: &dyn Provider,
    ) -> Result<Spawned, StepEnd> {
        let outcome: Option<RunOutcome> = child
            .run
            .outcome_json
            .as_deref()
            .and_then(|j| serde_json::from_str(j).ok());
        let finished = child.run.status == "finished";
        if finished && !outcome.as_ref().is_some_and(RunOutcome::is_resumable) {
            return Ok(Spawned::Child(child.run.id));
        }
        let stored = match stored_contract(&self.store, child.run.id).await {
            Ok(c) => c,
            Err(e) => {
                return Ok(Spawned::Refused(format!(
                    "sub-agent run {}: {e}",
                    child.run.id
                )));
            }
        };
        let parent_gate = self.tools.policy.gate.clone();
        let gate = match subagent::gate_for_stored(parent_gate, &self.run.dirs.work, &stored) {
            Ok(g) => g,
            Err(why) => {
                return Ok(Spawned::Refused(format!(
                    "sub-agent run {}: {why}",
                    child.run.id
                )));
            }
        };
        let opts = self.child_options(gate);
        let kind = SessionKind::Resume {
            run_id: child.run.id,
            given: None,
        };
        match Session::open(kind, provider, self.store.sync(), opts).await {
            Ok(session) => Self::drive_child(session).await?,
            Err(RunError::Store(e)) => return Err(StepEnd::Store(e)),
            // Still waiting for its approval: the parent waits with it.
            Err(RunError::NotResumable { .. }) if outcome.is_some() => {}
            Err(e) => {
                return Ok(Spawned::Refused(format!(
                    "sub-agent run {} could not be resumed: {e}",
                    child.run.id
                )));
            }
        }
        Ok(Spawned::Child(child.run.id))
    }

    /// Drives a child to its end. The child's future is boxed as `dyn Send`: a
    /// child's step may spawn in turn, and a future cannot contain itself.
    async fn drive_child(child: Session<'_>) -> Result<(), StepEnd> {
        match boxed_drive(child).await {
            Ok(_) => Ok(()),
            Err(RunError::Store(e)) => Err(StepEnd::Store(e)),
            // The child recorded what it could; the report reads the store.
            Err(e) => {
                tracing::warn!(error = %e, "sub-agent run failed");
                Ok(())
            }
        }
    }

    /// The child's outcome, from the store (one path for fresh and adopted
    /// children), with its usage added to this run's totals.
    async fn report(&mut self, child_id: i64, started: Instant) -> Result<Dispatched, StepEnd> {
        let rec = self
            .store
            .run(child_id)
            .await
            .map_err(StepEnd::Store)?
            .ok_or(StepEnd::Store(crate::store::StoreError::NoSuchRun(
                child_id,
            )))?;
        let link = self
            .store
            .agent_link(child_id)
            .await
            .map_err(StepEnd::Store)?;
        let usage = self
            .store
            .call(move |s| subagent::rolled_up(s, child_id))
            .await
            .map_err(StepEnd::Store)?;
        self.progress.totals.add_child(&usage);
        let outcome: Option<RunOutcome> = rec
            .outcome_json
            .as_deref()
            .and_then(|j| serde_json::from_str(j).ok());
        if let Some(o) = &outcome
            && o.is_resumable()
        {
            return Err(StepEnd::Outcome(o.clone()));
        }
        let (name, depth) = link.map_or((String::new(), self.run.depth + 1), |l| (l.name, l.depth));
        let content = subagent::summary(
            &self.conversation.boundary,
            &name,
            child_id,
            depth,
            rec.outcome.as_deref().unwrap_or("unfinished"),
            &usage,
            rec.diff.as_deref().unwrap_or(""),
            rec.final_message.as_deref().unwrap_or(""),
        );
        Ok(Dispatched {
            content,
            is_error: outcome != Some(RunOutcome::Success),
            decisions: Vec::new(),
            confinement_refusal: None,
            effects: Vec::new(),
            duration_ms: ms(started.elapsed()),
            asked: Vec::new(),
        })
    }
}

fn boxed_drive(child: Session<'_>) -> BoxFuture<'_, Result<RunResult, RunError>> {
    Box::pin(child.drive())
}
