//! `.npy` and headerless raw arrays, read with positional reads in large
//! chunks (sequential, so the page cache's readahead applies).

use std::path::Path;

use flashgnn_format::dtype::{read_f64, read_int};
use flashgnn_format::npy::{parse_header, NpyHeader};
use flashgnn_format::Dtype;
use flashgnn_io::direct::DirectFile;
use flashgnn_io::{FileReader, ReadAt};

use super::{check_id, EdgeSource, RowSource, ValueSource};
use crate::{BuildError, Result};

/// Read buffer for array chunks: 4 MiB.
const CHUNK_BYTES: usize = 4 << 20;

/// Open an array file: parse the npy header, or — when `raw` gives a shape and
/// dtype — treat it as headerless and check its size.
pub fn open_array(path: &Path, raw: Option<(Vec<u64>, Dtype)>, what: &str) -> Result<(FileReader, NpyHeader)> {
    if !flashgnn_io::present(path)? {
        return Err(BuildError::config(format!("{}: missing file (expected the {what})", path.display())));
    }
    let r = FileReader::open(path)?;
    let mut head = vec![0u8; (r.len() as usize).min(1 << 16)];
    r.read_exact_at(&mut head, 0)?;
    let file = path.display().to_string();
    let is_npy = head.starts_with(b"\x93NUMPY");
    let h = match (is_npy, raw) {
        (true, _) => parse_header(&file, &head)?,
        (false, Some((shape, dtype))) => NpyHeader { data_offset: 0, dtype, shape },
        (false, None) => {
            return Err(BuildError::input(
                &file,
                "byte offset 0",
                format!("not a .npy file and no shape was given for a headerless raw {what}: pass its shape and dtype (e.g. --num-nodes N / --feat-shape N,D --feat-dtype float32)"),
            ))
        }
    };
    let need = h.data_offset + h.data_bytes().unwrap_or(u64::MAX);
    if r.len() < need {
        return Err(BuildError::input(
            &file,
            format!("byte offset {}", r.len()),
            format!(
                "file is truncated: shape {:?} of {} needs {need} bytes, file has {}",
                h.shape,
                h.dtype.name(),
                r.len()
            ),
        ));
    }
    if !is_npy && r.len() != need {
        return Err(BuildError::input(
            &file,
            format!("byte offset {need}"),
            format!(
                "headerless file is {} bytes but shape {:?} of {} is {need} bytes",
                r.len(),
                h.shape,
                h.dtype.name()
            ),
        ));
    }
    Ok((r, h))
}

/// Edge array `[E, 2]` or `[2, E]` of any integer dtype.
pub struct NpyEdges {
    file: String,
    r: FileReader,
    h: NpyHeader,
    transposed: bool,
    num_edges: u64,
    next: u64,
    num_nodes: Option<u64>,
    buf: Vec<u8>,
    buf2: Vec<u8>,
    /// `[E, 2]` arrays: the file opened with O_DIRECT (buffered where the
    /// file system refuses it) and one reused aligned buffer. The edges are
    /// read once, so the page cache would only add a kernel copy per byte.
    direct: Option<DirectFile>,
    /// Typed input: each column's own bound and node type name (column 0
    /// holds source ids of one type, column 1 destination ids of another).
    column_bounds: Option<[(u64, String); 2]>,
}

impl NpyEdges {
    pub fn open(path: &Path, raw_int64_pairs: bool) -> Result<NpyEdges> {
        let raw = if raw_int64_pairs {
            let len = std::fs::metadata(path).map(|m| m.len()).unwrap_or(0);
            if !len.is_multiple_of(16) {
                return Err(BuildError::input(
                    path.display(),
                    format!("byte offset {len}"),
                    format!("headerless edge file must hold int64 pairs (size a multiple of 16), got {len} bytes"),
                ));
            }
            Some((vec![len / 16, 2], Dtype::Int64))
        } else {
            None
        };
        let (r, h) = open_array(path, raw, "edge array [E, 2] of int32/int64")?;
        let file = path.display().to_string();
        if h.dtype.is_float() {
            return Err(BuildError::input(
                &file,
                "header",
                format!("edge array has dtype {}; expected an integer dtype (int32/int64)", h.dtype.name()),
            ));
        }
        let (transposed, num_edges) = match h.shape.as_slice() {
            [e, 2] => (false, *e),
            [2, e] => (true, *e),
            s => {
                return Err(BuildError::input(
                    &file,
                    "header",
                    format!("edge array has shape {s:?}; expected [E, 2] or [2, E]"),
                ))
            }
        };
        let direct = if transposed { None } else { Some(DirectFile::open_path(path)?) };
        Ok(NpyEdges {
            file,
            r,
            h,
            transposed,
            num_edges,
            next: 0,
            num_nodes: None,
            buf: Vec::new(),
            buf2: Vec::new(),
            direct,
            column_bounds: None,
        })
    }

