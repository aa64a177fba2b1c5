//! Sub-agents (C12): a parent spawns contained children with `spawn_agent`; budgets are
//! carved, policies only narrow, depth is bounded, usage rolls up, and a tree killed
//! mid-child resumes as a tree.

use io_harness::policy::{Act, Rule};
use io_harness::provider::{ScriptTurn, Scripted, Usage};
use io_harness::{RunOutcome, Store, TaskContract, Verification, run};
use serde_json::{Value, json};

fn usage(mut t: ScriptTurn, tokens: u64, cost: Option<f64>) -> ScriptTurn {
    t.usage = Some(Usage {
        input_tokens: Some(tokens),
        output_tokens: Some(0),
        ..Default::default()
    });
    t.cost_usd = cost;
    t
}

fn spawn(args: Value) -> ScriptTurn {
    ScriptTurn::tool("spawn_agent", args)
}

fn write(path: &str, content: &str) -> ScriptTurn {
    ScriptTurn::tool("write_file", json!({"path": path, "content": content}))
}

fn read(path: &str) -> ScriptTurn {
    ScriptTurn::tool("read_file", json!({"path": path}))
}

fn workspace() -> tempfile::TempDir {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("sub")).unwrap();
    std::fs::write(dir.path().join("sub/seed.txt"), "seed\n").unwrap();
    dir
}

/// The output of a run's tool call `name` at `step`.
fn call(store: &Store, run_id: i64, step: u32, name: &str) -> (String, bool) {
    let steps = store.steps(run_id).unwrap();
    let s = steps.iter().find(|s| s.step == step).expect("step");
    let c = s.tool_calls.iter().find(|c| c.name == name).expect("call");
    (c.output.clone(), c.is_error)
}

#[tokio::test]
async fn a_child_works_in_its_sub_root_and_its_usage_rolls_up_into_the_parent() {
    let dir = workspace();
    let contract = TaskContract::workspace(
        "get sub/a.txt written",
        dir.path(),
        Verification::file_contains("sub/a.txt", "hi"),
    );
    let provider = Scripted::new(vec![
        usage(
            spawn(json!({
                "name": "writer",
                "goal": "write a.txt saying hi",
                "root": "sub",
                "verify": {"file_contains": {"file": "a.txt", "needle": "hi"}},
                "budget": {"max_steps": 3}
            })),
            100,
            Some(0.01),
        ),
        usage(ScriptTurn::text("the writer did it"), 20, Some(0.002)),
    ])
    .with_agent(
        "writer",
        vec![
            usage(write("a.txt", "hi\n"), 50, Some(0.005)),
            usage(ScriptTurn::text("wrote a.txt"), 10, Some(0.001)),
        ],
    );
    let store = Store::memory().unwrap();
    let r = run(&contract, &provider, &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success, "{r:?}");
    assert_eq!((r.steps, r.agent_steps), (2, 2));
    assert_eq!(r.input_tokens, 100 + 20 + 50 + 10, "tokens roll up");
    assert!(
        (r.cost_usd.unwrap() - 0.018).abs() < 1e-9,
        "{:?}",
        r.cost_usd
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("sub/a.txt")).unwrap(),
        "hi\n"
    );

    let children = store.children(r.run_id).unwrap();
    assert_eq!(children.len(), 1);
    let child = &children[0];
    assert_eq!(child.run.parent_run_id, Some(r.run_id));
    assert_eq!(
        (child.link.depth, child.link.step, child.link.name.as_str()),
        (1, 1, "writer")
    );
    assert_eq!(child.run.outcome.as_deref(), Some("success"));
    assert_eq!(child.run.steps, 2);
    // The child's own record is its own: its root, its usage, its diff.
    assert!(child.run.root.ends_with("sub"), "{}", child.run.root);
    assert_eq!(child.run.input_tokens, 60);
    assert!(child.run.diff.as_deref().unwrap().contains("+hi"));
    // Decided in the child's frame.
    let pe = store.policy_events(child.run.id).unwrap();
    assert!(
        pe.iter()
            .any(|p| p.act == "write" && p.target == "a.txt" && p.decision == "allow"),
        "{pe:?}"
    );
    // The parent's trace names the child and its outcome.
    let (out, is_error) = call(&store, r.run_id, 1, "spawn_agent");
    assert!(!is_error, "{out}");
    assert!(
        out.contains(&format!("run {}", child.run.id)) && out.contains("success"),
        "{out}"
    );
    assert!(
        out.contains("a.txt") && out.contains("wrote a.txt"),
        "{out}"
    );
    // Totals in the store are each run's own; the parent's result rolls them up.
    assert_eq!(store.run(r.run_id).unwrap().unwrap().input_tokens, 120);
    // The parent was offered spawn_agent, its child (at the default max_depth 1) not.
    let body = |id: i64| {
        let s = &store.steps(id).unwrap()[0];
        String::from_utf8(
            store
                .blob(s.request_hash.as_deref().unwrap())
                .unwrap()
                .unwrap(),
        )
        .unwrap()
    };
    assert!(body(r.run_id).contains("spawn_agent"));
    assert!(!body(child.run.id).contains("spawn_agent"));
}

