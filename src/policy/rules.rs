//! Rules as the operator writes them, and their compiled form.
//!
//! A [`Rule`] is plain data (it is what the task file, the project file and the
//! stored run hold); a [`CompiledRule`] carries the matcher so a decision costs a
//! scan, not a glob compilation.

use super::glob::{Matcher, Reach};
use super::{Act, Decision, Override, Rule};

impl Rule {
    /// Refuses a target that is not a valid glob for its act.
    pub fn check(&self) -> Result<(), PolicyError> {
        Matcher::compile(self.act, &self.target).map(|_| ())
    }
}

impl Override {
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
        let reach = match rule.decision {
            Decision::Allow => Reach::Widening,
            Decision::Ask | Decision::Deny => Reach::Narrowing,
        };
        let matcher = Matcher::compile_reaching(rule.act, &rule.target, reach)?;
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
