//! Execution-based verification: the criteria of a contract checked against the
//! workspace the agent produced.
//!
//! Content checks read through the confined [`Workspace`], so a
//! symlink the agent planted cannot point a check at a file outside the workspace.
//! Command gates run a program without a shell in the workspace root with a wall-clock
//! limit; a timeout, a signal or a missing program never passes, and a recognised test
//! runner must also report a test run and none failed, or a declared JUnit report
//! must show it (`command_report`). Rust gates
//! ([`rust_gate`]) compile a subject file and a criterion as separate crates in ordered
//! phases and name the phase that failed; the workspace form ([`cargo_gate`]) runs
//! `cargo test` on the agent's crate with criterion tests the harness places, reusing
//! the run's compiled third-party dependencies from a sealed cache.
//!
//! Phases recorded as `gate_phase_failed` (the same four for both Rust forms):
//! `subject-compile`, `subject-emptied` (file form only), `criterion-compile`,
//! `test-run`. A command gate whose pinned script changed records `gate_output`
//! saying so and never runs.

pub mod cargo_gate;
mod command;
mod command_report;
pub mod criterion_set;
pub mod ecosystem;
mod evidence;
pub mod rust_gate;

use std::path::Path;

use crate::contract::Verification;
use crate::exec::{Executor, output};
use crate::sandbox::{Cap, SandboxError};
use crate::tools::{ToolError, Workspace};
use command_report::{Counting, ReportPath, SummaryScan};

/// Re-exported from [`crate::exec`], where command output is captured.
pub use crate::exec::BoundedOutput;
pub use command::{CommandGate, CommandStatus};
pub use evidence::{TestTally, Trust};

/// The result of one criterion.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CriterionResult {
    /// The criterion's label (`command cargo test`…).
    pub label: String,
    /// Whether it passed.
    pub passed: bool,
    /// Why, in a sentence or two, for the model and the record.
    pub summary: String,
    /// A command gate's bounded output (head and tail kept, size stated), or a Rust
    /// gate's bounded compiler or test output.
    pub output: Option<String>,
    /// The Rust gate phase that failed (`subject-compile`, `subject-emptied`,
    /// `criterion-compile`, `test-run`); `None` for other criteria and for a pass.
    pub phase: Option<&'static str>,
    /// What the verdict rests on (`None` for the content checks, which the harness
    /// reads itself, and for a gate that never ran).
    pub trust: Option<Trust>,
    /// The tests the gate counted, when it counted any.
    pub tests: Option<TestTally>,
    /// Criterion files the harness restored or removed before the gate ran
    /// (workspace-relative, with what was done: `restored src/x`, `removed conftest.py`).
    pub restored: Vec<String>,
}

/// The result of checking every criterion of a contract.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct VerifyReport {
    /// One result per criterion, in contract order.
    pub results: Vec<CriterionResult>,
}

impl VerifyReport {
    /// All criteria passed (and there was at least one).
    pub fn passed(&self) -> bool {
        !self.results.is_empty() && self.results.iter().all(|r| r.passed)
    }

    /// Labels of the criteria that failed.
    pub fn failed_labels(&self) -> Vec<String> {
        self.results
            .iter()
            .filter(|r| !r.passed)
            .map(|r| r.label.clone())
            .collect()
    }

    /// The observation shown to the model after a failed verification.
    /// Each gate's output is framed as untrusted (`boundary`): the work under test
    /// wrote it.
    pub fn observation(&self, boundary: &crate::untrusted::Boundary) -> String {
        let mut s = String::from("Verification failed. The task is not done yet.\n");
        for r in &self.results {
            let mark = if r.passed { "PASS" } else { "FAIL" };
            s.push_str(&format!("[{mark}] {}: {}\n", r.label, r.summary));
            if !r.passed
                && let Some(out) = &r.output
            {
                s.push_str("output:\n");
                s.push_str(&boundary.frame(&format!("output of {}", r.label), out));
                s.push('\n');
            }
        }
        s
    }
}

/// Checks every criterion (all are run, so the model learns of every failure at once).
/// Command criteria run through `exec` (the run's sandbox) when given, else as plain
/// host subprocesses with a built environment.
pub async fn check(
    criteria: &[Verification],
    workspace: &Workspace,
    exec: Option<&Executor>,
) -> VerifyReport {
    check_judged(criteria, workspace, exec, None).await
}

