//! The build pipeline (see the crate docs for the picture): [`build`]
//! checks the request and owns the temporary directory; `build_into` runs
//! the phases, each in its module:
//!
//! - `plan`: node count, feature placement, sort chunk from the budget;
//! - `edges` (with `stream`): parse, check, sort, count degrees;
//! - `side` (with `features`, `labels`): feature rows, labels, splits, on
//!   a second thread overlapping the edges when the node count is known;
//! - `layout`: relabelling, the inline cap, slots and overflow pages;
//! - `publish`: manifest, verify, the rename that makes it visible.
//!
//! Memory sketch (TigerBeetle-style, numbers for the 2 GiB default budget):
//! - per node: 4 B degree (16 B with `--reorder`: degree, both relabelling
//!   maps and the permuted degrees), charged against the budget before the
//!   sort chunk is sized when the node count is known up front (for SNAP
//!   input it is not: the degree array then comes on top, 4 B/node + 1 bit);
//! - [`FIXED_OVERHEAD_BYTES`] = 64 MiB for I/O buffers (merge readers up to
//!   32 MiB: 64 runs x 256 KiB bytes + 256 KiB decoded; write buffers 1 MiB
//!   each; feature staging chunks 2 x 8 MiB; degree histogram 512 KiB);
//! - the rest is the external-sort chunk (8 B per directed edge entry).
//!
//! So an input with 10^8 nodes and 10^9 edges under 2 GiB sorts in
//! (2 GiB − 64 MiB − 400 MB) / 8 B ≈ 210 M-entry chunks: 5 runs (10 with
//! `--symmetrize`, which doubles the entries).

use std::path::{Path, PathBuf};
use std::time::Instant;

use flashgnn_format::manifest::Manifest;
use flashgnn_io::{check_not_input, check_output, create_tmp_dir_on};

use crate::options::BuildOptions;
use crate::progress::Progress;
use crate::source::detect::open_inputs;
use crate::source::EdgeSource;
use crate::{BuildError, Result};

mod edges;
mod features;
mod labels;
mod layout;
mod linksplit;
mod plan;
mod publish;
mod side;
mod stream;
mod typed;
mod typedsplit;

use edges::{preprocess_edges, EdgeResult};
use plan::FeaturePlan;
use publish::TmpGuard;
use side::{side_work, SideLater, SideParams};

pub use labels::class_split_sizes;
pub use publish::report_stale_tmps;

/// Memory reserved for I/O buffers outside the sort chunk (see module docs).
pub const FIXED_OVERHEAD_BYTES: u64 = 64 << 20;
/// Smallest sort chunk worth running with: 1 MiB = 128 Ki entries.
pub const SORT_CHUNK_MIN_BYTES: u64 = 1 << 20;

/// What a successful build reports beyond the manifest.
#[derive(Debug, Clone)]
pub struct BuildReport {
    pub output: PathBuf,
    pub manifest: Manifest,
    pub skipped_lines: u64,
    pub skipped_examples: Vec<String>,
    pub nan_replaced: u64,
    /// Temporaries of killed runs removed before this build.
    pub removed_stale: Vec<String>,
    /// What the input held that was not imported, and why (e.g. an OGB
    /// link-prediction split), for the user to read: never silent.
    pub notes: Vec<String>,
}

impl BuildReport {
    /// The report `flashgnn build` prints: the manifest as written
    /// (checksum included) and what the import skipped, replaced or removed.
    pub fn report(&self) -> serde_json::Value {
        serde_json::json!({
            "output": self.output.display().to_string(),
            "manifest": self.manifest.to_value(),
            "skipped_lines": self.skipped_lines,
            "skipped_examples": self.skipped_examples,
            "nan_replaced": self.nan_replaced,
            "removed_stale": self.removed_stale,
            "notes": self.notes,
        })
    }
}

/// Allocations of at least this many bytes get their own mapping (see
/// [`pin_malloc_mmap_threshold`]).
const MALLOC_MMAP_THRESHOLD: i32 = 1 << 20;

