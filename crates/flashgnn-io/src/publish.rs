//! Atomic publication of a fully written directory.
//!
//! Protocol (docs/reliability.md promise 1): every file was fsynced by
//! [`crate::OutFile::finish`]; the temporary directory is fsynced; then either
//! `rename(tmp, out)` (no dataset there) or `renameat2(tmp, out,
//! RENAME_EXCHANGE)` (swap with the existing one, which is then deleted); then
//! the parent directory is fsynced. A crash at any point leaves either the old
//! dataset or the new one at `out`, never a mixture.

use std::ffi::CString;
use std::fs::File;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use crate::{Disk, IoError};

pub fn fsync_dir(dir: &Path) -> Result<(), IoError> {
    let f = File::open(dir).map_err(|e| IoError::new("opening directory", dir, None, e))?;
    f.sync_all().map_err(|e| IoError::new("fsync directory", dir, None, e))
}

/// `create_dir_all`, durably: each directory created is made durable in its
/// parent (fsync of the parent) before the next one is created in it. An
/// fsync of a new directory, or of what is later renamed into it, does not
/// promise that the directory's own entry survives a power loss (only a
/// file system that commits its journal in order gives that); without this
/// an output published into a new directory could vanish with it
/// (docs/reliability.md § *Power-loss crash states*).
pub fn create_dir_all_durable(dir: &Path) -> Result<(), IoError> {
    let mut missing = Vec::new();
    let mut p = dir;
    while !p.as_os_str().is_empty() && std::fs::symlink_metadata(p).is_err() {
        missing.push(p);
        match p.parent() {
            Some(q) => p = q,
            None => break,
        }
    }
    for d in missing.into_iter().rev() {
        match std::fs::create_dir(d) {
            Ok(()) => fsync_dir(d.parent().filter(|q| !q.as_os_str().is_empty()).unwrap_or(Path::new(".")))?,
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && d.is_dir() => {}
            Err(e) => return Err(IoError::new("creating", d, None, e)),
        }
    }
    Ok(())
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
pub(crate) fn rename_exchange(a: &Path, b: &Path) -> std::io::Result<()> {
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

/// Files that mark a directory as flashgnn output, and the JSON key/value
/// each must hold: a dataset's `manifest.json` (`"magic"`), and the marker
/// file of `embed`, `presample`, `generate` and `recommend` outputs
/// (`"flashgnn_output"`). Python's publish (`flashgnn._durable`) keeps the
/// same list.
pub const OUTPUT_MARKERS: [(&str, &str, &str); 5] = [
    ("manifest.json", "magic", flashgnn_format::manifest::MANIFEST_MAGIC),
    ("embed.json", "flashgnn_output", "embed"),
    ("presample.json", "flashgnn_output", "presample"),
    ("generate.json", "flashgnn_output", "generate"),
    ("recommend.json", "flashgnn_output", "recommend"),
];

/// Name of the owner marker inside a temporary output directory.
pub const OWNER_FILE: &str = ".flashgnn-owner";

/// Whether the directory `dir` is flashgnn output: it holds one of
/// [`OUTPUT_MARKERS`] as a regular file with the marker's key and value.
pub fn is_flashgnn_output(dir: &Path) -> bool {
    OUTPUT_MARKERS.iter().any(|(file, key, value)| {
        let p = dir.join(file);
        if !std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_file() && m.len() < 64 << 20) {
            return false;
        }
        crate::regular::read_regular(&p)
            .ok()
            .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            .is_some_and(|v| v.get(*key).and_then(|x| x.as_str()) == Some(*value))
    })
}

fn refuse(out: &Path, why: String) -> IoError {
    IoError::new("refusing to replace", out, None, std::io::Error::new(std::io::ErrorKind::AlreadyExists, why))
}

/// The one rule for every command that publishes a directory at `out`
/// (`build`, `generate`, `embed`, `presample`, compaction), checked before
/// any work and again at publication: nothing there, or an empty directory,
/// may be written; a non-empty directory only with `force` and only when it is
/// flashgnn output ([`is_flashgnn_output`]); anything else — a regular file,
/// a symbolic link, a FIFO, a device, a directory of other files — is refused
/// by name and never moved or removed.
pub fn check_output(out: &Path, force: bool) -> Result<(), IoError> {
    // The output is published by renaming a sibling temporary onto it: its
    // last component must be a name (not `.`, `..` or the root), or the swap
    // fails only after all the work (EBUSY).
    let last = out.as_os_str().as_encoded_bytes();
    let trimmed = last.strip_suffix(b"/").unwrap_or(last);
    if out.file_name().is_none() || trimmed.ends_with(b"/.") || trimmed == b"." {
        return Err(refuse(
            out,
            "the output path must end in a directory name (not '.', '..' or '/'): it is published by renaming a new directory onto it".into(),
        ));
    }
    let meta = match std::fs::symlink_metadata(out) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(IoError::new("stat", out, None, e)),
        Ok(m) => m,
    };
    if !meta.is_dir() {
        return Err(refuse(
            out,
            format!(
                "the output path is {}, not a flashgnn output directory; it was left untouched (choose another output path or move it away)",
                crate::regular::kind_of(&meta)
            ),
        ));
    }
    let empty = std::fs::read_dir(out).map_err(|e| IoError::new("listing", out, None, e))?.next().is_none();
    if empty {
        return Ok(());
    }
    if !force {
        return Err(refuse(
            out,
            "already exists; pass --force to replace it (the old output stays intact until the new one is complete)"
                .into(),
        ));
    }
    if !is_flashgnn_output(out) {
        return Err(refuse(
            out,
            "is a non-empty directory but not flashgnn output (no manifest.json, embed.json, presample.json, generate.json or recommend.json of flashgnn's): --force replaces only flashgnn output; it was left untouched".into(),
        ));
    }
    Ok(())
}

