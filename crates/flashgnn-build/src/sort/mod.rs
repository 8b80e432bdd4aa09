//! External sort of packed `u64` keys (`dst << 32 | src`) under a byte budget.
//!
//! **Run mode** ([`ExternalSorter::new`]): keys accumulate in one chunk of
//! `chunk_bytes`; a full chunk is sorted in place (rayon's pdqsort, all
//! cores, no scratch buffer: the chunk is the only key memory) and written
//! as a run file of little-endian u64s. (An in-place MSD radix sort and an
//! LSD radix sort with a scratch buffer were measured on 12 M graph keys: no
//! faster than pdqsort on this 2-core VM, 0.15-0.28 s each; see
//! docs/benchmarks.md.) The merge is a k-way loser-tree merge
//! ([`LoserTree`]: one comparison per tree level per key, against a binary
//! heap's two) over buffered run readers; with more than
//! [`MERGE_FANIN_MAX`] runs, groups are merged first so the number of open
//! files and read buffers stays bounded (`runs.rs`).
//!
//! Invariant: at most `chunk_bytes + 2 * MERGE_FANIN_MAX * RUN_READ_BUFFER_BYTES`
//! bytes of keys are resident at any time (each run reader holds its raw
//! bytes and the decoded keys).
//!
//! **Bucketed mode** ([`ExternalSorter::bucketed`]), used when the key bound
//! and roughly the key count are known up front (npy edge arrays with a
//! declared node count): a push appends the key to one of `B` staging
//! buffers by its top bits (equal-width key ranges, `B` a power of two sized
//! so a bucket holds ~0.4-0.8 of a third of a chunk), full buffers are
//! appended to that bucket's file in the packed form of `pack.rs`
//! (`buckets.rs`), and `finish` returns a stream that loads, sorts and
//! yields bucket after bucket in key order — no k-way merge, and the sort of
//! bucket `i + 1` (a worker thread: [`sort_bucket`], an MSD radix sort,
//! `radix.rs`) runs while the consumer walks bucket `i` (`stream.rs`). At
//! most three buckets are resident (the one consumed, and the one sorted
//! with its output: `chunk_bytes / 3` each). A bucket that skew made larger
//! than that is sorted out of core by a nested run-and-merge sorter, so the
//! bound holds for any input. Every key is written and read once, as in
//! the run mode.

use std::path::{Path, PathBuf};

use rayon::slice::ParallelSliceMut;

use flashgnn_io::{BlockWriter, OutFile};

use crate::Result;

mod buckets;
mod pack;
mod radix;
mod runs;
mod stream;
#[cfg(test)]
mod tests;

use buckets::{
    BucketFiles, Buckets, Sink, SpillThread, BUCKET_FILL_PERCENT, BUCKET_STAGE_KEYS_MAX, BUCKET_STAGE_KEYS_MIN,
    BUCKET_STAGE_TOTAL_KEYS, SPILL_QUEUE,
};
use pack::Pack;
use runs::write_keys;

pub use radix::sort_bucket;
pub use runs::{KeyFileReader, LoserTree};
pub use stream::BucketStream;

/// Most runs merged at once: 64 runs x (256 KiB bytes + 256 KiB keys) = 32 MiB.
pub const MERGE_FANIN_MAX: usize = 64;
/// Read buffer per run during a merge.
pub const RUN_READ_BUFFER_BYTES: usize = 256 << 10;
/// Most buckets of a bucketed sort (equal key ranges): 1024 x 4 Ki keys of
/// staging at the smallest = 32 MiB. Beyond it buckets grow past their
/// resident cap and take the nested out-of-core path (correct, slower).
pub const BUCKETS_MAX: usize = 1024;

pub struct ExternalSorter {
    dir: PathBuf,
    name: String,
    chunk: Vec<u64>,
    chunk_cap: usize,
    runs: Vec<PathBuf>,
    pushed: u64,
    dedup: bool,
    buckets: Option<Buckets>,
    /// Run mode's [`with_spill_thread`](Self::with_spill_thread) observer.
    observer: Option<Observer>,
}

/// What a bucketed sorter's observer sees: every key once, in batches of
/// one bucket's key range. It runs on the spill thread, hence `Send`.
pub type Observer = Box<dyn FnMut(&[u64]) -> Result<()> + Send>;

