//! Compaction (fold the log into a new base generation) and the bulk
//! `update_graph` (replace the whole graph), both through the importer.
//!
//! Compaction of generation G at durable sequence S:
//!
//! 1. take the published snapshot (seq S, log length L_S) — writers go on;
//! 2. stream base + delta node by node into an
//!    npy-directory importer input under `mut/.compact-(G+1).input/`:
//!    `edge_index.npy` (each stored entry `(src = u, dst = v)` of node v's list
//!    with `u <= v`: the lists are symmetric, so the importer's `--symmetrize`
//!    restores the other direction, and self-loops, which it does not double,
//!    stay single; multiplicities are kept exactly),
//!    `node_feat.npy` (stored dtype), `node_label.npy` (-1 for vertices added
//!    since the base was built and for deleted ones), `{train,val,test}_idx.npy`
//!    carried over. The base is read sequentially in 4 MiB chunks
//!    (`flashgnn_store::scan`, internal order), not one point read per node;
//!    memory is the scan's chunks, one neighbor list and one chunk of labels;
//! 3. `flashgnn_build::build` into `mut/gen-(G+1)` (`--symmetrize`, `--dedup`
//!    as the base was built; same page size, feature placement, dtype and
//!    reordering as the base): exactly the snapshot's entries; the importer
//!    verifies and publishes atomically;
//! 4. `mut/free-(G+1).bin` = the ids deleted at S (isolated in the new base);
//! 5. under the write lock, with no frame queued or in flight: the log bytes
//!    after L_S (frames S+1 …) go into `mut/wal-(G+1).log` (header base_seq S,
//!    written to a temporary name, fsynced, renamed), are replayed over the
//!    new base to rebuild the delta, `CURRENT` switches to G+1, and the new
//!    base + delta + log replace the old ones in memory;
//! 6. the old generation's directory (never generation 0), free list and log
//!    are deleted.
//!
//! A crash before the `CURRENT` rename leaves generation G complete (the new
//! files are leftovers, removed on the next writable open); after it,
//! generation G+1 is complete and G's files are leftovers.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Instant;

use flashgnn_build::{build, BuildOptions, FeatureLayout, Progress, Reorder};
use flashgnn_format::layout::FeaturePlacement;
use flashgnn_format::manifest::LABELS_FILE;
use flashgnn_format::npy::encode_header;
use flashgnn_format::Dtype;
use flashgnn_io::{Disk, IoError, OutFile};
use flashgnn_store::overlay::NODES_MAX;
use flashgnn_store::{Dataset, Delta, Snapshot};

use crate::current::{self, Current};
use crate::graph::{open_base, replay_into, MutableGraph, Published};
use crate::wal::{self, WalFile};
use crate::{MutError, Result};

/// Splits the npy-directory input layout carries (`{name}_idx.npy`).
const SPLITS: [&str; 3] = ["train", "val", "test"];
/// Labels read from the base per chunk while exporting: 64 Ki (512 KiB).
const LABEL_CHUNK: u64 = 1 << 16;

/// What a compaction or `update_graph` did.
#[derive(Debug, Clone, Default)]
pub struct CompactReport {
    pub generation: u64,
    /// Last batch folded into the new base.
    pub base_seq: u64,
    pub num_nodes: u64,
    pub num_edges: u64,
    /// Frames that arrived during the build and were carried to the new log.
    pub tail_frames: u64,
    /// Log frames (batches) and ops folded into the new base, the log bytes
    /// they took, and the nodes the delta held (compaction; 0 for update_graph).
    pub folded_frames: u64,
    pub folded_ops: u64,
    pub folded_wal_bytes: u64,
    pub delta_nodes: u64,
    /// Bytes of the new generation's dataset files.
    pub bytes: u64,
    pub free_ids: u64,
    pub export_seconds: f64,
    pub build_seconds: f64,
    pub switch_seconds: f64,
    /// Split names of the base that the npy input layout cannot carry.
    pub splits_dropped: Vec<String>,
}

