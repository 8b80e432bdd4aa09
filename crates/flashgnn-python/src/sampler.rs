//! `flashgnn._core.Sampler`, `BatchIter` and the device probe.
//!
//! Fork safety: a sampler remembers the pid that created it. In a forked
//! child (PyTorch DataLoader workers) its io_uring ring and thread pool do
//! not exist, so the inherited object is never used or dropped there — it is
//! leaked, and the Python wrapper opens a fresh one per process.

use std::mem::ManuallyDrop;
use std::sync::mpsc::{sync_channel, Receiver};
use std::sync::Mutex;

use numpy::{IntoPyArray, PyReadonlyArray1};
use pyo3::prelude::*;
use pyo3::types::PyDict;

use flashgnn_io::engine::{EngineConfig, EngineKind};
use flashgnn_sample::{Batch, DatasetId, NeighborSampler, PageCache, Policy, SamplerConfig, Telemetry};

use crate::error::{sample_err, CoreError, InputError};

/// Where a sampler's mutable-graph snapshot comes from.
#[derive(Clone)]
enum Snap {
    /// A plain dataset.
    None,
    /// `DATASET/mut/` replayed read-only when the sampler was opened.
    Fixed(std::sync::Arc<flashgnn_store::Snapshot>),
    /// A live `MutableGraph`: a fresh snapshot per batch.
    Live(std::sync::Arc<flashgnn_mutate::MutableGraph>),
}

impl Snap {
    /// For a dataset path: its mutated state when `DATASET/mut/CURRENT` exists.
    /// A `mut` that is not a directory, or a `mut/CURRENT` that is not a
    /// regular file, is refused (corruption naming it), never ignored; a
    /// damaged log is corruption with its file and offset (`error.rs`).
    fn for_path(path: &std::path::Path) -> Result<Snap, CoreError> {
        use flashgnn_mutate::current;
        if !current::store_present(path)?
            || !current::regular_file(&current::mut_dir(path).join(current::CURRENT_FILE))?
        {
            return Ok(Snap::None);
        }
        let opts = flashgnn_mutate::GraphOptions { writable: false, ..Default::default() };
        let g = flashgnn_mutate::MutableGraph::open(path, &opts)?;
        Ok(Snap::Fixed(g.snapshot()))
    }
    /// The snapshot to read now (a fresh one of a live graph); None for a
    /// plain dataset.
    fn current(&self) -> Option<std::sync::Arc<flashgnn_store::Snapshot>> {
        match self {
            Snap::None => None,
            Snap::Fixed(x) => Some(x.clone()),
            Snap::Live(g) => Some(g.snapshot()),
        }
    }
    /// Open a sampler on what `path` reads now: the dataset itself, or the
    /// base of one snapshot (already open, its maps and CRCs loaded) with
    /// that snapshot set.
    fn open(
        &self,
        path: &std::path::Path,
        fanouts: &[i32],
        cfg: &SamplerConfig,
    ) -> flashgnn_sample::Result<NeighborSampler> {
        match self.current() {
            None => NeighborSampler::open(path, fanouts, cfg),
            Some(snap) => {
                let mut s = NeighborSampler::open_dataset(&snap.base, fanouts, cfg)?;
                s.set_snapshot(Some(snap))?;
                Ok(s)
            }
        }
    }
    /// Point `s` at the current snapshot before a batch, reopening it on the
    /// snapshot's base when a compaction switched generations. The reopened
    /// sampler keeps the cross-batch cache only if that cache was built on the
    /// new base (`NeighborSampler::open_dataset` checks its `DatasetId`); a
    /// cache of the old base is dropped, and batches run uncached.
    fn prepare(&self, s: &mut NeighborSampler, fanouts: &[i32], cfg: &SamplerConfig) -> flashgnn_sample::Result<()> {
        let Some(snap) = self.current() else { return Ok(()) };
        if snap.base.root() != s.root() {
            *s = NeighborSampler::open_dataset(&snap.base, fanouts, cfg)?;
        }
        s.set_snapshot(Some(snap))
    }
}

