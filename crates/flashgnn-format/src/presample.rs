//! Pre-sampled batches (`flashgnn presample`, docs/format.md "Pre-sampled
//! batches"): the byte encoding of one stored batch, a *record*, and its
//! checked decoding. Pure bytes (this crate does no I/O); the Python loader
//! streams the `epoch-EEEE.fgps` files and calls these through `_core`.
//!
//! An epoch file is records back to back, nothing else. A record is a
//! 32-byte header then its payload, little-endian:
//!
//! ```text
//! 0  magic [8] "FGPSBAT2" (version 1: "FGPSBAT1")
//! 8  batch_size u32 | 12 num_nodes u32 | 16 num_edges u32 | 20 hops u32
//! 24 payload bytes u32
//! 28 crc u32: CRC32C seeded with the record's byte offset in its file, over
//!    header[0, 28) ++ payload (version 1: zlib CRC-32 of the payload only)
//! 32 payload: n_id i64[n] | row i32[e] | col i32[e] | num_sampled_nodes i32[hops+1]
//!    | num_sampled_edges i32[hops] | input_id i64[batch_size] | y i64[n]
//! ```
//!
//! Version 2 checksums the header too (a flipped count no longer relies on
//! the payload-size rule to be caught) and seeds it with the record's
//! position, as every per-structure checksum of the dataset format is, so a
//! record moved within its file fails its check. Version-1 files are still
//! read (their records keep their own magic and zlib checksum), so a
//! pre-sample made before the bump need not be sampled again. A reader is
//! told the version by `presample.json` and refuses a record of the other
//! version.
//!
//! Every field is checked against the header, the bytes given, the
//! dataset's node count and the sampler's hop limit before use, with checked
//! arithmetic; a failure is a [`FormatError`] naming the file, the record's
//! byte offset, the field, the value and the bound. Nothing here panics on
//! hostile bytes.

use crate::checksum::crc_at;
use crate::error::{FormatError, Result};

/// `format` of `presample.json`.
pub const PRESAMPLE_FORMAT: &str = "flashgnn-presample";
/// The version written (`presample.json` `version`, record magic).
pub const PRESAMPLE_VERSION: u32 = 2;
/// The oldest version read.
pub const PRESAMPLE_VERSION_MIN: u32 = 1;
/// Bytes of a record header.
pub const RECORD_HEADER_BYTES: usize = 32;

/// The record magic of `version`, or None for a version this build does not know.
pub fn record_magic(version: u32) -> Option<&'static [u8; 8]> {
    match version {
        1 => Some(b"FGPSBAT1"),
        2 => Some(b"FGPSBAT2"),
        _ => None,
    }
}

/// One stored batch, borrowed (what [`encode_record`] writes).
#[derive(Debug, Clone, Copy)]
pub struct BatchRef<'a> {
    pub batch_size: u32,
    pub n_id: &'a [i64],
    pub row: &'a [i32],
    pub col: &'a [i32],
    pub num_sampled_nodes: &'a [i32],
    pub num_sampled_edges: &'a [i32],
    pub input_id: &'a [i64],
    pub y: &'a [i64],
}

/// One stored batch, decoded and checked.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Batch {
    pub batch_size: u32,
    pub n_id: Vec<i64>,
    pub row: Vec<i32>,
    pub col: Vec<i32>,
    pub num_sampled_nodes: Vec<i32>,
    pub num_sampled_edges: Vec<i32>,
    pub input_id: Vec<i64>,
    pub y: Vec<i64>,
}

impl Batch {
    pub fn as_ref(&self) -> BatchRef<'_> {
        BatchRef {
            batch_size: self.batch_size,
            n_id: &self.n_id,
            row: &self.row,
            col: &self.col,
            num_sampled_nodes: &self.num_sampled_nodes,
            num_sampled_edges: &self.num_sampled_edges,
            input_id: &self.input_id,
            y: &self.y,
        }
    }
}