#[tokio::test]
async fn a_greedy_child_cannot_exceed_its_slice_and_the_parent_sees_the_remainder() {
    let dir = workspace();
    let contract = TaskContract::workspace(
        "delegate",
        dir.path(),
        Verification::file_contains("sub/seed.txt", "seed"),
    )
    .max_steps(10)
    .max_tokens(1000);
    let greedy: Vec<ScriptTurn> = (0..20).map(|_| usage(read("seed.txt"), 10, None)).collect();
    let hungry: Vec<ScriptTurn> = (0..20)
        .map(|_| usage(read("seed.txt"), 200, None))
        .collect();
    let provider = Scripted::new(vec![
        usage(
            spawn(json!({
                "name": "greedy", "goal": "read forever", "root": "sub",
                "verify": {"file_contains": {"file": "seed.txt", "needle": "never"}},
                "budget": {"max_steps": 2}
            })),
            100,
            None,
        ),
        usage(
            spawn(json!({
                "name": "hungry", "goal": "read forever", "root": "sub",
                "verify": {"file_contains": {"file": "seed.txt", "needle": "never"}},
                "budget": {"max_tokens": 300}
            })),
            100,
            None,
        ),
        usage(
            spawn(json!({
                "name": "last", "goal": "check the seed", "root": "sub",
                "verify": {"file_contains": {"file": "seed.txt", "needle": "seed"}},
                "budget": {"max_steps": 100, "max_tokens": 100000}
            })),
            100,
            None,
        ),
        // Reported, as every turn here: an unreported turn would count the harness's
        // estimate of its request (thousands of tokens) against the 1000.
        usage(ScriptTurn::text("done"), 10, None),
    ])
    .with_agent("greedy", greedy)
    .with_agent("hungry", hungry)
    .with_agent(
        "last",
        vec![usage(ScriptTurn::text("the seed is there"), 10, None)],
    );
    let store = Store::memory().unwrap();
    let r = run(&contract, &provider, &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success, "{r:?}");
    let children = store.children(r.run_id).unwrap();
    let names: Vec<&str> = children.iter().map(|c| c.link.name.as_str()).collect();
    assert_eq!(names, ["greedy", "hungry", "last"]);
    let budget = |i: usize| {
        let c: TaskContract =
            serde_json::from_str(children[i].run.contract_json.as_deref().unwrap()).unwrap();
        c.budget
    };

    // The step slice is exact: the greedy child ends on its own cap after 2 steps.
    assert_eq!(children[0].run.outcome.as_deref(), Some("step_cap_reached"));
    assert_eq!(children[0].run.steps, 2);
    assert_eq!(budget(0).max_steps, 2);
    let (out, is_error) = call(&store, r.run_id, 1, "spawn_agent");
    assert!(is_error && out.contains("step_cap_reached"), "{out}");

    // Tokens: the hungry child's slice is what it asked for, and it ends on it.
    assert_eq!(budget(1).max_tokens, Some(300));
    assert_eq!(
        children[1].run.outcome.as_deref(),
        Some("token_budget_exceeded")
    );
    assert_eq!(
        children[1].run.input_tokens, 400,
        "one step past its slice, then stopped"
    );

    // The last child asked for more than is left and got exactly the remainder:
    // 1000 tokens less the parent's three replies (300) and the first two
    // children's 20 + 400; 10 steps less three own steps (the current one included)
    // and the children's 2 + 2.
    assert_eq!(budget(2).max_tokens, Some(1000 - 300 - 20 - 400));
    assert_eq!(budget(2).max_steps, 10 - 3 - 4);
    assert_eq!(children[2].run.outcome.as_deref(), Some("success"));

    assert_eq!((r.steps, r.agent_steps), (4, 5));
    // And the parent's last reply and the last child's, 10 each.
    assert_eq!(r.input_tokens, 300 + 20 + 400 + 10 + 10);
}

#[tokio::test]
async fn a_spawn_with_nothing_left_is_refused() {
    let dir = workspace();
    let contract = TaskContract::workspace(
        "delegate",
        dir.path(),
        Verification::file_contains("sub/seed.txt", "seed"),
    )
    .max_steps(1);
    let provider = Scripted::new(vec![spawn(json!({
        "name": "x", "goal": "g", "root": "sub",
        "verify": {"file_contains": {"file": "seed.txt", "needle": "seed"}}
    }))]);
    let store = Store::memory().unwrap();
    let r = run(&contract, &provider, &store).await.unwrap();
    let (out, is_error) = call(&store, r.run_id, 1, "spawn_agent");
    assert!(is_error && out.contains("no steps left"), "{out}");
    assert!(store.children(r.run_id).unwrap().is_empty());
}

