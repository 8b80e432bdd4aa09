//! The header pages of `graph.fg`, `overflow.fg` and `features.fg`
//! (`GraphHeader`/`OverflowHeader`/`FeatureHeader::decode`) and their
//! field-by-field comparison against a layout, as a dataset open does.
#![no_main]
use flashgnn_format::{FeatureHeader, GraphHeader, OverflowHeader};
use flashgnn_fuzz::{draw_layout, Draw};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let mut d = Draw::new(data);
    let which = d.u8();
    let Some(l) = draw_layout(&mut d) else { return };
    let bytes = d.rest;
    match which % 3 {
        0 => {
            if let Ok(h) = GraphHeader::decode("graph.fg", bytes) {
                let _ = GraphHeader::from_layout(&l).compare(&h);
                assert_eq!(GraphHeader::decode("graph.fg", &h.encode()).ok(), Some(h));
            }
        }
        1 => {
            if let Ok(h) = OverflowHeader::decode("overflow.fg", bytes) {
                let _ = OverflowHeader::from_layout(&l).compare(&h);
            }
        }
        _ => {
            if let Ok(h) = FeatureHeader::decode("features.fg", bytes) {
                let _ = FeatureHeader::from_layout(&l).compare(&h);
            }
        }
    }
});
