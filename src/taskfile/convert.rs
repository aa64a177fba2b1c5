//! From the raw sections to a [`TaskContract`], one function per section. Each notes
//! where its keys stand ([`Spans`]), so a check that fails later on the finished
//! contract can still point at the line that set the value.

use std::collections::BTreeMap;
use std::ops::Range;
use std::path::{Path, PathBuf};
use std::time::Duration;

use toml::Spanned;

use super::raw::{
    RawBudget, RawContext, RawFile, RawPolicy, RawProvider, RawReport, RawRetry, RawVerify,
};
use crate::contract::policy::TaskPolicy;
use crate::contract::units::{parse_duration, parse_duration_field, parse_size};
use crate::contract::{
    AgentSettings, Budget, CommandTrust, ContextSettings, CriterionSet, OperatorFile, ProviderKind,
    ProviderSpec, REPORT_PLACEHOLDER, RetryPolicy, SandboxSettings, StallPolicy, TaskContract,
    TestReport, Verification, VerifySettings, WorkspaceMode,
};

/// A key that cannot be converted: its dotted name, where it stands, what is wrong.
pub(super) type ConvertError = (String, Option<Range<usize>>, String);

/// Where each converted key stands in the file.
#[derive(Default)]
pub(super) struct Spans(BTreeMap<String, Range<usize>>);

impl Spans {
    /// Remembers that `key` was set at `span`.
    pub(super) fn note(&mut self, key: &str, span: Range<usize>) {
        self.0.insert(key.to_string(), span);
    }

    /// The span of `key`, or of the nearest enclosing key noted (`mcp[1].name`
    /// points at `mcp[1]`) when the field has none of its own.
    pub(super) fn find(&self, key: &str) -> Option<Range<usize>> {
        let mut k = key;
        loop {
            if let Some(s) = self.0.get(k) {
                return Some(s.clone());
            }
            k = k.rsplit_once('.')?.0;
        }
    }
}

/// The whole file; relative paths resolve against `base`, the file's directory.
pub(super) fn contract(raw: RawFile, base: &Path) -> Result<(TaskContract, Spans), ConvertError> {
    let mut spans = Spans::default();
    spans.note("goal", raw.goal.span());
    let root = match &raw.root {
        Some(r) => {
            spans.note("root", r.span());
            base.join(r.get_ref())
        }
        None => base.to_path_buf(),
    };
    let workspace = raw
        .workspace
        .map_or(WorkspaceMode::InPlace, Spanned::into_inner);
    let instructions = raw.instructions.map(|s| {
        spans.note("instructions", s.span());
        PathBuf::from(s.into_inner())
    });
    let verify = verify(raw.verify, base, &root, &mut spans)?;
    let budget = budget(raw.budget, &mut spans)?;
    let providers = raw
        .provider
        .map(|p| providers(p, base, &mut spans))
        .transpose()?
        .unwrap_or_default();
    let retry = raw
        .retry
        .map(|r| retry(r, &mut spans))
        .transpose()?
        .unwrap_or_default();
    let sandbox = match raw.sandbox {
        Some(sb) => super::sandbox::settings(sb, base, &mut spans)?,
        None => SandboxSettings::default(),
    };
    let stall = raw.stall.map_or_else(StallPolicy::default, |s| {
        spans.note("stall.window", s.span());
        s.into_inner()
    });
    let policy = raw
        .policy
        .map(|p| policy(p, &mut spans))
        .unwrap_or_default();
    let mut agents = AgentSettings::default();
    if let Some(a) = raw.agents {
        spans.note("agents", a.span());
        if let Some(d) = a.into_inner().max_depth {
            spans.note("agents.max_depth", d.span());
            agents.max_depth = d.into_inner();
        }
    }
    let mut mcp = Vec::new();
    for (i, m) in raw.mcp.into_iter().enumerate() {
        let key = format!("mcp[{i}]");
        spans.note(&key, m.span());
        mcp.push(super::mcp::server(m, &key, &mut spans)?);
    }
    let context = raw
        .context
        .map(|c| context(c, &mut spans))
        .transpose()?
        .unwrap_or_default();
    let tools = raw
        .tools
        .map(|t| tools(t, &mut spans))
        .transpose()?
        .unwrap_or_default();
    let contract = TaskContract {
        tools,
        agents,
        goal: raw.goal.into_inner(),
        root,
        workspace,
        constraints: raw.constraints,
        instructions,
        verify,
        budget,
        providers,
        prices: raw.prices,
        stall,
        retry,
        sandbox,
        policy,
        mcp,
        context,
    };
    Ok((contract, spans))
}

