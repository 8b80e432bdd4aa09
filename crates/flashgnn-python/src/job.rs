//! Background jobs (build, generate, verify, and the mutable store's
//! compaction and update_graph) with progress and cancellation.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use pyo3::prelude::*;
use pyo3::types::PyDict;

use flashgnn_build::{BuildError, BuildOptions, FeatureLayout, InputFormat, NanPolicy, Progress, Reorder, SelfLoops};
use flashgnn_datagen::RmatOptions;
use flashgnn_format::Dtype;

use crate::error::{build_err, InputError};

/// A job's failure: an importer/store error or a mutable-store error, each
/// mapped to Python the way its own calls map it.
pub enum JobError {
    Build(BuildError),
    Mut(flashgnn_mutate::MutError),
}

impl From<BuildError> for JobError {
    fn from(e: BuildError) -> Self {
        JobError::Build(e)
    }
}
impl From<flashgnn_store::StoreError> for JobError {
    fn from(e: flashgnn_store::StoreError) -> Self {
        JobError::Build(e.into())
    }
}
impl From<flashgnn_mutate::MutError> for JobError {
    fn from(e: flashgnn_mutate::MutError) -> Self {
        JobError::Mut(e)
    }
}

type Outcome = Result<String, JobError>;

#[pyclass(module = "flashgnn._core")]
pub struct Job {
    progress: Arc<Progress>,
    result: Arc<Mutex<Option<Outcome>>>,
    handle: Mutex<Option<JoinHandle<()>>>,
}

impl Job {
    pub(crate) fn spawn(f: impl FnOnce(&Progress) -> Outcome + Send + 'static) -> Job {
        let progress = Arc::new(Progress::new());
        let result = Arc::new(Mutex::new(None));
        let (p, r) = (progress.clone(), result.clone());
        let handle = std::thread::spawn(move || {
            let out = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| f(&p))).unwrap_or_else(|_| {
                Err(BuildError::config("internal error: the job panicked; nothing was published").into())
            });
            *r.lock().unwrap() = Some(out);
        });
        Job { progress, result, handle: Mutex::new(Some(handle)) }
    }
}

#[pymethods]
impl Job {
    /// [(name, unit, done, total, finished)] for every task started so far.
    fn poll(&self) -> Vec<(String, String, u64, u64, bool)> {
        self.progress.snapshot().into_iter().map(|t| (t.name, t.unit, t.done, t.total, t.finished)).collect()
    }
    fn is_done(&self) -> bool {
        self.result.lock().unwrap().is_some()
    }
    fn cancel(&self) {
        self.progress.cancel();
    }
    /// Wait up to `timeout` seconds; returns True when finished. A shared
    /// borrow: another thread may `poll` or `cancel` meanwhile (the
    /// server's background scrubber does).
    fn wait(&self, py: Python<'_>, timeout: f64) -> bool {
        let r = self.result.clone();
        py.detach(move || {
            let end = std::time::Instant::now() + std::time::Duration::from_secs_f64(timeout.max(0.0));
            while r.lock().unwrap().is_none() && std::time::Instant::now() < end {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
        });
        self.is_done()
    }
    /// The job's JSON report, or its error raised as an exception. A shared
    /// borrow too, so a `poll` from another thread never meets a borrow error.
    fn result(&self, py: Python<'_>) -> PyResult<String> {
        let handle = self.handle.lock().unwrap().take();
        if let Some(h) = handle {
            py.detach(move || {
                let _ = h.join();
            });
        }
        match self.result.lock().unwrap().take() {
            Some(Ok(s)) => Ok(s),
            Some(Err(JobError::Build(e))) => Err(build_err(e)),
            Some(Err(JobError::Mut(e))) => Err(crate::graph::mut_err(e)),
            None => Err(InputError::new_err("job result already taken")),
        }
    }
}

/// A binding entry point's keyword options. Every lookup records its key;
/// `finish` then refuses any key nobody looked up, naming it and the accepted
/// ones, so `flashgnn.build(IN, OUT, symetrize=True)` is an error instead of
/// a build without symmetrising. The accepted list is the set of lookups, so
/// it cannot drift from the options the entry point really reads.
struct Opts<'a, 'py> {
    dict: &'a Bound<'py, PyDict>,
    what: &'static str,
    seen: Vec<&'static str>,
}

impl<'a, 'py> Opts<'a, 'py> {
    fn new(dict: &'a Bound<'py, PyDict>, what: &'static str) -> Self {
        Opts { dict, what, seen: Vec::new() }
    }

    fn get<T: FromPyObjectOwned<'py>>(&mut self, key: &'static str) -> PyResult<Option<T>> {
        self.seen.push(key);
        match self.dict.get_item(key)? {
            Some(v) if !v.is_none() => Ok(Some(v.extract::<T>().map_err(|e| {
                let e: PyErr = e.into();
                InputError::new_err(format!("option {key}: {e}"))
            })?)),
            _ => Ok(None),
        }
    }

