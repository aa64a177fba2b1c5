//! How a rule's target pattern meets an action's target.
//!
//! The three kinds of target (workspace paths, commands, `host[:port]`) each have
//! their own reading of one pattern text; the rules are stated in the
//! [policy module docs](super) and implemented only here, because a policy whose
//! globs surprise the operator is a policy that leaks.

use globset::{GlobBuilder, GlobMatcher};

use super::{Act, PolicyError};

/// A compiled target pattern.
#[derive(Debug, Clone)]
pub(crate) enum Matcher {
    Path(GlobMatcher),
    Command {
        glob: GlobMatcher,
        /// The pattern has no `/`: it names a program, not a path.
        bare: bool,
        /// An argv pattern (`git push *`): a glob per argument after the program.
        args: Option<ArgvPattern>,
    },
    Net {
        host: GlobMatcher,
        /// `None`: any port.
        port: Option<u16>,
    },
}

/// The arguments of an argv pattern: one glob per argument, and `**` for any number
/// of arguments (`find ** -delete`, `cargo test **`).
#[derive(Debug, Clone)]
pub(crate) struct ArgvPattern {
    tokens: Vec<ArgToken>,
}

#[derive(Debug, Clone)]
enum ArgToken {
    Any,
    Glob(GlobMatcher),
}

impl ArgvPattern {
    /// Whether `args` (the argv after the program) match: a narrowing rule matches
    /// a prefix (`git push` catches `git push --force`), a widening one the whole
    /// argv (`cargo test **` for any further arguments).
    fn matches(&self, args: &[String], reach: Reach) -> bool {
        fn go(tokens: &[ArgToken], args: &[String], prefix: bool) -> bool {
            match tokens.split_first() {
                None => prefix || args.is_empty(),
                Some((ArgToken::Any, rest)) => {
                    (0..=args.len()).any(|k| go(rest, &args[k..], prefix))
                }
                Some((ArgToken::Glob(g), rest)) => args
                    .split_first()
                    .is_some_and(|(a, more)| g.is_match(a) && go(rest, more, prefix)),
            }
        }
        go(&self.tokens, args, reach == Reach::Narrowing)
    }
}

/// Whether a rule can only take permissions away (deny, ask) or may grant them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Reach {
    /// Matches generously: a miss would let something through.
    Narrowing,
    /// Matches strictly: a hit grants something.
    Widening,
}

impl Matcher {
    /// Compiles `pattern` for `act`, refusing what could never match as meant.
    pub(crate) fn compile(act: Act, pattern: &str) -> Result<Self, PolicyError> {
        Self::compile_reaching(act, pattern, Reach::Widening)
    }

    /// [`Matcher::compile`] for a rule of `reach`: a narrowing path rule (a deny or an
    /// ask) ignores case on every system, since `server.PEM` holds a key as surely as
    /// `server.pem`; a widening one keeps the file system's own rule.
    pub(crate) fn compile_reaching(
        act: Act,
        pattern: &str,
        reach: Reach,
    ) -> Result<Self, PolicyError> {
        let bad = |reason: &'static str| PolicyError::Target {
            act,
            target: pattern.to_string(),
            reason,
        };
        if pattern.trim().is_empty() {
            return Err(bad("the target must not be empty"));
        }
        if pattern.contains('\0') {
            return Err(bad("the target must not contain NUL"));
        }
        let glob = |p: &str, case_insensitive: bool| {
            GlobBuilder::new(p)
                .literal_separator(true)
                .backslash_escape(true)
                .case_insensitive(case_insensitive)
                .build()
                .map(|g| g.compile_matcher())
                .map_err(|source| PolicyError::Glob {
                    act,
                    target: pattern.to_string(),
                    source,
                })
        };
        match act {
            Act::Read | Act::Write => {
                let anchored = match pattern.strip_prefix('/') {
                    Some("") => return Err(bad("`/` alone names nothing")),
                    Some(rest) => rest.to_string(),
                    None if pattern.contains('/') => pattern.to_string(),
                    None => format!("**/{pattern}"),
                };
                // Case-insensitive filesystems would let `.ENV` past a `.env` rule.
                let fold = PATHS_FOLD_CASE || reach == Reach::Narrowing;
                Ok(Self::Path(glob(&anchored, fold)?))
            }
            Act::Exec => {
                let words = super::command_line::split(pattern.trim())
                    .ok_or_else(|| bad("a quote in the command pattern is not closed"))?;
                let Some((program, rest)) = words.split_first() else {
                    return Err(bad("the target must not be empty"));
                };
                let args = match rest {
                    [] => None,
                    _ => {
                        let tokens = rest
                            .iter()
                            .map(|w| match w.as_str() {
                                "**" => Ok(ArgToken::Any),
                                _ => glob(w, false).map(ArgToken::Glob),
                            })
                            .collect::<Result<Vec<_>, _>>()?;
                        Some(ArgvPattern { tokens })
                    }
                };
                Ok(Self::Command {
                    glob: glob(program, false)?,
                    bare: !program.contains('/'),
                    args,
                })
            }
            Act::Net => {
                let (host, port) = split_host_port(pattern);
                let port = match port {
                    None | Some("*") => None,
                    Some(p) => Some(
                        p.parse::<u16>()
                            .map_err(|_| bad("the port must be a number up to 65535 or `*`"))?,
                    ),
                };
                if host.is_empty() {
                    return Err(bad("the host must not be empty"));
                }
                if host.contains('/') {
                    return Err(bad("a host pattern has no `/`"));
                }
                Ok(Self::Net {
                    host: glob(&normalize_host(host), true)?,
                    port,
                })
            }
        }
    }

    /// Whether `target` (already normalized with [`normalize_target`]) matches.
    pub(crate) fn matches(&self, target: &str, reach: Reach) -> bool {
        match self {
            Self::Path(g) => g.is_match(target),
            Self::Command { glob, bare, args } => {
                let words =
                    super::command_line::split(target).unwrap_or_else(|| vec![target.to_string()]);
                let Some((program, rest)) = words.split_first() else {
                    return false;
                };
                let program_matches = glob.is_match(program)
                    || program.rsplit_once('/').is_some_and(|(_, name)| {
                        *bare
                            && (reach == Reach::Narrowing || program.starts_with('/'))
                            && glob.is_match(name)
                    });
                program_matches && args.as_ref().is_none_or(|a| a.matches(rest, reach))
            }
            Self::Net { host, port } => {
                let (h, p) = split_host_port(target);
                let p = p.and_then(|p| p.parse::<u16>().ok());
                host.is_match(h) && port.is_none_or(|want| p == Some(want))
            }
        }
    }
}

