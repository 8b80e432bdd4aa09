//! Labels and splits: `labels.npy` (int64, -1 for unlabeled), the input's
//! split files, or train/val/test drawn here with `--make-splits` (by
//! default too when the input has a `processed/` directory and no split
//! files), stratified by class when there are labels.
//!
//! Invariants: every label and split id is checked where it is read
//! (a class id below the declared class count, a node id below the node
//! count), and errors name the file and the position; labels are kept in
//! memory (4 B/node) only when the splits are stratified by them; the drawn
//! splits are a pure function of `--seed`.

use std::io::Read as _;

use flashgnn_format::manifest::LabelInfo;
use flashgnn_format::npy::encode_header;
use flashgnn_format::Dtype;
use flashgnn_io::{IoError, OutFile};

use super::side::SideParams;
use crate::rows::{splitmix64, unit};
use crate::source::ValueSource;
use crate::{BuildError, Result};

/// Labels: int64 `[N]`, -1 for unlabeled (NaN in OGB/IGB float labels).
/// Also returns them (4 B/node) for `--make-splits` to stratify by.
pub(super) fn write_labels(
    p: &SideParams,
    n: u64,
    mut src: Box<dyn ValueSource>,
    keep: bool,
) -> Result<(LabelInfo, u64, u32, Vec<i32>)> {
    let file = src.file();
    src.set_num_nodes(n)?;
    let mut out = OutFile::create_on(&p.opts.disk, p.tmp.join(p.labels_file()))?;
    out.write(&encode_header(Dtype::Int64, &[n]))?;
    let mut vals = Vec::new();
    let mut buf = Vec::new();
    let mut all: Vec<i32> = Vec::with_capacity(if keep { n as usize } else { 0 });
    let (mut i, mut max, mut labeled) = (0u64, -1i64, 0u64);
    loop {
        p.progress.check()?;
        vals.clear();
        let k = src.next_values(1 << 16, &mut vals)?;
        if k == 0 {
            break;
        }
        buf.clear();
        for &v in &vals {
            if i >= n {
                return Err(BuildError::input(
                    &file,
                    src.position(i),
                    format!("label array has more rows than the node count {n}"),
                ));
            }
            let l = if v.is_nan() {
                -1
            } else if v.fract() != 0.0 || v < -1.0 || v >= i32::MAX as f64 {
                return Err(BuildError::input(
                    &file,
                    src.position(i),
                    format!("label {v} is not a class id (an integer in [0, {}), or -1/NaN for unlabeled)", i32::MAX),
                ));
            } else {
                v as i64
            };
            if let Some(c) = p.num_classes.filter(|&c| l >= 0 && l as u64 >= c) {
                return Err(BuildError::input(
                    &file,
                    src.position(i),
                    format!(
                        "label {l} is not below the declared class count {c} (labels must be in [0, {c}), or -1/NaN for unlabeled)"
                    ),
                ));
            }
            if l >= 0 {
                labeled += 1;
                max = max.max(l);
            }
            buf.extend_from_slice(&l.to_le_bytes());
            if keep {
                all.push(l as i32);
            }
            i += 1;
        }
        out.write(&buf)?;
    }
    if i != n {
        return Err(BuildError::input(
            &file,
            src.position(i),
            format!("label array has {i} rows but the node count is {n}"),
        ));
    }
    let (bytes, crc) = out.finish()?;
    // An explicit --num-classes is recorded (a class may have no node);
    // otherwise the count is what the labels show.
    // A typed build also records the count its label file's name declares
    // (IGBH's node_label_19 / node_label_2K).
    let declared = if p.typed.is_some() { p.num_classes } else { p.opts.num_classes };
    let num_classes = declared.unwrap_or((max + 1) as u64);
    Ok((LabelInfo { num_classes, labeled }, bytes, crc, all))
}

pub(super) fn write_split(
    p: &SideParams,
    n: u64,
    name: &str,
    mut src: Box<dyn ValueSource>,
) -> Result<(u64, u64, u32)> {
    let file = src.file();
    let path = p.tmp.join(p.split_file(name));
    // Header sized for the largest possible count; patched at the end.
    let mut ids: Vec<u8> = Vec::new();
    let mut count = 0u64;
    let mut vals = Vec::new();
    let body_path = p.tmp.join(format!("{}.body", p.split_file(name)));
    let mut body = OutFile::create(&body_path)?; // scratch: real disk
    loop {
        vals.clear();
        let k = src.next_values(1 << 16, &mut vals)?;
        if k == 0 {
            break;
        }
        ids.clear();
        for &v in &vals {
            if v.fract() != 0.0 || v < 0.0 || v >= n as f64 {
                return Err(BuildError::input(
                    &file,
                    src.position(count),
                    format!("split id {v} is not a node id in [0, {n})"),
                ));
            }
            ids.extend_from_slice(&(v as i64).to_le_bytes());
            count += 1;
        }
        body.write(&ids)?;
    }
    body.finish()?;
    // Assemble header + body (the body is small next to the graph).
    let mut out = OutFile::create_on(&p.opts.disk, &path)?;
    out.write(&encode_header(Dtype::Int64, &[count]))?;
    let mut f = flashgnn_io::open_regular(&body_path)?;
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let k = f.read(&mut buf).map_err(|e| IoError::new("reading", &body_path, None, e))?;
        if k == 0 {
            break;
        }
        out.write(&buf[..k])?;
    }
    let _ = std::fs::remove_file(&body_path);
    let (bytes, crc) = out.finish()?;
    Ok((count, bytes, crc))
}

