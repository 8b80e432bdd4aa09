//! Read-only check of a mutable store's own files (`flashgnn verify` on a
//! dataset with `mut/`): `CURRENT`, the current generation's free-id list and
//! its write-ahead log. The generation's dataset itself is checked by
//! `flashgnn_store::verify` (the caller runs both).
//!
//! Nothing is written, truncated or removed: a torn tail is reported (a
//! writable open would cut it), leftovers of interrupted compactions are
//! listed (a writable open would remove them).
//!
//! Checks: `CURRENT` (magic, version, CRC, and — version 2 — its
//! `root_dataset_id` equal to the dataset's own id and its
//! `generation_dataset_id` to the generation's base's); the generation's base
//! opens and is symmetric; the free list (magic, count, CRC, ids strictly ascending, below
//! the base's node count and isolated in the base); the log header (CRC,
//! version, generation and base_seq equal to `CURRENT`), every frame's CRC,
//! consecutive sequence numbers, every op decodable and applicable when
//! replayed against the generation (ids in bounds, rows the right width and
//! finite). The first failure is a `MutError::Corrupt` naming the file, the
//! byte offset and the frame's sequence number.

use std::path::{Path, PathBuf};

use flashgnn_store::Delta;

use crate::current::{self, Current};
use crate::graph::{open_base, replay_into};
use crate::wal;
use crate::{corrupt, Result};

/// What [`verify_log`] found.
#[derive(Debug, Clone, Default)]
pub struct LogVerifyReport {
    pub generation: u64,
    pub base_seq: u64,
    /// The directory of the current generation's dataset.
    pub dataset: PathBuf,
    pub wal: PathBuf,
    pub wal_bytes: u64,
    pub frames: u64,
    pub ops: u64,
    /// Sequence number of the last valid frame.
    pub last_seq: u64,
    pub torn_bytes: u64,
    /// Ids on the generation's free list file, and deleted ids after replay.
    pub free_ids: u64,
    pub free_ids_now: u64,
    /// Nodes after replay (base + added vertices).
    pub num_nodes: u64,
    /// Nodes the replayed delta holds records for, and its heap bytes.
    pub delta_nodes: u64,
    pub delta_bytes: u64,
    /// Entries under `mut/` that the current generation does not use.
    pub leftovers: Vec<String>,
    /// `mut/` exists but `CURRENT` does not (a first writable open crashed
    /// before writing it: nothing was ever acknowledged).
    pub no_current: bool,
    /// The log's ops were applied to a replayed delta ([`verify_log`]);
    /// false: its frames were checked without it ([`verify_log_frames`]),
    /// and `num_nodes`, `free_ids_now`, `delta_nodes` and `delta_bytes` are
    /// the generation's, before the log.
    pub replayed: bool,
}

impl LogVerifyReport {
    /// The `mutable` part of `flashgnn verify`'s and `flashgnn info`'s
    /// reports.
    pub fn report(&self) -> serde_json::Value {
        serde_json::json!({
            "generation": self.generation, "base_seq": self.base_seq, "dataset": self.dataset.display().to_string(),
            "wal": self.wal.display().to_string(), "wal_bytes": self.wal_bytes, "frames": self.frames,
            "ops": self.ops, "last_seq": self.last_seq, "torn_tail_bytes": self.torn_bytes,
            "free_ids": self.free_ids, "free_ids_now": self.free_ids_now, "num_nodes": self.num_nodes,
            "delta_nodes": self.delta_nodes, "delta_bytes": self.delta_bytes, "leftovers": self.leftovers,
            "no_current": self.no_current, "replayed": self.replayed,
        })
    }
}

/// Check the mutable store of the dataset at `root`; None when it has no
/// `mut/` directory.
pub fn verify_log(root: &Path) -> Result<Option<LogVerifyReport>> {
    check_log(root, true)
}

