//! IGBH-shaped synthetic heterogeneous graphs (`flashgnn generate igbh`),
//! written as a *typed npy directory* in bounded memory.
//!
//! # Shape
//!
//! IGB-heterogeneous (Khatua et al., "IGB: Addressing the Gaps in Labeling,
//! Features, Heterogeneity, and Size of Public Graph Datasets for Deep
//! Learning Research", KDD 2023) is an academic graph with node types
//! `paper`, `author`, `institute`, `fos` (field of study) and, in IGBH-large
//! and IGBH-full, `journal` and `conference`; its relations are
//! `paper__cites__paper`, `paper__written_by__author`,
//! `author__affiliated_to__institute`, `paper__topic__fos`, and (large/full)
//! `paper__published__journal`, `paper__venue__conference` (the directory
//! names `igb/dataloader.py` of IllinoisGraphBenchmark/IGB-Datasets and the
//! MLPerf Training GNN reference read).
//!
//! `--scale` is the **number of papers**. The other counts follow IGBH's
//! published sizes ([`IGBH_SIZES`]):
//! - node counts per size: NVIDIA's MLPerf Training v4.0 IGBH preprocessing
//!   (`NODE_COUNTS` in its `convert_igbh` script, all six types for all five
//!   sizes), matching IGB's own dataloader constants for paper/author
//!   (`IGBHeteroDGLDatasetMassive`: 100M/116,959,896 large,
//!   269,346,174/277,220,883 full) and DGL's IGBH download script
//!   (`examples/graphbolt/rgcn/download.py`, `num_nodes`);
//! - edge counts per size for the four core relations: DGL's same script
//!   (`num_edges`).
//!
//! At exactly a size's paper count the generator reproduces that size's
//! counts. Between two sizes each count is interpolated log-linearly in the
//! paper count (`log count` linear in `log papers`: institutes and fields of
//! study grow far slower than papers, and this follows that curve); below
//! IGBH-tiny (10^5 papers) and above IGBH-full every count keeps tiny's
//! (resp. full's) ratio to papers, i.e. `--scale 1000` is IGBH-tiny's
//! counts times 0.01. Every type has at least one node.
//!
//! The venue relations' sizes are not in any source read; they are an
//! assumption, MAG-like: [`JOURNAL_EDGES_PER_PAPER`] and
//! [`CONFERENCE_EDGES_PER_PAPER`] edges per paper. Venue types are written
//! when `--venues on`, or with `auto` (the default) from IGBH-large's paper
//! count up, as IGB has them.
//!
//! # Model
//!
//! - **Latent classes**: every node of every type has a class in
//!   `[0, classes)`: its *raw* id mod `classes`. Published ids are a keyed
//!   bijection of raw ids per type (a Feistel permutation cycle-walked onto
//!   `[0, N_t)`), so neither id order nor degree reveals the class.
//! - **Edges** of a relation with `E` edges: edge `i`'s source is raw id
//!   `floor(i * N_src / E)` (out-degrees even: every paper cites, has
//!   authors and topics, as in IGBH), its destination a power-law draw
//!   `floor(N_dst * u^a)` with `a = 1 / (1 - beta)`, which gives the raw id of
//!   rank `r` an expected in-degree `~ r^-beta` (Zipf; [`RELATIONS`] lists
//!   `beta` per relation). With probability `homophily` the destination is
//!   moved to the source's class (`r - r mod C + class(src)`, rank kept, so
//!   degrees stay power-law). Mean degrees are IGBH's edges/nodes ratios at
//!   the interpolated size. Self-loops and duplicate edges are left in, as
//!   the R-MAT generator leaves them (the importer normalises them).
//! - **Features** (every type, `feature_dim` wide, 1024 by default like
//!   IGBH): `centroid[type][class] * signal + N(0, 1)`, with `signal` as in
//!   the R-MAT generator (two centroids about `2 * feature_signal` noise
//!   std-devs apart). Each type has its own centroid table, so a paper's
//!   and an author's class-c features differ; non-paper features are thus
//!   class-correlated through the papers linked to them (an author mostly
//!   writes papers of its class, a field mostly tags them).
//! - **Labels**: papers only (`paper/node_label.npy`, int64, the IGBH
//!   19-class task by default); a paper is unlabeled (-1) with probability
//!   `1 - labeled`, by a hash of (seed, id).
//! - **Splits**: labeled papers land in train/val/test by a hash of
//!   (seed, id); IGB uses 60/20/20, the default.
//!
//! Layout (the typed builder's input):
//! ```text
//! DIR/num_nodes.json                         {"paper": N, "author": ..., ...}
//! DIR/generate.json                          the flashgnn-output marker
//! DIR/<ntype>/node_feat.npy                  [N_t, d] (absent when d = 0)
//! DIR/paper/node_label.npy                   [N_paper] int64, -1 unlabeled
//! DIR/paper/{train,val,test}_idx.npy         int64 local paper ids
//! DIR/<src>__<rel>__<dst>/edge_index.npy     [E, 2] int64 (or int32/uint32)
//! ```
//!
//! Memory: per worker one block of [`EDGE_BLOCK`] edges or of feature rows,
//! and `classes x dim` centroids per type; nothing grows with the graph.

