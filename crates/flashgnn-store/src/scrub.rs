//! `flashgnn scrub`: a rate-limited, resumable background pass over every
//! byte of a dataset that reports *every* damaged page (verify stops at the
//! first), with the page kind, the check that failed, the value and the bound.
//!
//! Walk: the manifest's files in name order, then `manifest.json`, then the
//! caller's extra files (the mutable store's `mut/` files), each read front
//! to back in large aligned chunks through [`flashgnn_io::direct::DirectFile`]
//! (O_DIRECT: the media is tested, not the page cache), every chunk first
//! paid for in a [`TokenBucket`] over bytes. Each chunk is checked with the
//! same per-page functions `verify` uses ([`check_slot_page`],
//! [`check_overflow_data_page`], [`check_feature_row_bytes`],
//! [`check_header_page`], [`Dataset::check_side_chunk`]), and each file's
//! CRC32C is accumulated and compared with the manifest at its end.
//!
//! Damage is recorded, not returned: a failing page becomes a [`Damage`]
//! and the walk goes on. A file-level finding (whole-file CRC32C, degree
//! sum, overflow entries, labeled count) is reported only when no page of
//! that file was found damaged, since a damaged page already breaks it.
//!
//! Checkpoint (`progress.json` in the state directory): after every
//! `checkpoint_bytes` or `checkpoint_secs`, whichever comes first, and at
//! the end, the position (file, offset — a chunk boundary, so everything
//! before it is finished), the running per-file state (CRC32C so far, slot
//! walk, labeled count), the damage found so far and the bytes done are
//! published atomically ([`flashgnn_io::publish_file`]: tmp, fsync, rename,
//! fsync dir). The file carries the dataset's `dataset_id` and manifest
//! CRC32C and a CRC32C of its own body: `resume` refuses a progress file of
//! another dataset, and a corrupt one, with an error naming it.
//!
//! Architecture invariant: scrubbing never writes inside the dataset files
//! and never panics on their content; damage it cannot localise (a dataset
//! that fails to open) is one finding with the file and offset the error
//! names.

use std::path::{Path, PathBuf};
use std::time::Instant;

use flashgnn_format::checksum::FileCrc;
use flashgnn_format::layout::FeaturePlacement;
use flashgnn_format::manifest::*;
use flashgnn_format::FormatError;
use flashgnn_io::direct::DirectFile;
use flashgnn_io::rate::TokenBucket;
use serde_json::{json, Value};

use crate::dataset::{check_header_page, Dataset, Result, StoreError};
use crate::verify::{check_feature_row_bytes, check_overflow_data_page, check_slot_page, SlotWalk};

/// Name of the checkpoint file inside the state directory.
pub const PROGRESS_FILE: &str = "progress.json";
/// Checkpoint format version (bumped when its keys change meaning).
const PROGRESS_VERSION: u64 = 1;
/// Largest read: 1 MiB keeps a 100 MB/s scrub to ~100 requests a second
/// and one chunk's sleep under 10 ms, while amortising the system call.
pub const CHUNK_BYTES_MAX: u64 = 1 << 20;
/// Damage records kept (in the report and the checkpoint); more are
/// counted in `damaged_count` only. 10 000 records of ~300 B is ~3 MB.
pub const DAMAGE_RECORDS_MAX: usize = 10_000;

#[derive(Debug, Clone)]
pub struct ScrubOptions {
    /// Bytes per second read from the device; 0 = unlimited.
    pub rate_bytes_per_s: u64,
    /// Where `progress.json` lives.
    pub state_dir: PathBuf,
    /// Continue from `progress.json` when it holds an unfinished pass.
    pub resume: bool,
    /// Checkpoint after this many bytes ...
    pub checkpoint_bytes: u64,
    /// ... or this many seconds, whichever comes first.
    pub checkpoint_secs: f64,
    /// Extra files read (for media errors) after the dataset's own:
    /// `(name for reports, path)`. Their content is checked by their owner.
    pub extra_files: Vec<(String, PathBuf)>,
}

impl ScrubOptions {
    pub fn new(root: &Path) -> ScrubOptions {
        ScrubOptions {
            rate_bytes_per_s: 0,
            state_dir: root.join(".scrub"),
            resume: false,
            checkpoint_bytes: 64 << 20,
            checkpoint_secs: 1.0,
            extra_files: Vec::new(),
        }
    }
}

/// One damaged page (or row, or file).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Damage {
    pub file: String,
    /// Byte offset the failed check names; None when the error has none.
    pub offset: Option<u64>,
    /// "header page", "slot page", "overflow page", "feature row",
    /// "side file", "whole file", "file" (file-level total), "open", "read".
    pub kind: String,
    /// Page (or row, for feature rows) index within its file.
    pub index: Option<u64>,
    /// The failed check in words: the reader's error message (value, bound).
    pub check: String,
}