/// `[verify]`: the criteria, in the order command, file_contains, file_equals, rust,
/// cargo_test. Operator files (criteria, a command's script) are read now.
fn verify(
    rv: Spanned<RawVerify>,
    base: &Path,
    root: &Path,
    spans: &mut Spans,
) -> Result<VerifySettings, ConvertError> {
    let verify_span = rv.span();
    spans.note("verify", verify_span.clone());
    let rv = rv.into_inner();
    let timeout = match rv.timeout {
        Some(t) => {
            spans.note("verify.timeout", t.span());
            parse_duration(t.get_ref())
                .map_err(|m| ("verify.timeout".to_string(), Some(t.span()), m))?
        }
        None => Duration::from_secs(300),
    };
    let mut criteria = Vec::new();
    let trust = command_trust(rv.trust, spans)?;
    let report = rv.report.map(|r| report(r, spans)).transpose()?;
    let criterion = criterion_set(rv.criterion_paths, rv.criterion_exclude, spans);
    if rv.command.is_none()
        && let Some((key, span)) = criterion_without_command(&criterion, spans)
    {
        let message = format!("{} needs verify.command", &key["verify.".len()..]);
        return Err((key, span, message));
    }
    if let Some(c) = rv.command {
        spans.note("verify.command", c.span());
        criteria.push(
            Verification::Command {
                argv: c.into_inner(),
                expect_exit: rv.expect_exit.unwrap_or(0),
                timeout,
                pinned: Vec::new(),
                trust: trust.unwrap_or_default(),
                report,
                criterion,
            }
            .pin_command_files(root),
        );
    } else if let Some(key) = [
        (rv.expect_exit.is_some(), "expect_exit"),
        (trust.is_some(), "trust"),
        (report.is_some(), "report"),
    ]
    .iter()
    .find_map(|(set, key)| set.then_some(*key))
    {
        return Err((
            format!("verify.{key}"),
            spans.find(&format!("verify.{key}")).or(Some(verify_span)),
            format!("{key} needs verify.command"),
        ));
    }
    if let Some(fc) = rv.file_contains {
        spans.note("verify.file_contains", fc.span());
        let fc = fc.into_inner();
        criteria.push(Verification::file_contains(fc.file, fc.needle));
    }
    if let Some(fe) = rv.file_equals {
        spans.note("verify.file_equals", fe.span());
        let fe = fe.into_inner();
        criteria.push(Verification::file_equals(fe.file, fe.content));
    }
    if let Some(r) = rv.rust {
        spans.note("verify.rust", r.span());
        let r = r.into_inner();
        let criterion = base.join(r.criterion);
        let criterion = std::path::absolute(&criterion).unwrap_or(criterion);
        criteria.push(Verification::rust(r.subject, criterion).with_signatures(r.signatures));
    }
    if let Some(ct) = rv.cargo_test {
        criteria.push(cargo_test(ct, base, spans)?);
    }
    let max_attempts = rv.max_attempts.map_or(5, |m| {
        spans.note("verify.max_attempts", m.span());
        m.into_inner()
    });
    let dep_cache_max = match rv.dep_cache_max {
        Some(v) => {
            spans.note("verify.dep_cache_max", v.span());
            Some(dep_cache_max(v)?)
        }
        None => None,
    };
    Ok(VerifySettings {
        criteria,
        max_attempts,
        every_step: rv.every_step,
        dep_cache_max,
    })
}

