//! Link-prediction splits at build time: `--link-split VAL,TEST` draws
//! validation and test positives (and, with `--disjoint-train-ratio`,
//! supervision-only training positives) out of the input's edges, removes
//! them from the message-passing graph, and draws fixed negatives for the
//! validation and test positives; `--link-split-files DIR` copies a given
//! split (the OGB `.pt` import's staging) after checking it. The files and
//! their meaning: docs/format.md § *Link splits*.
//!
//! How the random split stays out of core and exact:
//!
//! 1. Every input edge `(s, d)` becomes its unordered pair's key
//!    `min << 32 | max`, scrambled by a seeded bijection
//!    (`splitmix64(key ^ k)`, inverted by `splitmix64_inverse`), pushed
//!    into one of two external sorters (`s <= d` or `s > d`). The merged,
//!    sorted stream then lists the distinct pairs **in a random order**,
//!    each with its input copies per direction: PyG's `randperm`, as a sort
//!    under the build's memory budget. It is written to
//!    [`PAIRS_FILE`] (16 B per pair: key, copies).
//! 2. A pass over that file gives pair `p` (self-loops excluded) its class
//!    by position, as PyG slices its permutation: val `[0, nv)`, test
//!    `[nv, nv + nt)`, supervision-only train `[nv + nt, nv + nt + nd)`,
//!    message passing after; `nv = ⌊VAL·M⌋`, `nt = ⌊TEST·M⌋`,
//!    `nd = ⌊R·(M − nv − nt)⌋` for `M` pairs. A held-out pair takes every
//!    copy of it in both directions out of the graph (no leakage through a
//!    reverse edge); the rest are written, copies and directions as in the
//!    input, to [`MP_EDGES_FILE`], which the build then reads as its edges.
//! 3. Negatives, per validation/test positive `K` destinations `w` for its
//!    source `u`: drawn from (seed, slot, attempt), uniform over `w != u`,
//!    in slot chunks sized from the budget; each chunk's candidates are
//!    sorted by their pair's scrambled key and merge-joined against
//!    [`PAIRS_FILE`] (every input pair, held-out ones included) and
//!    against the negatives accepted so far ([`ACCEPTED_FILE`], and the
//!    chunk's own); a rejected slot draws again, at most
//!    [`NEG_ROUNDS_MAX`] times. So negatives are never a true edge in either
//!    direction, and every negative pair is distinct across validation and
//!    test (PyG's `RandomLinkSplit` gives neither guarantee, pyg #10706).
//!
//! Ids live in one [`Space`]: a homogeneous graph's (or a typed relation
//! within one node type), or a relation between two node types laid side
//! by side, destinations after sources, so the same keys serve it
//! (`typedsplit.rs`); the files get local ids back.
//!
//! Memory: the two sorters share the sort chunk; a negative chunk holds
//! [`NEG_SLOT_BYTES`] per slot. Disk: 16 B per distinct pair, 8 B per
//! negative, the staged edges (8 B per kept edge); all removed before the
//! dataset is published.

use std::path::{Path, PathBuf};

use flashgnn_format::hash::{splitmix64, splitmix64_inverse};
use flashgnn_format::manifest::{link_file, LinkSplitInfo, LinkSplitPart, LINK_PARTS, LINK_SPLITS};
use flashgnn_format::npy::{encode_header, encode_header_len};
use flashgnn_format::Dtype;
use flashgnn_io::{Disk, OutFile, ReadAt};

use super::SORT_CHUNK_MIN_BYTES;
use crate::options::BuildOptions;
use crate::progress::Progress;
use crate::sort::{ExternalSorter, KeyFileReader, Merged};
use crate::source::npy::{open_array, NpyEdges};
use crate::source::EdgeSource;
use crate::{BuildError, Result};

/// The distinct input pairs in scrambled-key order: (key, copies) u64 pairs.
pub(super) const PAIRS_FILE: &str = "link-pairs.sorted";
/// The message-passing edges the build reads instead of the input's.
pub(super) const MP_EDGES_FILE: &str = "link-mp-edges.npy";
/// Scrambled keys of the negatives accepted so far, ascending.
const ACCEPTED_FILE: &str = "link-neg.sorted";
/// Draws per negative slot before the build gives up on its source (a node
/// adjacent to nearly every other one). At a density of 1 %, 64 rejections
/// in a row happen with probability 10^-128.
pub const NEG_ROUNDS_MAX: u32 = 64;
/// Memory per negative slot in a chunk: source, destination, attempt, and
/// the (key, slot) sort entry: 8 + 8 + 4 + 16, rounded up.
const NEG_SLOT_BYTES: u64 = 40;
/// Edges read per batch.
const EDGE_BATCH: usize = 1 << 16;
/// Salts of the split's hashes: the pair order, the orientation of an
/// undirected positive, the negative draws.
const SALT_ORDER: u64 = 0x6c69_6e6b_6f72_6465; // "linkorde"
const SALT_FLIP: u64 = 0x6c69_6e6b_666c_6970; // "linkflip"
const SALT_NEG: u64 = 0x6c69_6e6b_6e65_6773; // "linknegs"