impl ExternalSorter {
    pub fn new(dir: &Path, name: &str, chunk_bytes: u64) -> Self {
        let chunk_cap = (chunk_bytes / 8).max(1024) as usize;
        ExternalSorter {
            dir: dir.to_path_buf(),
            name: name.into(),
            chunk: Vec::new(),
            chunk_cap,
            runs: Vec::new(),
            pushed: 0,
            dedup: false,
            buckets: None,
            observer: None,
        }
    }

    /// A sorter for keys `< key_bound`, about `expected` of them: bucketed
    /// (see the module docs) when they would not fit one chunk, the run mode
    /// otherwise (one in-memory sort, nothing written). `expected` only sizes
    /// the buckets: any count sorts correctly.
    pub fn bucketed(dir: &Path, name: &str, chunk_bytes: u64, key_bound: u64, expected: u64) -> Self {
        let mut s = Self::new(dir, name, chunk_bytes);
        if expected <= s.chunk_cap as u64 || key_bound < 2 {
            return s;
        }
        // Resident at once: the consumer's bucket, and the worker's bucket
        // with its counting-sort output (`sort_bucket`): three buckets.
        let resident_keys = (s.chunk_cap / 3).max(1);
        let want = (expected * 100).div_ceil(resident_keys as u64 * BUCKET_FILL_PERCENT);
        let key_bits = 64 - (key_bound - 1).leading_zeros();
        let mut b = (want.max(2) as usize).next_power_of_two().min(BUCKETS_MAX);
        b = b.min(1usize << key_bits.min(20));
        let shift = key_bits - b.trailing_zeros();
        let b = ((key_bound - 1) >> shift) as usize + 1;
        // A multiple of 4096 keys: every append is then whole 4 KiB blocks
        // at whatever packed width (O_DIRECT), save a bucket's last one.
        let stage_keys =
            (BUCKET_STAGE_TOTAL_KEYS / b).clamp(BUCKET_STAGE_KEYS_MIN, BUCKET_STAGE_KEYS_MAX) / 4096 * 4096;
        let pack = Pack::new(shift, 32);
        s.buckets = Some(Buckets {
            pack,
            stage: (0..b).map(|_| Vec::new()).collect(),
            stage_keys,
            counts: vec![0; b],
            resident_keys,
            sink: Sink::Inline(BucketFiles {
                dir: dir.to_path_buf(),
                name: name.into(),
                files: (0..b).map(|_| None).collect(),
                written: vec![0; b],
                pack,
                buf: None,
                writer: BlockWriter::default(),
            }),
        });
        s
    }

    /// Bucketed mode: every key's low 32-bit half is below `bound` (graph
    /// keys `dst << 32 | src`: the node count), so bucket files store only
    /// its low bits (see [`Pack`]). A key beyond it is refused when its
    /// bucket is written. Call before any push.
    pub fn with_low_bound(mut self, bound: u64) -> Self {
        assert!(
            self.pushed == 0 && self.buckets.as_ref().is_none_or(|b| matches!(b.sink, Sink::Inline(_))),
            "with_low_bound before any push and before with_spill_thread: the bucket files' format changes"
        );
        if let Some(b) = self.buckets.as_mut() {
            if (1..=1u64 << 32).contains(&bound) {
                let low_bits = 64 - (bound - 1).leading_zeros();
                b.pack = Pack::new(b.pack.shift, low_bits);
                if let Sink::Inline(f) = &mut b.sink {
                    f.pack = b.pack;
                }
            }
        }
        self
    }

    /// Bucketed mode: append full staging buffers on a spill thread, which
    /// shows each one to `observer` first (instead of the pushing thread's
    /// `observe`: a caller passes the same work here). The pushing thread
    /// then only parses and scatters keys; counting and the write system
    /// calls run beside it. Run mode (or a sorter that fits one chunk):
    /// `observer` is called on the pushing thread, for the whole chunk.
    pub fn with_spill_thread(mut self, mut observer: Observer) -> Result<Self> {
        let Some(b) = self.buckets.as_mut() else {
            self.observer = Some(observer);
            return Ok(self);
        };
        let Sink::Inline(mut files) = std::mem::replace(&mut b.sink, Sink::Inline(BucketFiles::empty())) else {
            return Err(crate::BuildError::config("internal: spill thread started twice"));
        };
        let (tx, rx) = std::sync::mpsc::sync_channel::<(usize, Vec<u64>)>(SPILL_QUEUE);
        let (free_tx, free) = std::sync::mpsc::channel::<Vec<u64>>();
        let handle = std::thread::Builder::new()
            .name(format!("{}-spill", self.name))
            .spawn(move || -> Result<BucketFiles> {
                for (i, mut keys) in rx {
                    observer(&keys)?;
                    files.append(i, &keys)?;
                    keys.clear();
                    let _ = free_tx.send(keys); // the pusher may be gone: then it is freed here
                }
                Ok(files)
            })
            .map_err(|e| crate::BuildError::config(format!("cannot start the bucket spill thread: {e}")))?;
        b.sink = Sink::Thread(SpillThread { tx: Some(tx), free, handle: Some(handle) });
        Ok(self)
    }