use std::path::{Path, PathBuf};

use flashgnn_build::rows::{splitmix64, unit};
use flashgnn_build::{BuildError, Progress};
use flashgnn_format::dtype::write_float;
use flashgnn_format::npy::encode_header;
use flashgnn_format::Dtype;
use flashgnn_io::{fsync_dir, publish_dir, IoError, OutFile};
use rayon::prelude::*;

use crate::{Scramble, EDGE_BLOCK, EDGE_DTYPES, FEATURE_DTYPES};

/// Rows of features (or labels) generated per parallel work item.
const ROW_BLOCK: u64 = 4096;

/// One published IGBH size: its paper count and the counts that follow it.
#[derive(Debug, Clone, Copy)]
pub struct IgbhSize {
    pub name: &'static str,
    /// Node counts in [`NODE_TYPES`] order.
    pub nodes: [u64; 6],
    /// Edge counts of the four core relations, in [`RELATIONS`] order.
    pub edges: [u64; 4],
}

/// Node types, in the order every table here uses.
pub const NODE_TYPES: [&str; 6] = ["paper", "author", "institute", "fos", "journal", "conference"];

/// IGBH's five sizes (sources in the module documentation).
pub const IGBH_SIZES: [IgbhSize; 5] = [
    IgbhSize {
        name: "tiny",
        nodes: [100_000, 357_041, 8_738, 84_220, 8_101, 398],
        edges: [447_416, 471_443, 325_410, 718_445],
    },
    IgbhSize {
        name: "small",
        nodes: [1_000_000, 1_926_066, 14_751, 190_449, 15_277, 1_215],
        edges: [12_070_502, 4_553_516, 1_630_476, 7_234_122],
    },
    IgbhSize {
        name: "medium",
        nodes: [10_000_000, 15_544_654, 23_256, 415_054, 37_565, 4_189],
        edges: [120_077_694, 39_854_592, 11_049_412, 68_510_495],
    },
    IgbhSize {
        name: "large",
        nodes: [100_000_000, 116_959_896, 26_524, 649_707, 48_820, 4_490],
        edges: [1_223_571_364, 289_502_107, 34_099_660, 457_577_294],
    },
    IgbhSize {
        name: "full",
        nodes: [269_346_174, 277_220_883, 26_918, 712_960, 49_052, 4_547],
        edges: [3_996_442_004, 716_761_549, 48_521_486, 1_050_280_600],
    },
];

/// Assumed `paper__published__journal` edges per paper (no source gives the
/// count; MAG records a journal for about half of its papers).
pub const JOURNAL_EDGES_PER_PAPER: f64 = 0.5;
/// Assumed `paper__venue__conference` edges per paper (likewise).
pub const CONFERENCE_EDGES_PER_PAPER: f64 = 0.08;

/// A relation: (source type, name, destination type, Zipf exponent `beta` of
/// the destination's in-degree by rank).
#[derive(Debug, Clone, Copy)]
pub struct Relation {
    pub src: usize,
    pub name: &'static str,
    pub dst: usize,
    pub beta: f64,
}

impl Relation {
    /// `<src>__<name>__<dst>`, the directory of its `edge_index.npy`.
    pub fn dir_name(&self) -> String {
        format!("{}__{}__{}", NODE_TYPES[self.src], self.name, NODE_TYPES[self.dst])
    }
}

/// IGBH's relations; the first four exist at every size, the venue pair
/// with the venue types.
pub const RELATIONS: [Relation; 6] = [
    Relation { src: 0, name: "cites", dst: 0, beta: 0.55 },
    Relation { src: 0, name: "written_by", dst: 1, beta: 0.5 },
    Relation { src: 1, name: "affiliated_to", dst: 2, beta: 0.8 },
    Relation { src: 0, name: "topic", dst: 3, beta: 0.8 },
    Relation { src: 0, name: "published", dst: 4, beta: 0.6 },
    Relation { src: 0, name: "venue", dst: 5, beta: 0.6 },
];

/// Whether the venue types (`journal`, `conference`) and relations exist.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Venues {
    /// From IGBH-large's paper count up, as IGB has them.
    Auto,
    On,
    Off,
}

