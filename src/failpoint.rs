//! Failpoints: deterministic crash points for tests of durability and resume.
//!
//! `IO_HARNESS_FAILPOINT=<name>:<step>` makes the process abort (as abruptly as a
//! SIGKILL: no destructors, no flush) when it reaches the named point at that step.
//! Tests use it instead of racing a `kill -9` against the loop. It can only end the
//! process, never change what a run does; even so it is compiled only with the
//! `failpoints` feature, which the test script enables and release builds do not.
//!
//! Points, in the order a step reaches them: `step.after_reply` (the model answered),
//! `tool.after_apply` (a tool's effect landed, its journal entry not yet completed),
//! `step.after_tools`, `verify.before`, `step.before_commit`, `step.after_commit`.
//!
//! Sub-agents: a child's steps reach the same points (numbered by the child's step);
//! besides, `agent.after_spawn` (the child's run exists, none of its steps ran; the
//! parent's step), `agent.child_after_commit` (a child committed that step of its
//! own) and `agent.after_child` (the child finished, the parent's step is not yet
//! committed; the parent's step).

/// Aborts the process if the failpoint `name` is armed for `step`. Compiled only with
/// the `failpoints` feature (the test suite's); elsewhere it is an empty function.
#[cfg(not(feature = "failpoints"))]
#[inline(always)]
pub(crate) fn hit(_name: &str, _step: u32) {}

/// Aborts the process if the failpoint `name` is armed for `step`.
#[cfg(feature = "failpoints")]
pub(crate) fn hit(name: &str, step: u32) {
    let Some(spec) = std::env::var_os("IO_HARNESS_FAILPOINT") else {
        return;
    };
    let spec = spec.to_string_lossy();
    let Some((n, s)) = spec.split_once(':') else {
        return;
    };
    if n == name && s.parse::<u32>().ok() == Some(step) {
        eprintln!("failpoint {name}:{step} hit; aborting");
        std::process::abort();
    }
}
