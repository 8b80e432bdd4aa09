//! I/O trace format (docs/trace.md): what the sampling engine read, per
//! batch, with the dependency between reads. Pure byte encoding and decoding
//! (this crate does no I/O); the streaming writer and reader live in
//! `flashgnn-sim::trace`.
//!
//! Layout: a header (magic, version, dataset id, page size, a JSON params
//! blob, CRC32C), then blocks of at most [`BLOCK_RECORDS`] fixed-size
//! little-endian records, each block CRC-sealed, then an end block
//! (count 0) carrying the totals.

use crate::error::{FormatError, Result};

pub const TRACE_MAGIC: &[u8; 8] = b"FGNNTRC\0";
/// Version 2: a record's `file` indexes the header's file table (params
/// `files`), so a typed dataset's `t<i>.features.fg` files are named; version
/// 1 (read too) has the fixed table graph.fg, overflow.fg, features.fg.
pub const TRACE_VERSION: u32 = 2;
/// The file table of a version-1 trace, and of one whose params name none.
pub const DEFAULT_FILES: [&str; 3] = ["graph.fg", "overflow.fg", "features.fg"];
/// Most files a trace's file table may name (a record's `file` is a u8).
pub const MAX_FILES: usize = 256;
pub const BLOCK_MAGIC: &[u8; 4] = b"FGTB";
/// Fixed part of the header before the params JSON.
pub const HEADER_FIXED: usize = 32;
pub const RECORD_BYTES: usize = 64;
pub const BLOCK_HEADER: usize = 16;
pub const BLOCK_RECORDS: usize = 4096;
/// End block payload: total records, total batches, 8 reserved bytes.
pub const END_PAYLOAD: usize = 24;
/// Largest params blob accepted (1 MiB).
pub const MAX_PARAMS: usize = 1 << 20;
/// "No dependency" (a seed's read).
pub const NO_DEP: u32 = u32::MAX;

/// Which file of the dataset a read addresses.
pub const FILE_GRAPH: u8 = 0;
pub const FILE_OVERFLOW: u8 = 1;
pub const FILE_FEATURES: u8 = 2;
/// What a read is for.
pub const KIND_SLOT_PAGE: u8 = 0;
pub const KIND_OVERFLOW_PAGE: u8 = 1;
pub const KIND_FEATURE_ROW: u8 = 2;

/// One read the engine issued.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct TraceRead {
    pub batch: u32,
    /// Index of this read within its batch (0, 1, ... in issue order; the
    /// writer renumbers on write).
    pub index: u32,
    pub file: u8,
    pub kind: u8,
    /// Hop of the node the read was first issued for (0 = seeds).
    pub hop: u8,
    pub offset: u64,
    pub length: u32,
    /// Index (in this batch) of the read whose completion caused this one,
    /// [`NO_DEP`] for reads issued from the seeds alone.
    pub dep: u32,
    /// Bytes of this read the batch used (slots, neighbor ids, feature rows).
    pub bytes_used: u32,
    /// Nodes (slots, sampled overflow entries, feature rows) served by it.
    pub items: u32,
    /// Internal id of the node the read was first issued for.
    pub node: u32,
    /// Nanoseconds since the trace started; 0 when not recorded.
    pub submit_ns: u64,
    pub complete_ns: u64,
}

impl TraceRead {
    pub fn encode(&self, out: &mut Vec<u8>) {
        out.extend_from_slice(&self.batch.to_le_bytes());
        out.extend_from_slice(&self.index.to_le_bytes());
        out.push(self.file);
        out.push(self.kind);
        out.push(self.hop);
        out.push(0);
        out.extend_from_slice(&self.length.to_le_bytes());
        out.extend_from_slice(&self.offset.to_le_bytes());
        out.extend_from_slice(&self.dep.to_le_bytes());
        out.extend_from_slice(&self.bytes_used.to_le_bytes());
        out.extend_from_slice(&self.items.to_le_bytes());
        out.extend_from_slice(&self.node.to_le_bytes());
        out.extend_from_slice(&self.submit_ns.to_le_bytes());
        out.extend_from_slice(&self.complete_ns.to_le_bytes());
        out.extend_from_slice(&[0u8; 8]);
    }

