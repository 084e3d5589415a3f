//! Native provider loader.
