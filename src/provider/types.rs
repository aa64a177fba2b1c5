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
    /// The conversation so far.
    pub messages: Vec<Message>,
    /// Tools offered.
    #[serde(default)]
    pub tools: Vec<ToolSpec>,
    /// Output token cap for this turn.
    pub max_tokens: u32,
    /// Reasoning settings.
    #[serde(default)]
    pub thinking: ThinkingSettings,
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

/// Token counts of one call, as the provider reported them.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Input tokens billed at the normal rate (cached ones excluded where the provider
    /// separates them).
    pub input_tokens: u64,
    /// Output tokens (reasoning included).
    pub output_tokens: u64,
    /// Input tokens read from the prompt cache; `None` when the provider did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cached_input_tokens: Option<u64>,
    /// Input tokens written to the prompt cache; `None` when the provider did not say.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cache_write_tokens: Option<u64>,
}

impl Usage {
    /// Every token the call consumed, for the token budget.
    pub fn total(&self) -> u64 {
        self.input_tokens
            + self.output_tokens
            + self.cached_input_tokens.unwrap_or(0)
            + self.cache_write_tokens.unwrap_or(0)
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
}

impl Completion {
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
