//! A sub-agent started from outside its parent's loop (the library's `spawn_agent`):
//! the parent as the store has it — its policy layers, its depth, what its committed
//! steps and earlier children used — stands in for the live parent a `spawn_agent`
//! call has; the child then opens like any child.

use std::sync::Arc;
use std::time::Duration;

use super::environment::policy_from_layers;
use super::stored::StoredRun;
use super::{Session, SessionKind};
use crate::policy::PolicyGate;
use crate::provider::Provider;
use crate::run::subagent::{self, AgentSpec, ParentView, Remaining};
use crate::run::{RunError, RunOptions, RunResult};
use crate::store::{AgentLink, AsyncStore, Store};

/// Checks `spec` against the stored run `parent_run_id`, opens the child linked after
/// the parent's last committed step, and drives it.
pub(in crate::run) async fn spawn_from_record(
    store: &Store,
    parent_run_id: i64,
    spec: &AgentSpec,
    provider: &dyn Provider,
    options: RunOptions,
) -> Result<RunResult, RunError> {
    let db = AsyncStore::new(store.clone());
    let parent = StoredRun::load(&db, parent_run_id).await?;
    let work = std::path::PathBuf::from(parent.rec.work_dir.clone().ok_or_else(|| {
        RunError::NotResumable {
            run_id: parent_run_id,
            reason: "it has no working directory on record".into(),
        }
    })?);
    let gate: Arc<dyn PolicyGate> = match (&options.policy, parent.rec.policy_json.as_deref()) {
        (Some(p), _) => p.clone(),
        (None, Some(json)) => crate::run::setup::run_gate(
            Arc::new(policy_from_layers(json)?),
            &parent.contract,
            &work,
        ),
        (None, None) => {
            return Err(RunError::Policy(
                crate::run::PolicyFailure::NoStoredPolicy {
                    run_id: parent_run_id,
                },
            ));
        }
    };
    let depth = parent.link.as_ref().map_or(0, |l| l.depth);
    let used = parent.usage(&db, None).await?;
    // What the parent's sessions took so far: the wall time its last commit kept.
    let elapsed = parent
        .state()
        .map_or(Duration::ZERO, |s| Duration::from_millis(s.elapsed_ms));
    let b = &parent.contract.budget;
    let remaining = Remaining {
        steps: b.max_steps.saturating_sub(used.steps + used.agent_steps),
        tokens: b.max_tokens.map(|m| m.saturating_sub(used.total_tokens())),
        cost_usd: b.max_cost_usd.map(|m| (m - used.cost_known_usd).max(0.0)),
        duration: b.max_duration.map(|d| d.saturating_sub(elapsed)),
    };
    let view = ParentView {
        depth,
        contract: &parent.contract,
        work: &work,
        gate,
        remaining,
    };
    let prepared = subagent::prepare(spec, &view).map_err(|reason| RunError::SpawnRefused {
        run_id: parent_run_id,
        reason,
    })?;
    let n = db.children(parent_run_id).await?.len() + 1;
    let link = AgentLink {
        parent_run_id,
        depth: depth + 1,
        step: parent.committed(),
        call_id: format!("api-{n}"),
        name: spec.name.clone(),
    };
    let owned = provider.for_agent(&spec.name);
    let child_provider: &dyn Provider = owned.as_deref().unwrap_or(provider);
    let mut opts = options;
    opts.policy = Some(prepared.gate);
    if opts.breaker.is_none() {
        opts.breaker = parent.state().ok().map(|s| s.breaker);
    }
    let kind = SessionKind::Child {
        contract: &prepared.contract,
        link,
    };
    Session::open(kind, child_provider, store, opts)
        .await?
        .drive()
        .await
}
