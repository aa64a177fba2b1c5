//! Token counting: the real encoder for OpenAI models, a calibrated estimate otherwise.
//!
//! # OpenAI models: `tiktoken-rs`
//!
//! [`Family::of`] looks the model up in `tiktoken-rs`'s own model table: gpt-4o,
//! gpt-4.1, gpt-4.5, gpt-5, o1, o3, o4 (and OpenRouter's `openai/…` of them) are
//! counted with `o200k_base`, gpt-4 and gpt-3.5 with `cl100k_base`. Only those two
//! encoders are referenced, so the linker keeps only their rank tables (`r50k`/`p50k`
//! are dropped). The encoder is loaded on the first count (≈140 ms, once per process,
//! in a `LazyLock` of the crate), so a run that never uses an OpenAI model never pays
//! for it. Counting is deterministic: the same history gives the same counts, hence the
//! same assembly, byte for byte, on resume.
//!
//! Measured on this 2-core machine (`cargo bench --bench context_trajectory`, the 61
//! full-history requests of the 60-step trajectory, up to 76k tokens each): encoding
//! every text of a request costs 6.4 ms; with counts cached by the SHA-256 of each text
//! (texts of 256 bytes and more; the history is mostly last turn's observations), the
//! first pass costs 0.47 ms per request and a warm one 0.36 ms, against 0.22 ms for the
//! estimate. Build cost: the new crates (`tiktoken-rs`, `fancy-regex`, `regex`,
//! `bit-set`, `bit-vec`, `base64` 0.22, `anyhow`, `rustc-hash`) add about 12 s to a
//! release build of this crate (16 s for `tiktoken-rs` with all its dependencies from
//! nothing); the release binary grows by 5.8 MB stripped (25.6 → 31.4 MB),
//! almost all of it the two rank tables. Both are well inside what the feature is
//! worth, so the dependency is a normal one, not a dev-dependency.
//!
//! # Everything else: the estimate
//!
//! Anthropic publishes no offline tokenizer, and OpenAI-compatible servers run models
//! of their own. [`estimate_text`] imitates the `o200k` pre-tokenizer, whose pieces
//! are nearly always one token each: a word (capitals then lower case, with one
//! leading space, `_`, `.` or other single mark) is one token per seven letters;
//! numbers go in groups of three digits; a run of
//! punctuation is a token per two marks and takes the newlines after it (`;\n`); a
//! run of indentation less its last blank is one token, as is a run of newlines; a
//! character outside ASCII is one. [`Family`] scales it (Anthropic's encoder splits
//! code a little finer: 112%), and each message, block and tool adds the framing the
//! chat formats add.
//!
//! Calibration (`tests/it/context.rs`, `the_estimate_stays_within_its_stated_error_of_o200k`,
//! against `o200k_base`): on the texts of the trajectory's last full-history request
//! (tool results with line numbers, tool inputs, prompts; 74k tokens) the estimate is
//! −1.9% off in total and −2.4% on the worst single text; on this repository's Rust
//! source (171 files, 320k tokens) +0.8% in total and −9.9% on the worst file. The
//! previous estimate (a token per four characters of any identifier, a token per mark)
//! was −13.8% on the trajectory and +46% on the source (+61% on the worst file). The
//! test holds the totals within 6% and any text of 200 tokens or more within 20%.
//! The Anthropic factor cannot be checked offline; the provider's reported input
//! tokens are recorded beside the estimate in `context_events` on every call, so the
//! error is measurable per run (`io-harness show --json`).
//!
//! # The `exact-tokens` feature
//!
//! The exact counts (and the `tiktoken-rs` dependency) are the crate's `exact-tokens`
//! feature, on by default. Without it [`EXACT_AVAILABLE`] is `false`, [`Family::of`]
//! never answers an exact family, and every model is estimated.

use std::collections::HashMap;
use std::sync::{Mutex, OnceLock};

#[cfg(feature = "exact-tokens")]
use tiktoken_rs::CoreBPE;
#[cfg(feature = "exact-tokens")]
use tiktoken_rs::tokenizer::{Tokenizer, get_tokenizer};