/// Files written: (name, bytes, CRC32C), as the other phases report them.
type Files = Vec<(String, u64, u32)>;

/// The split files written into the build's directory, and their manifest section.
pub(super) struct LinkOut {
    pub(super) files: Files,
    pub(super) info: LinkSplitInfo,
    pub(super) notes: Vec<String>,
}

/// The id space a random split works in. The pair keys need one id range:
/// a relation between two node types lays its destination type after its
/// source type (`builder/typedsplit.rs` shifts the destination ids by the
/// source count before the split sees them); the files are written with
/// the shift taken off again (local ids).
#[derive(Clone, Copy, Debug)]
pub(super) enum Space {
    /// One node set (a homogeneous graph, or a typed relation within one
    /// node type): negatives over every other node; `symmetric` = the build
    /// makes the graph undirected with option `flag` (`--symmetrize`, or
    /// `--add-reverse` on a typed relation), so the split is undirected too.
    Single { symmetric: bool, flag: &'static str },
    /// Sources in `[0, ns)`, destinations in `[ns, ns + nd)`: a positive
    /// keeps its source on the source type (never flipped), negatives are
    /// destinations of the destination type only.
    Bipartite { ns: u64, nd: u64 },
}

impl Space {
    /// What the split subtracts from a destination (or negative) id when it writes it.
    pub(super) fn dst_shift(self) -> u64 {
        match self {
            Space::Single { .. } => 0,
            Space::Bipartite { ns, .. } => ns,
        }
    }
}

/// What a random split hands back to the build: the message-passing edges
/// to build from, the node count, the split.
pub(super) struct Random {
    pub(super) edges: Box<dyn EdgeSource>,
    pub(super) num_nodes: u64,
    pub(super) out: LinkOut,
}

/// A `.npy` array written in one pass whose row count is known only at the
/// end: the header is written for `max_rows` and patched (same length).
struct NpyOut {
    out: OutFile,
    header: Vec<u8>,
    dtype: Dtype,
    cols: Option<u64>,
    rows: u64,
    max_rows: u64,
    buf: Vec<u8>,
}

impl NpyOut {
    fn create(disk: &Disk, path: &Path, dtype: Dtype, cols: Option<u64>, max_rows: u64) -> Result<NpyOut> {
        let header = encode_header(dtype, &shape(max_rows, cols));
        let mut out = OutFile::create_on(disk, path)?;
        out.write(&header)?;
        Ok(NpyOut { out, header, dtype, cols, rows: 0, max_rows, buf: Vec::with_capacity(1 << 16) })
    }

    #[inline]
    fn push(&mut self, v: u64) -> Result<()> {
        match self.dtype {
            Dtype::Uint32 => self.buf.extend_from_slice(&(v as u32).to_le_bytes()),
            _ => self.buf.extend_from_slice(&(v as i64).to_le_bytes()),
        }
        if self.buf.len() >= 1 << 16 {
            self.out.write(&self.buf)?;
            self.buf.clear();
        }
        Ok(())
    }

    /// One row (`cols` values, or one value for a 1-D array).
    fn row(&mut self, vals: &[u64]) -> Result<()> {
        for &v in vals {
            self.push(v)?;
        }
        self.rows += 1;
        Ok(())
    }

