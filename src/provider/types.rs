//! The neutral conversation: what the run loop, the store and every wire module share.
//!
//! These types serialize with serde in a stable shape (the store keeps them as JSON and
//! scripts replay them), so renaming a field is a schema change.

use serde::{Deserialize, Serialize};

/// Who wrote a message.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Role {
    /// The harness on behalf of the operator (goal, observations, tool results).
    User,
    /// The model.
    Assistant,
}

/// One block of a message. Tool results travel in user messages, as both wire
/// protocols allow the neutral form to be mapped either way.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContentBlock {
    /// Plain text.
    Text {
        /// The text.
        text: String,
    },
    /// The model asks for a tool to be run.
    ToolUse {
        /// Provider-assigned call id, echoed in the matching result.
        id: String,
        /// Tool name as offered.
        name: String,
        /// Arguments as parsed JSON (an object for every tool we offer).
        input: serde_json::Value,
    },
    /// The result of a tool call, sent back to the model.
    ToolResult {
        /// The call this answers.
        tool_use_id: String,
        /// What the model is shown.
        content: String,
        /// Whether the call failed (refused, bad input, non-zero exit…).
        #[serde(default)]
        is_error: bool,
    },
    /// Extended thinking (Anthropic). Passed back unchanged, signature included, in
    /// tool-use turns: the API rejects a modified or missing signature.
    Thinking {
        /// The thinking text.
        thinking: String,
        /// Opaque signature that authenticates the block.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        signature: Option<String>,
    },
    /// Thinking the provider returned encrypted; passed back unchanged.
    RedactedThinking {
        /// Opaque payload.
        data: String,
    },
}

/// One message of the conversation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Message {
    /// Author.
    pub role: Role,
    /// Blocks in order.
    pub content: Vec<ContentBlock>,
}

impl Message {
    /// A user message holding one text block.
    pub fn user(text: impl Into<String>) -> Self {
        Self {
            role: Role::User,
            content: vec![ContentBlock::Text { text: text.into() }],
        }
    }

    /// An assistant message holding one text block.
    pub fn assistant(text: impl Into<String>) -> Self {
        Self {
            role: Role::Assistant,
            content: vec![ContentBlock::Text { text: text.into() }],
        }
    }

    /// The concatenated text blocks.
    pub fn text(&self) -> String {
        concat_text(&self.content)
    }
}

pub(crate) fn concat_text(blocks: &[ContentBlock]) -> String {
    let mut out = String::new();
    for b in blocks {
        if let ContentBlock::Text { text } = b {
            if !out.is_empty() && !text.is_empty() {
                out.push('\n');
            }
            out.push_str(text);
        }
    }
    out
}

/// A tool as offered to the model.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    /// Name the model calls it by.
    pub name: String,
    /// What it does, for the model.
    pub description: String,
    /// JSON Schema of its arguments (an object schema).
    pub input_schema: serde_json::Value,
}

pub use crate::contract::ReasoningEffort;

/// Reasoning settings of the contract, mapped by each wire module to what it supports.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ThinkingSettings {
    /// Anthropic extended-thinking budget in tokens.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget_tokens: Option<u32>,
    /// OpenAI/OpenRouter reasoning effort.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub effort: Option<ReasoningEffort>,
}

/// One request to a provider, in neutral form.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CompletionRequest {
    /// Model name as the provider knows it.
    pub model: String,
    /// System prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub system: Option<String>,
    /// Tools offered.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// Output token cap for this turn.
    pub max_tokens: u32,
    /// Reasoning settings.
    #[serde(default)]
    pub thinking: ThinkingSettings,
    /// The conversation so far. Last, so that the serialised request of the next turn
    /// extends this one's: the store keeps a run's request bodies at the cost of what
    /// is new in them, which a static tail after the messages (the tools' schemas,
    /// 7 KB) made a new chunk every step.
    pub messages: Vec<Message>,
}

impl CompletionRequest {
    /// A request with no system prompt, no tools and a 4096-token output cap.
    pub fn new(model: impl Into<String>, messages: Vec<Message>) -> Self {
        Self {
            model: model.into(),
            system: None,
            messages,
            tools: Vec::new(),
            max_tokens: 4096,
            thinking: ThinkingSettings::default(),
        }
    }
}

/// Why the model stopped.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The turn is complete.
    EndTurn,
    /// The model wants tool results.
    ToolUse,
    /// The output cap was reached.
    MaxTokens,
    /// Anything else the provider said, kept verbatim.
    Other(String),
}