#[tokio::test]
async fn a_child_trying_to_widen_the_policy_is_refused_and_inherits_the_parents_denies() {
    let dir = workspace();
    let contract = TaskContract::workspace(
        "delegate",
        dir.path(),
        Verification::file_contains("sub/ok.txt", "ok"),
    )
    .policy_rule(Rule::deny(Act::Write, "sub/locked.txt"))
    .policy_rule(Rule::deny(Act::Exec, "curl"));
    let args = |extra: Value| {
        let mut a = json!({
            "name": "w", "goal": "write files", "root": "sub",
            "verify": {"file_contains": {"file": "ok.txt", "needle": "ok"}}
        });
        for (k, v) in extra.as_object().unwrap() {
            a[k] = v.clone();
        }
        a
    };
    let provider = Scripted::new(vec![
        spawn(args(
            json!({"rules": [{"act": "write", "target": "**", "decision": "allow"}]}),
        )),
        spawn(args(
            json!({"verify": {"command": ["curl", "http://example.com"]}}),
        )),
        spawn(args(json!({"root": "../"}))),
        spawn(args(
            json!({"rules": [{"act": "write", "target": "*.md", "decision": "deny"}]}),
        )),
        ScriptTurn::text("done"),
    ])
    .with_agent(
        "w",
        vec![
            write("locked.txt", "mine now\n"),
            write("notes.md", "x\n"),
            write("ok.txt", "ok\n"),
            ScriptTurn::text("wrote ok.txt"),
        ],
    );
    let store = Store::memory().unwrap();
    let r = run(&contract, &provider, &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success, "{r:?}");

    let (out, is_error) = call(&store, r.run_id, 1, "spawn_agent");
    assert!(is_error && out.contains("only be narrower"), "{out}");
    let (out, is_error) = call(&store, r.run_id, 2, "spawn_agent");
    assert!(is_error && out.contains("curl"), "{out}");
    let (out, is_error) = call(&store, r.run_id, 3, "spawn_agent");
    assert!(is_error && out.contains("inside your workspace"), "{out}");
    let children = store.children(r.run_id).unwrap();
    assert_eq!(children.len(), 1, "refused spawns start nothing");
    assert_eq!(children[0].link.step, 4);

    let child = children[0].run.id;
    let (out, is_error) = call(&store, child, 1, "write_file");
    assert!(is_error, "the parent's deny holds in the child: {out}");
    let (out, is_error) = call(&store, child, 2, "write_file");
    assert!(is_error, "its own narrowing rule holds: {out}");
    assert!(!dir.path().join("sub/locked.txt").exists());
    assert!(!dir.path().join("sub/notes.md").exists());
    let pe = store.policy_events(child).unwrap();
    assert!(
        pe.iter()
            .any(|p| p.target == "locked.txt" && p.decision == "deny" && p.layer == "task"),
        "{pe:?}"
    );
}

#[tokio::test]
async fn depth_is_bounded_by_the_contract() {
    let dir = workspace();
    std::fs::create_dir_all(dir.path().join("sub/deeper")).unwrap();
    let child_spawns = spawn(json!({
        "name": "grandchild", "goal": "write g.txt", "root": "deeper",
        "verify": {"file_contains": {"file": "g.txt", "needle": "g"}}
    }));
    let script = |depth_ok: bool| {
        Scripted::new(vec![
            spawn(json!({
                "name": "child", "goal": "delegate further", "root": "sub",
                "verify": {"file_contains": {"file": "seed.txt", "needle": "seed"}}
            })),
            ScriptTurn::text("done"),
        ])
        .with_agent(
            "child",
            vec![child_spawns.clone(), ScriptTurn::text("tried")],
        )
        .with_agent(
            "grandchild",
            if depth_ok {
                vec![write("g.txt", "g\n"), ScriptTurn::text("ok")]
            } else {
                vec![]
            },
        )
    };
    let contract = TaskContract::workspace(
        "delegate",
        dir.path(),
        Verification::file_contains("sub/seed.txt", "seed"),
    );

    // Default max_depth 1: the child may not spawn.
    let store = Store::memory().unwrap();
    let r = run(&contract, &script(false), &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success, "{r:?}");
    let child = store.children(r.run_id).unwrap()[0].run.id;
    let (out, is_error) = call(&store, child, 1, "spawn_agent");
    assert!(is_error && out.contains("depth limit"), "{out}");
    assert!(store.children(child).unwrap().is_empty());

    // max_depth 2: a grandchild at depth 2, and none deeper.
    let store = Store::memory().unwrap();
    let r = run(&contract.clone().max_agent_depth(2), &script(true), &store)
        .await
        .unwrap();
    assert_eq!(r.outcome, RunOutcome::Success, "{r:?}");
    let child = store.children(r.run_id).unwrap()[0].run.id;
    let grand = store.children(child).unwrap();
    assert_eq!(grand.len(), 1);
    assert_eq!(grand[0].link.depth, 2);
    assert_eq!(grand[0].run.outcome.as_deref(), Some("success"));
    assert!(dir.path().join("sub/deeper/g.txt").exists());
    assert_eq!(r.agent_steps, 2 + 2, "grandchild steps roll up too");

    // max_depth 0: no spawn_agent at all.
    let store = Store::memory().unwrap();
    let r = run(&contract.clone().max_agent_depth(0), &script(false), &store)
        .await
        .unwrap();
    let (out, is_error) = call(&store, r.run_id, 1, "spawn_agent");
    assert!(is_error && out.contains("depth limit"), "{out}");
}

