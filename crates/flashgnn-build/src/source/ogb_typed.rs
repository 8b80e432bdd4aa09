//! OGB's heterogeneous raw layout (ogbn-mag), `--format ogb-typed`:
//!
//! ```text
//! raw/num-node-dict.csv.gz                        line 1: node type names, line 2: their counts
//! raw/relations/<src>___<rel>___<dst>/edge.csv.gz "src,dst" per line, ids local to each type
//! raw/node-feat/<type>/node-feat.csv.gz           one row of floats per node
//! raw/node-label/<type>/node-label.csv.gz         one class id per node
//! split/<name>/<type>/{train,valid,test}.csv.gz   node ids of that type
//! ```
//!
//! The files are streamed once, in bounded memory, into the typed npy layout
//! (`source/typed.rs`) in a staging directory beside the output, which the
//! typed build then reads like any typed npy input: every check of that
//! layout (ids against each type's count, counts agreeing, names) applies,
//! and nothing of the staging directory is published. What the raw layout
//! holds that a dataset does not store (`node_year`, `edge_reltype`,
//! `num-edge-list`) is named in the build's notes, never dropped silently.

use std::path::Path;

use flashgnn_format::npy::{encode_header, encode_header_len};
use flashgnn_format::Dtype;
use flashgnn_io::OutFile;

use super::detect::gz_or_plain;
use super::text::{fields, CsvRows, Lines, TextEdges, TextValues};
use super::{EdgeSource, RowSource, ValueSource};
use crate::options::BuildOptions;
use crate::{BuildError, Result};

/// OGB's separator of an edge folder's three names.
const OGB_SEP: &str = "___";
/// Rows or values moved per step.
const CHUNK: usize = 1 << 16;

/// Whether `dir` holds OGB's heterogeneous raw layout.
pub fn is_ogb_typed(dir: &Path) -> bool {
    let raw = dir.join("raw");
    raw.join("relations").is_dir() && gz_or_plain(raw.join("num-node-dict.csv.gz")).ok().flatten().is_some()
}

/// An npy file written front to back whose length (first dimension) is
/// known only at the end: the header is reserved at its widest and
/// rewritten, padded to the same length, when the file is finished.
struct NpyOut {
    out: OutFile,
    dtype: Dtype,
    rest: Vec<u64>,
    header_len: usize,
    rows: u64,
}

impl NpyOut {
    fn create(path: &Path, dtype: Dtype, rest: &[u64]) -> Result<NpyOut> {
        let widest: Vec<u64> = std::iter::once(u64::MAX).chain(rest.iter().copied()).collect();
        let header_len = encode_header(dtype, &widest).len();
        let mut out = OutFile::create(path)?;
        out.write(&vec![0u8; header_len])?;
        Ok(NpyOut { out, dtype, rest: rest.to_vec(), header_len, rows: 0 })
    }
    fn write(&mut self, bytes: &[u8], rows: u64) -> Result<()> {
        self.rows += rows;
        Ok(self.out.write(bytes)?)
    }
    fn finish(self) -> Result<u64> {
        let shape: Vec<u64> = std::iter::once(self.rows).chain(self.rest.iter().copied()).collect();
        let h = encode_header_len(self.dtype, &shape, self.header_len).expect("the widest header was reserved");
        self.out.finish_patched(&vec![0u8; self.header_len], &h)?;
        Ok(self.rows)
    }
}

fn stage_values(src: &mut dyn ValueSource, path: &Path, what: &str) -> Result<u64> {
    let mut out = NpyOut::create(path, Dtype::Int64, &[])?;
    let mut v = Vec::with_capacity(CHUNK);
    let mut bytes = Vec::with_capacity(CHUNK * 8);
    let mut at = 0u64;
    loop {
        v.clear();
        let n = src.next_values(CHUNK, &mut v)?;
        if n == 0 {
            break;
        }
        bytes.clear();
        for (i, &x) in v.iter().enumerate() {
            if x.fract() != 0.0 || !(-1.0..9.0e15).contains(&x) {
                return Err(BuildError::input(
                    src.file(),
                    src.position(at + i as u64),
                    format!("{what} {x} is not an integer >= -1"),
                ));
            }
            bytes.extend_from_slice(&(x as i64).to_le_bytes());
        }
        out.write(&bytes, n as u64)?;
        at += n as u64;
    }
    out.finish()
}

