//! I/O traces (`flashgnn_sim::trace::TraceReader`, over the block and
//! record decoders of `flashgnn_format::trace`): header (magic, version,
//! params length bound, CRC, page size, the file table in its params),
//! blocks (magic, count bound, payload CRC), records (file index, kind,
//! ranges), the batch/index order and the end block's totals. The reader's
//! entry point is a path, so the input goes through a scratch file. With
//! the fix-up byte set the header CRC and every block's CRC are recomputed
//! first, so the record and order checks behind them are reached.
#![no_main]
use flashgnn_format::trace::{BLOCK_HEADER, BLOCK_RECORDS, END_PAYLOAD, HEADER_FIXED, RECORD_BYTES};
use flashgnn_fuzz::{fix_crc, scratch_file, Draw};
use flashgnn_sim::trace::TraceReader;
use libfuzzer_sys::fuzz_target;

/// Recompute the header CRC and the CRC of each block whose count is in
/// bounds, walking blocks until one runs past the end.
fn seal(b: &mut [u8]) {
    if b.len() < HEADER_FIXED {
        return;
    }
    let n = u32::from_le_bytes(b[24..28].try_into().unwrap()) as usize;
    if b.len() < HEADER_FIXED + n {
        return;
    }
    let c = crc32c::crc32c_append(crc32c::crc32c(&b[0..28]), &b[HEADER_FIXED..HEADER_FIXED + n]);
    b[28..32].copy_from_slice(&c.to_le_bytes());
    let mut off = HEADER_FIXED + n;
    while b.len() - off >= BLOCK_HEADER {
        let count = u32::from_le_bytes(b[off + 4..off + 8].try_into().unwrap()) as usize;
        if count > BLOCK_RECORDS {
            break;
        }
        let len = if count == 0 { END_PAYLOAD } else { count * RECORD_BYTES };
        let end = off + BLOCK_HEADER + len;
        if end > b.len() {
            break;
        }
        let c = crc32c::crc32c(&b[off + BLOCK_HEADER..end]);
        b[off + 8..off + 12].copy_from_slice(&c.to_le_bytes());
        off = end;
    }
}

fuzz_target!(|data: &[u8]| {
    let mut d = Draw::new(data);
    let fix = fix_crc(&mut d);
    let mut bytes = d.rest.to_vec();
    if fix {
        seal(&mut bytes);
    }
    let path = scratch_file("trace.fgt", &bytes);
    let Ok(mut r) = TraceReader::open(&path) else { return };
    assert!(!r.files.is_empty());
    // Every record is at least 64 bytes, so there are fewer batches than bytes.
    for _ in 0..=bytes.len() {
        match r.next_batch() {
            Ok(Some(batch)) => {
                assert!(!batch.is_empty());
                assert!(batch.iter().all(|x| (x.file as usize) < r.files.len()));
            }
            Ok(None) | Err(_) => return,
        }
    }
    panic!("next_batch did not end within {} calls", bytes.len() + 1);
});