pub(crate) fn config(
    engine: &str,
    depth: usize,
    pool_threads: usize,
    labels: bool,
    features: bool,
) -> PyResult<SamplerConfig> {
    let kind = EngineKind::parse(engine).ok_or_else(|| {
        let names: Vec<&str> = EngineKind::ALL.iter().map(|k| k.name()).collect();
        InputError::new_err(format!("engine {engine:?}: expected one of {}", names.join(", ")))
    })?;
    Ok(SamplerConfig {
        engine: kind,
        io: EngineConfig { depth, pool_threads, ..Default::default() },
        labels,
        features,
        ..Default::default()
    })
}

fn batch_dict<'py>(py: Python<'py>, b: Batch) -> PyResult<Bound<'py, PyDict>> {
    let d = PyDict::new(py);
    d.set_item("batch_size", b.batch_size)?;
    d.set_item("n_id", b.n_id.into_pyarray(py))?;
    d.set_item("row", b.row.into_pyarray(py))?;
    d.set_item("col", b.col.into_pyarray(py))?;
    d.set_item("num_sampled_nodes", b.num_sampled_nodes.into_pyarray(py))?;
    d.set_item("num_sampled_edges", b.num_sampled_edges.into_pyarray(py))?;
    d.set_item("x", b.x.into_pyarray(py))?;
    d.set_item("y", b.y.into_pyarray(py))?;
    d.set_item("resident", b.resident.into_pyarray(py))?;
    d.set_item("missing", b.missing.into_pyarray(py))?;
    d.set_item("deg", b.deg.into_pyarray(py))?;
    Ok(d)
}

pub fn telemetry_json(t: &Telemetry) -> String {
    serde_json::json!({
        "batches": t.batches, "seeds": t.seeds, "nodes": t.nodes, "edges": t.edges,
        "reads": t.reads, "bytes_read": t.bytes_read, "bytes_used": t.bytes_used, "page_hits": t.page_hits,
        "cache_static_hits": t.cache_static_hits, "cache_dynamic_hits": t.cache_dynamic_hits,
        "cache_hit_rate": t.cache_hit_rate(),
        "seconds": t.seconds, "cpu_seconds": t.cpu_seconds,
        "read_amplification": t.read_amplification(),
        "iops": t.iops(),
        "read_mb_per_s": if t.seconds > 0.0 { t.bytes_read as f64 / t.seconds / 1e6 } else { 0.0 },
        "cpu_us_per_read": if t.reads > 0 { t.cpu_seconds * 1e6 / t.reads as f64 } else { 0.0 },
        "depth_hist": t.depth_hist.to_vec(),
        "size_hist": t.size_hist.to_vec(),
        "timeline": t.timeline,
    })
    .to_string()
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
    path: std::path::PathBuf,
    fanouts: Vec<i32>,
    cfg: SamplerConfig,
    snap: Snap,
}

impl Sampler {
    fn get(&self) -> PyResult<&Mutex<NeighborSampler>> {
        if self.owned.pid != std::process::id() {
            return Err(pyo3::exceptions::PyRuntimeError::new_err(
                "this flashgnn sampler was created in another process (fork); open a new one in this process",
            ));
        }
        Ok(&self.owned.inner)
    }
}

