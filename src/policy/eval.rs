//! [`Policy`]: the layers put together, and the one evaluation rule.
//!
//! Every matching rule of every layer is collected; then deny beats ask beats allow
//! beats the act's default. Two exceptions are explicit and recorded: an operator
//! override lifts a built-in deny (the decision names layer `override` and the lifted
//! rule), and a remembered approval turns an ask into an allow (never a deny).

use std::sync::{LazyLock, PoisonError, RwLock};

use super::glob::{literal_pattern, normalize_target};
use super::layers::PROJECT_ALLOW_IGNORED;
use super::rules::{CompiledOverride, CompiledRule};
use super::{
    Act, Action, Decision, Isolation, LayerName, Override, PolicyDecision, PolicyError, PolicyGate,
    PolicyLayers, ProjectPolicy, Rule, builtin_rules,
};
use crate::contract::policy::TaskPolicy;

/// What a policy takes from a task: its `[policy]` section, the instructions file it
/// protects, the operator's gate files inside the workspace (write-protected) and the
/// programs of the operator's verification commands (allowed).
///
/// ```
/// use io_harness::policy::{Act, Action, Decision, Policy, PolicyGate, TaskInputs, TaskPolicy};
/// let task = TaskPolicy::default();
/// let inputs = TaskInputs {
///     gate_files: vec!["check.sh".into()],
///     operator_programs: vec!["cargo".into()],
///     ..TaskInputs::new(&task)
/// };
/// let policy = Policy::for_task(&inputs).unwrap();
/// assert_eq!(policy.decide(&Action::new(Act::Write, "check.sh")).decision, Decision::Deny);
/// ```
#[derive(Debug, Clone)]
pub struct TaskInputs<'a> {
    /// The task layer's rules and overrides.
    pub policy: &'a TaskPolicy,
    /// The instructions file (relative to the workspace), protected from writes.
    pub instructions: Option<&'a std::path::Path>,
    /// Operator files inside the workspace (relative), protected from writes.
    pub gate_files: Vec<std::path::PathBuf>,
    /// Programs of the operator's verification commands, allowed to run.
    pub operator_programs: Vec<String>,
}

impl<'a> TaskInputs<'a> {
    /// Inputs with only a `[policy]` section.
    pub fn new(policy: &'a TaskPolicy) -> Self {
        Self {
            policy,
            instructions: None,
            gate_files: Vec::new(),
            operator_programs: Vec::new(),
        }
    }
}

/// The layered permission policy. It implements [`PolicyGate`], the check point
/// every tool call passes through.
///
/// ```
/// use io_harness::policy::{Act, Action, Decision, Isolation, Policy, PolicyGate, Rule};
/// let mut policy = Policy::builtin().with_exec_isolation(Isolation::Native);
/// policy.add_run_rule(Rule::deny(Act::Exec, "curl")).unwrap();
/// let d = policy.decide(&Action::new(Act::Exec, "/usr/bin/curl"));
/// assert_eq!((d.decision, d.rule.as_str(), d.layer.as_str()), (Decision::Deny, "curl", "run"));
/// let d = policy.decide(&Action::new(Act::Read, "config/.env"));
/// assert_eq!((d.decision, d.rule.as_str(), d.layer.as_str()), (Decision::Deny, ".env", "builtin"));
/// ```
///
/// It serializes as its [`PolicyLayers`], so a resumed run decides exactly as the
/// original did.
#[derive(Debug, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "PolicyLayers", into = "PolicyLayers")]
pub struct Policy {
    isolation: Isolation,
    builtin: Vec<CompiledRule>,
    project: Vec<CompiledRule>,
    task: Vec<CompiledRule>,
    run: Vec<CompiledRule>,
    task_overrides: Vec<CompiledOverride>,
    run_overrides: Vec<CompiledOverride>,
    /// Grows during a run as approvals are remembered, while the gate is shared.
    remembered: RwLock<Vec<CompiledRule>>,
}

