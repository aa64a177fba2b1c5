//! The SSE parser against arbitrary and mutated-valid bytes (issue 17 item 12): it
//! never panics, holds no more than its line bound, stays within the time bound per
//! input, gives the same events however the bytes are chunked, and round-trips the
//! events it is given.

use proptest::prelude::*;

use super::*;
use crate::fuzz::{config, mutate, timed};

fn parse(
    bytes: &[u8],
    cuts: &[usize],
) -> (Vec<SseEvent>, Result<(), SseError>, Option<&'static str>) {
    let mut p = SseParser::new();
    let mut out = Vec::new();
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    at.sort_unstable();
    let mut from = 0;
    for c in at.into_iter().chain([bytes.len()]) {
        if let Err(e) = p.push(&bytes[from..c.max(from)], &mut out) {
            return (out, Err(e), None);
        }
        from = c.max(from);
        assert!(p.line.len() <= MAX_LINE + bytes.len());
    }
    let tail = p.finish();
    (out, Ok(()), tail)
}

/// Events as a server writes them.
fn write(events: &[(String, String)]) -> Vec<u8> {
    let mut s = String::new();
    for (event, data) in events {
        if !event.is_empty() {
            s.push_str(&format!("event: {event}\r\n"));
        }
        for line in data.split('\n') {
            s.push_str(&format!("data: {line}\n"));
        }
        s.push_str(": keep-alive\n\n");
    }
    s.into_bytes()
}

fn field() -> impl Strategy<Value = String> {
    "[^\r\n]{0,20}".prop_map(|s| s.trim_start_matches(' ').to_string())
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_never_panic_and_chunking_changes_nothing(
        bytes in proptest::collection::vec(
            prop_oneof![Just(b'\n'), Just(b'\r'), Just(b':'), any::<u8>()], 0..200),
        cuts in proptest::collection::vec(any::<usize>(), 0..6),
    ) {
        let chunked = timed("sse", || parse(&bytes, &cuts));
        let whole = parse(&bytes, &[]);
        // The output is never bigger than the input.
        let data: usize = chunked.0.iter().map(|e| e.data.len() + e.event.len()).sum();
        prop_assert!(data <= bytes.len());
        if chunked.1.is_ok() && whole.1.is_ok() {
            prop_assert_eq!(chunked, whole);
        }
    }

    #[test]
    fn valid_events_round_trip_and_mutations_never_panic(
        events in proptest::collection::vec(
            (field(), proptest::collection::vec(field(), 1..3).prop_map(|l| l.join("\n"))), 0..4),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 0..5),
        cuts in proptest::collection::vec(any::<usize>(), 0..4),
    ) {
        let valid = write(&events);
        let (got, ok, tail) = timed("sse", || parse(&valid, &cuts));
        prop_assert!(ok.is_ok());
        prop_assert_eq!(tail, None);
        let want: Vec<SseEvent> = events
            .iter()
            .map(|(event, data)| SseEvent { event: event.clone(), data: data.clone() })
            .collect();
        prop_assert_eq!(got, want);
        let mutated = mutate(&valid, &edits);
        let (events, _, _) = timed("sse", || parse(&mutated, &cuts));
        let data: usize = events.iter().map(|e| e.data.len() + e.event.len()).sum();
        prop_assert!(data <= mutated.len());
    }
}
