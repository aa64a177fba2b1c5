//! Issue 17.7: a 50 MB reply took the harness from 22 MB to 435 MB of memory, was
//! stored three times (157 MB) and printed whole. At most `[provider] max_reply_bytes`
//! (default 8 MiB) of a reply is read; a cut reply is recorded, answered with a tool
//! error and not retried, and stored once.

use std::time::Duration;

use io_harness::provider::{Anthropic, OpenAi, Provider, reply_cut::CUT_REPLY};

use super::fake_server::{FakeServer, Reply};
use super::{anthropic_stream, config, delta, fixtures, message_start, openai_text};

/// An OpenAI stream of `pieces` text deltas of `size` bytes each, one HTTP chunk each.
fn huge_openai(pieces: usize, size: usize) -> Reply {
    let text = "x".repeat(size);
    let event = format!(
        "data: {}\n\n",
        delta(serde_json::json!({"content": text}), None)
    );
    let mut body = vec![event.into_bytes(); pieces];
    body.push(b"data: [DONE]\n\n".to_vec());
    Reply::sse(body)
}

#[tokio::test]
async fn a_reply_past_the_limit_is_cut_there_and_its_calls_are_answered_not_run() {
    // OpenAI: 4 MiB of text against a 64 KiB limit.
    let server = FakeServer::start(vec![huge_openai(64, 64 << 10)]).await;
    let mut cfg = config(&format!("{}/v1", server.url()), "m");
    cfg.max_reply_bytes = 64 << 10;
    let c = OpenAi::new(cfg)
        .unwrap()
        .complete(&fixtures::hello())
        .await
        .unwrap();
    assert_eq!(c.cut_at, Some(64 << 10));
    assert!(c.text().len() <= 64 << 10);
    let calls: Vec<_> = c.tool_calls().map(|(_, n, _)| n.to_string()).collect();
    assert_eq!(calls, [CUT_REPLY]);

    // Anthropic: a tool call whose arguments run past the limit.
    let start = serde_json::json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use", "id": "toolu_1", "name": "write_file", "input": {}}});
    let piece = serde_json::json!({"type": "content_block_delta", "index": 0, "delta": {"type": "input_json_delta", "partial_json": "y".repeat(32 << 10)}});
    let mut events = vec![message_start(
        "claude-sonnet-4-5",
        serde_json::json!({"input_tokens": 5}),
    )];
    events.push(start);
    events.extend(std::iter::repeat_n(piece, 16));
    let server = FakeServer::start(vec![Reply::sse(super::fake_server::every(
        &anthropic_stream(&events),
        32 << 10,
    ))])
    .await;
    let mut cfg = config(&server.url(), "m");
    cfg.max_reply_bytes = 100 << 10;
    let c = Anthropic::new(cfg)
        .unwrap()
        .complete(&fixtures::hello())
        .await
        .unwrap();
    assert_eq!(c.cut_at, Some(100 << 10));
    let (_, name, input) = c.tool_calls().next().unwrap();
    assert_eq!(name, "write_file");
    let why = io_harness::provider::invalid_call::problem(input).unwrap();
    assert!(why.contains("max_reply_bytes"), "{why}");
    assert!(
        input.to_string().len() < 8 << 10,
        "the arguments are not kept whole"
    );
    assert_eq!(server.requests().len(), 1);
}

/// One `io-harness run` as its own process against a fresh server whose first reply is
/// 50 MB: the measurement, the server (for its requests) and the run's directory.
async fn run_against_a_50_mb_reply() -> (crate::bounded::Measured, FakeServer, tempfile::TempDir) {
    let server = FakeServer::start(vec![
        huge_openai(800, 64 << 10),
        Reply::sse(super::fake_server::whole(&openai_text("done"))),
    ])
    .await;
    let d = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(d.path().join("ws")).unwrap();
    std::fs::write(d.path().join("ws/a.txt"), "x\n").unwrap();
    std::fs::write(
        d.path().join("task.toml"),
        format!(
            "goal = \"g\"\nroot = \"ws\"\n[verify]\nfile_contains = {{ file = \"a.txt\", needle = \"x\" }}\n\n[budget]\nmax_steps = 4\n\n[provider]\nkind = \"openai\"\nmodel = \"m\"\nbase_url = \"{}/v1\"\n",
            server.url()
        ),
    )
    .unwrap();
    let dir = d.path().to_path_buf();
    let m = tokio::task::spawn_blocking(move || crate::bounded::run_measured(&dir))
        .await
        .unwrap();
    eprintln!(
        "figure 50 MB reply: {:?}, peak {} KiB, exit {:?}",
        m.took, m.max_rss_kib, m.code
    );
    (m, server, d)
}

