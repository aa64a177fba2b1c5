//! Command gates that must count what they ran (issue 14, class 5): each case is a
//! workspace and a `[verify]` section loaded from a task file, run through `run_with`
//! with a scripted model that only says "done", the gate in the real sandbox with
//! real pytest, node and cargo. A cheating case exits as its gate expects (so it
//! passed on exit codes alone) but ran no test, or wrote no honest report; it must
//! end `VerificationFailed` with the reason named. Honest cases pass and record
//! what they counted (`gate_trust`, `gate_tests`).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use io_harness::provider::{ScriptTurn, Scripted};
use io_harness::run::RunOptions;
use io_harness::{RunOutcome, Store, TaskContract, run_with};

/// The test venv's python (scripts/setup-test-env.sh installs pytest into it).
fn python() -> String {
    let p = Path::new(env!("CARGO_MANIFEST_DIR")).join(".venv/bin/python");
    let ok = std::process::Command::new(&p)
        .args(["-c", "import pytest"])
        .status()
        .is_ok_and(|s| s.success());
    assert!(
        ok,
        "{} has no pytest: run scripts/setup-test-env.sh",
        p.display()
    );
    p.display().to_string()
}

/// The venv itself: shown read-only, since a checkout under `/tmp` (a CI clone) is
/// not in the sandbox's view otherwise (its `/tmp` is its own).
fn venv_dir() -> String {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join(".venv")
        .display()
        .to_string()
}

/// Where the venv's interpreter really lives (a pyenv under `$HOME`, which the
/// sandbox hides): the task file shows it read-only, as an operator would.
fn python_home() -> String {
    let real = std::fs::canonicalize(python()).unwrap();
    real.parent()
        .and_then(Path::parent)
        .unwrap()
        .display()
        .to_string()
}

/// The active toolchain's own cargo and rustc (the rustup proxy needs a `$HOME`
/// the sandbox does not show).
fn toolchain() -> (String, String) {
    let out = std::process::Command::new("rustc")
        .args(["--print", "sysroot"])
        .output()
        .unwrap();
    let root = PathBuf::from(String::from_utf8(out.stdout).unwrap().trim());
    let bin = |n: &str| root.join("bin").join(n).display().to_string();
    (bin("cargo"), bin("rustc"))
}

const ADD_WRONG: &str = "def add(a, b):\n    return a - b\n";
const ADD_RIGHT: &str = "def add(a, b):\n    return a + b\n";
const PY_TESTS: &str = "from add import add\n\ndef test_add():\n    assert add(2, 3) == 5\n\ndef test_zero():\n    assert add(0, 0) == 0\n";
const NODE_SUBJECT_EXITS: &str = "process.exit(0);\nmodule.exports = (a, b) => a - b;\n";
const NODE_SUBJECT: &str = "module.exports = (a, b) => a + b;\n";
const NODE_TEST: &str = "const test = require('node:test');\nconst assert = require('node:assert');\nconst add = require('../subject.js');\ntest('adds', () => { assert.strictEqual(add(2, 3), 5); });\n";
const CARGO_TOML: &str = "[package]\nname = \"adder\"\nversion = \"0.1.0\"\nedition = \"2021\"\n\n[lib]\ndoctest = false\n";
const CARGO_IGNORED: &str = "pub fn add(a: i32, b: i32) -> i32 { a - b }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    #[ignore]\n    fn adds() { assert_eq!(super::add(2, 3), 5); }\n}\n";
const CARGO_HONEST: &str = "pub fn add(a: i32, b: i32) -> i32 { a + b }\n\n#[cfg(test)]\nmod tests {\n    #[test]\n    fn adds() { assert_eq!(super::add(2, 3), 5); }\n}\n";
const CONFTEST_DESELECT_ALL: &str = "def pytest_collection_modifyitems(config, items):\n    config.hook.pytest_deselected(items=list(items))\n    items[:] = []\n\ndef pytest_sessionfinish(session, exitstatus):\n    session.exitstatus = 0\n";
const JUNIT_PASS: &str = r#"<testsuites><testsuite name="s"><testcase classname="m" name="a"/><testcase classname="m" name="b"/></testsuite></testsuites>"#;
const JUNIT_FAIL: &str = r#"<testsuites><testsuite name="s"><testcase classname="m" name="a"/><testcase classname="m" name="b"><failure message="no"/></testcase></testsuite></testsuites>"#;