impl Damage {
    fn to_json(&self) -> Value {
        json!({"file": self.file, "offset": self.offset, "kind": self.kind, "index": self.index, "check": self.check})
    }
    fn from_json(v: &Value) -> Option<Damage> {
        Some(Damage {
            file: v.get("file")?.as_str()?.to_string(),
            offset: v.get("offset")?.as_u64(),
            kind: v.get("kind")?.as_str()?.to_string(),
            index: v.get("index")?.as_u64(),
            check: v.get("check")?.as_str()?.to_string(),
        })
    }
}

/// The byte offset an error names (structured variants, or "byte offset N"
/// in an `Invalid` message), and the file.
fn error_place(e: &StoreError) -> (Option<String>, Option<u64>) {
    let from_text = |m: &str| {
        m.split("byte offset ").nth(1).and_then(|r| r.split(|c: char| !c.is_ascii_digit()).next()?.parse().ok())
    };
    match e {
        StoreError::Format(f) => match f {
            FormatError::OutOfBounds { file, offset, .. }
            | FormatError::Checksum { file, offset, .. }
            | FormatError::Truncated { file, offset, .. } => (Some(file.clone()), Some(*offset)),
            FormatError::BadMagic { file, .. } | FormatError::UnsupportedVersion { file, .. } => {
                (Some(file.clone()), Some(0))
            }
            FormatError::Invalid { file, message } => {
                // A wrapped error ("DIR: FILE: byte offset N: ...") names the inner file.
                if let Some((inner, rest)) = message.split_once(": ") {
                    if Path::new(inner).is_file() {
                        return (Some(inner.to_string()), from_text(rest));
                    }
                }
                // Some name "FILE: byte offset N" as the file.
                match file.split_once(": ") {
                    Some((f, rest)) => (Some(f.to_string()), from_text(rest).or_else(|| from_text(message))),
                    None => (Some(file.clone()), from_text(message)),
                }
            }
        },
        StoreError::Io(io) => (Some(io.path.clone()), io.offset),
        _ => (None, None),
    }
}

#[derive(Debug, Clone, Default, PartialEq)]
pub struct ScrubReport {
    pub dataset: String,
    pub dataset_id: Option<u64>,
    /// The pass reached the end (false: stopped by the caller; resume later).
    pub complete: bool,
    /// This run continued a checkpointed pass.
    pub resumed: bool,
    pub files: u64,
    /// Header, slot and overflow pages checked (whole pass).
    pub pages: u64,
    pub feature_rows: u64,
    /// Logical bytes of the whole pass, and those done so far.
    pub bytes_total: u64,
    pub bytes_done: u64,
    /// Bytes read from the device in this run (aligned reads).
    pub bytes_read: u64,
    /// Bytes this run skipped because a checkpoint said they were done.
    pub bytes_skipped: u64,
    pub damaged: Vec<Damage>,
    /// All damage found (`damaged` keeps at most [`DAMAGE_RECORDS_MAX`]).
    pub damaged_count: u64,
    pub seconds: f64,
    pub rate_target_bytes_per_s: u64,
    pub rate_achieved_bytes_per_s: f64,
    /// Every file was read with O_DIRECT (false where the file system
    /// refuses it, e.g. tmpfs, and buffered reads were used).
    pub direct: bool,
    pub state_file: String,
}

impl ScrubReport {
    pub fn to_json(&self) -> Value {
        json!({
            "dataset": self.dataset,
            "dataset_id": self.dataset_id,
            "complete": self.complete,
            "resumed": self.resumed,
            "files": self.files,
            "pages": self.pages,
            "feature_rows": self.feature_rows,
            "bytes_total": self.bytes_total,
            "bytes_done": self.bytes_done,
            "bytes_read": self.bytes_read,
            "bytes_skipped": self.bytes_skipped,
            "damaged": self.damaged.iter().map(Damage::to_json).collect::<Vec<_>>(),
            "damaged_count": self.damaged_count,
            "seconds": self.seconds,
            "rate_target_bytes_per_s": self.rate_target_bytes_per_s,
            "rate_achieved_bytes_per_s": self.rate_achieved_bytes_per_s,
            "direct": self.direct,
            "state_file": self.state_file,
        })
    }
}

/// What a file is, for its checks.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Graph,
    Overflow,
    Features,
    /// A typed dataset's `t<i>.features.fg` of node type `t`, rows of `stride` bytes.
    TypedFeatures {
        t: usize,
        stride: u64,
    },
    /// A side array with a spec (range-checked values), data starting here.
    Side {
        data_offset: u64,
        elem: u64,
    },
    /// Listed in the manifest: whole-file CRC32C only.
    Listed,
    /// `manifest.json` and extra files: read only (their content is checked
    /// by `Dataset::open` / their owner).
    Unlisted,
}