#[pymethods]
impl Sampler {
    #[new]
    #[pyo3(signature = (path, fanouts, engine="uring", depth=256, pool_threads=64, labels=true, features=true, cache=None, graph=None, resident=None, free_features_only=false, degrees=false))]
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
    ) -> PyResult<Self> {
        let mut cfg = config(engine, depth, pool_threads, labels, features)?;
        cfg.free_features_only = free_features_only;
        cfg.degrees = degrees;
        cfg.cache = cache.and_then(|c| c.usable());
        cfg.resident = resident.map(|r| r.inner.clone());
        let (p, f, c) = (path.clone(), fanouts.clone(), cfg.clone());
        let live = graph.map(|g| Snap::Live(g.inner.clone()));
        let (s, snap) = py
            .detach(move || -> Result<_, CoreError> {
                let snap = match live {
                    Some(l) => l,
                    None => Snap::for_path(&p)?,
                };
                let s = snap.open(&p, &f, &c)?;
                Ok((s, snap))
            })
            .map_err(PyErr::from)?;
        Ok(Sampler {
            owned: Owned { pid: std::process::id(), inner: ManuallyDrop::new(Mutex::new(s)) },
            path,
            fanouts,
            cfg,
            snap,
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

    /// Sample one mini-batch; returns a dict of numpy arrays (x as raw bytes).
    fn sample<'py>(
        &self,
        py: Python<'py>,
        seeds: PyReadonlyArray1<'py, i64>,
        seed: u64,
    ) -> PyResult<Bound<'py, PyDict>> {
        let seeds: Vec<i64> = seeds.as_array().iter().copied().collect();
        let m = self.get()?;
        let b = py
            .detach(|| {
                let mut s = m.lock().unwrap();
                self.snap.prepare(&mut s, &self.fanouts, &self.cfg)?;
                s.sample(&seeds, seed)
            })
            .map_err(sample_err)?;
        batch_dict(py, b)
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
        let roots: Vec<i64> = roots.as_array().iter().copied().collect();
        let m = self.get()?;
        let b = py
            .detach(|| {
                let mut s = m.lock().unwrap();
                self.snap.prepare(&mut s, &self.fanouts, &self.cfg)?;
                s.random_walk(&roots, walk_length, seed)
            })
            .map_err(sample_err)?;
        batch_dict(py, b)
    }

    /// Cumulative telemetry, or the last batch's alone with `last=True`.
    #[pyo3(signature = (last=false))]
    fn telemetry(&self, last: bool) -> PyResult<String> {
        let s = self.get()?.lock().unwrap();
        Ok(telemetry_json(if last { &s.last_batch } else { &s.telemetry }))
    }

    fn reset_telemetry(&self) -> PyResult<()> {
        self.get()?.lock().unwrap().telemetry = Telemetry::default();
        Ok(())
    }

    /// Background producers over `seed_order` in batches of `batch_size`,
    /// at most `prefetch` batches ahead; batch i uses seed `seed + i`.
    /// `workers` producer threads (each with its own sampler, ring and
    /// buffers) take batches round-robin, so one batch's tail overlaps the
    /// next one's head; batches still come out in order.
    #[pyo3(signature = (seed_order, batch_size, seed, prefetch=4, drop_last=false, workers=1))]
    fn iter_batches(
        &self,
        seed_order: PyReadonlyArray1<'_, i64>,
        batch_size: usize,
        seed: u64,
        prefetch: usize,
        drop_last: bool,
        workers: usize,
    ) -> PyResult<BatchIter> {
        if batch_size == 0 {
            return Err(InputError::new_err("batch_size must be > 0"));
        }
        let order: std::sync::Arc<Vec<i64>> = std::sync::Arc::new(seed_order.as_array().iter().copied().collect());
        let workers = workers.clamp(1, 16);
        let mut nbatches = order.len().div_ceil(batch_size);
        if drop_last {
            nbatches = order.len() / batch_size;
        }
        let per_worker = prefetch.max(1).div_ceil(workers);
        let mut rxs = Vec::new();
        let mut handles = Vec::new();
        for w in 0..workers {
            let (tx, rx) = sync_channel(per_worker);
            let (path, fanouts, cfg, order, snap) =
                (self.path.clone(), self.fanouts.clone(), self.cfg.clone(), order.clone(), self.snap.clone());
            handles.push(std::thread::spawn(move || {
                // Each producer owns its own sampler (its own ring and buffers).
                let mut s = match snap.open(&path, &fanouts, &cfg) {
                    Ok(s) => s,
                    Err(e) => {
                        let _ = tx.send(Err(e));
                        return Telemetry::default();
                    }
                };
                for i in (w..nbatches).step_by(workers) {
                    let chunk = &order[i * batch_size..((i + 1) * batch_size).min(order.len())];
                    let r =
                        snap.prepare(&mut s, &fanouts, &cfg).and_then(|_| s.sample(chunk, seed.wrapping_add(i as u64)));
                    let stop = r.is_err();
                    if tx.send(r).is_err() || stop {
                        break;
                    }
                }
                s.telemetry.clone()
            }));
            rxs.push(rx);
        }
        Ok(BatchIter {
            rx: Mutex::new(Some(rxs)),
            next: Mutex::new(0),
            total: nbatches,
            handle: Mutex::new(handles),
            telemetry: Mutex::new(None),
            pid: std::process::id(),
        })
    }
}

