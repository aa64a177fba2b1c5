//! The count of tests a recognised runner printed, read line by line from the whole
//! of its output as it streams (so nothing depends on what a bounded capture kept):
//! pytest's final summary line, jest's `Tests:` line, `node --test`'s `# pass N`
//! totals, `go test`'s per-test results (`-json` events or `--- PASS` lines), and
//! cargo test's libtest `test result:` lines summed over every test binary.
//!
//! The runner shares a process with the code under test, so these counts are what
//! the runner printed, not something the harness observed: the trust level is
//! `runner-report`.

use crate::verify::ecosystem::Runner;

/// Longest line kept for parsing; summary lines are far shorter, the rest is cut.
const MAX_LINE: usize = 4096;
/// Test names kept for the record.
const MAX_NAMES: usize = 500;

/// What the runner's output said, once it was all read.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub(crate) struct Count {
    /// Tests that ran (passed or failed; skipped and deselected tests did not).
    pub run: u32,
    /// Tests that passed.
    pub passed: u32,
    /// Tests (or, for go, packages) that failed or errored.
    pub failed: u32,
    /// Tests the runner listed but did not run (ignored, filtered out, skipped).
    pub skipped: u32,
    /// What else the summary said that explains a zero (`3 tests collected`,
    /// `2 skipped`), for the reason shown.
    pub note: Option<String>,
    /// Test names, when the runner prints them.
    pub names: Vec<String>,
}

/// A streaming reader of one runner's output: `feed` each stream's bytes as they
/// come (stdout is stream 0, stderr 1), then `finish`.
pub(crate) struct SummaryScan {
    runner: Runner,
    partial: [Vec<u8>; 2],
    /// The last summary seen, for runners whose last one is final.
    last: Option<Count>,
    /// Running totals, for runners whose results add up (cargo, go).
    sum: Count,
    seen: bool,
    /// `node --test` reports a test file that defines no test as one passing test
    /// named by the file's path: those are taken out of its pass count.
    node_files: u32,
    /// cargo test: the tests the current test binary announced (`running N tests`)
    /// and not yet summed up by its `test result:` line.
    cargo_open: Option<u32>,
    /// cargo test: tests announced by a binary whose summary is missing or counts
    /// fewer (the process ended early, `exit(0)` included).
    cargo_cut: u32,
}

impl SummaryScan {
    pub(crate) fn new(runner: Runner) -> Self {
        Self {
            runner,
            partial: [Vec::new(), Vec::new()],
            last: None,
            sum: Count::default(),
            seen: false,
            node_files: 0,
            cargo_open: None,
            cargo_cut: 0,
        }
    }

    /// Takes the next bytes of `stream` (0 stdout, 1 stderr).
    pub(crate) fn feed(&mut self, stream: usize, mut bytes: &[u8]) {
        let stream = stream.min(1);
        while let Some(nl) = bytes.iter().position(|&b| b == b'\n') {
            self.append(stream, &bytes[..nl]);
            let line = std::mem::take(&mut self.partial[stream]);
            self.line(&line);
            bytes = &bytes[nl + 1..];
        }
        self.append(stream, bytes);
    }

    fn append(&mut self, stream: usize, bytes: &[u8]) {
        let room = MAX_LINE.saturating_sub(self.partial[stream].len());
        self.partial[stream].extend_from_slice(&bytes[..bytes.len().min(room)]);
    }

    /// The count, or `None` when the output held no summary at all.
    pub(crate) fn finish(mut self) -> Option<Count> {
        for s in 0..2 {
            let line = std::mem::take(&mut self.partial[s]);
            if !line.is_empty() {
                self.line(&line);
            }
        }
        if let Some(n) = self.cargo_open.take() {
            self.cargo_cut += n.max(1);
        }
        if self.cargo_cut > 0 {
            self.sum.failed += self.cargo_cut;
            self.sum.note = Some(format!(
                "{} announced test(s) never reported: a test binary ended before libtest's \
                 summary counted every test it listed",
                self.cargo_cut
            ));
        }
        match self.runner {
            Runner::CargoTest => (self.seen || self.cargo_cut > 0).then_some(self.sum),
            Runner::GoTest => self.seen.then_some(self.sum),
            Runner::NodeTest => self.last.map(|mut c| {
                c.passed = c.passed.saturating_sub(self.node_files);
                c.run = c.passed + c.failed;
                if self.node_files > 0 {
                    c.note = Some(format!("{} test files defined no test", self.node_files));
                }
                c
            }),
            Runner::Pytest | Runner::Jest => self.last,
        }
    }