/// Per-file running state, checkpointed.
#[derive(Debug, Clone, Default, PartialEq)]
struct FileState {
    crc: u32,
    crc_bytes: u64,
    walk: SlotWalk,
    labeled: u64,
    /// Damage found in this file so far (suppresses file-level findings).
    damaged: u64,
}

impl FileState {
    fn start() -> FileState {
        FileState { walk: SlotWalk::start(), ..Default::default() }
    }
    fn to_json(&self) -> Value {
        json!({"crc": self.crc, "crc_bytes": self.crc_bytes, "next_overflow": self.walk.next_overflow,
               "degree_sum": self.walk.degree_sum, "labeled": self.labeled, "damaged": self.damaged})
    }
    fn from_json(v: &Value) -> Option<FileState> {
        let n = |k: &str| v.get(k)?.as_u64();
        Some(FileState {
            crc: u32::try_from(n("crc")?).ok()?,
            crc_bytes: n("crc_bytes")?,
            walk: SlotWalk { next_overflow: v.get("next_overflow")?.as_u64(), degree_sum: n("degree_sum")? },
            labeled: n("labeled")?,
            damaged: n("damaged")?,
        })
    }
}

/// The pass so far, as checkpointed.
#[derive(Debug, Clone, Default)]
struct Position {
    file_index: usize,
    file: String,
    offset: u64,
    state: FileState,
    bytes_done: u64,
    pages: u64,
    feature_rows: u64,
    damaged: Vec<Damage>,
    damaged_count: u64,
    complete: bool,
}

struct Binding {
    dataset_id: Option<u64>,
    manifest_crc: u32,
}

fn progress_body(b: &Binding, pos: &Position) -> Value {
    json!({
        "version": PROGRESS_VERSION,
        "dataset_id": b.dataset_id,
        "manifest_crc32c": b.manifest_crc,
        "file_index": pos.file_index,
        "file": pos.file,
        "offset": pos.offset,
        "state": pos.state.to_json(),
        "bytes_done": pos.bytes_done,
        "pages": pos.pages,
        "feature_rows": pos.feature_rows,
        "damaged": pos.damaged.iter().map(Damage::to_json).collect::<Vec<_>>(),
        "damaged_count": pos.damaged_count,
        "complete": pos.complete,
    })
}

fn save_progress(path: &Path, b: &Binding, pos: &Position) -> Result<()> {
    let body = progress_body(b, pos);
    let text = body.to_string();
    let doc = json!({"body": body, "crc32c": flashgnn_format::checksum::crc(text.as_bytes())});
    let tmp = path.with_extension("json.tmp");
    flashgnn_io::publish_file(&tmp, path, &[doc.to_string().as_bytes(), b"\n"])?;
    Ok(())
}

/// Read a checkpoint: None when there is none; an error naming the file when
/// it is corrupt or belongs to another dataset.
fn load_progress(path: &Path, b: &Binding) -> Result<Option<Position>> {
    let name = path.display().to_string();
    let bytes = match flashgnn_io::read_regular(path) {
        Ok(b) => b,
        Err(e) if e.source.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(e) => return Err(e.into()),
    };
    let corrupt = |why: &str| -> StoreError {
        FormatError::invalid(
            &name,
            format!("corrupt scrub progress file ({why}); delete it, or run without --resume to start a new pass"),
        )
        .into()
    };
    let doc: Value = serde_json::from_slice(&bytes).map_err(|e| corrupt(&format!("not JSON: {e}")))?;
    let body = doc.get("body").ok_or_else(|| corrupt("no body"))?;
    let stored = doc.get("crc32c").and_then(Value::as_u64).ok_or_else(|| corrupt("no crc32c"))?;
    let computed = flashgnn_format::checksum::crc(body.to_string().as_bytes()) as u64;
    if stored != computed {
        return Err(corrupt(&format!("crc32c stored {stored:#010x}, computed {computed:#010x}")));
    }
    if body.get("version").and_then(Value::as_u64) != Some(PROGRESS_VERSION) {
        return Err(corrupt(&format!("version {:?}, this flashgnn writes {PROGRESS_VERSION}", body.get("version"))));
    }
    let id = body.get("dataset_id").and_then(Value::as_u64);
    let mcrc = body.get("manifest_crc32c").and_then(Value::as_u64);
    if id != b.dataset_id || mcrc != Some(b.manifest_crc as u64) {
        return Err(FormatError::invalid(
            &name,
            format!(
                "this scrub progress file belongs to another dataset (dataset_id {id:?}, manifest crc32c {mcrc:?}; \
                 this dataset has {:?} and {}): refusing to resume from it; delete it or pass another --state",
                b.dataset_id, b.manifest_crc
            ),
        )
        .into());
    }
    let n = |k: &str| body.get(k).and_then(Value::as_u64).ok_or_else(|| corrupt(&format!("no {k}")));
    let damaged = body
        .get("damaged")
        .and_then(Value::as_array)
        .ok_or_else(|| corrupt("no damaged"))?
        .iter()
        .map(|d| Damage::from_json(d).ok_or_else(|| corrupt("bad damage record")))
        .collect::<Result<Vec<_>>>()?;
    Ok(Some(Position {
        file_index: n("file_index")? as usize,
        file: body.get("file").and_then(Value::as_str).ok_or_else(|| corrupt("no file"))?.to_string(),
        offset: n("offset")?,
        state: body.get("state").and_then(FileState::from_json).ok_or_else(|| corrupt("bad state"))?,
        bytes_done: n("bytes_done")?,
        pages: n("pages")?,
        feature_rows: n("feature_rows")?,
        damaged,
        damaged_count: n("damaged_count")?,
        complete: body.get("complete").and_then(Value::as_bool).ok_or_else(|| corrupt("no complete"))?,
    }))
}

