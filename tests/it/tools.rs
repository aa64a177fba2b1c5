//! tools tests (being written).
