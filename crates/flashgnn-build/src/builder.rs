//! The build pipeline (see the crate docs for the picture).
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

use std::io::Read as _;
use std::path::{Path, PathBuf};
use std::time::Instant;

use flashgnn_format::checksum::crc_bound;
use flashgnn_format::layout::{
    choose_inline_cap, seal_overflow_page, DegreeHistogram, FeaturePlacement, Layout, SLOT_HEADER_BYTES,
};
use flashgnn_format::manifest::*;
use flashgnn_format::npy::encode_header;
use flashgnn_format::slot::{encode_slot, write_id};
use flashgnn_format::{Dtype, FeatureHeader, GraphHeader, OverflowHeader, FORMAT_VERSION};
use flashgnn_io::{check_not_input, check_output, create_tmp_dir, publish_dir, FileReader, IoError, OutFile, ReadAt};

use crate::options::{BuildOptions, FeatureLayout, Reorder, SelfLoops};
use crate::progress::Progress;
use crate::rows::{check_finite_f32, convert_rows, passthrough, splitmix64, synthetic_row, unit};
use crate::sort::{huge_zeroed, ExternalSorter, KeyFileReader, Merged};
use crate::source::detect::open_inputs;
use crate::source::{EdgeSource, RowSource, ValueSource, NODES_MAX};
use crate::{BuildError, Result};

/// Memory reserved for I/O buffers outside the sort chunk (see module docs).
pub const FIXED_OVERHEAD_BYTES: u64 = 64 << 20;
/// Smallest sort chunk worth running with: 1 MiB = 128 Ki entries.
pub const SORT_CHUNK_MIN_BYTES: u64 = 1 << 20;
/// Edges read per batch from a source.
const EDGE_BATCH: usize = 1 << 16;
/// Parsed edge batches the reader thread may hold ready (1 MiB each).
const READ_AHEAD_BATCHES: usize = 2;
/// Rows per feature staging chunk: bounded by bytes, see `stage_chunk_rows`.
const STAGE_CHUNK_BYTES: usize = 8 << 20;
/// A row is stored inline when it takes at most this fraction of a page, so
/// that several slots (and their neighbor lists) share each page.
const INLINE_ROW_FRACTION: u32 = 4;

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

/// Removes the temporary directory unless disarmed (errors, panics, Ctrl-C).
struct TmpGuard(Option<PathBuf>);
impl Drop for TmpGuard {
    fn drop(&mut self) {
        if let Some(p) = self.0.take() {
            let _ = std::fs::remove_dir_all(p);
        }
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
    // One id for the whole build: the feature thread and the layout pass
    // both seal with it.
    let resolved;
    let opts = if opts.dataset_id.is_some() {
        opts
    } else {
        resolved = BuildOptions { dataset_id: Some(flashgnn_format::checksum::new_dataset_id()), ..opts.clone() };
        &resolved
    };
    let tmp = create_tmp_dir(out)?;
    let mut guard = TmpGuard(Some(tmp.clone()));
    let mut report = build_into(&tmp, opts, progress)?;
    progress.check()?;
    // Publish only what reads back clean: a verify of the new files, all
    // of them but (by default) copied feature rows (`BuildVerify`).
    let ds = flashgnn_store::Dataset::open(&tmp)?;
    let mut task = progress.task("verify", "B", 0);
    let mut last = 0;
    flashgnn_store::verify_scope(&ds, opts.verify, &mut |done, total| {
        task.set_total(total);
        task.add(done - last);
        last = done;
    })?;
    task.finish();
    drop(task);
    progress.check()?;
    publish_dir(&tmp, out)?;
    guard.0 = None;
    report.output = out.clone();
    report.removed_stale = stale;
    Ok(report)
}

/// Remove the temporaries that killed runs left beside `out` (owner marker,
/// owner gone) and say so on stderr; returns their paths for the report.
pub fn report_stale_tmps(out: &Path) -> Vec<String> {
    flashgnn_io::remove_stale_tmps(out)
        .into_iter()
        .map(|(p, pid)| {
            eprintln!(
                "flashgnn: removed stale temporary {} (left by process {pid}, which is no longer running)",
                p.display()
            );
            p.display().to_string()
        })
        .collect()
}

struct Side {
    feature_seconds: f64,
    files: Vec<(String, u64, u32)>,
    labels: Option<LabelInfo>,
    splits: Vec<(String, u64)>,
    nan_replaced: u64,
    /// Rows staged in `features.stage` (None when written final or absent).
    staged: bool,
    /// How `--make-splits` drew the splits: "stratified", "random" (no
    /// labels to stratify by) or "" (not made here).
    splits_made: String,
}

fn declared_nodes(opts: &BuildOptions, inputs: &crate::source::Inputs) -> Result<Option<u64>> {
    let mut n = inputs.num_nodes;
    let mut origin = if n.is_some() { "the declared node count".to_string() } else { String::new() };
    let mut check = |count: Option<u64>, what: String| -> Result<()> {
        if let Some(c) = count {
            match n {
                Some(prev) if prev != c => {
                    return Err(BuildError::config(format!(
                        "{what} has {c} rows but {origin} is {prev}: they must agree"
                    )));
                }
                None => {
                    n = Some(c);
                    origin = format!("{what} ({c} rows)");
                }
                _ => {}
            }
        }
        Ok(())
    };
    if let Some(f) = &inputs.features {
        check(f.rows(), f.file())?;
    }
    if let Some(l) = &inputs.labels {
        check(l.len(), l.file())?;
    }
    if let Some(n) = n {
        if n >= NODES_MAX {
            return Err(BuildError::config(format!("node count {n} exceeds the supported maximum {}", NODES_MAX - 1)));
        }
    }
    let _ = opts;
    Ok(n)
}

fn build_into(tmp: &Path, opts: &BuildOptions, progress: &Progress) -> Result<BuildReport> {
    let t0 = Instant::now();
    if !opts.page_size.is_power_of_two()
        || !(flashgnn_format::PAGE_SIZE_MIN..=flashgnn_format::PAGE_SIZE_MAX).contains(&opts.page_size)
    {
        return Err(BuildError::config(format!(
            "--page-size {} must be a power of two in [{}, {}]",
            opts.page_size,
            flashgnn_format::PAGE_SIZE_MIN,
            flashgnn_format::PAGE_SIZE_MAX
        )));
    }
    let mut inputs = open_inputs(opts)?;
    let notes = std::mem::take(&mut inputs.notes);
    let declared = declared_nodes(opts, &inputs)?;
    if inputs.format == "ogb" && declared.is_none() {
        return Err(BuildError::config(format!(
            "{}: OGB input without raw/num-node-list.csv.gz: pass --num-nodes N",
            opts.input.display()
        )));
    }
    inputs.edges.set_num_nodes(declared);

    // Feature plan.
    let (feat_dim, src_dtype) = match (&inputs.features, opts.synthetic_features) {
        (Some(f), None) => (f.dim(), f.dtype()),
        (None, Some(d)) => (d, Dtype::Float32),
        (None, None) => (0, Dtype::Float32),
        (Some(f), Some(_)) => {
            return Err(BuildError::config(format!(
                "--synthetic-features given but the input has features ({})",
                f.file()
            )))
        }
    };
    let feat_dtype = opts.feature_dtype.unwrap_or(src_dtype);
    if !feat_dtype.is_float() {
        return Err(BuildError::config(format!(
            "--feature-dtype {} must be float16, float32 or float64",
            feat_dtype.name()
        )));
    }
    let row_bytes = feat_dim as u64 * feat_dtype.size() as u64;
    let fits_inline = SLOT_HEADER_BYTES as u64 + row_bytes + 4 <= opts.page_size as u64;
    let placement = match opts.feature_layout {
        FeatureLayout::Inline if !fits_inline => {
            return Err(BuildError::config(format!(
                "--feature-layout inline: a {row_bytes}-byte feature row does not fit a {}-byte page with its slot header; use --feature-layout separate or a larger --page-size",
                opts.page_size
            )))
        }
        FeatureLayout::Inline => FeaturePlacement::Inline,
        // No feature bytes: nothing to separate (and no features.fg to write).
        FeatureLayout::Separate if row_bytes == 0 => FeaturePlacement::Inline,
        FeatureLayout::Separate => FeaturePlacement::Separate,
        FeatureLayout::Auto if row_bytes * INLINE_ROW_FRACTION as u64 <= opts.page_size as u64 => FeaturePlacement::Inline,
        FeatureLayout::Auto => FeaturePlacement::Separate,
    };
    let direct_final = placement == FeaturePlacement::Separate && opts.reorder == Reorder::None;

    // Memory plan.
    let per_node = 4 + if opts.reorder != Reorder::None { 12 } else { 0 };
    let node_bytes = declared.unwrap_or(0) * per_node;
    let chunk_bytes = opts.memory_budget.saturating_sub(FIXED_OVERHEAD_BYTES + node_bytes);
    if chunk_bytes < SORT_CHUNK_MIN_BYTES {
        return Err(BuildError::config(format!(
            "--memory-budget {} bytes is too small: it must cover {} MiB of buffers, {per_node} B per node ({} nodes) and an {} MiB sort chunk, i.e. at least {} bytes",
            opts.memory_budget,
            FIXED_OVERHEAD_BYTES >> 20,
            declared.unwrap_or(0),
            SORT_CHUNK_MIN_BYTES >> 20,
            FIXED_OVERHEAD_BYTES + node_bytes + SORT_CHUNK_MIN_BYTES
        )));
    }

    let mut side_inputs = Some((inputs.features.take(), inputs.labels.take(), std::mem::take(&mut inputs.splits)));
    let mut edges = inputs.edges;
    let fmt_name = inputs.format.clone();

    // Side work (features, labels, splits) overlaps edge preprocessing when
    // the node count is known up front; otherwise it runs after the edges.
    // Declared class count: --num-classes, or IGB's label file (19 / 2K).
    let num_classes = opts.num_classes.or(match (fmt_name.as_str(), opts.igb_classes.as_str()) {
        ("igb", "19") => Some(19),
        ("igb", "2K") => Some(2983),
        _ => None,
    });
    let side_params =
        SideParams { tmp, opts, feat_dtype, direct_final, page_size: opts.page_size, progress, num_classes };
    let mut report = std::thread::scope(|scope| -> Result<BuildReport> {
        let handle = declared.map(|n| {
            let (f, l, s) = side_inputs.take().expect("side inputs taken once");
            let p = &side_params;
            scope.spawn(move || side_work(p, n, f, l, s))
        });
        let join = |h: std::thread::ScopedJoinHandle<'_, Result<Side>>| {
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
            Some(h) if direct_final => SideLater::Running(Box::new(move || join(h))),
            Some(h) => SideLater::Ready(join(h)?),
            None => {
                // The node count came from the edges (SNAP, npy without features).
                let (f, l, s) = side_inputs.take().expect("side inputs not consumed");
                SideLater::Ready(side_work(&side_params, edge_result.num_nodes, f, l, s)?)
            }
        };
        let r = finish_build(
            tmp,
            opts,
            progress,
            t0,
            &mut edge_result,
            side,
            placement,
            feat_dim,
            feat_dtype,
            fmt_name,
            edges.as_ref(),
        );
        if r.is_err() {
            progress.cancel(); // a side thread still running stops at its next check
        }
        r
    })?;
    report.notes = notes;
    Ok(report)
}

