//! Feature rows: the side thread streams them from the input, checked (or
//! converted) as they are read, either to the final `features.fg` (separate
//! placement, no relabelling: with per-row CRCs and `feature_crc.npy`) or to
//! `features.stage`, which [`RowFeed`] reads back for the layout pass.
//!
//! Invariants: rows are held in at most `FEATURE_READ_AHEAD` + 1 chunks of
//! [`STAGE_CHUNK_BYTES`] (the fixed I/O allowance); every value is checked
//! where it is read (NaN/Inf, dtype range), and errors name the file and the
//! row; a row's CRC is computed from the buffer handed to the write.

use std::path::Path;
use std::sync::mpsc::{Receiver, SyncSender};

use flashgnn_format::checksum::crc_bound;
use flashgnn_format::npy::encode_header;
use flashgnn_format::{Dtype, FeatureHeader};
use flashgnn_io::{Disk, FileReader, OutFile, ReadAt};

use super::side::{Side, SideParams};
use crate::options::NanPolicy;
use crate::progress::Progress;
use crate::rows::{check_finite_f32, convert_rows, passthrough, synthetic_row};
use crate::source::RowSource;
use crate::{BuildError, Result};

/// The feature stage, read back by the layout pass when it copies the rows
/// (inline placement, or relabelled).
pub(super) const STAGE_FILE: &str = "features.stage";
/// Rows per feature staging chunk: bounded by bytes, see `write_features`.
pub(super) const STAGE_CHUNK_BYTES: usize = 8 << 20;

/// Feature chunks read and converted ahead of the writer (see
/// [`write_features`]).
const FEATURE_READ_AHEAD: usize = 2;

