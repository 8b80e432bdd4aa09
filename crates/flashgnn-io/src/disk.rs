//! [`Disk`]: the handle through which the mutable store creates, writes,
//! syncs, renames and removes its files, chosen per store instance; the
//! builder publishes its output through one too (`BuildOptions::disk`).
//!
//! [`Disk::Real`] (the default, and the only kind in production builds)
//! calls the file system and nothing else. With the cargo feature
//! `sim-disk`, [`Disk::Sim`] does the same calls and also records each one
//! in a [`crate::sim_disk::SimDisk`], which can then produce the durable
//! state a power loss at any recorded point would leave. Being a value, not
//! a process-wide switch, two tests in one process can each run a store on
//! a disk of their own.
//!
//! Every write goes through [`crate::pwrite_all`] or an [`crate::OutFile`],
//! so the process-wide [`crate::fault`] plan (`FLASHGNN_FAULT`, used by
//! tests that drive the CLI in a real process) still applies to both kinds.

use std::fs::File;
use std::path::{Path, PathBuf};

use crate::IoError;

/// Where a store's file operations go. Cheap to clone.
#[derive(Clone, Default)]
pub enum Disk {
    #[default]
    Real,
    #[cfg(feature = "sim-disk")]
    Sim(std::sync::Arc<crate::sim_disk::SimDisk>),
}

impl std::fmt::Debug for Disk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Disk::Real => f.write_str("Disk::Real"),
            #[cfg(feature = "sim-disk")]
            Disk::Sim(s) => write!(f, "Disk::Sim({})", s.root().display()),
        }
    }
}

/// The simulated operation for `path` (or for the pair `(from, to)`, both
/// relative), recorded after the real one succeeded; a no-op on a real disk
/// or for a path outside the simulated root.
#[cfg(feature = "sim-disk")]
macro_rules! note {
    ($disk:expr, ($from:expr, $to:expr), |$a:ident, $b:ident| $op:expr) => {{
        if let Disk::Sim(s) = $disk {
            if let (Some($a), Some($b)) = (s.relative($from), s.relative($to)) {
                s.record($op).map_err(|e| IoError::new("recording on the simulated disk", $to, None, e))?;
            }
        }
    }};
    ($disk:expr, $path:expr, |$rel:ident| $op:expr) => {{
        if let Disk::Sim(s) = $disk {
            if let Some($rel) = s.relative($path) {
                s.record($op).map_err(|e| IoError::new("recording on the simulated disk", $path, None, e))?;
            }
        }
    }};
}
#[cfg(not(feature = "sim-disk"))]
macro_rules! note {
    ($disk:expr, ($from:expr, $to:expr), |$a:ident, $b:ident| $op:expr) => {{
        let _ = (&$disk, &$from, &$to);
    }};
    ($disk:expr, $path:expr, |$rel:ident| $op:expr) => {{
        let _ = (&$disk, &$path);
    }};
}
pub(crate) use note;

/// On a simulated disk, the error [`crate::sim_disk::SimDisk::fail_at`]
/// injects into this file operation, before it is made.
#[cfg(feature = "sim-disk")]
macro_rules! inject {
    ($disk:expr, $path:expr, $what:expr, $at:expr) => {{
        if let Disk::Sim(s) = $disk {
            s.injected($path, $what).map_err(|e| IoError::new($what, $path, $at, e))?;
        }
    }};
}
#[cfg(not(feature = "sim-disk"))]
macro_rules! inject {
    ($disk:expr, $path:expr, $what:expr, $at:expr) => {{
        let _ = (&$disk, &$path);
    }};
}
pub(crate) use inject;

impl Disk {
    pub fn is_real(&self) -> bool {
        matches!(self, Disk::Real)
    }

    /// `mkdir`; the error keeps its kind (`AlreadyExists` is often expected).
    pub fn create_dir(&self, dir: &Path) -> std::io::Result<()> {
        std::fs::create_dir(dir)?;
        #[cfg(feature = "sim-disk")]
        if let Disk::Sim(s) = self {
            if let Some(rel) = s.relative(dir) {
                s.record(crate::sim_disk::SimOp::Mkdir(rel))?;
            }
        }
        Ok(())
    }

    /// fsync the directory `dir` (its entries become durable).
    pub fn fsync_dir(&self, dir: &Path) -> Result<(), IoError> {
        inject!(self, dir, "fsync directory", None);
        crate::publish::fsync_dir(dir)?;
        note!(self, dir, |rel| crate::sim_disk::SimOp::Fsync(rel));
        Ok(())
    }

    /// `rename(from, to)` (within one directory).
    pub fn rename(&self, from: &Path, to: &Path) -> Result<(), IoError> {
        inject!(self, to, "renaming into place", None);
        std::fs::rename(from, to).map_err(|e| IoError::new("renaming into place", to, None, e))?;
        note!(self, (from, to), |a, b| crate::sim_disk::SimOp::Rename(a, b));
        Ok(())
    }

