//! `io-harness show <run-id>`: the trace of one run, from the store alone.

use io_harness::provider::{ContentBlock, Message};

use super::runs::format_ms;
use super::{CliError, ShowArgs, output, store_path};

use io_harness::store::{
    AgentLink, ApprovalRecord, ChildRun, ContextEvent, McpEvent, ModelCallRecord, PolicyEvent,
    ProviderAttempt, RunRecord, SandboxEvent, SandboxSession, StepRecord, ToolCallRecord,
};

pub fn execute(args: ShowArgs) -> Result<i32, CliError> {
    let store = store_path::open_existing(&args.store)?;
    let run = store
        .run(args.run_id)?
        .ok_or_else(|| CliError::Usage(format!("no run with id {}", args.run_id)))?;
    let steps = store.steps(args.run_id)?;
    let context = store.context_events(args.run_id)?;
    if let Some(n) = args.prompt {
        return print_prompt(&store, args.run_id, n, &steps, &context);
    }
    let trace = Trace {
        policy: store.policy_events(args.run_id)?,
        sandbox: store.sandbox_events(args.run_id)?,
        attempts: store.provider_attempts(args.run_id)?,
        calls: store.model_calls(args.run_id)?,
        sessions: store.sandbox_sessions(args.run_id)?,
        approvals: store.approvals(args.run_id)?,
        link: store.agent_link(args.run_id)?,
        children: store.children(args.run_id)?,
        mcp: store.mcp_events(args.run_id)?,
        run,
        steps,
        context,
    };
    if args.json {
        print_json(&store, args.run_id, trace)?;
    } else {
        print_text(&store, args.run_id, &trace)?;
    }
    Ok(0)
}

/// Everything the store holds about one run.
struct Trace {
    run: RunRecord,
    steps: Vec<StepRecord>,
    context: Vec<ContextEvent>,
    policy: Vec<PolicyEvent>,
    sandbox: Vec<SandboxEvent>,
    attempts: Vec<ProviderAttempt>,
    /// Every model call as the budget counted it (lost ones count their estimate).
    calls: Vec<ModelCallRecord>,
    sessions: Vec<SandboxSession>,
    approvals: Vec<ApprovalRecord>,
    link: Option<AgentLink>,
    children: Vec<ChildRun>,
    mcp: Vec<McpEvent>,
}

/// `--prompt N`: the body the provider was sent for a committed step; for a step that
/// never committed (its call failed), the last request assembled for it.
fn print_prompt(
    store: &io_harness::Store,
    run_id: i64,
    n: u32,
    steps: &[StepRecord],
    context: &[ContextEvent],
) -> Result<i32, CliError> {
    let hash = match steps.iter().find(|s| s.step == n) {
        Some(step) => step.request_hash.clone(),
        None => context
            .iter()
            .rev()
            .find(|e| e.step == n && e.kind == "assembled")
            .and_then(|e| e.request_hash.clone()),
    };
    let body = hash
        .as_deref()
        .map(|h| store.blob(h))
        .transpose()?
        .flatten()
        .ok_or_else(|| {
            CliError::Usage(format!("run {run_id} has no stored request for step {n}"))
        })?;
    outln!("{}", String::from_utf8_lossy(&body));
    Ok(0)
}

/// `--json`: one object with every record of the run.
fn print_json(store: &io_harness::Store, run_id: i64, t: Trace) -> Result<(), CliError> {
    let obj = serde_json::json!({
        "agent": t.link,
        "children": tree(store, run_id, 0)?,
        "sandbox_sessions": t.sessions,
        "approvals": t.approvals,
        "run": t.run,
        "steps": t.steps,
        "policy_events": t.policy,
        "sandbox_events": t.sandbox,
        "provider_attempts": t.attempts,
        "model_calls": t.calls,
        "mcp_events": t.mcp,
        "context_events": t.context,
        "settings": store.settings(run_id)?,
        "run_sessions": store.run_sessions(run_id)?.iter().map(|r| serde_json::json!({
            "ordinal": r.ordinal,
            "started_at_ms": r.started_at_ms,
            "ended_at_ms": r.ended_at_ms,
            "ended_as": r.ended_as,
        })).collect::<Vec<_>>(),
        "otlp_dropped": store.otlp_dropped(run_id)?,
        "batch": store.batch_of_run(run_id)?.map(|(batch_id, task, source)| {
            serde_json::json!({ "batch_id": batch_id, "task": task, "source": source })
        }),
    });
    super::json_out::print("show", obj, &Default::default());
    Ok(())
}

