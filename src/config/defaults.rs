//! The built-in values of the keys configuration can set, as a task file would spell
//! them: what `io-harness config` shows as `default`, and what a project's value is
//! compared with when it must only narrow. A test loads a task file that spells each
//! of them out and checks it is the contract the code builds without them, so this
//! table cannot drift from the code's defaults.

use toml::Value;

use super::doc::KeyPath;

fn path(dotted: &str) -> KeyPath {
    dotted.split('.').map(str::to_string).collect()
}

/// Every defaulted key with its value.
pub(super) fn table() -> Vec<(KeyPath, Value)> {
    let s = |v: &str| Value::String(v.into());
    let i = Value::Integer;
    let b = Value::Boolean;
    let empty = || Value::Array(Vec::new());
    [
        ("provider.max_output_tokens", i(8192)),
        ("budget.max_steps", i(40)),
        ("retry.max_attempts", i(5)),
        ("retry.base", s("1s")),
        ("retry.cap", s("60s")),
        ("retry.jitter", b(true)),
        ("retry.malformed_attempts", i(2)),
        ("retry.max_wait", s("5m")),
        ("retry.probe_steps", i(10)),
        ("retry.probe_interval", s("5m")),
        ("sandbox.network", s("none")),
        ("sandbox.env", empty()),
        ("sandbox.read_only_paths", empty()),
        ("sandbox.allow_weaker", b(false)),
        ("sandbox.shell", b(false)),
        ("sandbox.allow_new_repos", b(false)),
        ("sandbox.limits.cpu_secs", i(600)),
        ("sandbox.limits.wall_secs", i(900)),
        ("sandbox.limits.memory", s("4GiB")),
        ("sandbox.limits.processes", i(512)),
        ("sandbox.limits.open_files", i(1024)),
        ("sandbox.limits.output", s("1MiB")),
        ("sandbox.limits.disk", s("8GiB")),
    ]
    .into_iter()
    .map(|(k, v)| (path(k), v))
    .collect()
}

/// What a size-judged key is when no layer sets it and the table above has no entry
/// (these defaults belong to the provider kind's spec, built by the loader): a project
/// is judged against them, never against "unlimited".
pub(super) fn unset_size(path: &[String]) -> Option<Value> {
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    Some(match p.as_slice() {
        ["provider", "max_reply_bytes"] => Value::String("8MiB".into()),
        ["provider", "stream_idle_timeout"] => Value::String("120s".into()),
        ["provider", "request_timeout"] => Value::String("10m".into()),
        _ => return None,
    })
}

/// Keys a project's config may set only to a value no larger than the one beneath
/// it (a budget, a cap). Unset beneath means unlimited: any value narrows.
pub(super) fn narrows_by_size(path: &[String]) -> bool {
    let p: Vec<&str> = path.iter().map(String::as_str).collect();
    matches!(
        p.as_slice(),
        ["budget", _]
            | ["sandbox", "limits", _]
            | ["sandbox", "scan_limit"]
            | [
                "retry",
                "max_attempts" | "malformed_attempts" | "max_wait" | "cap"
            ]
            | [
                "provider",
                "max_output_tokens"
                    | "thinking_budget"
                    | "stream_idle_timeout"
                    | "max_reply_bytes"
                    | "request_timeout"
            ]
    )
}