/// The inputs a publishing command reads must survive its publication: `out`
/// may be neither one of `inputs` nor a directory holding one (`build raw raw
/// --force` over a generated input, or an input kept inside the old output,
/// would otherwise read the input and then delete it by replacing `out`).
/// Paths are compared after resolving links and `..`; an `out` that does not
/// exist yet overlaps nothing.
pub fn check_not_input(out: &Path, inputs: &[&Path]) -> Result<(), IoError> {
    let Ok(o) = std::fs::canonicalize(out) else {
        return Ok(());
    };
    for input in inputs {
        let Ok(i) = std::fs::canonicalize(input) else {
            continue;
        };
        if i.starts_with(&o) {
            let what = if i == o { "is the input".to_string() } else { format!("holds the input {}", input.display()) };
            return Err(refuse(
                out,
                format!("the output {what}: publishing would delete what is being read; it was left untouched (choose another output path)"),
            ));
        }
    }
    Ok(())
}

/// This process's identity for owner markers: (pid, start time in clock
/// ticks since boot, boot id).
fn process_identity(pid: u32) -> Option<(u64, String)> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22 (starttime), counted after the command name's closing paren.
    let rest = &stat[stat.rfind(')')? + 1..];
    let start: u64 = rest.split_whitespace().nth(19)?.parse().ok()?;
    Some((start, boot_id()))
}

fn boot_id() -> String {
    std::fs::read_to_string("/proc/sys/kernel/random/boot_id").map(|s| s.trim().to_string()).unwrap_or_default()
}

fn write_owner(disk: &Disk, dir: &Path) -> Result<(), IoError> {
    let pid = std::process::id();
    let (start, boot) = process_identity(pid).unwrap_or((0, boot_id()));
    let body = serde_json::json!({"pid": pid, "start_time": start, "boot_id": boot}).to_string();
    let p = dir.join(OWNER_FILE);
    if disk.is_real() {
        // Not charged to the fault plan, not fsynced (as before `Disk`).
        return std::fs::write(&p, body).map_err(|e| IoError::new("writing", &p, None, e));
    }
    disk.create(&p)?.write_at(body.as_bytes(), 0)
}

/// Create the temporary directory for an output at `out`:
/// `.{name}.tmp-{pid}-{nanos}` beside it, holding an owner marker (pid,
/// process start time, boot id) so that a later run can prove it stale once
/// this process is gone ([`remove_stale_tmps`]). [`publish_dir`] removes the
/// marker before the directory becomes `out`.
pub fn create_tmp_dir(out: &Path) -> Result<PathBuf, IoError> {
    create_tmp_dir_on(&Disk::Real, out)
}

