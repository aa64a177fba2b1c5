//! The one place budgets are checked.

use std::time::Duration;

use super::outcome::RunOutcome;
use crate::contract::Budget;
use crate::provider::{Cost, CostSource, Usage};
use crate::store::{LostCall, StepRecord};

/// Running totals of a run, rebuilt from committed steps (and the calls whose reply was
/// lost) on resume.
///
/// Token fields are effective counts: as the provider reported them, else the
/// harness's estimate (`estimated_tokens` says how many of them are estimates), so a
/// server that reports no usage still runs into `max_tokens`.
#[derive(Debug, Clone, Default, PartialEq)]
pub(crate) struct Totals {
    pub steps: u32,
    pub input_tokens: u64,
    pub output_tokens: u64,
    pub cached_input_tokens: u64,
    pub other_tokens: u64,
    /// Of the tokens above, those that are the harness's estimate.
    pub estimated_tokens: u64,
    /// Model calls whose reply was lost after the request was sent (a broken stream,
    /// a cancel or kill in flight): their estimated input is counted.
    pub lost_calls: u32,
    pub cost_known_usd: f64,
    pub any_cost_known: bool,
    pub cost_unknown_steps: u32,
    /// Whether some of the known cost was priced on estimated tokens.
    pub cost_estimated: bool,
    /// Steps taken by sub-agents (theirs and their own sub-agents'): counted against
    /// the step budget, never in the step numbering.
    pub agent_steps: u32,
}

impl Totals {
    pub fn add(&mut self, usage: &Usage, cost: &Cost) {
        self.steps = self.steps.saturating_add(1);
        self.input_tokens = self
            .input_tokens
            .saturating_add(usage.effective_uncached_input());
        self.output_tokens = self.output_tokens.saturating_add(usage.effective_output());
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(usage.cached_input_tokens.unwrap_or(0));
        self.other_tokens = self
            .other_tokens
            .saturating_add(usage.cache_write_tokens.unwrap_or(0));
        self.estimated_tokens = self.estimated_tokens.saturating_add(usage.estimated_part());
        self.add_cost(cost);
        if cost.usd.is_none() {
            self.cost_unknown_steps = self.cost_unknown_steps.saturating_add(1);
        }
    }

    fn add_cost(&mut self, cost: &Cost) {
        if let Some(c) = cost.usd {
            self.cost_known_usd += c;
            self.any_cost_known = true;
            self.cost_estimated |= cost.source == CostSource::Estimated;
        }
    }

    /// Counts a model call whose reply was lost: its request's estimated input, and
    /// that input's estimated cost when the price is known.
    pub fn add_lost(&mut self, lost: &LostCall) {
        self.lost_calls = self.lost_calls.saturating_add(1);
        self.input_tokens = self.input_tokens.saturating_add(lost.input_tokens);
        self.estimated_tokens = self.estimated_tokens.saturating_add(lost.input_tokens);
        if let Some(usd) = lost.cost_usd {
            self.add_cost(&Cost {
                usd: Some(usd),
                source: CostSource::Estimated,
            });
        }
    }

    /// Adds a sub-agent's usage: its tokens and cost as they are, its steps as agent
    /// steps.
    pub fn add_child(&mut self, c: &Totals) {
        self.agent_steps = self.agent_steps.saturating_add(c.steps + c.agent_steps);
        self.input_tokens = self.input_tokens.saturating_add(c.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(c.output_tokens);
        self.cached_input_tokens = self
            .cached_input_tokens
            .saturating_add(c.cached_input_tokens);
        self.other_tokens = self.other_tokens.saturating_add(c.other_tokens);
        self.estimated_tokens = self.estimated_tokens.saturating_add(c.estimated_tokens);
        self.lost_calls = self.lost_calls.saturating_add(c.lost_calls);
        self.cost_known_usd += c.cost_known_usd;
        self.any_cost_known |= c.any_cost_known;
        self.cost_estimated |= c.cost_estimated;
        self.cost_unknown_steps = self.cost_unknown_steps.saturating_add(c.cost_unknown_steps);
    }

    /// The totals of committed steps and of the calls whose reply was lost.
    pub fn from_record(steps: &[StepRecord], lost: &[LostCall]) -> Self {
        let mut t = Self::default();
        for s in steps {
            let usage: Usage = serde_json::from_str(&s.usage_json).unwrap_or(Usage {
                cached_input_tokens: s.cached_input_tokens,
                ..Usage::reported(s.input_tokens, s.output_tokens)
            });
            let source = serde_json::from_value(serde_json::Value::String(s.cost_source.clone()))
                .unwrap_or(CostSource::Unknown);
            let cost = Cost {
                usd: s.cost_usd,
                source,
            };
            t.add(&usage, &cost);
        }
        for l in lost {
            t.add_lost(l);
        }
        t
    }

    pub fn total_tokens(&self) -> u64 {
        self.input_tokens
            .saturating_add(self.output_tokens)
            .saturating_add(self.cached_input_tokens)
            .saturating_add(self.other_tokens)
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
        t.add(&Usage::reported(600, 400), &Cost::UNKNOWN);
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
    fn unreported_fields_count_their_estimate_and_lost_calls_their_input() {
        let mut t = Totals::default();
        let usage = Usage {
            input_tokens: Some(100),
            estimate: Some(crate::provider::TokenEstimate {
                input_tokens: 90,
                output_tokens: 40,
            }),
            ..Usage::default()
        };
        t.add(&usage, &Cost::UNKNOWN);
        assert_eq!((t.input_tokens, t.output_tokens), (100, 40));
        assert_eq!(t.estimated_tokens, 40, "only the output is an estimate");
        t.add_lost(&LostCall {
            input_tokens: 500,
            cost_usd: Some(0.5),
        });
        assert_eq!((t.total_tokens(), t.estimated_tokens), (640, 540));
        assert_eq!(
            (t.lost_calls, t.cost_usd(), t.cost_estimated),
            (1, Some(0.5), true)
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
