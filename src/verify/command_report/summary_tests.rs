//! The runner summaries as the runners print them (pytest 9, Node 20's TAP and spec
//! reporters, jest, libtest, `go test -v` and `-json`; go is not installed here, so
//! its lines come from a fixture).

use super::summary::{Count, SummaryScan};
use crate::verify::ecosystem::Runner;

fn scan(runner: Runner, out: &str) -> Option<Count> {
    let mut s = SummaryScan::new(runner);
    s.feed(0, out.as_bytes());
    s.finish()
}

fn rp(c: &Option<Count>) -> (u32, u32, u32) {
    c.as_ref()
        .map_or((99, 99, 99), |c| (c.run, c.passed, c.failed))
}

#[test]
fn pytest_final_lines() {
    let c = scan(
        Runner::Pytest,
        "..F\n=== FAILURES ===\n==== 2 passed, 1 failed, 1 skipped, 2 warnings in 0.12s ====\n",
    );
    assert_eq!(rp(&c), (3, 2, 1));
    assert_eq!(
        rp(&scan(Runner::Pytest, "..\n2 passed in 0.03s\n")),
        (2, 2, 0)
    );
    let collect = scan(
        Runner::Pytest,
        "<Module x>\n========================== 2 tests collected in 0.02s ==========================\n",
    );
    assert_eq!(rp(&collect), (0, 0, 0));
    assert_eq!(collect.unwrap().note.as_deref(), Some("2 tests collected"));
    let desel = scan(Runner::Pytest, "===== 2 deselected in 0.02s =====");
    assert_eq!(rp(&desel), (0, 0, 0));
    assert_eq!(
        rp(&scan(Runner::Pytest, "no tests ran in 0.01s\n")),
        (0, 0, 0)
    );
    assert_eq!(
        rp(&scan(Runner::Pytest, "== 1 error in 0.10s ==\n")),
        (1, 0, 1)
    );
    // With -qq there is no summary at all; a line that only looks like one is not it.
    assert_eq!(scan(Runner::Pytest, "..\n"), None);
    assert_eq!(scan(Runner::Pytest, "took 2 passes in 3 rounds\n"), None);
    // The last summary is the runner's final word.
    let twice = "1 passed in 0.01s\n==== 3 tests collected in 0.01s ====\n";
    assert_eq!(rp(&scan(Runner::Pytest, twice)), (0, 0, 0));
    // Colour does not hide it.
    let colour = "\u{1b}[32m==== \u{1b}[32m\u{1b}[1m4 passed\u{1b}[0m\u{1b}[32m in 0.01s\u{1b}[0m\u{1b}[32m ====\u{1b}[0m\r\n";
    assert_eq!(rp(&scan(Runner::Pytest, colour)), (4, 4, 0));
}

#[test]
fn jest_tests_line() {
    let out = "PASS ./a.test.js\nTest Suites: 1 failed, 1 passed, 2 total\nTests:       1 failed, 2 skipped, 3 passed, 6 total\nSnapshots:   0 total\n";
    assert_eq!(rp(&scan(Runner::Jest, out)), (4, 3, 1));
    assert_eq!(
        scan(Runner::Jest, "No tests found, exiting with code 0\n"),
        None
    );
    let skipped = scan(Runner::Jest, "Tests:       2 skipped, 2 total\n");
    assert_eq!(rp(&skipped), (0, 0, 0));
}

