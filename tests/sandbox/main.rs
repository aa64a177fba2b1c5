//! Sandbox containment suite.
mod smoke;