/// Stream `input`'s OGB heterogeneous raw files into the typed npy layout
/// in `stage` (created here); returns the notes on what was not imported.
pub fn stage_ogb_typed(opts: &BuildOptions, input: &Path, stage: &Path) -> Result<Vec<String>> {
    let raw = input.join("raw");
    let mut notes = Vec::new();
    std::fs::create_dir_all(stage).map_err(|e| flashgnn_io::IoError::new("mkdir", stage, None, e))?;
    // Node types and counts.
    let dict = gz_or_plain(raw.join("num-node-dict.csv.gz"))?.expect("checked by is_ogb_typed");
    let mut lines = Lines::open(&dict)?;
    let mut rows: Vec<Vec<String>> = Vec::new();
    while rows.len() < 2 && lines.next_line()? {
        rows.push(fields(&lines.line).map(|(_, f)| String::from_utf8_lossy(f).trim().to_string()).collect());
    }
    let (names, counts) = match rows.as_slice() {
        [n, c] if n.len() == c.len() && !n.is_empty() => (n.clone(), c.clone()),
        _ => {
            return Err(BuildError::input(
                dict.display(),
                "lines 1-2",
                "expected a line of node type names and a line of as many counts",
            ))
        }
    };
    let mut json = serde_json::Map::new();
    for (i, (n, c)) in names.iter().zip(&counts).enumerate() {
        let c: u64 = c.parse().map_err(|_| {
            BuildError::input(
                dict.display(),
                format!("line 2, field {}", i + 1),
                format!("count {c:?} of node type {n:?} is not an integer"),
            )
        })?;
        json.insert(n.clone(), c.into());
        std::fs::create_dir_all(stage.join(n)).map_err(|e| flashgnn_io::IoError::new("mkdir", stage, None, e))?;
    }
    std::fs::write(stage.join("num_nodes.json"), serde_json::Value::Object(json).to_string())
        .map_err(|e| flashgnn_io::IoError::new("write", &stage.join("num_nodes.json"), None, e))?;
    // Edge types: `src___rel___dst` folders, one staged [E, 2] int64 array each.
    let rel_dir = raw.join("relations");
    let mut folders: Vec<String> = std::fs::read_dir(&rel_dir)
        .map_err(|e| flashgnn_io::IoError::new("read_dir", &rel_dir, None, e))?
        .filter_map(|e| e.ok())
        .filter(|e| e.path().is_dir())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    folders.sort();
    for f in &folders {
        let parts: Vec<&str> = f.split(OGB_SEP).collect();
        let [s, r, d] = parts.as_slice() else {
            return Err(BuildError::config(format!(
                "{}: an OGB relation folder is <src>___<rel>___<dst>",
                rel_dir.join(f).display()
            )));
        };
        let edge = gz_or_plain(rel_dir.join(f).join("edge.csv.gz"))?.ok_or_else(|| {
            BuildError::config(format!(
                "{}: missing file (expected the relation's edge list)",
                rel_dir.join(f).join("edge.csv.gz").display()
            ))
        })?;
        let dir = stage.join(format!("{s}__{r}__{d}"));
        std::fs::create_dir_all(&dir).map_err(|e| flashgnn_io::IoError::new("mkdir", &dir, None, e))?;
        let mut src = TextEdges::open(&edge, opts.skip_bad_lines)?;
        src.set_num_nodes(None);
        let mut out = NpyOut::create(&dir.join("edge_index.npy"), Dtype::Int64, &[2])?;
        let mut batch = Vec::with_capacity(CHUNK);
        let mut bytes = Vec::with_capacity(CHUNK * 16);
        while src.next_batch(&mut batch, CHUNK)? || !batch.is_empty() {
            bytes.clear();
            for &(a, b) in &batch {
                bytes.extend_from_slice(&(a as i64).to_le_bytes());
                bytes.extend_from_slice(&(b as i64).to_le_bytes());
            }
            out.write(&bytes, batch.len() as u64)?;
            batch.clear();
        }
        out.finish()?;
        for extra in ["edge_reltype.csv.gz", "num-edge-list.csv.gz", "edge_year.csv.gz"] {
            if gz_or_plain(rel_dir.join(f).join(extra))?.is_some() {
                notes.push(format!(
                    "{}: not imported (a dataset stores one relation per edge type and counts its edges itself)",
                    rel_dir.join(f).join(extra).display()
                ));
            }
        }
    }
    // Per node type: features, labels.
    for n in &names {
        if let Some(p) = gz_or_plain(raw.join("node-feat").join(n).join("node-feat.csv.gz"))? {
            let mut rows = CsvRows::open(&p)?;
            let mut out = NpyOut::create(&stage.join(n).join("node_feat.npy"), rows.dtype(), &[rows.dim() as u64])?;
            let mut buf = Vec::new();
            loop {
                buf.clear();
                let k = rows.next_rows(CHUNK / 16, &mut buf)?;
                if k == 0 {
                    break;
                }
                out.write(&buf, k as u64)?;
            }
            out.finish()?;
        }
        if let Some(p) = gz_or_plain(raw.join("node-label").join(n).join("node-label.csv.gz"))? {
            stage_values(&mut TextValues::open(&p)?, &stage.join(n).join("node_label.npy"), "class id")?;
        }
        for other in ["node_year.csv.gz"] {
            if let Some(p) = gz_or_plain(raw.join("node-feat").join(n).join(other))? {
                notes.push(format!("{}: not imported (a node attribute other than features)", p.display()));
            }
        }
    }
    // The split: split/<name>/<type>/{train,valid,test}.csv.gz.
    let split_root = input.join("split");
    if split_root.is_dir() {
        let mut splits: Vec<String> = std::fs::read_dir(&split_root)
            .map_err(|e| flashgnn_io::IoError::new("read_dir", &split_root, None, e))?
            .filter_map(|e| e.ok())
            .filter(|e| e.path().is_dir())
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        splits.sort();
        let name = match (&opts.ogb_split, splits.len()) {
            (Some(n), _) => n.clone(),
            (None, 0) => String::new(),
            (None, 1) => splits.remove(0),
            (None, _) => {
                return Err(BuildError::config(format!(
                    "{}: several splits {splits:?}; choose one with --ogb-split",
                    split_root.display()
                )))
            }
        };
        for n in names.iter().filter(|_| !name.is_empty()) {
            for (file, ours) in [("train", "train"), ("valid", "val"), ("test", "test")] {
                if let Some(p) = gz_or_plain(split_root.join(&name).join(n).join(format!("{file}.csv.gz")))? {
                    stage_values(
                        &mut TextValues::open(&p)?,
                        &stage.join(n).join(format!("{ours}_idx.npy")),
                        "node id",
                    )?;
                }
            }
        }
    }
    Ok(notes)
}