    fn finish(mut self) -> Result<(u64, u32)> {
        debug_assert!(self.rows <= self.max_rows);
        self.out.write(&self.buf)?;
        let new = encode_header_len(self.dtype, &shape(self.rows, self.cols), self.header.len())
            .expect("a smaller count's header fits the larger one's");
        Ok(self.out.finish_patched(&self.header, &new)?)
    }
}

fn shape(rows: u64, cols: Option<u64>) -> Vec<u64> {
    match cols {
        Some(c) => vec![rows, c],
        None => vec![rows],
    }
}

/// Scramble a pair key (a bijection of u64, keyed by the seed).
#[inline]
fn scramble(k: u64, key: u64) -> u64 {
    splitmix64(key ^ k)
}

#[inline]
fn unscramble(k: u64, m: u64) -> u64 {
    splitmix64_inverse(m) ^ k
}

#[inline]
fn pair_key(u: u64, v: u64) -> u64 {
    u.min(v) << 32 | u.max(v)
}

/// Check `--link-split`'s fractions and the option combination.
pub(super) fn check_options(opts: &BuildOptions) -> Result<()> {
    let frac = |name: &str, v: f64| -> Result<()> {
        if !(0.0..1.0).contains(&v) {
            return Err(BuildError::config(format!("{name} {v}: out of range (must be in [0, 1))")));
        }
        Ok(())
    };
    if let Some((val, test)) = opts.link_split {
        frac("--link-split VAL", val)?;
        frac("--link-split TEST", test)?;
        if val + test >= 1.0 {
            return Err(BuildError::config(format!(
                "--link-split {val},{test}: VAL + TEST = {} leaves no training edges (must be < 1)",
                val + test
            )));
        }
        if opts.link_split_files.is_some() {
            return Err(BuildError::config("--link-split and --link-split-files: give one split, not both"));
        }
    } else {
        for (set, name) in [
            (opts.disjoint_train_ratio.is_some(), "--disjoint-train-ratio"),
            (opts.link_split_seed.is_some(), "--link-split-seed"),
        ] {
            if set {
                return Err(BuildError::config(format!("{name} needs --link-split VAL,TEST")));
            }
        }
    }
    if opts.link_edge_type.is_some() && opts.link_split.is_none() {
        return Err(BuildError::config("--link-edge-type needs --link-split VAL,TEST"));
    }
    if let Some(r) = opts.disjoint_train_ratio {
        frac("--disjoint-train-ratio", r)?;
    }
    Ok(())
}

/// The input's edges, sorted by scrambled pair key in two sorters: one
/// `(key, copies s <= d, copies s > d)` group per distinct pair at a time.
struct PairGroups {
    sides: [(Merged, Vec<u64>, usize, bool); 2],
}

impl PairGroups {
    fn peek(&mut self, i: usize) -> Result<Option<u64>> {
        let (m, buf, at, done) = &mut self.sides[i];
        if *at == buf.len() && !*done {
            buf.clear();
            *at = 0;
            m.next_block(buf, 1 << 16)?;
            *done = buf.is_empty();
        }
        Ok(buf.get(*at).copied())
    }

