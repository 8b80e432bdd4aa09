//! The typed build (format version 4): a typed npy directory written here
//! (3 node types, 4 edge types of which one within a type, a type without
//! features, lists that spill on 512-byte pages, labels and splits on one
//! type) builds into a dataset whose every node's neighbors, relation by
//! relation, equal an in-memory model of the input; `--add-reverse`
//! against a hand-computed expectation; input errors name file, position,
//! value and bound and publish nothing; verify finds flipped bits.

mod common;

use std::path::Path;

use common::*;
use flashgnn_build::{build, Progress, SelfLoops};
use flashgnn_format::slot::decode_slot;
use flashgnn_store::Dataset;

#[test]
fn typed_build_round_trips_every_relation() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let inp = write_input(&input);
    for (i, (dedup, loops)) in
        [(false, SelfLoops::Keep), (true, SelfLoops::Drop), (true, SelfLoops::Add)].into_iter().enumerate()
    {
        let out = dir.path().join(format!("out{i}"));
        let mut o = opts(&input, &out);
        o.dedup = dedup;
        o.self_loops = loops;
        let rep = build(&o, &Progress::new()).unwrap_or_else(|e| panic!("{e}"));
        let m = &rep.manifest;
        assert_eq!(m.format_version, 4);
        assert_eq!(m.build.source_format, "typed-npy");
        let ds = Dataset::open(&out).unwrap();
        assert!(ds.is_typed());
        let want = model(&inp, dedup, loops);
        assert_eq!(stored(&ds), want, "dedup {dedup} loops {loops:?}");
        assert!(m.degree.spilled_nodes > 0, "paper 3 list spills on 512-byte pages: {:?} {:?}", m.graph, m.degree);
        let t = m.types.as_ref().unwrap();
        let names: Vec<_> = t.node_types.iter().map(|n| n.name.as_str()).collect();
        assert_eq!(names, ["author", "paper", "venue"]);
        assert_eq!(t.edge_types.len(), 4);
        for (r, e) in t.edge_types.iter().enumerate() {
            let d = t.node_type_index(&e.dst).unwrap();
            let j = t.in_relations(d).iter().position(|&x| x == r).unwrap();
            let sum: usize =
                want.iter().skip(t.offset(d) as usize).take(t.node_types[d].count as usize).map(|l| l[j].len()).sum();
            assert_eq!(e.num_edges, sum as u64, "{}", e.key());
            assert_eq!(m.build.relations[r].stored, e.num_edges);
        }
        // Every slot's edge base per relation: that edge type's entries in
        // the nodes of its destination type before it (its e_id numbering).
        for (d, nt) in t.node_types.iter().enumerate() {
            let mut listed = vec![0u64; t.in_relations(d).len()];
            for v in t.offset(d)..t.offset(d) + nt.count {
                let buf = ds.read_slot(v).unwrap();
                let slot = decode_slot(ds.layout(), v, &buf, "g").unwrap();
                for (j, n) in listed.iter_mut().enumerate() {
                    assert_eq!(slot.edge_base(j), Some(*n), "node {v} relation {j}");
                    *n += want[v as usize][j].len() as u64;
                }
            }
        }
        assert_eq!(t.node_types[2].features, None);
        assert_eq!(t.node_types[1].labels.as_ref().unwrap().labeled, 120);
        assert_eq!(t.node_types[1].splits.get("train"), Some(&3));
        // Feature rows per type, by local id.
        let mut row = Vec::new();
        ds.type_feature_row(1, 2, &mut row).unwrap();
        let vals: Vec<f32> = row.chunks(4).map(|b| f32::from_le_bytes(b.try_into().unwrap())).collect();
        assert_eq!(vals, (10..15).map(|i| i as f32 * 0.5 + 200.0).collect::<Vec<_>>());
        assert!(ds.type_feature_row(2, 0, &mut row).is_err(), "venue has no features");
        let lab = ds.side_array("t1.labels.npy").unwrap().read_all_i64().unwrap();
        assert_eq!(lab[4], -1);
        assert_eq!(lab[5], 2);
        let val = ds.side_array("t1.split_val.npy").unwrap().read_all_i64().unwrap();
        assert_eq!(val, vec![5, 6]);
        flashgnn_store::verify(&ds, &mut |_, _| {}).unwrap();
        assert_eq!(scrub_damage(&out), Vec::new());
    }
}

