//! The mutable store's write-ahead log (`flashgnn_mutate::wal`): header
//! (magic, CRC, version, dataset binding), then `replay` — the structural
//! pass over every frame (lengths, CRCs, sequence numbers, commit-group
//! indices, torn tail against corruption in the middle) and the decoding of
//! every op before the cut — and `reset_group_indices` on the body. With
//! the fix-up byte set the header CRC and every frame's CRC are recomputed
//! first, so the sequence, group and op checks behind them are reached.
#![no_main]
use flashgnn_fuzz::{fix_crc, Draw};
use flashgnn_mutate::wal::{check_bound, replay, reset_group_indices, FRAME_HEADER_BYTES, WAL_HEADER_BYTES};
use libfuzzer_sys::fuzz_target;

const LEN_MASK: u32 = (1 << 27) - 1;

/// Recompute the header CRC and each frame's CRC, walking frames by their
/// length fields until one runs past the end.
fn seal(b: &mut [u8]) {
    let h = WAL_HEADER_BYTES as usize;
    if b.len() < h {
        return;
    }
    let c = crc32c::crc32c(&b[..32]);
    b[32..36].copy_from_slice(&c.to_le_bytes());
    let mut off = h;
    while b.len() - off >= FRAME_HEADER_BYTES {
        let len = (u32::from_le_bytes(b[off..off + 4].try_into().unwrap()) & LEN_MASK) as usize;
        let end = off + FRAME_HEADER_BYTES + len;
        if end > b.len() {
            break;
        }
        let c = crc32c::crc32c_append(crc32c::crc32c(&b[off..off + 4]), &b[off + 8..end]);
        b[off + 4..off + 8].copy_from_slice(&c.to_le_bytes());
        off = end;
    }
}

fuzz_target!(|data: &[u8]| {
    let mut d = Draw::new(data);
    let fix = fix_crc(&mut d);
    let dataset_id = match d.u8() % 3 {
        0 => None,
        _ => Some(d.u64()),
    };
    let mut log = d.rest.to_vec();
    if fix {
        seal(&mut log);
    }
    let _ = check_bound("wal-0.log", &log, dataset_id);
    let mut ops = 0u64;
    let mut last = None;
    let r = replay("wal-0.log", &log, |seq, _off, o| {
        if let Some(prev) = last {
            assert_eq!(seq, prev + 1, "frames are applied in sequence");
        }
        last = Some(seq);
        ops += o.len() as u64;
        Ok(())
    });
    if let Ok(r) = r {
        assert_eq!(r.ops, ops);
        assert!(r.valid_len + r.torn_bytes == log.len() as u64);
        let mut body = log[WAL_HEADER_BYTES as usize..r.valid_len as usize].to_vec();
        reset_group_indices("wal-0.log", &mut body).expect("the valid part is whole frames");
    }
});