/// Token counts of one call: what the provider reported, field by field (`None` when it
/// did not say: a server that streams no usage, as llama.cpp's does, reports nothing,
/// which is not zero), and the harness's own estimate of the same call.
///
/// Budgets count each field as reported when it was, else as estimated
/// ([`Usage::effective_input`], [`Usage::effective_output`]); the record says which
/// ([`Usage::source`]).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens billed at the normal rate (cached ones excluded where the provider
    /// separates them), as reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// Output tokens (reasoning included), as reported.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub output_tokens: Option<u64>,
    /// Input tokens read from the prompt cache; `None` when the provider did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    /// Input tokens written to the prompt cache; `None` when the provider did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
    /// The harness's estimate of the call, set by the run for every request; `None`
    /// from a provider alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub estimate: Option<TokenEstimate>,
}

/// The harness's count of one call's tokens: the assembled request's input and the
/// reply's output, with the run's token counter (exact for OpenAI models, else the
/// calibrated estimate).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TokenEstimate {
    /// Every input token of the request (cached or not).
    pub input_tokens: u64,
    /// The reply's tokens.
    pub output_tokens: u64,
}

/// Where a token count came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum TokenSource {
    /// Every part as the provider reported it.
    Reported,
    /// Some part (or all) is the harness's estimate: the provider did not report it,
    /// or the reply never arrived.
    Estimated,
}

impl TokenSource {
    /// The label the store keeps (`reported`, `estimated`).
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Reported => "reported",
            Self::Estimated => "estimated",
        }
    }
}

impl Usage {
    /// Usage as a provider reported it: `input` (uncached) and `output` tokens.
    pub fn reported(input: u64, output: u64) -> Self {
        Self {
            input_tokens: Some(input),
            output_tokens: Some(output),
            ..Self::default()
        }
    }

    /// Every input token as reported (uncached, cache reads and writes), when the
    /// provider reported its input.
    pub fn reported_input(&self) -> Option<u64> {
        self.input_tokens.map(|i| {
            i.saturating_add(self.cached_input_tokens.unwrap_or(0))
                .saturating_add(self.cache_write_tokens.unwrap_or(0))
        })
    }

    /// Drops reported counts no real call can have, so the estimate counts instead
    /// (and the record says so): no input for a request the harness counted tokens in
    /// (servers that send `0` when they mean "not counted", and then no output for a
    /// reply with content either), or a count beyond a billion tokens (no request or
    /// reply is that large; such a value would only overflow the totals).
    pub fn discard_implausible(&mut self, estimate: TokenEstimate, has_content: bool) {
        const MAX_PLAUSIBLE: u64 = 1_000_000_000;
        let absurd = |v: Option<u64>| v.is_some_and(|v| v > MAX_PLAUSIBLE);
        let uncounted = self.reported_input() == Some(0) && estimate.input_tokens > 0;
        if uncounted
            || absurd(self.input_tokens)
            || absurd(self.cached_input_tokens)
            || absurd(self.cache_write_tokens)
        {
            self.input_tokens = None;
            self.cached_input_tokens = None;
            self.cache_write_tokens = None;
        }
        // A server that counted no input counted no output either.
        if (uncounted && self.output_tokens == Some(0) && has_content) || absurd(self.output_tokens)
        {
            self.output_tokens = None;
        }
    }

    /// Input tokens for the budget: as reported, else the estimate (0 without one).
    pub fn effective_input(&self) -> u64 {
        self.reported_input()
            .unwrap_or_else(|| self.estimate.map_or(0, |e| e.input_tokens))
    }

    /// Output tokens for the budget: as reported, else the estimate (0 without one).
    pub fn effective_output(&self) -> u64 {
        self.output_tokens
            .unwrap_or_else(|| self.estimate.map_or(0, |e| e.output_tokens))
    }

    /// Uncached input tokens for the budget and the price: as reported, else the whole
    /// estimated input (nothing is known to be cached then).
    pub fn effective_uncached_input(&self) -> u64 {
        self.input_tokens
            .unwrap_or_else(|| self.estimate.map_or(0, |e| e.input_tokens))
    }

    /// The tokens of the effective counts that are estimates.
    pub fn estimated_part(&self) -> u64 {
        let input = if self.input_tokens.is_none() {
            self.effective_input()
        } else {
            0
        };
        let output = if self.output_tokens.is_none() {
            self.effective_output()
        } else {
            0
        };
        input.saturating_add(output)
    }

