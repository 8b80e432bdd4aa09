//! Pre-sample records (`flashgnn_format::presample`): `decode_header`
//! (magic, hops bound, the payload size the counts imply, the record's end
//! in its file) and `decode_record` (checksum, every id and per-hop count),
//! for both record versions. With the fix-up byte set the record's CRC is
//! recomputed, so the checks behind it are reached. An accepted record
//! must encode back to the same bytes (version 2).
#![no_main]
use flashgnn_format::checksum::crc_at;
use flashgnn_format::presample::{decode_header, decode_record, encode_record, RECORD_HEADER_BYTES};
use flashgnn_fuzz::{fix_crc, Draw};
use libfuzzer_sys::fuzz_target;

/// The loader's hop limit (`flashgnn_sample::MAX_HOPS`, which the bindings pass).
const MAX_HOPS: u32 = 16;

fuzz_target!(|data: &[u8]| {
    let mut d = Draw::new(data);
    let version = 1 + (d.u8() as u32 & 1);
    let fix = fix_crc(&mut d);
    let offset = d.u16() as u64 * 8;
    let num_nodes = d.u32() as u64;
    let mut rec = d.rest.to_vec();
    if fix && rec.len() >= RECORD_HEADER_BYTES {
        let (head, payload) = rec.split_at(RECORD_HEADER_BYTES);
        let crc = if version == 1 {
            crc32fast::hash(payload)
        } else {
            crc32c::crc32c_append(crc_at(offset, &head[..28]), payload)
        };
        rec[28..32].copy_from_slice(&crc.to_le_bytes());
    }
    let file_size = offset + rec.len() as u64;
    if let Ok(h) = decode_header("epoch-0000.fgps", &rec, offset, file_size, version, MAX_HOPS) {
        assert!(offset + h.record_bytes() <= file_size && h.hops <= MAX_HOPS);
    }
    if let Ok(b) = decode_record("epoch-0000.fgps", &rec, offset, version, num_nodes, MAX_HOPS) {
        assert!(b.n_id.iter().all(|&v| v >= 0 && (v as u64) < num_nodes));
        if version == 2 {
            assert_eq!(encode_record(&b.as_ref(), offset).expect("an accepted record encodes"), rec);
        }
    }
});
