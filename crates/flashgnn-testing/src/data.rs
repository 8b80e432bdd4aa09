//! Generated datasets: R-MAT inputs written by `flashgnn-datagen` and the
//! datasets `flashgnn-build` makes of them under the tests' memory budget.

use std::path::{Path, PathBuf};

use flashgnn_build::{build, BuildOptions, FeatureLayout, Progress, Reorder};
use flashgnn_datagen::{generate_rmat, RmatOptions};

/// The build memory budget of the tests' datasets (80 MiB).
pub const MEMORY_BUDGET: u64 = 80 << 20;

/// The feature width of [`tiny_rmat`].
pub const TINY_DIM: u32 = 4;

/// The smallest graph the tests use: R-MAT scale 7 (128 nodes), 4 edges per
/// node, [`TINY_DIM`] float32 features, 3 classes, seed 5.
pub fn tiny_rmat() -> RmatOptions {
    RmatOptions { scale: 7, edge_factor: 4, dim: TINY_DIM, classes: 3, seed: 5, ..Default::default() }
}

/// The [`tiny_rmat`] graph generated into `dir/raw` and built symmetric
/// ([`build_symmetric`]) at `dir/ds`; returns `dir/ds`.
pub fn tiny_dataset(dir: &Path) -> PathBuf {
    build_symmetric(&rmat_input(dir, "raw", &tiny_rmat()), &dir.join("ds"))
}

/// The R-MAT input of `o` generated into `dir/name`; returns that path.
pub fn rmat_input(dir: &Path, name: &str, o: &RmatOptions) -> PathBuf {
    let raw = dir.join(name);
    generate_rmat(&raw, o, &Progress::new()).unwrap_or_else(|e| panic!("generate {}: {e}", raw.display()));
    raw
}

/// `raw` built at `out` with [`MEMORY_BUDGET`] and whatever `set` changes;
/// returns `out`.
pub fn build_with(raw: &Path, out: &Path, set: impl FnOnce(&mut BuildOptions)) -> PathBuf {
    let mut b = BuildOptions::new(raw, out);
    b.memory_budget = MEMORY_BUDGET;
    set(&mut b);
    build(&b, &Progress::new()).unwrap_or_else(|e| panic!("build {}: {e}", out.display()));
    out.to_path_buf()
}

/// `raw` built at `out` symmetrized and deduplicated: the base a writable
/// `MutableGraph` accepts. Each build gets a fresh dataset id.
pub fn build_symmetric(raw: &Path, out: &Path) -> PathBuf {
    build_with(raw, out, |b| {
        b.symmetrize = true;
        b.dedup = true;
    })
}

/// The samplers' test dataset at `dir/name`: R-MAT scale 11 (2,048 nodes),
/// 8 edges per node, `dim` float32 features, 4 classes, seed 9, generated
/// into `dir/{name}-raw` and built symmetrized with `layout` and `reorder`.
pub fn rmat_dataset(dir: &Path, name: &str, layout: FeatureLayout, reorder: Reorder, dim: u32) -> PathBuf {
    let o = RmatOptions { scale: 11, edge_factor: 8, dim, classes: 4, seed: 9, ..Default::default() };
    let raw = rmat_input(dir, &format!("{name}-raw"), &o);
    build_with(&raw, &dir.join(name), |b| {
        b.symmetrize = true;
        b.feature_layout = layout;
        b.reorder = reorder;
    })
}
