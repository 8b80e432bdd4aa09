//! The memory budget: one `--memory-budget` split between the engine's
//! buffers, the prefetch window and the memory tiers (the lookahead's Belady
//! row cache, the page cache's static hot set and its dynamic part), and the
//! probes of what this process may use (cgroup v1/v2, `/proc`).
//!
//! What the budget covers is flashgnn's own memory on the data path, not the
//! interpreter, torch or the model, which `auto` reserves separately:
//!
//! - **engine**: per producer, [`ENGINE_BYTES_PER_PRODUCER`] (buffer pool +
//!   per-batch page cache) and the batch it is building;
//! - **window**: `prefetch` finished batches queued for the consumer, plus,
//!   with online lookahead, the `lookahead` structure batches held ahead of
//!   the one being filled and the structure stage's own queue
//!   ([`STRUCTURE_QUEUE`]);
//! - **tiers**: the rest. The page cache comes first: it serves the sampler
//!   *and* the lookahead's fill reads. The Belady row cache gets a share
//!   ([`LOOKAHEAD_SHARE`]) only of what the page cache cannot hold.
//!
//! Invariant: **each row is held once.** When the page cache holds the whole
//! dataset, the Belady row cache gets nothing: the window's rows then come
//! from the cache in one call per batch, off the sampling path, which is what
//! lookahead buys there. (Sizing both for the whole dataset held every row
//! twice: a 1.2 GiB dataset was given a 1.2 GiB lookahead cache beside a
//! 1.2 GiB page cache.) The parts always add up to the budget.
//!
//! Batch sizes are measured by the caller on the real dataset (two batches,
//! the larger, plus [`HEADROOM`]); this module only does arithmetic on them.

use crate::neighbor::ENGINE_BYTES_PER_PRODUCER;
use crate::SampleError;

/// Headroom on a measured batch for the variance between batches.
pub const HEADROOM: f64 = 1.25;
/// Share of the tiers' bytes the Belady row cache gets when the page cache
/// cannot hold the dataset (the measured sweet spot of `make bench-defaults`).
pub const LOOKAHEAD_SHARE: f64 = 0.5;
/// The Belady row cache's two 4-byte arrays per node of the dataset
/// (`flashgnn.loader.window.BeladyRowCache`): a share below this x N holds no row.
pub const BELADY_NODE_BYTES: u64 = 8;
/// Structure batches the structure stage keeps queued besides the known window.
pub const STRUCTURE_QUEUE: u64 = 2;
/// The lookahead window `auto` picks for training: 1.46x the default online
/// cache at the same memory (docs/benchmarks.md, online lookahead).
pub const AUTO_LOOKAHEAD: u64 = 8;
/// `auto` leaves room for torch's own RSS (about 0.6 GiB on import) when it
/// is not loaded yet, ...
pub const AUTO_RESERVE_TORCH: u64 = 768 << 20;
/// ... the model's fixed part (weights, optimizer state, Python objects) ...
pub const AUTO_RESERVE_MODEL: u64 = 320 << 20;
/// ... and its activations and gradients, which scale with the batch.
pub const ACTIVATION_BATCHES: u64 = 6;
/// Share of the process's own resident file pages (its mapped code) that
/// `auto` treats as in use although the kernel counts them as reclaimable:
/// evicting torch's code makes every step refault it (make bench-defaults,
/// 2026-11-25: half gave 431 MiB on data/ooc under 1.5 GiB, a fifth ~510 MiB).
pub const CODE_PAGES_KEPT: f64 = 0.2;
/// Available memory assumed when neither the cgroup nor `/proc` can be read:
/// a stated floor, not a measurement.
pub const AVAILABLE_FLOOR: u64 = 1 << 30;

/// What the budget is split around: measured batch sizes and the pipeline's shape.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Shape {
    /// Bytes of one full batch as handed to the consumer, with headroom.
    pub per_batch: u64,
    /// Bytes of one structure-stage batch (only the rows that came free).
    pub per_lookahead: u64,
    pub workers: u64,
    pub prefetch: u64,
    pub lookahead: u64,
}

