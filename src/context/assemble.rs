//! Assembly: the request actually sent, built from the full history under a budget.
//!
//! # What changes, and when
//!
//! Only tool results (and the content of superseded `write_file` calls) are ever
//! changed; text blocks — the goal, constraints, instructions, memory notes,
//! verification failures, replan and resume notes, the model's own words — are sent
//! as they are, and no message is ever removed, so tool calls and results stay paired
//! and a replaying provider counts the same turns.
//!
//! Two rules hold on every turn, because breaking them sends wrong content:
//! - a read of a file that changed since (by an edit, or by a command) is never sent
//!   as it was: it is re-read through the policy (or, if the policy refuses or the
//!   file is gone, replaced by a stub saying so) when it is the latest read of the file
//!   or a later read still shows the file as it is, and stubbed otherwise;
//! - a `write_file` whose content was overwritten or edited since is stubbed.
//!
//! Everything else that saves tokens happens in *batches*, so the prompt cache keeps
//! the prefix between batches byte-identical. The state holds a *horizon* (a step):
//! observations known to be superseded when the horizon was set (an older read of a
//! file read or written again, an older run of the same command, a repeated search)
//! are one-line stubs naming what superseded them, and old ones larger than
//! 2,000 tokens are cut to head and tail with the cut stated; an observation superseded
//! later stays whole — its content is the same as its superseder's — until the next
//! batch. The horizon moves to the newest step when the request would exceed the
//! budget, or when a change to something shown whole is forced anyway (a superseded
//! read went stale, a write was overwritten: the cache breaks there regardless, so
//! everything else due is stubbed in the same break). If that is not enough for the
//! budget, whole old steps are left out (stubbed, oldest first, up to `drop_before`)
//! until the request is under half the budget — room for several turns before the
//! next batch. Once left out, an observation stays left out with the same text. The
//! newest step is never compacted.
//!
//! Assembly is a pure function of the history, the state (`horizon`, `drop_before`,
//! and a cap learnt from a context overflow) and what the files hold now, so the same
//! inputs give the same bytes and a resumed run, restoring the state from
//! `context_events`, sends what the interrupted one would have sent.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::ledger::{self, ObsKind, Observation};
use super::tokens::{self, Family};
use crate::provider::{CompletionRequest, ContentBlock, Message, Role};

/// What the harness found for a read when it looked at the file again.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Current {
    /// The file still shows what the observation shows.
    Same,
    /// It changed, and a later observation supersedes this one: stub it.
    Stale,
    /// It changed; read again through the policy, as the read tool shows it now.
    Reread(String),
    /// It changed, and the policy did not allow reading it again (the reason).
    Refused(String),
    /// It changed and cannot be read now: deleted, binary, too large (the error).
    Gone(String),
}

/// The assembler's memory between turns: where the compacted part of the history
/// ends. Kept with each `assembled` context event so a resume restores it.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextState {
    /// Observations of steps before this one are compacted.
    pub horizon: u32,
    /// Observations of steps before this one are left out (stubbed) to fit the budget.
    pub drop_before: u32,
    /// A budget learnt from a context-overflow error, tighter than the configured one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cap: Option<u64>,
}

/// What assembly did to one observation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Treatment {
    /// Replaced by a stub: superseded, or a stale read with a later read.
    Stubbed,
    /// A stale read replaced by the file's current content, read through the policy.
    Reread,
    /// A stale read the policy did not allow to read again (or that cannot be read):
    /// replaced by a stub saying so.
    RereadRefused,
    /// Cut to its head and tail, the cut stated.
    Trimmed,
    /// Left out (stubbed) to fit the budget.
    Dropped,
}

impl Treatment {
    /// The `context_events` kind this treatment is recorded as.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Stubbed => "stubbed",
            Self::Reread => "reread",
            Self::RereadRefused => "reread_refused",
            Self::Trimmed => "trimmed",
            Self::Dropped => "dropped",
        }
    }
}

