//! The JUnit report parser against arbitrary and mutated-valid reports (issue 17
//! item 12): it never panics, stays within the time bound per input, reads no more
//! cases than the report has `<testcase` elements, and reads a valid report's cases.

use proptest::prelude::*;

use super::*;
use crate::fuzz::{config, mutate, timed};

fn report(names: &[(String, u8)]) -> String {
    let mut s = String::from(r#"<?xml version="1.0"?><testsuites><testsuite name="s">"#);
    for (name, kind) in names {
        let child = match kind % 4 {
            0 => "",
            1 => "<failure message=\"m\">x</failure>",
            2 => "<skipped/>",
            _ => "<error message=\"e\"/>",
        };
        s.push_str(&format!(
            r#"<testcase classname="c" name="{name}">{child}</testcase>"#
        ));
    }
    s.push_str("</testsuite></testsuites>");
    s
}

fn count(hay: &[u8], needle: &[u8]) -> usize {
    hay.windows(needle.len()).filter(|w| *w == needle).count()
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_bytes_never_panic(bytes in proptest::collection::vec(any::<u8>(), 0..300)) {
        if let Ok(cases) = timed("junit", || parse(&bytes)) {
            prop_assert!(cases.len() <= count(&bytes, b"<testcase"));
        }
    }

    #[test]
    fn valid_reports_are_read_and_mutations_never_panic(
        names in proptest::collection::vec(("[a-z_]{1,12}", any::<u8>()), 0..6),
        edits in proptest::collection::vec((any::<usize>(), any::<u8>(), any::<u8>()), 0..6),
    ) {
        let valid = report(&names);
        let cases = timed("junit", || parse(valid.as_bytes())).expect("a valid report parses");
        let ids: Vec<String> = cases.iter().map(|c| c.id.clone()).collect();
        let want: Vec<String> = names.iter().map(|(n, _)| format!("c::{n}")).collect();
        prop_assert_eq!(ids, want);
        let bytes = mutate(valid.as_bytes(), &edits);
        if let Ok(cases) = timed("junit", || parse(&bytes)) {
            prop_assert!(cases.len() <= count(&bytes, b"<testcase"));
        }
    }
}
