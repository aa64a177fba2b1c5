//! Stall detection (C6): an agent that repeats itself or learns nothing gets a bounded
//! number of replan directives, then the run ends `Stalled`.
//!
//! A step makes progress when it changes the workspace, or when a tool call returns
//! something not seen before and the step is not a repeat of the previous one. The set
//! of seen observations is rebuilt from the stored steps on resume, so only two small
//! counters live in the checkpoint.

use std::collections::HashSet;
use std::hash::{Hash, Hasher};

use serde::{Deserialize, Serialize};

pub use crate::contract::StallPolicy;

/// What the detector concluded about a step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) enum StallVerdict {
    /// The step changed something or learned something.
    Progress,
    /// No progress, still within the window.
    Idle,
    /// A stall: send this directive to the model.
    Replan(String),
    /// Stalled after every replan was used.
    Stalled,
}

/// The counters kept in the checkpoint.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub(crate) struct StallCounters {
    /// Consecutive steps without progress.
    #[serde(default)]
    pub idle: u32,
    /// Replans used.
    #[serde(default)]
    pub replans: u32,
    /// Fingerprint of the previous step's tool calls.
    #[serde(default)]
    pub last_calls: u64,
}

/// One tool call as the detector sees it.
pub(crate) struct SeenCall<'a> {
    pub name: &'a str,
    pub input_json: &'a str,
    pub output: &'a str,
}

impl<'a> SeenCall<'a> {
    /// The calls of a step as recorded, seen by the detector (live and on resume).
    pub(crate) fn all(calls: &'a [crate::store::ToolCallRecord]) -> Vec<Self> {
        calls
            .iter()
            .map(|c| SeenCall {
                name: &c.name,
                input_json: &c.input_json,
                output: &c.output,
            })
            .collect()
    }
}

/// Stable hasher: the fingerprints must be equal across processes (resume).
fn fingerprint<T: Hash + ?Sized>(v: &T) -> u64 {
    let mut h = std::collections::hash_map::DefaultHasher::new();
    v.hash(&mut h);
    h.finish()
}

/// Watches steps for lack of progress.
#[derive(Debug, Default)]
pub(crate) struct StallDetector {
    seen: HashSet<u64>,
}

impl StallDetector {
    /// Remembers a step replayed from the store (resume), without judging it.
    pub fn remember(&mut self, calls: &[SeenCall<'_>]) {
        for c in calls {
            self.seen
                .insert(fingerprint(&(c.name, c.input_json, c.output)));
        }
    }

    /// Judges a step that made tool calls.
    pub fn observe(
        &mut self,
        policy: &StallPolicy,
        counters: &mut StallCounters,
        calls: &[SeenCall<'_>],
        changed_workspace: bool,
    ) -> StallVerdict {
        let calls_print = fingerprint(
            &calls
                .iter()
                .map(|c| (c.name, c.input_json))
                .collect::<Vec<_>>(),
        );
        let repeat = calls_print == counters.last_calls;
        counters.last_calls = calls_print;
        let mut new_info = false;
        // A call the model got wrong teaches it only that it was wrong: each new
        // malformed call is no progress, however its raw arguments differ.
        for c in calls {
            let learned = self
                .seen
                .insert(fingerprint(&(c.name, c.input_json, c.output)));
            new_info |= learned && !crate::provider::invalid_call::is_marked_json(c.input_json);
        }
        if changed_workspace || (new_info && !repeat) {
            counters.idle = 0;
            return StallVerdict::Progress;
        }
        counters.idle += 1;
        if counters.idle < policy.window {
            return StallVerdict::Idle;
        }
        counters.idle = 0;
        if counters.replans >= policy.max_replans {
            return StallVerdict::Stalled;
        }
        counters.replans += 1;
        StallVerdict::Replan(format!(
            "You appear to be stuck: the last {} steps changed nothing in the workspace and \
             learned nothing new. Stop repeating the same actions. Re-read the goal and the \
             last verification result, form a different plan, and act on it. (Replan {} of {}; \
             after that the run ends as stalled.)",
            policy.window, counters.replans, policy.max_replans
        ))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn call<'a>(name: &'a str, input: &'a str, output: &'a str) -> SeenCall<'a> {
        SeenCall {
            name,
            input_json: input,
            output,
        }
    }

    #[test]
    fn repeated_identical_calls_stall_after_exactly_the_configured_replans() {
        let policy = StallPolicy {
            window: 2,
            max_replans: 2,
        };
        let mut d = StallDetector::default();
        let mut c = StallCounters::default();
        let same = [call("list_dir", "{}", "a\nb\n")];
        let mut verdicts = Vec::new();
        for _ in 0..7 {
            verdicts.push(d.observe(&policy, &mut c, &same, false));
        }
        let kinds: Vec<&str> = verdicts
            .iter()
            .map(|v| match v {
                StallVerdict::Progress => "progress",
                StallVerdict::Idle => "idle",
                StallVerdict::Replan(_) => "replan",
                StallVerdict::Stalled => "stalled",
            })
            .collect();
        assert_eq!(
            kinds,
            [
                "progress", "idle", "replan", "idle", "replan", "idle", "stalled"
            ]
        );
    }

    #[test]
    fn changes_and_new_information_are_progress() {
        let policy = StallPolicy {
            window: 1,
            max_replans: 0,
        };
        let mut d = StallDetector::default();
        let mut c = StallCounters::default();
        assert_eq!(
            d.observe(
                &policy,
                &mut c,
                &[call("read_file", "{\"path\":\"a\"}", "1")],
                false
            ),
            StallVerdict::Progress
        );
        assert_eq!(
            d.observe(
                &policy,
                &mut c,
                &[call("read_file", "{\"path\":\"b\"}", "2")],
                false
            ),
            StallVerdict::Progress
        );
        // A repeat that changed the workspace still counts.
        assert_eq!(
            d.observe(
                &policy,
                &mut c,
                &[call("read_file", "{\"path\":\"b\"}", "2")],
                true
            ),
            StallVerdict::Progress
        );
        assert_eq!(
            d.observe(
                &policy,
                &mut c,
                &[call("read_file", "{\"path\":\"b\"}", "2")],
                false
            ),
            StallVerdict::Stalled
        );
    }

    #[test]
    fn resume_remembers_what_was_seen() {
        let policy = StallPolicy {
            window: 1,
            max_replans: 0,
        };
        let mut d = StallDetector::default();
        d.remember(&[call("grep", "{}", "x")]);
        let mut c = StallCounters::default();
        assert_eq!(
            d.observe(&policy, &mut c, &[call("grep", "{}", "x")], false),
            StallVerdict::Stalled
        );
    }
}
