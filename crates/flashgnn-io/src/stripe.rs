//! Striping a dataset file over several files, directories or devices.
//!
//! A striped file of logical length `len` is cut into `chunk_bytes` chunks
//! dealt round-robin over `parts`: chunk `c` lives in part `c % n` at offset
//! `(c / n) * chunk_bytes`. `chunk_bytes` is a multiple of 4 KiB, so page and
//! sector alignment survive, and random 4 KiB reads spread evenly over the
//! devices (the Micron talk's 1/2/4-SSD scaling).
//!
//! The description lives in `stripes.json` beside the manifest:
//! `{"chunk_bytes": C, "files": {"graph.fg": {"len": L, "parts": [path, ...]}}}`.
//! Readers go through [`open_reader`] / [`StripeEngine`], which resolve a
//! logical name to either the plain file or its parts.

use std::collections::HashMap;
use std::path::{Path, PathBuf};

use crate::aligned::AlignedBuf;
use crate::engine::{Done, IoCounters, ReadEngine, ReadReq};
use crate::read::{FileReader, ReadAt};
use crate::IoError;

pub const STRIPES_FILE: &str = "stripes.json";

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct StripeMap {
    pub chunk_bytes: u64,
    pub len: u64,
    pub parts: Vec<PathBuf>,
}

impl StripeMap {
    /// Split logical `[offset, offset+len)` into (part, part offset, length) runs.
    pub fn segments(&self, offset: u64, len: u64) -> Vec<(usize, u64, u64)> {
        let n = self.parts.len() as u64;
        let mut out = Vec::new();
        let (mut off, end) = (offset, offset + len);
        while off < end {
            let c = off / self.chunk_bytes;
            let within = off % self.chunk_bytes;
            let run = (self.chunk_bytes - within).min(end - off);
            out.push(((c % n) as usize, (c / n) * self.chunk_bytes + within, run));
            off += run;
        }
        out
    }
    /// Bytes of part `k` for a logical file of `len` bytes.
    pub fn part_len(&self, k: usize) -> u64 {
        let n = self.parts.len() as u64;
        let chunks = self.len.div_ceil(self.chunk_bytes);
        let mut total = 0;
        let mut c = k as u64;
        while c < chunks {
            total += self.chunk_bytes.min(self.len - c * self.chunk_bytes);
            c += n;
        }
        total
    }
}

/// Parse `stripes.json` of a dataset directory, if present.
pub fn load(root: &Path) -> Result<Option<(u64, HashMap<String, StripeMap>)>, IoError> {
    let p = root.join(STRIPES_FILE);
    let text = match crate::regular::read_regular(&p) {
        Ok(t) => String::from_utf8(t)
            .map_err(|e| IoError::new("reading", &p, None, std::io::Error::new(std::io::ErrorKind::InvalidData, e)))?,
        Err(e) if e.source.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e),
    };
    let bad = |m: String| IoError::new("parsing", &p, None, std::io::Error::new(std::io::ErrorKind::InvalidData, m));
    let v: serde_json::Value = serde_json::from_str(&text).map_err(|e| bad(format!("not valid JSON: {e}")))?;
    let chunk = v["chunk_bytes"]
        .as_u64()
        .filter(|c| *c >= 4096 && c % 4096 == 0)
        .ok_or_else(|| bad("chunk_bytes must be a positive multiple of 4096".into()))?;
    let mut files = HashMap::new();
    for (name, f) in v["files"].as_object().ok_or_else(|| bad("missing files".into()))? {
        let len = f["len"].as_u64().ok_or_else(|| bad(format!("{name}: missing len")))?;
        let parts: Vec<PathBuf> = f["parts"]
            .as_array()
            .ok_or_else(|| bad(format!("{name}: missing parts")))?
            .iter()
            .map(|x| x.as_str().map(|s| if Path::new(s).is_absolute() { PathBuf::from(s) } else { root.join(s) }))
            .collect::<Option<_>>()
            .ok_or_else(|| bad(format!("{name}: parts must be paths")))?;
        if parts.is_empty() || parts.len() > 256 {
            return Err(bad(format!("{name}: {} parts (must be 1..=256)", parts.len())));
        }
        files.insert(name.clone(), StripeMap { chunk_bytes: chunk, len, parts });
    }
    Ok(Some((chunk, files)))
}

/// Reads a striped file through its parts.
pub struct StripedReader {
    map: StripeMap,
    parts: Vec<FileReader>,
    path: PathBuf,
}

