//! Link-prediction batches: a batch of supervision edges `(src, dst)`, the
//! negatives drawn for them, and the neighbourhood of every endpoint, in one
//! request ([`NeighborSampler::sample_link`]).
//!
//! What a link batch is, in PyG's terms (`torch_geometric.sampler.
//! neighbor_sampler.edge_sample`, not disjoint):
//!
//! - **negatives**: `binary` draws `ceil(P * amount)` random pairs (a source
//!   and a destination each); `triplet` draws `amount` destinations per
//!   positive (`P * amount`, the negatives of positive `i` at `i * amount
//!   ..`). [`NegDist::Uniform`] draws every node with probability `1/N`,
//!   [`NegDist::Degree`] with probability proportional to `degree^0.75`
//!   (word2vec's and PinSage's smoothing).
//! - **seeds**: the sorted distinct ids of every endpoint, concatenated as
//!   PyG does (`[src, src_neg, dst, dst_neg]` for binary and for no
//!   negatives, `[src, dst, dst_neg]` for triplet); [`LinkPart::index`] is
//!   each endpoint's local id in that order (PyG's `inverse_seed`).
//! - **excluding true edges** (`LinkSpec::exclude_true_edges`): a negative
//!   `(s, d)` that is a stored edge (`s` in `d`'s list) is redrawn (its
//!   destination, from a key of its own per round), at most
//!   [`EXCLUDE_ROUNDS_MAX`] rounds; what is left is kept and counted
//!   ([`LinkPart::false_negatives`]). A list already in memory (the
//!   `memory` engine's copy, the cross-batch cache) is taken from there; the
//!   others are read with every read in flight and their pages kept in the
//!   batch's pages, so the sampling pass that follows serves those
//!   destinations' slots without reading them again (their slots are read
//!   anyway: they are seeds).
//! - **excluding seed edges** (`LinkSpec::exclude_seed_edges`, GraphBolt's
//!   `exclude_seed_edges(include_reverse_edges=True)`): every sampled edge
//!   `(u, v)` with `(u, v)` or `(v, u)` a positive of the batch is removed
//!   from `edge_index` after sampling (nodes stay; `num_sampled_edges`
//!   counts what is left).
//!
//! - **typed graphs** (`LinkSpec::edge_type`): sources and their negatives
//!   lie in the edge type's source node type, destinations and theirs in its
//!   destination type (negatives drawn uniformly within the type's range;
//!   on a homogeneous graph the range is every node and the draws are the
//!   same). Of two node types, the seeds are two sorted distinct lists,
//!   sources then destinations, each endpoint's local id its rank in its
//!   own list (PyG's `edge_sample` with a seed dict); the sampler takes
//!   seeds of both types for that batch and starts each type's `n_id` with
//!   its own seeds. The true-edge check reads the destination's list along
//!   the edge type alone (its slot's relation counts) and redraws within
//!   the destination type; seed edges are removed from the edge type and
//!   its reverse type ([`remove_typed_seed_edges`]).
//!
//! Invariant: a link batch is a pure function of (dataset, fanouts, src,
//! dst, spec, seed): every draw is keyed by (seed, stream, round, index)
//! through [`NodeRng`], never by arrival order.
//!
//! Memory: the degree table is 4 B per node (an `f32` weight) plus 8 B per
//! [`DEGREE_BLOCK`] nodes (a running sum per block), built by one
//! sequential scan of the slots and shared by every producer; the exclusion
//! holds the full lists of the batch's negative destinations (4 B per entry)
//! for the batch only.

use std::sync::Arc;

use rustc_hash::FxHashMap as HashMap;

use flashgnn_format::slot::decode_slot;

use crate::neighbor::{Batch, NeighborSampler};
use crate::rng::NodeRng;
use crate::{Result, SampleError};

/// Nodes per running sum of the degree table: a draw binary-searches the
/// `N / 64` sums, then adds at most 64 weights (8 B of sum per 64 nodes,
/// 0.125 B a node on top of the 4 B weight).
pub const DEGREE_BLOCK: usize = 64;

