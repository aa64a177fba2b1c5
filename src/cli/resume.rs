//! `io-harness resume <run-id>`: continue from the last committed step with the stored
//! contract, its budgets and its provider (flags may point the provider elsewhere, for
//! instance a fresh key or a local server).

use super::{CliError, ResumeArgs, drive, provider_args, store_path};

pub async fn execute(args: ResumeArgs) -> Result<i32, CliError> {
    let store = store_path::open_existing(&args.store)?;
    let contract = io_harness::run::stored_contract(&store, args.run_id)?;
    let spec = provider_args::merge(contract.providers.first(), &args.provider)?;
    let chain = drive::chain(&contract, &spec)?;
    let live = super::otel_live::start(args.otlp_endpoint.as_deref(), args.otlp_content, &store)?;
    drive::drive(
        &chain,
        &store,
        args.json,
        Vec::new(),
        args.keep,
        live,
        |provider, options| {
            io_harness::run::resume_with(&store, args.run_id, provider, None, options)
        },
    )
    .await
}
