//! The layered permission policy: precedence across layers, globs, approvals,
//! overrides, the project file, `[policy]` in the task file, and the stored form a
//! resumed run decides from.

use std::path::Path;
use std::sync::Arc;

use futures_util::FutureExt;
use io_harness::policy::{
    Act, Action, Approval, ApprovalRequest, Approver, Callback, Decision, Isolation, Override,
    PROJECT_POLICY_FILE, Policy, PolicyGate, PolicyLayers, ProjectPolicy, ProjectPolicyError, Rule,
};
use io_harness::tools::{ToolContext, ToolLimits, ToolRegistry, Workspace};
use io_harness::{TaskContract, Verification};

const LAYERS: &[&str] = &[
    "builtin",
    "project",
    "task",
    "run",
    "remembered",
    "override",
];

const PROJECT: &str = r#"# narrows, and tries to widen
rules = [
  { act = "read", target = "secrets/**", decision = "deny" },
  { act = "write", target = "vendor/**", decision = "deny" },
  { act = "exec", target = "rm", decision = "allow" },
  { act = "net", target = "*", decision = "allow" },
  { act = "exec", target = "git-push*", decision = "ask" },
]
"#;

/// A policy with every layer populated: the contract's task layer and override,
/// the project file above, run rules and an override, and remembered approvals.
fn layered(isolation: Isolation) -> Policy {
    let contract = TaskContract::workspace("g", ".", Verification::command(["cargo", "test"]))
        .policy_rule(Rule::allow(Act::Exec, "git*"))
        .policy_rule(Rule::deny(Act::Exec, "curl"))
        .policy_rule(Rule::ask(Act::Write, "Cargo.lock"))
        .policy_rule(Rule::allow(Act::Net, "crates.io"))
        .policy_rule(Rule::allow(Act::Net, "*.pypi.org:443"))
        .policy_rule(Rule::allow(Act::Read, "secrets/**"))
        .policy_rule(Rule::ask(Act::Exec, "docker"))
        .policy_rule(Rule::allow(Act::Write, "src/**"))
        .policy_rule(Rule::ask(Act::Net, "api.example.com"))
        .policy_override(Override::new(Act::Read, ".env.example"));
    let mut contract = contract;
    contract.instructions = Some("AGENTS.md".into());
    let project =
        ProjectPolicy::from_toml_str(PROJECT, Path::new("ws/.io-harness/policy.toml")).unwrap();
    let mut p = Policy::for_contract(&contract)
        .unwrap()
        .with_project(&project)
        .unwrap()
        .with_exec_isolation(isolation);
    p.add_run_rule(Rule::deny(Act::Net, "evil.example.com"))
        .unwrap();
    p.add_run_rule(Rule::allow(Act::Exec, "docker")).unwrap();
    p.add_run_rule(Rule::allow(Act::Exec, "mcp__fs__*"))
        .unwrap();
    p.add_run_override(Override::new(Act::Write, ".io-harness/notes/**"))
        .unwrap();
    for a in [
        Action::new(Act::Exec, "docker"),
        Action::new(Act::Exec, "curl"),
        Action::new(Act::Net, "api.example.com:443"),
        Action::new(Act::Read, ".env"),
    ] {
        p.remember(&a).unwrap();
    }
    p
}

use Act::{Exec, Net, Read, Write};
use Decision::{Allow, Ask, Deny};