/// [`verify_log`] without applying the log's ops: every check but
/// applicability (CURRENT, the base, the free list, the log's header, every
/// frame's CRC, sequence number and group index, every op decodable). The
/// check of a live server's background scrubber: its store validated every
/// op before logging it, and media damage fails a frame's CRC, while a
/// replay rebuilds a second copy of the store's whole in-memory delta — every
/// record the log touched, materialised from the base — on every pass
/// (docs/reliability.md, *Soak*). Holds the log's bytes and one frame's ops.
pub fn verify_log_frames(root: &Path) -> Result<Option<LogVerifyReport>> {
    check_log(root, false)
}

fn check_log(root: &Path, replay: bool) -> Result<Option<LogVerifyReport>> {
    if !current::store_present(root)? {
        return Ok(None);
    }
    let stored = current::read_current(root)?;
    let root_id = flashgnn_store::Dataset::open(root)?.manifest().dataset_id;
    if let Some(c) = &stored {
        current::check_root_id(root, c, root_id)?;
    }
    let cur = stored.unwrap_or(Current::initial(root_id));
    let mut rep = LogVerifyReport {
        generation: cur.generation,
        base_seq: cur.base_seq,
        last_seq: cur.base_seq,
        dataset: current::gen_dir(root, cur.generation),
        wal: current::wal_path(root, cur.generation),
        leftovers: current::leftovers(root, &cur)?,
        no_current: stored.is_none(),
        ..Default::default()
    };
    let base = open_base(&rep.dataset)?;
    current::check_generation_id(root, &cur, base.manifest().dataset_id)?;
    rep.num_nodes = base.num_nodes();
    if stored.is_none() {
        return Ok(Some(rep));
    }
    let free = if cur.generation > 0 {
        let path = current::free_path(root, cur.generation);
        let ids = current::read_free(&path)?;
        let name = path.display().to_string();
        for (i, &v) in ids.iter().enumerate() {
            let at = 16 + 8 * i as u64;
            if v >= base.num_nodes() {
                return Err(corrupt(&name, at, format!("free id {v} out of range [0, {})", base.num_nodes())));
            }
            if i > 0 && ids[i - 1] >= v {
                return Err(corrupt(
                    &name,
                    at,
                    format!("free id {v} after {}: ids must be strictly ascending", ids[i - 1]),
                ));
            }
            let deg = base.neighbors(v as i64)?.len();
            if deg != 0 {
                return Err(corrupt(
                    &name,
                    at,
                    format!(
                        "free id {v} has {deg} neighbors in {}; a deleted id must be isolated",
                        rep.dataset.display()
                    ),
                ));
            }
        }
        rep.free_ids = ids.len() as u64;
        ids
    } else {
        Vec::new()
    };
    let mut delta = Delta::new(&base, free)?;
    let wname = rep.wal.display().to_string();
    let bytes = wal::read_log(&rep.wal)?;
    rep.wal_bytes = bytes.len() as u64;
    rep.replayed = replay;
    let r = if replay {
        replay_into(&wname, &bytes, &base, &mut delta)?
    } else {
        wal::check_bound(&wname, &bytes, base.manifest().dataset_id)?;
        wal::replay(&wname, &bytes, |_, _, _| Ok(()))?
    };
    if r.generation != cur.generation || r.base_seq != cur.base_seq {
        return Err(corrupt(
            &wname,
            16,
            format!(
                "header says generation {} base_seq {}, CURRENT says generation {} base_seq {}",
                r.generation, r.base_seq, cur.generation, cur.base_seq
            ),
        ));
    }
    rep.frames = r.frames;
    rep.ops = r.ops;
    rep.last_seq = r.last_seq;
    rep.torn_bytes = r.torn_bytes;
    rep.num_nodes = delta.num_nodes();
    rep.delta_nodes = delta.len() as u64;
    rep.free_ids_now = delta.free_len() as u64;
    rep.delta_bytes = delta.heap_bytes();
    Ok(Some(rep))
}