#[test]
fn agents_max_depth_parses_and_bad_values_name_file_line_and_key() {
    let dir = tempfile::tempdir().unwrap();
    let f = dir.path().join("task.toml");
    let base = "goal = \"g\"\n[verify]\nfile_contains = { file = \"a\", needle = \"b\" }\n";
    let c = TaskContract::from_toml_str(&format!("{base}[agents]\nmax_depth = 3\n"), &f).unwrap();
    assert_eq!(c.agents.max_depth, 3);
    let c = TaskContract::from_toml_str(base, &f).unwrap();
    assert_eq!(c.agents.max_depth, 1, "default");
    let e = TaskContract::from_toml_str(&format!("{base}[agents]\nmax_depth = 99\n"), &f)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("task.toml:5") && e.contains("agents.max_depth"),
        "{e}"
    );
    let e = TaskContract::from_toml_str(&format!("{base}[agents]\ndepth = 2\n"), &f)
        .unwrap_err()
        .to_string();
    assert!(e.contains("task.toml:5") && e.contains("depth"), "{e}");
}

/// A tree killed mid-child (a real `io-harness run` aborted at a failpoint) resumes as
/// a tree: the child continues, then the parent; a finished child is adopted, never
/// run twice.
#[cfg(feature = "failpoints")]
mod tree_resume {
    use std::path::Path;
    use std::process::Command;

    const SCRIPT: &[&str] = &[
        r#"{"tool_calls": [{"name": "spawn_agent", "input": {"name": "fixer", "goal": "log two entries", "root": "sub", "verify": {"file_contains": {"file": "log.txt", "needle": "two"}}}}], "usage": {"input_tokens": 100, "output_tokens": 0}, "cost_usd": 0.01}"#,
        r#"{"agent": "fixer", "tool_calls": [{"name": "edit_file", "input": {"path": "log.txt", "old": "entries:\n", "new": "entries:\n- one\n"}}], "usage": {"input_tokens": 10, "output_tokens": 0}, "cost_usd": 0.001}"#,
        r#"{"agent": "fixer", "tool_calls": [{"name": "edit_file", "input": {"path": "log.txt", "old": "- one\n", "new": "- one\n- two\n"}}], "usage": {"input_tokens": 10, "output_tokens": 0}, "cost_usd": 0.001}"#,
        r#"{"agent": "fixer", "text": "logged both"}"#,
        r#"{"tool_calls": [{"name": "write_file", "input": {"path": "top.txt", "content": "top\n"}}]}"#,
        r#"{"text": "done"}"#,
    ];

    struct Case {
        dir: tempfile::TempDir,
    }

    impl Case {
        fn new() -> Self {
            let dir = tempfile::tempdir().unwrap();
            let p = dir.path();
            std::fs::create_dir_all(p.join("t/ws/sub")).unwrap();
            std::fs::write(p.join("t/ws/sub/log.txt"), "entries:\n").unwrap();
            std::fs::write(p.join("t/script.jsonl"), SCRIPT.join("\n") + "\n").unwrap();
            std::fs::write(
                p.join("t/task.toml"),
                "goal = \"log via a sub-agent\"\nroot = \"ws\"\n[verify]\ncommand = [\"sh\", \"-c\", \"grep -q two sub/log.txt && test -f top.txt\"]\n[provider]\nkind = \"scripted\"\nscript = \"script.jsonl\"\n",
            )
            .unwrap();
            Self { dir }
        }

        fn path(&self) -> &Path {
            self.dir.path()
        }

        fn cmd(&self, args: &[&str]) -> Command {
            let mut c = Command::new(env!("CARGO_BIN_EXE_io-harness"));
            c.args(args)
                .env("IO_HARNESS_STORE", self.path().join("store.db"))
                .env("XDG_CACHE_HOME", self.path().join("cache"))
                .env_remove("IO_HARNESS_FAILPOINT");
            c
        }