fn error_damage(e: StoreError, file: &str, kind: &str, index: Option<u64>, fallback_offset: u64) -> Damage {
    let (f, off) = error_place(&e);
    Damage {
        file: f.unwrap_or_else(|| file.to_string()),
        offset: off.or(Some(fallback_offset)),
        kind: kind.to_string(),
        index,
        check: e.to_string(),
    }
}

/// Walk state of one run.
struct Run<'a> {
    ds: &'a Dataset,
    pos: Position,
    check_original: bool,
    feature_crcs: Option<Vec<u32>>,
}

impl Run<'_> {
    /// Record `d`; `in_file`: it is damage of the file being walked (which
    /// then gets no file-level finding). A record already held (a resumed
    /// pass meets the same up-front finding again) is not counted twice.
    fn record(&mut self, d: Damage, in_file: bool) {
        if in_file {
            // Positions only advance, so in-file damage is never met twice.
            self.pos.state.damaged += 1;
        } else if self.pos.damaged.contains(&d) {
            return;
        }
        self.pos.damaged_count += 1;
        if self.pos.damaged.len() < DAMAGE_RECORDS_MAX {
            self.pos.damaged.push(d);
        }
    }
    fn record_err(&mut self, e: StoreError, file: &str, kind: &str, index: Option<u64>, fallback_offset: u64) {
        self.record(error_damage(e, file, kind, index, fallback_offset), true);
    }

    /// Check `buf`, bytes `[off, off + buf.len())` of file `name`.
    fn check_chunk(&mut self, name: &str, kind: Kind, off: u64, buf: &[u8]) {
        let ds = self.ds;
        let l = ds.layout();
        let p = l.page_size as u64;
        let path = ds.file(name);
        match kind {
            Kind::Graph | Kind::Overflow if off == 0 => {
                self.pos.pages += 1;
                if let Err(e) = check_header_page(ds.root(), l, name, buf) {
                    self.record_err(e, &path, "header page", Some(0), 0);
                }
            }
            Kind::Graph => {
                for (i, page) in buf.chunks_exact(p as usize).enumerate() {
                    let file_page = off / p + i as u64;
                    self.pos.pages += 1;
                    let mut walk = self.pos.state.walk.clone();
                    match check_slot_page(ds, file_page - 1, page, self.check_original, &mut walk) {
                        Ok(_) => self.pos.state.walk = walk,
                        Err(e) => {
                            // Resynchronise the overflow tiling at the next
                            // spilling slot; the degree sum is no longer checked.
                            self.pos.state.walk.next_overflow = None;
                            self.record_err(e, &path, "slot page", Some(file_page), file_page * p);
                        }
                    }
                }
            }
            Kind::Overflow => {
                for (i, page) in buf.chunks_exact(p as usize).enumerate() {
                    let file_page = off / p + i as u64;
                    self.pos.pages += 1;
                    if let Err(e) = check_overflow_data_page(ds, file_page, page) {
                        self.record_err(e, &path, "overflow page", Some(file_page), file_page * p);
                    }
                }
            }
            Kind::Features if off == 0 => {
                self.pos.pages += 1;
                if let Err(e) = check_header_page(ds.root(), l, name, buf) {
                    self.record_err(e, &path, "header page", Some(0), 0);
                }
            }
            Kind::Features => {
                let stride = l.feature_stride();
                let first = (off - p) / stride;
                for (i, row) in buf.chunks_exact(stride as usize).enumerate() {
                    let v = first + i as u64;
                    self.pos.feature_rows += 1;
                    let Some(crcs) = &self.feature_crcs else { continue };
                    if let Err(e) = check_feature_row_bytes(ds, v, row, crcs[v as usize]) {
                        self.record_err(e, &path, "feature row", Some(v), p + v * stride);
                    }
                }
            }
            Kind::TypedFeatures { t, .. } if off == 0 => {
                self.pos.pages += 1;
                let fl = ds.type_feature_layout(t).expect("a type with features");
                if let Err(e) = crate::dataset::check_type_feature_header(ds.root(), fl, name, buf) {
                    self.record_err(e, &path, "header page", Some(0), 0);
                }
            }
            Kind::TypedFeatures { t, stride } => {
                let fl = ds.type_feature_layout(t).expect("a type with features").clone();
                let types = ds.manifest().types.as_ref().expect("typed");
                let first = (off - p) / stride;
                let k = (buf.len() as u64 / stride).min(types.node_types[t].count.saturating_sub(first));
                let crc_file = flashgnn_format::types::feature_crc_file(t);
                let crcs = match ds.side_array(&crc_file).and_then(|a| a.read_i64(first, k)) {
                    Ok(c) => c,
                    Err(e) => {
                        self.record_err(e, &ds.file(&crc_file), "side file", None, 0);
                        return;
                    }
                };
                for (i, row) in buf.chunks_exact(stride as usize).take(k as usize).enumerate() {
                    let local = first + i as u64;
                    self.pos.feature_rows += 1;
                    let global = types.offset(t) + local;
                    if let Err(e) =
                        crate::verify::check_typed_feature_row(ds, t, &fl, global, local, row, crcs[i] as u32)
                    {
                        self.record_err(e, &path, "feature row", Some(local), p + local * stride);
                    }
                }
            }
            Kind::Side { data_offset, elem } if off >= data_offset => {
                let first = (off - data_offset) / elem;
                let spec = ds.side_spec(name).expect("Side kind has a spec");
                let vals: Vec<i64> = (0..buf.len() / elem as usize)
                    .map(|i| flashgnn_format::dtype::read_int(spec.dtype, buf, i).unwrap_or(0) as i64)
                    .collect();
                if name == LABELS_FILE {
                    self.pos.state.labeled += vals.iter().filter(|&&x| x >= 0).count() as u64;
                }
                if let Err(e) = ds.check_side_chunk(name, data_offset, first, &vals) {
                    self.record_err(e, &path, "side file", None, off);
                }
            }
            _ => {}
        }
    }

    /// Load the relabelling maps (inverse permutations) and the feature
    /// CRCs up front; when they are damaged that is one finding, and the
    /// checks that need them are skipped instead of failing every page.
    fn load_references(&mut self) {
        let ds = self.ds;
        if let Err(e) = ds.maps() {
            self.check_original = false;
            self.record(error_damage(e, &ds.file(NODE_ORDER_FILE), "side file", None, 0), false);
        }
        if ds.layout().placement == FeaturePlacement::Separate {
            match ds.feature_crcs() {
                Ok(c) => self.feature_crcs = Some(c.to_vec()),
                Err(e) => self.record(error_damage(e, &ds.file(FEATURE_CRC_FILE), "side file", None, 0), false),
            }
        }
    }

    /// Read the chunk at `off` of file `name` into `buf`, fold it into the
    /// file's CRC32C and check it. Returns the bytes the device read (0
    /// when the read failed: a media error is recorded, and the walk goes
    /// on past the chunk).
    fn scan_chunk(
        &mut self,
        f: &mut DirectFile,
        buf: &mut [u8],
        name: &str,
        kind: Kind,
        report_name: &str,
        off: u64,
    ) -> u64 {
        match f.read_into(off, buf) {
            Ok(dev) => {
                let mut crc = FileCrc::resume(self.pos.state.crc, self.pos.state.crc_bytes);
                crc.update(buf);
                (self.pos.state.crc, self.pos.state.crc_bytes) = (crc.value(), crc.bytes());
                self.check_chunk(name, kind, off, buf);
                dev
            }
            // A media error. A device fails a whole request for one bad
            // sector: read the chunk again page by page, report each page
            // that cannot be read at its own offset and check the others.
            // The file's CRC32C is then not checked (it is damaged), and the
            // overflow tiling resynchronises past every unread page.
            Err(e) => {
                self.pos.state.walk.next_overflow = None;
                let unit = match kind {
                    Kind::Graph | Kind::Overflow => self.ds.layout().page_size as usize,
                    _ => 4096,
                };
                if buf.len() <= unit {
                    self.record_err(e.into(), report_name, "read", None, off);
                    return 0;
                }
                let mut dev = 0;
                for (i, piece) in buf.chunks_mut(unit).enumerate() {
                    let at = off + (i * unit) as u64;
                    match f.read_into(at, piece) {
                        Ok(d) => {
                            dev += d;
                            self.check_chunk(name, kind, at, piece);
                        }
                        Err(e) => {
                            self.pos.state.walk.next_overflow = None;
                            self.record_err(e.into(), report_name, "read", None, at);
                        }
                    }
                }
                dev
            }
        }
    }

    /// File-level checks once `name` has been read to its end.
    fn finish_file(&mut self, name: &str, kind: Kind) {
        let ds = self.ds;
        let (m, l) = (ds.manifest(), ds.layout());
        let path = ds.file(name);
        if self.pos.state.damaged > 0 {
            return;
        }
        let file_level = |what: &'static str, value: u64, bound: String| {
            Some(Damage {
                file: path.clone(),
                offset: Some(0),
                kind: "file".into(),
                index: None,
                check: FormatError::oob(&path, 0, what, value, bound).to_string(),
            })
        };
        let mut found = None;
        if let Some(entry) = m.files.get(name) {
            if self.pos.state.crc != entry.crc32c {
                found = Some(Damage {
                    file: path.clone(),
                    offset: Some(0),
                    kind: "whole file".into(),
                    index: None,
                    check: FormatError::Checksum {
                        file: path.clone(),
                        offset: 0,
                        what: "whole file".into(),
                        stored: entry.crc32c,
                        computed: self.pos.state.crc,
                    }
                    .to_string(),
                });
            }
        }
        if found.is_none() && kind == Kind::Graph {
            let w = &self.pos.state.walk;
            if w.degree_sum != l.num_edges {
                found = file_level("sum of degrees", w.degree_sum, format!("== num_edges {}", l.num_edges));
            } else if w.next_overflow.unwrap_or(0) != l.overflow_entries {
                found = file_level(
                    "overflow entries referenced",
                    w.next_overflow.unwrap_or(0),
                    format!("== overflow_entries {}", l.overflow_entries),
                );
            }
        }
        if found.is_none() && name == LABELS_FILE {
            let want = m.labels.as_ref().map_or(0, |l| l.labeled);
            if self.pos.state.labeled != want {
                found = file_level(
                    "labeled count",
                    self.pos.state.labeled,
                    format!("== labels.labeled {want} in manifest.json"),
                );
            }
        }
        if let Some(d) = found {
            self.record(d, true);
        }
    }
}