fn compile(rules: &[Rule]) -> Result<Vec<CompiledRule>, PolicyError> {
    rules.iter().cloned().map(CompiledRule::new).collect()
}

fn compile_overrides(ovs: &[Override]) -> Result<Vec<CompiledOverride>, PolicyError> {
    ovs.iter().cloned().map(CompiledOverride::new).collect()
}

fn plain(rules: &[CompiledRule]) -> Vec<Rule> {
    rules.iter().map(|c| c.rule.clone()).collect()
}

fn push_unique(rules: &mut Vec<CompiledRule>, rule: Rule) -> Result<(), PolicyError> {
    if !rules.iter().any(|c| c.rule == rule) {
        rules.push(CompiledRule::new(rule)?);
    }
    Ok(())
}

impl Policy {
    /// The built-in layer alone; commands are treated as weakly isolated until
    /// [`Policy::with_exec_isolation`] says otherwise.
    pub fn builtin() -> Self {
        Self {
            isolation: Isolation::Weaker,
            builtin: BUILTIN_NO_INSTRUCTIONS.clone(),
            project: Vec::new(),
            task: Vec::new(),
            run: Vec::new(),
            task_overrides: Vec::new(),
            run_overrides: Vec::new(),
            remembered: RwLock::new(Vec::new()),
        }
    }

    /// The built-in layer (protecting the instructions file and the operator's gate
    /// files), the task layer from `[policy]`, and an allow for the program of every
    /// verification command the operator wrote: everything the policy takes from a
    /// task, and nothing else of it.
    pub fn for_task(task: &TaskInputs<'_>) -> Result<Self, PolicyError> {
        let mut p = Self::builtin();
        let mut builtin = builtin_rules(task.instructions)?;
        builtin.extend(super::builtin::gate_file_rules(&task.gate_files));
        p.builtin = compile(&builtin)?;
        for r in &task.policy.rules {
            push_unique(&mut p.task, r.clone())?;
        }
        p.task_overrides = compile_overrides(&task.policy.overrides)?;
        for program in &task.operator_programs {
            p.allow_operator_command(program)?;
        }
        Ok(p)
    }

    /// Sets how commands are isolated, which decides the `exec` default.
    pub fn with_exec_isolation(mut self, isolation: Isolation) -> Self {
        self.isolation = isolation;
        self
    }

    /// Takes the honoured rules of a loaded project file as the project layer.
    pub fn with_project(mut self, project: &ProjectPolicy) -> Result<Self, PolicyError> {
        let mut layer = Vec::new();
        for r in &project.rules {
            if r.decision == Decision::Allow {
                return Err(PolicyError::Layer {
                    layer: LayerName::Project.as_str(),
                    act: r.act,
                    target: r.target.clone(),
                    reason: PROJECT_ALLOW_IGNORED,
                });
            }
            push_unique(&mut layer, r.clone())?;
        }
        self.project = layer;
        Ok(self)
    }

    /// Adds a rule to the run layer (command-line flags, the embedding program).
    pub fn add_run_rule(&mut self, rule: Rule) -> Result<(), PolicyError> {
        push_unique(&mut self.run, rule)
    }

    /// Adds a run-layer override lifting the built-in denies it matches.
    pub fn add_run_override(&mut self, ov: Override) -> Result<(), PolicyError> {
        if !self.run_overrides.iter().any(|c| c.ov == ov) {
            self.run_overrides.push(CompiledOverride::new(ov)?);
        }
        Ok(())
    }

    /// Allows, in the task layer, exactly the program `argv0` of a command the
    /// operator wrote in the contract (a verification command). Returns the rule,
    /// which is what decisions about that command name.
    pub fn allow_operator_command(&mut self, argv0: &str) -> Result<Rule, PolicyError> {
        let rule = Rule::allow(Act::Exec, literal_pattern(Act::Exec, argv0));
        push_unique(&mut self.task, rule.clone())?;
        Ok(rule)
    }