        fn json(&self, args: &[&str]) -> serde_json::Value {
            let out = self.cmd(args).output().unwrap();
            let doc = crate::json_schema::last(&out.stdout);
            if doc["object"] == "runs" {
                return doc["runs"].clone();
            }
            doc
        }
    }

    fn kill_then_resume(point: &str) {
        let case = Case::new();
        let task = case.path().join("t/task.toml");
        let out = case
            .cmd(&["run", task.to_str().unwrap(), "--json"])
            .env("IO_HARNESS_FAILPOINT", point)
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            None,
            "{point}: the failpoint should abort; stderr: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let runs = case.json(&["runs", "--json"]);
        assert_eq!(
            runs.as_array().unwrap().len(),
            1,
            "{point}: roots only: {runs}"
        );
        let root = runs[0]["id"].as_i64().unwrap();
        assert_eq!(runs[0]["children"], 1, "{point}: {runs}");
        let tree = case.json(&["show", &root.to_string(), "--json"]);
        let child = tree["children"][0]["id"].as_i64().unwrap();

        // A child does not resume alone: its policy is its parent's.
        let out = case.cmd(&["resume", &child.to_string()]).output().unwrap();
        if tree["children"][0]["status"] != "finished" {
            assert_eq!(out.status.code(), Some(2), "{point}");
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(
                err.contains(&format!("resume the root run {root}")),
                "{err}"
            );
        }

        let out = case
            .cmd(&["resume", &root.to_string(), "--json"])
            .output()
            .unwrap();
        assert_eq!(
            out.status.code(),
            Some(0),
            "{point}: resume failed: {}\n{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        let ws = case.path().join("t/ws");
        assert_eq!(
            std::fs::read_to_string(ws.join("sub/log.txt")).unwrap(),
            "entries:\n- one\n- two\n",
            "{point}"
        );
        assert!(ws.join("top.txt").exists());

        let tree = case.json(&["show", &root.to_string(), "--json"]);
        let children = tree["children"].as_array().unwrap();
        assert_eq!(children.len(), 1, "{point}: no second child: {tree}");
        assert_eq!(children[0]["outcome"], "success", "{point}: {tree}");
        assert_eq!(children[0]["steps"], 3, "{point}: {tree}");
        assert_eq!(tree["run"]["outcome"], "success");
        // No call of the child's resumed session failed: nothing applied twice.
        let shown = case.json(&["show", &child.to_string(), "--json"]);
        assert_eq!(shown["agent"]["parent_run_id"], root);
        for s in shown["steps"].as_array().unwrap() {
            for c in s["tool_calls"].as_array().unwrap() {
                assert_eq!(c["is_error"], false, "{point}: {c}");
            }
        }
        let parent = case.json(&["show", &root.to_string(), "--json"]);
        let spawn_call = &parent["steps"][0]["tool_calls"][0];
        assert_eq!(spawn_call["is_error"], false, "{point}: {spawn_call}");
        assert!(
            spawn_call["output"]
                .as_str()
                .unwrap()
                .contains(&format!("run {child}")),
            "{spawn_call}"
        );
        // `runs` lists the root with its tree's usage: the child's cost rolls up.
        let runs = case.json(&["runs", "--json"]);
        assert_eq!(runs[0]["tree"]["runs"], 2, "{runs}");
        let cost = runs[0]["tree"]["cost_usd"].as_f64().unwrap();
        assert!((cost - 0.012).abs() < 1e-9, "{point}: {runs}");
        // The text view draws the tree.
        let text = case.cmd(&["show", &root.to_string()]).output().unwrap();
        let text = String::from_utf8_lossy(&text.stdout);
        assert!(text.contains(&format!("run {child} `fixer`")), "{text}");
    }

    #[test]
    fn killed_right_after_the_child_started() {
        kill_then_resume("agent.after_spawn:1");
    }

    #[test]
    fn killed_after_the_childs_first_step() {
        kill_then_resume("agent.child_after_commit:1");
    }

    #[test]
    fn killed_mid_tool_call_of_the_child() {
        kill_then_resume("tool.after_apply:2");
    }

    #[test]
    fn killed_after_the_child_finished_before_the_parent_committed() {
        kill_then_resume("agent.after_child:1");
    }
}

#[tokio::test]
async fn the_library_spawns_a_child_of_a_stored_run_under_the_same_terms() {
    use io_harness::run::{AgentSpec, RunError, RunOptions, spawn_agent};
    let dir = workspace();
    let contract = TaskContract::workspace(
        "check the seed",
        dir.path(),
        Verification::file_contains("sub/seed.txt", "seed"),
    )
    .max_steps(4)
    .policy_rule(Rule::deny(Act::Write, "sub/locked.txt"));
    let store = Store::memory().unwrap();
    let parent = run(
        &contract,
        &Scripted::new(vec![usage(ScriptTurn::text("fine"), 7, Some(0.5))]),
        &store,
    )
    .await
    .unwrap();
    assert_eq!(parent.outcome, RunOutcome::Success);

    let spec: AgentSpec = serde_json::from_value(json!({
        "name": "after", "goal": "write b.txt", "root": "sub",
        "verify": {"file_contains": {"file": "b.txt", "needle": "b"}},
        "budget": {"max_steps": 50}
    }))
    .unwrap();
    let provider = Scripted::new(vec![]).with_agent(
        "after",
        vec![
            write("locked.txt", "x\n"),
            write("b.txt", "b\n"),
            ScriptTurn::text("ok"),
        ],
    );
    let child = spawn_agent(
        &store,
        parent.run_id,
        &spec,
        &provider,
        RunOptions::default(),
    )
    .await
    .unwrap();
    assert_eq!(child.outcome, RunOutcome::Success, "{child:?}");
    let children = store.children(parent.run_id).unwrap();
    assert_eq!(children.len(), 1);
    assert_eq!(
        (children[0].link.step, children[0].link.call_id.as_str()),
        (1, "api-1")
    );
    let c: TaskContract =
        serde_json::from_str(children[0].run.contract_json.as_deref().unwrap()).unwrap();
    assert_eq!(c.budget.max_steps, 3, "four less the parent's one step");
    let (out, is_error) = call(&store, child.run_id, 1, "write_file");
    assert!(is_error, "the parent's stored policy holds: {out}");

    let mut wide = spec.clone();
    wide.rules = vec![Rule::allow(Act::Net, "*")];
    match spawn_agent(
        &store,
        parent.run_id,
        &wide,
        &provider,
        RunOptions::default(),
    )
    .await
    {
        Err(e @ RunError::SpawnRefused { .. }) => assert!(e.is_usage(), "{e}"),
        other => panic!("expected a refusal, got {other:?}"),
    }
    assert_eq!(store.children(parent.run_id).unwrap().len(), 1);
}

fn gated_tree(contract_dir: &std::path::Path) -> (TaskContract, Scripted) {
    let contract = TaskContract::workspace(
        "delegate",
        contract_dir,
        Verification::file_contains("sub/out.txt", "three"),
    );
    let provider = Scripted::new(vec![
        spawn(json!({
            "name": "w", "goal": "write out.txt in three steps", "root": "sub",
            "verify": {"file_contains": {"file": "out.txt", "needle": "three"}}
        })),
        ScriptTurn::text("done"),
    ])
    .with_agent(
        "w",
        vec![
            write("out.txt", "one\n"),
            write("out.txt", "one\ntwo\n"),
            write("out.txt", "one\ntwo\nthree\n"),
            ScriptTurn::text("wrote it"),
        ],
    );
    (contract, provider)
}

#[tokio::test]
async fn a_cancelled_child_cancels_its_parent_and_both_resume_as_a_tree() {
    use io_harness::run::{Flow, RunEvent, RunOptions};
    use std::sync::Mutex;
    let dir = workspace();
    let (contract, provider) = gated_tree(dir.path());
    let root = std::sync::Arc::new(Mutex::new(None::<i64>));
    let r2 = root.clone();
    let observer = move |e: &RunEvent| -> Flow {
        let mut root = r2.lock().unwrap();
        match e {
            RunEvent::RunStarted { run_id, .. } if root.is_none() => *root = Some(*run_id),
            RunEvent::StepCommitted {
                run_id, step: 1, ..
            } if Some(*run_id) != *root => {
                return Flow::Cancel;
            }
            _ => {}
        }
        Flow::Continue
    };
    let store = Store::memory().unwrap();
    let opts = RunOptions::default().observer(std::sync::Arc::new(observer));
    let r = io_harness::run_with(&contract, &provider, &store, opts)
        .await
        .unwrap();
    assert_eq!(r.outcome, RunOutcome::Cancelled);
    assert_eq!(r.steps, 0, "the spawning step is not committed");
    let child = store.children(r.run_id).unwrap()[0].clone();
    assert_eq!(child.run.outcome.as_deref(), Some("cancelled"));
    assert_eq!(child.run.steps, 1);

    let r = io_harness::resume(&store, r.run_id, &provider)
        .await
        .unwrap();
    assert_eq!(r.outcome, RunOutcome::Success, "{r:?}");
    let children = store.children(r.run_id).unwrap();
    assert_eq!(
        children.len(),
        1,
        "the child was continued, not started again"
    );
    assert_eq!(children[0].run.steps, 4);
    assert_eq!(r.agent_steps, 4);
}

#[tokio::test]
async fn a_child_awaiting_approval_holds_its_parent_until_decided() {
    let dir = workspace();
    let (contract, provider) = gated_tree(dir.path());
    let contract = contract.policy_rule(Rule::ask(Act::Write, "sub/out.txt"));
    let store = Store::memory().unwrap();
    let r = run(&contract, &provider, &store).await.unwrap();
    let RunOutcome::AwaitingApproval { request_id } = r.outcome.clone() else {
        panic!("{r:?}");
    };
    let child = store.children(r.run_id).unwrap()[0].run.id;
    let pending = store.approval(child, &request_id).unwrap().unwrap();
    assert_eq!(pending.status, "pending", "the request is the child's");

    // Undecided: resuming the tree waits again, starting nothing new.
    let again = io_harness::resume(&store, r.run_id, &provider)
        .await
        .unwrap();
    assert!(
        matches!(again.outcome, RunOutcome::AwaitingApproval { .. }),
        "{again:?}"
    );
    assert_eq!(store.children(r.run_id).unwrap().len(), 1);

    store
        .decide_approval(
            child,
            &request_id,
            true,
            None,
            io_harness::policy::Remember::Exact,
        )
        .unwrap();
    // The operator asked to remember, but a child cannot widen its parent's policy:
    // the next write asks again.
    let next = io_harness::resume(&store, r.run_id, &provider)
        .await
        .unwrap();
    let RunOutcome::AwaitingApproval { request_id: second } = next.outcome.clone() else {
        panic!("{next:?}");
    };
    assert_ne!(second, request_id);
    store
        .decide_approval(child, &second, true, None, io_harness::policy::Remember::No)
        .unwrap();
    let next = io_harness::resume(&store, r.run_id, &provider)
        .await
        .unwrap();
    let RunOutcome::AwaitingApproval { request_id: third } = next.outcome.clone() else {
        panic!("{next:?}");
    };
    store
        .decide_approval(child, &third, true, None, io_harness::policy::Remember::No)
        .unwrap();
    let done = io_harness::resume(&store, r.run_id, &provider)
        .await
        .unwrap();
    assert_eq!(done.outcome, RunOutcome::Success, "{done:?}");
    assert_eq!(store.children(r.run_id).unwrap().len(), 1);
    assert_eq!(
        std::fs::read_to_string(dir.path().join("sub/out.txt")).unwrap(),
        "one\ntwo\nthree\n"
    );
}

#[tokio::test]
async fn approve_on_the_root_finds_the_request_of_a_sub_agent() {
    let dir = workspace();
    let (contract, provider) = gated_tree(dir.path());
    let contract = contract.policy_rule(Rule::ask(Act::Write, "sub/out.txt"));
    // The store beside the workspace: one inside it is refused.
    let records = tempfile::tempdir().unwrap();
    let db = records.path().join("store.db");
    let store = Store::open(&db).unwrap();
    let r = run(&contract, &provider, &store).await.unwrap();
    let RunOutcome::AwaitingApproval { request_id } = r.outcome.clone() else {
        panic!("{r:?}");
    };
    let child = store.children(r.run_id).unwrap()[0].run.id;
    assert_eq!(
        store.approval_in_tree(r.run_id, &request_id).unwrap(),
        Some(child)
    );
    assert_eq!(store.approval_in_tree(r.run_id, "no-such").unwrap(), None);
    assert_eq!(store.root_run(child).unwrap(), r.run_id);
    drop(store);

    let out = std::process::Command::new(env!("CARGO_BIN_EXE_io-harness"))
        .args(["approve", &r.run_id.to_string(), &request_id, "allow"])
        .env("IO_HARNESS_STORE", &db)
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{stdout} {}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        stdout.contains(&format!("sub-agent run {child}"))
            && stdout.contains(&format!("io-harness resume {}", r.run_id)),
        "{stdout}"
    );
    let store = Store::open(&db).unwrap();
    let decided = store.approval(child, &request_id).unwrap().unwrap();
    assert_eq!(decided.status, "allowed");

