//! `io-harness memory <workspace> [list|forget KEY|clear]`: the notes earlier runs
//! saved for a workspace (keyed by its canonical path).

use clap::ValueEnum;

use super::{CliError, MemoryAction, MemoryArgs, output, store_path};

pub fn execute(args: MemoryArgs) -> Result<i32, CliError> {
    let ws = std::fs::canonicalize(&args.workspace)
        .map_err(|e| CliError::Usage(format!("{}: {e}", args.workspace.display())))?;
    let key = ws.display().to_string();
    let action = args.action.unwrap_or(MemoryAction::List);
    // The words are checked before the store is opened: a usage error names the usage.
    if matches!(
        (action, &args.key),
        (MemoryAction::List | MemoryAction::Clear, Some(_))
    ) {
        // `list KEY`, `clear KEY` (clap refuses `forget` without a KEY).
        let name = action
            .to_possible_value()
            .map(|v| v.get_name().to_string())
            .unwrap_or_default();
        let k = args.key.as_deref().unwrap_or_default();
        return Err(CliError::Usage(format!(
            "{name} {k}: expected list, forget KEY or clear"
        )));
    }
    let store = store_path::open_existing(&args.store)?;
    match (action, &args.key) {
        (MemoryAction::Forget, Some(k)) => {
            if !store.memory_delete(&key, k)? {
                return Err(CliError::Usage(format!("no note {k:?} for {key}")));
            }
            outln!("forgot {k:?}");
        }
        (MemoryAction::Clear, _) => outln!("cleared {} notes", store.memory_clear(&key)?),
        _ => list(&store, &key, args.json)?,
    }
    Ok(0)
}

/// The workspace's notes, as JSON or one a line.
fn list(store: &io_harness::Store, key: &str, json: bool) -> Result<(), CliError> {
    let notes = store.memory_list(key)?;
    if json {
        let v = serde_json::to_value(&notes).map_err(|e| CliError::Internal(e.to_string()))?;
        super::json_out::print(
            "memory",
            serde_json::json!({ "notes": v }),
            &Default::default(),
        );
    } else if notes.is_empty() {
        outln!("no notes for {key}");
    } else {
        for n in notes {
            let from = n.source_run.map_or("API".into(), |r| format!("run {r}"));
            outln!(
                "{}: {} ({from})",
                output::sanitize(&n.key),
                output::sanitize(&n.value)
            );
        }
    }
    Ok(())
}
