//! The generation files under `DATASET/mut/`: `CURRENT` (which generation is
//! live), the per-generation free-id list, and cleanup of leftovers.
//!
//! ```text
//! DATASET/                  generation 0: the user's dataset, never modified
//! DATASET/mut/LOCK          empty; a writable open holds flock(LOCK_EX) on it (one writer)
//! DATASET/mut/CURRENT       {"magic": "flashgnn-mutable", "version": 2, "generation": N,
//!                            "base_seq": S, "root_dataset_id": R, "generation_dataset_id": D,
//!                            "crc32c": C}
//! DATASET/mut/wal-N.log     the log of generation N (frames with seq > S)
//! DATASET/mut/gen-N/        generation N > 0: a complete dataset built by the importer
//! DATASET/mut/free-N.bin    generation N > 0: ids deleted and not reused (isolated in gen-N)
//! ```
//!
//! `CURRENT` is replaced by writing `CURRENT.tmp`, fsync, rename, fsync of
//! `mut/`: after a crash it names either the old or the new generation, and
//! everything it names was made durable before the rename. `crc32c` is the
//! CRC32C of the compact JSON of the other keys in sorted order.
//!
//! Version 2 binds the store to its dataset: `root_dataset_id` is the
//! manifest `dataset_id` of generation 0 (the dataset directory itself) and
//! `generation_dataset_id` that of generation N's base (JSON `null` for a
//! format-v1 dataset, which has none). Every reader checks both
//! ([`check_root_id`], [`check_generation_id`]), so a `mut/` copied from
//! another dataset — consistent with itself after a compaction, since each
//! `gen-N` and its log carry their own id — is refused. Version 1 (no ids) is
//! still read, unchecked, and rewritten as version 2 by the next writable open.
//!
//! Free list: `magic "FGFREE01" | count u64 | count x id u64 | crc32c u32`
//! (CRC over everything before it), little-endian.

use std::path::{Path, PathBuf};

use flashgnn_io::{Disk, IoError};

use crate::{MutError, Result};

pub const MUT_DIR: &str = "mut";
pub const CURRENT_FILE: &str = "CURRENT";
pub const LOCK_FILE: &str = "LOCK";
/// Generation `N` (N > 0) lives in `mut/gen-N`.
pub const GEN_PREFIX: &str = "gen-";
pub const CURRENT_MAGIC: &str = "flashgnn-mutable";
/// The version written: bound to the dataset ids of generation 0 and of the
/// current generation's base.
pub const CURRENT_VERSION: u64 = 2;
/// No dataset ids; still read (nothing to check) and rewritten as the
/// current version by a writable open.
pub const CURRENT_VERSION_1: u64 = 1;
const FREE_MAGIC: &[u8; 8] = b"FGFREE01";

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Current {
    pub generation: u64,
    /// Last batch sequence number folded into the generation's base.
    pub base_seq: u64,
    /// The dataset ids this CURRENT is bound to (version 2); None for a
    /// version-1 CURRENT, which records none.
    pub ids: Option<StoreIds>,
}

/// The datasets a version-2 `CURRENT` is bound to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct StoreIds {
    /// `dataset_id` of generation 0, the dataset directory itself (None: a format-v1 dataset).
    pub root: Option<u64>,
    /// `dataset_id` of the current generation's base (equal to `root` for generation 0).
    pub generation: Option<u64>,
}

impl Current {
    /// Generation 0 before anything was logged, bound to `root_id`.
    pub fn initial(root_id: Option<u64>) -> Current {
        Current { generation: 0, base_seq: 0, ids: Some(StoreIds { root: root_id, generation: root_id }) }
    }
}

pub fn mut_dir(root: &Path) -> PathBuf {
    root.join(MUT_DIR)
}

pub fn gen_dir(root: &Path, generation: u64) -> PathBuf {
    if generation == 0 {
        root.to_path_buf()
    } else {
        mut_dir(root).join(gen_name(generation))
    }
}