/// Fix glibc's mmap threshold (process-wide, once). Left dynamic, glibc
/// raises it after each large free (up to 32 MiB); the build's bucket-sized
/// buffers — read on the sort worker, freed on the consumer, staging
/// buffers recycled between threads — then stay in per-thread malloc arenas
/// and peak RSS grew by 186 MiB on a 512 MiB `--symmetrize --dedup` build
/// (docs/benchmarks.md). With a fixed threshold they are unmapped when freed.
fn pin_malloc_mmap_threshold() {
    #[cfg(all(target_os = "linux", target_env = "gnu"))]
    {
        static ONCE: std::sync::Once = std::sync::Once::new();
        // SAFETY: mallopt only changes the allocator's tuning parameter.
        ONCE.call_once(|| unsafe {
            libc::mallopt(libc::M_MMAP_THRESHOLD, MALLOC_MMAP_THRESHOLD);
        });
    }
}

/// Build `opts.input` into a dataset at `opts.output`, atomically.
pub fn build(opts: &BuildOptions, progress: &Progress) -> Result<BuildReport> {
    pin_malloc_mmap_threshold();
    let out = &opts.output;
    let stale = check_request(opts)?;
    // One id for the whole build: the feature thread and the layout pass
    // both seal with it.
    let resolved;
    let opts = if opts.dataset_id.is_some() {
        opts
    } else {
        resolved = BuildOptions { dataset_id: Some(flashgnn_format::checksum::new_dataset_id()), ..opts.clone() };
        &resolved
    };
    let tmp = create_tmp_dir_on(&opts.disk, out)?;
    let mut guard = TmpGuard(Some(tmp.clone()), opts.disk.clone());
    let mut report = build_into(&tmp, opts, progress)?;
    progress.check()?;
    publish::verify_and_publish(&tmp, out, opts, progress)?;
    guard.0 = None;
    report.output = out.clone();
    report.removed_stale = stale;
    Ok(report)
}

/// Refuse a request that cannot succeed before any work: the output's
/// parent, the --force rule, class count and dataset id. Removes the
/// temporaries of killed runs on the way; returns their paths.
fn check_request(opts: &BuildOptions) -> Result<Vec<String>> {
    let out = &opts.output;
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")).to_path_buf();
    if !parent.is_dir() {
        return Err(BuildError::config(format!("{}: output directory's parent does not exist", parent.display())));
    }
    // The --force rule (flashgnn_io::check_output) before any work.
    check_output(out, opts.force)?;
    check_not_input(out, &[opts.input.as_path()])?;
    let stale = report_stale_tmps(out);
    if let Some(c) = opts.num_classes.filter(|c| !(1..=flashgnn_format::manifest::MAX_NUM_CLASSES).contains(c)) {
        return Err(BuildError::config(format!(
            "--num-classes {c} must be in [1, {}] (class ids are 32-bit labels in [0, num_classes))",
            flashgnn_format::manifest::MAX_NUM_CLASSES
        )));
    }
    if opts.dataset_id == Some(0) {
        return Err(BuildError::config("dataset id 0 is reserved (never written); pass a non-zero id"));
    }
    Ok(stale)
}

/// OGB's heterogeneous raw layout: staged into the typed npy layout in a
/// directory beside `tmp` (removed whatever happens: never published), then
/// the typed build over it; the manifest names the raw input.
fn build_ogb_typed(tmp: &Path, opts: &BuildOptions, progress: &Progress, t0: Instant) -> Result<BuildReport> {
    let name = tmp.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stage = tmp.with_file_name(format!("{name}.ogb-stage"));
    // Scratch: on the real disk whatever `opts.disk` is.
    let _guard = TmpGuard(Some(stage.clone()), flashgnn_io::Disk::Real);
    let notes = crate::source::ogb_typed::stage_ogb_typed(opts, &opts.input, &stage)?;
    let mut staged = opts.clone();
    staged.input = stage.clone();
    staged.format = crate::options::InputFormat::TypedNpy;
    let mut report = typedsplit::build_typed_or_split(tmp, &staged, progress, t0)?;
    report.manifest.build.source = opts.input.display().to_string();
    report.manifest.build.source_format = "ogb-typed".into();
    report.notes.extend(notes);
    publish::write_manifest(&opts.disk, tmp, &report.manifest)?;
    Ok(report)
}

