//! The run-level sections: header (goal, outcome, budgets, cost, providers, backend),
//! verification, policy and approvals, sandbox sessions, context decisions, MCP and
//! sub-agents. Each reads only what the store recorded and says "not recorded" for
//! what it did not, never a guess.

use serde_json::Value;

use super::RunView;
use super::html::Html;

/// Gate output shown per event.
const MAX_GATE_OUTPUT: usize = 4 * 1024;

/// Goal, outcome with its reason, budgets used against their limits, cost, the
/// provider chain and the backends that isolated commands.
pub(crate) fn header(h: &mut Html<'_>, v: &RunView) {
    let r = &v.run;
    h.raw("<h2>");
    if let Some(l) = &v.link {
        h.fmt(format_args!(
            "<a href=\"#run-{0}\">run {0}</a> › ",
            l.parent_run_id
        ));
    }
    h.fmt(format_args!("run {}</h2>", r.id));
    h.raw("<dl class=\"head\"><dt>goal</dt><dd class=\"goal\">");
    // A sub-agent's goal was written by its parent's model, not by the operator
    // (adversary B10 of issue 20).
    if v.link.is_some() {
        h.untrusted("the parent's model (a sub-agent's goal)", &r.goal, 4096);
    } else {
        h.text(&r.goal);
    }
    h.raw("</dd>");
    let outcome = r.outcome.as_deref().unwrap_or(&r.status);
    h.raw("<dt>outcome</dt><dd><span class=\"outcome o-")
        .text(outcome)
        .raw("\" id=\"outcome-")
        .fmt(format_args!("{}", r.id))
        .raw("\">")
        .text(outcome)
        .raw("</span>");
    if let Some(reason) = outcome_reason(r.outcome_json.as_deref()) {
        h.raw(" <span class=\"reason\">")
            .text(&reason)
            .raw("</span>");
    }
    h.raw(" <span class=\"muted\">(status ")
        .text(&r.status)
        .raw(")</span></dd>");
    if let Some(l) = &v.link {
        h.raw("<dt>sub-agent</dt><dd>")
            .text(&l.name)
            .fmt(format_args!(
                " at depth {}, spawned at step {} of run {}</dd>",
                l.depth, l.step, l.parent_run_id
            ));
    }
    budgets(h, v);
    h.raw("<dt>cost</dt><dd>");
    match r.cost_usd {
        Some(c) => h.fmt(format_args!("${c:.6}")),
        None => h.raw("unknown"),
    };
    if r.cost_unknown_steps > 0 {
        h.fmt(format_args!(
            " ({} step(s) of unknown price)",
            r.cost_unknown_steps
        ));
    }
    h.raw("</dd><dt>providers</dt><dd>");
    providers(h, r.contract_json.as_deref(), r.provider_json.as_deref());
    h.raw("</dd><dt>backend</dt><dd id=\"backend-")
        .fmt(format_args!("{}", r.id))
        .raw("\">");
    let mut backends: Vec<&str> = v.sessions.iter().map(|s| s.backend.as_str()).collect();
    backends.sort_unstable();
    backends.dedup();
    if backends.is_empty() {
        h.raw("no sandboxed command ran");
    } else {
        h.text(&backends.join(", "));
    }
    h.raw("</dd><dt>workspace</dt><dd>")
        .text(&r.root)
        .raw("</dd></dl>");
}

/// The outcome's details (failed criteria, error kind, pending request…) as one line.
fn outcome_reason(json: Option<&str>) -> Option<String> {
    let v: Value = serde_json::from_str(json?).ok()?;
    let obj = v.as_object()?;
    let parts: Vec<String> = obj
        .iter()
        .filter(|(k, _)| k.as_str() != "outcome")
        .map(|(k, v)| match v {
            Value::String(s) => format!("{k}: {s}"),
            v => format!("{k}: {v}"),
        })
        .collect();
    (!parts.is_empty()).then(|| parts.join(", "))
}

