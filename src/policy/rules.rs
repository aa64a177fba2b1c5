//! Rules as the operator writes them, and their compiled form.
//!
//! A [`Rule`] is plain data (it is what the task file, the project file and the
//! stored run hold); a [`CompiledRule`] carries the matcher so a decision costs a
//! scan, not a glob compilation.

use serde::{Deserialize, Serialize};

use super::glob::{Matcher, Reach};
use super::{Act, Decision};

/// One rule: what to answer for an act on targets matching a glob.
///
/// See the `glob` rules in the [module docs](super) for how `target` matches.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Rule {
    /// The act the rule is about.
    pub act: Act,
    /// A glob over paths, commands or `host[:port]`.
    pub target: String,
    /// The answer for a matching action.
    pub decision: Decision,
}

impl Rule {
    /// A rule.
    pub fn new(act: Act, target: impl Into<String>, decision: Decision) -> Self {
        Self {
            act,
            target: target.into(),
            decision,
        }
    }

    /// An allow rule.
    pub fn allow(act: Act, target: impl Into<String>) -> Self {
        Self::new(act, target, Decision::Allow)
    }

    /// An ask rule.
    pub fn ask(act: Act, target: impl Into<String>) -> Self {
        Self::new(act, target, Decision::Ask)
    }

    /// A deny rule.
    pub fn deny(act: Act, target: impl Into<String>) -> Self {
        Self::new(act, target, Decision::Deny)
    }

    /// Refuses a target that is not a valid glob for its act.
    pub fn check(&self) -> Result<(), PolicyError> {
        Matcher::compile(self.act, &self.target).map(|_| ())
    }
}

/// An operator's explicit permission to lift a built-in deny (for example reading
/// `.env.example`). Only the task contract and the run may carry one. It lifts every
/// built-in deny of its act for the targets its glob matches (and nothing else: other
/// layers' denies and asks still apply); an action it let through is recorded as a
/// decision of layer `override` naming the built-in rule it lifted.
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Override {
    /// The act.
    pub act: Act,
    /// A glob, matched like a rule's target.
    pub target: String,
}

impl Override {
    /// An override.
    pub fn new(act: Act, target: impl Into<String>) -> Self {
        Self {
            act,
            target: target.into(),
        }
    }

    /// Refuses a target that is not a valid glob for its act.
    pub fn check(&self) -> Result<(), PolicyError> {
        Matcher::compile(self.act, &self.target).map(|_| ())
    }
}

/// A rule or a stored policy that cannot be used.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PolicyError {
    /// The target is not a valid glob.
    #[error("{} rule {target:?}: {source}", act.as_str())]
    Glob {
        /// The act.
        act: Act,
        /// The pattern as written.
        target: String,
        /// What globset said.
        source: globset::Error,
    },
    /// The target can never match as meant.
    #[error("{} rule {target:?}: {reason}", act.as_str())]
    Target {
        /// The act.
        act: Act,
        /// The pattern as written.
        target: String,
        /// Why.
        reason: &'static str,
    },
    /// A rule sits in a layer that may not hold it (an allow in the project layer, a
    /// non-allow among remembered approvals, an override outside task and run).
    #[error("layer {layer}: {} {target:?}: {reason}", act.as_str())]
    Layer {
        /// The layer.
        layer: &'static str,
        /// The act.
        act: Act,
        /// The pattern.
        target: String,
        /// Why it may not be there.
        reason: &'static str,
    },
}

/// A rule with its matcher.
#[derive(Debug, Clone)]
pub(crate) struct CompiledRule {
    pub(crate) rule: Rule,
    matcher: Matcher,
}

impl CompiledRule {
    pub(crate) fn new(rule: Rule) -> Result<Self, PolicyError> {
        let matcher = Matcher::compile(rule.act, &rule.target)?;
        Ok(Self { rule, matcher })
    }

    /// Whether the rule applies to `target` (normalized) of `act`.
    pub(crate) fn applies(&self, act: Act, target: &str) -> bool {
        let reach = match self.rule.decision {
            Decision::Allow => Reach::Widening,
            Decision::Ask | Decision::Deny => Reach::Narrowing,
        };
        self.rule.act == act && self.matcher.matches(target, reach)
    }
}

/// An override with its matcher.
#[derive(Debug, Clone)]
pub(crate) struct CompiledOverride {
    pub(crate) ov: Override,
    matcher: Matcher,
}

impl CompiledOverride {
    pub(crate) fn new(ov: Override) -> Result<Self, PolicyError> {
        let matcher = Matcher::compile(ov.act, &ov.target)?;
        Ok(Self { ov, matcher })
    }

    /// An override grants, so it matches strictly.
    pub(crate) fn applies(&self, act: Act, target: &str) -> bool {
        self.ov.act == act && self.matcher.matches(target, Reach::Widening)
    }
}
