//! `io-harness report` (issue 20): one self-contained HTML page per run, for every run
//! kind the project has, rendered in a real headless Chromium with the network off.

use std::path::{Path, PathBuf};
use std::process::{Command, Output};

use super::chromium;

/// Model text meant to break out of the page: a script, a closing frame, an attribute
/// breakout with an event handler, a style close.
const HOSTILE: &str = "<script>document.title='pwned'</script></untrusted>\"><img src=x onerror=\"document.title='pwned'\"></style><b id=\"injected\">bold</b>";

use super::cli_support::{bin, interrupt_at_first_tool};

struct Fixture {
    dir: tempfile::TempDir,
}

impl Fixture {
    fn new() -> Self {
        Self {
            dir: tempfile::tempdir().unwrap(),
        }
    }
    fn path(&self) -> &Path {
        self.dir.path()
    }
    fn env(&self, c: &mut Command) {
        c.env("XDG_CACHE_HOME", self.path().join("cache"))
            .env("XDG_DATA_HOME", self.path().join("data"))
            .env("XDG_CONFIG_HOME", self.path().join("config"))
            .env("IO_HARNESS_STORE", self.path().join("store.db"));
    }
    fn cmd(&self, args: &[&str]) -> Output {
        let mut c = bin();
        c.args(args);
        self.env(&mut c);
        c.output().unwrap()
    }
    fn write(&self, rel: &str, text: &str) -> PathBuf {
        let p = self.path().join(rel);
        std::fs::create_dir_all(p.parent().unwrap()).unwrap();
        std::fs::write(&p, text).unwrap();
        p
    }
    /// A task in `name/` with workspace `name/ws` holding `a.txt`, its script the
    /// given JSON lines, and `extra` TOML after the goal.
    fn task(&self, name: &str, script: &[&str], extra: &str) -> PathBuf {
        self.write(&format!("{name}/ws/a.txt"), "a\n");
        self.write(&format!("{name}/script.jsonl"), &(script.join("\n") + "\n"));
        self.write(
            &format!("{name}/task.toml"),
            &format!(
                "goal = \"{name} goal\"\nroot = \"ws\"\n{extra}\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n"
            ),
        )
    }
    /// Runs a task, expecting exit `code`; the run's id.
    fn run(&self, task: &Path, code: i32) -> i64 {
        let out = self.cmd(&["run", task.to_str().unwrap(), "--json"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(code),
            "{stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let last: serde_json::Value = serde_json::from_str(stdout.lines().last().unwrap()).unwrap();
        last["result"]["run_id"].as_i64().unwrap()
    }
    /// `report <id>`: the page's path and text.
    fn report(&self, id: i64) -> (PathBuf, String) {
        let page = self.path().join(format!("run-{id}.html"));
        let out = self.cmd(&["report", &id.to_string(), "-o", page.to_str().unwrap()]);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let html = std::fs::read_to_string(&page).unwrap();
        (page, html)
    }
}

/// Success: hostile model text, a denied read, a written file, a gate command.
fn success_run(f: &Fixture) -> i64 {
    let hostile = serde_json::to_string(HOSTILE).unwrap();
    let task = f.task(
        "ok",
        &[
            &format!(
                r#"{{"text": {hostile}, "tool_calls": [{{"name": "read_file", "input": {{"path": ".env"}}}}], "usage": {{"input_tokens": 1800, "output_tokens": 120}}, "cost_usd": 0.0072}}"#
            ),
            r#"{"tool_calls": [{"name": "write_file", "input": {"path": "a.txt", "content": "line one\nline two changed\n"}}], "usage": {"input_tokens": 2300, "output_tokens": 260}, "cost_usd": 0.0108}"#,
            r#"{"text": "done", "usage": {"input_tokens": 2650, "output_tokens": 30}, "cost_usd": 0.0084}"#,
        ],
        "[verify]\ncommand = [\"grep\", \"-q\", \"changed\", \"a.txt\"]\ntrust = \"exit-code\"",
    );
    f.write("ok/ws/.env", "TOKEN=x\n");
    f.run(&task, 0)
}

/// Every DOM fact of the success run, checked in what Chromium rendered.
#[test]
fn a_report_renders_offline_in_chromium_with_the_runs_facts_and_hostile_text_inert() {
    let f = Fixture::new();
    let id = success_run(&f);
    let (page, html) = f.report(id);
    assert!(html.contains("Content-Security-Policy"));
    assert!(
        !html.contains("<script>document.title"),
        "raw hostile markup in the page"
    );
    if chromium::skipped("report in chromium") {
        return;
    }
    let shot = Path::new(env!("CARGO_TARGET_TMPDIR")).join("report/report-screenshot.png");
    let r = chromium::render(&page, Some((&shot, 1000, 1100)));
    assert_eq!(
        r.page_requests,
        Vec::<String>::new(),
        "the page fetched something"
    );
    let dom = &r.dom;
    // Our script ran (its hash is in the policy); the hostile one did not.
    assert!(dom.contains("data-script=\"ran\""), "{dom}");
    assert!(
        dom.contains(&format!("<title>io-harness run {id}")),
        "{dom}"
    );
    assert_eq!(
        dom.matches("<script").count(),
        1,
        "only our own script element"
    );
    assert!(
        !dom.contains("<b id=\"injected\">"),
        "hostile markup became an element"
    );
    assert!(!dom.contains("<img"), "hostile markup became an element");
    for text in [
        "&lt;script&gt;document.title='pwned'&lt;/script&gt;&lt;/untrusted&gt;",
        "&lt;/style&gt;&lt;b id=\"injected\"&gt;bold&lt;/b&gt;",
    ] {
        assert!(
            dom.contains(text),
            "hostile text not shown as text: {text}\n{dom}"
        );
    }
    // The run's facts.
    for fact in [
        &format!("id=\"outcome-{id}\">success<"),
        "ok goal",
        "data-step=\"1\"",
        "data-step=\"2\"",
        "data-step=\"3\"",
        "<span class=\"da\">+line two changed</span>",
        "<span class=\"dd\">-a</span>",
        "<code>.env</code>",
        "linux-namespaces",
        "grep -q changed a.txt",
        "untrusted · model",
    ] {
        assert!(
            dom.contains(fact),
            "the rendered page lacks {fact:?}\n{dom}"
        );
    }
    // The denied read, with its rule, in the policy table.
    assert!(
        dom.contains(
            "<tr class=\"d-deny\"><td>1</td><td>deny</td><td>read</td><td><code class=\"ut\" title=\"untrusted: named by the agent\">.env</code>"
        ),
        "{dom}"
    );
    assert!(
        shot.metadata().unwrap().len() > 10_000,
        "a screenshot a person can look at"
    );
}

/// Verification failure, escalation, awaiting approval, cancelled and a tree of
/// sub-agents each get a page with their outcome, rendered by Chromium.
#[test]
fn every_run_kind_gets_a_page() {
    let f = Fixture::new();
    let failed = f.run(
        &f.task(
            "failed",
            &[r#"{"text": "done"}"#, r#"{"text": "done"}"#],
            "[verify]\nfile_contains = { file = \"a.txt\", needle = \"zzz\" }\nmax_attempts = 2",
        ),
        1,
    );
    let escalated = f.run(
        &f.task(
            "escalated",
            &[r#"{"tool_calls": [{"name": "list_dir", "input": {"path": "."}}]}"#],
            "[verify]\nfile_contains = { file = \"a.txt\", needle = \"a\" }",
        ),
        4,
    );
    let awaiting = f.run(
        &f.task(
            "awaiting",
            &[
                r#"{"tool_calls": [{"name": "run_command", "input": {"argv": ["sh", "-c", "echo hi > c.txt"]}}]}"#,
                r#"{"text": "done"}"#,
            ],
            "[verify]\nfile_contains = { file = \"c.txt\", needle = \"hi\" }\n[sandbox]\nrequire = \"portable-floor\"",
        ),
        5,
    );
    let tree = f.run(
        &f.task(
            "tree",
            &[
                r#"{"tool_calls": [{"name": "spawn_agent", "input": {"name": "writer", "goal": "write sub.txt", "root": ".", "verify": {"file_contains": {"file": "sub.txt", "needle": "sub"}}, "budget": {"max_steps": 3}}}]}"#,
                r#"{"text": "the writer did it"}"#,
                r#"{"agent": "writer", "tool_calls": [{"name": "write_file", "input": {"path": "sub.txt", "content": "sub\n"}}]}"#,
                r#"{"agent": "writer", "text": "wrote sub.txt"}"#,
            ],
            "[verify]\nfile_contains = { file = \"sub.txt\", needle = \"sub\" }",
        ),
        0,
    );
    let cancelled = cancelled_run(&f);
    let child = tree + 1;
    let mut pages = Vec::new();
    for (id, outcome, facts) in [
        (failed, "verification_failed", vec!["failed: ", "zzz"]),
        (
            escalated,
            "escalated",
            vec!["kind: request", "script exhausted"],
        ),
        (
            awaiting,
            "awaiting_approval",
            vec!["approval", "pending", "sh -c"],
        ),
        (cancelled, "cancelled", vec!["sleep 30", "not committed"]),
        (
            tree,
            "success",
            vec![&*format!("href=\"#run-{child}\""), "writer", "Sub-agents"],
        ),
    ] {
        let (page, html) = f.report(id);
        assert!(
            html.contains(&format!("id=\"outcome-{id}\">{outcome}<")),
            "run {id} is not shown {outcome}"
        );
        for fact in facts {
            assert!(html.contains(fact), "run {id} ({outcome}) lacks {fact:?}");
        }
        pages.push((id, outcome, page));
    }
    let (_, tree_html) = f.report(tree);
    // Adversary B10: the sub-agent's goal, written by the parent's model, is framed
    // as untrusted, and so is the agent's command in the sessions table.
    assert!(
        tree_html.contains("untrusted · the parent&#39;s model (a sub-agent&#39;s goal)")
            || tree_html.contains("untrusted · the parent's model (a sub-agent's goal)"),
        "the child's goal is not framed"
    );
    assert!(
        tree_html.contains(&format!("id=\"run-{child}\""))
            && tree_html.contains(&format!("id=\"outcome-{child}\">success<")),
        "the child's own section is on its parent's page"
    );
    if chromium::skipped("every run kind in chromium") {
        return;
    }
    for (id, outcome, page) in pages {
        let r = chromium::render(&page, None);
        assert!(r.page_requests.is_empty(), "{:?}", r.page_requests);
        assert!(
            r.dom.contains(&format!("id=\"outcome-{id}\">{outcome}<"))
                && r.dom.contains("data-script=\"ran\""),
            "{outcome}: {}",
            r.dom
        );
    }
}

/// A run stopped by Ctrl-C while its command sleeps.
fn cancelled_run(f: &Fixture) -> i64 {
    let task = f.task(
        "cancelled",
        &[r#"{"tool_calls": [{"name": "run_command", "input": {"argv": ["sleep", "30"]}}]}"#],
        "[verify]\nfile_contains = { file = \"a.txt\", needle = \"a\" }",
    );
    let mut c = bin();
    c.args(["run", task.to_str().unwrap(), "--json"]);
    f.env(&mut c);
    let (status, rest) = interrupt_at_first_tool(c.stderr(std::process::Stdio::null()));
    assert_eq!(status.code(), Some(130), "{rest}");
    let last: serde_json::Value = serde_json::from_str(rest.lines().last().unwrap()).unwrap();
    last["result"]["run_id"].as_i64().unwrap()
}

/// Page weight: a 60-step run with a 4 KiB file read at every step stays under 1 MB.
#[test]
fn a_sixty_step_page_stays_under_a_megabyte() {
    let f = Fixture::new();
    let read = r#"{"text": "reading the file again, as models do", "tool_calls": [{"name": "read_file", "input": {"path": "big.txt"}}]}"#;
    let mut script: Vec<&str> = vec![read; 59];
    script.push(r#"{"text": "done"}"#);
    let task = f.task(
        "sixty",
        &script,
        "[verify]\nfile_contains = { file = \"a.txt\", needle = \"a\" }\n[budget]\nmax_steps = 70\n[stall]\nwindow = 100",
    );
    f.write("sixty/ws/big.txt", &"0123456789abcdef\n".repeat(256));
    let id = f.run(&task, 0);
    let (_, html) = f.report(id);
    assert!(html.contains("data-step=\"60\""));
    assert!(html.len() < 1_000_000, "{} bytes", html.len());
}

#[test]
fn an_unknown_run_is_a_usage_error() {
    let f = Fixture::new();
    success_run(&f);
    let out = f.cmd(&["report", "99"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no run with id 99"));
}

/// Adversary B6 of issue 20: 100 replies of 64 calls with 2 KB arguments made a
/// 29.6 MB page. A step shows 16 calls in full and names the rest; past the page's
/// 2 MiB of step details, steps show their summary line only.
#[test]
fn a_page_of_many_large_calls_stays_bounded() {
    let f = Fixture::new();
    let arg = "y".repeat(2048);
    let call = format!(r#"{{"name": "list_dir", "input": {{"path": ".", "pad": "{arg}"}}}}"#);
    let calls = vec![call; 17].join(", ");
    let reply = format!(r#"{{"tool_calls": [{calls}]}}"#);
    let mut script: Vec<&str> = vec![&reply; 64];
    script.push(r#"{"text": "done"}"#);
    let task = f.task(
        "weight",
        &script,
        "[verify]\nfile_contains = { file = \"a.txt\", needle = \"a\" }\n[budget]\nmax_steps = 70\n[stall]\nwindow = 100",
    );
    let id = f.run(&task, 0);
    let (_, html) = f.report(id);
    assert!(
        html.contains("1 more tool call(s) in this step"),
        "calls past 16 are named"
    );
    assert!(
        html.contains("data-step=\"64\""),
        "every step keeps its line"
    );
    assert!(
        html.contains("id=\"steps-cut\""),
        "the budget was reached and said so"
    );
    assert!(html.len() < 3 * 1024 * 1024, "{} bytes", html.len());
}