/// Steps, time, tokens and cost used, each against its limit from the contract.
fn budgets(h: &mut Html<'_>, v: &RunView) {
    let r = &v.run;
    let budget = r
        .contract_json
        .as_deref()
        .and_then(|c| serde_json::from_str::<Value>(c).ok())
        .map(|c| c["budget"].clone())
        .unwrap_or(Value::Null);
    let limit = |k: &str| match &budget[k] {
        Value::Null => "no limit".to_string(),
        n => n.to_string(),
    };
    h.raw("<dt>budgets</dt><dd><table class=\"budgets\"><tr><th></th><th>used</th><th>limit</th></tr>");
    h.fmt(format_args!(
        "<tr><td>steps</td><td>{}</td><td>{}</td></tr>",
        r.steps,
        limit("max_steps")
    ));
    let elapsed = r
        .elapsed_ms
        .map_or("not recorded".to_string(), |ms| format!("{ms} ms"));
    let max_duration = match &budget["max_duration"] {
        Value::Null => "no limit".to_string(),
        n => format!("{n} ms"),
    };
    h.fmt(format_args!(
        "<tr><td>time</td><td>{elapsed}</td><td>{max_duration}</td></tr>"
    ));
    h.fmt(format_args!(
        "<tr><td>tokens</td><td>{} (in {}, out {}{})</td><td>{}</td></tr>",
        r.input_tokens + r.output_tokens,
        r.input_tokens,
        r.output_tokens,
        if r.estimated_tokens > 0 {
            format!(", {} estimated", r.estimated_tokens)
        } else {
            String::new()
        },
        limit("max_tokens")
    ));
    h.fmt(format_args!(
        "<tr><td>cost (USD)</td><td>{}</td><td>{}</td></tr></table></dd>",
        r.cost_usd.map_or("unknown".into(), |c| format!("{c:.6}")),
        limit("max_cost_usd")
    ));
}

/// The provider chain in order (primary first), kind and model.
fn providers(h: &mut Html<'_>, contract: Option<&str>, primary: Option<&str>) {
    let chain: Vec<Value> = contract
        .and_then(|c| serde_json::from_str::<Value>(c).ok())
        .and_then(|c| c["providers"].as_array().cloned())
        .unwrap_or_default();
    let primary: Option<Value> = primary.and_then(|p| serde_json::from_str(p).ok());
    let mut names: Vec<String> = chain
        .iter()
        .map(|p| {
            let kind = p["kind"].as_str().unwrap_or("?");
            match p["model"].as_str() {
                Some(m) => format!("{kind}/{m}"),
                None => kind.to_string(),
            }
        })
        .collect();
    if names.is_empty()
        && let Some(p) = primary
    {
        names.push(format!(
            "{}/{}",
            p["kind"].as_str().unwrap_or("?"),
            p["model"].as_str().unwrap_or("?")
        ));
    }
    if names.is_empty() {
        h.raw("not recorded");
    } else {
        h.text(&names.join(" → "));
    }
}

/// Each gate session (a verification command) with its exit, and what the gates
/// recorded: failed phases, trust, test counts and bounded output.
pub(crate) fn verification(h: &mut Html<'_>, v: &RunView) {
    h.raw("<h3>Verification</h3>");
    let gate_kinds = [
        "gate_phase_failed",
        "gate_output",
        "gate_trust",
        "gate_tests",
        "criterion_restored",
        "quarantined",
    ];
    let events: Vec<_> = v
        .sandbox
        .iter()
        .filter(|e| gate_kinds.contains(&e.kind.as_str()))
        .collect();
    let gates: Vec<_> = v.sessions.iter().filter(|s| s.purpose == "gate").collect();
    if events.is_empty() && gates.is_empty() {
        h.raw("<p class=\"muted\">No gate command ran or failed a phase (content checks leave no record beyond the outcome).</p>");
        return;
    }
    h.raw("<ul class=\"gates\">");
    for s in &gates {
        h.fmt(format_args!("<li class=\"gate\">step {} · <code>", s.step))
            .text(&argv(&s.argv_json))
            .raw("</code> · ");
        exit(h, s);
        h.fmt(format_args!(" · {} ms</li>", s.duration_ms));
    }
    for e in &events {
        h.fmt(format_args!(
            "<li class=\"gate-event\">step {} · <b>",
            e.step
        ))
        .text(&e.kind)
        .raw("</b>");
        if let Some(d) = &e.detail {
            if e.kind == "gate_output" {
                h.untrusted("gate output", d, MAX_GATE_OUTPUT);
            } else {
                h.raw(" ").text(d);
            }
        }
        h.raw("</li>");
    }
    h.raw("</ul>");
}

