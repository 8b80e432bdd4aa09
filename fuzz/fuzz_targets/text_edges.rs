//! Text edge lists (`flashgnn_build::source::text::TextEdges`, SNAP/OGB,
//! plain or gzip): line splitting (LF, CRLF, lone CR), comments, fields,
//! integer parsing, the id bounds (negative, overflowing, >= the declared
//! node count) and skip mode. The entry point is a path, so the input goes
//! through a scratch file (named `.gz` when the first byte says so).
#![no_main]
use flashgnn_build::source::text::TextEdges;
use flashgnn_build::source::EdgeSource;
use flashgnn_fuzz::{scratch_file, Draw};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut d = Draw::new(data);
    let flags = d.u8();
    let num_nodes = if flags & 4 != 0 { Some(d.u16() as u64) } else { None };
    let path = scratch_file(if flags & 1 != 0 { "edges.txt.gz" } else { "edges.txt" }, d.rest);
    let Ok(mut e) = TextEdges::open(&path, flags & 2 != 0) else { return };
    e.set_num_nodes(num_nodes);
    let mut out = Vec::new();
    // Each edge takes at least 4 input bytes ("0 0\n"); a gzip stream at
    // most ~1032x that. Bound the loop well above it: a hang is a finding.
    for _ in 0..(d.rest.len() + 2) * 1100 {
        out.clear();
        match e.next_batch(&mut out, 64) {
            Ok(true) => {
                if let Some(n) = num_nodes {
                    assert!(out.iter().all(|&(s, t)| s < n && t < n));
                }
            }
            Ok(false) | Err(_) => return,
        }
    }
    panic!("the edge list did not end");
});