    /// Remembers an approval of `action`: an allow for exactly its target (for a
    /// command, its whole argv) in the `remembered` layer. It answers later asks for that target; it never lifts a
    /// deny. Callable while the policy is shared as the run's gate.
    pub fn remember(&self, action: &Action) -> Result<Rule, PolicyError> {
        let rule = Rule::allow(action.act, literal_pattern(action.act, &action.target));
        let mut layer = self
            .remembered
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        push_unique(&mut layer, rule.clone())?;
        Ok(rule)
    }

    /// Remembers an approval of a command as an allow of its program with any
    /// arguments (an explicit widening by the operator); for other acts, as
    /// [`Policy::remember`].
    pub fn remember_program(&self, action: &Action) -> Result<Rule, PolicyError> {
        if action.act != Act::Exec {
            return self.remember(action);
        }
        let words = super::command_line::split(&action.target)
            .unwrap_or_else(|| vec![action.target.clone()]);
        let program = words.first().cloned().unwrap_or_default();
        let rule = Rule::allow(Act::Exec, literal_pattern(Act::Exec, &program));
        let mut layer = self
            .remembered
            .write()
            .unwrap_or_else(PoisonError::into_inner);
        push_unique(&mut layer, rule.clone())?;
        Ok(rule)
    }

    /// The `exec` default this policy applies.
    pub fn exec_isolation(&self) -> Isolation {
        self.isolation
    }

    /// A snapshot of every layer, as stored with a run.
    pub fn layers(&self) -> PolicyLayers {
        PolicyLayers {
            exec_isolation: self.isolation,
            builtin: plain(&self.builtin),
            project: plain(&self.project),
            task: plain(&self.task),
            run: plain(&self.run),
            remembered: plain(
                &self
                    .remembered
                    .read()
                    .unwrap_or_else(PoisonError::into_inner),
            ),
            task_overrides: self.task_overrides.iter().map(|c| c.ov.clone()).collect(),
            run_overrides: self.run_overrides.iter().map(|c| c.ov.clone()).collect(),
        }
    }

    /// Rebuilds a policy from stored layers, refusing anything the building APIs
    /// would refuse.
    pub fn from_layers(layers: PolicyLayers) -> Result<Self, PolicyError> {
        layers.check()?;
        Ok(Self {
            isolation: layers.exec_isolation,
            builtin: compile(&layers.builtin)?,
            project: compile(&layers.project)?,
            task: compile(&layers.task)?,
            run: compile(&layers.run)?,
            task_overrides: compile_overrides(&layers.task_overrides)?,
            run_overrides: compile_overrides(&layers.run_overrides)?,
            remembered: RwLock::new(compile(&layers.remembered)?),
        })
    }

    fn default_for(&self, act: Act) -> Decision {
        match act {
            Act::Read | Act::Write => Decision::Allow,
            Act::Exec => match self.isolation {
                Isolation::Native => Decision::Allow,
                Isolation::Weaker => Decision::Ask,
            },
            Act::Net => Decision::Deny,
        }
    }

    fn overridden(&self, act: Act, target: &str) -> bool {
        self.task_overrides
            .iter()
            .chain(&self.run_overrides)
            .any(|o| o.applies(act, target))
    }
}

/// The instruction-less built-in layer, compiled once. Its patterns are constants
/// (a unit test compiles them); failing loudly beats a policy without its floor.
static BUILTIN_NO_INSTRUCTIONS: LazyLock<Vec<CompiledRule>> = LazyLock::new(|| {
    builtin_rules(None)
        .and_then(|r| compile(&r))
        .expect("the built-in patterns are valid globs")
});

impl Clone for Policy {
    fn clone(&self) -> Self {
        Self {
            isolation: self.isolation,
            builtin: self.builtin.clone(),
            project: self.project.clone(),
            task: self.task.clone(),
            run: self.run.clone(),
            task_overrides: self.task_overrides.clone(),
            run_overrides: self.run_overrides.clone(),
            remembered: RwLock::new(
                self.remembered
                    .read()
                    .unwrap_or_else(PoisonError::into_inner)
                    .clone(),
            ),
        }
    }
}

