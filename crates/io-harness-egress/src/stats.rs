//! Counts of what the proxy admitted and refused.

use std::sync::Mutex;
use std::sync::atomic::{AtomicU64, Ordering};

/// How many distinct refused hosts are kept; later ones still count.
pub const MAX_REFUSED_HOSTS: usize = 32;

#[derive(Debug, Default)]
pub(crate) struct Stats {
    /// Connections being served right now.
    active: AtomicU64,
    admitted: AtomicU64,
    refusals: AtomicU64,
    hosts: Mutex<Vec<String>>,
}

impl Stats {
    pub(crate) fn enter(&self) {
        self.active.fetch_add(1, Ordering::SeqCst);
    }

    pub(crate) fn leave(&self) {
        self.active.fetch_sub(1, Ordering::SeqCst);
    }

    pub(crate) fn active(&self) -> u64 {
        self.active.load(Ordering::SeqCst)
    }

    pub(crate) fn admit(&self) {
        self.admitted.fetch_add(1, Ordering::Relaxed);
    }

    /// Counts a refusal of `host`. The name is client-chosen: it is cut to 253 bytes
    /// (the longest DNS name) and anything but printable ASCII becomes `?` before it is
    /// kept, since it ends up in the store, the audit log and on terminals.
    pub(crate) fn refuse(&self, host: &str, why: &str) {
        let host: String = host
            .chars()
            .take(253)
            .map(|c| if c.is_ascii_graphic() { c } else { '?' })
            .collect();
        let host = host.as_str();
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refused_names_are_bounded_and_printable() {
        let s = Stats::default();
        s.refuse(&format!("a\u{202e}b\x1b{}", "x".repeat(1000)), "test");
        let hosts = s.refused_hosts();
        assert_eq!(hosts[0].len(), 253);
        assert!(hosts[0].starts_with("a?b?x"));
    }
}
