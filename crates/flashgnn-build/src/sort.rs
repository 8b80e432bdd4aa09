//! External sort of packed `u64` keys (`dst << 32 | src`) under a byte budget.
//!
//! Keys accumulate in one chunk of `chunk_bytes`; a full chunk is sorted in
//! place (rayon's pdqsort, all cores, no scratch buffer: the chunk is the
//! only key memory) and written as a run file of little-endian u64s. (An
//! in-place MSD radix sort and an LSD radix sort with a scratch buffer were
//! measured on 12 M graph keys: no faster than pdqsort on this 2-core VM,
//! 0.15-0.28 s each; see docs/benchmarks.md.) The merge is a
//! k-way loser-tree merge ([`LoserTree`]: one comparison per tree level per
//! key, against a binary heap's two) over buffered run readers; with more
//! than [`MERGE_FANIN_MAX`] runs, groups are merged first so the number of
//! open files and read buffers stays bounded.
//!
//! Invariant: at most `chunk_bytes + 2 * MERGE_FANIN_MAX * RUN_READ_BUFFER_BYTES`
//! bytes of keys are resident at any time (each run reader holds its raw
//! bytes and the decoded keys).
//!
//! **Bucketed mode** ([`ExternalSorter::bucketed`]), used when the key bound
//! and roughly the key count are known up front (npy edge arrays with a
//! declared node count): a push appends the key to one of `B` staging
//! buffers by its top bits (equal-width key ranges, `B` a power of two sized
//! so a bucket holds ~0.4-0.8 of half a chunk), full buffers are appended to
//! that bucket's file, and `finish` returns a stream that loads, sorts and
//! yields bucket after bucket in key order — no k-way merge, and the sort of
//! bucket `i + 1` (a background thread, rayon's pdqsort on all cores) runs
//! while the consumer walks bucket `i`. At most two buckets are resident
//! (the one consumed, the one sorted: `chunk_bytes / 2` each). A bucket that
//! skew made larger than that is sorted out of core by a nested
//! run-and-merge sorter, so the bound holds for any input. Every key is
//! written and read once, as in the run mode.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use rayon::slice::ParallelSliceMut;

use flashgnn_io::aligned::{AlignedBuf, BUF_ALIGN};
use flashgnn_io::{BlockWriter, IoError, OutFile};

use crate::Result;

/// Most runs merged at once: 64 runs x (256 KiB bytes + 256 KiB keys) = 32 MiB.
pub const MERGE_FANIN_MAX: usize = 64;
/// Read buffer per run during a merge.
pub const RUN_READ_BUFFER_BYTES: usize = 256 << 10;
/// Most buckets of a bucketed sort (equal key ranges): 1024 x 4 Ki keys of
/// staging at the smallest = 32 MiB. Beyond it buckets grow past half a
/// chunk and take the nested out-of-core path (correct, slower).
pub const BUCKETS_MAX: usize = 1024;
/// Staging keys per bucket: all buffers together hold
/// [`BUCKET_STAGE_TOTAL_KEYS`] (8 MiB: pushes scatter over them, so they
/// should stay in cache; 64 buckets x 512 KiB = 32 MiB tripled the push
/// CPU), at most 64 Ki keys (512 KiB appends), at least 4 Ki (32 KiB) each.
const BUCKET_STAGE_TOTAL_KEYS: usize = 1 << 20;
const BUCKET_STAGE_KEYS_MAX: usize = 64 << 10;
const BUCKET_STAGE_KEYS_MIN: usize = 4 << 10;
/// Fill target of a bucket against its resident cap (half a chunk): 0.8
/// before rounding the bucket count up to a power of two, so an equal-width
/// split of the key range holds 0.4-0.8 of the cap on average, leaving room
/// for skew before a bucket takes the slower nested path.
const BUCKET_FILL_PERCENT: u64 = 80;

/// How a bucket file stores its keys: only the bits a bucket's keys can
/// differ in, `width` little-endian bytes per key. A bucket's keys share
/// every bit from `shift` up (the bucket index: stored once, as the file).
/// With a bound on the low 32-bit half ([`ExternalSorter::with_low_bound`]:
/// graph keys `dst << 32 | src` with `src` below the node count) the
/// constant top of that half is dropped too: an 8 GiB edge input's keys
/// take 5 bytes instead of 8 (39 of 64 bits vary), and the bucket files —
/// written once and read once, the largest I/O of the build after its
/// input — shrink by 3/8.
#[derive(Clone, Copy, Debug)]
struct Pack {
    /// bucket = key >> shift (at most 63: a bucketed sort has 2+ buckets).
    shift: u32,
    /// Bits kept of the low half (32: the low half is not split off).
    low_bits: u32,
    width: usize,
}

impl Pack {
    fn new(shift: u32, low_bits: u32) -> Pack {
        let split = shift > 32 && low_bits < 32;
        let bits = if split { shift - 32 + low_bits } else { shift };
        Pack { shift, low_bits: if split { low_bits } else { 32 }, width: (bits.div_ceil(8) as usize).clamp(1, 8) }
    }

    /// The stored form of `k` (bucket `k >> shift`).
    #[inline(always)]
    fn encode(&self, k: u64) -> u64 {
        if self.low_bits < 32 {
            ((k >> 32) & ((1u64 << (self.shift - 32)) - 1)) << self.low_bits | (k & 0xffff_ffff)
        } else {
            k & ((1u64 << self.shift) - 1)
        }
    }

    /// The key stored as `p` in bucket `i`.
    #[inline(always)]
    fn decode(&self, p: u64, i: usize) -> u64 {
        let base = (i as u64) << self.shift;
        if self.low_bits < 32 {
            base | (p >> self.low_bits) << 32 | (p & ((1u64 << self.low_bits) - 1))
        } else {
            base | p
        }
    }

