//! The end of a batch: one row per task read back from the store (so a resumed batch
//! shows the tasks earlier sessions finished too), totals and the pass rate, as a
//! table or as one `batch` JSON document, and the batch's exit code.
//!
//! Exit precedence (issue 21): 130 if this session was cancelled; else 2 if any task
//! was refused before running; else the first code present in the order 4, 3, 70, 1,
//! 5; else 0 (every task succeeded).

use serde::Serialize;

use io_harness::RunOutcome;
use io_harness::store::BatchRecord;

use super::batch_run::Ended;
use super::output;

/// One task's line of the summary.
#[derive(Debug, Clone, Serialize)]
pub struct Row {
    pub position: u32,
    pub source: String,
    pub run_id: Option<i64>,
    /// `ended` (an outcome), `refused` (nothing ran), `failed` (the harness failed
    /// inside the run), `unfinished` (resumable by `batch --resume`), `not_started`.
    pub state: &'static str,
    pub outcome: Option<serde_json::Value>,
    pub exit_code: Option<i32>,
    pub steps: u32,
    pub tokens: u64,
    pub cost_usd: Option<f64>,
    pub cost_unknown_steps: u32,
    pub wall_ms: Option<u64>,
    pub error: Option<String>,
}

/// Every task's row: from the record, with this session's errors.
pub fn rows(store: &io_harness::Store, batch: &BatchRecord, ended: &[Ended]) -> Vec<Row> {
    batch
        .tasks
        .iter()
        .map(|t| {
            let session = ended.iter().find(|e| e.position == t.position);
            let mut row = Row {
                position: t.position,
                source: t.source.clone(),
                run_id: t.run_id,
                state: "not_started",
                outcome: None,
                exit_code: None,
                steps: 0,
                tokens: 0,
                cost_usd: None,
                cost_unknown_steps: 0,
                wall_ms: None,
                error: session.and_then(|e| e.error.clone()).or(t.refused.clone()),
            };
            let rec = t.run_id.and_then(|id| store.run(id).ok().flatten());
            if let Some(r) = &rec {
                row.steps = r.steps;
                row.tokens = r.input_tokens + r.output_tokens + r.cached_input_tokens;
                row.cost_usd = r.cost_usd;
                row.cost_unknown_steps = r.cost_unknown_steps;
                row.wall_ms = r.elapsed_ms;
                let outcome: Option<RunOutcome> = r
                    .outcome_json
                    .as_deref()
                    .and_then(|j| serde_json::from_str(j).ok());
                if let Some(o) = outcome {
                    row.exit_code = Some(o.exit_code());
                    row.outcome = serde_json::to_value(&o).ok();
                    row.state = if o.is_resumable() {
                        "unfinished"
                    } else {
                        "ended"
                    };
                    return row;
                }
                row.state = "unfinished";
            }
            match session.and_then(|e| e.code) {
                Some(2) => (row.state, row.exit_code) = ("refused", Some(2)),
                Some(c) => (row.state, row.exit_code) = ("failed", Some(c)),
                None if t.refused.is_some() && rec.is_none() => {
                    (row.state, row.exit_code) = ("refused", Some(2));
                }
                None => {}
            }
            row
        })
        .collect()
}

/// The batch's exit code (see the module docs).
pub fn exit_code(cancelled: bool, rows: &[Row]) -> i32 {
    if cancelled {
        return 130;
    }
    let codes: Vec<i32> = rows
        .iter()
        // A task with no code after an uncancelled session did not finish: the
        // harness failed it.
        .map(|r| r.exit_code.unwrap_or(70))
        .collect();
    if codes.contains(&2) {
        return 2;
    }
    [4, 3, 70, 1, 5]
        .into_iter()
        .find(|c| codes.contains(c))
        .unwrap_or(0)
}

/// Sums over the rows.
#[derive(Debug, Default, Serialize)]
pub struct Totals {
    pub tasks: usize,
    pub succeeded: usize,
    /// Succeeded tasks over all tasks.
    pub pass_rate: f64,
    pub steps: u64,
    pub tokens: u64,
    pub cost_usd: Option<f64>,
    pub cost_unknown_steps: u32,
    /// The tasks' wall times added up.
    pub wall_ms: u64,
}