    /// Decode one record of a trace whose file table is [`DEFAULT_FILES`];
    /// `offset` (its byte offset in `file`) is named in any error. Checks
    /// every field against its bound.
    pub fn decode(b: &[u8], file: &str, offset: u64) -> Result<TraceRead> {
        Self::decode_in(b, file, offset, DEFAULT_FILES.len())
    }

    /// [`Self::decode`] in a trace whose file table has `num_files` entries
    /// ([`TraceHeader::files`]): `file` must index it.
    pub fn decode_in(b: &[u8], file: &str, offset: u64, num_files: usize) -> Result<TraceRead> {
        if b.len() < RECORD_BYTES {
            return Err(FormatError::Truncated {
                file: file.into(),
                offset,
                needed: RECORD_BYTES as u64,
                available: b.len() as u64,
            });
        }
        let u32at = |i: usize| u32::from_le_bytes(b[i..i + 4].try_into().unwrap());
        let u64at = |i: usize| u64::from_le_bytes(b[i..i + 8].try_into().unwrap());
        let r = TraceRead {
            batch: u32at(0),
            index: u32at(4),
            file: b[8],
            kind: b[9],
            hop: b[10],
            length: u32at(12),
            offset: u64at(16),
            dep: u32at(24),
            bytes_used: u32at(28),
            items: u32at(32),
            node: u32at(36),
            submit_ns: u64at(40),
            complete_ns: u64at(48),
        };
        let oob = |at: u64, field: &'static str, value: u64, bound: String| {
            Err(FormatError::oob(file.to_string(), offset + at, field, value, bound))
        };
        if r.file as usize >= num_files {
            return oob(8, "file", r.file as u64, format!("< {num_files} (the trace's file table)"));
        }
        if r.kind > KIND_FEATURE_ROW {
            return oob(9, "kind", r.kind as u64, "<= 2 (slot page, overflow page, feature row)".into());
        }
        if r.hop > 16 {
            return oob(10, "hop", r.hop as u64, "<= 16".into());
        }
        if r.length == 0 || r.length > (1 << 30) {
            return oob(12, "length", r.length as u64, "in [1, 2^30]".into());
        }
        if r.dep != NO_DEP && r.dep >= r.index {
            return oob(24, "dep", r.dep as u64, format!("< the read's own index {} (or none)", r.index));
        }
        if r.bytes_used > r.length {
            return oob(28, "bytes_used", r.bytes_used as u64, format!("<= length {}", r.length));
        }
        if r.complete_ns != 0 && r.complete_ns < r.submit_ns {
            return oob(48, "complete_ns", r.complete_ns, format!(">= submit_ns {}", r.submit_ns));
        }
        if b[11] != 0 || b[56..64].iter().any(|&x| x != 0) {
            return Err(FormatError::Invalid {
                file: file.into(),
                message: format!("reserved bytes of the trace record at offset {offset} are not zero"),
            });
        }
        Ok(r)
    }
}

/// The trace header.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TraceHeader {
    pub version: u32,
    pub dataset_id: u64,
    pub page_size: u32,
    /// Capture parameters as JSON (fanouts, batch size, engine, depth,
    /// dataset path, row/slot bytes ...): free-form, for the reader.
    pub params: String,
}

