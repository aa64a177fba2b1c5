//! Per-step tokens and cost as an inline SVG bar chart, drawn here.
//!
//! No chart library: the page must work offline and carry nothing a CSP hash does not
//! cover, and a bar per step is a few rectangles. Input and output tokens stack in
//! one bar per step; a step whose cost is known gets a dot on the cost scale, and a
//! step with an estimated token count is drawn hatched-grey, not as if reported.

use super::html::Html;
use crate::store::StepRecord;

const WIDTH: f64 = 900.0;
const HEIGHT: f64 = 160.0;
const PAD: f64 = 30.0;

/// Writes the chart for `steps` (nothing for a run without steps).
pub(crate) fn write(h: &mut Html<'_>, steps: &[StepRecord]) {
    if steps.is_empty() {
        h.raw("<p class=\"muted\">No committed steps.</p>");
        return;
    }
    let max_tokens = steps
        .iter()
        .map(|s| s.input_tokens + s.output_tokens)
        .max()
        .unwrap_or(0)
        .max(1) as f64;
    let max_cost = steps
        .iter()
        .filter_map(|s| s.cost_usd)
        .fold(0.0_f64, f64::max);
    let plot_w = WIDTH - 2.0 * PAD;
    let plot_h = HEIGHT - 2.0 * PAD;
    let slot = plot_w / steps.len() as f64;
    let bar = (slot * 0.8).max(1.0);
    h.fmt(format_args!(
        "<svg class=\"chart\" role=\"img\" aria-label=\"tokens and cost per step\" viewBox=\"0 0 {WIDTH} {HEIGHT}\" width=\"{WIDTH}\" height=\"{HEIGHT}\" xmlns=\"http://www.w3.org/2000/svg\">"
    ));
    h.fmt(format_args!(
        "<line x1=\"{PAD}\" y1=\"{y}\" x2=\"{x2}\" y2=\"{y}\" stroke=\"#888\"/>",
        y = HEIGHT - PAD,
        x2 = WIDTH - PAD
    ));
    h.fmt(format_args!(
        "<text x=\"{PAD}\" y=\"{y}\" font-size=\"11\" fill=\"#555\">{max} tokens</text>",
        y = PAD - 8.0,
        max = max_tokens as u64
    ));
    if max_cost > 0.0 {
        h.fmt(format_args!(
            "<text x=\"{x}\" y=\"{y}\" font-size=\"11\" fill=\"#b06000\" text-anchor=\"end\">${max_cost:.4}</text>",
            x = WIDTH - PAD,
            y = PAD - 8.0
        ));
    }
    for (i, s) in steps.iter().enumerate() {
        let x = PAD + i as f64 * slot + (slot - bar) / 2.0;
        let hin = s.input_tokens as f64 / max_tokens * plot_h;
        let hout = s.output_tokens as f64 / max_tokens * plot_h;
        let base = HEIGHT - PAD;
        let estimated = s.token_source == "estimated";
        let (cin, cout) = if estimated {
            ("#bbbbbb", "#888888")
        } else {
            ("#4a7fc1", "#e0a030")
        };
        h.fmt(format_args!(
            "<g class=\"bar\"><title>step {} · in {} · out {}{}{}</title>",
            s.step,
            s.input_tokens,
            s.output_tokens,
            if estimated { " (estimated)" } else { "" },
            s.cost_usd
                .map_or(" · cost unknown".to_string(), |c| format!(" · ${c:.6}"))
        ));
        h.fmt(format_args!(
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{bar:.1}\" height=\"{hin:.1}\" fill=\"{cin}\"/>",
            base - hin
        ));
        h.fmt(format_args!(
            "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{bar:.1}\" height=\"{hout:.1}\" fill=\"{cout}\"/>",
            base - hin - hout
        ));
        if let (Some(c), true) = (s.cost_usd, max_cost > 0.0) {
            h.fmt(format_args!(
                "<circle cx=\"{:.1}\" cy=\"{:.1}\" r=\"2.5\" fill=\"#b06000\"/>",
                x + bar / 2.0,
                base - c / max_cost * plot_h
            ));
        }
        h.raw("</g>");
        if steps.len() <= 40 || (i + 1) % 10 == 0 {
            h.fmt(format_args!(
                "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"10\" fill=\"#555\" text-anchor=\"middle\">{}</text>",
                x + bar / 2.0,
                base + 14.0,
                s.step
            ));
        }
    }
    h.raw("</svg><p class=\"legend\"><span class=\"k-in\">■</span> input tokens <span class=\"k-out\">■</span> output tokens <span class=\"k-est\">■</span> estimated <span class=\"k-cost\">●</span> cost (where known)</p>");
}
