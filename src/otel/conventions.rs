//! The attribute names and values the trace uses, in one place, pinned to one version
//! of the OpenTelemetry semantic conventions: the GenAI conventions are still moving
//! (`gen_ai.system` gave way to `gen_ai.provider.name`), so the version is named here,
//! in the export's `schemaUrl`, and in the README, and a change of version is a change
//! of this file.
//!
//! Names under `io_harness.` are the harness's own (the conventions have none for a
//! step, a sandbox session or a run's outcome).

/// The pinned semantic-conventions version.
pub const SEMCONV_VERSION: &str = "1.41.0";
/// The schema URL of that version, written on the export's scope.
pub const SCHEMA_URL: &str = "https://opentelemetry.io/schemas/1.41.0";

/// `gen_ai.operation.name`.
pub const OPERATION_NAME: &str = "gen_ai.operation.name";
/// Operation of a model call.
pub const OP_CHAT: &str = "chat";
/// Operation of a tool call.
pub const OP_EXECUTE_TOOL: &str = "execute_tool";
/// Operation of a run (an agent invoked in this process).
pub const OP_INVOKE_AGENT: &str = "invoke_agent";
/// `gen_ai.provider.name`.
pub const PROVIDER_NAME: &str = "gen_ai.provider.name";
/// The value when the provider is not known.
pub const PROVIDER_OTHER: &str = "_OTHER";
/// `gen_ai.request.model`.
pub const REQUEST_MODEL: &str = "gen_ai.request.model";
/// `gen_ai.usage.input_tokens`.
pub const USAGE_INPUT_TOKENS: &str = "gen_ai.usage.input_tokens";
/// `gen_ai.usage.output_tokens`.
pub const USAGE_OUTPUT_TOKENS: &str = "gen_ai.usage.output_tokens";
/// `gen_ai.response.finish_reasons` (string array).
pub const RESPONSE_FINISH_REASONS: &str = "gen_ai.response.finish_reasons";
/// `gen_ai.tool.name`.
pub const TOOL_NAME: &str = "gen_ai.tool.name";
/// `gen_ai.tool.call.id`.
pub const TOOL_CALL_ID: &str = "gen_ai.tool.call.id";
/// `gen_ai.tool.type`.
pub const TOOL_TYPE: &str = "gen_ai.tool.type";
/// Every tool the harness offers is a function the model calls and the harness runs.
pub const TOOL_TYPE_FUNCTION: &str = "function";
/// `gen_ai.agent.name`.
pub const AGENT_NAME: &str = "gen_ai.agent.name";
/// `gen_ai.agent.id`.
pub const AGENT_ID: &str = "gen_ai.agent.id";
/// `gen_ai.conversation.id`.
pub const CONVERSATION_ID: &str = "gen_ai.conversation.id";
/// `error.type`.
pub const ERROR_TYPE: &str = "error.type";
/// `error.type` of a tool call that failed or was refused.
pub const ERROR_TOOL: &str = "tool_error";
/// `process.exit.code`.
pub const PROCESS_EXIT_CODE: &str = "process.exit.code";
/// `service.name` (resource).
pub const SERVICE_NAME: &str = "service.name";
/// `service.version` (resource).
pub const SERVICE_VERSION: &str = "service.version";

/// The agent name of a root run (a sub-agent carries the name its parent gave it).
pub const HARNESS: &str = "io-harness";
/// The run's id in the store.
pub const HARNESS_RUN_ID: &str = "io_harness.run.id";
/// The outcome a session ended the run (or its session) with.
pub const HARNESS_OUTCOME: &str = "io_harness.run.outcome";
/// The session's ordinal: 0 for the one that started the run, then one per resume.
pub const HARNESS_SESSION: &str = "io_harness.session";
/// Steps committed in the session.
pub const HARNESS_SESSION_STEPS: &str = "io_harness.session.steps";
/// How the session ended: an outcome name, or [`SESSION_INTERRUPTED`]; absent while
/// it runs (a live export sends a session's span only once this is set).
pub const HARNESS_SESSION_ENDED: &str = "io_harness.session.ended";
/// A session whose process was killed before its end was on record, and which a later
/// session continued.
pub const SESSION_INTERRUPTED: &str = "interrupted";
/// `gen_ai.input.messages` (opt-in content): the messages this request added to the
/// conversation, as a JSON string in the conventions' message schema.
pub const INPUT_MESSAGES: &str = "gen_ai.input.messages";
/// `gen_ai.output.messages` (opt-in content): the model's reply.
pub const OUTPUT_MESSAGES: &str = "gen_ai.output.messages";
/// Which messages `gen_ai.input.messages` holds: `new` (those this request added; the
/// whole history is their concatenation along the steps).
pub const HARNESS_INPUT_SCOPE: &str = "io_harness.input.messages.scope";
/// Cost in USD where known.
pub const HARNESS_COST_USD: &str = "io_harness.cost_usd";
/// The step number.
pub const HARNESS_STEP: &str = "io_harness.step";
/// `reported` or `estimated`: whose token counts these are.
pub const HARNESS_TOKEN_SOURCE: &str = "io_harness.usage.source";
/// `tool`, `gate` or `mcp`.
pub const HARNESS_SANDBOX_PURPOSE: &str = "io_harness.sandbox.purpose";
/// The backend that really ran the session.
pub const HARNESS_SANDBOX_BACKEND: &str = "io_harness.sandbox.backend";
/// The network posture in force.
pub const HARNESS_SANDBOX_NETWORK: &str = "io_harness.sandbox.network";
/// The signal that ended the command.
pub const HARNESS_SIGNAL: &str = "io_harness.sandbox.signal";
/// The enforced cap that ended it.
pub const HARNESS_CAP_HIT: &str = "io_harness.sandbox.cap_hit";

/// Event: a provider attempt that failed (retried, fallen back from, or the last).
pub const EVENT_PROVIDER_ATTEMPT: &str = "io_harness.provider.attempt";
/// Event: a policy decision other than allow.
pub const EVENT_POLICY_DECISION: &str = "io_harness.policy.decision";
/// `kind/model` of the provider an attempt went to.
pub const HARNESS_PROVIDER: &str = "io_harness.provider";
/// The attempt's number with that provider.
pub const HARNESS_ATTEMPT: &str = "io_harness.attempt";
/// What came next: `retry`, `fallback`, `escalate`…
pub const HARNESS_NEXT: &str = "io_harness.next";
/// The wait before the next attempt, ms.
pub const HARNESS_DELAY_MS: &str = "io_harness.delay_ms";
/// `http.response.status_code`.
pub const HTTP_STATUS: &str = "http.response.status_code";
/// What the server said (opt-in content only: a server may echo the request).
pub const HARNESS_MESSAGE: &str = "io_harness.message";
/// The policy decision's act (`read`, `write`, `exec`, `net`).
pub const HARNESS_POLICY_ACT: &str = "io_harness.policy.act";
/// `deny` or `ask`.
pub const HARNESS_POLICY_DECISION: &str = "io_harness.policy.decision";
/// The rule that decided.
pub const HARNESS_POLICY_RULE: &str = "io_harness.policy.rule";
/// Its layer.
pub const HARNESS_POLICY_LAYER: &str = "io_harness.policy.layer";
/// What it was about (a path, an argv, a host; opt-in content only).
pub const HARNESS_POLICY_TARGET: &str = "io_harness.policy.target";