/// `[verify] cargo_test`: its criteria are read now.
fn cargo_test(
    ct: Spanned<super::raw::RawCargoTest>,
    base: &Path,
    spans: &mut Spans,
) -> Result<Verification, ConvertError> {
    let span = ct.span();
    spans.note("verify.cargo_test", span.clone());
    let ct = ct.into_inner();
    let mut files = Vec::with_capacity(ct.criteria.len());
    for p in ct.criteria {
        let full = base.join(&p);
        let file = OperatorFile::read(&full).map_err(|e| {
            (
                "verify.cargo_test".to_string(),
                Some(span.clone()),
                format!("criterion {}: {e}", full.display()),
            )
        })?;
        files.push(file);
    }
    Ok(Verification::CargoTest {
        manifest: ct.manifest,
        criteria: files,
        baseline_manifests: None,
        signatures: ct.signatures,
    })
}

/// `[verify] trust`: `"auto"` (the default) or `"exit-code"`.
fn command_trust(
    raw: Option<Spanned<String>>,
    spans: &mut Spans,
) -> Result<Option<CommandTrust>, ConvertError> {
    let Some(t) = raw else { return Ok(None) };
    spans.note("verify.trust", t.span());
    match t.get_ref().as_str() {
        "auto" => Ok(Some(CommandTrust::Auto)),
        "exit-code" => Ok(Some(CommandTrust::ExitCode)),
        other => Err((
            "verify.trust".into(),
            Some(t.span()),
            format!("{other:?} is not a trust setting (\"auto\" or \"exit-code\")"),
        )),
    }
}

/// `[verify] report`: only `junit = "{report}"` is a report location, so the report
/// is always a fresh file the harness owns, never a workspace path the agent could
/// have written beforehand.
fn report(r: Spanned<RawReport>, spans: &mut Spans) -> Result<TestReport, ConvertError> {
    spans.note("verify.report", r.span());
    let r = r.into_inner();
    spans.note("verify.report.junit", r.junit.span());
    if r.junit.get_ref() != REPORT_PLACEHOLDER {
        return Err((
            "verify.report.junit".into(),
            Some(r.junit.span()),
            format!(
                "must be \"{REPORT_PLACEHOLDER}\": the harness chooses a fresh path outside \
                 the workspace and puts it where the command's argv says {REPORT_PLACEHOLDER}"
            ),
        ));
    }
    let mut report = TestReport {
        require: r.require,
        ..TestReport::default()
    };
    if let Some(m) = r.min_tests {
        spans.note("verify.report.min_tests", m.span());
        report.min_tests = m.into_inner();
    }
    Ok(report)
}

/// `dep_cache_max = "10GiB"`: the shared dependency cache's bound, a byte count or a
/// size string; `0` keeps the run's gates out of it.
fn dep_cache_max(v: Spanned<toml::Value>) -> Result<u64, ConvertError> {
    let span = v.span();
    let err = |m: String| ("verify.dep_cache_max".to_string(), Some(span.clone()), m);
    match v.into_inner() {
        toml::Value::Integer(n) if n >= 0 => Ok(n as u64),
        toml::Value::String(s) => parse_size(&s).map_err(err),
        other => Err(err(format!("{other} is not a size like \"10GiB\""))),
    }
}

/// `criterion_paths` and `criterion_exclude` of `[verify]` (checked, like every
/// criterion, when the contract is validated).
fn criterion_set(
    paths: Option<Spanned<Vec<String>>>,
    exclude: Option<Spanned<Vec<String>>>,
    spans: &mut Spans,
) -> CriterionSet {
    let mut set = CriterionSet::default();
    if let Some(p) = paths {
        spans.note("verify.criterion_paths", p.span());
        set.paths = p.into_inner();
    }
    if let Some(e) = exclude {
        spans.note("verify.criterion_exclude", e.span());
        set.exclude = e.into_inner();
    }
    set
}