impl Venues {
    pub const ALL: [Venues; 3] = [Venues::Auto, Venues::On, Venues::Off];
    pub fn name(self) -> &'static str {
        match self {
            Venues::Auto => "auto",
            Venues::On => "on",
            Venues::Off => "off",
        }
    }
    pub fn parse(s: &str) -> Result<Venues, BuildError> {
        Venues::ALL
            .into_iter()
            .find(|v| v.name() == s)
            .ok_or_else(|| BuildError::config(format!("--venues {s:?} must be one of auto, on, off")))
    }
}

#[derive(Debug, Clone)]
pub struct IgbhOptions {
    /// Number of papers; every other count follows IGBH's (module docs).
    pub papers: u64,
    /// Feature width of every node type (0: no `node_feat.npy`).
    pub dim: u32,
    pub dtype: Dtype,
    pub edge_dtype: Dtype,
    /// Paper label classes (IGBH: 19, or 2983).
    pub classes: u32,
    pub seed: u64,
    /// Probability that an edge's destination is moved into its source's class.
    pub homophily: f64,
    /// Distance between class centroids in noise standard deviations.
    pub feature_signal: f64,
    /// Share of papers that carry a label.
    pub labeled: f64,
    /// train/val/test fractions of the labeled papers.
    pub split: (f64, f64, f64),
    pub venues: Venues,
    pub force: bool,
}

impl Default for IgbhOptions {
    fn default() -> Self {
        IgbhOptions {
            papers: IGBH_SIZES[0].nodes[0],
            dim: 1024,
            dtype: Dtype::Float32,
            edge_dtype: Dtype::Int64,
            classes: 19,
            seed: 0,
            homophily: 0.6,
            feature_signal: 1.0,
            labeled: 1.0,
            split: (0.6, 0.2, 0.2),
            venues: Venues::Auto,
            force: false,
        }
    }
}

/// Count of a column of [`IGBH_SIZES`] at `papers` papers: exact at a
/// size, log-log interpolated between sizes, tiny's / full's ratio outside.
fn interpolate(papers: u64, at: impl Fn(&IgbhSize) -> u64) -> u64 {
    let p = papers as f64;
    let first = &IGBH_SIZES[0];
    let last = &IGBH_SIZES[IGBH_SIZES.len() - 1];
    let v = if papers <= first.nodes[0] {
        at(first) as f64 * p / first.nodes[0] as f64
    } else if papers >= last.nodes[0] {
        at(last) as f64 * p / last.nodes[0] as f64
    } else {
        let k = IGBH_SIZES.windows(2).position(|w| papers <= w[1].nodes[0]).unwrap_or(0);
        let (a, b) = (&IGBH_SIZES[k], &IGBH_SIZES[k + 1]);
        let t = (p.ln() - (a.nodes[0] as f64).ln()) / ((b.nodes[0] as f64).ln() - (a.nodes[0] as f64).ln());
        ((at(a) as f64).ln() + t * ((at(b) as f64).ln() - (at(a) as f64).ln())).exp()
    };
    v.round().max(1.0) as u64
}

/// The graph's shape at `o`: node counts per type and edge counts per
/// relation; `None` for a type or relation that is not written.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct IgbhShape {
    pub nodes: [Option<u64>; 6],
    pub edges: [Option<u64>; 6],
}

impl IgbhShape {
    pub fn new(papers: u64, venues: Venues) -> IgbhShape {
        let with_venues = match venues {
            Venues::On => true,
            Venues::Off => false,
            Venues::Auto => papers >= IGBH_SIZES[3].nodes[0],
        };
        let mut nodes = [None; 6];
        let mut edges = [None; 6];
        nodes[0] = Some(papers.max(1));
        for (t, n) in nodes.iter_mut().enumerate().skip(1) {
            if t < 4 || with_venues {
                *n = Some(interpolate(papers, |s| s.nodes[t]));
            }
        }
        for (r, e) in edges.iter_mut().enumerate().take(4) {
            *e = Some(interpolate(papers, |s| s.edges[r]));
        }
        if with_venues {
            edges[4] = Some(((papers as f64) * JOURNAL_EDGES_PER_PAPER).round().max(1.0) as u64);
            edges[5] = Some(((papers as f64) * CONFERENCE_EDGES_PER_PAPER).round().max(1.0) as u64);
        }
        IgbhShape { nodes, edges }
    }
    pub fn num_nodes(&self) -> u64 {
        self.nodes.iter().flatten().sum()
    }
    pub fn num_edges(&self) -> u64 {
        self.edges.iter().flatten().sum()
    }
    /// `{"paper": N, ...}` in type order (`num_nodes.json`).
    pub fn nodes_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        for (t, n) in self.nodes.iter().enumerate() {
            if let Some(n) = n {
                m.insert(NODE_TYPES[t].into(), (*n).into());
            }
        }
        serde_json::Value::Object(m)
    }
    pub fn edges_json(&self) -> serde_json::Value {
        let mut m = serde_json::Map::new();
        for (r, e) in self.edges.iter().enumerate() {
            if let Some(e) = e {
                m.insert(RELATIONS[r].dir_name(), (*e).into());
            }
        }
        serde_json::Value::Object(m)
    }
}

