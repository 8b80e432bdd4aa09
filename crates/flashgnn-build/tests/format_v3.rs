//! Datasets written by format version 3 (tests/fixtures/format-v3: the typed
//! build of commit cf0f37d, before every slot of a typed graph carried its
//! per-relation edge bases) still open, verify and read back, relation by
//! relation, what their input holds.
//!
//! The fixture was made by `make_format_v3_fixture` below (ignored; run with
//! `FLASHGNN_FIXTURE_OUT=tests/fixtures/format-v3 cargo test -p
//! flashgnn-build --test format_v3 -- --ignored` on that commit). Do not
//! re-run it with newer code: the point of the files is who wrote them.

mod common;

use std::path::{Path, PathBuf};

use common::*;
use flashgnn_build::{build, Progress, SelfLoops};
use flashgnn_store::Dataset;

fn fixture() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tests/fixtures/format-v3/typed")
}

#[test]
#[ignore = "makes tests/fixtures/format-v3 (run once, on the version-3 code)"]
fn make_format_v3_fixture() {
    let out = PathBuf::from(std::env::var("FLASHGNN_FIXTURE_OUT").expect("FLASHGNN_FIXTURE_OUT"));
    let tmp = tempfile::tempdir().unwrap();
    let input = tmp.path().join("in");
    write_input(&input);
    let mut o = opts(&input, &out.join("typed"));
    o.dedup = true;
    build(&o, &Progress::new()).unwrap();
}

#[test]
fn version_3_fixture_opens_verifies_and_reads_every_relation() {
    let ds = Dataset::open(fixture()).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(ds.manifest().format_version, 3);
    assert_eq!(ds.layout().format_version(), 3);
    assert!(ds.is_typed());
    let rep = flashgnn_store::verify(&ds, &mut |_, _| {}).unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(rep.slots, ds.num_nodes());
    let tmp = tempfile::tempdir().unwrap();
    let inp = write_input(&tmp.path().join("in"));
    assert_eq!(stored(&ds), model(&inp, true, SelfLoops::Keep));
}