/// Whether this build counts OpenAI models' tokens exactly (the crate's
/// `exact-tokens` feature); without it they are estimated.
pub const EXACT_AVAILABLE: bool = cfg!(feature = "exact-tokens");

/// The name of the crate feature exact counts need.
pub const EXACT_FEATURE: &str = "exact-tokens";

use crate::provider::{CompletionRequest, ContentBlock, Message, ToolSpec};

/// The tokenizer family of a provider: an exact encoder, or the calibration factor of
/// the estimate.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Family {
    /// OpenAI models on `o200k_base` (gpt-4o, gpt-4.1, gpt-4.5, gpt-5, o1, o3, o4,
    /// gpt-oss): counted exactly with that encoder.
    O200k,
    /// OpenAI models on `cl100k_base` (gpt-4, gpt-3.5): counted exactly.
    Cl100k,
    /// Other models behind an OpenAI-style API (OpenRouter's non-OpenAI models,
    /// OpenAI-compatible servers): the estimate, at the `o200k` calibration.
    Openai,
    /// Anthropic Claude models: the estimate, scaled up (no offline tokenizer exists).
    Anthropic,
    /// Anything else (the scripted provider): the estimate at the `o200k` calibration.
    Other,
}

impl Family {
    /// The family of a provider kind (`openai`, `anthropic`, `openrouter`…) and model.
    /// OpenRouter's `anthropic/…` models count as Anthropic; OpenAI's models (and
    /// OpenRouter's `openai/…`) get their exact encoder when `tiktoken-rs`'s model table
    /// knows them. Only the name is looked up here: the encoder itself is loaded on the
    /// first count, so a run that never talks to an OpenAI model never pays for it.
    pub fn of(kind: &str, model: &str) -> Self {
        if kind == "anthropic" || model.starts_with("anthropic/") || model.starts_with("claude") {
            return Self::Anthropic;
        }
        let openai_model = match kind {
            "openai" => Some(model.strip_prefix("openai/").unwrap_or(model)),
            "openrouter" => model.strip_prefix("openai/"),
            _ => None,
        };
        if let Some(exact) = openai_model.and_then(Self::exact_of) {
            return exact;
        }
        if kind == "openai" || kind == "openrouter" {
            Self::Openai
        } else {
            Self::Other
        }
    }

    /// The family `counting` asks for: [`Family::of`], except that `estimate` never
    /// takes an exact encoder (an OpenAI model is then estimated as one).
    pub fn counting(kind: &str, model: &str, counting: crate::contract::TokenCounting) -> Self {
        match (Self::of(kind, model), counting) {
            (f, crate::contract::TokenCounting::Estimate) if f.is_exact() => Self::Openai,
            (f, _) => f,
        }
    }

    /// The exact family of an OpenAI model `tiktoken-rs`'s table knows.
    #[cfg(feature = "exact-tokens")]
    fn exact_of(model: &str) -> Option<Self> {
        match get_tokenizer(model) {
            Some(Tokenizer::O200kBase | Tokenizer::O200kHarmony) => Some(Self::O200k),
            Some(Tokenizer::Cl100kBase) => Some(Self::Cl100k),
            _ => None,
        }
    }

    /// Without the `exact-tokens` feature no model has an exact family.
    #[cfg(not(feature = "exact-tokens"))]
    fn exact_of(_model: &str) -> Option<Self> {
        None
    }

    /// Whether this family is counted with a real encoder rather than estimated
    /// (never, in a build without the `exact-tokens` feature).
    pub fn is_exact(self) -> bool {
        EXACT_AVAILABLE && matches!(self, Self::O200k | Self::Cl100k)
    }

    /// Estimated tokens per counted piece, in percent (100 for the exact families,
    /// whose pieces are tokens).
    fn scale_pct(self) -> u64 {
        match self {
            Self::Anthropic => 112,
            Self::O200k | Self::Cl100k | Self::Openai | Self::Other => 100,
        }
    }

    /// The encoder of an exact family, loaded (once per process) on first use.
    #[cfg(feature = "exact-tokens")]
    fn encoder(self) -> Option<&'static CoreBPE> {
        match self {
            Self::O200k => Some(tiktoken_rs::o200k_base_singleton()),
            Self::Cl100k => Some(tiktoken_rs::cl100k_base_singleton()),
            Self::Openai | Self::Anthropic | Self::Other => None,
        }
    }
}

