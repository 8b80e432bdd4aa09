//! The typed build (format version 3, docs/format.md § "Typed graphs"): a
//! typed npy input (`source/typed.rs`) becomes one slot array whose slots
//! list their incoming neighbors relation by relation, per-type feature,
//! label and split files, and a manifest with `types`.
//!
//! One pipeline, as the homogeneous build's: every input edge of relation
//! `r` (the `j`-th incoming edge type of its destination's type,
//! `TypeTable::in_relations`) is pushed as the key
//! `global_dst << 32 | vsrc` with `vsrc = base_r + src_local`, `base_r` =
//! the sum of the source-type counts of the destination type's earlier
//! incoming relations. Why: the one external sort (out of core, chunk
//! sized from `--memory-budget` as today) then groups each node's
//! neighbors by relation *and* sorts them within it; equal keys are exactly
//! duplicate edges of one relation, so a dedup is per relation; and the
//! layout pass translates `vsrc` back to the global id
//! `offset(src type) + local`, counting per relation for
//! `encode_typed_slot`. A destination type whose relations' source counts
//! sum beyond 2^32 − 1 is refused by name (the key has 32 bits for `vsrc`).
//!
//! Memory: 4 B per node (degree counters, charged against the budget before
//! the sort chunk is sized), the fixed I/O allowance, and the sort chunk.
//! Features, labels and splits are written per node type on a side thread
//! while the edges are read and sorted.

use std::path::Path;
use std::time::Instant;

use flashgnn_format::layout::{
    choose_inline_cap, fixed_bytes, DegreeHistogram, FeaturePlacement, Layout, SLOT_HEADER_BYTES,
};
use flashgnn_format::manifest::*;
use flashgnn_format::slot::encode_typed_slot;
use flashgnn_format::types::{check_name, EdgeType, NodeType, TypeFeatures, TypeTable};
use flashgnn_format::{Dtype, GraphHeader, OverflowHeader};
use flashgnn_io::{Disk, OutFile};

use super::edges::degree_histogram;
use super::layout::OverflowWriter;
use super::side::{side_work, Side, SideParams};
use super::stream::KeyStream;
use super::{BuildReport, FIXED_OVERHEAD_BYTES, SORT_CHUNK_MIN_BYTES};
use crate::options::{BuildOptions, FeatureLayout, Reorder, SelfLoops};
use crate::progress::Progress;
use crate::sort::{ExternalSorter, KeyFileReader};
use crate::source::typed::{open_typed, TypedInputs};
use crate::source::{EdgeSource, NODES_MAX};
use crate::{BuildError, Result};

/// One stored edge type and where its edges come from.
struct Rel {
    src: usize,
    dst: usize,
    rel: String,
    /// The input edge type whose edges (flipped when `flipped`) it holds.
    input: usize,
    flipped: bool,
    /// `--add-reverse` on a relation within one type: reverse copies added
    /// in place and duplicates coalesced (PyG's `to_undirected`).
    undirected: bool,
    dedup: bool,
    /// Loops are meaningful (and `--self-loops` applies) only within one type.
    same_type: bool,
}

/// Options a typed build refuses, by name, before any work.
pub(super) fn check_typed_options(opts: &BuildOptions) -> Result<()> {
    let refuse = |flag: &str, why: &str| Err(BuildError::config(format!("{flag}: not for a typed input ({why})")));
    if opts.reorder != Reorder::None {
        return refuse("--reorder", "a typed dataset keeps each node type's ids on one range, never relabelled");
    }
    if opts.symmetrize {
        return refuse("--symmetrize", "its typed form is --add-reverse, PyG's ToUndirected");
    }
    if opts.synthetic_features.is_some() {
        return refuse("--synthetic-features", "feature rows come per node type from <ntype>/node_feat.npy");
    }
    if opts.feature_layout == FeatureLayout::Inline {
        return refuse("--feature-layout inline", "rows of a typed graph live in per-type t<i>.features.fg files");
    }
    for (flag, v) in [("--labels", &opts.labels), ("--features", &opts.features)] {
        if v.is_some() {
            return refuse(flag, "labels and features come from the node type folders");
        }
    }
    if opts.num_nodes.is_some() || opts.feat_shape.is_some() {
        return refuse("--num-nodes/--feat-shape", "counts come per node type (num_nodes.json, docs/input.md)");
    }
    Ok(())
}

