//! What `run` and `resume` share: build the provider chain, watch Ctrl-C, show
//! progress, drive the library call, print the result.

use std::future::Future;
use std::sync::Arc;

use io_harness::TaskContract;
use io_harness::contract::ProviderSpec;
use io_harness::provider::Provider;
use io_harness::run::{CancelToken, RunError, RunOptions, RunResult};

use io_harness::redact::Redactor;

use super::progress::Progress;
use super::{CliError, output, provider_args};

/// The primary provider (already resolved into `spec`) and the contract's fallbacks.
pub struct Chain {
    pub primary: Box<dyn Provider>,
    pub fallbacks: Vec<Arc<dyn Provider>>,
    /// The credentials of every provider in the chain, cleaned from what is printed.
    pub secrets: Redactor,
}

pub fn chain(contract: &TaskContract, spec: &ProviderSpec) -> Result<Chain, CliError> {
    let primary = provider_args::build(spec, &contract.price_table())?;
    let fallbacks = provider_args::build_fallbacks(contract)?;
    let mut secrets = primary.secrets();
    secrets.extend(fallbacks.iter().flat_map(|p| p.secrets()));
    Ok(Chain {
        primary,
        fallbacks,
        secrets: Redactor::default().with(&secrets),
    })
}

/// Runs `call` with progress, Ctrl-C handling and the fallbacks in its options, then
/// reports. `settings` (the resolved configuration of a new run) are stored with the
/// run as soon as it has an id. A successful run's workspace copy is removed unless
/// `keep`. Returns the exit code of the outcome.
pub async fn drive<'a, F, Fut>(
    chain: &'a Chain,
    store: &io_harness::Store,
    json: bool,
    settings: Vec<io_harness::store::RunSetting>,
    keep: bool,
    live: Option<super::otel_live::Live>,
    call: F,
) -> Result<i32, CliError>
where
    F: FnOnce(&'a dyn Provider, RunOptions) -> Fut,
    Fut: Future<Output = Result<RunResult, RunError>>,
{
    let progress = Arc::new(Progress::new(json, chain.secrets.clone()));
    let cancel = CancelToken::new();
    watch_ctrl_c(cancel.clone());
    let shown: Arc<dyn io_harness::run::Observer> = match &live {
        Some(l) => Arc::new(super::otel_live::Tee {
            inner: progress.clone(),
            live: l.clone(),
        }),
        None => progress.clone(),
    };
    let observer: Arc<dyn io_harness::run::Observer> = if settings.is_empty() {
        shown
    } else {
        Arc::new(super::settings_observer::RecordSettings::new(
            shown,
            store.clone(),
            settings,
        ))
    };
    let mut options = RunOptions::default()
        .observer(observer)
        .cancel_token(cancel);
    options.fallbacks = chain.fallbacks.clone();
    if let Some(t) = super::prompt::TerminalApprover::if_interactive(json) {
        options.approver = Some(Arc::new(t));
    }
    let result = call(chain.primary.as_ref(), options).await;
    progress.finish_line();
    if let (Some(l), Ok(r)) = (&live, &result) {
        super::otel_live::finish(l, store, r.run_id).await;
    }
    let result = result?;
    let failure = last_provider_error(store, &result);
    let copy = super::keep::settle(store, result.run_id, &result.outcome, keep);
    report(
        &result,
        failure.as_ref(),
        json,
        &chain.secrets,
        copy.as_deref(),
    );
    if !json {
        print_pending_action(store, &result, &chain.secrets);
    }
    warn_audit_failures(store, result.run_id);
    Ok(result.outcome.exit_code())
}

/// Says once, at the end, that the audit log missed sessions of the run (SPEC C18: the
/// log never fails a run, so this is a warning; `show` gives the count too).
fn warn_audit_failures(store: &io_harness::Store, run_id: i64) {
    if let Ok(Some(r)) = store.run(run_id)
        && r.audit_failures > 0
    {
        let dir = io_harness::audit::default_dir()
            .map(|d| d.display().to_string())
            .unwrap_or_else(|| "the audit log".into());
        errln!(
            "warning: {} sandbox session(s) of run {run_id} could not be appended to {dir}",
            r.audit_failures
        );
    }
}

/// Ctrl-C cancels the run: every wait ends at once (a running command is stopped) and
/// the run ends `Cancelled`, exit 130, resumable; a second Ctrl-C exits at once.
#[cfg(unix)]
pub(super) fn watch_ctrl_c(cancel: CancelToken) {
    // The handler is installed here, before the run starts, not when a spawned task is
    // first polled: a Ctrl-C in the first milliseconds must cancel, not kill.
    let Ok(mut interrupts) =
        tokio::signal::unix::signal(tokio::signal::unix::SignalKind::interrupt())
    else {
        return;
    };
    tokio::spawn(async move {
        if interrupts.recv().await.is_some() {
            cancel.cancel();
            errln!("\ncancelling (the run can be resumed); press Ctrl-C again to exit now");
            if interrupts.recv().await.is_some() {
                std::process::exit(130);
            }
        }
    });
}

/// Ctrl-C cancels the run: every wait ends at once (a running command is stopped) and
/// the run ends `Cancelled`, exit 130, resumable; a second Ctrl-C exits at once.
#[cfg(not(unix))]
pub(super) fn watch_ctrl_c(cancel: CancelToken) {
    tokio::spawn(async move {
        if tokio::signal::ctrl_c().await.is_ok() {
            cancel.cancel();
            if tokio::signal::ctrl_c().await.is_ok() {
                std::process::exit(130);
            }
        }
    });
}

/// The failure an escalated run ended on, as the store has it.
fn last_provider_error(
    store: &io_harness::Store,
    r: &RunResult,
) -> Option<io_harness::store::ProviderAttempt> {
    if !matches!(
        r.outcome,
        io_harness::RunOutcome::Escalated { .. } | io_harness::RunOutcome::ContextOverflow
    ) {
        return None;
    }
    let attempts = store.provider_attempts(r.run_id).ok()?;
    attempts.into_iter().rev().find(|a| a.next == "escalate")
}

/// For a run stopped awaiting approval: exactly what would run if it were allowed
/// (the action asked about, the whole argv for a command, and the call's input).
fn print_pending_action(store: &io_harness::Store, r: &RunResult, secrets: &Redactor) {
    let io_harness::RunOutcome::AwaitingApproval { request_id } = &r.outcome else {
        return;
    };
    let owner = store
        .approval_in_tree(r.run_id, request_id)
        .ok()
        .flatten()
        .unwrap_or(r.run_id);
    let Some(a) = store
        .approvals(owner)
        .unwrap_or_default()
        .into_iter()
        .find(|a| &a.request_id == request_id)
    else {
        return;
    };
    let action: Option<io_harness::policy::Action> = serde_json::from_str(&a.action_json).ok();
    // Escaped, not stripped: the approval is of exactly these bytes.
    let c = |t: &str| output::escape(&output::redact(t, secrets));
    if let Some(action) = action {
        outln!("asks to {}: {}", action.act.as_str(), c(&action.target));
    }
    outln!("  tool {} with {}", c(&a.tool), c(&a.input_json));
}

/// Prints the result: a JSON object with `--json`, a summary otherwise.
fn report(
    r: &RunResult,
    failure: Option<&io_harness::store::ProviderAttempt>,
    json: bool,
    secrets: &Redactor,
    copy: Option<&str>,
) {
    if json {
        let mut obj = serde_json::json!({ "result": r });
        if let Some(f) = failure {
            obj["provider_error"] = serde_json::to_value(f).unwrap_or_default();
        }
        super::json_out::print("result", obj, secrets);
        return;
    }
    let c = |t: &str| output::clean(t, secrets);
    outln!(
        "outcome: {}",
        serde_json::to_string(&r.outcome).unwrap_or_default()
    );
    if let Some(f) = failure {
        outln!(
            "provider error: {} {}{} after {} attempt(s): {}",
            c(&f.provider),
            f.kind,
            f.status.map_or(String::new(), |s| format!(" (HTTP {s})")),
            f.attempt,
            c(f.message.as_deref().unwrap_or("(no message)"))
        );
    }
    let estimated = match (r.estimated_tokens, r.cost_estimated) {
        (0, false) => String::new(),
        (n, _) => format!(" ({n} tokens estimated: the provider did not report them)"),
    };
    outln!(
        "run: {}   steps: {}   tokens: {} (in {}, out {}, cached {})   cost: {}{estimated}",
        r.run_id,
        r.steps,
        r.total_tokens,
        r.input_tokens,
        r.output_tokens,
        r.cached_input_tokens,
        output::cost(r.cost_usd, r.cost_unknown_steps)
    );
    match copy {
        Some(note) => outln!("workspace: {}", c(note)),
        None => outln!("workspace: {}", c(&r.work_dir)),
    }
    if !r.final_message.is_empty() {
        outln!("\nfinal message:\n{}", c(&r.final_message));
    }
    if r.diff.is_empty() {
        outln!("\n(no changes)");
    } else {
        outln!("\ndiff:\n{}", c(&r.diff));
    }
    if let io_harness::RunOutcome::AwaitingApproval { request_id } = &r.outcome {
        outln!(
            "awaiting approval: io-harness approve {} {request_id} allow|deny [--reason …] [--remember | --remember-program], then io-harness resume {}",
            r.run_id,
            r.run_id
        );
    }
    outln!("trace: io-harness show {}", r.run_id);
}