    /// Key `j` of a bucket file's bytes.
    #[inline(always)]
    fn load(&self, bytes: &[u8], j: usize, i: usize) -> u64 {
        let at = j * self.width;
        let p = match bytes.get(at..at + 8) {
            Some(b) => u64::from_le_bytes(b.try_into().expect("8 bytes")),
            None => {
                let mut b = [0u8; 8];
                b[..self.width].copy_from_slice(&bytes[at..at + self.width]);
                u64::from_le_bytes(b)
            }
        };
        let p = if self.width == 8 { p } else { p & ((1u64 << (8 * self.width)) - 1) };
        self.decode(p, i)
    }
}

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

/// Bucketed mode's state while keys are pushed.
struct Buckets {
    /// bucket = key >> pack.shift; how its files store the keys.
    pack: Pack,
    stage: Vec<Vec<u64>>,
    stage_keys: usize,
    /// Keys handed to the bucket files so far, per bucket.
    counts: Vec<u64>,
    /// Keys one resident bucket may hold (half a chunk).
    resident_keys: usize,
    sink: Sink,
}

/// What a bucketed sorter's observer sees: every key once, in batches of
/// one bucket's key range. It runs on the spill thread, hence `Send`.
pub type Observer = Box<dyn FnMut(&[u64]) -> Result<()> + Send>;

/// The bucket files being appended to.
struct BucketFiles {
    dir: PathBuf,
    name: String,
    /// Path, file, and whether it is (still) open with O_DIRECT.
    files: Vec<Option<(PathBuf, File, bool)>>,
    /// Keys written per bucket (the next write's offset / `pack.width`).
    written: Vec<u64>,
    pack: Pack,
    /// A staging buffer's packed bytes, aligned for O_DIRECT (reused; a
    /// second one is in flight on the writer).
    buf: Option<AlignedBuf>,
    /// Whole-block appends go to its thread, one in flight, while the spill
    /// thread counts and encodes the next staging buffer. The spill thread
    /// was the edge pass's bottleneck without `--symmetrize` (a 2 GB uint32
    /// input: 1.2 of ~6 s blocked in `pwrite`, the pushing and reading
    /// threads waiting on it).
    writer: BlockWriter,
}

/// Where full staging buffers go: appended by the pushing thread itself, or
/// handed to a spill thread ([`ExternalSorter::with_spill_thread`]) that shows
/// them to its observer, appends them and hands the emptied buffers back.
enum Sink {
    Inline(BucketFiles),
    Thread(SpillThread),
}

struct SpillThread {
    /// Full buffers to append (bounded: [`SPILL_QUEUE`] in flight).
    tx: Option<std::sync::mpsc::SyncSender<(usize, Vec<u64>)>>,
    /// Emptied buffers coming back, reused as staging buffers.
    free: std::sync::mpsc::Receiver<Vec<u64>>,
    handle: Option<std::thread::JoinHandle<Result<BucketFiles>>>,
}

/// Full staging buffers queued for the spill thread at most: with the one it
/// is appending and the recycled ones, the spill thread adds at most
/// `SPILL_QUEUE + 2` staging buffers (<= 3 MiB) to the 8 MiB of staging.
const SPILL_QUEUE: usize = 4;

impl SpillThread {
    /// Stop the thread (after it appended everything queued) and take its files.
    fn join(&mut self) -> Result<BucketFiles> {
        self.tx = None;
        match self.handle.take().map(|h| h.join()) {
            Some(Ok(r)) => r,
            Some(Err(_)) => Err(crate::BuildError::config("internal: bucket spill thread panicked")),
            None => Err(crate::BuildError::config("internal: bucket spill thread joined twice")),
        }
    }
}

impl Drop for SpillThread {
    fn drop(&mut self) {
        // An abandoned sort (a build error): let the thread finish its last
        // append before the caller removes the directory under it.
        if self.handle.is_some() {
            let _ = self.join();
        }
    }
}

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

fn write_keys(path: &Path, keys: &[u64]) -> Result<()> {
    let mut out = OutFile::create(path)?;
    // Reinterpret in 1 MiB slices without unsafe: copy into a byte buffer.
    let mut buf = Vec::with_capacity(1 << 20);
    for c in keys.chunks(1 << 17) {
        buf.clear();
        for k in c {
            buf.extend_from_slice(&k.to_le_bytes());
        }
        out.write(&buf)?;
    }
    out.finish()?;
    Ok(())
}

fn bucket_path(dir: &Path, name: &str, i: usize) -> PathBuf {
    dir.join(format!("{name}.bucket{i}"))
}

impl Buckets {
    /// Hand bucket `i`'s (non-empty) staging buffer to the sink: shown to
    /// `observe` and appended here, or queued for the spill thread (which
    /// shows it to its own observer) and replaced by a recycled buffer.
    fn flush(&mut self, i: usize, observe: &mut impl FnMut(&[u64]) -> Result<()>) -> Result<()> {
        self.counts[i] += self.stage[i].len() as u64;
        match &mut self.sink {
            Sink::Inline(files) => {
                observe(&self.stage[i])?;
                files.append(i, &self.stage[i])?;
                self.stage[i].clear();
            }
            Sink::Thread(t) => {
                let next = t.free.try_recv().unwrap_or_else(|_| Vec::with_capacity(self.stage_keys));
                let full = std::mem::replace(&mut self.stage[i], next);
                let sent = t.tx.as_ref().is_some_and(|tx| tx.send((i, full)).is_ok());
                if !sent {
                    // The thread stopped on an error: report it.
                    t.join()?;
                    return Err(crate::BuildError::config("internal: bucket spill thread stopped early"));
                }
            }
        }
        Ok(())
    }
}

impl BucketFiles {
    fn empty() -> BucketFiles {
        BucketFiles {
            dir: PathBuf::new(),
            name: String::new(),
            files: Vec::new(),
            written: Vec::new(),
            pack: Pack::new(0, 32), // a placeholder: no file to encode for
            buf: None,
            writer: BlockWriter::default(),
        }
    }

