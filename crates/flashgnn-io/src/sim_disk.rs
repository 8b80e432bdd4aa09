//! [`SimDisk`]: a simulated disk that knows which written bytes and which
//! directory entries are durable, and produces the state a power loss
//! could leave, chosen by a seed (feature `sim-disk`; tests only).
//!
//! The real file system still does every operation (so every read, and
//! every path the simulation does not model, behaves as in production); the
//! simulation *records* each write, truncation, create, rename, unlink and
//! fsync made through a [`crate::Disk::Sim`] handle, in order, and keeps a
//! model of the tree under its root in which
//!
//! - a file has durable contents plus a list of un-synced operations
//!   (`write(offset, bytes)`, `set_len(len)`); `fsync`/`fdatasync` of the
//!   file makes them durable;
//! - a directory has durable entries plus a list of un-synced entry
//!   operations (create, mkdir, rename, unlink); `fsync` of the directory
//!   makes them durable. A new file's data can be durable while its name is
//!   not (the file is then lost with its name);
//! - what existed under the root when the simulation started is durable.
//!
//! [`Model::crash`] turns the model into the durable state after a power
//! loss: each un-synced file operation is kept, dropped or torn (a write
//! keeps a random subset of its 512-byte sectors, sector boundaries counted
//! in file offsets), and each directory keeps a prefix of its un-synced
//! entry operations (a journal commits them in order; a later one never
//! survives without the earlier ones of the same directory — ext4, xfs and
//! btrfs all log directory operations in order). Every seed picks one of
//! three styles: drop everything un-synced, keep everything (the page cache
//! as a process kill leaves it), or choose per operation. The same seed on
//! the same history gives the same state.
//!
//! Not modelled: renames across directories (refused: the code under test
//! renames only within a directory), hard links, reordering of an
//! operation before an fsync that returned (fsync is a barrier), and
//! metadata other than names and lengths. The history is a list of
//! [`SimOp`]s, so a test replays it into a fresh [`Model`] and crashes it at
//! every prefix (every crash point) without rerunning the workload.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;

