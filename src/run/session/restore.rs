//! A resumed session's conversation and counters, rebuilt from what the store kept:
//! the first message and every committed step's messages, the last commit's loop
//! state, the usage of the run and its sub-agents, and — for the step that was cut
//! off — the reply to replay and the journal of what its calls already did. The
//! temporary files that step's writes journaled are removed (only those names).

use super::journal::remove_journaled_temps;
use super::stored::StoredRun;
use super::{Carryover, Conversation, Progress, Replay};
use crate::context::ContextRunner;
use crate::contract::TaskContract;
use crate::provider::Message;
use crate::run::stall::{SeenCall, StallDetector};
use crate::run::{RunError, prompt};
use crate::store::{AsyncStore, StepRecord, ToolIntentRecord};
use crate::tools::Workspace;
use crate::untrusted::Boundary;

/// What a session continues with.
pub(super) struct Restored {
    pub conversation: Conversation,
    pub progress: Progress,
    pub carryover: Carryover,
}

/// Rebuilds a stored run's session state (see the module docs), marks the commands
/// the interruption cut off as uncertain, and sets the run running again.
pub(super) async fn restore(
    store: &AsyncStore,
    stored: StoredRun,
    contract: &TaskContract,
    ws: &Workspace,
    gate: &dyn crate::policy::PolicyGate,
    mut context: ContextRunner,
) -> Result<Restored, RunError> {
    let run_id = stored.rec.id;
    let (messages, boundary) = replayed_messages(&stored, contract, ws, gate)?;
    let mut state = stored.state()?;
    // The time an interrupted session spent after its last commit (kept by its
    // heartbeat) counts too: a resume continues the run's wall time, it does not
    // restart it at the last commit.
    state.elapsed_ms = state.elapsed_ms.max(stored.rec.elapsed_ms.unwrap_or(0));
    let committed = stored.committed();
    let next_step = committed + 1;
    let journal: Vec<ToolIntentRecord> = store
        .journal(run_id)
        .await?
        .into_iter()
        .filter(|j| j.intent.step == next_step)
        .collect();
    let replay = interrupted_reply(store, run_id, next_step).await?;
    // Children of committed steps count now; those of the interrupted step count when
    // the replayed step adopts them.
    let totals = stored
        .resumed_usage(store, next_step, replay.as_ref().map(|r| &r.reply))
        .await?;
    let removed = remove_journaled_temps(ws, &journal);
    if removed > 0 {
        tracing::info!(
            run_id,
            removed,
            "removed the temporary files of interrupted writes"
        );
    }
    let notes = uncertain_commands(store, &journal).await;
    // With the reply replayed, each cut-off call is answered in its own result.
    let notes = if replay.is_some() { Vec::new() } else { notes };
    let stall = stall_memory(&stored.steps);
    store.reopen_run(run_id).await?;
    let context = store
        .call(move |s| {
            context.restore(s, run_id, committed);
            Ok(context)
        })
        .await?;
    Ok(Restored {
        conversation: Conversation {
            system: prompt::system_prompt(),
            messages,
            context,
            boundary,
        },
        progress: Progress::starting(totals, state, stall),
        carryover: Carryover {
            journal,
            notes,
            replay,
        },
    })
}

/// The first message as the model was told it (rebuilt, for a run stored before it
/// was kept) and every committed step's messages after it.
fn replayed_messages(
    stored: &StoredRun,
    contract: &TaskContract,
    ws: &Workspace,
    gate: &dyn crate::policy::PolicyGate,
) -> Result<(Vec<Message>, Boundary), RunError> {
    let run_id = stored.rec.id;
    let mut messages: Vec<Message> = match stored.rec.initial_json.as_deref() {
        Some(json) => serde_json::from_str(json).map_err(|e| RunError::Corrupt {
            run_id,
            what: "initial messages",
            source: e,
        })?,
        None => {
            let boundary = Boundary::fresh().map_err(RunError::Random)?;
            vec![Message::user(
                prompt::first_message(contract, ws, gate, &[], &boundary).0,
            )]
        }
    };
    // The first message names the boundary; a run stored before frames had one gets a
    // fresh boundary for what it frames from now on.
    let boundary = match messages.first().map(Message::text) {
        Some(first) => Boundary::from_first_message(&first),
        None => None,
    };
    let boundary = match boundary {
        Some(b) => b,
        None => Boundary::fresh().map_err(RunError::Random)?,
    };
    for s in &stored.steps {
        let added: Vec<Message> =
            serde_json::from_str(&s.messages_json).map_err(|e| RunError::Corrupt {
                run_id,
                what: "step messages",
                source: e,
            })?;
        messages.extend(added);
    }
    Ok((messages, boundary))
}

/// The reply of the step that was cut off, when it is on record: kept as it arrived
/// (every step since the reply table exists), or by an approval that interrupted it
/// (once decided; a pending one refuses the resume), or by a spawn (the same reply
/// finds the same children).
async fn interrupted_reply(
    store: &AsyncStore,
    run_id: i64,
    next_step: u32,
) -> Result<Option<Replay>, RunError> {
    let kept = store.reply(run_id, next_step).await?;
    let mut replay = None;
    for a in store
        .approvals(run_id)
        .await?
        .into_iter()
        .filter(|a| a.step == next_step)
    {
        if a.status == "pending" {
            return Err(RunError::NotResumable {
                run_id,
                reason: format!(
                    "approval request {} is still pending: decide it with `io-harness approve {run_id} {} allow|deny`",
                    a.request_id, a.request_id
                ),
            });
        }
        replay = Some(replayed(
            run_id,
            &a.reply_json,
            "approval reply",
            "the approval record",
        )?);
    }
    if let Some(k) = kept {
        let mut r = replayed(run_id, &k.reply_json, "step reply", "")?;
        r.served_by = k.provider;
        r.model_ms = k.model_ms;
        return Ok(Some(r));
    }
    if replay.is_none()
        && let Some(json) = store.spawn_reply(run_id, next_step).await?
    {
        replay = Some(replayed(run_id, &json, "spawn reply", "the spawn record")?);
    }
    Ok(replay)
}

fn replayed(run_id: i64, json: &str, what: &'static str, from: &str) -> Result<Replay, RunError> {
    let reply = serde_json::from_str(json).map_err(|e| RunError::Corrupt {
        run_id,
        what,
        source: e,
    })?;
    Ok(Replay {
        reply,
        served_by: Some(format!("replayed from {from}")),
        model_ms: 0,
    })
}

/// Commands the crash cut off: nobody can say what they did. Each is marked uncertain
/// in the journal (best effort) and gets a note for the model.
async fn uncertain_commands(store: &AsyncStore, journal: &[ToolIntentRecord]) -> Vec<String> {
    let cut_off: Vec<&ToolIntentRecord> = journal
        .iter()
        .filter(|j| j.status == "pending" && j.intent.actions_json.contains("\"exec\""))
        .collect();
    store
        .mark_uncertain(cut_off.iter().map(|j| j.id).collect())
        .await;
    cut_off
        .iter()
        .map(|j| {
            format!(
                "Note: the previous session was interrupted while `{}` ran ({}). Whatever it did before the \
                 interruption is in the workspace, but its result is unknown: check the state you depend on \
                 before relying on it.",
                j.intent.tool, j.intent.input_json
            )
        })
        .collect()
}

/// The stall detector as it stood after the committed steps.
fn stall_memory(steps: &[StepRecord]) -> StallDetector {
    let mut stall = StallDetector::default();
    for s in steps {
        stall.remember(&SeenCall::all(&s.tool_calls));
    }
    stall
}