/// The cross-batch DRAM cache (`flashgnn_sample::cache`), built once and
/// shared by every sampler and producer given it. Process-local: in a forked
/// child it is not used (its lock may have been held at fork time); samplers
/// there run uncached, with identical batches.
#[pyclass(module = "flashgnn._core")]
pub struct Cache {
    inner: std::sync::Arc<PageCache>,
    pid: u32,
    hot: String,
    hot_seconds: f64,
}

impl Cache {
    fn usable(&self) -> Option<std::sync::Arc<PageCache>> {
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
    #[pyo3(signature = (path, fanouts, budget, policy="s3fifo", hot="degree", hot_fraction=0.9, presample_seeds=None, batch_size=1024, engine="uring", depth=256))]
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
    ) -> PyResult<Self> {
        let pol = Policy::parse(policy)
            .ok_or_else(|| InputError::new_err(format!("cache policy {policy:?}: expected s3fifo or clock")))?;
        if !(0.0..=1.0).contains(&hot_fraction) {
            return Err(InputError::new_err(format!("hot_fraction {hot_fraction}: expected a value in [0, 1]")));
        }
        let seeds: Vec<i64> = presample_seeds.map(|a| a.as_array().iter().copied().collect()).unwrap_or_default();
        if hot == "presample" && (seeds.is_empty() || batch_size == 0) {
            return Err(InputError::new_err("hot=\"presample\" needs presample_seeds and batch_size > 0"));
        }
        if !["degree", "presample", "none"].contains(&hot) {
            return Err(InputError::new_err(format!("hot {hot:?}: expected degree, presample or none")));
        }
        let cfg = config(engine, depth, 64, false, true)?;
        let static_budget = (budget as f64 * hot_fraction) as usize;
        let hot_s = hot.to_string();
        let t = std::time::Instant::now();
        let (id, statics) = py
            .detach(move || -> Result<_, CoreError> {
                // Build on what a sampler given this path reads: on a mutated
                // dataset, the base of the generation `mut/CURRENT` names. The
                // cache is bound to that base (DatasetId); samplers on any other
                // generation run without it.
                let snap = Snap::for_path(&path)?;
                if hot_s == "none" || static_budget == 0 {
                    let id = match snap.current() {
                        Some(s) => DatasetId::of(&s.base)?,
                        None => DatasetId::of_path(&path)?,
                    };
                    return Ok((id, flashgnn_sample::StaticSet::default()));
                }
                let mut s = snap.open(&path, &fanouts, &cfg)?;
                let id = s.dataset_id().clone();
                let statics = if hot_s == "degree" {
                    s.hot_set_by_degree(static_budget)?
                } else {
                    let batches: Vec<(Vec<i64>, u64)> = seeds
                        .chunks(batch_size)
                        .enumerate()
                        .map(|(i, c)| (c.to_vec(), 0x5EED_0000 + i as u64))
                        .collect();
                    s.hot_set_by_access(&batches, static_budget)?
                };
                Ok((id, statics))
            })
            .map_err(PyErr::from)?;
        // The choosing pass freed its scan buffers and sampler; hand that
        // memory back to the OS so it does not count against a memory cap.
        // SAFETY: malloc_trim only releases free heap pages.
        unsafe { libc::malloc_trim(0) };
        Ok(Cache {
            inner: std::sync::Arc::new(PageCache::new(id, budget, pol, statics)),
            pid: std::process::id(),
            hot: hot.to_string(),
            hot_seconds: t.elapsed().as_secs_f64(),
        })
    }

    /// Sizes and cumulative counters, as a JSON string.
    fn stats(&self) -> String {
        use std::sync::atomic::Ordering::Relaxed;
        let c = &self.inner;
        let st = &c.stats;
        serde_json::json!({
            "budget": c.budget(), "policy": c.policy().name(), "hot": self.hot,
            "hot_seconds": self.hot_seconds,
            "static_bytes": c.static_bytes(), "static_entries": c.static_entries(), "static_dense": c.static_dense(),
            "dynamic_bytes": c.dynamic_bytes(),
            "static_hits": st.static_hits.load(Relaxed), "dynamic_hits": st.dynamic_hits.load(Relaxed),
            "misses": st.misses.load(Relaxed), "inserts": st.inserts.load(Relaxed),
            "evictions": st.evictions.load(Relaxed),
        })
        .to_string()
    }
}

