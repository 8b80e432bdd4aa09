//! Text inputs: SNAP edge lists and OGB CSVs, plain or gzip (`.gz`).
//!
//! Lines are split on whitespace or commas; `#` and `%` start comment lines.
//! A line ends at LF, CRLF or a lone CR (classic Mac files): CR-only files
//! are read line by line, never as one long line that builds nothing.
//! Positions are 1-based line and column. For gzip inputs, a stream that ends
//! early is reported with the compressed byte offset where it ended.

use std::io::{BufRead, BufReader, Read};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use flate2::read::MultiGzDecoder;

use super::{check_id, EdgeSource, RowSource, ValueSource};
use crate::{BuildError, Result};

/// How many skipped-line examples are kept for the report.
const SKIP_EXAMPLES_MAX: usize = 5;

struct Counting<R> {
    inner: R,
    count: Arc<AtomicU64>,
}
impl<R: Read> Read for Counting<R> {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// A line reader over a plain or gzipped file.
pub struct Lines {
    pub file: String,
    reader: Box<dyn BufRead + Send>,
    consumed: Arc<AtomicU64>,
    total: u64,
    gz: bool,
    /// The last line ended with CR: an LF right after it belongs to it.
    after_cr: bool,
    pub line_no: u64,
    pub line: Vec<u8>,
}

impl Lines {
    pub fn open(path: &Path) -> Result<Lines> {
        let file = path.display().to_string();
        let f = flashgnn_io::open_regular(path)?;
        let total = f.metadata().map(|m| m.len()).unwrap_or(0);
        let consumed = Arc::new(AtomicU64::new(0));
        let counting = Counting { inner: f, count: consumed.clone() };
        let gz = path.extension().is_some_and(|e| e == "gz");
        // Buffers of at most 1 MiB, no larger than the file needs: BufReader zeroes its whole buffer on the
        // first fill (`Counting` reads through `read`), which for a small label or split file cost more than
        // reading it (and bounded the fuzzing of these parsers at ~700 inputs/s). A gzip stream's output
        // buffer allows for 4x expansion before it is refilled.
        let cap = (total as usize).clamp(8 << 10, 1 << 20);
        let reader: Box<dyn BufRead + Send> = if gz {
            Box::new(BufReader::with_capacity(
                cap.saturating_mul(4).min(1 << 20),
                MultiGzDecoder::new(BufReader::with_capacity(cap, counting)),
            ))
        } else {
            Box::new(BufReader::with_capacity(cap, counting))
        };
        Ok(Lines { file, reader, consumed, total, gz, after_cr: false, line_no: 0, line: Vec::new() })
    }

    pub fn bytes_total(&self) -> u64 {
        self.total
    }
    pub fn bytes_done(&self) -> u64 {
        self.consumed.load(Ordering::Relaxed)
    }

    /// Append the next line (without its terminator) to `self.line`; the
    /// bytes consumed (0 at EOF). LF, CRLF and a lone CR all end a line.
    fn read_line(&mut self) -> std::io::Result<usize> {
        let mut total = 0;
        loop {
            let buf = match self.reader.fill_buf() {
                Ok(b) => b,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(e),
            };
            if buf.is_empty() {
                return Ok(total);
            }
            let mut start = 0;
            if std::mem::take(&mut self.after_cr) && buf[0] == b'\n' {
                start = 1;
            }
            match buf[start..].iter().position(|&c| c == b'\n' || c == b'\r') {
                Some(i) => {
                    self.line.extend_from_slice(&buf[start..start + i]);
                    self.after_cr = buf[start + i] == b'\r';
                    self.reader.consume(start + i + 1);
                    return Ok(total + start + i + 1);
                }
                None => {
                    let len = buf.len();
                    self.line.extend_from_slice(&buf[start..]);
                    self.reader.consume(len);
                    total += len;
                }
            }
        }
    }

