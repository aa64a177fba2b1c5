//! The Messages stream assembler against arbitrary and mutated-valid events (issue
//! 17 item 12): it never panics, stays within the time bound per input, and
//! assembles no more text than it was sent.

use proptest::prelude::*;

use super::*;
use crate::fuzz::{config, mutate, timed};

const VALID: &[(&str, &str)] = &[
    (
        "message_start",
        r#"{"type":"message_start","message":{"usage":{"input_tokens":10,"output_tokens":1}}}"#,
    ),
    (
        "content_block_start",
        r#"{"type":"content_block_start","index":0,"content_block":{"type":"text","text":""}}"#,
    ),
    (
        "content_block_delta",
        r#"{"type":"content_block_delta","index":0,"delta":{"type":"text_delta","text":"hello"}}"#,
    ),
    (
        "content_block_stop",
        r#"{"type":"content_block_stop","index":0}"#,
    ),
    (
        "content_block_start",
        r#"{"type":"content_block_start","index":1,"content_block":{"type":"tool_use","id":"t1","name":"read_file","input":{}}}"#,
    ),
    (
        "content_block_delta",
        r#"{"type":"content_block_delta","index":1,"delta":{"type":"input_json_delta","partial_json":"{\"path\": \"a\"}"}}"#,
    ),
    (
        "content_block_stop",
        r#"{"type":"content_block_stop","index":1}"#,
    ),
    (
        "message_delta",
        r#"{"type":"message_delta","delta":{"stop_reason":"tool_use"},"usage":{"output_tokens":7}}"#,
    ),
    ("message_stop", r#"{"type":"message_stop"}"#),
];

/// Feeds `events`, then finishes; what the stream assembled, or the error.
fn run(events: &[(String, String)]) -> Result<Assembled, ProviderError> {
    let mut a = Assembler::new("anthropic");
    for (event, data) in events {
        if a.on_event(event, data)? {
            break;
        }
    }
    a.finish()
}

fn text_len(a: &Assembled) -> usize {
    a.content
        .iter()
        .map(|b| match b {
            ContentBlock::Text { text } => text.len(),
            _ => 0,
        })
        .sum()
}

fn valid() -> Vec<(String, String)> {
    VALID
        .iter()
        .map(|(e, d)| (e.to_string(), d.to_string()))
        .collect()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_events_never_panic(
        events in proptest::collection::vec(("[a-z_]{0,20}", "\\PC{0,60}"), 0..6),
    ) {
        let total: usize = events.iter().map(|(_, d)| d.len()).sum();
        if let Ok(a) = timed("anthropic", || run(&events)) {
            prop_assert!(text_len(&a) <= total);
        }
    }

    #[test]
    fn mutated_valid_events_never_panic(
        which in 0usize..VALID.len(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 0..6),
    ) {
        let mut events = valid();
        events[which].1 = String::from_utf8_lossy(&mutate(VALID[which].1.as_bytes(), &edits)).into_owned();
        let total: usize = events.iter().map(|(_, d)| d.len()).sum();
        let out = timed("anthropic", || run(&events));
        if edits.is_empty() {
            let a = out.expect("the valid stream assembles");
            prop_assert_eq!(text_len(&a), "hello".len());
        } else if let Ok(a) = out {
            prop_assert!(text_len(&a) <= total);
        }
    }
}
