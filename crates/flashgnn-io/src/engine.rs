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
    pub fn parse(s: &str) -> Option<EngineKind> {
        Some(match s {
            "uring" => EngineKind::Uring,
            "pread" => EngineKind::Pread,
            "pread-pool" => EngineKind::PreadPool,
            "mmap" => EngineKind::Mmap,
            "mmap-default" => EngineKind::MmapDefault,
            "memory" => EngineKind::Memory,
            _ => return None,
        })
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

/// Engine settings (named limits, TigerBeetle style).
#[derive(Debug, Clone)]
pub struct EngineConfig {
    /// Reads in flight for `uring` (default 256; the device here saturates
    /// near 128, datacenter NVMe wants 1000s).
    pub depth: usize,
    /// Worker threads of `pread-pool` (default 64: each blocks in `pread`).
    pub pool_threads: usize,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig { depth: 256, pool_threads: 64 }
    }
}

/// Open an engine over `files`. `Uring` falls back to `PreadPool` with a
/// one-line notice on stderr when the kernel or a container blocks io_uring.
pub fn open_engine(kind: EngineKind, files: &[PathBuf], cfg: &EngineConfig) -> Result<Box<dyn ReadEngine>, IoError> {
    Ok(match kind {
        EngineKind::Uring => match crate::uring::UringEngine::open(files, cfg.depth) {
            Ok(e) => Box::new(e),
            Err(e) if e.op == "io_uring_setup" => {
                eprintln!("flashgnn: io_uring unavailable ({}); using the pread thread pool", e.source);
                Box::new(crate::pool::PreadEngine::open(files, cfg.pool_threads)?)
            }
            Err(e) => return Err(e),
        },
        EngineKind::Pread => Box::new(crate::pool::PreadEngine::open(files, 0)?),
        EngineKind::PreadPool => Box::new(crate::pool::PreadEngine::open(files, cfg.pool_threads)?),
        EngineKind::Mmap => Box::new(crate::mapped::MappedEngine::open(files, crate::mapped::Mode::MmapRandom)?),
        EngineKind::MmapDefault => {
            Box::new(crate::mapped::MappedEngine::open(files, crate::mapped::Mode::MmapDefault)?)
        }
        EngineKind::Memory => Box::new(crate::mapped::MappedEngine::open(files, crate::mapped::Mode::Memory)?),
    })
}

/// Open a file for direct I/O, falling back to buffered I/O where the file
/// system refuses O_DIRECT (tmpfs), so tests run anywhere.
pub fn open_direct(path: &Path) -> Result<(std::fs::File, bool), IoError> {
    use std::os::unix::fs::OpenOptionsExt;
    match std::fs::OpenOptions::new().read(true).custom_flags(libc::O_DIRECT).open(path) {
        Ok(f) => Ok((f, true)),
        Err(e) if e.raw_os_error() == Some(libc::EINVAL) => {
            let f = std::fs::File::open(path).map_err(|e| IoError::new("opening", path, None, e))?;
            Ok((f, false))
        }
        Err(e) => Err(IoError::new("opening", path, None, e)),
    }
}

pub(crate) fn eof_error(path: &Path, offset: u64, len: u32, got: usize) -> IoError {
    IoError::new(
        "reading",
        path,
        Some(offset),
        std::io::Error::new(
            std::io::ErrorKind::UnexpectedEof,
            format!("{len} bytes requested, file ends after {got} (truncated?)"),
        ),
    )
}