#[cfg(any(target_os = "macos", windows))]
const PATHS_FOLD_CASE: bool = true;
#[cfg(not(any(target_os = "macos", windows)))]
const PATHS_FOLD_CASE: bool = false;

/// `host:port`, `[v6]:port`, `host`, `[v6]` or a bare IPv6 literal.
fn split_host_port(s: &str) -> (&str, Option<&str>) {
    if let Some(rest) = s.strip_prefix('[')
        && let Some((host, after)) = rest.split_once(']')
    {
        return (host, after.strip_prefix(':'));
    }
    match s.split_once(':') {
        Some((h, p)) if !p.contains(':') => (h, Some(p)),
        _ => (s, None),
    }
}

/// A host as rules see it: lowercased, without a trailing dot, and an IPv6 literal in
/// its one canonical spelling — an IPv4-mapped one (`::ffff:127.0.0.1`,
/// `::ffff:7f00:1`) as the IPv4 address it reaches, so a rule on `127.0.0.1` cannot be
/// stepped around by spelling the same address another way (adversary B1 of issue 20).
fn normalize_host(h: &str) -> String {
    let h = h.strip_suffix('.').unwrap_or(h).to_ascii_lowercase();
    match h.parse::<std::net::Ipv6Addr>() {
        Ok(v6) => match v6.to_ipv4_mapped() {
            Some(v4) => v4.to_string(),
            None => v6.to_string(),
        },
        Err(_) => h,
    }
}

/// The form of an action's target that patterns are matched against: paths without
/// `./` or a trailing `/`, hosts lowercased without a trailing dot.
pub(crate) fn normalize_target(act: Act, target: &str) -> String {
    match act {
        Act::Read | Act::Write => {
            let parts: Vec<&str> = target
                .split('/')
                .filter(|c| !c.is_empty() && *c != ".")
                .collect();
            parts.join("/")
        }
        Act::Exec => target.to_string(),
        Act::Net => {
            let (h, p) = split_host_port(target);
            let h = normalize_host(h);
            let h = if h.contains(':') { format!("[{h}]") } else { h };
            match p {
                Some(p) => format!("{h}:{p}"),
                None => h,
            }
        }
    }
}

/// A pattern that matches exactly `target` and nothing else (for remembered
/// approvals and operator commands).
pub(crate) fn literal_pattern(act: Act, target: &str) -> String {
    let target = normalize_target(act, target);
    let esc = escape(&target);
    match act {
        Act::Read | Act::Write if !target.contains('/') => format!("/{esc}"),
        Act::Net => {
            let (h, p) = split_host_port(&target);
            let h = if h.contains(':') {
                format!("[{h}]")
            } else {
                escape(h)
            };
            match p {
                Some(p) => format!("{h}:{p}"),
                None => h,
            }
        }
        Act::Exec => {
            // Each word escaped, quoted back: exactly this argv (a widening pattern
            // without `**` matches the whole argv only).
            let words = super::command_line::split(&target).unwrap_or_else(|| vec![target.clone()]);
            let escaped: Vec<String> = words.iter().map(|w| escape(w)).collect();
            super::command_line::quote(&escaped)
        }
        _ => esc,
    }
}

