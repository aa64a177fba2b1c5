//! Run observers of the CLI: a live progress line on a terminal, JSON lines with
//! `--json`, and otherwise (a CI log, a pipe) one plain timestamped line per event a
//! person reading the log needs, written as it happens.

use std::io::{IsTerminal, Write};
use std::sync::Mutex;

use io_harness::redact::Redactor;
use io_harness::run::{Flow, Observer, RunEvent};

use super::output;

/// How events are shown.
pub enum Progress {
    /// One JSON object per event on stdout.
    Json { secrets: Redactor },
    /// A redrawn status line on stderr.
    Line {
        state: Mutex<LineState>,
        secrets: Redactor,
    },
    /// One timestamped line per event on stderr (stderr is not a terminal).
    Log { secrets: Redactor },
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
    pub fn new(json: bool, secrets: Redactor) -> Self {
        if json {
            Self::Json { secrets }
        } else if std::io::stderr().is_terminal() {
            Self::Line {
                state: Mutex::new(LineState::default()),
                secrets,
            }
        } else {
            Self::Log { secrets }
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
                if let Ok(mut v) = serde_json::to_value(event) {
                    v["at"] = now().into();
                    let v = super::json_out::document("event", v);
                    let line = output::redact(&v.to_string(), secrets);
                    let mut out = std::io::stdout().lock();
                    let _ = writeln!(out, "{line}");
                    let _ = out.flush();
                }
            }
            Self::Log { secrets } => {
                if let Some(line) = log_line(event) {
                    // One event, one line: a newline in a path the agent chose must not
                    // forge the next line of the log.
                    errln!(
                        "{} {}",
                        now(),
                        output::escape(&output::redact(&line, secrets))
                    );
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
                    RunEvent::ProviderRetry {
                        provider,
                        kind,
                        delay_ms,
                        next,
                        ..
                    } => {
                        s.tool = match next.as_str() {
                            "fallback" => {
                                format!("{provider} failed ({kind}): trying the fallback")
                            }
                            _ => format!(
                                "{provider} failed ({kind}): {next} in {:.1} s",
                                *delay_ms as f64 / 1000.0
                            ),
                        };
                    }
                    RunEvent::ToolFinished {
                        name,
                        status: Some(status),
                        ..
                    } => {
                        s.tool = format!("{name}: {status}");
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
                let line = output::escape(&output::redact(&line, secrets));
                let shown: String = line.chars().take(100).collect();
                err!("\r\x1b[2K{shown}");
                let _ = std::io::stderr().flush();
                s.drawn = true;
            }
        }
        Flow::Continue
    }
}

/// The wall-clock time, RFC 3339 with milliseconds (UTC).
pub(super) fn now() -> String {
    humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string()
}

/// The line a CI log shows for `event`, if it shows one.
pub(super) fn log_line(event: &RunEvent) -> Option<String> {
    Some(match event {
        RunEvent::RunStarted {
            run_id,
            goal,
            resumed,
            ..
        } => {
            let how = if *resumed { "resumed" } else { "started" };
            format!("run {run_id} {how}: {}", goal.lines().next().unwrap_or(""))
        }
        RunEvent::StepStarted {
            step, max_steps, ..
        } => format!("step {step}/{max_steps} started"),
        RunEvent::ModelReplied {
            step,
            tool_calls,
            text,
            ..
        } => {
            let said = text.trim();
            let said = match said.lines().next() {
                Some(first) if !first.is_empty() => {
                    let first: String = first.chars().take(160).collect();
                    let more = first.len() < said.len();
                    format!(": {first}{}", if more { " …" } else { "" })
                }
                _ => String::new(),
            };
            format!("step {step}: the model replied with {tool_calls} tool call(s){said}")
        }
        RunEvent::ProviderRetry {
            provider,
            attempt,
            kind,
            delay_ms,
            next,
            ..
        } => format!(
            "provider {provider} attempt {attempt} failed ({kind}); next: {next} after {delay_ms} ms"
        ),
        RunEvent::ToolCalled { name, target, .. } => match target {
            Some(t) => format!("tool {name} {t}"),
            None => format!("tool {name}"),
        },
        RunEvent::ToolFinished {
            name,
            is_error,
            duration_ms,
            status,
            ..
        } => match status {
            Some(s) => format!("tool {name}: {s} in {duration_ms} ms"),
            None => {
                let how = if *is_error { "failed" } else { "done" };
                format!("tool {name} {how} in {duration_ms} ms")
            }
        },
        RunEvent::PolicyDecision {
            act,
            target,
            decision,
            layer,
            ..
        } if decision != "allow" => format!("policy {decision} {act} {target} ({layer})"),
        RunEvent::Verified { passed: true, .. } => "verification passed".to_string(),
        RunEvent::Verified {
            failed, attempt, ..
        } => format!(
            "verification failed (attempt {attempt}): {}",
            failed.join(", ")
        ),
        RunEvent::Finished { outcome, .. } => format!(
            "outcome: {}",
            serde_json::to_string(outcome).unwrap_or_default()
        ),
        _ => return None,
    })
}
