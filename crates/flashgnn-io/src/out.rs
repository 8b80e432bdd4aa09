//! [`OutFile`]: a buffered sequential writer that checksums what it writes.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use flashgnn_format::checksum::FileCrc;

use crate::aligned::AlignedBuf;
use crate::{fault, IoError};

/// Write buffer: 1 MiB keeps syscalls rare (1.2 GB/s ≈ 1200 writes/s) while
/// staying a rounding error in the builder's memory budget.
pub const WRITE_BUFFER_BYTES: usize = 1 << 20;
/// O_DIRECT block of [`OutFile::create_direct`]: each `pwrite` waits for
/// the device, so larger blocks keep it busier between them.
pub const DIRECT_BLOCK_BYTES: usize = 8 << 20;

pub struct OutFile {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    crc: FileCrc,
    /// [`create_direct`](OutFile::create_direct): the aligned write buffer
    /// (used instead of `buf`) and the bytes already written from it.
    direct: Option<(AlignedBuf, u64)>,
}

impl OutFile {
    pub fn create(path: impl AsRef<Path>) -> Result<OutFile, IoError> {
        let path = path.as_ref().to_path_buf();
        let file = File::create(&path).map_err(|e| IoError::new("creating", &path, None, e))?;
        Ok(OutFile { path, file, buf: Vec::with_capacity(WRITE_BUFFER_BYTES), crc: FileCrc::default(), direct: None })
    }

