//! Feature rows held compressed in the cache's static hot set.
//!
//! An opt-in trade of exactness for reach: a static set of `B` bytes holds
//! twice (`fp16`) or almost four times (`int8`) as many float32 rows, so on
//! a graph whose hot rows do not fit uncompressed, far fewer of a batch's
//! rows go to the device. Batches then carry the decoded values, not the
//! stored ones (with no codec — the default — the cache never changes a
//! batch), which is why it is named when a cache is made and never chosen
//! for the user:
//!
//! - `fp16`: IEEE half precision (the dtype MLPerf's R-GAT reference keeps
//!   IGBH's features in): a relative error of at most 2^-11 per value;
//!   values beyond ±65504 would become ±inf, so a row holding one is left
//!   out of the set (read from the device as usual).
//! - `int8`: symmetric per-row quantisation, a float32 scale `max|x| / 127`
//!   then one signed byte per value: an absolute error of at most half a
//!   step (`max|x| / 254`) per value. A row with a non-finite value is left out.
//!
//! Rows are checked against their CRC before they are encoded (the loader
//! reads and checks every entry it holds); only float32 tables are encoded
//! (other dtypes are held as stored). Entries keep their length, so a held
//! row is known compressed when its length is not the row's.

use flashgnn_format::Dtype;
use half::f16;

/// How the static hot set holds float32 feature rows.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RowCodec {
    F16,
    I8,
}

impl RowCodec {
    /// The accepted names (`none` = rows held as stored).
    pub const NAMES: [&'static str; 3] = ["none", "fp16", "int8"];

    /// `none` → None; unknown names → Err listing the accepted ones.
    pub fn parse(s: &str) -> Result<Option<RowCodec>, String> {
        match s {
            "none" => Ok(None),
            "fp16" => Ok(Some(RowCodec::F16)),
            "int8" => Ok(Some(RowCodec::I8)),
            x => Err(format!("row codec {x:?}: expected one of {}", RowCodec::NAMES.join(", "))),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            RowCodec::F16 => "fp16",
            RowCodec::I8 => "int8",
        }
    }
    /// Bytes a row of `dim` values of `dtype` is held in (as stored when
    /// the codec does not apply to the dtype).
    pub fn held(self, dtype: Dtype, dim: usize) -> usize {
        match (dtype, self) {
            (Dtype::Float32, RowCodec::F16) => 2 * dim,
            (Dtype::Float32, RowCodec::I8) => 4 + dim,
            _ => dim * dtype.size(),
        }
    }
    /// Append row `src` (`dtype`) as held to `out`; false (nothing
    /// appended) when the codec does not apply (not float32, or a value it
    /// cannot carry: see the module docs).
    pub fn encode(self, dtype: Dtype, src: &[u8], out: &mut Vec<u8>) -> bool {
        if dtype != Dtype::Float32 {
            return false;
        }
        let vals = src.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().expect("4 bytes")));
        match self {
            RowCodec::F16 => {
                if vals.clone().any(|x| x.is_finite() && x.abs() > f16::MAX.to_f32()) {
                    return false;
                }
                out.extend(vals.flat_map(|x| f16::from_f32(x).to_le_bytes()));
            }
            RowCodec::I8 => {
                let mut max = 0f32;
                for x in vals.clone() {
                    if !x.is_finite() {
                        return false;
                    }
                    max = max.max(x.abs());
                }
                let scale = max / 127.0;
                out.extend_from_slice(&scale.to_le_bytes());
                let inv = if scale > 0.0 { 1.0 / scale } else { 0.0 };
                out.extend(vals.map(|x| (x * inv).round().clamp(-127.0, 127.0) as i8 as u8));
            }
        }
        true
    }
    /// Append the float32 values (little-endian bytes) of held row `src`
    /// to `out`: straight into a batch's `x`. Decoded a block at a time
    /// into a stack array, so the conversion runs in vector registers and
    /// `out` grows by one copy per block (an iterator of 4-byte arrays
    /// appended to a Vec did neither: a fifth of an int8-cached typed
    /// batch's CPU).
    pub fn decode(self, src: &[u8], out: &mut Vec<u8>) {
        const BLOCK: usize = 64;
        let mut block = [0u8; BLOCK * 4];
        let (body, scale) = match self {
            RowCodec::F16 => (src, 0.0),
            RowCodec::I8 => (&src[4..], f32::from_le_bytes(src[..4].try_into().expect("a scale"))),
        };
        let w = match self {
            RowCodec::F16 => 2,
            RowCodec::I8 => 1,
        };
        out.reserve(body.len() / w * 4);
        for s in body.chunks(BLOCK * w) {
            let n = s.len() / w;
            let b = &mut block[..n * 4];
            match self {
                RowCodec::F16 => {
                    for (o, c) in b.chunks_exact_mut(4).zip(s.chunks_exact(2)) {
                        o.copy_from_slice(
                            &f16::from_bits(u16::from_le_bytes([c[0], c[1]])).to_f32_const().to_le_bytes(),
                        );
                    }
                }
                RowCodec::I8 => {
                    for (o, &q) in b.chunks_exact_mut(4).zip(s) {
                        o.copy_from_slice(&(q as i8 as f32 * scale).to_le_bytes());
                    }
                }
            }
            out.extend_from_slice(b);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bytes(v: &[f32]) -> Vec<u8> {
        v.iter().flat_map(|x| x.to_le_bytes()).collect()
    }
    fn floats(b: &[u8]) -> Vec<f32> {
        b.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect()
    }

    #[test]
    fn round_trips_within_each_codecs_bound() {
        let row: Vec<f32> = (0..130).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.173).collect();
        let max = row.iter().fold(0f32, |m, x| m.max(x.abs()));
        for c in [RowCodec::F16, RowCodec::I8] {
            let mut held = Vec::new();
            assert!(c.encode(Dtype::Float32, &bytes(&row), &mut held));
            assert_eq!(held.len(), c.held(Dtype::Float32, row.len()), "{c:?}");
            let mut back = Vec::new();
            c.decode(&held, &mut back);
            for (a, b) in row.iter().zip(floats(&back)) {
                let bound = match c {
                    RowCodec::F16 => a.abs() * 2f32.powi(-11) + 1e-7,
                    RowCodec::I8 => max / 254.0 * 1.0001,
                };
                assert!((a - b).abs() <= bound, "{c:?}: {a} -> {b} (bound {bound})");
            }
        }
    }

    #[test]
    fn rows_a_codec_cannot_carry_stay_raw() {
        let mut out = Vec::new();
        assert!(!RowCodec::F16.encode(Dtype::Float32, &bytes(&[1.0, 70000.0]), &mut out));
        assert!(!RowCodec::I8.encode(Dtype::Float32, &bytes(&[1.0, f32::NAN]), &mut out));
        assert!(!RowCodec::I8.encode(Dtype::Float16, &[0, 0, 0, 0], &mut out));
        assert!(out.is_empty());
        // An all-zero row quantises to zeros with a zero scale.
        assert!(RowCodec::I8.encode(Dtype::Float32, &bytes(&[0.0; 3]), &mut out));
        let mut back = Vec::new();
        RowCodec::I8.decode(&out, &mut back);
        assert_eq!(floats(&back), vec![0.0; 3]);
        assert_eq!(RowCodec::parse("int4").unwrap_err(), "row codec \"int4\": expected one of none, fp16, int8");
    }
}