#[test]
fn node_test_totals_without_files_that_define_nothing() {
    let tap = "TAP version 13\n# Subtest: /w/a.test.js\nok 1 - /w/a.test.js\n  ---\n  ...\n# Subtest: one\nok 2 - one\n1..2\n# tests 2\n# suites 0\n# pass 2\n# fail 0\n# cancelled 0\n# skipped 0\n# todo 0\n# duration_ms 9.1\n";
    let c = scan(Runner::NodeTest, tap);
    assert_eq!(rp(&c), (1, 1, 0));
    let empty = "TAP version 13\n# Subtest: /w/a.test.js\nok 1 - /w/a.test.js\n1..1\n# tests 1\n# pass 1\n# fail 0\n# cancelled 0\n";
    let c = scan(Runner::NodeTest, empty);
    assert_eq!(rp(&c), (0, 0, 0));
    assert!(c.unwrap().note.unwrap().contains("defined no test"));
    let spec = "\u{2714} /w/a.test.js (5ms)\n\u{2714} adds (0.3ms)\n\u{2716} breaks (1ms)\n\u{2139} tests 3\n\u{2139} pass 2\n\u{2139} fail 1\n\u{2139} cancelled 0\n";
    assert_eq!(rp(&scan(Runner::NodeTest, spec)), (2, 1, 1));
    assert_eq!(scan(Runner::NodeTest, "hello\n"), None);
}

#[test]
fn cargo_results_add_up_over_every_test_binary() {
    let out = "\
running 2 tests
test tests::a ... ok
test tests::b ... ok

test result: ok. 2 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

running 0 tests

test result: ok. 0 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out; finished in 0.00s

running 1 test
test it_works ... FAILED

test result: FAILED. 0 passed; 1 failed; 3 ignored; 0 measured; 2 filtered out; finished in 0.01s
";
    let c = scan(Runner::CargoTest, out).unwrap();
    assert_eq!((c.run, c.passed, c.failed, c.skipped), (3, 2, 1, 5));
    assert_eq!(c.names, ["tests::a", "tests::b"]);
    let ignored = "test result: ok. 0 passed; 0 failed; 2 ignored; 0 measured; 0 filtered out; finished in 0.00s\n";
    let c = scan(Runner::CargoTest, ignored);
    assert_eq!(rp(&c), (0, 0, 0));
    assert_eq!(scan(Runner::CargoTest, "   Compiling x v0.1.0\n"), None);
}

/// A test binary that announced three tests and ended (`exit(0)` in the code under
/// test) after one: its summary is missing, so the announced tests count as failed.
#[test]
fn cargo_summary_cut_short_counts_the_missing_tests_as_failed() {
    let cut = "running 3 tests\ntest a ... ok\ntest b ... ";
    let c = scan(Runner::CargoTest, cut).unwrap();
    assert_eq!(c.failed, 3, "{c:?}");
    assert!(c.note.unwrap_or_default().contains("never reported"));
    // A summary that counts fewer than announced (a forged one) is short too.
    let short = "running 3 tests\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n";
    assert_eq!(scan(Runner::CargoTest, short).unwrap().failed, 2);
    // A binary cut short before the next one ran.
    let next = "running 2 tests\ntest a ... ok\nrunning 1 test\ntest result: ok. 1 passed; 0 failed; 0 ignored; 0 measured; 0 filtered out\n";
    assert_eq!(scan(Runner::CargoTest, next).unwrap().failed, 2);
    // Announced and counted: a pass.
    let whole = "running 2 tests\ntest result: ok. 1 passed; 0 failed; 1 ignored; 0 measured; 4 filtered out\n";
    assert_eq!(scan(Runner::CargoTest, whole).unwrap().failed, 0);
}

#[test]
fn a_summary_split_across_feeds_and_streams_is_read_whole() {
    let mut s = SummaryScan::new(Runner::CargoTest);
    s.feed(0, b"test result: ok. 1 pa");
    s.feed(1, b"   Compiling noise\n");
    s.feed(0, b"ssed; 0 failed; 0 ignored\n");
    assert_eq!(rp(&s.finish()), (1, 1, 0));
    // A summary far past any head-and-tail capture still counts, and a long line is
    // cut without losing the lines after it.
    let mut s = SummaryScan::new(Runner::CargoTest);
    let noise = "x".repeat(1 << 20);
    s.feed(0, noise.as_bytes());
    s.feed(0, b"\ntest result: ok. 5 passed; 0 failed;\n");
    for _ in 0..1000 {
        s.feed(1, b"warning: unused\n");
    }
    assert_eq!(rp(&s.finish()), (5, 5, 0));
}

