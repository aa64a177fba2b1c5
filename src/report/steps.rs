//! The step timeline: per step its tokens, cost and time, the model's text, each tool
//! call with its arguments and output (collapsed and bounded), the provider's failed
//! attempts with the waits between them, and the step's non-allow policy decisions.

use crate::provider::{ContentBlock, Message, Role};
use crate::store::{ProviderAttempt, StepRecord, ToolCallRecord};

use super::RunView;
use super::html::Html;

/// Longest model text shown per block (the store has all of it).
const MAX_TEXT: usize = 8 * 1024;
/// Longest tool argument or output shown.
const MAX_TOOL: usize = 2 * 1024;

/// Tool calls of one step shown in full; the rest are named (a reply may hold 64).
const MAX_CALLS_SHOWN: usize = 16;
/// Timeline markup a page holds in full; later steps show their summary line only
/// (adversary B6 of issue 20: 100 steps of 64 calls made a 29.6 MB page that took
/// Chromium 23 s to open).
const TIMELINE_BUDGET: usize = 2 * 1024 * 1024;

/// The timeline section.
pub(crate) fn timeline(h: &mut Html<'_>, v: &RunView) {
    h.raw("<h3>Steps</h3><ol class=\"timeline\">");
    let start = h.len();
    let mut summarised = 0;
    for st in &v.steps {
        let full = h.len() - start < TIMELINE_BUDGET;
        step(h, v, st, full);
        summarised += usize::from(!full);
    }
    uncommitted(h, v);
    h.raw("</ol>");
    if summarised > 0 {
        h.fmt(format_args!(
            "<p class=\"cut\" id=\"steps-cut\">{summarised} step(s) shown by their summary line only: the page holds {} MiB of step details (io-harness show {} has them all).</p>",
            TIMELINE_BUDGET >> 20,
            v.run.id
        ));
    }
}

fn step(h: &mut Html<'_>, v: &RunView, st: &StepRecord, full: bool) {
    h.fmt(format_args!(
        "<li class=\"step\" id=\"run-{}-step-{}\" data-step=\"{}\"><details open><summary><b>step {}</b> · {} ms (model {} ms) · in {} out {}{} · {}",
        v.run.id,
        st.step,
        st.step,
        st.step,
        st.duration_ms,
        st.model_ms,
        st.input_tokens,
        st.output_tokens,
        if st.token_source == "estimated" {
            " (estimated)"
        } else {
            ""
        },
        st.cost_usd
            .map_or("cost unknown".to_string(), |c| format!("${c:.6}"))
    ));
    if let Some(p) = &st.provider {
        h.raw(" · ").text(p);
    }
    h.raw("</summary>");
    if !full {
        h.raw("<p class=\"muted\">details not shown (page budget)</p></details></li>");
        return;
    }
    attempts(h, v.attempts.iter().filter(|a| a.step == st.step));
    messages(h, &st.messages_json);
    for c in st.tool_calls.iter().take(MAX_CALLS_SHOWN) {
        tool_call(h, v, st.step, c);
    }
    if let Some(rest) = st.tool_calls.get(MAX_CALLS_SHOWN..)
        && !rest.is_empty()
    {
        h.fmt(format_args!(
            "<p class=\"cut\">{} more tool call(s) in this step, not shown: ",
            rest.len()
        ));
        for (i, c) in rest.iter().take(20).enumerate() {
            if i > 0 {
                h.raw(", ");
            }
            h.raw("<code>").bounded(&c.name, 64).raw("</code>");
        }
        h.raw("</p>");
    }
    for p in v
        .policy
        .iter()
        .filter(|p| p.step == st.step && p.decision != "allow")
    {
        h.raw("<div class=\"policy ")
            .text(&p.decision)
            .raw("\">policy <b>")
            .text(&p.decision)
            .raw("</b> ")
            .text(&p.act)
            .raw(" <code>")
            .text(&p.target)
            .raw("</code>: ")
            .text(&p.rule)
            .raw(" (")
            .text(&p.layer)
            .raw(" layer)</div>");
    }
    h.raw("</details></li>");
}