    /// `Reported` when the provider reported both input and output.
    pub fn source(&self) -> TokenSource {
        if self.input_tokens.is_some() && self.output_tokens.is_some() {
            TokenSource::Reported
        } else {
            TokenSource::Estimated
        }
    }

    /// Every token the call consumed, for the token budget: reported where the
    /// provider said, estimated where it did not.
    pub fn total(&self) -> u64 {
        self.effective_input() + self.effective_output()
    }
}

/// Where a cost figure came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CostSource {
    /// The provider reported it (OpenRouter).
    Reported,
    /// Computed from the price table.
    PriceTable,
    /// Replayed from a script that recorded it.
    Script,
    /// Computed from the price table on token counts of which some are the harness's
    /// estimate (the provider reported no usage, or not all of it).
    Estimated,
    /// No price known: the cost is unknown, never zero.
    Unknown,
}

/// The cost of one call.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    /// USD, when known.
    pub usd: Option<f64>,
    /// Where the figure came from.
    pub source: CostSource,
}

impl Cost {
    /// A cost nobody knows.
    pub const UNKNOWN: Cost = Cost {
        usd: None,
        source: CostSource::Unknown,
    };
}

/// One assembled assistant turn.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Completion {
    /// The blocks of the reply, in order.
    pub content: Vec<ContentBlock>,
    /// Why it stopped.
    pub stop_reason: StopReason,
    /// Tokens.
    pub usage: Usage,
    /// Cost.
    pub cost: Cost,
    /// The model that answered (as the provider named it).
    pub model: String,
    /// The exact request body sent (redacted of nothing: bodies never hold keys). Not
    /// part of a script.
    #[serde(skip)]
    pub request_body: Option<Vec<u8>>,
    /// The price the provider applied (or would have, had it known the tokens), so the
    /// harness can price its estimate when the provider reported no usage. Not stored.
    #[serde(skip)]
    pub price: Option<crate::contract::ModelPrice>,
    /// The run's record of the model call this reply answers (`model_calls`), so the
    /// commit that keeps the reply closes it; kept with a reply saved for replay.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_call: Option<i64>,
    /// The reply was cut at this many bytes (`[provider] max_reply_bytes`): its calls
    /// are answered with a tool error instead of run ([`crate::provider::reply_cut`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cut_at: Option<u64>,
    /// The HTTP status the cut reply came with (a cut reply is still an answer, and
    /// its attempt says which one; adversary A14a). Not stored with the reply.
    #[serde(skip)]
    pub cut_status: Option<u16>,
}

impl Completion {
    /// Takes in the harness's estimate of this call, and when the provider reported no
    /// usage (or not all of it) and priced it from its table, prices the effective
    /// counts instead, marked [`CostSource::Estimated`]. A cost the provider reported
    /// or a script recorded is kept.
    pub fn with_estimate(mut self, estimate: TokenEstimate) -> Self {
        self.usage.estimate = Some(estimate);
        self.usage
            .discard_implausible(estimate, !self.content.is_empty());
        let repriceable = matches!(
            self.cost.source,
            CostSource::PriceTable | CostSource::Estimated | CostSource::Unknown
        );
        if self.usage.source() == TokenSource::Estimated
            && repriceable
            && let Some(p) = self.price
        {
            self.cost = Cost {
                usd: Some(p.cost(&self.usage)),
                source: CostSource::Estimated,
            };
        }
        self
    }

    /// The concatenated text blocks of the reply.
    pub fn text(&self) -> String {
        concat_text(&self.content)
    }

    /// The tool calls of the reply, in order: (id, name, input).
    pub fn tool_calls(&self) -> impl Iterator<Item = (&str, &str, &serde_json::Value)> {
        self.content.iter().filter_map(|b| match b {
            ContentBlock::ToolUse { id, name, input } => Some((id.as_str(), name.as_str(), input)),
            _ => None,
        })
    }

    /// The reply as a message to append to the conversation.
    pub fn to_message(&self) -> Message {
        Message {
            role: Role::Assistant,
            content: self.content.clone(),
        }
    }
}

/// Who answers a run: stored with it, shown by `show`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProviderIdentity {
    /// `openai`, `anthropic`, `openrouter`, `scripted`, or a wrapper's composite.
    pub kind: String,
    /// Model name.
    pub model: String,
    /// Endpoint base URL, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub base_url: Option<String>,
}