/// [`create_tmp_dir`] through `disk` (the directory and its marker).
pub fn create_tmp_dir_on(disk: &Disk, out: &Path) -> Result<PathBuf, IoError> {
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let name = out.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_else(|| "dataset".into());
    let nanos =
        std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).map(|d| d.subsec_nanos()).unwrap_or(0);
    let tmp = parent.join(format!(".{name}.tmp-{}-{nanos}", std::process::id()));
    disk.create_dir(&tmp).map_err(|e| IoError::new("creating", &tmp, None, e))?;
    if let Err(e) = write_owner(disk, &tmp) {
        let _ = disk.remove_path(&tmp);
        return Err(e);
    }
    Ok(tmp)
}

/// Whether the owner marker in `dir` names a process that is gone (another
/// boot, no such pid, or the pid reused by a process started later).
fn owner_is_gone(dir: &Path) -> Option<(u64, bool)> {
    let p = dir.join(OWNER_FILE);
    if !std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_file() && m.len() < 4096) {
        return None;
    }
    let v: serde_json::Value = serde_json::from_slice(&crate::regular::read_regular(&p).ok()?).ok()?;
    let pid = v.get("pid")?.as_u64()?;
    let start = v.get("start_time")?.as_u64()?;
    let boot = v.get("boot_id")?.as_str()?.to_string();
    if boot != boot_id() {
        return Some((pid, true));
    }
    let gone = match u32::try_from(pid).ok().and_then(process_identity) {
        None => true,
        Some((s, _)) => s != start,
    };
    Some((pid, gone))
}

/// Remove the temporaries `.{name}.tmp-*` beside `out` that this code made
/// (they hold an owner marker) and whose owner process is gone: what a killed
/// build, generate, embed or presample left. A temporary without a marker,
/// or whose owner still runs, is kept. Returns what was removed (with the
/// owner's pid) for the caller to report.
pub fn remove_stale_tmps(out: &Path) -> Vec<(PathBuf, u64)> {
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    let Some(name) = out.file_name().map(|n| n.to_string_lossy().into_owned()) else {
        return Vec::new();
    };
    let prefix = format!(".{name}.tmp-");
    let Ok(entries) = std::fs::read_dir(parent) else {
        return Vec::new();
    };
    let mut removed = Vec::new();
    for e in entries.flatten() {
        if !e.file_name().to_string_lossy().starts_with(&prefix) {
            continue;
        }
        let p = e.path();
        // A real directory only (never follow a link out of the parent).
        if !std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir()) {
            continue;
        }
        if let Some((pid, true)) = owner_is_gone(&p) {
            if std::fs::remove_dir_all(&p).is_ok() {
                removed.push((p, pid));
            }
        }
    }
    removed.sort();
    removed
}

/// Publish `tmp` as `out`. When `out` exists it is replaced atomically and the
/// old contents are removed afterwards. `out` is checked again with
/// [`check_output`] (with `force`: the caller checked the flag before any
/// work), so a path that became a file, a link or a foreign directory in the
/// meantime is refused, not swapped.
pub fn publish_dir(tmp: &Path, out: &Path) -> Result<(), IoError> {
    publish_dir_on(&Disk::Real, tmp, out)
}