    /// Swap `a` and `b` atomically (`renameat2(RENAME_EXCHANGE)`, within
    /// one directory): publishing over an existing output.
    pub fn exchange(&self, a: &Path, b: &Path) -> Result<(), IoError> {
        inject!(self, b, "swapping in", None);
        crate::publish::rename_exchange(a, b).map_err(|e| IoError::new("swapping in", b, None, e))?;
        note!(self, (a, b), |x, y| crate::sim_disk::SimOp::Exchange(x, y));
        Ok(())
    }

    /// Remove `p`: a directory with everything in it (recorded child by
    /// child, as `remove_dir_all` unlinks them), else a file. The error
    /// keeps its kind (`NotFound` is often expected).
    pub fn remove_path(&self, p: &Path) -> std::io::Result<()> {
        #[cfg(feature = "sim-disk")]
        let doomed = match self {
            Disk::Sim(s) => s.relative(p).map(|rel| s.subtree_bottom_up(&rel)).unwrap_or_default(),
            Disk::Real => Vec::new(),
        };
        if p.is_dir() {
            std::fs::remove_dir_all(p)?;
        } else {
            std::fs::remove_file(p)?;
        }
        #[cfg(feature = "sim-disk")]
        if let Disk::Sim(s) = self {
            for rel in doomed {
                s.record(crate::sim_disk::SimOp::Unlink(rel))?;
            }
        }
        Ok(())
    }

    /// Create (or truncate) `path` for writing.
    pub fn create(&self, path: &Path) -> Result<DiskFile, IoError> {
        inject!(self, path, "creating", None);
        let file = File::create(path).map_err(|e| IoError::new("creating", path, None, e))?;
        note!(self, path, |rel| crate::sim_disk::SimOp::Create(rel));
        Ok(DiskFile { file, path: path.to_path_buf(), disk: self.clone() })
    }

    /// Open the regular file `path` with `opts` (see
    /// [`crate::open_regular_with`]); a file that `opts` creates is
    /// recorded as created.
    pub fn open(&self, path: &Path, opts: &std::fs::OpenOptions, created: bool) -> Result<DiskFile, IoError> {
        let existed = std::fs::symlink_metadata(path).is_ok();
        let file = crate::open_regular_with(path, opts, 0)?;
        if created && !existed {
            note!(self, path, |rel| crate::sim_disk::SimOp::Create(rel));
        }
        Ok(DiskFile { file, path: path.to_path_buf(), disk: self.clone() })
    }

    /// Create the file `path` holding `parts` atomically and durably (see
    /// [`crate::publish_file`]), through this disk.
    pub fn publish_file(&self, tmp: &Path, path: &Path, parts: &[&[u8]]) -> Result<(), IoError> {
        let mut out = crate::OutFile::create_on(self, tmp)?;
        for p in parts {
            out.write(p)?;
        }
        out.finish()?;
        self.rename(tmp, path)?;
        self.fsync_dir(path.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new(".")))
    }
}

/// An open file whose writes, truncations and syncs go through a [`Disk`].
pub struct DiskFile {
    file: File,
    path: PathBuf,
    disk: Disk,
}

impl DiskFile {
    /// The file, for reads.
    pub fn file(&self) -> &File {
        &self.file
    }
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// `pwrite` all of `buf` at `at`.
    pub fn write_at(&self, buf: &[u8], at: u64) -> Result<(), IoError> {
        inject!(&self.disk, &self.path, "writing", Some(at));
        crate::pwrite_all(&self.file, buf, at).map_err(|e| IoError::new("writing", &self.path, Some(at), e))?;
        note!(&self.disk, &self.path, |rel| crate::sim_disk::SimOp::Write(rel, at, buf.to_vec()));
        Ok(())
    }

    pub fn set_len(&self, len: u64) -> Result<(), IoError> {
        inject!(&self.disk, &self.path, "truncating", Some(len));
        self.file.set_len(len).map_err(|e| IoError::new("truncating", &self.path, Some(len), e))?;
        note!(&self.disk, &self.path, |rel| crate::sim_disk::SimOp::SetLen(rel, len));
        Ok(())
    }

    /// `fsync` (data and metadata).
    pub fn sync_all(&self) -> Result<(), IoError> {
        inject!(&self.disk, &self.path, "fsync", None);
        self.file.sync_all().map_err(|e| IoError::new("fsync", &self.path, None, e))?;
        note!(&self.disk, &self.path, |rel| crate::sim_disk::SimOp::Fsync(rel));
        Ok(())
    }

    /// `fdatasync`: modelled like fsync (the length is data for it too).
    pub fn sync_data(&self) -> Result<(), IoError> {
        inject!(&self.disk, &self.path, "fdatasync", None);
        self.file.sync_data().map_err(|e| IoError::new("fdatasync", &self.path, None, e))?;
        note!(&self.disk, &self.path, |rel| crate::sim_disk::SimOp::Fsync(rel));
        Ok(())
    }

    /// The open file (for `flock`), kept open as long as it lives.
    pub fn into_file(self) -> File {
        self.file
    }
}
