//! Sub-agents (C12): what a parent asks for, and how a child is contained.
//!
//! A parent run spawns a child with the `spawn_agent` tool (or the same [`AgentSpec`]
//! through the library). The child is a run of its own — its own run id, linked to
//! the parent's step and call, with its depth — and is contained three ways:
//!
//! - **Workspace**: its root is a directory inside the parent's working tree (no `..`,
//!   no absolute path, no symlink out), edited in place, so the parent sees its
//!   changes.
//! - **Policy**: every action is decided by the parent's live policy with the path
//!   rebased into the parent's frame, *and* by the child's own rules (its `rules`, the
//!   built-in protections at its root, a project file in its root); the stricter
//!   answer wins. The child's own rules may only deny or ask: an allow would widen
//!   nothing under "stricter wins", so asking for one is refused as an attempt to
//!   widen. A verification command must be a program the parent's policy allows,
//!   since a criterion runs without a policy check.
//! - **Budget**: each of steps, tokens, cost and wall time is the requested slice
//!   capped at what the parent has left (counting the parent's current step), so
//!   parent and children together never get more than the parent's budget. The
//!   child's usage then counts toward the parent's totals.
//!
//! Resume: the parent's model reply of a step that spawns is stored before the first
//! child starts, and a child is keyed by the parent's step and call id (unique in the
//! store). A parent resumed after a kill replays that reply; each `spawn_agent` call
//! finds its child and resumes it if it was interrupted, or adopts its outcome if it
//! had finished, so a tree resumes as a tree and no child runs twice.

use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Deserialize;

use super::budget::Totals;
use crate::contract::{Budget, TaskContract, Verification, VerifySettings, WorkspaceMode};
use crate::policy::{
    Act, Action, Decision, Isolation, Policy, PolicyDecision, PolicyGate, ProjectPolicy, Rule,
    TaskPolicy,
};
use crate::store::{Store, StoreError};

/// What a parent asks of a sub-agent: the `spawn_agent` tool's arguments.
///
/// ```
/// use io_harness::run::AgentSpec;
///
/// // What a model sends to `spawn_agent`: a sub-goal in `parser/`, checked there by
/// // `cargo test`, with at most 10 steps of the parent's remaining budget.
/// let spec: AgentSpec = serde_json::from_value(serde_json::json!({
///     "name": "parser",
///     "goal": "make parse_list accept a trailing comma",
///     "root": "parser",
///     "verify": { "command": ["cargo", "test", "--offline"] },
///     "budget": { "max_steps": 10 },
///     "rules": [{ "act": "write", "target": "Cargo.toml", "decision": "deny" }]
/// }))
/// .unwrap();
/// assert_eq!(spec.budget.max_steps, Some(10));
/// // Unknown fields are refused, not ignored.
/// assert!(serde_json::from_value::<AgentSpec>(serde_json::json!({
///     "name": "x", "goal": "g", "verify": {}, "sudo": true
/// }))
/// .is_err());
/// ```
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentSpec {
    /// A short label (letters, digits, `-`, `_`; at most 40).
    pub name: String,
    /// The sub-goal.
    pub goal: String,
    /// The child's workspace, relative to the parent's; `.` when absent.
    #[serde(default)]
    pub root: Option<String>,
    /// How the child's result is checked (relative to its root).
    pub verify: AgentVerify,
    /// The child's slice of the parent's remaining budget.
    #[serde(default)]
    pub budget: AgentBudget,
    /// Rules that narrow the child's policy (deny or ask only).
    #[serde(default)]
    pub rules: Vec<Rule>,
}

/// A sub-agent's criteria, shaped like a task file's `[verify]`; all must pass.
#[derive(Debug, Clone, Default, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentVerify {
    /// A command run in the child's root (no shell); its program must be one the
    /// parent's policy allows.
    #[serde(default)]
    pub command: Option<Vec<String>>,
    /// The command's passing exit code (0 when absent).
    #[serde(default)]
    pub expect_exit: Option<i32>,
    /// A file that must contain a needle.
    #[serde(default)]
    pub file_contains: Option<FileNeedle>,
    /// A file that must have exactly this content.
    #[serde(default)]
    pub file_equals: Option<FileContent>,
    /// Failed verifications before the child ends `VerificationFailed` (default 3).
    #[serde(default)]
    pub max_attempts: Option<u32>,
}

