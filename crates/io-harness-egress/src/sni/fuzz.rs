//! The ClientHello parser against arbitrary and mutated-valid records (issue 17 item
//! 12): it never panics, stays within the time bound per input, never claims a host
//! that is not in the bytes, and reads back the name a valid hello carries.

use proptest::prelude::*;

use super::*;
use crate::fuzz::{config, mutate, timed};

fn host() -> impl Strategy<Value = String> {
    "[a-z0-9]{1,12}(\\.[a-z0-9]{1,12}){0,3}"
}

fn contains(hay: &[u8], needle: &[u8]) -> bool {
    hay.windows(needle.len()).any(|w| w == needle)
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_never_panic(
        head in proptest::collection::vec(any::<u8>(), 0..8),
        bytes in proptest::collection::vec(any::<u8>(), 0..300),
    ) {
        // Half the cases start as a handshake record does, to get past the first check.
        let mut buf = if head.first().is_some_and(|b| b % 2 == 0) { vec![0x16, 0x03, 0x01] } else { Vec::new() };
        buf.extend_from_slice(&bytes);
        if let Hello::Sni(name) = timed("sni", || parse_client_hello(&buf)) {
            prop_assert!(contains(&buf.to_ascii_lowercase(), name.as_bytes()));
        }
    }

    #[test]
    fn a_valid_hello_round_trips_and_mutations_never_panic(
        name in host(),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 0..6),
    ) {
        let valid = fake_client_hello(Some(&name));
        prop_assert_eq!(timed("sni", || parse_client_hello(&valid)), Hello::Sni(name));
        let bytes = mutate(&valid, &edits);
        if let Hello::Sni(got) = timed("sni", || parse_client_hello(&bytes)) {
            prop_assert!(contains(&bytes.to_ascii_lowercase(), got.as_bytes()));
        }
    }
}
