//! [`SandboxEvent`]: the record of where and how model-produced code was isolated.

use serde::{Deserialize, Serialize};

/// One event in the life of a sandboxed execution: the sandbox created for a run, a
/// command run in it (with the backend that isolated it), a resource cap that killed it,
/// a failing execution gate, or the sandbox torn down.
///
/// Together these let an operator audit not just what code ran but where and how it was
/// isolated, reconstructable from the store alone after the run.
///
/// ```
/// use io_harness::{SandboxEvent, Store};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
/// # let store = Store::memory()?;
/// # let run_id = store.start_run("fix the parser", "/repo")?;
/// # store.record_sandbox_event(&SandboxEvent::create(run_id, 1, "macos-sandbox-exec"))?;
/// # store.record_sandbox_event(&SandboxEvent::exec(run_id, 1, "macos-sandbox-exec", "cargo test"))?;
/// # store.record_sandbox_event(&SandboxEvent::gate_phase_failed(run_id, 1, "criterion-compile"))?;
/// # store.record_sandbox_event(&SandboxEvent::destroy(run_id, 1))?;
///
/// let events = store.sandbox_events(run_id)?;
///
/// // Which backend actually isolated the run. The crate picks a native one per
/// // platform and falls back to a portable floor, so "was this really contained"
/// // is a question about this field and not about the configuration.
/// let backend = events.iter().find_map(|e| e.backend.as_deref());
/// assert_eq!(backend, Some("macos-sandbox-exec"));
///
/// // And the phase to look for when a run that used to pass stops passing:
/// // `criterion-compile` means the criterion no longer compiles *against* the
/// // subject.
/// let phases: Vec<&str> = events
///     .iter()
///     .filter(|e| e.kind == "gate_phase_failed")
///     .filter_map(|e| e.detail.as_deref())
///     .collect();
/// assert_eq!(phases, ["criterion-compile"]);
/// # Ok(())
/// # }
/// ```
///
/// What a failing gate printed is the one detail that tells "the agent's change is
/// wrong" from "the machine lacks a dependency":
///
/// ```
/// use io_harness::{SandboxEvent, Store};
/// # fn main() -> Result<(), Box<dyn std::error::Error>> {
///
/// let store = Store::memory()?;
/// let run_id = store.start_run("make the suite pass", "/repo")?;
/// store.record_sandbox_event(&SandboxEvent::gate_output(
///     run_id, 3, "FAIL test/parse.test.js\n  expected 2 received 1",
/// ))?;
///
/// let why = store.sandbox_events(run_id)?;
/// assert!(why.iter().any(|e| e.kind == "gate_output"
///     && e.detail.as_deref().is_some_and(|d| d.contains("expected 2"))));
/// # Ok(())
/// # }
/// ```
///
/// A new kind is a new `kind` value, not a new table or column: an older store takes it
/// with no migration.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxEvent {
    /// The run this execution belongs to.
    pub run_id: i64,
    /// The step it occurred on.
    pub step: u32,
    /// `"create"`, `"exec"`, `"cap_hit"`, `"stopped"` (the run stopped it: detail
    /// `cancelled` or `time_budget`), `"destroy"`, `"gate_phase_failed"` (whose
    /// detail names the phase), `"gate_output"` (whose detail is what a failing gate
    /// command printed), `"gate_trust"`, `"gate_tests"`, `"criterion_restored"` or
    /// `"quarantined"` (see their constructors).
    ///
    /// There is no `"net_deny"` kind: a sandbox denies egress structurally — the backend
    /// gives the child no route out — so there is no attempt to observe. Network
    /// decisions the harness makes are policy events with act `net`.
    pub kind: String,
    /// The backend that isolated the run (e.g. `"linux-namespaces"`,
    /// `"macos-sandbox-exec"`, `"portable-floor"`).
    pub backend: Option<String>,
    /// The argv for an `"exec"`, the breached cap for a `"cap_hit"`, the reason for a
    /// `"stopped"`, the phase for a
    /// `"gate_phase_failed"`, or the bounded output of a failing gate command for a
    /// `"gate_output"`. Never the agent's file contents and never credentials — the
    /// command line, or what the caller's own criterion printed.
    pub detail: Option<String>,
}

impl SandboxEvent {
    fn new(
        run_id: i64,
        step: u32,
        kind: &str,
        backend: Option<&str>,
        detail: Option<&str>,
    ) -> Self {
        SandboxEvent {
            run_id,
            step,
            kind: kind.to_owned(),
            backend: backend.map(str::to_owned),
            detail: detail.map(str::to_owned),
        }
    }