    fn line(&mut self, raw: &[u8]) {
        let text = strip_ansi(&String::from_utf8_lossy(raw));
        let line = text.trim_end_matches('\r');
        match self.runner {
            Runner::Pytest => {
                if let Some(c) = pytest_line(line) {
                    self.last = Some(c);
                }
            }
            Runner::Jest => {
                if let Some(c) = jest_line(line) {
                    self.last = Some(c);
                }
            }
            Runner::NodeTest => {
                self.node_files += u32::from(node_file_entry(line));
                node_line(line, &mut self.last);
            }
            Runner::CargoTest => {
                // Every `running N tests` needs a `test result:` line counting N.
                if let Some(n) = running_line(line)
                    && let Some(open) = self.cargo_open.replace(n)
                {
                    self.cargo_cut += open.max(1);
                }
                if cargo_line(line, &mut self.sum) {
                    self.seen = true;
                    if let Some(n) = self.cargo_open.take() {
                        self.cargo_cut += n.saturating_sub(result_counted(line));
                    }
                }
            }
            Runner::GoTest => self.seen |= go_line(line, &mut self.sum),
        }
    }
}

/// Removes terminal colour and cursor sequences (`ESC [ … letter`).
fn strip_ansi(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut chars = s.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\u{1b}' {
            if chars.peek() == Some(&'[') {
                chars.next();
                for d in chars.by_ref() {
                    if d.is_ascii_alphabetic() {
                        break;
                    }
                }
            }
            continue;
        }
        out.push(c);
    }
    out
}

/// `N word` pairs separated by `sep` (`3 passed, 1 failed`), or `None` when a part
/// is not one.
fn counted_parts<'a>(s: &'a str, sep: &str) -> Option<Vec<(u32, &'a str)>> {
    s.split(sep)
        .map(|part| {
            let (n, word) = part.trim().split_once(' ')?;
            Some((n.parse().ok()?, word.trim()))
        })
        .collect()
}

/// pytest's final line: `==== 3 passed, 1 skipped in 0.12s ====` (or without the
/// rules under `-q`), `no tests ran in 0.01s`, `3 tests collected in 0.01s`.
fn pytest_line(line: &str) -> Option<Count> {
    let body = line.trim().trim_matches('=').trim();
    let (counts, time) = body.rsplit_once(" in ")?;
    let secs = time.split_whitespace().next()?.strip_suffix('s')?;
    secs.parse::<f64>().ok()?;
    if counts == "no tests ran" {
        return Some(Count {
            note: Some("no tests ran".into()),
            ..Count::default()
        });
    }
    let mut c = Count::default();
    let mut notes = Vec::new();
    for (n, word) in counted_parts(counts, ", ")? {
        match word {
            "passed" | "xpassed" => {
                c.passed += n;
                c.run += n;
            }
            "failed" | "error" | "errors" => {
                c.failed += n;
                c.run += n;
            }
            "xfailed" => c.run += n,
            "skipped" | "deselected" | "test collected" | "tests collected" => {
                notes.push(format!("{n} {word}"));
            }
            "warning" | "warnings" | "rerun" | "reruns" => {}
            _ => return None,
        }
    }
    c.note = (!notes.is_empty()).then(|| notes.join(", "));
    Some(c)
}

/// jest's `Tests:       1 failed, 2 passed, 3 total`.
fn jest_line(line: &str) -> Option<Count> {
    let rest = line.trim_start().strip_prefix("Tests:")?;
    let mut c = Count::default();
    let mut notes = Vec::new();
    for (n, word) in counted_parts(rest.trim(), ", ")? {
        match word {
            "passed" => {
                c.passed += n;
                c.run += n;
            }
            "failed" => {
                c.failed += n;
                c.run += n;
            }
            "total" => {}
            _ => notes.push(format!("{n} {word}")),
        }
    }
    c.note = (!notes.is_empty()).then(|| notes.join(", "));
    Some(c)
}

/// `node --test`'s totals, `# pass 3` (TAP reporter) or `ℹ pass 3` (spec
/// reporter); each later total replaces the earlier one.
fn node_line(line: &str, last: &mut Option<Count>) {
    let Some(rest) = line
        .strip_prefix("# ")
        .or_else(|| line.strip_prefix("\u{2139} "))
    else {
        return;
    };
    let Some((key, n)) = rest.trim().split_once(' ') else {
        return;
    };
    let Ok(n) = n.trim().parse::<u32>() else {
        return;
    };
    match key {
        "pass" | "fail" | "cancelled" | "skipped" | "todo" => {}
        _ => return,
    }
    let c = last.get_or_insert_with(Count::default);
    match key {
        "pass" => c.passed = n,
        "fail" | "cancelled" => {
            c.failed = if key == "fail" { n } else { c.failed + n };
        }
        "skipped" | "todo" => c.skipped = n,
        _ => {}
    }
    c.run = c.passed + c.failed;
}

