//! Run SDK/1 for Rust component authors.
