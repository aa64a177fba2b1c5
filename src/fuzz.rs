//! What the property tests of the parsers of untrusted bytes share (issue 17 item
//! 12): how many cases each runs, and the time bound each input must stay within.
//! Test builds only.
//!
//! Every parser gets [`CASES`] arbitrary or mutated-valid inputs per run, from
//! proptest's seeded generator. A failure proptest finds is kept as a named
//! regression test beside the property, not in a file of seeds.

use std::time::{Duration, Instant};

use proptest::test_runner::Config;

/// Cases per parser: at least 10,000, as the issue asks.
pub(crate) const CASES: u32 = 10_000;

/// Longest one input may take in a debug build on a loaded two-core machine; real
/// runs take well under a millisecond, so this only catches a blow-up.
pub(crate) const PER_INPUT: Duration = Duration::from_millis(100);

/// The config every property uses: [`CASES`] cases, no failure files written.
pub(crate) fn config() -> Config {
    Config {
        cases: CASES,
        failure_persistence: None,
        ..Config::default()
    }
}

/// Runs `f`, failing the case if it takes longer than [`PER_INPUT`].
pub(crate) fn timed<T>(what: &str, f: impl FnOnce() -> T) -> T {
    let started = Instant::now();
    let out = f();
    let took = started.elapsed();
    assert!(took < PER_INPUT, "{what}: one input took {took:?}");
    out
}

/// Valid input mutated: each byte flipped, dropped or duplicated with the seeded
/// choices in `edits` (`(position, op, byte)`), so a case is a near-miss of the
/// real thing rather than noise.
pub(crate) fn mutate(valid: &[u8], edits: &[(usize, u8, u8)]) -> Vec<u8> {
    let mut out = valid.to_vec();
    for &(at, op, byte) in edits {
        if out.is_empty() {
            out.push(byte);
            continue;
        }
        let at = at % out.len();
        match op % 4 {
            0 => out[at] = byte,
            1 => {
                out.remove(at);
            }
            2 => out.insert(at, byte),
            _ => out.truncate(at),
        }
    }
    out
}
