//! External sort of packed `u64` keys (`dst << 32 | src`) under a byte budget.
//!
//! Keys accumulate in one chunk of `chunk_bytes`; a full chunk is sorted in
//! place (rayon's pdqsort, all cores, no scratch buffer: the chunk is the
//! only key memory) and written as a run file of little-endian u64s. (An
//! in-place MSD radix sort and an LSD radix sort with a scratch buffer were
//! measured on 12 M graph keys: no faster than pdqsort on this 2-core VM,
//! 0.15-0.28 s each; see docs/benchmarks.md.) The merge is a
//! k-way loser-tree merge ([`LoserTree`]: one comparison per tree level per
//! key, against a binary heap's two) over buffered run readers; with more
//! than [`MERGE_FANIN_MAX`] runs, groups are merged first so the number of
//! open files and read buffers stays bounded.
//!
//! Invariant: at most `chunk_bytes + 2 * MERGE_FANIN_MAX * RUN_READ_BUFFER_BYTES`
//! bytes of keys are resident at any time (each run reader holds its raw
//! bytes and the decoded keys).

use std::fs::File;
use std::io::Read;
use std::path::{Path, PathBuf};

use rayon::slice::ParallelSliceMut;

use flashgnn_io::{IoError, OutFile};

use crate::Result;

/// Most runs merged at once: 64 runs x (256 KiB bytes + 256 KiB keys) = 32 MiB.
pub const MERGE_FANIN_MAX: usize = 64;
/// Read buffer per run during a merge.
pub const RUN_READ_BUFFER_BYTES: usize = 256 << 10;

pub struct ExternalSorter {
    dir: PathBuf,
    name: String,
    chunk: Vec<u64>,
    chunk_cap: usize,
    runs: Vec<PathBuf>,
    pushed: u64,
    dedup: bool,
}

impl ExternalSorter {
    pub fn new(dir: &Path, name: &str, chunk_bytes: u64) -> Self {
        let chunk_cap = (chunk_bytes / 8).max(1024) as usize;
        ExternalSorter {
            dir: dir.to_path_buf(),
            name: name.into(),
            chunk: Vec::new(),
            chunk_cap,
            runs: Vec::new(),
            pushed: 0,
            dedup: false,
        }
    }

    /// Keep one copy of equal keys within each run (a sorted chunk is
    /// deduplicated before it is written): the merge then sees each key at
    /// most once per run, which is all a `--dedup` build needs, and reads
    /// and writes fewer keys. `len()` still counts every pushed key.
    pub fn with_dedup(mut self, on: bool) -> Self {
        self.dedup = on;
        self
    }

    #[inline]
    pub fn push(&mut self, key: u64) -> Result<()> {
        if self.chunk.len() == self.chunk_cap {
            self.spill()?;
        }
        if self.chunk.capacity() == 0 {
            self.chunk.reserve_exact(self.chunk_cap);
        }
        self.chunk.push(key);
        self.pushed += 1;
        Ok(())
    }

    pub fn len(&self) -> u64 {
        self.pushed
    }
    pub fn is_empty(&self) -> bool {
        self.pushed == 0
    }
    pub fn runs(&self) -> usize {
        self.runs.len()
    }

    fn spill(&mut self) -> Result<()> {
        self.chunk.par_sort_unstable();
        if self.dedup {
            self.chunk.dedup();
        }
        let path = self.dir.join(format!("{}.run{}", self.name, self.runs.len()));
        write_keys(&path, &self.chunk)?;
        self.runs.push(path);
        self.chunk.clear();
        Ok(())
    }

    /// Finish: returns a sorted stream over every pushed key.
    pub fn finish(mut self) -> Result<Merged> {
        if self.runs.is_empty() {
            self.chunk.par_sort_unstable();
            if self.dedup {
                self.chunk.dedup();
            }
            return Ok(Merged::Memory { keys: std::mem::take(&mut self.chunk), at: 0 });
        }
        if !self.chunk.is_empty() {
            self.spill()?;
        }
        self.chunk = Vec::new(); // release the chunk before merging
        let mut runs = std::mem::take(&mut self.runs);
        let mut level = 0;
        while runs.len() > MERGE_FANIN_MAX {
            let mut next = Vec::new();
            for (g, group) in runs.chunks(MERGE_FANIN_MAX).enumerate() {
                let path = self.dir.join(format!("{}.l{}m{}", self.name, level + 1, g));
                let mut out = OutFile::create(&path)?;
                let mut m = LoserTree::open(group.to_vec())?;
                while let Some(k) = m.next_key()? {
                    out.write(&k.to_le_bytes())?;
                }
                out.finish()?;
                drop(m);
                for p in group {
                    let _ = std::fs::remove_file(p);
                }
                next.push(path);
            }
            runs = next;
            level += 1;
        }
        Ok(Merged::Disk(LoserTree::open(runs)?))
    }
}

