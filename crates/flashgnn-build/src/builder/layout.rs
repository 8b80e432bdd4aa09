//! The layout pass: relabelling (with `--reorder degree`), the inline cap,
//! and one pass over the nodes in id order that writes each node's slot
//! into `graph.fg`, the neighbors beyond the cap into `overflow.fg`, and a
//! separate `features.fg` when the side thread did not write it.
//!
//! Invariants: the keys arrive sorted by destination and each node's run
//! of them is consumed once (an edge left after the last node, or a stored
//! degree that differs from the one counted, is an internal error); the
//! relabelling sort's chunk is charged like the edge sort's (the budget less
//! the fixed allowance and 16 B per node); a streamed `--dedup` writes its
//! headers with upper bounds and patches them with the stored counts.

use std::path::Path;

use flashgnn_format::layout::{choose_inline_cap, seal_overflow_page, DegreeHistogram, FeaturePlacement, Layout};
use flashgnn_format::manifest::{
    FEATURES_FILE, FEATURE_CRC_FILE, GRAPH_FILE, NODE_INDEX_FILE, NODE_ORDER_FILE, OVERFLOW_FILE,
};
use flashgnn_format::npy::encode_header;
use flashgnn_format::slot::{encode_slot, write_id};
use flashgnn_format::{Dtype, FeatureHeader, GraphHeader, OverflowHeader};
use flashgnn_io::{Disk, OutFile};

use super::edges::{degree_histogram, EdgeResult};
use super::features::{write_npy_u32, RowFeed, STAGE_FILE};
use super::plan::FeaturePlan;
use super::stream::{KeyStream, PipedEdges};
use super::{FIXED_OVERHEAD_BYTES, SORT_CHUNK_MIN_BYTES};
use crate::options::{BuildOptions, Reorder};
use crate::progress::Progress;
use crate::sort::{ExternalSorter, KeyFileReader};
use crate::{BuildError, Result};

/// What the layout pass wrote, for the manifest.
pub(super) struct Laid {
    /// The files written: name, bytes, CRC32C.
    pub(super) files: Vec<(String, u64, u32)>,
    /// The layout with the stored counts.
    pub(super) layout: Layout,
    pub(super) cap: u32,
    /// The report's degree statistics, of the stored degrees.
    pub(super) hist: DegreeHistogram,
    /// Nodes with neighbors in overflow pages.
    pub(super) spilled_nodes: u64,
}

/// Relabel (with `--reorder`), choose the inline cap, and write the graph
/// files (and a separate `features.fg` the side thread did not write).
/// `staged`: the feature rows are in `features.stage`.
pub(super) fn write_layout(
    tmp: &Path,
    opts: &BuildOptions,
    progress: &Progress,
    er: &mut EdgeResult,
    features: &FeaturePlan,
    staged: bool,
) -> Result<Laid> {
    let n = er.num_nodes;
    let mut files: Vec<(String, u64, u32)> = Vec::new();
    // A --dedup stream yields the stored entries; the degrees counted so far
    // are the copies pushed (`EdgeResult::degrees`).
    let exact = er.direct.as_ref().is_none_or(|e| e.dedup.is_none());
    let source = match er.direct.take() {
        Some(e) => KeyStream::Direct(Box::new(PipedEdges::start(e)?)),
        None => KeyStream::File(KeyFileReader::open(&er.sorted_path)?),
    };
    let (old_of_new, mut keys) = match opts.reorder {
        Reorder::None => (None, source),
        Reorder::Degree => {
            let (order, keys) = relabel(tmp, opts, progress, er, source, &mut files)?;
            (Some(order), keys)
        }
    };

    // The inline cap: with --dedup from the copies pushed (see
    // `EdgeResult::raw_hist`), else from the degrees.
    let cap_hist = er.raw_hist.take().unwrap_or_else(|| degree_histogram(&er.degrees));
    let inline_row =
        if features.placement == FeaturePlacement::Inline { features.dim * features.dtype.size() as u32 } else { 0 };
    let cap = choose_inline_cap(opts.page_size, 4, inline_row, n, &cap_hist);
    // Upper bounds while the degrees are (a streamed --dedup); the headers
    // get the stored counts when the layout pass has them.
    let overflow_entries: u64 = er.degrees.iter().map(|&d| (d as u64).saturating_sub(cap as u64)).sum();
    let provisional = layout_of(opts, n, features, cap, er.num_entries, overflow_entries)?;

    let mut pass = Pass::open(tmp, opts, &provisional, features, cap, staged, old_of_new.is_some())?;
    let (stored, spilled_nodes) = pass.write_nodes(progress, &mut keys, er, exact, old_of_new.as_deref())?;
    if let Some(rc) = keys.reverse_counts() {
        er.reverse = rc;
    }
    if let Some((dups, merged)) = keys.dedup_removed() {
        er.duplicates_removed = dups;
        er.reverse.merged = merged;
    }
    drop(keys);
    let _ = std::fs::remove_file(&er.sorted_path);
    let _ = std::fs::remove_file(tmp.join(STAGE_FILE));
    // The stored counts, in the headers written with upper bounds.
    let layout = if exact {
        provisional.clone()
    } else {
        er.num_entries = stored;
        layout_of(opts, n, features, cap, stored, pass.ovf.next_entry)?
    };
    // The report's degree statistics, of the stored degrees.
    let hist = if opts.dedup { degree_histogram(&er.degrees) } else { cap_hist };
    pass.finish(tmp, &layout, &mut files)?;
    Ok(Laid { files, layout, cap, hist, spilled_nodes })
}

