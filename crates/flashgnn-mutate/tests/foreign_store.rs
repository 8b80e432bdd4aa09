//! A mutable store belongs to one dataset: `mut/CURRENT` (version 2) records
//! the `dataset_id` of generation 0 (`root_dataset_id`) and of the current
//! generation's base (`generation_dataset_id`), and every reader checks both.
//!
//! - a whole `mut/` copied from another dataset after a compaction (its
//!   CURRENT, `gen-1`, free list and log consistent with each other) is
//!   refused by read-only and writable opens and `verify_log`, naming
//!   `mut/CURRENT`, the byte offset of the field and both ids; nothing under
//!   the copied `mut/` is removed or rewritten;
//! - a foreign `gen-G` with its log under this dataset's own CURRENT is
//!   refused at `generation_dataset_id`;
//! - a version-1 CURRENT (no ids) is still read, unchanged by read-only opens,
//!   and rewritten bound by the next writable open;
//! - a format-v1 root (no dataset id) records null and keeps working, and a
//!   v2 dataset's store copied into it is refused.

use std::path::Path;

use flashgnn_build::Progress;
use flashgnn_mutate::current::{self, Current};
use flashgnn_mutate::{verify_log, MutError, MutableGraph};
use flashgnn_store::Dataset;
use flashgnn_testing::{
    build_symmetric, copy_dir, open_mutable, read_only, repo_path, rmat_input, tempdir, tiny_rmat, tree_bytes, writable,
};

fn id(p: &Path) -> Option<u64> {
    Dataset::open(p).unwrap().manifest().dataset_id
}

/// Edge 1-77 added, compacted into gen-1, then edge 2-78 logged in wal-1.
fn mutate_and_compact(p: &Path) {
    let g = open_mutable(p);
    g.add_edge(1, 77).unwrap();
    g.compact(&Progress::new()).unwrap();
    g.add_edge(2, 78).unwrap();
    g.close().unwrap();
}

/// Every reader refuses `p` as corruption of `p/mut/CURRENT` at the byte
/// offset of `key`, naming both ids.
fn refused(p: &Path, key: &str, stored: Option<u64>, actual: Option<u64>) {
    let text = std::fs::read_to_string(p.join("mut/CURRENT")).unwrap();
    let at = text.find(&format!("\"{key}\"")).unwrap();
    let show = |i: Option<u64>| i.map_or("none (format v1)".to_string(), |i| i.to_string());
    let errs = [
        MutableGraph::open(p, &read_only()).err().expect("read-only open refuses"),
        MutableGraph::open(p, &writable()).err().expect("writable open refuses"),
        verify_log(p).expect_err("verify refuses"),
    ];
    for e in errs {
        assert!(matches!(e, MutError::Corrupt(_)), "{e}");
        let m = e.to_string();
        assert!(m.starts_with(&format!("{}: byte offset {at}: {key} ", p.join("mut/CURRENT").display())), "{m}");
        assert!(m.contains(&show(stored)) && m.contains(&show(actual)), "{m}");
    }
}

#[test]
fn a_mut_dir_copied_from_another_dataset_after_compaction_is_refused() {
    let t = tempdir();
    let raw = rmat_input(t.path(), "raw", &tiny_rmat());
    let (a, b) = (build_symmetric(&raw, &t.path().join("a")), build_symmetric(&raw, &t.path().join("b")));
    let (ia, ib) = (id(&a), id(&b));
    assert!(ia.is_some() && ib.is_some() && ia != ib, "two builds, two ids");
    mutate_and_compact(&a);
    copy_dir(&a.join("mut"), &b.join("mut"));
    let before = tree_bytes(&b.join("mut"));
    refused(&b, "root_dataset_id", ia, ib);
    // The writable open refused before touching anything: no leftover removed, no log rewritten.
    assert_eq!(tree_bytes(&b.join("mut")), before);
    assert!(b.join("mut/gen-1").is_dir());
    // The store still serves its own dataset, with both edges.
    let g = MutableGraph::open(&a, &read_only()).unwrap();
    assert!(g.get_neighbors(1).unwrap().contains(&77) && g.get_neighbors(2).unwrap().contains(&78));
    assert_eq!(verify_log(&a).unwrap().unwrap().generation, 1);
    // Compaction carried the binding forward: CURRENT names A and gen-1's id.
    let cur = current::read_current(&a).unwrap().unwrap();
    let ids = cur.ids.expect("version 2");
    assert_eq!((ids.root, ids.generation), (ia, id(&a.join("mut/gen-1"))));
    // Removing the foreign store gives B back, unmutated.
    std::fs::remove_dir_all(b.join("mut")).unwrap();
    assert!(!MutableGraph::open(&b, &read_only()).unwrap().get_neighbors(1).unwrap().contains(&77));
}

