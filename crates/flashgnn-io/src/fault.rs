//! Process-wide fault plan for writes, for crash/disk-full tests.
//!
//! Set with [`set`] or, for tests that drive the CLI, the environment variable
//! `FLASHGNN_FAULT=enospc-after-bytes:N` / `eio-after-bytes:N` (read once).
//! Once the total bytes written by all [`crate::OutFile`]s exceed `N`, every
//! further write fails with that errno — what a full disk or a dying device
//! looks like to the builder.
//!
//! `FLASHGNN_FAULT=crash-after-bytes:N` instead aborts the process at the
//! write that would pass `N` bytes, before issuing it: a crash point at an
//! exact write (what was written before stays in the page cache, as after a
//! SIGKILL). [`written`] reports the bytes counted so far, so a test can
//! measure a run once and then crash it at points spread over it.
//!
//! Reads: `FLASHGNN_FAULT_READ=NAME@OFFSET+LEN` (read once) makes every read
//! of a file named `NAME` that overlaps bytes `[OFFSET, OFFSET + LEN)` fail
//! with EIO — a bad sector, what a device reports for a page it cannot read
//! (the file system gives no other way to make one without device-mapper).
//! It is checked by every read engine ([`crate::engine::open_engine`] wraps
//! them), by [`crate::FileReader`] and by [`crate::direct::DirectFile`], so the
//! sampler, the store's own reads and the scrubber see the same bad bytes.
//! `FLASHGNN_FAULT_READ_WHILE=PATH` (read once) limits the bad range to the
//! time `PATH` exists: a test removes the file to model the sector being
//! repaired (a drive that remaps it) while the process keeps running, which
//! a variable read once cannot do. Only a read that hits the range pays the
//! `stat`.

use std::path::Path;
use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::{Once, OnceLock};

static LIMIT: AtomicU64 = AtomicU64::new(u64::MAX);
static WRITTEN: AtomicU64 = AtomicU64::new(0);
static ERRNO: AtomicI32 = AtomicI32::new(0);
/// `ERRNO` value meaning "abort the process" (crash-after-bytes).
const CRASH: i32 = -1;
static ENV: Once = Once::new();

/// Fail writes with `errno` after `after_bytes` bytes in total (None clears).
pub fn set(plan: Option<(u64, i32)>) {
    ENV.call_once(|| {});
    WRITTEN.store(0, Ordering::SeqCst);
    match plan {
        Some((n, e)) => {
            ERRNO.store(e, Ordering::SeqCst);
            LIMIT.store(n, Ordering::SeqCst);
        }
        None => LIMIT.store(u64::MAX, Ordering::SeqCst),
    }
}

fn load_env() {
    ENV.call_once(|| {
        if let Ok(v) = std::env::var("FLASHGNN_FAULT") {
            let (kind, n) = v.split_once(':').unwrap_or((v.as_str(), "0"));
            let n: u64 = n.parse().unwrap_or(0);
            let errno = match kind {
                "enospc-after-bytes" => libc::ENOSPC,
                "eio-after-bytes" => libc::EIO,
                "crash-after-bytes" => CRASH,
                _ => return,
            };
            ERRNO.store(errno, Ordering::SeqCst);
            LIMIT.store(n, Ordering::SeqCst);
        }
    });
}

/// Account `n` bytes about to be written; Err if the plan says this write fails.
pub fn charge(n: u64) -> std::io::Result<()> {
    load_env();
    let limit = LIMIT.load(Ordering::Relaxed);
    if limit == u64::MAX {
        return Ok(());
    }
    let before = WRITTEN.fetch_add(n, Ordering::SeqCst);
    if before.saturating_add(n) > limit {
        let errno = ERRNO.load(Ordering::SeqCst);
        if errno == CRASH {
            std::process::abort();
        }
        return Err(std::io::Error::from_raw_os_error(errno));
    }
    Ok(())
}

/// Bytes charged since the plan was set (0 when no plan is active).
pub fn written() -> u64 {
    load_env();
    WRITTEN.load(Ordering::SeqCst)
}

/// A bad byte range of one file, by file name (`FLASHGNN_FAULT_READ`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct BadRange {
    pub name: String,
    pub offset: u64,
    pub len: u64,
}

impl BadRange {
    /// `NAME@OFFSET+LEN`; None for anything else (the variable is a test knob:
    /// a malformed value is reported once on stderr and ignored).
    pub fn parse(v: &str) -> Option<BadRange> {
        let (name, rest) = v.split_once('@')?;
        let (off, len) = rest.split_once('+')?;
        let (offset, len) = (off.parse().ok()?, len.parse().ok()?);
        (!name.is_empty() && len > 0).then(|| BadRange { name: name.to_string(), offset, len })
    }

    fn hits(&self, path: &Path, offset: u64, len: u64) -> bool {
        path.file_name().is_some_and(|n| n == self.name.as_str())
            && offset < self.offset.saturating_add(self.len)
            && self.offset < offset.saturating_add(len)
    }
}

/// The bad range of `FLASHGNN_FAULT_READ`, if set.
pub fn bad_range() -> Option<&'static BadRange> {
    static BAD: OnceLock<Option<BadRange>> = OnceLock::new();
    BAD.get_or_init(|| {
        let v = std::env::var("FLASHGNN_FAULT_READ").ok()?;
        let r = BadRange::parse(&v);
        if r.is_none() {
            eprintln!("flashgnn: FLASHGNN_FAULT_READ={v:?} ignored (expected NAME@OFFSET+LEN)");
        }
        r
    })
    .as_ref()
}

/// `FLASHGNN_FAULT_READ_WHILE`'s path: the bad range holds only while it
/// exists.
fn bad_while() -> Option<&'static Path> {
    static WHILE: OnceLock<Option<std::path::PathBuf>> = OnceLock::new();
    WHILE.get_or_init(|| std::env::var_os("FLASHGNN_FAULT_READ_WHILE").map(Into::into)).as_deref()
}

/// The error a read of `len` bytes at `offset` of `path` gets from the bad
/// range, if it touches it (and, under `FLASHGNN_FAULT_READ_WHILE`, its
/// file still exists).
pub fn bad_read(path: &Path, offset: u64, len: u64) -> Option<std::io::Error> {
    bad_range()
        .filter(|b| b.hits(path, offset, len) && bad_while().is_none_or(Path::exists))
        .map(|_| std::io::Error::from_raw_os_error(libc::EIO))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bad_range_hits_overlapping_reads_of_its_file_only() {
        let b = BadRange::parse("graph.fg@8192+4096").unwrap();
        let p = Path::new("/d/graph.fg");
        assert!(b.hits(p, 8192, 512) && b.hits(p, 4096, 4097) && b.hits(p, 12287, 1));
        assert!(!b.hits(p, 4096, 4096) && !b.hits(p, 12288, 512));
        assert!(!b.hits(Path::new("/d/features.fg"), 8192, 512));
        for bad in ["graph.fg", "@1+2", "g@x+1", "g@1+0", "g@1"] {
            assert_eq!(BadRange::parse(bad), None, "{bad}");
        }
    }
}