    /// Refuse every key that was not looked up.
    fn finish(self) -> PyResult<()> {
        let mut unknown = Vec::new();
        for k in self.dict.keys() {
            let k: String =
                k.extract().map_err(|_| InputError::new_err(format!("{}: option names must be strings", self.what)))?;
            if !self.seen.contains(&k.as_str()) {
                unknown.push(k);
            }
        }
        if unknown.is_empty() {
            return Ok(());
        }
        unknown.sort();
        let mut accepted = self.seen.clone();
        accepted.sort_unstable();
        Err(InputError::new_err(format!(
            "{}: unknown option{} {}; accepted: {}",
            self.what,
            if unknown.len() == 1 { "" } else { "s" },
            unknown.iter().map(|k| format!("{k:?}")).collect::<Vec<_>>().join(", "),
            accepted.join(", ")
        )))
    }
}

fn dtype(name: &str, what: &str) -> PyResult<Dtype> {
    Dtype::parse(name).ok_or_else(|| InputError::new_err(format!("{what}: unknown dtype {name:?}")))
}

/// Start a build. `opts` keys mirror the `flashgnn build` flags.
#[pyfunction]
pub fn start_build(input: std::path::PathBuf, output: std::path::PathBuf, opts: &Bound<'_, PyDict>) -> PyResult<Job> {
    let mut opts = Opts::new(opts, "build");
    let mut o = BuildOptions::new(input, output);
    if let Some(f) = opts.get::<String>("format")? {
        o.format = match f.as_str() {
            "auto" => InputFormat::Auto,
            "npy" => InputFormat::Npy,
            "igb" => InputFormat::Igb,
            "ogb" => InputFormat::Ogb,
            "snap" | "text" => InputFormat::Snap,
            x => return Err(InputError::new_err(format!("--format {x:?}: expected auto, npy, igb, ogb or snap"))),
        };
    }
    o.symmetrize = opts.get("symmetrize")?.unwrap_or(false);
    o.dedup = opts.get("dedup")?.unwrap_or(false);
    if let Some(s) = opts.get::<String>("self_loops")? {
        o.self_loops = match s.as_str() {
            "keep" => SelfLoops::Keep,
            "drop" => SelfLoops::Drop,
            "add" => SelfLoops::Add,
            x => return Err(InputError::new_err(format!("--self-loops {x:?}: expected keep, drop or add"))),
        };
    }
    if let Some(s) = opts.get::<String>("feature_dtype")? {
        o.feature_dtype = Some(dtype(&s, "--feature-dtype")?);
    }
    if let Some(s) = opts.get::<String>("feature_layout")? {
        o.feature_layout = match s.as_str() {
            "auto" => FeatureLayout::Auto,
            "inline" => FeatureLayout::Inline,
            "separate" => FeatureLayout::Separate,
            x => return Err(InputError::new_err(format!("--feature-layout {x:?}: expected auto, inline or separate"))),
        };
    }
    if let Some(s) = opts.get::<String>("reorder")? {
        o.reorder = match s.as_str() {
            "none" => Reorder::None,
            "degree" => Reorder::Degree,
            x => return Err(InputError::new_err(format!("--reorder {x:?}: expected none or degree"))),
        };
    }
    if let Some(p) = opts.get("page_size")? {
        o.page_size = p;
    }
    if let Some(b) = opts.get("memory_budget")? {
        o.memory_budget = b;
    }
    o.num_nodes = opts.get("num_nodes")?;
    o.num_classes = opts.get("num_classes")?;
    o.feat_shape = opts.get("feat_shape")?;
    if let Some(s) = opts.get::<String>("feat_dtype")? {
        o.feat_dtype = Some(dtype(&s, "--feat-dtype")?);
    }
    o.synthetic_features = opts.get("synthetic_features")?;
    o.labels = opts.get::<std::path::PathBuf>("labels")?;
    o.features = opts.get::<std::path::PathBuf>("features")?;
    o.make_splits = opts.get("make_splits")?;
    if let Some(s) = opts.get("igb_classes")? {
        o.igb_classes = s;
    }
    o.ogb_split = opts.get("ogb_split")?;
    o.skip_bad_lines = opts.get("skip_bad_lines")?.unwrap_or(false);
    if let Some(s) = opts.get::<String>("nan")? {
        o.nan = match s.as_str() {
            "error" => NanPolicy::Error,
            "zero" => NanPolicy::Zero,
            x => return Err(InputError::new_err(format!("--nan {x:?}: expected error or zero"))),
        };
    }
    o.seed = opts.get("seed")?.unwrap_or(0);
    o.force = opts.get("force")?.unwrap_or(false);
    o.dataset_id = opts.get("dataset_id")?;
    opts.finish()?;
    Ok(Job::spawn(move |p| {
        let r = flashgnn_build::build(&o, p)?;
        Ok(serde_json::json!({
            "output": r.output.display().to_string(),
            "manifest": serde_json::from_str::<serde_json::Value>(&r.manifest.to_json()).unwrap_or_default(),
            "skipped_lines": r.skipped_lines,
            "skipped_examples": r.skipped_examples,
            "nan_replaced": r.nan_replaced,
            "removed_stale": r.removed_stale,
            "notes": r.notes,
        })
        .to_string())
    }))
}

