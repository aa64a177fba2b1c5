//! Secret redaction for everything the store writes.
//!
//! Credentials reach the store by accident — a tool prints an environment variable, a
//! model echoes a key, a request body carries it. Redaction at the single writer is the
//! one place that catches all of them, so the file can be handed to someone else.

use std::borrow::Cow;

/// What replaces each occurrence of a secret.
pub(crate) const REDACTED: &str = "[REDACTED]";

/// Shorter values are ignored (see [`super::Store::redact_secrets`]).
pub(crate) const MIN_SECRET_LEN: usize = 8;

/// The registered secrets, longest first so a secret that contains another is
/// replaced whole.
#[derive(Debug, Default)]
pub(crate) struct Redactor {
    needles: Vec<String>,
}

impl Redactor {
    /// This set plus `values` (and their JSON-escaped forms, which is how a secret with a
    /// quote or backslash appears inside a JSON column or request body).
    pub(crate) fn with(&self, values: &[String]) -> Redactor {
        let mut needles = self.needles.clone();
        for value in values
            .iter()
            .filter(|v| v.chars().count() >= MIN_SECRET_LEN)
        {
            needles.push(value.clone());
            if let Ok(quoted) = serde_json::to_string(value) {
                let escaped = &quoted[1..quoted.len() - 1];
                if escaped != value {
                    needles.push(escaped.to_owned());
                }
            }
        }
        needles.sort_by(|a, b| b.len().cmp(&a.len()).then_with(|| a.cmp(b)));
        needles.dedup();
        Redactor { needles }
    }

    /// `text` with every secret replaced.
    pub(crate) fn text<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let mut out = Cow::Borrowed(text);
        for needle in &self.needles {
            if out.contains(needle.as_str()) {
                out = Cow::Owned(out.replace(needle.as_str(), REDACTED));
            }
        }
        out
    }

    /// An optional text with every secret replaced.
    pub(crate) fn opt<'a>(&self, text: Option<&'a str>) -> Option<Cow<'a, str>> {
        text.map(|t| self.text(t))
    }

    /// `bytes` with every secret's UTF-8 encoding replaced.
    pub(crate) fn bytes<'a>(&self, bytes: &'a [u8]) -> Cow<'a, [u8]> {
        let mut out = Cow::Borrowed(bytes);
        for needle in &self.needles {
            if let Some(replaced) = replace_bytes(&out, needle.as_bytes(), REDACTED.as_bytes()) {
                out = Cow::Owned(replaced);
            }
        }
        out
    }
}

/// `hay` with each non-overlapping `needle` replaced by `with`, or `None` if absent.
fn replace_bytes(hay: &[u8], needle: &[u8], with: &[u8]) -> Option<Vec<u8>> {
    let find = |from: usize| {
        hay.get(from..)
            .and_then(|rest| rest.windows(needle.len()).position(|w| w == needle))
            .map(|i| i + from)
    };
    let mut at = find(0)?;
    let mut out = Vec::with_capacity(hay.len());
    let mut copied = 0;
    loop {
        out.extend_from_slice(&hay[copied..at]);
        out.extend_from_slice(with);
        copied = at + needle.len();
        match find(copied) {
            Some(next) => at = next,
            None => break,
        }
    }
    out.extend_from_slice(&hay[copied..]);
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

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
    }

    #[test]
    fn short_values_are_ignored() {
        let r = redactor(&["", "true", "1234567"]);
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
}
