//! `flashgnn._core.BeladyRows`: the lookahead's row tier
//! (`flashgnn_sample::belady`), conversion only. Rows cross as the bytes of
//! the caller's `x` (a `uint8` view of its `[N, dim]` array: no copy).

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1, PyReadwriteArray1};
use pyo3::prelude::*;

use flashgnn_sample::belady::BeladyRows as Rows;
use flashgnn_sample::SampleError;

use crate::error::py_err;

fn bad(msg: String) -> PyErr {
    py_err(SampleError::BadRequest(msg))
}

#[pyclass(module = "flashgnn._core")]
pub struct BeladyRows {
    inner: Rows,
}

#[pymethods]
impl BeladyRows {
    /// A tier of `budget` bytes for rows of `row_bytes` over `num_nodes` nodes.
    #[new]
    fn new(budget: u64, row_bytes: usize, num_nodes: u64) -> Self {
        BeladyRows { inner: Rows::new(budget, row_bytes, num_nodes) }
    }

    #[staticmethod]
    fn capacity_for(budget: u64, row_bytes: usize, num_nodes: u64) -> usize {
        Rows::capacity_for(budget, row_bytes, num_nodes)
    }

    #[getter]
    fn capacity(&self) -> usize {
        self.inner.capacity()
    }
    #[getter]
    fn hits(&self) -> u64 {
        self.inner.hits
    }
    #[getter]
    fn misses(&self) -> u64 {
        self.inner.misses
    }

    /// Node id -> slot (-1: not held), a copy.
    fn slot_of<'py>(&self, py: Python<'py>) -> Bound<'py, PyArray1<i32>> {
        self.inner.slot_of().to_vec().into_pyarray(py)
    }

    /// Copy held rows into `x` at the positions `need`; the positions still needed.
    fn fill<'py>(
        &mut self,
        py: Python<'py>,
        ids: PyReadonlyArray1<'py, i64>,
        need: PyReadonlyArray1<'py, i64>,
        mut x: PyReadwriteArray1<'py, u8>,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let left = self.inner.fill(ids.as_slice()?, need.as_slice()?, x.as_slice_mut()?).map_err(bad)?;
        Ok(left.into_pyarray(py))
    }

    /// Keep the rows of this batch and those held whose next use in `window` is soonest.
    fn update(
        &mut self,
        ids: PyReadonlyArray1<'_, i64>,
        x: PyReadonlyArray1<'_, u8>,
        window: Vec<PyReadonlyArray1<'_, i64>>,
    ) -> PyResult<()> {
        let w: Vec<&[i64]> = window.iter().map(|a| a.as_slice()).collect::<Result<_, _>>()?;
        self.inner.update(ids.as_slice()?, x.as_slice()?, &w).map_err(bad)
    }
}