/// The text blocks of the step's messages: the model's as untrusted model text, the
/// harness's own notes (verification feedback) as what they are.
fn messages(h: &mut Html<'_>, messages_json: &str) {
    let Ok(msgs) = serde_json::from_str::<Vec<Message>>(messages_json) else {
        return;
    };
    for m in &msgs {
        for b in &m.content {
            match b {
                ContentBlock::Text { text } if m.role == Role::Assistant => {
                    h.untrusted("model", text, MAX_TEXT);
                }
                ContentBlock::Text { text } => {
                    h.raw("<div class=\"harness\"><div class=\"src\">harness</div><pre>")
                        .bounded(text, MAX_TEXT)
                        .raw("</pre></div>");
                }
                ContentBlock::Thinking { thinking, .. } => {
                    h.untrusted("model thinking", thinking, MAX_TEXT);
                }
                _ => {}
            }
        }
    }
}

fn tool_call(h: &mut Html<'_>, v: &RunView, step: u32, c: &ToolCallRecord) {
    let mark = if c.confinement_refusal.is_some() {
        "refused"
    } else if c.is_error {
        "error"
    } else {
        "ok"
    };
    h.raw("<details class=\"tool ")
        .raw(mark)
        .raw("\"><summary>tool <code>")
        .text(&c.name)
        .raw("</code> <span class=\"mark\">")
        .raw(mark)
        .fmt(format_args!("</span> · {} ms</summary>", c.duration_ms));
    h.raw("<div class=\"kv\">arguments</div>");
    h.untrusted("model (tool arguments)", &c.input_json, MAX_TOOL);
    if let Some(r) = &c.confinement_refusal {
        h.raw("<div class=\"kv\">refused: ").text(r).raw("</div>");
    }
    h.raw("<div class=\"kv\">output</div>");
    h.untrusted("tool output", &c.output, MAX_TOOL);
    h.raw("</details>");
    if let Some(child) = v.children.iter().find(|ch| {
        ch.link
            .as_ref()
            .is_some_and(|l| l.step == step && l.call_id == c.call_id)
    }) {
        h.fmt(format_args!(
            "<div class=\"spawn\">↳ <a href=\"#run-{0}\">sub-agent run {0}</a></div>",
            child.run.id
        ));
    }
}

/// Failed provider attempts: what failed, what the server said, how long the harness
/// waited and what it did next.
fn attempts<'a>(h: &mut Html<'_>, it: impl Iterator<Item = &'a ProviderAttempt>) {
    for a in it {
        h.raw("<div class=\"attempt\">provider ")
            .text(&a.provider)
            .fmt(format_args!(" attempt {} failed: ", a.attempt))
            .text(&a.kind);
        if let Some(s) = a.status {
            h.fmt(format_args!(" (HTTP {s})"));
        }
        h.raw(" → <b>")
            .text(&a.next)
            .fmt(format_args!("</b> after a wait of {} ms", a.delay_ms));
        if let Some(m) = &a.message {
            h.raw("<div class=\"said\">server said: <code class=\"ut\" title=\"untrusted: the provider's words\">")
                .bounded(m, 600)
                .raw("</code></div>");
        }
        h.raw("</div>");
    }
}

/// Steps that never committed (a run that escalated or awaits approval ends on one):
/// their attempts and context events.
fn uncommitted(h: &mut Html<'_>, v: &RunView) {
    let committed = v.steps.last().map_or(0, |s| s.step);
    let mut steps: Vec<u32> = v
        .attempts
        .iter()
        .map(|a| a.step)
        .chain(v.context.iter().map(|e| e.step))
        .chain(v.approvals.iter().map(|a| a.step))
        .filter(|s| *s > committed)
        .collect();
    steps.sort_unstable();
    steps.dedup();
    for s in steps {
        h.fmt(format_args!(
            "<li class=\"step uncommitted\" id=\"run-{}-step-{s}\" data-step=\"{s}\"><details open><summary><b>step {s}</b> · not committed</summary>",
            v.run.id
        ));
        attempts(h, v.attempts.iter().filter(|a| a.step == s));
        for a in v.approvals.iter().filter(|a| a.step == s) {
            h.raw("<div class=\"approval\">approval ")
                .text(&a.request_id)
                .raw(" for tool <code>")
                .text(&a.tool)
                .raw("</code>: <b>")
                .text(&a.status)
                .raw("</b></div>");
        }
        h.raw("</details></li>");
    }
}
