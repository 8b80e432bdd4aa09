//! One copy per process of a dataset's per-node side arrays.
//!
//! A training process opens one [`crate::Dataset`] per sampler: every
//! pipeline producer, every Python `Sampler`/loader, the cache's pre-sampler
//! and the evaluation loaders each open their own. Each used to load its own
//! labels (4 B/node), relabelling maps (2 x 4 B/node) and feature CRCs
//! (4 B/node): at 67 M nodes and a handful of samplers that is gigabytes, a
//! cost that grows with N and that no memory budget counted.
//!
//! This registry hands every `Dataset` of the same files the same
//! `Arc<[T]>`. It holds only [`Weak`] references: an array lives while some
//! dataset or sampler holds it and is freed with the last one, and the next
//! open loads it again.
//!
//! **Invariant:** an array is shared only between datasets whose
//! [`SideKey`] is equal — same canonical directory, same manifest bytes
//! (which carry every file's CRC32C), and the same identity (device, inode,
//! size, mtime and ctime in ns) of every per-node side file. Rewriting or
//! corrupting a side file in place changes its stamp, so the next open loads
//! and checks it afresh instead of being handed the copy checked before.
//!
//! Loads run under the registry's lock, so producers opening at once wait
//! for one load instead of each making their own copy (the reason a
//! per-array lock was not worth it: loads are rare, once per dataset).

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Arc, LazyLock, Mutex, MutexGuard, Weak};

/// What makes two opens "the same files" (see the module invariant).
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub(crate) struct SideKey {
    root: PathBuf,
    manifest: String,
    stamps: Vec<(String, [i64; 7])>,
}

impl SideKey {
    /// The key of dataset directory `root` with manifest text `manifest`
    /// and per-node side files `files` (a missing file stamps as zeros: it
    /// is reported by whoever reads it).
    pub(crate) fn new(root: &Path, manifest: &str, files: &[&str]) -> SideKey {
        use std::os::unix::fs::MetadataExt;
        let stamps = files
            .iter()
            .map(|f| {
                let s = std::fs::metadata(root.join(f)).map_or([0; 7], |m| {
                    [
                        m.dev() as i64,
                        m.ino() as i64,
                        m.size() as i64,
                        m.mtime(),
                        m.mtime_nsec(),
                        m.ctime(),
                        m.ctime_nsec(),
                    ]
                });
                (f.to_string(), s)
            })
            .collect();
        let root = std::fs::canonicalize(root).unwrap_or_else(|_| root.to_path_buf());
        SideKey { root, manifest: manifest.to_string(), stamps }
    }
}

/// The arrays loaded for one [`SideKey`], held weakly.
#[derive(Default)]
pub(crate) struct Slots {
    pub(crate) node_index: Option<Weak<[u32]>>,
    pub(crate) node_order: Option<Weak<[u32]>>,
    pub(crate) feature_crcs: Option<Weak<[u32]>>,
    pub(crate) labels: Option<Weak<[i32]>>,
}

impl Slots {
    fn alive(&self) -> bool {
        let live = |w: &Option<Weak<[u32]>>| w.as_ref().is_some_and(|w| w.strong_count() > 0);
        live(&self.node_index)
            || live(&self.node_order)
            || live(&self.feature_crcs)
            || self.labels.as_ref().is_some_and(|w| w.strong_count() > 0)
    }
}

static REGISTRY: LazyLock<Mutex<HashMap<SideKey, Slots>>> = LazyLock::new(Default::default);

/// The registry entry of `key`, locked: look up a live array, or load it
/// and store a [`Weak`] to it, under this one lock. Entries whose arrays
/// all died are dropped first (the map stays as small as the set of
/// datasets open).
pub(crate) fn with_slots<R>(key: &SideKey, f: impl FnOnce(&mut Slots) -> R) -> R {
    // A panic inside a load leaves only Weak pointers behind: safe to reuse.
    let mut reg: MutexGuard<'_, HashMap<SideKey, Slots>> = REGISTRY.lock().unwrap_or_else(|e| e.into_inner());
    reg.retain(|k, s| k == key || s.alive());
    f(reg.entry(key.clone()).or_default())
}

/// Bytes of the arrays of `key` that some holder in this process still has
/// (what is already resident of a dataset's per-node memory).
pub(crate) fn held_bytes(key: &SideKey) -> u64 {
    with_slots(key, |s| {
        let u = |w: &Option<Weak<[u32]>>| upgrade(w).map_or(0, |a| 4 * a.len() as u64);
        u(&s.node_index) + u(&s.node_order) + u(&s.feature_crcs) + upgrade(&s.labels).map_or(0, |a| 4 * a.len() as u64)
    })
}

/// A live array from `slot`, if any holder still has it.
pub(crate) fn upgrade<T: ?Sized>(slot: &Option<Weak<T>>) -> Option<Arc<T>> {
    slot.as_ref().and_then(Weak::upgrade)
}
