//! Feature rows: dtype conversion with NaN/Inf checks, and deterministic
//! synthetic rows for inputs without features.

use flashgnn_format::dtype::{read_f64, write_float};
use flashgnn_format::Dtype;

use crate::options::NanPolicy;
use crate::{BuildError, Result};

/// Whether rows of `src` are stored unchanged as `dst`: the same dtype,
/// float32, non-finite values refused (not replaced). Such rows need only
/// [`check_finite_f32`], in place, and no converted copy.
pub fn passthrough(src: Dtype, dst: Dtype, nan: NanPolicy) -> bool {
    src == dst && src == Dtype::Float32 && nan == NanPolicy::Error
}

/// Refuse the first NaN/Inf in float32 rows (`input`: whole rows of `dim`
/// values, the first being row `first_row`): only the exponent bits are
/// looked at.
pub fn check_finite_f32(
    file: &str,
    position: &dyn Fn(u64) -> String,
    dim: usize,
    input: &[u8],
    first_row: u64,
) -> Result<()> {
    // Vectorisable scan (no early exit inside a block), then the culprit.
    let has_bad = |block: &[u8]| {
        block
            .chunks_exact(4)
            .fold(false, |acc, c| acc | (u32::from_le_bytes(c.try_into().unwrap()) & 0x7f80_0000 == 0x7f80_0000))
    };
    if !input.chunks(16 << 10).any(has_bad) {
        return Ok(());
    }
    for (i, c) in input.chunks_exact(4).enumerate() {
        let v = f32::from_le_bytes(c.try_into().unwrap());
        if !v.is_finite() {
            return Err(not_finite(file, position, dim, first_row, i, v as f64));
        }
    }
    Ok(())
}

/// The error for value `i` (counted from row `first_row`) not being finite.
fn not_finite(
    file: &str,
    position: &dyn Fn(u64) -> String,
    dim: usize,
    first_row: u64,
    i: usize,
    v: f64,
) -> BuildError {
    let row = first_row + (i / dim.max(1)) as u64;
    BuildError::input(
        file,
        format!("{}, column {}", position(row), i % dim.max(1)),
        format!("feature value {v} is not finite (NaN/Inf); pass --nan zero to replace such values with 0"),
    )
}

/// Convert `n` rows of `dim` values from `src` to `dst` dtype, appending to
/// `out`. `position(r)` names row `r` (relative to `first_row`) in errors.
#[allow(clippy::too_many_arguments)]
pub fn convert_rows(
    file: &str,
    position: &dyn Fn(u64) -> String,
    src: Dtype,
    dst: Dtype,
    dim: usize,
    input: &[u8],
    first_row: u64,
    nan: NanPolicy,
    replaced: &mut u64,
    out: &mut Vec<u8>,
) -> Result<()> {
    let n = if dim == 0 { 0 } else { input.len() / (dim * src.size()) };
    let bad = |i: usize, v: f64| not_finite(file, position, dim, first_row, i, v);
    if passthrough(src, dst, nan) {
        check_finite_f32(file, position, dim, input, first_row)?;
        out.extend_from_slice(input);
        return Ok(());
    }
    let at = out.len();
    out.resize(at + n * dim * dst.size(), 0);
    let ds = dst.size();
    for i in 0..n * dim {
        let mut v = read_f64(src, input, i);
        if !v.is_finite() {
            match nan {
                NanPolicy::Error => return Err(bad(i, v)),
                NanPolicy::Zero => {
                    *replaced += 1;
                    v = 0.0;
                }
            }
        }
        // Values beyond the target's range would become Inf: refuse them
        // too (float16 and float32 alike).
        let max = match dst {
            Dtype::Float16 => Some((65504.0, "65504")),
            Dtype::Float32 => Some((f32::MAX as f64, "3.4028235e38")),
            _ => None,
        };
        if let Some((_, bound)) = max.filter(|(m, _)| v.abs() > *m) {
            if nan == NanPolicy::Error {
                let row = first_row + (i / dim) as u64;
                return Err(BuildError::input(
                    file,
                    format!("{}, column {}", position(row), i % dim),
                    format!(
                        "feature value {} overflows {} (|x| <= {bound})",
                        if v.abs() >= 1e15 { format!("{v:e}") } else { format!("{v}") },
                        dst.name()
                    ),
                ));
            }
            *replaced += 1;
            v = 0.0;
        }
        write_float(dst, v, &mut out[at + i * ds..at + (i + 1) * ds]);
    }
    Ok(())
}

/// Per-node deterministic randomness (features, splits) comes from this hash
/// so generation parallelises and streams.
pub use flashgnn_format::hash::splitmix64;

/// Uniform in [0, 1) from a hash.
#[inline]
pub fn unit(h: u64) -> f64 {
    (h >> 11) as f64 * (1.0 / (1u64 << 53) as f64)
}

/// Synthetic feature row for `node`: i.i.d. uniform in [-1, 1), deterministic
/// in (seed, node). Used for graphs without features (HolisticGNN gave SNAP
/// graphs 4K-wide synthetic features).
pub fn synthetic_row(seed: u64, node: u64, dim: usize, dtype: Dtype, out: &mut [u8]) {
    let base = splitmix64(seed ^ splitmix64(node));
    let s = dtype.size();
    for j in 0..dim {
        let v = unit(splitmix64(base.wrapping_add(j as u64))) * 2.0 - 1.0;
        write_float(dtype, v, &mut out[j * s..(j + 1) * s]);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nan_is_reported_with_row_and_column() {
        let vals = [1.0f32, 2.0, f32::NAN, 4.0];
        let bytes: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut out = Vec::new();
        let mut rep = 0;
        let e = convert_rows(
            "f.npy",
            &|r| format!("row {r}"),
            Dtype::Float32,
            Dtype::Float32,
            2,
            &bytes,
            10,
            NanPolicy::Error,
            &mut rep,
            &mut out,
        )
        .unwrap_err()
        .to_string();
        assert!(e.contains("f.npy: row 11, column 0") && e.contains("NaN"), "{e}");
        out.clear();
        convert_rows(
            "f",
            &|r| r.to_string(),
            Dtype::Float32,
            Dtype::Float16,
            2,
            &bytes,
            0,
            NanPolicy::Zero,
            &mut rep,
            &mut out,
        )
        .unwrap();
        assert_eq!(rep, 1);
        assert_eq!(out.len(), 8);
        assert_eq!(half::f16::from_le_bytes([out[4], out[5]]).to_f32(), 0.0);
        assert_eq!(half::f16::from_le_bytes([out[6], out[7]]).to_f32(), 4.0);
    }
}