/// How many sessions drove the run and how each ended, and the live export's drops.
fn print_run_sessions(store: &io_harness::Store, run_id: i64) -> Result<(), CliError> {
    let sessions = store.run_sessions(run_id)?;
    if sessions.len() > 1 {
        let ends: Vec<String> = sessions
            .iter()
            .map(|r| {
                r.ended_as
                    .clone()
                    .unwrap_or_else(|| "no end on record".into())
            })
            .collect();
        outln!("sessions: {} ({})", sessions.len(), ends.join(", "));
    }
    if let Some(n) = store.otlp_dropped(run_id)? {
        outln!("live OTLP export: {n} export(s) dropped");
    }
    Ok(())
}

/// The human-readable trace: the run, each step, then what happened around them.
fn print_text(store: &io_harness::Store, run_id: i64, t: &Trace) -> Result<(), CliError> {
    print_header(&t.run, t.link.as_ref());
    print_run_sessions(store, run_id)?;
    if let Some((batch, task, source)) = store.batch_of_run(run_id)? {
        outln!(
            "batch: {batch} (task {task}: {}; io-harness runs --batch {batch})",
            output::sanitize(&source)
        );
    }
    print_estimates(t);
    super::show_settings::print(store, run_id)?;
    for st in &t.steps {
        print_step(t, st);
    }
    print_uncommitted(t);
    print_policy_summary(&t.policy);
    print_sessions(&t.run, &t.sessions);
    print_mcp(&t.mcp);
    print_approvals(&t.approvals);
    if !t.children.is_empty() {
        outln!("\nsub-agents:");
        print_tree(&tree(store, run_id, 0)?, 1);
    }
    let s = output::sanitize;
    if let Some(m) = &t.run.final_message {
        outln!("\nfinal message:\n{}", s(m));
    }
    match t.run.diff.as_deref() {
        Some("") => outln!("\n(no changes)"),
        Some(d) => outln!("\ndiff:\n{}", s(d)),
        None => {}
    }
    Ok(())
}

/// Goal, status, where it worked, who answered, when, and the totals.
fn print_header(run: &RunRecord, link: Option<&AgentLink>) {
    let s = output::sanitize;
    outln!("run {}: {}", run.id, s(&run.goal));
    outln!(
        "status: {}   outcome: {}",
        super::runs::status(run),
        run.outcome_json.as_deref().unwrap_or("-")
    );
    outln!(
        "workspace: {}   worked in: {}",
        s(&run.root),
        s(run.work_dir.as_deref().unwrap_or("-"))
    );
    super::keep::show_line(run);
    if let Some(p) = &run.provider_json {
        outln!("provider: {}", s(p));
    }
    if let Some(l) = link {
        outln!(
            "sub-agent `{}` at depth {} of run {} (its step {}, call {})",
            s(&l.name),
            l.depth,
            l.parent_run_id,
            l.step,
            s(&l.call_id)
        );
    }
    outln!(
        "started: {}   finished: {}",
        format_ms(run.started_at_ms),
        run.finished_at_ms.map_or("-".into(), format_ms)
    );
    outln!(
        "steps: {}   tokens: in {} out {} cached {}   cost: {}",
        run.steps,
        run.input_tokens,
        run.output_tokens,
        run.cached_input_tokens,
        output::cost(run.cost_usd, run.cost_unknown_steps)
    );
    if run.audit_failures > 0 {
        outln!(
            "audit log: {} sandbox session(s) could not be appended",
            run.audit_failures
        );
    }
}