impl Shape {
    /// Engine buffers and the batch each producer builds.
    pub fn engine_bytes(&self) -> u64 {
        self.workers.max(1) * (ENGINE_BYTES_PER_PRODUCER as u64 + self.per_batch)
    }

    /// The prefetch window, with the lookahead's structure batches
    /// ([`split`] counts at least one prefetched batch).
    pub fn window_bytes(&self) -> u64 {
        let ahead = if self.lookahead > 0 { (self.lookahead + STRUCTURE_QUEUE) * self.per_lookahead } else { 0 };
        self.prefetch * self.per_batch + ahead
    }

    /// What a budget must hold before any tier gets a byte.
    pub fn base_bytes(&self) -> u64 {
        self.engine_bytes() + self.window_bytes()
    }
}

/// One budget, split. `engine + window + lookahead_cache + cache == budget`
/// and `cache_static + cache_dynamic == cache`.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Split {
    pub budget: u64,
    pub shape: Shape,
    pub engine: u64,
    pub window: u64,
    pub lookahead_cache: u64,
    pub cache: u64,
    pub cache_static: u64,
    pub cache_dynamic: u64,
}

/// Split `budget` for `shape`; `data_bytes` is what the page cache needs to
/// hold the whole dataset (its page files). Refuses a budget below engine +
/// window, naming the minimum.
pub fn split(budget: u64, shape: Shape, hot_fraction: f64, data_bytes: u64) -> Result<Split, SampleError> {
    let shape = Shape { workers: shape.workers.max(1), prefetch: shape.prefetch.max(1), ..shape };
    let (engine, window) = (shape.engine_bytes(), shape.window_bytes());
    let rest = budget.checked_sub(engine + window).ok_or_else(|| {
        SampleError::Config(format!(
            "--memory-budget {budget} bytes is below the {} bytes the engine ({} producer(s) x ({} MiB buffers + a \
             {}-byte batch)) and the prefetch window ({} + {} lookahead batches) need; raise it or lower \
             --prefetch/--lookahead/--workers/--batch-size",
            engine + window,
            shape.workers,
            ENGINE_BYTES_PER_PRODUCER >> 20,
            shape.per_batch,
            shape.prefetch,
            shape.lookahead
        ))
    })?;
    // Each row once: the Belady cache shares only what the page cache cannot hold.
    let lookahead_cache =
        if shape.lookahead > 0 && rest < data_bytes { (rest as f64 * LOOKAHEAD_SHARE) as u64 } else { 0 };
    let cache = rest - lookahead_cache;
    let cache_static = ((cache as f64 * hot_fraction.clamp(0.0, 1.0)) as u64).min(cache);
    Ok(Split {
        budget,
        shape,
        engine,
        window,
        lookahead_cache,
        cache,
        cache_static,
        cache_dynamic: cache - cache_static,
    })
}

/// What `auto` knows of the process and the dataset.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct AutoInput {
    /// Bytes this process may use ([`probe::available_memory`] / local ranks).
    pub available: u64,
    /// Bytes left outside the budget ([`reserve`], or the caller's own figure).
    pub reserve: u64,
    /// The dataset's page files.
    pub data_bytes: u64,
    pub nodes: u64,
    /// Training (auto may turn lookahead on) rather than serving or evaluation.
    pub training: bool,
    /// The caller's lookahead, or None to let auto choose.
    pub lookahead: Option<u64>,
}

/// Why `auto` chose what it chose, for the caller's one-line reason.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Auto {
    /// The room left after the reserve cannot hold engine + window: no cache.
    NoRoom { room: u64, base: u64, lookahead: u64 },
    /// A split; `fits` when the whole dataset is cached.
    Split { split: Split, fits: bool },
}

