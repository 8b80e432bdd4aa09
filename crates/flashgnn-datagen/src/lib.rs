//! Synthetic power-law graphs for benchmarks and tests, streamed to disk in
//! bounded memory so inputs larger than RAM can be produced.
//!
//! Model:
//! - **Topology**: R-MAT (Chakrabarti et al.; the Graph500 Kronecker
//!   generator) with `(a, b, c, d) = (0.57, 0.19, 0.19, 0.05)`:
//!   `edge_factor * 2^scale` directed edges, self-loops and duplicates left in
//!   (the importer's job is to normalise them).
//! - **Communities**: the top `k = ceil(log2(classes))` bits of an R-MAT id
//!   name its block; class = block mod classes. With probability
//!   `homophily`, an edge's destination is moved into its source's block
//!   (low bits kept, so degrees stay power-law). Labels thus follow the graph.
//! - **Ids** are scrambled with a keyed Feistel permutation so that neither id
//!   order nor degree reveals the class.
//! - **Features**: `centroid[class] * signal + N(0, 1)` per dimension, with
//!   `signal = feature_signal / sqrt(dim / 2)` so two class centroids are
//!   about `2 * feature_signal` noise standard deviations apart whatever the
//!   width (each centroid coordinate is N(0, 1) * signal): a
//!   features-only model is clearly beaten by one that averages neighbors.
//! - **Splits**: each node lands in train/val/test by a hash of (seed, id).
//!
//! Output is the importer's *npy directory* layout (`edge_index.npy` [E, 2]
//! int64 by default, `node_feat.npy`, `node_label.npy`,
//! `{train,val,test}_idx.npy`), written to a temporary directory and
//! published atomically. `edge_dtype` int32/uint32 halves the edge file
//! (8 B per edge instead of 16: a 10^9-edge input is 8 GB, not 16), refused
//! when the largest node id would not fit it; int64 stays the default because
//! it is what numpy/PyTorch code reading the file expects.
//!
//! Memory: one batch of [`EDGE_BLOCK`] edges per worker thread (16 MiB each)
//! plus one block of feature rows; nothing grows with the graph.
//!
//! [`igbh`] generates IGBH-shaped *heterogeneous* graphs (typed npy
//! directory) with the same machinery (`flashgnn generate igbh`).

use std::path::{Path, PathBuf};

use flashgnn_build::rows::{splitmix64, unit};
use flashgnn_build::{BuildError, Progress};
use flashgnn_format::dtype::write_float;
use flashgnn_format::npy::encode_header;
use flashgnn_format::Dtype;
use flashgnn_io::{publish_dir, OutFile};
use rayon::prelude::*;

pub mod igbh;
pub use igbh::{generate_igbh, IgbhOptions, IgbhReport, IgbhShape, Venues, IGBH_SIZES};

/// Edges generated per parallel work item: 1 Mi edges = 16 MiB as int64 pairs.
pub const EDGE_BLOCK: u64 = 1 << 20;
/// Feature rows generated per work item.
const ROW_BLOCK: u64 = 8192;

const RMAT_A: f64 = 0.57;
const RMAT_B: f64 = 0.19;
const RMAT_C: f64 = 0.19;

/// Feature dtypes `generate` writes.
pub const FEATURE_DTYPES: [Dtype; 3] = [Dtype::Float16, Dtype::Float32, Dtype::Float64];
/// Edge-id dtypes `generate` writes; the largest id each holds bounds `--scale`.
pub const EDGE_DTYPES: [Dtype; 3] = [Dtype::Int64, Dtype::Int32, Dtype::Uint32];

#[derive(Debug, Clone)]
pub struct RmatOptions {
    pub scale: u32,
    pub edge_factor: u32,
    pub dim: u32,
    pub dtype: Dtype,
    /// Dtype of `edge_index.npy`: int64 (default), int32 or uint32.
    pub edge_dtype: Dtype,
    pub classes: u32,
    pub seed: u64,
    /// Probability that an edge is rewired inside its source's community.
    pub homophily: f64,
    /// Distance between class centroids in noise standard deviations.
    pub feature_signal: f64,
    pub split: (f64, f64, f64),
    pub force: bool,
}

