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

use std::sync::atomic::{AtomicI32, AtomicU64, Ordering};
use std::sync::Once;

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
