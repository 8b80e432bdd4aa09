//! The write-ahead log: byte encoding of the header and of frames, replay
//! with torn-tail detection, and the append side used by group commit.
//!
//! ```text
//! wal-<gen>.log = header (40 B) | frame | frame | ...
//! header: magic "FGNNWAL\0" | version u32 = 3 | flags u32 = 0 | generation u64
//!         | base_seq u64 | crc32c u32 of bytes [0, 32) | bound u32
//!         bound (version 3) = crc32c(base dataset_id LE ++ bytes [0, 32)),
//!         0 when the base has no dataset id (format v1); version 1/2: 0, unchecked
//! frame:  len u32 | crc u32 | seq u64 | payload
//!         len = payload bytes (bits 0..27) | index in its commit group << 27
//!         (version 1: the index bits are 0)
//!         crc = crc32c(len field ++ seq bytes ++ payload)
//! payload: count u32 | count ops
//! op:     tag u8, then  1 add_vertex:    id u64 | row_bytes u32 | row
//!                       2 delete_vertex: vid u64
//!                       3 add_edge:      dst u64 | src u64
//!                       4 delete_edge:   dst u64 | src u64
//!                       5 update_embed:  vid u64 | row_bytes u32 | row
//! ```
//!
//! One frame is one client batch: it is durable (and so applied on replay)
//! entirely or not at all. Frames carry consecutive sequence numbers starting
//! at `base_seq + 1` (`base_seq` = the last batch already inside this
//! generation's base dataset). All integers little-endian.
//!
//! Commit groups: the group-commit leader writes up to [`GROUP_MAX_FRAMES`]
//! frames with one write and one fdatasync, and starts the next group only
//! after that fdatasync returned. Each frame records its index in its group,
//! so `seq - index` is the sequence number of its group's first frame. A
//! power failure during a group's write can leave its pages on disk in any
//! order (frame k torn, frame k+1 intact) — but never a frame of a *later*
//! group, which was not written yet.
//!
//! Replay rules (see `docs/format.md` § *Mutable store*): at a damaged frame
//! (header or payload past the end of the file, length over the limit, bad
//! CRC) expected to have seq `e`, every later structurally valid frame
//! (length fits, CRC matches, seq in `(e, e + 2^20]`) is looked at:
//! - one with `seq - index > e` belongs to a group that started after the
//!   damaged frame, so the damaged frame's group was fdatasync'ed (and
//!   acknowledged): **corruption in the middle**, refused with the file, byte
//!   offset and sequence number;
//! - otherwise the damage is a **torn tail**: the last group's write, never
//!   acknowledged. When later frames of that group survived, the whole group
//!   is dropped (from its first frame's offset, `seq - index` of those
//!   frames); with nothing valid after the damage, replay stops at the
//!   damaged frame. The dropped bytes are ignored, and truncated when the log
//!   is opened for writing;
//! - version-1 logs carry no group index: every frame is its own group, so
//!   any valid frame after damage is corruption in the middle;
//! - a frame with a good CRC but the wrong sequence number, an impossible
//!   group index or undecodable ops is refused the same way.
//!
//! Replay checks the structure of the whole log first and decodes and
//! applies frames only up to the cut, so frames of a dropped group are never
//! applied.
//!
//! Nothing here panics on hostile bytes: every length is checked against
//! what is left before it is used.

use std::os::unix::fs::FileExt;
use std::path::Path;

use flashgnn_io::{Disk, DiskFile, IoError};
use flashgnn_store::Op;

use crate::{corrupt, MutError, Result};

