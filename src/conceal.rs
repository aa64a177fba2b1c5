//! Keeping the harness's own credentials out of reach of the processes it starts.
//!
//! Every child gets a built environment, so no key is handed down. But a child that is
//! not sandboxed (an MCP server with `sandbox = false`) runs as the same user and
//! could still read the harness's `/proc/<pid>/environ` — the environment block the
//! kernel keeps as the process started, keys included — or its memory.
//! [`conceal_process`] closes both doors: it moves every variable out of that block
//! (the bytes there are overwritten; the values live on in the C library's copy, so
//! the process still reads them) and makes the process non-dumpable, which gives its
//! `/proc` files to root and refuses `ptrace` and `/proc/<pid>/mem` to its own user.
//! Root is not refused anything; [`memory_readable_by_same_user`] says so for a
//! record.
//!
//! Both change the whole process, so the library never calls them: `io-harness` does,
//! first thing in `main`; an embedder may.
//!
//! ```no_run
//! // First thing in `main`: before any thread starts and before anything holds an
//! // environment pointer.
//! let concealed = io_harness::conceal::conceal_process();
//! assert!(concealed.non_dumpable);
//! ```

/// What [`conceal_process`] managed.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct Concealed {
    /// The original environment block was overwritten (nothing was left pointing
    /// into it).
    pub environ_blanked: bool,
    /// The process is non-dumpable.
    pub non_dumpable: bool,
}

/// Blanks the original environment block and makes the process non-dumpable (see the
/// module docs). Linux only; elsewhere it does nothing and says so.
///
/// Call it before any other thread exists: it rewrites the environment.
pub fn conceal_process() -> Concealed {
    #[cfg(target_os = "linux")]
    {
        let environ_blanked = linux::blank_environ_block();
        // SAFETY: PR_SET_DUMPABLE takes an integer argument and touches no memory.
        let non_dumpable = unsafe { libc::prctl(libc::PR_SET_DUMPABLE, 0, 0, 0, 0) } == 0;
        Concealed {
            environ_blanked,
            non_dumpable,
        }
    }
    #[cfg(not(target_os = "linux"))]
    {
        Concealed::default()
    }
}

/// Whether another process running as this process's user could read its memory
/// (and so its credentials): when the process is dumpable, or when it runs as root
/// (root's children may read anything). True where it cannot be told.
pub fn memory_readable_by_same_user() -> bool {
    #[cfg(target_os = "linux")]
    {
        // SAFETY: geteuid has no preconditions; PR_GET_DUMPABLE takes no pointers.
        let (euid, dumpable) = unsafe { (libc::geteuid(), libc::prctl(libc::PR_GET_DUMPABLE)) };
        euid == 0 || dumpable != 0
    }
    #[cfg(not(target_os = "linux"))]
    {
        true
    }
}

#[cfg(target_os = "linux")]
mod linux {
    use std::ffi::{CStr, c_char};

    unsafe extern "C" {
        static mut environ: *const *const c_char;
    }

    /// `[env_start, env_end)` of this process, from `/proc/self/stat` (fields 50
    /// and 51 of proc(5)).
    fn environ_block() -> Option<(usize, usize)> {
        let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
        // The command name may hold spaces and parentheses: fields follow the last ')'.
        let rest = &stat[stat.rfind(')')? + 1..];
        let fields: Vec<&str> = rest.split_whitespace().collect();
        // Field 3 (the state) is the first after the name.
        let start: usize = fields.get(50 - 3)?.parse().ok()?;
        let end: usize = fields.get(51 - 3)?.parse().ok()?;
        (start < end).then_some((start, end))
    }

    /// The addresses of the strings `environ` points at now.
    fn live_pointers() -> Vec<usize> {
        let mut out = Vec::new();
        // SAFETY: `environ` is the C library's NULL-terminated array of pointers to
        // NUL-terminated strings; it is read, not changed, and no other thread exists
        // yet (the caller's contract).
        unsafe {
            let mut p = environ;
            if p.is_null() {
                return out;
            }
            while !(*p).is_null() {
                out.push(*p as usize);
                p = p.add(1);
            }
        }
        out
    }

    /// Re-sets every variable (the C library copies each to the heap), checks that no
    /// entry still points into the original block, then overwrites the block.
    pub(super) fn blank_environ_block() -> bool {
        let Some((start, end)) = environ_block() else {
            return false;
        };
        let vars: Vec<(std::ffi::OsString, std::ffi::OsString)> = std::env::vars_os().collect();
        for (k, v) in &vars {
            // SAFETY: the caller's contract is that no other thread exists, so nothing
            // reads the environment while it changes.
            unsafe { std::env::set_var(k, v) };
        }
        let inside = |a: usize| (start..end).contains(&a);
        if live_pointers().into_iter().any(inside) {
            return false;
        }
        // SAFETY: `[start, end)` is this process's original environment block on its
        // initial stack, mapped and writable; no `environ` entry points into it any
        // more (checked above), and the C library and std keep no other pointer to it
        // (both copy what they read).
        unsafe { std::ptr::write_bytes(start as *mut u8, 0, end - start) };
        // What the values were is still readable through the C library's copies.
        let after: Vec<_> = std::env::vars_os().collect();
        after.len() == vars.len()
            && live_pointers().iter().all(|&p| {
                // SAFETY: each live pointer is a NUL-terminated string (see above).
                !unsafe { CStr::from_ptr(p as *const c_char) }.is_empty()
            })
    }
}
