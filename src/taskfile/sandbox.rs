//! `[sandbox]`: the backend required, the network posture with its allowlist and
//! pinned names, the variables passed in, extra read-only paths, the limits and the
//! uid a root harness runs commands as.

use std::ops::Range;
use std::path::Path;

use toml::Spanned;

use super::convert::{ConvertError, Spans};
use super::raw::{RawLimits, RawSandbox};
use crate::contract::units::parse_size;
use crate::contract::{LimitSettings, NetworkSetting, OverflowSetting, SandboxSettings};
use crate::egress::HostRule;
use crate::sandbox::Backend;

/// The whole section; `base` anchors `read_only_paths`.
pub(super) fn settings(
    sb: Spanned<RawSandbox>,
    base: &Path,
    spans: &mut Spans,
) -> Result<SandboxSettings, ConvertError> {
    spans.note("sandbox", sb.span());
    let sb = sb.into_inner();
    let mut out = SandboxSettings::default();
    if let Some(r) = sb.require {
        spans.note("sandbox.require", r.span());
        if r.get_ref().parse::<Backend>().is_err() {
            return Err((
                "sandbox.require".into(),
                Some(r.span()),
                format!(
                    "unknown backend {:?}: expected linux-namespaces, macos-sandbox-exec, windows-job-object or portable-floor",
                    r.get_ref()
                ),
            ));
        }
        out.require = Some(r.into_inner());
    }
    let network_span = match sb.network {
        Some(n) => {
            spans.note("sandbox.network", n.span());
            out.network = network(&n)?;
            Some(n.span())
        }
        None => None,
    };
    let allowlist = out.network == NetworkSetting::Allowlist;
    if let Some(h) = sb.allow_hosts {
        spans.note("sandbox.allow_hosts", h.span());
        out.allow_hosts = allow_hosts(h, allowlist)?;
    }
    if allowlist && out.allow_hosts.is_empty() {
        return Err((
            "sandbox.allow_hosts".into(),
            network_span,
            "network = \"allowlist\" needs at least one host in allow_hosts (with none, use \"none\")".into(),
        ));
    }
    if let Some(r) = sb.resolve {
        spans.note("sandbox.resolve", r.span());
        resolve(r, allowlist, &mut out)?;
    }
    for name in &sb.env {
        if name.is_empty() || name.contains('=') {
            return Err((
                "sandbox.env".into(),
                None,
                format!("{name:?} is not a variable name"),
            ));
        }
    }
    out.env = sb.env;
    out.read_only_paths = sb.read_only_paths.iter().map(|p| base.join(p)).collect();
    if let Some(l) = sb.limits {
        spans.note("sandbox.limits", l.span());
        out.limits = limits(l)?;
    }
    out.allow_weaker = sb.allow_weaker;
    out.shell = sb.shell;
    if let Some(u) = sb.uid {
        spans.note("sandbox.uid", u.span());
        out.uid = Some(uid(&u)?);
    }
    out.allow_new_repos = sb.allow_new_repos;
    if let Some(n) = sb.scan_limit {
        spans.note("sandbox.scan_limit", n.span());
        out.scan_limit = Some(scan_limit(&n)?);
    }
    Ok(out)
}

/// `uid = 65534`: the unprivileged host uid a root harness maps commands to; 0 (host
/// root) and values outside the uid range are refused.
fn uid(u: &Spanned<i64>) -> Result<u32, ConvertError> {
    match u32::try_from(*u.get_ref()) {
        Ok(0) => Err((
            "sandbox.uid".into(),
            Some(u.span()),
            "0 is host root: a sandboxed command never runs as host uid 0".into(),
        )),
        Ok(n) if n != u32::MAX => Ok(n),
        _ => Err((
            "sandbox.uid".into(),
            Some(u.span()),
            format!("{} is not a uid (1 to 4294967294)", u.get_ref()),
        )),
    }
}

/// `scan_limit`: a positive entry count (the masks of a session with none would be
/// empty, so zero is refused rather than meaning "no limit").
fn scan_limit(n: &Spanned<i64>) -> Result<usize, ConvertError> {
    usize::try_from(*n.get_ref())
        .ok()
        .filter(|v| *v > 0)
        .ok_or_else(|| {
            (
                "sandbox.scan_limit".into(),
                Some(n.span()),
                format!("{}: expected a positive number of entries", n.get_ref()),
            )
        })
}

/// `network = "none" | "allowlist" | "open"`.
fn network(n: &Spanned<String>) -> Result<NetworkSetting, ConvertError> {
    match n.get_ref().as_str() {
        "none" => Ok(NetworkSetting::None),
        "open" => Ok(NetworkSetting::Open),
        "allowlist" => Ok(NetworkSetting::Allowlist),
        other => Err((
            "sandbox.network".into(),
            Some(n.span()),
            format!("{other:?}: expected \"none\", \"allowlist\" or \"open\""),
        )),
    }
}

