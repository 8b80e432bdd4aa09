//! [`OutFile`]: a buffered sequential writer that checksums what it writes.

use std::fs::File;
use std::io::Write;
use std::path::{Path, PathBuf};

use flashgnn_format::checksum::FileCrc;

use crate::aligned::AlignedBuf;
use crate::disk::{inject, note};
use crate::{fault, Disk, IoError};

/// Write buffer: 1 MiB keeps syscalls rare (1.2 GB/s ≈ 1200 writes/s) while
/// staying a rounding error in the builder's memory budget.
pub const WRITE_BUFFER_BYTES: usize = 1 << 20;
/// O_DIRECT block of [`OutFile::create_direct`]. Two of them alternate:
/// one fills while a writer thread writes the other, so the device stays
/// busy and the caller does not wait for it (8 MiB in all per file, as the
/// single 8 MiB block written on the caller's thread before 2026-11-28).
pub const DIRECT_BLOCK_BYTES: usize = 4 << 20;

/// A writer thread for O_DIRECT blocks, one in flight at a time: the
/// caller fills the next block while this one is written. Each block
/// names its file and offset (a direct [`OutFile`]'s blocks, or the
/// build's bucket files); [`send`](BlockWriter::send) returns the buffer
/// of the block written before, for reuse, or that block's write error.
/// The thread starts at the first block and ends when the writer drops
/// (after the block it holds). After a failed block every later `send` and
/// `settle` fails too: the file has a hole where that block belongs.
#[derive(Default)]
pub struct BlockWriter {
    tx: Option<std::sync::mpsc::SyncSender<(File, AlignedBuf, u64, PathBuf)>>,
    back: Option<std::sync::mpsc::Receiver<Result<AlignedBuf, IoError>>>,
    handle: Option<std::thread::JoinHandle<()>>,
    in_flight: bool,
    failed: bool,
}

impl BlockWriter {
    /// Err once a block has failed (without waiting for the one in flight).
    pub fn check(&self, path: &Path) -> Result<(), IoError> {
        if self.failed {
            let e = std::io::Error::other("an earlier block write of this file failed");
            return Err(IoError::new("writing", path, None, e));
        }
        Ok(())
    }

    /// Write `buf` at byte `at` of `file` (`path` names it in errors) on
    /// the thread, after the block in flight; returns that block's buffer.
    pub fn send(&mut self, file: &File, buf: AlignedBuf, at: u64, path: &Path) -> Result<Option<AlignedBuf>, IoError> {
        if self.tx.is_none() {
            let (tx, rx) = std::sync::mpsc::sync_channel::<(File, AlignedBuf, u64, PathBuf)>(0);
            let (back_tx, back) = std::sync::mpsc::channel();
            let handle = std::thread::Builder::new()
                .name("block-write".into())
                .spawn(move || {
                    for (file, buf, at, path) in rx {
                        let r = pwrite_all(&file, buf.as_slice(), at)
                            .map(|_| buf)
                            .map_err(|e| IoError::new("writing", &path, Some(at), e));
                        if back_tx.send(r).is_err() {
                            return;
                        }
                    }
                })
                .map_err(|e| IoError::new("starting the writer thread for", path, None, e))?;
            (self.tx, self.back, self.handle) = (Some(tx), Some(back), Some(handle));
        }
        let done = self.settle(path)?;
        let file = file.try_clone().map_err(|e| IoError::new("writing", path, Some(at), e))?;
        let sent = self.tx.as_ref().is_some_and(|tx| tx.send((file, buf, at, path.to_path_buf())).is_ok());
        if !sent {
            self.failed = true;
            return Err(stopped(path, Some(at)));
        }
        self.in_flight = true;
        Ok(done)
    }