/// The key of a criterion-set setting given without a command gate to apply to.
fn criterion_without_command(
    set: &CriterionSet,
    spans: &Spans,
) -> Option<(String, Option<Range<usize>>)> {
    let key = if !set.paths.is_empty() {
        "verify.criterion_paths"
    } else if !set.exclude.is_empty() {
        "verify.criterion_exclude"
    } else {
        return None;
    };
    Some((key.to_string(), spans.find(key)))
}

/// `[budget]`.
fn budget(raw: RawBudget, spans: &mut Spans) -> Result<Budget, ConvertError> {
    let mut budget = Budget::default();
    if let Some(s) = raw.max_steps {
        spans.note("budget.max_steps", s.span());
        budget.max_steps = s.into_inner();
    }
    if let Some(d) = raw.max_duration {
        spans.note("budget.max_duration", d.span());
        budget.max_duration = Some(
            parse_duration_field(d.get_ref())
                .map_err(|m| ("budget.max_duration".to_string(), Some(d.span()), m))?,
        );
    }
    if let Some(t) = raw.max_tokens {
        spans.note("budget.max_tokens", t.span());
        budget.max_tokens = Some(t.into_inner());
    }
    if let Some(c) = raw.max_cost_usd {
        spans.note("budget.max_cost_usd", c.span());
        budget.max_cost_usd = Some(c.into_inner());
    }
    Ok(budget)
}

/// `[provider]` and its `fallback` list, which inherits the output and reasoning
/// settings of the primary.
fn providers(
    p: Spanned<RawProvider>,
    base: &Path,
    spans: &mut Spans,
) -> Result<Vec<ProviderSpec>, ConvertError> {
    spans.note("provider", p.span());
    let p = p.into_inner();
    let mut spec = ProviderSpec::new(p.kind);
    compatible_settings(&p, &mut spec, spans)?;
    spec.model = p.model;
    spec.base_url = p.base_url;
    if let Some(s) = p.script {
        spans.note("provider.script", s.span());
        spec.script = Some(base.join(s.get_ref()));
    }
    if let Some(m) = p.max_output_tokens {
        spans.note("provider.max_output_tokens", m.span());
        spec.max_output_tokens = m.into_inner();
    }
    if let Some(t) = p.thinking_budget {
        spans.note("provider.thinking_budget", t.span());
        spec.thinking_budget = Some(t.into_inner());
    }
    spec.reasoning_effort = p.reasoning_effort;
    if let Some(t) = p.stream_idle_timeout {
        spans.note("provider.stream_idle_timeout", t.span());
        let key = "provider.stream_idle_timeout".to_string();
        spec.stream_idle_timeout =
            Some(parse_duration(t.get_ref()).map_err(|m| (key, Some(t.span()), m))?);
    }
    if let Some(v) = p.max_reply_bytes {
        let key = "provider.max_reply_bytes";
        spans.note(key, v.span());
        spec.max_reply_bytes = Some(positive_size(key, v)?);
    }
    let mut providers = Vec::with_capacity(1 + p.fallback.len());
    for f in p.fallback {
        let mut fb = ProviderSpec::new(f.kind);
        fb.model = f.model;
        fb.base_url = f.base_url;
        fb.script = f.script.map(|s| base.join(s));
        fb.max_output_tokens = spec.max_output_tokens;
        // Extended thinking is Anthropic's: a fallback of another kind has no such
        // setting to inherit.
        if matches!(
            fb.kind,
            crate::contract::ProviderKind::Anthropic | crate::contract::ProviderKind::Scripted
        ) {
            fb.thinking_budget = spec.thinking_budget;
        }
        fb.reasoning_effort = spec.reasoning_effort;
        fb.stream_idle_timeout = spec.stream_idle_timeout;
        fb.max_reply_bytes = spec.max_reply_bytes;
        if fb.kind == ProviderKind::OpenaiCompatible {
            fb.tool_choice = spec.tool_choice;
            fb.stream = spec.stream;
            fb.request_timeout = spec.request_timeout;
        }
        providers.push(fb);
    }
    providers.insert(0, spec);
    Ok(providers)
}