/// Stream the feature rows of `f` to `features.fg` (separate placement, no
/// reordering: final, with per-row CRCs) or to `features.stage` (read back
/// by the layout pass). A reader thread reads and checks (or converts) the
/// next chunks while this one checksums and writes the current one, so the
/// input's reads and the output's writes overlap; chunk buffers go back to
/// it for reuse. Rows stored unchanged ([`passthrough`]) are checked where
/// they were read, without a converted copy. `features.fg` goes out with
/// O_DIRECT: it is written once and read back only by the verify, which
/// reads with O_DIRECT itself.
pub(super) fn write_features(p: &SideParams, num_nodes: u64, f: &mut dyn RowSource, side: &mut Side) -> Result<()> {
    let dim = f.dim() as usize;
    let (src, dst) = (f.dtype(), p.feat_dtype);
    let row_bytes = dim * dst.size();
    let (features_file, crc_file) = p.features_files();
    // The final table's stride is the format's (`Layout::feature_stride`: whole sectors, or packed rows
    // for a typed table); the stage is rows back to back.
    let stride = if p.direct_final {
        let l = flashgnn_format::Layout::new(
            &features_file,
            p.page_size,
            num_nodes,
            0,
            4,
            dim as u32,
            dst,
            flashgnn_format::layout::FeaturePlacement::Separate,
            0,
            0,
        )?;
        (if p.typed.is_some() { l.with_packed_rows() } else { l }).feature_stride() as usize
    } else {
        row_bytes
    };
    // Typed builds bind each row's CRC to its global id (docs/format.md).
    let first_id = p.typed.map_or(0, |(_, off)| off);
    let path = p.tmp.join(if p.direct_final { features_file.as_str() } else { STAGE_FILE });
    // The stage stays buffered: the layout pass reads it back soon, from the
    // page cache where memory allows (O_DIRECT both ways measured slower:
    // the read-back then goes to the device).
    // The final file goes to `opts.disk`; the stage is scratch (real disk).
    let mut out =
        if p.direct_final { OutFile::create_direct_on(&p.opts.disk, &path)? } else { OutFile::create(&path)? };
    let mut crcs = Vec::new();
    if p.direct_final {
        let h = FeatureHeader {
            page_size: p.page_size,
            num_nodes,
            feature_dim: dim as u64,
            feature_dtype_code: dst.code() as u64,
            stride: stride as u64,
            dataset_id: p.opts.dataset_id,
        };
        out.write(&h.encode())?;
        crcs.reserve(num_nodes as usize);
    }
    let mut task = p.progress.task("features", "rows", num_nodes);
    let chunk_rows = (STAGE_CHUNK_BYTES / (dim * src.size().max(dst.size())).max(1)).clamp(1, 1 << 20);
    let file = f.file();
    let pad = vec![0u8; stride - row_bytes];
    let mut row = 0u64;
    let replaced = std::thread::scope(|scope| -> Result<u64> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Result<(Vec<u8>, u64)>>(FEATURE_READ_AHEAD);
        let (free_tx, free_rx) = std::sync::mpsc::channel::<Vec<u8>>();
        let reader = ChunkReader {
            f: &mut *f,
            file: &file,
            num_nodes,
            chunk_rows,
            dim,
            src,
            dst,
            nan: p.opts.nan,
            progress: p.progress,
        };
        let reader = std::thread::Builder::new()
            .name("features-read".into())
            .spawn_scoped(scope, move || reader.run(tx, free_rx))
            .map_err(|e| BuildError::config(format!("cannot start the feature reader thread: {e}")))?;
        let r = (|| -> Result<()> {
            for msg in &rx {
                let (rows, k) = msg?;
                if p.direct_final {
                    for (i, r) in rows.chunks_exact(row_bytes.max(1)).take(k as usize).enumerate() {
                        crcs.push(crc_bound(p.opts.dataset_id, first_id + row + i as u64, r));
                        out.write(r)?;
                        out.write(&pad)?;
                    }
                } else {
                    out.write(&rows)?;
                }
                row += k;
                task.add(k);
                let _ = free_tx.send(rows);
            }
            Ok(())
        })();
        drop(rx); // a reader blocked in send() sees the channel closed
        let replaced = reader.join().map_err(|_| BuildError::config("internal: feature reader thread panicked"))?;
        r.map(|_| replaced)
    })?;
    side.nan_replaced += replaced;
    if row != num_nodes {
        return Err(BuildError::input(
            &file,
            f.position(row),
            format!("feature table has {row} rows but the node count is {num_nodes}"),
        ));
    }
    if p.direct_final {
        // Packed rows (a typed table) end on a whole sector: zeros up to it (Layout::features_file_bytes).
        let tail = out.len() % flashgnn_format::SECTOR_BYTES;
        if tail != 0 {
            out.write_zeros(flashgnn_format::SECTOR_BYTES - tail)?;
        }
    }
    let (bytes, crc) = out.finish()?;
    if p.direct_final {
        side.files.push((features_file, bytes, crc));
        let (b, c) = write_npy_u32(&p.opts.disk, &p.tmp.join(&crc_file), &crcs)?;
        side.files.push((crc_file, b, c));
    } else {
        side.staged = true;
    }
    Ok(())
}

/// The feature reader thread of [`write_features`]: reads the next chunks
/// of rows, checks them in place (rows stored unchanged) or converts them.
struct ChunkReader<'a> {
    f: &'a mut dyn RowSource,
    file: &'a str,
    num_nodes: u64,
    chunk_rows: usize,
    dim: usize,
    src: Dtype,
    dst: Dtype,
    nan: NanPolicy,
    progress: &'a Progress,
}