#[rustfmt::skip]
const TABLE: &[(Act, &str, Decision, &str, &str)] = &[
    // defaults
    (Read,  "src/lib.rs",               Allow, "default",          "builtin"),
    (Write, "README.md",                Allow, "default",          "builtin"),
    (Exec,  "make",                     Ask,   "default",          "builtin"),
    (Net,   "other.org:443",            Deny,  "default",          "builtin"),
    // built-in secrets, at any depth
    (Read,  ".env",                     Deny,  ".env",             "builtin"),
    (Read,  "config/deep/.env",         Deny,  ".env",             "builtin"),
    (Read,  ".env.local",               Deny,  ".env.*",           "builtin"),
    (Write, "a/b/server.pem",           Deny,  "*.pem",            "builtin"),
    (Read,  "keys/id_rsa.pub",          Deny,  "id_rsa*",          "builtin"),
    (Read,  "home/id_ed25519",          Deny,  "id_ed25519*",      "builtin"),
    (Read,  "tls/site.key",             Deny,  "*.key",            "builtin"),
    (Read,  ".git/config",              Deny,  "**/.git/config",   "builtin"),
    (Read,  "vendor/dep/.git/config",   Deny,  "**/.git/config",   "builtin"),
    (Read,  ".git/hooks/pre-commit",    Deny,  "**/.git/hooks/**", "builtin"),
    (Read,  ".git/HEAD",                Allow, "default",          "builtin"),
    (Write, ".git/HEAD",                Deny,  "**/.git/**",       "builtin"),
    (Write, ".io-harness/policy.toml",  Deny,  ".io-harness/**",   "builtin"),
    (Write, "AGENTS.md",                Deny,  "/AGENTS.md",       "builtin"),
    (Write, "docs/AGENTS.md",           Allow, "default",          "builtin"),
    // overrides lift a built-in deny for their act and target only, and say so
    (Read,  ".env.example",             Allow, ".env.*",           "override"),
    (Write, ".env.example",             Deny,  ".env.*",           "builtin"),
    (Write, ".io-harness/notes/a.md",   Allow, ".io-harness/**",   "override"),
    // project narrows: its deny beats a task allow, its allows are ignored
    (Read,  "secrets/api.txt",          Deny,  "secrets/**",       "project"),
    (Write, "vendor/lib.rs",            Deny,  "vendor/**",        "project"),
    (Exec,  "rm",                       Ask,   "default",          "builtin"),
    (Exec,  "git-push-all",             Ask,   "git-push*",        "project"),
    // task and run
    (Write, "src/deep/mod.rs",          Allow, "src/**",           "task"),
    (Write, "Cargo.lock",               Ask,   "Cargo.lock",       "task"),
    (Write, "sub/Cargo.lock",           Ask,   "Cargo.lock",       "task"),
    (Exec,  "cargo",                    Allow, "cargo",            "task"),
    (Exec,  "./cargo",                  Ask,   "default",          "builtin"),
    (Exec,  "git",                      Allow, "git*",             "task"),
    (Exec,  "git-lfs",                  Allow, "git*",             "task"),
    (Exec,  "mcp__fs__read",            Allow, "mcp__fs__*",       "run"),
    (Exec,  "mcp__web__get",            Ask,   "default",          "builtin"),
    // remembered approvals answer asks, never denies
    (Exec,  "curl",                     Deny,  "curl",             "task"),
    (Exec,  "/usr/bin/curl",            Deny,  "curl",             "task"),
    (Exec,  "docker",                   Allow, "docker",           "remembered"),
    (Net,   "api.example.com:443",      Allow, "api.example.com:443", "remembered"),
    (Net,   "api.example.com:8443",     Ask,   "api.example.com",  "task"),
    // hosts and ports
    (Net,   "crates.io:443",            Allow, "crates.io",        "task"),
    (Net,   "CRATES.IO.:8443",          Allow, "crates.io",        "task"),
    (Net,   "files.pypi.org:443",       Allow, "*.pypi.org:443",   "task"),
    (Net,   "files.pypi.org:80",        Deny,  "default",          "builtin"),
    (Net,   "pypi.org:443",             Deny,  "default",          "builtin"),
    (Net,   "evil.example.com:443",     Deny,  "evil.example.com", "run"),
];

