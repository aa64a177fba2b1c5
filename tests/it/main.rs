//! The integration suite: one binary, a module per topic.

mod cli;
mod providers;
mod run;
mod store;
mod tools;
