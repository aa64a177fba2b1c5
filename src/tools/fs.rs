//! STUB: read/write/edit/list; being implemented.

use futures_util::future::BoxFuture;

use super::{Tool, ToolContext, ToolError, ToolOutput};
use crate::policy::Action;
use crate::provider::ToolSpec;

macro_rules! stub_tool {
    ($t:ident, $name:literal) => {
        /// STUB.
        pub struct $t;
        impl Tool for $t {
            fn spec(&self) -> ToolSpec {
                ToolSpec { name: $name.into(), description: String::new(), input_schema: serde_json::json!({"type":"object"}) }
            }
            fn plan(&self, _ctx: &ToolContext, _input: &serde_json::Value) -> Result<Vec<Action>, ToolError> {
                Ok(vec![])
            }
            fn call<'a>(&'a self, _ctx: &'a ToolContext, _input: &'a serde_json::Value) -> BoxFuture<'a, Result<ToolOutput, ToolError>> {
                todo!()
            }
        }
    };
}
pub(crate) use stub_tool;

stub_tool!(ReadFile, "read_file");
stub_tool!(WriteFile, "write_file");
stub_tool!(EditFile, "edit_file");
stub_tool!(ListDir, "list_dir");