/// `file_contains` of [`AgentVerify`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileNeedle {
    /// Relative to the child's root.
    pub file: PathBuf,
    /// Text that must occur.
    pub needle: String,
}

/// `file_equals` of [`AgentVerify`].
#[derive(Debug, Clone, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FileContent {
    /// Relative to the child's root.
    pub file: PathBuf,
    /// The expected content.
    pub content: String,
}

/// A requested budget slice; each absent limit means "what the parent has left".
#[derive(Debug, Clone, Default, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AgentBudget {
    /// Model calls.
    #[serde(default)]
    pub max_steps: Option<u32>,
    /// Tokens of every kind.
    #[serde(default)]
    pub max_tokens: Option<u64>,
    /// Known cost in USD.
    #[serde(default)]
    pub max_cost_usd: Option<f64>,
    /// Wall time in seconds.
    #[serde(default)]
    pub max_duration_secs: Option<u64>,
}

/// What the parent has left when it spawns.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Remaining {
    pub steps: u32,
    pub tokens: Option<u64>,
    pub cost_usd: Option<f64>,
    pub duration: Option<Duration>,
}

/// The parent as a spawn sees it.
pub(crate) struct ParentView<'p> {
    pub depth: u32,
    pub contract: &'p TaskContract,
    pub work: &'p Path,
    pub gate: Arc<dyn PolicyGate>,
    pub remaining: Remaining,
}

/// A child ready to start: its contract and its policy gate.
pub(crate) struct Prepared {
    pub contract: TaskContract,
    pub gate: Arc<dyn PolicyGate>,
}

/// Longest agent name.
const MAX_NAME: usize = 40;
/// Most bytes of the child's last message shown to the parent.
const MAX_SUMMARY_MESSAGE: usize = 2000;
/// Most changed files listed to the parent.
const MAX_LISTED_FILES: usize = 20;

fn valid_name(n: &str) -> bool {
    !n.is_empty()
        && n.len() <= MAX_NAME
        && n.chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_')
}

/// Checks a spawn against its parent and builds the child's contract and gate. An
/// `Err` is the refusal shown to the model; nothing was started.
pub(crate) fn prepare(spec: &AgentSpec, parent: &ParentView<'_>) -> Result<Prepared, String> {
    if !valid_name(&spec.name) {
        return Err(format!(
            "name {:?}: use letters, digits, - and _ (at most {MAX_NAME})",
            spec.name
        ));
    }
    if spec.goal.trim().is_empty() {
        return Err("goal is empty".into());
    }
    let max = parent.contract.agents.max_depth;
    if parent.depth + 1 > max {
        return Err(format!(
            "depth limit: this run is at depth {} and [agents] max_depth = {max}",
            parent.depth
        ));
    }
    for r in &spec.rules {
        if r.decision == Decision::Allow {
            return Err(format!(
                "a sub-agent's policy can only be narrower than yours: rule allow {} {:?} would widen it \
                 (only deny and ask rules may be added)",
                r.act.as_str(),
                r.target
            ));
        }
        r.check().map_err(|e| format!("rules: {e}"))?;
    }
    let (root, prefix) = sub_root(parent.work, spec.root.as_deref().unwrap_or("."))?;
    let mut verify = criteria(&spec.verify, parent.gate.as_ref(), parent.work, &prefix)?;
    // The child may not rewrite the script that judges it, as for an operator's gate.
    verify.criteria = std::mem::take(&mut verify.criteria)
        .into_iter()
        .map(|c| c.pin_command_files(&root))
        .collect();
    let budget = carve(&spec.budget, &parent.remaining)?;

    let mut contract = parent.contract.clone();
    contract.goal = spec.goal.clone();
    contract.root = root.clone();
    contract.workspace = WorkspaceMode::InPlace;
    contract.instructions = None;
    contract.verify = verify;
    contract.budget = budget;
    contract.policy = TaskPolicy {
        rules: spec.rules.clone(),
        overrides: Vec::new(),
    };
    contract.validate().map_err(|e| e.to_string())?;
    let gate = child_gate(parent.gate.clone(), prefix, &spec.rules, &root)?;
    Ok(Prepared { contract, gate })
}

