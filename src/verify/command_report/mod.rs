//! What a command gate's pass rests on beyond its exit code (issue 14, class 5: a
//! gate that ran nothing must not pass).
//!
//! For a test runner the harness recognises (`ecosystem::classify`), the count of
//! tests the runner printed is read from the whole of its output ([`SummaryScan`])
//! and a pass needs at least one test run and none failed. A declared JUnit report
//! ([`TestReport`]) is written by the command to a fresh harness-owned path outside
//! the workspace (`{report}` in its argv, `IO_HARNESS_REPORT` in its environment)
//! and must exist, parse, count `min_tests` passed with none failed, and name every
//! required test. Both are what the runner says: it shares a process with the code
//! under test, so they are recorded as trust level `runner-report`. Everything else,
//! and every gate the operator sets to `trust = "exit-code"`, passes on the exit code
//! alone and is recorded as `exit-code`.

mod junit;
mod summary;
#[cfg(test)]
mod summary_tests;

use std::path::{Path, PathBuf};

pub(crate) use summary::SummaryScan;

use super::ecosystem::{Runner, classify};
use super::{TestTally, Trust};
use crate::contract::{CommandTrust, REPORT_PLACEHOLDER, TestReport};
use crate::exec::Executor;
use junit::Outcome;
use summary::Count;

/// The environment variable naming the report path inside the gate.
pub(crate) const REPORT_ENV: &str = "IO_HARNESS_REPORT";

/// How a command gate's pass is decided after its exit code.
#[derive(Debug, Clone)]
pub(crate) enum Counting<'a> {
    /// The exit code alone.
    ExitCode,
    /// The runner's printed count.
    Summary(Runner),
    /// The declared JUnit report.
    Report(&'a TestReport),
}

impl Counting<'_> {
    /// The counting a gate gets: its report when declared, else the recognised
    /// runner's count unless the operator chose the exit code, or expects a non-zero
    /// exit (a count of passed tests means nothing there).
    pub(crate) fn of<'a>(
        argv: &[String],
        expect_exit: i32,
        trust: CommandTrust,
        report: Option<&'a TestReport>,
    ) -> Counting<'a> {
        match (report, trust) {
            (Some(r), _) => Counting::Report(r),
            (None, CommandTrust::ExitCode) => Counting::ExitCode,
            (None, CommandTrust::Auto) => match classify(argv).runner {
                Some(runner) if expect_exit == 0 => Counting::Summary(runner),
                _ => Counting::ExitCode,
            },
        }
    }
}

/// The name a runner goes by in a reason.
pub(crate) fn runner_name(r: Runner) -> &'static str {
    match r {
        Runner::CargoTest => "cargo test",
        Runner::Pytest => "pytest",
        Runner::Jest => "jest",
        Runner::NodeTest => "node --test",
        Runner::GoTest => "go test",
    }
}

/// The counted part of a verdict: the tally recorded, and why it fails if it does.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Counted {
    /// What was counted.
    pub tests: Option<TestTally>,
    /// Why the count does not allow a pass (`None`: it does).
    pub failure: Option<String>,
}

/// Judges a runner's printed count: at least one test run, none failed.
pub(crate) fn judge_summary(runner: Runner, count: Option<Count>) -> Counted {
    let name = runner_name(runner);
    let Some(c) = count else {
        let hint = match runner {
            Runner::GoTest => " (run it with -v or -json so the tests are listed)",
            _ => "",
        };
        return Counted {
            tests: None,
            failure: Some(format!(
                "{name} printed no count of tests run{hint}, so nothing shows a test ran"
            )),
        };
    };
    let tests = Some(TestTally {
        run: c.run,
        passed: c.passed,
        names: c.names.clone(),
    });
    let explain = match (&c.note, c.skipped) {
        (Some(n), _) => format!(" ({n})"),
        (None, 0) => String::new(),
        (None, k) => format!(" ({k} not run: skipped, ignored or filtered out)"),
    };
    let failure = if c.failed > 0 {
        Some(format!("{name} reported {} failed{explain}", c.failed))
    } else if c.passed == 0 {
        Some(format!("{name} reported no tests run{explain}"))
    } else {
        None
    };
    Counted { tests, failure }
}

