//! `flashgnn._core.Sampler`, `BatchIter`, `Cache`, `Resident` and the
//! device probe: conversion only. What a sampler reads and how it follows a
//! live graph is `flashgnn_sample::follow`; the prefetch pipeline is
//! `flashgnn_sample::pipeline`; hot-set and resident-set selection is
//! `flashgnn_sample::tiers`. Errors are mapped by `error.rs`.
//!
//! Fork safety: a sampler remembers the pid that created it. In a forked
//! child (PyTorch DataLoader workers) its io_uring ring and thread pool do
//! not exist, so the inherited object is never used or dropped there — it is
//! leaked, and the Python wrapper opens a fresh one per process. The same
//! holds for a batch iterator (its producer threads exist only in the parent)
//! and a cache (its lock may have been held at fork time: samplers in the
//! child run uncached, with identical batches).

use std::mem::ManuallyDrop;
use std::sync::{Arc, Mutex};

use numpy::ndarray::Array2;
use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use flashgnn_io::engine::EngineConfig;
use flashgnn_sample::follow::{engine_kind, Follow, View};
use flashgnn_sample::pipeline::{Pipeline, PipelineOptions};
use flashgnn_sample::rowcodec::RowCodec;
use flashgnn_sample::tiers::{self, HotChoice};
use flashgnn_sample::{
    Batch, DegreeWeights, Gather, LinkSpec, NegDist, NegMode, NeighborSampler, PageCache, Policy, SampleError,
    SamplerConfig, Telemetry,
};

use crate::error::{py_err, CoreError};
use crate::report::to_py;

/// The view of `path` a reader opened without a live graph gets: its
/// mutated state when `DATASET/mut/CURRENT` exists, else the dataset alone.
fn view_of(path: &std::path::Path) -> Result<View, CoreError> {
    Ok(View::of_path(path, flashgnn_mutate::published_snapshot)?)
}

pub(crate) fn config(
    engine: &str,
    depth: usize,
    pool_threads: usize,
    labels: bool,
    features: bool,
) -> PyResult<SamplerConfig> {
    Ok(SamplerConfig {
        engine: engine_kind(engine).map_err(py_err)?,
        io: EngineConfig { depth, pool_threads, ..Default::default() },
        labels,
        features,
        ..Default::default()
    })
}

/// The sampler's `Mutex` only in the process that created it.
fn owned_here<T>(pid: u32, x: &T) -> PyResult<&T> {
    if pid != std::process::id() {
        return Err(py_err(CoreError::Unavailable(
            "this flashgnn sampler was created in another process (fork); open a new one in this process".into(),
        )));
    }
    Ok(x)
}

/// A batch as numpy arrays that own the Rust vectors (no copy): `edge_index`
/// `[2, E]` int64, `x` as its bytes with `x_dtype` naming their dtype (the
/// Python layer views them as `[N, dim]`, still without a copy).
fn batch_dict<'py>(py: Python<'py>, mut b: Batch) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    if let Some(t) = b.typed.take() {
        d.set_item("typed", typed_dict(py, *t)?)?;
    }
    let e = b.num_edges();
    let edge_index = Array2::from_shape_vec((2, e), b.edge_index)
        .map_err(|err| py_err(CoreError::Unavailable(format!("internal: edge_index of {e} edges: {err}"))))?;
    d.set_item("batch_size", b.batch_size)?;
    d.set_item("n_id", b.n_id.into_pyarray(py))?;
    d.set_item("edge_index", edge_index.into_pyarray(py))?;
    d.set_item("x_dtype", b.x_dtype.name())?;
    d.set_item("num_sampled_nodes", b.num_sampled_nodes.into_pyarray(py))?;
    d.set_item("num_sampled_edges", b.num_sampled_edges.into_pyarray(py))?;
    d.set_item("x", b.x.into_pyarray(py))?;
    d.set_item("y", b.y.into_pyarray(py))?;
    d.set_item("resident", b.resident.into_pyarray(py))?;
    d.set_item("missing", b.missing.into_pyarray(py))?;
    d.set_item("deg", b.deg.into_pyarray(py))?;
    if let Some(l) = b.link.take() {
        let ld = PyDict::new(py);
        ld.set_item("index", l.index.into_pyarray(py))?;
        ld.set_item("src_neg", l.src_neg.into_pyarray(py))?;
        ld.set_item("dst_neg", l.dst_neg.into_pyarray(py))?;
        ld.set_item("num_pos", l.num_pos)?;
        ld.set_item("redrawn", l.redrawn)?;
        ld.set_item("false_negatives", l.false_negatives)?;
        ld.set_item("seed_edges_removed", l.seed_edges_removed)?;
        d.set_item("link", ld)?;
    }
    Ok(d)
}

