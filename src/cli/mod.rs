//! Command-line front end: clap arguments are parsed here and resolved into library
//! calls in one file per subcommand. Exit codes come from one table
//! (`RunOutcome::exit_code` for a run that ended; `RunError::exit_code` and
//! `CliError::exit_code` otherwise: 2 for usage errors, 70 for internal failures).

/// `println!` that survives a closed pipe (see `output::out`).
macro_rules! outln {
    () => {
        $crate::cli::output::out(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::output::out(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprintln!` that survives a closed pipe.
macro_rules! errln {
    () => {
        $crate::cli::output::err(format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::cli::output::err(format_args!("{}\n", format_args!($($arg)*)))
    };
}

/// `eprint!` that survives a closed pipe.
macro_rules! err {
    ($($arg:tt)*) => {
        $crate::cli::output::err(format_args!($($arg)*))
    };
}

mod allocator;
mod apply;
mod apply_git;
mod approve;
mod audit;
mod batch;
mod batch_list;
mod batch_progress;
mod batch_run;
mod batch_summary;
mod completions;
mod config_cmd;
mod diff;
mod doctor;
mod doctor_caps;
mod drive;
mod export_otlp;
mod init;
mod json_out;
mod keep;
mod layered;
mod mcp;
mod memory;
mod otel_live;
mod output;
mod progress;
mod prompt;
mod provider_args;
mod prune;
mod report;
mod resume;
mod run;
mod runs;
mod sandbox_cmd;
mod settings_observer;
mod show;
mod show_settings;
mod since;
mod store_path;
mod tools_cmd;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand, ValueEnum};
use io_harness::sandbox::Backend;

/// Runs an AI coding agent from a typed task contract to a verified result.
#[derive(Debug, Parser)]
#[command(name = "io-harness", version, about)]
pub(crate) struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Run a task file to a verified result.
    Run(RunArgs),
    /// Continue an interrupted or cancelled run from its last committed step.
    Resume(ResumeArgs),
    /// Run many task files with bounded concurrency, each a run of its own under one
    /// batch id; --resume ID finishes what an interrupted batch left.
    Batch(BatchArgs),
    /// List runs in the store.
    Runs(ListArgs),
    /// Show one run's trace: steps, tool calls, tokens, cost, outcome, diff.
    Show(ShowArgs),
    /// Write one run's report: a self-contained HTML page, readable offline.
    Report(ReportArgs),
    /// Print a finished run's final diff, as stored.
    Diff(DiffArgs),
    /// Apply a copy run's final diff to its original workspace (three-way), or commit
    /// it on a new branch with --branch.
    Apply(ApplyArgs),
    /// Answer a deferred approval request of a run.
    Approve(ApproveArgs),
    /// Send a run's trace (its whole agent tree) to an OpenTelemetry collector over
    /// OTLP/HTTP.
    ExportOtlp(ExportOtlpArgs),
    /// Read the audit log of sandbox sessions (every generation).
    Audit(AuditArgs),
    /// Show which isolation layers this machine provides and which backend a run gets.
    Doctor(DoctorArgs),
    /// The notes earlier runs saved for a workspace: list, forget KEY, clear.
    Memory(MemoryArgs),
    /// Run one command in the sandbox exactly as a run would.
    Sandbox(SandboxArgs),
    /// MCP servers of a task file.
    Mcp(McpArgs),
    /// Write a commented task.toml for the project in this directory.
    Init(InitArgs),
    /// Print each resolved setting and where it came from (secrets redacted).
    Config(ConfigArgs),
    /// Print a shell completion script.
    Completions(CompletionsArgs),
    /// Print the manual page (roff).
    Man,
    /// The tools a run offers the model, with their argument schemas.
    Tools(ToolsArgs),
}

#[derive(Debug, Args)]
struct InitArgs {
    /// The project directory (default: the current one).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// Replace an existing task.toml.
    #[arg(long)]
    force: bool,
    /// The verification command instead of the detected one ("cargo test --offline").
    #[arg(long, value_name = "COMMAND")]
    verify: Option<String>,
}

#[derive(Debug, Args)]
struct ConfigArgs {
    /// Resolve with this task file as a run of it would.
    #[arg(long, value_name = "FILE")]
    task: Option<PathBuf>,
    /// The project directory without a task file (default: the current one).
    #[arg(long, value_name = "DIR", conflicts_with = "task")]
    root: Option<PathBuf>,
    #[command(flatten)]
    provider: ProviderArgs,
    #[command(flatten)]
    budget: BudgetArgs,
    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct CompletionsArgs {
    /// The shell.
    shell: clap_complete::Shell,
}

/// Budget flags, over every other layer.
#[derive(Debug, Args, Clone, Default)]
struct BudgetArgs {
    /// Most model calls (default 40).
    #[arg(long, value_name = "N")]
    max_steps: Option<u32>,
    /// Most USD spent; needed with a priced provider for a run without a task file,
    /// unless the user config sets [budget] max_cost_usd.
    #[arg(long, value_name = "USD")]
    max_cost: Option<f64>,
    /// Longest wall time (`15m`, `1h`); 15 minutes for a run without a task file.
    #[arg(long, value_name = "DURATION")]
    max_duration: Option<String>,
}

#[derive(Debug, Args)]
struct ToolsArgs {
    /// One JSON object (`schema_version`, `tools`) instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct McpArgs {
    #[command(subcommand)]
    command: McpCommand,
}

#[derive(Debug, Subcommand)]
enum McpCommand {
    /// Connect to the servers a task file declares and print their tools.
    List {
        /// The task file.
        task: PathBuf,
        /// One JSON object instead of text.
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Args)]
struct ApproveArgs {
    /// The run.
    run_id: i64,
    /// The request (shown when the run stopped awaiting approval).
    request_id: String,
    /// What to answer.
    decision: ApprovalDecision,
    /// Why, shown to the model (with deny).
    #[arg(long)]
    reason: Option<String>,
    /// Remember the allow for the rest of the run, for exactly this action (a
    /// command: this argv).
    #[arg(long, conflicts_with = "remember_program")]
    remember: bool,
    /// Remember the allow of a command for its program with any arguments (wider
    /// than what was asked; recorded as such).
    #[arg(long)]
    remember_program: bool,
    #[command(flatten)]
    store: StoreArg,
}

/// `approve`'s answer.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum ApprovalDecision {
    /// Let the action run.
    Allow,
    /// Refuse it (the model is told, with --reason if given).
    Deny,
}

/// What `memory` does with a workspace's notes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum MemoryAction {
    /// Print the notes (the default).
    List,
    /// Delete the note KEY.
    Forget,
    /// Delete every note.
    Clear,
}

#[derive(Debug, Args)]
struct MemoryArgs {
    /// The workspace directory.
    workspace: PathBuf,
    /// What to do (default: list).
    action: Option<MemoryAction>,
    /// The note to forget (with `forget`).
    #[arg(required_if_eq("action", "forget"))]
    key: Option<String>,
    #[command(flatten)]
    store: StoreArg,
    /// JSON output (list).
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct DoctorArgs {
    /// JSON output.
    #[arg(long)]
    json: bool,
    /// Also check this task file's MCP servers: each one run with `sandbox = false`
    /// is warned about.
    #[arg(long, value_name = "FILE")]
    task: Option<PathBuf>,
}

#[derive(Debug, Args)]
struct SandboxArgs {
    /// Isolate the command as a run of this task file would: its `[sandbox]` settings
    /// and its policy's masks (default: the defaults and the built-in policy layer).
    #[arg(long, value_name = "FILE")]
    task: Option<PathBuf>,
    /// Directory the command runs in and may write (default: the task's root, else the
    /// current directory).
    #[arg(long, value_name = "DIR")]
    workdir: Option<PathBuf>,
    /// The network posture (allowlist: only --allow-host hosts, through the egress
    /// proxy); default: the task's, else none.
    #[arg(long, value_enum)]
    network: Option<NetworkArg>,
    /// A host the egress proxy admits with --network allowlist (`crates.io`,
    /// `*.pypi.org:443`); repeatable.
    #[arg(long = "allow-host", value_name = "HOST[:PORT]")]
    allow_host: Vec<String>,
    /// Resolve NAME to IP in the egress proxy instead of asking DNS; repeatable.
    #[arg(long, value_name = "NAME=IP")]
    resolve: Vec<String>,
    /// Caps, e.g. cpu=10,mem=512MiB,wall=30s,procs=64,files=256,output=1MiB
    #[arg(long, value_name = "LIMITS")]
    limit: Option<String>,
    /// Fail instead of running weaker than this backend.
    #[arg(long = "require-sandbox", value_name = "BACKEND", value_parser = backend_parser())]
    require: Option<Backend>,
    /// Host variables passed in by name (added to the task's).
    #[arg(long, value_name = "NAME")]
    env: Vec<String>,
    #[command(flatten)]
    store: StoreArg,
    /// The command and its arguments.
    #[arg(last = true, required = true)]
    command: Vec<String>,
}

/// `sandbox --network`: the sandbox's network posture, spelled as in a task file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
enum NetworkArg {
    /// No network at all.
    None,
    /// Only the --allow-host hosts, through the egress proxy.
    Allowlist,
    /// The host's network.
    Open,
}

/// A sandbox backend by its label (`linux-namespaces`, `portable-floor`…); clap lists
/// the labels when given another.
fn backend_parser() -> impl clap::builder::TypedValueParser<Value = Backend> {
    use clap::builder::TypedValueParser;
    clap::builder::PossibleValuesParser::new(Backend::ALL.map(Backend::label)).map(|label| {
        label
            .parse::<Backend>()
            .expect("every possible value is a backend label")
    })
}

/// Where the store is.
#[derive(Debug, Args, Clone)]
struct StoreArg {
    /// Store file (default: $XDG_DATA_HOME/io-harness/store.db).
    #[arg(long, env = "IO_HARNESS_STORE", value_name = "PATH")]
    store: Option<PathBuf>,
}

/// Which provider answers, overriding the task file.
#[derive(Debug, Args, Clone, Default)]
struct ProviderArgs {
    /// openai | anthropic | openrouter | scripted:<file>
    #[arg(long, value_name = "KIND")]
    provider: Option<String>,
    /// Model name.
    #[arg(long, value_name = "MODEL")]
    model: Option<String>,
    /// Endpoint base URL (OpenAI style includes /v1; Anthropic's does not).
    #[arg(long, value_name = "URL")]
    base_url: Option<String>,
}

#[derive(Debug, Args)]
struct RunArgs {
    /// The task file (TOML); or --goal with --verify for a run without one.
    #[arg(required_unless_present = "goal", conflicts_with = "goal")]
    task: Option<PathBuf>,
    /// The goal of a run without a task file (with --verify): a copy-mode run of the
    /// current directory or --root.
    #[arg(long, requires = "verify")]
    goal: Option<String>,
    /// Its verification command, split as a POSIX shell splits words (no shell runs).
    #[arg(long, value_name = "COMMAND", requires = "goal")]
    verify: Option<String>,
    /// The workspace of a --goal run (default: the current directory).
    #[arg(long, value_name = "DIR", requires = "goal")]
    root: Option<PathBuf>,
    #[command(flatten)]
    budget: BudgetArgs,
    /// Fail instead of running weaker than this sandbox backend (overrides
    /// `[sandbox] require`).
    #[arg(long = "require-sandbox", value_name = "BACKEND", value_parser = backend_parser())]
    require_sandbox: Option<Backend>,
    #[command(flatten)]
    provider: ProviderArgs,
    #[command(flatten)]
    store: StoreArg,
    /// Export the run's trace live to this OpenTelemetry collector (OTLP/HTTP base
    /// URL; default OTEL_EXPORTER_OTLP_ENDPOINT). Never fails the run nor waits on a step;
    /// the end waits at most 5 s for the last send.
    #[arg(long = "otlp-endpoint", value_name = "URL")]
    otlp_endpoint: Option<String>,
    /// Put prompt and completion content on the exported model-call spans (also
    /// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true; default off).
    #[arg(long = "otlp-content")]
    otlp_content: bool,
    /// Print one JSON event per line and a final result object.
    #[arg(long)]
    json: bool,
    /// Keep the workspace copy of a successful run (by default it is removed; the diff
    /// stays in the store).
    #[arg(long)]
    keep: bool,
}

#[derive(Debug, Args)]
struct ResumeArgs {
    /// The run to continue.
    run_id: i64,
    #[command(flatten)]
    provider: ProviderArgs,
    #[command(flatten)]
    store: StoreArg,
    /// Export the run's trace live to this OpenTelemetry collector (OTLP/HTTP base
    /// URL; default OTEL_EXPORTER_OTLP_ENDPOINT). Never fails the run nor waits on a step;
    /// the end waits at most 5 s for the last send.
    #[arg(long = "otlp-endpoint", value_name = "URL")]
    otlp_endpoint: Option<String>,
    /// Put prompt and completion content on the exported model-call spans (also
    /// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true; default off).
    #[arg(long = "otlp-content")]
    otlp_content: bool,
    /// Print one JSON event per line and a final result object.
    #[arg(long)]
    json: bool,
    /// Keep the workspace copy of a successful run (by default it is removed).
    #[arg(long)]
    keep: bool,
}

#[derive(Debug, Args)]
struct BatchArgs {
    /// Task files, directories of them (each `*.toml` in it and each `*/task.toml`),
    /// or JSONL lists (`*.jsonl`: one `{"task": "path"}` or `"path"` a line, relative
    /// to the list).
    #[arg(required_unless_present = "resume", conflicts_with = "resume")]
    tasks: Vec<PathBuf>,
    /// Finish the batch ID: resume its interrupted and cancelled runs, start the tasks
    /// that never started (with the contracts validated when it was made).
    #[arg(long, value_name = "ID")]
    resume: Option<i64>,
    /// Tasks run at once (default: min(cores, memory / the largest per-task memory
    /// cap)).
    #[arg(long, value_name = "N")]
    jobs: Option<u32>,
    /// The batch's total cost budget in USD, shared live by its running tasks (each
    /// task's own `[budget] max_cost_usd` holds too).
    #[arg(long, value_name = "USD", conflicts_with = "resume")]
    max_cost: Option<f64>,
    #[command(flatten)]
    provider: ProviderArgs,
    #[command(flatten)]
    store: StoreArg,
    /// One JSON event per line (with its task) and a final batch object.
    #[arg(long)]
    json: bool,
    /// Keep the workspace copies of successful runs.
    #[arg(long)]
    keep: bool,
}

#[derive(Debug, Args)]
struct DiffArgs {
    /// The run.
    run_id: i64,
    #[command(flatten)]
    store: StoreArg,
}

#[derive(Debug, Args)]
struct ApplyArgs {
    /// The run (one that worked on a copy and finished).
    run_id: i64,
    /// Commit the result on this new branch of the workspace's git repository instead
    /// (HEAD, the index and the working tree stay as they are).
    #[arg(long, value_name = "NAME")]
    branch: Option<String>,
    #[command(flatten)]
    store: StoreArg,
}

/// `runs`'s subcommands.
#[derive(Debug, Subcommand)]
enum RunsCommand {
    /// Remove old runs' workspace copies and scratch directories (and, with --rows,
    /// their rows in the store).
    Prune(PruneArgs),
}

#[derive(Debug, Args)]
struct PruneArgs {
    /// Only runs finished (or started, when unfinished) longer ago than this: `7d`,
    /// `12h`.
    #[arg(long, value_name = "AGE", value_parser = humantime::parse_duration)]
    older_than: std::time::Duration,
    /// Keep runs that did not succeed.
    #[arg(long)]
    keep_failed: bool,
    /// Also delete the runs' rows from the store, then VACUUM it.
    #[arg(long)]
    rows: bool,
    /// Also prune runs that could still be resumed (interrupted, awaiting approval,
    /// cancelled…): they cannot be resumed afterwards.
    #[arg(long)]
    include_resumable: bool,
    #[command(flatten)]
    store: StoreArg,
}

#[derive(Debug, Args)]
#[command(args_conflicts_with_subcommands = true)]
struct ListArgs {
    #[command(subcommand)]
    command: Option<RunsCommand>,
    #[command(flatten)]
    store: StoreArg,
    /// JSON output.
    #[arg(long)]
    json: bool,
    /// At most this many runs (the newest).
    #[arg(long, value_name = "N")]
    limit: Option<usize>,
    /// Only runs started since then: a duration back from now (`2h`, `7d`) or an RFC
    /// 3339 time (`2026-12-01T09:00:00Z`, `2026-12-01T11:00:00+02:00`).
    #[arg(long, value_name = "WHEN", value_parser = since::parse_since)]
    since: Option<i64>,
    /// Only the runs of this batch.
    #[arg(long, value_name = "ID")]
    batch: Option<i64>,
}

#[derive(Debug, Args)]
struct ShowArgs {
    /// The run.
    run_id: i64,
    /// Print the exact request body sent at this step instead of the trace.
    #[arg(long, value_name = "STEP")]
    prompt: Option<u32>,
    #[command(flatten)]
    store: StoreArg,
    /// JSON output.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct ReportArgs {
    /// The run (its sub-agents are on the same page).
    #[arg(required_unless_present = "batch", conflicts_with = "batch")]
    run_id: Option<i64>,
    /// Write the index page of this batch (batch-<id>.html) and each of its runs'
    /// pages beside it (run-<id>.html), in the current directory or -o DIR.
    #[arg(long, value_name = "ID")]
    batch: Option<i64>,
    /// Where to write the page (default: run-<id>.html in the current directory); with
    /// --batch, the directory.
    #[arg(short = 'o', long = "output", value_name = "FILE")]
    output: Option<PathBuf>,
    #[command(flatten)]
    store: StoreArg,
}

#[derive(Debug, Args)]
struct ExportOtlpArgs {
    /// The run (any run of a tree exports the whole tree's trace).
    run_id: i64,
    /// The collector's OTLP/HTTP base URL (`/v1/traces` is appended).
    #[arg(long, value_name = "URL")]
    endpoint: Option<String>,
    /// Put prompt and completion content on the model-call spans (also
    /// OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT=true; default off).
    #[arg(long = "otlp-content")]
    otlp_content: bool,
    #[command(flatten)]
    store: StoreArg,
    /// One JSON object instead of text.
    #[arg(long)]
    json: bool,
}

#[derive(Debug, Args)]
struct AuditArgs {
    /// Audit directory (default: $XDG_CONFIG_HOME/io-harness/audit).
    #[arg(long, value_name = "DIR")]
    dir: Option<PathBuf>,
    /// One JSON object per line.
    #[arg(long)]
    json: bool,
}

/// A failure of the command itself (not a run outcome).
#[derive(Debug, thiserror::Error)]
enum CliError {
    /// Bad arguments or configuration: nothing ran (exit 2).
    #[error("{0}")]
    Usage(String),
    /// The harness itself failed (its store, its own I/O): exit 70, never 1, which
    /// says the agent's work was checked and failed.
    #[error("{0}")]
    Internal(String),
}

impl CliError {
    /// The exit code (SPEC §3's table).
    fn exit_code(&self) -> u8 {
        match self {
            Self::Usage(_) => 2,
            Self::Internal(_) => 70,
        }
    }
}

impl From<io_harness::run::RunError> for CliError {
    fn from(e: io_harness::run::RunError) -> Self {
        let mut text = e.to_string();
        if let Some(run_id) = e.run_id() {
            if e.is_resumable() {
                text.push_str(&format!(
                    "\nrun {run_id} stays resumable from its last committed step: io-harness resume {run_id}"
                ));
            } else {
                text.push_str(&format!(
                    "\nrun {run_id} cannot be resumed from this session's store: its file was deleted or \
                     replaced underneath (a file now at that path holds what it holds, not this session's writes)"
                ));
            }
        }
        if e.exit_code() == io_harness::run::EXIT_USAGE {
            Self::Usage(text)
        } else {
            Self::Internal(text)
        }
    }
}

impl From<io_harness::config::ConfigError> for CliError {
    fn from(e: io_harness::config::ConfigError) -> Self {
        Self::Usage(e.to_string())
    }
}

impl From<io_harness::store::StoreError> for CliError {
    fn from(e: io_harness::store::StoreError) -> Self {
        match e {
            io_harness::store::StoreError::Missing { .. } => Self::Usage(e.to_string()),
            e => Self::Internal(e.to_string()),
        }
    }
}

pub fn main() -> ExitCode {
    // First, while this is the only thread: an unsandboxed child of ours (an MCP server
    // with `sandbox = false`) must not read the provider keys from our environ block
    // or our memory.
    let _ = io_harness::conceal::conceal_process();
    allocator::bound_large_allocations();
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            return ExitCode::from(if e.use_stderr() { 2 } else { 0 });
        }
    };
    if std::env::var_os("IO_HARNESS_LOG").is_some() {
        init_tracing();
    }
    ignore_file_size_signal();
    // `sandbox` runs one command and at most its egress proxy: one thread drives them
    // (the command itself waits on the blocking pool), and a one-shot process does not
    // pay for starting a worker per core.
    let mut builder = if matches!(cli.command, Command::Sandbox(_)) {
        tokio::runtime::Builder::new_current_thread()
    } else {
        tokio::runtime::Builder::new_multi_thread()
    };
    let runtime = match builder.enable_all().build() {
        Ok(r) => r,
        Err(e) => {
            errln!("error: cannot start the async runtime: {e}");
            return ExitCode::from(70);
        }
    };
    if matches!(
        cli.command,
        Command::Run(_) | Command::Resume(_) | Command::Sandbox(_) | Command::Batch(_)
    ) {
        output::set_driving();
    }
    let result = runtime.block_on(async {
        match cli.command {
            Command::Run(a) => run::execute(a).await,
            Command::Resume(a) => resume::execute(a).await,
            Command::Batch(a) => batch::execute(a).await,
            Command::Runs(a) => runs::execute(a),
            Command::Show(a) => show::execute(a),
            Command::Report(a) => report::execute(a),
            Command::Diff(a) => diff::execute(a),
            Command::Apply(a) => apply::execute(a),
            Command::Approve(a) => approve::execute(a),
            Command::ExportOtlp(a) => export_otlp::execute(a).await,
            Command::Audit(a) => audit::execute(a),
            Command::Doctor(a) => doctor::execute(a),
            Command::Memory(a) => memory::execute(a),
            Command::Sandbox(a) => sandbox_cmd::execute(a).await,
            Command::Mcp(a) => mcp::execute(a).await,
            Command::Init(a) => init::execute(a),
            Command::Config(a) => config_cmd::execute(a),
            Command::Completions(a) => completions::completions(a),
            Command::Man => completions::man(),
            Command::Tools(a) => tools_cmd::execute(a),
        }
    });
    // The run's outcome is recorded: nothing still on the blocking pool (a record of
    // a command the run abandoned) may hold the exit past a moment.
    runtime.shutdown_timeout(std::time::Duration::from_millis(500));
    match result {
        Ok(code) => ExitCode::from(u8::try_from(code).unwrap_or(1)),
        Err(e) => {
            errln!("error: {}", output::sanitize(&e.to_string()));
            ExitCode::from(e.exit_code())
        }
    }
}

/// Under a file-size limit (`ulimit -f`) a write past it raises SIGXFSZ, which kills
/// the process before the store can say anything. Ignored, the write fails with
/// `EFBIG` instead, the store reports it, and the run ends with exit 70 and an error
/// naming it. The sandbox resets ignored signals for the commands it runs.
fn ignore_file_size_signal() {
    #[cfg(unix)]
    // SAFETY: `signal(2)` with SIG_IGN for SIGXFSZ, before any other thread exists
    // (the runtime starts after): no handler runs, nothing else races the change.
    unsafe {
        libc::signal(libc::SIGXFSZ, libc::SIG_IGN);
    }
}

fn init_tracing() {
    let filter = tracing_subscriber::EnvFilter::from_env("IO_HARNESS_LOG");
    let _ = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(std::io::stderr)
        .try_init();
}
