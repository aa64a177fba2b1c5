//! `report`: one self-contained HTML page per run, from the store alone.
//!
//! Operators ask of a finished run what happened, what it cost, how each command was
//! isolated and why a gate failed; `show` answers in a terminal, this page answers in
//! a browser, offline, as a file attachable to a CI job. Everything is in the file:
//! the style, a few lines of script (expand / collapse all), the chart as SVG drawn by
//! [`chart`], and the data as escaped markup. Nothing is fetched when it is viewed.
//!
//! Safety of the page is built in three layers: every text the agent, the model, a
//! tool or a command could have written is redacted and escaped on the way in (see
//! `html`), shown in a frame marked untrusted with its source, and the document's
//! Content-Security-Policy allows only the SHA-256 hashes of its own inline style and
//! script (computed as the page is written) and `data:` images, so a markup escape
//! that slipped through would still run nothing and load nothing.
//!
//! ```no_run
//! use io_harness::{Store, report};
//! let store = Store::open_existing(std::path::Path::new("store.db"))?;
//! let page = report::render(&store, 1, &io_harness::redact::Redactor::default())?;
//! std::fs::write("run-1.html", page)?;
//! # Ok::<(), Box<dyn std::error::Error>>(())
//! ```

mod assets;
mod chart;
mod diff;
mod html;
mod index;
mod records;
mod steps;

pub use diff::MAX_DIFF_BYTES;
pub use index::render_batch;

use crate::redact::Redactor;
use crate::store::{
    AgentLink, ApprovalRecord, ContextEvent, McpEvent, PolicyEvent, ProviderAttempt, RunRecord,
    SandboxEvent, SandboxSession, StepRecord, Store, StoreError,
};

/// How deep a tree of sub-agents the page follows (deeper ones are named, not shown).
const MAX_DEPTH: u32 = 8;
/// How many runs one page shows at most (a root and its sub-agents).
const MAX_RUNS: usize = 64;

/// Failure to write a report.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ReportError {
    /// The store has no run of that id.
    #[error("no run with id {0}")]
    NoSuchRun(i64),
    /// The store has no batch of that id.
    #[error("no batch with id {0}")]
    NoSuchBatch(i64),
    /// Reading the store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Everything the store holds about one run, as the page shows it.
pub(crate) struct RunView {
    pub(crate) run: RunRecord,
    pub(crate) link: Option<AgentLink>,
    pub(crate) steps: Vec<StepRecord>,
    pub(crate) context: Vec<ContextEvent>,
    pub(crate) policy: Vec<PolicyEvent>,
    pub(crate) sandbox: Vec<SandboxEvent>,
    pub(crate) attempts: Vec<ProviderAttempt>,
    pub(crate) sessions: Vec<SandboxSession>,
    pub(crate) approvals: Vec<ApprovalRecord>,
    pub(crate) mcp: Vec<McpEvent>,
    /// Sub-agents, each with its own view, in the order they were spawned.
    pub(crate) children: Vec<RunView>,
    /// Sub-agents not shown (past [`MAX_DEPTH`] or [`MAX_RUNS`]): their run ids.
    pub(crate) not_shown: Vec<i64>,
}

impl RunView {
    fn load(store: &Store, run_id: i64, budget: &mut usize) -> Result<Self, ReportError> {
        let run = store.run(run_id)?.ok_or(ReportError::NoSuchRun(run_id))?;
        *budget = budget.saturating_sub(1);
        let link = store.agent_link(run_id)?;
        let mut children = Vec::new();
        let mut not_shown = Vec::new();
        let depth = link.as_ref().map_or(0, |l| l.depth);
        for child in store.children(run_id)? {
            if depth + 1 > MAX_DEPTH || *budget == 0 {
                not_shown.push(child.run.id);
            } else {
                children.push(Self::load(store, child.run.id, budget)?);
            }
        }
        Ok(Self {
            steps: store.steps(run_id)?,
            context: store.context_events(run_id)?,
            policy: store.policy_events(run_id)?,
            sandbox: store.sandbox_events(run_id)?,
            attempts: store.provider_attempts(run_id)?,
            sessions: store.sandbox_sessions(run_id)?,
            approvals: store.approvals(run_id)?,
            mcp: store.mcp_events(run_id)?,
            run,
            link,
            children,
            not_shown,
        })
    }
}

/// The report of run `run_id` and its sub-agents as one HTML document. `redactor`
/// holds the credentials known to this process (the store redacted what it knew when
/// it wrote; this catches keys registered since).
pub fn render(store: &Store, run_id: i64, redactor: &Redactor) -> Result<String, ReportError> {
    let mut budget = MAX_RUNS;
    let view = RunView::load(store, run_id, &mut budget)?;
    let mut h = html::Html::new(redactor);
    h.raw("<header><h1>io-harness run ")
        .fmt(format_args!("{}", view.run.id))
        .raw("</h1><div class=\"tools\"><button id=\"expand-all\" type=\"button\">expand all</button> <button id=\"collapse-all\" type=\"button\">collapse all</button></div></header>\n");
    write_run(&mut h, &view);
    let title = format!(
        "io-harness run {}: {}",
        view.run.id,
        redactor.text(&view.run.goal)
    );
    Ok(html::document(
        &title,
        assets::STYLE,
        assets::SCRIPT,
        &h.into_string(),
    ))
}

/// One run's section, then its sub-agents' sections.
fn write_run(h: &mut html::Html<'_>, v: &RunView) {
    h.fmt(format_args!(
        "<section class=\"run\" id=\"run-{}\" data-run=\"{}\">",
        v.run.id, v.run.id
    ));
    records::header(h, v);
    h.raw("<h3>Tokens and cost per step</h3>");
    chart::write(h, &v.steps);
    steps::timeline(h, v);
    records::verification(h, v);
    records::policy(h, v);
    records::sandbox(h, v);
    records::context(h, v);
    records::mcp(h, v);
    records::subagents(h, v);
    if let Some(m) = &v.run.final_message {
        h.raw("<h3>Final message</h3>");
        h.untrusted("model", m, 16 * 1024);
    }
    h.raw("<h3>Diff</h3>");
    diff::write(h, v.run.diff.as_deref());
    h.raw("</section>\n");
    for c in &v.children {
        write_run(h, c);
    }
}