/// `go test -json ./...` on a module with a passing test, a skipped one, a
/// subtest and a package without tests (the events go 1.22 writes).
const GO_JSON: &str = r#"{"Time":"2026-12-01T10:00:00Z","Action":"start","Package":"example.com/m"}
{"Time":"2026-12-01T10:00:00Z","Action":"run","Package":"example.com/m","Test":"TestAdd"}
{"Time":"2026-12-01T10:00:00Z","Action":"output","Package":"example.com/m","Test":"TestAdd","Output":"=== RUN   TestAdd\n"}
{"Time":"2026-12-01T10:00:00Z","Action":"run","Package":"example.com/m","Test":"TestAdd/neg"}
{"Time":"2026-12-01T10:00:00Z","Action":"output","Package":"example.com/m","Test":"TestAdd/neg","Output":"    --- PASS: TestAdd/neg (0.00s)\n"}
{"Time":"2026-12-01T10:00:00Z","Action":"pass","Package":"example.com/m","Test":"TestAdd/neg","Elapsed":0}
{"Time":"2026-12-01T10:00:00Z","Action":"output","Package":"example.com/m","Test":"TestAdd","Output":"--- PASS: TestAdd (0.00s)\n"}
{"Time":"2026-12-01T10:00:00Z","Action":"pass","Package":"example.com/m","Test":"TestAdd","Elapsed":0}
{"Time":"2026-12-01T10:00:00Z","Action":"run","Package":"example.com/m","Test":"TestLater"}
{"Time":"2026-12-01T10:00:00Z","Action":"skip","Package":"example.com/m","Test":"TestLater","Elapsed":0}
{"Time":"2026-12-01T10:00:00Z","Action":"output","Package":"example.com/m","Output":"PASS\n"}
{"Time":"2026-12-01T10:00:00Z","Action":"pass","Package":"example.com/m","Elapsed":0.004}
{"Time":"2026-12-01T10:00:00Z","Action":"start","Package":"example.com/m/util"}
{"Time":"2026-12-01T10:00:00Z","Action":"output","Package":"example.com/m/util","Output":"?   \texample.com/m/util\t[no test files]\n"}
{"Time":"2026-12-01T10:00:00Z","Action":"skip","Package":"example.com/m/util","Elapsed":0}
"#;

#[test]
fn go_json_events_count_top_level_tests() {
    let c = scan(Runner::GoTest, GO_JSON).unwrap();
    assert_eq!((c.run, c.passed, c.failed, c.skipped), (1, 1, 0, 1));
    assert_eq!(c.names, ["example.com/m::TestAdd"]);
    let failed = GO_JSON.replace(
        r#""Action":"pass","Package":"example.com/m","Elapsed""#,
        r#""Action":"fail","Package":"example.com/m","Elapsed""#,
    );
    assert_eq!(rp(&scan(Runner::GoTest, &failed)), (1, 1, 1));
    let none = "{\"Action\":\"output\",\"Package\":\"m\",\"Output\":\"ok  \\tm\\t0.001s [no tests to run]\\n\"}\n{\"Action\":\"pass\",\"Package\":\"m\"}\n";
    assert_eq!(scan(Runner::GoTest, none), None);
}

#[test]
fn go_verbose_lines_and_the_plain_form() {
    let v = "=== RUN   TestA\n--- PASS: TestA (0.00s)\n=== RUN   TestB\n    --- PASS: TestB/x (0.00s)\n--- FAIL: TestB (0.00s)\nFAIL\nFAIL\texample.com/m\t0.003s\n";
    assert_eq!(rp(&scan(Runner::GoTest, v)), (2, 1, 3));
    // Without -v, `ok` says the package passed but not that any test ran.
    assert_eq!(scan(Runner::GoTest, "ok  \texample.com/m\t0.002s\n"), None);
}