/// The directory name of generation `generation` under `mut/`.
pub fn gen_name(generation: u64) -> String {
    format!("{GEN_PREFIX}{generation}")
}

pub fn free_path(root: &Path, generation: u64) -> PathBuf {
    mut_dir(root).join(format!("free-{generation}.bin"))
}

pub fn wal_path(root: &Path, generation: u64) -> PathBuf {
    mut_dir(root).join(crate::wal::wal_name(generation))
}

fn body(c: &Current) -> serde_json::Value {
    // serde_json's map is ordered by key: this is the canonical form.
    match c.ids {
        None => serde_json::json!({
            "magic": CURRENT_MAGIC, "version": CURRENT_VERSION_1,
            "generation": c.generation, "base_seq": c.base_seq,
        }),
        Some(ids) => serde_json::json!({
            "magic": CURRENT_MAGIC, "version": CURRENT_VERSION,
            "generation": c.generation, "base_seq": c.base_seq,
            "root_dataset_id": ids.root, "generation_dataset_id": ids.generation,
        }),
    }
}

/// A dataset id for messages.
fn id_text(id: Option<u64>) -> String {
    id.map_or("none (format v1)".to_string(), |i| i.to_string())
}

/// Byte offset of `"key"` in `root`'s CURRENT (0 when it cannot be found):
/// error paths only.
fn key_offset(root: &Path, key: &str) -> u64 {
    let pat = format!("\"{key}\"");
    flashgnn_io::read_regular(&mut_dir(root).join(CURRENT_FILE))
        .ok()
        .and_then(|t| t.windows(pat.len()).position(|w| w == pat.as_bytes()))
        .unwrap_or(0) as u64
}

/// Refuse a `CURRENT` bound to another dataset than the one at `root`
/// (`root_id`: its manifest's `dataset_id`). A version-1 `CURRENT` records
/// no id and passes.
pub fn check_root_id(root: &Path, c: &Current, root_id: Option<u64>) -> Result<()> {
    let Some(ids) = c.ids else { return Ok(()) };
    if ids.root == root_id {
        return Ok(());
    }
    let path = mut_dir(root).join(CURRENT_FILE);
    Err(crate::corrupt(
        &path.display().to_string(),
        key_offset(root, "root_dataset_id"),
        format!(
            "root_dataset_id {} is not this dataset's dataset_id {} ({}): the mutable store (mut/) of another \
             dataset; refusing to serve its mutations here (restore this dataset's own mut/, or remove mut/ to \
             drop them)",
            id_text(ids.root),
            id_text(root_id),
            root.join("manifest.json").display()
        ),
    ))
}

/// Refuse a current generation whose base (`gen_dir`, manifest `dataset_id`
/// `gen_id`) is not the one `CURRENT` was written for. Version 1: passes.
pub fn check_generation_id(root: &Path, c: &Current, gen_id: Option<u64>) -> Result<()> {
    let Some(ids) = c.ids else { return Ok(()) };
    if ids.generation == gen_id {
        return Ok(());
    }
    let path = mut_dir(root).join(CURRENT_FILE);
    Err(crate::corrupt(
        &path.display().to_string(),
        key_offset(root, "generation_dataset_id"),
        format!(
            "generation_dataset_id {} is not the dataset_id {} of generation {}'s base ({}): that base is not \
             the one this store was written for",
            id_text(ids.generation),
            id_text(gen_id),
            c.generation,
            gen_dir(root, c.generation).join("manifest.json").display()
        ),
    ))
}