    /// Append keys to bucket `i`'s file (created on first use).
    /// Temporary files: no checksum and no fsync (they never outlive the
    /// build), but every write is charged to the fault plan like any other.
    /// Written with O_DIRECT where the file system allows it, from one
    /// reused aligned buffer: the keys are read back once, so a page-cache
    /// copy would only cost a kernel copy per byte and push other pages
    /// out. A write of an unaligned length (a bucket's last one) turns
    /// O_DIRECT off for the rest of that file.
    fn append(&mut self, i: usize, keys: &[u64]) -> Result<()> {
        if self.files[i].is_none() {
            let path = bucket_path(&self.dir, &self.name, i);
            let (f, direct) = flashgnn_io::engine::create_direct(&path)?;
            self.files[i] = Some((path, f, direct));
        }
        let (path, f, direct) = self.files[i].as_mut().expect("bucket file created above");
        let path: &Path = path;
        let (pack, w) = (self.pack, self.pack.width);
        let len = keys.len() * w;
        let at = self.written[i] * w as u64;
        let aligned = len.is_multiple_of(BUF_ALIGN) && at.is_multiple_of(BUF_ALIGN as u64);
        if *direct && !aligned {
            self.writer.settle(path)?; // nothing of this file in flight while its flags change
            flashgnn_io::engine::clear_direct(f).map_err(|e| IoError::new("writing", path, Some(at), e))?;
            *direct = false;
        }
        // Encoded into an aligned buffer (8 bytes of slack: each key is
        // stored as a whole u64 and the next one overwrites its top): the
        // one not in flight.
        let mut buf = self.buf.take().unwrap_or_else(|| AlignedBuf::new(len + 8));
        if buf.capacity() < len + 8 {
            buf = AlignedBuf::new(len + 8);
        }
        let out = buf.spare();
        let mut beyond = 0u64;
        for (j, &k) in keys.iter().enumerate() {
            beyond |= (k & 0xffff_ffff) >> pack.low_bits.min(32);
            out[j * w..j * w + 8].copy_from_slice(&pack.encode(k).to_le_bytes());
        }
        if beyond != 0 {
            return Err(crate::BuildError::config(format!(
                "internal: a sort key's low half is beyond the declared low bound of {} (2^{})",
                self.name, pack.low_bits
            )));
        }
        buf.set_len(len);
        self.written[i] += keys.len() as u64;
        if *direct {
            // Whole blocks: written on the writer thread while the next
            // staging buffer is counted and encoded here.
            self.buf = self.writer.send(f, buf, at, path)?;
        } else {
            flashgnn_io::pwrite_all(f, buf.as_slice(), at).map_err(|e| IoError::new("writing", path, Some(at), e))?;
            self.buf = Some(buf);
        }
        Ok(())
    }

    /// Wait until every append is on disk (before the files are read).
    fn settle(&mut self) -> Result<()> {
        self.writer.settle(&self.dir)?;
        self.writer = BlockWriter::default(); // the thread ends
        Ok(())
    }
}

/// One sorted bucket handed from the sorting thread to the consumer.
enum Piece {
    Keys(Vec<u64>),
    /// A bucket larger than the resident cap, sorted out of core.
    Stream(Box<Merged>),
}

/// The sorted output of a bucketed sort: bucket `i` is consumed while a
/// worker thread loads and sorts bucket `i + 1` (a rendezvous channel: the
/// worker holds at most one finished bucket until the consumer takes it).
pub struct BucketStream {
    rx: Option<std::sync::mpsc::Receiver<Result<Piece>>>,
    /// Drained buckets' buffers, back to the worker (see [`Reuse`]).
    free: std::sync::mpsc::Sender<Vec<u64>>,
    worker: Option<std::thread::JoinHandle<()>>,
    keys: Vec<u64>,
    at: usize,
    stream: Option<Box<Merged>>,
    total: u64,
    paths: Vec<PathBuf>,
}

impl BucketStream {
    fn start(dir: &Path, name: &str, files: BucketFiles, b: &Buckets) -> Result<BucketStream> {
        let total = b.counts.iter().sum();
        let mut jobs = Vec::new();
        let mut paths = Vec::new();
        for (i, f) in files.files.into_iter().enumerate() {
            if let Some((path, file, _)) = f {
                drop(file);
                paths.push(path.clone());
                jobs.push((i, path, b.counts[i]));
            }
        }
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<Piece>>(0);
        let (free, free_rx) = std::sync::mpsc::channel::<Vec<u64>>();
        let (dir, name, cap, pack) = (dir.to_path_buf(), name.to_string(), b.resident_keys, b.pack);
        let worker = std::thread::Builder::new()
            .name(format!("{name}-sort"))
            .spawn(move || {
                let mut reuse = Reuse { free: free_rx };
                for (i, path, n) in jobs {
                    let piece = load_bucket(&dir, &name, i, &path, n, cap, pack, &mut reuse);
                    let failed = piece.is_err();
                    if tx.send(piece).is_err() || failed {
                        return; // consumer gone (it removes the files), or the error is delivered
                    }
                }
            })
            .map_err(|e| crate::BuildError::config(format!("cannot start the bucket sort thread: {e}")))?;
        Ok(BucketStream {
            rx: Some(rx),
            free,
            worker: Some(worker),
            keys: Vec::new(),
            at: 0,
            stream: None,
            total,
            paths,
        })
    }

    #[inline]
    pub fn next_key(&mut self) -> Result<Option<u64>> {
        loop {
            if let Some(&k) = self.keys.get(self.at) {
                self.at += 1;
                return Ok(Some(k));
            }
            if let Some(m) = self.stream.as_mut() {
                if let Some(k) = m.next_key()? {
                    return Ok(Some(k));
                }
                self.stream = None;
            }
            // Hand the drained bucket's buffer back to the worker for reuse
            // (dropped there when too small) before the next one arrives.
            let _ = self.free.send(std::mem::take(&mut self.keys));
            self.at = 0;
            let Some(rx) = self.rx.as_ref() else { return Ok(None) };
            match rx.recv() {
                Ok(Ok(Piece::Keys(v))) => self.keys = v,
                Ok(Ok(Piece::Stream(m))) => self.stream = Some(m),
                Ok(Err(e)) => {
                    self.rx = None;
                    return Err(e);
                }
                Err(_) => {
                    self.rx = None; // every bucket delivered
                    return Ok(None);
                }
            }
        }
    }
}