pub const WAL_MAGIC: [u8; 8] = *b"FGNNWAL\0";
/// The version written: frames carry their index in their commit group
/// (since 2) and the header is bound to the generation's base dataset by its
/// `dataset_id` (since 3: a log copied from another dataset is refused).
pub const WAL_VERSION: u32 = 3;
/// Frames with group indices, header not bound to a dataset; still read and
/// rewritten as the current version by a writable open.
pub const WAL_VERSION_2: u32 = 2;
/// The first version (no group index); still read, with the old rule, and
/// rewritten as version 2 by a writable open.
pub const WAL_VERSION_1: u32 = 1;
/// 8 magic + 4 version + 4 flags + 8 generation + 8 base_seq + 4 crc + 4 reserved.
pub const WAL_HEADER_BYTES: u64 = 40;
/// 4 len + 4 crc + 8 seq.
pub const FRAME_HEADER_BYTES: usize = 16;
/// Largest frame payload: 64 MiB. A batch beyond it is refused before it is
/// logged, and a corrupt length field can never make replay allocate more.
pub const FRAME_PAYLOAD_MAX: u32 = 64 << 20;
/// Bits of a frame's `len` field that hold the payload length; the top
/// `32 - FRAME_LEN_BITS` = 5 bits hold the frame's index in its group.
pub const FRAME_LEN_BITS: u32 = 27;
const FRAME_LEN_MASK: u32 = (1 << FRAME_LEN_BITS) - 1;
/// Most frames one group commit writes (the group index is 5 bits).
pub const GROUP_MAX_FRAMES: usize = 1 << (32 - FRAME_LEN_BITS);
const _: () = assert!(FRAME_PAYLOAD_MAX <= FRAME_LEN_MASK);
/// How far ahead of the expected sequence number a frame found after a bad
/// one may be and still count as "valid data after the damage" (random bytes
/// pass this and a CRC check with odds of about 2^-44).
const RESYNC_SEQ_WINDOW: u64 = 1 << 20;

const TAG_ADD_VERTEX: u8 = 1;
const TAG_DELETE_VERTEX: u8 = 2;
const TAG_ADD_EDGE: u8 = 3;
const TAG_DELETE_EDGE: u8 = 4;
const TAG_UPDATE_EMBED: u8 = 5;

pub fn wal_name(generation: u64) -> String {
    format!("wal-{generation}.log")
}

/// A current-version header bound to the base dataset whose id is `dataset_id`.
pub fn encode_header(generation: u64, base_seq: u64, dataset_id: Option<u64>) -> Vec<u8> {
    let mut h = encode_header_version(WAL_VERSION, generation, base_seq);
    let tag = binding(dataset_id, &h[..32]);
    h[36..40].copy_from_slice(&tag.to_le_bytes());
    h
}

/// The version-3 header's `bound` field: ties the log to its base dataset.
fn binding(dataset_id: Option<u64>, head: &[u8]) -> u32 {
    match dataset_id {
        Some(id) => crc32c::crc32c_append(crc32c::crc32c(&id.to_le_bytes()), head),
        None => 0,
    }
}

/// Refuse a log that belongs to another dataset: a version-3 header's `bound`
/// field must match the base the log is replayed on (`dataset_id` of the
/// generation's base). Older versions carry no binding.
pub fn check_bound(file: &str, b: &[u8], dataset_id: Option<u64>) -> Result<()> {
    let (version, _, _) = decode_header_version(file, b)?;
    if version < WAL_VERSION {
        return Ok(());
    }
    let (stored, want) = (le32(b, 36), binding(dataset_id, &b[..32]));
    if stored != want {
        let base = dataset_id.map_or("no dataset_id (format v1)".to_string(), |i| format!("dataset_id = {i}"));
        return Err(corrupt(
            file,
            36,
            format!(
                "header bound {stored:#010x} != {want:#010x} for this generation's base ({base}): the log of another dataset"
            ),
        ));
    }
    Ok(())
}

/// A header of the given version (tests write version-1 fixtures with it).
pub fn encode_header_version(version: u32, generation: u64, base_seq: u64) -> Vec<u8> {
    let mut h = Vec::with_capacity(WAL_HEADER_BYTES as usize);
    h.extend_from_slice(&WAL_MAGIC);
    h.extend_from_slice(&version.to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes());
    h.extend_from_slice(&generation.to_le_bytes());
    h.extend_from_slice(&base_seq.to_le_bytes());
    let c = crc32c::crc32c(&h);
    h.extend_from_slice(&c.to_le_bytes());
    h.extend_from_slice(&0u32.to_le_bytes());
    h
}