/// Which of the totals are the harness's estimate: steps whose provider reported no
/// usage (or not all of it), and calls whose reply was lost. Silent when all reported.
fn print_estimates(t: &Trace) {
    let estimated: Vec<u32> = t
        .steps
        .iter()
        .filter(|st| st.token_source == "estimated")
        .map(|st| st.step)
        .collect();
    let lost: Vec<&ModelCallRecord> = t.calls.iter().filter(|c| c.status == "lost").collect();
    if !estimated.is_empty() {
        outln!(
            "estimated: the tokens of {} step(s) ({}) are the harness's estimate (the provider reported no usage)",
            estimated.len(),
            estimated
                .iter()
                .map(u32::to_string)
                .collect::<Vec<_>>()
                .join(", ")
        );
    }
    if !lost.is_empty() {
        let input: u64 = lost.iter().map(|c| c.estimated_input_tokens).sum();
        outln!(
            "estimated: {} model call(s) lost their reply; their {input} estimated input tokens count against the budget",
            lost.len()
        );
    }
}

/// One committed step: its cost, the provider's failed attempts, the context, the
/// messages, the tool calls, and the policy and sandbox events of the step.
fn print_step(t: &Trace, st: &StepRecord) {
    let s = output::sanitize;
    let estimated = if st.token_source == "estimated" {
        " (estimated)"
    } else {
        ""
    };
    outln!(
        "\n── step {} ({} ms, model {} ms) tokens in {} out {}{estimated} cost {} [{}]",
        st.step,
        st.duration_ms,
        st.model_ms,
        st.input_tokens,
        st.output_tokens,
        st.cost_usd.map_or("unknown".into(), |c| format!("${c:.6}")),
        st.cost_source
    );
    print_attempts(t, st.step);
    if let Some(p) = &st.provider {
        outln!("  served by {}", s(p));
    }
    for e in t.context.iter().filter(|e| e.step == st.step) {
        print_context_event(e);
    }
    print_messages(&st.messages_json);
    for c in &st.tool_calls {
        print_tool_call(c, st.step, &t.children);
    }
    print_step_events(t, st.step);
}

/// The text blocks of a step's messages, by who said them.
fn print_messages(messages_json: &str) {
    let Ok(msgs) = serde_json::from_str::<Vec<Message>>(messages_json) else {
        return;
    };
    for m in &msgs {
        for b in &m.content {
            if let ContentBlock::Text { text } = b {
                let who = if m.role == io_harness::provider::Role::Assistant {
                    "model"
                } else {
                    "harness"
                };
                outln!("  {who}: {}", output::sanitize(&indent(text)));
            }
        }
    }
}

/// One tool call, its result, and the sub-agent it spawned, if any.
fn print_tool_call(c: &ToolCallRecord, step: u32, children: &[ChildRun]) {
    let s = output::sanitize;
    let mark = if c.confinement_refusal.is_some() {
        "REFUSED"
    } else if c.is_error {
        "error"
    } else {
        "ok"
    };
    outln!(
        "  tool {} {} [{mark}, {} ms]",
        c.name,
        s(&short(&c.input_json, 160)),
        c.duration_ms
    );
    outln!("    → {}", s(&short(&c.output, 240)));
    if let Some(ch) = children
        .iter()
        .find(|ch| ch.link.step == step && ch.link.call_id == c.call_id)
    {
        outln!("    ↳ sub-agent run {}", ch.run.id);
    }
}

/// A step's policy decisions other than allow, and its sandbox events.
fn print_step_events(t: &Trace, step: u32) {
    let s = output::sanitize;
    for p in t
        .policy
        .iter()
        .filter(|p| p.step == step && p.decision != "allow")
    {
        outln!(
            "  policy {} {} {}: {} ({} layer)",
            p.decision,
            p.act,
            s(&p.target),
            p.rule,
            p.layer
        );
    }
    for e in t.sandbox.iter().filter(|e| e.step == step) {
        outln!(
            "  sandbox {} {}{}",
            e.kind,
            e.backend
                .as_deref()
                .map_or(String::new(), |b| format!("[{b}] ")),
            output::continued(&short(e.detail.as_deref().unwrap_or(""), 400))
        );
    }
}

