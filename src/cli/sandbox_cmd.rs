//! `io-harness sandbox [--task FILE] -- CMD ARGS…`: one command in the sandbox exactly
//! as a run would run it, for operators to try the boundary and for benchmarks: the
//! backend a run would get, the task's `[sandbox]` settings (flags override them key by
//! key), the policy's masks over the working directory, the store and the audit log
//! hidden, and the policy's `exec` decision (a denied program is not run: exit 126).
//! Without `--task` the settings are the defaults and the policy is the built-in layer
//! (with the directory's `.io-harness/policy.toml`, which can only narrow it).
//!
//! Its output is passed through, the exit code is the command's (128 + signal when a
//! signal ended it, 127 when it cannot be executed), and the session is appended to the
//! audit log. A cap is mentioned only when the session's audit line records it hit.
//!
//! `--network allowlist --allow-host HOST` runs an egress proxy for the command, as a
//! run does, and prints a one-line summary of what it refused on stderr.

use std::path::PathBuf;

use io_harness::TaskContract;
use io_harness::audit::AuditLog;
use io_harness::contract::{NetworkSetting, SandboxSettings};
use io_harness::egress::HostRule;
use io_harness::exec::{EgressRecord, standalone};
use io_harness::policy::Decision;
use io_harness::sandbox::{NetworkPosture, SandboxError, SandboxOutcome};

use super::{CliError, NetworkArg, SandboxArgs, output, store_path};

/// Exit code of a command the policy refuses (as a shell says "cannot execute").
const EXIT_DENIED: i32 = 126;

fn parse_limits(text: &str, settings: &mut SandboxSettings) -> Result<(), CliError> {
    for part in text.split(',').filter(|p| !p.is_empty()) {
        let (key, value) = part
            .split_once('=')
            .ok_or_else(|| CliError::Usage(format!("--limit {part:?}: expected key=value")))?;
        let bad = |m: String| CliError::Usage(format!("--limit {key}: {m}"));
        let secs = |v: &str| {
            io_harness::contract::parse_duration(v)
                .map(|d| d.as_secs().max(1))
                .or_else(|_| v.parse::<u64>().map_err(|e| e.to_string()))
        };
        let count = |v: &str| v.parse::<u64>().map_err(|e| bad(e.to_string()));
        let l = &mut settings.limits;
        match key {
            "cpu" => l.cpu_secs = Some(secs(value).map_err(bad)?),
            "wall" => l.wall_secs = Some(secs(value).map_err(bad)?),
            "mem" | "memory" => {
                l.memory = Some(io_harness::contract::parse_size(value).map_err(bad)?)
            }
            "procs" | "processes" => l.processes = Some(count(value)?),
            "files" | "open_files" => l.open_files = Some(count(value)?),
            "output" => l.output = Some(io_harness::contract::parse_size(value).map_err(bad)?),
            other => {
                return Err(CliError::Usage(format!(
                    "--limit {other}: expected cpu, wall, mem, procs, files or output"
                )));
            }
        }
    }
    Ok(())
}

/// The task's `[sandbox]` settings (the defaults without one) with the flags laid over
/// them, checked as a task file's would be for what the flags can break.
fn settings(args: &SandboxArgs, task: Option<&TaskContract>) -> Result<SandboxSettings, CliError> {
    let mut s = task.map(|c| c.sandbox.clone()).unwrap_or_default();
    if let Some(n) = args.network {
        s.network = match n {
            NetworkArg::None => NetworkSetting::None,
            NetworkArg::Allowlist => NetworkSetting::Allowlist,
            NetworkArg::Open => NetworkSetting::Open,
        };
    }
    if !args.allow_host.is_empty() {
        s.allow_hosts = args.allow_host.clone();
    }
    for r in &args.resolve {
        let bad = || CliError::Usage(format!("--resolve {r:?}: expected NAME=IP"));
        let (name, ip) = r.split_once('=').ok_or_else(bad)?;
        let ip: std::net::IpAddr = ip.parse().map_err(|_| bad())?;
        if !HostRule::parse(name).is_ok_and(|h| h.is_plain_name()) {
            return Err(bad());
        }
        s.resolve.insert(name.to_string(), ip);
    }
    if let Some(l) = &args.limit {
        parse_limits(l, &mut s)?;
    }
    for name in &args.env {
        if !s.env.contains(name) {
            s.env.push(name.clone());
        }
    }
    if let Some(b) = args.require {
        s.require = Some(b.label().to_string());
    }
    if s.network != NetworkSetting::Allowlist {
        if !args.allow_host.is_empty() || !args.resolve.is_empty() {
            return Err(CliError::Usage(
                "--allow-host and --resolve need --network allowlist".into(),
            ));
        }
    } else if s.allow_hosts.is_empty() {
        return Err(CliError::Usage(
            "--network allowlist needs at least one --allow-host".into(),
        ));
    }
    for h in &s.allow_hosts {
        HostRule::parse(h).map_err(|e| CliError::Usage(format!("--allow-host {h:?}: {e}")))?;
    }
    Ok(s)
}