impl TryFrom<PolicyLayers> for Policy {
    type Error = PolicyError;
    fn try_from(layers: PolicyLayers) -> Result<Self, PolicyError> {
        Self::from_layers(layers)
    }
}

impl From<Policy> for PolicyLayers {
    fn from(p: Policy) -> Self {
        p.layers()
    }
}

/// Tools of the harness decided as `exec` actions by name.
const HARNESS_TOOLS: &[&str] = &["remember", "forget", "spawn_agent"];

/// The first matching rule of each strength, in layer order.
#[derive(Default)]
struct Found<'a> {
    deny: Option<(&'a Rule, LayerName)>,
    ask: Option<(&'a Rule, LayerName)>,
    allow: Option<(&'a Rule, LayerName)>,
    /// A built-in deny an override lifted.
    lifted: Option<&'a Rule>,
}

impl PolicyGate for Policy {
    fn remember(&self, action: &Action) -> bool {
        Policy::remember(self, action).is_ok()
    }

    fn remember_program(&self, action: &Action) -> bool {
        Policy::remember_program(self, action).is_ok()
    }

    /// Its layers are fixed but for the remembered one, whose rules only allow (a
    /// remembered approval turns an ask into an allow, never a deny into anything).
    fn denials_fixed(&self) -> bool {
        true
    }

    fn limits_programs(&self) -> bool {
        self.operator_limits_programs()
    }

    fn decide(&self, action: &Action) -> PolicyDecision {
        let target = normalize_target(action.act, &action.target);
        if action.act != Act::Exec {
            return self.decide_one(action, &target);
        }
        self.decide_command(action, &target)
    }
}

/// How strongly a decision refuses, for picking the strongest of a command's.
fn strength(d: Decision) -> u8 {
    match d {
        Decision::Allow => 0,
        Decision::Ask => 1,
        Decision::Deny => 2,
    }
}

impl Policy {
    /// An `exec` action: every command its argv runs is decided (wrappers unwrapped,
    /// see [`super::command_line`]) and the strongest refusal stands. A command that
    /// runs code the policy cannot read is asked about when the operator limits any
    /// program (an exec deny or ask rule) and nothing allows it explicitly: the limit
    /// could be reached through it. Without such a rule the default stands, so an
    /// unattended run does not stop at every `python`.
    fn decide_command(&self, action: &Action, target: &str) -> PolicyDecision {
        let words = super::command_line::split(target).unwrap_or_else(|| vec![target.to_string()]);
        let reached = super::command_line::reached(&words);
        let mut strongest: Option<PolicyDecision> = None;
        for cmd in &reached.commands {
            let d = self.decide_one(action, &super::command_line::quote(cmd));
            if strongest
                .as_ref()
                .is_none_or(|s| strength(d.decision) > strength(s.decision))
            {
                strongest = Some(d);
            }
        }
        let d = strongest.unwrap_or_else(|| self.decide_one(action, target));
        let d = match self.mentioned_limit(action, &reached.commands) {
            Some(asked) if d.decision == Decision::Allow => asked,
            _ => d,
        };
        let d = match reached.opaque {
            Some(why)
                if d.decision == Decision::Allow
                    && d.layer == LayerName::Builtin.as_str()
                    && self.operator_limits_programs() =>
            {
                PolicyDecision {
                    action: action.clone(),
                    decision: Decision::Ask,
                    rule: format!("undecidable: {why}"),
                    layer: LayerName::Builtin.as_str().to_string(),
                }
            }
            _ => d,
        };
        // A remembered approval was of this exact line, and covers what it runs.
        if d.decision == Decision::Ask {
            let remembered = self
                .remembered
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            if let Some(c) = remembered.iter().find(|c| c.applies(Act::Exec, target)) {
                return PolicyDecision {
                    action: action.clone(),
                    decision: Decision::Allow,
                    rule: c.rule.target.clone(),
                    layer: LayerName::Remembered.as_str().to_string(),
                };
            }
        }
        d
    }

    /// An ask when an argument of a command names a program an operator rule denies or
    /// asks about, the command is not one known never to run its arguments
    /// ([`super::command_line::runs_no_argument`]: `echo curl` stays allowed), and none
    /// of the commands the argv is understood to run is that program: a launcher the
    /// policy does not know (`setpriv --reuid 1000 id`, `prlimit … id`) could run it.
    fn mentioned_limit(&self, action: &Action, commands: &[Vec<String>]) -> Option<PolicyDecision> {
        if !self.operator_limits_programs() {
            return None;
        }
        let base = |w: &str| w.rsplit('/').next().unwrap_or(w).to_string();
        let run: Vec<String> = commands
            .iter()
            .filter_map(|c| c.first().map(|p| base(p)))
            .collect();
        let unknown = commands.iter().filter(|c| {
            c.first()
                .is_some_and(|p| !super::command_line::runs_no_argument(&base(p)))
        });
        unknown.flat_map(|c| c.iter().skip(1)).find_map(|w| {
            let name = base(w);
            if name.is_empty() || run.contains(&name) {
                return None;
            }
            let alone = self.decide_one(action, &super::command_line::quote(std::slice::from_ref(&name)));
            (alone.decision != Decision::Allow && alone.layer != LayerName::Builtin.as_str()).then(
                || PolicyDecision {
                    action: action.clone(),
                    decision: Decision::Ask,
                    rule: format!(
                        "undecidable: the command names {name}, which rule {} limits, and could run it",
                        alone.rule
                    ),
                    layer: LayerName::Builtin.as_str().to_string(),
                },
            )
        })
    }

    /// Whether an operator layer denies or asks about some program (not an MCP tool
    /// or a harness tool, which no interpreter can reach).
    fn operator_limits_programs(&self) -> bool {
        [&self.project, &self.task, &self.run].iter().any(|layer| {
            layer.iter().any(|c| {
                c.rule.act == Act::Exec
                    && c.rule.decision != Decision::Allow
                    && !c.rule.target.starts_with("mcp__")
                    && !HARNESS_TOOLS.contains(&c.rule.target.as_str())
            })
        })
    }

    fn decide_one(&self, action: &Action, target: &str) -> PolicyDecision {
        let act = action.act;
        let target = target.to_string();
        let mut found = Found::default();
        let layers = [
            (LayerName::Builtin, &self.builtin),
            (LayerName::Project, &self.project),
            (LayerName::Task, &self.task),
            (LayerName::Run, &self.run),
        ];
        for (layer, rules) in layers {
            for c in rules.iter().filter(|c| c.applies(act, &target)) {
                let slot = match c.rule.decision {
                    Decision::Deny
                        if layer == LayerName::Builtin && self.overridden(act, &target) =>
                    {
                        found.lifted.get_or_insert(&c.rule);
                        continue;
                    }
                    Decision::Deny => &mut found.deny,
                    Decision::Ask => &mut found.ask,
                    Decision::Allow => &mut found.allow,
                };
                slot.get_or_insert((&c.rule, layer));
            }
        }
        let named = |decision, rule: &str, layer: LayerName| PolicyDecision {
            action: action.clone(),
            decision,
            rule: rule.to_string(),
            layer: layer.as_str().to_string(),
        };
        if let Some((r, layer)) = found.deny {
            return named(Decision::Deny, &r.target, layer);
        }
        let default = self.default_for(act);
        let asked = match (found.ask, found.allow) {
            (Some((r, layer)), _) => Some((r.target.as_str(), layer)),
            (None, None) if default == Decision::Ask => Some(("default", LayerName::Builtin)),
            _ => None,
        };
        if let Some((rule, layer)) = asked {
            let remembered = self
                .remembered
                .read()
                .unwrap_or_else(PoisonError::into_inner);
            return match remembered.iter().find(|c| c.applies(act, &target)) {
                Some(c) => named(Decision::Allow, &c.rule.target, LayerName::Remembered),
                None => named(Decision::Ask, rule, layer),
            };
        }
        let (decision, rule, layer) = match found.allow {
            Some((r, layer)) => (Decision::Allow, r.target.as_str(), layer),
            None => (default, "default", LayerName::Builtin),
        };
        match found.lifted {
            Some(lifted) if decision == Decision::Allow => {
                named(decision, &lifted.target, LayerName::Override)
            }
            _ => named(decision, rule, layer),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn decide(p: &Policy, act: Act, target: &str) -> (Decision, String, String) {
        let d = p.decide(&Action::new(act, target));
        (d.decision, d.rule, d.layer)
    }

    use crate::contract::{TaskContract, Verification};

    #[test]
    fn builtin_layer_compiles_and_protects_the_instructions_file() {
        assert!(!BUILTIN_NO_INSTRUCTIONS.is_empty());
        let mut c = TaskContract::workspace("g", ".", Verification::command(["cargo", "test"]));
        c.instructions = Some("docs/AGENTS.md".into());
        let p = Policy::for_contract(&c).unwrap();
        assert_eq!(
            decide(&p, Act::Write, "docs/AGENTS.md"),
            (Decision::Deny, "docs/AGENTS.md".into(), "builtin".into())
        );
        assert_eq!(decide(&p, Act::Write, "AGENTS.md").0, Decision::Allow);
        assert_eq!(decide(&p, Act::Read, "docs/AGENTS.md").0, Decision::Allow);
        assert_eq!(
            decide(&p, Act::Exec, "cargo"),
            (Decision::Allow, "cargo".into(), "task".into())
        );
    }

    #[test]
    fn an_absolute_instructions_path_is_refused_not_unprotected() {
        let mut c = TaskContract::workspace("g", ".", Verification::command(["true"]));
        c.instructions = Some("/etc/AGENTS.md".into());
        assert!(matches!(
            Policy::for_contract(&c),
            Err(PolicyError::Target { .. })
        ));
    }

    #[test]
    fn remember_works_through_a_shared_gate_and_is_idempotent() {
        let p = std::sync::Arc::new(Policy::builtin());
        let gate: std::sync::Arc<dyn PolicyGate> = p.clone();
        assert_eq!(decide(&p, Act::Exec, "make").0, Decision::Ask);
        let r1 = p.remember(&Action::new(Act::Exec, "make")).unwrap();
        let r2 = p.remember(&Action::new(Act::Exec, "make")).unwrap();
        assert_eq!(r1, r2);
        assert_eq!(p.layers().remembered.len(), 1);
        let d = gate.decide(&Action::new(Act::Exec, "make"));
        assert_eq!(
            (d.decision, d.layer.as_str()),
            (Decision::Allow, "remembered")
        );
    }

    #[test]
    fn stored_layers_that_would_widen_are_refused() {
        let mut l = Policy::builtin().layers();
        l.project.push(Rule::allow(Act::Net, "*"));
        assert!(matches!(
            Policy::from_layers(l),
            Err(PolicyError::Layer {
                layer: "project",
                ..
            })
        ));
        let mut l = Policy::builtin().layers();
        l.remembered.push(Rule::deny(Act::Net, "*"));
        assert!(Policy::from_layers(l).is_err());
        let mut l = Policy::builtin().layers();
        l.builtin.push(Rule::allow(Act::Read, "**"));
        assert!(Policy::from_layers(l).is_err());
        let j = serde_json::to_value(Policy::builtin()).unwrap();
        let mut missing = j.clone();
        missing.as_object_mut().unwrap().remove("builtin");
        assert!(serde_json::from_value::<Policy>(missing).is_err());
    }
}