fn layout_of(
    opts: &BuildOptions,
    n: u64,
    features: &FeaturePlan,
    cap: u32,
    entries: u64,
    overflow_entries: u64,
) -> Result<Layout> {
    let l = Layout::new(
        "build",
        opts.page_size,
        n,
        entries,
        4,
        features.dim,
        features.dtype,
        features.placement,
        cap,
        overflow_entries,
    )?;
    Ok(l.with_dataset_id(opts.dataset_id))
}

/// `--reorder degree`: new ids by descending degree (ties by id), the keys
/// relabelled and sorted again, the degrees permuted, and the two maps
/// written (`node_order.npy`, `node_index.npy`). Returns `old_of_new` and
/// the relabelled keys.
fn relabel(
    tmp: &Path,
    opts: &BuildOptions,
    progress: &Progress,
    er: &mut EdgeResult,
    source: KeyStream,
    files: &mut Vec<(String, u64, u32)>,
) -> Result<(Vec<u32>, KeyStream)> {
    let n = er.num_nodes;
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
    let disk = &opts.disk;
    files.push(write_npy_i64(disk, &tmp.join(NODE_ORDER_FILE), order.iter().map(|&v| v as i64), n)?);
    files.push(write_npy_i64(disk, &tmp.join(NODE_INDEX_FILE), new_of_old.iter().map(|&v| v as i64), n)?);
    drop(new_of_old);
    let _ = std::fs::remove_file(&er.sorted_path);
    Ok((order, KeyStream::Merged(sorter.finish()?)))
}

/// One layout pass: the rows it reads, the files it writes.
struct Pass<'a> {
    /// The layout the headers were written with (upper bounds for a
    /// streamed `--dedup`).
    layout: &'a Layout,
    placement: FeaturePlacement,
    cap: u32,
    rows: RowFeed,
    graph: OutFile,
    ovf: OverflowWriter,
    /// A separate `features.fg` written here, and its row CRCs.
    features: Option<(OutFile, Vec<u32>)>,
    /// Where the files go (`opts.disk`).
    disk: Disk,
}