/// Rounds of redrawing negatives that are stored edges before the rest are
/// kept (and counted): with a fraction `f` of a destination's candidates
/// being true edges, one is left after 16 rounds with probability `f^16`
/// (1.5e-5 at f = 0.5); a node adjacent to every node can never be fixed.
pub const EXCLUDE_ROUNDS_MAX: u32 = 16;

/// The exponent of degree-weighted negatives (word2vec, PinSage).
pub const DEGREE_EXPONENT: f64 = 0.75;

/// Key streams of the negative draws (distinct from the neighbour draws,
/// which use the batch seed as it is).
const STREAM_SRC: u64 = 0x6e65_675f_7372_6300; // "neg_src"
const STREAM_DST: u64 = 0x6e65_675f_6473_7400; // "neg_dst"

/// PyG's negative sampling modes (`NegativeSampling.mode`), and none.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum NegMode {
    None,
    Binary,
    Triplet,
}

impl NegMode {
    pub fn parse(s: &str) -> Result<NegMode> {
        match s {
            "none" => Ok(NegMode::None),
            "binary" => Ok(NegMode::Binary),
            "triplet" => Ok(NegMode::Triplet),
            _ => Err(SampleError::Config(format!("negative sampling mode {s:?}: expected none, binary or triplet"))),
        }
    }
}

/// Where negatives are drawn from.
#[derive(Debug, Clone)]
pub enum NegDist {
    /// Every node with probability `1 / N`.
    Uniform,
    /// Node `v` with probability `w(v) / sum w`, `w(v) = degree(v)^0.75`.
    Degree(Arc<DegreeWeights>),
}

/// How a link batch is drawn.
#[derive(Debug, Clone)]
pub struct LinkSpec {
    pub mode: NegMode,
    /// Negatives per positive: any value > 0 for binary (`ceil(P * amount)`
    /// in all), an integer >= 1 for triplet; ignored for [`NegMode::None`].
    pub amount: f64,
    pub dist: NegDist,
    /// Redraw a negative `(s, d)` that is a stored edge.
    pub exclude_true_edges: bool,
    /// Remove the positives and their reverses from the sampled edges.
    pub exclude_seed_edges: bool,
    /// Typed graphs: the edge type the supervision edges are of (its index
    /// in the dataset's edge types); sources and negatives sources lie in
    /// its source type, destinations and negative destinations in its
    /// destination type. None on a homogeneous graph.
    pub edge_type: Option<usize>,
}

impl Default for LinkSpec {
    fn default() -> Self {
        LinkSpec {
            mode: NegMode::None,
            amount: 1.0,
            dist: NegDist::Uniform,
            exclude_true_edges: false,
            exclude_seed_edges: false,
            edge_type: None,
        }
    }
}

impl LinkSpec {
    /// Negatives for `num_pos` positives, after checking `amount`.
    pub fn num_negatives(&self, num_pos: usize) -> Result<usize> {
        let a = self.amount;
        match self.mode {
            NegMode::None => Ok(0),
            _ if !(a.is_finite() && a > 0.0) => {
                Err(SampleError::BadRequest(format!("negative sampling amount {a}: must be > 0")))
            }
            NegMode::Binary => Ok((num_pos as f64 * a).ceil() as usize),
            NegMode::Triplet if a.fract() != 0.0 => Err(SampleError::BadRequest(format!(
                "negative sampling amount {a}: triplet mode takes an integer number of negatives per positive"
            ))),
            NegMode::Triplet => Ok(num_pos * a as usize),
        }
    }
}

