//! `io-harness memory <workspace> [list|forget KEY|clear]`: the notes earlier runs
//! saved for a workspace (keyed by its canonical path).

use super::{CliError, MemoryArgs, output, store_path};

pub fn execute(args: MemoryArgs) -> Result<i32, CliError> {
    let ws = std::fs::canonicalize(&args.workspace)
        .map_err(|e| CliError::Usage(format!("{}: {e}", args.workspace.display())))?;
    let key = ws.display().to_string();
    let store = store_path::open(&args.store)?;
    match args.action.as_slice() {
        [] => {
            let notes = store.memory_list(&key)?;
            if args.json {
                println!(
                    "{}",
                    serde_json::to_string(&notes).map_err(|e| CliError::Failed(e.to_string()))?
                );
            } else if notes.is_empty() {
                println!("no notes for {key}");
            } else {
                for n in notes {
                    let from = n.source_run.map_or("API".into(), |r| format!("run {r}"));
                    println!(
                        "{}: {} ({from})",
                        output::sanitize(&n.key),
                        output::sanitize(&n.value)
                    );
                }
            }
        }
        [a] if a == "list" => {
            return execute(MemoryArgs {
                action: Vec::new(),
                ..args
            });
        }
        [a, k] if a == "forget" => {
            if !store.memory_delete(&key, k)? {
                return Err(CliError::Usage(format!("no note {k:?} for {key}")));
            }
            println!("forgot {k:?}");
        }
        [a] if a == "clear" => println!("cleared {} notes", store.memory_clear(&key)?),
        other => {
            return Err(CliError::Usage(format!(
                "{}: expected list, forget KEY or clear",
                other.join(" ")
            )));
        }
    }
    Ok(0)
}