impl Default for RmatOptions {
    fn default() -> Self {
        RmatOptions {
            scale: 16,
            edge_factor: 16,
            dim: 128,
            dtype: Dtype::Float32,
            edge_dtype: Dtype::Int64,
            classes: 16,
            seed: 0,
            homophily: 0.6,
            feature_signal: 1.0,
            split: (0.1, 0.05, 0.05),
            force: false,
        }
    }
}

#[derive(Debug, Clone)]
pub struct GenerateReport {
    pub output: PathBuf,
    pub num_nodes: u64,
    pub num_edges: u64,
    pub bytes: u64,
    pub seconds: f64,
}

impl GenerateReport {
    /// The report `flashgnn generate` prints.
    pub fn report(&self) -> serde_json::Value {
        serde_json::json!({
            "output": self.output.display().to_string(),
            "num_nodes": self.num_nodes,
            "num_edges": self.num_edges,
            "bytes": self.bytes,
            "seconds": self.seconds,
        })
    }
}

/// Keyed Feistel permutation of `[0, 2^bits)`, cycle-walking over an even
/// number of bits when `bits` is odd.
#[derive(Debug, Clone, Copy)]
pub struct Scramble {
    bits: u32,
    half: u32,
    key: u64,
}

impl Scramble {
    const ROUNDS: u64 = 4;
    pub fn new(bits: u32, key: u64) -> Self {
        Scramble { bits, half: bits.div_ceil(2), key }
    }
    fn round(&self, r: u64, x: u64) -> u64 {
        splitmix64(self.key ^ (r << 56) ^ x) & ((1u64 << self.half) - 1)
    }
    fn enc(&self, x: u64) -> u64 {
        let m = (1u64 << self.half) - 1;
        let (mut l, mut r) = (x >> self.half, x & m);
        for i in 0..Self::ROUNDS {
            let t = r;
            r = l ^ self.round(i, r);
            l = t;
        }
        (l << self.half) | r
    }
    fn dec(&self, y: u64) -> u64 {
        let m = (1u64 << self.half) - 1;
        let (mut l, mut r) = (y >> self.half, y & m);
        for i in (0..Self::ROUNDS).rev() {
            let t = l;
            l = r ^ self.round(i, l);
            r = t;
        }
        (l << self.half) | r
    }
    pub fn forward(&self, x: u64) -> u64 {
        let mut y = self.enc(x);
        while y >> self.bits != 0 {
            y = self.enc(y);
        }
        y
    }
    pub fn inverse(&self, y: u64) -> u64 {
        let mut x = self.dec(y);
        while x >> self.bits != 0 {
            x = self.dec(x);
        }
        x
    }
}

struct Model {
    o: RmatOptions,
    block_bits: u32,
    scramble: Scramble,
}

impl Model {
    fn new(o: &RmatOptions) -> Model {
        let block_bits = (o.classes.max(1) as f64).log2().ceil() as u32;
        Model {
            o: o.clone(),
            block_bits: block_bits.min(o.scale),
            scramble: Scramble::new(o.scale, splitmix64(o.seed ^ 0xFEED)),
        }
    }

    /// Class of an R-MAT (unscrambled) id.
    fn class_of_raw(&self, raw: u64) -> u64 {
        let block = raw >> (self.o.scale - self.block_bits);
        block % self.o.classes.max(1) as u64
    }

    /// Class of a published (scrambled) id.
    fn label(&self, id: u64) -> u64 {
        self.class_of_raw(self.scramble.inverse(id))
    }

    fn edge(&self, i: u64) -> (u64, u64) {
        let mut h = splitmix64(self.o.seed ^ splitmix64(i));
        let (mut s, mut d) = (0u64, 0u64);
        for _ in 0..self.o.scale {
            h = splitmix64(h);
            let r = unit(h);
            let (bs, bd) = if r < RMAT_A {
                (0, 0)
            } else if r < RMAT_A + RMAT_B {
                (0, 1)
            } else if r < RMAT_A + RMAT_B + RMAT_C {
                (1, 0)
            } else {
                (1, 1)
            };
            s = (s << 1) | bs;
            d = (d << 1) | bd;
        }
        h = splitmix64(h);
        if self.block_bits > 0 && unit(h) < self.o.homophily {
            let low = self.o.scale - self.block_bits;
            let mask = (1u64 << low) - 1;
            d = (s & !mask) | (d & mask);
        }
        (self.scramble.forward(s), self.scramble.forward(d))
    }