/// Judges the JUnit report at `path` against the declared expectations.
pub(crate) fn judge_report(path: &Path, spec: &TestReport) -> Counted {
    let cases = match junit::read(path) {
        Ok(c) => c,
        Err(e) => {
            return Counted {
                tests: None,
                failure: Some(format!(
                    "the test report {e} (the command must write JUnit XML to the path \
                     given for {REPORT_PLACEHOLDER} or in ${REPORT_ENV})"
                )),
            };
        }
    };
    // `node --test` reports a file that ran no test as a case named by the file's
    // absolute path: that is not a test.
    let ran: Vec<_> = cases
        .iter()
        .filter(|c| c.outcome != Outcome::Skipped)
        .filter(|c| c.outcome != Outcome::Passed || !c.name_is_path())
        .collect();
    let passed: Vec<&str> = ran
        .iter()
        .filter(|c| c.outcome == Outcome::Passed)
        .map(|c| c.id.as_str())
        .collect();
    let bad: Vec<&str> = ran
        .iter()
        .filter(|c| matches!(c.outcome, Outcome::Failed | Outcome::Error))
        .map(|c| c.id.as_str())
        .collect();
    let tests = Some(TestTally {
        run: u32::try_from(ran.len()).unwrap_or(u32::MAX),
        passed: u32::try_from(passed.len()).unwrap_or(u32::MAX),
        names: passed.iter().map(|s| (*s).to_string()).collect(),
    });
    let missing: Vec<&str> = spec
        .require
        .iter()
        .filter(|r| !passed.iter().any(|p| names_test(r, p)))
        .map(String::as_str)
        .collect();
    let failure = if !bad.is_empty() {
        Some(format!(
            "the test report shows {} failed or errored: {}",
            bad.len(),
            shown(&bad)
        ))
    } else if passed.len() < spec.min_tests as usize {
        Some(format!(
            "the test report counts {} passed, fewer than min_tests = {} ({} skipped)",
            passed.len(),
            spec.min_tests,
            cases.len() - ran.len()
        ))
    } else if !missing.is_empty() {
        Some(format!(
            "the test report does not show required tests as passed: {}",
            shown(&missing)
        ))
    } else {
        None
    };
    Counted { tests, failure }
}

/// A few names for a reason.
fn shown(names: &[&str]) -> String {
    let mut s = names
        .iter()
        .take(10)
        .copied()
        .collect::<Vec<_>>()
        .join(", ");
    if names.len() > 10 {
        s.push_str(&format!(" and {} more", names.len() - 10));
    }
    s
}

/// Whether a `require` entry names the report's `classname::name` `id`: exactly, or
/// as the pytest node id pytest derives that classname from
/// (`tests/test_parse.py::TestX::test_y` is `tests.test_parse.TestX::test_y`).
pub(crate) fn names_test(required: &str, id: &str) -> bool {
    if required == id {
        return true;
    }
    let mut parts = required.split("::");
    let Some(module) = parts.next().and_then(|p| p.strip_suffix(".py")) else {
        return false;
    };
    let rest: Vec<&str> = parts.collect();
    let Some((name, classes)) = rest.split_last() else {
        return false;
    };
    let mut classname = module.replace('/', ".");
    for c in classes {
        classname.push('.');
        classname.push_str(c);
    }
    id == format!("{classname}::{name}")
}

/// A fresh report path for one gate run: a new directory under the run's gate
/// directory (outside the workspace, removed when dropped), so a report left by an
/// earlier gate or written ahead by the agent is never the one read.
pub(crate) struct ReportPath {
    dir: super::rust_gate::GateDir,
    file: PathBuf,
}

