//! Secret redaction for everything the harness writes or prints: the store, the audit
//! log and the terminal.
//!
//! Credentials reach a record by accident — a tool prints an environment variable, a
//! model echoes a key, a request body carries it. Redaction where the record is
//! written is the one place that catches all of them, so a store or an audit log can be
//! handed to someone else.
//!
//! A value is found however it was disguised on the way in, as far as a reader could
//! undo the disguise without effort:
//! - split by characters a terminal or an editor does not show — control characters
//!   (newlines included), zero-width, bidi and other format characters, variation
//!   selectors, tag characters — raw or as JSON escapes (`\u200b`, `\n`). Matching runs
//!   on the text with those removed, and the replaced span covers them too, so the
//!   redaction holds after any later normalisation (a terminal's sanitising, a copy);
//! - JSON-escaped (a quote or backslash inside a JSON column or request body);
//! - base64-encoded (standard or URL-safe alphabet) at any alignment inside a longer
//!   encoded text.
//!
//! Other transformations (reversed, hex, split by visible characters) are not
//! recognised: redaction is the record's last line, not the policy's first.
//!
//! ```
//! use io_harness::redact::Redactor;
//!
//! let r = Redactor::default().with(&["sk-live-0123456789".to_string()]);
//! assert_eq!(r.text("key sk-live-01234\u{200B}56789 ok"), "key [REDACTED] ok");
//! ```

use std::borrow::Cow;
use std::sync::{Arc, RwLock};

use aho_corasick::{AhoCorasick, MatchKind};
use base64::Engine as _;

/// What replaces each occurrence of a secret.
pub const REDACTED: &str = "[REDACTED]";

/// Shorter values are ignored: they are not plausible credentials, and replacing every
/// occurrence of a short string such as `true` or a port number would corrupt
/// unrelated text and JSON.
pub const MIN_SECRET_LEN: usize = 8;

/// The shortest encoded form searched for: a few base64 characters occur by chance.
const MIN_ENCODED_LEN: usize = 16;

/// The registered secrets and one automaton over every form of them.
#[derive(Debug, Clone, Default)]
pub struct Redactor {
    values: Vec<String>,
    matcher: Option<AhoCorasick>,
}

impl Redactor {
    /// This set plus `values` (each at least [`MIN_SECRET_LEN`] characters; shorter
    /// ones are ignored).
    pub fn with(&self, values: &[String]) -> Redactor {
        let mut all = self.values.clone();
        for v in values {
            if v.chars().count() >= MIN_SECRET_LEN && !all.contains(v) {
                all.push(v.clone());
            }
        }
        let mut needles: Vec<Vec<u8>> = Vec::new();
        for v in &all {
            forms(v, &mut needles);
        }
        needles.sort();
        needles.dedup();
        let matcher = (!needles.is_empty())
            .then(|| {
                AhoCorasick::builder()
                    .match_kind(MatchKind::LeftmostLongest)
                    .build(&needles)
                    .ok()
            })
            .flatten();
        Redactor {
            values: all,
            matcher,
        }
    }

    /// Whether no secret is registered.
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }

    /// `text` with every secret replaced.
    pub fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        match self.bytes(text.as_bytes()) {
            Cow::Borrowed(_) => Cow::Borrowed(text),
            // Spans begin and end on character boundaries (see `spans`), so this holds
            // UTF-8; the lossy path is never taken but costs nothing to keep.
            Cow::Owned(v) => Cow::Owned(
                String::from_utf8(v)
                    .unwrap_or_else(|e| String::from_utf8_lossy(e.as_bytes()).into_owned()),
            ),
        }
    }

    /// An optional text with every secret replaced.
    pub fn opt<'a>(&self, text: Option<&'a str>) -> Option<Cow<'a, str>> {
        text.map(|t| self.text(t))
    }

    /// `bytes` with every secret's forms replaced (text that is not UTF-8 is matched
    /// byte for byte where it is not).
    pub fn bytes<'a>(&self, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        let Some(matcher) = &self.matcher else {
            return Cow::Borrowed(bytes);
        };
        let spans = spans(matcher, bytes);
        if spans.is_empty() {
            return Cow::Borrowed(bytes);
        }
        let mut out = Vec::with_capacity(bytes.len());
        let mut copied = 0;
        for (start, end) in spans {
            out.extend_from_slice(&bytes[copied..start]);
            out.extend_from_slice(REDACTED.as_bytes());
            copied = end;
        }
        out.extend_from_slice(&bytes[copied..]);
        Cow::Owned(out)
    }
}

