//! Batched positional reads behind one interface ([`ReadEngine`]), with the
//! seeds' comparison points as implementations:
//!
//! | engine | how | who does this |
//! |---|---|---|
//! | `uring` | io_uring, O_DIRECT, many reads in flight, batched submission | flashgnn |
//! | `pread` | synchronous O_DIRECT `pread`, one read at a time (`threads = 0`), or a pool of `threads` workers (the fallback when io_uring is blocked) | SmartSAGE(SW), Ginex |
//! | `mmap` | page faults through a mapping, `madvise(MADV_RANDOM)` unless `mmap-default` | PyG + `np.memmap` |
//! | `memory` | whole files in RAM | the DRAM oracle |
//!
//! Every request is sector aligned (offset and length multiples of 512), so
//! one buffer and one code path serve O_DIRECT and buffered engines alike.
//! Completions may arrive in any order; `tag` identifies them.
//!
//! Architecture invariant: an engine never returns a buffer with fewer valid
//! bytes than requested — short reads are continued, EINTR/EAGAIN retried,
//! and a read past the end of a file is an error naming file and offset.

use std::path::{Path, PathBuf};

use crate::aligned::AlignedBuf;
use crate::IoError;

/// One read request.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ReadReq {
    /// Index of the file in the engine's file table.
    pub file: u16,
    pub offset: u64,
    pub len: u32,
    /// Caller's identifier, returned with the completion.
    pub tag: u64,
}

/// A finished read: the buffer holds exactly `req.len` valid bytes.
pub struct Done {
    pub req: ReadReq,
    pub buf: AlignedBuf,
}

/// Counters every engine keeps (cumulative).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct IoCounters {
    pub reads: u64,
    pub bytes: u64,
    /// Sum over submissions of the reads in flight just after submitting
    /// (mean depth = depth_sum / reads).
    pub depth_sum: u64,
    /// Histogram of in-flight depth at submission, power-of-two buckets
    /// (bucket i counts depths in [2^i, 2^(i+1)), bucket 0 = depth 1).
    pub depth_hist: [u64; 16],
    /// Histogram of request sizes, power-of-two buckets from 512 B (bucket 0)
    /// to >= 8 MiB (bucket 14).
    pub size_hist: [u64; 15],
}

impl IoCounters {
    pub fn record(&mut self, len: u32, depth: usize) {
        self.reads += 1;
        self.bytes += len as u64;
        self.depth_sum += depth as u64;
        let d = (usize::BITS - depth.max(1).leading_zeros() - 1) as usize;
        self.depth_hist[d.min(15)] += 1;
        let s = (u32::BITS - (len.max(512) / 512).leading_zeros() - 1) as usize;
        self.size_hist[s.min(14)] += 1;
    }
}

pub trait ReadEngine: Send {
    fn name(&self) -> &'static str;
    /// Most reads this engine keeps in flight.
    fn depth(&self) -> usize;
    fn in_flight(&self) -> usize;
    /// Queue a read. The caller keeps `in_flight() < depth()`.
    fn submit(&mut self, req: ReadReq, buf: AlignedBuf) -> Result<(), IoError>;
    /// Push queued reads to the device and collect at least `min` completions
    /// (fewer only when nothing is in flight).
    fn complete(&mut self, min: usize, out: &mut Vec<Done>) -> Result<(), IoError>;
    fn counters(&self) -> &IoCounters;
    /// Path of file `i`, for messages.
    fn path(&self, file: u16) -> &Path;
    /// The whole of file `file` when this engine holds it in RAM (the
    /// `memory` engine): a caller may then take extents straight from it,
    /// with no buffer and no copy, instead of submitting reads; it counts
    /// them itself (`IoCounters::record`). None (every other engine, and
    /// wrappers such as fault injection and striping, which must see each
    /// read): submit reads.
    fn resident(&self, _file: u16) -> Option<std::sync::Arc<Vec<u8>>> {
        None
    }
}

/// Engine kinds accepted by `open_engine`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum EngineKind {
    Uring,
    Pread,
    PreadPool,
    Mmap,
    MmapDefault,
    Memory,
}

impl EngineKind {
    /// Every engine, in the order the docs and `--help` list them. The one
    /// list: the bindings export the names (`flashgnn._core.ENGINES`) and
    /// every Python list of engines derives from it.
    pub const ALL: [EngineKind; 6] = [
        EngineKind::Uring,
        EngineKind::Pread,
        EngineKind::PreadPool,
        EngineKind::Mmap,
        EngineKind::MmapDefault,
        EngineKind::Memory,
    ];