/// The settings only an `openai-compatible` provider has (`tool_choice`, `stream`,
/// `request_timeout`): refused on another kind, where nothing would send them.
fn compatible_settings(
    p: &RawProvider,
    spec: &mut ProviderSpec,
    spans: &mut Spans,
) -> Result<(), ConvertError> {
    let compatible = p.kind == ProviderKind::OpenaiCompatible;
    let refuse = |key: &str, span: Range<usize>| -> ConvertError {
        let why = format!(
            "applies only to kind = \"openai-compatible\" (this provider is {})",
            p.kind.as_str()
        );
        (key.to_string(), Some(span), why)
    };
    if let Some(t) = &p.tool_choice {
        spans.note("provider.tool_choice", t.span());
        if !compatible {
            return Err(refuse("provider.tool_choice", t.span()));
        }
        use crate::contract::ToolChoice;
        spec.tool_choice = Some(match t.get_ref().as_str() {
            "auto" => ToolChoice::Auto,
            "required" => ToolChoice::Required,
            "none" => ToolChoice::None,
            other => {
                let why = format!("{other:?} is not one of \"auto\", \"required\", \"none\"");
                return Err(("provider.tool_choice".to_string(), Some(t.span()), why));
            }
        });
    }
    if let Some(b) = &p.stream {
        spans.note("provider.stream", b.span());
        if !compatible {
            return Err(refuse("provider.stream", b.span()));
        }
        spec.stream = Some(*b.get_ref());
    }
    if let Some(t) = &p.request_timeout {
        let key = "provider.request_timeout";
        spans.note(key, t.span());
        if !compatible {
            return Err(refuse(key, t.span()));
        }
        if spec.stream != Some(false) {
            let why = "applies only with stream = false (a stream is bounded by \
                       stream_idle_timeout instead)"
                .to_string();
            return Err((key.to_string(), Some(t.span()), why));
        }
        spec.request_timeout =
            Some(parse_duration(t.get_ref()).map_err(|m| (key.to_string(), Some(t.span()), m))?);
    }
    Ok(())
}

/// A size key: a positive number of bytes or a size such as `"8MiB"`.
fn positive_size(key: &str, v: Spanned<toml::Value>) -> Result<u64, ConvertError> {
    let span = v.span();
    let n = match v.into_inner() {
        toml::Value::Integer(n) if n > 0 => n as u64,
        toml::Value::String(s) => {
            crate::contract::parse_size(&s).map_err(|m| (key.to_string(), Some(span.clone()), m))?
        }
        _ => {
            let why = "must be a positive number of bytes or a size such as \"8MiB\"";
            return Err((key.to_string(), Some(span), why.to_string()));
        }
    };
    if n == 0 {
        return Err((
            key.to_string(),
            Some(span),
            "must be more than zero".to_string(),
        ));
    }
    Ok(n)
}