/// A top-level passing entry named by an absolute path: how `node --test` reports a
/// file with no tests in it (`ok 1 - /w/a.test.js` in TAP, `✔ /w/a.test.js (5ms)`
/// from the spec reporter).
fn node_file_entry(line: &str) -> bool {
    let name = if let Some(rest) = line.strip_prefix("ok ") {
        rest.split_once(" - ").map(|(_, n)| n)
    } else {
        line.strip_prefix("\u{2714} ")
    };
    name.is_some_and(|n| n.starts_with('/'))
}

/// libtest's `test result: ok. 3 passed; 0 failed; 1 ignored; 0 measured; 2 filtered
/// out; finished in 0.00s`, summed; `test NAME ... ok` lines give the names.
/// The tests a `test result:` line accounts for: passed, failed and ignored (what
/// its `running N tests` announced; filtered-out tests were never announced).
fn result_counted(line: &str) -> u32 {
    let counts = line.split_once(". ").map_or("", |(_, c)| c);
    counts
        .split("; ")
        .filter_map(|p| p.trim().split_once(' '))
        .filter(|(_, w)| matches!(*w, "passed" | "failed" | "ignored"))
        .filter_map(|(n, _)| n.parse::<u32>().ok())
        .sum()
}

/// libtest's `running N tests` (`running 1 test`).
fn running_line(line: &str) -> Option<u32> {
    let rest = line.trim().strip_prefix("running ")?;
    let (n, word) = rest.split_once(' ')?;
    matches!(word, "tests" | "test").then(|| n.parse().ok())?
}

fn cargo_line(line: &str, sum: &mut Count) -> bool {
    if let Some(rest) = line.strip_prefix("test ")
        && let Some(name) = rest.strip_suffix(" ... ok")
        && !name.starts_with("result:")
        && sum.names.len() < MAX_NAMES
    {
        sum.names.push(name.to_string());
        return false;
    }
    let Some(rest) = line.trim().strip_prefix("test result: ") else {
        return false;
    };
    let Some((_, counts)) = rest.split_once(". ") else {
        return false;
    };
    for part in counts.split("; ") {
        let Some((n, word)) = part.trim().split_once(' ') else {
            continue;
        };
        let Ok(n) = n.parse::<u32>() else { continue };
        match word {
            "passed" => {
                sum.passed += n;
                sum.run += n;
            }
            "failed" => {
                sum.failed += n;
                sum.run += n;
            }
            "ignored" | "filtered out" => sum.skipped += n,
            _ => {}
        }
    }
    true
}

/// One `go test -json` event.
#[derive(serde::Deserialize)]
struct GoEvent {
    #[serde(rename = "Action")]
    action: String,
    #[serde(rename = "Test")]
    test: Option<String>,
    #[serde(rename = "Package")]
    package: Option<String>,
}

/// `go test`: top-level test results (subtests roll up into their parent), from
/// `-json` events or from `--- PASS: Name` lines (`-v`); a failed package counts
/// as a failure.
fn go_line(line: &str, sum: &mut Count) -> bool {
    let (outcome, name) = if line.starts_with('{') {
        let Ok(ev) = serde_json::from_str::<GoEvent>(line) else {
            return false;
        };
        match (ev.action.as_str(), ev.test) {
            ("pass" | "fail" | "skip", Some(t)) if !t.contains('/') => {
                let pkg = ev.package.unwrap_or_default();
                (ev.action, format!("{pkg}::{t}"))
            }
            ("fail", None) => {
                sum.failed += 1;
                return true;
            }
            _ => return false,
        }
    } else if let Some(rest) = line.strip_prefix("--- ") {
        let Some((word, name)) = rest.split_once(": ") else {
            return false;
        };
        let name = name.split(" (").next().unwrap_or(name).trim();
        (word.to_ascii_lowercase(), name.to_string())
    } else if line == "FAIL" || line.starts_with("FAIL\t") {
        sum.failed += 1;
        return true;
    } else {
        return false;
    };
    match outcome.as_str() {
        "pass" => {
            sum.passed += 1;
            sum.run += 1;
            if sum.names.len() < MAX_NAMES {
                sum.names.push(name);
            }
        }
        "fail" => {
            sum.failed += 1;
            sum.run += 1;
        }
        "skip" => sum.skipped += 1,
        _ => return false,
    }
    true
}