/// `allow_hosts`: only with an allowlist, each entry a valid [`HostRule`].
fn allow_hosts(h: Spanned<Vec<String>>, allowlist: bool) -> Result<Vec<String>, ConvertError> {
    let span = h.span();
    let hosts = h.into_inner();
    if !hosts.is_empty() && !allowlist {
        return Err((
            "sandbox.allow_hosts".into(),
            Some(span),
            "hosts are only admitted with network = \"allowlist\"".into(),
        ));
    }
    for (i, host) in hosts.iter().enumerate() {
        if let Err(e) = HostRule::parse(host) {
            return Err((
                format!("sandbox.allow_hosts[{i}]"),
                Some(span.clone()),
                format!("{e} (expected a name, *.suffix or IP literal with an optional :port)"),
            ));
        }
    }
    Ok(hosts)
}

/// `resolve = { name = "IP" }`: plain host names pinned for the egress proxy.
fn resolve(
    r: Spanned<std::collections::BTreeMap<String, String>>,
    allowlist: bool,
    out: &mut SandboxSettings,
) -> Result<(), ConvertError> {
    let span = r.span();
    let map = r.into_inner();
    if !map.is_empty() && !allowlist {
        return Err((
            "sandbox.resolve".into(),
            Some(span),
            "names are only resolved by the egress proxy, with network = \"allowlist\"".into(),
        ));
    }
    for (name, addr) in map {
        let key = format!("sandbox.resolve.{name:?}");
        let ip: std::net::IpAddr = addr.parse().map_err(|_| {
            (
                key.clone(),
                Some(span.clone()),
                format!("{addr:?} is not an IP address"),
            )
        })?;
        match HostRule::parse(&name) {
            Ok(rule) if rule.is_plain_name() => {}
            _ => {
                return Err((
                    key,
                    Some(span.clone()),
                    format!("{name:?} is not a host name (no port, no wildcard, no IP)"),
                ));
            }
        }
        out.resolve.insert(name.to_ascii_lowercase(), ip);
    }
    Ok(())
}

/// `limits = { … }`: sizes as integers or strings like `"4GiB"`, none of them zero.
fn limits(l: Spanned<RawLimits>) -> Result<LimitSettings, ConvertError> {
    let span = l.span();
    let l = l.into_inner();
    let limits = LimitSettings {
        cpu_secs: l.cpu_secs,
        wall_secs: l.wall_secs,
        memory: size("memory", l.memory, &span)?,
        processes: l.processes,
        open_files: l.open_files,
        output: size("output", l.output, &span)?,
        disk: size("disk", l.disk, &span)?,
        output_overflow: overflow(l.output_overflow)?,
    };
    let zero = [
        ("cpu_secs", limits.cpu_secs),
        ("wall_secs", limits.wall_secs),
        ("memory", limits.memory),
        ("processes", limits.processes),
        ("open_files", limits.open_files),
        ("output", limits.output),
        ("disk", limits.disk),
    ]
    .into_iter()
    .find(|(_, v)| *v == Some(0));
    if let Some((key, _)) = zero {
        return Err((
            format!("sandbox.limits.{key}"),
            Some(span),
            "must be more than zero".into(),
        ));
    }
    Ok(limits)
}

/// `output_overflow`: `tail` (the default) or `kill`.
fn overflow(v: Option<Spanned<String>>) -> Result<Option<OverflowSetting>, ConvertError> {
    let Some(v) = v else { return Ok(None) };
    let span = v.span();
    match v.into_inner().as_str() {
        "tail" => Ok(Some(OverflowSetting::Tail)),
        "kill" => Ok(Some(OverflowSetting::Kill)),
        other => Err((
            "sandbox.limits.output_overflow".into(),
            Some(span),
            format!("{other:?} is not \"tail\" or \"kill\""),
        )),
    }
}

/// One size limit: a byte count or a string like `"4GiB"`.
fn size(
    key: &str,
    v: Option<toml::Value>,
    span: &Range<usize>,
) -> Result<Option<u64>, ConvertError> {
    match v {
        None => Ok(None),
        Some(toml::Value::Integer(n)) if n >= 0 => Ok(Some(n as u64)),
        Some(toml::Value::String(s)) => parse_size(&s)
            .map(Some)
            .map_err(|m| (format!("sandbox.limits.{key}"), Some(span.clone()), m)),
        Some(other) => Err((
            format!("sandbox.limits.{key}"),
            Some(span.clone()),
            format!("{other} is not a size like \"4GiB\""),
        )),
    }
}
