//! Budget-aware context assembly (C16): the request each turn sends is built from the
//! full history — which stays the durable record — under a token budget.
//!
//! - [`ledger`]: every tool result as an observation with a kind and a target, and
//!   what supersedes it;
//! - [`assemble`]: stubs, re-reads, cuts and batches (see its module docs for the
//!   rules and why they keep the prompt cache);
//! - [`tokens`]: exact counts for OpenAI models (`tiktoken-rs`), the calibrated
//!   estimate for the rest, and known context windows.
//!
//! [`ContextRunner`] is what the run loop holds: the settings, the state between turns,
//! the re-reads through the policy, and the rows for `context_events`.

pub mod assemble;
mod fresh;
pub mod ledger;
pub mod tokens;

/// A tool call and its result, as the ledger and the assembler tests write histories.
#[cfg(test)]
pub(crate) mod test_messages;

use std::collections::{BTreeMap, BTreeSet};

pub use assemble::{Assembly, ContextDecision, ContextState, Current, Treatment};
pub use tokens::Family;

use crate::policy::{Decision, PolicyDecision, PolicyGate};
use crate::provider::{CompletionRequest, ContentBlock, ProviderIdentity, Usage};
use crate::store::{ContextEvent, Store};
use crate::tools::{ReadFile, Tool, ToolContext, ToolRegistry};

pub use crate::contract::ContextSettings;

/// Headroom kept below a known context window besides the output cap (the estimate's
/// error, framing the estimate does not see).
const WINDOW_MARGIN_PCT: u64 = 10;

/// The assembler as the run loop holds it.
pub struct ContextRunner {
    settings: ContextSettings,
    family: Family,
    budget: Option<u64>,
    state: ContextState,
    /// Decisions already recorded, so each is recorded when it first appears.
    seen: BTreeSet<(usize, usize, Treatment, String)>,
    /// Re-reads already done, by (read arguments, what the file shows now), so an
    /// unchanged file is not read through the policy again every turn.
    reread: BTreeMap<String, (String, Current)>,
    /// What each read's file showed when last read, by its stamp: an unchanged file is
    /// not read again every turn.
    fresh: fresh::FreshReads,
}

impl ContextRunner {
    /// The runner for `settings`, answering with `provider` capped at `max_output`
    /// output tokens per turn.
    pub fn new(settings: &ContextSettings, provider: &ProviderIdentity, max_output: u32) -> Self {
        let window = tokens::context_window(&provider.model).map(|w| {
            w.saturating_sub(u64::from(max_output))
                .saturating_mul(100 - WINDOW_MARGIN_PCT)
                / 100
        });
        let budget = match (settings.max_tokens, window) {
            (Some(m), Some(w)) => Some(m.min(w)),
            (m, w) => m.or(w),
        };
        let family = Family::counting(&provider.kind, &provider.model, settings.tokens);
        tokens::warm(family);
        Self {
            settings: settings.clone(),
            family,
            budget,
            state: ContextState::default(),
            seen: BTreeSet::new(),
            reread: BTreeMap::new(),
            fresh: fresh::FreshReads::default(),
        }
    }

    /// The token counter of this run (exact or estimated), for the harness's own
    /// count of each call.
    pub fn family(&self) -> Family {
        self.family
    }

    /// The budget applied per request.
    pub fn budget(&self) -> Option<u64> {
        self.budget
    }

    /// Restores the state the last committed step left (its last `assembled` event), so
    /// a resumed run assembles exactly as the interrupted one would have.
    pub fn restore(&mut self, store: &Store, run_id: i64, committed: u32) {
        let Ok(events) = store.context_events(run_id) else {
            return;
        };
        if let Some(st) = events
            .iter()
            .rev()
            .filter(|e| e.kind == "assembled" && e.step <= committed)
            .find_map(|e| e.state_json.as_deref())
            .and_then(|j| serde_json::from_str(j).ok())
        {
            self.state = st;
        }
    }

