//! `flashgnn._core.presample_encode`, `presample_record_size` and
//! `presample_decode`: the pre-sample record format
//! (`flashgnn_format::presample`, docs/format.md "Pre-sampled batches") for
//! the Python writer and loader, which do the file I/O. Conversion and error
//! mapping only; a record that fails a check is a `CorruptDatasetError`.

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use flashgnn_format::presample::{self, BatchRef};

use crate::error::py_err;

/// The sampler's hop limit bounds a record's `hops`.
const MAX_HOPS: u32 = flashgnn_sample::MAX_HOPS as u32;

/// The record of one batch, to be written at byte `offset` of its file.
#[pyfunction]
#[allow(clippy::too_many_arguments)]
pub fn presample_encode<'py>(
    py: Python<'py>,
    batch_size: u32,
    n_id: PyReadonlyArray1<'py, i64>,
    row: PyReadonlyArray1<'py, i32>,
    col: PyReadonlyArray1<'py, i32>,
    num_sampled_nodes: PyReadonlyArray1<'py, i32>,
    num_sampled_edges: PyReadonlyArray1<'py, i32>,
    input_id: PyReadonlyArray1<'py, i64>,
    y: PyReadonlyArray1<'py, i64>,
    offset: u64,
) -> PyResult<Bound<'py, PyBytes>> {
    let b = BatchRef {
        batch_size,
        n_id: n_id.as_slice()?,
        row: row.as_slice()?,
        col: col.as_slice()?,
        num_sampled_nodes: num_sampled_nodes.as_slice()?,
        num_sampled_edges: num_sampled_edges.as_slice()?,
        input_id: input_id.as_slice()?,
        y: y.as_slice()?,
    };
    let r = py.detach(|| presample::encode_record(&b, offset)).map_err(py_err)?;
    Ok(PyBytes::new(py, &r))
}

/// The whole size of the record at byte `offset` of `file` (`file_size`
/// bytes) of pre-sample `version`, from its `header` (what could be read
/// there, up to 32 bytes), after checking the header.
#[pyfunction]
pub fn presample_record_size(file: &str, header: &[u8], offset: u64, file_size: u64, version: u32) -> PyResult<u64> {
    let h = presample::decode_header(file, header, offset, file_size, version, MAX_HOPS).map_err(py_err)?;
    Ok(h.record_bytes())
}

type Arrays<'py> = (
    u32,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i32>>,
    Bound<'py, PyArray1<i32>>,
    Bound<'py, PyArray1<i32>>,
    Bound<'py, PyArray1<i32>>,
    Bound<'py, PyArray1<i64>>,
    Bound<'py, PyArray1<i64>>,
);

/// Decode and check the record at byte `offset` of `file` (`record`: its
/// whole bytes) against the dataset's `num_nodes`: (batch_size, n_id, row,
/// col, num_sampled_nodes, num_sampled_edges, input_id, y).
#[pyfunction]
pub fn presample_decode<'py>(
    py: Python<'py>,
    file: &str,
    record: &[u8],
    offset: u64,
    version: u32,
    num_nodes: u64,
) -> PyResult<Arrays<'py>> {
    let b =
        py.detach(|| presample::decode_record(file, record, offset, version, num_nodes, MAX_HOPS)).map_err(py_err)?;
    Ok((
        b.batch_size,
        b.n_id.into_pyarray(py),
        b.row.into_pyarray(py),
        b.col.into_pyarray(py),
        b.num_sampled_nodes.into_pyarray(py),
        b.num_sampled_edges.into_pyarray(py),
        b.input_id.into_pyarray(py),
        b.y.into_pyarray(py),
    ))
}
