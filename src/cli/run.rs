//! `io-harness run <task.toml>`: the main job.

use std::sync::Arc;

use io_harness::TaskContract;
use io_harness::run::{CancelToken, RunOptions, RunResult};

use super::progress::Progress;
use super::{CliError, RunArgs, output, provider_args, store_path};

pub async fn execute(args: RunArgs) -> Result<i32, CliError> {
    let mut contract =
        TaskContract::from_file(&args.task).map_err(|e| CliError::Usage(e.to_string()))?;
    let spec = provider_args::merge(contract.providers.first(), &args.provider)?;
    let provider = provider_args::build(&spec, &contract.price_table())?;
    if contract.providers.is_empty() {
        contract.providers.push(spec);
    } else {
        contract.providers[0] = spec;
    }
    contract
        .validate()
        .map_err(|e| CliError::Usage(e.to_string()))?;
    let store = store_path::open(&args.store)?;
    let secrets = provider.secrets();
    let progress = Arc::new(Progress::new(args.json, secrets.clone()));
    let cancel = CancelToken::new();
    watch_ctrl_c(cancel.clone());
    let options = RunOptions::default()
        .observer(progress.clone())
        .cancel_token(cancel);
    let result = io_harness::run_with(&contract, provider.as_ref(), &store, options).await;
    progress.finish_line();
    let result = result?;
    report(&result, args.json, &secrets);
    Ok(result.outcome.exit_code())
}

/// Ctrl-C cancels the run at its next safe point; a second Ctrl-C exits at once.
pub fn watch_ctrl_c(cancel: CancelToken) {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
            eprintln!("\ncancelling (the run can be resumed); press Ctrl-C again to exit now");
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    });
}

/// Prints the result: a JSON object with `--json`, a summary otherwise.
pub fn report(r: &RunResult, json: bool, secrets: &[String]) {
    if json {
        let obj = serde_json::json!({ "result": r });
        println!("{}", output::redact(&obj.to_string(), secrets));
        return;
    }
    let c = |t: &str| output::clean(t, secrets);
    println!(
        "outcome: {}",
        serde_json::to_string(&r.outcome).unwrap_or_default()
    );
    println!(
        "run: {}   steps: {}   tokens: {} (in {}, out {}, cached {})   cost: {}",
        r.run_id,
        r.steps,
        r.total_tokens,
        r.input_tokens,
        r.output_tokens,
        r.cached_input_tokens,
        output::cost(r.cost_usd, r.cost_unknown_steps)
    );
    println!("workspace: {}", c(&r.work_dir));
    if !r.final_message.is_empty() {
        println!("\nfinal message:\n{}", c(&r.final_message));
    }
    if r.diff.is_empty() {
        println!("\n(no changes)");
    } else {
        println!("\ndiff:\n{}", c(&r.diff));
    }
    println!("trace: io-harness show {}", r.run_id);
}
