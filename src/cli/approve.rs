//! `io-harness approve <run-id> <request-id> allow|deny [--reason R] [--remember | --remember-program]`:
//! answers a deferred approval request; `io-harness resume <run-id>` then continues
//! from exactly the action that asked.

use super::{ApprovalDecision, ApproveArgs, CliError, store_path};

pub fn execute(args: ApproveArgs) -> Result<i32, CliError> {
    let allow = args.decision == ApprovalDecision::Allow;
    if allow && args.reason.is_some() {
        return Err(CliError::Usage("--reason goes with deny".into()));
    }
    let store = store_path::open_existing(&args.store)?;
    // The request may belong to a sub-agent of the named run: its ask holds the tree.
    let owner = store
        .approval_in_tree(args.run_id, &args.request_id)
        .map_err(|e| CliError::Internal(e.to_string()))?
        .unwrap_or(args.run_id);
    let root = store.root_run(owner).unwrap_or(args.run_id);
    refuse_if_ended(&store, root)?;
    store
        .decide_approval(
            owner,
            &args.request_id,
            allow,
            args.reason.as_deref(),
            match (allow, args.remember, args.remember_program) {
                (true, _, true) => io_harness::policy::Remember::Program,
                (true, true, false) => io_harness::policy::Remember::Exact,
                _ => io_harness::policy::Remember::No,
            },
        )
        .map_err(|e| match e {
            io_harness::store::StoreError::NoSuchApproval { .. } => CliError::Usage(e.to_string()),
            other => CliError::Internal(other.to_string()),
        })?;
    let whose = if owner == args.run_id {
        format!("run {owner}")
    } else {
        format!("sub-agent run {owner} (in the tree of run {root})")
    };
    outln!(
        "request {} of {whose} {}; continue with: io-harness resume {root}",
        args.request_id,
        if allow { "allowed" } else { "denied" },
    );
    Ok(0)
}

/// A decision is only worth taking for a run that can continue: a run that ended
/// with an outcome resume refuses (the time budget ran out while it asked) keeps its
/// request on record as pending, and saying "continue with resume" would be false.
fn refuse_if_ended(store: &io_harness::Store, root: i64) -> Result<(), CliError> {
    let Some(rec) = store
        .run(root)
        .map_err(|e| CliError::Internal(e.to_string()))?
    else {
        return Ok(());
    };
    let ended: Option<io_harness::RunOutcome> = rec
        .outcome_json
        .as_deref()
        .filter(|_| rec.status == "finished")
        .and_then(|j| serde_json::from_str(j).ok());
    match ended {
        Some(o) if !o.is_resumable() => Err(CliError::Usage(format!(
            "run {root} ended with outcome {} and cannot be resumed; its request stays on record as pending",
            rec.outcome.as_deref().unwrap_or("unknown")
        ))),
        _ => Ok(()),
    }
}