    /// The next group: (scrambled key, copies s <= d, copies s > d).
    fn next(&mut self) -> Result<Option<(u64, u64, u64)>> {
        let key = match (self.peek(0)?, self.peek(1)?) {
            (None, None) => return Ok(None),
            (Some(a), None) => a,
            (None, Some(b)) => b,
            (Some(a), Some(b)) => a.min(b),
        };
        let mut counts = [0u64; 2];
        for (i, c) in counts.iter_mut().enumerate() {
            while self.peek(i)? == Some(key) {
                self.sides[i].2 += 1;
                *c += 1;
            }
        }
        Ok(Some((key, counts[0], counts[1])))
    }
}

/// A source yielding the staged message-passing edges, reporting the
/// original input's progress total and skipped lines.
struct Staged {
    inner: NpyEdges,
    skipped: (u64, Vec<String>),
}

impl EdgeSource for Staged {
    fn next_batch(&mut self, out: &mut Vec<(u64, u64)>, max: usize) -> Result<bool> {
        self.inner.next_batch(out, max)
    }
    fn bytes_total(&self) -> u64 {
        self.inner.bytes_total()
    }
    fn bytes_done(&self) -> u64 {
        self.inner.bytes_done()
    }
    fn edges_hint(&self) -> Option<u64> {
        self.inner.edges_hint()
    }
    fn set_num_nodes(&mut self, n: Option<u64>) {
        self.inner.set_num_nodes(n);
    }
    fn skipped(&self) -> (u64, Vec<String>) {
        self.skipped.clone()
    }
}

/// The counts of the classifying pass.
#[derive(Default)]
struct Classified {
    positives: [u64; 3],
    held_out_edges: u64,
    kept_edges: u64,
}

/// `--link-split`: split the input's edges (ids in `space`; see the module
/// docs), the message-passing edges to `mp_path` (`[E, 2]` uint32, local
/// ids); the build then reads the returned source instead of `edges`.
#[allow(clippy::too_many_arguments)]
pub(super) fn random_split(
    tmp: &Path,
    opts: &BuildOptions,
    mut edges: Box<dyn EdgeSource>,
    declared: Option<u64>,
    space: Space,
    mp_path: &Path,
    chunk_bytes: u64,
    progress: &Progress,
) -> Result<Random> {
    let (val, test) = opts.link_split.expect("called with --link-split");
    let ratio = opts.disjoint_train_ratio.unwrap_or(0.0);
    let seed = opts.link_split_seed.unwrap_or(opts.seed);
    let k_order = splitmix64(seed ^ SALT_ORDER);
    // 1. Sort the pairs (random order) out of core.
    let half = (chunk_bytes / 2).max(SORT_CHUNK_MIN_BYTES / 2);
    let mut fwd = ExternalSorter::new(tmp, "link-fwd", half);
    let mut bwd = ExternalSorter::new(tmp, "link-bwd", half);
    let mut task = progress.task("link split: pairs", "B", edges.bytes_total());
    let mut batch = Vec::with_capacity(EDGE_BATCH);
    let (mut input_edges, mut max_id, mut last) = (0u64, None::<u64>, 0u64);
    while edges.next_batch(&mut batch, EDGE_BATCH)? {
        for &(s, d) in &batch {
            input_edges += 1;
            max_id = Some(max_id.map_or(s.max(d), |m: u64| m.max(s).max(d)));
            if s <= d {
                fwd.push(scramble(k_order, s << 32 | d))?;
            } else {
                bwd.push(scramble(k_order, d << 32 | s))?;
            }
        }
        batch.clear();
        progress.check()?;
        let done = edges.bytes_done();
        task.add(done.saturating_sub(last));
        last = done;
    }
    task.finish();
    let num_nodes = declared.unwrap_or(max_id.map_or(0, |m| m + 1));
    let skipped = edges.skipped();
    drop(edges);
    let mut groups =
        PairGroups { sides: [(fwd.finish()?, Vec::new(), 0, false), (bwd.finish()?, Vec::new(), 0, false)] };
    let mut pairs_out = OutFile::create(tmp.join(PAIRS_FILE))?; // scratch: real disk
    let (mut m, mut one_way) = (0u64, 0u64);
    let mut buf: Vec<u8> = Vec::with_capacity(1 << 20);
    while let Some((key, a, b)) = groups.next()? {
        let pair = unscramble(k_order, key);
        if pair >> 32 != pair & 0xffff_ffff {
            m += 1;
            one_way += ((a > 0) != (b > 0)) as u64;
        }
        if a > u32::MAX as u64 || b > u32::MAX as u64 {
            return Err(BuildError::config(format!(
                "edge pair ({}, {}) occurs {} times: more than {} copies of one edge",
                pair >> 32,
                pair & 0xffff_ffff,
                a.max(b),
                u32::MAX
            )));
        }
        buf.extend_from_slice(&key.to_le_bytes());
        buf.extend_from_slice(&(a << 32 | b).to_le_bytes());
        if buf.len() >= 1 << 20 {
            pairs_out.write(&buf)?;
            buf.clear();
        }
    }
    pairs_out.write(&buf)?;
    pairs_out.finish()?;
    drop(groups); // the sorters' runs
                  // A bipartite relation has one direction only by construction: split
                  // as directed (each pair listed once, source first), with no note.
    let undirected = match space {
        Space::Single { symmetric, .. } => symmetric || one_way == 0,
        Space::Bipartite { .. } => false,
    };
    // 2. Classify by position (PyG's slicing of its permutation).
    let nv = (val * m as f64) as u64;
    let nt = (test * m as f64) as u64;
    let nd = (ratio * (m - nv - nt) as f64) as u64;
    let mut notes = Vec::new();
    if let (false, Space::Single { flag, .. }) = (undirected, space) {
        notes.push(format!(
            "link split: {one_way} of {m} edge pairs have one direction only, so the graph is split as directed (each \
             held-out pair still leaves in both directions; {flag} treats it as undirected)"
        ));
    }
    let shift = space.dst_shift();
    let (cls, files) =
        classify(tmp, opts, k_order, m, [nv, nt, nd], undirected, shift, mp_path, input_edges, progress)?;
    let mut files = files;
    // 3. Negatives for validation and test.
    let k = u64::from(opts.neg_per_pos);
    let (pv, pt) = (cls.positives[1], cls.positives[2]);
    if k > 0 && pv + pt > 0 {
        files.extend(negatives(
            &opts.disk,
            tmp,
            seed,
            k_order,
            num_nodes,
            space,
            m,
            k,
            [pv, pt],
            chunk_bytes,
            progress,
        )?);
    }
    let _ = std::fs::remove_file(tmp.join(PAIRS_FILE));
    let _ = std::fs::remove_file(tmp.join(ACCEPTED_FILE));
    let mut splits = std::collections::BTreeMap::new();
    for (i, s) in LINK_SPLITS.iter().enumerate() {
        let neg = if i > 0 && k > 0 && cls.positives[i] > 0 { k } else { 0 };
        splits
            .insert(s.to_string(), LinkSplitPart { positives: cls.positives[i], neg_per_positive: neg, neg_pairs: 0 });
    }
    let info = LinkSplitInfo {
        origin: "random".into(),
        undirected,
        seed,
        val_fraction: val,
        test_fraction: test,
        disjoint_train_ratio: ratio,
        input_pairs: m,
        held_out_edges: cls.held_out_edges,
        splits,
        edge_type: None,
    };
    let staged = NpyEdges::open(mp_path, false)?;
    debug_assert_eq!(staged.num_edges(), cls.kept_edges);
    let mut staged = Staged { inner: staged, skipped };
    staged.set_num_nodes(Some(num_nodes));
    Ok(Random { edges: Box::new(staged), num_nodes, out: LinkOut { files, info, notes } })
}

/// Pass 2: every pair of [`PAIRS_FILE`] to its class; the kept edges to
/// `mp_path`, the positives to `link_<split>_{src,dst}.npy`. Ids are
/// written local: `shift` (the source type's count of a bipartite
/// relation, where the second id of a pair is always the destination)
/// taken off the destination.
#[allow(clippy::too_many_arguments)]
fn classify(
    tmp: &Path,
    opts: &BuildOptions,
    k_order: u64,
    m: u64,
    [nv, nt, nd]: [u64; 3],
    undirected: bool,
    shift: u64,
    mp_path: &Path,
    input_edges: u64,
    progress: &Progress,
) -> Result<(Classified, Files)> {
    let k_flip = splitmix64(opts.link_split_seed.unwrap_or(opts.seed) ^ SALT_FLIP);
    let per = if undirected { 1 } else { 2 };
    // Upper bounds of each split's positives (a directed pair gives up to two).
    let train_units = if nd > 0 { nd } else { m - nv - nt };
    let max = [train_units * per, nv * per, nt * per];
    // Scratch (read by the build, deleted before publishing): real disk.
    let mut mp = NpyOut::create(&Disk::Real, mp_path, Dtype::Uint32, Some(2), input_edges)?;
    let mut pos: Vec<[NpyOut; 2]> = Vec::new();
    for (i, s) in LINK_SPLITS.iter().enumerate() {
        pos.push([
            NpyOut::create(&opts.disk, &tmp.join(link_file(s, "src")), Dtype::Int64, None, max[i])?,
            NpyOut::create(&opts.disk, &tmp.join(link_file(s, "dst")), Dtype::Int64, None, max[i])?,
        ]);
    }
    let mut c = Classified::default();
    let mut task = progress.task("link split: classify", "pairs", m);
    let mut r = KeyFileReader::open(&tmp.join(PAIRS_FILE))?;
    let mut p = 0u64; // position among the non-loop pairs
    while let Some(key) = r.next_key()? {
        let copies = r.next_key()?.ok_or_else(|| BuildError::config("internal: odd-length pair file"))?;
        let (a, b) = (copies >> 32, copies & 0xffff_ffff);
        let pair = unscramble(k_order, key);
        // Bipartite: u < shift <= v always (the source first), and b == 0.
        let (u, v) = (pair >> 32, (pair & 0xffff_ffff) - shift);
        // Class: 0 train supervision only, 1 val, 2 test, 3 message passing.
        let class = if u == v && shift == 0 {
            3
        } else {
            let q = p;
            p += 1;
            if q.is_multiple_of(1 << 16) {
                task.add(if q == 0 { 0 } else { 1 << 16 });
                progress.check()?;
            }
            if q < nv {
                1
            } else if q < nv + nt {
                2
            } else if q < nv + nt + nd {
                0
            } else {
                3
            }
        };
        if class == 3 {
            for _ in 0..a {
                mp.row(&[u, v])?;
            }
            for _ in 0..b {
                mp.row(&[v, u])?;
            }
            c.kept_edges += a + b;
            // Without --disjoint-train-ratio every kept pair supervises training too (PyG).
            if nd > 0 || (u == v && shift == 0) {
                continue;
            }
        } else {
            c.held_out_edges += a + b;
        }
        let s = if class == 3 { 0 } else { class };
        let [src, dst] = &mut pos[s];
        if undirected {
            let (x, y) = if splitmix64(key ^ k_flip) & 1 == 1 { (v, u) } else { (u, v) };
            src.row(&[x])?;
            dst.row(&[y])?;
            c.positives[s] += 1;
        } else {
            for (present, x, y) in [(a > 0, u, v), (b > 0, v, u)] {
                if present {
                    src.row(&[x])?;
                    dst.row(&[y])?;
                    c.positives[s] += 1;
                }
            }
        }
    }
    task.finish();
    let mut files = Vec::new();
    mp.finish()?;
    for (i, s) in LINK_SPLITS.iter().enumerate() {
        let [src, dst] = pos.remove(0);
        debug_assert_eq!(src.rows, c.positives[i]);
        for (part, w) in [("src", src), ("dst", dst)] {
            let (bytes, crc) = w.finish()?;
            files.push((link_file(s, part), bytes, crc));
        }
    }
    Ok((c, files))
}

/// Read `count` int64 values from element `first` of the `.npy` file `path`.
fn read_i64s(path: &Path, first: u64, count: usize) -> Result<Vec<u64>> {
    let (r, h) = open_array(path, None, "int64 array")?;
    let mut b = vec![0u8; count * 8];
    r.read_exact_at(&mut b, h.data_offset + first * 8)?;
    Ok(b.chunks_exact(8).map(|c| i64::from_le_bytes(c.try_into().unwrap()) as u64).collect())
}

/// Mark `hit[i]` for every candidate whose key is in the sorted key file
/// `path` (`stride` u64s per record, the key first); `cand` sorted by key.
fn join_sorted(path: &Path, stride: usize, cand: &[(u64, usize)], hit: &mut [bool]) -> Result<()> {
    if cand.is_empty() || !path.exists() {
        return Ok(());
    }
    let mut r = KeyFileReader::open(path)?;
    let mut i = 0;
    'file: while let Some(k) = r.next_key()? {
        for _ in 1..stride {
            r.next_key()?;
        }
        while cand[i].0 < k {
            i += 1;
            if i == cand.len() {
                break 'file;
            }
        }
        let mut j = i;
        while j < cand.len() && cand[j].0 == k {
            hit[cand[j].1] = true;
            j += 1;
        }
    }
    Ok(())
}