pub fn totals(rows: &[Row]) -> Totals {
    let mut t = Totals {
        tasks: rows.len(),
        ..Totals::default()
    };
    for r in rows {
        t.succeeded += usize::from(r.exit_code == Some(0) && r.state == "ended");
        t.steps += u64::from(r.steps);
        t.tokens += r.tokens;
        if let Some(c) = r.cost_usd {
            t.cost_usd = Some(t.cost_usd.unwrap_or(0.0) + c);
        }
        t.cost_unknown_steps += r.cost_unknown_steps;
        t.wall_ms += r.wall_ms.unwrap_or(0);
    }
    if t.tasks > 0 {
        t.pass_rate = t.succeeded as f64 / t.tasks as f64;
    }
    t
}

/// What the summary says beside the rows.
pub struct Heading<'a> {
    pub batch: &'a BatchRecord,
    pub status: &'a str,
    pub jobs: u32,
    pub spent: Option<f64>,
    pub session_ms: u64,
    pub code: i32,
}

/// Prints the summary: a table, or the `batch` JSON document.
pub fn print(h: &Heading<'_>, rows: &[Row], json: bool) {
    let t = totals(rows);
    if json {
        let doc = serde_json::json!({
            "batch_id": h.batch.id,
            "status": h.status,
            "jobs": h.jobs,
            "max_cost_usd": h.batch.max_cost_usd,
            "spent_usd": h.spent,
            "session_ms": h.session_ms,
            "exit_code": h.code,
            "tasks": rows,
            "totals": t,
        });
        super::json_out::print("batch", doc, &Default::default());
        return;
    }
    outln!(
        "batch {}: {} task(s), {} at once, {}",
        h.batch.id,
        rows.len(),
        h.jobs,
        h.status
    );
    outln!(
        "{:>4}  {:>5}  {:<24}  {:>5}  {:>8}  {:>10}  {:>8}  source",
        "task",
        "run",
        "outcome",
        "steps",
        "tokens",
        "cost",
        "wall"
    );
    for r in rows {
        let outcome = r
            .outcome
            .as_ref()
            .and_then(|o| o["outcome"].as_str().map(str::to_string))
            .unwrap_or_else(|| r.state.replace('_', " "));
        outln!(
            "{:>4}  {:>5}  {:<24}  {:>5}  {:>8}  {:>10}  {:>8}  {}",
            r.position,
            r.run_id.map_or("-".into(), |i| i.to_string()),
            outcome,
            r.steps,
            output::tokens(r.tokens),
            output::cost(r.cost_usd, r.cost_unknown_steps),
            r.wall_ms.map_or("-".into(), secs),
            output::sanitize(&r.source)
        );
        if let Some(e) = &r.error {
            outln!("      {}", output::sanitize(e.lines().next().unwrap_or("")));
        }
    }
    outln!(
        "total: {} succeeded of {} (pass rate {:.1}%) · {} steps · {} tokens · {} · {} of task time in {}",
        t.succeeded,
        t.tasks,
        t.pass_rate * 100.0,
        t.steps,
        output::tokens(t.tokens),
        output::cost(t.cost_usd, t.cost_unknown_steps),
        secs(t.wall_ms),
        secs(h.session_ms)
    );
    if let (Some(max), Some(spent)) = (h.batch.max_cost_usd, h.spent) {
        outln!("batch budget: ${spent:.4} of ${max:.4} spent");
    }
    if h.status != "finished" {
        outln!("resume with: io-harness batch --resume {}", h.batch.id);
    }
}

fn secs(ms: u64) -> String {
    format!("{:.1} s", ms as f64 / 1000.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(code: Option<i32>) -> Row {
        Row {
            position: 1,
            source: "a".into(),
            run_id: None,
            state: "ended",
            outcome: None,
            exit_code: code,
            steps: 0,
            tokens: 0,
            cost_usd: None,
            cost_unknown_steps: 0,
            wall_ms: None,
            error: None,
        }
    }

    #[test]
    fn the_exit_precedence_is_the_issues() {
        let of = |codes: &[i32]| -> Vec<Row> { codes.iter().map(|c| row(Some(*c))).collect() };
        assert_eq!(exit_code(false, &of(&[0, 0])), 0);
        assert_eq!(exit_code(true, &of(&[0, 2, 4])), 130);
        assert_eq!(exit_code(false, &of(&[1, 4, 2, 3])), 2);
        assert_eq!(exit_code(false, &of(&[5, 1, 70, 3, 4])), 4);
        assert_eq!(exit_code(false, &of(&[5, 1, 70, 3])), 3);
        assert_eq!(exit_code(false, &of(&[5, 1, 70])), 70);
        assert_eq!(exit_code(false, &of(&[5, 1, 0])), 1);
        assert_eq!(exit_code(false, &of(&[0, 5])), 5);
        assert_eq!(exit_code(false, &[row(None), row(Some(1))]), 70);
    }
}
