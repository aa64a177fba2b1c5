//! The fixed trajectory of the context-assembly measurement, shared by
//! `tests/it/context.rs` (assertions) and `benches/context_trajectory.rs` (figures).
//!
//! 60 steps over 10 files: step `s` reads `src/f{(s-1) % 10}.rs`; every third step
//! also edits the file read two steps before (bumping its `// version: N` line);
//! every fifth step also runs the test command; step 61 says it is done and the
//! verification passes. Everything is generated from constants, so the run is the same
//! on every machine.

#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::Path;

use io_harness::provider::ScriptTurn;
use serde_json::json;

/// Files in the workspace.
pub const FILES: usize = 10;
/// Steps with tool calls (the final answer is one more).
pub const STEPS: u32 = 60;
/// The test command the agent runs every fifth step.
pub const TEST_COMMAND: [&str; 5] = ["grep", "-r", "-c", "fn ", "src"];

/// The workspace file of index `i`.
pub fn file(i: usize) -> String {
    format!("src/f{i}.rs")
}

fn body(i: usize) -> String {
    let mut s = format!("//! Module {i} of the measurement workspace.\n// version: 0\n\n");
    for f in 0..14 {
        s.push_str(&format!(
            "/// Computes the {f}th value of series {i} from `x`.\npub fn series_{i}_{f}(x: u64) -> u64 {{\n    let base = x.wrapping_mul({m}) ^ 0x{h:04x};\n    base.rotate_left({r}) + {f}\n}}\n\n",
            m = 31 + f * 7 + i,
            h = (i * 977 + f * 131) % 0xffff,
            r = (f + i) % 13,
        ));
    }
    s
}

/// Writes the workspace into `dir`.
pub fn workspace(dir: &Path) {
    std::fs::create_dir_all(dir.join("src")).unwrap();
    for i in 0..FILES {
        std::fs::write(dir.join(file(i)), body(i)).unwrap();
    }
}

/// The scripted turns, and for each step the version of every file when that step's
/// request is sent (edits of earlier steps applied).
pub fn script() -> (Vec<ScriptTurn>, Vec<BTreeMap<String, u32>>) {
    let mut versions: BTreeMap<String, u32> = (0..FILES).map(|i| (file(i), 0)).collect();
    let mut turns = Vec::new();
    let mut at_request = Vec::new();
    for s in 1..=STEPS {
        at_request.push(versions.clone());
        let read = file(((s - 1) as usize) % FILES);
        let mut t = ScriptTurn::tool("read_file", json!({"path": read}));
        if s % 3 == 0 {
            let target = file(((s - 3) as usize) % FILES);
            let v = versions[&target];
            t = t.and_tool(
                "edit_file",
                json!({"path": target, "old": format!("// version: {v}\n"), "new": format!("// version: {}\n", v + 1)}),
            );
            versions.insert(target, v + 1);
        }
        if s % 5 == 0 {
            t = t.and_tool("run_command", json!({"argv": TEST_COMMAND}));
        }
        turns.push(t);
    }
    at_request.push(versions.clone());
    turns.push(ScriptTurn::text(
        "All files read and updated; the tests pass.",
    ));
    (turns, at_request)
}

/// The version a read observation shows, if it shows one.
pub fn version_shown(content: &str) -> Option<u32> {
    let at = content.find("// version: ")?;
    let rest = &content[at + "// version: ".len()..];
    rest.split(|c: char| !c.is_ascii_digit())
        .next()?
        .parse()
        .ok()
}

/// Token totals of a run's requests.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Figures {
    /// Requests.
    pub requests: usize,
    /// Estimated input tokens, summed over the requests.
    pub raw: u64,
    /// The same, billed as Anthropic bills with the harness's cache breakpoints (cache
    /// reads at 0.1×, cache writes at 1.25×), in input-token equivalents.
    pub anthropic_billed: f64,
    /// The same, billed as OpenAI's automatic prefix cache bills (cached prefix at
    /// 0.1×, the GPT-5 family's discount; the rest at 1×).
    pub openai_billed: f64,
    /// Input tokens served from the (simulated) cache, Anthropic style.
    pub cached: u64,
}

/// A request as the cache sees it: units (system, tools, each block) with their
/// estimated tokens, and where the first message ends.
fn units(r: &io_harness::provider::CompletionRequest) -> (Vec<(String, u64)>, usize) {
    use io_harness::context::tokens::{self, Family};
    let f = Family::Openai;
    let mut out = Vec::new();
    if let Some(s) = &r.system {
        out.push((format!("system:{s}"), tokens::estimate_text(s) + 4));
    }
    out.push((
        serde_json::to_string(&r.tools).unwrap(),
        tokens::estimate_tools(&r.tools, f),
    ));
    let mut first_end = out.len();
    for (i, m) in r.messages.iter().enumerate() {
        for (j, b) in m.content.iter().enumerate() {
            let t = tokens::estimate_block(b, f) + if j == 0 { 4 } else { 0 };
            out.push((
                format!("{i}:{:?}:{}", m.role, serde_json::to_string(b).unwrap()),
                t,
            ));
        }
        if i == 0 {
            first_end = out.len();
        }
    }
    (out, first_end)
}

/// Figures over `requests`, in the order sent.
pub fn figures(requests: &[io_harness::provider::CompletionRequest]) -> Figures {
    let mut fig = Figures {
        requests: requests.len(),
        ..Figures::default()
    };
    let mut prev: Option<(Vec<(String, u64)>, usize)> = None;
    for r in requests {
        let (u, first_end) = units(r);
        let total: u64 = u.iter().map(|x| x.1).sum();
        let (anthropic_cached, common_tokens) = match &prev {
            None => (0, 0),
            Some((p, p_first)) => {
                let common = u.iter().zip(p).take_while(|(a, b)| a.0 == b.0).count();
                let upto = |n: usize| u[..n].iter().map(|x| x.1).sum::<u64>();
                // Breakpoints written by the previous request: the system prompt (with
                // the tools), the first message, and its end.
                let hit = if common == p.len() {
                    p.len()
                } else if common >= *p_first && first_end == *p_first {
                    *p_first
                } else if common >= 2 {
                    2
                } else {
                    0
                };
                (upto(hit), upto(common))
            }
        };
        fig.raw += total;
        fig.cached += anthropic_cached;
        fig.anthropic_billed +=
            anthropic_cached as f64 * 0.1 + (total - anthropic_cached) as f64 * 1.25;
        fig.openai_billed += common_tokens as f64 * 0.1 + (total - common_tokens) as f64;
        prev = Some((u, first_end));
    }
    fig
}

/// Per request: (tokens, tokens after the first unit that differs from the previous
/// request) — where the prompt cache breaks and what it costs.
pub fn breaks(requests: &[io_harness::provider::CompletionRequest]) -> Vec<(u64, u64, String)> {
    let mut out = Vec::new();
    let mut prev: Option<Vec<(String, u64)>> = None;
    for r in requests {
        let (u, _) = units(r);
        let total: u64 = u.iter().map(|x| x.1).sum();
        let (lost, what) = match &prev {
            None => (total, String::new()),
            Some(p) => {
                let common = u.iter().zip(p).take_while(|(a, b)| a.0 == b.0).count();
                if common == p.len() {
                    (u[common..].iter().map(|x| x.1).sum(), String::new())
                } else {
                    (
                        u[common..].iter().map(|x| x.1).sum(),
                        p[common].0.chars().take(90).collect(),
                    )
                }
            }
        };
        out.push((total, lost, what));
        prev = Some(u);
    }
    out
}
