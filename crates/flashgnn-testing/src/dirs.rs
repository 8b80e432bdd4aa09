//! Directories for tests: temp dirs, the repository's committed fixtures,
//! recursive copies and byte-for-byte snapshots of a tree.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

pub use tempfile::TempDir;

/// A fresh temp dir, removed when the returned guard is dropped.
pub fn tempdir() -> TempDir {
    tempfile::Builder::new().prefix("flashgnn-test-").tempdir().expect("create a temp dir")
}

/// `rel` under the repository root, e.g. `tests/fixtures/format-v1/inline`.
pub fn repo_path(rel: impl AsRef<Path>) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..").join(rel)
}

/// Copy the tree at `from` to `to` (created), file by file.
pub fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap_or_else(|e| panic!("{}: {e}", to.display()));
    for e in std::fs::read_dir(from).unwrap_or_else(|e| panic!("{}: {e}", from.display())) {
        let e = e.unwrap();
        let t = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_dir(&e.path(), &t);
        } else {
            std::fs::copy(e.path(), &t).unwrap_or_else(|err| panic!("{}: {err}", e.path().display()));
        }
    }
}

/// Every entry under `dir` (not `dir` itself) with its bytes; directories
/// map to no bytes. Two snapshots are equal when nothing under `dir` was
/// added, removed or rewritten.
pub fn tree_bytes(dir: &Path) -> BTreeMap<PathBuf, Vec<u8>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap_or_else(|e| panic!("{}: {e}", d.display())) {
            let e = e.unwrap().path();
            if e.is_dir() {
                stack.push(e.clone());
                out.insert(e, Vec::new());
            } else {
                let bytes = std::fs::read(&e).unwrap_or_else(|err| panic!("{}: {err}", e.display()));
                out.insert(e, bytes);
            }
        }
    }
    out
}
