//! The memory monitor used where no memory cgroup is available: it samples the
//! resident memory of the sandbox's process tree and kills the sandbox when the sum
//! passes the cap. Sampling can overshoot between two ticks, which is why a cgroup
//! is preferred wherever one is usable.

use std::fs;

/// Page size in bytes.
fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as u64 } else { 4096 }
}

/// Resident bytes of `root` and all its descendants (found through each thread's
/// `children` list, so orphans re-parented to a pid-namespace init are included).
pub(crate) fn tree_rss_bytes(root: i32) -> u64 {
    let page = page_size();
    let mut total = 0;
    let mut stack = vec![root];
    let mut seen = 0usize;
    while let Some(pid) = stack.pop() {
        seen += 1;
        if seen > 100_000 {
            break;
        }
        if let Ok(statm) = fs::read_to_string(format!("/proc/{pid}/statm")) {
            let rss: u64 = statm
                .split_whitespace()
                .nth(1)
                .and_then(|v| v.parse().ok())
                .unwrap_or(0);
            total += rss * page;
        }
        let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
            continue;
        };
        for task in tasks.flatten() {
            if let Ok(children) = fs::read_to_string(task.path().join("children")) {
                stack.extend(
                    children
                        .split_whitespace()
                        .filter_map(|c| c.parse::<i32>().ok()),
                );
            }
        }
    }
    total
}

#[cfg(test)]
mod tests {
    #[test]
    fn own_process_has_resident_memory() {
        assert!(super::tree_rss_bytes(std::process::id() as i32) > 0);
    }
}