/// The files of a pass, in order: (name for reports, path, kind, length).
fn plan(ds: &Dataset, opts: &ScrubOptions) -> Result<Vec<(String, Option<PathBuf>, Kind)>> {
    let mut files = Vec::new();
    for name in ds.manifest().files.keys() {
        let kind = match name.as_str() {
            GRAPH_FILE => Kind::Graph,
            OVERFLOW_FILE => Kind::Overflow,
            FEATURES_FILE if ds.layout().placement == FeaturePlacement::Separate => Kind::Features,
            _ if crate::verify::typed_feature_type(ds, name).is_some() => {
                let t = crate::verify::typed_feature_type(ds, name).expect("checked");
                let stride = ds.type_feature_layout(t).expect("a type with features").feature_stride();
                Kind::TypedFeatures { t, stride }
            }
            _ => match ds.side_spec(name) {
                Some(spec) if spec.range.is_some() => {
                    let a = ds.side_array(name)?;
                    Kind::Side { data_offset: a.header.data_offset, elem: spec.dtype.size() as u64 }
                }
                _ => Kind::Listed,
            },
        };
        files.push((name.clone(), None, kind));
    }
    files.push((MANIFEST_FILE.to_string(), None, Kind::Unlisted));
    // The stripe map of a striped dataset (checked by `Dataset::open`).
    let stripes = ds.root().join(flashgnn_io::stripe::STRIPES_FILE);
    if stripes.is_file() {
        files.push((flashgnn_io::stripe::STRIPES_FILE.to_string(), Some(stripes), Kind::Unlisted));
    }
    for (name, path) in &opts.extra_files {
        files.push((name.clone(), Some(path.clone()), Kind::Unlisted));
    }
    Ok(files)
}