/// A set of secrets shared by every clone (a store's handles, an audit log's), which a
/// run adds its credentials to once.
#[derive(Debug, Clone, Default)]
pub struct SecretSet(Arc<RwLock<Arc<Redactor>>>);

impl SecretSet {
    /// Adds `values` to what is redacted from now on.
    pub fn register(&self, values: &[String]) {
        let mut guard = self.0.write().unwrap_or_else(|e| e.into_inner());
        let next = guard.with(values);
        *guard = Arc::new(next);
    }

    /// The secrets registered so far (a snapshot: cheap, and no lock held while
    /// writing).
    pub fn redactor(&self) -> Arc<Redactor> {
        let guard = self.0.read().unwrap_or_else(|e| e.into_inner());
        Arc::clone(&guard)
    }
}

/// Whether a variable's name says it holds a credential (`GITHUB_TOKEN`,
/// `NPM_AUTH`, `DB_PASSWORD`, `AWS_SECRET_ACCESS_KEY`, `OPENAI_API_KEY`): such a
/// variable passed to a command or an MCP server by name has its value redacted from
/// the records like the harness's own keys. A name is what can be judged without
/// guessing from values (`RUST_LOG` or `NODE_OPTIONS` are not redacted).
pub fn credential_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    [
        "TOKEN",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "API_KEY",
        "APIKEY",
        "ACCESS_KEY",
        "PRIVATE_KEY",
        "CREDENTIAL",
        "AUTH",
    ]
    .iter()
    .any(|w| upper.contains(w))
        || upper.ends_with("_KEY")
        || upper.ends_with("_PAT")
}

/// Every form of `value` that is searched for, each normalised as the text is.
fn forms(value: &str, out: &mut Vec<Vec<u8>>) {
    let plain = normalise(value.as_bytes()).bytes;
    if let Ok(quoted) = serde_json::to_string(value) {
        let escaped = normalise(&quoted.as_bytes()[1..quoted.len() - 1]).bytes;
        if escaped != plain {
            out.push(escaped);
        }
    }
    let raw = value.as_bytes();
    for engine in [
        base64::engine::general_purpose::STANDARD_NO_PAD,
        base64::engine::general_purpose::URL_SAFE_NO_PAD,
    ] {
        for shift in 0..3usize {
            // The value preceded by `shift` unknown bytes: the first group mixes them
            // in and a last partial group mixes in what follows, so only the groups in
            // between are the same wherever the value sits.
            let mut input = vec![0u8; shift];
            input.extend_from_slice(raw);
            let encoded = engine.encode(&input);
            let from = if shift > 0 { 4 } else { 0 };
            let to = (input.len() / 3) * 4;
            if to >= from + MIN_ENCODED_LEN {
                out.push(encoded.as_bytes()[from..to].to_vec());
            }
        }
    }
    if !plain.is_empty() {
        out.push(plain);
    }
}

/// The spans of `hay` (original offsets, start..end) that hold a secret, in order and
/// not overlapping. Each begins at the first byte of a kept character and ends after
/// the last byte of one, so replacing them keeps UTF-8 text UTF-8.
fn spans(matcher: &AhoCorasick, hay: &[u8]) -> Vec<(usize, usize)> {
    if !hay.iter().any(|&b| may_hide(b)) {
        return matcher
            .find_iter(hay)
            .map(|m| (m.start(), m.end()))
            .collect();
    }
    let norm = normalise(hay);
    matcher
        .find_iter(&norm.bytes)
        .map(|m| (norm.original(m.start()), norm.original_end(m.end() - 1)))
        .collect()
}

/// A byte that may begin something [`normalise`] removes or decodes.
fn may_hide(b: u8) -> bool {
    b < 0x20 || b == 0x7F || b == b'\\' || b >= 0x80
}