/// One assembly decision, for the record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ContextDecision {
    /// Where the observation stands: (message, block) of the changed block.
    pub at: (usize, usize),
    /// The step whose call produced it.
    pub obs_step: u32,
    /// The tool.
    pub tool: String,
    /// Its target (path, command line, search).
    pub target: String,
    /// What was done.
    pub treatment: Treatment,
    /// Estimated tokens before and after.
    pub tokens_before: u64,
    /// Estimated tokens after.
    pub tokens_after: u64,
    /// The text sent in its place (stubs, cut notes), or the reason.
    pub note: String,
    /// SHA-256 of the text sent in its place, so a re-read of new content is told
    /// apart from the same re-read repeated.
    pub sent_hash: String,
}

/// The assembled request and what it took.
#[derive(Debug, Clone)]
pub struct Assembly {
    /// The request to send.
    pub request: CompletionRequest,
    /// Estimated input tokens of the full history.
    pub tokens_before: u64,
    /// Estimated input tokens of the request to send.
    pub tokens_after: u64,
    /// The budget applied, if any.
    pub budget: Option<u64>,
    /// Every observation sent other than whole.
    pub decisions: Vec<ContextDecision>,
    /// Whether this assembly moved the horizon (a batch).
    pub batched: bool,
    /// Whether the request is still over the budget after every compaction.
    pub over_budget: bool,
    /// The state after this assembly.
    pub state: ContextState,
}

/// What [`assemble`] works from.
pub struct Inputs<'a> {
    /// The request with the full history.
    pub full: &'a CompletionRequest,
    /// Tokenizer family for the estimate.
    pub family: Family,
    /// Input-token budget per request, if any.
    pub budget: Option<u64>,
    /// What each read observation's file holds now, by (message, block); a read
    /// missing here counts as [`Current::Same`].
    pub current: &'a BTreeMap<(usize, usize), Current>,
    /// A context overflow was reported for the last assembly: compact harder.
    pub harder: bool,
}

/// Old observations larger than this (tokens) are cut to head and tail.
const OLD_CAP: u64 = 2_000;
/// Any single observation larger than this share of the budget is cut.
const HUGE_SHARE: u64 = 4;
/// Cut limit without a budget.
const HUGE_DEFAULT: u64 = 16_000;
/// The smallest cut limit: a head and a tail worth reading.
const MIN_CAP: u64 = 200;

/// Assembles the request for one turn; see the module docs.
pub fn assemble(inp: &Inputs<'_>, state: ContextState) -> Assembly {
    let obs = ledger::observations(&inp.full.messages);
    let n = inp
        .full
        .messages
        .iter()
        .filter(|m| m.role == Role::Assistant)
        .count() as u32;
    let tokens_before = tokens::estimate_request(inp.full, inp.family);
    let mut st = state;
    let mut budget = match (inp.budget, st.cap) {
        (Some(b), Some(c)) => Some(b.min(c)),
        (b, c) => b.or(c),
    };
    let mut built = build(inp, &obs, &st, budget);
    let mut batched = false;
    if inp.harder {
        // The provider refused what the estimate said fits: aim well below it, and
        // keep that cap for the rest of the run.
        let target = (built.2 * 6 / 10).max(1);
        st.cap = Some(st.cap.map_or(target, |c| c.min(target)));
        budget = Some(budget.map_or(target, |b| b.min(target)));
    }
    let over = budget.is_some_and(|b| built.2 > b);
    if over || inp.harder || must_change(&obs, inp.current, &st) {
        batched = true;
        st.horizon = st.horizon.max(n);
        built = build(inp, &obs, &st, budget);
        // Over the budget: make room for several turns, not just this one, so the
        // next batch is several turns away.
        if let Some(b) = budget
            && (over || built.2 > b || inp.harder)
        {
            let low = b / 2;
            while built.2 > low && st.drop_before < st.horizon {
                st.drop_before += 1;
                built = build(inp, &obs, &st, budget);
            }
        }
    }
    let (request, decisions, tokens_after) = built;
    Assembly {
        request,
        tokens_before,
        tokens_after,
        budget,
        decisions,
        batched,
        over_budget: budget.is_some_and(|b| tokens_after > b),
        state: st,
    }
}

