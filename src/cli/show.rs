//! `io-harness show <run-id>`: the trace of one run, from the store alone.

use io_harness::provider::{ContentBlock, Message};

use super::runs::format_ms;
use super::{CliError, ShowArgs, output, store_path};

pub fn execute(args: ShowArgs) -> Result<i32, CliError> {
    let store = store_path::open(&args.store)?;
    let run = store
        .run(args.run_id)?
        .ok_or_else(|| CliError::Usage(format!("no run with id {}", args.run_id)))?;
    let steps = store.steps(args.run_id)?;
    let context = store.context_events(args.run_id)?;
    if let Some(n) = args.prompt {
        // The body the provider was sent for a committed step; for a step that never
        // committed (its call failed), the last request assembled for it.
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
                CliError::Usage(format!(
                    "run {} has no stored request for step {n}",
                    args.run_id
                ))
            })?;
        println!("{}", String::from_utf8_lossy(&body));
        return Ok(0);
    }
    let policy = store.policy_events(args.run_id)?;
    let sandbox = store.sandbox_events(args.run_id)?;
    let attempts = store.provider_attempts(args.run_id)?;
    let sessions = store.sandbox_sessions(args.run_id)?;
    let approvals = store.approvals(args.run_id)?;
    let link = store.agent_link(args.run_id)?;
    let children = store.children(args.run_id)?;
    let mcp = store.mcp_events(args.run_id)?;
    if args.json {
        let obj = serde_json::json!({
            "agent": link,
            "children": tree(&store, args.run_id, 0)?,
            "sandbox_sessions": sessions,
            "approvals": approvals,
            "run": run,
            "steps": steps,
            "policy_events": policy,
            "sandbox_events": sandbox,
            "provider_attempts": attempts,
            "mcp_events": mcp,
            "context_events": context,
        });
        println!("{obj}");
        return Ok(0);
    }
    let s = output::sanitize;
    println!("run {}: {}", run.id, s(&run.goal));
    println!(
        "status: {}   outcome: {}",
        super::runs::status(&run),
        run.outcome_json.as_deref().unwrap_or("-")
    );
    println!(
        "workspace: {}   worked in: {}",
        s(&run.root),
        s(run.work_dir.as_deref().unwrap_or("-"))
    );
    if let Some(p) = &run.provider_json {
        println!("provider: {}", s(p));
    }
    if let Some(l) = &link {
        println!(
            "sub-agent `{}` at depth {} of run {} (its step {}, call {})",
            s(&l.name),
            l.depth,
            l.parent_run_id,
            l.step,
            s(&l.call_id)
        );
    }
    println!(
        "started: {}   finished: {}",
        format_ms(run.started_at_ms),
        run.finished_at_ms.map_or("-".into(), format_ms)
    );
    println!(
        "steps: {}   tokens: in {} out {} cached {}   cost: {}",
        run.steps,
        run.input_tokens,
        run.output_tokens,
        run.cached_input_tokens,
        output::cost(run.cost_usd, run.cost_unknown_steps)
    );
    for st in &steps {
        println!(
            "\n── step {} ({} ms, model {} ms) tokens in {} out {} cost {} [{}]",
            st.step,
            st.duration_ms,
            st.model_ms,
            st.input_tokens,
            st.output_tokens,
            st.cost_usd.map_or("unknown".into(), |c| format!("${c:.6}")),
            st.cost_source
        );
        for a in attempts.iter().filter(|a| a.step == st.step) {
            println!(
                "  provider {} attempt {} failed: {}{} → {} after {} ms",
                s(&a.provider),
                a.attempt,
                a.kind,
                a.status.map_or(String::new(), |c| format!(" (HTTP {c})")),
                a.next,
                a.delay_ms
            );
        }
        if let Some(p) = &st.provider {
            println!("  served by {}", s(p));
        }
        for e in context.iter().filter(|e| e.step == st.step) {
            print_context_event(e);
        }
        if let Ok(msgs) = serde_json::from_str::<Vec<Message>>(&st.messages_json) {
            for m in &msgs {
                for b in &m.content {
                    if let ContentBlock::Text { text } = b {
                        let who = if m.role == io_harness::provider::Role::Assistant {
                            "model"
                        } else {
                            "harness"
                        };
                        println!("  {who}: {}", s(&indent(text)));
                    }
                }
            }
        }
        for c in &st.tool_calls {
            let mark = if c.confinement_refusal.is_some() {
                "REFUSED"
            } else if c.is_error {
                "error"
            } else {
                "ok"
            };
            println!(
                "  tool {} {} [{mark}, {} ms]",
                c.name,
                s(&short(&c.input_json, 160)),
                c.duration_ms
            );
            println!("    → {}", s(&short(&c.output, 240)));
            if let Some(ch) = children
                .iter()
                .find(|ch| ch.link.step == st.step && ch.link.call_id == c.call_id)
            {
                println!("    ↳ sub-agent run {}", ch.run.id);
            }
        }
        for p in policy
            .iter()
            .filter(|p| p.step == st.step && p.decision != "allow")
        {
            println!(
                "  policy {} {} {}: {} ({} layer)",
                p.decision,
                p.act,
                s(&p.target),
                p.rule,
                p.layer
            );
        }
        for e in sandbox.iter().filter(|e| e.step == st.step) {
            println!(
                "  sandbox {} {}{}",
                e.kind,
                e.backend
                    .as_deref()
                    .map_or(String::new(), |b| format!("[{b}] ")),
                s(&short(e.detail.as_deref().unwrap_or(""), 400))
            );
        }
    }
    let committed = steps.last().map_or(0, |st| st.step);
    let mut uncommitted = context.iter().filter(|e| e.step > committed).peekable();
    if let Some(e) = uncommitted.peek() {
        println!("\n── step {} (not committed)", e.step);
    }
    for e in uncommitted {
        print_context_event(e);
    }
    let allowed = policy.iter().filter(|p| p.decision == "allow").count();
    println!("\npolicy decisions: {} ({} allowed)", policy.len(), allowed);
    for p in policy.iter().filter(|p| p.step == 0) {
        println!(
            "  before step 1: {} {} {}: {} ({} layer)",
            p.decision,
            p.act,
            s(&p.target),
            s(&p.rule),
            p.layer
        );
    }
    if !sessions.is_empty() {
        let mut backends: Vec<&str> = sessions.iter().map(|x| x.backend.as_str()).collect();
        backends.sort_unstable();
        backends.dedup();
        let caps = sessions.iter().filter(|x| x.cap_hit.is_some()).count();
        println!(
            "sandboxed commands: {} (backend {}; {} stopped by a cap); layers per command: io-harness show {} --json",
            sessions.len(),
            backends.join(", "),
            caps,
            run.id
        );
    }
    if !mcp.is_empty() {
        println!("\nMCP events: {}", mcp.len());
        for e in &mcp {
            let what = match e.kind.as_str() {
                "called" => format!(
                    "called {} in {} ms: {}",
                    s(e.tool.as_deref().unwrap_or("?")),
                    e.duration_ms.unwrap_or(0),
                    e.outcome.as_deref().unwrap_or("?")
                ),
                kind => match &e.detail {
                    Some(d) => format!("{kind} {}", s(&short(d, 300))),
                    None => kind.to_string(),
                },
            };
            println!("  step {} {}: {}", e.step, s(&e.server), what);
        }
    }
    for a in &approvals {
        println!(
            "approval {} (step {}, {}): {}{}",
            a.request_id,
            a.step,
            s(&a.tool),
            a.status,
            a.reason
                .as_deref()
                .map_or(String::new(), |r| format!(": {}", s(r)))
        );
    }
    if !children.is_empty() {
        println!("\nsub-agents:");
        print_tree(&tree(&store, args.run_id, 0)?, 1);
    }
    if let Some(m) = &run.final_message {
        println!("\nfinal message:\n{}", s(m));
    }
    match run.diff.as_deref() {
        Some("") => println!("\n(no changes)"),
        Some(d) => println!("\ndiff:\n{}", s(d)),
        None => {}
    }
    Ok(0)
}

/// One context event as a line of the trace.
fn print_context_event(e: &io_harness::store::ContextEvent) {
    let s = output::sanitize;
    let opt = |v: Option<u64>| v.map_or("-".to_string(), |v| v.to_string());
    match e.kind.as_str() {
        "assembled" => println!(
            "  context: estimated {} → {} tokens (budget {}, provider reported {}{})",
            opt(e.tokens_before),
            opt(e.tokens_after),
            opt(e.budget),
            opt(e.reported_input_tokens),
            e.cached_input_tokens
                .map_or(String::new(), |c| format!(", {c} cached")),
        ),
        "overflow_retry" => println!("  context: overflow; assembling harder and retrying"),
        kind => println!(
            "  context {kind} {} {} (step {}): {}",
            e.tool.as_deref().unwrap_or("-"),
            s(e.target.as_deref().unwrap_or("")),
            e.obs_step.map_or("-".into(), |v| v.to_string()),
            s(&short(e.detail.as_deref().unwrap_or(""), 160))
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
        println!(
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