/// A typed batch's parts (`flashgnn_sample::TypedBatch`), every array
/// owning its Rust vector (no copy): `input_type` (index), `node_types` (per
/// node type in the dataset's order: `n_id` local ids, `x` bytes with
/// `x_dtype` and `dim`, `y`, `num_sampled_nodes`), `edge_types` (per edge
/// type: `edge_index` `[2, E]` int64, `e_id` `[E]` int64 (empty without
/// edge bases: `Sampler.edge_ids`), `num_sampled_edges`).
fn typed_dict<'py>(py: Python<'py>, t: flashgnn_sample::TypedBatch) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("input_type", t.input_type)?;
    let nodes = pyo3::types::PyList::empty(py);
    for n in t.node_types {
        let nd = PyDict::new(py);
        nd.set_item("n_id", n.n_id.into_pyarray(py))?;
        nd.set_item("x", n.x.into_pyarray(py))?;
        nd.set_item("x_dtype", n.x_dtype.name())?;
        nd.set_item("dim", n.dim)?;
        nd.set_item("y", n.y.into_pyarray(py))?;
        nd.set_item("num_sampled_nodes", n.num_sampled_nodes.into_pyarray(py))?;
        nodes.append(nd)?;
    }
    d.set_item("node_types", nodes)?;
    let edges = pyo3::types::PyList::empty(py);
    for e in t.edge_types {
        let ed = PyDict::new(py);
        let m = e.num_edges();
        let edge_index = Array2::from_shape_vec((2, m), e.edge_index)
            .map_err(|err| py_err(CoreError::Unavailable(format!("internal: edge_index of {m} edges: {err}"))))?;
        ed.set_item("edge_index", edge_index.into_pyarray(py))?;
        ed.set_item("e_id", e.e_id.into_pyarray(py))?;
        ed.set_item("num_sampled_edges", e.num_sampled_edges.into_pyarray(py))?;
        edges.append(ed)?;
    }
    d.set_item("edge_types", edges)?;
    Ok(d)
}

/// A sampler's telemetry report (`Sampler.telemetry()`; keys as listed, the
/// figures derived by `Telemetry`'s own methods).
pub fn telemetry_report(t: &Telemetry) -> serde_json::Value {
    serde_json::json!({
        "batches": t.batches, "seeds": t.seeds, "nodes": t.nodes, "edges": t.edges,
        "reads": t.reads, "bytes_read": t.bytes_read, "bytes_used": t.bytes_used, "page_hits": t.page_hits,
        "cache_static_hits": t.cache_static_hits, "cache_dynamic_hits": t.cache_dynamic_hits,
        "cache_hit_rate": t.cache_hit_rate(),
        "seconds": t.seconds, "cpu_seconds": t.cpu_seconds,
        "io_wait_seconds": t.io_wait_seconds, "io_waits": t.io_waits,
        "read_amplification": t.read_amplification(),
        "iops": t.iops(),
        "read_mb_per_s": t.read_mb_per_s(),
        "cpu_us_per_read": t.cpu_us_per_read(),
        "depth_hist": t.depth_hist.to_vec(),
        "size_hist": t.size_hist.to_vec(),
        "timeline": t.timeline,
    })
}