    pub fn parse(s: &str) -> Option<EngineKind> {
        EngineKind::ALL.into_iter().find(|k| k.name() == s)
    }
    pub fn name(self) -> &'static str {
        match self {
            EngineKind::Uring => "uring",
            EngineKind::Pread => "pread",
            EngineKind::PreadPool => "pread-pool",
            EngineKind::Mmap => "mmap",
            EngineKind::MmapDefault => "mmap-default",
            EngineKind::Memory => "memory",
        }
    }
}

/// Reads in flight for `uring` by default: the virtio disk of the
/// development machines saturates near 128, datacenter NVMe wants 1000s.
pub const DEFAULT_DEPTH: usize = 256;
/// Worker threads of `pread-pool` by default: each blocks in `pread`, so 64
/// keep 64 reads in flight.
pub const DEFAULT_POOL_THREADS: usize = 64;

/// Engine settings (named limits, TigerBeetle style).
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Reads in flight for `uring` ([`DEFAULT_DEPTH`]).
    pub depth: usize,
    /// Worker threads of `pread-pool` ([`DEFAULT_POOL_THREADS`]).
    pub pool_threads: usize,
    /// Test knob: cap every system-call read at this many bytes, forcing the
    /// short-read continuation paths of `uring` and `pread` to run for real.
    pub max_read_bytes: Option<u32>,
    /// Test knob: inject faults (see [`FaultPlan`]).
    pub fault: Option<FaultPlan>,
}

/// Injected faults for tests: read number `fail_at` (0-based, and every
/// later one when `forever`) fails with `errno`; every completion is delayed
/// by `delay_us`.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FaultPlan {
    pub fail_at: u64,
    pub forever: bool,
    pub errno: i32,
    pub delay_us: u64,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig { depth: DEFAULT_DEPTH, pool_threads: DEFAULT_POOL_THREADS, max_read_bytes: None, fault: None }
    }
}

/// Open an engine over `files`. `Uring` falls back to `PreadPool` with a
/// one-line notice on stderr when the kernel or a container blocks io_uring.
pub fn open_engine(kind: EngineKind, files: &[PathBuf], cfg: &EngineConfig) -> Result<Box<dyn ReadEngine>, IoError> {
    let e = open_plain(kind, files, cfg)?;
    // FLASHGNN_FAULT_READ (crate::fault): a bad range, checked on every read, besides the test plan.
    let plan = match (cfg.fault, crate::fault::bad_range()) {
        (Some(p), _) => p,
        (None, Some(_)) => FaultPlan { fail_at: u64::MAX, forever: false, errno: libc::EIO, delay_us: 0 },
        (None, None) => return Ok(e),
    };
    Ok(Box::new(FaultEngine { inner: e, plan, submitted: 0, failed: None, ready: Vec::new() }))
}

fn open_plain(kind: EngineKind, files: &[PathBuf], cfg: &EngineConfig) -> Result<Box<dyn ReadEngine>, IoError> {
    let cap = cfg.max_read_bytes.unwrap_or(u32::MAX).max(512);
    Ok(match kind {
        EngineKind::Uring => match uring_or_blocked(files, cfg.depth, cap) {
            Ok(e) => Box::new(e),
            Err(e) if e.op == "io_uring_setup" => {
                eprintln!("flashgnn: io_uring unavailable ({}); using the pread thread pool", e.source);
                Box::new(crate::pool::PreadEngine::open(files, cfg.pool_threads, cap)?)
            }
            Err(e) => return Err(e),
        },
        EngineKind::Pread => Box::new(crate::pool::PreadEngine::open(files, 0, cap)?),
        EngineKind::PreadPool => Box::new(crate::pool::PreadEngine::open(files, cfg.pool_threads, cap)?),
        EngineKind::Mmap => Box::new(crate::mapped::MappedEngine::open(files, crate::mapped::Mode::MmapRandom)?),
        EngineKind::MmapDefault => {
            Box::new(crate::mapped::MappedEngine::open(files, crate::mapped::Mode::MmapDefault)?)
        }
        EngineKind::Memory => Box::new(crate::mapped::MappedEngine::open(files, crate::mapped::Mode::Memory)?),
    })
}

/// `FLASHGNN_DISABLE_URING=1` makes io_uring look blocked (as in containers
/// whose seccomp profile refuses `io_uring_setup`), to exercise the fallback.
fn uring_or_blocked(files: &[PathBuf], depth: usize, cap: u32) -> Result<crate::uring::UringEngine, IoError> {
    if std::env::var_os("FLASHGNN_DISABLE_URING").is_some_and(|v| v == "1") {
        let p = files.first().map(|p| p.as_path()).unwrap_or(Path::new(""));
        return Err(IoError::new("io_uring_setup", p, None, std::io::Error::from_raw_os_error(libc::EPERM)));
    }
    crate::uring::UringEngine::open(files, depth, cap)
}