fn le32(b: &[u8], at: usize) -> u32 {
    u32::from_le_bytes(b[at..at + 4].try_into().expect("4 bytes"))
}
fn le64(b: &[u8], at: usize) -> u64 {
    u64::from_le_bytes(b[at..at + 8].try_into().expect("8 bytes"))
}

/// Check a header; returns `(version, generation, base_seq)`.
pub fn decode_header_version(file: &str, b: &[u8]) -> Result<(u32, u64, u64)> {
    if b.len() < WAL_HEADER_BYTES as usize {
        return Err(corrupt(
            file,
            b.len() as u64,
            format!("header needs {WAL_HEADER_BYTES} bytes, file has {}", b.len()),
        ));
    }
    if b[..8] != WAL_MAGIC {
        return Err(corrupt(file, 0, format!("magic {:?} is not {:?} (not a flashgnn WAL)", &b[..8], WAL_MAGIC)));
    }
    let (stored, computed) = (le32(b, 32), crc32c::crc32c(&b[..32]));
    if stored != computed {
        return Err(corrupt(file, 32, format!("header crc32c {stored:#010x} != computed {computed:#010x}")));
    }
    let v = le32(b, 8);
    if v != WAL_VERSION && v != WAL_VERSION_2 && v != WAL_VERSION_1 {
        return Err(corrupt(
            file,
            8,
            format!("WAL version {v}; this reader supports versions {WAL_VERSION_1} and {WAL_VERSION}"),
        ));
    }
    Ok((v, le64(b, 16), le64(b, 24)))
}

/// Append one frame holding `ops` with sequence number `seq` to `out`, as
/// frame 0 of its group (the group-commit leader sets the index with
/// [`set_group_index`]). Refuses a batch whose payload exceeds
/// [`FRAME_PAYLOAD_MAX`].
pub fn encode_frame(seq: u64, ops: &[Op], out: &mut Vec<u8>) -> Result<()> {
    let start = out.len();
    out.extend_from_slice(&[0u8; FRAME_HEADER_BYTES]);
    out.extend_from_slice(&(ops.len() as u32).to_le_bytes());
    for op in ops {
        match op {
            Op::AddVertex { id, row } => {
                out.push(TAG_ADD_VERTEX);
                let id = id.ok_or_else(|| MutError::Invalid("internal: add_vertex logged without its id".into()))?;
                out.extend_from_slice(&id.to_le_bytes());
                out.extend_from_slice(&(row.len() as u32).to_le_bytes());
                out.extend_from_slice(row);
            }
            Op::DeleteVertex { vid } => {
                out.push(TAG_DELETE_VERTEX);
                out.extend_from_slice(&vid.to_le_bytes());
            }
            Op::AddEdge { dst, src } | Op::DeleteEdge { dst, src } => {
                out.push(if matches!(op, Op::AddEdge { .. }) { TAG_ADD_EDGE } else { TAG_DELETE_EDGE });
                out.extend_from_slice(&dst.to_le_bytes());
                out.extend_from_slice(&src.to_le_bytes());
            }
            Op::UpdateEmbed { vid, row } => {
                out.push(TAG_UPDATE_EMBED);
                out.extend_from_slice(&vid.to_le_bytes());
                out.extend_from_slice(&(row.len() as u32).to_le_bytes());
                out.extend_from_slice(row);
            }
        }
    }
    let len = out.len() - start - FRAME_HEADER_BYTES;
    if len > FRAME_PAYLOAD_MAX as usize {
        out.truncate(start);
        return Err(MutError::Invalid(format!(
            "batch of {} ops encodes to {len} bytes; the largest batch is {FRAME_PAYLOAD_MAX} bytes: split it",
            ops.len()
        )));
    }
    out[start..start + 4].copy_from_slice(&(len as u32).to_le_bytes());
    out[start + 8..start + 16].copy_from_slice(&seq.to_le_bytes());
    let crc = frame_crc(&out[start..]);
    out[start + 4..start + 8].copy_from_slice(&crc.to_le_bytes());
    Ok(())
}

