//! Run observers of the CLI: a live progress line on a terminal, JSON lines with
//! `--json`, silence otherwise.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;

use io_harness::run::{Flow, Observer, RunEvent};

use super::output;

/// How events are shown.
pub enum Progress {
    /// One JSON object per event on stdout.
    Json { secrets: Vec<String> },
    /// A redrawn status line on stderr.
    Line {
        state: Mutex<LineState>,
        secrets: Vec<String>,
    },
    /// Nothing (stderr is not a terminal).
    Quiet,
}

#[derive(Default)]
pub struct LineState {
    step: u32,
    max: u32,
    tokens: u64,
    cost: Option<f64>,
    tool: String,
    drawn: bool,
}

impl Progress {
    pub fn new(json: bool, secrets: Vec<String>) -> Self {
        if json {
            Self::Json { secrets }
        } else if std::io::stderr().is_terminal() {
            Self::Line {
                state: Mutex::new(LineState::default()),
                secrets,
            }
        } else {
            Self::Quiet
        }
    }

    /// Ends the status line so the summary starts on a fresh one.
    pub fn finish_line(&self) {
        if let Self::Line { state, .. } = self
            && let Ok(s) = state.lock()
            && s.drawn
        {
            errln!();
        }
    }
}

impl Observer for Progress {
    fn on_event(&self, event: &RunEvent) -> Flow {
        match self {
            Self::Json { secrets } => {
                if let Ok(line) = serde_json::to_string(event) {
                    let mut out = std::io::stdout().lock();
                    let _ = writeln!(out, "{}", output::redact(&line, secrets));
                    let _ = out.flush();
                }
            }
            Self::Line { state, secrets } => {
                let Ok(mut s) = state.lock() else {
                    return Flow::Continue;
                };
                match event {
                    RunEvent::StepStarted {
                        step, max_steps, ..
                    } => {
                        s.step = *step;
                        s.max = *max_steps;
                        s.tool = "thinking".into();
                    }
                    RunEvent::ToolCalled { name, target, .. } => {
                        s.tool = match target {
                            Some(t) => format!("{name} {t}"),
                            None => name.clone(),
                        };
                    }
                    RunEvent::StepCommitted {
                        total_tokens,
                        cost_usd,
                        ..
                    } => {
                        s.tokens = *total_tokens;
                        s.cost = *cost_usd;
                    }
                    RunEvent::Verified { passed, .. } => {
                        s.tool = if *passed {
                            "verified".into()
                        } else {
                            "verification failed".into()
                        };
                    }
                    _ => return Flow::Continue,
                }
                let line = format!(
                    "step {}/{} · {} tokens · {} · {}",
                    s.step,
                    s.max,
                    output::tokens(s.tokens),
                    s.cost.map_or("cost unknown".into(), |c| format!("${c:.4}")),
                    s.tool
                );
                let line = output::clean(&line, secrets);
                let shown: String = line.chars().take(100).collect();
                err!("\r\x1b[2K{shown}");
                let _ = std::io::stderr().flush();
                s.drawn = true;
            }
            Self::Quiet => {}
        }
        Flow::Continue
    }
}