/// The side thread's [`Side`]: finished, or still running (joined by
/// [`finish_build`] only once the layout pass is done).
enum SideLater<'a> {
    Ready(Side),
    Running(Box<dyn FnOnce() -> Result<Side> + 'a>),
}

impl SideLater<'_> {
    fn get(self) -> Result<Side> {
        match self {
            SideLater::Ready(s) => Ok(s),
            SideLater::Running(join) => join(),
        }
    }
}

struct SideParams<'a> {
    tmp: &'a Path,
    opts: &'a BuildOptions,
    feat_dtype: Dtype,
    direct_final: bool,
    page_size: u32,
    progress: &'a Progress,
    num_classes: Option<u64>,
}

/// Feature chunks read and converted ahead of the writer (see
/// [`write_features`]).
const FEATURE_READ_AHEAD: usize = 2;

/// Stream the feature rows of `f` to `features.fg` (separate placement, no
/// reordering: final, with per-row CRCs) or to `features.stage` (read back
/// by the layout pass). A reader thread reads and checks (or converts) the
/// next chunks while this one checksums and writes the current one, so the
/// input's reads and the output's writes overlap; chunk buffers go back to
/// it for reuse. Rows stored unchanged ([`passthrough`]) are checked where
/// they were read, without a converted copy. `features.fg` goes out with
/// O_DIRECT: it is written once and read back only by the verify, which
/// reads with O_DIRECT itself.
fn write_features(p: &SideParams, num_nodes: u64, f: &mut dyn RowSource, side: &mut Side) -> Result<()> {
    let dim = f.dim() as usize;
    let (src, dst) = (f.dtype(), p.feat_dtype);
    let row_bytes = dim * dst.size();
    let stride = if p.direct_final { row_bytes.div_ceil(512).max(1) * 512 } else { row_bytes };
    let path = p.tmp.join(if p.direct_final { FEATURES_FILE } else { "features.stage" });
    // The stage stays buffered: the layout pass reads it back soon, from the
    // page cache where memory allows (O_DIRECT both ways measured slower:
    // the read-back then goes to the device).
    let mut out = if p.direct_final { OutFile::create_direct(&path)? } else { OutFile::create(&path)? };
    let mut crcs = Vec::new();
    if p.direct_final {
        let h = FeatureHeader {
            page_size: p.page_size,
            num_nodes,
            feature_dim: dim as u64,
            feature_dtype_code: dst.code() as u64,
            stride: stride as u64,
            dataset_id: p.opts.dataset_id,
        };
        out.write(&h.encode())?;
        crcs.reserve(num_nodes as usize);
    }
    let mut task = p.progress.task("features", "rows", num_nodes);
    let chunk_rows = (STAGE_CHUNK_BYTES / (dim * src.size().max(dst.size())).max(1)).clamp(1, 1 << 20);
    let file = f.file();
    let (nan, progress) = (p.opts.nan, p.progress);
    let pad = vec![0u8; stride - row_bytes];
    let mut row = 0u64;
    let replaced = std::thread::scope(|scope| -> Result<u64> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<(Vec<u8>, u64)>>(FEATURE_READ_AHEAD);
        let (free_tx, free_rx) = std::sync::mpsc::channel::<Vec<u8>>();
        let (file, f) = (&file, &mut *f);
        let reader = std::thread::Builder::new()
            .name("features-read".into())
            .spawn_scoped(scope, move || -> u64 {
                let (mut raw, mut first, mut replaced) = (Vec::new(), 0u64, 0u64);
                let pass = passthrough(src, dst, nan);
                loop {
                    let mut rows = free_rx.try_recv().unwrap_or_default();
                    rows.clear();
                    raw.clear();
                    let r = (|| -> Result<u64> {
                        progress.check()?;
                        let input = if pass { &mut rows } else { &mut raw };
                        let k = f.next_rows(chunk_rows, input)? as u64;
                        if k > 0 && first + k > num_nodes {
                            return Err(BuildError::input(
                                file,
                                f.position(num_nodes),
                                format!("feature table has more rows than the node count {num_nodes}"),
                            ));
                        }
                        let position = |r| f.position(r);
                        if pass {
                            check_finite_f32(file, &position, dim, &rows, first)?;
                        } else {
                            convert_rows(file, &position, src, dst, dim, &raw, first, nan, &mut replaced, &mut rows)?;
                        }
                        Ok(k)
                    })();
                    let (msg, k) = match r {
                        Ok(0) => return replaced,
                        Ok(k) => (Ok((rows, k)), k),
                        Err(e) => (Err(e), 0),
                    };
                    let failed = msg.is_err();
                    if tx.send(msg).is_err() || failed {
                        return replaced; // the writer stopped (its error wins), or ours is delivered
                    }
                    first += k;
                }
            })
            .map_err(|e| BuildError::config(format!("cannot start the feature reader thread: {e}")))?;
        let r = (|| -> Result<()> {
            for msg in &rx {
                let (rows, k) = msg?;
                if p.direct_final {
                    for (i, r) in rows.chunks_exact(row_bytes.max(1)).take(k as usize).enumerate() {
                        crcs.push(crc_bound(p.opts.dataset_id, row + i as u64, r));
                        out.write(r)?;
                        out.write(&pad)?;
                    }
                } else {
                    out.write(&rows)?;
                }
                row += k;
                task.add(k);
                let _ = free_tx.send(rows);
            }
            Ok(())
        })();
        drop(rx); // a reader blocked in send() sees the channel closed
        let replaced = reader.join().map_err(|_| BuildError::config("internal: feature reader thread panicked"))?;
        r.map(|_| replaced)
    })?;
    side.nan_replaced += replaced;
    if row != num_nodes {
        return Err(BuildError::input(
            &file,
            f.position(row),
            format!("feature table has {row} rows but the node count is {num_nodes}"),
        ));
    }
    let (bytes, crc) = out.finish()?;
    if p.direct_final {
        side.files.push((FEATURES_FILE.into(), bytes, crc));
        let (b, c) = write_npy_u32(&p.tmp.join(FEATURE_CRC_FILE), &crcs)?;
        side.files.push((FEATURE_CRC_FILE.into(), b, c));
    } else {
        side.staged = true;
    }
    Ok(())
}