    /// Assembles the request for a turn from `full`. Files shown by read observations
    /// are compared with what they hold now; a changed one that is still the latest
    /// read of its file is read again through `tools`' `read_file` under `gate` (the
    /// policy decisions taken are returned, to be recorded). `harder` compacts further
    /// after a context overflow.
    pub async fn prepare(
        &mut self,
        full: &CompletionRequest,
        tools: &ToolRegistry,
        ctx: &ToolContext,
        gate: &dyn PolicyGate,
        harder: bool,
    ) -> (Assembly, Vec<PolicyDecision>) {
        let mut decisions = Vec::new();
        if !self.settings.assemble {
            let t = tokens::estimate_request(full, self.family);
            let a = Assembly {
                request: full.clone(),
                tokens_before: t,
                tokens_after: t,
                budget: self.budget,
                decisions: Vec::new(),
                batched: false,
                over_budget: self.budget.is_some_and(|b| t > b),
                state: self.state,
            };
            return (a, decisions);
        }
        let current = self.currents(full, tools, ctx, gate, &mut decisions).await;
        let a = assemble::assemble(
            &assemble::Inputs {
                full,
                family: self.family,
                budget: self.budget,
                current: &current,
                harder,
            },
            self.state,
        );
        self.state = a.state;
        (a, decisions)
    }

    /// Whether a context overflow can be answered by compacting harder.
    pub fn can_compact(&self) -> bool {
        self.settings.assemble
    }

    async fn currents(
        &mut self,
        full: &CompletionRequest,
        tools: &ToolRegistry,
        ctx: &ToolContext,
        gate: &dyn PolicyGate,
        decisions: &mut Vec<PolicyDecision>,
    ) -> BTreeMap<(usize, usize), Current> {
        let standard;
        let tools = if tools.get("read_file").is_some() {
            tools
        } else {
            standard = ToolRegistry::standard();
            &standard
        };
        let mut now_of: BTreeMap<String, Result<String, String>> = BTreeMap::new();
        let mut out = BTreeMap::new();
        let obs = ledger::observations(&full.messages);
        let shown = |o: &ledger::Observation| match full.messages[o.msg].content.get(o.block) {
            Some(ContentBlock::ToolResult { content, .. }) => Some(content.as_str()),
            _ => None,
        };
        for (i, o) in obs.iter().enumerate() {
            // A left-out step's reads are stubbed whatever their files hold now.
            if o.kind != ledger::ObsKind::Read || o.turn < self.state.drop_before {
                continue;
            }
            let Some(content) = shown(o) else {
                continue;
            };
            let key = o.input.to_string();
            if !now_of.contains_key(&key) {
                let now = self.now_shows(ctx, &key, &o.input).await;
                now_of.insert(key.clone(), now);
            }
            let now = &now_of[&key];
            if now.as_deref() == Ok(content) {
                continue;
            }
            if o.superseded_by.is_some() {
                // Superseded by a later read that still shows the file as it is: this
                // one, re-read when it went stale, shows the same current content, so
                // it is not stale and its bytes need not change (the cache keeps them).
                // Otherwise nothing current is shown here: stub it.
                let superseder = obs[i + 1..].iter().find(|l| {
                    l.target == o.target
                        && matches!(l.kind, ledger::ObsKind::Read | ledger::ObsKind::Write)
                });
                let current_later = superseder.is_some_and(|l| {
                    l.kind == ledger::ObsKind::Read
                        && l.input == o.input
                        && shown(l).is_some_and(|c| now.as_deref() == Ok(c))
                });
                if !current_later {
                    out.insert((o.msg, o.block), Current::Stale);
                    continue;
                }
            }
            let shown_now = match now {
                Ok(s) => s.clone(),
                Err(e) => format!("error: {e}"),
            };
            if let Some((seen_now, c)) = self.reread.get(&key)
                && *seen_now == shown_now
            {
                out.insert((o.msg, o.block), c.clone());
                continue;
            }
            let d = tools.dispatch(ctx, gate, "read_file", &o.input).await;
            let refused = d.decisions.iter().any(|p| p.decision != Decision::Allow);
            decisions.extend(d.decisions);
            let c = if !d.is_error {
                Current::Reread(d.content)
            } else if refused {
                Current::Refused(d.content)
            } else {
                Current::Gone(d.content)
            };
            self.reread.insert(key, (shown_now, c.clone()));
            out.insert((o.msg, o.block), c);
        }
        out
    }