/// The stored edge types: the input's, then `--add-reverse`'s new ones.
fn relations(opts: &BuildOptions, inp: &TypedInputs) -> Result<Vec<Rel>> {
    let mut rels: Vec<Rel> = Vec::new();
    for (i, e) in inp.edges.iter().enumerate() {
        let (src, dst) = (inp.node_index(&e.src).unwrap(), inp.node_index(&e.dst).unwrap());
        let undirected = opts.add_reverse && src == dst;
        rels.push(Rel {
            src,
            dst,
            rel: e.rel.clone(),
            input: i,
            flipped: false,
            undirected,
            dedup: opts.dedup || undirected,
            same_type: src == dst,
        });
    }
    if opts.add_reverse {
        for (i, e) in inp.edges.iter().enumerate() {
            if e.src == e.dst {
                continue;
            }
            let rel = format!("rev_{}", e.rel);
            check_name(&e.path.display().to_string(), "--add-reverse relation", &rel)
                .map_err(|x| BuildError::config(x.to_string()))?;
            let (src, dst) = (inp.node_index(&e.dst).unwrap(), inp.node_index(&e.src).unwrap());
            if rels.iter().any(|r| r.src == src && r.dst == dst && r.rel == rel) {
                continue; // already present: kept as the input gives it
            }
            rels.push(Rel {
                src,
                dst,
                rel,
                input: i,
                flipped: true,
                undirected: false,
                dedup: opts.dedup,
                same_type: false,
            });
        }
    }
    if rels.len() > flashgnn_format::types::MAX_EDGE_TYPES {
        return Err(BuildError::config(format!(
            "{} edge types (with --add-reverse's) exceed the format's {}",
            rels.len(),
            flashgnn_format::types::MAX_EDGE_TYPES
        )));
    }
    Ok(rels)
}

/// Per-relation counters of what the build did.
#[derive(Clone, Default)]
struct RelCounts {
    input_edges: u64,
    added_by_reverse: u64,
    loops_dropped: u64,
    loops_added: u64,
    dups: u64,
    stored: u64,
}

/// Where keys go: offsets per type, base per relation, relations per type.
struct KeyMap {
    offsets: Vec<u64>,
    base: Vec<u64>,
    /// Per node type: its incoming relations (indices into `rels`).
    in_rels: Vec<Vec<usize>>,
    counts: Vec<u64>,
    src_of: Vec<usize>,
}

impl KeyMap {
    /// `(type, j, relation, global source)` of key `k`.
    #[inline]
    fn locate(&self, k: u64) -> (usize, usize, usize, u64) {
        let d = k >> 32;
        let vsrc = k & 0xffff_ffff;
        let t = self.offsets.partition_point(|&o| o <= d) - 1;
        let rels = &self.in_rels[t];
        let j = rels.partition_point(|&r| self.base[r] <= vsrc) - 1;
        let r = rels[j];
        (t, j, r, self.offsets[self.src_of[r]] + vsrc - self.base[r])
    }
}

