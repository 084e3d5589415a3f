//! Provider SDK.