/// An argv stored as a JSON array, shown space-joined.
fn argv(json: &str) -> String {
    serde_json::from_str::<Vec<String>>(json).map_or_else(|_| json.to_string(), |a| a.join(" "))
}

fn exit(h: &mut Html<'_>, s: &crate::store::SandboxSession) {
    match (s.exit_code, s.signal, &s.cap_hit) {
        (_, _, Some(cap)) => h.raw("cap hit: ").text(cap),
        (Some(c), _, _) => h.fmt(format_args!("exit {c}")),
        (None, Some(sig), _) => h.fmt(format_args!("signal {sig}")),
        _ => h.raw("no exit recorded"),
    };
}

/// Decisions other than allow (all of them, in order), the count of allows, and each
/// approval request with its answer.
pub(crate) fn policy(h: &mut Html<'_>, v: &RunView) {
    let allowed = v.policy.iter().filter(|p| p.decision == "allow").count();
    h.fmt(format_args!(
        "<h3>Policy</h3><p>{} decision(s), {} allowed.</p>",
        v.policy.len(),
        allowed
    ));
    let others: Vec<_> = v.policy.iter().filter(|p| p.decision != "allow").collect();
    if !others.is_empty() {
        h.raw("<table class=\"policy-table\"><tr><th>step</th><th>decision</th><th>act</th><th>target</th><th>rule</th><th>layer</th></tr>");
        for p in others {
            h.fmt(format_args!(
                "<tr class=\"d-{}\"><td>{}</td><td>",
                html_class(&p.decision),
                p.step
            ))
            .text(&p.decision)
            .raw("</td><td>")
            .text(&p.act)
            .raw("</td><td><code class=\"ut\" title=\"untrusted: named by the agent\">")
            .text(&p.target)
            .raw("</code></td><td>")
            .text(&p.rule)
            .raw("</td><td>")
            .text(&p.layer)
            .raw("</td></tr>");
        }
        h.raw("</table>");
    }
    if !v.approvals.is_empty() {
        h.raw("<h4>Approvals</h4><ul>");
        for a in &v.approvals {
            h.raw("<li class=\"approval\">request <code>")
                .text(&a.request_id)
                .fmt(format_args!("</code> (step {}) tool <code>", a.step))
                .text(&a.tool)
                .raw("</code>: <b>")
                .text(&a.status)
                .raw("</b>");
            if let Ok(action) = serde_json::from_str::<crate::policy::Action>(&a.action_json) {
                h.raw(" — ")
                    .text(action.act.as_str())
                    .raw(" <code class=\"ut\" title=\"untrusted: named by the agent\">")
                    .text(&action.target)
                    .raw("</code>");
            }
            if let Some(r) = &a.reason {
                h.raw(" — reason: ").text(r);
            }
            h.raw("</li>");
        }
        h.raw("</ul>");
    }
}

/// A decision word as a class name (a closed set; anything else is `other`).
fn html_class(decision: &str) -> &'static str {
    match decision {
        "deny" => "deny",
        "ask" => "ask",
        "allow" => "allow",
        _ => "other",
    }
}