/// `--memory-budget auto`: the budget is the smaller of the room (available
/// − reserve) and what caching the whole dataset needs (engine + window +
/// the page files), split as [`split`] splits it. Lookahead, when auto
/// chooses, is [`AUTO_LOOKAHEAD`] for training where its window leaves room
/// and its share of the rest pays the Belady cache's node arrays at least
/// twice over (else it would hold no rows, or few) — or where the page cache
/// holds everything, since the fills then come from the cache off the
/// sampling path.
pub fn auto(input: AutoInput, shape: Shape, hot_fraction: f64) -> Result<Auto, SampleError> {
    let without = Shape { lookahead: 0, ..shape };
    let room = input.available.saturating_sub(input.reserve);
    let base = without.base_bytes();
    let lookahead = match input.lookahead {
        Some(l) => l,
        None if input.training => {
            let with = Shape { lookahead: AUTO_LOOKAHEAD, ..shape };
            let rest = room.saturating_sub(with.base_bytes());
            let pays = rest >= input.data_bytes
                || rest as f64 * LOOKAHEAD_SHARE > (2 * BELADY_NODE_BYTES * input.nodes) as f64;
            if room >= with.base_bytes() && pays {
                AUTO_LOOKAHEAD
            } else {
                0
            }
        }
        None => 0,
    };
    if room < base {
        return Ok(Auto::NoRoom { room, base, lookahead });
    }
    let shape = Shape { lookahead, ..shape };
    let need = shape.base_bytes() + input.data_bytes;
    let budget = room.min(need);
    Ok(Auto::Split { split: split(budget, shape, hot_fraction, input.data_bytes)?, fits: budget == need })
}

/// Bytes `auto` leaves outside the budget: torch unless already loaded, the
/// model's fixed part, activations of [`ACTIVATION_BATCHES`] batches and
/// `node_bytes` of per-node state.
pub fn reserve(per_batch: u64, torch_loaded: bool, node_bytes: u64) -> u64 {
    (if torch_loaded { 0 } else { AUTO_RESERVE_TORCH })
        + AUTO_RESERVE_MODEL
        + ACTIVATION_BATCHES * per_batch
        + node_bytes
}

/// The most producers, up to `want`, whose engine buffers and the prefetch
/// window fit `budget` (None: no bound); at least 1 ([`split`] refuses a
/// budget too small even for one).
pub fn producers_that_fit(want: u64, budget: Option<u64>, per_batch: u64, prefetch: u64, lookahead: u64) -> u64 {
    let mut n = want.max(1);
    if let Some(budget) = budget {
        let window = (prefetch.max(1) + lookahead) * per_batch;
        while n > 1 && n * (ENGINE_BYTES_PER_PRODUCER as u64 + per_batch) + window > budget {
            n -= 1;
        }
    }
    n
}

/// What the process may use, read in one place: its memory cgroup (v2 or
/// v1, the tightest limit up the hierarchy), `/proc/meminfo` and
/// `/proc/self/status`; its CPU affinity and cgroup CPU quota.
pub mod probe {
    use std::path::Path;

    use super::{AVAILABLE_FLOOR, CODE_PAGES_KEPT};

    /// The raw readings [`available_memory`] combines (None: not readable).
    #[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
    pub struct Memory {
        /// Limit − usage of this process's memory cgroup, less its inactive
        /// file pages (reclaimable before an OOM kill); None without a limit.
        pub cgroup_headroom: Option<u64>,
        /// `MemAvailable` of `/proc/meminfo`.
        pub mem_available: Option<u64>,
        /// This process's resident file-backed pages (`RssFile`: its mapped code).
        pub file_rss: u64,
    }

    impl Memory {
        pub fn read() -> Memory {
            Memory {
                cgroup_headroom: cgroup_headroom(Path::new("/proc/self/cgroup"), Path::new("/sys/fs/cgroup")),
                mem_available: meminfo_available(Path::new("/proc/meminfo")),
                file_rss: status_bytes(Path::new("/proc/self/status"), "RssFile").unwrap_or(0),
            }
        }