/// `[retry]`.
fn retry(r: Spanned<RawRetry>, spans: &mut Spans) -> Result<RetryPolicy, ConvertError> {
    spans.note("retry", r.span());
    let r = r.into_inner();
    let mut retry = RetryPolicy::default();
    if let Some(n) = r.max_attempts {
        retry.max_attempts = n;
    }
    if let Some(b) = r.base {
        retry.base = parse_duration(b.get_ref())
            .map_err(|m| ("retry.base".to_string(), Some(b.span()), m))?;
    }
    if let Some(c) = r.cap {
        retry.cap = parse_duration(c.get_ref())
            .map_err(|m| ("retry.cap".to_string(), Some(c.span()), m))?;
    }
    if let Some(j) = r.jitter {
        retry.jitter = j;
    }
    if let Some(n) = r.malformed_attempts {
        if *n.get_ref() == 0 {
            let why = "must be at least 1 (attempts in all, the first included)".to_string();
            return Err(("retry.malformed_attempts".to_string(), Some(n.span()), why));
        }
        retry.malformed_attempts = n.into_inner();
    }
    if let Some(w) = r.max_wait {
        retry.max_wait = parse_duration(w.get_ref())
            .map_err(|m| ("retry.max_wait".to_string(), Some(w.span()), m))?;
    }
    if let Some(n) = r.probe_steps {
        if *n.get_ref() == 0 {
            let why = "must be at least 1 (steps the fallback serves between probes)".to_string();
            return Err(("retry.probe_steps".to_string(), Some(n.span()), why));
        }
        retry.probe_steps = n.into_inner();
    }
    if let Some(i) = r.probe_interval {
        retry.probe_interval = parse_duration(i.get_ref())
            .map_err(|m| ("retry.probe_interval".to_string(), Some(i.span()), m))?;
    }
    Ok(retry)
}

/// `[tools]`: the bounds on a reply's calls; a size is bytes or `"1MiB"`.
fn tools(
    t: Spanned<super::raw::RawTools>,
    spans: &mut Spans,
) -> Result<crate::contract::ToolSettings, ConvertError> {
    spans.note("tools", t.span());
    let t = t.into_inner();
    let mut out = crate::contract::ToolSettings::default();
    if let Some(v) = t.max_argument_bytes {
        let key = "tools.max_argument_bytes".to_string();
        let span = v.span();
        let n = match v.into_inner() {
            toml::Value::Integer(n) if n > 0 => n as u64,
            toml::Value::String(s) => {
                crate::contract::parse_size(&s).map_err(|m| (key.clone(), Some(span.clone()), m))?
            }
            _ => {
                let why = "must be a positive number of bytes or a size such as \"1MiB\"";
                return Err((key, Some(span), why.to_string()));
            }
        };
        if n == 0 {
            return Err((key, Some(span), "must be more than zero".to_string()));
        }
        out.max_argument_bytes = n;
    }
    if let Some(n) = t.max_calls_per_reply {
        if *n.get_ref() == 0 {
            let why = "must be at least 1".to_string();
            return Err(("tools.max_calls_per_reply".to_string(), Some(n.span()), why));
        }
        out.max_calls_per_reply = n.into_inner();
    }
    Ok(out)
}

/// `[policy]`: each rule and override keeps its own span.
fn policy(p: Spanned<RawPolicy>, spans: &mut Spans) -> TaskPolicy {
    spans.note("policy", p.span());
    let p = p.into_inner();
    let mut policy = TaskPolicy::default();
    for (i, r) in p.rules.into_iter().enumerate() {
        spans.note(&format!("policy.rules[{i}]"), r.span());
        policy.rules.push(r.into_inner());
    }
    for (i, o) in p.overrides.into_iter().enumerate() {
        spans.note(&format!("policy.override[{i}]"), o.span());
        policy.overrides.push(o.into_inner());
    }
    policy
}

/// `[context]`.
fn context(c: Spanned<RawContext>, spans: &mut Spans) -> Result<ContextSettings, ConvertError> {
    spans.note("context", c.span());
    let c = c.into_inner();
    let mut context = ContextSettings::default();
    if let Some(m) = c.max_tokens {
        spans.note("context.max_tokens", m.span());
        context.max_tokens = Some(m.into_inner());
    }
    if let Some(a) = c.assemble {
        context.assemble = a;
    }
    if let Some(t) = c.tokens {
        spans.note("context.tokens", t.span());
        context.tokens = t
            .get_ref()
            .parse()
            .map_err(|m| ("context.tokens".to_string(), Some(t.span()), m))?;
    }
    Ok(context)
}
