//! Background jobs (build, generate, verify, and the mutable store's
//! compaction and update_graph) with progress and cancellation.

use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use pyo3::prelude::*;
use pyo3::types::PyDict;
use pyo3::IntoPyObjectExt;

use flashgnn_build::{BuildError, BuildOptions, OptionDefault, Progress};
use flashgnn_datagen::{IgbhOptions, RmatOptions, Venues};
use flashgnn_format::Dtype;

use crate::error::{py_err, CoreError};
use crate::report::to_py;

/// A job's outcome: its report, or an error of whichever crate failed,
/// mapped to Python the way its own calls map it.
type Outcome = Result<serde_json::Value, CoreError>;

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
    /// The job's report, or its error raised as an exception. A shared
    /// borrow too, so a `poll` from another thread never meets a borrow error.
    fn result(&self, py: Python<'_>) -> PyResult<Py<PyAny>> {
        let handle = self.handle.lock().unwrap().take();
        if let Some(h) = handle {
            py.detach(move || {
                let _ = h.join();
            });
        }
        match self.result.lock().unwrap().take() {
            Some(Ok(r)) => to_py(py, &r),
            Some(Err(e)) => Err(py_err(e)),
            None => Err(py_err(CoreError::Input("job result already taken".into()))),
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

/// The bounds of the integer type an option converts to, by its name.
fn int_bounds(ty: &str) -> Option<(i128, i128)> {
    Some(match ty {
        "u8" => (0, u8::MAX as i128),
        "u16" => (0, u16::MAX as i128),
        "u32" => (0, u32::MAX as i128),
        "u64" => (0, u64::MAX as i128),
        "usize" => (0, usize::MAX as i128),
        "i32" => (i32::MIN as i128, i32::MAX as i128),
        "i64" => (i64::MIN as i128, i64::MAX as i128),
        _ => return None,
    })
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
                // An integer of the wrong range (`scale=-3`) names the value
                // and the bound, not pyo3's "out of range integral type
                // conversion attempted".
                if let Ok(i) = v.extract::<i128>() {
                    if let Some((lo, hi)) = int_bounds(std::any::type_name::<T>()) {
                        return py_err(CoreError::Input(format!(
                            "option {key}: {i} is out of range: expected an integer in {lo}..={hi}"
                        )));
                    }
                }
                py_err(CoreError::Input(format!("option {key}: {e}")))
            })?)),
            _ => Ok(None),
        }
    }

    /// Refuse every key that was not looked up.
    fn finish(self) -> PyResult<()> {
        let mut unknown = Vec::new();
        for k in self.dict.keys() {
            let k: String = k
                .extract()
                .map_err(|_| py_err(CoreError::Input(format!("{}: option names must be strings", self.what))))?;
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
        Err(py_err(CoreError::Input(format!(
            "{}: unknown option{} {}; accepted: {}",
            self.what,
            if unknown.len() == 1 { "" } else { "s" },
            unknown.iter().map(|k| format!("{k:?}")).collect::<Vec<_>>().join(", "),
            accepted.join(", ")
        ))))
    }
}

fn dtype(name: &str, what: &str) -> PyResult<Dtype> {
    flashgnn_build::parse_dtype(name, what).map_err(py_err)
}

/// `_core.BUILD_OPTIONS`: one dict per [`flashgnn_build::BUILD_OPTIONS`]
/// entry with `name`, `flag`, `kind`, `default`, `choices` and `help`.
pub fn build_options_py<'py>(py: Python<'py>) -> PyResult<Bound<'py, pyo3::types::PyTuple>> {
    let mut out = Vec::new();
    for o in flashgnn_build::BUILD_OPTIONS {
        let default: Py<PyAny> = match o.default_value() {
            OptionDefault::None => py.None(),
            OptionDefault::Bool(b) => b.into_py_any(py)?,
            OptionDefault::Int(i) => i.into_py_any(py)?,
            OptionDefault::Str(s) => s.into_py_any(py)?,
        };
        let e = PyDict::new(py);
        e.set_item("name", o.name)?;
        e.set_item("flag", o.flag())?;
        e.set_item("kind", o.kind.name())?;
        e.set_item("default", default)?;
        e.set_item("choices", pyo3::types::PyTuple::new(py, o.choices())?)?;
        e.set_item("help", o.help)?;
        out.push(e);
    }
    pyo3::types::PyTuple::new(py, out)
}