    // A request id that is nowhere in the tree is a usage error naming it.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_io-harness"))
        .args(["approve", &r.run_id.to_string(), "no-such", "deny"])
        .env("IO_HARNESS_STORE", &db)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("no-such"));
}

#[tokio::test]
async fn an_operator_rule_on_spawn_agent_is_honoured_and_recorded() {
    let dir = workspace();
    let contract = TaskContract::workspace(
        "delegate",
        dir.path(),
        Verification::file_contains("sub/seed.txt", "seed"),
    )
    .policy_rule(Rule::deny(Act::Exec, "spawn_agent"));
    let provider = Scripted::new(vec![
        spawn(json!({
            "name": "x", "goal": "g", "root": "sub",
            "verify": {"file_contains": {"file": "seed.txt", "needle": "seed"}}
        })),
        ScriptTurn::text("done"),
    ]);
    let store = Store::memory().unwrap();
    let r = run(&contract, &provider, &store).await.unwrap();
    let (out, is_error) = call(&store, r.run_id, 1, "spawn_agent");
    assert!(is_error && out.contains("deny"), "{out}");
    assert!(store.children(r.run_id).unwrap().is_empty());
    let pe = store.policy_events(r.run_id).unwrap();
    assert!(
        pe.iter()
            .any(|p| p.step == 1 && p.target == "spawn_agent" && p.decision == "deny"),
        "{pe:?}"
    );
}