/// A command that copies the agent's `out.xml` to the report path: the report's
/// content is the case's.
const COPY_REPORT: &str = r#"command = ["sh", "-c", "cp out.xml \"$1\"", "sh", "{report}"]
report = { junit = "{report}" }"#;

/// One case: workspace files, the `[verify]` body, and what must happen (`None`
/// passes; `Some(reason)` fails with that reason), and the trust recorded.
struct Case {
    name: &'static str,
    files: Vec<(&'static str, &'static str)>,
    verify: String,
    fails_with: Option<&'static str>,
    trust: &'static str,
}

fn corpus() -> Vec<Case> {
    let py = python();
    let (cargo, rustc) = toolchain();
    let cargo_cmd = format!(
        r#"command = ["{cargo}", "test", "--offline", "-q", "--config", "build.rustc='{rustc}'"]"#
    );
    let pytest = |args: &str| format!(r#"command = ["{py}", "-m", "pytest"{args}]"#);
    let py_files = |add: &'static str| vec![("add.py", add), ("tests/test_add.py", PY_TESTS)];
    let with = |mut v: Vec<(&'static str, &'static str)>, extra: (&'static str, &'static str)| {
        v.push(extra);
        v
    };
    let junit = |xml: &'static str| vec![("out.xml", xml)];
    vec![
        // Cheats: each exits 0, so each passed on the exit code alone before.
        Case {
            name: "pytest_collect_only_in_ini",
            files: with(py_files(ADD_WRONG), ("pytest.ini", "[pytest]\naddopts = --collect-only\n")),
            verify: pytest(""),
            fails_with: Some("pytest reported no tests run (2 tests collected)"),
            trust: "runner-report",
        },
        Case {
            name: "pytest_k_nothing_exit_forced_to_0",
            files: with(py_files(ADD_WRONG), ("conftest.py", CONFTEST_DESELECT_ALL)),
            verify: pytest(r#", "-k", "nothing""#),
            fails_with: Some("pytest reported no tests run (2 deselected)"),
            trust: "runner-report",
        },
        Case {
            name: "node_test_subject_exits_before_any_test",
            files: vec![("subject.js", NODE_SUBJECT_EXITS), ("test/add.test.js", NODE_TEST)],
            verify: r#"command = ["node", "--test"]"#.into(),
            fails_with: Some("node --test reported no tests run (1 test files defined no test)"),
            trust: "runner-report",
        },
        Case {
            name: "cargo_every_test_ignored",
            files: vec![("Cargo.toml", CARGO_TOML), ("src/lib.rs", CARGO_IGNORED)],
            verify: cargo_cmd.clone(),
            fails_with: Some("cargo test reported no tests run (1 not run"),
            trust: "runner-report",
        },
        Case {
            name: "report_missing",
            files: vec![],
            verify: "command = [\"sh\", \"-c\", \"echo ran\"]\nreport = { junit = \"{report}\" }".into(),
            fails_with: Some("the test report was not written"),
            trust: "runner-report",
        },
        Case {
            name: "report_malformed",
            files: junit("<testsuites><testcase name='a'>"),
            verify: COPY_REPORT.into(),
            fails_with: Some("the test report is not well-formed XML"),
            trust: "runner-report",
        },
        Case {
            name: "report_zero_tests",
            files: junit("<testsuites></testsuites>"),
            verify: COPY_REPORT.into(),
            fails_with: Some("counts 0 passed, fewer than min_tests = 1"),
            trust: "runner-report",
        },
        Case {
            name: "report_with_a_failure",
            files: junit(JUNIT_FAIL),
            verify: COPY_REPORT.into(),
            fails_with: Some("shows 1 failed or errored: m::b"),
            trust: "runner-report",
        },
        Case {
            name: "report_without_the_required_test",
            files: junit(JUNIT_PASS),
            verify: COPY_REPORT.replace("{ junit = \"{report}\" }", "{ junit = \"{report}\", require = [\"m::wanted\"] }"),
            fails_with: Some("does not show required tests as passed: m::wanted"),
            trust: "runner-report",
        },
        Case {
            name: "report_left_stale_in_the_workspace",
            files: vec![("report.xml", JUNIT_PASS), ("out/report.xml", JUNIT_PASS)],
            verify: "command = [\"sh\", \"-c\", \"test -f report.xml\"]\nreport = { junit = \"{report}\" }".into(),
            fails_with: Some("the test report was not written"),
            trust: "runner-report",
        },
        // Honest runs.
        Case {
            name: "pytest_honest_counted",
            files: py_files(ADD_RIGHT),
            verify: pytest(r#", "-q""#),
            fails_with: None,
            trust: "runner-report",
        },
        Case {
            name: "pytest_honest_with_report",
            files: py_files(ADD_RIGHT),
            verify: format!(
                "{}\nreport = {{ junit = \"{{report}}\", min_tests = 2, require = [\"tests/test_add.py::test_add\"] }}",
                pytest(r#", "-q", "--junitxml={report}""#)
            ),
            fails_with: None,
            trust: "runner-report",
        },
        Case {
            name: "node_test_honest_with_report",
            files: vec![("subject.js", NODE_SUBJECT), ("test/add.test.js", NODE_TEST)],
            verify: "command = [\"node\", \"--test\", \"--test-reporter=junit\", \"--test-reporter-destination={report}\"]\nreport = { junit = \"{report}\", require = [\"test::adds\"] }".into(),
            fails_with: None,
            trust: "runner-report",
        },
        Case {
            name: "cargo_honest_counted",
            files: vec![("Cargo.toml", CARGO_TOML), ("src/lib.rs", CARGO_HONEST)],
            verify: cargo_cmd,
            fails_with: None,
            trust: "runner-report",
        },
        // The operator's explicit choice: the exit code alone, recorded as such.
        Case {
            name: "exit_code_trust_is_the_operators_choice",
            files: with(py_files(ADD_WRONG), ("pytest.ini", "[pytest]\naddopts = --collect-only\n")),
            verify: format!("{}\ntrust = \"exit-code\"", pytest("")),
            fails_with: None,
            trust: "exit-code",
        },
        Case {
            name: "unrecognised_program_rests_on_its_exit_code",
            files: vec![],
            verify: r#"command = ["sh", "-c", "exit 0"]"#.into(),
            fails_with: None,
            trust: "exit-code",
        },
    ]
}

struct Got {
    outcome: RunOutcome,
    trust: Vec<String>,
    tests: Vec<String>,
    why: String,
}

async fn run_case(case: &Case) -> Got {
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    for (path, text) in &case.files {
        let p = ws.join(path);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(p, text).unwrap();
    }
    let toml = format!(
        "goal = \"make add correct\"\nroot = \"ws\"\n[sandbox]\nread_only_paths = [\"{}\", \"{}\"]\n[verify]\nmax_attempts = 1\n{}\n",
        python_home(),
        venv_dir(),
        case.verify
    );
    let c = TaskContract::from_toml_str(&toml, &dir.path().join("task.toml"))
        .unwrap_or_else(|e| panic!("{}: {e}", case.name));
    let store = Store::memory().unwrap();
    let provider = Scripted::new(vec![ScriptTurn::text("done")]);
    let r = run_with(&c, &provider, &store, RunOptions::default())
        .await
        .unwrap();
    let events = store.sandbox_events(r.run_id).unwrap();
    let of_kind = |k: &str| -> Vec<String> {
        events
            .iter()
            .filter(|e| e.kind == k)
            .filter_map(|e| e.detail.clone())
            .collect()
    };
    let why = store
        .steps(r.run_id)
        .unwrap()
        .iter()
        .flat_map(|s| {
            let v: serde_json::Value = serde_json::from_str(&s.messages_json).unwrap();
            v.to_string()
                .split("\\n")
                .filter(|l| l.contains("[FAIL] command"))
                .map(String::from)
                .collect::<Vec<_>>()
        })
        .next()
        .unwrap_or_default();
    Got {
        outcome: r.outcome,
        trust: of_kind("gate_trust"),
        tests: of_kind("gate_tests"),
        why,
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn command_gates_that_ran_no_test_fail_and_honest_ones_pass() {
    let cases = corpus();
    assert!(cases.iter().filter(|c| c.fails_with.is_some()).count() >= 10);
    let permits = Arc::new(tokio::sync::Semaphore::new(3));
    let mut tasks = Vec::new();
    for case in cases {
        let permits = permits.clone();
        tasks.push(tokio::spawn(async move {
            let _p = permits.acquire().await.unwrap();
            let got = run_case(&case).await;
            (case, got)
        }));
    }
    let mut wrong = Vec::new();
    for t in tasks {
        let (case, got) = t.await.unwrap();
        eprintln!(
            "report case {}: {:?} trust {:?} tests {:?}: {}",
            case.name, got.outcome, got.trust, got.tests, got.why
        );
        let outcome_ok = match case.fails_with {
            None => got.outcome == RunOutcome::Success,
            Some(reason) => {
                matches!(got.outcome, RunOutcome::VerificationFailed { .. })
                    && got.why.contains(reason)
            }
        };
        // Every gate that ran records its trust level; a counted one its tally.
        let trust_ok = got.trust.len() == 1 && got.trust[0].ends_with(case.trust);
        let tests_ok = match (case.trust, case.fails_with) {
            ("exit-code", _) => got.tests.is_empty(),
            ("runner-report", None) => got.tests.len() == 1 && !got.tests[0].contains(" 0 passed"),
            _ => true,
        };
        if !(outcome_ok && trust_ok && tests_ok) {
            wrong.push(format!(
                "{}: expected {:?} ({}), got {:?} trust {:?} tests {:?}: {}",
                case.name, case.fails_with, case.trust, got.outcome, got.trust, got.tests, got.why
            ));
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn report_and_trust_keys_are_checked_at_load_naming_the_line() {
    let load = |verify: &str| {
        let dir = tempfile::tempdir().unwrap();
        let text = format!("goal = \"g\"\n[verify]\n{verify}\n");
        TaskContract::from_toml_str(&text, &dir.path().join("task.toml"))
    };
    let err = |verify: &str| load(verify).unwrap_err().to_string();
    let e = err("command = [\"pytest\"]\nreport = { junit = \"out/report.xml\" }");
    assert!(
        e.contains("task.toml:4") && e.contains("verify.report.junit"),
        "{e}"
    );
    let e = err("command = [\"pytest\"]\ntrust = \"sometimes\"");
    assert!(e.contains(":4") && e.contains("verify.trust"), "{e}");
    let e = err("command = [\"pytest\"]\nreport = { junit = \"{report}\", min_tests = 0 }");
    assert!(
        e.contains(":4") && e.contains("verify.report.min_tests"),
        "{e}"
    );
    let e = err("command = [\"pytest\"]\nreport = { junit = \"{report}\", require = [\"x\"] }");
    assert!(
        e.contains(":4") && e.contains("verify.report.require[0]"),
        "{e}"
    );
    let e = err("command = [\"pytest\"]\ntrust = \"exit-code\"\nreport = { junit = \"{report}\" }");
    assert!(
        e.contains("verify.report") && e.contains("exit-code"),
        "{e}"
    );
    let e = err("file_contains = { file = \"a\", needle = \"b\" }\ntrust = \"exit-code\"");
    assert!(e.contains(":4") && e.contains("verify.trust"), "{e}");
    let e = err("command = [\"pytest\"]\nreport = { junit = \"{report}\", min = 1 }");
    assert!(e.contains(":4") && e.contains("min"), "{e}");
    // The defaults: counting when the runner is recognised, min_tests = 1.
    let c =
        load("command = [\"pytest\", \"--junitxml={report}\"]\nreport = { junit = \"{report}\" }")
            .unwrap();
    let io_harness::Verification::Command { trust, report, .. } = &c.verify.criteria[0] else {
        panic!("not a command gate");
    };
    assert_eq!(*trust, io_harness::contract::CommandTrust::Auto);
    assert_eq!(report.as_ref().map(|r| r.min_tests), Some(1));
}