/// Every sandbox session: purpose, backend, the layers it reported applying, the
/// caps asked for and which were hit, network posture and egress counts.
pub(crate) fn sandbox(h: &mut Html<'_>, v: &RunView) {
    h.raw("<h3>Sandbox sessions</h3>");
    if v.sessions.is_empty() {
        h.raw("<p class=\"muted\">No sandboxed command ran.</p>");
        return;
    }
    h.raw("<table class=\"sessions\"><tr><th>step</th><th>purpose</th><th>command</th><th>backend</th><th>layers</th><th>caps</th><th>network</th><th>end</th></tr>");
    for s in &v.sessions {
        h.fmt(format_args!("<tr><td>{}</td><td>", s.step))
            .text(&s.purpose)
            .raw("</td><td><code class=\"ut\" title=\"untrusted: the agent's command\">")
            .bounded(&argv(&s.argv_json), 300)
            .raw("</code></td><td>")
            .text(&s.backend)
            .raw("</td><td>")
            .text(&layers_summary(&s.layers_json))
            .raw("</td><td>")
            .text(&caps_summary(&s.limits_json, &s.layers_json))
            .raw("</td><td>")
            .text(&s.network);
        if s.network == "allowlist" {
            h.raw(" ").text(&s.allow_hosts_json);
        }
        match (s.egress_admitted_reported, s.egress_refusals_reported) {
            (Some(a), Some(r)) => {
                h.fmt(format_args!(" (proxy reported {a} admitted, {r} refused)"))
            }
            _ => h,
        };
        h.raw("</td><td>");
        exit(h, s);
        h.raw("</td></tr>");
    }
    h.raw("</table>");
}

/// The layers a session reported: namespaces, Landlock's status, seccomp, masks.
fn layers_summary(json: &str) -> String {
    let Ok(l) = serde_json::from_str::<Value>(json) else {
        return "not recorded".into();
    };
    let mut parts = Vec::new();
    // An empty list is no layer (adversary B8 of issue 20: a portable-floor session
    // read "namespaces").
    if let Some(ns) = l["namespaces"].as_array()
        && !ns.is_empty()
    {
        let names: Vec<&str> = ns.iter().filter_map(Value::as_str).collect();
        parts.push(format!("namespaces {}", names.join("/")));
    }
    if let Some(s) = l["landlock"]["status"].as_str() {
        parts.push(format!("landlock {s}"));
    }
    if l["seccomp"].as_bool() == Some(true) {
        parts.push("seccomp".into());
    }
    if l["no_new_privs"].as_bool() == Some(true) {
        parts.push("no_new_privs".into());
    }
    if let Some(u) = l["host_uid"].as_u64() {
        parts.push(format!("host uid {u}"));
    }
    if let Some(m) = l["mounts"]["masked"].as_array().filter(|m| !m.is_empty()) {
        parts.push(format!("{} path(s) masked", m.len()));
    }
    if parts.is_empty() {
        "none reported".into()
    } else {
        parts.join(", ")
    }
}

/// The caps asked for and, per enforced cap, whether it was hit.
fn caps_summary(limits: &str, layers: &str) -> String {
    let asked = serde_json::from_str::<Value>(limits).unwrap_or(Value::Null);
    let caps = serde_json::from_str::<Value>(layers)
        .map(|l| l["limits"]["caps"].clone())
        .unwrap_or(Value::Null);
    let mut parts = Vec::new();
    if let Some(o) = asked.as_object() {
        for (k, v) in o {
            parts.push(format!("{k}={v}"));
        }
    }
    if let Some(o) = caps.as_object() {
        let hit: Vec<&str> = o
            .iter()
            .filter(|(_, v)| v.as_str() == Some("hit"))
            .map(|(k, _)| k.as_str())
            .collect();
        if !hit.is_empty() {
            parts.push(format!("HIT: {}", hit.join(", ")));
        }
    }
    parts.join(" ")
}