struct Owned {
    pid: u32,
    inner: ManuallyDrop<Mutex<NeighborSampler>>,
}

impl Drop for Owned {
    fn drop(&mut self) {
        if self.pid == std::process::id() {
            // SAFETY: dropped exactly once, here, in the creating process.
            unsafe { ManuallyDrop::drop(&mut self.inner) };
        }
        // In a forked child: leak (threads/rings of the parent do not exist here).
    }
}

#[pyclass(module = "flashgnn._core")]
pub struct Sampler {
    owned: Owned,
    follow: Follow,
    /// Degree-weighted negatives' table, built on first use (one scan).
    neg_weights: Mutex<Option<Arc<DegreeWeights>>>,
}

impl Sampler {
    fn get(&self) -> PyResult<&Mutex<NeighborSampler>> {
        owned_here(self.owned.pid, &*self.owned.inner)
    }

    /// A link batch's options as `flashgnn_sample::LinkSpec`; `weighted`
    /// builds (once) the degree table through this sampler, GIL released.
    fn link_spec(
        &self,
        py: Python<'_>,
        mode: &str,
        amount: f64,
        weighted: bool,
        exclude_true_edges: bool,
        exclude_seed_edges: bool,
        edge_type: Option<usize>,
    ) -> PyResult<LinkSpec> {
        let mode = NegMode::parse(mode).map_err(py_err)?;
        let dist = if weighted {
            let m = self.get()?;
            let mut w = self.neg_weights.lock().unwrap();
            if w.is_none() {
                let built = py.detach(|| m.lock().unwrap().degree_weights()).map_err(py_err)?;
                *w = Some(Arc::new(built));
            }
            NegDist::Degree(w.clone().expect("set above"))
        } else {
            NegDist::Uniform
        };
        Ok(LinkSpec { mode, amount, dist, exclude_true_edges, exclude_seed_edges, edge_type })
    }

    /// One batch call over node ids `ids`, with the GIL released.
    fn batch<'py>(
        &self,
        py: Python<'py>,
        ids: PyReadonlyArray1<'py, i64>,
        call: impl FnOnce(&Follow, &mut NeighborSampler, &[i64]) -> Result<Batch, SampleError> + Send,
    ) -> PyResult<Bound<'py, PyDict>> {
        let ids: Vec<i64> = ids.as_array().iter().copied().collect();
        let m = self.get()?;
        let b = py.detach(|| call(&self.follow, &mut m.lock().unwrap(), &ids)).map_err(py_err)?;
        batch_dict(py, b)
    }
}

