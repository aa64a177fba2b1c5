//! The loader against task files written to break it: each error names file, line
//! and key.

use super::*;
use crate::contract::*;
use std::time::Duration;

fn load(text: &str) -> Result<TaskContract, ContractError> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("task.toml");
    std::fs::write(&file, text).unwrap();
    let out = from_file(&file);
    drop(dir);
    out
}

fn invalid(text: &str) -> (usize, String, String) {
    match load(text) {
        Err(ContractError::Invalid {
            line, key, message, ..
        }) => (line, key, message),
        other => panic!("expected Invalid, got {other:?}"),
    }
}

const OK: &str = "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n";

#[test]
fn minimal_file_loads_with_defaults() {
    let c = load(OK).unwrap();
    assert_eq!(c.goal, "g");
    assert_eq!(c.budget.max_steps, 40);
    assert_eq!(c.verify.max_attempts, 5);
    assert_eq!(c.workspace, WorkspaceMode::InPlace);
    assert!(
        matches!(&c.verify.criteria[0], Verification::Command { argv, expect_exit: 0, .. } if argv == &["true"])
    );
}

#[test]
fn network_allowlist_parses_hosts_and_pins() {
    let c = load(&format!(
        "{OK}[sandbox]\nnetwork = \"allowlist\"\nallow_hosts = [\"crates.io\", \"*.pypi.org:443\"]\nresolve = {{ \"Mirror.internal\" = \"10.0.0.5\" }}\n"
    ))
    .unwrap();
    assert_eq!(c.sandbox.network, NetworkSetting::Allowlist);
    let rules: Vec<String> = c
        .sandbox
        .host_rules()
        .unwrap()
        .iter()
        .map(ToString::to_string)
        .collect();
    assert_eq!(rules, ["crates.io", "*.pypi.org:443"]);
    assert_eq!(
        c.sandbox.resolve.get("mirror.internal"),
        Some(&"10.0.0.5".parse().unwrap())
    );
}

#[test]
fn bad_egress_settings_name_the_entry() {
    let sb = |body: &str| invalid(&format!("{OK}[sandbox]\n{body}\n"));
    let (_, key, msg) = sb("network = \"allowlist\"\nallow_hosts = [\"crates.io\", \"a*b.org\"]");
    assert_eq!(key, "sandbox.allow_hosts[1]");
    assert!(msg.contains("a*b.org"), "{msg}");
    let (_, key, msg) = sb("network = \"allowlist\"\nallow_hosts = [\"x.org:99999\"]");
    assert_eq!(key, "sandbox.allow_hosts[0]");
    assert!(msg.contains("port"), "{msg}");
    let (_, key, _) = sb("network = \"allowlist\"");
    assert_eq!(key, "sandbox.allow_hosts");
    let (_, key, msg) = sb("allow_hosts = [\"crates.io\"]");
    assert_eq!(key, "sandbox.allow_hosts");
    assert!(msg.contains("allowlist"), "{msg}");
    let (_, key, _) = sb("network = \"sometimes\"");
    assert_eq!(key, "sandbox.network");
    let (_, key, msg) = sb(
        "network = \"allowlist\"\nallow_hosts = [\"a.org\"]\nresolve = { \"a.org\" = \"not-an-ip\" }",
    );
    assert_eq!(key, "sandbox.resolve.\"a.org\"");
    assert!(msg.contains("not-an-ip"), "{msg}");
    let (_, key, _) = sb(
        "network = \"allowlist\"\nallow_hosts = [\"a.org\"]\nresolve = { \"*.a.org\" = \"10.0.0.1\" }",
    );
    assert!(key.starts_with("sandbox.resolve."), "{key}");
    // An empty list with the default posture is fine (the canonical task file has it).
    assert!(
        load(&format!(
            "{OK}[sandbox]\nnetwork = \"none\"\nallow_hosts = []\n"
        ))
        .is_ok()
    );
}

#[test]
fn unknown_key_is_named_with_its_line() {
    let (line, key, msg) =
        invalid("goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[budget]\nmax_stepz = 3\n");
    assert_eq!((line, key.as_str()), (5, "max_stepz"));
    assert!(msg.contains("unknown field"), "{msg}");
}

#[test]
fn wrong_type_names_line() {
    let (line, _, msg) =
        invalid("goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[budget]\nmax_steps = \"ten\"\n");
    assert_eq!(line, 5);
    assert!(msg.contains("integer") || msg.contains("u32"), "{msg}");
}

