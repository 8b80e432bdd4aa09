//! Sequential O_DIRECT reads of a whole file for the scrubber (`flashgnn
//! scrub`): the page cache is bypassed so what is checked is what the media
//! returns, not a cached copy.
//!
//! [`DirectFile`] reads any logical byte range `[offset, offset+len)` of a
//! dataset file (plain or striped over parts, see [`crate::stripe`]) by
//! reading the 4 KiB-aligned superset of each part's segment into one
//! reusable [`AlignedBuf`] and copying the asked-for bytes out. A file system
//! that refuses O_DIRECT (tmpfs) falls back to buffered reads
//! ([`crate::engine::open_direct`]); [`DirectFile::is_direct`] says which.
//!
//! Architecture invariant: a read returns exactly the bytes asked for or an
//! error naming the (part) file and offset; a read past the logical end is
//! refused before any system call.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::{Path, PathBuf};

use crate::aligned::{AlignedBuf, BUF_ALIGN};
use crate::stripe::StripeMap;
use crate::IoError;

struct Part {
    path: PathBuf,
    file: File,
}

/// A dataset file opened for O_DIRECT sequential scrubbing.
pub struct DirectFile {
    path: PathBuf,
    len: u64,
    parts: Vec<Part>,
    map: Option<StripeMap>,
    direct: bool,
    buf: AlignedBuf,
}

impl DirectFile {
    /// Open logical file `name` of the dataset at `root` (striped or not).
    pub fn open(root: &Path, name: &str) -> Result<DirectFile, IoError> {
        if let Some((_, files)) = crate::stripe::load(root)? {
            if let Some(map) = files.get(name) {
                let mut parts = Vec::with_capacity(map.parts.len());
                let mut direct = true;
                for p in &map.parts {
                    let (file, d) = crate::engine::open_direct(p)?;
                    direct &= d;
                    parts.push(Part { path: p.clone(), file });
                }
                return Ok(DirectFile {
                    path: root.join(name),
                    len: map.len,
                    parts,
                    map: Some(map.clone()),
                    direct,
                    buf: AlignedBuf::new(BUF_ALIGN),
                });
            }
        }
        DirectFile::open_path(&root.join(name))
    }

    /// Open one plain file.
    pub fn open_path(path: &Path) -> Result<DirectFile, IoError> {
        let (file, direct) = crate::engine::open_direct(path)?;
        let len = file.metadata().map_err(|e| IoError::new("stat", path, None, e))?.len();
        Ok(DirectFile {
            path: path.to_path_buf(),
            len,
            parts: vec![Part { path: path.to_path_buf(), file }],
            map: None,
            direct,
            buf: AlignedBuf::new(BUF_ALIGN),
        })
    }

    pub fn len(&self) -> u64 {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len == 0
    }
    pub fn path(&self) -> &Path {
        &self.path
    }
    /// Whether every part was opened with O_DIRECT.
    pub fn is_direct(&self) -> bool {
        self.direct
    }

    /// Fill `out` with logical bytes `[offset, offset + out.len())`; returns
    /// the bytes read from the device (the aligned supersets, >= `out.len()`).
    pub fn read_into(&mut self, offset: u64, out: &mut [u8]) -> Result<u64, IoError> {
        crate::read::check_range(&self.path, self.len, offset, out.len())?;
        let segs = match &self.map {
            Some(m) => m.segments(offset, out.len() as u64),
            None => vec![(0, offset, out.len() as u64)],
        };
        let mut device = 0u64;
        let mut at = 0usize;
        for (k, poff, plen) in segs {
            let (s, got) = self.read_span(k, poff, plen as usize)?;
            device += got as u64;
            out[at..at + plen as usize].copy_from_slice(&self.buf.spare()[s..s + plen as usize]);
            at += plen as usize;
        }
        Ok(device)
    }

    /// Logical bytes `[offset, offset + len)` of a plain file (not striped),
    /// borrowed from the aligned read buffer: no copy, for a caller that
    /// decodes them in place (the build's edge reader, its bucket loads).
    /// The buffer starts 4 KiB-aligned, so `offset % 4096 == 0` gives an
    /// aligned slice.
    pub fn read_view(&mut self, offset: u64, len: usize) -> Result<&[u8], IoError> {
        crate::read::check_range(&self.path, self.len, offset, len)?;
        if self.map.is_some() {
            return Err(IoError::new(
                "reading",
                &self.path,
                Some(offset),
                std::io::Error::new(std::io::ErrorKind::Unsupported, "read_view of a striped file"),
            ));
        }
        let (s, _) = self.read_span(0, offset, len)?;
        Ok(&self.buf.spare()[s..s + len])
    }

    /// Read the 4 KiB-aligned superset of part `k`'s bytes `[poff, poff +
    /// plen)` into the buffer; returns where those bytes start in it and the
    /// bytes read from the device.
    fn read_span(&mut self, k: usize, poff: u64, plen: usize) -> Result<(usize, usize), IoError> {
        let a = BUF_ALIGN as u64;
        let lo = poff / a * a;
        let need = (poff - lo) as usize + plen;
        let span = need.div_ceil(BUF_ALIGN) * BUF_ALIGN;
        if self.buf.capacity() < span {
            self.buf = AlignedBuf::new(span);
        }
        let part = &self.parts[k];
        if let Some(e) = crate::fault::bad_read(&part.path, lo, need as u64) {
            return Err(IoError::new("reading", &part.path, Some(lo), e));
        }
        let spare = &mut self.buf.spare()[..span];
        let mut got = 0usize;
        while got < need {
            // Offsets, lengths and the buffer stay 4 KiB aligned (got is
            // a multiple of 4096 unless the file ended), as O_DIRECT needs.
            match part.file.read_at(&mut spare[got..], lo + got as u64) {
                Ok(0) => {
                    return Err(IoError::eof(
                        "reading",
                        &part.path,
                        Some(lo + got as u64),
                        format!("file ends before byte {} (truncated?)", poff + plen as u64),
                    ))
                }
                Ok(n) => got += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(IoError::new("reading", &part.path, Some(lo + got as u64), e)),
            }
        }
        Ok(((poff - lo) as usize, got))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn unaligned_ranges_read_back_exactly() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("f");
        let data: Vec<u8> = (0..20_000u32).map(|i| (i * 7 % 251) as u8).collect();
        std::fs::write(&p, &data).unwrap();
        let mut f = DirectFile::open_path(&p).unwrap();
        assert_eq!(f.len(), 20_000);
        for (off, len) in [(0usize, 1usize), (1, 4095), (4095, 2), (8192, 11_808), (19_999, 1), (0, 20_000)] {
            let mut out = vec![0u8; len];
            let dev = f.read_into(off as u64, &mut out).unwrap();
            assert_eq!(out, &data[off..off + len], "range {off}+{len}");
            assert!(dev >= len as u64);
        }
        let mut out = vec![0u8; 2];
        let e = f.read_into(19_999, &mut out).unwrap_err().to_string();
        assert!(e.contains("19999") && e.contains("truncated"), "{e}");
        for (off, len) in [(0usize, 20_000usize), (4096, 100), (5, 9000)] {
            assert_eq!(f.read_view(off as u64, len).unwrap(), &data[off..off + len], "view {off}+{len}");
        }
        assert!(f.read_view(19_999, 2).unwrap_err().to_string().contains("truncated"));
    }
}