/// End of the chunk starting at `off` (a page, row or element boundary,
/// so checkpoints always fall between whole units).
fn chunk_end(kind: Kind, off: u64, len: u64, page: u64, stride: u64, chunk: u64) -> u64 {
    let units = |unit: u64| off + (chunk / unit).max(1) * unit;
    let end = match kind {
        Kind::Graph | Kind::Overflow | Kind::Features if off == 0 => page,
        Kind::Graph | Kind::Overflow => units(page),
        Kind::Features => units(stride),
        Kind::TypedFeatures { .. } if off == 0 => page,
        Kind::TypedFeatures { stride, .. } => units(stride),
        Kind::Side { data_offset, .. } if off < data_offset => data_offset,
        Kind::Side { elem, .. } => units(elem),
        Kind::Listed | Kind::Unlisted => units(flashgnn_io::aligned::BUF_ALIGN as u64),
    };
    end.min(len)
}

/// Scrub the dataset at `root`. `progress(done_bytes, total_bytes)` is called
/// after every chunk; returning false stops the pass (checkpointed, report
/// `complete: false`). Errors: the dataset is missing, the state directory
/// cannot be written, or `resume` found a foreign or corrupt progress file;
/// damage in the dataset is never an error but a [`Damage`] in the report.
pub fn scrub(root: &Path, opts: &ScrubOptions, progress: &mut dyn FnMut(u64, u64) -> bool) -> Result<ScrubReport> {
    let t0 = Instant::now();
    let mut rep = ScrubReport {
        dataset: root.display().to_string(),
        rate_target_bytes_per_s: opts.rate_bytes_per_s,
        state_file: opts.state_dir.join(PROGRESS_FILE).display().to_string(),
        direct: true,
        ..Default::default()
    };
    if !root.is_dir() {
        return Err(StoreError::NotADataset(format!("{}: no such dataset directory", root.display())));
    }
    let ds = match Dataset::open(root) {
        Ok(ds) => ds,
        Err(e @ StoreError::NotADataset(_)) => return Err(e),
        Err(e) => {
            // Damage that stops the dataset from opening (manifest, header
            // pages, file sizes): one finding, nothing else can be trusted.
            rep.damaged.push(open_damage(root, &e));
            rep.damaged_count = 1;
            rep.complete = true;
            rep.seconds = t0.elapsed().as_secs_f64();
            return Ok(rep);
        }
    };
    let mbytes = flashgnn_io::read_regular(&root.join(MANIFEST_FILE))?;
    let binding =
        Binding { dataset_id: ds.manifest().dataset_id, manifest_crc: flashgnn_format::checksum::crc(&mbytes) };
    rep.dataset_id = binding.dataset_id;
    let files = plan(&ds, opts)?;
    let lens = file_lengths(root, &files)?;
    rep.bytes_total = lens.iter().sum();
    rep.files = files.len() as u64;

    std::fs::create_dir_all(&opts.state_dir)
        .map_err(|e| flashgnn_io::IoError::new("creating the scrub state directory", &opts.state_dir, None, e))?;
    let state_path = opts.state_dir.join(PROGRESS_FILE);
    let pos = start_position(opts, &state_path, &binding, &files, &lens, &mut rep)?;

    let mut run = Run { ds: &ds, pos, check_original: true, feature_crcs: None };
    run.load_references();

    let l = ds.layout();
    let (page, stride) = (l.page_size as u64, l.feature_stride());
    let chunk = chunk_size(opts, page, stride);
    let mut bucket = TokenBucket::new(opts.rate_bytes_per_s, chunk, Instant::now());
    let mut buf = vec![0u8; 0];
    let (mut since_ckpt_bytes, mut last_ckpt) = (0u64, Instant::now());
    let mut stopped = false;
    'files: for fi in run.pos.file_index..files.len() {
        let (name, path, kind) = &files[fi];
        if fi != run.pos.file_index {
            run.pos = Position {
                file_index: fi,
                file: name.clone(),
                offset: 0,
                state: FileState::start(),
                ..std::mem::take(&mut run.pos)
            };
        }
        let report_name = match path {
            Some(p) => p.display().to_string(),
            None => ds.file(name),
        };
        let mut f = match path {
            Some(p) => DirectFile::open_path(p)?,
            None => DirectFile::open(root, name)?,
        };
        rep.direct &= f.is_direct();
        let len = lens[fi];
        while run.pos.offset < len {
            let off = run.pos.offset;
            let end = chunk_end(*kind, off, len, page, stride, chunk);
            buf.resize((end - off) as usize, 0);
            bucket.take(end - off);
            rep.bytes_read += run.scan_chunk(&mut f, &mut buf, name, *kind, &report_name, off);
            run.pos.offset = end;
            run.pos.bytes_done += end - off;
            since_ckpt_bytes += end - off;
            if end == len {
                run.finish_file(name, *kind);
            }
            let go_on = progress(run.pos.bytes_done, rep.bytes_total);
            if !go_on
                || since_ckpt_bytes >= opts.checkpoint_bytes
                || last_ckpt.elapsed().as_secs_f64() >= opts.checkpoint_secs
            {
                save_progress(&state_path, &binding, &run.pos)?;
                (since_ckpt_bytes, last_ckpt) = (0, Instant::now());
            }
            if !go_on {
                stopped = true;
                break 'files;
            }
        }
    }
    if !stopped {
        run.pos.complete = true;
        save_progress(&state_path, &binding, &run.pos)?;
    }
    finish_report(&mut rep, run.pos, t0);
    Ok(rep)
}