/// Stream features (converted), labels and splits to their files.
fn side_work(
    p: &SideParams,
    num_nodes: u64,
    features: Option<Box<dyn RowSource>>,
    labels: Option<Box<dyn ValueSource>>,
    splits: Vec<(String, Box<dyn ValueSource>)>,
) -> Result<Side> {
    let t = Instant::now();
    let mut side = Side {
        feature_seconds: 0.0,
        files: Vec::new(),
        labels: None,
        splits: Vec::new(),
        nan_replaced: 0,
        staged: false,
        splits_made: String::new(),
    };
    if let Some(mut f) = features {
        write_features(p, num_nodes, f.as_mut(), &mut side)?;
    }
    side.feature_seconds = t.elapsed().as_secs_f64();
    // Kept (4 B/node) only when --make-splits will stratify by them.
    let fractions =
        p.opts.make_splits.or(if p.opts.input.join("processed").is_dir() { Some((0.6, 0.2, 0.2)) } else { None });
    let stratify = splits.is_empty() && fractions.is_some();
    let mut label_values: Option<Vec<i32>> = None;
    if let Some(l) = labels {
        let (info, bytes, crc, values) = write_labels(p, num_nodes, l, stratify)?;
        side.labels = Some(info);
        side.files.push((LABELS_FILE.into(), bytes, crc));
        label_values = stratify.then_some(values);
    }
    let mut have_splits = false;
    for (name, s) in splits {
        let (count, bytes, crc) = write_split(p, num_nodes, &name, s)?;
        side.splits.push((name.clone(), count));
        side.files.push((split_file(&name), bytes, crc));
        have_splits = true;
    }
    if !have_splits {
        if let Some(fr) = fractions {
            side.splits_made = if label_values.is_some() { "stratified" } else { "random" }.into();
            for (name, count, bytes, crc) in make_splits(p, num_nodes, fr, label_values.as_deref())? {
                side.splits.push((name.clone(), count));
                side.files.push((split_file(&name), bytes, crc));
            }
        }
    }
    Ok(side)
}

fn write_npy_u32(path: &Path, values: &[u32]) -> Result<(u64, u32)> {
    let mut out = OutFile::create(path)?;
    out.write(&encode_header(Dtype::Uint32, &[values.len() as u64]))?;
    let mut buf = Vec::with_capacity(1 << 20);
    for c in values.chunks(1 << 18) {
        buf.clear();
        c.iter().for_each(|v| buf.extend_from_slice(&v.to_le_bytes()));
        out.write(&buf)?;
    }
    Ok(out.finish()?)
}

/// Labels: int64 `[N]`, -1 for unlabeled (NaN in OGB/IGB float labels).
/// Also returns them (4 B/node) for `--make-splits` to stratify by.
fn write_labels(
    p: &SideParams,
    n: u64,
    mut src: Box<dyn ValueSource>,
    keep: bool,
) -> Result<(LabelInfo, u64, u32, Vec<i32>)> {
    let file = src.file();
    src.set_num_nodes(n)?;
    let mut out = OutFile::create(p.tmp.join(LABELS_FILE))?;
    out.write(&encode_header(Dtype::Int64, &[n]))?;
    let mut vals = Vec::new();
    let mut buf = Vec::new();
    let mut all: Vec<i32> = Vec::with_capacity(if keep { n as usize } else { 0 });
    let (mut i, mut max, mut labeled) = (0u64, -1i64, 0u64);
    loop {
        p.progress.check()?;
        vals.clear();
        let k = src.next_values(1 << 16, &mut vals)?;
        if k == 0 {
            break;
        }
        buf.clear();
        for &v in &vals {
            if i >= n {
                return Err(BuildError::input(
                    &file,
                    src.position(i),
                    format!("label array has more rows than the node count {n}"),
                ));
            }
            let l = if v.is_nan() {
                -1
            } else if v.fract() != 0.0 || v < -1.0 || v >= i32::MAX as f64 {
                return Err(BuildError::input(
                    &file,
                    src.position(i),
                    format!("label {v} is not a class id (an integer in [0, {}), or -1/NaN for unlabeled)", i32::MAX),
                ));
            } else {
                v as i64
            };
            if let Some(c) = p.num_classes.filter(|&c| l >= 0 && l as u64 >= c) {
                return Err(BuildError::input(
                    &file,
                    src.position(i),
                    format!(
                        "label {l} is not below the declared class count {c} (labels must be in [0, {c}), or -1/NaN for unlabeled)"
                    ),
                ));
            }
            if l >= 0 {
                labeled += 1;
                max = max.max(l);
            }
            buf.extend_from_slice(&l.to_le_bytes());
            if keep {
                all.push(l as i32);
            }
            i += 1;
        }
        out.write(&buf)?;
    }
    if i != n {
        return Err(BuildError::input(
            &file,
            src.position(i),
            format!("label array has {i} rows but the node count is {n}"),
        ));
    }
    let (bytes, crc) = out.finish()?;
    // An explicit --num-classes is recorded (a class may have no node);
    // otherwise the count is what the labels show.
    let num_classes = p.opts.num_classes.unwrap_or((max + 1) as u64);
    Ok((LabelInfo { num_classes, labeled }, bytes, crc, all))
}

fn write_split(p: &SideParams, n: u64, name: &str, mut src: Box<dyn ValueSource>) -> Result<(u64, u64, u32)> {
    let file = src.file();
    let path = p.tmp.join(split_file(name));
    // Header sized for the largest possible count; patched at the end.
    let mut ids: Vec<u8> = Vec::new();
    let mut count = 0u64;
    let mut vals = Vec::new();
    let mut body = OutFile::create(p.tmp.join(format!("{name}.body")))?;
    loop {
        vals.clear();
        let k = src.next_values(1 << 16, &mut vals)?;
        if k == 0 {
            break;
        }
        ids.clear();
        for &v in &vals {
            if v.fract() != 0.0 || v < 0.0 || v >= n as f64 {
                return Err(BuildError::input(
                    &file,
                    src.position(count),
                    format!("split id {v} is not a node id in [0, {n})"),
                ));
            }
            ids.extend_from_slice(&(v as i64).to_le_bytes());
            count += 1;
        }
        body.write(&ids)?;
    }
    body.finish()?;
    // Assemble header + body (the body is small next to the graph).
    let mut out = OutFile::create(&path)?;
    out.write(&encode_header(Dtype::Int64, &[count]))?;
    let body_path = p.tmp.join(format!("{name}.body"));
    let mut f = flashgnn_io::open_regular(&body_path)?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let k = f.read(&mut buf).map_err(|e| IoError::new("reading", &body_path, None, e))?;
        if k == 0 {
            break;
        }
        out.write(&buf[..k])?;
    }
    let _ = std::fs::remove_file(&body_path);
    let (bytes, crc) = out.finish()?;
    Ok((count, bytes, crc))
}

/// Per-class split sizes for `count` nodes of one class: each fraction of
/// the class, rounded; never more than the class holds (test, then
/// validation give way); and at least one training node whenever the
/// training fraction is > 0, so every class is in train.
pub fn class_split_sizes(count: u64, (tr, va, te): (f64, f64, f64)) -> [u64; 3] {
    let r = |f: f64| (count as f64 * f).round() as u64;
    let mut s = [r(tr), r(va), r(te)];
    if tr > 0.0 && s[0] == 0 && count > 0 {
        s[0] = 1;
    }
    s[0] = s[0].min(count);
    for k in [2, 1] {
        let over = (s[0] + s[1] + s[2]).saturating_sub(count);
        s[k] -= over.min(s[k]);
    }
    s
}

/// Train/val/test splits, deterministic in `--seed`. With labels:
/// stratified by class — each class's nodes, in an order shuffled by
/// `--seed`, are cut by [`class_split_sizes`]; unlabeled nodes (-1) go to
/// no split (nothing to learn or score). Without labels: every node falls
/// in a random bucket.
fn make_splits(
    p: &SideParams,
    n: u64,
    (tr, va, te): (f64, f64, f64),
    labels: Option<&[i32]>,
) -> Result<Vec<(String, u64, u64, u32)>> {
    if !(tr >= 0.0 && va >= 0.0 && te >= 0.0 && tr + va + te <= 1.0 + 1e-9) {
        return Err(BuildError::config(format!("split fractions {tr},{va},{te} must be >= 0 and sum to <= 1")));
    }
    let rank = |v: u64| splitmix64(p.opts.seed ^ 0x5EED_5717 ^ splitmix64(v));
    let strata: Option<Vec<u8>> = labels.map(|lab| {
        let classes = lab.iter().copied().max().unwrap_or(-1).max(-1) + 1;
        let mut members: Vec<Vec<u32>> = vec![Vec::new(); classes as usize];
        for (v, &l) in lab.iter().enumerate() {
            if l >= 0 {
                members[l as usize].push(v as u32);
            }
        }
        let mut b = vec![3u8; n as usize];
        for m in members.iter_mut() {
            m.sort_by_key(|&v| (rank(v as u64), v));
            let [a, c, d] = class_split_sizes(m.len() as u64, (tr, va, te));
            for (i, &v) in m.iter().enumerate() {
                let i = i as u64;
                b[v as usize] = if i < a {
                    0
                } else if i < a + c {
                    1
                } else if i < a + c + d {
                    2
                } else {
                    3
                };
            }
        }
        b
    });
    let bucket = |v: u64| {
        if let Some(s) = &strata {
            return s[v as usize] as usize;
        }
        let u = unit(splitmix64(p.opts.seed ^ 0x5EED_5717 ^ splitmix64(v)));
        if u < tr {
            0
        } else if u < tr + va {
            1
        } else if u < tr + va + te {
            2
        } else {
            3
        }
    };
    let mut counts = [0u64; 4];
    (0..n).for_each(|v| counts[bucket(v)] += 1);
    let mut res = Vec::new();
    for (b, name) in ["train", "val", "test"].iter().enumerate() {
        let mut out = OutFile::create(p.tmp.join(split_file(name)))?;
        out.write(&encode_header(Dtype::Int64, &[counts[b]]))?;
        let mut buf = Vec::with_capacity(1 << 20);
        for v in 0..n {
            if bucket(v) == b {
                buf.extend_from_slice(&(v as i64).to_le_bytes());
                if buf.len() >= 1 << 20 {
                    out.write(&buf)?;
                    buf.clear();
                }
            }
        }
        out.write(&buf)?;
        let (bytes, crc) = out.finish()?;
        res.push((name.to_string(), counts[b], bytes, crc));
    }
    Ok(res)
}

