//! Spawn latency of `/bin/true` (placeholder; filled in below).
fn main() {}