/// CRC of a frame: its length field, sequence number and payload.
fn frame_crc(frame: &[u8]) -> u32 {
    let c = crc32c::crc32c(&frame[..4]);
    crc32c::crc32c_append(c, &frame[8..])
}

/// Set the commit-group index of the one whole frame `frame` (as encoded by
/// [`encode_frame`]) and recompute its CRC. `index` < [`GROUP_MAX_FRAMES`].
pub fn set_group_index(frame: &mut [u8], index: u32) {
    assert!((index as usize) < GROUP_MAX_FRAMES, "group index {index} >= {GROUP_MAX_FRAMES}");
    let raw = le32(frame, 0);
    let new = (raw & FRAME_LEN_MASK) | (index << FRAME_LEN_BITS);
    if new != raw {
        frame[..4].copy_from_slice(&new.to_le_bytes());
        let crc = frame_crc(frame);
        frame[4..8].copy_from_slice(&crc.to_le_bytes());
    }
}

/// The commit-group index stored in the frame starting at `frame`.
pub fn group_index(frame: &[u8]) -> u32 {
    le32(frame, 0) >> FRAME_LEN_BITS
}

/// Set the group index of every frame of `body` (whole, valid frames, as
/// read back from the durable part of a log) to 0: each becomes a group of
/// its own. Used for the log written at compaction, which is made durable
/// as a whole (temporary file, fsync, rename) before anything relies on it,
/// so it has no torn group, and whose first frame must start a group.
pub fn reset_group_indices(file: &str, body: &mut [u8]) -> Result<()> {
    let mut off = 0;
    while off < body.len() {
        if body.len() - off < FRAME_HEADER_BYTES {
            return Err(corrupt(file, off as u64, "carried frames end inside a frame header"));
        }
        let len = (le32(body, off) & FRAME_LEN_MASK) as usize;
        let end = off + FRAME_HEADER_BYTES + len;
        if end > body.len() {
            return Err(corrupt(file, off as u64, format!("carried frame of {len} bytes runs past the end")));
        }
        set_group_index(&mut body[off..end], 0);
        off = end;
    }
    Ok(())
}

/// Decode a payload whose CRC matched. Errors name the file, the byte offset
/// of the bad field and the frame's sequence number.
pub fn decode_ops(file: &str, frame_offset: u64, seq: u64, p: &[u8]) -> Result<Vec<Op>> {
    let base = frame_offset + FRAME_HEADER_BYTES as u64;
    let bad = |at: usize, msg: String| corrupt(file, base + at as u64, format!("frame seq {seq}: {msg}"));
    let need = |at: usize, n: usize| -> Result<()> {
        if p.len() < at || p.len() - at < n {
            return Err(bad(at, format!("op needs {n} more bytes, frame has {}", p.len().saturating_sub(at))));
        }
        Ok(())
    };
    need(0, 4)?;
    let count = le32(p, 0) as usize;
    // Each op takes at least 9 bytes: a count beyond that is corrupt.
    if count > p.len() / 9 {
        return Err(bad(0, format!("op count {count} cannot fit in a {}-byte frame", p.len())));
    }
    let mut ops = Vec::with_capacity(count);
    let mut at = 4;
    for _ in 0..count {
        need(at, 1)?;
        let tag = p[at];
        at += 1;
        let op = match tag {
            TAG_ADD_VERTEX | TAG_UPDATE_EMBED => {
                need(at, 12)?;
                let id = le64(p, at);
                let n = le32(p, at + 8) as usize;
                at += 12;
                need(at, n)?;
                let row = p[at..at + n].to_vec();
                at += n;
                if tag == TAG_ADD_VERTEX {
                    Op::AddVertex { id: Some(id), row }
                } else {
                    Op::UpdateEmbed { vid: id, row }
                }
            }
            TAG_DELETE_VERTEX => {
                need(at, 8)?;
                at += 8;
                Op::DeleteVertex { vid: le64(p, at - 8) }
            }
            TAG_ADD_EDGE | TAG_DELETE_EDGE => {
                need(at, 16)?;
                let (dst, src) = (le64(p, at), le64(p, at + 8));
                at += 16;
                if tag == TAG_ADD_EDGE {
                    Op::AddEdge { dst, src }
                } else {
                    Op::DeleteEdge { dst, src }
                }
            }
            t => return Err(bad(at - 1, format!("unknown op tag {t} (expected 1..=5)"))),
        };
        ops.push(op);
    }
    if at != p.len() {
        return Err(bad(at, format!("{} trailing bytes after {count} ops", p.len() - at)));
    }
    Ok(ops)
}