#[pymethods]
impl Sampler {
    #[new]
    #[pyo3(signature = (path, fanouts, engine="uring", depth=flashgnn_io::engine::DEFAULT_DEPTH, pool_threads=flashgnn_io::engine::DEFAULT_POOL_THREADS, labels=true, features=true, cache=None, graph=None, resident=None, free_features_only=false, degrees=false, x_dtype=None, rel_fanouts=None))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        fanouts: Vec<i32>,
        engine: &str,
        depth: usize,
        pool_threads: usize,
        labels: bool,
        features: bool,
        cache: Option<PyRef<'_, Cache>>,
        graph: Option<PyRef<'_, crate::graph::MutableGraph>>,
        resident: Option<PyRef<'_, Resident>>,
        free_features_only: bool,
        degrees: bool,
        x_dtype: Option<&str>,
        rel_fanouts: Option<Vec<Vec<i32>>>,
    ) -> PyResult<Self> {
        let mut cfg = config(engine, depth, pool_threads, labels, features)?;
        cfg.rel_fanouts = rel_fanouts;
        cfg.x_dtype = x_dtype
            .map(|n| {
                flashgnn_format::Dtype::parse(n).filter(|d| d.is_float()).ok_or_else(|| {
                    py_err(SampleError::Config(format!("x_dtype {n:?}: expected float16, float32 or float64")))
                })
            })
            .transpose()?;
        cfg.free_features_only = free_features_only;
        cfg.degrees = degrees;
        cfg.cache = cache.and_then(|c| c.usable());
        cfg.resident = resident.map(|r| r.inner.clone());
        let live = graph.map(|g| View::Live(g.inner.clone()));
        let (s, follow) = py
            .detach(move || -> Result<_, CoreError> {
                let view = match live {
                    Some(l) => l,
                    None => view_of(&path)?,
                };
                let follow = Follow::new(path, &fanouts, cfg, view);
                Ok((follow.open()?, follow))
            })
            .map_err(py_err)?;
        Ok(Sampler {
            owned: Owned { pid: std::process::id(), inner: ManuallyDrop::new(Mutex::new(s)) },
            follow,
            neg_weights: Mutex::new(None),
        })
    }

    #[getter]
    fn engine(&self) -> PyResult<&'static str> {
        Ok(self.get()?.lock().unwrap().engine_name())
    }

    /// Feature width and stored dtype name, from the layout the sampler
    /// already read (no second open of the dataset).
    #[getter]
    fn feature_dim(&self) -> PyResult<u32> {
        Ok(self.get()?.lock().unwrap().layout().feature_dim)
    }

    #[getter]
    fn feature_dtype(&self) -> PyResult<&'static str> {
        Ok(self.get()?.lock().unwrap().layout().feature_dtype.name())
    }

    /// Whether a typed batch's edges carry `e_id` (a typed dataset of
    /// format version 4: its slots hold per-relation edge bases).
    #[getter]
    fn edge_ids(&self) -> PyResult<bool> {
        Ok(self.get()?.lock().unwrap().layout().edge_bases)
    }

    /// A typed dataset's node and edge types (the manifest's `types`: names,
    /// counts, features, labels, edge triples), None for a homogeneous one.
    #[getter]
    fn types(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        let s = self.get()?.lock().unwrap();
        s.type_table().map(|t| to_py(py, &serde_json::to_value(t).expect("a type table serialises"))).transpose()
    }

    /// Sample one mini-batch; returns a dict of numpy arrays (x as raw bytes).
    fn sample<'py>(
        &self,
        py: Python<'py>,
        seeds: PyReadonlyArray1<'py, i64>,
        seed: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.batch(py, seeds, |f, s, ids| f.sample(s, ids, seed))
    }

    /// One link batch (`flashgnn_sample::link`): the supervision edges
    /// `src[i] -> dst[i]`, negatives by `mode` ("none", "binary",
    /// "triplet") and `amount`, uniform or (`weighted`) by degree^0.75,
    /// redrawn when a stored edge (`exclude_true_edges`), and the positives
    /// with their reverses removed from the sampled edges
    /// (`exclude_seed_edges`). The dict has `link` besides a batch's arrays.
    /// A typed dataset's batch names the `edge_type` (its index) of its
    /// edges, whose ids are global.
    #[pyo3(signature = (src, dst, seed, mode="none", amount=1.0, weighted=false, exclude_true_edges=false, exclude_seed_edges=false, edge_type=None))]
    #[allow(clippy::too_many_arguments)]
    fn sample_link<'py>(
        &self,
        py: Python<'py>,
        src: PyReadonlyArray1<'py, i64>,
        dst: PyReadonlyArray1<'py, i64>,
        seed: u64,
        mode: &str,
        amount: f64,
        weighted: bool,
        exclude_true_edges: bool,
        exclude_seed_edges: bool,
        edge_type: Option<usize>,
    ) -> PyResult<Bound<'py, PyDict>> {
        let spec = self.link_spec(py, mode, amount, weighted, exclude_true_edges, exclude_seed_edges, edge_type)?;
        let dst: Vec<i64> = dst.as_array().iter().copied().collect();
        self.batch(py, src, |f, s, src| f.sample_link(s, src, &dst, &spec, seed))
    }

    /// The rows of `ids` (no repeats), in order, through this sampler's
    /// engine and cache, as a batch with no edges (`x` with `features`, `y`
    /// with `labels`, `deg` with `degrees`): the lookahead's fill reads, a
    /// feature store's and a pre-sample's degrees, with no second sampler.
    #[pyo3(signature = (ids, features=true, labels=false, degrees=false))]
    fn gather<'py>(
        &self,
        py: Python<'py>,
        ids: PyReadonlyArray1<'py, i64>,
        features: bool,
        labels: bool,
        degrees: bool,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.batch(py, ids, |f, s, ids| f.gather(s, ids, Gather { features, labels, degrees }))
    }

    /// Attach the cross-batch cache (None: detach) to this sampler and to
    /// the producers its next `iter_batches` starts.
    #[pyo3(signature = (cache))]
    fn set_cache(&mut self, cache: Option<PyRef<'_, Cache>>) -> PyResult<()> {
        let c = cache.and_then(|c| c.usable());
        self.get()?.lock().unwrap().set_cache(c.clone());
        self.follow.cfg.cache = c;
        Ok(())
    }

    /// GraphSAINT random-walk batch: the subgraph induced by `walk_length`-
    /// step walks from each root.
    fn random_walk<'py>(
        &self,
        py: Python<'py>,
        roots: PyReadonlyArray1<'py, i64>,
        walk_length: usize,
        seed: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        self.batch(py, roots, |f, s, ids| f.random_walk(s, ids, walk_length, seed))
    }

    /// Cumulative telemetry, or the last batch's alone with `last=True`.
    #[pyo3(signature = (last=false))]
    fn telemetry(&self, py: Python<'_>, last: bool) -> PyResult<Py<PyAny>> {
        let s = self.get()?.lock().unwrap();
        to_py(py, &telemetry_report(if last { &s.last_batch } else { &s.telemetry }))
    }

    fn reset_telemetry(&self) -> PyResult<()> {
        self.get()?.lock().unwrap().telemetry = Telemetry::default();
        Ok(())
    }

    /// Background producers over `seed_order` in batches of `batch_size`,
    /// at most `prefetch` batches ahead; batch i uses seed `seed + i`.
    /// `workers` producer threads take batches round-robin; batches still
    /// come out in order (`flashgnn_sample::pipeline`).
    #[pyo3(signature = (seed_order, batch_size, seed, prefetch=4, drop_last=false, workers=1))]
    fn iter_batches(
        &self,
        py: Python<'_>,
        seed_order: PyReadonlyArray1<'_, i64>,
        batch_size: usize,
        seed: u64,
        prefetch: usize,
        drop_last: bool,
        workers: usize,
    ) -> PyResult<BatchIter> {
        let order = Arc::new(seed_order.as_array().iter().copied().collect::<Vec<i64>>());
        let opts = PipelineOptions { batch_size, seed, prefetch, drop_last, producers: workers };
        let p = py.detach(|| Pipeline::start(&self.follow, order, &opts)).map_err(py_err)?;
        Ok(BatchIter { inner: Mutex::new(Some(p)), telemetry: Mutex::new(None), pid: std::process::id() })
    }

    /// Background producers over the supervision edges `src[i] -> dst[i]`
    /// (in epoch order), `batch_size` edges a batch, link batches as
    /// [`Self::sample_link`] draws them; batch i uses seed `seed + i`.
    #[pyo3(signature = (src, dst, batch_size, seed, prefetch=4, drop_last=false, workers=1, mode="none", amount=1.0, weighted=false, exclude_true_edges=false, exclude_seed_edges=false, edge_type=None))]
    #[allow(clippy::too_many_arguments)]
    fn iter_link_batches(
        &self,
        py: Python<'_>,
        src: PyReadonlyArray1<'_, i64>,
        dst: PyReadonlyArray1<'_, i64>,
        batch_size: usize,
        seed: u64,
        prefetch: usize,
        drop_last: bool,
        workers: usize,
        mode: &str,
        amount: f64,
        weighted: bool,
        exclude_true_edges: bool,
        exclude_seed_edges: bool,
        edge_type: Option<usize>,
    ) -> PyResult<BatchIter> {
        let spec =
            Arc::new(self.link_spec(py, mode, amount, weighted, exclude_true_edges, exclude_seed_edges, edge_type)?);
        let src = Arc::new(src.as_array().iter().copied().collect::<Vec<i64>>());
        let dst = Arc::new(dst.as_array().iter().copied().collect::<Vec<i64>>());
        let opts = PipelineOptions { batch_size, seed, prefetch, drop_last, producers: workers };
        let p = py.detach(|| Pipeline::start_links(&self.follow, src, dst, spec, &opts)).map_err(py_err)?;
        Ok(BatchIter { inner: Mutex::new(Some(p)), telemetry: Mutex::new(None), pid: std::process::id() })
    }
}

