//! Format version 2: every per-structure checksum is bound to the dataset id,
//! so a page (or a whole file) copied from *another build of the same input
//! and layout* is refused where it is read — by the point reads and by every
//! sampling engine — with the file and byte offset, not only by a full verify.

use std::path::{Path, PathBuf};

use flashgnn_build::{build, BuildOptions, FeatureLayout, Progress};
use flashgnn_datagen::RmatOptions;
use flashgnn_io::engine::EngineKind;
use flashgnn_sample::{NeighborSampler, SamplerConfig};
use flashgnn_store::Dataset;
use flashgnn_testing::{assert_mentions, build_with, rmat_input, tempdir, ENGINES};

/// Two builds (A, B) of one generated input with the same options.
fn two_builds(dir: &Path, layout: FeatureLayout, dim: u32) -> (PathBuf, PathBuf) {
    let o = RmatOptions { scale: 10, edge_factor: 8, dim, classes: 4, seed: 3, ..Default::default() };
    let raw = rmat_input(dir, "raw", &o);
    let mk = |name: &str| {
        build_with(&raw, &dir.join(name), |b| {
            b.symmetrize = true;
            b.feature_layout = layout;
            b.page_size = 4096;
        })
    };
    (mk("a"), mk("b"))
}

fn copy_range(from: &Path, to: &Path, file: &str, lo: u64, len: u64) {
    let src = std::fs::read(from.join(file)).unwrap();
    let mut dst = std::fs::read(to.join(file)).unwrap();
    let (lo, hi) = (lo as usize, (lo + len) as usize);
    dst[lo..hi].copy_from_slice(&src[lo..hi]);
    std::fs::write(to.join(file), dst).unwrap();
}

fn all_seeds(ds: &Dataset) -> Vec<i64> {
    (0..ds.num_nodes() as i64).collect()
}

/// Every engine's batch over `seeds` fails with an error naming `file` and `offset`.
fn every_engine_refuses(path: &Path, seeds: &[i64], file: &str, offset: u64) {
    for kind in ENGINES {
        let cfg = SamplerConfig { engine: kind, labels: true, ..Default::default() };
        let mut s = NeighborSampler::open(path, &[5, 5], &cfg).unwrap();
        let e = s.sample(seeds, 1).expect_err(&format!("{kind:?} served a foreign page")).to_string();
        assert!(e.contains(file) && e.contains(&format!("byte offset {offset}")), "{kind:?}: {e}");
        assert!(e.contains("checksum mismatch"), "{kind:?}: {e}");
    }
}

#[test]
fn two_builds_get_different_ids_and_a_fixed_id_rebuilds_identically() {
    let tmp = tempdir();
    let (a, b) = two_builds(tmp.path(), FeatureLayout::Inline, 16);
    let (da, db) = (Dataset::open(&a).unwrap(), Dataset::open(&b).unwrap());
    assert_eq!(da.manifest().format_version, flashgnn_format::FORMAT_VERSION_HOMOGENEOUS);
    let (ia, ib) = (da.manifest().dataset_id.unwrap(), db.manifest().dataset_id.unwrap());
    assert_ne!(ia, ib);
    assert_eq!(da.layout().dataset_id, Some(ia));
    assert_eq!(da.layout().slot_bytes, db.layout().slot_bytes, "same layout");
    // The id is in each header page (graph.fg: byte 96) and binds every slot.
    let g = std::fs::read(a.join("graph.fg")).unwrap();
    assert_eq!(u64::from_le_bytes(g[96..104].try_into().unwrap()), ia);
    assert_ne!(g, std::fs::read(b.join("graph.fg")).unwrap());
    // An explicit id (BuildOptions::dataset_id) gives byte-identical rebuilds.
    let raw = tmp.path().join("raw");
    let mk = |name: &str| {
        let mut o = BuildOptions::new(&raw, tmp.path().join(name));
        o.symmetrize = true;
        o.dataset_id = Some(0x1234_5678_9abc_def0);
        build(&o, &Progress::new()).unwrap();
        tmp.path().join(name)
    };
    let (c, d) = (mk("c"), mk("d"));
    for f in ["graph.fg", "overflow.fg", "labels.npy"] {
        assert_eq!(std::fs::read(c.join(f)).unwrap(), std::fs::read(d.join(f)).unwrap(), "{f}");
    }
    let mut o = BuildOptions::new(&raw, tmp.path().join("zero"));
    o.dataset_id = Some(0);
    assert!(build(&o, &Progress::new()).unwrap_err().to_string().contains("dataset id 0"));
}