#[test]
fn layer_precedence_table() {
    assert!(TABLE.len() >= 30);
    let p = layered(Isolation::Weaker);
    let mut wrong = Vec::new();
    for &(act, target, decision, rule, layer) in TABLE {
        let d = p.decide(&Action::new(act, target));
        let got = (d.decision, d.rule.as_str(), d.layer.as_str());
        if got != (decision, rule, layer) {
            wrong.push(format!(
                "{} {target}: want {decision:?} {rule} {layer}, got {got:?}",
                act.as_str()
            ));
        }
        assert_eq!(d.action, Action::new(act, target));
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
}

#[test]
fn exec_default_follows_isolation_and_other_defaults_do_not() {
    for (iso, exec) in [(Isolation::Native, Allow), (Isolation::Weaker, Ask)] {
        let p = Policy::builtin().with_exec_isolation(iso);
        assert_eq!(p.exec_isolation(), iso);
        for (act, target, want) in [
            (Read, "src/a.rs", Allow),
            (Write, "src/a.rs", Allow),
            (Exec, "make", exec),
            (Net, "example.com:443", Deny),
        ] {
            let d = p.decide(&Action::new(act, target));
            assert_eq!(
                (d.decision, d.rule.as_str(), d.layer.as_str()),
                (want, "default", "builtin"),
                "{iso:?} {target}"
            );
        }
    }
    // Natively sandboxed, an explicit ask still asks; an operator allow still allows.
    let p = layered(Isolation::Native);
    assert_eq!(p.decide(&Action::new(Exec, "rm")).decision, Allow);
    assert_eq!(p.decide(&Action::new(Exec, "git-push-all")).decision, Ask);
}

#[test]
fn an_approval_remembered_answers_asks_but_never_a_deny() {
    let p = Arc::new(layered(Isolation::Weaker));
    let approver = Callback::new(|_: &ApprovalRequest| Approval::Approve {
        modified: None,
        remember: io_harness::policy::Remember::Exact,
    });
    for (target, before, after) in [
        ("Cargo.lock", Ask, Allow),
        ("vendor/x.rs", Deny, Deny),
        ("a/.env", Deny, Deny),
    ] {
        let action = Action::new(Write, target);
        let gate: &dyn PolicyGate = p.as_ref();
        assert_eq!(gate.decide(&action).decision, before, "{target}");
        let req = ApprovalRequest::new(format!("req-{target}"), action.clone(), "+x");
        let answer = approver.decide(&req).now_or_never().unwrap();
        if let Approval::Approve {
            remember: io_harness::policy::Remember::Exact,
            ..
        } = answer
        {
            p.remember(&action).unwrap();
        }
        let d = gate.decide(&action);
        assert_eq!(d.decision, after, "{target}");
        if after == Allow {
            assert_eq!(d.layer, "remembered");
        } else {
            assert_ne!(d.layer, "remembered");
        }
    }
    // The remembered rule is for that target only.
    assert_eq!(
        p.decide(&Action::new(Write, "sub/Cargo.lock")).decision,
        Ask
    );
}

#[test]
fn project_file_cannot_widen_the_operators_policy() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".io-harness")).unwrap();
    std::fs::write(dir.path().join(PROJECT_POLICY_FILE), PROJECT).unwrap();
    let project = ProjectPolicy::load(dir.path()).unwrap();
    assert_eq!(
        project.file.as_deref(),
        Some(dir.path().join(PROJECT_POLICY_FILE).as_path())
    );
    let ignored: Vec<(usize, &str)> = project
        .ignored
        .iter()
        .map(|i| (i.line, i.rule.target.as_str()))
        .collect();
    assert_eq!(ignored, vec![(5, "rm"), (6, "*")]);
    assert!(project.ignored.iter().all(|i| i.reason.contains("narrow")));
    assert_eq!(project.rules.len(), 3);

    let p = Policy::builtin()
        .with_exec_isolation(Isolation::Weaker)
        .with_project(&project)
        .unwrap();
    assert_eq!(
        p.decide(&Action::new(Net, "anything.org:443")).decision,
        Deny
    );
    assert_eq!(p.decide(&Action::new(Exec, "rm")).decision, Ask);
    let d = p.decide(&Action::new(Read, "secrets/a"));
    assert_eq!((d.decision, d.layer.as_str()), (Deny, "project"));
    // A project file handed in unfiltered is refused, not applied.
    let mut widened = project.clone();
    widened.rules.push(Rule::allow(Net, "*"));
    assert!(Policy::builtin().with_project(&widened).is_err());
}

#[test]
fn project_file_errors_name_file_and_line() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join(".io-harness")).unwrap();
    let file = dir.path().join(PROJECT_POLICY_FILE);
    for (text, line, key) in [
        (
            "rules = [\n  { act = \"read\", target = \"a\", decision = \"deny\", note = \"x\" },\n]\n",
            2,
            "note",
        ),
        (
            "\n\nrules = [{ act = \"fly\", target = \"a\", decision = \"deny\" }]\n",
            3,
            "(syntax)",
        ),
        (
            "rules = [\n\n\n  { act = \"net\", target = \"host:http\", decision = \"deny\" },\n]\n",
            4,
            "rules[0]",
        ),
        ("allow_everything = true\n", 1, "allow_everything"),
    ] {
        std::fs::write(&file, text).unwrap();
        match ProjectPolicy::load(dir.path()) {
            Err(e @ ProjectPolicyError::Invalid { .. }) => {
                let shown = e.to_string();
                assert!(
                    shown.starts_with(&format!("{}:{line}: {key}:", file.display())),
                    "{shown}"
                );
            }
            other => panic!("{text}: expected Invalid, got {other:?}"),
        }
    }
}

fn task_file(body: &str) -> Result<TaskContract, io_harness::contract::ContractError> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("task.toml");
    std::fs::write(
        &file,
        format!("goal = \"g\"\n[verify]\ncommand = [\"cargo\", \"test\"]\n{body}"),
    )
    .unwrap();
    TaskContract::from_file(&file)
}