/// The cross-batch DRAM cache (`flashgnn_sample::cache`), built once and
/// shared by every sampler and producer given it. Process-local: in a forked
/// child it is not used (its lock may have been held at fork time); samplers
/// there run uncached, with identical batches.
#[pyclass(module = "flashgnn._core")]
pub struct Cache {
    inner: Arc<PageCache>,
    pid: u32,
    hot: String,
    hot_seconds: f64,
}

impl Cache {
    fn usable(&self) -> Option<Arc<PageCache>> {
        (self.pid == std::process::id()).then(|| self.inner.clone())
    }
}

#[pymethods]
impl Cache {
    /// `budget` bytes in all; `hot_fraction` of it for the static hot set
    /// chosen by `hot` ("degree", "presample" over `presample_seeds` in
    /// batches of `batch_size`, or "none"); the rest is dynamic under
    /// `policy` ("s3fifo" or "clock").
    #[new]
    #[pyo3(signature = (path, fanouts, budget, policy="s3fifo", hot="degree", hot_fraction=flashgnn_sample::DEFAULT_HOT_FRACTION, presample_seeds=None, batch_size=1024, engine="uring", depth=flashgnn_io::engine::DEFAULT_DEPTH, row_codec="none"))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        py: Python<'_>,
        path: std::path::PathBuf,
        fanouts: Vec<i32>,
        budget: usize,
        policy: &str,
        hot: &str,
        hot_fraction: f64,
        presample_seeds: Option<PyReadonlyArray1<'_, i64>>,
        batch_size: usize,
        engine: &str,
        depth: usize,
        row_codec: &str,
    ) -> PyResult<Self> {
        let pol = Policy::parse(policy)
            .ok_or_else(|| py_err(SampleError::Config(format!("cache policy {policy:?}: expected s3fifo or clock"))))?;
        let codec = RowCodec::parse(row_codec).map_err(|e| py_err(SampleError::Config(e)))?;
        let seeds: Vec<i64> = presample_seeds.map(|a| a.as_array().iter().copied().collect()).unwrap_or_default();
        let choice = HotChoice::parse(hot, seeds, batch_size).map_err(py_err)?;
        let cfg = config(engine, depth, flashgnn_io::engine::DEFAULT_POOL_THREADS, false, true)?;
        let t = std::time::Instant::now();
        let cache = py
            .detach(move || -> Result<_, CoreError> {
                let follow = Follow::new(&path, &fanouts, cfg, view_of(&path)?);
                Ok(tiers::build_cache(&follow, budget, pol, &choice, hot_fraction, codec)?)
            })
            .map_err(py_err)?;
        Ok(Cache {
            inner: Arc::new(cache),
            pid: std::process::id(),
            hot: hot.to_string(),
            hot_seconds: t.elapsed().as_secs_f64(),
        })
    }

    /// A cache whose hot set is chosen through `sampler` (its dataset,
    /// view, fanouts and engine): no sampler of its own is opened. Attach it
    /// with `sampler.set_cache`.
    #[staticmethod]
    #[pyo3(signature = (sampler, budget, policy="s3fifo", hot="degree", hot_fraction=flashgnn_sample::DEFAULT_HOT_FRACTION, presample_seeds=None, batch_size=1024, row_codec="none"))]
    #[allow(clippy::too_many_arguments)]
    fn for_sampler(
        py: Python<'_>,
        sampler: PyRef<'_, Sampler>,
        budget: usize,
        policy: &str,
        hot: &str,
        hot_fraction: f64,
        presample_seeds: Option<PyReadonlyArray1<'_, i64>>,
        batch_size: usize,
        row_codec: &str,
    ) -> PyResult<Self> {
        let pol = Policy::parse(policy)
            .ok_or_else(|| py_err(SampleError::Config(format!("cache policy {policy:?}: expected s3fifo or clock"))))?;
        let codec = RowCodec::parse(row_codec).map_err(|e| py_err(SampleError::Config(e)))?;
        let seeds: Vec<i64> = presample_seeds.map(|a| a.as_array().iter().copied().collect()).unwrap_or_default();
        let choice = HotChoice::parse(hot, seeds, batch_size).map_err(py_err)?;
        let this: &Sampler = &sampler;
        let m = this.get()?;
        let t = std::time::Instant::now();
        let cache = py
            .detach(|| -> Result<PageCache, SampleError> {
                let mut s = m.lock().unwrap();
                this.follow.prepare(&mut s)?;
                tiers::build_cache_on(&mut s, budget, pol, &choice, hot_fraction, codec)
            })
            .map_err(py_err)?;
        Ok(Cache {
            inner: Arc::new(cache),
            pid: std::process::id(),
            hot: hot.to_string(),
            hot_seconds: t.elapsed().as_secs_f64(),
        })
    }

    /// Sizes and cumulative counters.
    fn stats(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        use std::sync::atomic::Ordering::Relaxed;
        let c = &self.inner;
        let st = &c.stats;
        let report = serde_json::json!({
            "budget": c.budget(), "policy": c.policy().name(), "hot": self.hot,
            "row_codec": c.static_row_codec().map_or("none", |r| r.name()),
            "hot_seconds": self.hot_seconds,
            "static_bytes": c.static_bytes(), "static_entries": c.static_entries(), "static_dense": c.static_dense(),
            "dynamic_bytes": c.dynamic_bytes(),
            "static_hits": st.static_hits.load(Relaxed), "dynamic_hits": st.dynamic_hits.load(Relaxed),
            "misses": st.misses.load(Relaxed), "inserts": c.inserts(),
            "evictions": c.evictions(),
        });
        to_py(py, &report)
    }
}

