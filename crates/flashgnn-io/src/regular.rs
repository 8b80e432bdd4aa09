//! Opening only regular files (docs/reliability.md promise 3: never hang).
//!
//! A FIFO, socket or device in place of a dataset or input file would block
//! a plain `open` (a FIFO's open waits for a writer) or a read forever. Every
//! open of a dataset file, an input file or a side file goes through
//! [`open_regular`]: the file is opened with `O_NONBLOCK` (so opening a FIFO
//! returns at once), `fstat`ed, refused by name and file type unless it is a
//! regular file, and only then switched back to blocking mode. Symbolic links
//! are followed (users link inputs and datasets); what the link leads to must
//! be a regular file.

use std::fs::{File, Metadata, OpenOptions};
use std::io::Read;
use std::os::unix::fs::{FileTypeExt, OpenOptionsExt};
use std::os::unix::io::AsRawFd;
use std::path::Path;

use crate::IoError;

/// Words for a file type in error messages ("a FIFO (named pipe)", ...).
pub fn kind_of(meta: &Metadata) -> &'static str {
    let t = meta.file_type();
    if t.is_file() {
        "a regular file"
    } else if t.is_dir() {
        "a directory"
    } else if t.is_symlink() {
        "a symbolic link"
    } else if t.is_fifo() {
        "a FIFO (named pipe)"
    } else if t.is_socket() {
        "a socket"
    } else if t.is_block_device() {
        "a block device"
    } else if t.is_char_device() {
        "a character device"
    } else {
        "not a regular file"
    }
}

fn not_regular(op: &'static str, path: &Path, meta: &Metadata) -> IoError {
    IoError::new(
        op,
        path,
        None,
        std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("is {}, not a regular file: refusing to open it", kind_of(meta)),
        ),
    )
}

/// Open `path` for reading, refusing anything but a regular file (after
/// following symbolic links) without blocking.
pub fn open_regular(path: &Path) -> Result<File, IoError> {
    open_regular_with(path, OpenOptions::new().read(true), 0)
}

/// [`open_regular`] with the caller's options (write, append, create) and
/// extra `open(2)` flags (`O_DIRECT`). A FIFO opened for writing with
/// `O_NONBLOCK` and no reader fails with `ENXIO`: the path is `stat`ed and
/// the refusal names its type rather than the errno.
pub fn open_regular_with(path: &Path, opts: &OpenOptions, extra_flags: i32) -> Result<File, IoError> {
    let mut o = opts.clone();
    o.custom_flags(extra_flags | libc::O_NONBLOCK | libc::O_CLOEXEC);
    let f = match o.open(path) {
        Ok(f) => f,
        Err(e) => {
            if let Ok(m) = std::fs::metadata(path) {
                if !m.is_file() {
                    return Err(not_regular("opening", path, &m));
                }
            }
            return Err(IoError::new("opening", path, None, e));
        }
    };
    let meta = f.metadata().map_err(|e| IoError::new("stat", path, None, e))?;
    if !meta.is_file() {
        return Err(not_regular("opening", path, &meta));
    }
    if let Some(fs) = pseudo_fs(&f) {
        return Err(IoError::new(
            "opening",
            path,
            None,
            std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!(
                    "is a file of {fs}, whose size ({} B) is not its content (a read may never end): refusing to open it",
                    meta.len()
                ),
            ),
        ));
    }
    // Back to blocking mode (O_NONBLOCK has no effect on regular files on
    // Linux, but later code must not depend on that).
    let fd = f.as_raw_fd();
    // SAFETY: fcntl on a descriptor owned by `f`, alive for the calls.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 || unsafe { libc::fcntl(fd, libc::F_SETFL, flags & !libc::O_NONBLOCK) } < 0 {
        return Err(IoError::new("fcntl", path, None, std::io::Error::last_os_error()));
    }
    Ok(f)
}

