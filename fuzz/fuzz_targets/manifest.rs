//! `manifest.json`: JSON parse, the canonical-form checksum, the typed
//! structure and every derived layout value (`Manifest::from_json`).
//! The input is tried as it is and once more re-sealed (`seal_json`: the
//! checksum recomputed), so the structural checks behind the checksum are
//! fuzzed too. A manifest that is accepted must give a layout and
//! serialise back to a manifest that is accepted again.
#![no_main]
use flashgnn_format::manifest::seal_json;
use flashgnn_format::Manifest;
use libfuzzer_sys::fuzz_target;

fn check(text: &str) {
    if let Ok(m) = Manifest::from_json("manifest.json", text) {
        let l = m.layout("manifest.json").expect("an accepted manifest has a layout");
        let _ = (l.graph_file_bytes(), l.overflow_file_bytes(), l.features_file_bytes(), m.type_table());
        let again = Manifest::from_json("manifest.json", &m.to_json()).expect("a written manifest reads back");
        assert_eq!(again.to_value(), m.to_value());
    }
}

fuzz_target!(|data: &[u8]| {
    let Ok(text) = std::str::from_utf8(data) else { return };
    check(text);
    if let Ok(sealed) = seal_json("manifest.json", text) {
        check(&sealed);
    }
});