    /// [`create`](OutFile::create) for a large file written once and not
    /// read again soon by this process: whole [`WRITE_BUFFER_BYTES`] blocks
    /// go out with O_DIRECT from one aligned buffer (no page-cache copy, no
    /// cached pages pushed out), the unaligned tail buffered at
    /// [`finish`](OutFile::finish), then fsync as usual. Buffered throughout
    /// where the file system refuses O_DIRECT (tmpfs).
    pub fn create_direct(path: impl AsRef<Path>) -> Result<OutFile, IoError> {
        let path = path.as_ref().to_path_buf();
        match crate::engine::create_direct(&path)? {
            (file, true) => Ok(OutFile {
                path,
                file,
                buf: Vec::new(),
                crc: FileCrc::default(),
                direct: Some((AlignedBuf::new(DIRECT_BLOCK_BYTES), 0)),
            }),
            (file, false) => Ok(OutFile {
                path,
                file,
                buf: Vec::with_capacity(WRITE_BUFFER_BYTES),
                crc: FileCrc::default(),
                direct: None,
            }),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Bytes accepted so far (the file's final length after [`finish`]).
    pub fn len(&self) -> u64 {
        self.crc.bytes()
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    pub fn write(&mut self, data: &[u8]) -> Result<(), IoError> {
        self.crc.update(data);
        if let Some((buf, at)) = self.direct.as_mut() {
            let mut rest = data;
            while !rest.is_empty() {
                let used = buf.len();
                let k = rest.len().min(buf.capacity() - used);
                buf.spare()[used..used + k].copy_from_slice(&rest[..k]);
                buf.set_len(used + k);
                rest = &rest[k..];
                if buf.len() == buf.capacity() {
                    pwrite_all(&self.file, buf.as_slice(), *at)
                        .map_err(|e| IoError::new("writing", &self.path, Some(*at), e))?;
                    *at += buf.len() as u64;
                    buf.set_len(0);
                }
            }
            return Ok(());
        }
        if self.buf.len() + data.len() > WRITE_BUFFER_BYTES {
            self.flush_buf()?;
        }
        if data.len() >= WRITE_BUFFER_BYTES {
            self.raw_write(data)
        } else {
            self.buf.extend_from_slice(data);
            Ok(())
        }
    }

    pub fn write_zeros(&mut self, n: u64) -> Result<(), IoError> {
        const Z: [u8; 4096] = [0; 4096];
        let mut left = n;
        while left > 0 {
            let k = left.min(Z.len() as u64) as usize;
            self.write(&Z[..k])?;
            left -= k as u64;
        }
        Ok(())
    }

    fn raw_write(&mut self, data: &[u8]) -> Result<(), IoError> {
        let at = self.crc.bytes() - data.len() as u64 - self.buf.len() as u64;
        fault::charge(data.len() as u64).map_err(|e| IoError::new("writing", &self.path, Some(at), e))?;
        self.file.write_all(data).map_err(|e| IoError::new("writing", &self.path, Some(at), e))
    }

    fn flush_buf(&mut self) -> Result<(), IoError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let buf = std::mem::take(&mut self.buf);
        let at = self.crc.bytes() - buf.len() as u64;
        let r = fault::charge(buf.len() as u64)
            .and_then(|_| self.file.write_all(&buf))
            .map_err(|e| IoError::new("writing", &self.path, Some(at), e));
        self.buf = buf;
        self.buf.clear();
        r
    }

    /// Flush, fsync and return (length, crc32c).
    pub fn finish(self) -> Result<(u64, u32), IoError> {
        self.finish_patched(&[], &[])
    }

    /// [`finish`](OutFile::finish), then overwrite the file's first bytes
    /// `old` (as written) with `new` (same length) before the fsync: for a
    /// header whose counts are known only once the body is written (the
    /// build's `--dedup` layout). The returned CRC is the patched file's,
    /// derived without reading it back: CRC32C is linear, so swapping the
    /// first k of n bytes changes the CRC by the CRC of the difference
    /// shifted past the other n - k bytes (`crc32c_combine` with a zero CRC).
    pub fn finish_patched(mut self, old: &[u8], new: &[u8]) -> Result<(u64, u32), IoError> {
        assert_eq!(old.len(), new.len(), "a patch keeps the length");
        if let Some((buf, at)) = self.direct.take() {
            if !buf.is_empty() {
                // The tail is not a whole block: write it buffered.
                crate::engine::clear_direct(&self.file)
                    .and_then(|_| pwrite_all(&self.file, buf.as_slice(), at))
                    .map_err(|e| IoError::new("writing", &self.path, Some(at), e))?;
            }
        }
        // Data written before the tail of the buffer is accounted in `len`.
        let pending = std::mem::take(&mut self.buf);
        if !pending.is_empty() {
            let at = self.crc.bytes() - pending.len() as u64;
            fault::charge(pending.len() as u64)
                .and_then(|_| self.file.write_all(&pending))
                .map_err(|e| IoError::new("writing", &self.path, Some(at), e))?;
        }
        let mut crc = self.crc.value();
        if old != new {
            let rest = (self.crc.bytes() - old.len() as u64) as usize;
            crc ^= crc32c::crc32c_combine(crc32c::crc32c(old) ^ crc32c::crc32c(new), 0, rest);
            crate::engine::clear_direct(&self.file)
                .and_then(|_| pwrite_all(&self.file, new, 0))
                .map_err(|e| IoError::new("writing", &self.path, Some(0), e))?;
        }
        self.file.sync_all().map_err(|e| IoError::new("fsync", &self.path, None, e))?;
        Ok((self.crc.bytes(), crc))
    }
}

/// Write all of `buf` at byte offset `at` of `file` (`pwrite`), charged to the
/// process-wide [`fault`] plan like every [`OutFile`] write.
pub fn pwrite_all(file: &File, buf: &[u8], at: u64) -> std::io::Result<()> {
    use std::os::unix::fs::FileExt;
    fault::charge(buf.len() as u64)?;
    file.write_all_at(buf, at)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn length_and_crc_match_file() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("x");
        let mut f = OutFile::create(&p).unwrap();
        let big = vec![3u8; WRITE_BUFFER_BYTES + 17];
        f.write(b"hello").unwrap();
        f.write(&big).unwrap();
        f.write_zeros(5000).unwrap();
        let (n, c) = f.finish().unwrap();
        let back = std::fs::read(&p).unwrap();
        assert_eq!(n, back.len() as u64);
        assert_eq!(c, crc32c::crc32c(&back));
    }

    #[test]
    fn direct_writer_gives_the_same_bytes_and_crc() {
        // Blocks written with O_DIRECT, a large write spanning several
        // blocks and an unaligned buffered tail: the file equals what a
        // buffered OutFile writes, length and CRC included.
        let d = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..3 * WRITE_BUFFER_BYTES + 12_345).map(|i| (i * 31 % 251) as u8).collect();
        let mut outs = Vec::new();
        for direct in [false, true] {
            let p = d.path().join(format!("x{direct}"));
            let mut f = if direct { OutFile::create_direct(&p).unwrap() } else { OutFile::create(&p).unwrap() };
            f.write(&data[..100]).unwrap();
            f.write(&data[100..100 + 2 * WRITE_BUFFER_BYTES + 7]).unwrap();
            for c in data[100 + 2 * WRITE_BUFFER_BYTES + 7..].chunks(4000) {
                f.write(c).unwrap();
            }
            assert_eq!(f.len(), data.len() as u64);
            outs.push((f.finish().unwrap(), std::fs::read(&p).unwrap()));
        }
        assert_eq!(outs[1].1, data);
        assert_eq!(outs[0], outs[1]);
        assert_eq!(outs[1].0, (data.len() as u64, crc32c::crc32c(&data)));
    }

    #[test]
    fn a_patched_head_gives_the_patched_file_and_its_crc() {
        let d = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..2 * DIRECT_BLOCK_BYTES + 4096 + 77).map(|i| (i * 7 % 253) as u8).collect();
        let new: Vec<u8> = (0..4096).map(|i| (i * 13 % 241) as u8).collect();
        for direct in [false, true] {
            let p = d.path().join(format!("p{direct}"));
            let mut f = if direct { OutFile::create_direct(&p).unwrap() } else { OutFile::create(&p).unwrap() };
            f.write(&data).unwrap();
            let (n, c) = f.finish_patched(&data[..4096], &new).unwrap();
            let back = std::fs::read(&p).unwrap();
            assert_eq!(&back[..4096], &new[..]);
            assert_eq!(&back[4096..], &data[4096..]);
            assert_eq!((n, c), (back.len() as u64, crc32c::crc32c(&back)), "direct {direct}");
        }
    }
}
