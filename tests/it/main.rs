//! The integration suite: one binary, a module per topic.

mod cli;
mod crash;
mod providers;
mod run;
mod store;
mod tools;
