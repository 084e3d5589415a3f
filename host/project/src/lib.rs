//! Jig projects.