impl TraceHeader {
    /// magic(8) version(4) page_size(4) dataset_id(8) params_len(4) crc(4),
    /// then the params bytes. The CRC32C covers bytes 0..28 and the params.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(HEADER_FIXED + self.params.len());
        out.extend_from_slice(TRACE_MAGIC);
        out.extend_from_slice(&self.version.to_le_bytes());
        out.extend_from_slice(&self.page_size.to_le_bytes());
        out.extend_from_slice(&self.dataset_id.to_le_bytes());
        out.extend_from_slice(&(self.params.len() as u32).to_le_bytes());
        let mut crc = crc32c::crc32c(&out);
        crc = crc32c::crc32c_append(crc, self.params.as_bytes());
        out.extend_from_slice(&crc.to_le_bytes());
        out.extend_from_slice(self.params.as_bytes());
        out
    }

    /// The params length announced by the fixed part (checked against its
    /// bound), so the reader knows how much more to read.
    pub fn params_len(fixed: &[u8], file: &str) -> Result<usize> {
        if fixed.len() < HEADER_FIXED {
            return Err(FormatError::Truncated {
                file: file.into(),
                offset: 0,
                needed: HEADER_FIXED as u64,
                available: fixed.len() as u64,
            });
        }
        if &fixed[0..8] != TRACE_MAGIC {
            return Err(FormatError::BadMagic {
                file: file.into(),
                found: String::from_utf8_lossy(&fixed[0..8]).into_owned(),
                expected: "FGNNTRC".into(),
            });
        }
        let version = u32::from_le_bytes(fixed[8..12].try_into().unwrap());
        if !(1..=TRACE_VERSION).contains(&version) {
            return Err(FormatError::UnsupportedVersion {
                file: file.into(),
                found: version,
                supported: TRACE_VERSION,
            });
        }
        let n = u32::from_le_bytes(fixed[24..28].try_into().unwrap()) as usize;
        if n > MAX_PARAMS {
            return Err(FormatError::oob(file.to_string(), 24, "params_len", n as u64, format!("<= {MAX_PARAMS}")));
        }
        Ok(n)
    }

    /// Decode the fixed part plus `params` (its announced length).
    pub fn decode(fixed: &[u8], params: &[u8], file: &str) -> Result<TraceHeader> {
        let n = Self::params_len(fixed, file)?;
        if params.len() != n {
            return Err(FormatError::Truncated {
                file: file.into(),
                offset: HEADER_FIXED as u64,
                needed: n as u64,
                available: params.len() as u64,
            });
        }
        let stored = u32::from_le_bytes(fixed[28..32].try_into().unwrap());
        let computed = crc32c::crc32c_append(crc32c::crc32c(&fixed[0..28]), params);
        if stored != computed {
            return Err(FormatError::Checksum {
                file: file.into(),
                offset: 0,
                what: "trace header".into(),
                stored,
                computed,
            });
        }
        let page_size = u32::from_le_bytes(fixed[12..16].try_into().unwrap());
        if !(512..=(1 << 20)).contains(&page_size) || !page_size.is_power_of_two() {
            return Err(FormatError::oob(
                file.to_string(),
                12,
                "page_size",
                page_size as u64,
                "a power of two in [512, 1 MiB]",
            ));
        }
        let params = String::from_utf8(params.to_vec()).map_err(|_| FormatError::Invalid {
            file: file.into(),
            message: format!("trace params at offset {HEADER_FIXED} are not UTF-8"),
        })?;
        let h = TraceHeader {
            version: u32::from_le_bytes(fixed[8..12].try_into().unwrap()),
            page_size,
            dataset_id: u64::from_le_bytes(fixed[16..24].try_into().unwrap()),
            params,
        };
        h.files(file)?;
        Ok(h)
    }

    /// The trace's file table: dataset file names by the value of a record's
    /// `file`. Version 2: params `files` (a list of 1..=256 names) when
    /// given, else [`DEFAULT_FILES`]; version 1: [`DEFAULT_FILES`]. A
    /// `files` that is not such a list is refused, naming the trace.
    pub fn files(&self, file: &str) -> Result<Vec<String>> {
        let default = || DEFAULT_FILES.iter().map(|s| s.to_string()).collect();
        if self.version < 2 {
            return Ok(default());
        }
        let v: serde_json::Value = serde_json::from_str(&self.params).unwrap_or(serde_json::Value::Null);
        let Some(f) = v.get("files") else { return Ok(default()) };
        let names: Option<Vec<String>> =
            f.as_array().and_then(|a| a.iter().map(|n| n.as_str().map(String::from)).collect());
        match names {
            Some(n) if (1..=MAX_FILES).contains(&n.len()) => Ok(n),
            _ => Err(FormatError::Invalid {
                file: file.into(),
                message: format!(
                    "trace params at offset {HEADER_FIXED}: files = {f} is out of bounds (must be a list of 1..={MAX_FILES} file names)"
                ),
            }),
        }
    }
}