/// A link batch's part of a [`Batch`]: where its endpoints are among the
/// batch's nodes, and the negatives drawn.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct LinkPart {
    /// Local id (index into `n_id`) of every endpoint, in PyG's order:
    /// `[src, src_neg, dst, dst_neg]` (binary, none) or `[src, dst,
    /// dst_neg]` (triplet).
    pub index: Vec<i64>,
    /// Negative sources (original ids; binary only).
    pub src_neg: Vec<i64>,
    /// Negative destinations (original ids).
    pub dst_neg: Vec<i64>,
    /// Positives in the batch.
    pub num_pos: usize,
    /// Negatives redrawn because they were stored edges.
    pub redrawn: u64,
    /// Negatives still stored edges after [`EXCLUDE_ROUNDS_MAX`] rounds.
    pub false_negatives: u64,
    /// Sampled edges removed as positives or their reverses.
    pub seed_edges_removed: u64,
}

/// `degree^0.75` of every node (by original id), for degree-weighted
/// negatives: 4 B a node plus 8 B per [`DEGREE_BLOCK`] nodes.
#[derive(Debug, Clone, PartialEq)]
pub struct DegreeWeights {
    weight: Vec<f32>,
    /// `sums[b]` = total weight of the nodes before block `b`; `blocks + 1` entries.
    sums: Vec<f64>,
}

impl DegreeWeights {
    /// The table of `degrees` (by original id).
    pub fn from_degrees(degrees: &[u32]) -> DegreeWeights {
        let weight: Vec<f32> = degrees.iter().map(|&d| (d as f64).powf(DEGREE_EXPONENT) as f32).collect();
        let mut sums = Vec::with_capacity(weight.len().div_ceil(DEGREE_BLOCK) + 1);
        let mut acc = 0.0f64;
        sums.push(0.0);
        for block in weight.chunks(DEGREE_BLOCK) {
            acc += block.iter().map(|&w| w as f64).sum::<f64>();
            sums.push(acc);
        }
        DegreeWeights { weight, sums }
    }

    pub fn num_nodes(&self) -> u64 {
        self.weight.len() as u64
    }

    /// Sum of every weight.
    pub fn total(&self) -> f64 {
        *self.sums.last().expect("sums has blocks + 1 entries")
    }

    /// The probability of drawing node `v`.
    pub fn probability(&self, v: u64) -> f64 {
        self.weight[v as usize] as f64 / self.total()
    }

    /// Bytes held.
    pub fn bytes(&self) -> usize {
        self.weight.len() * 4 + self.sums.len() * 8
    }

    /// The node at `u` in [0, 1) of the cumulative distribution; never a
    /// node of weight 0 (the table must have a positive total).
    pub fn draw(&self, u: f64) -> u64 {
        self.draw_in(0, self.num_nodes(), u)
    }

    /// The total weight before node `x`: the running sum of its block plus
    /// the block's weights before it (added in the order the sums were, so
    /// `prefix(num_nodes) == total()` exactly).
    fn prefix(&self, x: usize) -> f64 {
        let b = x / DEGREE_BLOCK;
        self.sums[b] + self.weight[b * DEGREE_BLOCK..x].iter().map(|&w| w as f64).sum::<f64>()
    }

    /// Total weight of the nodes `[lo, hi)` (a typed dataset's node type).
    pub fn range_total(&self, lo: u64, hi: u64) -> f64 {
        self.prefix(hi as usize) - self.prefix(lo as usize)
    }

    /// [`DegreeWeights::draw`] restricted to the nodes `[lo, hi)`, which
    /// must have a positive [`DegreeWeights::range_total`]: node `v` with
    /// probability `w(v) / range_total`. Over every node it is `draw`.
    pub fn draw_in(&self, lo: u64, hi: u64, u: f64) -> u64 {
        let (lo, hi) = (lo as usize, hi as usize);
        let start = self.prefix(lo);
        let target = start + u * (self.prefix(hi) - start);
        // The block whose running sum range holds `target`, within the range's blocks.
        let b = self
            .sums
            .partition_point(|&s| s <= target)
            .saturating_sub(1)
            .clamp(lo / DEGREE_BLOCK, (hi - 1) / DEGREE_BLOCK);
        let first = (b * DEGREE_BLOCK).max(lo);
        let end = (b * DEGREE_BLOCK + DEGREE_BLOCK).min(hi);
        let mut acc = if first == lo { start } else { self.sums[b] };
        let mut last = None;
        for v in first..end {
            let w = self.weight[v] as f64;
            if w > 0.0 {
                acc += w;
                last = Some(v);
                if target < acc {
                    return v as u64;
                }
            }
        }
        // Rounding put `target` at the block's very end: its last weighted node.
        match last {
            Some(v) => v as u64,
            None => self.draw_after(end, lo, hi),
        }
    }

