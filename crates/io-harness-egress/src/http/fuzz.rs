//! The request-head parser against arbitrary and mutated-valid heads (issue 17 item
//! 12): it never panics, stays within the time bound per input, reads at most its
//! bound, and reads back the target of a valid head.

use proptest::prelude::*;

use super::*;
use crate::fuzz::{config, mutate, timed};

fn valid(host: &str, port: u16, path: &str) -> String {
    format!(
        "GET http://{host}:{port}/{path} HTTP/1.1\r\nHost: {host}:{port}\r\nAccept: */*\r\n\r\n"
    )
}

/// `read_head` over bytes in memory, on a runtime made once per thread.
fn read(bytes: &[u8]) -> Result<(Head, Vec<u8>), HeadError> {
    thread_local! {
        static RT: tokio::runtime::Runtime = tokio::runtime::Builder::new_current_thread()
            .build()
            .expect("a runtime");
    }
    let mut r = bytes;
    RT.with(|rt| rt.block_on(read_head(&mut r)))
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_never_panic(
        bytes in proptest::collection::vec(
            prop_oneof![Just(b'\r'), Just(b'\n'), Just(b':'), Just(b' '), any::<u8>()], 0..300),
    ) {
        timed("http", || {
            if let Ok(h) = parse_head(&bytes) {
                let _ = h.plain_target();
            }
            if let Ok((h, rest)) = read(&bytes) {
                assert!(rest.len() <= bytes.len());
                let _ = h.plain_target();
            }
        });
    }

    #[test]
    fn a_valid_head_round_trips_and_mutations_never_panic(
        host in "[a-z0-9]{1,12}(\\.[a-z]{1,8}){0,2}",
        port in 1u16..,
        path in "[a-z0-9/]{0,20}",
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 0..6),
    ) {
        let text = valid(&host, port, &path);
        let t = timed("http", || parse_head(text.as_bytes()))
            .expect("a valid head parses")
            .plain_target()
            .expect("a valid head has a target");
        prop_assert_eq!((t.host.as_str(), t.port), (host.as_str(), port));
        let bytes = mutate(text.as_bytes(), &edits);
        timed("http", || {
            if let Ok(h) = parse_head(&bytes) {
                let _ = h.plain_target();
            }
        });
    }
}

#[test]
fn a_head_past_the_bound_is_refused_unread() {
    let mut big = b"GET / HTTP/1.1\r\nX: ".to_vec();
    big.extend(std::iter::repeat_n(b'a', MAX_HEAD * 2));
    assert!(matches!(read(&big), Err(HeadError::TooLarge)));
}