pub(super) fn build_typed(tmp: &Path, opts: &BuildOptions, progress: &Progress, t0: Instant) -> Result<BuildReport> {
    check_typed_options(opts)?;
    super::plan::check_page_size(opts)?;
    let inp = open_typed(opts)?;
    let rels = relations(opts, &inp)?;
    let nt = inp.nodes.len();
    if nt > flashgnn_format::types::MAX_NODE_TYPES {
        return Err(BuildError::config(format!(
            "{} node types exceed the format's {}",
            nt,
            flashgnn_format::types::MAX_NODE_TYPES
        )));
    }
    let mut offsets = vec![0u64];
    for n in &inp.nodes {
        offsets.push(offsets.last().unwrap() + n.count);
    }
    let n = *offsets.last().unwrap();
    if n >= NODES_MAX {
        return Err(BuildError::config(format!(
            "node count {n} (all types) exceeds the supported maximum {}",
            NODES_MAX - 1
        )));
    }
    let counts: Vec<u64> = inp.nodes.iter().map(|x| x.count).collect();
    let mut base = vec![0u64; rels.len()];
    let mut in_rels = vec![Vec::new(); nt];
    for (r, rel) in rels.iter().enumerate() {
        in_rels[rel.dst].push(r);
    }
    for (t, rs) in in_rels.iter().enumerate() {
        let mut acc = 0u64;
        for &r in rs {
            base[r] = acc;
            acc += counts[rels[r].src];
        }
        if acc > u32::MAX as u64 {
            return Err(BuildError::config(format!(
                "node type {:?}: its incoming edge types' source types hold {acc} nodes together, beyond the \
                 build's per-destination-type bound 2^32 - 1 (keys dst << 32 | relation-local source)",
                inp.nodes[t].name
            )));
        }
    }
    let km = KeyMap {
        offsets: offsets.clone(),
        base,
        in_rels,
        counts: counts.clone(),
        src_of: rels.iter().map(|r| r.src).collect(),
    };
    let r_max = km.in_rels.iter().map(|v| v.len()).max().unwrap_or(0).max(1) as u32;

    let node_bytes = n * 4;
    let chunk = opts.memory_budget.saturating_sub(FIXED_OVERHEAD_BYTES + node_bytes);
    if chunk < SORT_CHUNK_MIN_BYTES {
        return Err(BuildError::config(format!(
            "--memory-budget {} bytes is too small: it must cover {} MiB of buffers, 4 B per node ({n} nodes) and \
             an {} MiB sort chunk, i.e. at least {} bytes",
            opts.memory_budget,
            FIXED_OVERHEAD_BYTES >> 20,
            SORT_CHUNK_MIN_BYTES >> 20,
            FIXED_OVERHEAD_BYTES + node_bytes + SORT_CHUNK_MIN_BYTES
        )));
    }

    // Side work per node type (features, labels, splits) beside the edges.
    let t_edges = Instant::now();
    let (edge_out, sides) = std::thread::scope(|scope| -> Result<_> {
        let inp_ref = &inp;
        let offs = &offsets;
        let side = scope.spawn(move || -> Result<Vec<Side>> {
            // A failure stops the edge pass promptly; this error is reported.
            side_types(tmp, opts, progress, inp_ref, offs).inspect_err(|_| progress.cancel())
        });
        let e = sort_edges(tmp, opts, progress, &inp, &rels, &km, n, chunk);
        if e.is_err() {
            progress.cancel();
        }
        let s = side.join().unwrap_or_else(|_| Err(BuildError::config("internal: feature thread panicked")));
        // The first real error wins: an edge pass stopped by the side
        // thread's failure reports that failure, not the cancellation.
        match (e, s) {
            (Err(BuildError::Cancelled), Err(s)) => Err(s),
            (e, s) => Ok((e?, s?)),
        }
    })?;
    let (keys, degrees, mut rc, runs) = edge_out;
    let preprocess_seconds = t_edges.elapsed().as_secs_f64();

    // Layout: the inline cap with the relation counts and edge bases in the
    // slot's fixed part.
    let t_layout = Instant::now();
    let hist = degree_histogram(&degrees);
    let typed_part = fixed_bytes(r_max, !opts.no_edge_ids) - SLOT_HEADER_BYTES;
    let cap = choose_inline_cap(opts.page_size, 4, typed_part, n, &hist);
    let entries: u64 = degrees.iter().map(|&d| d as u64).sum();
    let overflow_entries: u64 = degrees.iter().map(|&d| (d as u64).saturating_sub(cap as u64)).sum();
    let layout = Layout::new(
        "build",
        opts.page_size,
        n,
        entries,
        4,
        0,
        Dtype::Float32,
        FeaturePlacement::Inline,
        cap,
        overflow_entries,
    )?
    .with_dataset_id(opts.dataset_id)
    .with_rel_counts("build", r_max, !opts.no_edge_ids)?;
    let mut files: Vec<(String, u64, u32)> = Vec::new();
    let (spilled, isolated) =
        write_typed_layout(&opts.disk, tmp, progress, &layout, keys, &km, &degrees, &mut rc, &mut files)?;
    let _ = std::fs::remove_file(tmp.join("edges.sorted"));
    let layout_seconds = t_layout.elapsed().as_secs_f64();

    // Manifest.
    let mut node_types = Vec::new();
    let mut feature_seconds = 0.0;
    let mut nan_replaced = 0;
    for (t, (ni, s)) in inp.nodes.iter().zip(sides).enumerate() {
        feature_seconds += s.feature_seconds;
        nan_replaced += s.nan_replaced;
        files.extend(s.files);
        let features = match &ni.features {
            Some(_) => {
                let f = inp.open_features(t)?.expect("features");
                Some(TypeFeatures { dim: f.dim(), dtype: opts.feature_dtype.unwrap_or(f.dtype()), synthetic: false })
            }
            None => None,
        };
        node_types.push(NodeType {
            name: ni.name.clone(),
            count: ni.count,
            features,
            labels: s.labels,
            splits: s.splits.into_iter().collect(),
        });
    }
    let edge_types: Vec<EdgeType> = rels
        .iter()
        .zip(&rc)
        .map(|(r, c)| EdgeType {
            src: inp.nodes[r.src].name.clone(),
            rel: r.rel.clone(),
            dst: inp.nodes[r.dst].name.clone(),
            num_edges: c.stored,
        })
        .collect();
    let types = TypeTable { node_types, edge_types };
    let hist = degree_histogram(&degrees);
    let manifest = Manifest {
        magic: MANIFEST_MAGIC.into(),
        format_version: layout.format_version(),
        created_by: format!("flashgnn {}", env!("CARGO_PKG_VERSION")),
        page_size: opts.page_size,
        num_nodes: n,
        num_edges: layout.num_edges,
        id_bytes: 4,
        features: FeatureInfo { dim: 0, dtype: Dtype::Float32, placement: "inline".into(), synthetic: false },
        graph: GraphInfo {
            inline_cap: cap,
            slot_bytes: layout.slot_bytes,
            slots_per_page: layout.slots_per_page,
            overflow_entries: layout.overflow_entries,
            rel_counts: layout.rel_counts,
        },
        degree: DegreeStats {
            min: degrees.iter().copied().min().unwrap_or(0) as u64,
            max: degrees.iter().copied().max().unwrap_or(0) as u64,
            mean: if n > 0 { layout.num_edges as f64 / n as f64 } else { 0.0 },
            median: hist.quantile(0.5).unwrap_or(DegreeHistogram::BUCKETS as u64),
            p99: hist.quantile(0.99).unwrap_or(DegreeHistogram::BUCKETS as u64),
            isolated,
            no_neighbors: Some(hist.counts[0]),
            spilled_nodes: spilled,
        },
        labels: None,
        splits: Default::default(),
        reorder: "none".into(),
        build: BuildInfo {
            source: opts.input.display().to_string(),
            source_format: "typed-npy".into(),
            symmetrize: false,
            dedup: opts.dedup,
            self_loops: opts.self_loops.name().into(),
            input_edges: rc.iter().map(|c| c.input_edges).sum(),
            self_loops_dropped: rc.iter().map(|c| c.loops_dropped).sum(),
            self_loops_added: rc.iter().map(|c| c.loops_added).sum(),
            duplicates_removed: rc.iter().map(|c| c.dups).sum(),
            reverse_duplicates_removed: 0,
            input_edges_distinct: 0,
            input_edges_with_reverse: 0,
            splits_made: String::new(),
            preprocess_seconds,
            feature_seconds,
            layout_seconds,
            total_seconds: t0.elapsed().as_secs_f64(),
            peak_rss_bytes: flashgnn_io::rss::peak_rss_bytes(),
            memory_budget_bytes: opts.memory_budget,
            sort_runs: runs,
            add_reverse: opts.add_reverse,
            relations: types
                .edge_types
                .iter()
                .zip(&rc)
                .map(|(e, c)| RelationBuild {
                    edge_type: e.key(),
                    input_edges: c.input_edges,
                    added_by_reverse: c.added_by_reverse,
                    self_loops_dropped: c.loops_dropped,
                    self_loops_added: c.loops_added,
                    duplicates_removed: c.dups,
                    stored: c.stored,
                })
                .collect(),
        },
        files: files.into_iter().map(|(name, bytes, crc32c)| (name, FileEntry { bytes, crc32c })).collect(),
        dataset_id: opts.dataset_id,
        types: Some(types),
        link_split: None,
    };
    super::publish::write_manifest(&opts.disk, tmp, &manifest)?;
    Ok(BuildReport {
        output: tmp.to_path_buf(),
        manifest,
        skipped_lines: 0,
        skipped_examples: Vec::new(),
        nan_replaced,
        removed_stale: Vec::new(),
        notes: Vec::new(),
    })
}