/// A keyed bijection of `[0, n)`: [`Scramble`] over the next power of two,
/// cycle-walked back into range.
#[derive(Debug, Clone, Copy)]
pub struct Permutation {
    n: u64,
    s: Scramble,
}

impl Permutation {
    pub fn new(n: u64, key: u64) -> Permutation {
        let bits = (64 - (n.max(2) - 1).leading_zeros()).max(1);
        Permutation { n, s: Scramble::new(bits, key) }
    }
    pub fn forward(&self, x: u64) -> u64 {
        let mut y = self.s.forward(x);
        while y >= self.n {
            y = self.s.forward(y);
        }
        y
    }
    pub fn inverse(&self, y: u64) -> u64 {
        let mut x = self.s.inverse(y);
        while x >= self.n {
            x = self.s.inverse(x);
        }
        x
    }
}

/// The generator's state: shape, permutations, and the options.
pub struct IgbhModel {
    pub o: IgbhOptions,
    pub shape: IgbhShape,
    perms: [Permutation; 6],
}

impl IgbhModel {
    pub fn new(o: &IgbhOptions) -> IgbhModel {
        let shape = IgbhShape::new(o.papers, o.venues);
        let perms = std::array::from_fn(|t| {
            Permutation::new(shape.nodes[t].unwrap_or(1), splitmix64(o.seed ^ 0x16B4 ^ ((t as u64 + 1) << 40)))
        });
        IgbhModel { o: o.clone(), shape, perms }
    }

    fn classes(&self) -> u64 {
        self.o.classes.max(1) as u64
    }

    /// Latent class of node `id` (published) of type `t`.
    pub fn class_of(&self, t: usize, id: u64) -> u64 {
        self.perms[t].inverse(id) % self.classes()
    }

    /// Label of paper `id`: its class, or -1 when unlabeled.
    pub fn label(&self, id: u64) -> i64 {
        if self.o.labeled < 1.0 && unit(splitmix64(self.o.seed ^ 0x1ABE1 ^ splitmix64(id))) >= self.o.labeled {
            return -1;
        }
        self.class_of(0, id) as i64
    }

    /// Split of a labeled paper: 0 train, 1 val, 2 test, 3 none.
    fn split_of(&self, id: u64) -> usize {
        let (tr, va, te) = self.o.split;
        let u = unit(splitmix64(self.o.seed ^ 0x5_917 ^ splitmix64(id)));
        if u < tr {
            0
        } else if u < tr + va {
            1
        } else if u < tr + va + te {
            2
        } else {
            3
        }
    }

    /// Edge `i` of relation `r` (published ids, local to each end's type).
    pub fn edge(&self, r: usize, i: u64) -> (u64, u64) {
        let rel = RELATIONS[r];
        let e = self.shape.edges[r].unwrap_or(1);
        let (ns, nd) = (self.shape.nodes[rel.src].unwrap_or(1), self.shape.nodes[rel.dst].unwrap_or(1));
        let s = ((i as u128 * ns as u128) / e as u128) as u64;
        let h = splitmix64(self.o.seed ^ ((r as u64 + 1) << 56) ^ splitmix64(i));
        let a = 1.0 / (1.0 - rel.beta);
        let mut d = ((nd as f64 * unit(h).powf(a)) as u64).min(nd - 1);
        let c = self.classes();
        if c > 1 && nd >= c && unit(splitmix64(h)) < self.o.homophily {
            d = d - d % c + s % c;
            if d >= nd {
                d -= c;
            }
        }
        (self.perms[rel.src].forward(s), self.perms[rel.dst].forward(d))
    }
}

#[derive(Debug, Clone)]
pub struct IgbhReport {
    pub output: PathBuf,
    pub shape: IgbhShape,
    pub bytes: u64,
    pub seconds: f64,
}

impl IgbhReport {
    /// The report `flashgnn generate igbh` prints: `generate rmat`'s keys
    /// (totals) plus the counts per node type and per relation.
    pub fn report(&self) -> serde_json::Value {
        serde_json::json!({
            "output": self.output.display().to_string(),
            "model": "igbh",
            "num_nodes": self.shape.num_nodes(),
            "num_edges": self.shape.num_edges(),
            "node_types": self.shape.nodes_json(),
            "edge_types": self.shape.edges_json(),
            "bytes": self.bytes,
            "seconds": self.seconds,
        })
    }
}

