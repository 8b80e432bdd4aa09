//! The I/O layer. Every byte flashgnn writes goes through [`OutFile`] and every
//! byte it reads through a [`ReadAt`], so tests can swap in failures.
//!
//! - [`OutFile`]: sequential, buffered, checksummed writer that remembers its
//!   path for error messages and honours the process-wide [`fault`] plan
//!   (ENOSPC / EIO after N bytes) so crash and disk-full behaviour is testable
//!   without filling a real disk.
//! - [`ReadAt`]: positional reads; [`FileReader`] uses `pread`, and
//!   [`FaultyReader`] injects EIO.
//! - [`publish`]: atomic directory publication (fsync files, rename, fsync the
//!   parent; an existing dataset is swapped with `renameat2(RENAME_EXCHANGE)`),
//!   the same for one file, the `flock` writer lock, the `--force` rule
//!   ([`check_output`]) and owner-marked temporaries ([`remove_stale_tmps`]).
//! - [`disk`]: the [`Disk`] handle a mutable store or a build writes
//!   through — the real file system, or (feature `sim-disk`, tests) the same
//!   calls also recorded in a [`sim_disk`] model that yields power-loss
//!   crash states.
//! - [`regular`]: every open of a dataset or input file refuses FIFOs,
//!   devices and directories by name instead of blocking.
//!
//! - [`direct`]: whole-file O_DIRECT reads for the scrubber, and [`rate`]: the
//!   token bucket that bounds its read rate.
//! - [`engine`]: batched reads for the sampler — `uring` (io_uring +
//!   O_DIRECT), `pread` (sync / thread pool), `mmap`, `memory`.
//!
//! Architecture invariant: this is the only crate of the storage stack that
//! calls `libc` or holds `unsafe` (aligned buffers, io_uring submission,
//! mappings, `renameat2`, `flock`); each `unsafe` block states why it is sound.

pub mod aligned;
pub mod direct;
pub mod disk;
pub mod engine;
pub mod fault;
pub mod mapped;
pub mod out;
pub mod pool;
pub mod publish;
pub mod rate;
pub mod read;
pub mod regular;
pub mod rss;
#[cfg(feature = "sim-disk")]
pub mod sim_disk;
pub mod stripe;
pub mod uring;

pub use disk::{Disk, DiskFile};
pub use out::{pwrite_all, BlockWriter, OutFile};
pub use publish::{
    check_not_input, check_output, create_dir_all_durable, create_tmp_dir, create_tmp_dir_on, fsync_dir, publish_dir,
    publish_dir_on, publish_file, remove_stale_tmps, try_lock_exclusive,
};
pub use read::{FaultyReader, FileReader, ReadAt};
pub use regular::{open_regular, open_regular_with, present, read_regular};

/// An I/O error with the path (and offset, when known) it happened on.
#[derive(Debug)]
pub struct IoError {
    pub path: String,
    pub offset: Option<u64>,
    pub op: &'static str,
    pub source: std::io::Error,
}

impl std::fmt::Display for IoError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.offset {
            Some(o) => write!(f, "{} {} at byte offset {o}: {}", self.op, self.path, self.source),
            None => write!(f, "{} {}: {}", self.op, self.path, self.source),
        }
    }
}

impl std::error::Error for IoError {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

impl IoError {
    pub fn new(
        op: &'static str,
        path: impl AsRef<std::path::Path>,
        offset: Option<u64>,
        source: std::io::Error,
    ) -> Self {
        IoError { path: path.as_ref().display().to_string(), offset, op, source }
    }

    /// A read (or open) that found fewer bytes than it needs: truncated
    /// files, reads past an end, stripe parts shorter than their map.
    pub fn eof(
        op: &'static str,
        path: impl AsRef<std::path::Path>,
        offset: Option<u64>,
        detail: impl Into<String>,
    ) -> Self {
        IoError::new(op, path, offset, std::io::Error::new(std::io::ErrorKind::UnexpectedEof, detail.into()))
    }
}