/// Starts loading `family`'s encoder on a thread of its own, so the first request's
/// count does not wait for all of it (≈240 ms for `o200k_base`): the run's setup —
/// store, sandbox probe, workspace snapshot — runs meanwhile. A no-op for the
/// estimated families and once the encoder is loaded; the first count simply waits
/// for the load to finish (the counts are the same either way).
pub fn warm(family: Family) {
    #[cfg(feature = "exact-tokens")]
    if family.is_exact() {
        static STARTED: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);
        if !STARTED.swap(true, std::sync::atomic::Ordering::Relaxed) {
            let _ = std::thread::Builder::new()
                .name("io-harness-tokenizer".into())
                .spawn(move || {
                    let _ = family.encoder();
                    // The other exact family is loaded on its own first use.
                });
        }
    }
    #[cfg(not(feature = "exact-tokens"))]
    let _ = family;
}

/// Texts shorter than this are encoded every time: hashing them would cost about as
/// much as encoding them.
const CACHE_MIN_BYTES: usize = 256;
/// Entries kept before the cache is emptied (bounds memory in a long-lived process;
/// a run's observations are far fewer).
const CACHE_MAX_ENTRIES: usize = 1 << 16;

type CountCache = Mutex<HashMap<(Family, usize, u64), u64>>;

/// Counts of long texts by (family, length, a fast 64-bit hash of the bytes). The
/// assembler counts the whole history several times a turn, and the history is
/// mostly the same observations as last turn: each is counted once, and a turn costs
/// a hash of the history (several GB/s) instead of its count. A count depends only on
/// the bytes, so the cache changes no result but the time taken — unless two texts of
/// one length collide in 64 bits, which costs a wrong estimate, never a wrong byte.
fn cache() -> &'static CountCache {
    static CACHE: OnceLock<CountCache> = OnceLock::new();
    CACHE.get_or_init(|| Mutex::new(HashMap::new()))
}

/// A fast hash of `bytes`, eight at a time (not for adversarial keys: see [`cache`]).
fn quick_hash(bytes: &[u8]) -> u64 {
    const K: u64 = 0x9E37_79B9_7F4A_7C15;
    let mut h: u64 = bytes.len() as u64 ^ K;
    let mut words = bytes.chunks_exact(8);
    for w in &mut words {
        let v = u64::from_le_bytes([w[0], w[1], w[2], w[3], w[4], w[5], w[6], w[7]]);
        h = (h ^ v).wrapping_mul(K).rotate_left(29);
    }
    for &b in words.remainder() {
        h = (h ^ u64::from(b)).wrapping_mul(K).rotate_left(29);
    }
    h ^ (h >> 32)
}

/// The exact token count of `text` under `family`'s encoder (ordinary text: special
/// tokens in it are counted as the text they are), without the cache; `None` for the
/// estimated families.
pub fn exact_tokens(text: &str, family: Family) -> Option<u64> {
    #[cfg(feature = "exact-tokens")]
    return family
        .encoder()
        .map(|bpe| bpe.encode_ordinary(text).len() as u64);
    #[cfg(not(feature = "exact-tokens"))]
    {
        let _ = (text, family);
        None
    }
}

/// Tokens of `text` for `family`: exact (cached by content hash) for the exact
/// families; the family-scaled estimate otherwise.
pub fn count_text(text: &str, family: Family) -> u64 {
    scaled(pieces(text, family), family)
}

/// Exact tokens, or estimated pieces before the family's scale.
fn pieces(text: &str, family: Family) -> u64 {
    let count = |t: &str| {
        if family.is_exact() {
            exact_tokens(t, family).unwrap_or(0)
        } else {
            estimate_text(t)
        }
    };
    if text.len() < CACHE_MIN_BYTES {
        return count(text);
    }
    let key = (family, text.len(), quick_hash(text.as_bytes()));
    // A poisoned lock only means another thread panicked mid-insert: count without it.
    if let Some(n) = cache().lock().ok().and_then(|c| c.get(&key).copied()) {
        return n;
    }
    let n = count(text);
    if let Ok(mut c) = cache().lock() {
        if c.len() >= CACHE_MAX_ENTRIES {
            c.clear();
        }
        c.insert(key, n);
    }
    n
}

