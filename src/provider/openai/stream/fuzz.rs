//! The Chat Completions stream assembler against arbitrary and mutated-valid chunks
//! (issue 17 item 12): it never panics, stays within the time bound per input, and
//! assembles no more text than it was sent.

use proptest::prelude::*;

use super::*;
use crate::fuzz::{config, mutate, timed};

const VALID: &[&str] = &[
    r#"{"choices":[{"index":0,"delta":{"role":"assistant","content":"he"}}]}"#,
    r#"{"choices":[{"index":0,"delta":{"content":"llo","tool_calls":[{"index":0,"id":"call_a","type":"function","function":{"name":"read_file","arguments":"{\"pa"}}]}}]}"#,
    r#"{"choices":[{"index":0,"delta":{"tool_calls":[{"index":0,"function":{"arguments":"th\": \"x\"}"}}]},"finish_reason":"tool_calls"}]}"#,
    r#"{"choices":[],"usage":{"prompt_tokens":10,"completion_tokens":3,"prompt_tokens_details":{"cached_tokens":2}}}"#,
    "[DONE]",
];

/// Feeds `chunks`, then finishes; what the stream assembled, or the error.
fn run(chunks: &[String]) -> Result<Assembled, ProviderError> {
    let mut a = Assembler::new("openai");
    for c in chunks {
        if a.on_data(c)? {
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

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_chunks_never_panic(chunks in proptest::collection::vec("\\PC{0,60}", 0..6)) {
        let total: usize = chunks.iter().map(String::len).sum();
        if let Ok(a) = timed("openai", || run(&chunks)) {
            prop_assert!(text_len(&a) <= total);
        }
    }

    #[test]
    fn mutated_valid_chunks_never_panic(
        which in 0usize..VALID.len(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 0..6),
    ) {
        let mut chunks: Vec<String> = VALID.iter().map(|s| s.to_string()).collect();
        chunks[which] = String::from_utf8_lossy(&mutate(VALID[which].as_bytes(), &edits)).into_owned();
        let total: usize = chunks.iter().map(String::len).sum();
        let out = timed("openai", || run(&chunks));
        if edits.is_empty() {
            let a = out.expect("the valid stream assembles");
            prop_assert_eq!(text_len(&a), "hello".len());
        } else if let Ok(a) = out {
            prop_assert!(text_len(&a) <= total);
        }
    }
}
