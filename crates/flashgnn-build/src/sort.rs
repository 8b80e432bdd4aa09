//! External sort of packed `u64` keys (`dst << 32 | src`) under a byte budget.
//!
//! Keys accumulate in one chunk of `chunk_bytes`; a full chunk is sorted
//! (rayon, all cores) and written as a run file of little-endian u64s. The
//! merge is a k-way heap merge over buffered run readers; with more than
//! [`MERGE_FANIN_MAX`] runs, groups are merged first so the number of open
//! files and read buffers stays bounded.
//!
//! Invariant: at most `chunk_bytes + 2 * MERGE_FANIN_MAX * RUN_READ_BUFFER_BYTES`
//! bytes of keys are resident at any time (each run reader holds its raw
//! bytes and the decoded keys).

use std::cmp::Reverse;
use std::collections::BinaryHeap;
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
        }
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
                let mut m = HeapMerge::open(group.to_vec())?;
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
        Ok(Merged::Disk(HeapMerge::open(runs)?))
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
    Disk(HeapMerge),
}

impl Merged {
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

pub struct HeapMerge {
    readers: Vec<KeyFileReader>,
    heap: BinaryHeap<Reverse<(u64, usize)>>,
}

impl HeapMerge {
    fn open(paths: Vec<PathBuf>) -> Result<HeapMerge> {
        let mut readers = paths.iter().map(|p| KeyFileReader::open(p)).collect::<Result<Vec<_>>>()?;
        let mut heap = BinaryHeap::with_capacity(readers.len());
        for (i, r) in readers.iter_mut().enumerate() {
            if let Some(k) = r.next_key()? {
                heap.push(Reverse((k, i)));
            }
        }
        Ok(HeapMerge { readers, heap })
    }

    pub fn next_key(&mut self) -> Result<Option<u64>> {
        let Some(Reverse((k, i))) = self.heap.pop() else {
            return Ok(None);
        };
        if let Some(n) = self.readers[i].next_key()? {
            self.heap.push(Reverse((n, i)));
        }
        Ok(Some(k))
    }
}

impl Drop for HeapMerge {
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
}