#[pyfunction]
pub fn start_generate(output: std::path::PathBuf, opts: &Bound<'_, PyDict>) -> PyResult<Job> {
    let mut opts = Opts::new(opts, "generate");
    let mut o = RmatOptions::default();
    if let Some(v) = opts.get("scale")? {
        o.scale = v;
    }
    if let Some(v) = opts.get("edge_factor")? {
        o.edge_factor = v;
    }
    if let Some(v) = opts.get("dim")? {
        o.dim = v;
    }
    if let Some(s) = opts.get::<String>("dtype")? {
        o.dtype = dtype(&s, "--dtype")?;
    }
    if let Some(s) = opts.get::<String>("edge_dtype")? {
        o.edge_dtype = dtype(&s, "--edge-dtype")?;
    }
    if let Some(v) = opts.get("classes")? {
        o.classes = v;
    }
    if let Some(v) = opts.get("seed")? {
        o.seed = v;
    }
    if let Some(v) = opts.get("homophily")? {
        o.homophily = v;
    }
    if let Some(v) = opts.get("feature_signal")? {
        o.feature_signal = v;
    }
    if let Some(v) = opts.get("split")? {
        o.split = v;
    }
    o.force = opts.get("force")?.unwrap_or(false);
    opts.finish()?;
    Ok(Job::spawn(move |p| {
        let r = flashgnn_datagen::generate_rmat(&output, &o, p)?;
        Ok(serde_json::json!({
            "output": r.output.display().to_string(),
            "num_nodes": r.num_nodes,
            "num_edges": r.num_edges,
            "bytes": r.bytes,
            "seconds": r.seconds,
        })
        .to_string())
    }))
}

#[pyfunction]
pub fn start_verify(path: std::path::PathBuf) -> PyResult<Job> {
    Ok(Job::spawn(move |p| {
        let ds = flashgnn_store::Dataset::open(&path)?;
        let mut task = p.task("verify", "B", 0);
        let mut last = 0;
        let rep = flashgnn_store::verify(&ds, &mut |done, total| {
            task.set_total(total);
            task.add(done - last);
            last = done;
        })?;
        task.finish();
        Ok(serde_json::json!({
            "files": rep.files,
            "bytes": rep.bytes,
            "slots": rep.slots,
            "overflow_pages": rep.overflow_pages,
            "feature_rows": rep.feature_rows,
        })
        .to_string())
    }))
}

/// Start a scrub (`flashgnn scrub`): `opts` keys `rate` (bytes/s, 0 =
/// unlimited), `state` (directory of progress.json), `resume` (bool),
/// `extra_files` ([(name, path)]). Cancelling stops it at a chunk boundary
/// with its progress saved; the report then has `complete: false`.
#[pyfunction]
pub fn start_scrub(path: std::path::PathBuf, opts: &Bound<'_, PyDict>) -> PyResult<Job> {
    let mut opts = Opts::new(opts, "scrub");
    let mut o = flashgnn_store::ScrubOptions::new(&path);
    if let Some(r) = opts.get::<u64>("rate")? {
        o.rate_bytes_per_s = r;
    }
    if let Some(s) = opts.get::<std::path::PathBuf>("state")? {
        o.state_dir = s;
    }
    if let Some(r) = opts.get::<bool>("resume")? {
        o.resume = r;
    }
    if let Some(x) = opts.get::<Vec<(String, std::path::PathBuf)>>("extra_files")? {
        o.extra_files = x;
    }
    if let Some(b) = opts.get::<u64>("checkpoint_bytes")? {
        o.checkpoint_bytes = b;
    }
    opts.finish()?;
    Ok(Job::spawn(move |p| {
        let mut task = p.task("scrub", "B", 0);
        let mut last = 0;
        let rep = flashgnn_store::scrub(&path, &o, &mut |done, total| {
            task.set_total(total);
            task.add(done.saturating_sub(last));
            last = done;
            !p.is_cancelled()
        })?;
        task.finish();
        Ok(rep.to_json().to_string())
    }))
}
