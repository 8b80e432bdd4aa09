//! Run mode's files: sorted chunks written as run files of little-endian
//! `u64` keys ([`write_keys`]), read back in blocks ([`KeyFileReader`]) and
//! merged k ways through a loser tree ([`LoserTree`]).
//!
//! Invariants: a run reader holds at most [`RUN_READ_BUFFER_BYTES`] of raw
//! bytes and as many decoded keys; a merge opens at most
//! [`MERGE_FANIN_MAX`] runs (the caller merges larger sets in groups); a
//! key file whose length is not a multiple of 8 is an error naming the file
//! and offset; run files are removed when their merge is dropped.

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use flashgnn_io::{IoError, OutFile};

#[cfg(doc)]
use super::MERGE_FANIN_MAX;
use super::RUN_READ_BUFFER_BYTES;
use crate::Result;

pub(super) fn write_keys(path: &Path, keys: &[u64]) -> Result<()> {
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
    pub(super) total: u64,
}

impl LoserTree {
    pub(super) fn open(paths: Vec<PathBuf>) -> Result<LoserTree> {
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