/// A frame that passes its structural checks at `off`.
#[derive(Debug, Clone, Copy)]
struct FrameHead {
    seq: u64,
    /// Index in its commit group (always 0 in version 1).
    index: u32,
    /// Offset just past its payload.
    end: usize,
}

impl FrameHead {
    /// Sequence number of the first frame of its group.
    fn group_first(&self) -> u64 {
        self.seq.saturating_sub(self.index as u64)
    }
}

fn frame_at(b: &[u8], off: usize, version: u32) -> Option<FrameHead> {
    if b.len() - off < FRAME_HEADER_BYTES {
        return None;
    }
    let raw = le32(b, off);
    let (len, index) = (raw & FRAME_LEN_MASK, raw >> FRAME_LEN_BITS);
    if version == WAL_VERSION_1 && index != 0 {
        return None; // a version-1 length over 2^27 (> FRAME_PAYLOAD_MAX)
    }
    if len > FRAME_PAYLOAD_MAX || (b.len() - off - FRAME_HEADER_BYTES) < len as usize {
        return None;
    }
    let end = off + FRAME_HEADER_BYTES + len as usize;
    (le32(b, off + 4) == frame_crc(&b[off..end])).then(|| FrameHead { seq: le64(b, off + 8), index, end })
}

/// What replay found.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ReplayReport {
    /// The log's format version (1 or 2).
    pub version: u32,
    pub generation: u64,
    pub base_seq: u64,
    /// Sequence number of the last valid frame (`base_seq` when none).
    pub last_seq: u64,
    pub frames: u64,
    pub ops: u64,
    /// Bytes up to the end of the last valid frame.
    pub valid_len: u64,
    /// Bytes of torn tail after it (ignored; truncated when writable): the
    /// damaged frame and everything after it, plus the intact frames of its
    /// commit group before it.
    pub torn_bytes: u64,
    /// Intact frames dropped with a torn commit group (0 when the damaged
    /// frame was the first of its group or nothing valid followed it).
    pub torn_group_frames: u64,
}

/// Scan the log bytes `b`, calling `apply(seq, offset, ops)` for every valid
/// frame in order. Stops at a torn tail (dropping the torn commit group);
/// refuses corruption in the middle. The structure of the whole log is
/// checked before the first `apply`.
pub fn replay(file: &str, b: &[u8], mut apply: impl FnMut(u64, u64, Vec<Op>) -> Result<()>) -> Result<ReplayReport> {
    let (version, generation, base_seq) = decode_header_version(file, b)?;
    let mut r = ReplayReport { version, generation, base_seq, last_seq: base_seq, ..Default::default() };
    let (cut, kept_frames) = find_cut(file, b, version, base_seq)?;
    r.valid_len = cut as u64;
    r.torn_bytes = (b.len() - cut) as u64;
    // Second pass: the frames before the cut passed their checks.
    let mut off = WAL_HEADER_BYTES as usize;
    while off < cut {
        let len = (le32(b, off) & FRAME_LEN_MASK) as usize;
        let seq = le64(b, off + 8);
        let end = off + FRAME_HEADER_BYTES + len;
        let ops = decode_ops(file, off as u64, seq, &b[off + FRAME_HEADER_BYTES..end])?;
        r.ops += ops.len() as u64;
        apply(seq, off as u64, ops)?;
        r.frames += 1;
        r.last_seq = seq;
        off = end;
    }
    r.torn_group_frames = kept_frames - r.frames;
    Ok(r)
}

