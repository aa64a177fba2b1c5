//! Every environment variable the harness reads, in one table: its name and what it
//! means. The README's "Environment variables" section documents exactly these, and a
//! test holds the three together — each variable documented is here, each one here is
//! documented, and every `std::env::var` / `var_os` in the sources reads a name from
//! this table (or, where the name comes from the operator's task file, says so).
//!
//! Why one table: a variable read in one module and documented nowhere is a setting no
//! operator can find, and one documented but no longer read is a setting that silently
//! does nothing. uv keeps its variables the same way (STYLE.md).
//!
//! Variables the operator names in a task file (`[sandbox] env`, an MCP server's `env`,
//! `bearer_token_env`) are passed through by those names and are not listed here.
//!
//! ```
//! let store = io_harness::env_vars::lookup("IO_HARNESS_STORE").unwrap();
//! assert!(store.meaning.contains("store"));
//! assert!(io_harness::env_vars::lookup("NOT_OURS").is_none());
//! ```

/// One variable the harness reads.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct EnvVar {
    /// Its name.
    pub name: &'static str,
    /// What it does, in one line (the README's wording).
    pub meaning: &'static str,
}

const fn v(name: &'static str, meaning: &'static str) -> EnvVar {
    EnvVar { name, meaning }
}

/// Every variable the harness and its crates read, grouped as the README lists them.
pub const ENV_VARS: &[EnvVar] = &[
    v(
        "IO_HARNESS_STORE",
        "the store file (as `--store`); default `$XDG_DATA_HOME/io-harness/store.db`",
    ),
    v(
        "IO_HARNESS_PROVIDER",
        "the provider, as `--provider` (a kind, or `scripted:FILE`): over the task file and the config files",
    ),
    v(
        "IO_HARNESS_MODEL",
        "the model, as `--model`: over the task file and the config files",
    ),
    v(
        "IO_HARNESS_BASE_URL",
        "the endpoint, as `--base-url`: over the task file and the config files",
    ),
    v(
        "IO_HARNESS_LOG",
        "the harness's own diagnostics on stderr, as a `tracing` filter (`info`, `io_harness=debug`); off when unset",
    ),
    v(
        "IO_HARNESS_PROBE_CACHE",
        "`off` (or `0`) probes the sandbox afresh in every process instead of using the cached probe",
    ),
    v(
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "the collector's OTLP/HTTP base URL for `export-otlp` and the live export of `run`/`resume` (as `--endpoint`, `--otlp-endpoint`)",
    ),
    v(
        "OTEL_EXPORTER_OTLP_HEADERS",
        "headers sent to the collector (`k=v,k2=v2`, values percent-decoded), held as secrets: never stored or printed",
    ),
    v(
        "OTEL_INSTRUMENTATION_GENAI_CAPTURE_MESSAGE_CONTENT",
        "`true` puts prompt and completion content on exported model-call spans (as `--otlp-content`); off otherwise",
    ),
    v(
        "IO_HARNESS_VERDICT_DIR",
        "set by the harness, read only by its own code in a Rust gate's test process: the directory that test's verdict is written to (the cargo form runs tests in the package directory)",
    ),
    v(
        "IO_HARNESS_FAILPOINT",
        "test builds with the `failpoints` feature only: `<point>:<step>` aborts the process there",
    ),
    v(
        "XDG_DATA_HOME",
        "where the default store lives (`io-harness/store.db`); else `~/.local/share`",
    ),
    v(
        "XDG_CACHE_HOME",
        "the cache: workspace copies and baselines (`io-harness/runs/`), locks, probe cache, gate caches; else `~/.cache`",
    ),
    v(
        "XDG_CONFIG_HOME",
        "where the audit log lives (`io-harness/audit/`); else `~/.config`",
    ),
    v(
        "HOME",
        "the fallback for the three above, and passed to commands, gates and MCP servers",
    ),
    v("OPENAI_API_KEY", "the key of `kind = \"openai\"`"),
    v(
        "OPENAI_MODEL",
        "the model of `kind = \"openai\"` when the task and flags name none",
    ),
    v(
        "OPENAI_BASE_URL",
        "the endpoint of `kind = \"openai\"` when the task and flags name none",
    ),
    v(
        "OPENAI_COMPATIBLE_API_KEY",
        "the key of `kind = \"openai-compatible\"` (optional)",
    ),
    v(
        "OPENAI_COMPATIBLE_MODEL",
        "the model of `kind = \"openai-compatible\"`",
    ),
    v(
        "OPENAI_COMPATIBLE_BASE_URL",
        "the endpoint of `kind = \"openai-compatible\"` (there is no default)",
    ),
    v("ANTHROPIC_API_KEY", "the key of `kind = \"anthropic\"`"),
    v("ANTHROPIC_MODEL", "the model of `kind = \"anthropic\"`"),
    v(
        "ANTHROPIC_BASE_URL",
        "the endpoint of `kind = \"anthropic\"`",
    ),
    v("OPENROUTER_API_KEY", "the key of `kind = \"openrouter\"`"),
    v("OPENROUTER_MODEL", "the model of `kind = \"openrouter\"`"),
    v(
        "OPENROUTER_BASE_URL",
        "the endpoint of `kind = \"openrouter\"`",
    ),
    v(
        "PATH",
        "passed to commands, gates and MCP servers; finds the programs they run",
    ),
    v("LANG", "passed to commands, gates and MCP servers"),
    v("LC_ALL", "passed to gate commands"),
    v("TERM", "passed to gate commands and MCP servers"),
    v("USER", "passed to gate commands"),
    v("TMPDIR", "passed to gate commands"),
    v(
        "CARGO_HOME",
        "the Rust toolchain's home: read-only in the sandbox's view, passed to gates (default `~/.cargo`)",
    ),
    v(
        "RUSTUP_HOME",
        "the toolchains: read-only in the sandbox's view, passed to gates (default `~/.rustup`)",
    ),
    v("RUSTUP_TOOLCHAIN", "passed to gate commands"),
];

/// The entry of `name`, if the harness reads it.
pub fn lookup(name: &str) -> Option<&'static EnvVar> {
    ENV_VARS.iter().find(|v| v.name == name)
}