/// A record header's fields, checked against each other and the file.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RecordHeader {
    pub batch_size: u32,
    pub num_nodes: u32,
    pub num_edges: u32,
    pub hops: u32,
    pub payload_bytes: u32,
    pub crc: u32,
}

impl RecordHeader {
    /// Header plus payload.
    pub fn record_bytes(&self) -> u64 {
        RECORD_HEADER_BYTES as u64 + self.payload_bytes as u64
    }
}

/// The payload size the counts imply: 8n + 8e + 4(hops+1) + 4hops + 8bs + 8n.
/// None when it overflows u64 (only hostile counts do).
fn payload_size(batch_size: u64, n: u64, e: u64, hops: u64) -> Option<u64> {
    let words4 = e.checked_mul(2)?.checked_add(hops.checked_mul(2)?.checked_add(1)?)?;
    let words8 = n.checked_mul(2)?.checked_add(batch_size)?;
    words4.checked_mul(4)?.checked_add(words8.checked_mul(8)?)
}

fn bad(
    file: &str,
    offset: u64,
    field: &str,
    value: impl std::fmt::Display,
    bound: impl std::fmt::Display,
) -> FormatError {
    FormatError::invalid(file, format!("record at byte {offset}: {field} {value} {bound}"))
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes([b[at], b[at + 1], b[at + 2], b[at + 3]])
}

/// The checksum a record of `version` at `offset` carries.
fn record_crc(version: u32, offset: u64, head: &[u8], payload: &[u8]) -> u32 {
    if version == 1 {
        crc32fast::hash(payload)
    } else {
        crc32c::crc32c_append(crc_at(offset, head), payload)
    }
}

fn check_version(file: &str, version: u32) -> Result<&'static [u8; 8]> {
    match record_magic(version) {
        Some(m) if (PRESAMPLE_VERSION_MIN..=PRESAMPLE_VERSION).contains(&version) => Ok(m),
        _ => Err(FormatError::UnsupportedVersion {
            file: file.to_string(),
            found: version,
            supported: PRESAMPLE_VERSION,
        }),
    }
}

/// Check the header of the record at byte `offset` of `file` (`file_size`
/// bytes): magic of `version`, `hops` ≤ `max_hops`, the payload size the
/// counts imply, the record's end within the file, `batch_size` ≤
/// `num_nodes`. `header` holds what could be read there (fewer than
/// [`RECORD_HEADER_BYTES`] bytes: truncated).
pub fn decode_header(
    file: &str,
    header: &[u8],
    offset: u64,
    file_size: u64,
    version: u32,
    max_hops: u32,
) -> Result<RecordHeader> {
    let magic = check_version(file, version)?;
    if header.len() < RECORD_HEADER_BYTES {
        return Err(bad(file, offset, "header", format!("{} bytes", header.len()), "< 32 (truncated)"));
    }
    if &header[..8] != magic {
        return Err(bad(
            file,
            offset,
            "magic",
            format!("{:?}", String::from_utf8_lossy(&header[..8])),
            format!("!= {:?} (version {version})", String::from_utf8_lossy(magic)),
        ));
    }
    let h = RecordHeader {
        batch_size: le32(header, 8),
        num_nodes: le32(header, 12),
        num_edges: le32(header, 16),
        hops: le32(header, 20),
        payload_bytes: le32(header, 24),
        crc: le32(header, 28),
    };
    if h.hops > max_hops {
        return Err(bad(file, offset, "hops", h.hops, format!("> {max_hops}")));
    }
    let want = payload_size(h.batch_size as u64, h.num_nodes as u64, h.num_edges as u64, h.hops as u64);
    if want != Some(h.payload_bytes as u64) {
        let want = want.map_or_else(|| "more than 2^64".to_string(), |w| w.to_string());
        return Err(bad(file, offset, "payload bytes", h.payload_bytes, format!("!= {want} implied by the header")));
    }
    let end = offset.checked_add(h.record_bytes());
    if end.is_none_or(|e| e > file_size) {
        let end = end.map_or_else(|| "more than 2^64".to_string(), |e| e.to_string());
        return Err(bad(file, offset, "payload end", end, format!("> file size {file_size} (truncated)")));
    }
    if h.batch_size > h.num_nodes {
        return Err(bad(file, offset, "batch_size", h.batch_size, format!("> num_nodes {}", h.num_nodes)));
    }
    Ok(h)
}

