//! Span events from the record: a model call's failed provider attempts (a retry, a
//! fallback, the escalation that ended the run) and a step's policy decisions other
//! than allow — the waits and refusals an operator looks for in a trace. What the
//! server said and what a decision was about (a path, an argv) can hold what the agent
//! worked on, so they go out only with the content opt-in.

use super::conventions as sc;
use super::span::{Span, Value};
use crate::store::{PolicyEvent, ProviderAttempt};

/// Adds `a` to `span` as an `io_harness.provider.attempt` event, at the time it was
/// written (its span's start for rows stored before attempts had times).
pub(super) fn attempt(span: &mut Span, a: &ProviderAttempt, content: bool) {
    let mut attrs = vec![
        (sc::HARNESS_PROVIDER, Value::Str(a.provider.clone())),
        (sc::HARNESS_ATTEMPT, Value::Int(i64::from(a.attempt))),
        (sc::ERROR_TYPE, Value::Str(a.kind.clone())),
        (sc::HARNESS_NEXT, Value::Str(a.next.clone())),
        (
            sc::HARNESS_DELAY_MS,
            Value::Int(i64::try_from(a.delay_ms).unwrap_or(i64::MAX)),
        ),
    ];
    if let Some(status) = a.status {
        attrs.push((sc::HTTP_STATUS, Value::Int(i64::from(status))));
    }
    if content && let Some(m) = &a.message {
        attrs.push((sc::HARNESS_MESSAGE, Value::Str(m.clone())));
    }
    let at = if a.at_ms > 0 {
        a.at_ms
    } else {
        i64::try_from(span.start_ns / 1_000_000).unwrap_or(0)
    };
    span.event(sc::EVENT_PROVIDER_ATTEMPT, at, attrs);
}

/// Adds `p` to the step's span as an `io_harness.policy.decision` event when it was
/// not an allow (the store keeps no time of its own for a decision: the step's start).
pub(super) fn decision(span: &mut Span, p: &PolicyEvent, content: bool) {
    if p.decision == "allow" {
        return;
    }
    let mut attrs = vec![
        (sc::HARNESS_POLICY_ACT, Value::Str(p.act.clone())),
        (sc::HARNESS_POLICY_DECISION, Value::Str(p.decision.clone())),
        (sc::HARNESS_POLICY_RULE, Value::Str(p.rule.clone())),
        (sc::HARNESS_POLICY_LAYER, Value::Str(p.layer.clone())),
    ];
    if content {
        attrs.push((sc::HARNESS_POLICY_TARGET, Value::Str(p.target.clone())));
    }
    let at = i64::try_from(span.start_ns / 1_000_000).unwrap_or(0);
    span.event(sc::EVENT_POLICY_DECISION, at, attrs);
}