struct EdgeResult {
    num_nodes: u64,
    sorted_path: PathBuf,
    /// Without `--dedup`: the merge itself, consumed by the layout pass
    /// (degrees were counted while the runs formed, so no `edges.sorted`
    /// is written and read back). `None`: read `sorted_path`.
    direct: Option<EdgeStream>,
    /// Stored neighbors per node; with a `--dedup` stream in `direct`, the
    /// copies pushed per node instead, an upper bound the layout pass
    /// replaces with the stored count.
    degrees: Vec<u32>,
    /// With `--dedup`: the histogram of the copies pushed per node (before
    /// the dedup), which chooses the inline cap whether the dedup is then
    /// streamed into the layout or merged through `edges.sorted` — so both
    /// paths (and every memory budget) give the same layout.
    raw_hist: Option<DegreeHistogram>,
    /// Nodes with no edge in either direction (no stored neighbor and never
    /// anyone's neighbor); a node with only out-edges is not isolated.
    isolated: u64,
    num_entries: u64,
    input_edges: u64,
    self_loops_dropped: u64,
    self_loops_added: u64,
    duplicates_removed: u64,
    reverse: ReverseCounts,
    runs: u64,
    seconds: f64,
}

/// What `--symmetrize` found and did (all 0 without it).
#[derive(Debug, Clone, Copy, Default)]
struct ReverseCounts {
    /// Distinct directed input edges `u -> v` (`u != v`).
    distinct_input: u64,
    /// ... of which the input also holds `v -> u`.
    present: u64,
    /// Added reverse copies that `--dedup` removed because the entry was
    /// there already (an input edge, or another added copy).
    merged: u64,
}

impl ReverseCounts {
    /// Count one group of equal keys `k`: `a` input copies, `b` added reverse copies.
    #[inline]
    fn group(&mut self, k: u64, a: u64, b: u64) {
        if (k >> 32) != (k & 0xffff_ffff) && a > 0 {
            self.distinct_input += 1;
            self.present += (b > 0) as u64;
        }
    }
}

/// One sorted input of [`EdgeStream`], read a block at a time.
struct SortedSide {
    m: Merged,
    buf: Vec<u64>,
    at: usize,
    done: bool,
}

impl SortedSide {
    fn new(m: Merged) -> SortedSide {
        SortedSide { m, buf: Vec::new(), at: 0, done: false }
    }

    /// The keys read and not yet taken; empty only when the side is drained.
    fn avail(&mut self) -> Result<&[u64]> {
        if self.at == self.buf.len() && !self.done {
            self.buf.clear();
            self.at = 0;
            self.m.next_block(&mut self.buf, PIPE_BLOCK_KEYS)?;
            self.done = self.buf.is_empty();
        }
        Ok(&self.buf[self.at..])
    }
}

/// The merged edge keys of the two sorters (input copies, added reverse
/// copies), yielded one per stored entry, with `--symmetrize`'s statistics
/// counted as the groups of equal keys go by (no `--dedup`: every copy is
/// stored, so the counts of the deduplicating merge reduce to these).
///
/// It works on blocks of both inputs: a branch-free two-way merge over
/// slices, the group logic inlined (per-key calls through [`Merged`] cost
/// ~10 ns per key, a third of an 8 GiB edge input's layout CPU).
struct EdgeStream {
    a: SortedSide,
    b: SortedSide,
    symmetrize: bool,
    /// `--dedup`: each distinct key once (the rest of its group skipped);
    /// the keys pushed from the input and as added reverse copies, from
    /// which [`EdgeStream::dedup_removed`] derives the report's counts.
    dedup: Option<(u64, u64)>,
    /// Current group (when `open`): key, input copies, added copies.
    open: bool,
    g_key: u64,
    g_input: u64,
    g_added: u64,
    rc: ReverseCounts,
    /// Distinct keys with an input copy, and those that are only added
    /// reverse copies.
    input_keys: u64,
    reverse_only: u64,
    /// Keys read from the two merges (progress of a `--dedup` merge).
    read: u64,
}

impl EdgeStream {
    fn new(a: Merged, b: Merged, symmetrize: bool, dedup: Option<(u64, u64)>) -> EdgeStream {
        EdgeStream {
            a: SortedSide::new(a),
            b: SortedSide::new(b),
            symmetrize,
            dedup,
            open: false,
            g_key: 0,
            g_input: 0,
            g_added: 0,
            rc: ReverseCounts::default(),
            input_keys: 0,
            reverse_only: 0,
            read: 0,
        }
    }

    /// A drained `--dedup` stream's (duplicates removed, reverse copies
    /// merged): every pushed input copy beyond one per key that has one, and
    /// every added reverse copy except the one that stores a key with no
    /// input copy. (Runs may hold one copy per key already, so these come
    /// from the pushed totals, not from the merge.)
    fn dedup_removed(&self) -> Option<(u64, u64)> {
        self.dedup.map(|(input, reverse)| (input - self.input_keys, reverse - self.reverse_only))
    }

    fn close_group(&mut self) {
        if std::mem::take(&mut self.open) {
            let (k, a, b) = (self.g_key, self.g_input, self.g_added);
            if self.symmetrize {
                self.rc.group(k, a, b);
            }
            self.input_keys += (a > 0) as u64;
            self.reverse_only += (a == 0 && b > 0) as u64;
        }
    }

    /// Take key `k` (an added reverse copy when `added`): counted in its
    /// group, and appended to `out` unless `--dedup` stored its key already.
    #[inline(always)]
    fn take(&mut self, k: u64, added: bool, keep_all: bool, out: &mut Vec<u64>) {
        if !self.open || k != self.g_key {
            self.close_group();
            (self.open, self.g_key, self.g_input, self.g_added) = (true, k, 0, 0);
            out.push(k);
        } else if keep_all {
            out.push(k);
        }
        self.g_added += added as u64;
        self.g_input += !added as u64;
    }

    /// Append the next stored keys to `out`, up to `max` in all; fewer
    /// (none added) only when both inputs are drained.
    fn fill(&mut self, out: &mut Vec<u64>, max: usize) -> Result<()> {
        let keep_all = self.dedup.is_none();
        if !self.symmetrize && keep_all {
            // No reverse copies and no statistics to count: the input's merge.
            let before = out.len();
            self.a.m.next_block(out, max - before.min(max))?;
            self.read += (out.len() - before) as u64;
            return Ok(());
        }
        while out.len() < max {
            let na = self.a.avail()?.len();
            let nb = if self.symmetrize { self.b.avail()?.len() } else { 0 };
            if na == 0 && nb == 0 {
                self.close_group();
                break;
            }
            // Move the blocks out while merging them (`take` borrows self).
            let (sa, sb) = (std::mem::take(&mut self.a.buf), std::mem::take(&mut self.b.buf));
            let (mut i, mut j) = (self.a.at, self.b.at);
            if na > 0 && nb > 0 {
                while i < sa.len() && j < sb.len() && out.len() < max {
                    let (x, y) = (sa[i], sb[j]);
                    let added = y < x; // ties: the input copy first
                    let k = if added { y } else { x };
                    i += !added as usize;
                    j += added as usize;
                    self.take(k, added, keep_all, out);
                }
            } else if na > 0 {
                while i < sa.len() && out.len() < max {
                    self.take(sa[i], false, keep_all, out);
                    i += 1;
                }
            } else {
                while j < sb.len() && out.len() < max {
                    self.take(sb[j], true, keep_all, out);
                    j += 1;
                }
            }
            self.read += ((i - self.a.at) + (j - self.b.at)) as u64;
            (self.a.buf, self.b.buf, self.a.at, self.b.at) = (sa, sb, i, j);
        }
        Ok(())
    }
}

/// Keys per block handed from [`PipedEdges`]' thread to the layout pass.
const PIPE_BLOCK_KEYS: usize = 1 << 16;
/// Blocks in flight between the two (4 x 512 KiB).
const PIPE_BLOCKS: usize = 4;

/// An [`EdgeStream`] drained on its own thread and handed over in blocks.
///
/// Why: the merge of the input's and the reverse copies' sorted streams and
/// the `--dedup` grouping cost ~10 ns per key, and inside the layout pass's
/// per-node loop they made that thread the build's bottleneck on a 2-core
/// machine (perf of an 8 GiB edge input: the bucket sort workers blocked
/// on handing over sorted buckets while the layout thread ran). Here they
/// run beside the layout; the layout reads keys from a block.
struct PipedEdges {
    rx: Option<std::sync::mpsc::Receiver<Result<Vec<u64>>>>,
    free: std::sync::mpsc::Sender<Vec<u64>>,
    block: Vec<u64>,
    at: usize,
    worker: Option<std::thread::JoinHandle<EdgeStream>>,
    /// The stream, back from the worker once it is drained (its counts).
    drained: Option<EdgeStream>,
}