/// Pass 3: `k` negative destinations per validation and test positive
/// (`pos` = their counts), never a true pair, all pairs distinct; drawn
/// from the destination type alone in a bipartite `space`.
#[allow(clippy::too_many_arguments)]
fn negatives(
    disk: &Disk,
    tmp: &Path,
    seed: u64,
    k_order: u64,
    num_nodes: u64,
    space: Space,
    m: u64,
    k: u64,
    pos: [u64; 2],
    chunk_bytes: u64,
    progress: &Progress,
) -> Result<Files> {
    let total = (pos[0] + pos[1]) * k;
    // Enough non-edges for every slot? (Pairs, self-loops excluded; a
    // bipartite relation's pairs join its two types.)
    let (possible, graph) = match space {
        Space::Single { .. } => {
            (num_nodes as u128 * num_nodes.saturating_sub(1) as u128 / 2, format!("the graph of {num_nodes} nodes"))
        }
        Space::Bipartite { ns, nd } => {
            (ns as u128 * nd as u128, format!("the edge type between {ns} source and {nd} destination nodes"))
        }
    };
    let free = possible.saturating_sub(m as u128);
    if possible == 0 || free < total as u128 {
        return Err(BuildError::config(format!(
            "--neg-per-pos {k}: {total} distinct negative pairs are needed but {graph} and {m} edge pairs has only \
             {free} non-adjacent pairs"
        )));
    }
    let k_neg = splitmix64(seed ^ SALT_NEG);
    let per_chunk = (chunk_bytes / NEG_SLOT_BYTES).max(1 << 10);
    let mut outs = [
        NpyOut::create(disk, &tmp.join(link_file("val", "neg")), Dtype::Int64, None, pos[0] * k)?,
        NpyOut::create(disk, &tmp.join(link_file("test", "neg")), Dtype::Int64, None, pos[1] * k)?,
    ];
    let src_files = [tmp.join(link_file("val", "src")), tmp.join(link_file("test", "src"))];
    let accepted = tmp.join(ACCEPTED_FILE);
    let mut task = progress.task("link split: negatives", "negatives", total);
    let mut start = 0u64;
    while start < total {
        let len = per_chunk.min(total - start) as usize;
        // Sources of the chunk's slots: slot s is positive s / k (val first, then test).
        let mut src = Vec::with_capacity(len);
        let (first_pos, last_pos) = (start / k, (start + len as u64 - 1) / k);
        let mut rows = Vec::new();
        for (f, lo, hi) in [(0usize, 0u64, pos[0]), (1, pos[0], pos[0] + pos[1])] {
            let (a, b) = (first_pos.max(lo), (last_pos + 1).min(hi));
            if a < b {
                rows.extend(read_i64s(&src_files[f], a - lo, (b - a) as usize)?);
            }
        }
        for s in start..start + len as u64 {
            src.push(rows[(s / k - first_pos) as usize]);
        }
        let mut dst = vec![0u64; len];
        let mut attempt = vec![0u32; len];
        let mut pending: Vec<usize> = (0..len).collect();
        let mut chunk_keys: Vec<u64> = Vec::with_capacity(len);
        while !pending.is_empty() {
            progress.check()?;
            let mut cand: Vec<(u64, usize)> = Vec::with_capacity(pending.len());
            for &i in &pending {
                if attempt[i] >= NEG_ROUNDS_MAX {
                    return Err(BuildError::config(format!(
                        "--neg-per-pos {k}: no negative destination found for source node {} after {NEG_ROUNDS_MAX} \
                         draws (it is adjacent to, or already paired with, nearly every node)",
                        src[i]
                    )));
                }
                let slot = start + i as u64;
                let r = splitmix64(splitmix64(slot ^ k_neg) ^ u64::from(attempt[i]));
                let w = match space {
                    Space::Single { .. } => {
                        let w = r % (num_nodes - 1);
                        w + (w >= src[i]) as u64 // uniform over the other nodes
                    }
                    Space::Bipartite { ns, nd } => ns + r % nd, // uniform over the destination type
                };
                dst[i] = w;
                cand.push((scramble(k_order, pair_key(src[i], w)), i));
            }
            cand.sort_unstable();
            let mut hit = vec![false; len];
            for j in 1..cand.len() {
                if cand[j].0 == cand[j - 1].0 {
                    hit[cand[j].1] = true; // a pair drawn twice: the first slot keeps it
                }
            }
            for &(key, i) in &cand {
                if chunk_keys.binary_search(&key).is_ok() {
                    hit[i] = true;
                }
            }
            join_sorted(&tmp.join(PAIRS_FILE), 2, &cand, &mut hit)?;
            join_sorted(&accepted, 1, &cand, &mut hit)?;
            let mut next = Vec::new();
            let mut fresh = Vec::new();
            for &(key, i) in &cand {
                if hit[i] {
                    attempt[i] += 1;
                    next.push(i);
                } else {
                    fresh.push(key);
                }
            }
            task.add(fresh.len() as u64);
            chunk_keys.extend(fresh);
            chunk_keys.sort_unstable();
            next.sort_unstable();
            pending = next;
        }
        for (i, &w) in dst.iter().enumerate() {
            let slot = start + i as u64;
            outs[usize::from(slot >= pos[0] * k)].row(&[w - space.dst_shift()])?;
        }
        merge_accepted(&accepted, &chunk_keys)?;
        start += len as u64;
    }
    task.finish();
    let mut files = Vec::new();
    for (s, w) in ["val", "test"].iter().zip(outs) {
        let (bytes, crc) = w.finish()?;
        files.push((link_file(s, "neg"), bytes, crc));
    }
    Ok(files)
}