/// The peak a 50 MB reply may cost the CLI. Measured here: 73 MiB of heap at the peak
/// (heaptrack: the cut 8 MiB reply sent back in the next request, as the request's
/// JSON, the provider's body and three message copies) and 86 MiB resident for the
/// first run of a test process, 130 MiB for the second (the same input, delivered in
/// larger reads once loopback TCP has warmed up); CI, under a full suite's load, once
/// 282 MiB before the arena bound, and once failed this test after it (the message
/// did not survive: every assertion now prints the figures). The figure was
/// 435 MiB for this reply stored three times and printed whole.
const PEAK_BOUND_KIB: i64 = 300 * 1024;

/// The figure of the issue, measured: `io-harness run` as its own process against a
/// server sending a 50 MB reply, its peak memory read by `wait4`; the reply cut at the
/// default 8 MiB is on record as an attempt, answered with a tool error, not retried,
/// and stored once.
///
/// A process's peak resident size depends on where the allocator placed blocks freed
/// by threads the scheduler chose, so one measurement past the bound is taken again on
/// a fresh server and directory; the lower figure must hold. A regression (the reply
/// kept in several copies) exceeds the bound in both.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_50_mb_reply_costs_the_cli_little_memory_and_is_stored_once() {
    let (mut m, mut server, mut d) = run_against_a_50_mb_reply().await;
    if m.code == Some(0) && m.max_rss_kib >= PEAK_BOUND_KIB {
        let first = m.max_rss_kib;
        (m, server, d) = run_against_a_50_mb_reply().await;
        eprintln!("first measurement {first} KiB, again {} KiB", m.max_rss_kib);
    }
    let figure = format!(
        "took {:?}, peak {} KiB, exit {:?}, stdout {:.2000}",
        m.took, m.max_rss_kib, m.code, m.stdout
    );
    assert_eq!(m.code, Some(0), "{figure}");
    assert!(m.took < Duration::from_secs(60), "{figure}");
    assert!(m.max_rss_kib < PEAK_BOUND_KIB, "{figure}");
    assert!(m.stdout.len() < 1 << 20, "printed {} bytes", m.stdout.len());
    assert_eq!(
        server.requests().len(),
        2,
        "the cut reply is not asked for again ({figure})"
    );

    let store = io_harness::Store::open(d.path().join("store.db")).unwrap();
    let run = store.runs().unwrap().remove(0);
    let attempts = store.provider_attempts(run.id).unwrap();
    assert_eq!(attempts.len(), 1, "{attempts:?}");
    assert_eq!(
        (attempts[0].kind.as_str(), attempts[0].next.as_str()),
        ("reply-too-large", "tool-error")
    );
    assert_eq!(
        attempts[0].status,
        Some(200),
        "a cut reply was an answer: its attempt names its status (adversary A14a)"
    );
    let steps = store.steps(run.id).unwrap();
    let stored: usize = steps
        .iter()
        .map(|s| s.reply_json.len() + s.messages_json.len())
        .sum();
    let limit = 8usize << 20;
    assert!(
        stored > limit / 2 && stored < limit + (1 << 20),
        "{stored} bytes of steps for one reply cut at {limit}"
    );
    assert!(store.reply(run.id, 1).unwrap().is_none(), "no second copy");
    let output = &steps[0].tool_calls[0].output;
    assert!(output.contains("max_reply_bytes"), "{output}");
}
