//! Feature rows held compressed in the cache's static hot set.
//!
//! An opt-in trade of exactness for reach: a static set of `B` bytes holds
//! twice (`fp16`), almost four (`int8`) or about seven times (`int4`) as
//! many float32 rows, so on
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
//! - `int4`: symmetric quantisation per group of 32 values (GGML's Q4_0
//!   shape): the group's scale `max|x| / 7` as an IEEE half rounded up,
//!   then two signed nibbles a byte (-7..=7, low nibble first): an absolute
//!   error of at most half a step (`max|x| / 14` of the value's group) per
//!   value; 72 B for a 128-d row against 132 (int8) and 512 (as stored). A
//!   group's own scale keeps one large value from flattening the other 31
//!   groups' values to zero, which a per-row scale at 4 bits would. A row
//!   with a non-finite value, or a group scale beyond half precision's
//!   range, is left out. On data/ooc with a tenth of the data cached it
//!   holds 1.3x the slots int8 does (docs/benchmarks.md gives the reads and
//!   the accuracy measured).
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
    I4,
}

/// Values per `int4` group (one half-precision scale each).
const I4_GROUP: usize = 32;

impl RowCodec {
    /// The accepted names (`none` = rows held as stored).
    pub const NAMES: [&'static str; 4] = ["none", "fp16", "int8", "int4"];

    /// `none` → None; unknown names → Err listing the accepted ones.
    pub fn parse(s: &str) -> Result<Option<RowCodec>, String> {
        match s {
            "none" => Ok(None),
            "fp16" => Ok(Some(RowCodec::F16)),
            "int8" => Ok(Some(RowCodec::I8)),
            "int4" => Ok(Some(RowCodec::I4)),
            x => Err(format!("row codec {x:?}: expected one of {}", RowCodec::NAMES.join(", "))),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            RowCodec::F16 => "fp16",
            RowCodec::I8 => "int8",
            RowCodec::I4 => "int4",
        }
    }
    /// Bytes a row of `dim` values of `dtype` is held in (as stored when
    /// the codec does not apply to the dtype).
    pub fn held(self, dtype: Dtype, dim: usize) -> usize {
        match (dtype, self) {
            (Dtype::Float32, RowCodec::F16) => 2 * dim,
            (Dtype::Float32, RowCodec::I8) => 4 + dim,
            (Dtype::Float32, RowCodec::I4) => 2 * dim.div_ceil(I4_GROUP) + dim.div_ceil(2),
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
            RowCodec::I4 => {
                let x: Vec<f32> = vals.collect();
                if x.iter().any(|v| !v.is_finite()) {
                    return false;
                }
                let start = out.len();
                let mut inv = Vec::with_capacity(x.len().div_ceil(I4_GROUP));
                for g in x.chunks(I4_GROUP) {
                    let want = g.iter().fold(0f32, |m, v| m.max(v.abs())) / 7.0;
                    // Rounded up, so no value of the group quantises past 7.
                    let mut h = f16::from_f32(want);
                    if h.to_f32() < want {
                        h = f16::from_bits(h.to_bits() + 1);
                    }
                    if !h.to_f32().is_finite() {
                        out.truncate(start);
                        return false;
                    }
                    out.extend_from_slice(&h.to_le_bytes());
                    inv.push(if h.to_f32() > 0.0 { 1.0 / h.to_f32() } else { 0.0 });
                }
                let q = |i: usize| x.get(i).map_or(0, |v| (v * inv[i / I4_GROUP]).round().clamp(-7.0, 7.0) as i8);
                out.extend((0..x.len().div_ceil(2)).map(|b| (q(2 * b) as u8 & 0x0f) | ((q(2 * b + 1) as u8) << 4)));
            }
        }
        true
    }
    /// Append the `dim` float32 values (little-endian bytes) of held row
    /// `src` to `out`: straight into a batch's `x`. Decoded a block at a time
    /// into a stack array, so the conversion runs in vector registers and
    /// `out` grows by one copy per block (an iterator of 4-byte arrays
    /// appended to a Vec did neither: a fifth of an int8-cached typed
    /// batch's CPU).
    pub fn decode(self, src: &[u8], dim: usize, out: &mut Vec<u8>) {
        const BLOCK: usize = 64;
        let mut block = [0u8; BLOCK * 4];
        // (values, float32 scale, bytes a value)
        let (body, scale, w) = match self {
            RowCodec::F16 => (src, 0.0, 2),
            RowCodec::I8 => (&src[4..], f32::from_le_bytes(src[..4].try_into().expect("a scale")), 1),
            RowCodec::I4 => return decode_i4(src, dim, out),
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
                RowCodec::I4 => unreachable!("decoded by decode_i4"),
            }
            out.extend_from_slice(b);
        }
    }
}

