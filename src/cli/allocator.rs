//! The allocator's settings for the command-line program.
//!
//! glibc's malloc raises its mmap threshold each time a large block is freed, up to
//! 32 MiB, so after the first multi-megabyte reply is freed, the next ones are carved
//! from the heaps of whichever threads touch them and stay resident after they are
//! freed. A run that handles a few 8 MiB replies (the `max_reply_bytes` default) then
//! peaked anywhere between 116 MiB and 383 MiB on the same input, depending on which
//! worker threads the scheduler used. A fixed threshold keeps every block of 1 MiB or
//! more in its own mapping, returned to the system when it is freed. And every
//! thread that allocates gets an arena of its own (up to eight per core): the store's
//! blocking threads, the runtime's workers and the HTTP client each kept their share of
//! freed medium blocks (CI, under a full test suite's load, still measured 282 MiB
//! with the threshold alone). Two arenas serve a process that drives one run.

/// Blocks at least this large are mapped on their own and unmapped when freed.
const MMAP_THRESHOLD: i32 = 1 << 20;
/// Arenas in all.
const ARENA_MAX: i32 = 2;
/// Free memory at the top of a heap past this is given back.
const TRIM_THRESHOLD: i32 = 1 << 20;

/// Fixes the mmap threshold (which also turns off glibc's dynamic adjustment), the
/// number of arenas and the trim threshold. Called
/// once, first thing in `main`; a library embedding io-harness keeps its own allocator
/// settings.
pub fn bound_large_allocations() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    // SAFETY: mallopt only changes malloc's tunables; it is called before any other
    // thread exists, with documented, valid settings (M_MMAP_THRESHOLD under its
    // 32 MiB maximum, a positive M_ARENA_MAX and M_TRIM_THRESHOLD).
    unsafe {
        libc::mallopt(libc::M_MMAP_THRESHOLD, MMAP_THRESHOLD);
        libc::mallopt(libc::M_ARENA_MAX, ARENA_MAX);
        libc::mallopt(libc::M_TRIM_THRESHOLD, TRIM_THRESHOLD);
    }
}