    /// Check column 0 against `src` (count, node type name) and column 1
    /// against `dst` instead of one node count (the typed npy layout).
    pub fn with_column_bounds(mut self, src: (u64, String), dst: (u64, String)) -> NpyEdges {
        self.column_bounds = Some([src, dst]);
        self
    }

    /// Rows `[E]` of the array.
    pub fn num_edges(&self) -> u64 {
        self.num_edges
    }
}

impl EdgeSource for NpyEdges {
    fn set_num_nodes(&mut self, n: Option<u64>) {
        self.num_nodes = n;
    }
    fn bytes_total(&self) -> u64 {
        self.num_edges * 2 * self.h.dtype.size() as u64
    }
    fn edges_hint(&self) -> Option<u64> {
        Some(self.num_edges)
    }
    fn bytes_done(&self) -> u64 {
        self.next * 2 * self.h.dtype.size() as u64
    }
    fn next_batch(&mut self, out: &mut Vec<(u64, u64)>, max: usize) -> Result<bool> {
        if self.next >= self.num_edges {
            return Ok(false);
        }
        let s = self.h.dtype.size();
        let n = (self.num_edges - self.next).min(max as u64).min((CHUNK_BYTES / (2 * s)) as u64) as usize;
        let base = self.h.data_offset;
        let mut direct = self.direct.take();
        let mut view: Option<&[u8]> = None;
        if self.transposed {
            self.buf.resize(n * s, 0);
            self.buf2.resize(n * s, 0);
            self.r.read_exact_at(&mut self.buf, base + self.next * s as u64)?;
            self.r.read_exact_at(&mut self.buf2, base + (self.num_edges + self.next) * s as u64)?;
        } else if let Some(d) = direct.as_mut() {
            // The rows straight from the aligned O_DIRECT buffer, decoded in place.
            let off = base + self.next * 2 * s as u64;
            view = Some(d.read_view(off, n * 2 * s).map_err(|e| {
                BuildError::input(&self.file, format!("byte offset {off}"), format!("read failed: {e}"))
            })?);
        } else {
            self.buf.resize(n * 2 * s, 0);
            self.r.read_exact_at(&mut self.buf, base + self.next * 2 * s as u64)?;
        }
        let rows: &[u8] = view.unwrap_or(&self.buf);
        // Decode both columns into i128 (so negative and overflowing ids are
        // reported, not wrapped), with a fast path for the common dtypes.
        let dt = self.h.dtype;
        let col = |buf: &[u8], i: usize| -> i128 {
            match dt {
                flashgnn_format::Dtype::Int64 => i64::from_le_bytes(buf[i * 8..i * 8 + 8].try_into().unwrap()) as i128,
                flashgnn_format::Dtype::Int32 => i32::from_le_bytes(buf[i * 4..i * 4 + 4].try_into().unwrap()) as i128,
                flashgnn_format::Dtype::Uint32 => u32::from_le_bytes(buf[i * 4..i * 4 + 4].try_into().unwrap()) as i128,
                _ => read_int(dt, buf, i).expect("integer dtype checked at open"),
            }
        };
        out.reserve(n);
        for i in 0..n {
            let (a, b) = if self.transposed {
                (col(&self.buf, i), col(&self.buf2, i))
            } else {
                (col(rows, 2 * i), col(rows, 2 * i + 1))
            };
            // Fast accept: both ids in range (the overwhelmingly common case).
            let bound = self.num_nodes.map_or(super::NODES_MAX as i128, |n| n as i128);
            let (ba, bb) = match &self.column_bounds {
                Some([s, d]) => (s.0 as i128, d.0 as i128),
                None => (bound, bound),
            };
            if a >= 0 && b >= 0 && a < ba && b < bb {
                out.push((a as u64, b as u64));
                continue;
            }
            let row = self.next + i as u64;
            let (file, t, sz, e) = (&self.file, self.transposed, s as u64, self.num_edges);
            let pos = |col: u64| {
                move || {
                    let off = if t { base + (col * e + row) * sz } else { base + (row * 2 + col) * sz };
                    format!("edge {row}, column {col} (byte offset {off})")
                }
            };
            if let Some(cb) = &self.column_bounds {
                for (col, v) in [(0usize, a), (1, b)] {
                    let (n, t) = &cb[col];
                    if v < 0 {
                        return Err(BuildError::input(
                            file,
                            pos(col as u64)(),
                            format!("negative node id {v} (ids must be >= 0)"),
                        ));
                    }
                    if v >= *n as i128 {
                        let end = if col == 0 { "source" } else { "destination" };
                        return Err(BuildError::input(
                            file,
                            pos(col as u64)(),
                            format!("node id {v} >= {n}, the node count of {end} type {t:?}"),
                        ));
                    }
                }
            }
            let src = check_id(a, self.num_nodes, file, pos(0))?;
            let dst = check_id(b, self.num_nodes, file, pos(1))?;
            out.push((src, dst));
        }
        self.direct = direct;
        self.next += n as u64;
        Ok(true)
    }
}