/// Features, labels and splits of every node type, into `t<i>.*` files.
fn side_types(
    tmp: &Path,
    opts: &BuildOptions,
    progress: &Progress,
    inp_ref: &TypedInputs,
    offs: &[u64],
) -> Result<Vec<Side>> {
    let mut out = Vec::new();
    for (t, &first_id) in offs.iter().enumerate().take(inp_ref.nodes.len()) {
        progress.check()?;
        let features = inp_ref.open_features(t)?;
        let feat_dtype = match &features {
            Some(f) => opts.feature_dtype.unwrap_or(f.dtype()),
            None => Dtype::Float32,
        };
        if !feat_dtype.is_float() {
            return Err(BuildError::config(format!(
                "--feature-dtype {} must be float16, float32 or float64",
                feat_dtype.name()
            )));
        }
        let p = SideParams {
            tmp,
            opts,
            feat_dtype,
            direct_final: true,
            page_size: opts.page_size,
            progress,
            num_classes: opts.num_classes.or(inp_ref.nodes[t].label_classes),
            typed: Some((t, first_id)),
        };
        let labels = inp_ref.open_labels(t)?;
        let splits = inp_ref.open_splits(t)?;
        let mut s = side_work(&p, inp_ref.nodes[t].count, features, labels, splits)?;
        s.feature_seconds = s.feature_seconds.max(0.0);
        if s.staged {
            return Err(BuildError::config("internal: a typed feature table was staged"));
        }
        out.push(s);
    }
    Ok(out)
}