#[test]
fn add_reverse_is_pygs_to_undirected() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    write_edges(&input, "a__r__b", &[(0, 1), (1, 2), (0, 1)]);
    write_edges(&input, "b__s__b", &[(0, 1), (2, 2)]);
    std::fs::write(input.join("num_nodes.json"), r#"{"a": 2, "b": 3}"#).unwrap();
    let out = dir.path().join("out");
    let mut o = opts(&input, &out);
    o.add_reverse = true;
    let rep = build(&o, &Progress::new()).unwrap_or_else(|e| panic!("{e}"));
    let t = rep.manifest.types.as_ref().unwrap();
    let keys: Vec<(String, u64)> = t.edge_types.iter().map(|e| (e.key(), e.num_edges)).collect();
    assert_eq!(
        keys,
        [("a__r__b".to_string(), 3), ("b__s__b".to_string(), 3), ("b__rev_r__a".to_string(), 3)],
        "same-type relation undirected in place (the loop coalesced), a rev_ type appended"
    );
    let ds = Dataset::open(&out).unwrap();
    // a0, a1 | b0, b1, b2 = global 0, 1 | 2, 3, 4.
    let want: Vec<Vec<Vec<u64>>> = vec![
        vec![vec![3, 3]],          // a0 <- b1 twice (rev_r keeps r's duplicates)
        vec![vec![4]],             // a1 <- b2
        vec![vec![], vec![3]],     // b0: r none; s: b1 (reverse of 0->1)
        vec![vec![0, 0], vec![2]], // b1: r a0 twice; s: b0
        vec![vec![1], vec![4]],    // b2: r a1; s: its loop once
    ];
    assert_eq!(stored(&ds), want);
    assert!(rep.manifest.build.add_reverse);
    assert_eq!(rep.manifest.build.relations[2].added_by_reverse, 3);
}

fn build_err(input: &Path, out: &Path) -> String {
    let e = build(&opts(input, out), &Progress::new()).unwrap_err().to_string();
    assert!(!out.exists(), "nothing is published on error: {e}");
    let parent = out.parent().unwrap();
    let left: Vec<_> = std::fs::read_dir(parent)
        .unwrap()
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.contains("tmp"))
        .collect();
    assert!(left.is_empty(), "temporaries left: {left:?}");
    e
}

#[test]
fn typed_input_errors_name_file_position_value_and_bound() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("out");
    // An id beyond its type's count.
    let input = dir.path().join("oob");
    write_input(&input);
    write_edges(&input, "author__writes__paper", &[(0, 0), (1, 1), (2, 2), (7, 3)]);
    let e = build_err(&input, &out);
    assert!(
        e.contains("author__writes__paper/edge_index.npy")
            && e.contains("edge 3, column 0")
            && e.contains("node id 7 >= 7")
            && e.contains("\"author\""),
        "{e}"
    );
    // A type named by an edge folder that has no folder or count.
    let input = dir.path().join("missing");
    write_input(&input);
    write_edges(&input, "journal__lists__paper", &[(0, 0)]);
    let e = build_err(&input, &out);
    assert!(e.contains("journal__lists__paper") && e.contains("\"journal\""), "{e}");
    // Feature rows against another count.
    let input = dir.path().join("rows");
    write_input(&input);
    std::fs::write(input.join("num_nodes.json"), r#"{"venue": 4, "author": 8}"#).unwrap();
    let e = build_err(&input, &out);
    assert!(e.contains("author/node_feat.npy") && e.contains("gives 8") && e.contains("gives 7"), "{e}");
    // A name the format refuses.
    let input = dir.path().join("name");
    write_input(&input);
    write_edges(&input, "paper__cit!es__paper", &[(0, 0)]);
    let e = build_err(&input, &out);
    assert!(e.contains("\"cit!es\""), "{e}");
    // Options a typed build refuses by name.
    let input = dir.path().join("ok");
    write_input(&input);
    let mut o = opts(&input, &out);
    o.symmetrize = true;
    let e = build(&o, &Progress::new()).unwrap_err().to_string();
    assert!(e.contains("--symmetrize") && e.contains("--add-reverse"), "{e}");
}