    /// Next non-comment, non-blank line into `self.line`; false at EOF.
    pub fn next_line(&mut self) -> Result<bool> {
        loop {
            self.line.clear();
            let n = self.read_line().map_err(|e| {
                let off = self.consumed.load(Ordering::Relaxed);
                if self.gz {
                    BuildError::input(
                        &self.file,
                        format!("compressed byte offset {off} (after line {})", self.line_no),
                        format!("gzip stream is corrupt or ends early (truncated file?): {e}"),
                    )
                } else {
                    BuildError::input(&self.file, format!("byte offset {off}"), format!("read error: {e}"))
                }
            })?;
            if n == 0 {
                return Ok(false);
            }
            self.line_no += 1;
            while matches!(self.line.last(), Some(b'\n' | b'\r')) {
                self.line.pop();
            }
            let first = self.line.iter().position(|c| !c.is_ascii_whitespace());
            match first {
                None => continue,
                Some(i) if self.line[i] == b'#' || self.line[i] == b'%' => continue,
                Some(_) => return Ok(true),
            }
        }
    }
}

/// Split a line into (1-based column, field) pairs.
pub fn fields(line: &[u8]) -> impl Iterator<Item = (usize, &[u8])> {
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < line.len() && (line[i].is_ascii_whitespace() || line[i] == b',') {
            i += 1;
        }
        if i >= line.len() {
            return None;
        }
        let start = i;
        while i < line.len() && !(line[i].is_ascii_whitespace() || line[i] == b',') {
            i += 1;
        }
        Some((start + 1, &line[start..i]))
    })
}

/// Parse a decimal integer (optional sign) into i128; None if not an integer
/// or longer than 30 digits.
pub fn parse_int(f: &[u8]) -> Option<i128> {
    let (neg, digits) = match f.first()? {
        b'-' => (true, &f[1..]),
        b'+' => (false, &f[1..]),
        _ => (false, f),
    };
    if digits.is_empty() || digits.len() > 30 {
        return None;
    }
    let mut v: i128 = 0;
    for &c in digits {
        if !c.is_ascii_digit() {
            return None;
        }
        v = v * 10 + (c - b'0') as i128;
    }
    Some(if neg { -v } else { v })
}

fn show(f: &[u8]) -> String {
    let s = String::from_utf8_lossy(&f[..f.len().min(40)]).into_owned();
    format!("{s:?}")
}

/// SNAP / OGB edge list: the first two fields of each line are `src dst`;
/// further fields (weights, timestamps) are ignored.
pub struct TextEdges {
    lines: Lines,
    num_nodes: Option<u64>,
    skip_bad: bool,
    skipped: u64,
    examples: Vec<String>,
}

impl TextEdges {
    pub fn open(path: &Path, skip_bad: bool) -> Result<TextEdges> {
        Ok(TextEdges { lines: Lines::open(path)?, num_nodes: None, skip_bad, skipped: 0, examples: Vec::new() })
    }

    /// Err((malformed, error)): `malformed` lines may be skipped in skip
    /// mode; out-of-range ids never are (they mean the node count is wrong).
    fn parse_line(&self) -> std::result::Result<(u64, u64), (bool, BuildError)> {
        let l = &self.lines;
        let mut it = fields(&l.line);
        let mut ids = [0u64; 2];
        for (k, id) in ids.iter_mut().enumerate() {
            let Some((col, f)) = it.next() else {
                return Err((
                    true,
                    BuildError::input(
                        &l.file,
                        format!("line {}, column {}", l.line_no, l.line.len() + 1),
                        format!("short line {}: expected two node ids, found {k}", show(&l.line)),
                    ),
                ));
            };
            let pos = || format!("line {}, column {col}", l.line_no);
            let v = parse_int(f).ok_or_else(|| {
                (true, BuildError::input(&l.file, pos(), format!("cannot parse {} as a node id", show(f))))
            })?;
            *id = check_id(v, self.num_nodes, &l.file, pos).map_err(|e| (false, e))?;
        }
        Ok((ids[0], ids[1]))
    }
}