/// [`RowCodec::decode`] of an `int4` row of `dim` values: its group
/// scales, then the nibbles (the held length alone cannot tell an odd
/// `dim` from the next even one).
fn decode_i4(src: &[u8], dim: usize, out: &mut Vec<u8>) {
    let groups = dim.div_ceil(I4_GROUP);
    let (scales, nib) = src.split_at(2 * groups);
    out.reserve(dim * 4);
    let mut block = [0u8; I4_GROUP * 4];
    for g in 0..groups {
        let lo = g * I4_GROUP;
        let hi = (lo + I4_GROUP).min(dim);
        let s = f16::from_bits(u16::from_le_bytes([scales[2 * g], scales[2 * g + 1]])).to_f32();
        let b = &mut block[..(hi - lo) * 4];
        for (k, o) in b.chunks_exact_mut(4).enumerate() {
            let (i, byte) = (lo + k, nib[(lo + k) / 2]);
            let q = if i % 2 == 0 { ((byte << 4) as i8) >> 4 } else { (byte as i8) >> 4 };
            o.copy_from_slice(&(q as f32 * s).to_le_bytes());
        }
        out.extend_from_slice(b);
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
        // 130 and 127 values: a short last int4 group, an odd nibble count.
        for n in [130usize, 127, 1] {
            let row: Vec<f32> = (0..n).map(|i| ((i * 37 % 101) as f32 - 50.0) * 0.173).collect();
            let max = row.iter().fold(0f32, |m, x| m.max(x.abs()));
            for c in [RowCodec::F16, RowCodec::I8, RowCodec::I4] {
                let mut held = Vec::new();
                assert!(c.encode(Dtype::Float32, &bytes(&row), &mut held));
                assert_eq!(held.len(), c.held(Dtype::Float32, row.len()), "{c:?}");
                let mut back = Vec::new();
                c.decode(&held, row.len(), &mut back);
                let back = floats(&back);
                assert_eq!(back.len(), n, "{c:?}");
                for (i, (a, b)) in row.iter().zip(back).enumerate() {
                    let group = &row[i / 32 * 32..(i / 32 * 32 + 32).min(n)];
                    let bound = match c {
                        RowCodec::F16 => a.abs() * 2f32.powi(-11) + 1e-7,
                        RowCodec::I8 => max / 254.0 * 1.0001,
                        RowCodec::I4 => group.iter().fold(0f32, |m, x| m.max(x.abs())) / 14.0 * 1.002,
                    };
                    assert!((a - b).abs() <= bound, "{c:?} n={n}: {a} -> {b} (bound {bound})");
                }
            }
        }
        assert_eq!(RowCodec::I4.held(Dtype::Float32, 128), 72);
    }

    #[test]
    fn int4_scales_each_group_on_its_own() {
        // One large value in the first group: a per-row scale would put the
        // second group's values (all < 1/14 of it) at zero.
        let mut row = vec![0.5f32; 64];
        row[0] = 100.0;
        let mut held = Vec::new();
        assert!(RowCodec::I4.encode(Dtype::Float32, &bytes(&row), &mut held));
        let mut back = Vec::new();
        RowCodec::I4.decode(&held, 64, &mut back);
        let back = floats(&back);
        assert!(back[32..].iter().all(|&b| (b - 0.5).abs() <= 0.5 / 14.0 * 1.002), "{:?}", &back[32..]);
        assert!((back[0] - 100.0).abs() <= 100.0 / 14.0 * 1.002);
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
        RowCodec::I8.decode(&out, 3, &mut back);
        assert_eq!(floats(&back), vec![0.0; 3]);
        let mut out = Vec::new();
        assert!(!RowCodec::I4.encode(Dtype::Float32, &bytes(&[1.0, f32::INFINITY]), &mut out));
        assert!(!RowCodec::I4.encode(Dtype::Float32, &bytes(&[1.0, 1e9]), &mut out), "a scale past half precision");
        assert!(out.is_empty());
        assert_eq!(RowCodec::parse("int2").unwrap_err(), "row codec \"int2\": expected one of none, fp16, int8, int4");
    }
}
