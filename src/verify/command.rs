//! Command gates: any program, any language, run without a shell.
//!
//! The child gets an environment that is built, not inherited (`PATH`, `HOME`, locale
//! and toolchain variables only), so the provider keys the harness holds never reach a
//! criterion's process. It runs in its own process group so a timeout kills what it
//! spawned too.

use std::path::PathBuf;
use std::process::Stdio;
use std::time::Duration;

use tokio::io::AsyncReadExt;

use super::output::BoundedOutput;

/// How a gate command ended.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum CommandStatus {
    /// It exited with this code.
    Exited(i32),
    /// A signal ended it.
    Signaled(i32),
    /// It ran past its wall-clock limit and was killed.
    TimedOut(Duration),
    /// The sandbox killed it at an enforced cap (memory, processes, CPU…).
    CapHit(String),
    /// The program does not exist.
    NotFound(String),
    /// It could not be started for another reason.
    SpawnFailed(String),
}

impl std::fmt::Display for CommandStatus {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::Exited(c) => write!(f, "exited {c}"),
            Self::Signaled(s) => write!(f, "killed by signal {s}"),
            Self::TimedOut(d) => write!(f, "timed out after {}s and was killed", d.as_secs_f64()),
            Self::CapHit(cap) => write!(f, "killed by the sandbox's {cap} cap"),
            Self::NotFound(p) => write!(f, "{p}: not found"),
            Self::SpawnFailed(e) => write!(f, "could not start: {e}"),
        }
    }
}

/// One gate command.
#[derive(Debug, Clone)]
pub struct CommandGate {
    /// Program and arguments.
    pub argv: Vec<String>,
    /// Working directory.
    pub workdir: PathBuf,
    /// Wall-clock limit.
    pub timeout: Duration,
    /// Bytes of combined output kept.
    pub output_limit: usize,
}

/// What a gate command did.
#[derive(Debug, Clone)]
pub struct CommandRun {
    /// How it ended.
    pub status: CommandStatus,
    /// Its combined stdout and stderr, bounded.
    pub output: BoundedOutput,
}

/// Host variables a gate command may see.
const PASSED_ENV: &[&str] = &[
    "PATH",
    "HOME",
    "LANG",
    "LC_ALL",
    "TERM",
    "USER",
    "TMPDIR",
    "CARGO_HOME",
    "RUSTUP_HOME",
    "RUSTUP_TOOLCHAIN",
];

/// A host program the harness itself runs (a toolchain probe such as `rustc -vV`), with
/// the environment a gate command gets instead of the harness's own.
pub(crate) fn host_tool(program: &str) -> std::process::Command {
    let mut cmd = std::process::Command::new(program);
    cmd.env_clear();
    for name in PASSED_ENV {
        if let Some(v) = std::env::var_os(name) {
            cmd.env(name, v);
        }
    }
    cmd
}

impl CommandGate {
    /// Runs the command to completion (or to its deadline).
    pub async fn run(&self) -> CommandRun {
        self.run_tapped(&[], &mut |_, _| {}).await
    }

    /// [`CommandGate::run`] with `env` added to the built environment, and every
    /// byte of output also shown to `tap` (stream 0 is stdout, 1 stderr) as it
    /// arrives: a gate counts a runner's tests from all of it, not from the bounded
    /// capture.
    pub(crate) async fn run_tapped(
        &self,
        env: &[(String, String)],
        tap: &mut (dyn FnMut(usize, &[u8]) + Send),
    ) -> CommandRun {
        let mut output = BoundedOutput::new(self.output_limit);
        let Some((program, args)) = self.argv.split_first() else {
            return CommandRun {
                status: CommandStatus::SpawnFailed("empty command".into()),
                output,
            };
        };
        let mut cmd = tokio::process::Command::new(program);
        cmd.args(args)
            .current_dir(&self.workdir)
            .env_clear()
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        for name in PASSED_ENV {
            if let Some(v) = std::env::var_os(name) {
                cmd.env(name, v);
            }
        }
        cmd.envs(env.iter().map(|(k, v)| (k, v)));
        let mut attempt = 0;
        let spawned = loop {
            match cmd.spawn() {
                Err(e)
                    if crate::exec::text_busy(&e) && attempt < crate::exec::TEXT_BUSY_RETRIES =>
                {
                    attempt += 1;
                    tokio::time::sleep(crate::exec::text_busy_pause(attempt)).await;
                }
                other => break other,
            }
        };
        let mut child = match spawned {
            Ok(c) => c,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return CommandRun {
                    status: CommandStatus::NotFound(program.clone()),
                    output,
                };
            }
            Err(e) => {
                return CommandRun {
                    status: CommandStatus::SpawnFailed(e.to_string()),
                    output,
                };
            }
        };
        let pgid = child.id();
        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let collect = async {
            let mut b1 = vec![0u8; 8192];
            let mut b2 = vec![0u8; 8192];
            let (mut out_open, mut err_open) = (stdout.is_some(), stderr.is_some());
            while out_open || err_open {
                tokio::select! {
                    r = read_some(&mut stdout, &mut b1), if out_open => match r {
                        Some(n) => {
                            tap(0, &b1[..n]);
                            output.push(&b1[..n]);
                        }
                        None => out_open = false,
                    },
                    r = read_some(&mut stderr, &mut b2), if err_open => match r {
                        Some(n) => {
                            tap(1, &b2[..n]);
                            output.push(&b2[..n]);
                        }
                        None => err_open = false,
                    },
                }
            }
            child.wait().await
        };
        let status = match tokio::time::timeout(self.timeout, collect).await {
            Ok(Ok(st)) => exit_status(st),
            Ok(Err(e)) => CommandStatus::SpawnFailed(e.to_string()),
            Err(_) => {
                kill_group(pgid);
                CommandStatus::TimedOut(self.timeout)
            }
        };
        // A gate that exited may have left children in its group holding resources.
        kill_group(pgid);
        CommandRun { status, output }
    }
}

