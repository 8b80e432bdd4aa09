//! Positional reads behind one trait, with a fault-injecting implementation.

use std::fs::File;
use std::os::unix::fs::FileExt;
use std::os::unix::io::AsRawFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};

use crate::IoError;

/// Read exactly `buf.len()` bytes at `offset`. Implementations must be
/// usable from several threads at once.
pub trait ReadAt: Send + Sync {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<(), IoError>;
    fn len(&self) -> u64;
    fn path(&self) -> &Path;
    fn is_empty(&self) -> bool {
        self.len() == 0
    }
}

/// `pread` on a regular file through the page cache (the direct-I/O engines
/// for the sampler are in [`crate::engine`]).
pub struct FileReader {
    path: PathBuf,
    file: File,
    len: u64,
}

impl FileReader {
    pub fn open(path: impl AsRef<Path>) -> Result<FileReader, IoError> {
        let path = path.as_ref().to_path_buf();
        let file = crate::regular::open_regular(&path)?;
        let len = file.metadata().map_err(|e| IoError::new("stat", &path, None, e))?.len();
        Ok(FileReader { path, file, len })
    }

    /// Tell the kernel this file's cached pages will not be needed again
    /// (`POSIX_FADV_DONTNEED`). A side array loaded whole into memory would
    /// otherwise stay in the page cache twice over (read for its CRC, then
    /// for its values: active pages), which a memory cgroup counts as used,
    /// and `--memory-budget auto` measures what is left against that usage
    /// (at 67 M nodes, 0.5 GiB of labels.npy). A hint: failure is ignored.
    pub fn drop_cached(&self) {
        // SAFETY: posix_fadvise reads only its integer arguments; the
        // descriptor is owned by `self.file` and open for this call.
        unsafe { libc::posix_fadvise(self.file.as_raw_fd(), 0, 0, libc::POSIX_FADV_DONTNEED) };
    }
}

/// `len` bytes at `offset` lie inside a file of `file_len` bytes, or an EOF
/// error naming the file, the offset and both lengths (no overflow).
pub(crate) fn check_range(path: &Path, file_len: u64, offset: u64, len: usize) -> Result<(), IoError> {
    if offset.checked_add(len as u64).is_none_or(|e| e > file_len) {
        return Err(IoError::eof(
            "reading",
            path,
            Some(offset),
            format!("{len} bytes requested but the file is {file_len} bytes long (truncated?)"),
        ));
    }
    Ok(())
}

impl ReadAt for FileReader {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<(), IoError> {
        check_range(&self.path, self.len, offset, buf.len())?;
        if let Some(e) = crate::fault::bad_read(&self.path, offset, buf.len() as u64) {
            return Err(IoError::new("reading", &self.path, Some(offset), e));
        }
        FileExt::read_exact_at(&self.file, buf, offset)
            .map_err(|e| IoError::new("reading", &self.path, Some(offset), e))
    }
    fn len(&self) -> u64 {
        self.len
    }
    fn path(&self) -> &Path {
        &self.path
    }
}

/// Wraps a reader; read number `fail_at` (0-based) and, when `forever`, every
/// later one fails with EIO. Used to prove that readers surface I/O errors
/// instead of returning garbage.
pub struct FaultyReader<R> {
    pub inner: R,
    pub fail_at: u64,
    pub forever: bool,
    count: AtomicU64,
}

impl<R: ReadAt> FaultyReader<R> {
    pub fn new(inner: R, fail_at: u64, forever: bool) -> Self {
        FaultyReader { inner, fail_at, forever, count: AtomicU64::new(0) }
    }
}

impl<R: ReadAt> ReadAt for FaultyReader<R> {
    fn read_exact_at(&self, buf: &mut [u8], offset: u64) -> Result<(), IoError> {
        let n = self.count.fetch_add(1, Ordering::SeqCst);
        if n == self.fail_at || (self.forever && n > self.fail_at) {
            return Err(IoError::new(
                "reading",
                self.inner.path(),
                Some(offset),
                std::io::Error::from_raw_os_error(libc::EIO),
            ));
        }
        self.inner.read_exact_at(buf, offset)
    }
    fn len(&self) -> u64 {
        self.inner.len()
    }
    fn path(&self) -> &Path {
        self.inner.path()
    }
}
