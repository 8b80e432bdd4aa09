//! [`MutableGraph`]: open (with replay), unit operations, group commit and
//! snapshots.
//!
//! Locks, always taken in this order: `head` (the validated state, possibly
//! ahead of what is durable; held while a batch is validated and queued) →
//! `queue` (frames waiting for the log, the log file, the durable sequence
//! number) → `published` (the durable snapshot readers take). No lock is held
//! during the log write and fdatasync.
//!
//! Group commit (leader/follower): a writer queues its frame and waits; if no
//! leader is active it becomes one, takes the queued frames (at most
//! [`wal::GROUP_MAX_FRAMES`], oldest first; the rest form the next group),
//! stamps each with its index in the group, writes them with one `write` and
//! one `fdatasync`, publishes the snapshot of the last one, and wakes
//! everyone. Only one leader exists at a time and it holds the log file from
//! before the write until after the fdatasync returned, so a group is written
//! only once the previous group is durable — the property replay relies on to
//! tell a torn last group from corruption in the middle. With `group_commit_wait_us` > 0 a leader first
//! waits that long so more writers can join; with 0 (the default) a group is
//! whatever queued while the previous fsync ran.
//!
//! A failed log write or fsync leaves the durable state unknown past the last
//! acknowledged frame: the graph refuses every later write (reopen to recover:
//! replay decides what is durable). One failure is known exactly: a log
//! *write* refused for want of space (ENOSPC, EDQUOT; the fdatasync never
//! ran). The leader then cuts the log back to its durable end (truncate and
//! fsync; if either fails, the graph refuses writes as above) and fails every
//! queued frame — each was validated on top of the group that was not
//! written — and the next holder of `head` resets it to the durable
//! snapshot. Sequence numbers are then reused, so a frame's waiter also
//! holds the *epoch* it was queued in: a rollback starts a new epoch and
//! records where the old one's durable frames ended (one record per run of
//! epochs that end at the same place: a full disk refuses many writes in a
//! row and makes none durable). Writes resume as soon as space is free
//! again; reads never stopped (they take the published snapshot).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering::Relaxed};
use std::sync::{Arc, Condvar, Mutex, RwLock};
use std::time::Duration;

use flashgnn_store::{Dataset, Delta, Op, Snapshot};

use crate::current::{self, Current};
use crate::wal::{self, WalFile};
use crate::{MutError, Result};

/// Most operations in one batch (`apply`): a batch is validated under the
/// writer lock and logged as one frame, so its size bounds how long other
/// writers wait and how large a frame gets.
pub const MAX_BATCH_OPS: usize = 65_536;

/// Refuse a batch of more than [`MAX_BATCH_OPS`] operations.
pub fn check_batch_len(n: usize) -> Result<()> {
    if n > MAX_BATCH_OPS {
        return Err(MutError::Invalid(format!(
            "a batch of {n} operations exceeds the maximum of {MAX_BATCH_OPS} operations per batch: split it into \
             several apply() calls"
        )));
    }
    Ok(())
}

/// The unit operations a batch (`apply`) takes by name, each with the
/// fields that follow the name, in order: `("add_edge", dst, src)`. The
/// bindings check a batch's tuples against it and export it as
/// `_core.MUTATION_OPS`, so the Python API and the serve client accept
/// exactly these, with these arities.
pub const OPS: &[(&str, &[&str])] = &[
    ("add_vertex", &["embed"]),
    ("delete_vertex", &["vid"]),
    ("add_edge", &["dst", "src"]),
    ("delete_edge", &["dst", "src"]),
    ("update_embed", &["vid", "embed"]),
];

/// The fields of the operation `name` ([`OPS`]), or an error naming it and
/// every operation.
pub fn op_fields(name: &str) -> Result<&'static [&'static str]> {
    OPS.iter().find(|(n, _)| *n == name).map(|(_, f)| *f).ok_or_else(|| {
        let all: Vec<&str> = OPS.iter().map(|(n, _)| *n).collect();
        MutError::Invalid(format!("unknown operation {name:?} (expected {})", all.join(", ")))
    })
}