/// The child's gate, rebuilt from its stored contract when a parent adopts an
/// interrupted child.
pub(crate) fn gate_for_stored(
    parent: Arc<dyn PolicyGate>,
    parent_work: &Path,
    child: &TaskContract,
) -> Result<Arc<dyn PolicyGate>, String> {
    let work = parent_work
        .canonicalize()
        .map_err(|e| format!("{}: {e}", parent_work.display()))?;
    let prefix = child.root.strip_prefix(&work).map_err(|_| {
        "the sub-agent's root is no longer inside the parent's workspace".to_string()
    })?;
    let prefix = slash_path(prefix);
    child_gate(parent, prefix, &child.policy.rules, &child.root)
}

fn child_gate(
    parent: Arc<dyn PolicyGate>,
    prefix: String,
    rules: &[Rule],
    root: &Path,
) -> Result<Arc<dyn PolicyGate>, String> {
    let mut own = Policy::builtin().with_exec_isolation(Isolation::Native);
    for r in rules {
        own.add_run_rule(r.clone()).map_err(|e| e.to_string())?;
    }
    let project = ProjectPolicy::load(root).map_err(|e| e.to_string())?;
    own = own.with_project(&project).map_err(|e| e.to_string())?;
    Ok(Arc::new(ChildGate {
        parent,
        prefix,
        own,
    }))
}

fn slash_path(p: &Path) -> String {
    p.components()
        .filter_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .collect::<Vec<_>>()
        .join("/")
}

/// The child's root (canonical) and its path relative to the parent's working tree.
fn sub_root(parent_work: &Path, rel: &str) -> Result<(PathBuf, String), String> {
    let p = Path::new(rel);
    if p.is_absolute()
        || p.components()
            .any(|c| matches!(c, Component::ParentDir | Component::Prefix(_)))
    {
        return Err(format!(
            "root {rel:?} must be a relative path inside your workspace"
        ));
    }
    let work = parent_work
        .canonicalize()
        .map_err(|e| format!("{}: {e}", parent_work.display()))?;
    let root = work
        .join(p)
        .canonicalize()
        .map_err(|e| format!("root {rel:?}: {e}"))?;
    if !root.starts_with(&work) {
        return Err(format!("root {rel:?} leads outside your workspace"));
    }
    if !root.is_dir() {
        return Err(format!("root {rel:?} is not a directory"));
    }
    let prefix = root.strip_prefix(&work).map(slash_path).unwrap_or_default();
    Ok((root, prefix))
}

/// A file a child's criterion reads is read by the harness for the parent's model:
/// the parent's policy decides it like `read_file` — the name and, through a symlink,
/// the file it reaches (a `file_contains` on `.env`, or on a link `envlink -> .env`,
/// was a one-bit oracle, 16 spawns to a character). `prefix` is the child's root in
/// the parent's workspace `ws`. (The child's verification judges the file again when
/// it reads it: the link may come later.)
fn readable(
    gate: &dyn PolicyGate,
    ws: &crate::tools::Workspace,
    prefix: &str,
    file: &str,
    key: &str,
) -> Result<(), String> {
    let target = if prefix.is_empty() {
        file.to_string()
    } else {
        format!("{prefix}/{file}")
    };
    let rel = ws
        .normalize(&target)
        .map_err(|e| format!("verify.{key}: {target:?}: {e}"))?;
    match crate::tools::read_refusal(gate, ws, rel) {
        None => Ok(()),
        Some(d) => Err(format!(
            "verify.{key}: {target:?} is a file your policy does not let you read ({} {:?} by rule {} in layer {}); a criterion may only judge what you could read",
            d.decision.as_str(),
            d.action.target,
            d.rule,
            d.layer
        )),
    }
}