    /// The first weighted node of `[from, hi)` (else the last of `[lo,
    /// hi)`): only reached through rounding at a block's edge.
    fn draw_after(&self, from: usize, lo: usize, hi: usize) -> u64 {
        let after = self.weight[from..hi].iter().position(|&w| w > 0.0).map(|i| from + i);
        let v = after
            .or_else(|| self.weight[lo..hi].iter().rposition(|&w| w > 0.0).map(|i| lo + i))
            .expect("a positive range total has a node");
        v as u64
    }
}

impl NegDist {
    /// Draw number `i` of stream `stream` in round `round` under `seed`: a
    /// node of `[lo, hi)` (every node, or a typed dataset's node type).
    fn draw(&self, (lo, hi): (u64, u64), seed: u64, stream: u64, round: u32, i: usize) -> u64 {
        let mut rng = NodeRng::new(seed ^ stream ^ (round as u64) << 32, i as u64);
        match self {
            NegDist::Uniform => lo + rng.below(hi - lo),
            // 53 random bits: a uniform double in [0, 1).
            NegDist::Degree(w) => w.draw_in(lo, hi, (rng.next() >> 11) as f64 * (1.0 / (1u64 << 53) as f64)),
        }
    }
}

impl NeighborSampler {
    /// The degree table of this dataset (one sequential scan of every slot).
    /// Degrees are the stored lists' lengths: a mutable graph's log is not
    /// reflected; on a typed dataset a node's list holds every incoming edge
    /// type (the draws then keep within a node type: [`NegDist::draw`]).
    /// Refused on a graph without edges (no node could be drawn).
    pub fn degree_weights(&mut self) -> Result<DegreeWeights> {
        let l = self.layout().clone();
        let file = self.file_names()[0].clone();
        let mut deg = vec![0u32; l.num_nodes as usize];
        self.scan_slots(|v, bytes| {
            let s = decode_slot(&l, v, bytes, &file)?;
            // decode_slot checks original_id < num_nodes.
            deg[s.original_id as usize] = s.degree;
            Ok(())
        })?;
        let w = DegreeWeights::from_degrees(&deg);
        if w.total() <= 0.0 {
            return Err(SampleError::BadRequest(format!(
                "{}: degree-weighted negatives need at least one edge; the graph has none",
                self.root().display()
            )));
        }
        Ok(w)
    }