#[test]
fn zero_steps_refused_at_its_line() {
    let (line, key, _) =
        invalid("goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[budget]\nmax_steps = 0\n");
    assert_eq!((line, key.as_str()), (5, "budget.max_steps"));
}

#[test]
fn missing_root_refused() {
    let (line, key, msg) =
        invalid("goal = \"g\"\nroot = \"nope/not/here\"\n[verify]\ncommand = [\"true\"]\n");
    assert_eq!((line, key.as_str()), (2, "root"));
    assert!(msg.contains("nope/not/here"), "{msg}");
}

#[test]
fn cost_budget_with_unknown_price_refused() {
    let (line, key, msg) = invalid(
        "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[budget]\nmax_cost_usd = 1.5\n[provider]\nkind = \"openai\"\nmodel = \"mystery-1\"\n",
    );
    assert_eq!((line, key.as_str()), (5, "budget.max_cost_usd"));
    assert!(msg.contains("mystery-1"), "{msg}");
}

#[test]
fn cost_budget_with_user_price_accepted() {
    let c = load(
        "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[budget]\nmax_cost_usd = 1.5\n[provider]\nkind = \"openai\"\nmodel = \"mystery-1\"\n[prices.mystery-1]\ninput = 1.0\noutput = 2.0\n",
    )
    .unwrap();
    assert_eq!(c.price_table().get("mystery-1").unwrap().output, 2.0);
}

#[test]
fn no_criterion_refused() {
    let (_, key, _) = invalid("goal = \"g\"\n[verify]\nmax_attempts = 2\n");
    assert_eq!(key, "verify");
}

#[test]
fn hostile_verify_path_refused() {
    let (_, key, _) = invalid(
        "goal = \"g\"\n[verify]\nfile_contains = { file = \"../etc/passwd\", needle = \"x\" }\n",
    );
    assert_eq!(key, "verify.file_contains");
}

#[test]
fn syntax_error_has_line() {
    let (line, key, _) = invalid("goal = \"g\"\n[verify\n");
    assert_eq!((line, key.as_str()), (2, "(syntax)"));
}

#[test]
fn duration_parsed_and_bad_duration_refused() {
    let c =
        load("goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[budget]\nmax_duration = \"15m\"\n")
            .unwrap();
    assert_eq!(c.budget.max_duration, Some(Duration::from_secs(900)));
    let (line, key, _) = invalid(
        "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[budget]\nmax_duration = \"soon\"\n",
    );
    assert_eq!((line, key.as_str()), (5, "budget.max_duration"));
}

#[test]
fn mcp_servers_load_with_defaults() {
    let c = load(
        "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n\n[[mcp]]\nname = \"fs\"\ncommand = \"node\"\nargs = [\"server.js\", \".\"]\nrequired = true\ncall_timeout = \"5s\"\ndeny_tools = [\"write_*\"]\n\n[[mcp]]\nname = \"web\"\nurl = \"http://127.0.0.1:3001/mcp\"\nbearer_token_env = \"WEB_TOKEN\"\n",
    )
    .unwrap();
    assert_eq!(c.mcp.len(), 2);
    let fs = &c.mcp[0];
    assert!(fs.required);
    assert_eq!(fs.call_timeout, Duration::from_secs(5));
    assert!(!fs.offers("write_file"));
    assert_eq!(
        fs.transport,
        crate::contract::mcp::McpTransport::Stdio {
            argv: vec!["node".into(), "server.js".into(), ".".into()],
            env: vec![],
            sandbox: true
        }
    );
    // The stored form round-trips (resume compares contracts).
    let json = serde_json::to_string(&c).unwrap();
    let back: TaskContract = serde_json::from_str(&json).unwrap();
    assert_eq!(back, c);
    assert!(!json.contains("s3cret"));
}