/// The phases, into `tmp`: plan, then the edges with the side work beside
/// them (or after them when the node count comes from the edges), then the
/// layout pass and the manifest.
fn build_into(tmp: &Path, opts: &BuildOptions, progress: &Progress) -> Result<BuildReport> {
    let t0 = Instant::now();
    plan::check_page_size(opts)?;
    linksplit::check_options(opts)?;
    match crate::source::detect::detect_format(opts)? {
        f @ (crate::options::InputFormat::TypedNpy | crate::options::InputFormat::OgbTyped)
            if opts.link_split_files.is_some() =>
        {
            return Err(BuildError::config(format!(
                "--link-split-files: homogeneous inputs only for now ({} input is typed; --link-split VAL,TEST \
                 draws a typed split)",
                f.name()
            )))
        }
        crate::options::InputFormat::TypedNpy => return typedsplit::build_typed_or_split(tmp, opts, progress, t0),
        crate::options::InputFormat::OgbTyped => return build_ogb_typed(tmp, opts, progress, t0),
        _ => {}
    }
    if let Some(e) = &opts.link_edge_type {
        return Err(BuildError::config(format!(
            "--link-edge-type {e}: only for a typed input (this input is homogeneous: its one edge type is split)"
        )));
    }
    let mut inputs = open_inputs(opts)?;
    let notes = std::mem::take(&mut inputs.notes);
    let declared = plan::declared_nodes(opts, &inputs)?;
    if inputs.format == "ogb" && declared.is_none() {
        return Err(BuildError::config(format!(
            "{}: OGB input without raw/num-node-list.csv.gz: pass --num-nodes N",
            opts.input.display()
        )));
    }
    inputs.edges.set_num_nodes(declared);
    let features = plan::plan_features(opts, inputs.features.as_deref())?;
    let mut chunk_bytes = plan::sort_chunk_bytes(opts, declared)?;
    // A link split: the build reads the message-passing edges it leaves,
    // and the node count is the input's (held-out edges may have named the
    // largest id).
    let mut link = None;
    let mut declared = declared;
    if opts.link_split.is_some() {
        let edges = std::mem::replace(&mut inputs.edges, Box::new(NoEdges));
        let space = linksplit::Space::Single { symmetric: opts.symmetrize, flag: "--symmetrize" };
        let mp = tmp.join(linksplit::MP_EDGES_FILE);
        let r = linksplit::random_split(tmp, opts, edges, declared, space, &mp, chunk_bytes, progress)?;
        inputs.edges = r.edges;
        if declared.is_none() {
            declared = Some(r.num_nodes);
            chunk_bytes = plan::sort_chunk_bytes(opts, declared)?;
        }
        link = Some(r.out);
    } else if let Some(dir) = &opts.link_split_files {
        let n = declared.ok_or_else(|| {
            BuildError::config(format!(
                "--link-split-files {}: the node count must be known before the edges are read (--num-nodes N)",
                dir.display()
            ))
        })?;
        link = Some(linksplit::given_split(tmp, opts, dir, n)?);
    }

    let mut side_inputs = Some((inputs.features.take(), inputs.labels.take(), std::mem::take(&mut inputs.splits)));
    let mut edges = inputs.edges;
    let fmt_name = inputs.format.clone();

    // Side work (features, labels, splits) overlaps edge preprocessing when
    // the node count is known up front; otherwise it runs after the edges.
    let side_params = SideParams {
        tmp,
        opts,
        feat_dtype: features.dtype,
        direct_final: features.direct_final,
        page_size: opts.page_size,
        progress,
        num_classes: plan::num_classes(opts, &fmt_name),
        typed: None,
    };
    let mut report = std::thread::scope(|scope| -> Result<BuildReport> {
        let handle = declared.map(|n| {
            let (f, l, s) = side_inputs.take().expect("side inputs taken once");
            let p = &side_params;
            scope.spawn(move || side_work(p, n, f, l, s))
        });
        let join = |h: std::thread::ScopedJoinHandle<'_, Result<side::Side>>| {
            h.join().unwrap_or_else(|_| Err(BuildError::config("internal: feature thread panicked")))
        };
        let mut edge_result = match preprocess_edges(tmp, opts, edges.as_mut(), declared, chunk_bytes, progress) {
            Ok(r) => r,
            Err(e) => {
                progress.cancel(); // stop the side thread promptly; the edge error wins
                let _ = handle.map(join);
                return Err(e);
            }
        };
        let side = match handle {
            // The layout pass does not read a final features.fg: it runs
            // while the side thread still copies rows (on an IGB-shaped
            // input that copy is the longest phase) and joins it after.
            Some(h) if features.direct_final => SideLater::Running(Box::new(move || join(h))),
            Some(h) => SideLater::Ready(join(h)?),
            None => {
                // The node count came from the edges (SNAP, npy without features).
                let (f, l, s) = side_inputs.take().expect("side inputs not consumed");
                SideLater::Ready(side_work(&side_params, edge_result.num_nodes, f, l, s)?)
            }
        };
        let r = finish_build(tmp, opts, progress, t0, &mut edge_result, side, &features, fmt_name, edges.as_ref());
        if r.is_err() {
            progress.cancel(); // a side thread still running stops at its next check
        }
        r
    })?;
    report.notes = notes;
    for f in linksplit::intermediates(tmp) {
        let _ = std::fs::remove_file(f);
    }
    if let Some(l) = link {
        let m = &mut report.manifest;
        for (name, bytes, crc32c) in l.files {
            m.files.insert(name, flashgnn_format::manifest::FileEntry { bytes, crc32c });
        }
        m.link_split = Some(l.info);
        report.notes.extend(l.notes);
        publish::write_manifest(&opts.disk, tmp, m)?;
    }
    Ok(report)
}