/// The device tier's resident set (`flashgnn_sample::resident`): the
/// `count` highest-degree nodes of the dataset a sampler given `path` reads
/// (the current generation's base on a mutated dataset); row r of the device
/// table is `nodes()[r]`. Plain data (no ring, no lock): safe after fork.
#[pyclass(module = "flashgnn._core")]
pub struct Resident {
    inner: Arc<flashgnn_sample::Resident>,
    nodes: Vec<i64>,
    degrees: Vec<i64>,
}

#[pymethods]
impl Resident {
    #[new]
    #[pyo3(signature = (path, count, engine="uring", depth=flashgnn_io::engine::DEFAULT_DEPTH))]
    fn new(py: Python<'_>, path: std::path::PathBuf, count: usize, engine: &str, depth: usize) -> PyResult<Self> {
        let cfg = config(engine, depth, flashgnn_io::engine::DEFAULT_POOL_THREADS, false, false)?;
        let set = py
            .detach(move || -> Result<_, CoreError> {
                let follow = Follow::new(&path, &[], cfg, view_of(&path)?);
                Ok(tiers::resident_by_degree(&follow, count)?)
            })
            .map_err(py_err)?;
        Ok(Resident { inner: Arc::new(set.resident), nodes: set.nodes, degrees: set.degrees })
    }

