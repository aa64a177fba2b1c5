//! STUB: SSE reading, being implemented.