use rand::{RngExt, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

/// Sector size of torn writes: a write persists in whole 512-byte sectors
/// (the atomic unit every disk guarantees; 4 KiB-sector devices tear less).
pub const SECTOR_BYTES: u64 = 512;

/// One recorded operation, with paths relative to the simulation's root.
#[derive(Debug, Clone, PartialEq)]
pub enum SimOp {
    /// Create an empty file (or truncate an existing one to 0, as `O_TRUNC`).
    Create(PathBuf),
    Mkdir(PathBuf),
    Write(PathBuf, u64, Vec<u8>),
    SetLen(PathBuf, u64),
    /// `fsync`/`fdatasync` of a file, or `fsync` of a directory.
    Fsync(PathBuf),
    /// Rename within one directory (replacing what the target named).
    Rename(PathBuf, PathBuf),
    /// Swap two names of one directory (`RENAME_EXCHANGE`), atomically.
    Exchange(PathBuf, PathBuf),
    /// Remove a file, or an empty directory.
    Unlink(PathBuf),
}

type Ino = usize;

#[derive(Debug, Clone)]
enum FileOp {
    Write(u64, Vec<u8>),
    SetLen(u64),
}

#[derive(Debug, Clone)]
enum DirOp {
    Link(String, Ino),
    Unlink(String),
    Rename(String, String),
    Exchange(String, String),
}

impl DirOp {
    /// This operation applied to directory entries `e` (the live ones, or
    /// a crash state's durable ones plus a kept prefix).
    fn apply(&self, e: &mut BTreeMap<String, Ino>) {
        match self {
            DirOp::Link(n, i) => {
                e.insert(n.clone(), *i);
            }
            DirOp::Unlink(n) => {
                e.remove(n);
            }
            DirOp::Rename(a, b) => {
                if let Some(i) = e.remove(a) {
                    e.insert(b.clone(), i);
                }
            }
            DirOp::Exchange(a, b) => {
                if let (Some(&i), Some(&j)) = (e.get(a), e.get(b)) {
                    e.insert(a.clone(), j);
                    e.insert(b.clone(), i);
                }
            }
        }
    }
}

#[derive(Debug, Clone)]
enum Node {
    File { durable: Vec<u8>, live: Vec<u8>, pending: Vec<FileOp> },
    Dir { durable: BTreeMap<String, Ino>, live: BTreeMap<String, Ino>, pending: Vec<DirOp> },
}

/// A crash state: every path under the root (relative) with its contents,
/// None for a directory.
pub type CrashState = BTreeMap<PathBuf, Option<Vec<u8>>>;

/// The simulated tree: what a reader sees now (`live`) and what is durable.
#[derive(Debug, Clone)]
pub struct Model {
    nodes: Vec<Node>,
}

const ROOT: Ino = 0;

fn err(msg: String) -> std::io::Error {
    std::io::Error::other(format!("simulated disk: {msg}"))
}

fn write_into(buf: &mut Vec<u8>, at: u64, data: &[u8]) {
    let (at, end) = (at as usize, at as usize + data.len());
    if buf.len() < end {
        buf.resize(end, 0);
    }
    buf[at..end].copy_from_slice(data);
}

impl Model {
    /// The tree under `root` as it is on the real file system, all durable.
    pub fn adopt(root: &Path) -> std::io::Result<Model> {
        let mut m =
            Model { nodes: vec![Node::Dir { durable: BTreeMap::new(), live: BTreeMap::new(), pending: vec![] }] };
        m.adopt_dir(ROOT, root)?;
        Ok(m)
    }

    fn adopt_dir(&mut self, ino: Ino, dir: &Path) -> std::io::Result<()> {
        let mut entries: Vec<_> = std::fs::read_dir(dir)?.collect::<std::io::Result<_>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let name = e.file_name().to_string_lossy().into_owned();
            let t = e.file_type()?;
            let child = self.nodes.len();
            if t.is_dir() {
                self.nodes.push(Node::Dir { durable: BTreeMap::new(), live: BTreeMap::new(), pending: vec![] });
                self.adopt_dir(child, &e.path())?;
            } else if t.is_file() {
                let b = std::fs::read(e.path())?;
                self.nodes.push(Node::File { durable: b.clone(), live: b, pending: vec![] });
            } else {
                continue; // links, FIFOs: not modelled
            }
            if let Node::Dir { durable, live, .. } = &mut self.nodes[ino] {
                durable.insert(name.clone(), child);
                live.insert(name, child);
            }
        }
        Ok(())
    }

    /// Resolve `rel` in the live tree.
    fn lookup(&self, rel: &Path) -> Option<Ino> {
        let mut ino = ROOT;
        for c in rel.components() {
            let Component::Normal(n) = c else { return None };
            match &self.nodes[ino] {
                Node::Dir { live, .. } => ino = *live.get(n.to_str()?)?,
                Node::File { .. } => return None,
            }
        }
        Some(ino)
    }

    /// (parent directory inode, name) of `rel` in the live tree.
    fn parent_of(&self, rel: &Path) -> std::io::Result<(Ino, String)> {
        let name = rel.file_name().and_then(|n| n.to_str()).ok_or_else(|| err(format!("no file name in {rel:?}")))?;
        let parent = rel.parent().unwrap_or(Path::new(""));
        match self.lookup(parent) {
            Some(p) if matches!(self.nodes[p], Node::Dir { .. }) => Ok((p, name.to_string())),
            _ => Err(err(format!("parent of {rel:?} is not a directory in the model"))),
        }
    }

    fn dir_op(&mut self, dir: Ino, op: DirOp) {
        if let Node::Dir { live, pending, .. } = &mut self.nodes[dir] {
            op.apply(live);
            pending.push(op);
        }
    }

    fn file_op(&mut self, ino: Ino, op: FileOp) -> std::io::Result<()> {
        let Node::File { live, pending, .. } = &mut self.nodes[ino] else {
            return Err(err(format!("inode {ino} is a directory, not a file")));
        };
        match &op {
            FileOp::Write(at, d) => write_into(live, *at, d),
            FileOp::SetLen(n) => live.resize(*n as usize, 0),
        }
        pending.push(op);
        Ok(())
    }

    /// Add `node` under the new name `p` (an un-synced link in its parent);
    /// returns its index.
    fn link_new(&mut self, p: &Path, node: Node) -> std::io::Result<usize> {
        let (dir, name) = self.parent_of(p)?;
        let i = self.nodes.len();
        self.nodes.push(node);
        self.dir_op(dir, DirOp::Link(name, i));
        Ok(i)
    }

    /// Apply one recorded operation to the live tree.
    pub fn apply(&mut self, op: &SimOp) -> std::io::Result<()> {
        let missing = |p: &Path| err(format!("{p:?} does not exist in the model"));
        match op {
            SimOp::Create(p) => match self.lookup(p) {
                Some(i) => self.file_op(i, FileOp::SetLen(0))?,
                None => {
                    self.link_new(p, Node::File { durable: vec![], live: vec![], pending: vec![] })?;
                }
            },
            SimOp::Mkdir(p) => {
                if self.lookup(p).is_some() {
                    return Err(err(format!("mkdir {p:?}: exists")));
                }
                self.link_new(p, Node::Dir { durable: BTreeMap::new(), live: BTreeMap::new(), pending: vec![] })?;
            }
            SimOp::Write(p, at, d) => {
                let i = self.lookup(p).ok_or_else(|| missing(p))?;
                self.file_op(i, FileOp::Write(*at, d.clone()))?;
            }
            SimOp::SetLen(p, n) => {
                let i = self.lookup(p).ok_or_else(|| missing(p))?;
                self.file_op(i, FileOp::SetLen(*n))?;
            }
            SimOp::Fsync(p) => {
                let i = self.lookup(p).ok_or_else(|| missing(p))?;
                match &mut self.nodes[i] {
                    Node::File { durable, live, pending } => {
                        *durable = live.clone();
                        pending.clear();
                    }
                    Node::Dir { durable, live, pending } => {
                        *durable = live.clone();
                        pending.clear();
                    }
                }
            }
            SimOp::Rename(a, b) | SimOp::Exchange(a, b) => {
                let swap = matches!(op, SimOp::Exchange(..));
                self.lookup(a).ok_or_else(|| missing(a))?;
                if swap {
                    self.lookup(b).ok_or_else(|| missing(b))?;
                }
                let (da, na) = self.parent_of(a)?;
                let (db, nb) = self.parent_of(b)?;
                if da != db {
                    let what = if swap { "exchange" } else { "rename" };
                    return Err(err(format!("{what} {a:?} -> {b:?} crosses directories (not modelled)")));
                }
                self.dir_op(da, if swap { DirOp::Exchange(na, nb) } else { DirOp::Rename(na, nb) });
            }
            SimOp::Unlink(p) => {
                let i = self.lookup(p).ok_or_else(|| missing(p))?;
                if matches!(&self.nodes[i], Node::Dir { live, .. } if !live.is_empty()) {
                    return Err(err(format!("unlink {p:?}: directory not empty in the model")));
                }
                let (dir, name) = self.parent_of(p)?;
                self.dir_op(dir, DirOp::Unlink(name));
            }
        }
        Ok(())
    }

    /// Every path under `rel` in the live tree, children before parents
    /// (the order `remove_dir_all` unlinks them in).
    pub fn subtree_bottom_up(&self, rel: &Path) -> Vec<PathBuf> {
        let mut out = Vec::new();
        if let Some(i) = self.lookup(rel) {
            self.collect(i, rel, &mut out);
        }
        out
    }

    fn collect(&self, ino: Ino, rel: &Path, out: &mut Vec<PathBuf>) {
        if let Node::Dir { live, .. } = &self.nodes[ino] {
            for (n, &c) in live {
                self.collect(c, &rel.join(n), out);
            }
        }
        out.push(rel.to_path_buf());
    }

    /// Whether anything is not durable yet.
    pub fn unsynced(&self) -> bool {
        self.nodes.iter().any(|n| match n {
            Node::File { pending, .. } => !pending.is_empty(),
            Node::Dir { pending, .. } => !pending.is_empty(),
        })
    }

    /// The state a power loss now could leave, chosen by `seed` (see the
    /// module docs for the rules and the three styles).
    pub fn crash(&self, seed: u64) -> CrashState {
        let mut rng = Xoshiro256PlusPlus::seed_from_u64(seed);
        // 0: drop all un-synced, 1: keep all, 2: choose per operation.
        let style = seed % 3;
        let mut choose = |n: u32| -> u32 {
            match style {
                0 => 0,
                1 => n - 1,
                _ => rng.random_range(0..n),
            }
        };
        // Files first, in inode order (deterministic), then directories.
        let mut files: Vec<Option<Vec<u8>>> = vec![None; self.nodes.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            if let Node::File { durable, pending, .. } = n {
                let mut b = durable.clone();
                for op in pending {
                    match op {
                        // 0 drop, 1 tear, 2 keep.
                        FileOp::Write(at, d) => match choose(3) {
                            0 => {}
                            2 => write_into(&mut b, *at, d),
                            _ => {
                                let end = at + d.len() as u64;
                                let mut s = *at;
                                while s < end {
                                    let e = ((s / SECTOR_BYTES + 1) * SECTOR_BYTES).min(end);
                                    if choose(2) == 1 {
                                        write_into(&mut b, s, &d[(s - at) as usize..(e - at) as usize]);
                                    }
                                    s = e;
                                }
                            }
                        },
                        FileOp::SetLen(len) => {
                            if choose(2) == 1 {
                                b.resize(*len as usize, 0);
                            }
                        }
                    }
                }
                files[i] = Some(b);
            }
        }
        let mut dirs: Vec<Option<BTreeMap<String, Ino>>> = vec![None; self.nodes.len()];
        for (i, n) in self.nodes.iter().enumerate() {
            if let Node::Dir { durable, pending, .. } = n {
                let keep = choose(pending.len() as u32 + 1) as usize;
                let mut e = durable.clone();
                for op in &pending[..keep] {
                    op.apply(&mut e);
                }
                dirs[i] = Some(e);
            }
        }
        let mut out = CrashState::new();
        // Walk from the root; a node reached twice (a directory whose unlink
        // survived in one place and link in another) is listed where found.
        let mut stack = vec![(ROOT, PathBuf::new())];
        while let Some((i, p)) = stack.pop() {
            if let Some(e) = &dirs[i] {
                if i != ROOT {
                    out.insert(p.clone(), None);
                }
                for (n, &c) in e {
                    stack.push((c, p.join(n)));
                }
            } else if let Some(b) = &files[i] {
                out.insert(p, Some(b.clone()));
            }
        }
        out
    }
}

