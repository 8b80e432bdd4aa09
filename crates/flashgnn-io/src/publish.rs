//! Atomic publication of a fully written directory.
//!
//! Protocol (RELIABILITY.md promise 1): every file was fsynced by
//! [`crate::OutFile::finish`]; the temporary directory is fsynced; then either
//! `rename(tmp, out)` (no dataset there) or `renameat2(tmp, out,
//! RENAME_EXCHANGE)` (swap with the existing one, which is then deleted); then
//! the parent directory is fsynced. A crash at any point leaves either the old
//! dataset or the new one at `out`, never a mixture.

use std::ffi::CString;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use crate::IoError;

pub fn fsync_dir(dir: &Path) -> Result<(), IoError> {
    let f = File::open(dir).map_err(|e| IoError::new("opening directory", dir, None, e))?;
    f.sync_all().map_err(|e| IoError::new("fsync directory", dir, None, e))
}

/// Create the file `path` holding `parts` (concatenated) atomically and
/// durably: write them to `tmp` (an [`crate::OutFile`], fsynced), rename `tmp`
/// to `path`, fsync the parent directory. A crash leaves `path` either as it
/// was or complete.
pub fn publish_file(tmp: &Path, path: &Path, parts: &[&[u8]]) -> Result<(), IoError> {
    let mut out = crate::OutFile::create(tmp)?;
    for p in parts {
        out.write(p)?;
    }
    out.finish()?;
    std::fs::rename(tmp, path).map_err(|e| IoError::new("renaming into place", path, None, e))?;
    fsync_dir(path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")))
}

/// Take `flock(LOCK_EX | LOCK_NB)` on `f` (retried on EINTR): `Ok(true)` when
/// taken, `Ok(false)` when another open file description holds a lock on
/// the file. The lock lasts as long as `f`'s open file description.
pub fn try_lock_exclusive(f: &File) -> std::io::Result<bool> {
    use std::os::unix::io::AsRawFd;
    loop {
        // SAFETY: flock on a file descriptor owned by `f`, alive for the call.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) } == 0 {
            return Ok(true);
        }
        let e = std::io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EWOULDBLOCK) => return Ok(false),
            _ => return Err(e),
        }
    }
}

/// Swap two paths atomically (Linux `renameat2` with `RENAME_EXCHANGE`).
fn rename_exchange(a: &Path, b: &Path) -> std::io::Result<()> {
    let ca = CString::new(a.as_os_str().as_bytes())?;
    let cb = CString::new(b.as_os_str().as_bytes())?;
    // SAFETY: both pointers are valid NUL-terminated strings that outlive the call.
    let r = unsafe { libc::renameat2(libc::AT_FDCWD, ca.as_ptr(), libc::AT_FDCWD, cb.as_ptr(), libc::RENAME_EXCHANGE) };
    if r == 0 {
        Ok(())
    } else {
        Err(std::io::Error::last_os_error())
    }
}

/// Publish `tmp` as `out`. When `out` exists it is replaced atomically and the
/// old contents are removed afterwards.
pub fn publish_dir(tmp: &Path, out: &Path) -> Result<(), IoError> {
    fsync_dir(tmp)?;
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    if out.exists() {
        rename_exchange(tmp, out).map_err(|e| IoError::new("swapping in", out, None, e))?;
        fsync_dir(parent)?;
        // `tmp` now holds the previous dataset.
        std::fs::remove_dir_all(tmp).map_err(|e| IoError::new("removing previous dataset", tmp, None, e))?;
    } else {
        std::fs::rename(tmp, out).map_err(|e| IoError::new("renaming into place", out, None, e))?;
        fsync_dir(parent)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn replaces_existing_atomically() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("ds");
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("old"), b"1").unwrap();
        let tmp = d.path().join(".ds.tmp");
        std::fs::create_dir(&tmp).unwrap();
        std::fs::write(tmp.join("new"), b"2").unwrap();
        publish_dir(&tmp, &out).unwrap();
        assert!(out.join("new").exists() && !out.join("old").exists());
        assert!(!tmp.exists());
    }
}