#[test]
fn foreign_slot_page_refused_by_point_reads_and_every_engine() {
    let tmp = tempdir();
    let (a, b) = two_builds(tmp.path(), FeatureLayout::Inline, 16);
    let ds = Dataset::open(&a).unwrap();
    let l = ds.layout().clone();
    let p = l.page_size as u64;
    // Slot page 2 of B, copied over slot page 2 of A: same bytes but for the checksums.
    copy_range(&b, &a, "graph.fg", 2 * p, p);
    let ds = Dataset::open(&a).unwrap(); // the header is A's own: open succeeds
    let v = l.slots_per_page as i64; // first node of slot page 2
    let e = ds.neighbors(v).unwrap_err().to_string();
    assert_mentions(&e, &["graph.fg", &format!("byte offset {}", l.slot_offset(v as u64)), "checksum mismatch"]);
    assert!(ds.neighbors(0).is_ok(), "A's own pages still read");
    every_engine_refuses(&a, &[v], "graph.fg", l.slot_offset(v as u64));
    assert!(flashgnn_store::verify(&ds, &mut |_, _| {}).is_err());
}

#[test]
fn foreign_overflow_page_refused_by_point_reads_and_every_engine() {
    let tmp = tempdir();
    let (a, b) = two_builds(tmp.path(), FeatureLayout::Inline, 16);
    let l = Dataset::open(&a).unwrap().layout().clone();
    assert!(l.overflow_pages() >= 1, "the input must spill");
    let p = l.page_size as u64;
    copy_range(&b, &a, "overflow.fg", p, p);
    let ds = Dataset::open(&a).unwrap();
    let seeds = all_seeds(&ds);
    let errs: Vec<String> = seeds.iter().filter_map(|&v| ds.neighbors(v).err()).map(|e| e.to_string()).collect();
    assert!(!errs.is_empty(), "a node spilling into overflow page 1 must fail");
    let at = format!("byte offset {}", 2 * p - 4); // page 1's checksum
    assert!(errs.iter().all(|e| e.contains("overflow.fg") && e.contains(&at)), "{errs:?}");
    every_engine_refuses(&a, &seeds, "overflow.fg", 2 * p - 4);
}

#[test]
fn foreign_whole_files_refused_at_open() {
    let tmp = tempdir();
    let (a, b) = two_builds(tmp.path(), FeatureLayout::Separate, 200);
    let id_b = Dataset::open(&b).unwrap().manifest().dataset_id.unwrap();
    for (file, at) in [("graph.fg", 96), ("overflow.fg", 32), ("features.fg", 48)] {
        let a2 = tmp.path().join(format!("a-{file}"));
        std::fs::create_dir(&a2).unwrap();
        for f in std::fs::read_dir(&a).unwrap() {
            let f = f.unwrap().path();
            std::fs::copy(&f, a2.join(f.file_name().unwrap())).unwrap();
        }
        std::fs::copy(b.join(file), a2.join(file)).unwrap();
        let e = Dataset::open(&a2).err().expect("a foreign file must be refused at open").to_string();
        assert!(
            e.contains(file) && e.contains(&format!("byte offset {at}")) && e.contains(&format!("dataset_id = {id_b}")),
            "{file}: {e}"
        );
        let cfg = SamplerConfig { engine: EngineKind::Memory, ..Default::default() };
        assert!(NeighborSampler::open(&a2, &[5], &cfg).is_err());
    }
}

#[test]
fn foreign_feature_checksums_refused_by_point_reads_and_every_engine() {
    // feature_crc.npy of B (its rows are byte-identical to A's, but bound to B's id).
    let tmp = tempdir();
    let (a, b) = two_builds(tmp.path(), FeatureLayout::Separate, 200);
    std::fs::copy(b.join("feature_crc.npy"), a.join("feature_crc.npy")).unwrap();
    let ds = Dataset::open(&a).unwrap();
    let l = ds.layout().clone();
    let (_, start, _) = l.feature_range(0);
    let mut out = Vec::new();
    let e = ds.feature_row(0, &mut out).unwrap_err().to_string();
    assert_mentions(&e, &["features.fg", &format!("byte offset {start}")]);
    every_engine_refuses(&a, &[0], "features.fg", start);
}
