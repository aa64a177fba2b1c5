//! Windows: the portable floor, reported as the floor.
//!
//! What a Windows run gets today is a fresh subprocess with a private `HOME`/`TEMP`,
//! a built environment, bounded output and the **wall clock**, whose kill reaches
//! the whole process tree (`taskkill /T /F`). No Job Object is created, so the
//! outcome names [`Backend::PortableFloor`](super::Backend::PortableFloor), never
//! `windows-job-object`, and reports only the caps it enforces: wall and output.
//! CPU, memory and process caps are *not* claimed.
//!
//! [`JobLimits`] is the pure mapping from [`SandboxLimits`] to the fields of a
//! `JOBOBJECT_EXTENDED_LIMIT_INFORMATION`, ready for the Job Object implementation
//! (which needs `windows-sys`, a new dependency, and lands separately).

use super::SandboxLimits;

/// Job Object limits derived from [`SandboxLimits`]. Not applied by anything yet.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct JobLimits {
    /// `ProcessMemoryLimit` in bytes (`JOB_OBJECT_LIMIT_PROCESS_MEMORY`).
    pub process_memory: Option<u64>,
    /// `ActiveProcessLimit` (`JOB_OBJECT_LIMIT_ACTIVE_PROCESS`).
    pub active_processes: Option<u32>,
    /// `PerJobUserTimeLimit` in 100-nanosecond units (`JOB_OBJECT_LIMIT_JOB_TIME`).
    pub job_time_100ns: Option<u64>,
    /// `JOB_OBJECT_LIMIT_KILL_ON_JOB_CLOSE`: the tree dies with the handle.
    pub kill_on_close: bool,
    /// `JOB_OBJECT_LIMIT_DIE_ON_UNHANDLED_EXCEPTION`: no error dialogs hanging a run.
    pub die_on_unhandled_exception: bool,
}

impl From<&SandboxLimits> for JobLimits {
    fn from(l: &SandboxLimits) -> Self {
        Self {
            process_memory: l.memory_bytes,
            active_processes: l.processes.map(|p| u32::try_from(p).unwrap_or(u32::MAX)),
            job_time_100ns: l.cpu_secs.map(|s| s.saturating_mul(10_000_000)),
            kill_on_close: true,
            die_on_unhandled_exception: true,
        }
    }
}

#[cfg(windows)]
pub use runner::WindowsSandbox;

#[cfg(windows)]
mod runner {
    use crate::{Backend, RunSpec, Sandbox, SandboxChild, SandboxError, SandboxOutcome};

    /// The Windows backend: the floor, which is what it reports.
    #[derive(Debug, Clone, Default)]
    pub struct WindowsSandbox;

    impl Sandbox for WindowsSandbox {
        fn backend(&self) -> Backend {
            Backend::PortableFloor
        }
        fn run(&self, spec: &RunSpec) -> Result<SandboxOutcome, SandboxError> {
            crate::floor_std::run(Backend::PortableFloor, spec, &crate::floor_std::unwrapped)
        }
        fn spawn(&self, spec: &RunSpec) -> Result<SandboxChild, SandboxError> {
            crate::floor_std::spawn(Backend::PortableFloor, spec, &crate::floor_std::unwrapped)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn maps_limits_to_job_fields() {
        let limits = SandboxLimits {
            cpu_secs: Some(3),
            memory_bytes: Some(64 << 20),
            processes: Some(8),
            ..SandboxLimits::default()
        };
        let job = JobLimits::from(&limits);
        assert_eq!(job.process_memory, Some(64 << 20));
        assert_eq!(job.active_processes, Some(8));
        assert_eq!(job.job_time_100ns, Some(30_000_000));
        assert!(job.kill_on_close && job.die_on_unhandled_exception);
    }

    #[test]
    fn unbounded_maps_to_none_and_huge_counts_saturate() {
        let job = JobLimits::from(&SandboxLimits::unbounded());
        assert_eq!(
            (job.process_memory, job.active_processes, job.job_time_100ns),
            (None, None, None)
        );
        let huge = SandboxLimits {
            processes: Some(u64::MAX),
            cpu_secs: Some(u64::MAX),
            ..SandboxLimits::unbounded()
        };
        let job = JobLimits::from(&huge);
        assert_eq!(job.active_processes, Some(u32::MAX));
        assert_eq!(job.job_time_100ns, Some(u64::MAX));
    }
}