/// Feature rows from a 2-D array (npy or headerless).
pub struct NpyRows {
    file: String,
    h: NpyHeader,
    next: u64,
    /// Opened with O_DIRECT (buffered where the file system refuses it):
    /// the rows are read once, in order, so the page cache would only add
    /// a kernel copy per byte and push out pages worth keeping — on an
    /// IGB-shaped input the features are nearly all the bytes.
    direct: DirectFile,
}

impl NpyRows {
    pub fn open(path: &Path, raw: Option<(u64, u32, Dtype)>) -> Result<NpyRows> {
        let (r, h) = open_array(path, raw.map(|(n, d, t)| (vec![n, d as u64], t)), "feature table [N, D]")?;
        let file = path.display().to_string();
        if !h.dtype.is_float() {
            return Err(BuildError::input(
                &file,
                "header",
                format!("feature table has dtype {}; expected float16, float32 or float64", h.dtype.name()),
            ));
        }
        if h.shape.len() != 2 {
            return Err(BuildError::input(
                &file,
                "header",
                format!("feature table has shape {:?}; expected [N, D]", h.shape),
            ));
        }
        if h.shape[1] > u32::MAX as u64 / 8 {
            return Err(BuildError::input(
                &file,
                "header",
                format!("feature dimension {} exceeds {}", h.shape[1], u32::MAX / 8),
            ));
        }
        drop(r);
        Ok(NpyRows { file, h, next: 0, direct: DirectFile::open_path(path)? })
    }
    pub fn row_offset(&self, r: u64) -> u64 {
        self.h.data_offset + r * self.h.shape[1] * self.h.dtype.size() as u64
    }
}

impl RowSource for NpyRows {
    fn file(&self) -> String {
        self.file.clone()
    }
    fn dim(&self) -> u32 {
        self.h.shape[1] as u32
    }
    fn dtype(&self) -> Dtype {
        self.h.dtype
    }
    fn rows(&self) -> Option<u64> {
        Some(self.h.shape[0])
    }
    fn next_rows(&mut self, n: usize, out: &mut Vec<u8>) -> Result<usize> {
        let rows = self.h.shape[0];
        let k = (rows - self.next).min(n as u64) as usize;
        if k == 0 {
            return Ok(0);
        }
        let row_bytes = self.h.shape[1] as usize * self.h.dtype.size();
        let off = self.row_offset(self.next);
        let rows = self
            .direct
            .read_view(off, k * row_bytes)
            .map_err(|e| BuildError::input(&self.file, format!("byte offset {off}"), format!("read failed: {e}")))?;
        out.extend_from_slice(rows);
        self.next += k as u64;
        Ok(k)
    }
    fn position(&self, r: u64) -> String {
        format!("row {r} (byte offset {})", self.row_offset(r))
    }
}

/// 1-D array of scalars (labels, split ids); `[N]` or `[N, 1]`.
pub struct NpyValues {
    file: String,
    r: FileReader,
    h: NpyHeader,
    next: u64,
    buf: Vec<u8>,
}

impl NpyValues {
    pub fn open(path: &Path, raw: Option<(u64, Dtype)>, what: &str) -> Result<NpyValues> {
        let (r, h) = open_array(path, raw.map(|(n, t)| (vec![n], t)), what)?;
        let file = path.display().to_string();
        match h.shape.as_slice() {
            [_] | [_, 1] => {}
            s => return Err(BuildError::input(&file, "header", format!("{what} has shape {s:?}; expected [N]"))),
        }
        Ok(NpyValues { file, r, h, next: 0, buf: Vec::new() })
    }
}

impl ValueSource for NpyValues {
    fn file(&self) -> String {
        self.file.clone()
    }
    fn len(&self) -> Option<u64> {
        Some(self.h.shape[0])
    }
    fn next_values(&mut self, n: usize, out: &mut Vec<f64>) -> Result<usize> {
        let k = (self.h.shape[0] - self.next).min(n as u64) as usize;
        if k == 0 {
            return Ok(0);
        }
        let s = self.h.dtype.size();
        self.buf.resize(k * s, 0);
        self.r.read_exact_at(&mut self.buf, self.h.data_offset + self.next * s as u64)?;
        out.extend((0..k).map(|i| read_f64(self.h.dtype, &self.buf, i)));
        self.next += k as u64;
        Ok(k)
    }
    fn position(&self, i: u64) -> String {
        format!("row {i} (byte offset {})", self.h.data_offset + i * self.h.dtype.size() as u64)
    }
}