    fn gaussian(h: u64) -> f64 {
        // Box–Muller from two hashed uniforms.
        let u1 = unit(splitmix64(h)).max(1e-300);
        let u2 = unit(splitmix64(h ^ 0xA5A5_A5A5));
        (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    fn centroid(&self, class: u64, j: u64) -> f64 {
        Self::gaussian(splitmix64(self.o.seed ^ 0xC1A55 ^ (class << 32) ^ j))
    }

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
}

/// Append edge `(s, d)` to `buf` as an int64 pair (`wide`) or a 4-byte one:
/// the caller checked every id fits its dtype, and int32 and uint32 share the
/// bytes of such ids.
pub(crate) fn push_pair(buf: &mut Vec<u8>, s: u64, d: u64, wide: bool) {
    if wide {
        buf.extend_from_slice(&(s as i64).to_le_bytes());
        buf.extend_from_slice(&(d as i64).to_le_bytes());
    } else {
        buf.extend_from_slice(&(s as u32).to_le_bytes());
        buf.extend_from_slice(&(d as u32).to_le_bytes());
    }
}

/// A generator's temporary output directory beside `out`, removed on drop
/// unless `kept` (published).
pub(crate) struct TmpOut {
    pub dir: PathBuf,
    pub kept: bool,
}

impl TmpOut {
    /// The --force rule shared by every publishing command (before any
    /// work), `out`'s parent created, stale temporaries of killed runs
    /// reported, and a fresh temporary directory beside `out`.
    pub(crate) fn beside(out: &Path, force: bool) -> Result<TmpOut, BuildError> {
        flashgnn_io::check_output(out, force)?;
        let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
        // Durably: the output is published into `parent`, and a parent that
        // vanishes in a power loss takes the acknowledged output with it.
        flashgnn_io::create_dir_all_durable(parent)?;
        flashgnn_build::builder::report_stale_tmps(out);
        Ok(TmpOut { dir: flashgnn_io::create_tmp_dir(out)?, kept: false })
    }
}

impl Drop for TmpOut {
    fn drop(&mut self) {
        if !self.kept {
            let _ = std::fs::remove_dir_all(&self.dir);
        }
    }
}

/// Generate an R-MAT dataset in the npy-directory layout at `out`.
pub fn generate_rmat(out: &Path, o: &RmatOptions, progress: &Progress) -> Result<GenerateReport, BuildError> {
    let t = std::time::Instant::now();
    check_rmat_options(o)?;
    let mut guard = TmpOut::beside(out, o.force)?;
    let tmp = guard.dir.clone();

    let m = Model::new(o);
    let n = 1u64 << o.scale;
    let e = n * o.edge_factor as u64;
    let mut bytes = 0u64;

    // Edges and features are independent streams: generate them on two
    // threads (each using rayon for its blocks).
    let (edge_res, feat_res) = rayon::join(
        || write_edges(&tmp, o, &m, e, progress),
        || -> Result<u64, BuildError> {
            let total = write_features(&tmp, o, &m, n, progress)?;
            Ok(total + write_labels_and_splits(&tmp, &m, n)?)
        },
    );
    bytes += edge_res?;
    bytes += feat_res?;
    progress.check()?;
    bytes += write_marker(&tmp, o)?;
    publish_dir(&tmp, out)?;
    guard.kept = true;
    Ok(GenerateReport {
        output: out.to_path_buf(),
        num_nodes: n,
        num_edges: e,
        bytes,
        seconds: t.elapsed().as_secs_f64(),
    })
}

/// Refuse options the generator cannot honour, before anything is written.
fn check_rmat_options(o: &RmatOptions) -> Result<(), BuildError> {
    if !(1..=31).contains(&o.scale) {
        return Err(BuildError::config(format!("--scale {} must be in [1, 31] (2^scale nodes)", o.scale)));
    }
    if o.classes == 0 || o.classes as u64 > (1u64 << o.scale) {
        return Err(BuildError::config(format!("--classes {} must be in [1, 2^scale]", o.classes)));
    }
    if !FEATURE_DTYPES.contains(&o.dtype) {
        return Err(BuildError::config(format!("--dtype {} must be float16, float32 or float64", o.dtype.name())));
    }
    let id_max = match o.edge_dtype {
        Dtype::Int64 => i64::MAX as u64,
        Dtype::Int32 => i32::MAX as u64,
        Dtype::Uint32 => u32::MAX as u64,
        other => {
            return Err(BuildError::config(format!("--edge-dtype {} must be int64, int32 or uint32", other.name())))
        }
    };
    if (1u64 << o.scale) - 1 > id_max {
        return Err(BuildError::config(format!(
            "--edge-dtype {}: node ids reach 2^{} - 1 = {}, above the dtype's largest value {id_max}; use int64",
            o.edge_dtype.name(),
            o.scale,
            (1u64 << o.scale) - 1
        )));
    }
    let (a, b, c) = o.split;
    if a < 0.0 || b < 0.0 || c < 0.0 || a + b + c > 1.0 + 1e-9 {
        return Err(BuildError::config(format!("--split {a},{b},{c}: fractions must be >= 0 and sum to <= 1")));
    }
    Ok(())
}

/// `edge_index.npy`: the R-MAT edges in id order, blocks generated in
/// parallel and written in order. Returns the bytes written.
fn write_edges(tmp: &Path, o: &RmatOptions, m: &Model, e: u64, progress: &Progress) -> Result<u64, BuildError> {
    let mut f = OutFile::create(tmp.join("edge_index.npy"))?;
    f.write(&encode_header(o.edge_dtype, &[e, 2]))?;
    let pair_bytes = 2 * o.edge_dtype.size() as u64;
    let wide = o.edge_dtype == Dtype::Int64;
    let mut task = progress.task("edges", "edges", e);
    let blocks = e.div_ceil(EDGE_BLOCK);
    let group = rayon::current_num_threads().max(1) as u64;
    let mut blk = 0;
    while blk < blocks {
        progress.check()?;
        let hi = (blk + group).min(blocks);
        let bufs: Vec<Vec<u8>> = (blk..hi)
            .into_par_iter()
            .map(|bi| {
                let lo = bi * EDGE_BLOCK;
                let up = (lo + EDGE_BLOCK).min(e);
                let mut buf = Vec::with_capacity(((up - lo) * pair_bytes) as usize);
                for i in lo..up {
                    // `check_rmat_options` made sure every id fits 31 or 32 bits.
                    let (s, d) = m.edge(i);
                    push_pair(&mut buf, s, d, wide);
                }
                buf
            })
            .collect();
        for b in bufs {
            task.add(b.len() as u64 / pair_bytes);
            f.write(&b)?;
        }
        blk = hi;
    }
    Ok(f.finish()?.0)
}

/// `node_feat.npy`: each row its class centroid plus unit noise, blocks of
/// rows generated in parallel and written in order. Returns the bytes
/// written.
fn write_features(tmp: &Path, o: &RmatOptions, m: &Model, n: u64, progress: &Progress) -> Result<u64, BuildError> {
    let mut f = OutFile::create(tmp.join("node_feat.npy"))?;
    f.write(&encode_header(o.dtype, &[n, o.dim as u64]))?;
    let signal = o.feature_signal / ((o.dim.max(2) as f64) / 2.0).sqrt();
    let s = o.dtype.size();
    let mut task = progress.task("features", "rows", n);
    // Centroid coordinates, computed once (classes x dim values, not
    // one Box-Muller per feature value): the same numbers as
    // `m.centroid(class, j)`, so the output is unchanged.
    let table: Vec<f64> = (0..o.classes.max(1) as u64)
        .flat_map(|c| (0..o.dim as u64).map(move |j| (c, j)))
        .map(|(c, j)| m.centroid(c, j) * signal)
        .collect();
    let mut lo = 0;
    let group = ROW_BLOCK * rayon::current_num_threads().max(1) as u64;
    while lo < n {
        progress.check()?;
        let hi = (lo + group).min(n);
        let bufs: Vec<Vec<u8>> = (lo..hi)
            .step_by(ROW_BLOCK as usize)
            .collect::<Vec<_>>()
            .into_par_iter()
            .map(|r0| {
                let r1 = (r0 + ROW_BLOCK).min(hi);
                let mut buf = vec![0u8; ((r1 - r0) * o.dim as u64) as usize * s];
                for r in r0..r1 {
                    let class = m.label(r);
                    let base = splitmix64(o.seed ^ 0xFEA7 ^ splitmix64(r));
                    let cen = &table[(class * o.dim as u64) as usize..][..o.dim as usize];
                    for j in 0..o.dim as u64 {
                        let v = cen[j as usize] + Model::gaussian(base.wrapping_add(j));
                        let at = (((r - r0) * o.dim as u64 + j) as usize) * s;
                        write_float(o.dtype, v, &mut buf[at..at + s]);
                    }
                }
                buf
            })
            .collect();
        for b in bufs {
            f.write(&b)?;
        }
        task.add(hi - lo);
        lo = hi;
    }
    Ok(f.finish()?.0)
}

/// `node_label.npy` and `{train,val,test}_idx.npy`. Returns the bytes
/// written.
fn write_labels_and_splits(tmp: &Path, m: &Model, n: u64) -> Result<u64, BuildError> {
    let mut total = 0;
    // Labels.
    let mut f = OutFile::create(tmp.join("node_label.npy"))?;
    f.write(&encode_header(Dtype::Int64, &[n]))?;
    let mut buf = Vec::with_capacity(1 << 20);
    for v in 0..n {
        buf.extend_from_slice(&(m.label(v) as i64).to_le_bytes());
        if buf.len() >= 1 << 20 {
            f.write(&buf)?;
            buf.clear();
        }
    }
    f.write(&buf)?;
    total += f.finish()?.0;
    // Splits: count, then write.
    let mut counts = [0u64; 4];
    (0..n).for_each(|v| counts[m.split_of(v)] += 1);
    for (k, name) in ["train", "val", "test"].iter().enumerate() {
        let mut f = OutFile::create(tmp.join(format!("{name}_idx.npy")))?;
        f.write(&encode_header(Dtype::Int64, &[counts[k]]))?;
        buf.clear();
        for v in (0..n).filter(|&v| m.split_of(v) == k) {
            buf.extend_from_slice(&(v as i64).to_le_bytes());
            if buf.len() >= 1 << 20 {
                f.write(&buf)?;
                buf.clear();
            }
        }
        f.write(&buf)?;
        total += f.finish()?.0;
    }
    Ok(total)
}

/// `generate.json`. Returns the bytes written.
fn write_marker(tmp: &Path, o: &RmatOptions) -> Result<u64, BuildError> {
    // The marker that makes the directory recognisable as flashgnn output
    // (so that `generate --force` may replace it and nothing else).
    let marker = serde_json::json!({
        "flashgnn_output": "generate", "model": "rmat", "scale": o.scale, "edge_factor": o.edge_factor,
        "dim": o.dim, "dtype": o.dtype.name(), "edge_dtype": o.edge_dtype.name(), "classes": o.classes, "seed": o.seed,
    });
    let mut f = OutFile::create(tmp.join("generate.json"))?;
    f.write(serde_json::to_string_pretty(&marker).unwrap_or_default().as_bytes())?;
    Ok(f.finish()?.0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scramble_is_a_bijection() {
        for bits in [1, 2, 5, 10, 11] {
            let s = Scramble::new(bits, 42);
            let n = 1u64 << bits;
            let mut seen = vec![false; n as usize];
            for x in 0..n {
                let y = s.forward(x);
                assert!(y < n);
                assert!(!seen[y as usize], "bits {bits}: collision at {y}");
                seen[y as usize] = true;
                assert_eq!(s.inverse(y), x);
            }
        }
    }

    #[test]
    fn edges_are_homophilous_and_skewed() {
        // Proves labels follow the graph: the share of same-class edges is far
        // above the 1/classes expected by chance, and degrees are skewed.
        let o = RmatOptions { scale: 12, classes: 8, ..Default::default() };
        let m = Model::new(&o);
        let n = 1u64 << o.scale;
        let mut same = 0;
        let mut deg = vec![0u32; n as usize];
        let e = 50_000;
        for i in 0..e {
            let (s, d) = m.edge(i);
            same += (m.label(s) == m.label(d)) as u64;
            deg[d as usize] += 1;
        }
        let frac = same as f64 / e as f64;
        assert!(frac > 0.5, "same-class edge share {frac}");
        let max = *deg.iter().max().unwrap() as f64;
        let mean = e as f64 / n as f64;
        assert!(max > 20.0 * mean, "max degree {max} vs mean {mean}");
    }
}