impl CompactReport {
    /// The report `compact` and `update_graph` return to their callers;
    /// `seconds` is the whole run (export, build and switch).
    pub fn report(&self) -> serde_json::Value {
        serde_json::json!({
            "generation": self.generation, "base_seq": self.base_seq, "num_nodes": self.num_nodes,
            "num_edges": self.num_edges, "tail_frames": self.tail_frames, "free_ids": self.free_ids,
            "folded_frames": self.folded_frames, "folded_ops": self.folded_ops,
            "folded_wal_bytes": self.folded_wal_bytes, "delta_nodes": self.delta_nodes, "bytes": self.bytes,
            "seconds": self.export_seconds + self.build_seconds + self.switch_seconds,
            "export_seconds": self.export_seconds, "build_seconds": self.build_seconds,
            "switch_seconds": self.switch_seconds, "splits_dropped": self.splits_dropped,
        })
    }
}

/// Raw input of `update_graph`: directed edges `(src[i], dst[i])` over
/// `num_nodes` nodes (symmetrized and deduplicated by the importer), a
/// feature table (`num_nodes` rows of `dim` values of `dtype`, little-endian)
/// and optional labels.
pub struct UpdateGraphInput<'a> {
    pub src: &'a [i64],
    pub dst: &'a [i64],
    pub num_nodes: u64,
    pub features: Option<(&'a [u8], Dtype, u32)>,
    pub labels: Option<&'a [i64]>,
}

/// Removes a temporary input directory on every exit path.
struct DirGuard(PathBuf);
impl Drop for DirGuard {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn fresh_dir(p: &Path) -> Result<()> {
    if p.exists() {
        std::fs::remove_dir_all(p).map_err(|e| IoError::new("removing leftover", p, None, e))?;
    }
    std::fs::create_dir(p).map_err(|e| IoError::new("creating directory", p, None, e))?;
    Ok(())
}

/// Prepare the directories of new generation `ng`: an empty importer input
/// `mut/.{kind}-{ng}.input/` (removed when the returned guard drops) and no
/// leftover at the output `mut/gen-{ng}`. Returns (guard, input, output).
fn new_generation_dirs(disk: &Disk, root: &Path, kind: &str, ng: u64) -> Result<(DirGuard, PathBuf, PathBuf)> {
    let input = current::mut_dir(root).join(format!(".{kind}-{ng}.input"));
    let out = current::gen_dir(root, ng);
    fresh_dir(&input)?;
    let guard = DirGuard(input.clone());
    // A leftover generation (a compaction that crashed before switching
    // CURRENT) is replaced under the rule of every publishing command: only
    // flashgnn output is removed, anything else is refused by name.
    flashgnn_io::check_output(&out, true)?;
    if std::fs::symlink_metadata(&out).is_ok() {
        current::remove_gen_dir(disk, &out)?;
    }
    Ok((guard, input, out))
}

fn npy_out(path: &Path, dtype: Dtype, shape: &[u64]) -> Result<OutFile> {
    let mut o = OutFile::create(path)?;
    o.write(&encode_header(dtype, shape))?;
    Ok(o)
}

fn write_i64s(path: &Path, v: &[i64]) -> Result<()> {
    let mut o = npy_out(path, Dtype::Int64, &[v.len() as u64])?;
    let mut buf = Vec::with_capacity(1 << 20);
    for c in v.chunks(1 << 17) {
        buf.clear();
        c.iter().for_each(|x| buf.extend_from_slice(&x.to_le_bytes()));
        o.write(&buf)?;
    }
    o.finish()?;
    Ok(())
}

/// Carry the base's train/val/test splits (ids below `n`) into `dir`;
/// returns the names the layout cannot carry.
fn export_splits(base: &Dataset, dir: &Path, n: u64) -> Result<Vec<String>> {
    let mut dropped = Vec::new();
    for name in base.manifest().splits.keys() {
        if !SPLITS.contains(&name.as_str()) {
            dropped.push(name.clone());
            continue;
        }
        let ids: Vec<i64> = base.split(name)?.into_iter().filter(|&v| (v as u64) < n).collect();
        write_i64s(&dir.join(format!("{name}_idx.npy")), &ids)?;
    }
    Ok(dropped)
}

/// Feature rows of the npy input, in original-id order. The scan visits the
/// base in internal order: that is original order unless the base was
/// relabelled, and then rows are appended; for a relabelled base each row is
/// written at its position in the preallocated file (one `pwrite` per row
/// into the page cache; the file is fsynced at the end).
enum FeatOut {
    Seq { out: OutFile, next: u64 },
    Placed { file: std::fs::File, path: PathBuf, header: u64, rb: u64 },
}

impl FeatOut {
    fn new(path: &Path, dtype: Dtype, n: u64, dim: u32, placed: bool) -> Result<FeatOut> {
        if !placed {
            return Ok(FeatOut::Seq { out: npy_out(path, dtype, &[n, dim as u64])?, next: 0 });
        }
        let h = encode_header(dtype, &[n, dim as u64]);
        let rb = dim as u64 * dtype.size() as u64;
        let file = std::fs::File::create(path).map_err(|e| IoError::new("creating", path, None, e))?;
        flashgnn_io::pwrite_all(&file, &h, 0)
            .and_then(|_| file.set_len(h.len() as u64 + n * rb))
            .map_err(|e| IoError::new("writing", path, Some(0), e))?;
        Ok(FeatOut::Placed { file, path: path.to_path_buf(), header: h.len() as u64, rb })
    }

