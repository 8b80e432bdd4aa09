//! Filling the memory tiers for what a [`Follow`] reads: the cross-batch
//! DRAM cache ([`build_cache`]: a static hot set chosen by degree or by a
//! presampling pass, the rest dynamic) and the device tier's resident set
//! ([`resident_by_degree`]).
//!
//! Both are built on what a sampler given the same path reads — on a
//! mutated dataset, the base of the generation `mut/CURRENT` names — and are
//! bound to that base ([`DatasetId`]); samplers on any other generation run
//! without them.

use crate::cache::{DatasetId, PageCache, Policy, StaticSet};
use crate::follow::Follow;
use crate::rowcodec::RowCodec;
use crate::{NeighborSampler, Resident, Result, SampleError};

/// Share of a cache budget for the static hot set. Slots are cached one by
/// one, so a degree-ranked static set holds ~7x more hot nodes than pages
/// did and beats the dynamic part (which also costs a copy and a locked
/// insert per read): on data/ooc at 448 MiB, 0.5 -> 4.5 batches/s (72 %
/// hits), 0.9 -> 6.8-7.7 (85 %), 1.0 -> 6.5-7.7 (87 %). At 457 MiB with
/// the train split's seeds, 1.0 against 0.9: 3,698 against 4,134
/// reads per batch (the dynamic part's 46 MiB served ~520 hits a batch for
/// ~4,100 copied, locked inserts and their evictions), and less CPU per
/// batch; see docs/benchmarks.md. `hot_fraction` < 1 still keeps a dynamic
/// part for what the static choice does not predict (mutations, skewed
/// seeds). Exported to Python as `_core.DEFAULT_HOT_FRACTION`.
pub const DEFAULT_HOT_FRACTION: f64 = 1.0;

/// Batch seed of presampling batch i is `PRESAMPLE_SEED_BASE + i`: fixed, so
/// the chosen set does not depend on the training seed.
pub const PRESAMPLE_SEED_BASE: u64 = 0x5EED_0000;

/// How the static hot set is chosen.
#[derive(Debug, Clone)]
pub enum HotChoice {
    /// Highest-degree slots first (one sequential scan).
    Degree,
    /// Most likely requested by a batch of `batch_size` seeds under the
    /// fanouts first (`hops + 2` scans), seeds drawn from `seeds` (empty:
    /// from every node).
    Touches { seeds: Vec<i64>, batch_size: usize },
    /// The slots `seeds`, in batches of `batch_size`, touch most.
    Presample { seeds: Vec<i64>, batch_size: usize },
    /// No static set: the whole cache is dynamic.
    None,
}

impl HotChoice {
    /// The names [`HotChoice::parse`] accepts.
    pub const NAMES: [&'static str; 4] = ["degree", "touches", "presample", "none"];

    /// `name` is one of [`HotChoice::NAMES`]; `presample` needs seeds and a
    /// batch size > 0, `touches` a batch size > 0.
    pub fn parse(name: &str, seeds: Vec<i64>, batch_size: usize) -> Result<HotChoice> {
        match name {
            "degree" => Ok(HotChoice::Degree),
            "touches" if batch_size == 0 => Err(SampleError::Config("hot=\"touches\" needs batch_size > 0".into())),
            "touches" => Ok(HotChoice::Touches { seeds, batch_size }),
            "none" => Ok(HotChoice::None),
            "presample" if seeds.is_empty() || batch_size == 0 => {
                Err(SampleError::Config("hot=\"presample\" needs presample_seeds and batch_size > 0".into()))
            }
            "presample" => Ok(HotChoice::Presample { seeds, batch_size }),
            x => Err(SampleError::Config(format!("hot {x:?}: expected {}", HotChoice::NAMES.join(", ")))),
        }
    }
}

/// A cache of `budget` bytes in all: `hot_fraction` of it for the static set
/// chosen by `hot`, the rest dynamic under `policy`. The choosing pass frees
/// its scan buffers and sampler before returning (and hands that memory back
/// to the OS, so it does not count against a memory cap). `codec`: how the
/// static set holds typed float32 rows (`crate::rowcodec`; None: as stored,
/// and the cache never changes a batch).
pub fn build_cache(
    follow: &Follow,
    budget: usize,
    policy: Policy,
    hot: &HotChoice,
    hot_fraction: f64,
    codec: Option<RowCodec>,
) -> Result<PageCache> {
    if matches!(hot, HotChoice::None) || (budget as f64 * hot_fraction) as usize == 0 {
        check_fraction(hot_fraction)?;
        return Ok(PageCache::new(follow.dataset_id()?, budget, policy, StaticSet::default()));
    }
    build_cache_on(&mut follow.open()?, budget, policy, hot, hot_fraction, codec)
}

/// [`build_cache`] with the hot set chosen through `s`, a sampler already
/// open (a loader's own, which then takes the cache: no second sampler).
pub fn build_cache_on(
    s: &mut NeighborSampler,
    budget: usize,
    policy: Policy,
    hot: &HotChoice,
    hot_fraction: f64,
    codec: Option<RowCodec>,
) -> Result<PageCache> {
    check_fraction(hot_fraction)?;
    let static_budget = (budget as f64 * hot_fraction) as usize;
    let id = s.dataset_id().clone();
    s.hold_rows_as(codec);
    let statics = match hot {
        _ if matches!(hot, HotChoice::None) || static_budget == 0 => StaticSet::default(),
        HotChoice::Presample { seeds, batch_size } => {
            let batches: Vec<(Vec<i64>, u64)> = seeds
                .chunks(*batch_size)
                .enumerate()
                .map(|(i, c)| (c.to_vec(), PRESAMPLE_SEED_BASE + i as u64))
                .collect();
            s.hot_set_by_access(&batches, static_budget)?
        }
        HotChoice::Touches { seeds, batch_size } => s.hot_set_by_touches(static_budget, seeds, *batch_size)?,
        _ => s.hot_set_by_degree(static_budget)?,
    };
    s.hold_rows_as(None);
    // SAFETY: malloc_trim only releases free heap pages.
    unsafe { libc::malloc_trim(0) };
    Ok(PageCache::new(id, budget, policy, statics))
}

fn check_fraction(hot_fraction: f64) -> Result<()> {
    if !(0.0..=1.0).contains(&hot_fraction) {
        return Err(SampleError::Config(format!("hot_fraction {hot_fraction}: expected a value in [0, 1]")));
    }
    Ok(())
}

/// The device tier's resident set: the `count` highest-degree nodes.
pub struct ResidentSet {
    pub resident: Resident,
    /// Original ids of the resident rows, in table order (highest degree first).
    pub nodes: Vec<i64>,
    /// Their degrees, in the same order.
    pub degrees: Vec<i64>,
}

/// The `count` highest-degree nodes of what `follow` reads now.
pub fn resident_by_degree(follow: &Follow, count: usize) -> Result<ResidentSet> {
    let mut s = follow.open()?;
    let top = s.top_nodes_by_degree(count)?;
    let nodes: Vec<i64> = top.iter().map(|&(v, _)| s.original_of(v) as i64).collect();
    let internal: Vec<u32> = top.iter().map(|&(v, _)| v).collect();
    let id: DatasetId = s.dataset_id().clone();
    Ok(ResidentSet {
        resident: Resident::new(id, &internal),
        nodes,
        degrees: top.iter().map(|&(_, d)| d as i64).collect(),
    })
}