#[derive(Debug, Clone)]
pub struct GraphOptions {
    /// Open for writing (replays, truncates a torn tail, cleans leftovers).
    /// Read-only opens replay without changing any file.
    pub writable: bool,
    /// How long a group-commit leader waits for more writers before writing
    /// (0 = write as soon as the previous fsync returned).
    pub group_commit_wait_us: u64,
    /// Where the store's files under `mut/` are created, written, synced,
    /// renamed and removed: the file system, or (tests) a simulated disk
    /// that records it all for crash states. Per store, not per process.
    pub disk: flashgnn_io::Disk,
}

impl Default for GraphOptions {
    fn default() -> Self {
        GraphOptions { writable: true, group_commit_wait_us: 0, disk: flashgnn_io::Disk::Real }
    }
}

pub(crate) struct Head {
    pub base: Arc<Dataset>,
    pub delta: Delta,
    pub generation: u64,
    pub next_seq: u64,
}

struct Pending {
    seq: u64,
    frame: Vec<u8>,
    snap: Arc<Snapshot>,
    ops: u64,
}

pub(crate) struct Queue {
    pending: Vec<Pending>,
    leader: bool,
    pub durable_seq: u64,
    failed: Option<String>,
    pub wal: Option<WalFile>,
    /// Rollbacks after a log write refused for space (module docs): the
    /// current epoch is `epochs`; `epoch_end` holds `(first epoch, last
    /// durable sequence number)` per run of ended epochs that share it, in
    /// epoch order; `refused` the log's path and errno of the last refusal.
    epochs: u64,
    epoch_end: Vec<(u64, u64)>,
    refused: (String, i32),
    /// A rollback happened and `head` still holds the state it undid:
    /// whoever next holds `head` resets it ([`MutableGraph::settle`]).
    rolled_back: bool,
}

impl Queue {
    /// Refuse every later write (the durable state is uncertain).
    pub(crate) fn fail(&mut self, why: String) {
        self.failed = Some(why);
    }
}

#[derive(Clone)]
pub(crate) struct Published {
    pub snap: Arc<Snapshot>,
    /// Log length that holds exactly the frames up to `snap.seq`.
    pub wal_end: u64,
}

/// Counters since open.
#[derive(Debug, Default)]
pub struct GraphStats {
    pub ops: AtomicU64,
    pub frames: AtomicU64,
    pub fsyncs: AtomicU64,
    pub wal_bytes_written: AtomicU64,
    /// Log writes refused for space and rolled back (module docs).
    pub log_space_rollbacks: AtomicU64,
    /// The last such refusal, in µs since the Unix epoch (0: none yet):
    /// when its log write began, and when the rollback had failed every
    /// frame queued by then. A write sent before `rolled_back_at` may be
    /// refused although space was freed meanwhile (it was validated on top
    /// of the group that was not written); one sent later is not, unless a
    /// later write is refused again (`write_at` moves on).
    pub last_space_refusal_write_us: AtomicU64,
    pub last_space_refusal_rolled_back_us: AtomicU64,
}

/// Now, in µs since the Unix epoch (for the stats' timestamps).
fn unix_us() -> u64 {
    std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map_or(0, |d| d.as_micros() as u64)
}

/// What opening found.
#[derive(Debug, Clone, Default)]
pub struct OpenReport {
    pub replay: wal::ReplayReport,
    /// Leftovers of interrupted compactions removed (writable opens).
    pub removed: Vec<String>,
}