    /// One link batch: the positives `src[i] -> dst[i]` (original ids), the
    /// negatives `spec` asks for, and the `fanouts`-hop neighbourhood of
    /// every endpoint, as a [`Batch`] whose `link` says where each endpoint
    /// is (module docs).
    pub fn sample_link(&mut self, src: &[i64], dst: &[i64], spec: &LinkSpec, seed: u64) -> Result<Batch> {
        let n = self.num_nodes();
        if src.len() != dst.len() {
            return Err(SampleError::BadRequest(format!(
                "link batch: {} sources but {} destinations",
                src.len(),
                dst.len()
            )));
        }
        // Where sources and destinations may lie: a typed graph's edge type
        // names a node type for each (global ids), else every node.
        let ranges = match (spec.edge_type, self.is_typed()) {
            (Some(e), true) => self.edge_type_ranges(e)?,
            (None, true) => {
                return Err(SampleError::Config(format!(
                    "{}: a typed dataset's link batch names the edge type of its supervision edges",
                    self.root().display()
                )))
            }
            (_, false) => [(0, n, String::new()), (0, n, String::new())],
        };
        for ((name, ids), (lo, hi, ty)) in [("source", src), ("destination", dst)].into_iter().zip(&ranges) {
            if let Some((i, &v)) = ids.iter().enumerate().find(|&(_, &v)| v < *lo as i64 || v as u64 >= *hi) {
                let of = if ty.is_empty() { String::new() } else { format!(" of node type {ty:?}") };
                return Err(SampleError::BadRequest(format!(
                    "link batch: {name} node id {v} (edge {i}) out of range [{lo}, {hi}){of}"
                )));
            }
        }
        if let NegDist::Degree(w) = &spec.dist {
            if w.num_nodes() != n {
                return Err(SampleError::Config(format!(
                    "degree table of {} nodes for a dataset of {n}",
                    w.num_nodes()
                )));
            }
            // A node type no stored edge leads into has no weight to draw by.
            let needed = if spec.mode == NegMode::Binary { &ranges[..] } else { &ranges[1..] };
            if let Some((_, _, ty)) = needed.iter().find(|(lo, hi, _)| w.range_total(*lo, *hi) <= 0.0) {
                return Err(SampleError::Config(format!(
                    "{}: degree-weighted negatives of node type {ty:?}: no stored edge leads into a node of it \
                     (every degree is 0; build with --add-reverse so that its edges are stored both ways)",
                    self.root().display()
                )));
            }
        }
        let num_pos = src.len();
        let num_neg = spec.num_negatives(num_pos)?;
        let start = self.begin_batch();
        let d = &spec.dist;
        let [(s_lo, s_hi, _), (d_lo, d_hi, _)] = &ranges;
        let (s_lo, s_hi, d_lo, d_hi) = (*s_lo, *s_hi, *d_lo, *d_hi);
        let src_neg: Vec<i64> = if spec.mode == NegMode::Binary {
            (0..num_neg).map(|i| d.draw((s_lo, s_hi), seed, STREAM_SRC, 0, i) as i64).collect()
        } else {
            Vec::new()
        };
        let mut dst_neg: Vec<i64> = (0..num_neg).map(|i| d.draw((d_lo, d_hi), seed, STREAM_DST, 0, i) as i64).collect();
        let mut link = LinkPart { num_pos, ..Default::default() };
        if spec.exclude_true_edges && num_neg > 0 {
            let per = spec.amount as usize; // triplet: negatives per positive
            let source: Vec<i64> = if spec.mode == NegMode::Binary {
                src_neg.clone()
            } else {
                (0..num_neg).map(|j| src[j / per]).collect()
            };
            // A typed destination's list holds every incoming edge type: the
            // edge type's own relation is the one to check.
            let rel = spec.edge_type.and_then(|e| {
                self.with_types(|_, t| {
                    let dt = t.node_type_index(&t.edge_types[e].dst).expect("declared");
                    t.in_relations(dt).iter().position(|&x| x == e).expect("an edge type is an incoming relation")
                })
            });
            (link.redrawn, link.false_negatives) =
                self.exclude_true_edges(&source, &mut dst_neg, d, seed, rel, (d_lo, d_hi))?;
        }
        // PyG's seeds: sorted distinct ids (torch.unique), each endpoint's
        // local id its rank. Sources and destinations of two node types are
        // made distinct apart (their seeds are two types' first nodes, a rank
        // a local id within its type); of one node type, together.
        let sorted = |parts: &[&[i64]]| {
            let mut v: Vec<i64> = parts.concat();
            v.sort_unstable();
            v.dedup();
            v
        };
        let rank = |seeds: &[i64], ids: &[i64]| -> Vec<i64> {
            ids.iter().map(|v| seeds.binary_search(v).expect("every endpoint is a seed") as i64).collect()
        };
        let two_types = (s_lo, s_hi) != (d_lo, d_hi);
        let seeds = if two_types {
            let (ss, ds) = (sorted(&[src, &src_neg]), sorted(&[dst, &dst_neg]));
            link.index = [rank(&ss, src), rank(&ss, &src_neg), rank(&ds, dst), rank(&ds, &dst_neg)].concat();
            [ss, ds].concat()
        } else {
            let all: Vec<i64> = [src, &src_neg, dst, &dst_neg].concat(); // src_neg: empty but for binary
            let seeds = sorted(&[&all]);
            link.index = rank(&seeds, &all);
            seeds
        };
        self.set_mixed_seed_types(two_types);
        let b = self.sample_started(start, &seeds, seed);
        self.set_mixed_seed_types(false);
        let mut b = b?;
        if spec.exclude_seed_edges {
            let typed = spec.edge_type.and_then(|e| {
                self.with_types(|offsets, table| remove_typed_seed_edges(&mut b, src, dst, e, offsets, table))
            });
            link.seed_edges_removed = typed.unwrap_or_else(|| remove_seed_edges(&mut b, src, dst));
        }
        link.src_neg = src_neg;
        link.dst_neg = dst_neg;
        b.link = Some(Box::new(link));
        Ok(b)
    }

