//! `flashgnn._core.TraceRecorder`, `simulate` and `trace_in_flight`: trace capture over the
//! sampling engine (docs/trace.md) and the SSD design simulator
//! (docs/simulator.md). Conversion and error mapping only.

use std::path::PathBuf;

use numpy::PyReadonlyArray1;
use pyo3::prelude::*;

use flashgnn_sample::NeighborSampler;

use crate::error::{py_err, CoreError};
use crate::report::to_py_ordered;

#[pyclass(module = "flashgnn._core")]
pub struct TraceRecorder {
    inner: std::sync::Mutex<Option<(NeighborSampler, flashgnn_sim::trace::TraceWriter)>>,
}

#[pymethods]
impl TraceRecorder {
    /// Open `path` for sampling with capture on and create the trace `out`;
    /// `params` (a JSON object) goes into the trace header with the trace's
    /// file table added as `files` (docs/trace.md). `rel_fanouts`: a typed
    /// dataset's `[hop][edge type]` fanouts (as `_core.Sampler`'s).
    #[new]
    #[pyo3(signature = (path, out, fanouts, params, engine="uring", depth=256, rel_fanouts=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        out: PathBuf,
        fanouts: Vec<i32>,
        params: String,
        engine: &str,
        depth: usize,
        rel_fanouts: Option<Vec<Vec<i32>>>,
    ) -> PyResult<Self> {
        let mut cfg = crate::sampler::config(engine, depth, 64, false, true)?;
        cfg.rel_fanouts = rel_fanouts;
        let mut params: serde_json::Value = serde_json::from_str(&params)
            .map_err(|e| py_err(CoreError::Input(format!("trace params are not JSON: {e}"))))?;
        py.detach(|| {
            let mut s = NeighborSampler::open(&path, &fanouts, &cfg).map_err(py_err)?;
            s.set_trace(true);
            if let Some(m) = params.as_object_mut() {
                m.insert("files".into(), serde_json::json!(s.trace_files()));
            }
            let params = params.to_string();
            let (id, page_size) = (s.dataset_id().dataset_id, s.layout().page_size);
            let w = flashgnn_sim::trace::TraceWriter::start(&out, id, page_size, params).map_err(py_err)?;
            Ok(TraceRecorder { inner: std::sync::Mutex::new(Some((s, w))) })
        })
    }

    /// Sample one batch around `seeds` and append its reads; returns
    /// (reads, bytes read, sampled nodes) of the batch.
    fn batch(&self, py: Python<'_>, seeds: PyReadonlyArray1<i64>, seed: u64) -> PyResult<(u64, u64, u64)> {
        let seeds = seeds.as_slice()?.to_vec();
        py.detach(|| -> PyResult<(u64, u64, u64)> {
            let mut g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
            let Some((s, w)) = g.as_mut() else {
                return Err(py_err(CoreError::Unavailable("trace recorder is closed".into())));
            };
            let batch = s.sample(&seeds, seed).map_err(py_err)?;
            let reads = s.take_trace();
            let bytes: u64 = reads.iter().map(|r| r.length as u64).sum();
            w.write_batch(&reads).map_err(py_err)?;
            Ok((reads.len() as u64, bytes, batch.total_nodes() as u64))
        })
    }

    /// Bytes the recorder's engine has read so far (its I/O counters: what
    /// the sampler read, against which a trace's lengths are checked).
    fn io_bytes(&self) -> PyResult<u64> {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let Some((s, _)) = g.as_ref() else {
            return Err(py_err(CoreError::Unavailable("trace recorder is closed".into())));
        };
        Ok(s.io_counters().bytes)
    }

    /// The trace's file table (dataset file names by a record's `file`).
    fn files(&self) -> PyResult<Vec<String>> {
        let g = self.inner.lock().unwrap_or_else(|p| p.into_inner());
        let Some((s, _)) = g.as_ref() else {
            return Err(py_err(CoreError::Unavailable("trace recorder is closed".into())));
        };
        Ok(s.trace_files().to_vec())
    }

    /// Seal the trace; returns (records, batches).
    fn finish(&self, py: Python<'_>) -> PyResult<(u64, u64)> {
        py.detach(|| {
            let Some((_, w)) = self.inner.lock().unwrap_or_else(|p| p.into_inner()).take() else {
                return Err(py_err(CoreError::Unavailable("trace recorder is closed".into())));
            };
            w.finish().map_err(py_err)
        })
    }
}

/// Replay a trace under a config; returns the report.
#[pyfunction]
#[pyo3(signature = (trace, config, designs, sweep=None, set=Vec::new(), timing=true))]
pub fn simulate(
    py: Python<'_>,
    trace: PathBuf,
    config: PathBuf,
    designs: Vec<String>,
    sweep: Option<(String, Vec<String>)>,
    set: Vec<(String, String)>,
    timing: bool,
) -> PyResult<Py<PyAny>> {
    let r = py.detach(|| {
        let req = flashgnn_sim::Request { trace: &trace, config: &config, designs, sweep, set, timing };
        flashgnn_sim::simulate(&req).map_err(py_err)
    })?;
    to_py_ordered(py, &r)
}

/// Reads in flight as the traced engine measured them (timeline and
/// histogram over batch I/O time).
#[pyfunction]
pub fn trace_in_flight(py: Python<'_>, trace: PathBuf) -> PyResult<Py<PyAny>> {
    let m = py.detach(|| flashgnn_sim::measured::measure(&trace).map_err(py_err))?;
    to_py_ordered(py, &m)
}
