//! What a command gate's pass must rest on beyond its exit code: the operator's trust
//! setting and an optional machine-readable test report (JUnit XML). Plain data; the
//! gate (`verify::command_report`) does the counting.

use serde::{Deserialize, Serialize};

/// How a command gate decides a pass (`[verify] trust`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum CommandTrust {
    /// The default: when the harness recognises the test runner (pytest, jest,
    /// `node --test`, `go test`, `cargo test`) or a report is declared, the gate also
    /// needs at least one test run and none failed, as the runner reports it; any
    /// other program passes on its exit code alone (recorded as `exit-code`).
    #[default]
    Auto,
    /// The exit code alone, even for a recognised runner: the operator's explicit
    /// choice, recorded as trust level `exit-code`.
    ExitCode,
}

impl CommandTrust {
    /// Whether this is the default (kept out of stored contracts).
    pub fn is_auto(&self) -> bool {
        *self == Self::Auto
    }
}

/// The placeholder a command gate's argv may carry; the harness replaces it with a
/// fresh path outside the workspace where the runner writes its JUnit report.
pub const REPORT_PLACEHOLDER: &str = "{report}";

/// A JUnit XML report the gate's command writes (`[verify] report = { junit =
/// "{report}", min_tests = 1, require = [...] }`). With one declared, the gate passes
/// only when the report exists, parses, counts at least `min_tests` passed tests with
/// no failure or error, and names every `require`d test as passed.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct TestReport {
    /// Passed test cases needed (at least 1).
    #[serde(default = "one")]
    pub min_tests: u32,
    /// Tests that must be in the report and pass, as `classname::name` (a pytest node
    /// id such as `tests/test_parse.py::test_trailing` also matches the classname
    /// pytest derives from it, `tests.test_parse`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub require: Vec<String>,
}

fn one() -> u32 {
    1
}

impl Default for TestReport {
    fn default() -> Self {
        Self {
            min_tests: 1,
            require: Vec::new(),
        }
    }
}
