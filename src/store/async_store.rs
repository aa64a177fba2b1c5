//! The store as async code reaches it: the one seam between the run engine and the
//! database.
//!
//! # Why the blocking pool
//!
//! rusqlite is synchronous, and a store call can wait: on the disk, and on another
//! process's write lock for up to `busy_timeout` (10 s, see the module docs of
//! [`crate::store`]). Called from a task, that wait holds a runtime worker — on a
//! current-thread runtime the whole runtime, MCP servers' pipes and the cancel token's
//! watchers included. So every call goes through [`AsyncStore::call`], which runs it on
//! tokio's blocking pool with a clone of the handle.
//!
//! The blocking pool rather than a dedicated store thread: a [`Store`] is already an
//! `Arc` over one mutex-guarded connection, `Send + Sync` and cheap to clone, so the
//! pool needs nothing new — no thread to start, name, join or shut down with the run,
//! and sub-agents (which share the parent's handle) need no second channel. Calls are
//! awaited one at a time, so the engine's writes reach the file in exactly the order it
//! makes them, as before. A dedicated thread would only add a queue in front of the
//! same mutex.
//!
//! # Why named methods
//!
//! The engine calls these methods, never `Store` directly from async code, so a second
//! backend (an async PostgreSQL driver) can implement the same set without touching the
//! engine. [`AsyncStore::call`] stays available for reads of several statements that
//! belong together (a run's usage across its sub-agent tree).
//!
//! Outside a tokio runtime a call runs inline: the synchronous API keeps working for an
//! embedder that drives futures another way.
//!
//! # No write is dropped unseen
//!
//! Some records are written where the engine goes on whatever happens (policy events,
//! provider attempts, sandbox and context events, a journal completion, an approval
//! request about to end the run). Those methods note a failure on the handle
//! ([`Store::note_lost`]) before returning it, so the run's next commit refuses and the
//! run ends with the failure named instead of committing over a gap. Writes whose error
//! the engine always propagates (a run created, a step committed) are not noted: the
//! run ends there already.

use super::{
    AgentLink, ApprovalRecord, ChildRun, ContextEvent, MemoryNote, NewRun, PolicyEvent,
    ProviderAttempt, Result, RunFinish, RunRecord, SandboxEvent, StepRecord, Store, StoreError,
    StoredReply, ToolIntent, ToolIntentRecord,
};

/// A [`Store`] whose calls run off the async worker threads. Cheap to clone: clones
/// share the connection and the registered secrets.
#[derive(Clone)]
pub struct AsyncStore {
    store: Store,
}

impl AsyncStore {
    /// Wraps a handle (a clone: it shares the connection).
    pub fn new(store: Store) -> Self {
        Self { store }
    }

    /// The synchronous handle, for components that keep one and call it from blocking
    /// code of their own (the executor, MCP servers, memory tools).
    pub fn sync(&self) -> &Store {
        &self.store
    }