    /// Original ids of the resident rows, in table order (highest degree first).
    fn nodes<'py>(&self, py: Python<'py>) -> Bound<'py, numpy::PyArray1<i64>> {
        self.nodes.clone().into_pyarray(py)
    }
    fn degrees<'py>(&self, py: Python<'py>) -> Bound<'py, numpy::PyArray1<i64>> {
        self.degrees.clone().into_pyarray(py)
    }
    fn __len__(&self) -> usize {
        self.nodes.len()
    }
}

/// An epoch of `flashgnn_sample::pipeline::Pipeline`. Process-local: in a
/// forked child its producer threads do not exist, so it is leaked there,
/// never joined.
#[pyclass(module = "flashgnn._core")]
pub struct BatchIter {
    inner: Mutex<Option<Pipeline>>,
    telemetry: Mutex<Option<Telemetry>>,
    pid: u32,
}

#[pymethods]
impl BatchIter {
    fn __iter__(slf: PyRef<'_, Self>) -> PyRef<'_, Self> {
        slf
    }
    fn __next__<'py>(&self, py: Python<'py>) -> PyResult<Option<Bound<'py, PyDict>>> {
        if self.pid != std::process::id() {
            return Err(py_err(CoreError::Unavailable(
                "batch iterator crossed a fork; create it in this process".into(),
            )));
        }
        let got = py.detach(|| self.inner.lock().unwrap().as_mut().and_then(|p| p.next_batch()));
        match got {
            Some(Ok(b)) => Ok(Some(batch_dict(py, b)?)),
            Some(Err(e)) => {
                self.finish(py);
                Err(py_err(e))
            }
            None => {
                self.finish(py);
                Ok(None)
            }
        }
    }
    /// Telemetry of the producers (available once the iterator is exhausted).
    fn telemetry(&self, py: Python<'_>) -> PyResult<Option<Py<PyAny>>> {
        self.telemetry.lock().unwrap().as_ref().map(|t| to_py(py, &telemetry_report(t))).transpose()
    }
    /// Stop the producers early.
    fn close(&self, py: Python<'_>) {
        self.finish(py);
    }
}

