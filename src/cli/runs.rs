//! `io-harness runs`: the root runs in the store, newest first, each with the number
//! of sub-agents it spawned (`show` draws the tree). A root's tokens and cost in the
//! table are its whole tree's; `--json` keeps each record's own and adds `tree`.

use super::{CliError, ListArgs, output, store_path};

pub fn execute(args: ListArgs) -> Result<i32, CliError> {
    if let Some(super::RunsCommand::Prune(p)) = args.command {
        return super::prune::execute(p);
    }
    let store = store_path::open_existing(&args.store)?;
    let all = store.runs()?;
    let in_batch: Option<Vec<i64>> = match args.batch {
        Some(id) => Some(
            store
                .batch(id)?
                .ok_or_else(|| CliError::Usage(format!("no batch with id {id}")))?
                .tasks
                .iter()
                .filter_map(|t| t.run_id)
                .collect(),
        ),
        None => None,
    };
    let children = |id: i64| all.iter().filter(|r| r.parent_run_id == Some(id)).count();
    // Newest first (the store's order); `--since` and `--limit` narrow the roots.
    let runs: Vec<&io_harness::store::RunRecord> = all
        .iter()
        .filter(|r| r.parent_run_id.is_none())
        .filter(|r| in_batch.as_ref().is_none_or(|ids| ids.contains(&r.id)))
        .filter(|r| args.since.is_none_or(|t| r.started_at_ms >= t))
        .take(args.limit.unwrap_or(usize::MAX))
        .collect();
    let tree = |r: &io_harness::store::RunRecord| tree_totals(&all, r);
    if args.json {
        let listed: Vec<serde_json::Value> = runs
            .iter()
            .map(|r| {
                let mut v = serde_json::to_value(r).unwrap_or_default();
                v["status"] = status(r).into();
                v["children"] = children(r.id).into();
                v["tree"] = serde_json::to_value(tree(r)).unwrap_or_default();
                v
            })
            .collect();
        super::json_out::print(
            "runs",
            serde_json::json!({ "runs": listed }),
            &Default::default(),
        );
        return Ok(0);
    }
    if runs.is_empty() {
        outln!("no runs yet");
        return Ok(0);
    }
    outln!(
        "{:>5}  {:<22}  {:>5}  {:>6}  {:>8}  {:>10}  {:<20}  goal",
        "id",
        "outcome",
        "steps",
        "agents",
        "tokens",
        "cost",
        "started"
    );
    for r in runs {
        let outcome = r.outcome.clone().unwrap_or_else(|| status(r));
        let t = tree(r);
        let total = t.input_tokens + t.output_tokens + t.cached_input_tokens;
        let goal: String = output::sanitize(&r.goal).chars().take(60).collect();
        outln!(
            "{:>5}  {:<22}  {:>5}  {:>6}  {:>8}  {:>10}  {:<20}  {}",
            r.id,
            outcome,
            r.steps,
            children(r.id),
            output::tokens(total),
            output::cost(t.cost_usd, t.cost_unknown_steps),
            format_ms(r.started_at_ms),
            goal
        );
    }
    Ok(0)
}

/// A run's usage with all its sub-agents'.
#[derive(Debug, Default, serde::Serialize)]
struct TreeTotals {
    runs: usize,
    steps: u32,
    input_tokens: u64,
    output_tokens: u64,
    cached_input_tokens: u64,
    cost_usd: Option<f64>,
    cost_unknown_steps: u32,
    /// The part of the tokens that is the harness's estimate.
    estimated_tokens: u64,
    lost_calls: u64,
}

/// Sums `root` and its descendants from the listed runs (ids grow with creation, so
/// a child's id is above its parent's: one pass in id order finds every descendant).
fn tree_totals(
    all: &[io_harness::store::RunRecord],
    root: &io_harness::store::RunRecord,
) -> TreeTotals {
    let mut sorted: Vec<&io_harness::store::RunRecord> =
        all.iter().filter(|r| r.id >= root.id).collect();
    sorted.sort_by_key(|r| r.id);
    let mut members = std::collections::BTreeSet::from([root.id]);
    let mut t = TreeTotals::default();
    for r in sorted {
        if r.id != root.id && !r.parent_run_id.is_some_and(|p| members.contains(&p)) {
            continue;
        }
        members.insert(r.id);
        t.runs += 1;
        t.steps += r.steps;
        t.input_tokens += r.input_tokens;
        t.output_tokens += r.output_tokens;
        t.cached_input_tokens += r.cached_input_tokens;
        if let Some(c) = r.cost_usd {
            t.cost_usd = Some(t.cost_usd.unwrap_or(0.0) + c);
        }
        t.cost_unknown_steps += r.cost_unknown_steps;
        t.estimated_tokens += r.estimated_tokens;
        t.lost_calls += r.lost_calls;
    }
    t
}

/// `running` only while a process drives the run; `interrupted` once none does.
pub fn status(r: &io_harness::store::RunRecord) -> String {
    match (&*r.status, &r.scratch_dir) {
        ("running", Some(dir)) if !io_harness::run::is_live(std::path::Path::new(dir)) => {
            "interrupted".into()
        }
        (s, _) => s.to_string(),
    }
}

pub fn format_ms(ms: i64) -> String {
    let t =
        std::time::UNIX_EPOCH + std::time::Duration::from_millis(u64::try_from(ms).unwrap_or(0));
    humantime::format_rfc3339_seconds(t).to_string()
}
