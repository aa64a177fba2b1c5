//! The framing against arbitrary and mutated-valid bytes (issue 17 item 12): it never
//! panics, never holds more than its bound of a line, stays within the time bound
//! per input, and cuts the same lines however the bytes are chunked.

use proptest::prelude::*;

use super::*;
use crate::fuzz::{config, mutate, timed};

/// A small bound, so arbitrary input crosses it often.
const SMALL: usize = 64;

/// A reply as a server sends it.
fn valid_reply(id: i64, text: &str) -> Vec<u8> {
    serde_json::to_vec(&serde_json::json!({
        "jsonrpc": "2.0",
        "id": id,
        "result": {"content": [{"type": "text", "text": text}], "isError": false}
    }))
    .unwrap()
}

/// Cuts `bytes` at `cuts` (positions taken modulo the length) and feeds the pieces.
fn feed(bytes: &[u8], cuts: &[usize], max: usize) -> (Vec<Line>, usize) {
    let mut lines = Lines::new(max);
    let mut out = Vec::new();
    let mut at: Vec<usize> = cuts.iter().map(|c| c % (bytes.len() + 1)).collect();
    at.sort_unstable();
    let mut from = 0;
    let mut most = 0;
    for c in at.into_iter().chain([bytes.len()]) {
        lines.push(&bytes[from..c.max(from)], &mut out);
        from = c.max(from);
        most = most.max(lines.held());
    }
    (out, most)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn lines_hold_at_most_their_bound_and_chunking_changes_nothing(
        bytes in proptest::collection::vec(prop_oneof![Just(b'\n'), any::<u8>()], 0..400),
        cuts in proptest::collection::vec(any::<usize>(), 0..8),
    ) {
        let (chunked, most) = timed("lines", || feed(&bytes, &cuts, SMALL));
        prop_assert!(most <= SMALL, "held {most} bytes of one line");
        for l in &chunked {
            match l {
                Line::Whole(b) => prop_assert!(b.len() <= SMALL && !b.contains(&b'\n')),
                Line::TooLong(head) => prop_assert!(head.len() <= HEAD),
            }
        }
        let (whole, _) = feed(&bytes, &[], SMALL);
        prop_assert_eq!(&chunked, &whole);
        // Every line within the bound comes out exactly as it went in.
        let expected: Vec<Line> = bytes
            .split(|&b| b == b'\n')
            .take(bytes.iter().filter(|&&b| b == b'\n').count())
            .map(|l| if l.len() <= SMALL { Line::Whole(l.to_vec()) } else { Line::TooLong(Vec::new()) })
            .collect();
        prop_assert_eq!(chunked.len(), expected.len() + usize::from(
            // A line still arriving is reported once it passes the bound.
            bytes.rsplit(|&b| b == b'\n').next().is_some_and(|tail| tail.len() > SMALL)
        ));
        for (got, want) in chunked.iter().zip(&expected) {
            match (got, want) {
                (Line::Whole(g), Line::Whole(w)) => prop_assert_eq!(g, w),
                (Line::TooLong(_), Line::TooLong(_)) => {}
                _ => prop_assert!(false, "{got:?} where {want:?} was due"),
            }
        }
    }

    #[test]
    fn arbitrary_lines_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        timed("classify", || {
            let _ = classify(&bytes);
            let _ = scan_id(&bytes);
            let _ = too_large(&bytes);
        });
    }

    #[test]
    fn mutated_replies_are_a_message_a_fault_or_nothing(
        id in -5i64..1000,
        text in "\\PC{0,40}",
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 0..6),
    ) {
        let valid = valid_reply(id, &text);
        let bytes = mutate(&valid, &edits);
        let frame = timed("classify", || classify(&bytes));
        if let Frame::Fault(f) = &frame {
            prop_assert_eq!(f.kind, FaultKind::Malformed);
        }
        if edits.is_empty() {
            // Valid input round-trips: the message is the one sent.
            let Frame::Message(m) = frame else {
                return Err(TestCaseError::fail(format!("{frame:?}")));
            };
            let back: serde_json::Value = serde_json::to_value(&*m).unwrap();
            let sent: serde_json::Value = serde_json::from_slice(&valid).unwrap();
            prop_assert_eq!(&back["id"], &sent["id"]);
            prop_assert_eq!(&back["result"]["content"], &sent["result"]["content"]);
        }
    }

    #[test]
    fn the_id_of_a_reply_cut_anywhere_after_it_is_found(
        id in 0i64..1_000_000,
        cut in 0usize..200,
    ) {
        let valid = valid_reply(id, "some text that is cut off somewhere");
        let head = &valid[..(30 + cut).min(valid.len())];
        prop_assert_eq!(timed("scan", || scan_id(head)), Some(RequestId::Number(id)));
    }
}

#[test]
fn a_line_over_the_bound_is_reported_before_it_ends_and_its_tail_dropped() {
    let mut lines = Lines::new(SMALL);
    let mut out = Vec::new();
    let long = valid_reply(7, &"x".repeat(200));
    lines.push(&long[..100], &mut out);
    assert_eq!(out.len(), 1);
    let Line::TooLong(head) = &out[0] else {
        panic!("{out:?}")
    };
    assert_eq!(too_large(head).id, Some(RequestId::Number(7)));
    lines.push(&long[100..], &mut out);
    lines.push(b"\n{}\n", &mut out);
    assert_eq!(out.len(), 2, "the tail was dropped: {out:?}");
    assert_eq!(out[1], Line::Whole(b"{}".to_vec()));
}

#[test]
fn faults_say_what_the_line_was() {
    let cut = &valid_reply(3, "abc")[..20];
    let Frame::Fault(f) = classify(cut) else {
        panic!()
    };
    assert_eq!(
        (f.kind, f.id),
        (FaultKind::Malformed, Some(RequestId::Number(3)))
    );
    let no_version = br#"{"id": "a", "result": {}}"#;
    let Frame::Fault(f) = classify(no_version) else {
        panic!()
    };
    assert_eq!(f.id, Some(RequestId::String("a".into())));
    assert!(matches!(classify(b"server started on stdio"), Frame::Skip));
    assert!(matches!(classify(b"  \r"), Frame::Skip));
    // A server's request or notification, known or not, answers none of our calls.
    for m in [
        &br#"{"jsonrpc":"2.0","method":"x/unknown","params":{}}"#[..],
        br#"{"method":"notifications/message","params":{}}"#,
    ] {
        assert!(!matches!(classify(m), Frame::Fault(_)), "{m:?}");
    }
}