/// Start a build. `opts` keys are [`flashgnn_build::BUILD_OPTIONS`]' names
/// (the `flashgnn build` flags); any other key is refused, naming it and the
/// accepted ones.
#[pyfunction]
pub fn start_build(input: std::path::PathBuf, output: std::path::PathBuf, opts: &Bound<'_, PyDict>) -> PyResult<Job> {
    let mut opts = Opts::new(opts, "build");
    let mut o = BuildOptions::new(input, output);
    if let Some(s) = opts.get::<String>("format")? {
        o.set_choice("format", &s).map_err(py_err)?;
    }
    if let Some(v) = opts.get("add_reverse")? {
        o.add_reverse = v;
    }
    if let Some(v) = opts.get("symmetrize")? {
        o.symmetrize = v;
    }
    if let Some(v) = opts.get("no_edge_ids")? {
        o.no_edge_ids = v;
    }
    if let Some(v) = opts.get("dedup")? {
        o.dedup = v;
    }
    if let Some(s) = opts.get::<String>("self_loops")? {
        o.set_choice("self_loops", &s).map_err(py_err)?;
    }
    if let Some(s) = opts.get::<String>("feature_dtype")? {
        o.set_choice("feature_dtype", &s).map_err(py_err)?;
    }
    if let Some(s) = opts.get::<String>("feature_layout")? {
        o.set_choice("feature_layout", &s).map_err(py_err)?;
    }
    if let Some(s) = opts.get::<String>("reorder")? {
        o.set_choice("reorder", &s).map_err(py_err)?;
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
        o.set_choice("feat_dtype", &s).map_err(py_err)?;
    }
    o.synthetic_features = opts.get("synthetic_features")?;
    o.labels = opts.get::<std::path::PathBuf>("labels")?;
    o.features = opts.get::<std::path::PathBuf>("features")?;
    o.make_splits = opts.get("make_splits")?;
    if let Some(s) = opts.get::<String>("igb_classes")? {
        o.set_choice("igb_classes", &s).map_err(py_err)?;
    }
    o.ogb_split = opts.get("ogb_split")?;
    if let Some(v) = opts.get("skip_bad_lines")? {
        o.skip_bad_lines = v;
    }
    if let Some(s) = opts.get::<String>("nan")? {
        o.set_choice("nan", &s).map_err(py_err)?;
    }
    if let Some(s) = opts.get::<String>("verify")? {
        o.set_choice("verify", &s).map_err(py_err)?;
    }
    if let Some(v) = opts.get("seed")? {
        o.seed = v;
    }
    if let Some(v) = opts.get("force")? {
        o.force = v;
    }
    o.dataset_id = opts.get("dataset_id")?;
    o.link_split = opts.get("link_split")?;
    o.disjoint_train_ratio = opts.get("disjoint_train_ratio")?;
    if let Some(k) = opts.get("neg_per_pos")? {
        o.neg_per_pos = k;
    }
    o.link_split_seed = opts.get("link_split_seed")?;
    o.link_split_files = opts.get::<std::path::PathBuf>("link_split_files")?;
    o.link_edge_type = opts.get("link_edge_type")?;
    opts.finish()?;
    Ok(Job::spawn(move |p| Ok(flashgnn_build::build(&o, p)?.report())))
}

/// `_core.GENERATE_DEFAULTS`: what `start_generate` uses for each option it
/// reads when the key is absent (`RmatOptions::default`), by option name;
/// dtypes by name, `split` as a (train, val, test) tuple.
pub fn generate_defaults_py(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = RmatOptions::default();
    let o = PyDict::new(py);
    o.set_item("scale", d.scale)?;
    o.set_item("edge_factor", d.edge_factor)?;
    o.set_item("dim", d.dim)?;
    o.set_item("dtype", d.dtype.name())?;
    o.set_item("edge_dtype", d.edge_dtype.name())?;
    o.set_item("classes", d.classes)?;
    o.set_item("seed", d.seed)?;
    o.set_item("homophily", d.homophily)?;
    o.set_item("feature_signal", d.feature_signal)?;
    o.set_item("split", d.split)?;
    o.set_item("force", d.force)?;
    Ok(o)
}