/// Text with the invisible characters removed and JSON `\\u` escapes decoded, and the
/// way back to the original.
struct Normalised {
    bytes: Vec<u8>,
    /// `(i, n)`: before normalised byte `i`, `n` original bytes were removed in all.
    gaps: Vec<(usize, usize)>,
    /// `(start, end, original end)` of each decoded escape's bytes in `bytes`.
    decoded: Vec<(usize, usize, usize)>,
}

impl Normalised {
    /// The original offset of normalised byte `i`.
    fn original(&self, i: usize) -> usize {
        match self.gaps.partition_point(|&(at, _)| at <= i) {
            0 => i,
            k => i + self.gaps[k - 1].1,
        }
    }

    /// The original offset just after the unit normalised byte `i` belongs to.
    fn original_end(&self, i: usize) -> usize {
        let k = self.decoded.partition_point(|&(start, _, _)| start <= i);
        match k.checked_sub(1).map(|k| self.decoded[k]) {
            Some((_, end, original_end)) if i < end => original_end,
            _ => self.original(i) + 1,
        }
    }
}

/// What [`normalise`] does with one unit of the text.
enum Unit {
    Keep,
    Drop,
    /// A JSON escape of a visible character: matched as that character.
    Decode(char),
}

/// `hay` without invisible characters (raw or JSON-escaped), other JSON `\\u` escapes
/// decoded.
fn normalise(hay: &[u8]) -> Normalised {
    let mut n = Normalised {
        bytes: Vec::with_capacity(hay.len()),
        gaps: Vec::new(),
        decoded: Vec::new(),
    };
    let mut removed = 0usize;
    let mut i = 0;
    while i < hay.len() {
        let (width, unit) = classify(hay, i);
        let gone = match unit {
            Unit::Keep => {
                n.bytes.extend_from_slice(&hay[i..i + width]);
                0
            }
            Unit::Drop => width,
            Unit::Decode(c) => {
                let start = n.bytes.len();
                let mut buf = [0u8; 4];
                n.bytes
                    .extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                n.decoded.push((start, n.bytes.len(), i + width));
                width - c.len_utf8()
            }
        };
        if gone > 0 {
            removed += gone;
            match n.gaps.last_mut() {
                Some((at, total)) if *at == n.bytes.len() => *total = removed,
                _ => n.gaps.push((n.bytes.len(), removed)),
            }
        }
        i += width;
    }
    n
}

/// The width of the unit at `hay[i]` and what becomes of it.
fn classify(hay: &[u8], i: usize) -> (usize, Unit) {
    let b = hay[i];
    if b < 0x20 || b == 0x7F {
        return (1, Unit::Drop);
    }
    if b == b'\\' {
        return match hay.get(i + 1) {
            Some(b'n' | b'r' | b't' | b'b' | b'f') => (2, Unit::Drop),
            Some(b'u') => match json_escape(hay, i) {
                Some((width, c)) if invisible(c) => (width, Unit::Drop),
                Some((width, c)) => (width, Unit::Decode(c)),
                None => (1, Unit::Keep),
            },
            // An escaped backslash is one unit: its second half does not start one,
            // unless a `u` escape follows it — a `\\uXXXX` written as text, inside
            // JSON (the audit log's argv, a stored reply).
            Some(b'\\') => match hay.get(i + 2) {
                Some(b'u') => match json_escape(hay, i + 1) {
                    Some((width, c)) if invisible(c) => (width + 1, Unit::Drop),
                    Some((width, c)) => (width + 1, Unit::Decode(c)),
                    None => (2, Unit::Keep),
                },
                _ => (2, Unit::Keep),
            },
            _ => (1, Unit::Keep),
        };
    }
    if b < 0x80 {
        return (1, Unit::Keep);
    }
    let width = match b {
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => return (1, Unit::Keep),
    };
    match hay
        .get(i..i + width)
        .and_then(|s| std::str::from_utf8(s).ok())
    {
        Some(s) if s.chars().any(invisible) => (width, Unit::Drop),
        Some(_) => (width, Unit::Keep),
        None => (1, Unit::Keep),
    }
}