impl EdgeSource for TextEdges {
    fn set_num_nodes(&mut self, n: Option<u64>) {
        self.num_nodes = n;
    }
    fn bytes_total(&self) -> u64 {
        self.lines.bytes_total()
    }
    fn bytes_done(&self) -> u64 {
        self.lines.bytes_done()
    }
    fn skipped(&self) -> (u64, Vec<String>) {
        (self.skipped, self.examples.clone())
    }
    fn next_batch(&mut self, out: &mut Vec<(u64, u64)>, max: usize) -> Result<bool> {
        let mut got = 0;
        while got < max {
            if !self.lines.next_line()? {
                return Ok(got > 0);
            }
            match self.parse_line() {
                Ok(e) => {
                    out.push(e);
                    got += 1;
                }
                Err((true, e)) if self.skip_bad => {
                    self.skipped += 1;
                    if self.examples.len() < SKIP_EXAMPLES_MAX {
                        self.examples.push(e.to_string());
                    }
                }
                Err((_, e)) => return Err(e),
            }
        }
        Ok(true)
    }
}

/// OGB `node-feat.csv.gz`: one row of D comma-separated floats per line.
pub struct CsvRows {
    lines: Lines,
    dim: Option<u32>,
    pending: Option<Vec<f32>>,
    row: u64,
}

impl CsvRows {
    pub fn open(path: &Path) -> Result<CsvRows> {
        let mut r = CsvRows { lines: Lines::open(path)?, dim: None, pending: None, row: 0 };
        // Read the first row to learn D.
        if r.lines.next_line()? {
            let v = r.parse_current(None)?;
            r.dim = Some(v.len() as u32);
            r.pending = Some(v);
        } else {
            r.dim = Some(0);
        }
        Ok(r)
    }

    fn parse_current(&self, dim: Option<u32>) -> Result<Vec<f32>> {
        let l = &self.lines;
        let mut v = Vec::with_capacity(dim.unwrap_or(16) as usize);
        for (col, f) in fields(&l.line) {
            let s = std::str::from_utf8(f).unwrap_or("");
            let x: f32 = s.parse().map_err(|_| {
                BuildError::input(
                    &l.file,
                    format!("line {}, column {col}", l.line_no),
                    format!("cannot parse {} as a number", show(f)),
                )
            })?;
            v.push(x);
        }
        if let Some(d) = dim {
            if v.len() != d as usize {
                return Err(BuildError::input(
                    &l.file,
                    format!("line {}", l.line_no),
                    format!("row has {} values, expected {d} (the width of the first row)", v.len()),
                ));
            }
        }
        Ok(v)
    }
}

impl RowSource for CsvRows {
    fn file(&self) -> String {
        self.lines.file.clone()
    }
    fn dim(&self) -> u32 {
        self.dim.unwrap_or(0)
    }
    fn dtype(&self) -> flashgnn_format::Dtype {
        flashgnn_format::Dtype::Float32
    }
    fn rows(&self) -> Option<u64> {
        None
    }
    fn next_rows(&mut self, n: usize, out: &mut Vec<u8>) -> Result<usize> {
        let mut k = 0;
        while k < n {
            let row = match self.pending.take() {
                Some(r) => r,
                None => {
                    if !self.lines.next_line()? {
                        break;
                    }
                    self.parse_current(self.dim)?
                }
            };
            for x in row {
                out.extend_from_slice(&x.to_le_bytes());
            }
            k += 1;
            self.row += 1;
        }
        Ok(k)
    }
    fn position(&self, r: u64) -> String {
        // Rows and non-comment lines coincide in OGB files.
        format!("row {r} (line {})", r + 1)
    }
}

/// One value per line (OGB labels, split ids, num-node-list). `nan` is
/// accepted (OGB marks unlabeled nodes with it).
pub struct TextValues {
    lines: Lines,
    index: u64,
}

impl TextValues {
    pub fn open(path: &Path) -> Result<TextValues> {
        Ok(TextValues { lines: Lines::open(path)?, index: 0 })
    }
}