/// A child's `file_contains` was read by the harness with no policy decision: a
/// one-bit oracle on `.env` (a key character in 16 spawns). The parent's policy now
/// decides the file like any read, and a denied one refuses the spawn.
#[tokio::test]
async fn a_childs_criterion_cannot_read_what_the_parent_may_not() {
    let dir = workspace();
    std::fs::write(dir.path().join("sub/.env"), "TOKEN=s3cret\n").unwrap();
    let contract = TaskContract::workspace(
        "delegate",
        dir.path(),
        Verification::file_contains("sub/seed.txt", "seed"),
    );
    let oracle = |file: &str, key: &str| {
        let mut verify = json!({});
        verify[key] = if key == "file_contains" {
            json!({"file": file, "needle": "TOKEN=s"})
        } else {
            json!({"file": file, "content": "TOKEN=s3cret\n"})
        };
        spawn(json!({"name": "o", "goal": "nothing", "root": "sub", "verify": verify}))
    };
    let provider = Scripted::new(vec![
        oracle(".env", "file_contains"),
        oracle(".env", "file_equals"),
        ScriptTurn::text("done"),
    ])
    .with_agent("o", vec![ScriptTurn::text("done")]);
    let store = Store::memory().unwrap();
    let r = run(&contract, &provider, &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success, "{r:?}");
    for step in [1, 2] {
        let (out, is_error) = call(&store, r.run_id, step, "spawn_agent");
        assert!(is_error, "{out}");
        assert!(
            out.contains("sub/.env") && out.contains("does not let you read"),
            "{out}"
        );
    }
    assert!(store.children(r.run_id).unwrap().is_empty(), "no child ran");
}

