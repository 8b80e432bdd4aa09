//! Bucketed mode's write side: pushes scatter keys into per-bucket staging
//! buffers by key range; full buffers are shown to the observer and
//! appended to the bucket files ([`BucketFiles`]), on the pushing thread or
//! on a spill thread ([`SpillThread`]); whole-block appends go out with
//! O_DIRECT through a `BlockWriter` thread, one in flight.
//!
//! Invariants: staging holds at most [`BUCKET_STAGE_TOTAL_KEYS`] keys (plus
//! at most `SPILL_QUEUE + 2` buffers around the spill thread); the observer
//! sees every key once, in batches of one bucket's key range; every append
//! is settled before the files are read; bucket files are temporaries (no
//! checksum, no fsync) but every write goes through the fault plan.

use std::fs::File;
use std::path::{Path, PathBuf};

use flashgnn_io::aligned::{AlignedBuf, BUF_ALIGN};
use flashgnn_io::{BlockWriter, IoError};

use super::pack::Pack;
use crate::Result;

/// Staging keys per bucket: all buffers together hold
/// [`BUCKET_STAGE_TOTAL_KEYS`] (8 MiB: pushes scatter over them, so they
/// should stay in cache; 64 buckets x 512 KiB = 32 MiB tripled the push
/// CPU), at most 64 Ki keys (512 KiB appends), at least 4 Ki (32 KiB) each.
pub(super) const BUCKET_STAGE_TOTAL_KEYS: usize = 1 << 20;
pub(super) const BUCKET_STAGE_KEYS_MAX: usize = 64 << 10;
pub(super) const BUCKET_STAGE_KEYS_MIN: usize = 4 << 10;
/// Fill target of a bucket against its resident cap (a third of a chunk): 0.8
/// before rounding the bucket count up to a power of two, so an equal-width
/// split of the key range holds 0.4-0.8 of the cap on average, leaving room
/// for skew before a bucket takes the slower nested path.
pub(super) const BUCKET_FILL_PERCENT: u64 = 80;

/// Bucketed mode's state while keys are pushed.
pub(super) struct Buckets {
    /// bucket = key >> pack.shift; how its files store the keys.
    pub(super) pack: Pack,
    pub(super) stage: Vec<Vec<u64>>,
    pub(super) stage_keys: usize,
    /// Keys handed to the bucket files so far, per bucket.
    pub(super) counts: Vec<u64>,
    /// Keys one resident bucket may hold (a third of a chunk).
    pub(super) resident_keys: usize,
    pub(super) sink: Sink,
}

/// The bucket files being appended to.
pub(super) struct BucketFiles {
    pub(super) dir: PathBuf,
    pub(super) name: String,
    /// Path, file, and whether it is (still) open with O_DIRECT.
    pub(super) files: Vec<Option<(PathBuf, File, bool)>>,
    /// Keys written per bucket (the next write's offset / `pack.width`).
    pub(super) written: Vec<u64>,
    pub(super) pack: Pack,
    /// A staging buffer's packed bytes, aligned for O_DIRECT (reused; a
    /// second one is in flight on the writer).
    pub(super) buf: Option<AlignedBuf>,
    /// Whole-block appends go to its thread, one in flight, while the spill
    /// thread counts and encodes the next staging buffer. The spill thread
    /// was the edge pass's bottleneck without `--symmetrize` (a 2 GB uint32
    /// input: 1.2 of ~6 s blocked in `pwrite`, the pushing and reading
    /// threads waiting on it).
    pub(super) writer: BlockWriter,
}

/// Where full staging buffers go: appended by the pushing thread itself, or
/// handed to a spill thread ([`ExternalSorter::with_spill_thread`]) that shows
/// them to its observer, appends them and hands the emptied buffers back.
pub(super) enum Sink {
    Inline(BucketFiles),
    Thread(SpillThread),
}

pub(super) struct SpillThread {
    /// Full buffers to append (bounded: [`SPILL_QUEUE`] in flight).
    pub(super) tx: Option<std::sync::mpsc::SyncSender<(usize, Vec<u64>)>>,
    /// Emptied buffers coming back, reused as staging buffers.
    pub(super) free: std::sync::mpsc::Receiver<Vec<u64>>,
    pub(super) handle: Option<std::thread::JoinHandle<Result<BucketFiles>>>,
}

/// Full staging buffers queued for the spill thread at most: with the one it
/// is appending and the recycled ones, the spill thread adds at most
/// `SPILL_QUEUE + 2` staging buffers (<= 3 MiB) to the 8 MiB of staging.
pub(super) const SPILL_QUEUE: usize = 4;

impl SpillThread {
    /// Stop the thread (after it appended everything queued) and take its files.
    pub(super) fn join(&mut self) -> Result<BucketFiles> {
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

pub(super) fn bucket_path(dir: &Path, name: &str, i: usize) -> PathBuf {
    dir.join(format!("{name}.bucket{i}"))
}

impl Buckets {
    /// Hand bucket `i`'s (non-empty) staging buffer to the sink: shown to
    /// `observe` and appended here, or queued for the spill thread (which
    /// shows it to its own observer) and replaced by a recycled buffer.
    pub(super) fn flush(&mut self, i: usize, observe: &mut impl FnMut(&[u64]) -> Result<()>) -> Result<()> {
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
    pub(super) fn empty() -> BucketFiles {
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
    pub(super) fn append(&mut self, i: usize, keys: &[u64]) -> Result<()> {
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
    pub(super) fn settle(&mut self) -> Result<()> {
        self.writer.settle(&self.dir)?;
        self.writer = BlockWriter::default(); // the thread ends
        Ok(())
    }
}