async fn read_some<R: tokio::io::AsyncRead + Unpin>(
    r: &mut Option<R>,
    buf: &mut [u8],
) -> Option<usize> {
    let r = r.as_mut()?;
    match r.read(buf).await {
        Ok(0) | Err(_) => None,
        Ok(n) => Some(n),
    }
}

fn exit_status(st: std::process::ExitStatus) -> CommandStatus {
    use std::os::unix::process::ExitStatusExt;
    match (st.code(), st.signal()) {
        (Some(c), _) => CommandStatus::Exited(c),
        (None, Some(s)) => CommandStatus::Signaled(s),
        (None, None) => CommandStatus::SpawnFailed("no exit status".into()),
    }
}

fn kill_group(pgid: Option<u32>) {
    let Some(pid) = pgid.and_then(|p| i32::try_from(p).ok()) else {
        return;
    };
    if pid <= 1 {
        return;
    }
    // SAFETY: kill(2) with a negative pid signals the process group we created for the
    // child (process_group(0) makes its pgid equal its pid); it touches no memory.
    unsafe {
        libc::kill(-pid, libc::SIGKILL);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn gate(argv: &[&str], timeout_ms: u64) -> CommandGate {
        CommandGate {
            argv: argv.iter().map(|s| s.to_string()).collect(),
            workdir: std::env::temp_dir(),
            timeout: Duration::from_millis(timeout_ms),
            output_limit: 64,
        }
    }

    #[tokio::test]
    async fn exit_codes_and_output_are_captured() {
        let r = gate(&["sh", "-c", "echo out; echo err >&2; exit 3"], 10_000)
            .run()
            .await;
        assert_eq!(r.status, CommandStatus::Exited(3));
        let text = r.output.render();
        assert!(text.contains("out") && text.contains("err"), "{text}");
    }

    /// The race a gate meets when it runs a binary it has just copied: the file is
    /// still open for writing (here by this test, for 30 ms) when the spawn starts.
    #[tokio::test]
    async fn a_binary_briefly_open_for_writing_is_retried_not_failed() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("fresh-true");
        std::fs::copy("/bin/true", &bin).unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let writer = std::fs::OpenOptions::new().write(true).open(&bin).unwrap();
        let busy = std::process::Command::new(&bin).status().unwrap_err();
        assert!(crate::exec::text_busy(&busy), "{busy}");
        let closer = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            drop(writer);
        });
        let r = gate(&[bin.to_str().unwrap()], 10_000).run().await;
        closer.await.unwrap();
        assert_eq!(r.status, CommandStatus::Exited(0), "{}", r.output.render());
    }

    #[tokio::test]
    async fn missing_program_is_not_found_not_failed() {
        let r = gate(&["io-harness-no-such-program"], 10_000).run().await;
        assert_eq!(
            r.status,
            CommandStatus::NotFound("io-harness-no-such-program".into())
        );
    }

    #[tokio::test]
    async fn timeout_kills_the_whole_group() {
        let dir = tempfile::tempdir().unwrap();
        let marker = dir.path().join("late");
        let script = format!("(sleep 2; touch {}) & sleep 30", marker.display());
        let started = std::time::Instant::now();
        let r = gate(&["sh", "-c", &script], 300).run().await;
        assert_eq!(
            r.status,
            CommandStatus::TimedOut(Duration::from_millis(300))
        );
        assert!(started.elapsed() < Duration::from_secs(5));
        tokio::time::sleep(Duration::from_millis(2500)).await;
        assert!(
            !marker.exists(),
            "a grandchild of the timed-out gate survived"
        );
    }

    #[tokio::test]
    async fn signal_is_reported() {
        let r = gate(&["sh", "-c", "kill -TERM $$"], 10_000).run().await;
        assert_eq!(r.status, CommandStatus::Signaled(libc::SIGTERM));
    }

    #[tokio::test]
    async fn provider_keys_do_not_reach_the_gate() {
        // SAFETY: set_var races only with concurrent readers of the same variable; no
        // other code reads this name.
        unsafe { std::env::set_var("IO_HARNESS_TEST_SECRET_KEY", "sk-should-not-leak") };
        let r = gate(&["env"], 10_000).run().await;
        let text = r.output.render();
        assert!(!text.contains("sk-should-not-leak"), "{text}");
    }

    #[tokio::test]
    async fn flood_is_bounded() {
        let r = gate(&["sh", "-c", "yes | head -c 2000000"], 20_000)
            .run()
            .await;
        assert_eq!(r.status, CommandStatus::Exited(0));
        assert_eq!(r.output.total(), 2_000_000);
        assert!(r.output.render().len() < 200);
    }
}