/// Merge the sorted `keys` into the sorted key file `path` (rewritten).
fn merge_accepted(path: &Path, keys: &[u64]) -> Result<()> {
    let next = path.with_extension("next");
    let mut out = OutFile::create(&next)?; // scratch: real disk
    let mut buf = Vec::with_capacity(1 << 20);
    let mut i = 0;
    let flush = |buf: &mut Vec<u8>, out: &mut OutFile, force: bool| -> Result<()> {
        if force || buf.len() >= 1 << 20 {
            out.write(buf)?;
            buf.clear();
        }
        Ok(())
    };
    if path.exists() {
        let mut r = KeyFileReader::open(path)?;
        while let Some(k) = r.next_key()? {
            while i < keys.len() && keys[i] < k {
                buf.extend_from_slice(&keys[i].to_le_bytes());
                i += 1;
            }
            buf.extend_from_slice(&k.to_le_bytes());
            flush(&mut buf, &mut out, false)?;
        }
    }
    for &k in &keys[i..] {
        buf.extend_from_slice(&k.to_le_bytes());
        flush(&mut buf, &mut out, false)?;
    }
    flush(&mut buf, &mut out, true)?;
    out.finish()?;
    std::fs::rename(&next, path).map_err(|e| BuildError::config(format!("{}: rename: {e}", next.display())))?;
    Ok(())
}

