//! `io-harness run <task.toml>`: the main job.

use io_harness::TaskContract;

use super::{CliError, RunArgs, drive, provider_args, store_path};

pub async fn execute(args: RunArgs) -> Result<i32, CliError> {
    let mut contract =
        TaskContract::from_file(&args.task).map_err(|e| CliError::Usage(e.to_string()))?;
    say_default_root(&args.task, &contract);
    let spec = provider_args::merge(contract.providers.first(), &args.provider)?;
    // The loader validated the file; flags that change it are checked here, and the run
    // checks once more (a contract from code gets no other check).
    let flags_changed = contract.providers.first() != Some(&spec) || args.require_sandbox.is_some();
    if contract.providers.is_empty() {
        contract.providers.push(spec.clone());
    } else {
        contract.providers[0] = spec.clone();
    }
    if let Some(b) = args.require_sandbox {
        contract.sandbox.require = Some(b.label().to_string());
    }
    if flags_changed {
        contract
            .validate()
            .map_err(|e| CliError::Usage(e.to_string()))?;
    }
    let chain = drive::chain(&contract, &spec)?;
    let store = store_path::open(&args.store)?;
    let live = super::otel_live::start(args.otlp_endpoint.as_deref(), &store)?;
    drive::drive(&chain, &store, args.json, live, |provider, options| {
        io_harness::run_with(&contract, provider, &store, options)
    })
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
