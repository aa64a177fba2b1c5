//! STUB: find/grep; being implemented.

use super::fs::stub_tool;
use futures_util::future::BoxFuture;

use super::{Tool, ToolContext, ToolError, ToolOutput};
use crate::policy::Action;
use crate::provider::ToolSpec;

stub_tool!(Find, "find");
stub_tool!(Grep, "grep");