pub struct MutableGraph {
    pub(crate) root: PathBuf,
    pub(crate) writable: bool,
    wait_us: u64,
    pub(crate) head: Mutex<Head>,
    pub(crate) queue: Mutex<Queue>,
    cond: Condvar,
    pub(crate) published: RwLock<Published>,
    /// One compaction or update_graph at a time.
    pub(crate) compact_lock: Mutex<()>,
    pub stats: GraphStats,
    closed: AtomicBool,
    pub open_report: OpenReport,
    /// Writable opens: `mut/LOCK`, flock'ed until close or drop.
    lock: Mutex<Option<std::fs::File>>,
    /// Generation 0's `dataset_id`: every `CURRENT` written is bound to it.
    pub(crate) root_dataset_id: Option<u64>,
    /// [`GraphOptions::disk`].
    pub(crate) disk: flashgnn_io::Disk,
}

/// Refuse a base that does not store both directions of every edge.
pub(crate) fn check_symmetric(ds: &Dataset) -> Result<()> {
    if !ds.manifest().build.symmetrize {
        return Err(MutError::Invalid(format!(
            "{}: this dataset was built without --symmetrize, so its edges are one-directional; the mutable store \
             keeps undirected edges (AddEdge/DeleteEdge change both directions) and needs a symmetric base: rebuild \
             it with `flashgnn build INPUT {} --symmetrize --dedup`",
            ds.root().display(),
            ds.root().display()
        )));
    }
    Ok(())
}

/// Open a generation's base and load what later reads need from files that
/// a compaction may delete while this base is still in use (the id maps and
/// feature checksums; graph and feature files stay open).
pub(crate) fn open_base(dir: &Path) -> Result<Arc<Dataset>> {
    let ds = Dataset::open(dir)?;
    check_symmetric(&ds)?;
    load_base(ds)
}

/// [`open_base`] for a dataset already opened and checked to be symmetric.
fn load_base(ds: Dataset) -> Result<Arc<Dataset>> {
    ds.maps()?;
    if ds.layout().placement == flashgnn_format::layout::FeaturePlacement::Separate && ds.layout().row_bytes() > 0 {
        ds.feature_crcs()?;
    }
    Ok(Arc::new(ds))
}

/// Apply replayed frames to `delta`; an op that does not apply is corruption
/// (only validated batches are ever logged).
pub(crate) fn replay_into(file: &str, bytes: &[u8], base: &Dataset, delta: &mut Delta) -> Result<wal::ReplayReport> {
    wal::check_bound(file, bytes, base.manifest().dataset_id)?;
    wal::replay(file, bytes, |seq, off, mut ops| {
        delta.apply_batch(base, &mut ops).map_err(|(i, e)| {
            crate::corrupt(
                file,
                off,
                format!("frame seq {seq}: op {i} does not apply to the base ({}): {e}", base.root().display()),
            )
        })?;
        Ok(())
    })
}

impl flashgnn_store::SnapshotSource for MutableGraph {
    fn snapshot(&self) -> Arc<Snapshot> {
        MutableGraph::snapshot(self)
    }
}

/// What a reader of the dataset at `root` must see: its mutated state —
/// `mut/CURRENT`'s generation with its log replayed, read-only — when
/// `root/mut/CURRENT` exists, else None (the dataset alone). A `mut` that is
/// not a directory, or a `mut/CURRENT` that is not a regular file, is
/// refused as corruption naming it, never ignored; a damaged log is
/// corruption with its file and offset.
pub fn published_snapshot(root: &Path) -> Result<Option<Arc<Snapshot>>> {
    if !current::store_present(root)? || !current::regular_file(&current::mut_dir(root).join(current::CURRENT_FILE))? {
        return Ok(None);
    }
    let g = MutableGraph::open(root, &GraphOptions { writable: false, ..Default::default() })?;
    Ok(Some(g.snapshot()))
}