fn invalid_at(body: &str) -> (usize, String, String) {
    match task_file(body) {
        Err(io_harness::contract::ContractError::Invalid {
            line, key, message, ..
        }) => (line, key, message),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

#[test]
fn task_file_policy_section_becomes_the_task_layer() {
    let c = task_file(
        "[policy]\nrules = [\n  { act = \"exec\", target = \"curl\", decision = \"deny\" },\n  { act = \"net\", target = \"*.pypi.org:443\", decision = \"allow\" },\n]\noverride = [{ act = \"read\", target = \".env.example\" }]\n",
    )
    .unwrap();
    assert_eq!(
        c.policy.rules,
        vec![Rule::deny(Exec, "curl"), Rule::allow(Net, "*.pypi.org:443")]
    );
    assert_eq!(
        c.policy.overrides,
        vec![Override::new(Read, ".env.example")]
    );
    let p = Policy::for_contract(&c).unwrap();
    let d = p.decide(&Action::new(Exec, "curl"));
    assert_eq!((d.decision, d.layer.as_str()), (Deny, "task"));
    let d = p.decide(&Action::new(Read, ".env.example"));
    assert_eq!(
        (d.decision, d.rule.as_str(), d.layer.as_str()),
        (Allow, ".env.*", "override")
    );
    // No [policy]: an empty task layer, and the verification command still allowed.
    let c = task_file("").unwrap();
    assert_eq!(c.policy, Default::default());
    let d = Policy::for_contract(&c)
        .unwrap()
        .decide(&Action::new(Exec, "cargo"));
    assert_eq!(
        (d.decision, d.rule.as_str(), d.layer.as_str()),
        (Allow, "cargo", "task")
    );
}

#[test]
fn task_file_policy_errors_name_key_and_line() {
    let (line, key, msg) = invalid_at(
        "[policy]\nrules = [\n  { act = \"exec\", target = \"x\", decision = \"deny\", why = 1 },\n]\n",
    );
    assert_eq!((line, key.as_str()), (6, "why"));
    assert!(msg.contains("unknown field"), "{msg}");
    let (line, key, _) = invalid_at("[policy]\ndefault = \"allow\"\n");
    assert_eq!((line, key.as_str()), (5, "default"));
    let (line, key, msg) = invalid_at(
        "[policy]\nrules = [\n  { act = \"read\", target = \"a\", decision = \"deny\" },\n  { act = \"read\", target = \"src/[oops\", decision = \"deny\" },\n]\n",
    );
    assert_eq!((line, key.as_str()), (7, "policy.rules[1]"));
    assert!(msg.contains("src/[oops"), "{msg}");
    let (line, key, _) = invalid_at("[policy]\noverride = [{ act = \"net\", target = \"h:x\" }]\n");
    assert_eq!((line, key.as_str()), (5, "policy.override[0]"));
    let (line, _, msg) = invalid_at(
        "[policy]\nrules = [{ act = \"exec\", target = \"x\", decision = \"maybe\" }]\n",
    );
    assert_eq!(line, 5);
    assert!(msg.contains("maybe"), "{msg}");
}

#[test]
fn a_stored_contract_without_policy_still_loads() {
    let c = TaskContract::workspace("g", ".", Verification::command(["true"]))
        .policy_rule(Rule::deny(Net, "*"));
    let mut v = serde_json::to_value(&c).unwrap();
    assert_eq!(v["policy"]["rules"][0]["decision"], "deny");
    v.as_object_mut().unwrap().remove("policy");
    let back: TaskContract = serde_json::from_value(v).unwrap();
    assert_eq!(back.policy, Default::default());
}

#[test]
fn policy_round_trips_through_json_and_decides_identically() {
    let p = layered(Isolation::Weaker);
    let json = serde_json::to_string(&p).unwrap();
    let back: Policy = serde_json::from_str(&json).unwrap();
    assert_eq!(back.layers(), p.layers());
    assert_eq!(back.layers().remembered.len(), 4);
    for &(act, target, ..) in TABLE {
        let a = Action::new(act, target);
        assert_eq!(back.decide(&a), p.decide(&a), "{target}");
    }
    // The stored form has no defaults: a truncated record is refused, not widened.
    let mut v: serde_json::Value = serde_json::from_str(&json).unwrap();
    v.as_object_mut().unwrap().remove("remembered");
    assert!(serde_json::from_value::<Policy>(v).is_err());
    let layers: PolicyLayers = serde_json::from_str(&json).unwrap();
    assert_eq!(layers.exec_isolation, Isolation::Weaker);
}

#[test]
fn every_decision_names_a_rule_and_a_layer() {
    let p = layered(Isolation::Weaker);
    let layers = p.layers();
    let all_rules: Vec<&str> = [
        &layers.builtin,
        &layers.project,
        &layers.task,
        &layers.run,
        &layers.remembered,
    ]
    .into_iter()
    .flatten()
    .map(|r| r.target.as_str())
    .collect();
    let targets = [
        "", ".", "a", "x/.env", "cargo", "host:1", "[::1]:80", "*", "a/../b",
    ];
    for act in [Read, Write, Exec, Net] {
        for t in targets {
            let d = p.decide(&Action::new(act, t));
            assert!(LAYERS.contains(&d.layer.as_str()), "{d:?}");
            assert!(
                d.rule == "default" || all_rules.contains(&d.rule.as_str()),
                "{d:?}"
            );
        }
    }
}

#[tokio::test]
async fn the_tool_dispatcher_refuses_what_the_policy_denies() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".env"), "TOKEN=canary").unwrap();
    std::fs::write(dir.path().join("ok.txt"), "fine").unwrap();
    let ctx = ToolContext {
        workspace: Arc::new(Workspace::open(dir.path()).unwrap()),
        limits: ToolLimits::default(),
        exec: None,
        read_gate: None,
        memory: None,
    };
    let policy = Policy::builtin();
    let tools = ToolRegistry::standard();
    let read = |path: &str| serde_json::json!({ "path": path });
    let out = tools
        .dispatch(&ctx, &policy, "read_file", &read(".env"))
        .await;
    assert!(
        out.is_error && !out.content.contains("canary"),
        "{}",
        out.content
    );
    assert!(
        out.content.contains("rule .env in layer builtin"),
        "{}",
        out.content
    );
    assert_eq!(out.decisions[0].layer, "builtin");
    let out = tools
        .dispatch(&ctx, &policy, "read_file", &read("ok.txt"))
        .await;
    assert!(
        !out.is_error && out.content.contains("fine"),
        "{}",
        out.content
    );
}

