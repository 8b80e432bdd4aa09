//! Bucketed mode's read side: [`BucketStream`] yields the buckets in key
//! order, each loaded and sorted by a worker thread (`load_bucket`, the
//! radix sort of `radix.rs`) while the consumer walks the previous one.
//!
//! Invariants: at most three buckets of the resident cap are in memory (the
//! consumer's, and the worker's input and sorted output); a bucket that
//! skew made larger than the cap is sorted out of core by a nested
//! run-mode sorter, so the bound holds for any input; a bucket file is
//! removed once read, and the rest when the stream is dropped.

use std::fs::File;
use std::path::{Path, PathBuf};

use flashgnn_io::IoError;

use super::buckets::{BucketFiles, Buckets};
use super::pack::Pack;
use super::radix::sort_into;
use super::{huge_zeroed, ExternalSorter, Merged};
use crate::Result;

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
    pub(super) total: u64,
    paths: Vec<PathBuf>,
}

impl BucketStream {
    pub(super) fn start(dir: &Path, name: &str, files: BucketFiles, b: &Buckets) -> Result<BucketStream> {
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
