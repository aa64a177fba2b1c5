//! `io-harness sandbox -- CMD ARGS…`: one command in the sandbox exactly as a run would
//! run it, for operators to try the boundary and for benchmarks. Its output is passed
//! through, the exit code is the command's (128 + signal when a signal ended it, 127
//! when it cannot be executed), and the session is appended to the audit log.
//!
//! `--network allowlist --allow-host HOST` runs an egress proxy for the command, as a
//! run does, and prints a one-line summary of what it refused on stderr.

use std::io::Write;
use std::path::{Path, PathBuf};

use io_harness::audit::{AuditLog, SessionRecord};
use io_harness::egress::{EgressProxy, HostRule, bridge};
use io_harness::exec::{EgressRecord, layers_json};
use io_harness::sandbox::{
    self, NetworkPosture, ProxyBridge, RunSpec, SandboxError, SandboxOutcome,
};

use super::{CliError, NetworkArg, SandboxArgs};

fn parse_limits(text: &str, spec: &mut RunSpec) -> Result<(), CliError> {
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
        let l = &mut spec.limits;
        match key {
            "cpu" => l.cpu_secs = Some(secs(value).map_err(bad)?),
            "wall" => l.wall_secs = Some(secs(value).map_err(bad)?),
            "mem" | "memory" => {
                l.memory_bytes = Some(io_harness::contract::parse_size(value).map_err(bad)?)
            }
            "procs" | "processes" => {
                l.processes = Some(
                    value
                        .parse()
                        .map_err(|e: std::num::ParseIntError| bad(e.to_string()))?,
                )
            }
            "files" | "open_files" => {
                l.open_files = Some(
                    value
                        .parse()
                        .map_err(|e: std::num::ParseIntError| bad(e.to_string()))?,
                )
            }
            "output" => {
                l.output_bytes = Some(io_harness::contract::parse_size(value).map_err(bad)?)
            }
            other => {
                return Err(CliError::Usage(format!(
                    "--limit {other}: expected cpu, wall, mem, procs, files or output"
                )));
            }
        }
    }
    Ok(())
}

/// The proxy for `--network allowlist`, and the spec pointed at it.
async fn start_egress(
    args: &SandboxArgs,
    spec: &mut RunSpec,
) -> Result<Option<EgressProxy>, CliError> {
    if spec.network != NetworkPosture::Allowlist {
        if !args.allow_host.is_empty() || !args.resolve.is_empty() {
            return Err(CliError::Usage(
                "--allow-host and --resolve need --network allowlist".into(),
            ));
        }
        return Ok(None);
    }
    if args.allow_host.is_empty() {
        return Err(CliError::Usage(
            "--network allowlist needs at least one --allow-host".into(),
        ));
    }
    let rules = args
        .allow_host
        .iter()
        .map(|h| {
            HostRule::parse(h).map_err(|e| CliError::Usage(format!("--allow-host {h:?}: {e}")))
        })
        .collect::<Result<Vec<_>, _>>()?;
    let mut pins = Vec::new();
    for r in &args.resolve {
        let bad = || CliError::Usage(format!("--resolve {r:?}: expected NAME=IP"));
        let (name, ip) = r.split_once('=').ok_or_else(bad)?;
        let ip: std::net::IpAddr = ip.parse().map_err(|_| bad())?;
        if !HostRule::parse(name).is_ok_and(|h| h.is_plain_name()) {
            return Err(bad());
        }
        pins.push((name.to_string(), ip));
    }
    let proxy = EgressProxy::builder(rules)
        .with_pins(pins)
        .start()
        .await
        .map_err(|e| CliError::Internal(format!("egress proxy: {e}")))?;
    let port = bridge::DEFAULT_BRIDGE_PORT;
    spec.proxy = Some(ProxyBridge {
        port,
        to_unix: proxy.unix_path().to_path_buf(),
    });
    let mut env = bridge::proxy_env(port);
    env.append(&mut spec.env);
    spec.env = env;
    Ok(Some(proxy))
}