#[test]
fn bad_mcp_entries_are_named_with_their_line() {
    let head = "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n";
    let (line, key, _) = invalid(&format!("{head}[[mcp]]\nname = \"x\"\n"));
    assert_eq!((line, key.as_str()), (4, "mcp[0].command"));
    let (line, key, _) = invalid(&format!(
        "{head}[[mcp]]\nname = \"x\"\ncommand = \"a\"\n\n[[mcp]]\nname = \"x\"\ncommand = \"b\"\n"
    ));
    assert_eq!((line, key.as_str()), (8, "mcp[1].name"));
    let (_, key, _) = invalid(&format!(
        "{head}[[mcp]]\nname = \"x\"\nurl = \"http://h/mcp\"\nargs = [\"a\"]\n"
    ));
    assert_eq!(key, "mcp[0].args");
    let (line, key, _) = invalid(&format!(
        "{head}[[mcp]]\nname = \"x\"\ncommand = \"a\"\ncolour = 1\n"
    ));
    assert_eq!((line, key.as_str()), (7, "colour"));
    let (_, key, _) = invalid(&format!(
        "{head}[[mcp]]\nname = \"a__b\"\ncommand = \"a\"\n"
    ));
    assert_eq!(key, "mcp[0].name");
    let (_, key, _) = invalid(&format!(
        "{head}[[mcp]]\nname = \"x\"\ncommand = \"a\"\ncall_timeout = \"never\"\n"
    ));
    assert_eq!(key, "mcp[0].call_timeout");
}

#[test]
fn mcp_path_args_load_and_wrong_types_name_file_line_and_key() {
    let head =
        "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[[mcp]]\nname = \"x\"\ncommand = \"a\"\n";
    let c = load(&format!(
        "{head}path_args = {{ export = [\"target\", \"files/*/path\"], none = [] }}\n"
    ))
    .unwrap();
    let m = &c.mcp[0];
    assert_eq!(m.path_args["export"], ["target", "files/*/path"]);
    assert!(m.path_args["none"].is_empty());
    assert_eq!(m.path_args_for("export").len(), 2);
    assert!(m.path_args_for("other").is_empty());
    let json = serde_json::to_string(&c).unwrap();
    assert_eq!(serde_json::from_str::<TaskContract>(&json).unwrap(), c);
    // Without path_args the stored form is unchanged (older records still compare).
    let plain = load(head).unwrap();
    assert!(!serde_json::to_string(&plain).unwrap().contains("path_args"));

    let (line, key, msg) = invalid(&format!("{head}path_args = [\"path\"]\n"));
    assert_eq!((line, key.as_str()), (7, "mcp[0].path_args"), "{msg}");
    assert!(msg.contains("table"), "{msg}");
    let (line, key, msg) = invalid(&format!("{head}path_args = {{ read_file = \"path\" }}\n"));
    assert_eq!(
        (line, key.as_str()),
        (7, "mcp[0].path_args.read_file"),
        "{msg}"
    );
    assert!(msg.contains("array"), "{msg}");
    let (line, key, _) = invalid(&format!("{head}path_args = {{ read_file = [1] }}\n"));
    assert_eq!((line, key.as_str()), (7, "mcp[0].path_args.read_file"));
    let (line, key, msg) = invalid(&format!(
        "{head}\n[mcp.path_args]\nread_file = [\"a//b\"]\n"
    ));
    assert_eq!(key, "mcp[0].path_args.read_file", "{msg}");
    assert!(line >= 4, "{line}");
    assert!(msg.contains("empty part"), "{msg}");
}

#[test]
fn context_section_parses_and_bad_values_name_file_line_and_key() {
    let c = load(&format!("{OK}[context]\nmax_tokens = 60_000\n")).unwrap();
    assert_eq!(c.context.max_tokens, Some(60_000));
    assert!(c.context.assemble);
    let c = load(&format!("{OK}[context]\nassemble = false\n")).unwrap();
    assert!(!c.context.assemble);
    assert_eq!(load(OK).unwrap().context, ContextSettings::default());
    let (line, key, msg) = invalid(&format!("{OK}[context]\nmax_tokens = 10\n"));
    assert_eq!((line, key.as_str()), (5, "context.max_tokens"));
    assert!(msg.contains("too small"), "{msg}");
    let (line, key, _) = invalid(&format!("{OK}[context]\nmax_tokenz = 9000\n"));
    assert_eq!((line, key.as_str()), (5, "max_tokenz"));
    let (line, _, msg) = invalid(&format!("{OK}[context]\nmax_tokens = \"lots\"\n"));
    assert_eq!(line, 5);
    assert!(msg.contains("integer") || msg.contains("u64"), "{msg}");
    let (line, _, _) = invalid(&format!("{OK}[context]\nmax_tokens = -5\n"));
    assert_eq!(line, 5);
}

#[test]
fn retry_malformed_attempts_defaults_to_two_and_zero_names_file_line_and_key() {
    assert_eq!(load(OK).unwrap().retry.malformed_attempts, 2);
    let c = load(&format!("{OK}[retry]\nmalformed_attempts = 3\n")).unwrap();
    assert_eq!(c.retry.malformed_attempts, 3);
    let (line, key, msg) = invalid(&format!("{OK}[retry]\nmalformed_attempts = 0\n"));
    assert_eq!((line, key.as_str()), (5, "retry.malformed_attempts"));
    assert!(msg.contains("at least 1"), "{msg}");
}

