//! Sampling the sandbox's process tree from `/proc`, for the caps no cgroup holds
//! here: resident memory (plus the sandbox's private tmpfs mounts, see
//! [`super::tmpfs`]), the CPU time of the whole tree, and how many tasks it has.
//!
//! One pass reads `/proc/<pid>/stat` of every process reachable from the top one
//! through each thread's `children` list (so orphans re-parented to the pid
//! namespace's init are included). The CPU time of a process is its own time plus
//! `cutime`/`cstime`, the times of the children it has reaped: a process that exited
//! and was reaped inside the tree still counts, through its reaper. Parents are read
//! before their children, so a child reaped between the two reads is missed for one
//! sample rather than counted twice.
//!
//! Sampling can overshoot between two ticks, which is why a cgroup is preferred
//! wherever one is usable.

use std::fs;

/// One pass over the tree.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub(crate) struct TreeSample {
    /// Resident bytes of every process.
    pub rss_bytes: u64,
    /// User + system time of every process and of the children they reaped, in ms.
    pub cpu_ms: u64,
    /// Tasks (threads included: `RLIMIT_NPROC` counts those).
    pub tasks: u64,
}

/// Page size in bytes.
fn page_size() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    if p > 0 { p as u64 } else { 4096 }
}

/// Clock ticks per second of `/proc/<pid>/stat` times.
fn clock_ticks() -> u64 {
    // SAFETY: sysconf has no preconditions.
    let t = unsafe { libc::sysconf(libc::_SC_CLK_TCK) };
    if t > 0 { t as u64 } else { 100 }
}

/// The fields of `/proc/<pid>/stat` after the command name, which may itself hold
/// spaces and parentheses (hence the last `)`).
struct Stat {
    utime: u64,
    stime: u64,
    cutime: u64,
    cstime: u64,
    threads: u64,
    rss_pages: u64,
}

fn parse_stat(text: &str) -> Option<Stat> {
    let rest = &text[text.rfind(')')? + 1..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    // rest[0] is field 3 (state): field n is f[n - 3].
    let n = |i: usize| f.get(i - 3).and_then(|v| v.parse::<i64>().ok());
    Some(Stat {
        utime: n(14)?.max(0) as u64,
        stime: n(15)?.max(0) as u64,
        cutime: n(16)?.max(0) as u64,
        cstime: n(17)?.max(0) as u64,
        threads: n(20)?.max(0) as u64,
        rss_pages: n(24)?.max(0) as u64,
    })
}

/// Sample the tree under `root` (a host pid), visiting at most 100,000 processes.
/// With `init_root`, `root` is the pid namespace's init: a copy of the harness whose
/// resident pages are the harness's own, shared copy-on-write, so its RSS is not the
/// sandbox's (its CPU times, with every orphan it reaped, are).
pub(crate) fn sample(root: i32, init_root: bool) -> TreeSample {
    let page = page_size();
    let hz = clock_ticks();
    let mut out = TreeSample::default();
    let mut ticks = 0u64;
    let mut stack = vec![root];
    let mut seen = 0usize;
    while let Some(pid) = stack.pop() {
        seen += 1;
        if seen > 100_000 {
            break;
        }
        if let Some(st) = fs::read_to_string(format!("/proc/{pid}/stat"))
            .ok()
            .as_deref()
            .and_then(parse_stat)
        {
            if !(init_root && pid == root) {
                out.rss_bytes += st.rss_pages * page;
            }
            ticks += st.utime + st.stime + st.cutime + st.cstime;
            out.tasks += st.threads.max(1);
        }
        stack.extend(children(pid));
    }
    out.cpu_ms = ticks.saturating_mul(1000) / hz;
    out
}

/// The children of every thread of `pid`.
pub(crate) fn children(pid: i32) -> Vec<i32> {
    let mut out = Vec::new();
    let Ok(tasks) = fs::read_dir(format!("/proc/{pid}/task")) else {
        return out;
    };
    for task in tasks.flatten() {
        if let Ok(list) = fs::read_to_string(task.path().join("children")) {
            out.extend(
                list.split_whitespace()
                    .filter_map(|c| c.parse::<i32>().ok()),
            );
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn own_process_has_memory_cpu_and_tasks() {
        let s = sample(std::process::id() as i32, false);
        assert!(s.rss_bytes > 0 && s.tasks >= 1, "{s:?}");
    }

    #[test]
    fn stat_with_a_hostile_command_name_parses() {
        let line = "42 (a) b) (c) S 1 42 42 0 -1 4194560 100 0 0 0 7 3 11 13 20 0 \
                    4 0 1000 1000000 250 18446744073709551615";
        let st = parse_stat(line).unwrap();
        assert_eq!((st.utime, st.stime, st.cutime, st.cstime), (7, 3, 11, 13));
        assert_eq!((st.threads, st.rss_pages), (4, 250));
    }
}