/// First pass of [`replay`]: check every frame's structure, sequence number
/// and group index; returns the byte offset where the valid log ends and the
/// number of intact frames before the damage (if any).
fn find_cut(file: &str, b: &[u8], version: u32, base_seq: u64) -> Result<(usize, u64)> {
    let mut off = WAL_HEADER_BYTES as usize;
    let mut last_seq = base_seq;
    let mut frames = 0u64;
    // (first seq, byte offset) of the group of the last intact frame.
    let mut group: Option<(u64, usize)> = None;
    while off < b.len() {
        let expect = last_seq + 1;
        let Some(f) = frame_at(b, off, version) else {
            return torn_or_corrupt(file, b, version, off, expect, group).map(|cut| (cut, frames));
        };
        if f.seq != expect {
            return Err(corrupt(
                file,
                off as u64,
                format!("frame has sequence number {}; expected {expect} (frames lost or reordered)", f.seq),
            ));
        }
        if f.index == 0 {
            group = Some((f.seq, off));
        } else if group.is_none_or(|(g, _)| f.seq - g != f.index as u64) {
            return Err(corrupt(
                file,
                off as u64,
                format!(
                    "frame seq {} says it is frame {} of its commit group, but the frames before it do not start \
                     that group at seq {} in this log",
                    f.seq,
                    f.index,
                    f.group_first()
                ),
            ));
        }
        frames += 1;
        last_seq = f.seq;
        off = f.end;
    }
    Ok((off, frames))
}

/// The frame expected to have seq `expect` at `off` is damaged: decide from
/// the structurally valid frames after it whether it is a torn last group
/// (returns where the log ends) or corruption in the middle (error).
fn torn_or_corrupt(
    file: &str,
    b: &[u8],
    version: u32,
    off: usize,
    expect: u64,
    group: Option<(u64, usize)>,
) -> Result<usize> {
    // Group start named by the valid frames after the damage (all in the
    // damaged frame's group) and the first such frame's offset.
    let mut same: Option<(u64, usize)> = None;
    let mut o = off + 1;
    while o < b.len() {
        let candidate = b.len() - o >= FRAME_HEADER_BYTES && {
            let s = le64(b, o + 8);
            s > expect && s - expect <= RESYNC_SEQ_WINDOW
        };
        let Some(f) = candidate.then(|| frame_at(b, o, version)).flatten() else {
            o += 1;
            continue;
        };
        let g = f.group_first();
        if g > expect {
            // Written after the damaged frame's group was fdatasync'ed.
            let why = if version == WAL_VERSION_1 {
                String::new()
            } else {
                format!(" of a later commit group (first seq {g})")
            };
            return Err(corrupt(
                file,
                off as u64,
                format!(
                    "frame seq {expect} is damaged (bad length or crc32c) but a valid frame (seq {}){why} follows \
                     at byte offset {o}: corruption in the middle of the log, refusing to replay past it",
                    f.seq
                ),
            ));
        }
        match same {
            None => same = Some((g, o)),
            Some((g0, o0)) if g0 != g => {
                return Err(corrupt(
                    file,
                    off as u64,
                    format!(
                        "frame seq {expect} is damaged and the valid frames after it disagree on their commit \
                         group (first seq {g0} at byte offset {o0}, {g} at byte offset {o}): corruption, refusing \
                         to replay past it"
                    ),
                ))
            }
            Some(_) => {}
        }
        o = f.end;
    }
    match (same, group) {
        // Nothing valid after the damage, or the damaged frame began the
        // last group: the log ends at the damaged frame.
        (None, _) => Ok(off),
        (Some((g, _)), _) if g == expect => Ok(off),
        // The last group began before the damaged frame: drop all of it.
        (Some((g, _)), Some((first, at))) if g == first => Ok(at),
        (Some((g, o)), _) => Err(corrupt(
            file,
            off as u64,
            format!(
                "frame seq {expect} is damaged; the valid frame at byte offset {o} belongs to a commit group \
                 starting at seq {g}, which does not match the frames before the damage: corruption, refusing to \
                 replay past it"
            ),
        )),
    }
}

/// Read a whole log file.
pub fn read_log(path: &Path) -> Result<Vec<u8>> {
    crate::current::required_file(path, "the current generation's write-ahead log")?;
    flashgnn_io::read_regular(path).map_err(MutError::Io)
}