    /// Wait for the block in flight; its buffer back, empty (None when
    /// none was in flight), or its write error.
    pub fn settle(&mut self, path: &Path) -> Result<Option<AlignedBuf>, IoError> {
        self.check(path)?;
        if !std::mem::take(&mut self.in_flight) {
            return Ok(None);
        }
        let r = match self.back.as_ref().map(|b| b.recv()) {
            Some(Ok(Ok(mut b))) => {
                b.set_len(0);
                Ok(Some(b))
            }
            Some(Ok(Err(e))) => Err(e),
            _ => Err(stopped(path, None)),
        };
        self.failed = r.is_err();
        r
    }
}

fn stopped(path: &Path, at: Option<u64>) -> IoError {
    IoError::new("writing", path, at, std::io::Error::other("the writer thread stopped"))
}

impl Drop for BlockWriter {
    fn drop(&mut self) {
        self.tx = None; // the thread ends after the block it holds
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// A direct [`OutFile`]'s state: the block being filled, the file offset
/// it goes to, and the writer (its thread started at the first full block).
struct Direct {
    buf: AlignedBuf,
    at: u64,
    writer: BlockWriter,
}

pub struct OutFile {
    path: PathBuf,
    file: File,
    buf: Vec<u8>,
    crc: FileCrc,
    /// [`create_direct`](OutFile::create_direct): the aligned blocks
    /// (used instead of `buf`) and their writer.
    direct: Option<Direct>,
    /// Where writes and the fsync are recorded besides the file system
    /// ([`create_on`](OutFile::create_on)); always buffered, never direct.
    disk: Disk,
}

impl OutFile {
    pub fn create(path: impl AsRef<Path>) -> Result<OutFile, IoError> {
        OutFile::create_on(&Disk::Real, path)
    }

    /// [`create`](OutFile::create) through `disk`: its writes and fsync are
    /// also recorded there (a simulated disk's crash states then cover them).
    pub fn create_on(disk: &Disk, path: impl AsRef<Path>) -> Result<OutFile, IoError> {
        let path = path.as_ref().to_path_buf();
        let file = disk.create(&path)?.into_file();
        Ok(OutFile {
            path,
            file,
            buf: Vec::with_capacity(WRITE_BUFFER_BYTES),
            crc: FileCrc::default(),
            direct: None,
            disk: disk.clone(),
        })
    }

    /// [`create`](OutFile::create) for a large file written once and not
    /// read again soon by this process: whole [`DIRECT_BLOCK_BYTES`] blocks
    /// go out with O_DIRECT from two alternating aligned buffers, on a
    /// writer thread (no page-cache copy, no cached pages pushed out, no
    /// wait for the device on the caller's thread), the unaligned tail buffered at
    /// [`finish`](OutFile::finish), then fsync as usual. Buffered throughout
    /// where the file system refuses O_DIRECT (tmpfs).
    pub fn create_direct(path: impl AsRef<Path>) -> Result<OutFile, IoError> {
        OutFile::create_direct_on(&Disk::Real, path)
    }

    /// [`create_direct`](OutFile::create_direct) through `disk`. A
    /// simulated disk records buffered writes only, so there the file is
    /// written as [`create_on`](OutFile::create_on) writes it (same bytes,
    /// same CRC); a real disk keeps O_DIRECT.
    pub fn create_direct_on(disk: &Disk, path: impl AsRef<Path>) -> Result<OutFile, IoError> {
        if !disk.is_real() {
            return OutFile::create_on(disk, path);
        }
        let path = path.as_ref().to_path_buf();
        match crate::engine::create_direct(&path)? {
            (file, true) => Ok(OutFile {
                path,
                file,
                buf: Vec::new(),
                crc: FileCrc::default(),
                direct: Some(Direct {
                    buf: AlignedBuf::new(DIRECT_BLOCK_BYTES),
                    at: 0,
                    writer: BlockWriter::default(),
                }),
                disk: Disk::Real,
            }),
            (file, false) => Ok(OutFile {
                path,
                file,
                buf: Vec::with_capacity(WRITE_BUFFER_BYTES),
                crc: FileCrc::default(),
                direct: None,
                disk: Disk::Real,
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
        if let Some(d) = self.direct.as_mut() {
            d.writer.check(&self.path)?;
            let mut rest = data;
            while !rest.is_empty() {
                let used = d.buf.len();
                let k = rest.len().min(d.buf.capacity() - used);
                d.buf.spare()[used..used + k].copy_from_slice(&rest[..k]);
                d.buf.set_len(used + k);
                rest = &rest[k..];
                if d.buf.len() == d.buf.capacity() {
                    let full = std::mem::replace(&mut d.buf, AlignedBuf::new(0));
                    let n = full.len() as u64;
                    let back = d.writer.send(&self.file, full, d.at, &self.path)?;
                    d.buf = back.unwrap_or_else(|| AlignedBuf::new(DIRECT_BLOCK_BYTES));
                    d.at += n;
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
        self.write_recorded(data, at)
    }

    fn flush_buf(&mut self) -> Result<(), IoError> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let buf = std::mem::take(&mut self.buf);
        let at = self.crc.bytes() - buf.len() as u64;
        let r = self.write_recorded(&buf, at);
        self.buf = buf;
        self.buf.clear();
        r
    }

    /// Write `data` (which belongs at `at`) at the file's position, charged
    /// to the [`fault`] plan and recorded on a simulated disk.
    fn write_recorded(&mut self, data: &[u8], at: u64) -> Result<(), IoError> {
        inject!(&self.disk, &self.path, "writing", Some(at));
        fault::charge(data.len() as u64)
            .and_then(|_| self.file.write_all(data))
            .map_err(|e| IoError::new("writing", &self.path, Some(at), e))?;
        note!(&self.disk, &self.path, |rel| crate::sim_disk::SimOp::Write(rel, at, data.to_vec()));
        Ok(())
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
        if let Some(mut d) = self.direct.take() {
            d.writer.settle(&self.path)?; // every whole block written (or the first error, kept)
            drop(std::mem::take(&mut d.writer)); // the thread ends
            let (buf, at) = (d.buf, d.at);
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
            self.write_recorded(&pending, at)?;
        }
        let mut crc = self.crc.value();
        if old != new {
            let rest = (self.crc.bytes() - old.len() as u64) as usize;
            crc ^= crc32c::crc32c_combine(crc32c::crc32c(old) ^ crc32c::crc32c(new), 0, rest);
            inject!(&self.disk, &self.path, "writing", Some(0));
            crate::engine::clear_direct(&self.file)
                .and_then(|_| pwrite_all(&self.file, new, 0))
                .map_err(|e| IoError::new("writing", &self.path, Some(0), e))?;
            note!(&self.disk, &self.path, |rel| crate::sim_disk::SimOp::Write(rel, 0, new.to_vec()));
        }
        inject!(&self.disk, &self.path, "fsync", None);
        self.file.sync_all().map_err(|e| IoError::new("fsync", &self.path, None, e))?;
        note!(&self.disk, &self.path, |rel| crate::sim_disk::SimOp::Fsync(rel));
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
        // Blocks written with O_DIRECT by the writer thread (two buffers
        // alternating over five blocks), a large write spanning several
        // blocks and an unaligned buffered tail: the file equals what a
        // buffered OutFile writes, length and CRC included.
        let d = tempfile::tempdir().unwrap();
        let data: Vec<u8> = (0..5 * DIRECT_BLOCK_BYTES + 12_345).map(|i| (i * 31 % 251) as u8).collect();
        let mut outs = Vec::new();
        for direct in [false, true] {
            let p = d.path().join(format!("x{direct}"));
            let mut f = if direct { OutFile::create_direct(&p).unwrap() } else { OutFile::create(&p).unwrap() };
            f.write(&data[..100]).unwrap();
            f.write(&data[100..100 + 2 * DIRECT_BLOCK_BYTES + 7]).unwrap();
            for c in data[100 + 2 * DIRECT_BLOCK_BYTES + 7..].chunks(4000) {
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