impl ReportPath {
    /// Creates the directory.
    pub(crate) fn create(exec: Option<&Executor>) -> std::io::Result<Self> {
        let dir = super::rust_gate::GateDir::create(exec)?;
        let file = dir.0.join("report.xml");
        Ok(Self { dir, file })
    }

    /// The report file's path.
    pub(crate) fn file(&self) -> &Path {
        &self.file
    }

    /// The directory the gate may write.
    pub(crate) fn dir(&self) -> &Path {
        &self.dir.0
    }

    /// The environment that names the report to the command.
    pub(crate) fn env(&self) -> Vec<(String, String)> {
        vec![(
            REPORT_ENV.to_string(),
            self.file.to_string_lossy().into_owned(),
        )]
    }
}

/// The argv with every `{report}` replaced by the report path.
pub(crate) fn substitute(argv: &[String], report: &Path) -> Vec<String> {
    let path = report.to_string_lossy();
    argv.iter()
        .map(|a| a.replace(REPORT_PLACEHOLDER, &path))
        .collect()
}

/// The trust level a counting rests on.
pub(crate) fn trust_of(counting: &Counting<'_>) -> Trust {
    match counting {
        Counting::ExitCode => Trust::ExitCode,
        Counting::Summary(_) | Counting::Report(_) => Trust::RunnerReport,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn pytest_node_ids_name_the_classname_pytest_writes() {
        assert!(names_test("m::t", "m::t"));
        assert!(names_test(
            "tests/test_parse.py::test_trailing",
            "tests.test_parse::test_trailing"
        ));
        assert!(names_test(
            "tests/test_parse.py::TestX::test_y[1]",
            "tests.test_parse.TestX::test_y[1]"
        ));
        assert!(!names_test(
            "tests/test_parse.py::test_trailing",
            "tests.test_parse::test_trailing_other"
        ));
        assert!(!names_test("tests/test_parse.py", "tests.test_parse::x"));
        assert!(!names_test("a::b", "a::bc"));
    }

    #[test]
    fn the_report_placeholder_is_replaced_inside_arguments() {
        let argv: Vec<String> = ["pytest", "--junitxml={report}", "-q"]
            .map(String::from)
            .to_vec();
        assert_eq!(
            substitute(&argv, Path::new("/c/r.xml")),
            ["pytest", "--junitxml=/c/r.xml", "-q"]
        );
    }

    #[test]
    fn counting_follows_the_runner_the_trust_and_the_report() {
        let argv = |s: &str| s.split(' ').map(String::from).collect::<Vec<_>>();
        let auto = CommandTrust::Auto;
        let r = TestReport::default();
        assert!(matches!(
            Counting::of(&argv("python -m pytest"), 0, auto, None),
            Counting::Summary(Runner::Pytest)
        ));
        assert!(matches!(
            Counting::of(&argv("python -m pytest"), 0, CommandTrust::ExitCode, None),
            Counting::ExitCode
        ));
        assert!(matches!(
            Counting::of(&argv("python -m pytest"), 1, auto, None),
            Counting::ExitCode
        ));
        assert!(matches!(
            Counting::of(&argv("./check.sh"), 0, auto, None),
            Counting::ExitCode
        ));
        assert!(matches!(
            Counting::of(&argv("./check.sh"), 0, auto, Some(&r)),
            Counting::Report(_)
        ));
    }

    /// Each gate run gets a directory of its own: a report an earlier gate wrote (or
    /// anything placed ahead) is never at the path the next gate reads.
    #[test]
    fn every_gate_run_gets_a_fresh_empty_report_directory() {
        let a = ReportPath::create(None).unwrap();
        std::fs::write(a.file(), "<testsuites/>").unwrap();
        let b = ReportPath::create(None).unwrap();
        assert_ne!(a.dir(), b.dir());
        assert!(!b.file().exists());
        assert_eq!(b.file().parent(), Some(b.dir()));
        assert_eq!(
            b.env()[0],
            (REPORT_ENV.to_string(), b.file().display().to_string())
        );
        let gone = a.dir().to_path_buf();
        drop(a);
        assert!(!gone.exists(), "a gate's report directory outlived it");
    }

    /// Without a sandbox the gate runs as a host subprocess; it counts the same way.
    /// A program named `cargo` that prints libtest's summary stands in for cargo.
    #[tokio::test]
    async fn a_host_gate_counts_from_its_output_and_writes_its_report() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let bin = dir.path().join("cargo");
        std::fs::write(
            &bin,
            "#!/bin/sh\necho 'test result: ok. 0 passed; 0 failed; 2 ignored'\n\
             [ -n \"$IO_HARNESS_REPORT\" ] && echo '<testsuite><testcase name=\"t\"/></testsuite>' > \"$2\"\nexit 0\n",
        )
        .unwrap();
        std::fs::set_permissions(&bin, std::fs::Permissions::from_mode(0o755)).unwrap();
        let ws = crate::tools::Workspace::open(dir.path()).unwrap();
        let argv = vec![bin.display().to_string(), "test".to_string()];
        let mut gate = crate::contract::Verification::command(argv.clone());
        let r = crate::verify::check(std::slice::from_ref(&gate), &ws, None).await;
        let got = &r.results[0];
        assert!(!got.passed);
        assert!(
            got.summary.contains("cargo test reported no tests run"),
            "{}",
            got.summary
        );
        assert_eq!(got.trust, Some(Trust::RunnerReport));
        if let crate::contract::Verification::Command { argv, report, .. } = &mut gate {
            argv.push("{report}".into());
            *report = Some(TestReport::default());
        }
        let r = crate::verify::check(&[gate], &ws, None).await;
        let got = &r.results[0];
        assert!(got.passed, "{}", got.summary);
        assert_eq!(got.tests.as_ref().map(|t| t.passed), Some(1));
    }

    fn report(xml: &str, spec: &TestReport) -> Counted {
        let dir = tempfile::tempdir().unwrap();
        let f = dir.path().join("r.xml");
        std::fs::write(&f, xml).unwrap();
        judge_report(&f, spec)
    }

    #[test]
    fn a_report_passes_only_with_enough_passed_none_failed_and_every_required_test() {
        let two = r#"<testsuites><testsuite><testcase classname="tests.test_p" name="a"/><testcase classname="tests.test_p" name="b"/><testcase classname="tests.test_p" name="s"><skipped/></testcase></testsuite></testsuites>"#;
        let ok = report(two, &TestReport::default());
        assert_eq!(ok.failure, None);
        assert_eq!(
            ok.tests,
            Some(TestTally {
                run: 2,
                passed: 2,
                names: vec!["tests.test_p::a".into(), "tests.test_p::b".into()]
            })
        );
        let need = |min: u32, req: &[&str]| TestReport {
            min_tests: min,
            require: req.iter().map(|s| s.to_string()).collect(),
        };
        assert!(
            report(two, &need(3, &[]))
                .failure
                .unwrap()
                .contains("fewer than min_tests = 3")
        );
        assert_eq!(report(two, &need(1, &["tests/test_p.py::a"])).failure, None);
        let f = report(two, &need(1, &["tests/test_p.py::s"]))
            .failure
            .unwrap();
        assert!(f.contains("required") && f.contains("test_p.py::s"), "{f}");
        let failing = r#"<testsuite><testcase classname="m" name="a"/><testcase classname="m" name="b"><failure/></testcase></testsuite>"#;
        let f = report(failing, &TestReport::default()).failure.unwrap();
        assert!(f.contains("1 failed or errored: m::b"), "{f}");
        let f = report("<testsuites/>", &TestReport::default())
            .failure
            .unwrap();
        assert!(f.contains("0 passed"), "{f}");
        let f = report("not xml", &TestReport::default()).failure.unwrap();
        assert!(f.contains("is not"), "{f}");
        let dir = tempfile::tempdir().unwrap();
        let f = judge_report(&dir.path().join("none.xml"), &TestReport::default());
        assert!(f.failure.unwrap().contains("was not written"));
    }
}