impl ValueSource for TextValues {
    fn file(&self) -> String {
        self.lines.file.clone()
    }
    fn len(&self) -> Option<u64> {
        None
    }
    fn next_values(&mut self, n: usize, out: &mut Vec<f64>) -> Result<usize> {
        let mut k = 0;
        while k < n && self.lines.next_line()? {
            let l = &self.lines;
            let mut it = fields(&l.line);
            // A non-blank line may still hold no field: only separators (",").
            let Some((col, f)) = it.next() else {
                return Err(BuildError::input(
                    &l.file,
                    format!("line {}", l.line_no),
                    format!("line {} has no value, only separators; expected 1 value per line", show(&l.line)),
                ));
            };
            let extra = it.count();
            if extra > 0 {
                // E.g. a two-column node-label.csv.gz: never keep the first
                // column silently.
                return Err(BuildError::input(
                    &l.file,
                    format!("line {}", l.line_no),
                    format!("line {} has {} columns; expected 1 (one value per line)", show(&l.line), extra + 1),
                ));
            }
            let s = std::str::from_utf8(f).unwrap_or("");
            let x: f64 = s.parse().map_err(|_| {
                BuildError::input(
                    &l.file,
                    format!("line {}, column {col}", l.line_no),
                    format!("cannot parse {} as a number", show(f)),
                )
            })?;
            out.push(x);
            k += 1;
            self.index += 1;
        }
        Ok(k)
    }
    fn position(&self, i: u64) -> String {
        format!("row {i} (line {})", i + 1)
    }
}

/// Labels keyed by node: `node label` per line (SNAP's labelled sets, e.g.
/// email-Eu-core-department-labels.txt). Read whole at open (ids and labels
/// parsed and checked as integers); once the node count is known every id
/// is checked against it and a node listed twice is refused with both
/// lines. Yields one value per node, -1 for nodes the file does not list.
pub struct PairLabels {
    file: String,
    /// (node, label, line) in file order.
    pairs: Vec<(u64, i64, u64)>,
    dense: Option<Vec<i64>>,
    next: u64,
}

impl PairLabels {
    pub fn open(path: &Path) -> Result<PairLabels> {
        let mut lines = Lines::open(path)?;
        let mut pairs = Vec::new();
        while lines.next_line()? {
            let l = &lines;
            let f: Vec<(usize, &[u8])> = fields(&l.line).collect();
            if f.len() != 2 {
                return Err(BuildError::input(
                    &l.file,
                    format!("line {}", l.line_no),
                    format!("line {} has {} field(s); expected 2: `node label`", show(&l.line), f.len()),
                ));
            }
            let int = |k: usize, what: &str| -> Result<i128> {
                let (col, v) = f[k];
                parse_int(v).ok_or_else(|| {
                    BuildError::input(
                        &l.file,
                        format!("line {}, column {col}", l.line_no),
                        format!("cannot parse {} as {what} (an integer)", show(v)),
                    )
                })
            };
            let node = int(0, "a node id")?;
            let label = int(1, "a class id")?;
            let pos = |k: usize| format!("line {}, column {}", l.line_no, f[k].0);
            if node < 0 || node >= super::NODES_MAX as i128 {
                return Err(BuildError::input(
                    &l.file,
                    pos(0),
                    format!("node id {node} is not in [0, {})", super::NODES_MAX),
                ));
            }
            if !(0..i32::MAX as i128).contains(&label) {
                return Err(BuildError::input(
                    &l.file,
                    pos(1),
                    format!("label {label} of node {node} is not a class id in [0, {})", i32::MAX),
                ));
            }
            pairs.push((node as u64, label as i64, l.line_no));
        }
        Ok(PairLabels { file: lines.file, pairs, dense: None, next: 0 })
    }
}