/// Issue 16 SA1: a child's criterion on a symlink (`envlink -> .env`) was judged by
/// its name only, so only the right guess of `.env`'s content ended `success`. The
/// file a link reaches is judged like `read_file` judges it: at the spawn, and again
/// when the child's verification reads it (a link the child makes after the spawn),
/// where a refused file fails its criterion unread, whatever the guess.
#[tokio::test]
async fn sa1_a_childs_criterion_through_a_symlink_cannot_read_what_the_parent_may_not() {
    let dir = workspace();
    std::fs::write(dir.path().join("sub/.env"), "TOKEN=e7x\n").unwrap();
    std::os::unix::fs::symlink(".env", dir.path().join("sub/envlink")).unwrap();
    let contract = TaskContract::workspace(
        "delegate",
        dir.path(),
        Verification::file_contains("sub/seed.txt", "seed"),
    );
    let guess = |name: &str, file: &str, needle: &str| {
        let verify = json!({"file_contains": {"file": file, "needle": needle}, "max_attempts": 1});
        spawn(json!({"name": name, "goal": "nothing", "root": "sub", "verify": verify}))
    };
    let link =
        |name: &str| ScriptTurn::tool("run_command", json!({"argv": ["ln", "-s", ".env", name]}));
    let provider = Scripted::new(vec![
        guess("g0", "envlink", "TOKEN=e"),
        guess("g1", "late1.txt", "TOKEN=e"),
        guess("g2", "late2.txt", "TOKEN=x"),
        ScriptTurn::text("done"),
    ])
    .with_agent("g1", vec![link("late1.txt"), ScriptTurn::text("done")])
    .with_agent("g2", vec![link("late2.txt"), ScriptTurn::text("done")]);
    let store = Store::memory().unwrap();
    let r = run(&contract, &provider, &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success, "{r:?}");
    let (out, is_error) = call(&store, r.run_id, 1, "spawn_agent");
    assert!(is_error, "{out}");
    assert!(
        out.contains("sub/envlink") && out.contains("does not let you read"),
        "{out}"
    );
    let mut ends = Vec::new();
    for step in [2, 3] {
        let (out, _) = call(&store, r.run_id, step, "spawn_agent");
        assert!(out.contains("sub-agent `g"), "the child ran: {out}");
        assert!(!out.contains("ended: success"), "{out}");
        ends.push(
            out.split("ended: ")
                .nth(1)
                .map(|s| s.split_whitespace().next().map(str::to_string)),
        );
    }
    assert_eq!(ends[0], ends[1], "the verdict depends on the guess");
    // The children made the link, so an unjudged read would have found `TOKEN=e`.
    for late in ["sub/late1.txt", "sub/late2.txt"] {
        let meta = std::fs::symlink_metadata(dir.path().join(late)).unwrap();
        assert!(meta.file_type().is_symlink(), "{late}");
    }
}