    fn put(&mut self, v: u64, row: &[u8]) -> Result<()> {
        match self {
            FeatOut::Seq { out, next } => {
                if v != *next {
                    return Err(MutError::Invalid(format!("internal: feature row {v} exported out of order")));
                }
                *next += 1;
                out.write(row)?;
            }
            FeatOut::Placed { file, path, header, rb } => {
                let at = *header + v * *rb;
                flashgnn_io::pwrite_all(file, row, at).map_err(|e| IoError::new("writing", path, Some(at), e))?;
            }
        }
        Ok(())
    }

    fn finish(self) -> Result<()> {
        match self {
            FeatOut::Seq { out, .. } => {
                out.finish()?;
            }
            FeatOut::Placed { file, path, .. } => {
                file.sync_all().map_err(|e| IoError::new("fsync", &path, None, e))?;
            }
        }
        Ok(())
    }
}

/// Stream base + delta of `snap` into an npy-directory input at `dir`: the
/// base is read sequentially ([`flashgnn_store::scan`], internal order), a
/// node the delta holds a record for takes the record instead, and nodes
/// beyond the base come from the delta alone. Memory: the scan's chunks, one
/// neighbor list, one chunk of labels.
/// Returns (nodes, edges, dropped split names).
fn export_snapshot(snap: &Snapshot, dir: &Path, progress: &Progress) -> Result<(u64, u64, Vec<String>)> {
    let base = &snap.base;
    let d = &snap.delta;
    let n = d.num_nodes();
    let bn = base.num_nodes();
    let e = d.num_edges(base);
    let (dim, dtype) = (d.feature_dim(), d.feature_dtype());
    let rb = dim as usize * dtype.size();
    // The entry count (u <= v only) is known at the end: the header is sized
    // for the upper bound `e` and patched in place.
    let epath = dir.join("edge_index.npy");
    let header_len = encode_header(Dtype::Int64, &[e, 2]).len();
    let mut edges = OutFile::create(&epath)?;
    edges.write_zeros(header_len as u64)?;
    let relabelled = base.maps()?.is_some();
    let mut feats =
        if rb > 0 { Some(FeatOut::new(&dir.join("node_feat.npy"), dtype, n, dim, relabelled)?) } else { None };
    let mut task = progress.task("export", "nodes", n);
    let (mut written, mut half, mut buf) = (0u64, 0u64, Vec::with_capacity(1 << 16));
    let zeros = vec![0u8; rb];
    let mut emit = |v: u64, nbrs: &[u64], row: &[u8]| -> Result<()> {
        if v % 4096 == 0 {
            progress.check()?;
        }
        buf.clear();
        written += nbrs.len() as u64;
        for &u in nbrs.iter().filter(|&&u| u <= v) {
            buf.extend_from_slice(&(u as i64).to_le_bytes());
            buf.extend_from_slice(&(v as i64).to_le_bytes());
        }
        half += (buf.len() / 16) as u64;
        if written > e {
            return Err(MutError::Invalid(format!("internal: export found more than the {e} edges the delta implies")));
        }
        edges.write(&buf)?;
        if let Some(f) = &mut feats {
            f.put(v, if d.is_deleted(v) { &zeros } else { row })?;
        }
        task.add(1);
        Ok(())
    };
    flashgnn_store::scan(base, flashgnn_store::SCAN_CHUNK_BYTES, |node| -> Result<()> {
        let v = node.original;
        match d.record(v) {
            Some(r) => emit(v, &r.neighbors, &r.row),
            None => emit(v, node.neighbors, node.row),
        }
    })?;
    for v in bn..n {
        match d.record(v) {
            Some(r) => emit(v, &r.neighbors, &r.row),
            None => emit(v, &[], &zeros),
        }?;
    }
    task.finish();
    if written != e {
        return Err(MutError::Invalid(format!("internal: export wrote {written} edges, the delta implies {e}")));
    }
    edges.finish()?;
    let h = flashgnn_format::npy::encode_header_len(Dtype::Int64, &[half, 2], header_len)
        .expect("a smaller count fits the header sized for the larger one");
    patch(&epath, &h)?;
    if let Some(f) = feats {
        f.finish()?;
    }
    if base.has_labels() {
        base.check_side_file(LABELS_FILE)?;
        let a = base.node_sized(LABELS_FILE, base.side_array(LABELS_FILE)?)?;
        let mut out = npy_out(&dir.join("node_label.npy"), Dtype::Int64, &[n])?;
        let mut lb = Vec::with_capacity(LABEL_CHUNK as usize * 8);
        let mut start = 0u64;
        while start < n {
            let cnt = LABEL_CHUNK.min(n - start);
            let stored = if start < bn { a.read_i64(start, cnt.min(bn - start))? } else { Vec::new() };
            lb.clear();
            for v in start..start + cnt {
                let l = snap.label_override(v).unwrap_or_else(|| stored[(v - start) as usize]);
                lb.extend_from_slice(&l.to_le_bytes());
            }
            out.write(&lb)?;
            start += cnt;
        }
        out.finish()?;
    }
    let dropped = export_splits(base, dir, n)?;
    Ok((n, e, dropped))
}

/// Overwrite the start of `path` with `bytes`, durably.
fn patch(path: &Path, bytes: &[u8]) -> Result<()> {
    let f = flashgnn_io::open_regular_with(path, std::fs::OpenOptions::new().write(true), 0)?;
    flashgnn_io::pwrite_all(&f, bytes, 0)
        .and_then(|_| f.sync_all())
        .map_err(|e| IoError::new("patching header of", path, Some(0), e))?;
    Ok(())
}

/// Importer options for a new generation shaped like `base`, built through
/// the store's own `disk` (a simulated disk then records the build and can
/// crash it at any point).
fn build_options(disk: &Disk, base: &Dataset, input: &Path, output: &Path, n: u64, dim: u32) -> BuildOptions {
    let mut o = BuildOptions::new(input, output);
    o.disk = disk.clone();
    o.symmetrize = true;
    o.dedup = base.manifest().build.dedup;
    o.num_nodes = Some(n);
    o.page_size = base.layout().page_size;
    o.reorder = if base.manifest().reorder == "none" { Reorder::None } else { Reorder::Degree };
    if dim == base.feature_dim() && dim > 0 {
        o.feature_dtype = Some(base.feature_dtype());
        o.feature_layout = match base.layout().placement {
            FeaturePlacement::Inline => FeatureLayout::Inline,
            FeaturePlacement::Separate => FeatureLayout::Separate,
        };
    }
    // The base's budget, but never below what the importer needs for n
    // nodes (64 MiB buffers + 16 B/node + a 16 MiB sort chunk).
    let need = flashgnn_build::builder::FIXED_OVERHEAD_BYTES + n * 16 + (16 << 20);
    o.memory_budget = base.manifest().build.memory_budget_bytes.max(need);
    o
}

/// Frames and ops in the first `len` bytes of the log at `path` (what a
/// compaction folds; bytes before the durable end never change).
fn count_folded(path: &Path, len: u64) -> Result<wal::ReplayReport> {
    let mut b = wal::read_log(path)?;
    b.truncate(len as usize);
    wal::replay(&path.display().to_string(), &b, |_, _, _| Ok(()))
}

fn dataset_bytes(ds: &Dataset) -> u64 {
    ds.manifest().files.values().map(|f| f.bytes).sum()
}

impl MutableGraph {
    /// Fold the log into a new base generation (see the module docs); writes
    /// continue while the new base is built.
    pub fn compact(&self, progress: &Progress) -> Result<CompactReport> {
        let _one = self.compact_lock.lock().unwrap();
        self.check_not_read_only()?;
        let t0 = Instant::now();
        let Published { snap, wal_end } = self.published();
        let (g, ng) = (snap.generation, snap.generation + 1);
        let (_guard, input, out) = new_generation_dirs(&self.disk, &self.root, "compact", ng)?;
        let folded = count_folded(&current::wal_path(&self.root, g), wal_end)?;
        let (n, e, dropped) = export_snapshot(&snap, &input, progress)?;
        let t1 = Instant::now();
        build(&build_options(&self.disk, &snap.base, &input, &out, n, snap.delta.feature_dim()), progress)?;
        let new_base = open_base(&out)?;
        if new_base.num_nodes() != n || new_base.num_edges() != e {
            return Err(MutError::Invalid(format!(
                "internal: compacted generation {ng} has {} nodes and {} edges; expected {n} and {e}",
                new_base.num_nodes(),
                new_base.num_edges()
            )));
        }
        let bytes = dataset_bytes(&new_base);
        let free: Vec<u64> = snap.delta.free_ids().copied().collect();
        current::write_free(&self.disk, &current::free_path(&self.root, ng), &free)?;
        let t2 = Instant::now();
        let tail_frames = self.switch(g, ng, snap.seq, new_base, free.clone(), Some(wal_end))?;
        let t3 = Instant::now();
        self.remove_generation(g)?;
        Ok(CompactReport {
            generation: ng,
            base_seq: snap.seq,
            num_nodes: n,
            num_edges: e,
            tail_frames,
            folded_frames: folded.frames,
            folded_ops: folded.ops,
            folded_wal_bytes: folded.valid_len.saturating_sub(wal::WAL_HEADER_BYTES),
            delta_nodes: snap.delta.len() as u64,
            bytes,
            free_ids: free.len() as u64,
            export_seconds: (t1 - t0).as_secs_f64(),
            build_seconds: (t2 - t1).as_secs_f64(),
            switch_seconds: (t3 - t2).as_secs_f64(),
            splits_dropped: dropped,
        })
    }