/// The one finding of a dataset that does not open, placed at the file and
/// offset the error names (the dataset's directory when it names none).
fn open_damage(root: &Path, e: &StoreError) -> Damage {
    let (file, offset) = error_place(e);
    Damage {
        file: file.unwrap_or_else(|| root.display().to_string()),
        offset,
        kind: "open".into(),
        index: None,
        check: e.to_string(),
    }
}

/// Each file's length, opened as the walk will open it.
fn file_lengths(root: &Path, files: &[(String, Option<PathBuf>, Kind)]) -> Result<Vec<u64>> {
    let mut lens = Vec::with_capacity(files.len());
    for (name, path, _) in files {
        let f = match path {
            Some(p) => DirectFile::open_path(p)?,
            None => DirectFile::open(root, name)?,
        };
        lens.push(f.len());
    }
    Ok(lens)
}

/// Where the pass starts: the walk's first byte, or with `resume` the
/// position a progress file of this dataset saved (unless that pass was
/// complete); a position outside this walk is a corrupt progress file.
fn start_position(
    opts: &ScrubOptions,
    state_path: &Path,
    binding: &Binding,
    files: &[(String, Option<PathBuf>, Kind)],
    lens: &[u64],
    rep: &mut ScrubReport,
) -> Result<Position> {
    let mut pos = Position { file: files[0].0.clone(), state: FileState::start(), ..Default::default() };
    if opts.resume {
        if let Some(saved) = load_progress(state_path, binding)? {
            let ok = saved.file_index < files.len()
                && files[saved.file_index].0 == saved.file
                && saved.offset <= lens[saved.file_index];
            if !ok {
                return Err(FormatError::invalid(
                    state_path.display().to_string(),
                    format!(
                        "corrupt scrub progress file (position {} byte {} is not in this dataset's walk); delete it",
                        saved.file, saved.offset
                    ),
                )
                .into());
            }
            if !saved.complete {
                rep.resumed = true;
                rep.bytes_skipped = saved.bytes_done;
                pos = saved;
            }
        }
    }
    Ok(pos)
}

