//! `io-harness runs`: the runs in the store, newest first.

use super::{CliError, ListArgs, output, store_path};

pub fn execute(args: ListArgs) -> Result<i32, CliError> {
    let store = store_path::open(&args.store)?;
    let runs = store.runs()?;
    if args.json {
        println!(
            "{}",
            serde_json::to_string(&runs).map_err(|e| CliError::Failed(e.to_string()))?
        );
        return Ok(0);
    }
    if runs.is_empty() {
        println!("no runs yet");
        return Ok(0);
    }
    println!(
        "{:>5}  {:<22}  {:>5}  {:>8}  {:>10}  {:<20}  goal",
        "id", "outcome", "steps", "tokens", "cost", "started"
    );
    for r in runs {
        let outcome = r.outcome.clone().unwrap_or_else(|| r.status.clone());
        let total = r.input_tokens + r.output_tokens + r.cached_input_tokens;
        let goal: String = output::sanitize(&r.goal).chars().take(60).collect();
        println!(
            "{:>5}  {:<22}  {:>5}  {:>8}  {:>10}  {:<20}  {}",
            r.id,
            outcome,
            r.steps,
            output::tokens(total),
            output::cost(r.cost_usd, r.cost_unknown_steps),
            format_ms(r.started_at_ms),
            goal
        );
    }
    Ok(0)
}

pub fn format_ms(ms: i64) -> String {
    let t =
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_seconds(t).to_string()
}