/// Regression: a symlink inside the workspace named like an ordinary file used to be
/// judged by its name, so `notes.txt -> .env` read the secret.
#[tokio::test]
async fn a_read_through_an_inside_symlink_is_judged_by_the_file_it_reaches() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".env"), "TOKEN=canary").unwrap();
    std::fs::create_dir(dir.path().join("docs")).unwrap();
    std::os::unix::fs::symlink("../.env", dir.path().join("docs/notes.txt")).unwrap();
    let ctx = ToolContext {
        workspace: Arc::new(Workspace::open(dir.path()).unwrap()),
        limits: ToolLimits::default(),
        exec: None,
        read_gate: None,
        memory: None,
    };
    let out = ToolRegistry::standard()
        .dispatch(
            &ctx,
            &Policy::builtin(),
            "read_file",
            &serde_json::json!({"path": "docs/notes.txt"}),
        )
        .await;
    assert!(
        out.is_error && !out.content.contains("canary"),
        "{}",
        out.content
    );
    let targets: Vec<&str> = out
        .decisions
        .iter()
        .map(|d| d.action.target.as_str())
        .collect();
    assert_eq!(targets, ["docs/notes.txt", ".env"]);
}

/// Issue 16 ED1: `edit_file` reads the file to find `old`, and "edited" against
/// "occurs 0 times" told the model whether a guess is in a file the operator denies
/// reading; it could also rewrite it. It is judged as a read too: refused unread,
/// whatever the guess, and the file stays as it was.
#[tokio::test]
async fn ed1_edit_file_on_a_read_denied_file_is_refused_as_a_read() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("config")).unwrap();
    std::fs::write(dir.path().join("config/secret.txt"), "password=hunter2\n").unwrap();
    let ctx = ToolContext {
        workspace: Arc::new(Workspace::open(dir.path()).unwrap()),
        limits: ToolLimits::default(),
        exec: None,
        read_gate: None,
        memory: None,
    };
    let policy = Policy::for_contract(
        &TaskContract::workspace("g", ".", Verification::command(["true"]))
            .policy_rule(Rule::deny(Act::Read, "config/secret.txt")),
    )
    .unwrap();
    let tools = ToolRegistry::standard();
    let mut answers = Vec::new();
    for (old, new) in [
        ("password=h", "password=h"),
        ("password=x", "password=x"),
        ("hunter2", "changed"),
    ] {
        let input = serde_json::json!({"path": "config/secret.txt", "old": old, "new": new});
        let out = tools.dispatch(&ctx, &policy, "edit_file", &input).await;
        assert!(out.is_error, "{old}: {}", out.content);
        assert!(
            out.content.contains("config/secret.txt")
                && out.content.contains("in layer task")
                && !out.content.contains("edited")
                && !out.content.contains("occurs"),
            "{old}: {}",
            out.content
        );
        assert_eq!(out.decisions[0].action.act, Act::Read, "{old}");
        answers.push(out.content);
    }
    assert!(
        answers.windows(2).all(|w| w[0] == w[1]),
        "the answer depends on the guess: {answers:?}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("config/secret.txt")).unwrap(),
        "password=hunter2\n"
    );
}