/// Issue 17.9: a thinking budget the server refuses (under 1,024, not below
/// `max_output_tokens`) was sent anyway, and on an OpenAI provider dropped unsaid.
#[test]
fn thinking_budget_the_server_would_refuse_names_file_line_and_key() {
    let anthropic = "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[provider]\nkind = \"anthropic\"\nmodel = \"m\"\nmax_output_tokens = 8000\n";
    let c = load(&format!("{anthropic}thinking_budget = 4000\n")).unwrap();
    assert_eq!(c.providers[0].thinking_budget, Some(4000));
    for (budget, says) in [
        ("512", "minimum of 1024"),
        ("8000", "below provider.max_output_tokens"),
    ] {
        let (line, key, msg) = invalid(&format!("{anthropic}thinking_budget = {budget}\n"));
        assert_eq!(
            (line, key.as_str()),
            (8, "provider.thinking_budget"),
            "{msg}"
        );
        assert!(msg.contains(says), "{msg}");
    }
    let openai = anthropic.replace("anthropic", "openai");
    let (line, key, msg) = invalid(&format!("{openai}thinking_budget = 4000\n"));
    assert_eq!((line, key.as_str()), (8, "provider.thinking_budget"));
    assert!(msg.contains("reasoning_effort"), "{msg}");
    // A fallback of another kind does not inherit it.
    let c = load(&format!(
        "{anthropic}thinking_budget = 4000\nfallback = [{{ kind = \"openai\", model = \"x\" }}]\n"
    ))
    .unwrap();
    assert_eq!(c.providers[1].thinking_budget, None);
}

#[test]
fn stream_idle_timeout_parses_inherits_and_bad_values_name_file_line_and_key() {
    let p = "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[provider]\nkind = \"openai\"\nmodel = \"m\"\n";
    assert_eq!(load(p).unwrap().providers[0].stream_idle_timeout, None);
    let c = load(&format!(
        "{p}stream_idle_timeout = \"30s\"\nfallback = [{{ kind = \"anthropic\", model = \"x\" }}]\n"
    ))
    .unwrap();
    let secs = |i: usize| c.providers[i].stream_idle_timeout.map(|d| d.as_secs());
    assert_eq!((secs(0), secs(1)), (Some(30), Some(30)));
    let (line, key, msg) = invalid(&format!("{p}stream_idle_timeout = \"soon\"\n"));
    assert_eq!(
        (line, key.as_str()),
        (7, "provider.stream_idle_timeout"),
        "{msg}"
    );
    let (line, key, msg) = invalid(&format!("{p}stream_idle_timeout = \"0s\"\n"));
    assert_eq!(
        (line, key.as_str()),
        (7, "provider.stream_idle_timeout"),
        "{msg}"
    );
}

/// Issue 19.6: a missing instructions file was told only to the model, and a base URL
/// no client could reach retried for eleven seconds. Both are load errors now.
#[test]
fn a_missing_instructions_file_or_an_unreachable_base_url_names_file_line_and_key() {
    let (line, key, msg) = invalid(&format!("instructions = \"AGENTS.md\"\n{OK}"));
    assert_eq!((line, key.as_str()), (1, "instructions"), "{msg}");
    assert!(
        msg.contains("AGENTS.md is not a file in the workspace"),
        "{msg}"
    );
    let p = "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[provider]\nkind = \"openai\"\nmodel = \"m\"\n";
    for bad in ["localhost:8080/v1", "ftp://h/v1", "http://"] {
        let (line, key, msg) = invalid(&format!("{p}base_url = \"{bad}\"\n"));
        assert_eq!(
            (line, key.as_str()),
            (4, "provider.base_url"),
            "{bad}: {msg}"
        );
    }
    assert!(load(&format!("{p}base_url = \"http://127.0.0.1:8080/v1\"\n")).is_ok());
}