pub async fn execute(args: SandboxArgs) -> Result<i32, CliError> {
    let (workdir, mut spec) = command_spec(&args)?;
    let proxy = start_egress(&args, &mut spec).await?;
    let audit = AuditLog::default_location();
    let sb = match args.require {
        Some(b) => sandbox::require(b).map_err(|e| CliError::Usage(e.to_string()))?,
        None => sandbox::select().map_err(|e| CliError::Internal(e.to_string()))?,
    };
    let spec2 = spec.clone();
    let ran = tokio::task::spawn_blocking(move || sb.run(&spec2))
        .await
        .map_err(|e| CliError::Internal(e.to_string()))?;
    let out = match ran {
        Ok(o) => o,
        Err(SandboxError::Exec { program, source }) => {
            errln!("io-harness sandbox: cannot execute {program}: {source}");
            return Ok(127);
        }
        Err(e) => return Err(CliError::Internal(e.to_string())),
    };
    let _ = std::io::stdout().write_all(&out.stdout.bytes);
    let _ = std::io::stderr().write_all(&out.stderr.bytes);
    if let Some(p) = &proxy {
        p.settle(std::time::Duration::from_secs(2)).await;
    }
    let egress = EgressRecord::of(&spec, &out, proxy.as_ref());
    drop(proxy);
    if spec.network == NetworkPosture::Allowlist {
        report_egress(&egress, &out);
    }
    // The log never fails the command (SPEC C18), but a miss is said.
    if let Some(log) = &audit
        && let Err(e) = log.append(&session_record(&spec, &workdir, &egress, &out))
    {
        errln!(
            "io-harness sandbox: warning: the audit log {} was not written: {e}",
            log.dir().display()
        );
    }
    if let Some(cap) = out.cap_hit {
        errln!("io-harness sandbox: stopped by the {} cap", cap.label());
    }
    Ok(match (out.exit_code, out.signal) {
        (Some(c), _) => c,
        (None, Some(s)) => 128 + s,
        _ => 1,
    })
}

/// The working directory (canonical) and the command's spec from the flags: network
/// posture, caps, and the host variables passed in by name.
fn command_spec(args: &SandboxArgs) -> Result<(PathBuf, RunSpec), CliError> {
    let workdir = match args.workdir.clone() {
        Some(d) => d,
        None => std::env::current_dir().map_err(|e| CliError::Internal(e.to_string()))?,
    };
    let workdir = std::fs::canonicalize(&workdir)
        .map_err(|e| CliError::Usage(format!("--workdir {}: {e}", workdir.display())))?;
    let mut spec = RunSpec::new(args.command.clone(), &workdir);
    spec.network = match args.network {
        NetworkArg::None => NetworkPosture::None,
        NetworkArg::Allowlist => NetworkPosture::Allowlist,
        NetworkArg::Open => NetworkPosture::Open,
    };
    if let Some(l) = &args.limit {
        parse_limits(l, &mut spec)?;
    }
    spec.env = args
        .env
        .iter()
        .filter_map(|n| std::env::var(n).ok().map(|v| (n.clone(), v)))
        .collect();
    Ok((workdir, spec))
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
                format!(" ({})", egress.report.refused_hosts.join(", "))
            }
        ),
        None => errln!(
            "io-harness sandbox: the {} backend has no private network: no route out at all",
            out.backend.label()
        ),
    }
}

/// The audit log's line for the session.
fn session_record(
    spec: &RunSpec,
    workdir: &Path,
    egress: &EgressRecord,
    out: &SandboxOutcome,
) -> SessionRecord {
    let mut rec = SessionRecord::new(
        spec.argv.clone(),
        workdir.display().to_string(),
        out.backend.label(),
    );
    rec.layers = layers_json(&out.layers);
    rec.network = egress.posture.into();
    rec.allow_hosts = egress.allow_hosts.clone();
    rec.egress_denied_reported = egress.report.refusals;
    rec.egress_admitted_reported = egress.report.admitted;
    rec.egress_denied_hosts_reported = egress.report.refused_hosts.clone();
    rec.env_names = spec.env.iter().map(|(k, _)| k.clone()).collect();
    rec.exit_code = out.exit_code;
    rec.signal = out.signal;
    rec.duration_ms = u64::try_from(out.duration.as_millis()).unwrap_or(u64::MAX);
    rec.cap_hit = out.cap_hit.map(|c| c.label().to_string());
    rec
}
