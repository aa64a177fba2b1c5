//! Failpoints: deterministic crash points for tests of durability and resume.
//!
//! `IO_HARNESS_FAILPOINT=<name>:<step>` makes the process abort (as abruptly as a
//! SIGKILL: no destructors, no flush) when it reaches the named point at that step.
//! Tests use it instead of racing a `kill -9` against the loop. It can only end the
//! process, never change what a run does, so it is harmless in a release build.

/// Aborts the process if the failpoint `name` is armed for `step`.
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