/// Chunk: a quarter second of the rate (so a stop is honoured promptly and
/// checkpoints are frequent), at most CHUNK_BYTES_MAX, at least a page.
fn chunk_size(opts: &ScrubOptions, page: u64, stride: u64) -> u64 {
    if opts.rate_bytes_per_s == 0 { CHUNK_BYTES_MAX } else { (opts.rate_bytes_per_s / 4).min(CHUNK_BYTES_MAX) }
        .max(page)
        .max(stride)
}

/// The report's totals from the pass's last position.
fn finish_report(rep: &mut ScrubReport, pos: Position, t0: Instant) {
    rep.complete = pos.complete;
    rep.pages = pos.pages;
    rep.feature_rows = pos.feature_rows;
    rep.bytes_done = pos.bytes_done;
    rep.damaged = pos.damaged;
    rep.damaged_count = pos.damaged_count;
    rep.seconds = t0.elapsed().as_secs_f64();
    rep.rate_achieved_bytes_per_s = rep.bytes_read as f64 / rep.seconds.max(1e-9);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Chunks end on whole pages / rows / elements whatever the chunk size,
    /// so a checkpoint (always at a chunk end) never splits a unit, even
    /// when a resumed run uses another rate (another chunk size).
    #[test]
    fn chunks_end_on_unit_boundaries() {
        let (p, stride) = (4096, 1536);
        for chunk in [4096u64, 10_000, 1 << 20] {
            assert_eq!(chunk_end(Kind::Graph, 0, 1 << 30, p, stride, chunk), p, "header page alone");
            let e = chunk_end(Kind::Graph, p, 1 << 30, p, stride, chunk);
            assert!(e > p && (e - p).is_multiple_of(p) && e - p <= chunk.max(p));
            let e = chunk_end(Kind::Features, p, 1 << 30, p, stride, chunk);
            assert!(e > p && (e - p).is_multiple_of(stride));
            let side = Kind::Side { data_offset: 128, elem: 8 };
            assert_eq!(chunk_end(side, 0, 1 << 30, p, stride, chunk), 128, "npy header alone");
            let e = chunk_end(side, 128, 1 << 30, p, stride, chunk);
            assert!(e > 128 && (e - 128).is_multiple_of(8));
        }
        // The last chunk ends at the file's end.
        assert_eq!(chunk_end(Kind::Overflow, 8192, 9000, p, stride, 1 << 20), 9000);
    }

    #[test]
    fn error_places_name_file_and_offset() {
        let e: StoreError = FormatError::oob("/d/graph.fg", 4120, "degree", 9, "<= 8").into();
        assert_eq!(error_place(&e), (Some("/d/graph.fg".into()), Some(4120)));
        let e: StoreError =
            FormatError::invalid("/d/labels.npy", "byte offset 152: label = 99 at index 3 is out of bounds").into();
        assert_eq!(error_place(&e), (Some("/d/labels.npy".into()), Some(152)));
        let e: StoreError = FormatError::invalid("/d/x.npy", "no offset here").into();
        assert_eq!(error_place(&e), (Some("/d/x.npy".into()), None));
    }
}