fn flip(path: &Path, at: u64) {
    let mut b = std::fs::read(path).unwrap();
    b[at as usize] ^= 0x10;
    std::fs::write(path, b).unwrap();
}

#[test]
fn verify_reports_flipped_bits_in_typed_files() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    write_input(&input);
    let out = dir.path().join("out");
    build(&opts(&input, &out), &Progress::new()).unwrap();
    let (fl, slot_at) = {
        let ds = Dataset::open(&out).unwrap();
        flashgnn_store::verify(&ds, &mut |_, _| {}).unwrap();
        (ds.type_feature_layout(1).unwrap().clone(), ds.layout().slot_offset(8) + 24)
    };
    // A feature row of paper (t1), local 2.
    let bad = dir.path().join("bad_feat");
    copy_dir(&out, &bad);
    let row_at = fl.page_size as u64 + 2 * fl.feature_stride() + 1;
    flip(&bad.join("t1.features.fg"), row_at);
    let ds = Dataset::open(&bad).unwrap();
    let e = flashgnn_store::verify(&ds, &mut |_, _| {}).unwrap_err().to_string();
    assert!(e.contains("t1.features.fg"), "{e}");
    let e = ds.type_feature_row(1, 2, &mut Vec::new()).unwrap_err().to_string();
    assert!(e.contains("t1.features.fg") && e.contains(&format!("{}", row_at - 1)), "{e}");
    let d = scrub_damage(&bad);
    assert!(
        d.iter().any(|x| x.file.ends_with("t1.features.fg") && x.kind == "feature row" && x.offset == Some(row_at - 1)),
        "{d:?}"
    );
    // A slot's relation count (node 8 = paper 1).
    let bad = dir.path().join("bad_slot");
    copy_dir(&out, &bad);
    flip(&bad.join("graph.fg"), slot_at);
    let ds = Dataset::open(&bad).unwrap();
    let e = flashgnn_store::verify(&ds, &mut |_, _| {}).unwrap_err().to_string();
    assert!(e.contains("graph.fg"), "{e}");
    let e = ds.read_slot(8).unwrap_err().to_string();
    assert!(e.contains("graph.fg") && e.contains(&format!("{}", slot_at - 24)), "{e}");
    let d = scrub_damage(&bad);
    assert!(d.iter().any(|x| x.file.ends_with("graph.fg") && x.kind == "slot page"), "{d:?}");
}

#[test]
fn verify_checks_every_neighbor_against_its_relations_source_type() {
    // A venue's neighbor replaced by an author id, the slot, file CRC and
    // manifest re-sealed: only the typed relation check stands.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    write_input(&input);
    let out = dir.path().join("out");
    build(&opts(&input, &out), &Progress::new()).unwrap();
    let ds = Dataset::open(&out).unwrap();
    let l = ds.layout().clone();
    let v = offset_of("venue");
    let at = (l.slot_offset(v) + l.inline_ids_offset() as u64) as usize;
    drop(ds);
    let g = out.join("graph.fg");
    let mut b = std::fs::read(&g).unwrap();
    b[at..at + 4].copy_from_slice(&0u32.to_le_bytes());
    let s0 = l.slot_offset(v) as usize;
    let c = l.crc(v, &b[s0 + 4..s0 + l.slot_bytes as usize]);
    b[s0..s0 + 4].copy_from_slice(&c.to_le_bytes());
    std::fs::write(&g, &b).unwrap();
    let mpath = out.join("manifest.json");
    let mut m: serde_json::Value = serde_json::from_slice(&std::fs::read(&mpath).unwrap()).unwrap();
    m["files"]["graph.fg"]["crc32c"] = crc32c::crc32c(&b).into();
    let text = flashgnn_format::manifest::seal_json("m", &m.to_string()).unwrap();
    std::fs::write(&mpath, text).unwrap();
    let ds = Dataset::open(&out).unwrap();
    let e = flashgnn_store::verify(&ds, &mut |_, _| {}).unwrap_err().to_string();
    assert!(
        e.contains("graph.fg")
            && e.contains(&format!("{at}"))
            && e.contains("neighbor id")
            && e.contains("node type \"paper\"")
            && e.contains("paper__in__venue"),
        "{e}"
    );
}

