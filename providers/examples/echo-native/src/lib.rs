//! Example native provider.
