//! The sandbox's layer report as JSON, for the store and the audit log. Field names
//! here are stable on disk.

use serde_json::{Value, json};

use crate::sandbox::{LayerReport, SandboxLimits};

fn labels<T: Copy>(items: &[T], label: impl Fn(T) -> &'static str) -> Vec<&'static str> {
    items.iter().map(|&i| label(i)).collect()
}

/// What was really applied.
pub fn layers_json(l: &LayerReport) -> Value {
    let mounts = l.mounts.as_ref().map(|m| {
        json!({
            "root_read_only": m.root_read_only,
            "fresh_proc": m.fresh_proc,
            "minimal_dev": m.minimal_dev,
            "hidden": m.hidden,
            "read_only": m.read_only,
            "protected": m.protected,
            "masked": m.masked,
        })
    });
    json!({
        "namespaces": labels(&l.namespaces, |n| n.label()),
        "mounts": mounts,
        "landlock": {
            "abi": l.landlock.abi,
            "status": l.landlock.status.label(),
            "tcp_denied": l.landlock.tcp_denied,
            "scoped": l.landlock.scoped,
        },
        "seccomp": l.seccomp,
        "no_new_privs": l.no_new_privs,
        "new_session": l.new_session,
        "capabilities_dropped": l.capabilities_dropped,
        "fds_closed": l.fds_closed,
        "proxy_bridge": l.proxy_bridge,
        "limits": {
            "cgroup": labels(&l.limits.cgroup, |c| c.label()),
            "rlimits": l.limits.rlimits,
            "memory_monitor": l.limits.memory_monitor,
            "enforced": labels(&l.limits.enforced, |c| c.label()),
            "teardown": labels(&l.limits.teardown, |t| t.label()),
        },
    })
}

/// The caps asked for (`null` = unbounded).
pub fn limits_json(l: &SandboxLimits) -> Value {
    json!({
        "cpu_secs": l.cpu_secs,
        "wall_secs": l.wall_secs,
        "memory_bytes": l.memory_bytes,
        "processes": l.processes,
        "open_files": l.open_files,
        "output_bytes": l.output_bytes,
    })
}
