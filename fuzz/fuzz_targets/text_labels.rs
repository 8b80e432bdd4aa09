//! Text label and feature files of `build` (`flashgnn_build::source::text`):
//! one value per line (`TextValues`: OGB labels, split ids), `node label`
//! pairs (`PairLabels`, then densified to a node count) and comma-separated
//! feature rows (`CsvRows`, `--features`). Plain or gzip, through a scratch
//! file (the entry points are paths).
#![no_main]
use flashgnn_build::source::text::{CsvRows, PairLabels, TextValues};
use flashgnn_build::source::{RowSource, ValueSource};
use flashgnn_fuzz::{scratch_file, Draw};
use libfuzzer_sys::fuzz_target;

/// Enough rounds for every line of the input (and of a gzip stream's ~1032x expansion).
fn rounds(len: usize) -> usize {
    (len + 2) * 1100
}

fn drain_values(v: &mut dyn ValueSource, len: usize) {
    let mut out = Vec::new();
    for _ in 0..rounds(len) {
        out.clear();
        match v.next_values(64, &mut out) {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
    }
    panic!("the value file did not end");
}

fuzz_target!(|data: &[u8]| {
    let mut d = Draw::new(data);
    let flags = d.u8();
    let num_nodes = d.u16() as u64;
    let gz = if flags & 1 != 0 { ".gz" } else { "" };
    let len = d.rest.len();
    match (flags >> 1) % 3 {
        0 => {
            let path = scratch_file(&format!("labels.csv{gz}"), d.rest);
            if let Ok(mut v) = TextValues::open(&path) {
                drain_values(&mut v, len);
            }
        }
        1 => {
            let path = scratch_file(&format!("labels.txt{gz}"), d.rest);
            if let Ok(mut v) = PairLabels::open(&path) {
                if v.set_num_nodes(num_nodes).is_ok() {
                    drain_values(&mut v, len);
                }
            }
        }
        _ => {
            let path = scratch_file(&format!("node-feat.csv{gz}"), d.rest);
            let Ok(mut r) = CsvRows::open(&path) else { return };
            let dim = r.dim() as usize;
            let mut out = Vec::new();
            for _ in 0..rounds(len) {
                out.clear();
                match r.next_rows(16, &mut out) {
                    Ok(0) | Err(_) => return,
                    Ok(k) => assert_eq!(out.len(), k * dim * 4),
                }
            }
            panic!("the feature file did not end");
        }
    }
});