/// Context decisions other than the plain assembly of each request: stubs, re-reads,
/// trims and drops, with the tokens before and after.
pub(crate) fn context(h: &mut Html<'_>, v: &RunView) {
    h.raw("<h3>Context decisions</h3>");
    let decisions: Vec<_> = v.context.iter().filter(|e| e.kind != "assembled").collect();
    let assembled = v.context.len() - decisions.len();
    h.fmt(format_args!(
        "<p>{assembled} request(s) assembled; {} other decision(s).</p>",
        decisions.len()
    ));
    if decisions.is_empty() {
        return;
    }
    h.raw("<table class=\"context\"><tr><th>step</th><th>decision</th><th>observation</th><th>tokens before → after</th><th>detail</th></tr>");
    for e in decisions {
        h.fmt(format_args!("<tr><td>{}</td><td>", e.step))
            .text(&e.kind)
            .raw("</td><td>");
        if let Some(t) = &e.tool {
            h.text(t).raw(" ");
        }
        if let Some(t) = &e.target {
            h.raw("<code>").text(t).raw("</code>");
        }
        if let Some(s) = e.obs_step {
            h.fmt(format_args!(" (step {s})"));
        }
        let n = |x: Option<u64>| x.map_or("-".to_string(), |x| x.to_string());
        h.fmt(format_args!(
            "</td><td>{} → {}</td><td>",
            n(e.tokens_before),
            n(e.tokens_after)
        ))
        .bounded(e.detail.as_deref().unwrap_or(""), 300)
        .raw("</td></tr>");
    }
    h.raw("</table>");
}

/// MCP events, one a line.
pub(crate) fn mcp(h: &mut Html<'_>, v: &RunView) {
    if v.mcp.is_empty() {
        return;
    }
    h.raw("<h3>MCP</h3><ul>");
    for e in &v.mcp {
        h.fmt(format_args!("<li>step {} · ", e.step))
            .text(&e.server)
            .raw(" · ")
            .text(&e.kind);
        if let Some(t) = &e.tool {
            h.raw(" <code>").text(t).raw("</code>");
        }
        if let Some(o) = &e.outcome {
            h.raw(" → ").text(o);
        }
        h.raw("</li>");
    }
    h.raw("</ul>");
}

/// The tree of sub-agents below this run, each linking to its own section.
pub(crate) fn subagents(h: &mut Html<'_>, v: &RunView) {
    if v.children.is_empty() && v.not_shown.is_empty() {
        return;
    }
    h.raw("<h3>Sub-agents</h3>");
    tree(h, v);
}

fn tree(h: &mut Html<'_>, v: &RunView) {
    h.raw("<ul class=\"tree\">");
    for c in &v.children {
        h.fmt(format_args!(
            "<li><a href=\"#run-{0}\">run {0}</a> ",
            c.run.id
        ));
        if let Some(l) = &c.link {
            h.text(&l.name).raw(" · ");
        }
        h.text(c.run.outcome.as_deref().unwrap_or(&c.run.status));
        if !c.children.is_empty() {
            tree(h, c);
        }
        h.raw("</li>");
    }
    for id in &v.not_shown {
        h.fmt(format_args!(
            "<li>run {id} (not shown on this page: io-harness report {id})</li>"
        ));
    }
    h.raw("</ul>");
}

#[cfg(test)]
mod tests {
    use super::layers_summary;

    /// Adversary B8 of issue 20: a portable-floor session (no namespaces) was shown
    /// with the layer "namespaces".
    #[test]
    fn an_empty_namespace_list_is_no_layer() {
        let floor = layers_summary(r#"{"namespaces": [], "seccomp": true}"#);
        assert!(!floor.contains("namespaces"), "{floor}");
        assert!(floor.contains("seccomp"), "{floor}");
        let native = layers_summary(r#"{"namespaces": ["user", "mount"]}"#);
        assert!(native.contains("namespaces user/mount"), "{native}");
    }
}
