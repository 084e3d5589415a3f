//! Conformance runner.
