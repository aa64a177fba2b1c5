//! Whether a run marked `running` in the store is really being driven by a process.
//!
//! The process driving a run holds an exclusive `flock` on `<scratch>/lock` for as
//! long as it runs; the kernel drops the lock when the process dies, however it dies.
//! So a `running` run whose lock can be taken was interrupted, and a run whose lock is
//! held must not be resumed by a second process.

use std::fs::File;
use std::path::Path;

/// An exclusive hold on a run; released on drop or process death.
#[derive(Debug)]
pub(crate) struct RunLock {
    _file: File,
}

/// Takes an exclusive lock without waiting (`flock(LOCK_EX | LOCK_NB)` on Unix).
fn try_flock(file: &File) -> bool {
    file.try_lock().is_ok()
}

/// Takes the run's lock; `Ok(None)` when another process holds it.
pub(crate) fn acquire(scratch: &Path) -> std::io::Result<Option<RunLock>> {
    let file = File::options()
        .create(true)
        .truncate(false)
        .write(true)
        .open(scratch.join("lock"))?;
    Ok(try_flock(&file).then_some(RunLock { _file: file }))
}

/// Whether a process is driving the run with this scratch directory now.
pub fn is_live(scratch: &Path) -> bool {
    match File::open(scratch.join("lock")) {
        // Taking the lock and dropping it at once releases it again.
        Ok(f) => !try_flock(&f),
        Err(_) => false,
    }
}