/// The failed provider attempts of `step`, each with what the server said.
fn print_attempts(t: &Trace, step: u32) {
    let s = output::sanitize;
    for a in t.attempts.iter().filter(|a| a.step == step) {
        let lost = match (a.reply_lost, a.estimated_input_tokens) {
            (true, Some(n)) => format!(" (reply lost: {n} estimated input tokens counted)"),
            _ => String::new(),
        };
        let said = a
            .message
            .as_deref()
            .map_or(String::new(), |m| format!(": {}", short(&s(m), 300)));
        outln!(
            "  provider {} attempt {} failed: {}{}{lost}{said} → {} after {} ms",
            s(&a.provider),
            a.attempt,
            a.kind,
            a.status.map_or(String::new(), |c| format!(" (HTTP {c})")),
            a.next,
            a.delay_ms
        );
    }
}

/// Context events and provider attempts of a step that never committed (a run that
/// escalated ends on one).
fn print_uncommitted(t: &Trace) {
    let committed = t.steps.last().map_or(0, |st| st.step);
    let mut steps: Vec<u32> = t
        .context
        .iter()
        .map(|e| e.step)
        .chain(t.attempts.iter().map(|a| a.step))
        .filter(|s| *s > committed)
        .collect();
    steps.sort_unstable();
    steps.dedup();
    for step in steps {
        outln!("\n── step {step} (not committed)");
        for e in t.context.iter().filter(|e| e.step == step) {
            print_context_event(e);
        }
        print_attempts(t, step);
    }
}

/// How many decisions, and those taken before the first step.
fn print_policy_summary(policy: &[PolicyEvent]) {
    let s = output::sanitize;
    let allowed = policy.iter().filter(|p| p.decision == "allow").count();
    outln!("\npolicy decisions: {} ({} allowed)", policy.len(), allowed);
    for p in policy.iter().filter(|p| p.step == 0) {
        outln!(
            "  before step 1: {} {} {}: {} ({} layer)",
            p.decision,
            p.act,
            s(&p.target),
            s(&p.rule),
            p.layer
        );
    }
}

/// A line on the sandboxed commands: how many, which backends, how many capped.
fn print_sessions(run: &RunRecord, sessions: &[SandboxSession]) {
    if sessions.is_empty() {
        return;
    }
    let mut backends: Vec<&str> = sessions.iter().map(|x| x.backend.as_str()).collect();
    backends.sort_unstable();
    backends.dedup();
    let caps = sessions.iter().filter(|x| x.cap_hit.is_some()).count();
    outln!(
        "sandboxed commands: {} (backend {}; {} hit a cap); layers per command: io-harness show {} --json",
        sessions.len(),
        backends.join(", "),
        caps,
        run.id
    );
}

/// The MCP events, one a line.
fn print_mcp(mcp: &[McpEvent]) {
    if mcp.is_empty() {
        return;
    }
    let s = output::sanitize;
    outln!("\nMCP events: {}", mcp.len());
    for e in mcp {
        let what = match e.kind.as_str() {
            "called" => format!(
                "called {} in {} ms: {}",
                s(e.tool.as_deref().unwrap_or("?")),
                e.duration_ms.unwrap_or(0),
                e.outcome.as_deref().unwrap_or("?")
            ),
            kind => match &e.detail {
                Some(d) => format!("{kind} {}", output::continued(&short(d, 300))),
                None => kind.to_string(),
            },
        };
        outln!("  step {} {}: {}", e.step, s(&e.server), what);
        let memory = e
            .detail
            .as_deref()
            .filter(|_| e.kind == "connected")
            .and_then(|d| serde_json::from_str::<serde_json::Value>(d).ok())
            .and_then(|v| super::mcp::memory_line(&v));
        if let Some(line) = memory {
            outln!("    {}", s(&line));
        }
    }
}

