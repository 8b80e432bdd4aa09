//! `flashgnn._core.MutableGraph`: the mutable store (`flashgnn_mutate`).
//!
//! Type conversion and error mapping only; every call that validates, logs,
//! reads or builds runs with the GIL released, so concurrent Python threads
//! share group commits.
//!
//! Errors are mapped by `error.rs` (`py_err`), the one place; a bad
//! argument is a `MutError::Invalid` like the store's own refusals.

use std::sync::Arc;

use numpy::{IntoPyArray, PyArray1, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::{PyList, PyString, PyTuple};

use flashgnn_build::Progress;
use flashgnn_format::Dtype;
use flashgnn_mutate::batch::{Arg, Entry};
use flashgnn_mutate::GraphOptions;

use crate::job::Job;

use crate::error::py_err;
use crate::report::to_py;
use flashgnn_mutate::MutError;

#[pyclass(module = "flashgnn._core", name = "MutableGraph")]
pub struct MutableGraph {
    pub inner: Arc<flashgnn_mutate::MutableGraph>,
}

impl MutableGraph {
    /// A node id argument: negative ids are refused like any other out of range.
    fn id(&self, what: &str, v: i64) -> PyResult<u64> {
        if v < 0 {
            return Err(py_err(MutError::Invalid(format!("{what} {v} out of range [0, {})", self.inner.num_nodes()))));
        }
        Ok(v as u64)
    }
}

/// A batch entry's values as [`Arg`]s (`None`: not a tuple); what they
/// mean, and every refusal, is `flashgnn_mutate::batch`'s.
fn entry(item: &Bound<'_, PyAny>) -> Entry {
    let t = item.cast::<PyTuple>().ok()?;
    Some(t.iter().map(|v| arg(&v)).collect())
}

fn arg(v: &Bound<'_, PyAny>) -> Arg {
    if let Ok(s) = v.cast::<PyString>() {
        // A str that is not valid UTF-8 (lone surrogates) names no operation.
        s.to_str().map_or(Arg::Other, |s| Arg::Str(s.into()))
    } else if let Ok(i) = v.extract::<i64>() {
        Arg::Int(i)
    } else if let Ok(a) = v.extract::<PyReadonlyArray1<'_, f64>>() {
        Arg::Floats(a.as_array().iter().copied().collect())
    } else {
        Arg::Other
    }
}

#[pymethods]
impl MutableGraph {
    #[new]
    #[pyo3(signature = (path, writable=true, group_commit_wait_us=0))]
    fn new(py: Python<'_>, path: std::path::PathBuf, writable: bool, group_commit_wait_us: u64) -> PyResult<Self> {
        let opts = GraphOptions { writable, group_commit_wait_us, ..Default::default() };
        let g = py.detach(move || flashgnn_mutate::MutableGraph::open(&path, &opts)).map_err(py_err)?;
        Ok(MutableGraph { inner: Arc::new(g) })
    }

    fn add_vertex(&self, py: Python<'_>, embed: PyReadonlyArray1<'_, f64>) -> PyResult<u64> {
        let e: Vec<f64> = embed.as_array().iter().copied().collect();
        let g = &self.inner;
        py.detach(|| g.add_vertex(&e)).map_err(py_err)
    }

    fn delete_vertex(&self, py: Python<'_>, vid: i64) -> PyResult<()> {
        let v = self.id("vid", vid)?;
        py.detach(|| self.inner.delete_vertex(v)).map_err(py_err)
    }

    fn add_edge(&self, py: Python<'_>, dst: i64, src: i64) -> PyResult<()> {
        let (d, s) = (self.id("dst", dst)?, self.id("src", src)?);
        py.detach(|| self.inner.add_edge(d, s)).map_err(py_err)
    }

    fn delete_edge(&self, py: Python<'_>, dst: i64, src: i64) -> PyResult<()> {
        let (d, s) = (self.id("dst", dst)?, self.id("src", src)?);
        py.detach(|| self.inner.delete_edge(d, s)).map_err(py_err)
    }

    fn update_embed(&self, py: Python<'_>, vid: i64, embed: PyReadonlyArray1<'_, f64>) -> PyResult<()> {
        let v = self.id("vid", vid)?;
        let e: Vec<f64> = embed.as_array().iter().copied().collect();
        py.detach(|| self.inner.update_embed(v, &e)).map_err(py_err)
    }

