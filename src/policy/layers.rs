//! The named layers and their stored form.
//!
//! A run stores its [`PolicyLayers`] and a resumed run rebuilds its policy from them,
//! so the stored form has no defaults: a missing field is an error, never a
//! permissive policy. The same checks that guard the building APIs guard loading
//! (no allow in the project layer, only allows among remembered approvals,
//! overrides only from the operator).

use serde::{Deserialize, Serialize};

use super::{Decision, Override, PolicyError, Rule, TaskPolicy};

/// Where a rule comes from; each decision names one.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum LayerName {
    /// Secrets and the harness's own files; also the acts' defaults.
    Builtin,
    /// `.io-harness/policy.toml` in the workspace: narrows only.
    Project,
    /// The task contract's `[policy]`, and the operator's verification commands.
    Task,
    /// The command line (or the embedding program) for this run.
    Run,
    /// Approvals the human asked to remember.
    Remembered,
    /// A built-in deny lifted by an operator override.
    Override,
}

impl LayerName {
    /// Stable lowercase name, as recorded in `policy_events`.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Builtin => "builtin",
            Self::Project => "project",
            Self::Task => "task",
            Self::Run => "run",
            Self::Remembered => "remembered",
            Self::Override => "override",
        }
    }
}

/// How strongly a command the agent runs is isolated; it sets the `exec` default.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Isolation {
    /// The native sandbox backend: commands are allowed unless a rule says otherwise.
    Native,
    /// A weaker floor, or no sandbox: commands are asked about unless a rule allows.
    Weaker,
}

impl TaskPolicy {
    /// Refuses an invalid glob, naming its key (`policy.rules[2]`, `policy.override[0]`).
    pub(crate) fn check(&self) -> Result<(), (String, String)> {
        for (i, r) in self.rules.iter().enumerate() {
            r.check()
                .map_err(|e| (format!("policy.rules[{i}]"), e.to_string()))?;
        }
        for (i, o) in self.overrides.iter().enumerate() {
            o.check()
                .map_err(|e| (format!("policy.override[{i}]"), e.to_string()))?;
        }
        Ok(())
    }
}

/// Every layer of a policy, as stored with a run.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PolicyLayers {
    /// Sets the `exec` default.
    pub exec_isolation: Isolation,
    /// Built-in denies.
    pub builtin: Vec<Rule>,
    /// Project rules that were honoured (deny and ask only).
    pub project: Vec<Rule>,
    /// Contract rules and operator commands.
    pub task: Vec<Rule>,
    /// Run rules.
    pub run: Vec<Rule>,
    /// Remembered approvals (allow only).
    pub remembered: Vec<Rule>,
    /// Overrides from the contract.
    pub task_overrides: Vec<Override>,
    /// Overrides from the run.
    pub run_overrides: Vec<Override>,
}

impl PolicyLayers {
    /// Refuses a rule in a layer that may not hold it, or an invalid glob.
    pub fn check(&self) -> Result<(), PolicyError> {
        let misplaced = |layer: LayerName, r: &Rule, reason| PolicyError::Layer {
            layer: layer.as_str(),
            act: r.act,
            target: r.target.clone(),
            reason,
        };
        for r in &self.builtin {
            if r.decision != Decision::Deny {
                return Err(misplaced(
                    LayerName::Builtin,
                    r,
                    "the built-in layer only denies",
                ));
            }
        }
        for r in &self.project {
            if r.decision == Decision::Allow {
                return Err(misplaced(LayerName::Project, r, PROJECT_ALLOW_IGNORED));
            }
        }
        for r in &self.remembered {
            if r.decision != Decision::Allow {
                return Err(misplaced(
                    LayerName::Remembered,
                    r,
                    "a remembered approval can only allow",
                ));
            }
        }
        let all = [
            &self.builtin,
            &self.project,
            &self.task,
            &self.run,
            &self.remembered,
        ];
        for r in all.into_iter().flatten() {
            r.check()?;
        }
        for o in self.task_overrides.iter().chain(&self.run_overrides) {
            o.check()?;
        }
        Ok(())
    }
}

/// Why a project allow rule is not honoured.
pub(crate) const PROJECT_ALLOW_IGNORED: &str =
    "a project file can only narrow the operator's policy: allow rules are not honoured";
