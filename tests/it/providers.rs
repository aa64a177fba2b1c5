//! providers tests (being written).
