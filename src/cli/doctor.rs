//! `io-harness doctor`: which isolation layers this machine really provides, found by
//! running the sandbox's probe (a sandboxed `/bin/true` per backend, then one more as a
//! run would start it, every layer required), and which backend a run would get. With
//! no usable backend (inside another sandbox) it says so and exits 1. With `--task` it
//! also warns about each of that task's MCP servers that runs outside the sandbox.

use io_harness::exec::layers_json;
use io_harness::sandbox;

use super::doctor_caps::{claims_json, mode, print_claims};
use super::{CliError, DoctorArgs};

/// How `network = "allowlist"` is held under a backend with these layers: through the
/// egress proxy's bridge where there is a private network namespace, else as no
/// network at all (what a run records then: posture `none`).
fn allowlist_support(l: &sandbox::LayerReport) -> &'static str {
    if l.namespaces.contains(&sandbox::Namespace::Net) {
        "through the egress proxy bridged into the private network namespace"
    } else {
        "held to no network (no private network namespace for a bridge)"
    }
}

type Found = Result<sandbox::LayerReport, std::sync::Arc<sandbox::SandboxError>>;

/// A backend the probe found counts only when a real command runs under it, every
/// layer required as in a run: inside another sandbox the probe's best effort can
/// succeed where every session fails. Found by trying, not by reading anything the
/// sandboxed side could set.
fn tried(probed: &Found, backend: sandbox::Backend) -> Found {
    let layers = probed.clone()?;
    sandbox::usable(backend).map_err(std::sync::Arc::new)?;
    Ok(layers)
}

/// The process layers, the network postures and what holds the caps.
fn print_process_and_limits(l: &sandbox::LayerReport) {
    outln!(
        "  seccomp {}, no_new_privs {}, new session {}, capabilities dropped {}, fds closed {}",
        l.seccomp,
        l.no_new_privs,
        l.new_session,
        l.capabilities_dropped,
        l.fds_closed
    );
    outln!(
        "  network: none by default; allowlist {}; open only by explicit choice",
        allowlist_support(l)
    );
    let cg: Vec<&str> = l.limits.cgroup.iter().map(|c| c.label()).collect();
    let caps: Vec<&str> = l.limits.enforced.iter().map(|c| c.label()).collect();
    let td: Vec<&str> = l.limits.teardown.iter().map(|t| t.label()).collect();
    outln!(
        "  caps enforced: {}; cgroup: {}; rlimits: {}; memory monitor {}; teardown: {}",
        caps.join(", "),
        if cg.is_empty() {
            "none".into()
        } else {
            cg.join(", ")
        },
        l.limits.rlimits.join(", "),
        l.limits.memory_monitor,
        td.join(", ")
    );
}

/// The warnings `--task`'s MCP servers earn (each run outside the sandbox).
fn task_warnings(args: &DoctorArgs) -> Result<Vec<String>, CliError> {
    let Some(task) = &args.task else {
        return Ok(Vec::new());
    };
    let contract =
        io_harness::TaskContract::from_file(task).map_err(|e| CliError::Usage(e.to_string()))?;
    Ok(super::mcp::unsandboxed_warnings(&contract))
}

pub fn execute(args: DoctorArgs) -> Result<i32, CliError> {
    let mcp_warnings = task_warnings(&args)?;
    let probe = sandbox::probe();
    let native = tried(&probe.native, sandbox::Backend::LinuxNamespaces);
    let floor = tried(&probe.floor, sandbox::Backend::PortableFloor);
    let selected = match (&native, &floor) {
        (Ok(_), _) => Some(probe.selected),
        (Err(_), Ok(_)) => Some(sandbox::Backend::PortableFloor),
        _ => None,
    };
    let code = if selected.is_some() { 0 } else { 1 };
    let side = |r: &Result<sandbox::LayerReport, std::sync::Arc<sandbox::SandboxError>>| match r {
        Ok(l) => serde_json::json!({
            "available": true,
            "layers": layers_json(l),
            "network_allowlist": allowlist_support(l),
            "caps": claims_json(l),
        }),
        Err(e) => serde_json::json!({ "available": false, "reason": e.to_string() }),
    };
    let obj = serde_json::json!({
        "selected": selected.map(|b| b.label()),
        "usable": selected.is_some(),
        "mode": mode(),
        "native": side(&native),
        "floor": side(&floor),
    });
    if args.json {
        let mut obj = obj;
        if args.task.is_some() {
            obj["mcp_warnings"] = serde_json::json!(mcp_warnings);
        }
        super::json_out::print("doctor", obj, &Default::default());
        return Ok(code);
    }
    for w in &mcp_warnings {
        outln!("warning: {}", super::output::sanitize(w));
    }
    match selected {
        Some(b) => outln!("a run would get: {}", b.label()),
        None => outln!("no usable backend: every command of a run would fail here"),
    }
    outln!("caps below are those enforced when running {}", mode());
    for (name, r) in [
        ("native (linux-namespaces)", &native),
        ("portable-floor", &floor),
    ] {
        match r {
            Ok(l) => {
                outln!("\n{name}: available");
                let ns: Vec<&str> = l.namespaces.iter().map(|n| n.label()).collect();
                outln!(
                    "  namespaces: {}",
                    if ns.is_empty() {
                        "none".into()
                    } else {
                        ns.join(", ")
                    }
                );
                if let Some(m) = &l.mounts {
                    print_view(m, l.host_uid);
                }
                outln!(
                    "  landlock: {} (ABI {}), tcp denied {}, scoped {}",
                    l.landlock.status.label(),
                    l.landlock.abi.map_or("-".into(), |a| a.to_string()),
                    l.landlock.tcp_denied,
                    l.landlock.scoped
                );
                print_process_and_limits(l);
                print_claims(l);
            }
            Err(e) => outln!("\n{name}: unavailable: {e}"),
        }
    }
    Ok(code)
}

/// The allowlisted view a command gets (the probe's, whose workspace is a temporary
/// directory), and the uid it runs as: everything not listed is absent.
fn print_view(m: &io_harness::sandbox::MountReport, host_uid: Option<u32>) {
    outln!(
        "  filesystem: fresh root {}, fresh /proc {}, minimal /dev {}, workspace idmapped {}; runs as host uid {}",
        m.fresh_root,
        m.fresh_proc,
        m.minimal_dev,
        m.idmapped,
        host_uid.map_or("-".into(), |u| u.to_string())
    );
    outln!("  view (everything else is absent):");
    for e in &m.view {
        outln!("    {:<10} {}", e.access.label(), e.path.display());
    }
    if !m.excluded.is_empty() {
        let ex: Vec<String> = m.excluded.iter().map(|p| p.display().to_string()).collect();
        outln!("  excluded (masked): {}", ex.join(", "));
    }
}