/// Open a file for direct I/O, falling back to buffered I/O where the file
/// system refuses O_DIRECT (tmpfs), so tests run anywhere.
pub fn open_direct(path: &Path) -> Result<(std::fs::File, bool), IoError> {
    match crate::regular::open_regular_with(path, std::fs::OpenOptions::new().read(true), libc::O_DIRECT) {
        Ok(f) => Ok((f, true)),
        Err(e) if e.source.raw_os_error() == Some(libc::EINVAL) => Ok((crate::regular::open_regular(path)?, false)),
        Err(e) => Err(e),
    }
}

/// Create (truncate) a file for O_DIRECT writes, falling back to buffered
/// writes where the file system refuses O_DIRECT; the bool says which.
pub fn create_direct(path: &Path) -> Result<(std::fs::File, bool), IoError> {
    let mut o = std::fs::OpenOptions::new();
    o.write(true).create(true).truncate(true);
    match crate::regular::open_regular_with(path, &o, libc::O_DIRECT) {
        Ok(f) => Ok((f, true)),
        Err(e) if e.source.raw_os_error() == Some(libc::EINVAL) => {
            Ok((std::fs::File::create(path).map_err(|e| IoError::new("creating", path, None, e))?, false))
        }
        Err(e) => Err(e),
    }
}

/// Turn O_DIRECT off on an open file (before an unaligned write: a file's
/// last, partial block).
pub fn clear_direct(file: &std::fs::File) -> std::io::Result<()> {
    use std::os::unix::io::AsRawFd;
    let fd = file.as_raw_fd();
    // SAFETY: fcntl on a descriptor `file` owns; no memory is passed.
    let ok = unsafe {
        let fl = libc::fcntl(fd, libc::F_GETFL);
        fl >= 0 && libc::fcntl(fd, libc::F_SETFL, fl & !libc::O_DIRECT) == 0
    };
    if ok {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Bytes `[offset, offset + len)` of a file resident in RAM (`src`, the
/// `memory` engine's copy or a mapping), or the error a read past its end
/// gets from every engine: the bounds of a resident file are checked here,
/// once, for the engine's reads and the sampler's in-place ones.
pub fn resident_at<'a>(src: &'a [u8], path: &Path, offset: u64, len: u32) -> Result<&'a [u8], IoError> {
    match offset.checked_add(len as u64).filter(|&e| e <= src.len() as u64) {
        Some(end) => Ok(&src[offset as usize..end as usize]),
        None => Err(eof_error(path, offset, len, src.len().saturating_sub(offset as usize))),
    }
}

pub fn eof_error(path: &Path, offset: u64, len: u32, got: usize) -> IoError {
    IoError::eof("reading", path, Some(offset), format!("{len} bytes requested, file ends after {got} (truncated?)"))
}

/// Wraps an engine and injects the faults of a [`FaultPlan`] and of
/// `FLASHGNN_FAULT_READ`'s bad range ([`crate::fault`]). A failing read
/// is never handed to the device; its buffer is dropped and the error is
/// returned by the next `complete`, exactly like a device EIO.
struct FaultEngine {
    inner: Box<dyn ReadEngine>,
    plan: FaultPlan,
    submitted: u64,
    failed: Option<(ReadReq, std::path::PathBuf, i32)>,
    ready: Vec<Done>,
}

impl ReadEngine for FaultEngine {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn depth(&self) -> usize {
        self.inner.depth()
    }
    fn in_flight(&self) -> usize {
        self.inner.in_flight() + self.failed.is_some() as usize
    }
    fn submit(&mut self, req: ReadReq, buf: AlignedBuf) -> Result<(), IoError> {
        let n = self.submitted;
        self.submitted += 1;
        let path = self.inner.path(req.file);
        let bad = crate::fault::bad_read(path, req.offset, req.len as u64).is_some();
        if bad || n == self.plan.fail_at || (self.plan.forever && n > self.plan.fail_at) {
            if self.failed.is_none() {
                let errno = if bad { libc::EIO } else { self.plan.errno };
                self.failed = Some((req, path.to_path_buf(), errno));
            }
            return Ok(());
        }
        self.inner.submit(req, buf)
    }
    fn complete(&mut self, min: usize, out: &mut Vec<Done>) -> Result<(), IoError> {
        if self.plan.delay_us > 0 {
            std::thread::sleep(std::time::Duration::from_micros(self.plan.delay_us));
        }
        if let Some((req, path, errno)) = self.failed.take() {
            return Err(IoError::new("reading", path, Some(req.offset), std::io::Error::from_raw_os_error(errno)));
        }
        out.append(&mut self.ready);
        self.inner.complete(min, out)
    }
    fn counters(&self) -> &IoCounters {
        self.inner.counters()
    }
    fn path(&self, file: u16) -> &Path {
        self.inner.path(file)
    }
}