    /// What read `input` shows now: the last rendering when its file is known
    /// unchanged, else read again. The harness's own comparison: nothing read here
    /// reaches the model unless the policy allows it.
    async fn now_shows(
        &mut self,
        ctx: &ToolContext,
        key: &str,
        input: &serde_json::Value,
    ) -> Result<String, String> {
        let root = ctx.workspace.root().to_path_buf();
        let rel = input.get("path").and_then(|p| p.as_str()).unwrap_or("");
        if let Some(shown) = self.fresh.unchanged(key, &root, rel) {
            return shown.clone();
        }
        let stamp = fresh::FreshReads::stamp_before(&root, rel);
        let now = ReadFile
            .call(ctx, input)
            .await
            .map(|r| crate::tools::bound_text(r.content, ctx.limits.max_output_bytes))
            .map_err(|e| e.to_string());
        if let Some(stamp) = stamp {
            self.fresh.keep(key.to_string(), rel, stamp, now.clone());
        }
        now
    }

    /// The context events of one assembly for `step`: the `assembled` row (with the
    /// reported usage when the call succeeded) and a row per decision not recorded
    /// before.
    pub fn events(
        &mut self,
        run_id: i64,
        step: u32,
        a: &Assembly,
        usage: Option<&Usage>,
    ) -> Vec<ContextEvent> {
        let count = |t: Treatment| a.decisions.iter().filter(|d| d.treatment == t).count();
        let summary = serde_json::json!({
            "batched": a.batched,
            "over_budget": a.over_budget,
            "stubbed": count(Treatment::Stubbed),
            "reread": count(Treatment::Reread),
            "reread_refused": count(Treatment::RereadRefused),
            "trimmed": count(Treatment::Trimmed),
            "dropped": count(Treatment::Dropped),
            "assemble": self.settings.assemble,
        });
        let mut out = vec![ContextEvent {
            run_id,
            step,
            kind: "assembled".into(),
            tokens_before: Some(a.tokens_before),
            tokens_after: Some(a.tokens_after),
            budget: a.budget,
            reported_input_tokens: usage.and_then(Usage::reported_input),
            cached_input_tokens: usage.and_then(|u| u.cached_input_tokens),
            cache_write_tokens: usage.and_then(|u| u.cache_write_tokens),
            state_json: serde_json::to_string(&a.state).ok(),
            detail: Some(summary.to_string()),
            request: serde_json::to_vec(&a.request).ok(),
            ..ContextEvent::default()
        }];
        for d in &a.decisions {
            let key = (d.at.0, d.at.1, d.treatment, d.sent_hash.clone());
            if !self.seen.insert(key) {
                continue;
            }
            out.push(ContextEvent {
                run_id,
                step,
                kind: d.treatment.as_str().into(),
                obs_step: Some(d.obs_step),
                tool: Some(d.tool.clone()),
                target: Some(d.target.clone()),
                tokens_before: Some(d.tokens_before),
                tokens_after: Some(d.tokens_after),
                detail: Some(d.note.clone()),
                ..ContextEvent::default()
            });
        }
        out
    }

    /// The row that says a context overflow is answered by assembling again, harder.
    pub fn overflow_event(run_id: i64, step: u32, a: &Assembly) -> ContextEvent {
        ContextEvent {
            run_id,
            step,
            kind: "overflow_retry".into(),
            tokens_after: Some(a.tokens_after),
            budget: a.budget,
            detail: Some(
                "the provider reported a context overflow; compacting harder and retrying once"
                    .into(),
            ),
            ..ContextEvent::default()
        }
    }
}