/// Regression: grep read every file under its path, so it showed the content of a
/// file `read_file` is refused.
#[tokio::test]
async fn grep_does_not_search_files_the_policy_denies_reading() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join(".env"), "TOKEN=canary").unwrap();
    std::fs::write(
        dir.path().join("app.txt"),
        "TOKEN is read from the environment",
    )
    .unwrap();
    let policy: Arc<dyn io_harness::policy::PolicyGate> = Arc::new(Policy::builtin());
    let ctx = ToolContext {
        workspace: Arc::new(Workspace::open(dir.path()).unwrap()),
        limits: ToolLimits::default(),
        exec: None,
        read_gate: Some(policy.clone()),
        memory: None,
    };
    let out = ToolRegistry::standard()
        .dispatch(
            &ctx,
            policy.as_ref(),
            "grep",
            &serde_json::json!({"pattern": "TOKEN"}),
        )
        .await;
    assert!(!out.is_error, "{}", out.content);
    assert!(
        out.content.contains("app.txt") && !out.content.contains("canary"),
        "{}",
        out.content
    );
    assert!(
        out.content
            .contains("1 files not searched: the policy denies"),
        "{}",
        out.content
    );
}

#[test]
fn public_policy_types_are_send_and_sync() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<Policy>();
    send_sync::<PolicyLayers>();
    send_sync::<ApprovalRequest>();
    send_sync::<Approval>();
    send_sync::<Arc<dyn Approver>>();
    send_sync::<Callback<fn(&ApprovalRequest) -> Approval>>();
    send_sync::<ProjectPolicy>();
}

/// Registry settings files are denied when they hold a credential and readable when
/// they do not, by `read_file` and inside the sandbox alike (policy round 2, route 3).
#[tokio::test]
async fn registry_settings_are_denied_only_when_they_hold_a_credential() {
    use io_harness::provider::{ScriptTurn, Scripted};
    use io_harness::{RunOutcome, Store, TaskContract, Verification, run};
    use serde_json::json;
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path();
    std::fs::create_dir_all(ws.join("web")).unwrap();
    std::fs::write(
        ws.join(".npmrc"),
        "//registry.npmjs.org/:_authToken=npm_canary123\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("web/.npmrc"),
        "registry=https://registry.example/\n",
    )
    .unwrap();
    std::fs::write(
        ws.join(".pypirc"),
        "[pypi]\nusername = __token__\npassword = pypi-canary456\n",
    )
    .unwrap();
    std::fs::write(
        ws.join("web/.pypirc"),
        "[distutils]\nindex-servers = pypi\n",
    )
    .unwrap();
    let read = |p: &str| ScriptTurn::tool("read_file", json!({"path": p}));
    let cat = |p: &str| ScriptTurn::tool("run_command", json!({"argv": ["cat", p]}));
    let provider = Scripted::new(vec![
        read(".npmrc"),
        read("web/.npmrc"),
        read(".pypirc"),
        read("web/.pypirc"),
        cat(".npmrc"),
        cat("web/.npmrc"),
        ScriptTurn::text("done"),
    ]);
    let c = TaskContract::workspace(
        "g",
        ws,
        Verification::file_contains("web/.npmrc", "registry"),
    );
    let store = Store::memory().unwrap();
    let r = run(&c, &provider, &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success, "{r:?}");
    let steps = store.steps(r.run_id).unwrap();
    let out = |i: usize| steps[i].tool_calls[0].clone();
    for (i, denied) in [(0, true), (1, false), (2, true), (3, false)] {
        let c = out(i);
        assert_eq!(c.is_error, denied, "step {}: {}", i + 1, c.output);
        assert_eq!(
            c.output.contains("holds a credential"),
            denied,
            "{}",
            c.output
        );
    }
    assert!(out(1).output.contains("registry.example"));
    let sandboxed = out(4).output;
    assert!(
        !sandboxed.contains("canary123"),
        "the sandbox masks it: {sandboxed}"
    );
    assert!(
        out(5).output.contains("registry.example"),
        "{}",
        out(5).output
    );
    let pe = store.policy_events(r.run_id).unwrap();
    assert!(
        pe.iter().any(|p| p.target == ".npmrc"
            && p.decision == "deny"
            && p.rule == ".npmrc (holds a credential)"),
        "{pe:?}"
    );
}