/// Escapes every glob metacharacter, backslash included (we compile with backslash
/// escapes on).
fn escape(s: &str) -> String {
    globset::escape(s).replace('\\', "\\\\")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn m(act: Act, pat: &str, target: &str, reach: Reach) -> bool {
        Matcher::compile(act, pat)
            .unwrap()
            .matches(&normalize_target(act, target), reach)
    }

    /// Adversary B1 of issue 20: `[::ffff:127.0.0.1]` reached a collector a rule on
    /// `127.0.0.1` denied. Every spelling of one address is that address.
    #[test]
    fn an_address_spelled_another_way_is_the_same_address() {
        let n = Reach::Narrowing;
        for t in [
            "[::ffff:127.0.0.1]:14370",
            "[::ffff:7f00:1]:14370",
            "[0:0:0:0:0:ffff:127.0.0.1]:14370",
            "[::FFFF:7F00:1]:14370",
        ] {
            assert!(m(Act::Net, "127.0.0.1:14370", t, n), "{t}");
            assert!(m(Act::Net, "127.0.0.1", t, n), "{t}");
        }
        assert!(m(Act::Net, "[::1]:80", "[0:0:0:0:0:0:0:1]:80", n));
        assert!(!m(Act::Net, "127.0.0.1", "[::ffff:127.0.0.2]:1", n));
    }

    #[test]
    fn bare_path_pattern_matches_at_any_depth() {
        let n = Reach::Narrowing;
        assert!(m(Act::Read, ".env", ".env", n));
        assert!(m(Act::Read, ".env", "a/b/.env", n));
        assert!(!m(Act::Read, ".env", "a/.envrc", n));
        assert!(m(Act::Read, "*.pem", "certs/deep/x.pem", n));
        assert!(m(Act::Read, "src/*.rs", "src/lib.rs", n));
        assert!(!m(Act::Read, "src/*.rs", "src/a/lib.rs", n));
        assert!(!m(Act::Read, "src/*.rs", "x/src/lib.rs", n));
        assert!(m(Act::Read, "src/**", "src/a/b/c.rs", n));
        assert!(m(Act::Read, "/AGENTS.md", "AGENTS.md", n));
        assert!(!m(Act::Read, "/AGENTS.md", "sub/AGENTS.md", n));
        assert!(m(Act::Write, ".git", "./vendor/.git", n));
    }

    #[test]
    fn commands_match_names_strictly_for_widening_rules() {
        assert!(m(Act::Exec, "git*", "git-lfs", Reach::Widening));
        assert!(m(Act::Exec, "curl", "/usr/bin/curl", Reach::Narrowing));
        assert!(m(Act::Exec, "curl", "./curl", Reach::Narrowing));
        assert!(m(Act::Exec, "cargo", "/usr/bin/cargo", Reach::Widening));
        assert!(!m(Act::Exec, "cargo", "./cargo", Reach::Widening));
        assert!(!m(Act::Exec, "cargo", "scripts/cargo", Reach::Widening));
        assert!(m(Act::Exec, "mcp__fs__*", "mcp__fs__read", Reach::Widening));
        assert!(!m(
            Act::Exec,
            "mcp__fs__*",
            "mcp__web__get",
            Reach::Widening
        ));
    }

    #[test]
    fn hosts_and_ports() {
        let w = Reach::Widening;
        assert!(m(Act::Net, "*.pypi.org:443", "files.pypi.org:443", w));
        assert!(!m(Act::Net, "*.pypi.org:443", "files.pypi.org:80", w));
        assert!(!m(Act::Net, "*.pypi.org:443", "pypi.org:443", w));
        assert!(m(Act::Net, "crates.io", "CRATES.IO.:8443", w));
        assert!(m(Act::Net, "[::1]:8080", "[::1]:8080", w));
        assert!(m(Act::Net, "::1", "[::1]:9", w));
        assert!(m(Act::Net, "example.com:*", "example.com:1", w));
        assert!(Matcher::compile(Act::Net, "example.com:99999").is_err());
        assert!(Matcher::compile(Act::Net, ":443").is_err());
    }

    #[test]
    fn literal_patterns_match_only_their_target() {
        for (act, t, other) in [
            (Act::Write, "Cargo.toml", "sub/Cargo.toml"),
            (Act::Read, "src/[weird]*.rs", "src/w.rs"),
            (Act::Exec, "cargo", "cargo-evil"),
            (Act::Net, "pypi.org:443", "pypi.org:80"),
            (Act::Net, "[::1]:443", "[::2]:443"),
        ] {
            let p = literal_pattern(act, t);
            assert!(m(act, &p, t, Reach::Widening), "{p} vs {t}");
            assert!(!m(act, &p, other, Reach::Widening), "{p} vs {other}");
        }
    }

    #[test]
    fn bad_patterns_are_refused() {
        assert!(Matcher::compile(Act::Read, "").is_err());
        assert!(Matcher::compile(Act::Read, "/").is_err());
        assert!(Matcher::compile(Act::Read, "src/[a").is_err());
        assert!(Matcher::compile(Act::Net, "a/b").is_err());
    }
}