    /// HolisticGNN's UpdateGraph: build a brand-new generation from a raw
    /// edge array and embedding table (symmetrized, deduplicated) and switch
    /// to it atomically. Every earlier operation is superseded.
    pub fn update_graph(&self, inp: &UpdateGraphInput, progress: &Progress) -> Result<CompactReport> {
        let _one = self.compact_lock.lock().unwrap();
        self.check_not_read_only()?;
        let t0 = Instant::now();
        let n = inp.num_nodes;
        if inp.src.len() != inp.dst.len() {
            return Err(MutError::Invalid(format!(
                "src has {} entries but dst has {}: they must have the same length",
                inp.src.len(),
                inp.dst.len()
            )));
        }
        if n == 0 || n >= NODES_MAX {
            return Err(MutError::Invalid(format!("num_nodes {n} out of range [1, {NODES_MAX})")));
        }
        if let Some((bytes, dtype, dim)) = inp.features {
            let want = n as u128 * dim as u128 * dtype.size() as u128;
            if bytes.len() as u128 != want || !dtype.is_float() {
                return Err(MutError::Invalid(format!(
                    "embeddings: {} bytes of {} is not num_nodes {n} x dim {dim} (need {want} bytes of a float dtype)",
                    bytes.len(),
                    dtype.name()
                )));
            }
        }
        if let Some(l) = inp.labels {
            if l.len() as u64 != n {
                return Err(MutError::Invalid(format!("labels has {} entries; num_nodes is {n}", l.len())));
            }
        }
        let snap = self.snapshot();
        let (g, ng) = (snap.generation, snap.generation + 1);
        let (_guard, input, out) = new_generation_dirs(&self.disk, &self.root, "update", ng)?;
        // The edge array and the feature table are written by two threads;
        // the importer then overlaps the edge sort with feature conversion.
        let (er, fr) = std::thread::scope(|s| {
            let fh = s.spawn(|| -> Result<()> {
                if let Some((bytes, dtype, dim)) = inp.features {
                    let mut f = npy_out(&input.join("node_feat.npy"), dtype, &[n, dim as u64])?;
                    for c in bytes.chunks(1 << 20) {
                        f.write(c)?;
                    }
                    f.finish()?;
                }
                Ok(())
            });
            let er = (|| -> Result<()> {
                let mut o = npy_out(&input.join("edge_index.npy"), Dtype::Int64, &[inp.src.len() as u64, 2])?;
                let mut buf = Vec::with_capacity(1 << 20);
                for (sc, dc) in inp.src.chunks(1 << 16).zip(inp.dst.chunks(1 << 16)) {
                    buf.clear();
                    for (a, b) in sc.iter().zip(dc) {
                        buf.extend_from_slice(&a.to_le_bytes());
                        buf.extend_from_slice(&b.to_le_bytes());
                    }
                    o.write(&buf)?;
                }
                o.finish()?;
                Ok(())
            })();
            (er, fh.join().unwrap_or_else(|_| Err(MutError::Invalid("internal: feature writer panicked".into()))))
        });
        er?;
        fr?;
        if let Some(l) = inp.labels {
            write_i64s(&input.join("node_label.npy"), l)?;
        }
        let dropped = export_splits(&snap.base, &input, n)?;
        let t1 = Instant::now();
        let dim = inp.features.map(|f| f.2).unwrap_or(0);
        let mut bo = build_options(&self.disk, &snap.base, &input, &out, n, dim);
        bo.dedup = true; // a raw edge array: HolisticGNN's UpdateGraph deduplicates
        build(&bo, progress)?;
        let new_base = open_base(&out)?;
        current::write_free(&self.disk, &current::free_path(&self.root, ng), &[])?;
        let t2 = Instant::now();
        let num_edges = new_base.num_edges();
        let bytes = dataset_bytes(&new_base);
        let seq = self.switch(g, ng, 0, new_base, Vec::new(), None)?;
        let t3 = Instant::now();
        self.remove_generation(g)?;
        Ok(CompactReport {
            generation: ng,
            base_seq: seq,
            num_nodes: n,
            num_edges,
            tail_frames: 0,
            bytes,
            free_ids: 0,
            export_seconds: (t1 - t0).as_secs_f64(),
            build_seconds: (t2 - t1).as_secs_f64(),
            switch_seconds: (t3 - t2).as_secs_f64(),
            splits_dropped: dropped,
            ..Default::default()
        })
    }