    /// Runs `f` on the blocking pool with a clone of the handle and waits for it. A
    /// panic inside `f` resumes in the caller; a task the runtime dropped while
    /// shutting down is [`StoreError::TaskCancelled`].
    pub async fn call<T, F>(&self, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<T> + Send + 'static,
    {
        let store = self.store.clone();
        let Ok(runtime) = tokio::runtime::Handle::try_current() else {
            return f(&store);
        };
        match runtime.spawn_blocking(move || f(&store)).await {
            Ok(r) => r,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(e) => Err(StoreError::TaskCancelled(e.to_string())),
        }
    }

    /// [`Store::create_run`].
    pub async fn create_run(&self, run: NewRun) -> Result<i64> {
        self.call(move |s| s.create_run(&run)).await
    }

    /// [`Store::create_child_run`].
    pub async fn create_child_run(&self, run: NewRun, link: AgentLink) -> Result<i64> {
        self.call(move |s| s.create_child_run(&run, &link)).await
    }

    /// [`Store::run`].
    pub async fn run(&self, run_id: i64) -> Result<Option<RunRecord>> {
        self.call(move |s| s.run(run_id)).await
    }

    /// [`Store::reopen_run`].
    pub async fn reopen_run(&self, run_id: i64) -> Result<()> {
        self.call(move |s| s.reopen_run(run_id)).await
    }

    /// [`Store::set_run_initial`].
    pub async fn set_run_initial(&self, run_id: i64, initial_json: String) -> Result<()> {
        self.call(move |s| s.set_run_initial(run_id, &initial_json))
            .await
    }

    /// [`Store::set_run_policy`], noted on failure: a resume must apply exactly the
    /// layers in force, so a run cannot go on with them unrecorded.
    pub async fn set_run_policy(&self, run_id: i64, policy_json: String) -> Result<()> {
        self.noted(Some(run_id), "policy layers", move |s| {
            s.set_run_policy(run_id, &policy_json)
        })
        .await
    }

    /// [`Store::finish_run`].
    pub async fn finish_run(&self, run_id: i64, fin: RunFinish) -> Result<()> {
        self.call(move |s| s.finish_run(run_id, &fin)).await
    }

    /// [`Store::agent_link`].
    pub async fn agent_link(&self, run_id: i64) -> Result<Option<AgentLink>> {
        self.call(move |s| s.agent_link(run_id)).await
    }

    /// [`Store::children`].
    pub async fn children(&self, run_id: i64) -> Result<Vec<ChildRun>> {
        self.call(move |s| s.children(run_id)).await
    }

    /// [`Store::child_for_call`].
    pub async fn child_for_call(
        &self,
        run_id: i64,
        step: u32,
        call_id: String,
    ) -> Result<Option<ChildRun>> {
        self.call(move |s| s.child_for_call(run_id, step, &call_id))
            .await
    }

    /// [`Store::record_spawn_reply`].
    pub async fn record_spawn_reply(&self, run_id: i64, step: u32, reply: String) -> Result<()> {
        self.call(move |s| s.record_spawn_reply(run_id, step, &reply))
            .await
    }

    /// [`Store::spawn_reply`].
    pub async fn spawn_reply(&self, run_id: i64, step: u32) -> Result<Option<String>> {
        self.call(move |s| s.spawn_reply(run_id, step)).await
    }

    /// [`Store::steps`].
    pub async fn steps(&self, run_id: i64) -> Result<Vec<StepRecord>> {
        self.call(move |s| s.steps(run_id)).await
    }

    /// [`Store::commit_step`].
    pub async fn commit_step(&self, step: StepRecord) -> Result<()> {
        self.call(move |s| s.commit_step(&step)).await
    }

    /// [`Store::journal`].
    pub async fn journal(&self, run_id: i64) -> Result<Vec<ToolIntentRecord>> {
        self.call(move |s| s.journal(run_id)).await
    }

    /// [`Store::journal_intent`].
    pub async fn journal_intent(&self, intent: ToolIntent) -> Result<i64> {
        self.call(move |s| s.journal_intent(&intent)).await
    }

    /// [`Store::journal_complete`]; a failure is noted on the handle for the intent's
    /// run (see the module docs).
    pub async fn journal_complete(
        &self,
        id: i64,
        ok: bool,
        effects_json: String,
        output: String,
    ) -> Result<()> {
        self.call(move |s| {
            s.journal_complete(id, ok, &effects_json, &output)
                .inspect_err(|e| s.note_lost(s.intent_run(id), "journal completion", e))
        })
        .await
    }

    /// [`Store::journal_discard`].
    pub async fn journal_discard(&self, id: i64) -> Result<()> {
        self.call(move |s| s.journal_discard(id)).await
    }

    /// [`Store::journal_uncertain`].
    pub async fn journal_uncertain(&self, id: i64) -> Result<()> {
        self.call(move |s| s.journal_uncertain(id)).await
    }

    /// [`Store::record_reply`].
    pub async fn record_reply(&self, run_id: i64, step: u32, reply: StoredReply) -> Result<()> {
        self.call(move |s| s.record_reply(run_id, step, &reply))
            .await
    }

    /// [`Store::reply`].
    pub async fn reply(&self, run_id: i64, step: u32) -> Result<Option<StoredReply>> {
        self.call(move |s| s.reply(run_id, step)).await
    }

    /// [`Store::journal_uncertain`] for each id, in order: a failed one is noted (see
    /// the module docs) and the rest are still written.
    pub async fn mark_uncertain(&self, ids: Vec<i64>) {
        if ids.is_empty() {
            return;
        }
        self.best_effort(None, "journal mark", move |s| {
            for id in ids {
                if let Err(e) = s.journal_uncertain(id) {
                    s.note_lost(s.intent_run(id), "journal mark", &e);
                }
            }
            Ok(())
        })
        .await;
    }

    /// Runs a batch of record writes that notes its own failures; a failure of the call
    /// itself (the runtime shutting down) is noted for `run_id`.
    async fn best_effort<F>(&self, run_id: Option<i64>, what: &'static str, f: F)
    where
        F: FnOnce(&Store) -> Result<()> + Send + 'static,
    {
        if let Err(e) = self.call(f).await {
            self.store.note_lost(run_id, what, &e);
        }
    }

    /// Runs one record write, noting its failure for `run_id` before returning it.
    async fn noted<T, F>(&self, run_id: Option<i64>, what: &'static str, f: F) -> Result<T>
    where
        T: Send + 'static,
        F: FnOnce(&Store) -> Result<T> + Send + 'static,
    {
        self.call(f)
            .await
            .inspect_err(|e| self.store.note_lost(run_id, what, e))
    }

    /// [`Store::approvals`].
    pub async fn approvals(&self, run_id: i64) -> Result<Vec<ApprovalRecord>> {
        self.call(move |s| s.approvals(run_id)).await
    }

    /// [`Store::record_approval_request`], noted on failure (the run ends awaiting a
    /// request that must be on record to be answered).
    pub async fn record_approval_request(&self, a: ApprovalRecord) -> Result<()> {
        self.noted(Some(a.run_id), "approval request", move |s| {
            s.record_approval_request(&a)
        })
        .await
    }

    /// [`Store::memory_list`].
    pub async fn memory_list(&self, workspace: String) -> Result<Vec<MemoryNote>> {
        self.call(move |s| s.memory_list(&workspace)).await
    }

    /// [`Store::memory_touch`].
    pub async fn memory_touch(&self, workspace: String, keys: Vec<String>) -> Result<()> {
        self.call(move |s| s.memory_touch(&workspace, &keys)).await
    }

    /// [`Store::record_context_events`], noted on failure (see the module docs).
    pub async fn record_context_events(&self, events: Vec<ContextEvent>) -> Result<()> {
        let run_id = events.first().map(|e| e.run_id);
        self.noted(run_id, "context event", move |s| {
            s.record_context_events(&events)
        })
        .await
    }

    /// [`Store::record_policy_event`] for each event, in order, as one call. A failed
    /// event is noted on the handle (the run's next commit refuses, see the module
    /// docs) and the rest are still written. Nothing to write costs no call.
    pub async fn record_policy_events(&self, events: Vec<PolicyEvent>) {
        if events.is_empty() {
            return;
        }
        let run_id = events.first().map(|e| e.run_id);
        self.best_effort(run_id, "policy event", move |s| {
            for e in &events {
                if let Err(err) = s.record_policy_event(e) {
                    s.note_lost(Some(e.run_id), "policy event", &err);
                }
            }
            Ok(())
        })
        .await;
    }

    /// [`Store::record_provider_attempt`] for each attempt, noted on failure as
    /// [`AsyncStore::record_policy_events`].
    pub async fn record_provider_attempts(&self, attempts: Vec<ProviderAttempt>) {
        if attempts.is_empty() {
            return;
        }
        let run_id = attempts.first().map(|a| a.run_id);
        self.best_effort(run_id, "provider attempt", move |s| {
            for a in &attempts {
                if let Err(err) = s.record_provider_attempt(a) {
                    s.note_lost(Some(a.run_id), "provider attempt", &err);
                }
            }
            Ok(())
        })
        .await;
    }

    /// [`Store::record_sandbox_event`] for each event, noted on failure as
    /// [`AsyncStore::record_policy_events`].
    pub async fn record_sandbox_events(&self, events: Vec<SandboxEvent>) {
        if events.is_empty() {
            return;
        }
        let run_id = events.first().map(|e| e.run_id);
        self.best_effort(run_id, "sandbox event", move |s| {
            for e in &events {
                if let Err(err) = s.record_sandbox_event(e) {
                    s.note_lost(Some(e.run_id), "sandbox event", &err);
                }
            }
            Ok(())
        })
        .await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn calls_reach_the_same_database_as_the_sync_handle() {
        let store = Store::memory().unwrap();
        let db = AsyncStore::new(store.clone());
        let id = store.start_run("goal", "/tmp").unwrap();
        assert!(db.run(id).await.unwrap().is_some());
        assert!(db.steps(id).await.unwrap().is_empty());
    }

    #[test]
    fn outside_a_runtime_a_call_runs_inline() {
        let store = Store::memory().unwrap();
        let db = AsyncStore::new(store.clone());
        let id = store.start_run("goal", "/tmp").unwrap();
        let found = futures_util::FutureExt::now_or_never(db.run(id));
        assert!(matches!(found, Some(Ok(Some(_)))));
    }
}