        /// The smaller source, less [`CODE_PAGES_KEPT`] of the process's own
        /// mapped code (both sources count it as available page cache, but
        /// the process would fault it straight back); [`AVAILABLE_FLOOR`]
        /// when neither source can be read.
        pub fn available(&self) -> u64 {
            match (self.cgroup_headroom, self.mem_available) {
                (None, None) => AVAILABLE_FLOOR,
                (a, b) => {
                    let min = a.unwrap_or(u64::MAX).min(b.unwrap_or(u64::MAX));
                    min.saturating_sub((CODE_PAGES_KEPT * self.file_rss as f64) as u64)
                }
            }
        }
    }

    /// Bytes this process may still allocate (see [`Memory::available`]).
    pub fn available_memory() -> u64 {
        Memory::read().available()
    }

    fn read_trimmed(path: &Path) -> Option<String> {
        std::fs::read_to_string(path).ok().map(|s| s.trim().to_string())
    }

    /// An integer file of a cgroup; None when absent, empty or "max".
    fn read_int(path: &Path) -> Option<u64> {
        read_trimmed(path).filter(|t| !t.is_empty() && t != "max").and_then(|t| t.parse().ok())
    }

    /// This process's cgroups as `(controllers, path)` (controllers empty for v2).
    fn own_cgroups(proc_cgroup: &Path) -> Option<Vec<(String, String)>> {
        let text = std::fs::read_to_string(proc_cgroup).ok()?;
        Some(
            text.lines()
                .filter_map(|l| {
                    let mut it = l.splitn(3, ':');
                    let (_, ctl, path) = (it.next()?, it.next()?, it.next()?);
                    Some((ctl.to_string(), path.to_string()))
                })
                .collect(),
        )
    }

    /// The directory of cgroup `path` under `root` and of each ancestor: a
    /// limit anywhere up the tree applies.
    fn cgroup_dirs(root: &Path, path: &str) -> Vec<std::path::PathBuf> {
        let mut out = Vec::new();
        let mut p = path.trim_end_matches('/').to_string();
        loop {
            out.push(root.join(p.trim_start_matches('/')));
            if p.is_empty() {
                return out;
            }
            p = p.rsplit_once('/').map(|(a, _)| a.to_string()).unwrap_or_default();
        }
    }

    fn stat_value(path: &Path, keys: &[&str]) -> Option<u64> {
        let text = std::fs::read_to_string(path).ok()?;
        text.lines().find_map(|l| {
            let (k, v) = l.split_once(' ')?;
            keys.contains(&k).then(|| v.trim().parse().ok()).flatten()
        })
    }

    /// Limit − usage (less inactive file pages) of this process's memory
    /// cgroup, the tightest up the hierarchy, v2 (`memory.max`) or v1
    /// (`memory.limit_in_bytes`); None when no limit applies or none can be read.
    pub fn cgroup_headroom(proc_cgroup: &Path, root: &Path) -> Option<u64> {
        let mut best: Option<u64> = None;
        for (ctl, path) in own_cgroups(proc_cgroup)? {
            let (base, limit_name, usage_name) = if ctl.is_empty() {
                (root.to_path_buf(), "memory.max", "memory.current")
            } else if ctl.split(',').any(|c| c == "memory") {
                (root.join("memory"), "memory.limit_in_bytes", "memory.usage_in_bytes")
            } else {
                continue;
            };
            for d in cgroup_dirs(&base, &path) {
                let (Some(limit), Some(usage)) = (read_int(&d.join(limit_name)), read_int(&d.join(usage_name))) else {
                    continue;
                };
                if limit >= 1 << 60 {
                    continue; // v1 writes "no limit" as a huge number
                }
                let inactive = stat_value(&d.join("memory.stat"), &["total_inactive_file", "inactive_file"]);
                let room = limit.saturating_sub(usage.saturating_sub(inactive.unwrap_or(0)));
                best = Some(best.map_or(room, |b| b.min(room)));
            }
        }
        best
    }

    fn meminfo_available(path: &Path) -> Option<u64> {
        status_bytes(path, "MemAvailable")
    }