fn write_keys(path: &Path, keys: &[u64]) -> Result<()> {
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

pub enum Merged {
    Memory { keys: Vec<u64>, at: usize },
    Disk(LoserTree),
}

impl Merged {
    /// Keys this stream yields in all (after any per-run deduplication).
    pub fn total_keys(&self) -> u64 {
        match self {
            Merged::Memory { keys, at } => (keys.len() - (*at).min(keys.len())) as u64,
            Merged::Disk(m) => m.total,
        }
    }

    pub fn next_key(&mut self) -> Result<Option<u64>> {
        match self {
            Merged::Memory { keys, at } => {
                let k = keys.get(*at).copied();
                *at += 1;
                Ok(k)
            }
            Merged::Disk(m) => m.next_key(),
        }
    }
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
    total: u64,
}

impl LoserTree {
    fn open(paths: Vec<PathBuf>) -> Result<LoserTree> {
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

#[cfg(test)]
mod tests {
    use super::*;
    use rand::{RngExt, SeedableRng};

    #[test]
    fn matches_in_memory_sort_across_many_runs() {
        // Proves the external sort equals sort() for inputs spanning many
        // runs and a multi-level merge (tiny chunks force > MERGE_FANIN_MAX runs).
        let d = tempfile::tempdir().unwrap();
        let mut rng = rand_xoshiro::Xoshiro256PlusPlus::seed_from_u64(7);
        let keys: Vec<u64> = (0..200_000).map(|_| rng.random_range(0..5000u64)).collect();
        let mut s = ExternalSorter::new(d.path(), "t", 1024 * 8);
        for &k in &keys {
            s.push(k).unwrap();
        }
        assert!(s.runs() > MERGE_FANIN_MAX);
        let mut m = s.finish().unwrap();
        let mut got = Vec::new();
        while let Some(k) = m.next_key().unwrap() {
            got.push(k);
        }
        let mut want = keys;
        want.sort();
        assert_eq!(got, want);
        drop(m);
        assert_eq!(std::fs::read_dir(d.path()).unwrap().count(), 0, "run files removed");
    }

    #[test]
    fn dedup_keeps_one_copy_per_run_and_counts_every_push() {
        // Runs of 4 keys: duplicates inside a run are dropped, across runs
        // they stay (the merge sees each key at most once per run).
        let d = tempfile::tempdir().unwrap();
        let mut s = ExternalSorter::new(d.path(), "t", 8).with_dedup(true);
        s.chunk_cap = 4;
        for k in [5u64, 5, 5, 1, /* run 2 */ 5, 2, 2, 2, /* last run */ 7, 7] {
            s.push(k).unwrap();
        }
        assert_eq!(s.len(), 10);
        let mut m = s.finish().unwrap();
        assert_eq!(m.total_keys(), 5);
        let mut got = Vec::new();
        while let Some(k) = m.next_key().unwrap() {
            got.push(k);
        }
        assert_eq!(got, vec![1, 2, 5, 5, 7]);
    }

    #[test]
    fn loser_tree_merges_uneven_and_empty_runs() {
        // Runs of different lengths (one empty, one holding u64::MAX, a
        // non-power-of-two count) merge to the sorted union.
        let d = tempfile::tempdir().unwrap();
        let runs: Vec<Vec<u64>> =
            vec![vec![1, 5, 9, u64::MAX], vec![], vec![0, 5, 5, 6], vec![2], vec![3, 4, 10, 11, 12]];
        let mut paths = Vec::new();
        for (i, r) in runs.iter().enumerate() {
            let p = d.path().join(format!("r{i}"));
            write_keys(&p, r).unwrap();
            paths.push(p);
        }
        let mut m = LoserTree::open(paths).unwrap();
        let mut got = Vec::new();
        while let Some(k) = m.next_key().unwrap() {
            got.push(k);
        }
        let mut want: Vec<u64> = runs.concat();
        want.sort();
        assert_eq!(got, want);
    }
}