/// `--link-split-files DIR`: check a given split's arrays (int64; ids in
/// `[0, num_nodes)`) and copy them, 1-D, into the dataset.
pub(super) fn given_split(tmp: &Path, opts: &BuildOptions, dir: &Path, num_nodes: u64) -> Result<LinkOut> {
    let mut splits = std::collections::BTreeMap::new();
    let mut files = Vec::new();
    for s in LINK_SPLITS {
        let path = |p: &str| dir.join(link_file(s, p));
        let present: Vec<&str> = LINK_PARTS.iter().copied().filter(|p| path(p).exists()).collect();
        if present.is_empty() {
            continue;
        }
        for (a, b) in [("src", "dst"), ("neg_src", "neg_dst")] {
            if present.contains(&a) != present.contains(&b) {
                let (have, miss) = if present.contains(&a) { (a, b) } else { (b, a) };
                return Err(BuildError::config(format!(
                    "{}: {} without {}",
                    dir.display(),
                    link_file(s, have),
                    link_file(s, miss)
                )));
            }
        }
        if !present.contains(&"src") {
            return Err(BuildError::config(format!("{}: {} missing", dir.display(), link_file(s, "src"))));
        }
        let mut part = LinkSplitPart::default();
        let mut copy = |p: &str, want_rows: Option<u64>| -> Result<(u64, u64)> {
            let (rows, cols, entry) = copy_ids(&opts.disk, &path(p), &tmp.join(link_file(s, p)), want_rows, num_nodes)?;
            files.push(entry);
            Ok((rows, cols))
        };
        let (n, _) = copy("src", None)?;
        copy("dst", Some(n))?;
        part.positives = n;
        if present.contains(&"neg") {
            let (_, k) = copy("neg", Some(n))?;
            part.neg_per_positive = k;
        }
        if present.contains(&"neg_src") {
            let (mneg, _) = copy("neg_src", None)?;
            copy("neg_dst", Some(mneg))?;
            part.neg_pairs = mneg;
        }
        splits.insert(s.to_string(), part);
    }
    if splits.is_empty() {
        return Err(BuildError::config(format!(
            "{}: no link split files (expected link_<split>_src.npy and link_<split>_dst.npy for a split of {:?})",
            dir.display(),
            LINK_SPLITS
        )));
    }
    let info = LinkSplitInfo { origin: "given".into(), undirected: opts.symmetrize, splits, ..Default::default() };
    Ok(LinkOut { files, info, notes: Vec::new() })
}