/// Refuse options the generator cannot honour, before anything is written.
fn check_options(o: &IgbhOptions, shape: &IgbhShape) -> Result<(), BuildError> {
    if o.papers == 0 || o.papers > 1 << 40 {
        return Err(BuildError::config(format!("--scale {} must be in [1, 2^40] (the number of papers)", o.papers)));
    }
    if o.classes == 0 || o.classes as u64 > o.papers {
        return Err(BuildError::config(format!("--classes {} must be in [1, papers = {}]", o.classes, o.papers)));
    }
    if !FEATURE_DTYPES.contains(&o.dtype) {
        return Err(BuildError::config(format!("--dtype {} must be float16, float32 or float64", o.dtype.name())));
    }
    if !EDGE_DTYPES.contains(&o.edge_dtype) {
        return Err(BuildError::config(format!("--edge-dtype {} must be int64, int32 or uint32", o.edge_dtype.name())));
    }
    let id_max = match o.edge_dtype {
        Dtype::Int32 => i32::MAX as u64,
        Dtype::Uint32 => u32::MAX as u64,
        _ => i64::MAX as u64,
    };
    for (t, n) in shape.nodes.iter().enumerate() {
        if let Some(n) = n {
            if n - 1 > id_max {
                return Err(BuildError::config(format!(
                    "--edge-dtype {}: {} ids reach {}, above the dtype's largest value {id_max}; use int64",
                    o.edge_dtype.name(),
                    NODE_TYPES[t],
                    n - 1
                )));
            }
        }
    }
    for (name, v) in [("--homophily", o.homophily), ("--labeled", o.labeled)] {
        if !(0.0..=1.0).contains(&v) {
            return Err(BuildError::config(format!("{name} {v} must be in [0, 1]")));
        }
    }
    let (a, b, c) = o.split;
    if a < 0.0 || b < 0.0 || c < 0.0 || a + b + c > 1.0 + 1e-9 {
        return Err(BuildError::config(format!("--split {a},{b},{c}: fractions must be >= 0 and sum to <= 1")));
    }
    if !o.feature_signal.is_finite() {
        return Err(BuildError::config(format!("--feature-signal {} must be finite", o.feature_signal)));
    }
    Ok(())
}

/// Generate an IGBH-shaped graph in the typed npy-directory layout at `out`.
pub fn generate_igbh(out: &Path, o: &IgbhOptions, progress: &Progress) -> Result<IgbhReport, BuildError> {
    let t = std::time::Instant::now();
    let m = IgbhModel::new(o);
    check_options(o, &m.shape)?;
    let mut guard = crate::TmpOut::beside(out, o.force)?;
    let tmp = guard.dir.clone();

    let mut dirs = Vec::new();
    for (t, n) in m.shape.nodes.iter().enumerate() {
        if n.is_some() {
            dirs.push(tmp.join(NODE_TYPES[t]));
        }
    }
    for (r, e) in m.shape.edges.iter().enumerate() {
        if e.is_some() {
            dirs.push(tmp.join(RELATIONS[r].dir_name()));
        }
    }
    for d in &dirs {
        std::fs::create_dir(d).map_err(|e| IoError::new("creating", d, None, e))?;
    }

    let (edge_res, node_res) = rayon::join(
        || write_all_edges(&tmp, &m, progress),
        || -> Result<u64, BuildError> { Ok(write_all_features(&tmp, &m, progress)? + write_labels(&tmp, &m)?) },
    );
    let mut bytes = edge_res? + node_res?;
    progress.check()?;
    bytes += write_json(&tmp.join("num_nodes.json"), &m.shape.nodes_json())?;
    let marker = serde_json::json!({
        "flashgnn_output": "generate", "model": "igbh", "papers": o.papers, "dim": o.dim,
        "dtype": o.dtype.name(), "edge_dtype": o.edge_dtype.name(), "classes": o.classes, "seed": o.seed,
        "homophily": o.homophily, "feature_signal": o.feature_signal, "labeled": o.labeled,
        "split": [o.split.0, o.split.1, o.split.2], "venues": o.venues.name(),
        "num_nodes": m.shape.nodes_json(), "num_edges": m.shape.edges_json(),
    });
    bytes += write_json(&tmp.join("generate.json"), &marker)?;
    for d in &dirs {
        fsync_dir(d)?;
    }
    publish_dir(&tmp, out)?;
    guard.kept = true;
    Ok(IgbhReport { output: out.to_path_buf(), shape: m.shape.clone(), bytes, seconds: t.elapsed().as_secs_f64() })
}

fn write_json(path: &Path, v: &serde_json::Value) -> Result<u64, BuildError> {
    let mut f = OutFile::create(path)?;
    f.write(serde_json::to_string_pretty(v).unwrap_or_default().as_bytes())?;
    Ok(f.finish()?.0)
}