/// [`check`], with the files of `file_contains` and `file_equals` judged by `reads`
/// like a `read_file` (the name and, through a symlink, the file it reaches) before
/// they are read: for criteria a model wrote (a sub-agent's), whose verdict would
/// otherwise be an oracle on a file the policy denies. A refused file fails its
/// criterion unread. An operator's criteria are the operator's, checked by [`check`].
pub async fn check_judged(
    criteria: &[Verification],
    workspace: &Workspace,
    exec: Option<&Executor>,
    reads: Option<&dyn crate::policy::PolicyGate>,
) -> VerifyReport {
    let mut results = Vec::with_capacity(criteria.len());
    for c in criteria {
        results.push(check_one(c, workspace, exec, reads).await);
    }
    VerifyReport { results }
}

/// A gate command in the sandbox: how it ended, and its bounded combined output.
/// `writable` and `env` are the report directory and its variable (empty without a
/// report); `scan`, when counting, reads all of stdout and stderr.
async fn sandboxed_gate(
    exec: &Executor,
    argv: &[String],
    timeout: std::time::Duration,
    (writable, env, sealed): (
        &[std::path::PathBuf],
        &[(String, String)],
        &[std::path::PathBuf],
    ),
    scan: Option<&mut SummaryScan>,
) -> (CommandStatus, BoundedOutput) {
    let mut output = BoundedOutput::new(output::DEFAULT_LIMIT);
    let wall = timeout.as_secs().max(1);
    let status = match exec
        .run_writing(argv.to_vec(), Some(wall), (writable, sealed), env)
        .await
    {
        Err(SandboxError::Exec { program, source })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            CommandStatus::NotFound(program)
        }
        Err(e) => CommandStatus::SpawnFailed(e.to_string()),
        Ok(out) => {
            output.push(&out.stdout.bytes);
            output.push(&out.stderr.bytes);
            if let Some(scan) = scan {
                scan.feed(0, &out.stdout.bytes);
                scan.feed(1, &out.stderr.bytes);
            }
            match (out.cap_hit, out.exit_code, out.signal) {
                (Some(Cap::Wall), _, _) => CommandStatus::TimedOut(timeout),
                // A cap kill never passes, whatever status the command left.
                (Some(cap), _, _) => CommandStatus::CapHit(cap.label().to_string()),
                (None, Some(c), _) => CommandStatus::Exited(c),
                (None, None, Some(s)) => CommandStatus::Signaled(s),
                (None, None, None) => CommandStatus::SpawnFailed("no exit status".into()),
            }
        }
    };
    (status, output)
}

async fn check_one(
    c: &Verification,
    ws: &Workspace,
    exec: Option<&Executor>,
    reads: Option<&dyn crate::policy::PolicyGate>,
) -> CriterionResult {
    let label = c.label();
    match c {
        Verification::FileContains { file, needle } => {
            content_check(label, ws, reads, file, |text| {
                if text.contains(needle.as_str()) {
                    (
                        true,
                        format!("{} contains the expected text", file.display()),
                    )
                } else {
                    (
                        false,
                        format!("{} does not contain {needle:?}", file.display()),
                    )
                }
            })
        }
        Verification::FileEquals { file, content } => {
            content_check(label, ws, reads, file, |text| {
                if text == content.as_str() {
                    (true, format!("{} has the expected content", file.display()))
                } else {
                    (
                        false,
                        format!(
                            "{} differs from the expected content ({} bytes, expected {})",
                            file.display(),
                            text.len(),
                            content.len()
                        ),
                    )
                }
            })
        }
        Verification::Command { criterion, .. }
            if let Some(why) = criterion_set::changed_pins(ws, criterion) =>
        {
            // A criterion file the policy denies reading is pinned, not restored.
            not_run(label, why, None, "; restore it to the operator's version")
        }
        Verification::Command {
            argv,
            expect_exit,
            timeout,
            pinned,
            trust,
            report,
            criterion,
        } => match criterion_set::restore(ws, argv, criterion) {
            // The criterion set is put back before the gate sees the workspace.
            Ok(restored) => {
                let counting = Counting::of(argv, *expect_exit, *trust, report.as_ref());
                let gate = GateCommand {
                    argv,
                    expect_exit: *expect_exit,
                    timeout: *timeout,
                    sealed: &restored.sealed,
                };
                let result = command_check(label, ws, exec, &gate, pinned, counting).await;
                with_restored(result, restored)
            }
            Err(why) => not_restored(label, why),
        },
        Verification::Rust {
            subject,
            criterion,
            criterion_source,
            signatures,
        } => {
            let kept = criterion_source.as_ref().map(|f| f.source.as_str());
            gate_result(
                label,
                rust_gate::check(subject, criterion, kept, signatures, ws, exec).await,
            )
        }
        Verification::CargoTest {
            manifest,
            criteria,
            signatures,
            baseline_manifests,
        } => gate_result(
            label,
            cargo_gate::check(
                manifest,
                criteria,
                signatures,
                baseline_manifests.as_deref(),
                ws,
                exec,
            )
            .await,
        ),
    }
}

