//! Live progress of a batch: every task's events, told apart by the task's place in
//! the batch. `--json` prints each run event as `run --json` does, with `batch_id` and
//! `task` added; a non-terminal stderr (a CI log) gets the run's one line per event,
//! prefixed `[task N]`; a terminal gets one redrawn line (tasks done, running, waiting,
//! the batch's known cost, the latest thing a task did) and a kept line as each task
//! ends.

use std::collections::BTreeMap;
use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};

use io_harness::redact::Redactor;
use io_harness::run::{Flow, Observer, RunEvent};

use super::output;
use super::progress::{log_line, now};

/// How the batch's events are shown.
enum Mode {
    Json,
    Line,
    Log,
}

#[derive(Default)]
struct Board {
    /// Running tasks and what each is doing.
    running: BTreeMap<u32, String>,
    done: usize,
    cost: f64,
    drawn: bool,
}

/// The batch's shared progress display.
pub struct BatchProgress {
    mode: Mode,
    batch_id: i64,
    total: usize,
    board: Mutex<Board>,
}

impl BatchProgress {
    pub fn new(json: bool, batch_id: i64, total: usize, done: usize) -> Self {
        let mode = if json {
            Mode::Json
        } else if std::io::stderr().is_terminal() {
            Mode::Line
        } else {
            Mode::Log
        };
        Self {
            mode,
            batch_id,
            total,
            board: Mutex::new(Board {
                done,
                ..Board::default()
            }),
        }
    }

    /// A note about task `position` that is not a run event (waiting for its
    /// workspace, refused at start, ended).
    pub fn note(&self, position: u32, text: &str, secrets: &Redactor) {
        let text = output::escape(&output::redact(text, secrets));
        match self.mode {
            Mode::Json => {}
            Mode::Log => errln!("{} [task {position}] {text}", now()),
            Mode::Line => {
                if let Ok(mut b) = self.board.lock() {
                    b.running.insert(position, text);
                    self.redraw(&mut b);
                }
            }
        }
    }

    /// Task `position` ended: `line` says how; kept on a terminal above the status.
    pub fn ended(&self, position: u32, line: &str, secrets: &Redactor) {
        let line = output::escape(&output::redact(line, secrets));
        let Ok(mut b) = self.board.lock() else {
            return;
        };
        b.running.remove(&position);
        b.done += 1;
        match self.mode {
            Mode::Json => {}
            Mode::Log => errln!("{} [task {position}] {line}", now()),
            Mode::Line => {
                err!("\r\x1b[2K");
                errln!("task {position}: {line}");
                b.drawn = false;
                self.redraw(&mut b);
            }
        }
    }

    /// Ends the status line before the summary.
    pub fn finish_line(&self) {
        if let Ok(b) = self.board.lock()
            && b.drawn
        {
            errln!();
        }
    }

    fn redraw(&self, b: &mut Board) {
        let latest = b
            .running
            .iter()
            .next_back()
            .map(|(p, t)| format!("[{p}] {t}"))
            .unwrap_or_default();
        let waiting = self.total.saturating_sub(b.done + b.running.len());
        let line = format!(
            "batch {}: {}/{} done · {} running · {} waiting · ${:.4} · {latest}",
            self.batch_id,
            b.done,
            self.total,
            b.running.len(),
            waiting,
            b.cost
        );
        let shown: String = line.chars().take(110).collect();
        err!("\r\x1b[2K{shown}");
        let _ = std::io::stderr().flush();
        b.drawn = true;
    }

    fn event(&self, position: u32, event: &RunEvent, secrets: &Redactor) {
        match self.mode {
            Mode::Json => {
                if let Ok(mut v) = serde_json::to_value(event) {
                    v["at"] = now().into();
                    v["batch_id"] = self.batch_id.into();
                    v["task"] = position.into();
                    let v = super::json_out::document("event", v);
                    let line = output::redact(&v.to_string(), secrets);
                    let mut out = std::io::stdout().lock();
                    let _ = writeln!(out, "{line}");
                    let _ = out.flush();
                }
            }
            Mode::Log => {
                if let Some(line) = log_line(event) {
                    errln!(
                        "{} [task {position}] {}",
                        now(),
                        output::escape(&output::redact(&line, secrets))
                    );
                }
            }
            Mode::Line => {
                let Ok(mut b) = self.board.lock() else {
                    return;
                };
                if let RunEvent::ModelReplied { cost, .. } = event {
                    b.cost += cost.usd.unwrap_or(0.0);
                }
                if let Some(line) = log_line(event) {
                    let line = output::escape(&output::redact(&line, secrets));
                    b.running.insert(position, line);
                    self.redraw(&mut b);
                }
            }
        }
    }
}

/// The observer of one task's run: shows its events on the batch's display and, for
/// a run it starts, links the run to its task the moment the run has an id.
pub struct TaskObserver {
    pub position: u32,
    pub progress: Arc<BatchProgress>,
    pub secrets: Redactor,
    /// `(store, batch id)` for a task whose run is new: linked on `run_started`.
    pub link: Option<(io_harness::Store, i64)>,
}

impl Observer for TaskObserver {
    fn on_event(&self, event: &RunEvent) -> Flow {
        if let (
            RunEvent::RunStarted {
                run_id,
                resumed: false,
                ..
            },
            Some((store, batch_id)),
        ) = (event, &self.link)
            && let Err(e) = store.link_batch_run(*batch_id, self.position, *run_id)
        {
            errln!("warning: run {run_id} was not linked to batch {batch_id}: {e}");
        }
        self.progress.event(self.position, event, &self.secrets);
        Flow::Continue
    }
}