fn criteria(
    v: &AgentVerify,
    gate: &dyn PolicyGate,
    work: &Path,
    prefix: &str,
) -> Result<VerifySettings, String> {
    let mut out = Vec::new();
    let ws = || crate::tools::Workspace::open(work).map_err(|e| format!("{}: {e}", work.display()));
    if let Some(argv) = &v.command {
        let Some(program) = argv.first() else {
            return Err("verify.command is empty".into());
        };
        let d = gate.decide(&Action::new(Act::Exec, program.clone()));
        if d.decision != Decision::Allow {
            return Err(format!(
                "verify.command: {program:?} is not a program your policy allows ({} by rule {} in layer {}); \
                 a verification runs without asking, so only an allowed program may be one",
                d.decision.as_str(),
                d.rule,
                d.layer
            ));
        }
        out.push(Verification::Command {
            argv: argv.clone(),
            expect_exit: v.expect_exit.unwrap_or(0),
            timeout: Duration::from_secs(300),
            pinned: Vec::new(),
            trust: crate::contract::CommandTrust::Auto,
            report: None,
            criterion: Default::default(),
        });
    } else if v.expect_exit.is_some() {
        return Err("verify.expect_exit needs verify.command".into());
    }
    if let Some(f) = &v.file_contains {
        readable(
            gate,
            &ws()?,
            prefix,
            &f.file.to_string_lossy(),
            "file_contains",
        )?;
        out.push(Verification::file_contains(
            f.file.clone(),
            f.needle.clone(),
        ));
    }
    if let Some(f) = &v.file_equals {
        readable(
            gate,
            &ws()?,
            prefix,
            &f.file.to_string_lossy(),
            "file_equals",
        )?;
        out.push(Verification::file_equals(f.file.clone(), f.content.clone()));
    }
    if out.is_empty() {
        return Err(
            "verify needs at least one criterion (command, file_contains, file_equals)".into(),
        );
    }
    Ok(VerifySettings {
        criteria: out,
        max_attempts: v.max_attempts.unwrap_or(3).max(1),
        every_step: false,
        dep_cache_max: None,
    })
}

/// The requested slice capped at what is left; a budget with nothing left refuses.
pub(crate) fn carve(req: &AgentBudget, left: &Remaining) -> Result<Budget, String> {
    if left.steps == 0 {
        return Err("no steps left in your budget for a sub-agent".into());
    }
    let max_steps = req.max_steps.unwrap_or(left.steps).clamp(1, left.steps);
    let max_tokens = match (req.max_tokens, left.tokens) {
        (_, Some(0)) => return Err("no tokens left in your budget for a sub-agent".into()),
        (Some(r), Some(l)) => Some(r.clamp(1, l)),
        (r, l) => r.or(l).map(|t| t.max(1)),
    };
    let max_cost_usd = match (req.max_cost_usd, left.cost_usd) {
        (_, Some(l)) if l <= 0.0 => {
            return Err("no money left in your budget for a sub-agent".into());
        }
        (Some(r), _) if !(r.is_finite() && r > 0.0) => {
            return Err(format!("budget.max_cost_usd {r} is not a positive amount"));
        }
        (Some(r), Some(l)) => Some(r.min(l)),
        (r, l) => r.or(l),
    };
    let max_duration = match (
        req.max_duration_secs.map(Duration::from_secs),
        left.duration,
    ) {
        (_, Some(l)) if l.is_zero() => {
            return Err("no time left in your budget for a sub-agent".into());
        }
        (Some(r), Some(l)) => Some(r.min(l)),
        (r, l) => r.or(l),
    }
    .map(|d| d.max(Duration::from_secs(1)));
    Ok(Budget {
        max_steps,
        max_duration,
        max_tokens,
        max_cost_usd,
    })
}

/// A child's gate: the parent's (paths rebased into the parent's frame) and the
/// child's own rules; the stricter decision wins. The child cannot remember approvals:
/// what an operator approves for a child stays an answer, never a wider rule.
struct ChildGate {
    parent: Arc<dyn PolicyGate>,
    /// The child's root relative to the parent's (`/`-separated, empty for the same).
    prefix: String,
    own: Policy,
}