/// What a command gate runs and expects.
struct GateCommand<'a> {
    argv: &'a [String],
    expect_exit: i32,
    timeout: std::time::Duration,
    /// Workspace-relative files of the criterion set, read-only in the gate's view.
    sealed: &'a [String],
}

/// A command gate: refused unrun when a pinned file changed, else run (in the
/// sandbox when the run has one) and passed on the expected exit code and, unless it
/// rests on the exit code alone, on the tests it counted (`command_report`).
async fn command_check(
    label: String,
    ws: &Workspace,
    exec: Option<&Executor>,
    gate: &GateCommand<'_>,
    pinned: &[crate::contract::PinnedFile],
    counting: Counting<'_>,
) -> CriterionResult {
    if let Some(why) = changed_pins(ws, pinned) {
        return not_run(label, why, None, "; restore it to the operator's version");
    }
    let report = match counting {
        Counting::Report(_) => match ReportPath::create(exec) {
            Ok(r) => Some(r),
            Err(e) => {
                let why = format!("its report directory could not be created: {e}");
                return not_run(label, why, Some(Trust::RunnerReport), "");
            }
        },
        _ => None,
    };
    let (status, output, scan) = run_gate_command(ws, exec, gate, &counting, report.as_ref()).await;
    let counted = match (&counting, &report) {
        (Counting::Summary(r), _) => Some(command_report::judge_summary(
            *r,
            scan.and_then(SummaryScan::finish),
        )),
        (Counting::Report(spec), Some(path)) => {
            Some(command_report::judge_report(path.file(), spec))
        }
        _ => None,
    };
    drop(report);
    let expect_exit = gate.expect_exit;
    let exit_ok = matches!(status, CommandStatus::Exited(code) if code == expect_exit);
    let count_failure = counted.as_ref().and_then(|c| c.failure.clone());
    let passed = exit_ok && count_failure.is_none();
    let summary = match (&status, &count_failure, &counted) {
        (CommandStatus::Exited(code), _, _) if !exit_ok => {
            format!("exited {code}, expected {expect_exit}")
        }
        (CommandStatus::Exited(_), Some(why), _) => format!("exited {expect_exit}, but {why}"),
        (CommandStatus::Exited(_), None, Some(c)) => format!(
            "exited {expect_exit} as expected; {} (as the test runner reports it)",
            c.tests
                .as_ref()
                .map_or_else(String::new, ToString::to_string)
        ),
        (CommandStatus::Exited(_), None, None) => format!(
            "exited {expect_exit} as expected (the pass rests on the exit code alone: no tests were counted)"
        ),
        (other, _, _) => other.to_string(),
    };
    CriterionResult {
        label,
        passed,
        summary,
        output: (!passed).then(|| output.render()),
        phase: None,
        trust: Some(command_report::trust_of(&counting)),
        tests: counted.and_then(|c| c.tests),
        restored: Vec::new(),
    }
}

/// Runs a command gate's command (with `{report}` replaced and its report directory
/// writable when it has one), reading a recognised runner's output as it goes.
async fn run_gate_command(
    ws: &Workspace,
    exec: Option<&Executor>,
    gate: &GateCommand<'_>,
    counting: &Counting<'_>,
    report: Option<&ReportPath>,
) -> (CommandStatus, BoundedOutput, Option<SummaryScan>) {
    let mut scan = match counting {
        Counting::Summary(r) => Some(SummaryScan::new(*r)),
        _ => None,
    };
    let argv = report.map_or_else(
        || gate.argv.to_vec(),
        |r| command_report::substitute(gate.argv, r.file()),
    );
    let env = report.map(ReportPath::env).unwrap_or_default();
    let writable: Vec<std::path::PathBuf> =
        report.map(|r| r.dir().to_path_buf()).into_iter().collect();
    let (status, output) = match exec {
        Some(e) => {
            let sealed: Vec<std::path::PathBuf> =
                gate.sealed.iter().map(|r| ws.root().join(r)).collect();
            let views = (&writable[..], &env[..], &sealed[..]);
            sandboxed_gate(e, &argv, gate.timeout, views, scan.as_mut()).await
        }
        None => {
            let host = CommandGate {
                argv,
                workdir: ws.root().to_path_buf(),
                timeout: gate.timeout,
                output_limit: output::DEFAULT_LIMIT,
            };
            let run = host
                .run_tapped(&env, &mut |stream, bytes| {
                    if let Some(s) = scan.as_mut() {
                        s.feed(stream, bytes);
                    }
                })
                .await;
            (run.status, run.output)
        }
    };
    (status, output, scan)
}

