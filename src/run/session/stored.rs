//! What the store holds of a run that a new session continues (a resume) or starts
//! from (a sub-agent spawned from outside the parent's loop): read once, decoded in
//! one place.

use crate::contract::TaskContract;
use crate::provider::Completion;
use crate::run::budget::Totals;
use crate::run::state::LoopState;
use crate::run::{RunError, subagent};
use crate::store::{AgentLink, AsyncStore, RunRecord, StepRecord, StoreError};

/// A stored run with its committed steps.
pub(super) struct StoredRun {
    pub rec: RunRecord,
    pub contract: TaskContract,
    /// Its place in a tree of runs, when it is a sub-agent.
    pub link: Option<AgentLink>,
    pub steps: Vec<StepRecord>,
}

impl StoredRun {
    /// Reads the run, its contract, its link and its committed steps.
    pub async fn load(store: &AsyncStore, run_id: i64) -> Result<Self, RunError> {
        let rec = store
            .run(run_id)
            .await?
            .ok_or(RunError::NoSuchRun(run_id))?;
        let contract = contract_of(&rec)?;
        let link = store.agent_link(run_id).await?;
        let steps = store.steps(run_id).await?;
        Ok(Self {
            rec,
            contract,
            link,
            steps,
        })
    }

    /// Committed steps.
    pub fn committed(&self) -> u32 {
        u32::try_from(self.steps.len()).unwrap_or(u32::MAX)
    }

    /// The loop counters kept with the last committed step (defaults before any).
    pub fn state(&self) -> Result<LoopState, RunError> {
        match self.steps.last() {
            Some(s) => serde_json::from_str(&s.state_json).map_err(|e| RunError::Corrupt {
                run_id: self.rec.id,
                what: "step state",
                source: e,
            }),
            None => Ok(LoopState::default()),
        }
    }

    /// What the run has used: its committed steps, and its sub-agents' usage rolled
    /// up — of the children spawned before step `before`, or of all of them.
    pub async fn usage(
        &self,
        store: &AsyncStore,
        before: Option<u32>,
    ) -> Result<Totals, StoreError> {
        let run_id = self.rec.id;
        let lost = store.call(move |s| s.lost_calls(run_id)).await?;
        let mut totals = Totals::from_record(&self.steps, &lost);
        let children = store
            .call(move |s| {
                let mut used = Vec::new();
                for c in s.children(run_id)? {
                    if before.is_none_or(|b| c.link.step < b) {
                        used.push(subagent::rolled_up(s, c.run.id)?);
                    }
                }
                Ok(used)
            })
            .await?;
        for c in &children {
            totals.add_child(c);
        }
        Ok(totals)
    }
}

impl StoredRun {
    /// [`StoredRun::usage`] for a session resuming the run at `next_step` (holding its
    /// lock): first the model calls the interrupted session left in flight are marked
    /// lost, so their estimated input counts — all but the one whose reply the resumed
    /// step replays (`replay`), which its commit closes.
    pub async fn resumed_usage(
        &self,
        store: &AsyncStore,
        next_step: u32,
        replay: Option<&Completion>,
    ) -> Result<Totals, StoreError> {
        let run_id = self.rec.id;
        let except = replay.and_then(|r| r.model_call);
        store
            .call(move |s| s.mark_cut_off_calls(run_id, except))
            .await?;
        self.usage(store, Some(next_step)).await
    }
}

/// A run's contract as stored with it.
pub(in crate::run) fn contract_of(rec: &RunRecord) -> Result<TaskContract, RunError> {
    let json = rec
        .contract_json
        .as_deref()
        .ok_or_else(|| RunError::NotResumable {
            run_id: rec.id,
            reason: "it has no stored contract".into(),
        })?;
    serde_json::from_str(json).map_err(|e| RunError::Corrupt {
        run_id: rec.id,
        what: "contract",
        source: e,
    })
}

/// [`contract_of`] a run read through the async store.
pub(super) async fn stored_contract(
    store: &AsyncStore,
    run_id: i64,
) -> Result<TaskContract, RunError> {
    let rec = store
        .run(run_id)
        .await?
        .ok_or(RunError::NoSuchRun(run_id))?;
    contract_of(&rec)
}