    /// A `Name:   N kB` line of a `/proc` status-style file, in bytes.
    pub fn status_bytes(path: &Path, name: &str) -> Option<u64> {
        let text = std::fs::read_to_string(path).ok()?;
        text.lines().find_map(|l| {
            let rest = l.strip_prefix(name)?.strip_prefix(':')?;
            let kb: u64 = rest.split_whitespace().next()?.parse().ok()?;
            Some(kb * 1024)
        })
    }

    /// CPUs this process's cgroup may use (v2 `cpu.max`, v1
    /// `cpu.cfs_quota_us / cpu.cfs_period_us`, the tightest up the
    /// hierarchy); None when no quota applies or none can be read.
    pub fn cgroup_cpu_quota(proc_cgroup: &Path, root: &Path) -> Option<f64> {
        let mut best: Option<f64> = None;
        for (ctl, path) in own_cgroups(proc_cgroup)? {
            let v2 = ctl.is_empty();
            if !v2 && !ctl.split(',').any(|c| c == "cpu") {
                continue;
            }
            let base = if v2 { root.to_path_buf() } else { root.join("cpu") };
            for d in cgroup_dirs(&base, &path) {
                let quota = if v2 {
                    read_trimmed(&d.join("cpu.max")).and_then(|t| {
                        let mut it = t.split_whitespace();
                        let (q, p) = (it.next()?, it.next()?);
                        let (q, p) = (q.parse::<f64>().ok()?, p.parse::<f64>().ok()?);
                        (p > 0.0).then_some(q / p)
                    })
                } else {
                    let q = read_trimmed(&d.join("cpu.cfs_quota_us")).and_then(|t| t.parse::<i64>().ok());
                    let p = read_int(&d.join("cpu.cfs_period_us"));
                    match (q, p) {
                        (Some(q), Some(p)) if q > 0 && p > 0 => Some(q as f64 / p as f64),
                        _ => None,
                    }
                };
                if let Some(q) = quota {
                    best = Some(best.map_or(q, |b: f64| b.min(q)));
                }
            }
        }
        best
    }

    /// Cores of `affinity` capped by a CPU `quota` (rounded down), at least 1.
    pub fn cores_from(affinity: u64, quota: Option<f64>) -> u64 {
        let n = match quota {
            Some(q) => affinity.min((q as u64).max(1)),
            None => affinity,
        };
        n.max(1)
    }