    /// Redraw every negative `(source[j], dst_neg[j])` whose pair is a stored
    /// edge, up to [`EXCLUDE_ROUNDS_MAX`] rounds, within `range` (a typed
    /// batch's destination type); returns (redrawn, left). `rel`: a typed
    /// batch's relation among the destination type's incoming edge types,
    /// the part of each list checked.
    fn exclude_true_edges(
        &mut self,
        source: &[i64],
        dst_neg: &mut [i64],
        d: &NegDist,
        seed: u64,
        rel: Option<usize>,
        range: (u64, u64),
    ) -> Result<(u64, u64)> {
        // Full list of each destination seen (internal ids, sorted), by internal id.
        let mut lists: HashMap<u32, Vec<u32>> = HashMap::default();
        let mut todo: Vec<usize> = (0..dst_neg.len()).collect();
        let mut redrawn = 0u64;
        for round in 0..=EXCLUDE_ROUNDS_MAX {
            let mut need: Vec<u32> =
                todo.iter().map(|&j| self.internal_of(dst_neg[j] as u64)).filter(|v| !lists.contains_key(v)).collect();
            need.sort_unstable();
            need.dedup();
            if self.snapshot().is_none() {
                // Lists already in memory (the memory engine's copy, the cross-batch cache) are not read.
                let mut read = Vec::with_capacity(need.len());
                for v in need {
                    match self.list_in_memory(v)? {
                        Some(mut list) => {
                            list.sort_unstable();
                            lists.insert(v, list);
                        }
                        None => read.push(v),
                    }
                }
                need = read;
            }
            let got = self.fetch_lists_keeping(&need, true)?;
            for (v, data) in need.into_iter().zip(got) {
                let mut list = match rel {
                    Some(j) => {
                        let c = &data.rel_counts;
                        let at = c[..j].iter().map(|&x| x as usize).sum::<usize>();
                        data.neighbors[at..at + c[j] as usize].to_vec()
                    }
                    None => data.neighbors,
                };
                list.sort_unstable();
                lists.insert(v, list);
            }
            todo.retain(|&j| {
                let s = self.internal_of(source[j] as u64);
                lists[&self.internal_of(dst_neg[j] as u64)].binary_search(&s).is_ok()
            });
            if todo.is_empty() || round == EXCLUDE_ROUNDS_MAX {
                break;
            }
            for &j in &todo {
                dst_neg[j] = d.draw(range, seed, STREAM_DST, round + 1, j) as i64;
            }
            redrawn += todo.len() as u64;
        }
        Ok((redrawn, todo.len() as u64))
    }
}