/// Whether this turn must change something already sent after the horizon — a read
/// gone stale that a later read supersedes, or a write whose content was overwritten —
/// so the cache breaks there anyway: then the batch happens now, and every other
/// superseded observation is stubbed in the same break instead of in later ones.
fn must_change(
    obs: &[Observation],
    current: &BTreeMap<(usize, usize), Current>,
    st: &ContextState,
) -> bool {
    obs.iter().any(|o| {
        let shown_whole = !settled(o, st.horizon) && o.turn >= st.drop_before;
        shown_whole
            && (matches!(current.get(&(o.msg, o.block)), Some(Current::Stale))
                || (o.kind == ObsKind::Write
                    && o.superseded_by.is_some_and(|(k, _)| k != ObsKind::Read)))
    })
}

/// Whether `o` was already known superseded when the horizon last moved: it is then
/// compacted, and stays so with the same bytes. One superseded later stays whole (its
/// content is the same as its superseder's) until the next batch.
fn settled(o: &Observation, horizon: u32) -> bool {
    o.superseded_by.is_some_and(|(_, t)| t <= horizon)
}

fn est(text: &str, family: Family) -> u64 {
    tokens::estimate_tool_result(text, family)
}

/// The request under state `st`: (request, decisions, estimated tokens).
fn build(
    inp: &Inputs<'_>,
    obs: &[Observation],
    st: &ContextState,
    budget: Option<u64>,
) -> (CompletionRequest, Vec<ContextDecision>, u64) {
    let huge = budget.map_or(HUGE_DEFAULT, |b| (b / HUGE_SHARE).max(MIN_CAP));
    let mut messages: Vec<Message> = inp.full.messages.clone();
    let mut decisions = Vec::new();
    for o in obs {
        let Some(ContentBlock::ToolResult { content, .. }) =
            inp.full.messages[o.msg].content.get(o.block)
        else {
            continue;
        };
        let old = o.turn < st.horizon;
        let dropped = old && o.turn < st.drop_before;
        let current = inp.current.get(&(o.msg, o.block)).unwrap_or(&Current::Same);
        let (mut treatment, mut text) = treat(o, content, current, st.horizon, dropped);
        if matches!(treatment, None | Some(Treatment::Reread)) {
            let shown = text.as_deref().unwrap_or(content);
            let cap = if old { OLD_CAP.min(huge) } else { huge };
            if est(shown, inp.family) > cap
                && let Some(cut) = trim(shown, cap, inp.family)
            {
                text = Some(cut);
                treatment = Some(treatment.unwrap_or(Treatment::Trimmed));
            }
        }
        if let (Some(t), Some(new)) = (treatment, text) {
            let before = est(content, inp.family);
            let after = est(&new, inp.family);
            // A stub longer than what it replaces saves nothing and costs the cache.
            let keeps = matches!(t, Treatment::Reread | Treatment::RereadRefused)
                || matches!(current, Current::Stale | Current::Gone(_));
            if keeps || after < before {
                if let Some(ContentBlock::ToolResult { content: c, .. }) =
                    messages[o.msg].content.get_mut(o.block)
                {
                    *c = new.clone();
                }
                decisions.push(ContextDecision {
                    at: (o.msg, o.block),
                    obs_step: o.turn,
                    tool: o.tool.clone(),
                    target: o.target.clone(),
                    treatment: t,
                    tokens_before: before,
                    tokens_after: after,
                    note: if t == Treatment::Reread {
                        "changed since this read; current content sent".into()
                    } else {
                        first_line(&new)
                    },
                    sent_hash: crate::digest::sha256_hex(new.as_bytes()),
                });
            }
        }
        stub_write_input(o, st.horizon, &mut messages, &mut decisions);
    }
    // The other fields one by one: `..inp.full.clone()` would copy the whole history
    // only to drop it.
    let request = CompletionRequest {
        model: inp.full.model.clone(),
        system: inp.full.system.clone(),
        tools: inp.full.tools.clone(),
        max_tokens: inp.full.max_tokens,
        thinking: inp.full.thinking,
        messages,
    };
    let tokens = tokens::estimate_request(&request, inp.family);
    (request, decisions, tokens)
}