    /// Switch from generation `g` to `ng` under the write lock. With
    /// `tail_from = Some(L)` (compaction) the log bytes after `L` become the
    /// new log, whose base is `base_seq`; with None (update_graph) the new log
    /// is empty and its base is the last sequence number. Returns the number
    /// of carried frames (compaction) or the new base sequence number.
    fn switch(
        &self,
        g: u64,
        ng: u64,
        base_seq: u64,
        new_base: Arc<Dataset>,
        free: Vec<u64>,
        tail_from: Option<u64>,
    ) -> Result<u64> {
        let mut head = self.head.lock().unwrap();
        // `close` marks the graph closed before it takes `head`: once we hold `head`, a closed graph
        // has given up its log (or is about to), so the new generation must not be switched in.
        self.check_open()?;
        if head.generation != g {
            return Err(MutError::Unavailable(format!(
                "generation changed from {g} to {} during the build",
                head.generation
            )));
        }
        let mut q = self.quiesce(&mut head)?;
        let last = head.next_seq - 1;
        let base_seq = if tail_from.is_some() { base_seq } else { last };
        // The new log (header, then the carried frames) is built in memory,
        // written, and replayed from the same bytes.
        let mut bytes = wal::encode_header(ng, base_seq, new_base.manifest().dataset_id);
        let at = bytes.len();
        if let Some(from) = tail_from {
            q.wal.as_ref().expect("writable").read_from(from, &mut bytes)?;
        }
        let wpath = current::wal_path(&self.root, ng);
        // The carried frames may start inside a commit group of the old log;
        // the new log is durable as a whole before it is used, so each frame
        // becomes a group of its own (version 2, index 0).
        wal::reset_group_indices(&wpath.display().to_string(), &mut bytes[at..])?;
        wal::write_log(&self.disk, &wpath, &bytes)?;
        let mut delta = Delta::new(&new_base, free)?;
        let rep = replay_into(&wpath.display().to_string(), &bytes, &new_base, &mut delta)?;
        if rep.last_seq != last || rep.torn_bytes != 0 {
            return Err(MutError::Corrupt(format!(
                "{}: carried log ends at seq {} with {} torn bytes; expected seq {last}",
                wpath.display(),
                rep.last_seq,
                rep.torn_bytes
            )));
        }
        let wal_file = WalFile::open(&self.disk, &wpath, rep.valid_len)?;
        // The new CURRENT carries the binding forward: the same dataset, the new base's id.
        let ids = current::StoreIds { root: self.root_dataset_id, generation: new_base.manifest().dataset_id };
        if let Err(e) =
            current::write_current(&self.disk, &self.root, &Current { generation: ng, base_seq, ids: Some(ids) })
        {
            // CURRENT may or may not name the new generation now: appending to
            // either log could lose acknowledged writes. Stop writing.
            q.fail(format!("switching CURRENT to generation {ng}: {e}"));
            return Err(e);
        }
        q.wal = Some(wal_file);
        head.base = new_base.clone();
        head.delta = delta.clone();
        head.generation = ng;
        let snap = Arc::new(Snapshot { base: new_base, delta, generation: ng, seq: last });
        *self.published.write().unwrap() = Published { snap, wal_end: rep.valid_len };
        Ok(if tail_from.is_some() { rep.frames } else { last })
    }

    /// Delete generation `g`'s files (its directory unless it is generation 0,
    /// its free list and its log) once nothing names them.
    fn remove_generation(&self, g: u64) -> Result<()> {
        let mut paths = vec![current::wal_path(&self.root, g)];
        if g > 0 {
            paths.push(current::gen_dir(&self.root, g));
            paths.push(current::free_path(&self.root, g));
        }
        for p in paths {
            if p.is_dir() {
                // Crash-safe: a half-removed `gen-K` would no longer be recognised as ours.
                current::remove_gen_dir(&self.disk, &p)?;
                continue;
            }
            match current::remove_path(&self.disk, &p) {
                Ok(()) => {}
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
                Err(e) => return Err(IoError::new("removing old generation", &p, None, e).into()),
            }
        }
        self.disk.fsync_dir(&current::mut_dir(&self.root))?;
        Ok(())
    }
}