/// Remove from `b`'s edges every `(u, v)` with `(u, v)` or `(v, u)` among
/// the positives `src[i] -> dst[i]`; fix `num_sampled_edges`; returns how
/// many were removed.
fn remove_seed_edges(b: &mut Batch, src: &[i64], dst: &[i64]) -> u64 {
    let mut pairs = rustc_hash::FxHashSet::default();
    for (&s, &t) in src.iter().zip(dst) {
        pairs.insert((s, t));
        pairs.insert((t, s));
    }
    let n_id = &b.n_id;
    let (kept, nse) =
        kept_edges(&b.edge_index, &b.num_sampled_edges, |r, c| !pairs.contains(&(n_id[r as usize], n_id[c as usize])));
    let e = b.num_edges();
    let row = kept.iter().map(|&k| b.edge_index[k]).collect();
    let col = kept.iter().map(|&k| b.edge_index[e + k]).collect();
    b.num_sampled_edges = nse;
    b.set_edges(row, col);
    (e - kept.len()) as u64
}

/// [`remove_seed_edges`] of a typed batch whose positives `src[i] ->
/// dst[i]` (global ids) are of edge type `e = (s, r, d)`: the edges of `e`
/// equal to a positive (and, when `s` = `d`, to its reverse: such a
/// relation is its own reverse type, as `--add-reverse` makes it), and the
/// edges of `e`'s reverse type — `(d, rev_r, s)`, or `(d, q, s)` when `r` is
/// `rev_q` — equal to a positive's reverse. Edges of other types between
/// the same nodes are other relations and stay. Returns how many were removed.
fn remove_typed_seed_edges(
    b: &mut Batch,
    src: &[i64],
    dst: &[i64],
    e: usize,
    offsets: &[u64],
    table: &flashgnn_format::types::TypeTable,
) -> u64 {
    let et = &table.edge_types[e];
    let reverse_rel = et.rel.strip_prefix("rev_").map_or_else(|| format!("rev_{}", et.rel), str::to_string);
    let rev = table.edge_types.iter().position(|x| x.src == et.dst && x.dst == et.src && x.rel == reverse_rel);
    let typed = b.typed.as_deref_mut().expect("a typed dataset's batch is typed");
    let ty = |name: &str| table.node_type_index(name).expect("edge types name declared node types");
    let (s, d) = (ty(&et.src), ty(&et.dst));
    // The positives as (source, destination) ids within their node types.
    let pairs: rustc_hash::FxHashSet<(i64, i64)> =
        src.iter().zip(dst).map(|(&u, &v)| (u - offsets[s] as i64, v - offsets[d] as i64)).collect();
    let mut removed = 0u64;
    for (f, part) in typed.edge_types.iter_mut().enumerate() {
        // Which (row, col) of edge type f name a positive: (u, v) as is, or reversed.
        let (fwd, back) = (f == e, (f == e && s == d) || Some(f) == rev);
        if !fwd && !back {
            continue;
        }
        let fe = &table.edge_types[f];
        let (rs, cs) = (&typed.node_types[ty(&fe.src)].n_id, &typed.node_types[ty(&fe.dst)].n_id);
        let (kept, nse) = kept_edges(&part.edge_index, &part.num_sampled_edges, |r, c| {
            let (u, v) = (rs[r as usize], cs[c as usize]);
            !((fwd && pairs.contains(&(u, v))) || (back && pairs.contains(&(v, u))))
        });
        let m = part.num_edges();
        removed += (m - kept.len()) as u64;
        let rows = kept.iter().map(|&k| part.edge_index[k]);
        part.edge_index = rows.chain(kept.iter().map(|&k| part.edge_index[m + k])).collect();
        if !part.e_id.is_empty() {
            part.e_id = kept.iter().map(|&k| part.e_id[k]).collect();
        }
        part.num_sampled_edges = nse;
    }
    removed
}