/// The tree under `dir` on the real file system, parents first (what a
/// test compares a crash state or a replayed history with).
pub fn read_tree(dir: &Path) -> std::io::Result<Vec<(PathBuf, Option<Vec<u8>>)>> {
    let mut out = Vec::new();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let mut entries: Vec<_> = std::fs::read_dir(dir.join(&rel))?.collect::<std::io::Result<_>>()?;
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            let r = rel.join(e.file_name());
            let t = e.file_type()?;
            if t.is_dir() {
                out.push((r.clone(), None));
                stack.push(r);
            } else if t.is_file() {
                out.push((r, Some(std::fs::read(e.path())?)));
            }
        }
    }
    Ok(out)
}

/// Write `state` under `dir` (which must exist): the crashed disk as a tree
/// the real code can open.
pub fn materialise(state: &CrashState, dir: &Path) -> std::io::Result<()> {
    // BTreeMap order puts a directory before everything inside it.
    for (p, c) in state {
        let at = dir.join(p);
        match c {
            None => std::fs::create_dir_all(&at)?,
            Some(b) => std::fs::write(&at, b)?,
        }
    }
    Ok(())
}

/// The simulation: a root, the model of the tree under it at the start, and
/// the history of operations made through it since.
#[derive(Debug)]
pub struct SimDisk {
    root: PathBuf,
    initial: Model,
    /// (live model, history), under one lock so the history's order is the
    /// order in which the operations reached the model.
    state: Mutex<(Model, Vec<SimOp>)>,
    /// An injected failure (once), before the operation is made.
    fail: Mutex<Option<Fail>>,
}

