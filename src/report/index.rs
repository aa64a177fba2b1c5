//! The index page of a batch (`io-harness report --batch ID`): one row per task with
//! its outcome, steps, tokens, cost and wall time, a link to its run's own page
//! (`run-<id>.html`, written beside it), the totals and the pass rate. Built with the
//! same escaping and the same Content-Security-Policy as a run's page: every text a
//! task file or a run could carry is escaped; links are relative file names made of
//! digits only.

use super::{ReportError, assets, html};
use crate::redact::Redactor;
use crate::store::Store;

/// The index page of batch `batch_id`, and the run ids it links (each needs its page
/// written as `run-<id>.html` beside it).
pub fn render_batch(
    store: &Store,
    batch_id: i64,
    redactor: &Redactor,
) -> Result<(String, Vec<i64>), ReportError> {
    let batch = store
        .batch(batch_id)?
        .ok_or(ReportError::NoSuchBatch(batch_id))?;
    let mut h = html::Html::new(redactor);
    h.fmt(format_args!(
        "<header><h1>io-harness batch {}</h1></header>\n",
        batch.id
    ));
    h.raw("<dl class=\"head\"><dt>status</dt><dd>")
        .text(&batch.status)
        .fmt(format_args!(
            "</dd><dt>tasks</dt><dd>{}</dd><dt>at once</dt><dd>{}</dd>",
            batch.tasks.len(),
            batch.jobs
        ));
    if let Some(max) = batch.max_cost_usd {
        h.fmt(format_args!("<dt>budget</dt><dd>${max:.4} in all</dd>"));
    }
    h.raw("</dl>\n<table id=\"tasks\"><tr><th>task</th><th>run</th><th>outcome</th><th>steps</th><th>tokens</th><th>cost</th><th>wall</th><th>source</th></tr>\n");
    let mut linked = Vec::new();
    let (mut ok, mut steps, mut tokens, mut cost, mut wall) = (0usize, 0u64, 0u64, 0f64, 0u64);
    for t in &batch.tasks {
        h.fmt(format_args!("<tr><td>{}</td>", t.position));
        let rec = t.run_id.map(|id| store.run(id)).transpose()?.flatten();
        let Some(r) = rec else {
            let state = if t.refused.is_some() {
                "refused"
            } else {
                "not started"
            };
            h.raw("<td>-</td><td>").text(state);
            if let Some(why) = &t.refused {
                h.raw(" <span class=\"reason\">")
                    .bounded(why, 2048)
                    .raw("</span>");
            }
            h.raw("</td><td></td><td></td><td></td><td></td><td>")
                .text(&t.source)
                .raw("</td></tr>\n");
            continue;
        };
        linked.push(r.id);
        let outcome = r.outcome.as_deref().unwrap_or(&r.status);
        ok += usize::from(outcome == "success");
        let tok = r.input_tokens + r.output_tokens + r.cached_input_tokens;
        steps += u64::from(r.steps);
        tokens += tok;
        cost += r.cost_usd.unwrap_or(0.0);
        wall += r.elapsed_ms.unwrap_or(0);
        h.fmt(format_args!(
            "<td><a href=\"run-{0}.html\">run {0}</a></td><td><span class=\"outcome o-",
            r.id
        ))
        .text(outcome)
        .raw("\">")
        .text(outcome)
        .fmt(format_args!(
            "</span></td><td>{}</td><td>{tok}</td><td>{}</td><td>{}</td><td>",
            r.steps,
            r.cost_usd.map_or("unknown".into(), |c| format!("${c:.4}")),
            r.elapsed_ms
                .map_or("-".into(), |ms| format!("{:.1} s", ms as f64 / 1000.0)),
        ))
        .text(&t.source)
        .raw("</td></tr>\n");
    }
    let n = batch.tasks.len().max(1);
    h.fmt(format_args!(
        "</table>\n<p id=\"totals\">{ok} of {} succeeded (pass rate {:.1}%) · {steps} steps · {tokens} tokens · ${cost:.4} known cost · {:.1} s of task time</p>\n",
        batch.tasks.len(),
        ok as f64 * 100.0 / n as f64,
        wall as f64 / 1000.0
    ));
    let title = format!("io-harness batch {}", batch.id);
    let page = html::document(&title, assets::STYLE, assets::SCRIPT, &h.into_string());
    Ok((page, linked))
}
