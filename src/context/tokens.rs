//! Token counting without a tokenizer: a calibrated estimate per provider family.
//!
//! # Why not a real tokenizer
//!
//! `tiktoken-rs` would give exact counts for OpenAI models, but it embeds the BPE rank
//! tables of every encoding it supports (several megabytes each, compiled into the
//! binary) and pulls a regex engine of its own; Anthropic publishes no offline
//! tokenizer at all. The budget only needs to be right to within a few percent, and it
//! is checked against the truth on every call: the provider's reported input tokens are
//! recorded beside the estimate in `context_events`, so the error is measurable per run
//! (`io-harness show --json`).
//!
//! # The estimate
//!
//! Byte-pair encoders used by current models split text roughly like this: a run of
//! letters and digits becomes one token per about four characters (common words are one
//! token), most punctuation is a token of its own, a space attaches to the word after
//! it, runs of indentation merge, and a character outside ASCII costs about one token.
//! [`estimate_text`] counts exactly that; [`Family`] scales it for the tokenizer family
//! (Anthropic's splits code a little finer than OpenAI's `o200k`), and each message,
//! block and tool adds the framing overhead the chat formats add.

use crate::provider::{CompletionRequest, ContentBlock, Message, ToolSpec};

/// The tokenizer family of a provider, which sets the calibration factor.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Family {
    /// OpenAI models (`o200k`-style encoders), and OpenAI-compatible servers.
    Openai,
    /// Anthropic Claude models.
    Anthropic,
    /// Anything else (the scripted provider): the OpenAI calibration.
    Other,
}

impl Family {
    /// The family of a provider kind (`openai`, `anthropic`, `openrouter`…) and model:
    /// OpenRouter's `anthropic/…` models count as Anthropic.
    pub fn of(kind: &str, model: &str) -> Self {
        if kind == "anthropic" || model.starts_with("anthropic/") || model.starts_with("claude") {
            Self::Anthropic
        } else if kind == "openai" || kind == "openrouter" {
            Self::Openai
        } else {
            Self::Other
        }
    }

    /// Estimated tokens per counted piece, in percent.
    fn scale_pct(self) -> u64 {
        match self {
            Self::Anthropic => 112,
            Self::Openai | Self::Other => 100,
        }
    }
}

/// Framing tokens per message (role markers, separators).
const PER_MESSAGE: u64 = 4;
/// Framing tokens per content block (type tags, ids).
const PER_BLOCK: u64 = 3;
/// Framing tokens per tool definition.
const PER_TOOL: u64 = 8;

/// Counted pieces of `text` (see the module docs), before the family's scale.
pub fn estimate_text(text: &str) -> u64 {
    let mut tokens = 0u64;
    let mut word = 0u64;
    let mut in_space = false;
    let flush = |word: &mut u64, tokens: &mut u64| {
        if *word > 0 {
            *tokens += word.div_ceil(4);
            *word = 0;
        }
    };
    for c in text.chars() {
        if c.is_ascii_alphanumeric() || c == '_' {
            word += 1;
            in_space = false;
        } else if c == ' ' || c == '\t' {
            flush(&mut word, &mut tokens);
            // A single space joins the next word; a run of indentation is one token.
            if !in_space {
                in_space = true;
            } else if c == '\t' {
                tokens += 1;
            }
        } else {
            flush(&mut word, &mut tokens);
            in_space = false;
            tokens += 1;
        }
    }
    flush(&mut word, &mut tokens);
    tokens
}

fn scaled(pieces: u64, family: Family) -> u64 {
    (pieces * family.scale_pct()).div_ceil(100)
}

/// Estimated tokens of one content block, framing included.
pub fn estimate_block(b: &ContentBlock, family: Family) -> u64 {
    let pieces = match b {
        ContentBlock::Text { text } => estimate_text(text),
        ContentBlock::ToolUse { name, input, .. } => {
            estimate_text(name) + estimate_text(&input.to_string())
        }
        ContentBlock::ToolResult { content, .. } => estimate_text(content),
        ContentBlock::Thinking { thinking, .. } => estimate_text(thinking),
        ContentBlock::RedactedThinking { data } => (data.len() as u64).div_ceil(4),
    };
    scaled(pieces, family) + PER_BLOCK
}

/// Estimated tokens of one message.
pub fn estimate_message(m: &Message, family: Family) -> u64 {
    PER_MESSAGE
        + m.content
            .iter()
            .map(|b| estimate_block(b, family))
            .sum::<u64>()
}

/// Estimated tokens of the tool definitions.
pub fn estimate_tools(tools: &[ToolSpec], family: Family) -> u64 {
    tools
        .iter()
        .map(|t| {
            PER_TOOL
                + scaled(
                    estimate_text(&t.name)
                        + estimate_text(&t.description)
                        + estimate_text(&t.input_schema.to_string()),
                    family,
                )
        })
        .sum()
}

/// Estimated input tokens of a whole request: system prompt, tools and messages.
pub fn estimate_request(r: &CompletionRequest, family: Family) -> u64 {
    let system = r
        .system
        .as_deref()
        .map_or(0, |s| scaled(estimate_text(s), family) + PER_MESSAGE);
    system
        + estimate_tools(&r.tools, family)
        + r.messages
            .iter()
            .map(|m| estimate_message(m, family))
            .sum::<u64>()
}

/// The context window of well-known models, in tokens; `None` when unknown (the budget
/// then comes from `[context] max_tokens` alone).
pub fn context_window(model: &str) -> Option<u64> {
    let m = model.rsplit('/').next().unwrap_or(model);
    let table: &[(&str, u64)] = &[
        ("claude-", 200_000),
        ("gpt-5", 400_000),
        ("gpt-4.1", 1_047_576),
        ("gpt-4o", 128_000),
        ("o3", 200_000),
        ("o4-mini", 200_000),
    ];
    table
        .iter()
        .find(|(prefix, _)| m.starts_with(prefix))
        .map(|&(_, w)| w)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn words_punctuation_and_indentation_are_counted_like_a_bpe() {
        assert_eq!(estimate_text(""), 0);
        assert_eq!(estimate_text("hello world"), 4);
        assert_eq!(estimate_text("fn main() {}"), 6);
        // Indentation merges: eight spaces before a word are not eight tokens.
        assert!(estimate_text("        x") <= 2);
        // About four characters of identifier per token.
        assert_eq!(estimate_text("abcdefghijkl"), 3);
        // Outside ASCII: a token per character.
        assert_eq!(estimate_text("日本語"), 3);
    }

    #[test]
    fn english_prose_lands_near_four_characters_per_token() {
        let text = "The quick brown fox jumps over the lazy dog while the harness \
                    records every step of the run in one SQLite file. ";
        let est = estimate_text(text) as f64;
        let per_token = text.len() as f64 / est;
        assert!((3.0..=6.0).contains(&per_token), "{per_token}");
    }

    #[test]
    fn the_anthropic_family_counts_more() {
        let r = CompletionRequest::new("m", vec![Message::user("fn a() { b(c, d); }")]);
        assert!(estimate_request(&r, Family::Anthropic) > estimate_request(&r, Family::Openai));
        assert_eq!(
            Family::of("openrouter", "anthropic/claude-sonnet-4.5"),
            Family::Anthropic
        );
        assert_eq!(Family::of("scripted", "scripted"), Family::Other);
    }

    #[test]
    fn windows_of_known_models() {
        assert_eq!(context_window("claude-sonnet-4-5"), Some(200_000));
        assert_eq!(context_window("openai/gpt-4o-mini"), Some(128_000));
        assert_eq!(context_window("mystery"), None);
    }
}