#[test]
fn a_typed_build_sorts_out_of_core_under_a_small_budget() {
    // 400 K edges over two relations under a budget that leaves a ~1 MiB
    // sort chunk: several runs, merged; the lists equal the model's.
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let mut x = 11u64;
    let uu: Vec<(u64, u64)> = (0..300_000).map(|_| (lcg(&mut x) % 2000, lcg(&mut x) % 2000)).collect();
    let iu: Vec<(u64, u64)> = (0..100_000).map(|_| (lcg(&mut x) % 50, lcg(&mut x) % 2000)).collect();
    write_edges(&input, "u__f__u", &uu);
    write_edges(&input, "i__in__u", &iu);
    std::fs::write(input.join("num_nodes.json"), r#"{"i": 50, "u": 2000}"#).unwrap();
    let out = dir.path().join("out");
    let mut o = opts(&input, &out);
    o.memory_budget = (64 << 20) + (1 << 20) + 2050 * 4 + (512 << 10);
    o.dedup = true;
    let rep = build(&o, &Progress::new()).unwrap_or_else(|e| panic!("{e}"));
    assert!(rep.manifest.build.sort_runs > 1, "{}", rep.manifest.build.sort_runs);
    let ds = Dataset::open(&out).unwrap();
    let got = stored(&ds);
    // i = globals 0..50 (no incoming), u = 50..2050: relations i__in__u, u__f__u.
    let mut want: Vec<Vec<Vec<u64>>> = vec![vec![]; 50];
    want.extend((0..2000).map(|_| vec![Vec::new(), Vec::new()]));
    for &(s, d) in &iu {
        want[50 + d as usize][0].push(s);
    }
    for &(s, d) in &uu {
        want[50 + d as usize][1].push(50 + s);
    }
    for l in want.iter_mut().flatten() {
        l.sort();
        l.dedup();
    }
    assert_eq!(got, want);
    flashgnn_store::verify(&ds, &mut |_, _| {}).unwrap();
}

fn scrub_damage(root: &Path) -> Vec<flashgnn_store::Damage> {
    let o = flashgnn_store::ScrubOptions::new(root);
    flashgnn_store::scrub(root, &o, &mut |_, _| true).unwrap().damaged
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
    }
}

#[test]
fn no_edge_ids_writes_version_3_slots_that_read_the_same() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in");
    let inp = write_input(&input);
    let (with, without) = (dir.path().join("with"), dir.path().join("without"));
    build(&opts(&input, &with), &Progress::new()).unwrap();
    let mut o = opts(&input, &without);
    o.no_edge_ids = true;
    let rep = build(&o, &Progress::new()).unwrap();
    assert_eq!(rep.manifest.format_version, 3);
    let (a, b) = (Dataset::open(&with).unwrap(), Dataset::open(&without).unwrap());
    assert_eq!((a.layout().edge_bases, b.layout().edge_bases), (true, false));
    assert!(b.layout().slot_bytes < a.layout().slot_bytes, "{} < {}", b.layout().slot_bytes, a.layout().slot_bytes);
    let want = model(&inp, false, SelfLoops::Keep);
    assert_eq!(stored(&a), want);
    assert_eq!(stored(&b), want);
    let slot = b.read_slot(0).unwrap();
    assert_eq!(decode_slot(b.layout(), 0, &slot, "g").unwrap().edge_base(0), None);
    flashgnn_store::verify(&b, &mut |_, _| {}).unwrap();
}