/// Whether the dataset at `root` has a mutable store: `Ok(false)` when there
/// is no `mut` entry at all, `Ok(true)` when `mut/` is a directory (or a link
/// to one). Anything else named `mut` — a regular file, a FIFO, a dangling
/// link — is refused as corruption naming it: ignoring it would silently
/// drop every acknowledged mutation. Every reader of the store (writable and
/// read-only opens, samplers, `verify`) asks this first.
pub fn store_present(root: &Path) -> Result<bool> {
    let mdir = mut_dir(root);
    match std::fs::symlink_metadata(&mdir) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(IoError::new("inspecting", &mdir, None, e).into()),
        Ok(_) => {}
    }
    match std::fs::metadata(&mdir) {
        Ok(m) if m.is_dir() => Ok(true),
        Ok(m) => Err(crate::corrupt(
            &mdir.display().to_string(),
            0,
            format!(
                "is {} where the mutable store's directory must be; refusing to read the dataset without its \
                 acknowledged mutations (restore the directory, or remove it to drop them)",
                flashgnn_io::regular::kind_of(&m)
            ),
        )),
        Err(e) => Err(crate::corrupt(
            &mdir.display().to_string(),
            0,
            format!("is a link that does not resolve to the mutable store's directory ({e})"),
        )),
    }
}

/// `Ok(false)` when nothing exists at `path`, `Ok(true)` for a regular file
/// (or a link to one); any other kind (directory, FIFO, socket, device,
/// dangling link) is corruption naming it — never opened, so a FIFO cannot
/// block the reader.
pub fn regular_file(path: &Path) -> Result<bool> {
    match std::fs::symlink_metadata(path) {
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(IoError::new("inspecting", path, None, e).into()),
        Ok(_) => {}
    }
    match std::fs::metadata(path) {
        Ok(m) if m.is_file() => Ok(true),
        Ok(m) => Err(crate::corrupt(
            &path.display().to_string(),
            0,
            format!("is {}, not a regular file", flashgnn_io::regular::kind_of(&m)),
        )),
        Err(e) => Err(crate::corrupt(&path.display().to_string(), 0, format!("is a dangling link ({e})"))),
    }
}

/// Like [`regular_file`] for a file that `mut/CURRENT` requires (the current
/// generation's log or free list): missing is corruption, naming it (the
/// acknowledged batches it held are gone), not a plain "file not found".
pub fn required_file(path: &Path, what: &str) -> Result<()> {
    if regular_file(path)? {
        return Ok(());
    }
    // Offset 0, as for a file of the wrong kind: the whole file is what is at fault.
    Err(crate::corrupt(
        &path.display().to_string(),
        0,
        format!("missing, but mut/CURRENT names it ({what}): the store cannot be read without it"),
    ))
}