/// Copy the int64 id array `from` (`[rows]` or `[rows, cols]`; `rows` must
/// be `want_rows` when given) to `to` as a 1-D `<i8` array, every id
/// checked `< num_nodes`. Returns (rows, cols, the file entry).
fn copy_ids(
    disk: &Disk,
    from: &Path,
    to: &Path,
    want_rows: Option<u64>,
    num_nodes: u64,
) -> Result<(u64, u64, (String, u64, u32))> {
    let (r, h) = open_array(from, None, "int64 id array")?;
    let file = from.display().to_string();
    if h.dtype != Dtype::Int64 {
        return Err(BuildError::input(&file, "header", format!("dtype {}: expected int64 node ids", h.dtype.name())));
    }
    let (rows, cols) = match h.shape.as_slice() {
        [n] => (*n, 1),
        [n, k] if *k >= 1 => (*n, *k),
        s => return Err(BuildError::input(&file, "header", format!("shape {s:?}: expected [n] or [n, K]"))),
    };
    if let Some(w) = want_rows.filter(|&w| w != rows) {
        return Err(BuildError::input(&file, "header", format!("{rows} rows: expected {w}, as its split's sources")));
    }
    let total = rows.checked_mul(cols).ok_or_else(|| BuildError::input(&file, "header", "shape overflows"))?;
    let mut out = OutFile::create_on(disk, to)?;
    out.write(&encode_header(Dtype::Int64, &[total]))?;
    let mut b = vec![0u8; 1 << 20];
    let mut at = 0u64;
    while at < total {
        let n = (total - at).min(1 << 17) as usize;
        let chunk = &mut b[..n * 8];
        r.read_exact_at(chunk, h.data_offset + at * 8)?;
        for (i, c) in chunk.chunks_exact(8).enumerate() {
            let v = i64::from_le_bytes(c.try_into().unwrap());
            if v < 0 || v as u64 >= num_nodes {
                let e = at + i as u64;
                return Err(BuildError::input(
                    &file,
                    format!("row {}, column {} (byte offset {})", e / cols, e % cols, h.data_offset + e * 8),
                    format!("node id {v} out of range [0, {num_nodes})"),
                ));
            }
        }
        out.write(chunk)?;
        at += n as u64;
    }
    let (bytes, crc) = out.finish()?;
    let name = to.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    Ok((rows, cols, (name, bytes, crc)))
}

/// The intermediates a link split leaves in the build directory until the
/// layout has read them.
pub(super) fn intermediates(tmp: &Path) -> [PathBuf; 3] {
    [tmp.join(MP_EDGES_FILE), tmp.join(PAIRS_FILE), tmp.join(ACCEPTED_FILE)]
}