/// Each approval request and how it was answered.
fn print_approvals(approvals: &[ApprovalRecord]) {
    let s = output::sanitize;
    for a in approvals {
        let action = serde_json::from_str::<io_harness::policy::Action>(&a.action_json)
            .map_or_else(
                |_| String::new(),
                |x| format!(" {} {}", x.act.as_str(), s(&x.target)),
            );
        let remembered = match a.remember {
            io_harness::policy::Remember::No => "",
            io_harness::policy::Remember::Exact => ", remembered exactly",
            io_harness::policy::Remember::Program => {
                ", remembered for the program with any arguments"
            }
        };
        outln!(
            "approval {} (step {}, {}{action}): {}{remembered}{}",
            a.request_id,
            a.step,
            s(&a.tool),
            a.status,
            a.reason
                .as_deref()
                .map_or(String::new(), |r| format!(": {}", s(r)))
        );
    }
}

/// One context event as a line of the trace.
fn print_context_event(e: &ContextEvent) {
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    match e.kind.as_str() {
        "assembled" => outln!(
            "  context: estimated {} → {} tokens (budget {}, provider reported {}{})",
            opt(e.tokens_before),
            opt(e.tokens_after),
            opt(e.budget),
            opt(e.reported_input_tokens),
            e.cached_input_tokens
                .map_or(String::new(), |c| format!(", {c} cached")),
        ),
        "overflow_retry" => outln!("  context: overflow; assembling harder and retrying"),
        kind => outln!(
            "  context {kind} {} {} (step {}): {}",
            e.tool.as_deref().unwrap_or("-"),
            output::escape(e.target.as_deref().unwrap_or("")),
            e.obs_step.map_or("-".into(), |v| v.to_string()),
            output::continued(&short(e.detail.as_deref().unwrap_or(""), 160))
        ),
    }
}

fn short(text: &str, max: usize) -> String {
    let one: String = text.replace('\n', "⏎");
    if one.chars().count() <= max {
        one
    } else {
        let mut s: String = one.chars().take(max).collect();
        s.push('…');
        s
    }
}

fn indent(text: &str) -> String {
    text.trim_end().replace('\n', "\n    ")
}

/// Deepest tree drawn; the contract allows at most 8 levels, so more means a
/// corrupt store, not a real tree.
const MAX_TREE_DEPTH: u32 = 16;

/// The sub-agents of `run_id`, each with its own, as JSON.
fn tree(
    store: &io_harness::Store,
    run_id: i64,
    level: u32,
) -> Result<Vec<serde_json::Value>, CliError> {
    if level >= MAX_TREE_DEPTH {
        return Ok(Vec::new());
    }
    let mut out = Vec::new();
    for c in store.children(run_id)? {
        out.push(serde_json::json!({
            "id": c.run.id,
            "name": c.link.name,
            "depth": c.link.depth,
            "step": c.link.step,
            "call_id": c.link.call_id,
            "goal": c.run.goal,
            "status": super::runs::status(&c.run),
            "outcome": c.run.outcome,
            "steps": c.run.steps,
            "input_tokens": c.run.input_tokens,
            "output_tokens": c.run.output_tokens,
            "cost_usd": c.run.cost_usd,
            "children": tree(store, c.run.id, level + 1)?,
        }));
    }
    Ok(out)
}

fn print_tree(nodes: &[serde_json::Value], indent: usize) {
    for n in nodes {
        outln!(
            "{}run {} `{}` (depth {}, step {}): {} — {} steps — {}",
            "  ".repeat(indent),
            n["id"],
            output::sanitize(n["name"].as_str().unwrap_or("")),
            n["depth"],
            n["step"],
            n["outcome"]
                .as_str()
                .or(n["status"].as_str())
                .unwrap_or("-"),
            n["steps"],
            output::sanitize(n["goal"].as_str().unwrap_or(""))
        );
        if let Some(c) = n["children"].as_array() {
            print_tree(c, indent + 1);
        }
    }
}
