//! What a gate's verdict rests on, kept beside the verdict so the record never claims
//! more than was observed: the trust level of the channel that carried the verdict,
//! the tests counted as run, and the criterion files the harness restored first.

use std::fmt;

/// The channel a gate's pass rests on, weakest last. Recorded per gate as a
/// `gate_trust` sandbox event.
///
/// ```
/// use io_harness::verify::Trust;
/// assert_eq!(Trust::HarnessChannel.label(), "harness-channel");
/// assert!(Trust::ExitCode < Trust::RunnerReport);
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub enum Trust {
    /// Only the exit code: whatever the command ran, nothing counted its tests.
    ExitCode,
    /// A report or summary the test runner wrote (JUnit XML, a runner's own count):
    /// the runner shares a process with the code under test.
    RunnerReport,
    /// A verdict written by the harness's own code after each test function returned,
    /// on a channel opened for that gate run (the Rust gates).
    HarnessChannel,
}

impl Trust {
    /// The recorded label.
    pub fn label(self) -> &'static str {
        match self {
            Self::ExitCode => "exit-code",
            Self::RunnerReport => "runner-report",
            Self::HarnessChannel => "harness-channel",
        }
    }
}

impl fmt::Display for Trust {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.label())
    }
}

/// The tests a gate counted: how many ran, how many passed, and their names (bounded
/// when recorded).
///
/// ```
/// use io_harness::verify::TestTally;
/// let t = TestTally { run: 2, passed: 2, names: vec!["a".into(), "b".into()] };
/// assert_eq!(t.to_string(), "2 run, 2 passed: a, b");
/// ```
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TestTally {
    /// Tests that ran.
    pub run: u32,
    /// Tests that ran and passed.
    pub passed: u32,
    /// Their names, as the runner or the criterion names them (may be empty when
    /// the runner reports counts only).
    pub names: Vec<String>,
}

/// At most this many names go into a recorded tally.
const NAMES_RECORDED: usize = 50;

impl fmt::Display for TestTally {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} run, {} passed", self.run, self.passed)?;
        if !self.names.is_empty() {
            let shown: Vec<&str> = self
                .names
                .iter()
                .take(NAMES_RECORDED)
                .map(String::as_str)
                .collect();
            write!(f, ": {}", shown.join(", "))?;
            if self.names.len() > NAMES_RECORDED {
                write!(f, " (and {} more)", self.names.len() - NAMES_RECORDED)?;
            }
        }
        Ok(())
    }
}