/// Read `mut/CURRENT`; None when it does not exist.
pub fn read_current(root: &Path) -> Result<Option<Current>> {
    let path = mut_dir(root).join(CURRENT_FILE);
    if !store_present(root)? || !regular_file(&path)? {
        return Ok(None);
    }
    let text = match flashgnn_io::read_regular(&path) {
        Ok(t) => t,
        Err(e) if e.source.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let name = path.display().to_string();
    // Byte offset of a key's text (its first occurrence), for errors; 0 when absent.
    let at = |k: &str| {
        let pat = format!("\"{k}\"");
        text.windows(pat.len()).position(|w| w == pat.as_bytes()).unwrap_or(0)
    };
    let bad_at = |off: usize, m: String| crate::corrupt(&name, off as u64, m);
    let bad = |m: String| bad_at(0, m);
    let v: serde_json::Value = serde_json::from_slice(&text).map_err(|e| {
        // serde reports line/column (1-based); turn them into a byte offset.
        let line_start: usize = text.split(|&b| b == b'\n').take(e.line().saturating_sub(1)).map(|l| l.len() + 1).sum();
        bad_at(line_start + e.column().saturating_sub(1), format!("not JSON ({e}) (corrupt CURRENT)"))
    })?;
    let field = |k: &str| v.get(k).ok_or_else(|| bad(format!("missing field {k:?}")));
    if field("magic")?.as_str() != Some(CURRENT_MAGIC) {
        return Err(bad_at(at("magic"), format!("magic {} is not {CURRENT_MAGIC:?}", field("magic")?)));
    }
    let num =
        |k: &str| field(k)?.as_u64().ok_or_else(|| bad_at(at(k), format!("field {k:?} is not an unsigned integer")));
    let version = num("version")?;
    if version != CURRENT_VERSION && version != CURRENT_VERSION_1 {
        return Err(bad_at(
            at("version"),
            format!("version {version}; this reader supports versions {CURRENT_VERSION_1} and {CURRENT_VERSION}"),
        ));
    }
    // A dataset id: an unsigned integer, or null for a format-v1 dataset (none).
    let id = |k: &str| -> Result<Option<u64>> {
        let f = field(k)?;
        if f.is_null() {
            return Ok(None);
        }
        f.as_u64()
            .map(Some)
            .ok_or_else(|| bad_at(at(k), format!("field {k:?} is neither an unsigned integer nor null")))
    };
    let ids = if version == CURRENT_VERSION {
        Some(StoreIds { root: id("root_dataset_id")?, generation: id("generation_dataset_id")? })
    } else {
        None
    };
    let c = Current { generation: num("generation")?, base_seq: num("base_seq")?, ids };
    let computed = crc32c::crc32c(body(&c).to_string().as_bytes()) as u64;
    let stored = num("crc32c")?;
    if stored != computed {
        return Err(bad_at(at("crc32c"), format!("crc32c {stored} != computed {computed}")));
    }
    Ok(Some(c))
}

/// Replace `mut/CURRENT` atomically and durably (version 2; version 1 when
/// `c.ids` is None, which only tests write).
pub fn write_current(disk: &Disk, root: &Path, c: &Current) -> Result<()> {
    let dir = mut_dir(root);
    let mut v = body(c);
    let crc = crc32c::crc32c(v.to_string().as_bytes());
    v.as_object_mut().expect("object").insert("crc32c".into(), crc.into());
    let text = serde_json::to_string_pretty(&v).expect("serialises");
    disk.publish_file(&dir.join("CURRENT.tmp"), &dir.join(CURRENT_FILE), &[text.as_bytes(), b"\n"])?;
    Ok(())
}

pub fn write_free(disk: &Disk, path: &Path, ids: &[u64]) -> Result<()> {
    let mut b = Vec::with_capacity(20 + ids.len() * 8);
    b.extend_from_slice(FREE_MAGIC);
    b.extend_from_slice(&(ids.len() as u64).to_le_bytes());
    ids.iter().for_each(|v| b.extend_from_slice(&v.to_le_bytes()));
    let c = crc32c::crc32c(&b);
    b.extend_from_slice(&c.to_le_bytes());
    let mut out = flashgnn_io::OutFile::create_on(disk, path)?;
    out.write(&b)?;
    out.finish()?;
    Ok(())
}

pub fn read_free(path: &Path) -> Result<Vec<u64>> {
    required_file(path, "the current generation's free-id list")?;
    let b = flashgnn_io::read_regular(path)?;
    let name = path.display().to_string();
    let bad = |off: usize, m: String| crate::corrupt(&name, off as u64, m);
    if b.len() < 20 || &b[..8] != FREE_MAGIC {
        return Err(bad(0, "not a flashgnn free-id list (bad magic or shorter than 20 bytes)".into()));
    }
    let count = u64::from_le_bytes(b[8..16].try_into().expect("8 bytes"));
    let want = count.checked_mul(8).and_then(|x| x.checked_add(20));
    if want != Some(b.len() as u64) {
        return Err(bad(8, format!("count {count} does not match the file length {}", b.len())));
    }
    let end = b.len() - 4;
    let stored = u32::from_le_bytes(b[end..].try_into().expect("4 bytes"));
    let computed = crc32c::crc32c(&b[..end]);
    if stored != computed {
        return Err(bad(end, format!("crc32c {stored:#010x} != computed {computed:#010x}")));
    }
    Ok(b[16..end].chunks_exact(8).map(|c| u64::from_le_bytes(c.try_into().expect("8 bytes"))).collect())
}

/// Entries under `mut/` that the current generation does not use:
/// interrupted compactions (temporary inputs, importer temp dirs, a new
/// generation never switched to) and old generations never deleted.
pub fn leftovers(root: &Path, c: &Current) -> Result<Vec<String>> {
    let dir = mut_dir(root);
    let keep = [
        CURRENT_FILE.to_string(),
        LOCK_FILE.to_string(),
        crate::wal::wal_name(c.generation),
        gen_name(c.generation),
        format!("free-{}.bin", c.generation),
    ];
    let entries = std::fs::read_dir(&dir).map_err(|e| IoError::new("listing", &dir, None, e))?;
    // A `gen-K` that is neither empty nor flashgnn output (a user's file, link or
    // directory) is not ours to remove: the --force rule of every publishing
    // command (flashgnn_io::check_output) applies, and compaction refuses it
    // by name when it would publish there.
    let ours = |n: &str| {
        let p = dir.join(n);
        !n.starts_with(GEN_PREFIX)
            || std::fs::symlink_metadata(&p).is_ok_and(|m| m.is_dir())
                && (std::fs::read_dir(&p).is_ok_and(|mut e| e.next().is_none())
                    || flashgnn_io::publish::is_flashgnn_output(&p))
    };
    let mut names: Vec<String> = entries
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !keep.contains(n) && ours(n))
        .collect();
    names.sort();
    Ok(names)
}