#[test]
fn a_generation_and_log_copied_from_another_dataset_are_refused() {
    let t = tempdir();
    let raw = rmat_input(t.path(), "raw", &tiny_rmat());
    let (a, b) = (build_symmetric(&raw, &t.path().join("a")), build_symmetric(&raw, &t.path().join("b")));
    mutate_and_compact(&a);
    mutate_and_compact(&b);
    // B keeps its own CURRENT; A's gen-1, free list and log (consistent with each other) replace B's.
    for n in ["wal-1.log", "free-1.bin"] {
        std::fs::copy(a.join("mut").join(n), b.join("mut").join(n)).unwrap();
    }
    std::fs::remove_dir_all(b.join("mut/gen-1")).unwrap();
    copy_dir(&a.join("mut/gen-1"), &b.join("mut/gen-1"));
    let actual = id(&b.join("mut/gen-1"));
    let want = current::read_current(&b).unwrap().unwrap().ids.unwrap().generation;
    assert_ne!(want, actual);
    refused(&b, "generation_dataset_id", want, actual);
}

#[test]
fn a_version_1_current_is_read_and_rewritten_bound_by_a_writable_open() {
    let t = tempdir();
    let raw = rmat_input(t.path(), "raw", &tiny_rmat());
    let a = build_symmetric(&raw, &t.path().join("a"));
    mutate_and_compact(&a);
    let c = current::read_current(&a).unwrap().unwrap();
    current::write_current(&flashgnn_io::Disk::Real, &a, &Current { ids: None, ..c }).unwrap();
    let v1 = std::fs::read(a.join("mut/CURRENT")).unwrap();
    assert!(String::from_utf8_lossy(&v1).contains("\"version\": 1"));
    // Read-only readers accept it (nothing to check) and change nothing.
    assert!(MutableGraph::open(&a, &read_only()).unwrap().get_neighbors(2).unwrap().contains(&78));
    assert_eq!(verify_log(&a).unwrap().unwrap().generation, 1);
    assert_eq!(std::fs::read(a.join("mut/CURRENT")).unwrap(), v1);
    // A writable open binds it.
    MutableGraph::open(&a, &writable()).unwrap().close().unwrap();
    let c2 = current::read_current(&a).unwrap().unwrap();
    assert_eq!((c2.generation, c2.base_seq), (c.generation, c.base_seq));
    assert_eq!(c2.ids, c.ids);
    assert_eq!(verify_log(&a).unwrap().unwrap().generation, 1);
}

#[test]
fn a_format_v1_root_records_no_id_and_refuses_a_bound_store() {
    let t = tempdir();
    let fixture = repo_path("tests/fixtures/format-v1/inline");
    let v1 = t.path().join("v1");
    copy_dir(&fixture, &v1);
    assert_eq!(id(&v1), None);
    let g = MutableGraph::open(&v1, &writable()).unwrap();
    let n = g.add_vertex(&vec![0.5; g.feature_dim() as usize]).unwrap() + 1;
    g.add_edge(0, n - 1).unwrap();
    g.compact(&Progress::new()).unwrap();
    g.add_edge(1, n - 1).unwrap();
    g.close().unwrap();
    let ids = current::read_current(&v1).unwrap().unwrap().ids.unwrap();
    assert_eq!(ids.root, None);
    assert_eq!(ids.generation, id(&v1.join("mut/gen-1")));
    assert!(std::fs::read_to_string(v1.join("mut/CURRENT")).unwrap().contains("\"root_dataset_id\": null"));
    let g = MutableGraph::open(&v1, &read_only()).unwrap();
    assert!(g.get_neighbors(1).unwrap().contains(&(n - 1)));
    drop(g);
    assert_eq!(verify_log(&v1).unwrap().unwrap().generation, 1);
    // A version-2 dataset's store copied into the v1 root: refused.
    let raw = rmat_input(t.path(), "raw", &tiny_rmat());
    let a = build_symmetric(&raw, &t.path().join("a"));
    mutate_and_compact(&a);
    std::fs::remove_dir_all(v1.join("mut")).unwrap();
    copy_dir(&a.join("mut"), &v1.join("mut"));
    refused(&v1, "root_dataset_id", id(&a), None);
}