impl BatchIter {
    /// Stop and join the producers (once); keep their summed telemetry.
    fn finish(&self, py: Python<'_>) {
        if self.pid != std::process::id() {
            return;
        }
        let t = py.detach(|| self.inner.lock().unwrap().take().map(|mut p| p.finish().clone()));
        if let Some(t) = t {
            *self.telemetry.lock().unwrap() = Some(t);
        }
    }
}

impl Drop for BatchIter {
    fn drop(&mut self) {
        if self.pid != std::process::id() {
            // Forked child: the producer threads do not exist here.
            std::mem::forget(self.inner.get_mut().unwrap().take());
        }
    }
}

/// Random-read probe (fio-style): `len`-byte O_DIRECT reads at random
/// aligned offsets of `path`, `depth` in flight, for `seconds`. Returns IOPS.
#[pyfunction]
#[pyo3(signature = (path, len=4096, depth=1, seconds=2.0, engine="uring"))]
pub fn probe_random_reads(
    py: Python<'_>,
    path: std::path::PathBuf,
    len: u32,
    depth: usize,
    seconds: f64,
    engine: &str,
) -> PyResult<f64> {
    let kind = engine_kind(engine).map_err(py_err)?;
    py.detach(move || flashgnn_sample::probe::random_reads(&path, kind, len, depth, seconds)).map_err(py_err)
}

/// How many engine samplers (`flashgnn_sample::NeighborSampler`) this
/// process has opened: each holds its own buffers and engine.
#[pyfunction]
pub fn samplers_opened() -> u64 {
    flashgnn_sample::samplers_opened()
}
