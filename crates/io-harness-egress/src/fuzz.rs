//! What the property tests of the proxy's parsers share (io-harness issue 17 item
//! 12): cases per parser, the time bound per input, and mutation of valid input.
//! Test builds only; the library crate keeps its own copy (this crate stands alone).

use std::time::{Duration, Instant};

use proptest::test_runner::Config;

/// Cases per parser: at least 10,000.
pub(crate) const CASES: u32 = 10_000;

/// Longest one input may take in a debug build on a loaded two-core machine.
pub(crate) const PER_INPUT: Duration = Duration::from_millis(100);

/// [`CASES`] cases, no failure files written (failures are kept as named tests).
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

/// `valid` with each `(position, op, byte)` edit applied: replace, remove, insert
/// or truncate.
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