impl ChunkReader<'_> {
    /// Send chunks `(rows, count)` until the input ends, an error is sent,
    /// or the writer stops; returns the NaNs replaced.
    fn run(mut self, tx: SyncSender<Result<(Vec<u8>, u64)>>, free_rx: Receiver<Vec<u8>>) -> u64 {
        let (mut raw, mut first, mut replaced) = (Vec::new(), 0u64, 0u64);
        let pass = passthrough(self.src, self.dst, self.nan);
        loop {
            let mut rows = free_rx.try_recv().unwrap_or_default();
            rows.clear();
            raw.clear();
            let r = self.next_chunk(pass, first, &mut raw, &mut rows, &mut replaced);
            let (msg, k) = match r {
                Ok(0) => return replaced,
                Ok(k) => (Ok((rows, k)), k),
                Err(e) => (Err(e), 0),
            };
            let failed = msg.is_err();
            if tx.send(msg).is_err() || failed {
                return replaced; // the writer stopped (its error wins), or ours is delivered
            }
            first += k;
        }
    }

    /// Read up to `chunk_rows` rows from row `first` into `rows` (through
    /// `raw` when they are converted); returns how many.
    fn next_chunk(
        &mut self,
        pass: bool,
        first: u64,
        raw: &mut Vec<u8>,
        rows: &mut Vec<u8>,
        replaced: &mut u64,
    ) -> Result<u64> {
        self.progress.check()?;
        let input = if pass { &mut *rows } else { &mut *raw };
        let k = self.f.next_rows(self.chunk_rows, input)? as u64;
        let (file, num_nodes, f) = (self.file, self.num_nodes, &*self.f);
        if k > 0 && first + k > num_nodes {
            return Err(BuildError::input(
                file,
                f.position(num_nodes),
                format!("feature table has more rows than the node count {num_nodes}"),
            ));
        }
        let position = |r| f.position(r);
        if pass {
            check_finite_f32(file, &position, self.dim, rows, first)?;
        } else {
            convert_rows(file, &position, self.src, self.dst, self.dim, raw, first, self.nan, replaced, rows)?;
        }
        Ok(k)
    }
}

pub(super) fn write_npy_u32(disk: &Disk, path: &Path, values: &[u32]) -> Result<(u64, u32)> {
    let mut out = OutFile::create_on(disk, path)?;
    out.write(&encode_header(Dtype::Uint32, &[values.len() as u64]))?;
    let mut buf = Vec::with_capacity(1 << 20);
    for c in values.chunks(1 << 18) {
        buf.clear();
        c.iter().for_each(|v| buf.extend_from_slice(&v.to_le_bytes()));
        out.write(&buf)?;
    }
    Ok(out.finish()?)
}

/// Supplies feature rows by original id: from the stage file (sequentially
/// without relabelling, by `pread` with it) or synthesised.
pub(super) struct RowFeed {
    stage: Option<FileReader>,
    synthetic: bool,
    row_bytes: usize,
    dtype: Dtype,
    seed: u64,
    random: bool,
    buf: Vec<u8>,
    buf_first: u64,
    buf_rows: u64,
}

impl RowFeed {
    pub(super) fn new(
        path: &Path,
        staged: bool,
        synthetic: bool,
        row_bytes: usize,
        dtype: Dtype,
        seed: u64,
        random: bool,
    ) -> Result<RowFeed> {
        let stage = if staged { Some(FileReader::open(path)?) } else { None };
        Ok(RowFeed { stage, synthetic, row_bytes, dtype, seed, random, buf: Vec::new(), buf_first: 0, buf_rows: 0 })
    }
    pub(super) fn row(&mut self, original: u64, out: &mut [u8]) -> Result<()> {
        if self.synthetic {
            synthetic_row(self.seed, original, self.row_bytes / self.dtype.size(), self.dtype, out);
            return Ok(());
        }
        let Some(stage) = &self.stage else {
            out.fill(0);
            return Ok(());
        };
        if self.random {
            return Ok(stage.read_exact_at(out, original * self.row_bytes as u64)?);
        }
        if original < self.buf_first || original >= self.buf_first + self.buf_rows {
            let total_rows = stage.len() / self.row_bytes as u64;
            let k = ((STAGE_CHUNK_BYTES / self.row_bytes) as u64).max(1).min(total_rows - original);
            self.buf.resize(k as usize * self.row_bytes, 0);
            stage.read_exact_at(&mut self.buf, original * self.row_bytes as u64)?;
            self.buf_first = original;
            self.buf_rows = k;
        }
        let at = (original - self.buf_first) as usize * self.row_bytes;
        out.copy_from_slice(&self.buf[at..at + self.row_bytes]);
        Ok(())
    }
}