fn first_line(s: &str) -> String {
    s.lines().next().unwrap_or("").to_string()
}

fn what(o: &Observation) -> String {
    match o.kind {
        ObsKind::Command => format!("{} `{}`", o.tool, o.target),
        ObsKind::Search => o.target.clone(),
        ObsKind::Other => o.tool.clone(),
        _ => format!("{} of {}", o.tool, o.target),
    }
}

/// The treatment of one tool result, and the text sent instead (`None`: whole).
fn treat(
    o: &Observation,
    content: &str,
    current: &Current,
    horizon: u32,
    dropped: bool,
) -> (Option<Treatment>, Option<String>) {
    // Known superseded at the last batch: stubbed since, with the same text.
    let compacted = settled(o, horizon);
    let superseded = |o: &Observation| {
        o.superseded_by.map(|(k, t)| {
            format!(
                "[{} at step {} — superseded by the {} at step {t}]",
                what(o),
                o.turn,
                k.noun()
            )
        })
    };
    let drop = || {
        (
            Some(Treatment::Dropped),
            // Short: a long run leaves out many, and the call above it says what it was.
            Some("[left out to fit the context budget]".to_string()),
        )
    };
    // Once left out, always left out with the same text (the cache keeps it).
    if dropped && !content.is_empty() {
        return drop();
    }
    match o.kind {
        ObsKind::Read => match current {
            Current::Same if compacted => (Some(Treatment::Stubbed), superseded(o)),
            Current::Same => (None, None),
            Current::Stale => (
                Some(Treatment::Stubbed),
                superseded(o).or_else(|| {
                    Some(format!(
                        "[{} at step {} — the file changed since]",
                        what(o),
                        o.turn
                    ))
                }),
            ),
            Current::Reread(_) if compacted => (Some(Treatment::Stubbed), superseded(o)),
            Current::Reread(now) => (
                Some(Treatment::Reread),
                Some(format!(
                    "[{} changed after this read at step {}; its current content:]\n{now}",
                    o.target, o.turn
                )),
            ),
            Current::Refused(why) => (
                Some(Treatment::RereadRefused),
                Some(format!(
                    "[{} at step {} — the file changed since, and reading it again was not allowed: {}]",
                    what(o),
                    o.turn,
                    first_line(why)
                )),
            ),
            Current::Gone(why) => (
                Some(Treatment::RereadRefused),
                Some(format!(
                    "[{} at step {} — the file changed since and cannot be read now: {}]",
                    what(o),
                    o.turn,
                    first_line(why)
                )),
            ),
        },
        ObsKind::Command | ObsKind::Search if compacted => {
            (Some(Treatment::Stubbed), superseded(o))
        }
        _ => (None, None),
    }
}

/// A `write_file` call whose content is obsolete: the file was written or edited
/// again (always: the content is stale), or read again (once settled by a batch).
fn stub_write_input(
    o: &Observation,
    horizon: u32,
    messages: &mut [Message],
    decisions: &mut Vec<ContextDecision>,
) {
    let (ObsKind::Write, Some((k, t)), Some((mi, bi))) = (o.kind, o.superseded_by, o.call_at)
    else {
        return;
    };
    if k == ObsKind::Read && !settled(o, horizon) {
        return;
    }
    let Some(ContentBlock::ToolUse { input, .. }) = messages[mi].content.get_mut(bi) else {
        return;
    };
    let Some(content) = input.get_mut("content") else {
        return;
    };
    let before = tokens::estimate_text(content.as_str().unwrap_or(""));
    let stub = format!(
        "[content of this write at step {} omitted — superseded by the {} at step {t}]",
        o.turn,
        k.noun()
    );
    let after = tokens::estimate_text(&stub);
    if after >= before && k == ObsKind::Read {
        return;
    }
    *content = serde_json::Value::String(stub.clone());
    decisions.push(ContextDecision {
        at: (mi, bi),
        obs_step: o.turn,
        tool: o.tool.clone(),
        target: o.target.clone(),
        treatment: Treatment::Stubbed,
        tokens_before: before,
        tokens_after: after,
        sent_hash: crate::digest::sha256_hex(stub.as_bytes()),
        note: stub,
    });
}