fn strictness(d: Decision) -> u8 {
    match d {
        Decision::Allow => 0,
        Decision::Ask => 1,
        Decision::Deny => 2,
    }
}

impl ChildGate {
    fn rebase(&self, a: &Action) -> Action {
        match a.act {
            Act::Read | Act::Write if !self.prefix.is_empty() => {
                let t = a.target.trim_start_matches("./");
                let target = if t.is_empty() || t == "." {
                    self.prefix.clone()
                } else {
                    format!("{}/{}", self.prefix, t.trim_start_matches('/'))
                };
                Action::new(a.act, target)
            }
            _ => a.clone(),
        }
    }
}

impl PolicyGate for ChildGate {
    fn decide(&self, action: &Action) -> PolicyDecision {
        let mut outer = self.parent.decide(&self.rebase(action));
        outer.action = action.clone();
        let own = self.own.decide(action);
        // The child's own layer speaks only through rules: its defaults are the
        // parent's to set.
        if own.rule != "default" && strictness(own.decision) > strictness(outer.decision) {
            return own;
        }
        outer
    }

    fn limits_programs(&self) -> bool {
        self.parent.limits_programs() || self.own.limits_programs()
    }

    /// The parent's: a file denied in the parent's workspace stays denied in the
    /// child's part of it, and the child's looks record into the same set.
    fn denied_files(&self) -> Option<&crate::policy::DeniedFiles> {
        self.parent.denied_files()
    }
}

/// A run's usage with all its sub-agents', from the store (what a resumed parent
/// counts for children its committed steps spawned).
pub(crate) fn rolled_up(store: &Store, run_id: i64) -> Result<Totals, StoreError> {
    let mut t = Totals::default();
    let mut stack = vec![run_id];
    // A tree is at most MAX_AGENT_DEPTH deep; the bound guards a corrupt file.
    let mut visited = 0usize;
    while let Some(id) = stack.pop() {
        visited += 1;
        if visited > 100_000 {
            break;
        }
        let own = Totals::from_record(&store.steps(id)?, &store.lost_calls(id)?);
        if id == run_id {
            t = own;
        } else {
            t.add_child(&own);
        }
        stack.extend(store.children(id)?.into_iter().map(|c| c.run.id));
    }
    Ok(t)
}

/// The observation a parent gets for a finished child: outcome, usage, files changed
/// and its last message, bounded and framed as untrusted (the child's model wrote it).
#[allow(clippy::too_many_arguments)]
pub(crate) fn summary(
    boundary: &crate::untrusted::Boundary,
    name: &str,
    child_id: i64,
    depth: u32,
    outcome: &str,
    usage: &Totals,
    diff: &str,
    final_message: &str,
) -> String {
    let mut out = format!(
        "sub-agent `{name}` (run {child_id}, depth {depth}) ended: {outcome}\nit used {} steps, {} tokens, cost {}\n",
        usage.steps + usage.agent_steps,
        usage.total_tokens(),
        usage
            .cost_usd()
            .map_or_else(|| "unknown".to_string(), |c| format!("${c:.4}")),
    );
    let files: Vec<&str> = diff
        .lines()
        .filter_map(|l| l.strip_prefix("+++ "))
        .map(|l| l.trim_start_matches("b/"))
        .collect();
    if files.is_empty() {
        out.push_str("it changed no files\n");
    } else {
        let shown: Vec<&str> = files.iter().take(MAX_LISTED_FILES).copied().collect();
        out.push_str(&format!("it changed: {}", shown.join(", ")));
        if files.len() > MAX_LISTED_FILES {
            out.push_str(&format!(" and {} more", files.len() - MAX_LISTED_FILES));
        }
        out.push('\n');
    }
    let mut msg = final_message.trim().to_string();
    if msg.len() > MAX_SUMMARY_MESSAGE {
        msg.truncate(msg.floor_char_boundary(MAX_SUMMARY_MESSAGE));
        msg.push_str(" […cut]");
    }
    if !msg.is_empty() {
        out.push_str("its last message:\n");
        out.push_str(&boundary.frame(&format!("sub-agent {name}"), &msg));
    }
    out
}

