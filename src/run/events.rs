//! Run events for observers (C19): the CLI's live progress line and `--json` stream
//! are observers like any embedder's.

use serde::Serialize;

use super::outcome::RunOutcome;
use crate::provider::{Cost, Usage};

/// Something that happened in a run, in the order it happened.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "event", rename_all = "snake_case")]
#[non_exhaustive]
pub enum RunEvent {
    /// The run started (or resumed).
    RunStarted {
        /// Run id.
        run_id: i64,
        /// Goal.
        goal: String,
        /// Directory the agent works in.
        work_dir: String,
        /// Whether this is a resumed session.
        resumed: bool,
    },
    /// A step is about to call the model.
    StepStarted {
        /// Run id.
        run_id: i64,
        /// 1-based step.
        step: u32,
        /// Step budget.
        max_steps: u32,
    },
    /// The model answered.
    ModelReplied {
        /// Run id.
        run_id: i64,
        /// Step.
        step: u32,
        /// Usage of this call.
        usage: Usage,
        /// Cost of this call.
        cost: Cost,
        /// Tool calls requested.
        tool_calls: usize,
        /// What the model wrote besides its calls (untrusted: the model's words), its
        /// first [`MODEL_TEXT_SHOWN`] bytes; the store keeps all of it.
        text: String,
    },
    /// A provider call failed and will be retried, or the next provider tried.
    ProviderRetry {
        /// Run id.
        run_id: i64,
        /// Step.
        step: u32,
        /// `kind/model` of the provider that failed.
        provider: String,
        /// Attempt number with that provider.
        attempt: u32,
        /// Failure kind.
        kind: crate::provider::ProviderErrorKind,
        /// Wait before the next attempt.
        delay_ms: u64,
        /// `retry` or `fallback`.
        next: String,
    },
    /// A tool is about to run.
    ToolCalled {
        /// Run id.
        run_id: i64,
        /// Step.
        step: u32,
        /// Tool name.
        name: String,
        /// Its main argument (path or pattern), for display.
        target: Option<String>,
    },
    /// A policy decision was taken.
    PolicyDecision {
        /// Run id.
        run_id: i64,
        /// Step.
        step: u32,
        /// Act.
        act: String,
        /// Target.
        target: String,
        /// Decision.
        decision: String,
        /// Layer that decided.
        layer: String,
    },
    /// A tool finished.
    ToolFinished {
        /// Run id.
        run_id: i64,
        /// Step.
        step: u32,
        /// Tool name.
        name: String,
        /// Whether it failed or was refused.
        is_error: bool,
        /// Wall time.
        duration_ms: u64,
        /// For `run_command`, the harness's status line of the command (`exit code 1
        /// [native …]`, `killed by signal 9`…); `None` for other tools and refusals.
        status: Option<String>,
    },
    /// Verification ran.
    Verified {
        /// Run id.
        run_id: i64,
        /// Step.
        step: u32,
        /// Whether every criterion passed.
        passed: bool,
        /// Criteria that failed.
        failed: Vec<String>,
        /// Failed attempts so far.
        attempt: u32,
    },
    /// A step was committed to the store.
    StepCommitted {
        /// Run id.
        run_id: i64,
        /// Step.
        step: u32,
        /// Tokens so far.
        total_tokens: u64,
        /// Known cost so far.
        cost_usd: Option<f64>,
    },
    /// The run ended.
    Finished {
        /// Run id.
        run_id: i64,
        /// Outcome.
        outcome: RunOutcome,
    },
}

/// How much of a reply's text [`RunEvent::ModelReplied`] carries.
pub const MODEL_TEXT_SHOWN: usize = 16 << 10;

/// `text` cut to at most `max` bytes at a character boundary, saying so.
pub(crate) fn shown_text(text: &str, max: usize) -> String {
    if text.len() <= max {
        return text.to_string();
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}… ({} bytes in all)", &text[..end], text.len())
}

/// What an observer wants after seeing an event.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Flow {
    /// Go on.
    Continue,
    /// Stop the run at the next safe point; it ends `Cancelled` and is resumable.
    Cancel,
}

/// Receives every run event; may cancel the run.
///
/// ```
/// use io_harness::run::{Flow, Observer, RunEvent};
/// struct StopAfterThree;
/// impl Observer for StopAfterThree {
///     fn on_event(&self, e: &RunEvent) -> Flow {
///         match e {
///             RunEvent::StepStarted { step, .. } if *step > 3 => Flow::Cancel,
///             _ => Flow::Continue,
///         }
///     }
/// }
/// ```
pub trait Observer: Send + Sync {
    /// Called synchronously, in order; keep it quick.
    fn on_event(&self, event: &RunEvent) -> Flow;
}

impl<F: Fn(&RunEvent) -> Flow + Send + Sync> Observer for F {
    fn on_event(&self, event: &RunEvent) -> Flow {
        self(event)
    }
}

pub use crate::halt::CancelToken;