/// A command gate that did not run: why, told to the model and the record.
fn not_run(label: String, why: String, trust: Option<Trust>, advice: &str) -> CriterionResult {
    CriterionResult {
        label,
        passed: false,
        summary: format!("not run: {why}"),
        output: Some(format!("the gate did not run: {why}{advice}")),
        phase: None,
        trust,
        tests: None,
        restored: Vec::new(),
    }
}

/// A command gate's result with what the criterion-set restore did: recorded in
/// `restored`, and named to the model as not part of its work area.
fn with_restored(mut r: CriterionResult, restored: criterion_set::Restored) -> CriterionResult {
    if let Some(note) = restored.note() {
        r.summary = format!("{}; {note}", r.summary);
    }
    r.restored = restored.actions;
    r
}

/// A command gate whose criterion set could not be restored: it fails unrun.
fn not_restored(label: String, why: String) -> CriterionResult {
    let why = format!("the criterion set could not be restored: {why}");
    CriterionResult {
        label,
        passed: false,
        summary: format!("not run: {why}"),
        output: Some(format!("the gate did not run: {why}")),
        phase: None,
        trust: None,
        tests: None,
        restored: Vec::new(),
    }
}

/// The result of a Rust gate (either form): the phase that failed, if one did.
fn gate_result(label: String, v: rust_gate::GateVerdict) -> CriterionResult {
    CriterionResult {
        label,
        passed: v.failed.is_none(),
        summary: v.summary,
        output: v.output,
        phase: v.failed.map(rust_gate::Phase::label),
        trust: v.trust,
        tests: v.tests,
        restored: Vec::new(),
    }
}

/// The first pinned file of a command gate that is missing or differs from its pin.
fn changed_pins(ws: &Workspace, pinned: &[crate::contract::PinnedFile]) -> Option<String> {
    for p in pinned {
        let rel = p.path.to_string_lossy();
        match ws.read(&rel) {
            Ok(bytes) if crate::digest::sha256_hex(&bytes) == p.sha256 => {}
            Ok(_) => return Some(format!("{rel} changed since the contract was loaded")),
            Err(_) => return Some(format!("{rel} is gone since the contract was loaded")),
        }
    }
    None
}

/// Removes the run's gate directory and forgets its own dependency caches (those of
/// gates that could not use the shared one): called when a run ends, so no later run
/// finds a run cache it did not seal (it would not trust it anyway). The dependency
/// cache shared across runs lives elsewhere and stays; every copy out of it is
/// checked against its seal.
pub fn remove_gate_dir(exec: &Executor) {
    let base = rust_gate::run_base(Some(exec));
    cargo_gate::forget_under(&base);
    let _ = std::fs::remove_dir_all(&base);
}
fn content_check(
    label: String,
    ws: &Workspace,
    reads: Option<&dyn crate::policy::PolicyGate>,
    file: &Path,
    judge: impl FnOnce(&str) -> (bool, String),
) -> CriterionResult {
    let rel = file.to_string_lossy();
    let refused = reads.and_then(|gate| match ws.normalize(&rel) {
        Ok(norm) => crate::tools::read_refusal(gate, ws, norm)
            .map(|d| format!("the policy does not let this run read {}", d.action.target)),
        Err(e) => Some(e.to_string()),
    });
    let (passed, summary) = match refused {
        Some(why) => (false, why),
        None => match ws.read(&rel) {
            Ok(bytes) => judge(&String::from_utf8_lossy(&bytes)),
            Err(ToolError::NotFound(_)) => (false, format!("{} does not exist", file.display())),
            Err(e) => (false, format!("cannot read: {e}")),
        },
    };
    CriterionResult {
        label,
        passed,
        summary,
        output: None,
        phase: None,
        trust: None,
        tests: None,
        restored: Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The pin is the command gate's second line, for a backend that cannot hold the
    /// script read-only (the floor): a changed or removed script is named, an
    /// unchanged one passes.
    #[test]
    fn a_changed_or_removed_pinned_script_is_named() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("check.sh"), "grep -q fixed status.txt\n").unwrap();
        let ws = Workspace::open(dir.path()).unwrap();
        let pinned = [crate::contract::PinnedFile {
            path: "check.sh".into(),
            sha256: crate::digest::sha256_hex(b"grep -q fixed status.txt\n"),
        }];
        assert_eq!(changed_pins(&ws, &pinned), None);
        std::fs::write(dir.path().join("check.sh"), "exit 0\n").unwrap();
        assert_eq!(
            changed_pins(&ws, &pinned).as_deref(),
            Some("check.sh changed since the contract was loaded")
        );
        std::fs::remove_file(dir.path().join("check.sh")).unwrap();
        assert_eq!(
            changed_pins(&ws, &pinned).as_deref(),
            Some("check.sh is gone since the contract was loaded")
        );
    }
}