/// Framing tokens per message (role markers, separators).
const PER_MESSAGE: u64 = 4;
/// Framing tokens per content block (type tags, ids).
const PER_BLOCK: u64 = 3;
/// Framing tokens per tool definition.
const PER_TOOL: u64 = 8;

/// Characters of a letter run per token: common words, however long, are one token.
const LETTERS_PER_TOKEN: u64 = 7;
/// Digits per token (`o200k` splits numbers into groups of at most three).
const DIGITS_PER_TOKEN: u64 = 3;
/// Characters of a punctuation run per token (`();`, `::`, `->`, `//!` are one).
const PUNCT_PER_TOKEN: u64 = 2;

/// Counted pieces of `text` (see the module docs), before the family's scale.
pub fn estimate_text(text: &str) -> u64 {
    let b = text.as_bytes();
    let n = b.len();
    let blank = |c: u8| c == b' ' || c == b'\t';
    let newline = |c: u8| c == b'\n' || c == b'\r';
    let starts_piece = |c: u8| c.is_ascii_alphabetic() || c.is_ascii_punctuation();
    let mut tokens = 0u64;
    let mut i = 0;
    while i < n {
        let c = b[i];
        if c.is_ascii_alphabetic() {
            // A word: capitals then lower case, so `PartialEq` is two.
            let mut j = i;
            while j < n && b[j].is_ascii_uppercase() {
                j += 1;
            }
            while j < n && b[j].is_ascii_lowercase() {
                j += 1;
            }
            tokens += ((j - i) as u64).div_ceil(LETTERS_PER_TOKEN);
            i = j;
        } else if c.is_ascii_digit() {
            let mut j = i;
            while j < n && b[j].is_ascii_digit() {
                j += 1;
            }
            tokens += ((j - i) as u64).div_ceil(DIGITS_PER_TOKEN);
            i = j;
        } else if blank(c) || newline(c) {
            let mut j = i;
            while j < n && blank(b[j]) {
                j += 1;
            }
            if j < n && newline(b[j]) {
                // Blanks and the newlines after them are one.
                while j < n && newline(b[j]) {
                    j += 1;
                }
                tokens += 1;
            } else if j < n && starts_piece(b[j]) {
                // The last blank starts the word or punctuation after it; the rest of
                // an indentation run is one.
                if j - i > 1 {
                    tokens += 1;
                }
            } else {
                // Before a digit (which takes no leading blank) or at the end.
                tokens += if j - i > 1 && j < n { 2 } else { 1 };
            }
            i = j;
        } else if c.is_ascii_punctuation() {
            let mut j = i;
            while j < n && b[j].is_ascii_punctuation() {
                j += 1;
            }
            if j - i == 1 && j < n && b[j].is_ascii_alphabetic() {
                // A lone mark starts the word after it (`.rotate`, `_left`, `<String`).
                i = j;
                continue;
            }
            tokens += ((j - i) as u64).div_ceil(PUNCT_PER_TOKEN);
            // Newlines (and slashes) right after punctuation join it: `;\n`, `.\n//`.
            while j < n && (newline(b[j]) || b[j] == b'/') {
                j += 1;
            }
            i = j;
        } else {
            // Outside ASCII: a token per character (its continuation bytes skipped).
            tokens += 1;
            i += 1;
            while i < n && (b[i] & 0xC0) == 0x80 {
                i += 1;
            }
        }
    }
    tokens
}

fn scaled(pieces: u64, family: Family) -> u64 {
    (pieces * family.scale_pct()).div_ceil(100)
}

/// Estimated tokens of one content block, framing included.
pub fn estimate_block(b: &ContentBlock, family: Family) -> u64 {
    let pieces = match b {
        ContentBlock::Text { text } => pieces(text, family),
        ContentBlock::ToolUse { name, input, .. } => {
            pieces(name, family) + pieces(&input.to_string(), family)
        }
        ContentBlock::ToolResult { content, .. } => pieces(content, family),
        ContentBlock::Thinking { thinking, .. } => pieces(thinking, family),
        ContentBlock::RedactedThinking { data } => (data.len() as u64).div_ceil(4),
    };
    scaled(pieces, family) + PER_BLOCK
}

