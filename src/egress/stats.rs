//! Counts of what the proxy admitted and refused.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many distinct refused hosts are kept; later ones still count.
pub const MAX_REFUSED_HOSTS: usize = 32;

#[derive(Debug, Default)]
pub(crate) struct Stats {
    admitted: AtomicU64,
    refusals: AtomicU64,
    hosts: Mutex<Vec<String>>,
}

impl Stats {
    pub(crate) fn admit(&self) {
        self.admitted.fetch_add(1, Ordering::Relaxed);
    }

    pub(crate) fn refuse(&self, host: &str, why: &str) {
        tracing::info!(host, why, "egress refused");
        self.refusals.fetch_add(1, Ordering::Relaxed);
        // A poisoned lock only means another connection panicked mid-push; the list is still valid.
        let mut hosts = self.hosts.lock().unwrap_or_else(|e| e.into_inner());
        if hosts.len() < MAX_REFUSED_HOSTS && !hosts.iter().any(|h| h == host) {
            hosts.push(host.to_string());
        }
    }

    pub(crate) fn admitted(&self) -> u64 {
        self.admitted.load(Ordering::Relaxed)
    }

    pub(crate) fn refusals(&self) -> u64 {
        self.refusals.load(Ordering::Relaxed)
    }

    pub(crate) fn refused_hosts(&self) -> Vec<String> {
        self.hosts.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}