/// A sort worker's output vectors, kept from one bucket to the next:
/// drained buckets' vectors come back from the consumer. A fresh 200 MB
/// vector per bucket cost its page faults and zeroing every time (with the
/// read buffer, ~7 % of an 8 GiB edge build's CPU in `clear_page`). The
/// read buffer is not kept: held across the hand-over it added a fourth
/// bucket to the resident set (peak RSS 303 against 250 MiB measured
/// under a 256 MiB budget).
struct Reuse {
    free: std::sync::mpsc::Receiver<Vec<u64>>,
}

impl Reuse {
    /// A vector for `n` sorted keys: the largest returned one when it is
    /// large enough, else a new one.
    fn output(&mut self, n: usize) -> Vec<u64> {
        let mut out = Vec::new();
        while let Ok(v) = self.free.try_recv() {
            if v.capacity() > out.capacity() {
                out = v; // the largest wins (an out-of-core bucket returns an empty one)
            }
        }
        if out.capacity() < n {
            return huge_zeroed::<u64>(n);
        }
        // The sort writes every element: keep the old keys where there are
        // some instead of zeroing 200 MB first; only a longer tail is filled.
        if out.len() >= n {
            out.truncate(n);
        } else {
            out.resize(n, 0);
        }
        out
    }
}

/// Read bucket `i` (`n` keys stored as `pack` says) and sort it: in memory
/// when it fits the resident cap, else through a nested run-and-merge
/// sorter. Removes the file.
#[allow(clippy::too_many_arguments)]
fn load_bucket(
    dir: &Path,
    name: &str,
    i: usize,
    path: &Path,
    n: u64,
    cap: usize,
    pack: Pack,
    reuse: &mut Reuse,
) -> Result<Piece> {
    let w = pack.width;
    if n as usize <= cap {
        // O_DIRECT (buffered where the file system refuses it) into one
        // aligned buffer: no page-cache copy, no cached pages left behind.
        // The keys are decoded as the sort's first pass reads them.
        let mut f = flashgnn_io::direct::DirectFile::open_path(path)?;
        let mut out = reuse.output(n as usize);
        let bytes = f.read_view(0, n as usize * w)?;
        let _ = std::fs::remove_file(path); // read already: the open file outlives its name
        sort_into(n as usize, |j| pack.load(bytes, j, i), &mut out);
        return Ok(Piece::Keys(out));
    }
    const KEYS: usize = 1 << 16;
    let file = File::open(path).map_err(|e| IoError::new("opening", path, None, e))?;
    let mut r = std::io::BufReader::with_capacity(1 << 20, file);
    let mut s = ExternalSorter::new(dir, &format!("{name}.b{i}"), cap as u64 * 8);
    let mut chunk = vec![0u8; KEYS * w];
    let mut left = n;
    while left > 0 {
        let k = left.min(KEYS as u64) as usize;
        let at = (n - left) * w as u64;
        std::io::Read::read_exact(&mut r, &mut chunk[..k * w])
            .map_err(|e| IoError::new("reading", path, Some(at), e))?;
        for j in 0..k {
            s.push(pack.load(&chunk[..k * w], j, i))?;
        }
        left -= k as u64;
    }
    let _ = std::fs::remove_file(path);
    Ok(Piece::Stream(Box::new(s.finish()?)))
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

/// Digit bits of each scatter pass of [`sort_bucket`]: 512 write streams,
/// few enough that each stays in cache while it fills.
const SCATTER_BITS: u32 = 9;
/// Below this many keys a bucket is sorted by pdqsort directly.
const BUCKET_COUNTING_MIN_KEYS: usize = 1 << 16;
/// Below this many keys a part of a bucket is sorted by pdqsort (in L1).
const SEGMENT_SCATTER_MIN_KEYS: usize = 2048;
/// Above this many keys (8 MiB) a part is sorted in place by pdqsort: the
/// scatter's scratch vector, one per sorting thread, stays within the fixed
/// allowance even when one hub's neighbors fill most of a bucket.
const SEGMENT_SCATTER_MAX_KEYS: usize = 1 << 20;

/// Sort one bucket (keys sharing every bit above the bucket's range): an
/// MSD radix sort on the bits that vary, [`SCATTER_BITS`] at a time. The
/// first pass scatters the bucket into the output buffer; then each of its
/// 512 parts (a few hundred KiB: in L2) is sorted on its own, in parallel,
/// by further passes through a per-thread scratch buffer, down to parts of
/// under [`SEGMENT_SCATTER_MIN_KEYS`] keys, which pdqsort finishes. For
/// graph keys `dst << 32 | src` two passes separate the destinations (each
/// part is then one node's neighbor list); only hubs take passes on the
/// sources. Needs one output buffer beside the input (counted in the
/// resident bound: three buckets).
///
/// Measured on an 8 GiB edge input (perf, 2026-11-28): the one-pass
/// counting sort on the destination used before scattered to 2^17 places
/// at once (a cache miss per key) on one thread, and the sort workers were
/// the layout pass's bottleneck; a whole-bucket LSD radix sort (four 11-bit
/// passes over 200 MB) was no faster, bound by memory traffic.
pub fn sort_bucket(keys: &[u64]) -> Vec<u64> {
    let mut out = huge_zeroed::<u64>(keys.len());
    sort_into(keys.len(), |j| keys[j], &mut out);
    out
}

/// [`sort_bucket`] of the `n` keys `key(0..n)` into `out` (`n` long): the
/// first pass reads them through `key` (a bucket file's packed bytes).
fn sort_into(n: usize, key: impl Fn(usize) -> u64, out: &mut [u64]) {
    assert_eq!(out.len(), n, "sort_into: output of another length");
    let digit = if n < BUCKET_COUNTING_MIN_KEYS { None } else { next_digit(varying_bits(n, &key)) };
    let Some((low, bits)) = digit else {
        for (j, o) in out.iter_mut().enumerate() {
            *o = key(j);
        }
        if n < BUCKET_COUNTING_MIN_KEYS {
            out.par_sort_unstable();
        }
        return; // else every key is equal
    };
    let starts = scatter(n, &key, out, low, bits);
    if low > 0 {
        let mut parts: Vec<&mut [u64]> = Vec::new();
        let mut rest: &mut [u64] = out;
        for w in starts.windows(2) {
            let (part, tail) = std::mem::take(&mut rest).split_at_mut(w[1] - w[0]);
            if part.len() > 1 {
                parts.push(part);
            }
            rest = tail;
        }
        use rayon::prelude::*;
        parts.par_iter_mut().for_each_init(Vec::new, |scratch, p| sort_part(p, scratch));
    }
}

/// The bits in which the keys `key(0..n)` differ (0: all equal).
fn varying_bits(n: usize, key: impl Fn(usize) -> u64) -> u64 {
    let (or, and) = (0..n).fold((0u64, !0u64), |(o, x), j| {
        let k = key(j);
        (o | k, x & k)
    });
    or ^ and
}

/// The next MSD digit of keys that share every bit above their highest
/// varying one (`vary`): (its low bit, its width); None when none varies.
fn next_digit(vary: u64) -> Option<(u32, u32)> {
    if vary == 0 {
        return None;
    }
    let top = 64 - vary.leading_zeros();
    let low = top.saturating_sub(SCATTER_BITS);
    Some((low, top - low))
}

/// Stable counting scatter of the keys `key(0..n)` into `dst` on bits
/// `[low, low + bits)`; returns the start of each digit's range (2^bits + 1
/// offsets).
fn scatter(n: usize, key: impl Fn(usize) -> u64, dst: &mut [u64], low: u32, bits: u32) -> Vec<usize> {
    let mask = (1u64 << bits) - 1;
    let mut at = vec![0usize; (1usize << bits) + 1];
    for j in 0..n {
        at[((key(j) >> low) & mask) as usize + 1] += 1;
    }
    for d in 1..at.len() {
        at[d] += at[d - 1];
    }
    let starts = at.clone();
    for j in 0..n {
        let k = key(j);
        let d = ((k >> low) & mask) as usize;
        dst[at[d]] = k;
        at[d] += 1;
    }
    starts
}

/// Sort a part of a bucket in place (see [`sort_bucket`]).
fn sort_part(p: &mut [u64], scratch: &mut Vec<u64>) {
    if p.len() < SEGMENT_SCATTER_MIN_KEYS || p.len() > SEGMENT_SCATTER_MAX_KEYS {
        p.sort_unstable();
        return;
    }
    let Some((low, bits)) = next_digit(varying_bits(p.len(), |j| p[j])) else { return };
    scratch.clear();
    scratch.resize(p.len(), 0);
    let starts = scatter(p.len(), |j| p[j], scratch, low, bits);
    p.copy_from_slice(scratch);
    if low == 0 {
        return; // the digit was the last varying bits: each range is one key
    }
    for w in starts.windows(2) {
        if w[1] - w[0] > 1 {
            sort_part(&mut p[w[0]..w[1]], scratch);
        }
    }
}

impl BucketStream {
    /// Append up to `max` next keys to `out` (fewer only at the end): whole
    /// slices of an in-memory bucket, key by key otherwise.
    pub fn next_block(&mut self, out: &mut Vec<u64>, max: usize) -> Result<()> {
        let mut want = max;
        while want > 0 {
            if self.at < self.keys.len() {
                let k = want.min(self.keys.len() - self.at);
                out.extend_from_slice(&self.keys[self.at..self.at + k]);
                self.at += k;
                want -= k;
                continue;
            }
            // The next bucket (or an out-of-core one's keys): one key, then
            // the slices again.
            match self.next_key()? {
                Some(k) => {
                    out.push(k);
                    want -= 1;
                }
                None => break,
            }
        }
        Ok(())
    }
}

impl Drop for BucketStream {
    fn drop(&mut self) {
        self.rx = None; // a worker blocked in send() sees the channel closed
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
        for p in &self.paths {
            let _ = std::fs::remove_file(p);
        }
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

/// Reads little-endian u64 keys in blocks (one `read` per
/// [`RUN_READ_BUFFER_BYTES`], not one per key).
pub struct KeyFileReader {
    path: PathBuf,
    file: File,
    block: Vec<u64>,
    bytes: Vec<u8>,
    at: usize,
    offset: u64,
}

impl KeyFileReader {
    pub fn open(path: &Path) -> Result<KeyFileReader> {
        let file = flashgnn_io::open_regular(path)?;
        Ok(KeyFileReader {
            path: path.to_path_buf(),
            file,
            block: Vec::new(),
            bytes: vec![0; RUN_READ_BUFFER_BYTES],
            at: 0,
            offset: 0,
        })
    }

    #[inline]
    pub fn next_key(&mut self) -> Result<Option<u64>> {
        if self.at == self.block.len() && !self.refill()? {
            return Ok(None);
        }
        let k = self.block[self.at];
        self.at += 1;
        Ok(Some(k))
    }

    fn refill(&mut self) -> Result<bool> {
        // Fill the byte buffer with whole keys (a read may return fewer bytes).
        let mut got = 0;
        while got < self.bytes.len() {
            let n = self
                .file
                .read(&mut self.bytes[got..])
                .map_err(|e| IoError::new("reading", &self.path, Some(self.offset + got as u64), e))?;
            if n == 0 {
                break;
            }
            got += n;
            if got % 8 == 0 && got >= self.bytes.len() / 2 {
                break;
            }
        }
        if got % 8 != 0 {
            return Err(IoError::new(
                "reading",
                &self.path,
                Some(self.offset + got as u64),
                std::io::Error::new(std::io::ErrorKind::UnexpectedEof, "key file length is not a multiple of 8"),
            )
            .into());
        }
        self.offset += got as u64;
        self.block.clear();
        self.block.extend(self.bytes[..got].chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().unwrap())));
        self.at = 0;
        Ok(got > 0)
    }
}

/// K-way merge of sorted run files through a loser tree: `tree[0]` holds
/// the current winner, `tree[1..k]` the loser of each internal match, so
/// replacing the winner's key replays one leaf-to-root path (log2 k
/// comparisons, no sift-down with two comparisons per level as in a binary
/// heap). Exhausted runs compare greater than every key.
pub struct LoserTree {
    readers: Vec<KeyFileReader>,
    /// Current key of each run (meaningful where `live`).
    keys: Vec<u64>,
    live: Vec<bool>,
    /// Number of leaves, a power of two >= the number of runs.
    k: usize,
    tree: Vec<usize>,
    /// Keys in all runs (file lengths / 8).
    total: u64,
}

impl LoserTree {
    fn open(paths: Vec<PathBuf>) -> Result<LoserTree> {
        let mut readers = paths.iter().map(|p| KeyFileReader::open(p)).collect::<Result<Vec<_>>>()?;
        let k = readers.len().max(1).next_power_of_two();
        let mut keys = vec![0u64; k];
        let mut live = vec![false; k];
        for (i, r) in readers.iter_mut().enumerate() {
            if let Some(x) = r.next_key()? {
                keys[i] = x;
                live[i] = true;
            }
        }
        let mut total = 0;
        for p in &paths {
            total += std::fs::metadata(p).map_err(|e| IoError::new("reading", p, None, e))?.len() / 8;
        }
        let mut t = LoserTree { readers, keys, live, k, tree: vec![0; k], total };
        t.build();
        Ok(t)
    }

    /// `a` beats `b`: live, smaller key, run index breaking ties.
    #[inline]
    fn beats(&self, a: usize, b: usize) -> bool {
        match (self.live[a], self.live[b]) {
            (true, true) => (self.keys[a], a) < (self.keys[b], b),
            (true, false) => true,
            (false, true) => false,
            (false, false) => a < b,
        }
    }

    fn build(&mut self) {
        // Winners of each node bottom-up, storing losers.
        let k = self.k;
        let mut win = vec![0usize; 2 * k];
        for i in 0..k {
            win[k + i] = i;
        }
        for n in (1..k).rev() {
            let (a, b) = (win[2 * n], win[2 * n + 1]);
            if self.beats(a, b) {
                win[n] = a;
                self.tree[n] = b;
            } else {
                win[n] = b;
                self.tree[n] = a;
            }
        }
        self.tree[0] = if k == 1 { 0 } else { win[1] };
    }

    #[inline]
    pub fn next_key(&mut self) -> Result<Option<u64>> {
        let w = self.tree[0];
        if !self.live[w] {
            return Ok(None);
        }
        let out = self.keys[w];
        match self.readers[w].next_key()? {
            Some(x) => self.keys[w] = x,
            None => self.live[w] = false,
        }
        // Replay w's path: at each node the smaller stays as winner.
        let mut winner = w;
        let mut n = (self.k + w) / 2;
        while n > 0 {
            let l = self.tree[n];
            if self.beats(l, winner) {
                self.tree[n] = winner;
                winner = l;
            }
            n /= 2;
        }
        self.tree[0] = winner;
        Ok(Some(out))
    }
}

impl Drop for LoserTree {
    fn drop(&mut self) {
        for r in &self.readers {
            let _ = std::fs::remove_file(&r.path);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    #[test]
    fn matches_in_memory_sort_across_many_runs() {
        // Proves the external sort equals sort() for inputs spanning many
        // runs and a multi-level merge (tiny chunks force > MERGE_FANIN_MAX runs).
        let d = tempfile::tempdir().unwrap();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        let keys: Vec<u64> = (0..200_000).map(|_| rng.random_range(0..5000u64)).collect();
        let mut s = ExternalSorter::new(d.path(), "t", 1024 * 8);
        for &k in &keys {
            s.push(k).unwrap();
        }
        assert!(s.runs() > MERGE_FANIN_MAX);
        let mut m = s.finish().unwrap();
        let mut got = Vec::new();
        while let Some(k) = m.next_key().unwrap() {
            got.push(k);
        }
        let mut want = keys;
        want.sort();
        assert_eq!(got, want);
        drop(m);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0, "run files removed");
    }

    #[test]
    fn dedup_keeps_one_copy_per_run_and_counts_every_push() {
        // Runs of 4 keys: duplicates inside a run are dropped, across runs
        // they stay (the merge sees each key at most once per run).
        let d = tempfile::tempdir().unwrap();
        let mut s = ExternalSorter::new(d.path(), "t", 8).with_dedup(true);
        s.chunk_cap = 4;
        for k in [5u64, 5, 5, 1, /* run 2 */ 5, 2, 2, 2, /* last run */ 7, 7] {
            s.push(k).unwrap();
        }
        assert_eq!(s.len(), 10);
        let mut m = s.finish().unwrap();
        assert_eq!(m.total_keys(), 5);
        let mut got = Vec::new();
        while let Some(k) = m.next_key().unwrap() {
            got.push(k);
        }
        assert_eq!(got, vec![1, 2, 5, 5, 7]);
    }

    fn drain(mut m: Merged) -> Vec<u64> {
        let mut got = Vec::new();
        while let Some(k) = m.next_key().unwrap() {
            got.push(k);
        }
        got
    }

    #[test]
    fn bucketed_sort_matches_sort_and_shows_every_key_once() {
        // Proves the bucketed mode (key-range buckets, a worker sorting
        // ahead) yields exactly sort(keys), that `observe` sees each key
        // once and only keys of one bucket per batch, and that no file is
        // left: 300 K keys under a bound of 2^40 in 8 K-key chunks.
        let d = tempfile::tempdir().unwrap();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(3);
        let bound = 1u64 << 40;
        let keys: Vec<u64> = (0..300_000).map(|_| rng.random_range(0..bound)).collect();
        let mut s = ExternalSorter::bucketed(d.path(), "t", 8192 * 8, bound, keys.len() as u64);
        let shift = s.buckets.as_ref().unwrap().pack.shift;
        assert!(s.buckets() > 8, "{} buckets", s.buckets());
        let mut seen = Vec::new();
        let mut observe = |b: &[u64]| -> Result<()> {
            assert!(b.iter().all(|&k| k >> shift == b[0] >> shift), "a batch spans two buckets");
            seen.extend_from_slice(b);
            Ok(())
        };
        for &k in &keys {
            s.push_with(k, &mut observe).unwrap();
        }
        let m = s.finish_with(&mut observe).unwrap();
        assert_eq!(m.total_keys(), keys.len() as u64);
        let mut want = keys;
        want.sort();
        seen.sort();
        assert_eq!(seen, want);
        assert_eq!(drain(m), want);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0, "bucket files removed");
    }

    #[test]
    fn spill_thread_matches_sort_and_its_observer_sees_every_key_once() {
        // The spill thread (observer + O_DIRECT appends of recycled buffers,
        // a buffered last append of odd length) yields exactly sort(keys),
        // its observer sees each key once in one-bucket batches, and the
        // run mode calls the observer on the pushing thread instead.
        let d = tempfile::tempdir().unwrap();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(11);
        let bound = 1u64 << 40;
        let keys: Vec<u64> = (0..300_001).map(|_| rng.random_range(0..bound)).collect();
        let mut want = keys.clone();
        want.sort();
        for (chunk, bucketed) in [(8192 * 8, true), (1 << 24, false)] {
            let seen = std::sync::Arc::new(std::sync::Mutex::new(Vec::new()));
            let s2 = seen.clone();
            let mut s = ExternalSorter::bucketed(d.path(), "t", chunk, bound, keys.len() as u64);
            assert_eq!(s.buckets() > 0, bucketed);
            let shift = s.buckets.as_ref().map_or(64, |b| b.pack.shift);
            s = s
                .with_spill_thread(Box::new(move |b: &[u64]| {
                    assert!(shift == 64 || b.iter().all(|&k| k >> shift == b[0] >> shift), "a batch spans two buckets");
                    s2.lock().unwrap().extend_from_slice(b);
                    Ok(())
                }))
                .unwrap();
            for &k in &keys {
                s.push_with(k, &mut |_| panic!("the spill thread's observer sees the keys")).unwrap();
            }
            let m = s.finish().unwrap();
            let mut got_seen = std::mem::take(&mut *seen.lock().unwrap());
            got_seen.sort();
            assert_eq!(got_seen, want, "observer, bucketed {bucketed}");
            assert_eq!(drain(m), want, "stream, bucketed {bucketed}");
            assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0, "bucket files removed");
        }
    }

    #[test]
    fn spill_thread_error_reaches_the_pusher_and_leaves_no_thread() {
        // An observer error (a degree overflow) stops the spill thread; the
        // next push or the finish returns that error, not a hang or a panic.
        let d = tempfile::tempdir().unwrap();
        let bound = 1u64 << 32;
        let mut s = ExternalSorter::bucketed(d.path(), "t", 2048 * 8, bound, 100_000)
            .with_spill_thread(Box::new(|_: &[u64]| {
                Err(crate::BuildError::config("node 9 has more than 4294967295 neighbors"))
            }))
            .unwrap();
        let mut err = None;
        for k in 0..100_000u64 {
            if let Err(e) = s.push(k * 40_000) {
                err = Some(e.to_string());
                break;
            }
        }
        let e = match err {
            Some(e) => e,
            None => s.finish().err().expect("finish reports the observer's error").to_string(),
        };
        assert!(e.contains("node 9 has more than"), "{e}");
    }

    #[test]
    fn bucketed_sort_survives_skew_and_a_wrong_hint() {
        // One bucket gets far more keys than half a chunk (all keys in a
        // narrow range, hint 10x too low): it takes the nested run-and-merge
        // path and the output is still sort(keys); duplicates are kept.
        let d = tempfile::tempdir().unwrap();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(5);
        let bound = 1u64 << 36;
        let mut keys: Vec<u64> = (0..200_000).map(|_| rng.random_range(0..1000u64)).collect();
        keys.extend((0..20_000).map(|_| rng.random_range(0..bound)));
        let s = ExternalSorter::bucketed(d.path(), "t", 4096 * 8, bound, 20_000);
        assert!(s.buckets() > 1);
        sorts_and_cleans_up(s, keys, d.path(), |_| ());
    }

    /// Push `keys`, finish, and check that the stream is sort(keys) and that
    /// no file is left in `dir`; `between` looks at `dir` before the drain.
    fn sorts_and_cleans_up(mut s: ExternalSorter, mut keys: Vec<u64>, dir: &Path, between: impl FnOnce(&Path)) {
        for &k in &keys {
            s.push(k).unwrap();
        }
        let m = s.finish().unwrap();
        between(dir);
        keys.sort();
        assert_eq!(drain(m), keys);
        assert_eq!(std::fs::read_dir(dir).unwrap().count(), 0, "bucket and nested run files removed");
    }

    #[test]
    fn packed_bucket_files_give_sort_of_graph_keys() {
        // Graph keys dst << 32 | src with a low bound (the node count): the
        // bucket files store 5 of 8 bytes per key, and decoding gives
        // sort(keys) back — for in-memory buckets, for one that skew sends
        // down the nested out-of-core path (a hub with most of the keys),
        // through a spill thread, with the bucket files' sizes the packed
        // ones while they exist.
        let d = tempfile::tempdir().unwrap();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(21);
        let n = 3_000_000u64; // 22 bits
        let mut keys: Vec<u64> = (0..200_000).map(|_| rng.random_range(0..n) << 32 | rng.random_range(0..n)).collect();
        keys.extend((0..150_000).map(|_| 7 << 32 | rng.random_range(0..n))); // the hub
        keys.push((n - 1) << 32 | (n - 1));
        let s = ExternalSorter::bucketed(d.path(), "g", 8192 * 8, n << 32, 200_000)
            .with_low_bound(n)
            .with_spill_thread(Box::new(|_| Ok(())))
            .unwrap();
        let pack = s.buckets.as_ref().unwrap().pack;
        assert!(s.buckets() > 8 && pack.width == 5, "{} buckets, {pack:?}", s.buckets());
        let bound = keys.len() as u64 * 5;
        sorts_and_cleans_up(s, keys, d.path(), |dir| {
            let stored: u64 = std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().metadata().unwrap().len()).sum();
            assert!(stored <= bound, "{stored} bytes for {} keys", bound / 5);
        });
    }

    #[test]
    fn packed_bucket_refuses_a_low_half_beyond_its_bound() {
        // A source id at or above the declared low bound would not fit the
        // packed bits: the bucket write refuses it instead of storing a
        // wrong key.
        let d = tempfile::tempdir().unwrap();
        let n = 1000u64;
        let mut s = ExternalSorter::bucketed(d.path(), "g", 1024 * 8, n << 32, 20_000).with_low_bound(n);
        assert!(s.buckets.as_ref().unwrap().pack.low_bits == 10);
        let mut r = Ok(());
        for k in 0..5000u64 {
            r = s.push((k % n) << 32 | if k == 4000 { 1024 } else { k % n });
            if r.is_err() {
                break;
            }
        }
        let e = r.and_then(|_| s.finish().map(|_| ())).unwrap_err().to_string();
        assert!(e.contains("beyond the declared low bound"), "{e}");
    }

    #[test]
    fn bucketed_stream_dropped_early_removes_its_files() {
        // A consumer that stops after a few keys (a build error) leaves no
        // bucket file behind and does not hang on the worker thread.
        let d = tempfile::tempdir().unwrap();
        let bound = 1u64 << 32;
        let mut s = ExternalSorter::bucketed(d.path(), "t", 2048 * 8, bound, 100_000);
        for k in (0..100_000u64).rev() {
            s.push(k * 40_000).unwrap();
        }
        let mut m = s.finish().unwrap();
        assert_eq!(m.next_key().unwrap(), Some(0));
        drop(m);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0);
    }

    #[test]
    fn sort_bucket_equals_sort_for_every_digit_position() {
        // The MSD radix passes and pdqsort of short parts give sort()
        // whatever bits vary: a shared prefix above `shift` (a bucket),
        // graph keys whose source and destination halves each leave
        // constant bits between them, keys varying in bit 63 (the top
        // digit), one repeated key (a hub / duplicates), and all keys equal.
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(9);
        let mut cases: Vec<Vec<u64>> = Vec::new();
        for shift in [52u32, 40, 33, 20, 12] {
            let hi = 5u64 << shift; // every key shares the bits above `shift`
            let mut keys: Vec<u64> = (0..150_000).map(|_| hi | rng.random_range(0..(1u64 << shift.min(63)))).collect();
            keys.extend(std::iter::repeat_n(hi | 77, 20_000));
            cases.push(keys);
        }
        cases.push(
            (0..150_000)
                .map(|_| (3 << 45 | rng.random_range(0..1u64 << 17)) << 32 | rng.random_range(0..1u64 << 22))
                .collect(),
        );
        cases.push((0..150_000).map(|_| rng.random::<u64>()).collect());
        // Hubs: neighbor lists long enough for scatter passes of their own.
        cases.push((0..200_000).map(|i| ((i % 7) << 32) | rng.random_range(0..1u64 << 22)).collect());
        // Two hubs of over SEGMENT_SCATTER_MAX_KEYS each: sorted in place.
        cases.push((0..2_200_000u64).map(|i| ((i % 2) << 40) | rng.random_range(0..1u64 << 22)).collect());
        cases.push(vec![42; 100_000]);
        for keys in cases {
            let mut want = keys.clone();
            want.sort();
            assert_eq!(sort_bucket(&keys), want);
        }
    }

    #[test]
    fn bucketed_sort_refuses_a_key_beyond_its_bound() {
        let d = tempfile::tempdir().unwrap();
        let mut s = ExternalSorter::bucketed(d.path(), "t", 1024 * 8, 1 << 20, 1 << 20);
        let e = s.push(1 << 21).unwrap_err().to_string();
        assert!(e.contains("beyond the declared key bound"), "{e}");
    }

    #[test]
    fn loser_tree_merges_uneven_and_empty_runs() {
        // Runs of different lengths (one empty, one holding u64::MAX, a
        // non-power-of-two count) merge to the sorted union.
        let d = tempfile::tempdir().unwrap();
        let runs: Vec<Vec<u64>> =
            vec![vec![1, 5, 9, u64::MAX], vec![], vec![0, 5, 5, 6], vec![2], vec![3, 4, 10, 11, 12]];
        let mut paths = Vec::new();
        for (i, r) in runs.iter().enumerate() {
            let p = d.path().join(format!("r{i}"));
            write_keys(&p, r).unwrap();
            paths.push(p);
        }
        let mut m = LoserTree::open(paths).unwrap();
        let mut got = Vec::new();
        while let Some(k) = m.next_key().unwrap() {
            got.push(k);
        }
        let mut want: Vec<u64> = runs.concat();
        want.sort();
        assert_eq!(got, want);
    }
}