/// Write `n` items to `f` in blocks of `block`, each block's bytes made by
/// `make(lo, hi)` in parallel (one group of blocks per worker at a time) and
/// written in order; `done(k)` after each block. Returns nothing: the
/// caller finishes `f`.
fn write_blocks(
    f: &mut OutFile,
    n: u64,
    block: u64,
    progress: &Progress,
    make: impl Fn(u64, u64) -> Vec<u8> + Sync,
    mut done: impl FnMut(u64),
) -> Result<(), BuildError> {
    let blocks = n.div_ceil(block);
    let group = rayon::current_num_threads().max(1) as u64 * 2;
    let mut b = 0;
    while b < blocks {
        progress.check()?;
        let hi = (b + group).min(blocks);
        let bufs: Vec<(u64, Vec<u8>)> = (b..hi)
            .into_par_iter()
            .map(|bi| {
                let lo = bi * block;
                let up = (lo + block).min(n);
                (up - lo, make(lo, up))
            })
            .collect();
        for (k, buf) in bufs {
            f.write(&buf)?;
            done(k);
        }
        b = hi;
    }
    Ok(())
}

/// Every relation's `edge_index.npy`. Returns the bytes written.
fn write_all_edges(tmp: &Path, m: &IgbhModel, progress: &Progress) -> Result<u64, BuildError> {
    let mut task = progress.task("edges", "edges", m.shape.num_edges());
    let wide = m.o.edge_dtype == Dtype::Int64;
    let pair = 2 * m.o.edge_dtype.size() as u64;
    let mut bytes = 0;
    for (r, e) in m.shape.edges.iter().enumerate() {
        let Some(e) = *e else { continue };
        let mut f = OutFile::create(tmp.join(RELATIONS[r].dir_name()).join("edge_index.npy"))?;
        f.write(&encode_header(m.o.edge_dtype, &[e, 2]))?;
        write_blocks(
            &mut f,
            e,
            EDGE_BLOCK,
            progress,
            |lo, hi| {
                let mut buf = Vec::with_capacity(((hi - lo) * pair) as usize);
                for i in lo..hi {
                    // `check_options` made sure every id fits the dtype.
                    let (s, d) = m.edge(r, i);
                    crate::push_pair(&mut buf, s, d, wide);
                }
                buf
            },
            |k| task.add(k),
        )?;
        bytes += f.finish()?.0;
    }
    Ok(bytes)
}

/// Two standard normals from one hashed pair of uniforms (Box–Muller).
fn gaussian_pair(h: u64) -> (f64, f64) {
    let u1 = unit(splitmix64(h)).max(1e-300);
    let u2 = unit(splitmix64(h ^ 0xA5A5_A5A5));
    let r = (-2.0 * u1.ln()).sqrt();
    let (s, c) = (std::f64::consts::TAU * u2).sin_cos();
    (r * c, r * s)
}

/// Every type's `node_feat.npy`. Returns the bytes written.
fn write_all_features(tmp: &Path, m: &IgbhModel, progress: &Progress) -> Result<u64, BuildError> {
    let o = &m.o;
    if o.dim == 0 {
        return Ok(0);
    }
    let dim = o.dim as u64;
    let s = o.dtype.size();
    let signal = o.feature_signal / ((o.dim.max(2) as f64) / 2.0).sqrt();
    let mut task = progress.task("features", "rows", m.shape.num_nodes());
    let mut bytes = 0;
    for (t, n) in m.shape.nodes.iter().enumerate() {
        let Some(n) = *n else { continue };
        // Centroids of this type: classes x dim values.
        let table: Vec<f64> = (0..m.classes())
            .flat_map(|c| (0..dim).map(move |j| (c, j)))
            .map(|(c, j)| {
                let h = splitmix64(o.seed ^ 0xC1A55 ^ ((t as u64) << 48) ^ (c << 32) ^ j);
                gaussian_pair(h).0 * signal
            })
            .collect();
        let mut f = OutFile::create(tmp.join(NODE_TYPES[t]).join("node_feat.npy"))?;
        f.write(&encode_header(o.dtype, &[n, dim]))?;
        write_blocks(
            &mut f,
            n,
            ROW_BLOCK.min((1 << 22) / dim.max(1)).max(1),
            progress,
            |lo, hi| {
                let mut buf = vec![0u8; ((hi - lo) * dim) as usize * s];
                let mut at = 0;
                for r in lo..hi {
                    let class = m.class_of(t, r);
                    let cen = &table[(class * dim) as usize..][..dim as usize];
                    let base = splitmix64(o.seed ^ 0xFEA7 ^ ((t as u64) << 56) ^ splitmix64(r));
                    let mut j = 0;
                    while j < dim as usize {
                        let (g0, g1) = gaussian_pair(base.wrapping_add(j as u64));
                        write_float(o.dtype, cen[j] + g0, &mut buf[at..at + s]);
                        at += s;
                        if j + 1 < dim as usize {
                            write_float(o.dtype, cen[j + 1] + g1, &mut buf[at..at + s]);
                            at += s;
                        }
                        j += 2;
                    }
                }
                buf
            },
            |k| task.add(k),
        )?;
        bytes += f.finish()?.0;
    }
    Ok(bytes)
}

