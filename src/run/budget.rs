//! The one place budgets are checked.

use std::time::Duration;

use super::outcome::RunOutcome;
use crate::contract::Budget;
use crate::provider::{Cost, Usage};
use crate::store::StepRecord;

/// Running totals of a run, rebuilt from committed steps on resume.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Totals {
    pub steps: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_input_tokens: u64,
    pub other_tokens: u64,
    pub cost_known_usd: f64,
    pub any_cost_known: bool,
    pub cost_unknown_steps: u32,
    /// Steps taken by sub-agents (theirs and their own sub-agents'): counted against
    /// the step budget, never in the step numbering.
    pub agent_steps: u32,
}

impl Totals {
    pub fn add(&mut self, usage: &Usage, cost: &Cost) {
        self.steps += 1;
        self.input_tokens += usage.input_tokens;
        self.output_tokens += usage.output_tokens;
        self.cached_input_tokens += usage.cached_input_tokens.unwrap_or(0);
        self.other_tokens += usage.cache_write_tokens.unwrap_or(0);
        match cost.usd {
            Some(c) => {
                self.cost_known_usd += c;
                self.any_cost_known = true;
            }
            None => self.cost_unknown_steps += 1,
        }
    }

    /// Adds a sub-agent's usage: its tokens and cost as they are, its steps as agent
    /// steps.
    pub fn add_child(&mut self, c: &Totals) {
        self.agent_steps += c.steps + c.agent_steps;
        self.input_tokens += c.input_tokens;
        self.output_tokens += c.output_tokens;
        self.cached_input_tokens += c.cached_input_tokens;
        self.other_tokens += c.other_tokens;
        self.cost_known_usd += c.cost_known_usd;
        self.any_cost_known |= c.any_cost_known;
        self.cost_unknown_steps += c.cost_unknown_steps;
    }

    pub fn from_steps(steps: &[StepRecord]) -> Self {
        let mut t = Self::default();
        for s in steps {
            let usage: Usage = serde_json::from_str(&s.usage_json).unwrap_or(Usage {
                input_tokens: s.input_tokens,
                output_tokens: s.output_tokens,
                cached_input_tokens: s.cached_input_tokens,
                cache_write_tokens: None,
            });
            let cost = Cost {
                usd: s.cost_usd,
                source: crate::provider::CostSource::Unknown,
            };
            t.add(&usage, &cost);
        }
        t
    }

    pub fn total_tokens(&self) -> u64 {
        self.input_tokens + self.output_tokens + self.cached_input_tokens + self.other_tokens
    }

    pub fn cost_usd(&self) -> Option<f64> {
        self.any_cost_known.then_some(self.cost_known_usd)
    }
}

/// Checked before each model call: does the run have room for another step?
pub(crate) fn before_step(
    budget: &Budget,
    totals: &Totals,
    elapsed: Duration,
    failing: &[String],
) -> Option<RunOutcome> {
    if let Some(limit) = budget.max_duration
        && elapsed >= limit
    {
        return Some(RunOutcome::TimeBudgetExceeded);
    }
    if totals.steps + totals.agent_steps >= budget.max_steps {
        return Some(if failing.is_empty() {
            RunOutcome::StepCapReached
        } else {
            RunOutcome::VerificationFailed {
                failed: failing.to_vec(),
            }
        });
    }
    after_step(budget, totals)
}

/// Checked after each committed step: did it use up tokens or money?
pub(crate) fn after_step(budget: &Budget, totals: &Totals) -> Option<RunOutcome> {
    if let Some(max) = budget.max_tokens
        && totals.total_tokens() >= max
    {
        return Some(RunOutcome::TokenBudgetExceeded);
    }
    if let Some(max) = budget.max_cost_usd
        && totals.cost_known_usd >= max
    {
        return Some(RunOutcome::CostBudgetExceeded);
    }
    None
}

/// Time left for the next model call, if the run has a time budget.
pub(crate) fn remaining(budget: &Budget, elapsed: Duration) -> Option<Duration> {
    budget.max_duration.map(|m| m.saturating_sub(elapsed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn budget() -> Budget {
        Budget {
            max_steps: 3,
            max_duration: Some(Duration::from_secs(60)),
            max_tokens: Some(1000),
            max_cost_usd: Some(1.0),
        }
    }

    #[test]
    fn each_budget_has_its_outcome() {
        let b = budget();
        let mut t = Totals::default();
        assert_eq!(before_step(&b, &t, Duration::ZERO, &[]), None);
        assert_eq!(
            before_step(&b, &t, Duration::from_secs(60), &[]),
            Some(RunOutcome::TimeBudgetExceeded)
        );
        t.add(
            &Usage {
                input_tokens: 600,
                output_tokens: 400,
                ..Usage::default()
            },
            &Cost::UNKNOWN,
        );
        assert_eq!(after_step(&b, &t), Some(RunOutcome::TokenBudgetExceeded));
        let mut t = Totals::default();
        t.add(
            &Usage::default(),
            &Cost {
                usd: Some(1.0),
                source: crate::provider::CostSource::Reported,
            },
        );
        assert_eq!(after_step(&b, &t), Some(RunOutcome::CostBudgetExceeded));
        let mut t = Totals {
            steps: 3,
            ..Totals::default()
        };
        assert_eq!(
            before_step(&b, &t, Duration::ZERO, &[]),
            Some(RunOutcome::StepCapReached)
        );
        t.steps = 3;
        assert_eq!(
            before_step(&b, &t, Duration::ZERO, &["command x".into()]),
            Some(RunOutcome::VerificationFailed {
                failed: vec!["command x".into()]
            })
        );
    }

    #[test]
    fn unknown_cost_is_not_zero() {
        let mut t = Totals::default();
        t.add(&Usage::default(), &Cost::UNKNOWN);
        assert_eq!(t.cost_usd(), None);
        assert_eq!(t.cost_unknown_steps, 1);
    }
}
