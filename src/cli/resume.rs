//! `io-harness resume <run-id>`: continue from the last committed step with the stored
//! contract, its budgets and its provider (flags may point the provider elsewhere, for
//! instance a fresh key or a local server).

use std::sync::Arc;

use io_harness::run::{CancelToken, RunOptions};

use super::progress::Progress;
use super::run::{report, watch_ctrl_c};
use super::{CliError, ResumeArgs, provider_args, store_path};

pub async fn execute(args: ResumeArgs) -> Result<i32, CliError> {
    let store = store_path::open(&args.store)?;
    let contract = io_harness::run::stored_contract(&store, args.run_id)?;
    let spec = provider_args::merge(contract.providers.first(), &args.provider)?;
    let provider = provider_args::build(&spec, &contract.price_table())?;
    let secrets = provider.secrets();
    let progress = Arc::new(Progress::new(args.json, secrets.clone()));
    let cancel = CancelToken::new();
    watch_ctrl_c(cancel.clone());
    let options = RunOptions::default()
        .observer(progress.clone())
        .cancel_token(cancel);
    let result =
        io_harness::run::resume_with(&store, args.run_id, provider.as_ref(), None, options).await;
    progress.finish_line();
    let result = result?;
    report(&result, args.json, &secrets);
    Ok(result.outcome.exit_code())
}