impl<'a> Pass<'a> {
    /// Open the feature rows and create the files (headers of `layout`).
    fn open(
        tmp: &Path,
        opts: &BuildOptions,
        layout: &'a Layout,
        plan: &FeaturePlan,
        cap: u32,
        staged: bool,
        relabelled: bool,
    ) -> Result<Pass<'a>> {
        let (n, placement) = (layout.num_nodes, plan.placement);
        let row_bytes = layout.row_bytes() as usize;
        let synthetic = opts.synthetic_features.is_some();
        let rows =
            RowFeed::new(&tmp.join(STAGE_FILE), staged, synthetic, row_bytes, plan.dtype, opts.seed, relabelled)?;
        let features = if placement == FeaturePlacement::Separate && !staged && opts.synthetic_features.is_none() {
            None // final file already written by the side thread, or no features
        } else if placement == FeaturePlacement::Separate {
            let mut f = OutFile::create_direct_on(&opts.disk, tmp.join(FEATURES_FILE))?;
            f.write(&FeatureHeader::from_layout(layout).encode())?;
            Some((f, Vec::<u32>::with_capacity(n as usize)))
        } else {
            None
        };
        let mut graph = OutFile::create_direct_on(&opts.disk, tmp.join(GRAPH_FILE))?;
        graph.write(&GraphHeader::from_layout(layout).encode())?;
        let ovf = OverflowWriter::new(&opts.disk, &tmp.join(OVERFLOW_FILE), layout)?;
        Ok(Pass { layout, placement, cap, rows, graph, ovf, features, disk: opts.disk.clone() })
    }

    /// Every node in id order: its slot (degree, original id, first
    /// overflow entry, inline row and neighbors) into its page, the rest of
    /// its neighbors into overflow pages, its row into a separate
    /// `features.fg`. Stores the degrees in `er.degrees`; returns the
    /// stored entries and the nodes that spilled.
    fn write_nodes(
        &mut self,
        progress: &Progress,
        keys: &mut KeyStream,
        er: &mut EdgeResult,
        exact: bool,
        old_of_new: Option<&[u32]>,
    ) -> Result<(u64, u64)> {
        let (layout, n) = (self.layout, er.num_nodes);
        let row_bytes = layout.row_bytes() as usize;
        let p = layout.page_size as usize;
        let s = layout.slot_bytes as usize;
        let k = layout.slots_per_page as u64;
        let mut page = vec![0u8; p];
        let mut pending = keys.next_key()?;
        let mut inline: Vec<u64> = Vec::with_capacity(self.cap as usize);
        let mut row = vec![0u8; row_bytes];
        let pad = vec![0u8; layout.feature_stride() as usize - row_bytes.min(layout.feature_stride() as usize)];
        let mut task = progress.task("layout", "nodes", n);
        let mut spilled_nodes = 0u64;
        let mut stored = 0u64;
        for v in 0..n {
            let start = self.ovf.next_entry;
            let deg = self.take_neighbors(v, &mut pending, keys, &mut inline)?;
            if exact && deg != er.degrees[v as usize] as u64 {
                return Err(BuildError::config(format!(
                    "internal: node {v} has {deg} stored neighbors in the edge stream but {} counted",
                    er.degrees[v as usize]
                )));
            }
            er.degrees[v as usize] = deg as u32; // <= the count pushed, which fit
            stored += deg;
            let first_ovf = if deg > self.cap as u64 {
                spilled_nodes += 1;
                start
            } else {
                0
            };
            let original = old_of_new.map_or(v, |o| o[v as usize] as u64);
            if row_bytes > 0 {
                self.rows.row(original, &mut row)?;
            }
            let slot_at = ((v % k) as usize) * s;
            encode_slot(
                layout,
                v,
                deg as u32,
                original,
                first_ovf,
                if self.placement == FeaturePlacement::Inline { &row } else { &[] },
                &inline,
                &mut page[slot_at..slot_at + s],
            );
            if let Some((f, crcs)) = self.features.as_mut() {
                crcs.push(layout.crc(v, &row));
                f.write(&row)?;
                f.write(&pad)?;
            }
            if v % k == k - 1 || v == n - 1 {
                let used = ((v % k) as usize + 1) * s;
                page[used..].fill(0);
                self.graph.write(&page)?;
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
        Ok((stored, spilled_nodes))
    }

    /// Node `v`'s run of keys (sorted by destination, `pending` the next):
    /// the first `cap` sources into `inline`, the rest into overflow pages.
    /// Returns its degree.
    #[inline]
    fn take_neighbors(
        &mut self,
        v: u64,
        pending: &mut Option<u64>,
        keys: &mut KeyStream,
        inline: &mut Vec<u64>,
    ) -> Result<u64> {
        inline.clear();
        let mut deg = 0u64;
        while let Some(key) = pending.filter(|&k| k >> 32 == v) {
            let src = key & 0xffff_ffff;
            if deg < self.cap as u64 {
                inline.push(src);
            } else {
                self.ovf.push(src)?;
            }
            deg += 1;
            *pending = keys.next_key()?;
        }
        Ok(deg)
    }

    /// Finish the files, their headers (written from `self.layout`)
    /// replaced by `layout`'s, and list them in `files`.
    fn finish(self, tmp: &Path, layout: &Layout, files: &mut Vec<(String, u64, u32)>) -> Result<()> {
        let head = |l: &Layout| GraphHeader::from_layout(l).encode();
        let (gb, gc) = self.graph.finish_patched(&head(self.layout), &head(layout))?;
        files.push((GRAPH_FILE.into(), gb, gc));
        let head = |l: &Layout| OverflowHeader::from_layout(l).encode();
        let (ob, oc) = self.ovf.finish_patched(&head(self.layout), &head(layout))?;
        files.push((OVERFLOW_FILE.into(), ob, oc));
        if let Some((f, crcs)) = self.features {
            let (b, c) = f.finish()?;
            files.push((FEATURES_FILE.into(), b, c));
            files.push({
                let (b2, c2) = write_npy_u32(&self.disk, &tmp.join(FEATURE_CRC_FILE), &crcs)?;
                (FEATURE_CRC_FILE.into(), b2, c2)
            });
        }
        Ok(())
    }
}

fn write_npy_i64(disk: &Disk, path: &Path, values: impl Iterator<Item = i64>, n: u64) -> Result<(String, u64, u32)> {
    let mut out = OutFile::create_on(disk, path)?;
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

/// Appends neighbor ids into checksummed overflow pages.
pub(super) struct OverflowWriter {
    layout: Layout,
    out: OutFile,
    page: Vec<u8>,
    per_page: usize,
    id_bytes: usize,
    in_page: usize,
    page_no: u64,
    pub(super) next_entry: u64,
}

impl OverflowWriter {
    pub(super) fn new(disk: &Disk, path: &Path, layout: &Layout) -> Result<OverflowWriter> {
        // Written once, read back only by the verify (O_DIRECT itself): no
        // page-cache copy (~1 s of CPU of a 2 GiB edge input's layout pass).
        let mut out = OutFile::create_direct_on(disk, path)?;
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
    pub(super) fn push(&mut self, id: u64) -> Result<()> {
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
    pub(super) fn finish_patched(mut self, old: &[u8], new: &[u8]) -> Result<(u64, u32)> {
        if self.in_page > 0 {
            self.flush()?;
        }
        Ok(self.out.finish_patched(old, new)?)
    }
}