/// The device tier's resident set (`flashgnn_sample::resident`): the
/// `count` highest-degree nodes of the dataset a sampler given `path` reads
/// (the current generation's base on a mutated dataset); row r of the device
/// table is `nodes()[r]`. Plain data (no ring, no lock): safe after fork.
#[pyclass(module = "flashgnn._core")]
pub struct Resident {
    inner: std::sync::Arc<flashgnn_sample::Resident>,
    nodes: Vec<i64>,
    degrees: Vec<i64>,
}

#[pymethods]
impl Resident {
    #[new]
    #[pyo3(signature = (path, count, engine="uring", depth=256))]
    fn new(py: Python<'_>, path: std::path::PathBuf, count: usize, engine: &str, depth: usize) -> PyResult<Self> {
        let cfg = config(engine, depth, 64, false, false)?;
        let (id, top, originals) = py
            .detach(move || -> Result<_, CoreError> {
                let mut s = Snap::for_path(&path)?.open(&path, &[], &cfg)?;
                let top = s.top_nodes_by_degree(count)?;
                let originals: Vec<i64> = top.iter().map(|&(v, _)| s.original_of(v) as i64).collect();
                Ok((s.dataset_id().clone(), top, originals))
            })
            .map_err(PyErr::from)?;
        let internal: Vec<u32> = top.iter().map(|&(v, _)| v).collect();
        Ok(Resident {
            inner: std::sync::Arc::new(flashgnn_sample::Resident::new(id, &internal)),
            nodes: originals,
            degrees: top.iter().map(|&(_, d)| d as i64).collect(),
        })
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

#[pyclass(module = "flashgnn._core")]
pub struct BatchIter {
    rx: Mutex<Option<Vec<Receiver<flashgnn_sample::Result<Batch>>>>>,
    next: Mutex<usize>,
    total: usize,
    handle: Mutex<Vec<std::thread::JoinHandle<Telemetry>>>,
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
            return Err(pyo3::exceptions::PyRuntimeError::new_err(
                "batch iterator crossed a fork; create it in this process",
            ));
        }
        let i = *self.next.lock().unwrap();
        let rxs = self.rx.lock().unwrap().take();
        let got = match rxs {
            Some(rxs) if i < self.total => {
                let (rxs, got) = py.detach(move || {
                    let got = rxs[i % rxs.len()].recv().ok();
                    (rxs, got)
                });
                *self.rx.lock().unwrap() = Some(rxs);
                got
            }
            other => {
                *self.rx.lock().unwrap() = other;
                None
            }
        };
        match got {
            Some(Ok(b)) => {
                *self.next.lock().unwrap() = i + 1;
                Ok(Some(batch_dict(py, b)?))
            }
            Some(Err(e)) => {
                self.finish(py);
                Err(sample_err(e))
            }
            None => {
                self.finish(py);
                Ok(None)
            }
        }
    }
    /// Telemetry of the producers (available once the iterator is exhausted).
    fn telemetry(&self) -> Option<String> {
        self.telemetry.lock().unwrap().as_ref().map(telemetry_json)
    }
    /// Stop the producers early.
    fn close(&self, py: Python<'_>) {
        self.finish(py);
    }
}

impl BatchIter {
    fn finish(&self, py: Python<'_>) {
        self.rx.lock().unwrap().take(); // producers' sends fail -> they stop
        let handles: Vec<_> = self.handle.lock().unwrap().drain(..).collect();
        if handles.is_empty() {
            return;
        }
        let joined: Vec<Telemetry> = py.detach(move || handles.into_iter().filter_map(|h| h.join().ok()).collect());
        let mut t = Telemetry::default();
        for x in &joined {
            t.add(x);
        }
        *self.telemetry.lock().unwrap() = Some(t);
    }
}

impl Drop for BatchIter {
    fn drop(&mut self) {
        if self.pid != std::process::id() {
            // Forked child: the producer threads do not exist here.
            std::mem::forget(std::mem::take(self.handle.get_mut().unwrap()));
            std::mem::forget(self.rx.get_mut().unwrap().take());
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
    let kind = EngineKind::parse(engine).ok_or_else(|| InputError::new_err(format!("unknown engine {engine:?}")))?;
    py.detach(move || flashgnn_sample::probe::random_reads(&path, kind, len, depth, seconds))
        .map_err(|e| crate::error::store_err(flashgnn_store::StoreError::Io(e)))
}