impl PipedEdges {
    fn start(mut stream: EdgeStream) -> Result<PipedEdges> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Vec<u64>>>(PIPE_BLOCKS);
        let (free, free_rx) = std::sync::mpsc::channel::<Vec<u64>>();
        let worker = std::thread::Builder::new()
            .name("edges-merge".into())
            .spawn(move || {
                loop {
                    let mut b = free_rx.try_recv().unwrap_or_else(|_| Vec::with_capacity(PIPE_BLOCK_KEYS));
                    b.clear();
                    let r = stream.fill(&mut b, PIPE_BLOCK_KEYS);
                    // Only an empty block ends the stream (not a short one).
                    let last = r.is_err();
                    let msg = r.map(|_| b);
                    if matches!(&msg, Ok(b) if b.is_empty()) {
                        return stream; // drained: closing the channel says so
                    }
                    if tx.send(msg).is_err() || last {
                        return stream; // the layout stopped, or this was the end (or an error)
                    }
                }
            })
            .map_err(|e| BuildError::config(format!("cannot start the edge merge thread: {e}")))?;
        Ok(PipedEdges { rx: Some(rx), free, block: Vec::new(), at: 0, worker: Some(worker), drained: None })
    }

    #[inline]
    fn next_key(&mut self) -> Result<Option<u64>> {
        loop {
            if let Some(&k) = self.block.get(self.at) {
                self.at += 1;
                return Ok(Some(k));
            }
            let Some(rx) = self.rx.as_ref() else { return Ok(None) };
            match rx.recv() {
                Ok(Ok(b)) => {
                    let used = std::mem::replace(&mut self.block, b);
                    let _ = self.free.send(used);
                    self.at = 0;
                }
                Ok(Err(e)) => {
                    self.rx = None;
                    return Err(e);
                }
                Err(_) => {
                    // Every block delivered: take the drained stream back.
                    self.rx = None;
                    let w = self.worker.take().expect("joined once");
                    let s = w.join().map_err(|_| BuildError::config("internal: the edge merge thread panicked"))?;
                    self.drained = Some(s);
                    return Ok(None);
                }
            }
        }
    }
}

impl Drop for PipedEdges {
    fn drop(&mut self) {
        self.rx = None; // a worker blocked in send() sees the channel closed
        if let Some(w) = self.worker.take() {
            let _ = w.join(); // dropping its stream removes the bucket files
        }
    }
}

/// Count one stored entry `dst <- src` while the runs form (no `--dedup`).
#[inline]
fn count_entry(degrees: &mut Vec<u32>, has_out: &mut Vec<u64>, d: u64, s: u64) -> Result<()> {
    let (d, s) = (d as usize, s as usize);
    let need = d.max(s) + 1;
    if degrees.len() < need {
        degrees.resize(need.max(degrees.len() * 2).min(NODES_MAX as usize + 1).max(need), 0);
    }
    if has_out.len() < need.div_ceil(64) {
        has_out.resize(degrees.len().div_ceil(64), 0);
    }
    degrees[d] = degrees[d]
        .checked_add(1)
        .ok_or_else(|| BuildError::config(format!("node {d} has more than {} neighbors", u32::MAX)))?;
    has_out[s / 64] |= 1u64 << (s % 64);
    Ok(())
}

/// [`count_entry`] for a batch of keys `dst << 32 | src`. When the arrays
/// already cover every id in the batch (a declared node count) the loop
/// has no resize check (a wrapped degree counter is still refused).
#[inline]
fn count_entries(degrees: &mut Vec<u32>, has_out: &mut Vec<u64>, keys: &[u64]) -> Result<()> {
    let (n, bits) = (degrees.len() as u64, has_out.len() as u64 * 64);
    let covered = keys.iter().fold(0u64, |m, &k| m.max(k >> 32).max(k & 0xffff_ffff)) < n.min(bits);
    if !covered {
        for &k in keys {
            count_entry(degrees, has_out, k >> 32, k & 0xffff_ffff)?;
        }
        return Ok(());
    }
    let mut wrapped = None;
    for (i, &k) in keys.iter().enumerate() {
        // The increments miss the L2 (a batch's counters span a bucket's
        // node range): ask for the line of the key PREFETCH_AHEAD on early.
        #[cfg(target_arch = "x86_64")]
        if let Some(&f) = keys.get(i + PREFETCH_AHEAD) {
            // SAFETY: a prefetch hint never faults; the address is in bounds (covered above).
            unsafe {
                use std::arch::x86_64::{_mm_prefetch, _MM_HINT_T0};
                _mm_prefetch::<_MM_HINT_T0>(degrees.as_ptr().add((f >> 32) as usize) as *const i8);
            }
        }
        let (d, s) = ((k >> 32) as usize, (k & 0xffff_ffff) as usize);
        let c = &mut degrees[d];
        *c = c.wrapping_add(1);
        if *c == 0 {
            wrapped = Some(d);
        }
        has_out[s / 64] |= 1u64 << (s % 64);
    }
    match wrapped {
        Some(d) => Err(BuildError::config(format!("node {d} has more than {} neighbors", u32::MAX))),
        None => Ok(()),
    }
}

/// Keys between a degree counter's prefetch and its increment.
const PREFETCH_AHEAD: usize = 16;

