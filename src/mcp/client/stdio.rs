//! Starting a stdio server: in the run's sandbox (like any command), or as a plain
//! child when the contract says `sandbox = false`; its pipes are what rmcp speaks
//! over.

use std::sync::Arc;

use super::McpEnv;
use super::process::{Proc, Stderr, drain_stderr};
use crate::contract::{NetworkSetting, SandboxSettings};
use crate::sandbox::{NetworkPosture, RunSpec, SandboxLimits};

/// A started server's process, its stdout and stdin, and where it runs (the sandbox
/// backend's label, or `none`).
pub(super) type Pipes = (
    Proc,
    tokio::process::ChildStdout,
    tokio::process::ChildStdin,
    String,
);

/// Host variables passed in by name: the contract's sandbox env plus the server's.
fn env_values(settings: &SandboxSettings, names: &[String]) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for n in settings.env.iter().chain(names) {
        if out.iter().any(|(k, _)| k == n) {
            continue;
        }
        if let Ok(v) = std::env::var(n) {
            out.push((n.clone(), v));
        }
    }
    out
}

/// What a sandboxed server is started with: the contract's sandbox settings, without
/// a wall-clock cap of its own (a server lives as long as the run).
fn server_spec(argv: &[String], names: &[String], env: &McpEnv) -> RunSpec {
    let mut spec = RunSpec::new(argv.to_vec(), &env.workdir);
    let l = &env.settings.limits;
    let d = SandboxLimits::default();
    // A server lives as long as the run: no wall-clock cap of its own, the other caps
    // as for commands.
    spec.limits = SandboxLimits {
        cpu_secs: l.cpu_secs.or(d.cpu_secs),
        wall_secs: None,
        memory_bytes: l.memory.or(d.memory_bytes),
        processes: l.processes.or(d.processes),
        open_files: l.open_files.or(d.open_files),
        output_bytes: None,
        disk_bytes: l.disk.or(d.disk_bytes),
    };
    spec.env = env_values(&env.settings, names);
    spec.network = match env.settings.network {
        NetworkSetting::Open => NetworkPosture::Open,
        NetworkSetting::Allowlist => NetworkPosture::Allowlist,
        NetworkSetting::None => NetworkPosture::None,
    };
    spec
}

/// Starts the server in the run's sandbox; also returns what it was started with
/// (for its session record) and its egress proxy under an allowlist.
pub(super) async fn start_sandboxed(
    argv: &[String],
    names: &[String],
    env: &McpEnv,
    tail: &Arc<Stderr>,
) -> Result<(Pipes, RunSpec, Option<crate::egress::EgressProxy>), String> {
    let sandbox = env
        .sandbox
        .clone()
        .ok_or("no sandbox is available to start it in (set sandbox = false to run it outside)")?;
    let mut spec = server_spec(argv, names, env);
    // Under an allowlist the server, like a command, reaches only the harness's proxy.
    let proxy = crate::exec::start_egress(&env.settings, &mut spec)
        .await
        .map_err(|e| format!("sandbox start: {e}"))?;
    spec.read_only_paths = env.settings.read_only_paths.clone();
    spec.masked_paths = env.masked.clone();
    spec.protected_paths = env.protected.clone();
    spec.uid = env.settings.sandbox_uid();
    spec.allow_weaker = env.settings.allow_weaker;
    let launched = spec.clone();
    let mut child = tokio::task::spawn_blocking(move || sandbox.spawn(&spec))
        .await
        .map_err(|e| format!("sandbox start: {e}"))?
        .map_err(|e| format!("sandbox start: {e}"))?;
    let label = child.backend().label().to_string();
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        return Err("the sandbox handle has no pipes".into());
    };
    drain_stderr(stderr, tail.clone());
    let stdout =
        tokio::process::ChildStdout::from_std(stdout).map_err(|e| format!("stdout: {e}"))?;
    let stdin = tokio::process::ChildStdin::from_std(stdin).map_err(|e| format!("stdin: {e}"))?;
    Ok((
        (Proc::Sandboxed(child), stdout, stdin, label),
        launched,
        proxy,
    ))
}

/// Starts the server as a plain child of this process (`sandbox = false`), with a
/// cleared environment: `PATH`, `HOME`, `LANG`, `TERM` and the names passed in.
pub(super) fn start_plain(
    argv: &[String],
    names: &[String],
    env: &McpEnv,
    tail: &Arc<Stderr>,
) -> Result<Pipes, String> {
    let mut cmd = std::process::Command::new(&argv[0]);
    cmd.args(&argv[1..])
        .current_dir(&env.workdir)
        .env_clear()
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped());
    for k in ["PATH", "HOME", "LANG", "TERM"] {
        if let Ok(v) = std::env::var(k) {
            cmd.env(k, v);
        }
    }
    for (k, v) in env_values(&env.settings, names) {
        cmd.env(k, v);
    }
    let mut child = cmd
        .spawn()
        .map_err(|e| format!("cannot start {}: {e}", argv[0]))?;
    let (Some(stdin), Some(stdout), Some(stderr)) =
        (child.stdin.take(), child.stdout.take(), child.stderr.take())
    else {
        let _ = child.kill();
        let _ = child.wait();
        return Err("the child has no pipes".into());
    };
    drain_stderr(stderr, tail.clone());
    let mut proc = Proc::Plain(child);
    let stdout = match tokio::process::ChildStdout::from_std(stdout) {
        Ok(s) => s,
        Err(e) => {
            proc.kill();
            return Err(format!("stdout: {e}"));
        }
    };
    let stdin = match tokio::process::ChildStdin::from_std(stdin) {
        Ok(s) => s,
        Err(e) => {
            proc.kill();
            return Err(format!("stdin: {e}"));
        }
    };
    Ok((proc, stdout, stdin, "none".into()))
}
