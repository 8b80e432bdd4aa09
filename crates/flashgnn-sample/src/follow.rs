//! Generation-following: what a sampler reads, and keeping it current while
//! the graph changes underneath.
//!
//! A [`Follow`] names a dataset directory, the fanouts and the sampler
//! settings, and one of three [`View`]s of it:
//!
//! - [`View::Dataset`]: the immutable dataset alone;
//! - [`View::Fixed`]: one snapshot, taken when the reader was opened — the
//!   dataset's `mut/` replayed read-only ([`View::of_path`] with a loader
//!   such as `flashgnn_mutate::published_snapshot`);
//! - [`View::Live`]: a [`SnapshotSource`] (a live `MutableGraph`) asked for
//!   a fresh snapshot before every batch, so a batch sees every mutation
//!   acknowledged before it started.
//!
//! [`Follow::open`] opens a sampler on what the view reads now (for a
//! snapshot: its base, already open, with the snapshot set);
//! [`Follow::prepare`] points an open sampler at the current snapshot before
//! a batch, reopening it on the new base when a compaction switched
//! generations. The reopened sampler keeps the cross-batch cache only if
//! that cache was built on the new base (`NeighborSampler::open_dataset`
//! checks its `DatasetId`); a cache of the old base is dropped and batches
//! run uncached — never served bytes of another generation.
//!
//! Why a trait and not a dependency: `flashgnn-mutate` sits above this crate
//! (format → io → store → build/sample → mutate) and builds new generations
//! with `flashgnn-build`; depending on it here would turn the layering upside
//! down and drag the importer into every sampler. The snapshot type lives in
//! `flashgnn-store`, so the one-method [`SnapshotSource`] trait lives there
//! too: the mutable store implements it, this module consumes it, and
//! neither crate names the other (the tests reach both through
//! dev-dependencies).

use std::path::{Path, PathBuf};
use std::sync::Arc;

use flashgnn_io::engine::EngineKind;
use flashgnn_store::{Snapshot, SnapshotSource};

use crate::{cache::DatasetId, NeighborSampler, Result, SampleError, SamplerConfig};

/// Where a reader's mutable-graph snapshot comes from.
#[derive(Clone, Default)]
pub enum View {
    /// A plain dataset.
    #[default]
    Dataset,
    /// One snapshot, fixed when the reader was opened.
    Fixed(Arc<Snapshot>),
    /// A live graph: a fresh snapshot per batch.
    Live(Arc<dyn SnapshotSource>),
}

impl View {
    /// For a dataset path: its snapshot as `load` finds it (the mutated state
    /// `DATASET/mut/CURRENT` names), or the dataset alone when `load` finds
    /// none. `load` is `flashgnn_mutate::published_snapshot` in the bindings.
    pub fn of_path<E>(
        path: &Path,
        load: impl FnOnce(&Path) -> std::result::Result<Option<Arc<Snapshot>>, E>,
    ) -> std::result::Result<View, E> {
        Ok(match load(path)? {
            Some(s) => View::Fixed(s),
            None => View::Dataset,
        })
    }

    /// The snapshot to read now (a fresh one of a live graph); None for a
    /// plain dataset.
    pub fn current(&self) -> Option<Arc<Snapshot>> {
        match self {
            View::Dataset => None,
            View::Fixed(x) => Some(x.clone()),
            View::Live(g) => Some(g.snapshot()),
        }
    }
}

/// A dataset, its fanouts and sampler settings, and the [`View`] that keeps
/// what a sampler reads current. Cheap to clone (each pipeline producer
/// holds one).
#[derive(Clone)]
pub struct Follow {
    pub path: PathBuf,
    pub fanouts: Vec<i32>,
    pub cfg: SamplerConfig,
    pub view: View,
}

impl Follow {
    pub fn new(path: impl Into<PathBuf>, fanouts: &[i32], cfg: SamplerConfig, view: View) -> Follow {
        Follow { path: path.into(), fanouts: fanouts.to_vec(), cfg, view }
    }

    /// A sampler on what the view reads now: the dataset itself, or the base
    /// of the current snapshot (already open, its maps and CRCs loaded) with
    /// that snapshot set.
    pub fn open(&self) -> Result<NeighborSampler> {
        match self.view.current() {
            None => NeighborSampler::open(&self.path, &self.fanouts, &self.cfg),
            Some(snap) => {
                let mut s = NeighborSampler::open_dataset(&snap.base, &self.fanouts, &self.cfg)?;
                s.set_snapshot(Some(snap))?;
                Ok(s)
            }
        }
    }

    /// Point `s` at the current snapshot before a batch, reopening it on the
    /// snapshot's base when a compaction switched generations (see the
    /// module doc for what happens to the cache).
    pub fn prepare(&self, s: &mut NeighborSampler) -> Result<()> {
        let Some(snap) = self.view.current() else { return Ok(()) };
        if snap.base.root() != s.root() {
            *s = NeighborSampler::open_dataset(&snap.base, &self.fanouts, &self.cfg)?;
        }
        s.set_snapshot(Some(snap))
    }

    /// [`Self::prepare`], then the rows of `ids` ([`NeighborSampler::gather_rows`]).
    pub fn gather(&self, s: &mut NeighborSampler, ids: &[i64], what: crate::Gather) -> Result<crate::Batch> {
        self.prepare(s)?;
        s.gather_rows(ids, what)
    }

    /// [`Self::prepare`], then one mini-batch of `seeds` under batch seed `seed`.
    pub fn sample(&self, s: &mut NeighborSampler, seeds: &[i64], seed: u64) -> Result<crate::Batch> {
        self.prepare(s)?;
        s.sample(seeds, seed)
    }

    /// [`Self::prepare`], then one link batch (`crate::link`).
    pub fn sample_link(
        &self,
        s: &mut NeighborSampler,
        src: &[i64],
        dst: &[i64],
        spec: &crate::LinkSpec,
        seed: u64,
    ) -> Result<crate::Batch> {
        self.prepare(s)?;
        s.sample_link(src, dst, spec, seed)
    }

    /// [`Self::prepare`], then one random-walk batch.
    pub fn random_walk(
        &self,
        s: &mut NeighborSampler,
        roots: &[i64],
        walk_length: usize,
        seed: u64,
    ) -> Result<crate::Batch> {
        self.prepare(s)?;
        s.random_walk(roots, walk_length, seed)
    }

    /// The dataset a cache for this reader must be bound to: the base of the
    /// current snapshot, else the dataset itself (no sampler opened).
    pub fn dataset_id(&self) -> Result<DatasetId> {
        match self.view.current() {
            Some(s) => DatasetId::of(&s.base),
            None => DatasetId::of_path(&self.path),
        }
    }
}

/// The read engine named `name` (`EngineKind::ALL`'s names), or a
/// [`SampleError::Config`] naming it and the accepted ones.
pub fn engine_kind(name: &str) -> Result<EngineKind> {
    EngineKind::parse(name).ok_or_else(|| {
        let names: Vec<&str> = EngineKind::ALL.iter().map(|k| k.name()).collect();
        SampleError::Config(format!("engine {name:?}: expected one of {}", names.join(", ")))
    })
}