    /// Cores this process may run on: its CPU affinity (the standard
    /// library reads `sched_getaffinity`), capped by its cgroup's quota as
    /// read here (the tightest up the hierarchy, v1 or v2).
    pub fn cpu_cores() -> u64 {
        let affinity = std::thread::available_parallelism().map_or(1, |n| n.get() as u64);
        cores_from(affinity, cgroup_cpu_quota(Path::new("/proc/self/cgroup"), Path::new("/sys/fs/cgroup")))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn shape(lookahead: u64) -> Shape {
        Shape { per_batch: 1 << 20, per_lookahead: 1 << 18, workers: 2, prefetch: 3, lookahead }
    }

    #[test]
    fn parts_add_up_and_rows_are_held_once() {
        let data = 200 << 20;
        for la in [0, 8] {
            for budget in [shape(la).base_bytes(), 100 << 20, 400 << 20, 2 << 30] {
                let s = split(budget, shape(la), 0.9, data).unwrap();
                assert_eq!(s.engine + s.window + s.lookahead_cache + s.cache, budget);
                assert_eq!(s.cache_static + s.cache_dynamic, s.cache);
                if s.cache >= data {
                    assert_eq!(s.lookahead_cache, 0, "budget {budget}: the page cache holds every row already");
                }
            }
        }
        let tight = split(100 << 20, shape(8), 1.0, data).unwrap();
        assert!(tight.lookahead_cache > 0 && tight.cache < data);
        let err = split(1 << 20, shape(0), 1.0, data).unwrap_err().to_string();
        assert!(err.contains("below the") && err.contains("--prefetch"), "{err}");
    }

    #[test]
    fn auto_caches_the_dataset_once_when_it_fits() {
        let input = AutoInput {
            available: 64 << 30,
            reserve: 1 << 30,
            data_bytes: 1200 << 20,
            nodes: 1 << 20,
            training: true,
            lookahead: None,
        };
        let Auto::Split { split: s, fits } = auto(input, shape(0), 1.0).unwrap() else { panic!("no split") };
        assert!(fits && s.shape.lookahead == AUTO_LOOKAHEAD);
        assert_eq!((s.cache, s.lookahead_cache), (1200 << 20, 0));
        let poor = AutoInput { available: (1 << 30) + shape(0).base_bytes() - 1, ..input };
        assert!(matches!(auto(poor, shape(0), 1.0).unwrap(), Auto::NoRoom { .. }));
        let serving = AutoInput { training: false, ..input };
        let Auto::Split { split: s, .. } = auto(serving, shape(0), 1.0).unwrap() else { panic!() };
        assert_eq!(s.shape.lookahead, 0);
    }

    #[test]
    fn probes_read_fake_cgroup_trees() {
        let d = tempfile::tempdir().unwrap();
        let root = d.path().join("sys");
        let v1 = root.join("memory/job/a");
        std::fs::create_dir_all(&v1).unwrap();
        std::fs::write(v1.join("memory.limit_in_bytes"), "1000000\n").unwrap();
        std::fs::write(v1.join("memory.usage_in_bytes"), "700000\n").unwrap();
        std::fs::write(v1.join("memory.stat"), "cache 5\ntotal_inactive_file 100000\n").unwrap();
        let parent = root.join("memory/job");
        std::fs::write(parent.join("memory.limit_in_bytes"), "500000").unwrap();
        std::fs::write(parent.join("memory.usage_in_bytes"), "450000").unwrap();
        let cpu = root.join("cpu/job/a");
        std::fs::create_dir_all(&cpu).unwrap();
        std::fs::write(cpu.join("cpu.cfs_quota_us"), "150000").unwrap();
        std::fs::write(cpu.join("cpu.cfs_period_us"), "100000").unwrap();
        let proc_cg = d.path().join("cgroup");
        std::fs::write(&proc_cg, "5:memory:/job/a\n4:cpu,cpuacct:/job/a\n").unwrap();
        // The child has 400000 of room; the parent, tighter, 50000.
        assert_eq!(probe::cgroup_headroom(&proc_cg, &root), Some(50_000));
        assert_eq!(probe::cgroup_cpu_quota(&proc_cg, &root), Some(1.5));
        assert_eq!(probe::cores_from(4, Some(1.5)), 1);
        assert_eq!(probe::cores_from(4, None), 4);
        let v2 = d.path().join("v2");
        std::fs::create_dir_all(v2.join("u")).unwrap();
        std::fs::write(v2.join("u/memory.max"), "max").unwrap();
        std::fs::write(v2.join("u/memory.current"), "10").unwrap();
        std::fs::write(v2.join("u/cpu.max"), "200000 100000").unwrap();
        std::fs::write(&proc_cg, "0::/u\n").unwrap();
        assert_eq!(probe::cgroup_headroom(&proc_cg, &v2), None, "max is no limit");
        assert_eq!(probe::cgroup_cpu_quota(&proc_cg, &v2), Some(2.0));
        let m =
            probe::Memory { cgroup_headroom: Some(800 << 20), mem_available: Some(1000 << 20), file_rss: 300 << 20 };
        assert_eq!(m.available(), (800 << 20) - (CODE_PAGES_KEPT * (300u64 << 20) as f64) as u64);
        assert_eq!(probe::Memory { file_rss: 4 << 30, ..m }.available(), 0);
        assert_eq!(probe::Memory::default().available(), AVAILABLE_FLOOR);
        assert!(probe::available_memory() > 0 && probe::cpu_cores() >= 1);
    }
}