/// Of a batch part's edges (`edge_index` `[2, m]` row-major, grouped by hop
/// as `num_sampled_edges` counts them), the positions `keep(row, col)` keeps,
/// in order, and the per-hop counts of what is kept.
fn kept_edges(
    edge_index: &[i64],
    num_sampled_edges: &[i64],
    keep: impl Fn(i64, i64) -> bool,
) -> (Vec<usize>, Vec<i64>) {
    let m = edge_index.len() / 2;
    let (mut kept, mut counts) = (Vec::with_capacity(m), Vec::with_capacity(num_sampled_edges.len()));
    let mut at = 0usize;
    for &count in num_sampled_edges {
        let k0 = kept.len();
        kept.extend((at..at + count as usize).filter(|&k| keep(edge_index[k], edge_index[m + k])));
        at += count as usize;
        counts.push((kept.len() - k0) as i64);
    }
    (kept, counts)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn degree_table_draws_only_weighted_nodes_in_order() {
        // Proves the cumulative walk: with weights 0, 1, 0, 1 (degrees 0, 1,
        // 0, 1), u below 1/2 gives node 1, above gives node 3, never 0 or 2.
        let w = DegreeWeights::from_degrees(&[0, 1, 0, 1]);
        assert_eq!(w.draw(0.0), 1);
        assert_eq!(w.draw(0.49), 1);
        assert_eq!(w.draw(0.5), 3);
        assert_eq!(w.draw(0.999_999), 3);
        assert_eq!(w.bytes(), 4 * 4 + 2 * 8);
    }

    #[test]
    fn degree_table_spans_blocks() {
        // Proves the block search: 200 nodes (4 blocks), only the last one
        // weighted, every u lands on it.
        let mut d = vec![0u32; 200];
        d[199] = 5;
        let w = DegreeWeights::from_degrees(&d);
        for u in [0.0, 0.3, 0.999_999_9] {
            assert_eq!(w.draw(u), 199);
        }
    }

    #[test]
    fn a_range_draw_keeps_to_its_nodes_by_weight() {
        // Proves draw_in: nodes 70..140 of 200 (a node type spanning a block
        // edge), weights by degree^0.75; every draw lands inside, each node
        // with its share of the range's weight, and the whole range is draw.
        let d: Vec<u32> = (0..200).map(|v| (v % 7) as u32).collect();
        let w = DegreeWeights::from_degrees(&d);
        let (lo, hi) = (70u64, 140u64);
        let total = w.range_total(lo, hi);
        let direct: f64 = (lo..hi).map(|v| w.weight[v as usize] as f64).sum();
        assert!((total - direct).abs() < 1e-9);
        let mut hits = vec![0u32; 200];
        let draws = 200_000;
        for i in 0..draws {
            let v = w.draw_in(lo, hi, (i as f64 + 0.5) / draws as f64);
            assert!((lo..hi).contains(&v) && w.weight[v as usize] > 0.0, "{v}");
            hits[v as usize] += 1;
        }
        for v in lo..hi {
            let want = w.weight[v as usize] as f64 / total * draws as f64;
            assert!((hits[v as usize] as f64 - want).abs() <= 2.0, "node {v}: {} vs {want}", hits[v as usize]);
        }
        for u in [0.0, 0.25, 0.5, 0.999_999] {
            assert_eq!(w.draw(u), w.draw_in(0, 200, u));
        }
        assert_eq!(w.range_total(0, 200), w.total());
    }

    #[test]
    fn amount_checks() {
        let mut s = LinkSpec { mode: NegMode::Binary, amount: 0.5, ..Default::default() };
        assert_eq!(s.num_negatives(3).unwrap(), 2);
        s.amount = 0.0;
        assert!(s.num_negatives(3).unwrap_err().to_string().contains("amount 0"));
        s.mode = NegMode::Triplet;
        s.amount = 1.5;
        assert!(s.num_negatives(3).unwrap_err().to_string().contains("integer"));
        s.amount = 2.0;
        assert_eq!(s.num_negatives(3).unwrap(), 6);
    }
}