/// Exec rules judge every command an argv runs, not the program name alone (policy
/// round 2, route 2: `env curl`, `sh -c 'curl …'`, `find -delete`, `python -c`).
/// Issue 16's adversary (E1–E4): launchers the wrapper list did not know, a wrapper's
/// shell-string form, shell grammar (`!`, `coproc`), another shell's name and a
/// program of the workspace all ran a denied `id`. Each is now refused or asked
/// about; nothing of it is allowed. (The view holds the rule too: a denied program is
/// masked, `workspace_guard::a_denied_program_is_not_in_the_view_for_an_interpreter_to_reach`.)
#[test]
fn launchers_shell_forms_and_workspace_programs_do_not_get_past_an_exec_deny() {
    use io_harness::policy::command_line::quote;
    let mut p = Policy::builtin().with_exec_isolation(Isolation::Native);
    p.add_run_rule(Rule::deny(Exec, "id")).unwrap();
    let decide = |argv: &[&str]| {
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        p.decide(&Action::new(Exec, quote(&argv))).decision
    };
    for argv in [
        &["setarch", "x86_64", "id"][..],
        &["setarch", "x86_64", "-R", "id"],
        &["linux64", "id"],
        &["prlimit", "--nofile=10", "id"],
        &["setpriv", "--reuid", "1000", "id"],
        &["script", "-qc", "id", "/dev/null"],
        &["ssh-agent", "id"],
        &["/lib64/ld-linux-x86-64.so.2", "/usr/bin/id"],
        &["flock", "/tmp/lk", "-c", "id"],
        &["sh", "-c", "! id"],
        &["sh", "-c", "true && ! id"],
        &["bash", "-c", "coproc id >&2; wait"],
        &["rbash", "-c", "id"],
        &["./x.sh"],
        &["./myid", "-u"],
        &["bin/tool"],
        &["strace", "-f", "id"],
        &["some-launcher", "--flag", "/usr/bin/id"],
    ] {
        assert_ne!(decide(argv), Allow, "{argv:?}");
    }
    for argv in [
        &["setarch", "x86_64", "true"][..],
        &["sh", "-c", "! true"],
        &["ls", "-l"],
        &["flock", "/tmp/lk", "-c", "echo hi"],
    ] {
        assert_eq!(decide(argv), Allow, "{argv:?}");
    }
}

#[test]
fn exec_rules_judge_arguments_and_see_through_wrappers() {
    use io_harness::policy::command_line::quote;
    let mut p = Policy::builtin().with_exec_isolation(Isolation::Native);
    p.add_run_rule(Rule::deny(Exec, "curl")).unwrap();
    p.add_run_rule(Rule::ask(Exec, "git push")).unwrap();
    p.add_run_rule(Rule::deny(Exec, "find ** -delete")).unwrap();
    p.add_run_rule(Rule::allow(Exec, "node **")).unwrap();
    let decide = |argv: &[&str]| {
        let argv: Vec<String> = argv.iter().map(|s| s.to_string()).collect();
        let d = p.decide(&Action::new(Exec, quote(&argv)));
        (d.decision, d.rule)
    };
    let curl = (Deny, "curl".to_string());
    for argv in [
        &["curl", "http://x"][..],
        &["/usr/bin/curl", "http://x"],
        &["env", "curl", "http://x"],
        &["/usr/bin/env", "-i", "A=1", "curl", "http://x"],
        &[
            "nice", "-n", "5", "timeout", "-s", "KILL", "10", "curl", "x",
        ],
        &["sh", "-c", "curl http://x"],
        &["bash", "-c", "cd a && X=1 curl -s x | tee out"],
        &["xargs", "-n", "1", "curl"],
        &["find", ".", "-name", "u", "-exec", "curl", "{}", ";"],
        &["nohup", "setsid", "stdbuf", "-oL", "curl", "x"],
    ] {
        assert_eq!(decide(argv), curl, "{argv:?}");
    }
    assert_eq!(
        decide(&["git", "push", "--force"]),
        (Ask, "git push".into())
    );
    assert_eq!(decide(&["env", "git", "push"]), (Ask, "git push".into()));
    assert_eq!(decide(&["git", "status"]).0, Allow);
    assert_eq!(
        decide(&["find", ".", "-name", "*.o", "-delete"]),
        (Deny, "find ** -delete".into())
    );
    assert_eq!(decide(&["find", ".", "-name", "*.o"]).0, Allow);
    // Code the policy cannot read is asked about while a program is limited…
    let (d, rule) = decide(&["python3", "-c", "import os; os.system('curl x')"]);
    assert_eq!(d, Ask, "{rule}");
    assert!(rule.starts_with("undecidable: python3"), "{rule}");
    assert_eq!(decide(&["sh", "-c", "$(echo curl) x"]).0, Ask);
    // …unless the operator allowed that interpreter explicitly.
    assert_eq!(decide(&["node", "-e", "1"]), (Allow, "node **".into()));
    // Without a limit on programs, the default stands: no ask at every `python`.
    let plain = Policy::builtin().with_exec_isolation(Isolation::Native);
    let d = plain.decide(&Action::new(Exec, "python3 -c 'print(1)'"));
    assert_eq!((d.decision, d.rule.as_str()), (Allow, "default"));
}