impl MutableGraph {
    /// Open the mutable graph of the dataset at `root`: the generation named
    /// by `root/mut/CURRENT` (generation 0, the dataset itself, when there is
    /// none) with its log replayed.
    pub fn open(root: impl AsRef<Path>, opts: &GraphOptions) -> Result<MutableGraph> {
        let root = root.as_ref().to_path_buf();
        // Generation 0 must be a symmetric dataset whatever generation is live.
        let gen0 = Dataset::open(&root)?;
        check_symmetric(&gen0)?;
        let mdir = current::mut_dir(&root);
        // `mut` that is not a directory is refused (never ignored, never replaced).
        current::store_present(&root)?;
        // One writer per dataset: take the lock before reading CURRENT or
        // touching anything under mut/ (another writer's in-flight files are
        // not leftovers).
        let disk = &opts.disk;
        let lock = if opts.writable {
            if !mdir.exists() {
                match disk.create_dir(&mdir) {
                    Ok(()) => disk.fsync_dir(&root)?,
                    Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {}
                    Err(e) => return Err(flashgnn_io::IoError::new("creating directory", &mdir, None, e).into()),
                }
            }
            Some(current::lock_writer(disk, &root)?)
        } else {
            None
        };
        let root_id = gen0.manifest().dataset_id;
        let stored = current::read_current(&root)?;
        // A CURRENT bound to another dataset (a mut/ copied from elsewhere) is
        // refused before anything under mut/ is read, removed or replayed.
        if let Some(c) = &stored {
            current::check_root_id(&root, c, root_id)?;
        }
        let logged = stored.is_some() || opts.writable;
        let cur = match stored {
            Some(c) => c,
            None if opts.writable => {
                // First writable open (or a crash before CURRENT was first
                // written: then nothing was ever acknowledged).
                let c = Current::initial(root_id);
                current::clean_leftovers(disk, &root, &c)?;
                wal::create_log(disk, &current::wal_path(&root, 0), 0, 0, root_id, &[])?;
                current::write_current(disk, &root, &c)?;
                c
            }
            None => Current::initial(root_id),
        };
        let mut report = OpenReport::default();
        if opts.writable {
            report.removed = current::clean_leftovers(disk, &root, &cur)?;
        }
        let base = if cur.generation == 0 {
            load_base(gen0)?
        } else {
            drop(gen0);
            open_base(&current::gen_dir(&root, cur.generation))?
        };
        current::check_generation_id(&root, &cur, base.manifest().dataset_id)?;
        let free =
            if cur.generation > 0 { current::read_free(&current::free_path(&root, cur.generation))? } else { vec![] };
        let mut delta = Delta::new(&base, free)?;
        let wpath = current::wal_path(&root, cur.generation);
        let wname = wpath.display().to_string();
        let (replay, wal_end) = if logged {
            let bytes = wal::read_log(&wpath)?;
            let r = replay_into(&wname, &bytes, &base, &mut delta)?;
            if r.generation != cur.generation || r.base_seq != cur.base_seq {
                return Err(MutError::Corrupt(format!(
                    "{wname}: header says generation {} base_seq {}, CURRENT says generation {} base_seq {}",
                    r.generation, r.base_seq, cur.generation, cur.base_seq
                )));
            }
            if opts.writable && r.version != wal::WAL_VERSION {
                // Rewrite an older log as the current version from the bytes
                // just replayed: version-1 frames are frames of index 0, each
                // its own group, so every frame appended later carries its
                // group index; the header is bound to this base (version 3).
                let frames = &bytes[wal::WAL_HEADER_BYTES as usize..r.valid_len as usize];
                wal::create_log(disk, &wpath, r.generation, r.base_seq, base.manifest().dataset_id, frames)?;
            }
            if opts.writable && cur.ids.is_none() {
                // A version-1 CURRENT (no dataset ids): bind it to this dataset
                // and this generation's base now that both were read through it.
                let ids = current::StoreIds { root: root_id, generation: base.manifest().dataset_id };
                current::write_current(disk, &root, &Current { ids: Some(ids), ..cur })?;
            }
            let end = r.valid_len;
            (r, end)
        } else {
            (wal::ReplayReport::default(), 0)
        };
        let wal_file = if opts.writable { Some(WalFile::open(disk, &wpath, wal_end)?) } else { None };
        let last = replay.last_seq.max(cur.base_seq);
        report.replay = replay;
        let snap =
            Arc::new(Snapshot { base: base.clone(), delta: delta.clone(), generation: cur.generation, seq: last });
        Ok(MutableGraph {
            root,
            writable: opts.writable,
            wait_us: opts.group_commit_wait_us,
            head: Mutex::new(Head { base, delta, generation: cur.generation, next_seq: last + 1 }),
            queue: Mutex::new(Queue {
                pending: Vec::new(),
                leader: false,
                durable_seq: last,
                failed: None,
                epochs: 0,
                epoch_end: Vec::new(),
                refused: (String::new(), 0),
                rolled_back: false,
                wal: wal_file,
            }),
            cond: Condvar::new(),
            published: RwLock::new(Published { snap, wal_end }),
            compact_lock: Mutex::new(()),
            stats: GraphStats::default(),
            closed: AtomicBool::new(false),
            open_report: report,
            lock: Mutex::new(lock),
            root_dataset_id: root_id,
            disk: opts.disk.clone(),
        })
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn writable(&self) -> bool {
        self.writable
    }

    /// The durable state as one immutable snapshot (O(1)).
    pub fn snapshot(&self) -> Arc<Snapshot> {
        self.published.read().unwrap().snap.clone()
    }
    pub(crate) fn published(&self) -> Published {
        self.published.read().unwrap().clone()
    }

    pub(crate) fn check_open(&self) -> Result<()> {
        if self.closed.load(Relaxed) {
            return Err(MutError::Unavailable(format!("mutable graph {} is closed", self.root.display())));
        }
        Ok(())
    }

    fn check_writable(&self) -> Result<()> {
        self.check_open()?;
        self.check_not_read_only()
    }

    /// Refuse writes to a graph opened read-only.
    pub(crate) fn check_not_read_only(&self) -> Result<()> {
        if !self.writable {
            return Err(MutError::Unavailable(format!(
                "mutable graph {} was opened read-only (writable=False)",
                self.root.display()
            )));
        }
        Ok(())
    }

    /// Encode an embedding for this graph's feature width and dtype.
    pub fn encode_embed(&self, embed: &[f64]) -> Result<Vec<u8>> {
        Ok(self.snapshot().delta.encode_row(embed)?)
    }

    /// Validate, log durably (group commit) and apply one atomic batch.
    /// Returns per-op results: the new id for `AddVertex`, else None.
    pub fn apply(&self, mut ops: Vec<Op>) -> Result<Vec<Option<u64>>> {
        let n = ops.len();
        check_batch_len(n)?;
        self.check_writable()?;
        if ops.is_empty() {
            return Ok(Vec::new());
        }
        let seq = {
            let mut head = self.head.lock().unwrap();
            self.check_open()?; // close() may have run while this waited for `head`
            self.settle(&mut head, &mut self.queue.lock().unwrap());
            let mut delta = head.delta.clone();
            let results = match delta.apply_batch(&head.base, &mut ops) {
                Ok(r) => r,
                Err((i, e)) => {
                    let e = MutError::from(e);
                    return Err(match e {
                        MutError::Invalid(m) if n > 1 => MutError::Invalid(format!("ops[{i}]: {m}")),
                        e => e,
                    });
                }
            };
            let seq = head.next_seq;
            let mut frame = Vec::new();
            wal::encode_frame(seq, &ops, &mut frame)?;
            let snap =
                Arc::new(Snapshot { base: head.base.clone(), delta: delta.clone(), generation: head.generation, seq });
            let epoch = {
                let mut q = self.queue.lock().unwrap();
                if let Some(f) = &q.failed {
                    return Err(MutError::Unavailable(format!(
                        "mutable graph {} refuses writes after a log failure: {f}; reopen it",
                        self.root.display()
                    )));
                }
                if q.rolled_back {
                    // A rollback came while this batch was validated on the state it undid.
                    self.settle(&mut head, &mut q);
                    return Err(refused_for_space(&q.refused));
                }
                q.pending.push(Pending { seq, frame, snap, ops: n as u64 });
                q.epochs
            };
            head.next_seq += 1;
            head.delta = delta;
            drop(head);
            // Results of this batch: computed above, returned once durable.
            (seq, epoch, results)
        };
        let (seq, epoch, results) = seq;
        self.commit_wait(seq, epoch)?;
        Ok(results)
    }

    /// Wait until frame `seq` (queued in `epoch`) is durable, leading a
    /// group commit when no other writer is.
    fn commit_wait(&self, seq: u64, epoch: u64) -> Result<()> {
        let mut q = self.queue.lock().unwrap();
        loop {
            if epoch < q.epochs {
                // A rollback ended this frame's epoch: durable if it was by then.
                let run = q.epoch_end.partition_point(|&(first, _)| first <= epoch) - 1;
                if seq <= q.epoch_end[run].1 {
                    return Ok(());
                }
                return Err(refused_for_space(&q.refused));
            }
            if q.durable_seq >= seq {
                return Ok(());
            }
            if let Some(f) = &q.failed {
                return Err(MutError::Unavailable(format!(
                    "write not acknowledged: the log failed ({f}); reopen {} to see what is durable",
                    self.root.display()
                )));
            }
            if q.leader {
                q = self.cond.wait(q).unwrap();
                continue;
            }
            if q.wal.is_none() {
                return Err(MutError::Unavailable(format!("mutable graph {} is closed", self.root.display())));
            }
            q.leader = true;
            if self.wait_us > 0 {
                drop(q);
                std::thread::sleep(Duration::from_micros(self.wait_us));
                q = self.queue.lock().unwrap();
            }
            let take = q.pending.len().min(wal::GROUP_MAX_FRAMES);
            let group: Vec<Pending> = q.pending.drain(..take).collect();
            let mut wal = q.wal.take().expect("a writable graph holds its log");
            drop(q);
            let write_us = unix_us();
            let r = if group.len() == 1 {
                wal.append_sync(&group[0].frame)
            } else {
                let mut buf = Vec::with_capacity(group.iter().map(|p| p.frame.len()).sum());
                for (i, p) in group.iter().enumerate() {
                    let at = buf.len();
                    buf.extend_from_slice(&p.frame);
                    wal::set_group_index(&mut buf[at..], i as u32);
                }
                wal.append_sync(&buf)
            };
            let wal_end = wal.len();
            if let Err(e) = &r {
                if wal::out_of_space(e) {
                    q = self.roll_back(wal, e);
                    self.stats.last_space_refusal_write_us.store(write_us, Relaxed);
                    self.stats.last_space_refusal_rolled_back_us.store(unix_us(), Relaxed);
                    self.cond.notify_all();
                    continue;
                }
            }
            q = self.queue.lock().unwrap();
            q.wal = Some(wal);
            q.leader = false;
            match r {
                Ok(()) => {
                    let last = group.last().expect("a leader's own frame is queued");
                    q.durable_seq = last.seq;
                    *self.published.write().unwrap() = Published { snap: last.snap.clone(), wal_end };
                    self.stats.fsyncs.fetch_add(1, Relaxed);
                    self.stats.frames.fetch_add(group.len() as u64, Relaxed);
                    self.stats.ops.fetch_add(group.iter().map(|p| p.ops).sum(), Relaxed);
                    self.stats.wal_bytes_written.fetch_add(group.iter().map(|p| p.frame.len() as u64).sum(), Relaxed);
                }
                Err(e) => q.failed = Some(e.to_string()),
            }
            self.cond.notify_all();
        }
    }

    /// After a log write refused for space (module docs): cut the log back to
    /// its durable end, fail every queued frame and start a new epoch; `head`
    /// is reset by the next holder of it ([`MutableGraph::settle`]): the
    /// leader cannot take `head` here (lock order; a compaction may hold it
    /// waiting for this group). Called by the leader, which still holds the
    /// log (no other leader can start); returns the queue locked, with the
    /// leader's role given up.
    fn roll_back(&self, mut wal: WalFile, e: &MutError) -> std::sync::MutexGuard<'_, Queue> {
        let cut = wal.discard_tail();
        let mut q = self.queue.lock().unwrap();
        match cut {
            Ok(()) => {
                let (end, epoch) = (q.durable_seq, q.epochs);
                if q.epoch_end.last().is_none_or(|&(_, e)| e != end) {
                    q.epoch_end.push((epoch, end));
                }
                q.epochs += 1;
                let errno = match e {
                    MutError::Io(io) => io.source.raw_os_error().unwrap_or(libc::ENOSPC),
                    _ => libc::ENOSPC,
                };
                q.refused = (wal.path().display().to_string(), errno);
                q.pending.clear(); // each was validated on top of the group not written
                q.rolled_back = true;
                self.stats.log_space_rollbacks.fetch_add(1, Relaxed);
            }
            Err(t) => q.failed = Some(format!("{e}; then cutting the log back failed: {t}")),
        }
        q.wal = Some(wal);
        q.leader = false;
        q
    }

