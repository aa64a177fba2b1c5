//! The integration suite: one binary, a module per topic.

mod providers;
mod store;
mod tools;