#[test]
fn sandbox_disk_limit_parses_defaults_and_bad_values_name_file_line_and_key() {
    let c = load(&format!("{OK}[sandbox]\nlimits = {{ disk = \"2GiB\" }}\n")).unwrap();
    assert_eq!(c.sandbox.limits.disk, Some(2 << 30));
    let c = load(&format!("{OK}[sandbox]\nlimits = {{ disk = 1048576 }}\n")).unwrap();
    assert_eq!(c.sandbox.limits.disk, Some(1 << 20));
    // Unset: the sandbox's default (8 GiB) applies.
    assert_eq!(load(OK).unwrap().sandbox.limits.disk, None);
    assert_eq!(
        crate::sandbox::SandboxLimits::default().disk_bytes,
        Some(8 << 30)
    );
    let (line, key, msg) = invalid(&format!("{OK}[sandbox]\nlimits = {{ disk = 0 }}\n"));
    assert_eq!((line, key.as_str()), (5, "sandbox.limits.disk"));
    assert!(msg.contains("more than zero"), "{msg}");
    let (line, key, _) = invalid(&format!("{OK}[sandbox]\nlimits = {{ disk = \"lots\" }}\n"));
    assert_eq!((line, key.as_str()), (5, "sandbox.limits.disk"));
    let (line, key, _) = invalid(&format!("{OK}[sandbox]\nlimits = {{ disk = true }}\n"));
    assert_eq!((line, key.as_str()), (5, "sandbox.limits.disk"));
}

#[test]
fn sandbox_uid_defaults_to_nobody_and_refuses_root() {
    let c = load(OK).unwrap();
    assert_eq!((c.sandbox.uid, c.sandbox.sandbox_uid()), (None, 65534));
    let c = load(&format!("{OK}[sandbox]\nuid = 1000\n")).unwrap();
    assert_eq!(c.sandbox.sandbox_uid(), 1000);
    for bad in ["0", "-1", "4294967295"] {
        let (line, key, msg) = invalid(&format!("{OK}[sandbox]\nuid = {bad}\n"));
        assert_eq!((line, key.as_str()), (5, "sandbox.uid"), "{bad}: {msg}");
    }
    // A wrong type is named by its line, as for every key.
    let (line, _, msg) = invalid(&format!("{OK}[sandbox]\nuid = \"nobody\"\n"));
    assert_eq!(line, 5);
    assert!(msg.contains("integer") || msg.contains("i64"), "{msg}");
    let (_, _, msg) = invalid(&format!("{OK}[sandbox]\nuid = 0\n"));
    assert!(msg.contains("host root"), "{msg}");
}

#[test]
fn tools_bounds_default_and_bad_values_name_file_line_and_key() {
    let c = load(OK).unwrap();
    assert_eq!(
        (c.tools.max_argument_bytes, c.tools.max_calls_per_reply),
        (1 << 20, 64)
    );
    let c = load(&format!(
        "{OK}[tools]\nmax_argument_bytes = \"64KiB\"\nmax_calls_per_reply = 8\n"
    ))
    .unwrap();
    assert_eq!(
        (c.tools.max_argument_bytes, c.tools.max_calls_per_reply),
        (64 << 10, 8)
    );
    for (text, line, key) in [
        (
            "[tools]\nmax_argument_bytes = 0\n",
            5,
            "tools.max_argument_bytes",
        ),
        (
            "[tools]\nmax_argument_bytes = \"lots\"\n",
            5,
            "tools.max_argument_bytes",
        ),
        (
            "[tools]\nmax_calls_per_reply = 0\n",
            5,
            "tools.max_calls_per_reply",
        ),
    ] {
        let (l, k, msg) = invalid(&format!("{OK}{text}"));
        assert_eq!((l, k.as_str()), (line, key), "{text}: {msg}");
    }
}

#[test]
fn workspace_check_keys_default_parse_and_refuse_impossible_values() {
    let c = load(OK).unwrap();
    assert!(
        !c.sandbox.allow_new_repos,
        "new repositories are quarantined by default"
    );
    assert_eq!(c.sandbox.scan_limit, None, "the default limit applies");
    let c = load(&format!(
        "{OK}[sandbox]\nallow_new_repos = true\nscan_limit = 5000\n"
    ))
    .unwrap();
    assert!(c.sandbox.allow_new_repos);
    assert_eq!(c.sandbox.scan_limit, Some(5000));
    for bad in ["0", "-3"] {
        let (line, key, message) = invalid(&format!("{OK}[sandbox]\nscan_limit = {bad}\n"));
        assert_eq!((line, key.as_str()), (5, "sandbox.scan_limit"), "{message}");
        assert!(message.contains("positive"), "{message}");
    }
    // A wrong type is the parser's error, at the key's line.
    let (line, _, message) = invalid(&format!("{OK}[sandbox]\nallow_new_repos = \"yes\"\n"));
    assert_eq!(line, 5, "{message}");
    assert!(message.contains("bool"), "{message}");
}