    /// Reset `head` to the durable snapshot after a rollback (the caller
    /// holds `head` and the queue, in that order).
    fn settle(&self, head: &mut Head, q: &mut Queue) {
        if q.rolled_back {
            let p = self.published();
            head.base = p.snap.base.clone();
            head.delta = p.snap.delta.clone();
            head.generation = p.snap.generation;
            head.next_seq = p.snap.seq + 1;
            q.rolled_back = false;
        }
    }

    /// Wait until no frame is queued or being written (the caller holds
    /// `head`, so none can be added); returns the queue locked.
    pub(crate) fn quiesce(&self, head: &mut Head) -> Result<std::sync::MutexGuard<'_, Queue>> {
        let mut q = self.wait_idle();
        if let Some(f) = &q.failed {
            return Err(MutError::Unavailable(format!("the log failed earlier ({f}); reopen {}", self.root.display())));
        }
        self.settle(head, &mut q);
        Ok(q)
    }

    /// Wait until no group commit is in flight and no frame is queued (or
    /// the log failed, so queued frames will never be written); returns the
    /// queue locked.
    fn wait_idle(&self) -> std::sync::MutexGuard<'_, Queue> {
        let mut q = self.queue.lock().unwrap();
        while q.leader || (!q.pending.is_empty() && q.failed.is_none()) {
            q = self.cond.wait(q).unwrap();
        }
        q
    }

    pub fn add_vertex(&self, embed: &[f64]) -> Result<u64> {
        let row = self.encode_embed(embed)?;
        let r = self.apply(vec![Op::AddVertex { id: None, row }])?;
        Ok(r[0].expect("add_vertex returns its id"))
    }
    pub fn delete_vertex(&self, vid: u64) -> Result<()> {
        self.apply(vec![Op::DeleteVertex { vid }]).map(|_| ())
    }
    pub fn add_edge(&self, dst: u64, src: u64) -> Result<()> {
        self.apply(vec![Op::AddEdge { dst, src }]).map(|_| ())
    }
    pub fn delete_edge(&self, dst: u64, src: u64) -> Result<()> {
        self.apply(vec![Op::DeleteEdge { dst, src }]).map(|_| ())
    }
    pub fn update_embed(&self, vid: u64, embed: &[f64]) -> Result<()> {
        let row = self.encode_embed(embed)?;
        self.apply(vec![Op::UpdateEmbed { vid, row }]).map(|_| ())
    }

    /// Neighbors (original ids) of live vertex `vid` in the durable state.
    pub fn get_neighbors(&self, vid: i64) -> Result<Vec<u64>> {
        self.check_open()?;
        Ok(self.snapshot().neighbors(vid)?)
    }
    /// Feature row (stored dtype bytes) of live vertex `vid`.
    pub fn get_embed(&self, vid: i64) -> Result<Vec<u8>> {
        self.check_open()?;
        Ok(self.snapshot().embed(vid)?)
    }

    pub fn num_nodes(&self) -> u64 {
        self.snapshot().num_nodes()
    }
    pub fn feature_dim(&self) -> u32 {
        self.snapshot().delta.feature_dim()
    }
    pub fn feature_dtype(&self) -> flashgnn_format::Dtype {
        self.snapshot().delta.feature_dtype()
    }
    pub fn generation(&self) -> u64 {
        self.snapshot().generation
    }
    /// Last durable batch sequence number.
    pub fn seq(&self) -> u64 {
        self.snapshot().seq
    }
    /// Bytes in the current log (header and durable frames).
    pub fn wal_bytes(&self) -> u64 {
        self.published.read().unwrap().wal_end
    }

    /// Counters and sizes (`MutableGraph.stats()`, the server's graph
    /// stats): operations, frames and fsyncs since open, the log, the delta
    /// and the current snapshot, and what the open replayed and removed.
    pub fn stats_report(&self) -> serde_json::Value {
        let st = &self.stats;
        let snap = self.snapshot();
        let (ops, fsyncs) = (st.ops.load(Relaxed), st.fsyncs.load(Relaxed));
        let rep = &self.open_report.replay;
        serde_json::json!({
            "ops": ops, "frames": st.frames.load(Relaxed), "fsyncs": fsyncs,
            "ops_per_fsync": if fsyncs > 0 { ops as f64 / fsyncs as f64 } else { 0.0 },
            "wal_bytes_written": st.wal_bytes_written.load(Relaxed),
            "wal_bytes": self.wal_bytes(),
            "log_space_rollbacks": st.log_space_rollbacks.load(Relaxed),
            "last_space_refusal": match st.last_space_refusal_write_us.load(Relaxed) {
                0 => serde_json::Value::Null,
                w => serde_json::json!({
                    "write_at": w as f64 * 1e-6,
                    "rolled_back_at": st.last_space_refusal_rolled_back_us.load(Relaxed) as f64 * 1e-6,
                }),
            },
            "delta_nodes": snap.delta.len(), "delta_bytes": snap.delta.heap_bytes(),
            "free_ids": snap.delta.free_len(),
            "num_nodes": snap.num_nodes(), "num_edges": snap.delta.num_edges(&snap.base),
            "generation": snap.generation, "seq": snap.seq,
            "replayed_frames": rep.frames, "replayed_ops": rep.ops, "torn_tail_bytes": rep.torn_bytes,
            "torn_group_frames": rep.torn_group_frames, "wal_version_found": rep.version,
            "leftovers_removed": self.open_report.removed,
        })
    }

    /// Stop accepting operations once everything queued is durable.
    pub fn close(&self) -> Result<()> {
        if self.closed.swap(true, Relaxed) {
            return Ok(());
        }
        if self.writable {
            let head = self.head.lock().unwrap();
            let mut q = self.wait_idle();
            q.wal = None;
            drop(q);
            drop(head);
            // Nothing more is logged: let the next writer in, unless a
            // compaction is still running (it holds `compact_lock` and may
            // still switch generations); then the lock goes with the last
            // reference to this graph (the compaction job holds one).
            if let Ok(_c) = self.compact_lock.try_lock() {
                self.lock.lock().unwrap_or_else(|p| p.into_inner()).take();
            }
        }
        Ok(())
    }
}

/// The error of a write whose frame was failed by a rollback after a log
/// write refused for space (module docs): an `IoError` with that errno, so
/// callers see a full file system (the server: RESOURCE_EXHAUSTED).
fn refused_for_space((path, errno): &(String, i32)) -> MutError {
    MutError::Io(flashgnn_io::IoError::new(
        "not acknowledged (the log was cut back to its durable end; writes resume once space is free): writing",
        path,
        None,
        std::io::Error::from_raw_os_error(*errno),
    ))
}