/// Which file operation fails: the one that would be recorded as operation
/// `k`, or the next one of a kind (`"writing"`, `"fdatasync"`, ...: the
/// operation's name in its error) on a path containing a string.
#[derive(Debug, Clone)]
enum Fail {
    At(usize, i32),
    Next { what: &'static str, path: String, errno: i32 },
}

impl SimDisk {
    /// Simulate the tree under `root` (everything there now is durable).
    pub fn new(root: &Path) -> std::io::Result<SimDisk> {
        let root = std::fs::canonicalize(root)?;
        let initial = Model::adopt(&root)?;
        Ok(SimDisk { root, state: Mutex::new((initial.clone(), Vec::new())), initial, fail: Mutex::new(None) })
    }

    /// Make the file operation (create, write, truncation, fsync, rename)
    /// that would be recorded as operation `k` fail with `errno`, once,
    /// before it reaches the file: a device error at a chosen point. Where
    /// threads make operations at once, it is the first one checked after
    /// `k` were recorded (maybe a later one). The failed operation is
    /// not recorded, so the model keeps what the device still holds: a
    /// failed write wrote nothing, a failed fsync made nothing durable (what
    /// Linux promises after an fsync error is less; assuming no more is the
    /// safe side).
    pub fn fail_at(&self, k: usize, errno: i32) {
        *self.fail.lock().unwrap_or_else(|p| p.into_inner()) = Some(Fail::At(k, errno));
    }