/// `text` cut to about `cap` tokens: its head and tail, with the cut stated between.
/// `None` when there is nothing worth cutting.
pub fn trim(text: &str, cap: u64, family: Family) -> Option<String> {
    let half = cap / 2;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let (head, tail, unit, cut_count) = if lines.len() >= 3 {
        let mut h = 0;
        let mut used = 0;
        while h < lines.len() {
            let t = est(lines[h], family);
            if used + t > half {
                break;
            }
            used += t;
            h += 1;
        }
        let mut tl = 0;
        used = 0;
        while tl < lines.len() - h {
            let t = est(lines[lines.len() - 1 - tl], family);
            if used + t > half {
                break;
            }
            used += t;
            tl += 1;
        }
        let cut = lines.len() - h - tl;
        if cut == 0 {
            return None;
        }
        (
            lines[..h].concat(),
            lines[lines.len() - tl..].concat(),
            "lines",
            cut,
        )
    } else {
        let chars: Vec<char> = text.chars().collect();
        let keep = usize::try_from(half * 3).unwrap_or(usize::MAX);
        if chars.len() <= keep * 2 {
            return None;
        }
        (
            chars[..keep].iter().collect(),
            chars[chars.len() - keep..].iter().collect(),
            "characters",
            chars.len() - keep * 2,
        )
    };
    let cut_text_tokens = est(text, family).saturating_sub(est(&head, family) + est(&tail, family));
    let mut out = head;
    if !out.ends_with('\n') && !out.is_empty() {
        out.push('\n');
    }
    out.push_str(&format!(
        "[… {cut_count} {unit} (about {cut_text_tokens} tokens) cut here to fit the context budget; \
         ask again for a narrower range to see them …]\n"
    ));
    out.push_str(&tail);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    use crate::context::test_messages::{call, result};

    fn big(tag: &str) -> String {
        (0..200)
            .map(|i| format!("{i:>6}\tline {i} of {tag} with some words in it\n"))
            .collect()
    }

    fn history() -> CompletionRequest {
        let mut msgs = vec![Message::user("Goal: do it\nConstraints: none")];
        for (i, f) in ["a", "b", "a", "c", "b", "a"].iter().enumerate() {
            let id = format!("r{i}");
            msgs.push(call(&id, "read_file", json!({"path": f})));
            msgs.push(result(&id, &big(f)));
        }
        msgs.push(Message::user("verification failed: command cargo test"));
        CompletionRequest::new("m", msgs)
    }

    fn texts(r: &CompletionRequest) -> Vec<String> {
        r.messages
            .iter()
            .flat_map(|m| m.content.iter())
            .filter_map(|b| match b {
                ContentBlock::Text { text } => Some(text.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn without_pressure_nothing_changes_and_the_same_input_gives_the_same_bytes() {
        let full = history();
        let current = BTreeMap::new();
        let inp = Inputs {
            full: &full,
            family: Family::Openai,
            budget: None,
            current: &current,
            harder: false,
        };
        let a = assemble(&inp, ContextState::default());
        assert_eq!(a.request, full);
        assert!(a.decisions.is_empty());
        let b = assemble(&inp, ContextState::default());
        assert_eq!(
            serde_json::to_vec(&a.request).unwrap(),
            serde_json::to_vec(&b.request).unwrap()
        );
    }

    #[test]
    fn over_budget_a_batch_stubs_superseded_reads_and_keeps_texts() {
        // The same with the estimate and with the real encoder.
        for family in [Family::Openai, Family::O200k] {
            let full = history();
            let current = BTreeMap::new();
            let before = tokens::estimate_request(&full, family);
            let inp = Inputs {
                full: &full,
                family,
                budget: Some(before * 95 / 100),
                current: &current,
                harder: false,
            };
            let a = assemble(&inp, ContextState::default());
            assert!(a.batched);
            assert!(!a.over_budget, "{} > {:?}", a.tokens_after, a.budget);
            assert!(
                a.tokens_after <= before * 95 / 200,
                "room made down to half"
            );
            assert_eq!(a.state.horizon, 6);
            let stubs: Vec<_> = a
                .decisions
                .iter()
                .filter(|d| d.treatment == Treatment::Stubbed)
                .collect();
            assert_eq!(stubs.len(), 3, "{:?}", a.decisions);
            assert_eq!(
                stubs[0].note,
                "[read_file of a at step 1 — superseded by the read at step 3]"
            );
            assert_eq!(
                texts(&a.request),
                texts(&full),
                "text blocks are never touched"
            );
            assert_eq!(a.request.messages.len(), full.messages.len());
            // The next turn under the same state changes nothing already sent.
            let again = assemble(&inp, a.state);
            assert_eq!(again.request, a.request);
            assert!(!again.batched);
        }
    }

    #[test]
    fn a_stale_latest_read_is_replaced_by_the_re_read_and_an_older_one_stubbed() {
        let full = history();
        let mut current = BTreeMap::new();
        // Reads of `b` at steps 2 (superseded) and 5 (latest): the file changed.
        current.insert((4, 0), Current::Stale);
        current.insert((10, 0), Current::Reread("     1\tnew b\n".into()));
        let inp = Inputs {
            full: &full,
            family: Family::Openai,
            budget: None,
            current: &current,
            harder: false,
        };
        let a = assemble(&inp, ContextState::default());
        let body = serde_json::to_string(&a.request).unwrap();
        assert!(!body.contains("line 3 of b"), "stale content of b was sent");
        assert!(body.contains("new b"));
        assert!(body.contains("[read_file of b at step 2 — superseded by the read at step 5]"));
    }

    #[test]
    fn trimming_keeps_head_and_tail_and_states_the_cut() {
        let text = big("x");
        let cut = trim(&text, 300, Family::Openai).unwrap();
        assert!(cut.starts_with("     0\tline 0 of x"));
        assert!(
            cut.trim_end()
                .ends_with("line 199 of x with some words in it")
        );
        assert!(cut.contains("lines (about "), "{cut}");
        assert!(cut.contains("cut here to fit the context budget"));
        assert!(est(&cut, Family::Openai) < est(&text, Family::Openai) / 3);
        let one_line = "y".repeat(50_000);
        let cut = trim(&one_line, 300, Family::Openai).unwrap();
        assert!(cut.contains("characters (about"));
        assert!(trim("short", 300, Family::Openai).is_none());
    }

    #[test]
    fn harder_compaction_learns_a_cap_and_drops_old_steps() {
        let full = history();
        let current = BTreeMap::new();
        let inp = Inputs {
            full: &full,
            family: Family::Openai,
            budget: None,
            current: &current,
            harder: true,
        };
        let a = assemble(&inp, ContextState::default());
        assert!(a.batched);
        assert!(a.state.cap.is_some());
        assert!(a.tokens_after * 10 <= a.tokens_before * 6 + 10, "{a:?}");
        assert!(
            a.decisions
                .iter()
                .any(|d| matches!(d.treatment, Treatment::Dropped | Treatment::Trimmed))
        );
        assert!(
            texts(&a.request)
                .iter()
                .any(|t| t.contains("verification failed"))
        );
    }
}