impl ValueSource for PairLabels {
    fn file(&self) -> String {
        self.file.clone()
    }
    fn len(&self) -> Option<u64> {
        None
    }
    fn set_num_nodes(&mut self, n: u64) -> Result<()> {
        let mut dense = vec![-1i64; n as usize];
        let mut line_of = vec![0u64; n as usize];
        for &(node, label, line) in &self.pairs {
            if node >= n {
                return Err(BuildError::input(
                    &self.file,
                    format!("line {line}"),
                    format!(
                        "node {node} is not in the graph: node ids are in [0, {n}) (the edge list's largest id + 1, \
                         or --num-nodes; pass --num-nodes to include nodes without edges)"
                    ),
                ));
            }
            let v = node as usize;
            if line_of[v] != 0 {
                return Err(BuildError::input(
                    &self.file,
                    format!("line {line}"),
                    format!(
                        "node {node} is labelled twice (label {} on line {}, label {label} here)",
                        dense[v], line_of[v]
                    ),
                ));
            }
            dense[v] = label;
            line_of[v] = line;
        }
        self.dense = Some(dense);
        Ok(())
    }
    fn next_values(&mut self, n: usize, out: &mut Vec<f64>) -> Result<usize> {
        let d = self.dense.as_ref().ok_or_else(|| BuildError::config("internal: labels read before the node count"))?;
        let k = (d.len() as u64 - self.next).min(n as u64) as usize;
        out.extend(d[self.next as usize..self.next as usize + k].iter().map(|&l| l as f64));
        self.next += k as u64;
        Ok(k)
    }
    fn position(&self, i: u64) -> String {
        format!("node {i}")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn field_splitting_and_ints() {
        let f: Vec<_> = fields(b"  12,\t34  5").collect();
        assert_eq!(f, vec![(3, &b"12"[..]), (7, &b"34"[..]), (11, &b"5"[..])]);
        assert_eq!(parse_int(b"-17"), Some(-17));
        assert_eq!(parse_int(b"1x"), None);
        assert_eq!(parse_int(b"99999999999999999999"), Some(99999999999999999999));
    }

    #[test]
    fn pair_labels_dense_and_refusals() {
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("labels.txt");
        std::fs::write(&p, "# node label\n3 1\n0 2\n").unwrap();
        let mut l = PairLabels::open(&p).unwrap();
        l.set_num_nodes(5).unwrap();
        let mut out = Vec::new();
        assert_eq!(l.next_values(10, &mut out).unwrap(), 5);
        assert_eq!(out, vec![2.0, -1.0, -1.0, 1.0, -1.0]);
        let mut l = PairLabels::open(&p).unwrap();
        let e = l.set_num_nodes(3).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("node 3 is not in the graph") && e.contains("[0, 3)"), "{e}");
        std::fs::write(&p, "1 1\n1 2\n").unwrap();
        let e = PairLabels::open(&p).unwrap().set_num_nodes(4).unwrap_err().to_string();
        assert!(e.contains("line 2") && e.contains("labelled twice") && e.contains("line 1"), "{e}");
        std::fs::write(&p, "1 one\n").unwrap();
        let e = PairLabels::open(&p).err().unwrap().to_string();
        assert!(e.contains("line 1, column 3") && e.contains("\"one\""), "{e}");
    }

    #[test]
    fn a_line_of_only_separators_is_an_error_not_a_panic() {
        // Found by the text_labels fuzz target (fuzz/regressions/text_labels/):
        // a line of commas is not blank, yet holds no value.
        let d = tempfile::tempdir().unwrap();
        let p = d.path().join("labels.csv");
        std::fs::write(&p, "1\n , ,\n2\n").unwrap();
        let mut v = TextValues::open(&p).unwrap();
        let mut out = Vec::new();
        let e = v.next_values(10, &mut out).unwrap_err().to_string();
        assert!(
            e.contains("labels.csv") && e.contains("line 2") && e.contains("\" , ,\"") && e.contains("no value"),
            "{e}"
        );
        assert_eq!(out, vec![1.0]);
    }

    #[test]
    fn cr_lf_and_crlf_all_end_lines() {
        let d = tempfile::tempdir().unwrap();
        for (name, text) in
            [("cr", "0 1\r1 2\r# c\r2 0\r"), ("crlf", "0 1\r\n1 2\r\n# c\r\n2 0"), ("lf", "0 1\n1 2\n# c\n2 0\n")]
        {
            let p = d.path().join(name);
            std::fs::write(&p, text).unwrap();
            let mut l = Lines::open(&p).unwrap();
            let mut got = Vec::new();
            while l.next_line().unwrap() {
                got.push((l.line_no, String::from_utf8(l.line.clone()).unwrap()));
            }
            assert_eq!(got, vec![(1, "0 1".into()), (2, "1 2".into()), (4, "2 0".into())], "{name}");
        }
    }
}