/// Take the writer lock: `flock(LOCK_EX | LOCK_NB)` on `mut/LOCK` (created
/// if missing; `mut/` must exist). The lock lives as long as the returned
/// file: one writable [`crate::MutableGraph`] per dataset, across processes
/// and within one (flock locks belong to the open file description).
pub fn lock_writer(disk: &Disk, root: &Path) -> Result<std::fs::File> {
    let path = mut_dir(root).join(LOCK_FILE);
    let f = disk
        .open(&path, std::fs::OpenOptions::new().read(true).write(true).create(true).truncate(false), true)?
        .into_file();
    match flashgnn_io::try_lock_exclusive(&f) {
        Ok(true) => Ok(f),
        Ok(false) => Err(MutError::Unavailable(format!(
            "{}: the mutable store is open for writing by another process (flashgnn serve? flashgnn compact?); \
             close it first",
            path.display()
        ))),
        Err(e) => Err(IoError::new("locking (flock)", &path, None, e).into()),
    }
}

/// Remove `p`: a directory with everything in it, else a file.
pub(crate) fn remove_path(disk: &Disk, p: &Path) -> std::io::Result<()> {
    disk.remove_path(p)
}

/// Remove the generation directory `p` (`mut/gen-K`), crash-safely: it is
/// first renamed to `mut/.gen-K.removing`, then removed. A crash in the middle
/// of `remove_dir_all` on `gen-K` itself would leave a `gen-K` that has lost
/// its manifest but kept other files — no longer recognisable as flashgnn
/// output, so never removed by [`clean_leftovers`] and refused as a
/// compaction's output (a user's `gen-K` is kept by rule); the rename is
/// fsynced (in `mut/`) before the removal starts. The dot-name is one
/// only this code makes, so [`leftovers`] counts it ours. Every removal of a
/// generation directory (old generation after a switch, leftover, compaction
/// output left by a crash) goes through here.
pub(crate) fn remove_gen_dir(disk: &Disk, p: &Path) -> Result<()> {
    let name = p.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let doomed = p.with_file_name(format!(".{name}.removing"));
    if std::fs::symlink_metadata(&doomed).is_ok() {
        remove_path(disk, &doomed).map_err(|e| IoError::new("removing leftover", &doomed, None, e))?;
    }
    disk.rename(p, &doomed)?;
    // The rename must be durable before the first file inside is removed: a
    // file system that persists each directory's operations on their own
    // (not ext4, whose journal commits in order) could otherwise keep the
    // removal of `gen-K/manifest.json` and lose the rename.
    disk.fsync_dir(p.parent().unwrap_or(Path::new(".")))?;
    remove_path(disk, &doomed).map_err(|e| IoError::new("removing leftover", &doomed, None, e))?;
    Ok(())
}