/// The character of a JSON `\uXXXX` escape at `hay[i]` (a surrogate pair as one) and
/// the escape's width.
fn json_escape(hay: &[u8], i: usize) -> Option<(usize, char)> {
    let unit = |at: usize| -> Option<u32> {
        let s = hay.get(at..at + 6)?;
        if s[0] != b'\\' || s[1] != b'u' {
            return None;
        }
        u32::from_str_radix(std::str::from_utf8(&s[2..]).ok()?, 16).ok()
    };
    let hi = unit(i)?;
    if (0xD800..0xDC00).contains(&hi) {
        let lo = unit(i + 6).filter(|lo| (0xDC00..0xE000).contains(lo))?;
        let c = char::from_u32(0x10000 + ((hi - 0xD800) << 10) + (lo - 0xDC00))?;
        return Some((12, c));
    }
    char::from_u32(hi).map(|c| (6, c))
}

/// Characters a terminal or an editor does not show, which could split a secret
/// without a reader noticing: controls, zero-width and format characters, bidi
/// controls, variation selectors, fillers and tag characters.
pub fn invisible(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}'
            | '\u{17B5}' | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}' | '\u{FFF9}'..='\u{FFFB}'
            | '\u{1D173}'..='\u{1D17A}' | '\u{E0000}'..='\u{E007F}' | '\u{E0100}'..='\u{E01EF}')
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEY: &str = "sk-live-0123456789abcdef";

    fn redactor(values: &[&str]) -> Redactor {
        let values: Vec<String> = values.iter().map(|v| v.to_string()).collect();
        Redactor::default().with(&values)
    }

    #[test]
    fn replaces_every_occurrence_in_text_and_bytes() {
        let r = redactor(&["sk-live-12345678"]);
        assert_eq!(
            r.text("a sk-live-12345678 b sk-live-12345678"),
            "a [REDACTED] b [REDACTED]"
        );
        assert_eq!(
            r.bytes(b"sk-live-12345678xsk-live-12345678").as_ref(),
            b"[REDACTED]x[REDACTED]"
        );
        assert!(matches!(r.text("clean"), Cow::Borrowed(_)));
        assert!(matches!(r.bytes(b"clean"), Cow::Borrowed(_)));
        assert!(matches!(
            r.text("clean\nwith a newline é"),
            Cow::Borrowed(_)
        ));
    }

    #[test]
    fn short_values_are_ignored() {
        let r = redactor(&["", "true", "1234567"]);
        assert!(r.is_empty());
        assert_eq!(r.text("true 1234567"), "true 1234567");
    }

    #[test]
    fn a_longer_secret_containing_a_shorter_one_is_replaced_whole() {
        let r = redactor(&["password", "password-and-more"]);
        assert_eq!(r.text("x password-and-more y"), "x [REDACTED] y");
    }

    #[test]
    fn the_json_escaped_form_is_redacted_too() {
        let r = redactor(&["pa\"ss\\word"]);
        let json = serde_json::to_string("pa\"ss\\word").unwrap();
        assert_eq!(r.text(&json), "\"[REDACTED]\"");
        assert_eq!(r.bytes(json.as_bytes()).as_ref(), b"\"[REDACTED]\"");
    }

    #[test]
    fn a_key_split_by_invisible_characters_is_replaced_with_them() {
        let r = redactor(&[KEY]);
        for split in [
            "\u{200B}",
            "\u{200D}",
            "\u{2060}",
            "\u{FEFF}",
            "\u{202E}",
            "\u{2066}",
            "\u{00AD}",
            "\u{FE0F}",
            "\u{E0041}",
            "\n",
            "\r\n",
            "\t",
            "\x1b",
            "\u{85}",
        ] {
            let hidden = format!("{}{split}{}{split}{}", &KEY[..5], &KEY[5..12], &KEY[12..]);
            assert_eq!(
                r.text(&format!("before {hidden} after")),
                "before [REDACTED] after",
                "split by {split:?}"
            );
        }
    }

    #[test]
    fn a_key_split_by_json_escapes_is_replaced_in_json_text() {
        let r = redactor(&[KEY]);
        for split in [
            "\\u200b",
            "\\u200B",
            "\\n",
            "\\u0000",
            "\\udb40\\udc41",
            "\\ufeff",
        ] {
            let json = format!("{{\"a\":\"{}{split}{}\"}}", &KEY[..9], &KEY[9..]);
            let out = r.text(&json);
            assert_eq!(out, "{\"a\":\"[REDACTED]\"}", "split by {split}");
            serde_json::from_str::<serde_json::Value>(&out).unwrap();
        }
        // A character written as its escape is the character.
        let json = format!("\"{}\\u0041{}\"", &KEY[..9], &KEY[9..]);
        assert_eq!(r.text(&json), json, "not the key: an A was added");
    }

    /// Issue 16's adversary (K5): a key written as literal JSON escapes of its own
    /// characters (`\u0073\u006b…`) is the key.
    #[test]
    fn a_key_written_as_json_escapes_is_found() {
        let r = redactor(&[KEY]);
        let escaped: String = KEY
            .chars()
            .map(|c| format!("\\u{:04x}", c as u32))
            .collect();
        assert_eq!(r.text(&format!("x {escaped} y")), "x [REDACTED] y");
        let half = format!(
            "{}{}",
            &KEY[..10],
            KEY[10..]
                .chars()
                .map(|c| format!("\\u{:04X}", c as u32))
                .collect::<String>()
        );
        assert_eq!(r.text(&format!("\"{half}\"")), "\"[REDACTED]\"");
        // The same text inside JSON (an argv in the audit log): its backslashes escaped.
        let line = serde_json::to_string(&vec![escaped.clone()]).unwrap();
        assert_eq!(r.text(&line), "[\"[REDACTED]\"]");
    }

    #[test]
    fn an_escaped_backslash_before_n_is_not_a_newline() {
        let r = redactor(&["abcdefgh-ijkl"]);
        assert_eq!(r.text("abcdefgh\\\\n-ijkl"), "abcdefgh\\\\n-ijkl");
    }

    #[test]
    fn base64_of_a_key_is_found_at_every_alignment_and_alphabet() {
        use base64::engine::general_purpose::{STANDARD, URL_SAFE};
        let key = "sk-ant-api03-~~~?>>>-0123456789abcdefghij";
        let r = redactor(&[key]);
        for prefix in ["", "a", "ab", "abc", "the key is: "] {
            for engine in [STANDARD, URL_SAFE] {
                let encoded = engine.encode(format!("{prefix}{key} and more"));
                let out = r.text(&encoded);
                assert!(out.contains(REDACTED), "{prefix:?}: {encoded}");
                assert!(out.len() < encoded.len(), "{out}");
            }
        }
        let unrelated = STANDARD.encode("nothing to see in this text at all, honestly");
        assert_eq!(r.text(&unrelated), unrelated);
    }

    #[test]
    fn replacement_keeps_text_valid_around_multibyte_characters() {
        let r = redactor(&["ключ-секрет-42"]);
        let out = r.text("é ключ-\u{200B}секрет-42 ü");
        assert_eq!(out, "é [REDACTED] ü");
    }

    #[test]
    fn credential_names_are_told_by_their_words() {
        for yes in [
            "GITHUB_TOKEN",
            "npm_auth_token",
            "DB_PASSWORD",
            "AWS_SECRET_ACCESS_KEY",
            "STRIPE_KEY",
            "GH_PAT",
            "MY_CREDENTIALS",
        ] {
            assert!(credential_name(yes), "{yes}");
        }
        for no in [
            "RUST_LOG",
            "NODE_OPTIONS",
            "PATH",
            "HOME",
            "KEYBOARD",
            "LANG",
        ] {
            assert!(!credential_name(no), "{no}");
        }
    }

    #[test]
    fn a_secret_set_is_shared_by_its_clones() {
        let set = SecretSet::default();
        let clone = set.clone();
        clone.register(&[KEY.to_string()]);
        assert_eq!(set.redactor().text(KEY), REDACTED);
    }
}
