//! The doctor's per-cap claims: for each cap the probe found enforced in the mode the
//! doctor runs in (root or an unprivileged user — the same machine enforces caps
//! differently in each), what holds it and whether a hit is reported. Built only from
//! the probe's layer report, so it never claims a mechanism the probe did not see.

use io_harness::sandbox::{Cap, CgroupController as C, LayerReport};

/// One enforced cap: its label, what holds it, and whether a hit can be reported.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CapClaim {
    pub cap: &'static str,
    pub how: String,
    pub hit_reported: bool,
}

fn has(l: &LayerReport, c: &[C]) -> bool {
    l.limits.cgroup.iter().any(|x| c.contains(x))
}

/// The claims for every cap `l` enforces, in its order.
pub fn claims(l: &LayerReport) -> Vec<CapClaim> {
    let rl = |n: &str| l.limits.rlimits.contains(&n);
    l.limits
        .enforced
        .iter()
        .map(|&cap| {
            let how = match cap {
                Cap::Cpu => {
                    let mut parts = Vec::new();
                    if let Some(t) = l.limits.cpu_tree {
                        parts.push(format!("whole process tree ({})", t.label()));
                    }
                    if rl("cpu") {
                        parts.push("RLIMIT_CPU per process".into());
                    }
                    parts.join(" + ")
                }
                Cap::Memory if has(l, &[C::V1Memory, C::V2Memory]) => "memory cgroup".into(),
                Cap::Memory if l.mounts.is_some() => {
                    "monitor: resident memory of the tree (sampled) + private tmpfs".into()
                }
                Cap::Memory => "monitor: resident memory of the tree (sampled)".into(),
                Cap::Wall => "deadline kill".into(),
                Cap::Processes if has(l, &[C::V1Pids, C::V2Pids]) => "pids cgroup".into(),
                Cap::Processes => {
                    "RLIMIT_NPROC (hit only when the tree is sampled at the limit)".into()
                }
                Cap::OpenFiles => "RLIMIT_NOFILE".into(),
                Cap::Output => "truncated by the harness".into(),
                Cap::Disk => {
                    let mut parts = Vec::new();
                    if l.limits.disk_watch {
                        parts.push("workspace growth watcher".to_string());
                    }
                    if rl("fsize") {
                        parts.push("RLIMIT_FSIZE per file".into());
                    }
                    parts.join(" + ")
                }
                _ => String::new(),
            };
            CapClaim {
                cap: cap.label(),
                how,
                hit_reported: !l.limits.unobservable.contains(&cap),
            }
        })
        .collect()
}

/// The claims as JSON, for `doctor --json`.
pub fn claims_json(l: &LayerReport) -> serde_json::Value {
    claims(l)
        .iter()
        .map(|c| {
            serde_json::json!({
                "cap": c.cap,
                "how": c.how,
                "hit_reported": c.hit_reported,
            })
        })
        .collect()
}

/// One line per claim, for the doctor's text report.
pub fn print_claims(l: &LayerReport) {
    for c in claims(l) {
        let seen = if c.hit_reported {
            "a hit is reported"
        } else {
            "a hit may go unseen: recorded as not_observable, never not_hit"
        };
        outln!("    {}: {}; {}", c.cap, c.how, seen);
    }
}

/// The privilege mode the probe ran in.
pub fn mode() -> String {
    // SAFETY: geteuid has no preconditions.
    let uid = unsafe { libc::geteuid() };
    if uid == 0 {
        "root".into()
    } else {
        format!("unprivileged (uid {uid})")
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use io_harness::sandbox::CpuAccounting;

    fn layers(cgroup: Vec<C>, rlimits: Vec<&'static str>, unobservable: Vec<Cap>) -> LayerReport {
        let mut l = LayerReport::default();
        l.limits.cgroup = cgroup;
        l.limits.rlimits = rlimits;
        l.limits.cpu_tree = Some(CpuAccounting::ProcTree);
        l.limits.disk_watch = true;
        l.limits.memory_monitor = l.limits.cgroup.is_empty();
        l.limits.enforced = vec![
            Cap::Cpu,
            Cap::Memory,
            Cap::Processes,
            Cap::OpenFiles,
            Cap::Disk,
        ];
        l.limits.unobservable = unobservable;
        l
    }

    #[test]
    fn root_and_unprivileged_claims_name_what_holds_each_cap() {
        let root = claims(&layers(
            vec![C::V1Pids, C::V1Memory],
            vec!["core", "cpu", "nofile", "fsize"],
            vec![Cap::OpenFiles],
        ));
        let get = |c: &[CapClaim], cap: &str| c.iter().find(|x| x.cap == cap).unwrap().clone();
        assert_eq!(get(&root, "memory").how, "memory cgroup");
        assert_eq!(get(&root, "processes").how, "pids cgroup");
        assert!(get(&root, "processes").hit_reported);
        assert!(!get(&root, "open_files").hit_reported);
        assert_eq!(
            get(&root, "disk").how,
            "workspace growth watcher + RLIMIT_FSIZE per file"
        );
        let user = claims(&layers(
            vec![],
            vec!["core", "cpu", "nofile", "fsize", "nproc"],
            vec![Cap::OpenFiles, Cap::Processes],
        ));
        assert_eq!(
            get(&user, "memory").how,
            "monitor: resident memory of the tree (sampled)",
            "no mount namespace, no private tmpfs claimed"
        );
        assert!(get(&user, "processes").how.starts_with("RLIMIT_NPROC"));
        assert!(!get(&user, "processes").hit_reported);
        assert_eq!(
            get(&user, "cpu").how,
            "whole process tree (proc-tree) + RLIMIT_CPU per process"
        );
    }
}
