//! The integration suite: one binary, a module per topic.

mod cli;
mod crash;
mod policy;
mod providers;
mod run;
mod sandboxed;
mod store;
mod tools;