/// The kernel pseudo file system `f` lives on (`/proc`, `/sys`, debugfs,
/// tracefs, securityfs, configfs): "regular" files there report a size
/// unrelated to what a read returns (`/proc/self/pagemap` reads for hundreds
/// of GiB, `/proc/kmsg` blocks), so they are refused like devices.
fn pseudo_fs(f: &File) -> Option<&'static str> {
    // SAFETY: fstatfs on a descriptor owned by `f` into a zeroed struct.
    let mut st: libc::statfs = unsafe { std::mem::zeroed() };
    if unsafe { libc::fstatfs(f.as_raw_fd(), &mut st) } != 0 {
        return None;
    }
    #[allow(clippy::unnecessary_cast)]
    match st.f_type as i64 {
        0x9fa0 => Some("procfs (/proc)"),
        0x6265_6572 => Some("sysfs (/sys)"),
        0x6462_6720 => Some("debugfs"),
        0x7472_6163 => Some("tracefs"),
        0x7363_6673 => Some("securityfs"),
        0x6265_6570 => Some("configfs"),
        _ => None,
    }
}

/// Read the whole of the regular file `path` (manifests, JSON side files,
/// logs). `Err` with kind NotFound when it does not exist.
pub fn read_regular(path: &Path) -> Result<Vec<u8>, IoError> {
    let mut f = open_regular(path)?;
    let mut v = Vec::new();
    f.read_to_end(&mut v).map_err(|e| IoError::new("reading", path, None, e))?;
    Ok(v)
}

/// Whether the name `path` is present, for optional inputs: `Ok(false)` when
/// nothing has that name; `Ok(true)` when it exists and leads somewhere;
/// `Err` naming it when the name exists but cannot be followed (a dangling or
/// looping symbolic link, a permission error) — such an input is never
/// silently treated as absent.
pub fn present(path: &Path) -> Result<bool, IoError> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(false),
        Err(e) => Err(IoError::new("stat", path, None, e)),
        Ok(_) => match std::fs::metadata(path) {
            Ok(_) => Ok(true),
            Err(e) => {
                let why = if e.raw_os_error() == Some(libc::ELOOP) {
                    "is a symbolic link that loops".to_string()
                } else if e.kind() == std::io::ErrorKind::NotFound {
                    match std::fs::read_link(path) {
                        Ok(t) => format!("is a dangling symbolic link (to {}, which does not exist)", t.display()),
                        Err(_) => "is a dangling symbolic link".to_string(),
                    }
                } else {
                    format!("exists but cannot be read: {e}")
                };
                Err(IoError::new("opening", path, None, std::io::Error::new(std::io::ErrorKind::InvalidInput, why)))
            }
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fifo_is_refused_without_blocking() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("pipe");
        let c = std::ffi::CString::new(p.to_str().unwrap()).unwrap();
        // SAFETY: valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        let e = open_regular(&p).unwrap_err().to_string();
        assert!(e.contains("pipe") && e.contains("FIFO"), "{e}");
        let e = open_regular_with(&p, OpenOptions::new().write(true), 0).unwrap_err().to_string();
        assert!(e.contains("FIFO"), "{e}");
        let e = open_regular(d.path()).unwrap_err().to_string();
        assert!(e.contains("a directory"), "{e}");
        std::fs::write(d.path().join("f"), b"x").unwrap();
        assert_eq!(read_regular(&d.path().join("f")).unwrap(), b"x");
    }

    #[test]
    fn proc_and_sys_files_are_refused() {
        for p in ["/proc/self/pagemap", "/proc/self/status", "/sys/kernel/mm/transparent_hugepage/enabled"] {
            if std::fs::metadata(p).is_ok_and(|m| m.is_file()) {
                let e = open_regular(Path::new(p)).unwrap_err().to_string();
                assert!(e.contains(p) && e.contains("is not its content"), "{e}");
            }
        }
    }

    #[test]
    fn present_names_broken_links() {
        let d = tempfile::tempdir().unwrap();
        assert!(!present(&d.path().join("none")).unwrap());
        std::os::unix::fs::symlink(d.path().join("none"), d.path().join("dangling")).unwrap();
        assert!(present(&d.path().join("dangling")).unwrap_err().to_string().contains("dangling"));
        std::os::unix::fs::symlink(d.path().join("loop"), d.path().join("loop")).unwrap();
        assert!(present(&d.path().join("loop")).unwrap_err().to_string().contains("loops"));
    }
}