/// An allow about arguments grants exactly what it names (`**` for any further ones).
#[test]
fn argv_allows_grant_only_what_they_name() {
    let mut p = Policy::builtin().with_exec_isolation(Isolation::Weaker);
    p.add_run_rule(Rule::allow(Exec, "cargo test **")).unwrap();
    p.add_run_rule(Rule::allow(Exec, "make check")).unwrap();
    let d = |t: &str| p.decide(&Action::new(Exec, t)).decision;
    assert_eq!(d("cargo test --offline"), Allow);
    assert_eq!(d("cargo test"), Allow);
    assert_eq!(d("cargo publish"), Ask);
    assert_eq!(d("make check"), Allow);
    assert_eq!(d("make check install"), Ask);
    assert_eq!(
        d("./cargo test"),
        Ask,
        "an allow never reaches a workspace program"
    );
}

/// Through a real run: the agent's `run_command` is refused when a wrapper would run
/// a denied program, and the record names the whole argv and the rule.
#[tokio::test]
async fn a_denied_program_behind_a_wrapper_is_refused_in_a_run() {
    use io_harness::provider::{ScriptTurn, Scripted};
    use io_harness::{RunOutcome, Store, TaskContract, Verification, run};
    use serde_json::json;
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "a\n").unwrap();
    let c = TaskContract::workspace("g", dir.path(), Verification::file_contains("a.txt", "a"))
        .policy_rule(Rule::deny(Exec, "curl"));
    let cmd = |argv: &[&str]| ScriptTurn::tool("run_command", json!({ "argv": argv }));
    let provider = Scripted::new(vec![
        cmd(&["env", "curl", "http://127.0.0.1:9/"]),
        cmd(&["sh", "-c", "true && curl http://127.0.0.1:9/"]),
        cmd(&["echo", "curl"]),
        ScriptTurn::text("done"),
    ]);
    let store = Store::memory().unwrap();
    let r = run(&c, &provider, &store).await.unwrap();
    assert_eq!(r.outcome, RunOutcome::Success, "{r:?}");
    let steps = store.steps(r.run_id).unwrap();
    for i in [0, 1] {
        let call = &steps[i].tool_calls[0];
        assert!(
            call.is_error && call.output.contains("rule curl"),
            "{}",
            call.output
        );
    }
    assert!(
        !steps[2].tool_calls[0].is_error,
        "an argument named curl is no call of it"
    );
    let pe = store.policy_events(r.run_id).unwrap();
    assert!(
        pe.iter().any(|p| p.target == "env curl http://127.0.0.1:9/"
            && p.decision == "deny"
            && p.rule == "curl"),
        "{pe:?}"
    );
}

/// A store or an audit log inside the workspace is refused before the run starts (an
/// agent's `write_file` once destroyed a store kept there; policy round 2, route 7).
#[tokio::test]
async fn a_store_or_audit_log_inside_the_workspace_is_refused_at_start() {
    use io_harness::audit::AuditLog;
    use io_harness::provider::{ScriptTurn, Scripted};
    use io_harness::run::{RunError, RunOptions};
    use io_harness::{Store, TaskContract, Verification, run, run_with};
    let dir = tempfile::tempdir().unwrap();
    let ws = dir.path().join("ws");
    std::fs::create_dir(&ws).unwrap();
    let c = TaskContract::workspace("g", &ws, Verification::file_contains("a.txt", "a"));
    let done = || Scripted::new(vec![ScriptTurn::text("done")]);
    let inside = Store::open(ws.join("store.db")).unwrap();
    let err = run(&c, &done(), &inside).await.unwrap_err();
    assert!(
        matches!(&err, RunError::RecordInsideWorkspace { what: "store", .. }),
        "{err}"
    );
    assert_eq!(err.exit_code(), 2);
    assert!(inside.runs().unwrap().is_empty(), "nothing was recorded");
    let outside = Store::open(dir.path().join("store.db")).unwrap();
    let opts = RunOptions {
        audit: Some(AuditLog::new(ws.join("deep/audit"))),
        ..RunOptions::default()
    };
    let err = run_with(&c, &done(), &outside, opts).await.unwrap_err();
    assert!(
        matches!(
            &err,
            RunError::RecordInsideWorkspace {
                what: "audit log",
                ..
            }
        ),
        "{err}"
    );
    // Beside the workspace is fine.
    let opts = RunOptions {
        audit: Some(AuditLog::new(dir.path().join("audit"))),
        ..RunOptions::default()
    };
    std::fs::write(ws.join("a.txt"), "a\n").unwrap();
    assert!(run_with(&c, &done(), &outside, opts).await.is_ok());
}