impl ReadAt for StripedReader {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<(), IoError> {
        if offset.checked_add(buf.len() as u64).is_none_or(|e| e > self.map.len) {
            return Err(IoError::eof(
                "reading",
                &self.path,
                Some(offset),
                format!("{} bytes requested past the striped file's end {}", buf.len(), self.map.len),
            ));
        }
        let mut at = 0usize;
        for (k, off, len) in self.map.segments(offset, buf.len() as u64) {
            self.parts[k].read_exact_at(&mut buf[at..at + len as usize], off)?;
            at += len as usize;
        }
        Ok(())
    }
    fn len(&self) -> u64 {
        self.map.len
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

/// Open logical file `name` of the dataset at `root`, striped or not.
pub fn open_reader(root: &Path, name: &str) -> Result<Box<dyn ReadAt>, IoError> {
    if let Some((_, files)) = load(root)? {
        if let Some(map) = files.get(name) {
            for (k, p) in map.parts.iter().enumerate() {
                let have = std::fs::metadata(p).map_err(|e| IoError::new("stat", p, None, e))?.len();
                if have != map.part_len(k) {
                    return Err(IoError::eof(
                        "opening stripe part",
                        p,
                        Some(have),
                        format!("part holds {have} bytes, stripes.json implies {}", map.part_len(k)),
                    ));
                }
            }
            let parts = map.parts.iter().map(FileReader::open).collect::<Result<Vec<_>, _>>()?;
            return Ok(Box::new(StripedReader { map: map.clone(), parts, path: root.join(name) }));
        }
    }
    Ok(Box::new(FileReader::open(root.join(name))?))
}

/// Physical files behind a list of logical ones: (flat part list, per
/// logical file its map or None when unstriped).
pub fn physical_files(root: &Path, names: &[&str]) -> Result<(Vec<PathBuf>, Vec<Option<(StripeMap, usize)>>), IoError> {
    let stripes = load(root)?.map(|(_, f)| f).unwrap_or_default();
    let mut flat = Vec::new();
    let mut maps = Vec::new();
    for n in names {
        match stripes.get(*n) {
            Some(m) => {
                maps.push(Some((m.clone(), flat.len())));
                flat.extend(m.parts.iter().cloned());
            }
            None => {
                maps.push(None);
                flat.push(root.join(n));
            }
        }
    }
    Ok((flat, maps))
}

struct Split {
    req: ReadReq,
    buf: AlignedBuf,
    left: usize,
}

/// An engine over striped files: logical requests are translated to part
/// requests (split at chunk boundaries and reassembled when needed).
pub struct StripeEngine {
    inner: Box<dyn ReadEngine>,
    /// Logical file -> (map, first physical index) or plain physical index.
    files: Vec<Result<(StripeMap, usize), usize>>,
    logical_paths: Vec<PathBuf>,
    splits: HashMap<u64, Split>,
    next_split: u64,
}

const SPLIT_TAG: u64 = 1 << 63;

impl StripeEngine {
    pub fn new(inner: Box<dyn ReadEngine>, maps: Vec<Option<(StripeMap, usize)>>, logical_paths: Vec<PathBuf>) -> Self {
        let mut files = Vec::new();
        let mut phys = 0usize;
        for m in maps {
            match m {
                Some((map, first)) => {
                    phys = first + map.parts.len();
                    files.push(Ok((map, first)));
                }
                None => {
                    files.push(Err(phys));
                    phys += 1;
                }
            }
        }
        StripeEngine { inner, files, logical_paths, splits: HashMap::new(), next_split: 0 }
    }
}

impl ReadEngine for StripeEngine {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn depth(&self) -> usize {
        self.inner.depth()
    }
    fn in_flight(&self) -> usize {
        self.inner.in_flight()
    }
    fn submit(&mut self, req: ReadReq, buf: AlignedBuf) -> Result<(), IoError> {
        match &self.files[req.file as usize] {
            Err(phys) => self.inner.submit(ReadReq { file: *phys as u16, ..req }, buf),
            Ok((map, first)) => {
                let segs = map.segments(req.offset, req.len as u64);
                if segs.len() == 1 {
                    let (k, off, _) = segs[0];
                    return self
                        .inner
                        .submit(ReadReq { file: (first + k) as u16, offset: off, len: req.len, tag: req.tag }, buf);
                }
                let id = self.next_split;
                self.next_split += 1;
                let first = *first;
                self.splits.insert(id, Split { req, buf, left: segs.len() });
                let mut at = 0u64;
                for (k, off, len) in segs {
                    let sub = AlignedBuf::new(len as usize);
                    // tag: split id in the low 40 bits, offset within the request above.
                    let tag = SPLIT_TAG | at << 40 | id;
                    self.inner.submit(ReadReq { file: (first + k) as u16, offset: off, len: len as u32, tag }, sub)?;
                    at += len;
                }
                Ok(())
            }
        }
    }
    fn complete(&mut self, min: usize, out: &mut Vec<Done>) -> Result<(), IoError> {
        let mut raw = Vec::new();
        loop {
            raw.clear();
            self.inner.complete(min, &mut raw)?;
            let before = out.len();
            for d in raw.drain(..) {
                if d.req.tag & SPLIT_TAG == 0 {
                    out.push(d);
                    continue;
                }
                let id = d.req.tag & ((1 << 40) - 1);
                let at = ((d.req.tag & !SPLIT_TAG) >> 40) as usize;
                let s = self.splits.get_mut(&id).expect("split in flight");
                s.buf.spare()[at..at + d.buf.len()].copy_from_slice(d.buf.as_slice());
                s.left -= 1;
                if s.left == 0 {
                    let s = self.splits.remove(&id).expect("split");
                    let mut buf = s.buf;
                    buf.set_len(s.req.len as usize);
                    out.push(Done { req: s.req, buf });
                }
            }
            if out.len() > before || self.inner.in_flight() == 0 || min == 0 {
                return Ok(());
            }
        }
    }
    fn counters(&self) -> &IoCounters {
        self.inner.counters()
    }
    fn path(&self, file: u16) -> &Path {
        &self.logical_paths[file as usize]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn segments_tile_the_range() {
        let m = StripeMap { chunk_bytes: 4096, len: 100_000, parts: vec!["a".into(), "b".into(), "c".into()] };
        let segs = m.segments(4000, 9000);
        assert_eq!(segs, vec![(0, 4000, 96), (1, 0, 4096), (2, 0, 4096), (0, 4096, 712)]);
        let total: u64 = (0..3).map(|k| m.part_len(k)).sum();
        assert_eq!(total, 100_000);
    }
}