/// Little-endian values of `count` `N`-byte words from `b` at `*at`.
fn take<const N: usize, T>(b: &[u8], at: &mut usize, count: u32, f: fn([u8; N]) -> T) -> Vec<T> {
    let n = count as usize * N;
    let out = b[*at..*at + n].chunks_exact(N).map(|c| f(c.try_into().unwrap_or([0; N]))).collect();
    *at += n;
    out
}

/// Decode the record at byte `offset` of `file`: `record` is its whole
/// bytes (header and payload; a shorter slice is truncated, a longer one
/// trailing bytes). Checks the header ([`decode_header`]), the checksum,
/// every `n_id` < `num_nodes`, every `row`/`col` < the record's node count,
/// and that the per-hop counts are non-negative, add up to the record's
/// nodes and edges and start with `batch_size`.
pub fn decode_record(
    file: &str,
    record: &[u8],
    offset: u64,
    version: u32,
    num_nodes: u64,
    max_hops: u32,
) -> Result<Batch> {
    let size = offset.saturating_add(record.len() as u64);
    let h = decode_header(file, record, offset, size, version, max_hops)?;
    let len = h.record_bytes() as usize; // ≤ record.len(): decode_header checked the end
    if len != record.len() {
        return Err(FormatError::Truncated {
            file: file.to_string(),
            offset,
            needed: len as u64,
            available: record.len() as u64,
        });
    }
    let (head, payload) = record.split_at(RECORD_HEADER_BYTES);
    let crc = record_crc(version, offset, &head[..28], payload);
    if crc != h.crc {
        let what = if version == 1 { "crc32" } else { "crc32c" };
        return Err(bad(file, offset, what, format!("{crc:#010x}"), format!("!= stored {:#010x}", h.crc)));
    }
    let mut at = 0;
    let b = Batch {
        batch_size: h.batch_size,
        n_id: take(payload, &mut at, h.num_nodes, i64::from_le_bytes),
        row: take(payload, &mut at, h.num_edges, i32::from_le_bytes),
        col: take(payload, &mut at, h.num_edges, i32::from_le_bytes),
        // hops + 1 cannot overflow: the payload size check bounds hops far below u32::MAX.
        num_sampled_nodes: take(payload, &mut at, h.hops.saturating_add(1), i32::from_le_bytes),
        num_sampled_edges: take(payload, &mut at, h.hops, i32::from_le_bytes),
        input_id: take(payload, &mut at, h.batch_size, i64::from_le_bytes),
        y: take(payload, &mut at, h.num_nodes, i64::from_le_bytes),
    };
    if let Some(&v) = b.n_id.iter().find(|&&v| v < 0 || v as u64 >= num_nodes) {
        return Err(bad(file, offset, "n_id", v, format!("outside [0, {num_nodes})")));
    }
    let n = h.num_nodes as i64;
    if let Some(&v) = b.row.iter().chain(&b.col).find(|&&v| v < 0 || v as i64 >= n) {
        return Err(bad(file, offset, "row/col", v, format!("outside [0, {n}) local ids")));
    }
    let nsn = &b.num_sampled_nodes;
    let nse = &b.num_sampled_edges;
    let sum = |v: &[i32]| v.iter().map(|&x| x as i64).sum::<i64>();
    if nsn.iter().chain(nse).any(|&x| x < 0)
        || sum(nsn) != n
        || sum(nse) != h.num_edges as i64
        || nsn[0] as i64 != h.batch_size as i64
    {
        return Err(bad(
            file,
            offset,
            "per-hop counts",
            format!("{nsn:?}/{nse:?}"),
            format!("do not add up to {n} nodes / {} edges (first = batch_size {})", h.num_edges, h.batch_size),
        ));
    }
    Ok(b)
}