/// Remove every [`leftovers`] entry (generation directories through
/// [`remove_gen_dir`]).
pub fn clean_leftovers(disk: &Disk, root: &Path, c: &Current) -> Result<Vec<String>> {
    let dir = mut_dir(root);
    let removed = leftovers(root, c)?;
    for name in &removed {
        let p = dir.join(name);
        if name.starts_with(GEN_PREFIX) && p.is_dir() {
            remove_gen_dir(disk, &p)?;
        } else {
            remove_path(disk, &p).map_err(|e| IoError::new("removing leftover", &p, None, e))?;
        }
    }
    if !removed.is_empty() {
        disk.fsync_dir(&dir)?;
    }
    Ok(removed)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn store_entries_of_the_wrong_kind_are_refused_by_name() {
        // A `mut` that is not a directory (acknowledged mutations would be dropped) and a
        // CURRENT that is not a regular file are corruption naming the path; absence is not.
        let t = tempfile::tempdir().unwrap();
        assert!(!store_present(t.path()).unwrap());
        assert_eq!(read_current(t.path()).unwrap(), None);
        std::fs::write(t.path().join(MUT_DIR), b"x").unwrap();
        let e = store_present(t.path()).unwrap_err();
        assert!(matches!(e, MutError::Corrupt(_)), "{e}");
        assert!(e.to_string().contains("/mut: byte offset 0: is a regular file"), "{e}");
        assert!(read_current(t.path()).is_err(), "read_current must not ignore it either");
        std::fs::remove_file(t.path().join(MUT_DIR)).unwrap();
        std::fs::create_dir_all(t.path().join(MUT_DIR).join(CURRENT_FILE)).unwrap();
        assert!(store_present(t.path()).unwrap());
        let e = read_current(t.path()).unwrap_err().to_string();
        assert!(e.contains("mut/CURRENT: byte offset 0: is a directory"), "{e}");
        assert!(!regular_file(&t.path().join("absent")).unwrap());
    }

    #[test]
    fn a_generation_whose_removal_was_cut_short_is_still_removed() {
        // The removal of an old generation crashed after the manifest went but before the
        // rest: a `.gen-K.removing` left by the rename is ours and removed on the next clean;
        // a user's foreign `gen-K` (no manifest) is kept.
        let t = tempfile::tempdir().unwrap();
        let d = mut_dir(t.path());
        std::fs::create_dir_all(d.join(".gen-1.removing")).unwrap();
        std::fs::write(d.join(".gen-1.removing").join("graph.fg"), b"partial").unwrap();
        std::fs::create_dir_all(d.join("gen-3")).unwrap();
        std::fs::write(d.join("gen-3").join("notes.txt"), b"a user's").unwrap();
        let c = Current { generation: 2, base_seq: 0, ids: None };
        let removed = clean_leftovers(&Disk::Real, t.path(), &c).unwrap();
        assert_eq!(removed, vec![".gen-1.removing".to_string()]);
        assert!(!d.join(".gen-1.removing").exists());
        assert!(d.join("gen-3").join("notes.txt").exists());
        // A complete old generation goes through the rename and leaves nothing behind.
        std::fs::create_dir_all(d.join("gen-1")).unwrap();
        let magic = flashgnn_format::manifest::MANIFEST_MAGIC;
        std::fs::write(d.join("gen-1").join("manifest.json"), format!("{{\"magic\": \"{magic}\"}}")).unwrap();
        assert_eq!(clean_leftovers(&Disk::Real, t.path(), &c).unwrap(), vec!["gen-1".to_string()]);
        let left: Vec<_> = std::fs::read_dir(&d).unwrap().flatten().map(|e| e.file_name()).collect();
        assert_eq!(left, vec![std::ffi::OsString::from("gen-3")]);
    }
}