/// Estimated tokens of a tool result holding `content`, framing included: the same
/// as [`estimate_block`] of that block, without building it (which would copy the text).
pub fn estimate_tool_result(content: &str, family: Family) -> u64 {
    scaled(pieces(content, family), family) + PER_BLOCK
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
                    pieces(&t.name, family)
                        + pieces(&t.description, family)
                        + pieces(&t.input_schema.to_string(), family),
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
        .map_or(0, |s| count_text(s, family) + PER_MESSAGE);
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
    fn a_tool_results_estimate_is_its_blocks() {
        let text = "line of output, with some words in it\n".repeat(30);
        for family in [
            Family::Anthropic,
            Family::Openai,
            Family::O200k,
            Family::Other,
        ] {
            let block = ContentBlock::ToolResult {
                tool_use_id: "t1".into(),
                content: text.clone(),
                is_error: false,
            };
            assert_eq!(
                estimate_tool_result(&text, family),
                estimate_block(&block, family),
                "{family:?}"
            );
        }
    }

    #[test]
    #[cfg(feature = "exact-tokens")]
    fn words_punctuation_and_indentation_are_counted_like_a_bpe() {
        assert_eq!(estimate_text(""), 0);
        // Where the estimate is exactly what o200k gives.
        for text in [
            "hello world",
            "fn main() {}",
            ");\n    let x = 10;\n",
            // Indentation merges: eight spaces before a word are two tokens, not eight.
            "        x",
            // Numbers go in groups of three digits.
            "1234567",
            "PartialEq",
            "base.rotate_left(3)",
        ] {
            assert_eq!(
                estimate_text(text),
                exact_tokens(text, Family::O200k).unwrap(),
                "{text:?}"
            );
        }
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
    fn estimate_counting_never_takes_an_exact_encoder() {
        use crate::contract::TokenCounting;
        let auto = Family::counting("openai", "gpt-4o", TokenCounting::Auto);
        assert_eq!(auto.is_exact(), cfg!(feature = "exact-tokens"));
        assert_eq!(
            Family::counting("openai", "gpt-4o", TokenCounting::Estimate),
            Family::Openai
        );
        assert_eq!(
            Family::counting("anthropic", "claude-sonnet-4-5", TokenCounting::Estimate),
            Family::Anthropic
        );
    }

    #[test]
    #[cfg(feature = "exact-tokens")]
    fn openai_models_get_their_exact_encoder_and_counts_are_cached_unchanged() {
        assert_eq!(Family::of("openai", "gpt-4o-mini"), Family::O200k);
        assert_eq!(Family::of("openai", "gpt-5"), Family::O200k);
        assert_eq!(Family::of("openai", "o3"), Family::O200k);
        assert_eq!(Family::of("openai", "gpt-4-turbo"), Family::Cl100k);
        assert_eq!(Family::of("openrouter", "openai/gpt-4.1"), Family::O200k);
        assert_eq!(
            Family::of("openrouter", "google/gemini-2.5-pro"),
            Family::Openai
        );
        assert_eq!(Family::of("openai", "llama-3-local"), Family::Openai);
        // "hello world" is two tokens in both encoders.
        assert_eq!(count_text("hello world", Family::O200k), 2);
        assert_eq!(count_text("hello world", Family::Cl100k), 2);
        let long = "fn series(x: u64) -> u64 { x.rotate_left(3) ^ 0x5f }\n".repeat(20);
        let exact = exact_tokens(&long, Family::O200k).unwrap();
        // Counted, then served from the cache: the same number both times.
        assert_eq!(count_text(&long, Family::O200k), exact);
        assert_eq!(count_text(&long, Family::O200k), exact);
        assert_ne!(
            count_text(&long, Family::Cl100k),
            0,
            "the two encoders are cached apart"
        );
        assert_eq!(exact_tokens(&long, Family::Anthropic), None);
    }

    #[test]
    fn windows_of_known_models() {
        assert_eq!(context_window("claude-sonnet-4-5"), Some(200_000));
        assert_eq!(context_window("openai/gpt-4o-mini"), Some(128_000));
        assert_eq!(context_window("mystery"), None);
    }
}