    /// Buckets of a bucketed sorter (0 in run mode).
    pub fn buckets(&self) -> usize {
        self.buckets.as_ref().map_or(0, |b| b.stage.len())
    }

    /// Push one key; `observe` sees every key exactly once, in batches (a
    /// full chunk, or a bucket's staging buffer: keys of one key range,
    /// which keeps per-key side tables such as degree counters cache-local),
    /// at the latest when [`finish_with`](Self::finish_with) returns — unless
    /// the sorter has its own observer ([`with_spill_thread`](Self::with_spill_thread)),
    /// which then sees them instead.
    #[inline]
    pub fn push_with(&mut self, key: u64, observe: &mut impl FnMut(&[u64]) -> Result<()>) -> Result<()> {
        self.pushed += 1;
        if let Some(b) = self.buckets.as_mut() {
            let i = (key >> b.pack.shift) as usize;
            if i >= b.stage.len() {
                return Err(crate::BuildError::config(format!(
                    "internal: sort key {key:#x} beyond the declared key bound of {}",
                    self.name
                )));
            }
            let st = &mut b.stage[i];
            if st.capacity() == 0 {
                st.reserve_exact(b.stage_keys);
            }
            st.push(key);
            if st.len() == b.stage_keys {
                b.flush(i, observe)?;
            }
            return Ok(());
        }
        if self.chunk.len() == self.chunk_cap {
            self.observe_chunk(observe)?;
            self.spill()?;
        }
        if self.chunk.capacity() == 0 {
            self.chunk.reserve_exact(self.chunk_cap);
        }
        self.chunk.push(key);
        Ok(())
    }

    /// Keep one copy of equal keys within each run (a sorted chunk is
    /// deduplicated before it is written): the merge then sees each key at
    /// most once per run, which is all a `--dedup` build needs, and reads
    /// and writes fewer keys. `len()` still counts every pushed key.
    pub fn with_dedup(mut self, on: bool) -> Self {
        self.dedup = on;
        self
    }

    #[inline]
    pub fn push(&mut self, key: u64) -> Result<()> {
        self.push_with(key, &mut |_| Ok(()))
    }

    pub fn len(&self) -> u64 {
        self.pushed
    }
    pub fn is_empty(&self) -> bool {
        self.pushed == 0
    }
    fn observe_chunk(&mut self, observe: &mut impl FnMut(&[u64]) -> Result<()>) -> Result<()> {
        match self.observer.as_mut() {
            Some(o) => o(&self.chunk),
            None => observe(&self.chunk),
        }
    }

    /// Sorted runs written so far (buckets written, in bucketed mode).
    pub fn runs(&self) -> usize {
        match &self.buckets {
            Some(b) => b.counts.iter().zip(&b.stage).filter(|(c, s)| **c > 0 || !s.is_empty()).count(),
            None => self.runs.len(),
        }
    }

    fn spill(&mut self) -> Result<()> {
        self.chunk.par_sort_unstable();
        if self.dedup {
            self.chunk.dedup();
        }
        let path = self.dir.join(format!("{}.run{}", self.name, self.runs.len()));
        write_keys(&path, &self.chunk)?;
        self.runs.push(path);
        self.chunk.clear();
        Ok(())
    }

    /// Finish: returns a sorted stream over every pushed key.
    pub fn finish(self) -> Result<Merged> {
        self.finish_with(&mut |_| Ok(()))
    }