/// Create `path` holding a header (and `body`, already-encoded frames),
/// durably: write a temporary file, fsync, rename, fsync the directory.
pub fn create_log(
    disk: &Disk,
    path: &Path,
    generation: u64,
    base_seq: u64,
    dataset_id: Option<u64>,
    body: &[u8],
) -> Result<()> {
    write_log_parts(disk, path, &encode_header(generation, base_seq, dataset_id), body)
}

/// Create `path` holding `log` (a header and whole frames, built in memory),
/// durably, like [`create_log`].
pub fn write_log(disk: &Disk, path: &Path, log: &[u8]) -> Result<()> {
    let h = (WAL_HEADER_BYTES as usize).min(log.len());
    write_log_parts(disk, path, &log[..h], &log[h..])
}

fn write_log_parts(disk: &Disk, path: &Path, header: &[u8], body: &[u8]) -> Result<()> {
    let dir = path.parent().unwrap_or(Path::new("."));
    let tmp = dir.join(format!(".{}.tmp", path.file_name().and_then(|n| n.to_str()).unwrap_or("wal")));
    disk.publish_file(&tmp, path, &[header, body])?;
    Ok(())
}

/// The append side: one open log file (written through the store's
/// [`Disk`]) and its durable length.
pub struct WalFile {
    file: DiskFile,
    len: u64,
}

impl WalFile {
    /// Open for appending at `len` (the end of the last valid frame, as found
    /// by replaying the log); a torn tail beyond it is cut off and the cut
    /// made durable first. The caller has checked the header and rewritten a
    /// version-1 log as version 2, so every frame appended carries its group
    /// index.
    pub fn open(disk: &Disk, path: &Path, len: u64) -> Result<WalFile> {
        let file = disk.open(path, std::fs::OpenOptions::new().read(true).write(true), false)?;
        let have = file.file().metadata().map_err(|e| IoError::new("stat", path, None, e))?.len();
        if have != len {
            file.set_len(len)?;
            file.sync_all()?;
        }
        Ok(WalFile { file, len })
    }
    pub fn len(&self) -> u64 {
        self.len
    }
    pub fn is_empty(&self) -> bool {
        self.len <= WAL_HEADER_BYTES
    }
    pub fn path(&self) -> &Path {
        self.file.path()
    }

    /// Write `bytes` (whole frames) at the end with one write, then
    /// `fdatasync`. The length advances only when both succeeded (a write
    /// refused for space: [`out_of_space`]).
    pub fn append_sync(&mut self, bytes: &[u8]) -> Result<()> {
        self.file.write_at(bytes, self.len)?;
        self.file.sync_data()?;
        self.len += bytes.len() as u64;
        Ok(())
    }

    /// Cut the file back to its length (a write refused for space may have
    /// written part of its bytes past it) and make that durable.
    pub fn discard_tail(&mut self) -> Result<()> {
        self.file.set_len(self.len)?;
        self.file.sync_all()?;
        Ok(())
    }

    /// Append bytes `[from, len)` of the log (the frames after a compaction
    /// point) to `out`.
    pub fn read_from(&self, from: u64, out: &mut Vec<u8>) -> Result<()> {
        let n = self.len.saturating_sub(from) as usize;
        let at = out.len();
        out.resize(at + n, 0);
        self.file
            .file()
            .read_exact_at(&mut out[at..], from)
            .map_err(|e| IoError::new("reading", self.file.path(), Some(from), e))?;
        Ok(())
    }
}

/// Whether an append failed because its *write* was refused for space
/// (ENOSPC, EDQUOT): nothing reached the disk's durable state, so the
/// graph can roll back and go on (crate::graph's module docs). A failed
/// fdatasync is never this: after one, what the page cache dropped is
/// unknown.
pub fn out_of_space(e: &MutError) -> bool {
    matches!(e, MutError::Io(io) if io.op == "writing"
        && matches!(io.source.raw_os_error(), Some(libc::ENOSPC | libc::EDQUOT)))
}