/// [`publish_dir`] through `disk`: the marker's removal, the fsyncs, the
/// rename or swap and the old output's removal.
pub fn publish_dir_on(disk: &Disk, tmp: &Path, out: &Path) -> Result<(), IoError> {
    match disk.remove_path(&tmp.join(OWNER_FILE)) {
        Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
            return Err(IoError::new("removing", tmp.join(OWNER_FILE), None, e))
        }
        _ => {}
    }
    disk.fsync_dir(tmp)?;
    let parent = out.parent().filter(|p| !p.as_os_str().is_empty()).unwrap_or(Path::new("."));
    check_output(out, true)?;
    if std::fs::symlink_metadata(out).is_ok() {
        disk.exchange(tmp, out)?;
        disk.fsync_dir(parent)?;
        // `tmp` now holds the previous output: mark it ours so that a crash
        // before it is gone leaves a temporary the next run may remove.
        let _ = write_owner(disk, tmp);
        disk.remove_path(tmp).map_err(|e| IoError::new("removing previous dataset", tmp, None, e))?;
    } else {
        disk.rename(tmp, out)?;
        disk.fsync_dir(parent)?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn create_dir_all_durable_makes_missing_parents_only() {
        let d = tempfile::tempdir().unwrap();
        let deep = d.path().join("a").join("b").join("c");
        create_dir_all_durable(&deep).unwrap();
        assert!(deep.is_dir());
        create_dir_all_durable(&deep).unwrap(); // already there: nothing to do
        std::fs::write(d.path().join("f"), b"x").unwrap();
        let e = create_dir_all_durable(&d.path().join("f").join("g")).unwrap_err().to_string();
        assert!(e.contains("creating") && e.contains("f/g"), "{e}");
    }

    #[test]
    fn replaces_existing_atomically() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("ds");
        std::fs::create_dir(&out).unwrap();
        std::fs::write(out.join("old"), b"1").unwrap();
        let tmp = d.path().join(".ds.tmp");
        std::fs::create_dir(&tmp).unwrap();
        std::fs::write(tmp.join("new"), b"2").unwrap();
        std::fs::write(out.join("manifest.json"), br#"{"magic": "flashgnn-dataset"}"#).unwrap();
        publish_dir(&tmp, &out).unwrap();
        assert!(out.join("new").exists() && !out.join("old").exists());
        assert!(!tmp.exists());
    }

    #[test]
    fn force_replaces_only_flashgnn_output() {
        let d = tempfile::tempdir().unwrap();
        let user = d.path().join("user");
        std::fs::create_dir(&user).unwrap();
        std::fs::write(user.join("thesis.tex"), b"mine").unwrap();
        let e = check_output(&user, true).unwrap_err().to_string();
        assert!(e.contains("not flashgnn output") && e.contains("user"), "{e}");
        let file = d.path().join("file");
        std::fs::write(&file, b"mine").unwrap();
        assert!(check_output(&file, true).unwrap_err().to_string().contains("a regular file"));
        std::os::unix::fs::symlink(&user, d.path().join("link")).unwrap();
        assert!(check_output(&d.path().join("link"), true).unwrap_err().to_string().contains("symbolic link"));
        let tmp = create_tmp_dir(&file).unwrap();
        assert!(publish_dir(&tmp, &file).is_err());
        assert_eq!(std::fs::read(&file).unwrap(), b"mine");
        assert!(check_output(&d.path().join("absent"), false).is_ok());
        for p in [".", "..", "/", "x/.", "x/..", "x/./"] {
            let e = check_output(Path::new(p), true).unwrap_err().to_string();
            assert!(e.contains("must end in a directory name"), "{p}: {e}");
        }
        assert!(check_output(&d.path().join("absent/"), false).is_ok());
    }

    #[test]
    fn output_never_the_input_or_its_parent() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("ds");
        std::fs::create_dir_all(out.join("raw")).unwrap();
        let e = check_not_input(&out, &[&out]).unwrap_err().to_string();
        assert!(e.contains("is the input"), "{e}");
        let e = check_not_input(&out, &[&out.join("raw/../raw")]).unwrap_err().to_string();
        assert!(e.contains("holds the input"), "{e}");
        std::os::unix::fs::symlink(&out, d.path().join("alias")).unwrap();
        assert!(check_not_input(&out, &[&d.path().join("alias")]).is_err());
        assert!(check_not_input(&out.join("raw"), &[&out]).is_ok());
        assert!(check_not_input(&d.path().join("absent"), &[&out]).is_ok());
    }

    #[test]
    fn stale_tmps_of_dead_owners_only() {
        let d = tempfile::tempdir().unwrap();
        let out = d.path().join("ds");
        let live = create_tmp_dir(&out).unwrap();
        let dead = d.path().join(".ds.tmp-1-1");
        std::fs::create_dir(&dead).unwrap();
        let body = serde_json::json!({"pid": 1u64 << 40, "start_time": 1, "boot_id": boot_id()}).to_string();
        std::fs::write(dead.join(OWNER_FILE), body).unwrap();
        let foreign = d.path().join(".ds.tmp-x");
        std::fs::create_dir(&foreign).unwrap();
        let removed = remove_stale_tmps(&out);
        assert_eq!(removed, vec![(dead.clone(), 1u64 << 40)]);
        assert!(live.exists() && foreign.exists() && !dead.exists());
    }
}