    /// [`finish`](Self::finish), showing `observe` the keys it has not seen yet.
    pub fn finish_with(mut self, observe: &mut impl FnMut(&[u64]) -> Result<()>) -> Result<Merged> {
        if let Some(mut b) = self.buckets.take() {
            for i in 0..b.stage.len() {
                if !b.stage[i].is_empty() {
                    b.flush(i, observe)?;
                }
                b.stage[i] = Vec::new();
            }
            let mut files = match &mut b.sink {
                Sink::Inline(f) => std::mem::replace(f, BucketFiles::empty()),
                Sink::Thread(t) => t.join()?,
            };
            files.settle()?;
            return Ok(Merged::Buckets(BucketStream::start(&self.dir, &self.name, files, &b)?));
        }
        self.observe_chunk(observe)?;
        if self.runs.is_empty() {
            self.chunk.par_sort_unstable();
            if self.dedup {
                self.chunk.dedup();
            }
            return Ok(Merged::Memory { keys: std::mem::take(&mut self.chunk), at: 0 });
        }
        if !self.chunk.is_empty() {
            self.spill()?;
        }
        self.chunk = Vec::new(); // release the chunk before merging
        let mut runs = std::mem::take(&mut self.runs);
        let mut level = 0;
        while runs.len() > MERGE_FANIN_MAX {
            let mut next = Vec::new();
            for (g, group) in runs.chunks(MERGE_FANIN_MAX).enumerate() {
                let path = self.dir.join(format!("{}.l{}m{}", self.name, level + 1, g));
                let mut out = OutFile::create(&path)?;
                let mut m = LoserTree::open(group.to_vec())?;
                while let Some(k) = m.next_key()? {
                    out.write(&k.to_le_bytes())?;
                }
                out.finish()?;
                drop(m);
                for p in group {
                    let _ = std::fs::remove_file(p);
                }
                next.push(path);
            }
            runs = next;
            level += 1;
        }
        Ok(Merged::Disk(LoserTree::open(runs)?))
    }
}

pub enum Merged {
    Memory { keys: Vec<u64>, at: usize },
    Disk(LoserTree),
    Buckets(BucketStream),
}

impl Merged {
    /// Keys this stream yields in all (after any per-run deduplication).
    pub fn total_keys(&self) -> u64 {
        match self {
            Merged::Memory { keys, at } => (keys.len() - (*at).min(keys.len())) as u64,
            Merged::Disk(m) => m.total,
            Merged::Buckets(b) => b.total,
        }
    }

    /// Append up to `max` next keys to `out`; fewer only at the end.
    pub fn next_block(&mut self, out: &mut Vec<u64>, max: usize) -> Result<()> {
        match self {
            Merged::Memory { keys, at } => {
                let from = (*at).min(keys.len());
                let to = from + max.min(keys.len() - from);
                out.extend_from_slice(&keys[from..to]);
                *at = to;
            }
            Merged::Buckets(b) => b.next_block(out, max)?,
            Merged::Disk(m) => {
                for _ in 0..max {
                    let Some(k) = m.next_key()? else { break };
                    out.push(k);
                }
            }
        }
        Ok(())
    }

    pub fn next_key(&mut self) -> Result<Option<u64>> {
        match self {
            Merged::Memory { keys, at } => {
                let k = keys.get(*at).copied();
                *at += 1;
                Ok(k)
            }
            Merged::Disk(m) => m.next_key(),
            Merged::Buckets(b) => b.next_key(),
        }
    }
}

/// A zeroed vector whose pages the kernel may back with transparent huge
/// pages (`MADV_HUGEPAGE`): the degree counters and out-edge bits take one
/// random increment per pushed key, and with 4 KiB pages most of those also
/// miss the TLB; [`sort_bucket`]'s output takes scattered writes too.
pub(crate) fn huge_zeroed<T: Copy + Default>(n: usize) -> Vec<T> {
    let v = vec![T::default(); n];
    let bytes = std::mem::size_of_val(v.as_slice());
    if bytes >= 4 << 20 {
        let start = v.as_ptr() as usize;
        let (lo, hi) = ((start + 4095) & !4095, (start + bytes) & !4095);
        // SAFETY: advice on whole pages inside the vector's own allocation;
        // it changes no contents (the pages are still zero when touched).
        unsafe { libc::madvise(lo as *mut libc::c_void, hi - lo, libc::MADV_HUGEPAGE) };
    }
    v
}