/// Issue 17.4, 17.5: the server's wait is bounded by `max_wait`; the breaker probes
/// the primary every `probe_steps` steps and `probe_interval`, whichever comes later.
#[test]
fn retry_max_wait_and_probe_keys_default_parse_and_name_file_line_and_key() {
    let d = load(OK).unwrap().retry;
    assert_eq!(
        (
            d.max_wait.as_secs(),
            d.probe_steps,
            d.probe_interval.as_secs()
        ),
        (300, 10, 300)
    );
    let c = load(&format!(
        "{OK}[retry]\nmax_wait = \"1s\"\nprobe_steps = 2\nprobe_interval = \"50ms\"\n"
    ))
    .unwrap()
    .retry;
    assert_eq!(
        (
            c.max_wait.as_millis(),
            c.probe_steps,
            c.probe_interval.as_millis()
        ),
        (1000, 2, 50)
    );
    for (text, key) in [
        ("max_wait = \"soon\"", "retry.max_wait"),
        ("probe_steps = 0", "retry.probe_steps"),
        ("probe_interval = \"often\"", "retry.probe_interval"),
    ] {
        let (line, k, msg) = invalid(&format!("{OK}[retry]\n{text}\n"));
        assert_eq!((line, k.as_str()), (5, key), "{msg}");
    }
}

/// Issue 17.7, 17.8: the reply limit, and the settings only an OpenAI-compatible
/// server has.
#[test]
fn provider_reply_limit_and_compatible_keys_parse_and_name_file_line_and_key() {
    use crate::contract::{ProviderKind, ToolChoice};
    let p = "goal = \"g\"\n[verify]\ncommand = [\"true\"]\n[provider]\nkind = \"openai-compatible\"\nmodel = \"m\"\nbase_url = \"http://127.0.0.1:8080/v1\"\n";
    let c = load(p).unwrap();
    let s = &c.providers[0];
    assert_eq!(s.kind, ProviderKind::OpenaiCompatible);
    assert_eq!(
        (s.max_reply_bytes, s.tool_choice, s.stream),
        (None, None, None)
    );
    let c = load(&format!(
        "{p}max_reply_bytes = \"1MiB\"\ntool_choice = \"required\"\nstream = false\nrequest_timeout = \"30s\"\n"
    ))
    .unwrap();
    let s = &c.providers[0];
    assert_eq!(s.max_reply_bytes, Some(1 << 20));
    assert_eq!(s.tool_choice, Some(ToolChoice::Required));
    assert_eq!(s.stream, Some(false));
    assert_eq!(s.request_timeout.map(|d| d.as_secs()), Some(30));
    for (text, key) in [
        ("max_reply_bytes = 0", "provider.max_reply_bytes"),
        ("max_reply_bytes = \"lots\"", "provider.max_reply_bytes"),
        ("tool_choice = \"always\"", "provider.tool_choice"),
        ("request_timeout = \"30s\"", "provider.request_timeout"),
    ] {
        let (line, k, msg) = invalid(&format!("{p}{text}\n"));
        assert_eq!(line, 8, "{text}: {msg}");
        assert_eq!(k, key, "{text}: {msg}");
    }
    let openai = p.replace("openai-compatible", "openai");
    let (line, k, msg) = invalid(&format!("{openai}stream = false\n"));
    assert_eq!((line, k.as_str()), (8, "provider.stream"), "{msg}");
    assert!(msg.contains("openai-compatible"), "{msg}");
}

#[test]
fn output_overflow_defaults_to_tail_and_a_bad_word_names_file_line_and_key() {
    use crate::contract::OverflowSetting;
    let c = load(OK).unwrap();
    assert_eq!(c.sandbox.limits.output_overflow, None);
    let c = load(&format!(
        "{OK}[sandbox]\nlimits = {{ output_overflow = \"kill\" }}\n"
    ))
    .unwrap();
    assert_eq!(
        c.sandbox.limits.output_overflow,
        Some(OverflowSetting::Kill)
    );
    let (line, key, msg) = invalid(&format!(
        "{OK}[sandbox]\nlimits = {{ output_overflow = \"drop\" }}\n"
    ));
    assert_eq!(
        (line, key.as_str()),
        (5, "sandbox.limits.output_overflow"),
        "{msg}"
    );
    assert!(
        msg.contains("\"drop\" is not \"tail\" or \"kill\""),
        "{msg}"
    );
}