/// A count as a header field, or an error naming it.
fn count(what: &str, n: usize) -> Result<u32> {
    u32::try_from(n).map_err(|_| {
        FormatError::invalid("pre-sample record", format!("{what} {n} does not fit a record header (max {})", u32::MAX))
    })
}

/// Encode `b` as a record of the current version to be written at byte
/// `offset` of its file. Refuses a batch whose arrays disagree with each
/// other (`row`, `col` and `num_sampled_edges` against `num_sampled_nodes`,
/// `y` against `n_id`, `input_id` against `batch_size`) or whose counts do
/// not fit the header.
pub fn encode_record(b: &BatchRef<'_>, offset: u64) -> Result<Vec<u8>> {
    let n = count("num_nodes", b.n_id.len())?;
    let e = count("num_edges", b.row.len())?;
    let hops = count("hops", b.num_sampled_edges.len())?;
    let disagree = |what: &str, got: usize, want: usize| {
        FormatError::invalid("pre-sample record", format!("{what} has {got} entries, expected {want}"))
    };
    if b.col.len() != b.row.len() {
        return Err(disagree("col", b.col.len(), b.row.len()));
    }
    if b.num_sampled_nodes.len() != b.num_sampled_edges.len() + 1 {
        return Err(disagree("num_sampled_nodes", b.num_sampled_nodes.len(), b.num_sampled_edges.len() + 1));
    }
    if b.y.len() != b.n_id.len() {
        return Err(disagree("y", b.y.len(), b.n_id.len()));
    }
    if b.input_id.len() != b.batch_size as usize {
        return Err(disagree("input_id", b.input_id.len(), b.batch_size as usize));
    }
    let plen = payload_size(b.batch_size as u64, n as u64, e as u64, hops as u64)
        .and_then(|p| u32::try_from(p).ok())
        .ok_or_else(|| {
        FormatError::invalid("pre-sample record", "payload of 4 GiB or more does not fit a record")
    })?;
    let mut out = Vec::with_capacity(RECORD_HEADER_BYTES + plen as usize);
    out.extend_from_slice(record_magic(PRESAMPLE_VERSION).unwrap_or(b"FGPSBAT2"));
    for v in [b.batch_size, n, e, hops, plen] {
        out.extend_from_slice(&v.to_le_bytes());
    }
    out.extend_from_slice(&[0; 4]);
    b.n_id.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    b.row.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    b.col.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    b.num_sampled_nodes.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    b.num_sampled_edges.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    b.input_id.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    b.y.iter().for_each(|v| out.extend_from_slice(&v.to_le_bytes()));
    let (head, payload) = out.split_at(RECORD_HEADER_BYTES);
    let crc = record_crc(PRESAMPLE_VERSION, offset, &head[..28], payload);
    out[28..32].copy_from_slice(&crc.to_le_bytes());
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn batch() -> Batch {
        Batch {
            batch_size: 2,
            n_id: vec![7, 3, 9, 0],
            row: vec![2, 3, 2],
            col: vec![0, 0, 1],
            num_sampled_nodes: vec![2, 2],
            num_sampled_edges: vec![3],
            input_id: vec![5, 1],
            y: vec![1, -1, 0, 2],
        }
    }

    #[test]
    fn roundtrip_at_its_offset() {
        let b = batch();
        let r = encode_record(&b.as_ref(), 96).unwrap();
        assert_eq!(&r[..8], b"FGPSBAT2");
        assert_eq!(decode_record("f", &r, 96, 2, 10, 16).unwrap(), b);
        let h = decode_header("f", &r[..32], 96, 96 + r.len() as u64, 2, 16).unwrap();
        assert_eq!(h.record_bytes(), r.len() as u64);
        // Moved elsewhere in its file: the position-seeded checksum fails.
        let e = decode_record("f", &r, 0, 2, 10, 16).unwrap_err().to_string();
        assert!(e.contains("record at byte 0: crc32c"), "{e}");
        // Read as version 1: the magic names the version.
        let e = decode_record("f", &r, 96, 1, 10, 16).unwrap_err().to_string();
        assert!(e.contains("magic") && e.contains("FGPSBAT1"), "{e}");
        assert!(decode_record("f", &r, 96, 3, 10, 16).unwrap_err().to_string().contains("version 3"));
    }

    #[test]
    fn version_1_records_are_read() {
        // A version-1 record as the Python writer made it: zlib CRC-32 of the payload only.
        let b = batch();
        let mut r = encode_record(&b.as_ref(), 0).unwrap();
        r[..8].copy_from_slice(b"FGPSBAT1");
        let crc = crc32fast::hash(&r[32..]);
        r[28..32].copy_from_slice(&crc.to_le_bytes());
        assert_eq!(decode_record("f", &r, 500, 1, 10, 16).unwrap(), b);
        assert!(decode_record("f", &r, 500, 2, 10, 16).is_err());
    }

    #[test]
    fn checks_name_the_field() {
        let r = encode_record(&batch().as_ref(), 0).unwrap();
        let err = |r: &[u8], nodes: u64| decode_record("f.fgps", r, 0, 2, nodes, 16).unwrap_err().to_string();
        assert!(err(&r, 9).contains("f.fgps: record at byte 0: n_id 9 outside [0, 9)"), "{}", err(&r, 9));
        assert!(err(&r[..40], 10).contains("truncated"));
        assert!(err(&r[..10], 10).contains("header 10 bytes < 32 (truncated)"));
        let mut long = r.clone();
        long.push(0);
        assert!(err(&long, 10).contains("trailing"));
        let mut h = r.clone();
        h[20] = 17;
        assert!(err(&h, 10).contains("hops 17 > 16"));
        h[20] = 2;
        assert!(err(&h, 10).contains("payload bytes"));
        // Counts changed so that the payload size still agrees (one seed fewer, one edge more): the
        // header's checksum catches them.
        let mut c = r.clone();
        c[8] = 1;
        c[16] = 4;
        assert!(err(&c, 10).contains("record at byte 0: crc32c"), "{}", err(&c, 10));
        // Counts of a record whose checksum was recomputed (a bad writer) are still checked.
        let mut b = batch();
        b.row[0] = 4;
        assert!(err(&encode_record(&b.as_ref(), 0).unwrap(), 10).contains("row/col 4 outside [0, 4)"));
        let mut b = batch();
        b.num_sampled_nodes = vec![3, 1];
        assert!(err(&encode_record(&b.as_ref(), 0).unwrap(), 10).contains("per-hop counts"));
        let mut b = batch();
        b.y.pop();
        assert!(encode_record(&b.as_ref(), 0).is_err());
    }

    #[test]
    fn hostile_bytes_never_panic() {
        let r = encode_record(&batch().as_ref(), 64).unwrap();
        let mut x = 0x9e37_79b9_7f4a_7c15u64;
        for i in 0..20_000 {
            let mut b = r.clone();
            for _ in 0..1 + i % 4 {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                let at = (x % b.len() as u64) as usize;
                b[at] ^= 1 << (x >> 60 & 7);
            }
            let cut = if i % 5 == 0 { (x >> 8) as usize % (b.len() + 1) } else { b.len() };
            let _ = decode_record("f", &b[..cut], 64, 2, 10, 16);
            let _ = decode_record("f", &b[..cut], 64, 1, 10, 16);
            let _ = decode_header("f", &b[..cut.min(32)], 64, u64::MAX, 2, u32::MAX);
        }
        // Headers that claim the most of everything.
        let mut h = r[..32].to_vec();
        h[8..28].fill(0xff);
        assert!(decode_header("f", &h, u64::MAX - 1, u64::MAX, 2, u32::MAX).is_err());
    }
}