/// Parse, check, normalise and sort the edges; write `edges.sorted` (keys
/// `dst << 32 | src`, ascending) and count degrees.
///
/// With `--symmetrize` the added reverse copies are sorted apart from the
/// input's own edges, and the two sorted streams are merged here, so each
/// stored entry knows how many copies came from the input and how many were
/// added: `--dedup`'s "duplicates removed" counts repeated input edges only,
/// and reverse copies that met an existing entry are counted on their own
/// (an already symmetric input is reported as such, not as duplicates).
fn preprocess_edges(
    tmp: &Path,
    opts: &BuildOptions,
    edges: &mut dyn EdgeSource,
    declared: Option<u64>,
    chunk_bytes: u64,
    progress: &Progress,
) -> Result<EdgeResult> {
    let t = Instant::now();
    let half = if opts.symmetrize { (chunk_bytes / 2).max(SORT_CHUNK_MIN_BYTES / 2) } else { chunk_bytes };
    // With --dedup each run keeps one copy of a key: the merge needs only
    // whether a key came from the input and/or as an added reverse copy; the
    // counts of removed copies follow from the pushed totals (below).
    // When the node count and the edge count are known up front (npy input
    // with features or a declared count), the sorts are bucketed by key
    // range instead of run-and-merge (`sort.rs`).
    let (mut sorter, mut reverse, bucketed) = match (declared, edges.edges_hint()) {
        (Some(n), Some(e)) => {
            let bound = n << 32;
            let loops = if opts.self_loops == SelfLoops::Add { n } else { 0 };
            (
                // Sources are below n too: bucket files keep only their low bits.
                ExternalSorter::bucketed(tmp, "edges", half, bound, e + loops).with_low_bound(n),
                ExternalSorter::bucketed(tmp, "reverse", half, bound, if opts.symmetrize { e } else { 0 })
                    .with_low_bound(n),
                true,
            )
        }
        _ => (ExternalSorter::new(tmp, "edges", half), ExternalSorter::new(tmp, "reverse", half), false),
    };
    let mut task = progress.task("edges", "B", edges.bytes_total());
    // Without --dedup every pushed key is stored: count degrees now and let
    // the layout pass consume the merge (one write + read of every key less
    // than through `edges.sorted`).
    // The sorters show each key to their observer once, batched by key
    // range in bucketed mode (degree counters of one range stay in cache),
    // on a spill thread beside this one that also appends the bucket files.
    // Both sorters count into the same arrays: one lock per batch.
    // With --dedup too, when the sort is bucketed (every copy of a key in
    // one bucket, sorted when the layout reaches it): the layout then keeps
    // one copy of each key as it reads the merge, and the counts below are
    // the copies pushed, an upper bound of the stored degrees (the layout
    // pass counts the stored ones; docs/build.md). Run-and-merge
    // sorts and relabelling still go through `edges.sorted`.
    let direct = !opts.dedup || (bucketed && opts.reorder == Reorder::None);
    // Counted in every mode: with --dedup they choose the inline cap.
    let counts = std::sync::Arc::new(std::sync::Mutex::new(match declared {
        Some(n) => (huge_zeroed::<u32>(n as usize), huge_zeroed::<u64>((n as usize).div_ceil(64))),
        None => (Vec::new(), Vec::new()),
    }));
    let observer = || -> crate::sort::Observer {
        let counts = counts.clone();
        Box::new(move |keys: &[u64]| -> Result<()> {
            let mut g = counts.lock().unwrap_or_else(|e| e.into_inner());
            let (degrees, has_out) = &mut *g;
            count_entries(degrees, has_out, keys)
        })
    };
    sorter = sorter.with_dedup(opts.dedup).with_spill_thread(observer())?;
    reverse = reverse.with_dedup(opts.dedup).with_spill_thread(observer())?;
    let (mut input_edges, mut loops_dropped, mut max_id) = (0u64, 0u64, None::<u64>);
    let mut last_bytes = 0;
    // A reader thread reads and parses the next batches while this one
    // pushes the current one; batches go back to it for reuse (a fresh
    // allocation per batch costs page faults: measured worse).
    std::thread::scope(|scope| -> Result<()> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<(Vec<(u64, u64)>, u64)>>(READ_AHEAD_BATCHES);
        let (free_tx, free_rx) = std::sync::mpsc::channel::<Vec<(u64, u64)>>();
        let reader = std::thread::Builder::new()
            .name("edges-read".into())
            .spawn_scoped(scope, move || {
                loop {
                    let mut batch = free_rx.try_recv().unwrap_or_else(|_| Vec::with_capacity(EDGE_BATCH));
                    batch.clear();
                    let r = edges.next_batch(&mut batch, EDGE_BATCH).map(|more| (more, edges.bytes_done()));
                    let msg = match r {
                        Ok((false, _)) => return,
                        Ok((true, done)) => Ok((batch, done)),
                        Err(e) => Err(e),
                    };
                    let failed = msg.is_err();
                    if tx.send(msg).is_err() || failed {
                        return; // the pusher stopped (its error wins), or ours is delivered
                    }
                }
            })
            .map_err(|e| BuildError::config(format!("cannot start the edge reader thread: {e}")))?;
        let r = (|| -> Result<()> {
            for msg in &rx {
                progress.check()?;
                let (batch, done) = msg?;
                for &(s, d) in &batch {
                    input_edges += 1;
                    max_id = Some(max_id.map_or(s.max(d), |m| m.max(s).max(d)));
                    if s == d && opts.self_loops != SelfLoops::Keep {
                        loops_dropped += 1;
                        continue;
                    }
                    sorter.push(d << 32 | s)?;
                    if opts.symmetrize && s != d {
                        reverse.push(s << 32 | d)?;
                    }
                }
                let _ = free_tx.send(batch);
                task.add(done - last_bytes);
                last_bytes = done;
            }
            Ok(())
        })();
        drop(rx); // a reader blocked in send() sees the channel closed
        let _ = reader.join();
        r
    })?;
    task.finish();
    let num_nodes = declared.unwrap_or(max_id.map_or(0, |m| m + 1));
    let mut loops_added = 0;
    if opts.self_loops == SelfLoops::Add {
        for v in 0..num_nodes {
            sorter.push(v << 32 | v)?;
        }
        loops_added = num_nodes;
    }
    let runs = (sorter.runs() + reverse.runs()) as u64;
    let (pushed_input, pushed_reverse) = (sorter.len(), reverse.len());
    let pushed = pushed_input + pushed_reverse;
    // Degree array (4 B/node): after the chunk is released when the sort
    // spilled; otherwise beside the in-memory chunk, which the budget covers
    // when the node count was known up front.
    let merged = sorter.finish()?;
    let merged_rev = reverse.finish()?;
    // Both sorters are finished: their observers (and spill threads) are gone.
    let (mut degrees, mut has_out) = std::sync::Arc::try_unwrap(counts)
        .map_err(|_| BuildError::config("internal: degree counters still shared after the sort"))?
        .into_inner()
        .unwrap_or_else(|e| e.into_inner());
    let sorted_path = tmp.join("edges.sorted");
    degrees.resize(num_nodes as usize, 0);
    has_out.resize((num_nodes as usize).div_ceil(64), 0);
    let raw_hist = opts.dedup.then(|| degree_histogram(&degrees));
    let dedup = opts.dedup.then_some((pushed_input, pushed_reverse));
    if direct {
        // A dedup keeps at least one copy of every key: who has a neighbor
        // or an out-edge is the same before and after it.
        let isolated = isolated_nodes(&degrees, &has_out);
        return Ok(EdgeResult {
            num_nodes,
            sorted_path,
            direct: Some(EdgeStream::new(merged, merged_rev, opts.symmetrize, dedup)),
            degrees,
            raw_hist,
            isolated,
            num_entries: pushed,
            input_edges,
            self_loops_dropped: loops_dropped,
            self_loops_added: loops_added,
            duplicates_removed: 0,
            reverse: ReverseCounts::default(), // counted by the stream during the layout
            runs,
            seconds: t.elapsed().as_secs_f64(),
        });
    }
    drop((degrees, has_out)); // the raw counts: the merge counts the stored entries
    let mut degrees = vec![0u32; num_nodes as usize];
    // One bit per node (N/8 B beside the 4 B/node degrees): set when the node
    // is some stored entry's source, i.e. has an out-edge.
    let mut has_out = vec![0u64; (num_nodes as usize).div_ceil(64)];
    // Buffered, as the feature stage: read back by the layout right after.
    // (O_DIRECT both ways, the read-back on a thread, measured slower on a
    // 2 GiB input: layout 2.5-2.7 s against 1.6-1.9 s from the page cache.)
    let mut out = OutFile::create(&sorted_path)?;
    let mut task = progress.task("merge", "edges", merged.total_keys() + merged_rev.total_keys());
    // The same stream a bucketed --dedup build hands the layout: one copy
    // per key, the groups counted for the report.
    let mut stream = EdgeStream::new(merged, merged_rev, opts.symmetrize, dedup);
    let (mut entries, mut shown) = (0u64, 0u64);
    let mut block: Vec<u64> = Vec::with_capacity(PIPE_BLOCK_KEYS);
    let mut buf: Vec<u8> = Vec::with_capacity(PIPE_BLOCK_KEYS * 8);
    loop {
        block.clear();
        stream.fill(&mut block, PIPE_BLOCK_KEYS)?;
        if block.is_empty() {
            break;
        }
        for &k in &block {
            count_entry(&mut degrees, &mut has_out, k >> 32, k & 0xffff_ffff)?;
            buf.extend_from_slice(&k.to_le_bytes());
        }
        entries += block.len() as u64;
        out.write(&buf)?;
        buf.clear();
        progress.check()?;
        task.add(stream.read - shown);
        shown = stream.read;
    }
    task.finish();
    out.finish()?;
    let (dups, merged_copies) = stream.dedup_removed().expect("this path runs with --dedup only");
    let mut rc = stream.rc;
    rc.merged = merged_copies;
    drop(stream);
    let isolated = isolated_nodes(&degrees, &has_out);
    Ok(EdgeResult {
        num_nodes,
        sorted_path,
        direct: None,
        degrees,
        raw_hist,
        isolated,
        num_entries: entries,
        input_edges,
        self_loops_dropped: loops_dropped,
        self_loops_added: loops_added,
        duplicates_removed: dups,
        reverse: rc,
        runs,
        seconds: t.elapsed().as_secs_f64(),
    })
}

fn degree_histogram(degrees: &[u32]) -> DegreeHistogram {
    let mut h = DegreeHistogram::new();
    degrees.iter().for_each(|&d| h.add(d as u64));
    h
}

/// Nodes with neither a stored neighbor nor an out-edge.
fn isolated_nodes(degrees: &[u32], has_out: &[u64]) -> u64 {
    degrees.iter().enumerate().filter(|&(v, &deg)| deg == 0 && has_out[v / 64] & (1u64 << (v % 64)) == 0).count() as u64
}

enum KeyStream {
    File(KeyFileReader),
    Merged(Merged),
    Direct(Box<PipedEdges>),
}
impl KeyStream {
    fn next_key(&mut self) -> Result<Option<u64>> {
        match self {
            KeyStream::File(r) => r.next_key(),
            KeyStream::Merged(m) => m.next_key(),
            KeyStream::Direct(e) => e.next_key(),
        }
    }
    /// A drained direct `--dedup` stream's [`EdgeStream::dedup_removed`].
    fn dedup_removed(&self) -> Option<(u64, u64)> {
        match self {
            KeyStream::Direct(e) => e.drained.as_ref()?.dedup_removed(),
            _ => None,
        }
    }
    /// `--symmetrize` counts of a direct stream, once it is drained.
    fn reverse_counts(&self) -> Option<ReverseCounts> {
        match self {
            KeyStream::Direct(e) => e.drained.as_ref().map(|s| s.rc),
            _ => None,
        }
    }
}

