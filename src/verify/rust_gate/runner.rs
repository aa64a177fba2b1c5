//! One gate process: in the run's sandbox (with the gate's own directory as the only
//! writable one) when the run has one, else a host subprocess with a built environment.

use std::path::{Path, PathBuf};
use std::time::Duration;

use crate::exec::output::{BoundedOutput, DEFAULT_LIMIT};
use crate::exec::{Executor, Purpose};
use crate::sandbox::SandboxError;
use crate::verify::command::{CommandGate, CommandStatus};

/// How one gate process ended and what it printed.
pub(crate) struct Ran {
    /// How it ended.
    pub status: CommandStatus,
    /// Combined stdout and stderr, bounded.
    pub output: BoundedOutput,
}

impl Ran {
    /// Exited 0, with no cap hit.
    pub fn ok(&self) -> bool {
        self.status == CommandStatus::Exited(0)
    }
}

/// Runs `argv` in `dir` with a wall-clock limit of `wall_secs`.
pub(crate) async fn run(
    exec: Option<&Executor>,
    dir: &Path,
    argv: Vec<String>,
    wall_secs: u64,
) -> Ran {
    run_viewing(exec, dir, &[], argv, wall_secs).await
}

/// [`run`] with `read_only` host paths visible (read-only) inside the sandbox.
pub(crate) async fn run_viewing(
    exec: Option<&Executor>,
    dir: &Path,
    read_only: &[PathBuf],
    argv: Vec<String>,
    wall_secs: u64,
) -> Ran {
    run_as(exec, dir, read_only, argv, wall_secs, false).await
}

/// Where a test process runs: its own run directory (writable, where its verdict
/// goes), host paths it sees read-only and, for the cargo form, the package
/// directory it runs in (writable too, as under `cargo test`).
pub(crate) struct TestPlace<'a> {
    pub(crate) run_dir: &'a Path,
    pub(crate) read_only: &'a [PathBuf],
    pub(crate) package: Option<&'a Path>,
}

/// The variable naming the directory the harness's verdict goes to (module
/// `channel`): a test's working directory need not be its run directory.
pub(crate) const VERDICT_DIR_ENV: &str = "IO_HARNESS_VERDICT_DIR";

/// A test process: in the sandbox it may start no other process or program (seccomp;
/// see `Executor::run_single_process`).
pub(crate) async fn run_test_process(
    exec: Option<&Executor>,
    place: &TestPlace<'_>,
    argv: Vec<String>,
    wall_secs: u64,
) -> Ran {
    let Some(package) = place.package else {
        return run_as(exec, place.run_dir, place.read_only, argv, wall_secs, true).await;
    };
    let env = vec![
        (VERDICT_DIR_ENV.to_string(), s(place.run_dir)),
        ("CARGO_MANIFEST_DIR".to_string(), s(package)),
    ];
    // The package is the writable working directory: a read-only path holding it
    // (the crate copy) would be mounted over it. The rest of a workspace copy is
    // then not visible to a member's tests.
    let read_only: Vec<PathBuf> = place
        .read_only
        .iter()
        .filter(|p| !package.starts_with(p) && !p.starts_with(package))
        .cloned()
        .collect();
    match exec {
        Some(e) => {
            let ran = e
                .run_single_process(
                    package,
                    &read_only,
                    argv,
                    Some(wall_secs),
                    (&[place.run_dir.to_path_buf()], &env),
                )
                .await;
            ran_of(ran)
        }
        None => {
            let run = CommandGate {
                argv,
                workdir: package.to_path_buf(),
                timeout: Duration::from_secs(wall_secs),
                output_limit: DEFAULT_LIMIT,
            }
            .run_tapped(&env, &mut |_, _| {})
            .await;
            Ran {
                status: run.status,
                output: run.output,
            }
        }
    }
}

fn s(p: &Path) -> String {
    p.display().to_string()
}

async fn run_as(
    exec: Option<&Executor>,
    dir: &Path,
    read_only: &[PathBuf],
    argv: Vec<String>,
    wall_secs: u64,
    single: bool,
) -> Ran {
    match exec {
        Some(e) => sandboxed(e, dir, read_only, argv, wall_secs, single).await,
        None => {
            let run = CommandGate {
                argv,
                workdir: dir.to_path_buf(),
                timeout: Duration::from_secs(wall_secs),
                output_limit: DEFAULT_LIMIT,
            }
            .run()
            .await;
            Ran {
                status: run.status,
                output: run.output,
            }
        }
    }
}

async fn sandboxed(
    exec: &Executor,
    dir: &Path,
    read_only: &[PathBuf],
    argv: Vec<String>,
    wall_secs: u64,
    single: bool,
) -> Ran {
    let ran = if single {
        exec.run_single_process(dir, read_only, argv, Some(wall_secs), (&[], &[]))
            .await
    } else {
        exec.run_in_viewing(dir, read_only, argv, Purpose::Gate, Some(wall_secs))
            .await
    };
    ran_of(ran)
}

/// A sandboxed process's outcome as a [`Ran`].
fn ran_of(ran: Result<crate::sandbox::SandboxOutcome, SandboxError>) -> Ran {
    let mut output = BoundedOutput::new(DEFAULT_LIMIT);
    let status = match ran {
        Err(SandboxError::Exec { program, source })
            if source.kind() == std::io::ErrorKind::NotFound =>
        {
            CommandStatus::NotFound(program)
        }
        Err(e) => CommandStatus::SpawnFailed(e.to_string()),
        Ok(out) => {
            output.push(&out.stdout.bytes);
            output.push(&out.stderr.bytes);
            match (out.cap_hit, out.exit_code, out.signal) {
                // The contract's own wall cap may be tighter than `wall_secs`, so a
                // wall kill names the cap, not a duration that may not be the one
                // applied. A cap kill never passes, whatever status the process left.
                (Some(cap), _, _) => CommandStatus::CapHit(cap.label().to_string()),
                (None, Some(c), _) => CommandStatus::Exited(c),
                (None, None, Some(s)) => CommandStatus::Signaled(s),
                (None, None, None) => CommandStatus::SpawnFailed("no exit status".into()),
            }
        }
    };
    Ran { status, output }
}