    /// A sandbox was created for a run, isolated by `backend`.
    pub fn create(run_id: i64, step: u32, backend: &str) -> Self {
        Self::new(run_id, step, "create", Some(backend), None)
    }

    /// A command ran in the sandbox under `backend`.
    pub fn exec(run_id: i64, step: u32, backend: &str, argv: &str) -> Self {
        Self::new(run_id, step, "exec", Some(backend), Some(argv))
    }

    /// A resource cap killed the run.
    pub fn cap_hit(run_id: i64, step: u32, cap: &str) -> Self {
        Self::new(run_id, step, "cap_hit", None, Some(cap))
    }

    /// The run stopped the command before it ended (`reason`: `cancelled` or
    /// `time_budget`): killed with everything it started, no cap hit.
    pub fn stopped(run_id: i64, step: u32, reason: &str) -> Self {
        Self::new(run_id, step, "stopped", None, Some(reason))
    }

    /// The sandbox was torn down (workdir removed, processes reaped).
    pub fn destroy(run_id: i64, step: u32) -> Self {
        Self::new(run_id, step, "destroy", None, None)
    }

    /// Which phase of an execution gate failed: `"subject-compile"` (the file under
    /// verification does not compile), `"criterion-compile"` (the criterion does not
    /// compile against it), `"test-run"` (it compiled and the test failed), or
    /// `"subject-emptied"` (it compiled but a crate-level attribute stripped its items,
    /// so nothing was type-checked).
    ///
    /// `criterion-compile` is the one to look for when a run stops passing: the subject
    /// and the criterion are separate crates, so a subject cannot shadow or delete the
    /// names the criterion uses and still be reported as passing.
    ///
    /// Recorded by a run on the step whose verification ran a Rust gate
    /// (`[verify] rust = …`) that failed.
    pub fn gate_phase_failed(run_id: i64, step: u32, phase: &str) -> Self {
        Self::new(run_id, step, "gate_phase_failed", None, Some(phase))
    }

    /// What a failing gate command printed, already bounded by the caller.
    ///
    /// `Verification::Command` runs any command in any language, so "the criterion did
    /// not pass" does not explain itself: `cargo test` failing because the change is
    /// wrong and `npm test` failing because `node_modules` is missing need opposite
    /// responses, and only the command's output tells them apart. This is the one detail
    /// that is not a command line — it is the caller's criterion's output, never the
    /// agent's file contents.
    pub fn gate_output(run_id: i64, step: u32, output: &str) -> Self {
        Self::new(run_id, step, "gate_output", None, Some(output))
    }

    /// What a gate's verdict rested on: `detail` is `<criterion label>: <level>`, the
    /// level one of `harness-channel` (the harness's own code wrote each test's
    /// verdict), `runner-report` (the test runner's report or summary), `exit-code`
    /// (the exit status alone). Recorded for every gate that ran, passed or not.
    pub fn gate_trust(run_id: i64, step: u32, label: &str, level: &str) -> Self {
        Self::new(
            run_id,
            step,
            "gate_trust",
            None,
            Some(&format!("{label}: {level}")),
        )
    }

    /// The tests a gate counted: `detail` is `<criterion label>: N run, M passed: names…`
    /// (names bounded).
    pub fn gate_tests(run_id: i64, step: u32, label: &str, tally: &str) -> Self {
        Self::new(
            run_id,
            step,
            "gate_tests",
            None,
            Some(&format!("{label}: {tally}")),
        )
    }

    /// A `.git` or `.io-harness` a command created in the workspace (one that was not
    /// there when the run first looked), moved out of it after the session so the
    /// operator's `git` never reads it: `detail` is `<path> -> <where it is now>`, or
    /// `<path> removed (…)` when it could not be moved.
    pub fn quarantined(run_id: i64, step: u32, what: &str) -> Self {
        Self::new(run_id, step, "quarantined", None, Some(what))
    }

    /// A criterion file the harness put back to the operator's version (or removed,
    /// when the agent added it and it would redirect the gate) before a gate ran:
    /// `detail` is `<criterion label>: restored <path>` or `…: removed <path>`.
    pub fn criterion_restored(run_id: i64, step: u32, label: &str, what: &str) -> Self {
        Self::new(
            run_id,
            step,
            "criterion_restored",
            None,
            Some(&format!("{label}: {what}")),
        )
    }
}