#[allow(clippy::too_many_arguments)]
fn finish_build(
    tmp: &Path,
    opts: &BuildOptions,
    progress: &Progress,
    t0: Instant,
    er: &mut EdgeResult,
    side: SideLater,
    placement: FeaturePlacement,
    feat_dim: u32,
    feat_dtype: Dtype,
    fmt_name: String,
    edges: &dyn EdgeSource,
) -> Result<BuildReport> {
    let t_layout = Instant::now();
    let n = er.num_nodes;
    let mut files: Vec<(String, u64, u32)> = Vec::new();
    // A running side thread writes no stage (its rows go to the final
    // features.fg), so nothing before the manifest needs it.
    let staged = matches!(&side, SideLater::Ready(s) if s.staged);

    // A --dedup stream yields the stored entries; the degrees counted so far
    // are the copies pushed (`EdgeResult::degrees`).
    let exact = er.direct.as_ref().is_none_or(|e| e.dedup.is_none());
    // Relabelling.
    let source = match er.direct.take() {
        Some(e) => KeyStream::Direct(Box::new(PipedEdges::start(e)?)),
        None => KeyStream::File(KeyFileReader::open(&er.sorted_path)?),
    };
    let (old_of_new, keys) = match opts.reorder {
        Reorder::None => (None, source),
        Reorder::Degree => {
            let mut order: Vec<u32> = (0..n as u32).collect();
            // Highest degree first; ties by id keep the result deterministic.
            order.sort_by_key(|&v| (std::cmp::Reverse(er.degrees[v as usize]), v));
            let mut new_of_old = vec![0u32; n as usize];
            for (i, &o) in order.iter().enumerate() {
                new_of_old[o as usize] = i as u32;
            }
            let chunk = opts.memory_budget.saturating_sub(FIXED_OVERHEAD_BYTES + n * 16).max(SORT_CHUNK_MIN_BYTES);
            let mut sorter = ExternalSorter::new(tmp, "relabel", chunk);
            let mut r = source;
            let mut task = progress.task("relabel", "edges", er.num_entries);
            while let Some(k) = r.next_key()? {
                let (d, s) = ((k >> 32) as usize, (k & 0xffff_ffff) as usize);
                sorter.push((new_of_old[d] as u64) << 32 | new_of_old[s] as u64)?;
                task.add(1);
            }
            task.finish();
            if let Some(rc) = r.reverse_counts() {
                er.reverse = rc;
            }
            drop(r); // removes the run files
            let permuted: Vec<u32> = order.iter().map(|&o| er.degrees[o as usize]).collect();
            er.degrees = permuted;
            files.push(write_npy_i64(&tmp.join(NODE_ORDER_FILE), order.iter().map(|&v| v as i64), n)?);
            files.push(write_npy_i64(&tmp.join(NODE_INDEX_FILE), new_of_old.iter().map(|&v| v as i64), n)?);
            drop(new_of_old);
            let _ = std::fs::remove_file(&er.sorted_path);
            (Some(order), KeyStream::Merged(sorter.finish()?))
        }
    };

    // The inline cap: with --dedup from the copies pushed (see
    // `EdgeResult::raw_hist`), else from the degrees.
    let cap_hist = er.raw_hist.take().unwrap_or_else(|| degree_histogram(&er.degrees));
    let inline_row = if placement == FeaturePlacement::Inline { feat_dim * feat_dtype.size() as u32 } else { 0 };
    let cap = choose_inline_cap(opts.page_size, 4, inline_row, n, &cap_hist);
    let layout_of = |entries: u64, overflow_entries: u64| -> Result<Layout> {
        let l = Layout::new(
            "build",
            opts.page_size,
            n,
            entries,
            4,
            feat_dim,
            feat_dtype,
            placement,
            cap,
            overflow_entries,
        )?;
        Ok(l.with_dataset_id(opts.dataset_id))
    };
    // Upper bounds while the degrees are (a streamed --dedup); the headers
    // get the stored counts when the layout pass has them.
    let overflow_entries: u64 = er.degrees.iter().map(|&d| (d as u64).saturating_sub(cap as u64)).sum();
    let mut layout = layout_of(er.num_entries, overflow_entries)?;

    // Feature rows for the layout pass.
    let stage_path = tmp.join("features.stage");
    let row_bytes = layout.row_bytes() as usize;
    let mut rows = RowFeed::new(
        &stage_path,
        staged,
        opts.synthetic_features.is_some(),
        row_bytes,
        feat_dtype,
        opts.seed,
        old_of_new.is_some(),
    )?;
    let mut feat_out = if placement == FeaturePlacement::Separate && !staged && opts.synthetic_features.is_none() {
        None // final file already written by the side thread, or no features
    } else if placement == FeaturePlacement::Separate {
        let mut f = OutFile::create_direct(tmp.join(FEATURES_FILE))?;
        f.write(&FeatureHeader::from_layout(&layout).encode())?;
        Some((f, Vec::<u32>::with_capacity(n as usize)))
    } else {
        None
    };

    let mut graph = OutFile::create_direct(tmp.join(GRAPH_FILE))?;
    graph.write(&GraphHeader::from_layout(&layout).encode())?;
    let mut ovf = OverflowWriter::new(&tmp.join(OVERFLOW_FILE), &layout)?;
    let p = opts.page_size as usize;
    let s = layout.slot_bytes as usize;
    let k = layout.slots_per_page as u64;
    let mut page = vec![0u8; p];
    let mut keys = keys;
    let mut pending = keys.next_key()?;
    let mut inline: Vec<u64> = Vec::with_capacity(cap as usize);
    let mut row = vec![0u8; row_bytes];
    let pad = vec![0u8; layout.feature_stride() as usize - row_bytes.min(layout.feature_stride() as usize)];
    let mut task = progress.task("layout", "nodes", n);
    let mut spilled_nodes = 0u64;
    let mut stored = 0u64;
    for v in 0..n {
        inline.clear();
        let start = ovf.next_entry;
        // The keys are sorted by destination: node v's run of them.
        let mut deg = 0u64;
        while let Some(key) = pending.filter(|&k| k >> 32 == v) {
            let src = key & 0xffff_ffff;
            if deg < cap as u64 {
                inline.push(src);
            } else {
                ovf.push(src)?;
            }
            deg += 1;
            pending = keys.next_key()?;
        }
        if exact && deg != er.degrees[v as usize] as u64 {
            return Err(BuildError::config(format!(
                "internal: node {v} has {deg} stored neighbors in the edge stream but {} counted",
                er.degrees[v as usize]
            )));
        }
        er.degrees[v as usize] = deg as u32; // <= the count pushed, which fit
        stored += deg;
        let first_ovf = if deg > cap as u64 {
            spilled_nodes += 1;
            start
        } else {
            0
        };
        let original = old_of_new.as_ref().map_or(v, |o| o[v as usize] as u64);
        if row_bytes > 0 {
            rows.row(original, &mut row)?;
        }
        let slot_at = ((v % k) as usize) * s;
        encode_slot(
            &layout,
            v,
            deg as u32,
            original,
            first_ovf,
            if placement == FeaturePlacement::Inline { &row } else { &[] },
            &inline,
            &mut page[slot_at..slot_at + s],
        );
        if let Some((f, crcs)) = feat_out.as_mut() {
            crcs.push(layout.crc(v, &row));
            f.write(&row)?;
            f.write(&pad)?;
        }
        if v % k == k - 1 || v == n - 1 {
            let used = ((v % k) as usize + 1) * s;
            page[used..].fill(0);
            graph.write(&page)?;
        }
        task.add(1);
        if v % 65536 == 0 {
            progress.check()?;
        }
    }
    task.finish();
    if pending.is_some() {
        return Err(BuildError::config("internal: edges left after the last node"));
    }
    if let Some(rc) = keys.reverse_counts() {
        er.reverse = rc;
    }
    if let Some((dups, merged)) = keys.dedup_removed() {
        er.duplicates_removed = dups;
        er.reverse.merged = merged;
    }
    drop(keys);
    let _ = std::fs::remove_file(&er.sorted_path);
    let _ = std::fs::remove_file(&stage_path);
    // The stored counts, in the headers written with upper bounds.
    let provisional = layout.clone();
    if !exact {
        er.num_entries = stored;
        layout = layout_of(stored, ovf.next_entry)?;
    }
    // The report's degree statistics, of the stored degrees.
    let hist = if opts.dedup { degree_histogram(&er.degrees) } else { cap_hist };
    let head = |l: &Layout| GraphHeader::from_layout(l).encode();
    let (gb, gc) = graph.finish_patched(&head(&provisional), &head(&layout))?;
    files.push((GRAPH_FILE.into(), gb, gc));
    let head = |l: &Layout| OverflowHeader::from_layout(l).encode();
    let (ob, oc) = ovf.finish_patched(&head(&provisional), &head(&layout))?;
    files.push((OVERFLOW_FILE.into(), ob, oc));
    if let Some((f, crcs)) = feat_out {
        let (b, c) = f.finish()?;
        files.push((FEATURES_FILE.into(), b, c));
        files.push({
            let (b2, c2) = write_npy_u32(&tmp.join(FEATURE_CRC_FILE), &crcs)?;
            (FEATURE_CRC_FILE.into(), b2, c2)
        });
    }
    let layout_seconds = t_layout.elapsed().as_secs_f64();
    let mut side = side.get()?;
    files.append(&mut side.files);

    let (skipped, examples) = edges.skipped();
    let manifest = Manifest {
        magic: MANIFEST_MAGIC.into(),
        format_version: FORMAT_VERSION,
        created_by: format!("flashgnn {}", env!("CARGO_PKG_VERSION")),
        page_size: opts.page_size,
        num_nodes: n,
        num_edges: er.num_entries,
        id_bytes: 4,
        features: FeatureInfo {
            dim: feat_dim,
            dtype: feat_dtype,
            placement: if placement == FeaturePlacement::Inline { "inline" } else { "separate" }.into(),
            synthetic: opts.synthetic_features.is_some(),
        },
        graph: flashgnn_format::manifest::GraphInfo {
            inline_cap: cap,
            slot_bytes: layout.slot_bytes,
            slots_per_page: layout.slots_per_page,
            overflow_entries: layout.overflow_entries,
        },
        degree: DegreeStats {
            min: er.degrees.iter().copied().min().unwrap_or(0) as u64,
            max: er.degrees.iter().copied().max().unwrap_or(0) as u64,
            mean: if n > 0 { er.num_entries as f64 / n as f64 } else { 0.0 },
            median: hist.quantile(0.5).unwrap_or(DegreeHistogram::BUCKETS as u64),
            p99: hist.quantile(0.99).unwrap_or(DegreeHistogram::BUCKETS as u64),
            isolated: er.isolated,
            no_neighbors: Some(hist.counts[0]),
            spilled_nodes,
        },
        labels: side.labels.clone(),
        splits: side.splits.iter().cloned().collect(),
        reorder: match opts.reorder {
            Reorder::None => "none",
            Reorder::Degree => "degree",
        }
        .into(),
        build: BuildInfo {
            source: opts.input.display().to_string(),
            source_format: fmt_name,
            symmetrize: opts.symmetrize,
            dedup: opts.dedup,
            self_loops: format!("{:?}", opts.self_loops).to_lowercase(),
            input_edges: er.input_edges,
            self_loops_dropped: er.self_loops_dropped,
            self_loops_added: er.self_loops_added,
            duplicates_removed: er.duplicates_removed,
            splits_made: side.splits_made.clone(),
            reverse_duplicates_removed: er.reverse.merged,
            input_edges_distinct: er.reverse.distinct_input,
            input_edges_with_reverse: er.reverse.present,
            preprocess_seconds: er.seconds,
            feature_seconds: side.feature_seconds,
            layout_seconds,
            total_seconds: t0.elapsed().as_secs_f64(),
            peak_rss_bytes: flashgnn_io::rss::peak_rss_bytes(),
            memory_budget_bytes: opts.memory_budget,
            sort_runs: er.runs,
        },
        files: files.into_iter().map(|(name, bytes, crc32c)| (name, FileEntry { bytes, crc32c })).collect(),
        dataset_id: opts.dataset_id,
    };
    manifest.layout("manifest")?; // the invariants we promise readers hold
    let mut m = OutFile::create(tmp.join(MANIFEST_FILE))?;
    m.write(manifest.to_json().as_bytes())?;
    m.finish()?;
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

fn write_npy_i64(path: &Path, values: impl Iterator<Item = i64>, n: u64) -> Result<(String, u64, u32)> {
    let mut out = OutFile::create(path)?;
    out.write(&encode_header(Dtype::Int64, &[n]))?;
    let mut buf = Vec::with_capacity(1 << 20);
    for v in values {
        buf.extend_from_slice(&v.to_le_bytes());
        if buf.len() >= 1 << 20 {
            out.write(&buf)?;
            buf.clear();
        }
    }
    out.write(&buf)?;
    let (b, c) = out.finish()?;
    Ok((path.file_name().unwrap().to_string_lossy().into_owned(), b, c))
}

/// Supplies feature rows by original id: from the stage file (sequentially
/// without relabelling, by `pread` with it) or synthesised.
struct RowFeed {
    stage: Option<FileReader>,
    synthetic: bool,
    row_bytes: usize,
    dtype: Dtype,
    seed: u64,
    random: bool,
    buf: Vec<u8>,
    buf_first: u64,
    buf_rows: u64,
}

impl RowFeed {
    fn new(
        path: &Path,
        staged: bool,
        synthetic: bool,
        row_bytes: usize,
        dtype: Dtype,
        seed: u64,
        random: bool,
    ) -> Result<RowFeed> {
        let stage = if staged { Some(FileReader::open(path)?) } else { None };
        Ok(RowFeed { stage, synthetic, row_bytes, dtype, seed, random, buf: Vec::new(), buf_first: 0, buf_rows: 0 })
    }
    fn row(&mut self, original: u64, out: &mut [u8]) -> Result<()> {
        if self.synthetic {
            synthetic_row(self.seed, original, self.row_bytes / self.dtype.size(), self.dtype, out);
            return Ok(());
        }
        let Some(stage) = &self.stage else {
            out.fill(0);
            return Ok(());
        };
        if self.random {
            return Ok(stage.read_exact_at(out, original * self.row_bytes as u64)?);
        }
        if original < self.buf_first || original >= self.buf_first + self.buf_rows {
            let total_rows = stage.len() / self.row_bytes as u64;
            let k = ((STAGE_CHUNK_BYTES / self.row_bytes) as u64).max(1).min(total_rows - original);
            self.buf.resize(k as usize * self.row_bytes, 0);
            stage.read_exact_at(&mut self.buf, original * self.row_bytes as u64)?;
            self.buf_first = original;
            self.buf_rows = k;
        }
        let at = (original - self.buf_first) as usize * self.row_bytes;
        out.copy_from_slice(&self.buf[at..at + self.row_bytes]);
        Ok(())
    }
}

/// Appends neighbor ids into checksummed overflow pages.
struct OverflowWriter {
    layout: Layout,
    out: OutFile,
    page: Vec<u8>,
    per_page: usize,
    id_bytes: usize,
    in_page: usize,
    page_no: u64,
    next_entry: u64,
}

impl OverflowWriter {
    fn new(path: &Path, layout: &Layout) -> Result<OverflowWriter> {
        // Written once, read back only by the verify (O_DIRECT itself): no
        // page-cache copy (~1 s of CPU of a 2 GiB edge input's layout pass).
        let mut out = OutFile::create_direct(path)?;
        out.write(&OverflowHeader::from_layout(layout).encode())?;
        Ok(OverflowWriter {
            layout: layout.clone(),
            out,
            page: vec![0u8; layout.page_size as usize],
            per_page: layout.overflow_ids_per_page() as usize,
            id_bytes: layout.id_bytes as usize,
            in_page: 0,
            page_no: 1,
            next_entry: 0,
        })
    }
    fn push(&mut self, id: u64) -> Result<()> {
        let w = self.id_bytes;
        write_id(id, &mut self.page[self.in_page * w..(self.in_page + 1) * w]);
        self.in_page += 1;
        self.next_entry += 1;
        if self.in_page == self.per_page {
            self.flush()?;
        }
        Ok(())
    }
    fn flush(&mut self) -> Result<()> {
        seal_overflow_page(&self.layout, self.page_no, &mut self.page);
        self.out.write(&self.page)?;
        self.page.fill(0);
        self.in_page = 0;
        self.page_no += 1;
        Ok(())
    }
    /// Flush the last page and finish the file, its header `old` (as
    /// written) replaced by `new`.
    fn finish_patched(mut self, old: &[u8], new: &[u8]) -> Result<(u64, u32)> {
        if self.in_page > 0 {
            self.flush()?;
        }
        Ok(self.out.finish_patched(old, new)?)
    }
}

#[cfg(test)]
mod tests {
    use super::{class_split_sizes, count_entries, count_entry};
    use crate::sort::huge_zeroed;

    #[test]
    fn batched_degree_counting_equals_per_key_counting() {
        // The batch path (no resize check, prefetch, wrap detection) gives
        // the per-key counts and out-edge bits, whether the arrays cover the
        // batch (declared node count) or must grow (undeclared), with hubs.
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        let mut keys = Vec::new();
        for i in 0..200_000u64 {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            let (d, s) = if i % 5 == 0 { (3, x % 70_000) } else { (x % 70_000, (x >> 20) % 70_000) };
            keys.push(d << 32 | s);
        }
        let (mut want_d, mut want_h) = (Vec::new(), Vec::new());
        for &k in &keys {
            count_entry(&mut want_d, &mut want_h, k >> 32, k & 0xffff_ffff).unwrap();
        }
        want_d.resize(70_000, 0);
        want_h.resize(70_000usize.div_ceil(64), 0);
        for declared in [true, false] {
            let (mut d, mut h) = if declared {
                (huge_zeroed::<u32>(70_000), huge_zeroed::<u64>(70_000usize.div_ceil(64)))
            } else {
                (Vec::new(), Vec::new())
            };
            for batch in keys.chunks(4096) {
                count_entries(&mut d, &mut h, batch).unwrap();
            }
            d.resize(70_000, 0);
            h.resize(70_000usize.div_ceil(64), 0);
            assert_eq!(d, want_d, "declared {declared}");
            assert_eq!(h, want_h, "declared {declared}");
        }
        // A counter that would wrap is refused, naming the node.
        let (mut d, mut h) = (vec![0u32; 10], vec![0u64; 1]);
        d[7] = u32::MAX - 1;
        let e = count_entries(&mut d, &mut h, &[7 << 32 | 1, 7 << 32 | 2]).unwrap_err().to_string();
        assert!(e.contains("node 7 has more than"), "{e}");
    }

    #[test]
    fn class_split_sizes_keep_every_class_in_train() {
        assert_eq!(class_split_sizes(100, (0.6, 0.2, 0.2)), [60, 20, 20]);
        // a rare class still gets a training node; test, then val give way
        assert_eq!(class_split_sizes(3, (0.1, 0.2, 0.3)), [1, 1, 1]);
        assert_eq!(class_split_sizes(1, (0.1, 0.45, 0.45)), [1, 0, 0]);
        assert_eq!(class_split_sizes(2, (0.5, 0.5, 0.5)), [1, 1, 0]);
        assert_eq!(class_split_sizes(0, (0.6, 0.2, 0.2)), [0, 0, 0]);
        assert_eq!(class_split_sizes(10, (0.0, 0.5, 0.5)), [0, 5, 5]);
    }
}
