//! Mutable stores for tests: `MutableGraph` options and opens.

use std::path::Path;

use flashgnn_mutate::{GraphOptions, MutableGraph};

/// Options of a writable open (the default).
pub fn writable() -> GraphOptions {
    GraphOptions::default()
}

/// Options of a read-only open.
pub fn read_only() -> GraphOptions {
    GraphOptions { writable: false, ..Default::default() }
}

/// `p` opened writable; panics with the path and error when refused.
pub fn open_mutable(p: &Path) -> MutableGraph {
    MutableGraph::open(p, &writable()).unwrap_or_else(|e| panic!("open {} writable: {e}", p.display()))
}
