//! store tests (being written).
