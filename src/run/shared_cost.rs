//! A cost budget shared by several runs at once (a batch's total, issue 21): one live
//! counter every running session adds its model calls' known cost to as each reply
//! arrives, and checks before each model call. A run that finds it used up ends
//! `CostBudgetExceeded`, as its own `max_cost_usd` would end it. The overshoot is at
//! most the calls already in flight when the counter crossed the limit: one per running
//! run (a sub-agent shares its parent's counter and runs while the parent waits).

use std::sync::{Arc, Mutex};

/// A total cost in USD that several runs draw on. Clones share one counter.
///
/// ```
/// use io_harness::run::SharedCost;
/// let budget = SharedCost::new(1.0, 0.25);
/// let same = budget.clone();
/// same.add(0.5);
/// assert!(!budget.is_spent());
/// same.add(0.25);
/// assert!(budget.is_spent());
/// assert_eq!(budget.spent(), 1.0);
/// ```
#[derive(Debug, Clone)]
pub struct SharedCost {
    limit_usd: f64,
    spent: Arc<Mutex<f64>>,
}

impl SharedCost {
    /// A budget of `limit_usd`, of which `already_spent` is gone (a resumed batch
    /// starts from what its runs' records say they cost).
    pub fn new(limit_usd: f64, already_spent: f64) -> Self {
        Self {
            limit_usd,
            spent: Arc::new(Mutex::new(already_spent.max(0.0))),
        }
    }

    /// The limit.
    pub fn limit(&self) -> f64 {
        self.limit_usd
    }

    /// What the runs sharing it have spent so far (known costs only: a call whose
    /// price is unknown adds nothing).
    pub fn spent(&self) -> f64 {
        self.spent.lock().map(|s| *s).unwrap_or(f64::INFINITY)
    }

    /// Adds one call's known cost.
    pub fn add(&self, usd: f64) {
        if usd.is_finite()
            && usd > 0.0
            && let Ok(mut s) = self.spent.lock()
        {
            *s += usd;
        }
    }

    /// Whether nothing is left: checked before each model call.
    pub fn is_spent(&self) -> bool {
        self.spent() >= self.limit_usd
    }
}
