//! The page's text primitives: escaping, bounded untrusted blocks, and the document
//! shell with its Content-Security-Policy.
//!
//! Everything in a report that the agent, the model, a tool or a command could have
//! written goes through [`Html::text`] (escaped: `&`, `<`, `>`, `"`, `'`; characters a
//! reader cannot see made visible) after the run's redactor, so no such text is ever
//! parsed as markup. The CSP meta tag allows only the hashes of this page's own inline
//! style and script and `data:` images: an escaping bug elsewhere still runs nothing.

use std::fmt::Write as _;

use base64::Engine as _;
use sha2::{Digest, Sha256};

use crate::redact::Redactor;

/// An HTML fragment under construction; every dynamic text enters through
/// [`Html::text`], so the only raw markup is this module's callers' literals.
pub(crate) struct Html<'r> {
    out: String,
    redactor: &'r Redactor,
}

impl<'r> Html<'r> {
    pub(crate) fn new(redactor: &'r Redactor) -> Self {
        Self {
            out: String::with_capacity(64 * 1024),
            redactor,
        }
    }

    /// Bytes written so far (the page's budgets are measured on it).
    pub(crate) fn len(&self) -> usize {
        self.out.len()
    }

    /// Literal markup written by this module's callers (never data).
    pub(crate) fn raw(&mut self, markup: &str) -> &mut Self {
        self.out.push_str(markup);
        self
    }

    /// Text: redacted, then escaped.
    pub(crate) fn text(&mut self, text: &str) -> &mut Self {
        let redacted = self.redactor.text(text);
        escape_into(&mut self.out, &redacted);
        self
    }

    /// Text cut to `max` bytes (at a character boundary), saying how much was left out.
    pub(crate) fn bounded(&mut self, text: &str, max: usize) -> &mut Self {
        let redacted = self.redactor.text(text);
        let (shown, cut) = cut(&redacted, max);
        escape_into(&mut self.out, shown);
        if cut > 0 {
            self.raw("<span class=\"cut\">… ")
                .raw(&cut.to_string())
                .raw(" more bytes not shown</span>");
        }
        self
    }

    /// Text the operator did not write, in a frame that says so and where it came from.
    pub(crate) fn untrusted(&mut self, source: &str, text: &str, max: usize) -> &mut Self {
        self.raw("<div class=\"untrusted\"><div class=\"src\">untrusted · ")
            .text(source)
            .raw("</div><pre>")
            .bounded(text, max)
            .raw("</pre></div>")
    }

    /// Formatted literal markup (numbers and the like, never data).
    pub(crate) fn fmt(&mut self, args: std::fmt::Arguments<'_>) -> &mut Self {
        let _ = self.out.write_fmt(args);
        self
    }

    /// The markup written so far.
    pub(crate) fn into_string(self) -> String {
        self.out
    }
}

/// `text` up to `max` bytes and how many bytes were left out.
pub(crate) fn cut(text: &str, max: usize) -> (&str, usize) {
    if text.len() <= max {
        return (text, 0);
    }
    let mut end = max;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    (&text[..end], text.len() - end)
}

/// Escapes `text` for an element's content or a quoted attribute. Control, bidi and
/// zero-width characters are shown as `\u{…}`, so text cannot hide or reorder itself.
pub(crate) fn escape_into(out: &mut String, text: &str) {
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            '\n' | '\t' => out.push(c),
            c if c.is_control() || crate::redact::invisible(c) => {
                let _ = write!(out, "\\u{{{:x}}}", c as u32);
            }
            c => out.push(c),
        }
    }
}

/// `escape_into` as a new string.
pub(crate) fn escape(text: &str) -> String {
    let mut s = String::with_capacity(text.len());
    escape_into(&mut s, text);
    s
}

/// The CSP source for an inline element's content: `'sha256-…'` of its exact bytes.
pub(crate) fn csp_hash(content: &str) -> String {
    let digest = Sha256::digest(content.as_bytes());
    format!(
        "'sha256-{}'",
        base64::engine::general_purpose::STANDARD.encode(digest)
    )
}

/// The whole document: the policy first, then the one style and the one script whose
/// hashes it names, then the body.
pub(crate) fn document(title: &str, style: &str, script: &str, body: &str) -> String {
    let policy = format!(
        "default-src 'none'; style-src {}; script-src {}; img-src data:; base-uri 'none'; form-action 'none'",
        csp_hash(style),
        csp_hash(script)
    );
    let mut page = String::with_capacity(body.len() + style.len() + script.len() + 1024);
    page.push_str("<!DOCTYPE html>\n<html lang=\"en\"><head><meta charset=\"utf-8\">\n");
    let _ = writeln!(
        page,
        "<meta http-equiv=\"Content-Security-Policy\" content=\"{policy}\">"
    );
    page.push_str("<meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n");
    let _ = writeln!(page, "<title>{}</title>", escape(title));
    let _ = writeln!(page, "<style>{style}</style>");
    page.push_str("</head>\n<body>\n");
    page.push_str(body);
    let _ = writeln!(page, "\n<script>{script}</script>\n</body></html>");
    page
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hostile_text_is_inert() {
        let r = Redactor::default();
        let mut h = Html::new(&r);
        h.text("<script>alert(1)</script></untrusted>\"><img src=x onerror=alert(1)></style>");
        let s = h.into_string();
        assert!(
            !s.contains('<') && !s.contains('>') && !s.contains('"'),
            "{s}"
        );
        assert!(s.contains("&lt;/untrusted&gt;"), "{s}");
    }

    #[test]
    fn invisible_characters_are_shown() {
        assert_eq!(
            escape("a\u{202E}b\u{200B}c\u{1b}"),
            "a\\u{202e}b\\u{200b}c\\u{1b}"
        );
    }

    #[test]
    fn secrets_are_redacted_before_escaping() {
        let r = Redactor::default().with(&["sk-secret-0123456789".to_string()]);
        let mut h = Html::new(&r);
        h.untrusted("model", "key sk-secret-0123456789 <b>", 1000);
        let s = h.into_string();
        assert!(s.contains("[REDACTED]") && !s.contains("sk-secret"), "{s}");
        assert!(s.contains("&lt;b&gt;"), "{s}");
    }

    #[test]
    fn bounded_text_says_what_it_left_out() {
        let r = Redactor::default();
        let mut h = Html::new(&r);
        h.bounded("ééé", 3);
        assert_eq!(
            h.into_string(),
            "é<span class=\"cut\">… 4 more bytes not shown</span>"
        );
    }

    #[test]
    fn the_policy_names_the_hashes_of_exactly_the_inline_style_and_script() {
        let page = document("t", "body{}", "1;", "<p>x</p>");
        assert!(page.contains(&csp_hash("body{}")) && page.contains(&csp_hash("1;")));
        assert_ne!(csp_hash("body{}"), csp_hash("body{ }"));
        // The well-known SHA-256 of the empty string.
        assert_eq!(
            csp_hash(""),
            "'sha256-47DEQpj8HBSa+/TImW+5JCeuQeRkm5NMpJWZG3hSuFU='"
        );
    }
}