/// The task file, and the working directory (canonical): `--workdir`, else the task's
/// root, else the current directory.
fn task_and_workdir(args: &SandboxArgs) -> Result<(Option<TaskContract>, PathBuf), CliError> {
    let task = match &args.task {
        Some(path) => {
            Some(TaskContract::from_file(path).map_err(|e| CliError::Usage(e.to_string()))?)
        }
        None => None,
    };
    let workdir = match (&args.workdir, &task) {
        (Some(d), _) => d.clone(),
        (None, Some(c)) => c.root.clone(),
        (None, None) => std::env::current_dir().map_err(|e| CliError::Internal(e.to_string()))?,
    };
    let workdir = std::fs::canonicalize(&workdir)
        .map_err(|e| CliError::Usage(format!("--workdir {}: {e}", workdir.display())))?;
    Ok((task, workdir))
}

pub async fn execute(args: SandboxArgs) -> Result<i32, CliError> {
    let (task, workdir) = task_and_workdir(&args)?;
    let settings = settings(&args, task.as_ref())?;
    let audit = AuditLog::default_location();
    if let Some(a) = &audit {
        a.redact_secrets(
            &io_harness::provider::KEY_VARIABLES.map(|k| std::env::var(k).unwrap_or_default()),
        );
    }
    let store = store_path::resolve(&args.store).ok();
    let prepared = io_harness::run::standalone_command(
        task.as_ref(),
        &settings,
        &workdir,
        args.command.clone(),
        store.as_deref(),
        audit.as_ref(),
    )?;
    let d = &prepared.decision;
    if d.decision == Decision::Deny {
        errln!(
            "io-harness sandbox: {} refused by the policy (rule {}, layer {})",
            output::escape(&d.action.target),
            output::escape(&d.rule),
            d.layer
        );
        return Ok(EXIT_DENIED);
    }
    let mut spec = prepared.spec;
    let proxy = standalone::start_egress(&settings, &mut spec)
        .await
        .map_err(|e| CliError::Internal(e.to_string()))?;
    let sb = prepared.sandbox;
    // The command's output reaches the terminal (or pipe) as it is written, not all
    // at its exit; the record still keeps its head and tail.
    spec.echo_output = true;
    let spec2 = spec.clone();
    let ran = tokio::task::spawn_blocking(move || sb.run(&spec2))
        .await
        .map_err(|e| CliError::Internal(e.to_string()))?;
    let out = match ran {
        Ok(o) => o,
        Err(SandboxError::Exec { program, source }) => {
            errln!(
                "io-harness sandbox: cannot execute {}: {source}",
                output::escape(&program)
            );
            return Ok(127);
        }
        Err(e) => return Err(CliError::Internal(e.to_string())),
    };
    if let Some(p) = &proxy {
        p.settle(std::time::Duration::from_secs(2)).await;
    }
    let egress = EgressRecord::of(&spec, &out, proxy.as_ref());
    drop(proxy);
    if spec.network == NetworkPosture::Allowlist {
        report_egress(&egress, &out);
    }
    let line = standalone::session_line(&spec, &workdir, &out, &egress);
    // The log never fails the command (SPEC C18), but a miss is said.
    if let Some(log) = &audit
        && let Err(e) = log.append(&line)
    {
        errln!(
            "io-harness sandbox: warning: the audit log {} was not written: {e}",
            log.dir().display()
        );
    }
    if let Some(cap) = &line.cap_hit {
        errln!("io-harness sandbox: {}", cap_message(cap, &out));
    }
    Ok(match (out.exit_code, out.signal) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        _ => 1,
    })
}

/// What a recorded cap hit did to the command, in words that stay true: only a
/// command a signal ended was stopped; a refused fork or cut output let it go on.
fn cap_message(cap: &str, out: &SandboxOutcome) -> String {
    let ended = match (out.exit_code, out.signal) {
        (Some(c), _) => format!("it exited {c}"),
        (None, Some(s)) => format!("it was ended by signal {s}"),
        _ => "it ended without a status".into(),
    };
    match (cap, out.signal) {
        ("processes", _) => format!("a fork was refused at the processes cap; {ended}"),
        ("output", None) => format!("output beyond the output cap was dropped; {ended}"),
        ("output", Some(_)) => {
            "stopped by the output cap: its output ran past the overflow limit (limits.output_overflow)"
                .into()
        }
        (cap, Some(_)) => format!("stopped by the {} cap", output::escape(cap)),
        (cap, None) => format!("the {} cap was hit; {ended}", output::escape(cap)),
    }
}

/// The one-line summary of an allowlisted command's egress, on stderr.
fn report_egress(egress: &EgressRecord, out: &SandboxOutcome) {
    match egress.report.refusals {
        Some(n) => errln!(
            "io-harness sandbox: egress allowlist [{}]: {n} refused{}",
            egress.allow_hosts.join(", "),
            if egress.report.refused_hosts.is_empty() {
                String::new()
            } else {
                format!(
                    " ({})",
                    output::escape(&egress.report.refused_hosts.join(", "))
                )
            }
        ),
        None => errln!(
            "io-harness sandbox: the {} backend has no private network: no route out at all",
            out.backend.label()
        ),
    }
}