/// `paper/node_label.npy` and `paper/{train,val,test}_idx.npy`. Returns the
/// bytes written.
fn write_labels(tmp: &Path, m: &IgbhModel) -> Result<u64, BuildError> {
    let n = m.shape.nodes[0].unwrap_or(0);
    let dir = tmp.join(NODE_TYPES[0]);
    let none = Progress::new();
    let mut total = 0;
    let mut f = OutFile::create(dir.join("node_label.npy"))?;
    f.write(&encode_header(Dtype::Int64, &[n]))?;
    write_blocks(
        &mut f,
        n,
        1 << 16,
        &none,
        |lo, hi| (lo..hi).flat_map(|v| m.label(v).to_le_bytes()).collect(),
        |_| {},
    )?;
    total += f.finish()?.0;
    // The split of each labeled paper: counted, then written.
    let split = |v: u64| if m.label(v) < 0 { 3 } else { m.split_of(v) };
    let blocks = n.div_ceil(1 << 16);
    let counts = (0..blocks)
        .into_par_iter()
        .map(|b| {
            let mut c = [0u64; 4];
            for v in b << 16..((b + 1) << 16).min(n) {
                c[split(v)] += 1;
            }
            c
        })
        .reduce(|| [0; 4], |a, b| std::array::from_fn(|k| a[k] + b[k]));
    for (k, name) in ["train", "val", "test"].iter().enumerate() {
        let mut f = OutFile::create(dir.join(format!("{name}_idx.npy")))?;
        f.write(&encode_header(Dtype::Int64, &[counts[k]]))?;
        write_blocks(
            &mut f,
            n,
            1 << 16,
            &none,
            |lo, hi| (lo..hi).filter(|&v| split(v) == k).flat_map(|v| (v as i64).to_le_bytes()).collect(),
            |_| {},
        )?;
        total += f.finish()?.0;
    }
    Ok(total)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_are_igbh_at_each_size_and_scale_with_papers() {
        for s in IGBH_SIZES {
            let shape = IgbhShape::new(s.nodes[0], Venues::On);
            for (t, name) in NODE_TYPES.iter().enumerate() {
                assert_eq!(shape.nodes[t], Some(s.nodes[t]), "{} {name}", s.name);
            }
            for (r, rel) in RELATIONS.iter().enumerate().take(4) {
                assert_eq!(shape.edges[r], Some(s.edges[r]), "{} {}", s.name, rel.dir_name());
            }
        }
        // Below tiny: tiny's ratios.
        let shape = IgbhShape::new(10_000, Venues::Auto);
        assert_eq!(shape.nodes[1], Some(35_704));
        assert_eq!(shape.nodes[2], Some(874));
        assert_eq!(shape.edges[0], Some(44_742));
        assert_eq!((shape.nodes[4], shape.edges[4]), (None, None), "no venues below IGBH-large under auto");
        // Between sizes: monotone, inside the neighbours' counts.
        let mid = IgbhShape::new(3_000_000, Venues::Auto);
        for t in 1..4 {
            let v = mid.nodes[t].unwrap();
            assert!(IGBH_SIZES[1].nodes[t] < v && v < IGBH_SIZES[2].nodes[t], "{t}: {v}");
        }
        assert!(IgbhShape::new(100_000_000, Venues::Auto).nodes[5].is_some());
        assert!(IgbhShape::new(100_000_000, Venues::Off).nodes[5].is_none());
    }

    #[test]
    fn permutation_is_a_bijection_of_any_range() {
        for n in [1u64, 2, 3, 7, 100, 1000, 1025] {
            let p = Permutation::new(n, 9);
            let mut seen = vec![false; n as usize];
            for x in 0..n {
                let y = p.forward(x);
                assert!(y < n && !seen[y as usize], "n {n}: {x} -> {y}");
                seen[y as usize] = true;
                assert_eq!(p.inverse(y), x);
            }
        }
    }

    #[test]
    fn edges_are_in_range_homophilous_and_skewed() {
        let o = IgbhOptions { papers: 20_000, venues: Venues::On, ..Default::default() };
        let m = IgbhModel::new(&o);
        for (r, e) in m.shape.edges.iter().enumerate() {
            let e = e.unwrap();
            let rel = RELATIONS[r];
            let (ns, nd) = (m.shape.nodes[rel.src].unwrap(), m.shape.nodes[rel.dst].unwrap());
            let mut same = 0;
            let mut deg = vec![0u32; nd as usize];
            for i in 0..e {
                let (s, d) = m.edge(r, i);
                assert!(s < ns && d < nd, "{}: edge {i} = ({s}, {d}) with {ns} x {nd} nodes", rel.dir_name());
                same += (m.class_of(rel.src, s) == m.class_of(rel.dst, d)) as u64;
                deg[d as usize] += 1;
            }
            let frac = same as f64 / e as f64;
            assert!(frac > 0.55, "{}: same-class share {frac}", rel.dir_name());
            let max = *deg.iter().max().unwrap() as f64;
            let mean = e as f64 / nd as f64;
            // Max/mean grows like nd^beta; homophily shares the top ranks
            // among the classes, so a few-dozen-node type is flatter.
            let skew = if nd >= 1000 { 10.0 } else { 3.0 };
            assert!(max > skew * mean, "{}: max in-degree {max} vs mean {mean}", rel.dir_name());
        }
        // Without homophily: about 1/classes.
        let m = IgbhModel::new(&IgbhOptions { papers: 20_000, homophily: 0.0, ..Default::default() });
        let e = m.shape.edges[0].unwrap();
        let same = (0..e).filter(|&i| {
            let (s, d) = m.edge(0, i);
            m.label(s) == m.label(d)
        });
        let frac = same.count() as f64 / e as f64;
        assert!(frac < 0.15, "same-class share without homophily {frac}");
    }

    #[test]
    fn writes_the_typed_layout_deterministically() {
        let d = tempfile::tempdir().unwrap();
        let o = IgbhOptions { papers: 2000, dim: 8, seed: 5, venues: Venues::On, ..Default::default() };
        let rep = generate_igbh(&d.path().join("a"), &o, &Progress::new()).unwrap();
        generate_igbh(&d.path().join("b"), &o, &Progress::new()).unwrap();
        let other = IgbhOptions { seed: 6, ..o.clone() };
        generate_igbh(&d.path().join("c"), &other, &Progress::new()).unwrap();
        let mut files = Vec::new();
        for t in NODE_TYPES {
            files.push(format!("{t}/node_feat.npy"));
        }
        for f in ["node_label.npy", "train_idx.npy", "val_idx.npy", "test_idx.npy"] {
            files.push(format!("paper/{f}"));
        }
        for r in RELATIONS {
            files.push(format!("{}/edge_index.npy", r.dir_name()));
        }
        files.push("num_nodes.json".into());
        files.push("generate.json".into());
        for f in &files {
            let a = std::fs::read(d.path().join("a").join(f)).unwrap();
            assert_eq!(a, std::fs::read(d.path().join("b").join(f)).unwrap(), "{f}");
        }
        let e = "paper__cites__paper/edge_index.npy";
        assert_ne!(
            std::fs::read(d.path().join("a").join(e)).unwrap(),
            std::fs::read(d.path().join("c").join(e)).unwrap()
        );
        let nodes: serde_json::Value =
            serde_json::from_slice(&std::fs::read(d.path().join("a/num_nodes.json")).unwrap()).unwrap();
        assert_eq!(nodes, rep.shape.nodes_json());
        assert_eq!(nodes["paper"], 2000);
        // Edge file size: header + E pairs of int64.
        let len = std::fs::metadata(d.path().join("a").join(e)).unwrap().len();
        assert_eq!(len, 128 + rep.shape.edges[0].unwrap() * 16);
        // Nothing else in the directory.
        let mut all = Vec::new();
        for entry in walk(&d.path().join("a")) {
            all.push(entry);
        }
        all.sort();
        files.sort();
        assert_eq!(all, files);
    }

    fn walk(root: &Path) -> Vec<String> {
        let mut out = Vec::new();
        for e in std::fs::read_dir(root).unwrap() {
            let e = e.unwrap();
            let name = e.file_name().to_string_lossy().into_owned();
            if e.file_type().unwrap().is_dir() {
                out.extend(walk(&e.path()).into_iter().map(|f| format!("{name}/{f}")));
            } else {
                out.push(name);
            }
        }
        out
    }

    #[test]
    fn refuses_ids_too_large_for_the_edge_dtype() {
        let o = IgbhOptions { papers: 3_000_000_000, edge_dtype: Dtype::Int32, ..Default::default() };
        let m = IgbhModel::new(&o);
        let e = check_options(&o, &m.shape).unwrap_err().to_string();
        assert!(e.contains("paper ids reach 2999999999"), "{e}");
    }
}
