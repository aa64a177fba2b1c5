//! `io-harness run <task.toml>` (the main job) and `io-harness run --goal … --verify …`
//! (a run without a task file). Both resolve the layered configuration — flags,
//! environment, task file, project and user config, defaults — and store every
//! resolved value with its source.

use io_harness::TaskContract;

use super::layered::{self, GoalRun, Inputs};
use super::{CliError, RunArgs, drive, store_path};

pub async fn execute(args: RunArgs) -> Result<i32, CliError> {
    let goal_run = args.goal.as_deref().map(|goal| GoalRun {
        goal,
        verify: args.verify.as_deref().unwrap_or_default(),
        root: args.root.as_deref(),
    });
    let is_goal_run = goal_run.is_some();
    let resolved = layered::resolve(&Inputs {
        task: args.task.as_deref(),
        project: None,
        provider: &args.provider,
        budget: &args.budget,
        require_sandbox: args.require_sandbox,
        goal_run,
    })?;
    if let Some(task) = &args.task {
        // The up-front check of the verify program, with file:line:key (a plain load,
        // doctor --task and mcp list do not look at this host's PATH).
        TaskContract::from_file_to_run(task).map_err(|e| CliError::Usage(e.to_string()))?;
        say_default_root(task, &resolved.contract);
    }
    let contract = resolved.contract;
    let Some(spec) = contract.providers.first().cloned() else {
        return Err(CliError::Usage(
            "no provider: pass --provider, set IO_HARNESS_PROVIDER, or add a [provider] \
             section to the task file or the user config"
                .into(),
        ));
    };
    if is_goal_run {
        layered::require_cost_budget(&contract)?;
        // As for a task file (adversary P6: `--verify nosuchprog` ran the model first).
        contract
            .check_verify_program()
            .map_err(|e| CliError::Usage(format!("--verify: {e}")))?;
    }
    go(contract, &spec, &args, &resolved.settings).await
}

async fn go(
    contract: TaskContract,
    spec: &io_harness::contract::ProviderSpec,
    args: &RunArgs,
    settings: &[io_harness::config::Setting],
) -> Result<i32, CliError> {
    let chain = drive::chain(&contract, spec)?;
    let store = store_path::open(&args.store)?;
    let settings = layered::to_store(settings);
    let live = super::otel_live::start(args.otlp_endpoint.as_deref(), args.otlp_content, &store)?;
    drive::drive(
        &chain,
        &store,
        args.json,
        settings,
        args.keep,
        live,
        |provider, options| io_harness::run_with(&contract, provider, &store, options),
    )
    .await
}

/// A task file without `root` works on the directory it is in: said, since that is
/// a default an operator may not have meant.
fn say_default_root(task: &std::path::Path, contract: &TaskContract) {
    let has_root = std::fs::read_to_string(task)
        .ok()
        .and_then(|t| t.parse::<toml::Table>().ok())
        .is_some_and(|t| t.contains_key("root"));
    if !has_root {
        errln!(
            "note: {} sets no root; working on its directory {}",
            task.display(),
            contract.root.display()
        );
    }
}