/// `_core.GENERATE_IGBH_DEFAULTS`: what `start_generate` uses with
/// `model="igbh"` for each option it reads when the key is absent
/// (`IgbhOptions::default`); `scale` is the number of papers.
pub fn generate_igbh_defaults_py(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let d = IgbhOptions::default();
    let o = PyDict::new(py);
    o.set_item("scale", d.papers)?;
    o.set_item("feature_dim", d.dim)?;
    o.set_item("dtype", d.dtype.name())?;
    o.set_item("edge_dtype", d.edge_dtype.name())?;
    o.set_item("classes", d.classes)?;
    o.set_item("seed", d.seed)?;
    o.set_item("homophily", d.homophily)?;
    o.set_item("feature_signal", d.feature_signal)?;
    o.set_item("labeled", d.labeled)?;
    o.set_item("split", d.split)?;
    o.set_item("venues", d.venues.name())?;
    o.set_item("force", d.force)?;
    Ok(o)
}

/// `_core.IGBH_SIZES`: IGBH's size names -> their paper counts (the values
/// `flashgnn generate igbh --scale` accepts by name).
pub fn igbh_sizes_py(py: Python<'_>) -> PyResult<Bound<'_, PyDict>> {
    let o = PyDict::new(py);
    for s in flashgnn_datagen::IGBH_SIZES {
        o.set_item(s.name, s.nodes[0])?;
    }
    Ok(o)
}

/// Start a generator. `opts["model"]` picks it: `"rmat"` (the default; the
/// keys of `GENERATE_DEFAULTS`) or `"igbh"` (the keys of
/// `GENERATE_IGBH_DEFAULTS`); any other key is refused, naming the accepted.
#[pyfunction]
pub fn start_generate(output: std::path::PathBuf, opts: &Bound<'_, PyDict>) -> PyResult<Job> {
    let model = match opts.get_item("model")? {
        Some(v) if !v.is_none() => v
            .extract::<String>()
            .map_err(|_| py_err(CoreError::Input("generate: option model must be a string".into())))?,
        _ => "rmat".to_string(),
    };
    match model.as_str() {
        "rmat" => start_generate_rmat(output, opts),
        "igbh" => start_generate_igbh(output, opts),
        other => Err(py_err(CoreError::Input(format!("generate: model {other:?} must be \"rmat\" or \"igbh\"")))),
    }
}

/// Each `"key" => field`: the option, when given, into `o.field` (the generators' plain options).
macro_rules! take {
    ($opts:ident, $o:ident; $($key:literal => $field:ident),* $(,)?) => {
        $(if let Some(v) = $opts.get($key)? {
            $o.$field = v;
        })*
    };
}

fn start_generate_igbh(output: std::path::PathBuf, opts: &Bound<'_, PyDict>) -> PyResult<Job> {
    let mut opts = Opts::new(opts, "generate igbh");
    let _: Option<String> = opts.get("model")?;
    let mut o = IgbhOptions::default();
    take!(opts, o; "scale" => papers, "feature_dim" => dim, "classes" => classes, "seed" => seed,
        "homophily" => homophily, "feature_signal" => feature_signal, "labeled" => labeled, "split" => split);
    if let Some(s) = opts.get::<String>("dtype")? {
        o.dtype = dtype(&s, "--dtype")?;
    }
    if let Some(s) = opts.get::<String>("edge_dtype")? {
        o.edge_dtype = dtype(&s, "--edge-dtype")?;
    }
    if let Some(s) = opts.get::<String>("venues")? {
        o.venues = Venues::parse(&s).map_err(py_err)?;
    }
    o.force = opts.get("force")?.unwrap_or(false);
    opts.finish()?;
    Ok(Job::spawn(move |p| Ok(flashgnn_datagen::generate_igbh(&output, &o, p)?.report())))
}

fn start_generate_rmat(output: std::path::PathBuf, opts: &Bound<'_, PyDict>) -> PyResult<Job> {
    let mut opts = Opts::new(opts, "generate");
    let _: Option<String> = opts.get("model")?;
    let mut o = RmatOptions::default();
    take!(opts, o; "scale" => scale, "edge_factor" => edge_factor, "dim" => dim, "classes" => classes,
        "seed" => seed, "homophily" => homophily, "feature_signal" => feature_signal, "split" => split);
    if let Some(s) = opts.get::<String>("dtype")? {
        o.dtype = dtype(&s, "--dtype")?;
    }
    if let Some(s) = opts.get::<String>("edge_dtype")? {
        o.edge_dtype = dtype(&s, "--edge-dtype")?;
    }
    o.force = opts.get("force")?.unwrap_or(false);
    opts.finish()?;
    Ok(Job::spawn(move |p| Ok(flashgnn_datagen::generate_rmat(&output, &o, p)?.report())))
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
        Ok(rep.report())
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
        Ok(rep.to_json())
    }))
}