/// The root run of the tree `run_id` belongs to.
pub(crate) fn root_of(store: &Store, run_id: i64) -> Result<i64, StoreError> {
    let mut id = run_id;
    // Bounded: a tree is at most MAX_AGENT_DEPTH deep; the bound guards a corrupt file.
    for _ in 0..=crate::contract::MAX_AGENT_DEPTH + 1 {
        match store.run(id)?.and_then(|r| r.parent_run_id) {
            Some(p) => id = p,
            None => break,
        }
    }
    Ok(id)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn left() -> Remaining {
        Remaining {
            steps: 5,
            tokens: Some(1000),
            cost_usd: Some(0.5),
            duration: Some(Duration::from_secs(60)),
        }
    }

    #[test]
    fn a_slice_never_exceeds_what_is_left() {
        let b = carve(
            &AgentBudget {
                max_steps: Some(50),
                max_tokens: Some(10_000),
                max_cost_usd: Some(3.0),
                max_duration_secs: Some(3600),
            },
            &left(),
        )
        .unwrap();
        assert_eq!(b.max_steps, 5);
        assert_eq!(b.max_tokens, Some(1000));
        assert_eq!(b.max_cost_usd, Some(0.5));
        assert_eq!(b.max_duration, Some(Duration::from_secs(60)));
        let b = carve(&AgentBudget::default(), &left()).unwrap();
        assert_eq!(b.max_steps, 5, "an absent limit is what is left");
        let mut none = left();
        none.steps = 0;
        assert!(carve(&AgentBudget::default(), &none).is_err());
        let mut none = left();
        none.tokens = Some(0);
        assert!(carve(&AgentBudget::default(), &none).is_err());
    }

    #[cfg(unix)]
    #[test]
    fn a_sub_root_stays_inside_the_parents_workspace() {
        let outside = tempfile::tempdir().unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("a/b")).unwrap();
        std::os::unix::fs::symlink(outside.path(), dir.path().join("out")).unwrap();
        std::os::unix::fs::symlink(dir.path().join("a/b"), dir.path().join("inner")).unwrap();
        let (root, prefix) = sub_root(dir.path(), "a/b").unwrap();
        assert!(root.ends_with("a/b"));
        assert_eq!(prefix, "a/b");
        assert_eq!(sub_root(dir.path(), ".").unwrap().1, "");
        assert_eq!(
            sub_root(dir.path(), "inner").unwrap().1,
            "a/b",
            "a link inside is rebased to where it leads"
        );
        for bad in ["out", "../x", "/etc", "a/../../x", "missing"] {
            assert!(sub_root(dir.path(), bad).is_err(), "{bad}");
        }
    }

    #[test]
    fn a_child_gate_is_never_wider_than_its_parent() {
        let mut parent = Policy::builtin().with_exec_isolation(Isolation::Native);
        parent
            .add_run_rule(Rule::deny(Act::Write, "sub/locked.txt"))
            .unwrap();
        parent.add_run_rule(Rule::ask(Act::Exec, "curl")).unwrap();
        let dir = tempfile::tempdir().unwrap();
        let gate = child_gate(
            Arc::new(parent),
            "sub".into(),
            &[Rule::deny(Act::Write, "*.md")],
            dir.path(),
        )
        .unwrap();
        let d = |act, t: &str| gate.decide(&Action::new(act, t)).decision;
        assert_eq!(d(Act::Write, "locked.txt"), Decision::Deny, "rebased");
        assert_eq!(d(Act::Write, "ok.txt"), Decision::Allow);
        assert_eq!(d(Act::Write, "notes.md"), Decision::Deny, "its own rule");
        assert_eq!(d(Act::Exec, "curl"), Decision::Ask);
        assert_eq!(d(Act::Read, ".env"), Decision::Deny);
        assert_eq!(
            gate.decide(&Action::new(Act::Write, "locked.txt"))
                .action
                .target,
            "locked.txt",
            "recorded in the child's frame"
        );
    }
}