    /// Make the next operation `what` (`"writing"`, `"fdatasync"`, ...) on a
    /// path containing `path` fail with `errno`, once: a point chosen by
    /// kind where threads make the order of operations vary.
    pub fn fail_next(&self, what: &'static str, path: &str, errno: i32) {
        *self.fail.lock().unwrap_or_else(|p| p.into_inner()) = Some(Fail::Next { what, path: path.to_string(), errno });
    }

    /// The injected error of the file operation `what` on `path` about to be
    /// made, if [`fail_at`](Self::fail_at) or [`fail_next`](Self::fail_next)
    /// chose it.
    pub fn injected(&self, path: &Path, what: &str) -> std::io::Result<()> {
        let mut f = self.fail.lock().unwrap_or_else(|p| p.into_inner());
        let errno = match &*f {
            Some(_) if self.relative(path).is_none() => None,
            // `>=`: where threads check and record in between each other,
            // none may check at exactly k operations.
            Some(Fail::At(k, errno)) => (self.ops() >= *k).then_some(*errno),
            Some(Fail::Next { what: w, path: p, errno }) => {
                (*w == what && path.to_string_lossy().contains(p.as_str())).then_some(*errno)
            }
            None => None,
        };
        match errno {
            Some(e) => {
                *f = None;
                Err(std::io::Error::from_raw_os_error(e))
            }
            None => Ok(()),
        }
    }

    pub fn root(&self) -> &Path {
        &self.root
    }

    /// `path` relative to the root, or None when it is outside (then not
    /// modelled: the operation happens on the real file system only).
    pub fn relative(&self, path: &Path) -> Option<PathBuf> {
        let abs = if path.is_absolute() { path.to_path_buf() } else { std::env::current_dir().ok()?.join(path) };
        // The file may not exist yet: canonicalize its parent.
        let parent = std::fs::canonicalize(abs.parent()?).ok()?;
        let full = parent.join(abs.file_name()?);
        full.strip_prefix(&self.root).ok().map(Path::to_path_buf)
    }

    /// Record `op` (paths already relative); an error when the model cannot
    /// follow it (the model and the code disagree — a bug in one of them).
    pub fn record(&self, op: SimOp) -> std::io::Result<()> {
        let mut s = self.state.lock().unwrap_or_else(|p| p.into_inner());
        s.0.apply(&op)?;
        s.1.push(op);
        Ok(())
    }