type SortedEdges = (KeyStream, Vec<u32>, Vec<RelCounts>, u64);

/// Read every edge type, push its keys (and `--add-reverse`'s copies),
/// sort, and — where a relation dedups — merge to `edges.sorted` with one
/// copy per key, counting the stored degrees.
#[allow(clippy::too_many_arguments)]
fn sort_edges(
    tmp: &Path,
    opts: &BuildOptions,
    progress: &Progress,
    inp: &TypedInputs,
    rels: &[Rel],
    km: &KeyMap,
    n: u64,
    chunk: u64,
) -> Result<SortedEdges> {
    let mut degrees = vec![0u32; n as usize];
    let mut rc = vec![RelCounts::default(); rels.len()];
    let mut sorter = ExternalSorter::new(tmp, "typed", chunk);
    let drop_loops = opts.self_loops != SelfLoops::Keep;
    // `added`: a loop `--self-loops add` adds (never dropped).
    let mut push =
        |r: usize, s: u64, d: u64, added: bool, degrees: &mut Vec<u32>, rc: &mut [RelCounts]| -> Result<()> {
            let rel = &rels[r];
            if rel.same_type && s == d && drop_loops && !added {
                rc[r].loops_dropped += 1;
                return Ok(());
            }
            let gd = km.offsets[rel.dst] + d;
            let c = &mut degrees[gd as usize];
            *c = c
                .checked_add(1)
                .ok_or_else(|| BuildError::config(format!("node {gd} has more than {} neighbors", u32::MAX)))?;
            sorter.push(gd << 32 | (km.base[r] + s))
        };
    // The relations fed by each input edge type.
    let mut total = 0;
    for i in 0..inp.edges.len() {
        total += inp.open_edges(i)?.num_edges();
    }
    let mut task = progress.task("edges", "edges", total);
    for (i, _) in inp.edges.iter().enumerate() {
        let own = rels.iter().position(|r| r.input == i && !r.flipped).expect("every input has its relation");
        let rev = rels.iter().position(|r| r.input == i && r.flipped);
        let mut src = inp.open_edges(i)?;
        let mut batch = Vec::with_capacity(1 << 16);
        loop {
            progress.check()?;
            batch.clear();
            if !src.next_batch(&mut batch, 1 << 16)? {
                break;
            }
            for &(s, d) in &batch {
                rc[own].input_edges += 1;
                push(own, s, d, false, &mut degrees, &mut rc)?;
                if rels[own].undirected && s != d {
                    rc[own].added_by_reverse += 1;
                    push(own, d, s, false, &mut degrees, &mut rc)?;
                }
                if let Some(rr) = rev {
                    rc[rr].added_by_reverse += 1;
                    push(rr, d, s, false, &mut degrees, &mut rc)?;
                }
            }
            task.add(batch.len() as u64);
        }
    }
    task.finish();
    if opts.self_loops == SelfLoops::Add {
        for (r, rel) in rels.iter().enumerate() {
            if rel.same_type {
                for v in 0..km.counts[rel.dst] {
                    push(r, v, v, true, &mut degrees, &mut rc)?;
                }
                rc[r].loops_added += km.counts[rel.dst];
            }
        }
    }
    let runs = sorter.runs() as u64;
    let mut merged = sorter.finish()?;
    if !rels.iter().any(|r| r.dedup) {
        return Ok((KeyStream::Merged(merged), degrees, rc, runs));
    }
    // One copy per key of a deduplicating relation, into edges.sorted.
    let path = tmp.join("edges.sorted");
    let mut out = OutFile::create(&path)?; // scratch: real disk
    degrees.iter_mut().for_each(|d| *d = 0);
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
    let mut prev: Option<u64> = None;
    while let Some(k) = merged.next_key()? {
        if prev == Some(k) {
            let (_, _, r, _) = km.locate(k);
            if rels[r].dedup {
                rc[r].dups += 1;
                continue;
            }
        }
        prev = Some(k);
        degrees[(k >> 32) as usize] += 1;
        buf.extend_from_slice(&k.to_le_bytes());
        if buf.len() >= 1 << 20 {
            out.write(&buf)?;
            buf.clear();
            progress.check()?;
        }
    }
    out.write(&buf)?;
    out.finish()?;
    drop(merged);
    Ok((KeyStream::File(KeyFileReader::open(&path)?), degrees, rc, runs))
}