/// Per-class split sizes for `count` nodes of one class: each fraction of
/// the class, rounded; never more than the class holds (test, then
/// validation give way); and at least one training node whenever the
/// training fraction is > 0, so every class is in train.
pub fn class_split_sizes(count: u64, (tr, va, te): (f64, f64, f64)) -> [u64; 3] {
    let r = |f: f64| (count as f64 * f).round() as u64;
    let mut s = [r(tr), r(va), r(te)];
    if tr > 0.0 && s[0] == 0 && count > 0 {
        s[0] = 1;
    }
    s[0] = s[0].min(count);
    for k in [2, 1] {
        let over = (s[0] + s[1] + s[2]).saturating_sub(count);
        s[k] -= over.min(s[k]);
    }
    s
}

/// Train/val/test splits, deterministic in `--seed`. With labels:
/// stratified by class — each class's nodes, in an order shuffled by
/// `--seed`, are cut by [`class_split_sizes`]; unlabeled nodes (-1) go to
/// no split (nothing to learn or score). Without labels: every node falls
/// in a random bucket.
pub(super) fn make_splits(
    p: &SideParams,
    n: u64,
    (tr, va, te): (f64, f64, f64),
    labels: Option<&[i32]>,
) -> Result<Vec<(String, u64, u64, u32)>> {
    if !(tr >= 0.0 && va >= 0.0 && te >= 0.0 && tr + va + te <= 1.0 + 1e-9) {
        return Err(BuildError::config(format!("split fractions {tr},{va},{te} must be >= 0 and sum to <= 1")));
    }
    let rank = |v: u64| splitmix64(p.opts.seed ^ 0x5EED_5717 ^ splitmix64(v));
    let strata: Option<Vec<u8>> = labels.map(|lab| {
        let classes = lab.iter().copied().max().unwrap_or(-1).max(-1) + 1;
        let mut members: Vec<Vec<u32>> = vec![Vec::new(); classes as usize];
        for (v, &l) in lab.iter().enumerate() {
            if l >= 0 {
                members[l as usize].push(v as u32);
            }
        }
        let mut b = vec![3u8; n as usize];
        for m in members.iter_mut() {
            m.sort_by_key(|&v| (rank(v as u64), v));
            let [a, c, d] = class_split_sizes(m.len() as u64, (tr, va, te));
            for (i, &v) in m.iter().enumerate() {
                let i = i as u64;
                b[v as usize] = if i < a {
                    0
                } else if i < a + c {
                    1
                } else if i < a + c + d {
                    2
                } else {
                    3
                };
            }
        }
        b
    });
    let bucket = |v: u64| {
        if let Some(s) = &strata {
            return s[v as usize] as usize;
        }
        let u = unit(splitmix64(p.opts.seed ^ 0x5EED_5717 ^ splitmix64(v)));
        if u < tr {
            0
        } else if u < tr + va {
            1
        } else if u < tr + va + te {
            2
        } else {
            3
        }
    };
    let mut counts = [0u64; 4];
    (0..n).for_each(|v| counts[bucket(v)] += 1);
    let mut res = Vec::new();
    for (b, name) in ["train", "val", "test"].iter().enumerate() {
        let mut out = OutFile::create_on(&p.opts.disk, p.tmp.join(p.split_file(name)))?;
        out.write(&encode_header(Dtype::Int64, &[counts[b]]))?;
        let mut buf = Vec::with_capacity(1 << 20);
        for v in 0..n {
            if bucket(v) == b {
                buf.extend_from_slice(&(v as i64).to_le_bytes());
                if buf.len() >= 1 << 20 {
                    out.write(&buf)?;
                    buf.clear();
                }
            }
        }
        out.write(&buf)?;
        let (bytes, crc) = out.finish()?;
        res.push((name.to_string(), counts[b], bytes, crc));
    }
    Ok(res)
}

#[cfg(test)]
mod tests {
    use super::class_split_sizes;

    #[test]
    fn class_split_sizes_keep_every_class_in_train() {
        assert_eq!(class_split_sizes(100, (0.6, 0.2, 0.2)), [60, 20, 20]);
        // a rare class still gets a training node; test, then val give way
        assert_eq!(class_split_sizes(3, (0.1, 0.2, 0.3)), [1, 1, 1]);
        assert_eq!(class_split_sizes(1, (0.1, 0.45, 0.45)), [1, 0, 0]);
        assert_eq!(class_split_sizes(2, (0.5, 0.5, 0.5)), [1, 1, 0]);
        assert_eq!(class_split_sizes(0, (0.6, 0.2, 0.2)), [0, 0, 0]);
        assert_eq!(class_split_sizes(10, (0.0, 0.5, 0.5)), [0, 5, 5]);
    }
}