    /// Paths under `rel`, children first, in the live model.
    pub fn subtree_bottom_up(&self, rel: &Path) -> Vec<PathBuf> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).0.subtree_bottom_up(rel)
    }

    /// Operations recorded so far: crash point `k` is "after the first `k`".
    pub fn ops(&self) -> usize {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).1.len()
    }

    /// The recorded history.
    pub fn history(&self) -> Vec<SimOp> {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).1.clone()
    }

    /// The model at the start (replay [`history`](Self::history) into it).
    pub fn initial(&self) -> Model {
        self.initial.clone()
    }

    /// The state a power loss now would leave, chosen by `seed`.
    pub fn crash(&self, seed: u64) -> CrashState {
        self.state.lock().unwrap_or_else(|p| p.into_inner()).0.crash(seed)
    }

    /// The state a power loss after the first `k` operations would leave.
    pub fn crash_at(&self, k: usize, seed: u64) -> std::io::Result<CrashState> {
        let mut m = self.initial();
        for op in &self.history()[..k] {
            m.apply(op)?;
        }
        Ok(m.crash(seed))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn p(s: &str) -> PathBuf {
        PathBuf::from(s)
    }

    #[test]
    fn unsynced_data_and_names_follow_the_rules() {
        // A file's data is durable after its fsync, its name after the
        // directory's fsync; style 0 drops everything un-synced, style 1
        // keeps it all, and a seed always gives the same state.
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("old"), b"durable").unwrap();
        let d = SimDisk::new(t.path()).unwrap();
        let ops = [
            SimOp::Mkdir(p("d")),
            SimOp::Fsync(p("")),
            SimOp::Create(p("d/a")),
            SimOp::Write(p("d/a"), 0, vec![7; 1500]),
            SimOp::Fsync(p("d/a")),
            SimOp::Create(p("d/b")),
            SimOp::Write(p("d/b"), 0, vec![9; 10]),
            SimOp::Write(p("old"), 0, b"CHANGED".to_vec()),
        ];
        for op in ops {
            d.record(op).unwrap();
        }
        let dropped = d.crash(0);
        assert_eq!(dropped.get(&p("old")), Some(&Some(b"durable".to_vec())));
        assert_eq!(dropped.get(&p("d")), Some(&None), "the mkdir was fsynced in the root");
        assert!(!dropped.contains_key(&p("d/a")), "d/a's data is durable but its name is not: {dropped:?}");
        let kept = d.crash(1);
        assert_eq!(kept.get(&p("d/a")), Some(&Some(vec![7; 1500])));
        assert_eq!(kept.get(&p("d/b")), Some(&Some(vec![9; 10])));
        assert_eq!(kept.get(&p("old")), Some(&Some(b"CHANGED".to_vec())));
        d.record(SimOp::Fsync(p("d"))).unwrap();
        let s = d.crash(3);
        assert_eq!(s.get(&p("d/a")), Some(&Some(vec![7; 1500])), "data and name durable");
        assert_eq!(s.get(&p("d/b")), Some(&Some(vec![])), "name durable, data not");
        for seed in 0..50 {
            assert_eq!(d.crash(seed), d.crash(seed), "seed {seed} replays");
            assert_eq!(d.crash_at(d.ops(), seed).unwrap(), d.crash(seed));
        }
    }

    #[test]
    fn torn_writes_keep_whole_sectors() {
        // An un-synced 4-sector write over durable zeros: every crash state
        // holds, per 512-byte sector, either all old or all new bytes, and
        // over 200 seeds both mixed and extreme states occur.
        let t = tempfile::tempdir().unwrap();
        std::fs::write(t.path().join("f"), vec![0u8; 2048]).unwrap();
        let d = SimDisk::new(t.path()).unwrap();
        d.record(SimOp::Write(p("f"), 0, vec![1; 2048])).unwrap();
        let mut seen = std::collections::BTreeSet::new();
        for seed in 0..200 {
            let b = d.crash(seed)[&p("f")].clone().unwrap();
            assert_eq!(b.len(), 2048);
            let mask: Vec<u8> = b
                .chunks(512)
                .map(|c| {
                    assert!(c.iter().all(|&x| x == c[0]), "seed {seed}: a sector mixes old and new bytes");
                    c[0]
                })
                .collect();
            seen.insert(mask);
        }
        assert!(seen.len() > 4, "only {} distinct sector patterns", seen.len());
        assert!(seen.contains(&vec![0; 4]) && seen.contains(&vec![1; 4]));
    }

    #[test]
    fn directory_operations_survive_in_order_and_renames_stay_in_one_directory() {
        // Creates and renames in one un-synced directory survive as a
        // prefix: "b" (renamed from "a") never appears without "a" having
        // been created; a rename across directories is refused by name.
        let t = tempfile::tempdir().unwrap();
        std::fs::create_dir(t.path().join("x")).unwrap();
        let d = SimDisk::new(t.path()).unwrap();
        d.record(SimOp::Create(p("a"))).unwrap();
        d.record(SimOp::Fsync(p("a"))).unwrap();
        d.record(SimOp::Rename(p("a"), p("b"))).unwrap();
        for seed in 0..60 {
            let s = d.crash(seed);
            assert!(!(s.contains_key(&p("a")) && s.contains_key(&p("b"))), "seed {seed}: {s:?}");
        }
        let e = d.record(SimOp::Rename(p("b"), p("x/b"))).unwrap_err().to_string();
        assert!(e.contains("crosses directories"), "{e}");
    }
}