/// The placeholder of an edge source handed to the link split.
struct NoEdges;

impl EdgeSource for NoEdges {
    fn next_batch(&mut self, _: &mut Vec<(u64, u64)>, _: usize) -> Result<bool> {
        Ok(false)
    }
    fn bytes_total(&self) -> u64 {
        0
    }
    fn bytes_done(&self) -> u64 {
        0
    }
    fn set_num_nodes(&mut self, _: Option<u64>) {}
}

/// After the edges: the layout pass, then the side thread's results (joined
/// only now when it still copies rows), then the manifest.
#[allow(clippy::too_many_arguments)]
fn finish_build(
    tmp: &Path,
    opts: &BuildOptions,
    progress: &Progress,
    t0: Instant,
    er: &mut EdgeResult,
    side: SideLater,
    features: &FeaturePlan,
    fmt_name: String,
    edges: &dyn EdgeSource,
) -> Result<BuildReport> {
    let t_layout = Instant::now();
    // A running side thread writes no stage (its rows go to the final
    // features.fg), so nothing before the manifest needs it.
    let staged = matches!(&side, SideLater::Ready(s) if s.staged);
    let mut laid = layout::write_layout(tmp, opts, progress, er, features, staged)?;
    let layout_seconds = t_layout.elapsed().as_secs_f64();
    let mut side = side.get()?;
    laid.files.append(&mut side.files);
    let (skipped, examples) = edges.skipped();
    let manifest = publish::manifest_of(opts, t0, er, &side, features, laid, layout_seconds, fmt_name);
    publish::write_manifest(&opts.disk, tmp, &manifest)?;
    Ok(BuildReport {
        output: tmp.to_path_buf(),
        manifest,
        skipped_lines: skipped,
        skipped_examples: examples,
        nan_replaced: side.nan_replaced,
        removed_stale: Vec::new(),
        notes: Vec::new(),
    })
}