/// The layout pass: every node in id order, its neighbors relation by
/// relation (global ids), counted per relation into its slot; overflow
/// beyond the cap. Returns the nodes that spilled and the isolated nodes.
#[allow(clippy::too_many_arguments)]
fn write_typed_layout(
    disk: &Disk,
    tmp: &Path,
    progress: &Progress,
    layout: &Layout,
    mut keys: KeyStream,
    km: &KeyMap,
    degrees: &[u32],
    rc: &mut [RelCounts],
    files: &mut Vec<(String, u64, u32)>,
) -> Result<(u64, u64)> {
    let n = layout.num_nodes;
    let (p, s, k) = (layout.page_size as usize, layout.slot_bytes as usize, layout.slots_per_page as u64);
    let cap = layout.inline_cap as u64;
    let mut graph = OutFile::create_direct_on(disk, tmp.join(GRAPH_FILE))?;
    let head = GraphHeader::from_layout(layout).encode();
    graph.write(&head)?;
    let mut ovf = OverflowWriter::new(disk, &tmp.join(OVERFLOW_FILE), layout)?;
    let mut page = vec![0u8; p];
    let mut inline: Vec<u64> = Vec::with_capacity(cap as usize);
    let mut counts = vec![0u32; layout.rel_counts as usize];
    let mut bases = vec![0u64; layout.rel_counts as usize];
    let mut pending = keys.next_key()?;
    let mut spilled = 0u64;
    // Who is some stored entry's source (1 bit per node): a node with
    // neither a neighbor nor an out-edge is isolated.
    let mut has_out = vec![0u64; (n as usize).div_ceil(64)];
    let mut task = progress.task("layout", "nodes", n);
    for v in 0..n {
        inline.clear();
        counts.iter_mut().for_each(|c| *c = 0);
        let t = km.offsets.partition_point(|&o| o <= v) - 1;
        let nrel = km.in_rels[t].len();
        // Edge type r's entries stored so far are those of the nodes of
        // its destination type before v: v's first entry's place in r's list.
        for (b, &r) in bases.iter_mut().zip(&km.in_rels[t]) {
            *b = rc[r].stored;
        }
        let start = ovf.next_entry;
        let mut deg = 0u64;
        while let Some(key) = pending.filter(|&x| x >> 32 == v) {
            let (_, j, r, src) = km.locate(key);
            counts[j] += 1;
            rc[r].stored += 1;
            has_out[(src / 64) as usize] |= 1 << (src % 64);
            if deg < cap {
                inline.push(src);
            } else {
                ovf.push(src)?;
            }
            deg += 1;
            pending = keys.next_key()?;
        }
        if deg != degrees[v as usize] as u64 {
            return Err(BuildError::config(format!(
                "internal: node {v} has {deg} stored neighbors in the edge stream but {} counted",
                degrees[v as usize]
            )));
        }
        let first_ovf = if deg > cap {
            spilled += 1;
            start
        } else {
            0
        };
        let at = ((v % k) as usize) * s;
        let slot = &mut page[at..at + s];
        let bases = if layout.edge_bases { &bases[..nrel] } else { &[] };
        encode_typed_slot(layout, v, deg as u32, v, first_ovf, &counts[..nrel], bases, &[], &inline, slot);
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
    let (gb, gc) = graph.finish()?;
    files.push((GRAPH_FILE.into(), gb, gc));
    let oh = OverflowHeader::from_layout(layout).encode();
    let (ob, oc) = ovf.finish_patched(&oh, &oh)?;
    files.push((OVERFLOW_FILE.into(), ob, oc));
    let isolated = (0..n as usize).filter(|&v| degrees[v] == 0 && has_out[v / 64] & (1 << (v % 64)) == 0).count();
    Ok((spilled, isolated as u64))
}
