//! `flashgnn._core.Dataset`: checked, simple reads of a built dataset.

use std::sync::Arc;

use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyArray1, PyArray2, PyReadonlyArray1};
use pyo3::prelude::*;

use flashgnn_store::Dataset as Store;

use crate::error::py_err;
use crate::report::to_py;

#[pyclass(frozen, module = "flashgnn._core")]
pub struct Dataset {
    inner: Arc<Store>,
}

/// A CSR pair: (indptr, indices).
type Csr<'py> = (Bound<'py, PyArray1<i64>>, Bound<'py, PyArray1<i64>>);

fn ids_vec(ids: &PyReadonlyArray1<'_, i64>) -> Vec<i64> {
    ids.as_array().iter().copied().collect()
}

#[pymethods]
impl Dataset {
    #[new]
    fn new(py: Python<'_>, path: std::path::PathBuf) -> PyResult<Self> {
        let ds = py.detach(|| Store::open(&path)).map_err(py_err)?;
        Ok(Dataset { inner: Arc::new(ds) })
    }

    #[getter]
    fn path(&self) -> String {
        self.inner.root().display().to_string()
    }
    #[getter]
    fn num_nodes(&self) -> u64 {
        self.inner.num_nodes()
    }
    #[getter]
    fn num_edges(&self) -> u64 {
        self.inner.num_edges()
    }
    #[getter]
    fn feature_dim(&self) -> u32 {
        self.inner.feature_dim()
    }
    #[getter]
    fn feature_dtype(&self) -> &'static str {
        self.inner.feature_dtype().name()
    }
    /// The manifest as written (`checksum` included), as a dict.
    #[getter]
    fn manifest(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        to_py(py, &self.inner.manifest().to_value())
    }
    /// Layout figures: bytes per file, CSR baseline, in-memory index bytes.
    fn layout(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        to_py(py, &self.inner.layout_report())
    }

    /// Neighbors of each id as CSR: (indptr[int64, len(ids)+1], indices[int64]).
    fn neighbors<'py>(&self, py: Python<'py>, ids: PyReadonlyArray1<'py, i64>) -> PyResult<Csr<'py>> {
        let ids = ids_vec(&ids);
        let inner = self.inner.clone();
        let (ptr, idx) = py
            .detach(move || -> Result<_, flashgnn_store::StoreError> {
                let mut ptr = Vec::with_capacity(ids.len() + 1);
                let mut idx = Vec::new();
                ptr.push(0i64);
                for id in ids {
                    idx.extend(inner.neighbors(id)?.into_iter().map(|v| v as i64));
                    ptr.push(idx.len() as i64);
                }
                Ok((ptr, idx))
            })
            .map_err(py_err)?;
        Ok((ptr.into_pyarray(py), idx.into_pyarray(py)))
    }

    /// Raw feature rows as bytes (stored dtype), shape [len(ids), dim].
    fn feature_bytes<'py>(
        &self,
        py: Python<'py>,
        ids: PyReadonlyArray1<'py, i64>,
    ) -> PyResult<Bound<'py, PyArray2<u8>>> {
        let ids = ids_vec(&ids);
        let inner = self.inner.clone();
        let rb = inner.layout().row_bytes() as usize;
        let n = ids.len();
        let out = py
            .detach(move || -> Result<Vec<u8>, flashgnn_store::StoreError> {
                let mut out = Vec::with_capacity(n * rb);
                for id in ids {
                    inner.feature_row(id, &mut out)?;
                }
                Ok(out)
            })
            .map_err(py_err)?;
        let arr = Array2::from_shape_vec((n, rb), out).expect("shape matches");
        Ok(arr.into_pyarray(py))
    }

    fn labels<'py>(&self, py: Python<'py>, ids: PyReadonlyArray1<'py, i64>) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let ids = ids_vec(&ids);
        let inner = self.inner.clone();
        let v = py.detach(move || inner.labels(&ids)).map_err(py_err)?;
        Ok(v.into_pyarray(py))
    }

    fn has_labels(&self) -> bool {
        self.inner.has_labels()
    }

    /// Bytes of the per-node side arrays (labels, relabelling maps, feature
    /// CRCs) this process holds now for this dataset, shared by all its
    /// samplers (one copy per process).
    fn side_bytes_held(&self) -> u64 {
        self.inner.side_bytes_held()
    }

    fn split<'py>(&self, py: Python<'py>, name: &str) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let inner = self.inner.clone();
        let name = name.to_string();
        let v = py.detach(move || inner.split(&name)).map_err(py_err)?;
        Ok(v.into_pyarray(py))
    }

    /// Link-prediction split `name`: (src, dst, neg or None, k, neg_src or
    /// None, neg_dst or None); `neg` flat, `k` per positive.
    #[allow(clippy::type_complexity)]
    fn link_split<'py>(
        &self,
        py: Python<'py>,
        name: &str,
    ) -> PyResult<(
        Bound<'py, PyArray1<i64>>,
        Bound<'py, PyArray1<i64>>,
        Option<Bound<'py, PyArray1<i64>>>,
        u64,
        Option<Bound<'py, PyArray1<i64>>>,
        Option<Bound<'py, PyArray1<i64>>>,
    )> {
        let inner = self.inner.clone();
        let name = name.to_string();
        let s = py.detach(move || inner.link_split(&name)).map_err(py_err)?;
        let (ns, nd) = match s.neg_pairs {
            Some((a, b)) => (Some(a.into_pyarray(py)), Some(b.into_pyarray(py))),
            None => (None, None),
        };
        Ok((s.src.into_pyarray(py), s.dst.into_pyarray(py), s.neg.map(|n| n.into_pyarray(py)), s.k, ns, nd))
    }

    /// Check side file `name` whole, once per process (CRC32C, dtype, shape,
    /// every id in range; chunk by chunk, nothing kept): the checks
    /// `link_split` makes before it reads, for a caller that memory-maps the
    /// file instead of holding it (the training positives of a billion-edge
    /// split are 16 B per edge).
    fn check_side_file(&self, py: Python<'_>, name: &str) -> PyResult<()> {
        let inner = self.inner.clone();
        let name = name.to_string();
        py.detach(move || inner.check_side_file(&name)).map_err(py_err)
    }

    /// Split `name` of node type index `t` (typed datasets), ids within the type.
    fn type_split<'py>(&self, py: Python<'py>, t: usize, name: &str) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let inner = self.inner.clone();
        let name = name.to_string();
        let v = py.detach(move || inner.type_split(t, &name)).map_err(py_err)?;
        Ok(v.into_pyarray(py))
    }

    /// Labels of ids within node type index `t` (typed datasets).
    fn type_labels<'py>(
        &self,
        py: Python<'py>,
        t: usize,
        ids: PyReadonlyArray1<'py, i64>,
    ) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let ids = ids_vec(&ids);
        let inner = self.inner.clone();
        let v = py.detach(move || inner.type_labels(t, &ids)).map_err(py_err)?;
        Ok(v.into_pyarray(py))
    }

    fn split_names(&self) -> Vec<String> {
        self.inner.manifest().splits.keys().cloned().collect()
    }

    fn __repr__(&self) -> String {
        format!(
            "Dataset(path={:?}, num_nodes={}, num_edges={}, feature_dim={}, feature_dtype={})",
            self.path(),
            self.num_nodes(),
            self.num_edges(),
            self.feature_dim(),
            self.feature_dtype()
        )
    }
}
