//! `io-harness approve <run-id> <request-id> allow|deny [--reason R] [--remember]`:
//! answers a deferred approval request; `io-harness resume <run-id>` then continues
//! from exactly the action that asked.

use super::{ApproveArgs, CliError, store_path};

pub fn execute(args: ApproveArgs) -> Result<i32, CliError> {
    let allow = match args.decision.as_str() {
        "allow" => true,
        "deny" => false,
        other => {
            return Err(CliError::Usage(format!(
                "{other:?}: expected allow or deny"
            )));
        }
    };
    if allow && args.reason.is_some() {
        return Err(CliError::Usage("--reason goes with deny".into()));
    }
    let store = store_path::open(&args.store)?;
    store
        .decide_approval(
            args.run_id,
            &args.request_id,
            allow,
            args.reason.as_deref(),
            args.remember && allow,
        )
        .map_err(|e| match e {
            io_harness::store::StoreError::NoSuchApproval { .. } => CliError::Usage(e.to_string()),
            other => CliError::Failed(other.to_string()),
        })?;
    println!(
        "request {} of run {} {}; continue with: io-harness resume {}",
        args.request_id,
        args.run_id,
        if allow { "allowed" } else { "denied" },
        args.run_id
    );
    Ok(0)
}