    /// Feature row of `vid` as raw bytes of the stored dtype.
    fn get_embed<'py>(&self, py: Python<'py>, vid: i64) -> PyResult<Bound<'py, PyArray1<u8>>> {
        let r = py.detach(|| self.inner.get_embed(vid)).map_err(py_err)?;
        Ok(r.into_pyarray(py))
    }

    fn get_neighbors<'py>(&self, py: Python<'py>, vid: i64) -> PyResult<Bound<'py, PyArray1<i64>>> {
        let r = py.detach(|| self.inner.get_neighbors(vid)).map_err(py_err)?;
        Ok(r.into_iter().map(|v| v as i64).collect::<Vec<i64>>().into_pyarray(py))
    }

    /// One atomic, durable batch of `(name, args...)` tuples; embeddings are
    /// float64 arrays. Returns per-op results (new id for add_vertex).
    fn apply<'py>(&self, py: Python<'py>, ops: &Bound<'py, PyList>) -> PyResult<Vec<Option<u64>>> {
        // Refused before converting anything.
        flashgnn_mutate::check_batch_len(ops.len()).map_err(py_err)?;
        let entries: Vec<Entry> = ops.iter().map(|item| entry(&item)).collect();
        let g = &self.inner;
        py.detach(|| g.apply(g.parse_batch(&entries)?)).map_err(py_err)
    }

    /// Fold the log into a new generation; returns its report.
    fn compact(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let g = &self.inner;
        let r = py.detach(|| g.compact(&Progress::new())).map_err(py_err)?;
        to_py(py, &r.report())
    }

    /// `compact` on a background thread: a `Job` with progress and
    /// cancellation (`flashgnn.jobs.run_job` draws its bars).
    fn start_compact(&self) -> Job {
        let g = self.inner.clone();
        Job::spawn(move |p| Ok(g.compact(p)?.report()))
    }

    /// Replace the graph: edges (src[i], dst[i]) over `num_nodes` nodes,
    /// `embeddings` as raw little-endian bytes of `dtype` (`num_nodes` x
    /// `dim`), optional labels. Runs on a background thread: returns a `Job`
    /// whose result is the report.
    #[pyo3(signature = (src, dst, num_nodes, embeddings=None, dtype="float32", dim=0, labels=None))]
    #[allow(clippy::too_many_arguments)]
    fn start_update_graph(
        &self,
        src: PyReadonlyArray1<'_, i64>,
        dst: PyReadonlyArray1<'_, i64>,
        num_nodes: u64,
        embeddings: Option<PyReadonlyArray1<'_, u8>>,
        dtype: &str,
        dim: u32,
        labels: Option<PyReadonlyArray1<'_, i64>>,
    ) -> PyResult<Job> {
        let dt = Dtype::parse(dtype).filter(|d| d.is_float()).ok_or_else(|| {
            py_err(MutError::Invalid(format!("dtype {dtype:?}: expected float16, float32 or float64")))
        })?;
        let (s, d): (Vec<i64>, Vec<i64>) =
            (src.as_array().iter().copied().collect(), dst.as_array().iter().copied().collect());
        let f: Option<Vec<u8>> = embeddings.map(|e| e.as_array().iter().copied().collect());
        let l: Option<Vec<i64>> = labels.map(|e| e.as_array().iter().copied().collect());
        let g = self.inner.clone();
        Ok(Job::spawn(move |p| {
            let inp = flashgnn_mutate::UpdateGraphInput {
                src: &s,
                dst: &d,
                num_nodes,
                features: f.as_deref().map(|b| (b, dt, dim)),
                labels: l.as_deref(),
            };
            Ok(g.update_graph(&inp, p)?.report())
        }))
    }

    #[getter]
    fn num_nodes(&self) -> u64 {
        self.inner.num_nodes()
    }
    #[getter]
    fn feature_dim(&self) -> u32 {
        self.inner.feature_dim()
    }
    #[getter]
    fn feature_dtype(&self) -> &'static str {
        self.inner.feature_dtype().name()
    }
    #[getter]
    fn generation(&self) -> u64 {
        self.inner.generation()
    }
    #[getter]
    fn seq(&self) -> u64 {
        self.inner.seq()
    }
    #[getter]
    fn path(&self) -> String {
        self.inner.root().display().to_string()
    }

    /// Counters and sizes.
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let g = &self.inner;
        let r = py.detach(|| g.stats_report());
        to_py(py, &r)
    }

    fn close(&self, py: Python<'_>) -> PyResult<()> {
        let g = &self.inner;
        py.detach(|| g.close()).map_err(py_err)
    }
}

/// Read-only check of a dataset's mutable store (`mut/`: CURRENT, free list,
/// log replayed against the current generation; with `replay=False` the log's
/// frames checked without applying their ops, `flashgnn_mutate::verify_log_frames`).
/// Returns its report, or None when the dataset has no `mut/`. Raises
/// `CorruptDatasetError` naming file, byte offset and sequence number.
#[pyfunction]
#[pyo3(signature = (path, replay = true))]
pub fn verify_mutable(py: Python<'_>, path: std::path::PathBuf, replay: bool) -> PyResult<Option<Py<PyAny>>> {
    let check = if replay { flashgnn_mutate::verify_log } else { flashgnn_mutate::verify_log_frames };
    let r = py.detach(|| check(&path)).map_err(py_err)?;
    r.map(|r| to_py(py, &r.report())).transpose()
}

/// Test hook: bytes written so far under a `FLASHGNN_FAULT` plan (crash
/// tests measure a run once, then crash it at points spread over it).
#[pyfunction]
pub fn _fault_bytes_written() -> u64 {
    flashgnn_io::fault::written()
}