/// Block header: magic(4) count(4) crc32c of the payload(4) reserved(4).
/// count = 0 marks the end block, whose payload is [`END_PAYLOAD`] bytes.
pub fn encode_block_header(count: u32, payload: &[u8]) -> [u8; BLOCK_HEADER] {
    let mut h = [0u8; BLOCK_HEADER];
    h[0..4].copy_from_slice(BLOCK_MAGIC);
    h[4..8].copy_from_slice(&count.to_le_bytes());
    h[8..12].copy_from_slice(&crc32c::crc32c(payload).to_le_bytes());
    h
}

/// Decode a block header at `offset`: (record count, stored payload CRC).
pub fn decode_block_header(h: &[u8], file: &str, offset: u64) -> Result<(u32, u32)> {
    if h.len() < BLOCK_HEADER {
        return Err(FormatError::Truncated {
            file: file.into(),
            offset,
            needed: BLOCK_HEADER as u64,
            available: h.len() as u64,
        });
    }
    if &h[0..4] != BLOCK_MAGIC {
        return Err(FormatError::oob(
            file.to_string(),
            offset,
            "block magic",
            u32::from_le_bytes(h[0..4].try_into().unwrap()) as u64,
            "== \"FGTB\"",
        ));
    }
    let count = u32::from_le_bytes(h[4..8].try_into().unwrap());
    if count as usize > BLOCK_RECORDS {
        return Err(FormatError::oob(
            file.to_string(),
            offset + 4,
            "block record count",
            count as u64,
            format!("<= {BLOCK_RECORDS}"),
        ));
    }
    Ok((count, u32::from_le_bytes(h[8..12].try_into().unwrap())))
}

/// Check a block payload against its header's CRC.
pub fn check_block(payload: &[u8], stored: u32, file: &str, offset: u64) -> Result<()> {
    let computed = crc32c::crc32c(payload);
    if computed != stored {
        return Err(FormatError::Checksum { file: file.into(), offset, what: "trace block".into(), stored, computed });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn record_roundtrip_and_bounds() {
        let r = TraceRead {
            batch: 3,
            index: 7,
            file: 1,
            kind: 1,
            hop: 2,
            offset: 8192,
            length: 4096,
            dep: 2,
            bytes_used: 16,
            items: 2,
            node: 9,
            submit_ns: 5,
            complete_ns: 9,
        };
        let mut b = Vec::new();
        r.encode(&mut b);
        assert_eq!(b.len(), RECORD_BYTES);
        assert_eq!(TraceRead::decode(&b, "t", 0).unwrap(), r);
        let mut bad = b.clone();
        bad[24..28].copy_from_slice(&7u32.to_le_bytes()); // dep == own index
        let e = TraceRead::decode(&bad, "t", 100).unwrap_err().to_string();
        assert!(e.contains("124") && e.contains("dep"), "{e}");
    }

    #[test]
    fn header_roundtrip_and_crc() {
        let h = TraceHeader { version: TRACE_VERSION, dataset_id: 42, page_size: 4096, params: "{\"a\":1}".into() };
        let b = h.encode();
        let n = TraceHeader::params_len(&b, "t").unwrap();
        assert_eq!(TraceHeader::decode(&b[..HEADER_FIXED], &b[HEADER_FIXED..HEADER_FIXED + n], "t").unwrap(), h);
        let mut bad = b.clone();
        bad[HEADER_FIXED] ^= 1;
        assert!(TraceHeader::decode(&bad[..HEADER_FIXED], &bad[HEADER_FIXED..], "t").is_err());
    }
}
