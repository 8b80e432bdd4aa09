//! `_core._write_typed_dataset`: test-only. Writes a small typed (format
//! version 3) dataset from edge lists with the format crate's encoders — the
//! same writer the Rust tests use (`flashgnn-testing/src/typed.rs`, included
//! here, not depended on: that crate is a dev-dependency only) — so the
//! Python tests of typed sampling do not depend on the typed builder.

use numpy::PyReadonlyArray1;
use pyo3::prelude::*;

use crate::error::{py_err, CoreError};

#[allow(dead_code)] // the Rust tests use the rest
#[path = "../../flashgnn-testing/src/typed.rs"]
mod writer;

/// `node_types`: `(name, count, dim or None, classes or None)`;
/// `edge_types`: `(src, rel, dst, src local ids, dst local ids)`.
#[pyfunction]
#[pyo3(signature = (path, node_types, edge_types, page_size=512, inline_cap=3))]
#[allow(clippy::type_complexity)]
pub fn _write_typed_dataset(
    path: std::path::PathBuf,
    node_types: Vec<(String, u64, Option<u32>, Option<u64>)>,
    edge_types: Vec<(String, String, String, PyReadonlyArray1<'_, i64>, PyReadonlyArray1<'_, i64>)>,
    page_size: u32,
    inline_cap: u32,
) -> PyResult<()> {
    let nodes: Vec<writer::TypedNodes> = node_types
        .into_iter()
        .map(|(name, count, dim, classes)| writer::TypedNodes { name, count, dim, classes })
        .collect();
    let mut edges = Vec::new();
    for (src, rel, dst, a, b) in edge_types {
        let (a, b) = (a.as_array(), b.as_array());
        if a.len() != b.len() || a.iter().chain(b.iter()).any(|&x| x < 0) {
            return Err(py_err(CoreError::Unavailable(format!("edge type {rel}: ids must be paired and >= 0"))));
        }
        let e = a.iter().zip(b.iter()).map(|(&x, &y)| (x as u64, y as u64)).collect();
        edges.push(writer::TypedEdges { src, rel, dst, edges: e });
    }
    writer::write_typed_dataset(&path, &nodes, &edges, page_size, inline_cap)
        .map_err(|e| py_err(CoreError::Unavailable(e)))
}
