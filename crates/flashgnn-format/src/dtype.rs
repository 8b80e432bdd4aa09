//! Element types of feature rows and side arrays, with their numpy spelling.

use serde::{Deserialize, Serialize};

#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Dtype {
    Float16,
    Float32,
    Float64,
    Int8,
    Uint8,
    Int16,
    Int32,
    Int64,
    Uint32,
    Uint64,
}

impl Dtype {
    pub fn size(self) -> usize {
        match self {
            Dtype::Int8 | Dtype::Uint8 => 1,
            Dtype::Float16 | Dtype::Int16 => 2,
            Dtype::Float32 | Dtype::Int32 | Dtype::Uint32 => 4,
            Dtype::Float64 | Dtype::Int64 | Dtype::Uint64 => 8,
        }
    }

    pub fn is_float(self) -> bool {
        matches!(self, Dtype::Float16 | Dtype::Float32 | Dtype::Float64)
    }

    /// Stable one-byte code used in binary headers.
    pub fn code(self) -> u8 {
        match self {
            Dtype::Float16 => 1,
            Dtype::Float32 => 2,
            Dtype::Float64 => 3,
            Dtype::Int8 => 4,
            Dtype::Uint8 => 5,
            Dtype::Int16 => 6,
            Dtype::Int32 => 7,
            Dtype::Int64 => 8,
            Dtype::Uint32 => 9,
            Dtype::Uint64 => 10,
        }
    }

    pub fn from_code(code: u8) -> Option<Dtype> {
        Some(match code {
            1 => Dtype::Float16,
            2 => Dtype::Float32,
            3 => Dtype::Float64,
            4 => Dtype::Int8,
            5 => Dtype::Uint8,
            6 => Dtype::Int16,
            7 => Dtype::Int32,
            8 => Dtype::Int64,
            9 => Dtype::Uint32,
            10 => Dtype::Uint64,
            _ => return None,
        })
    }

    /// numpy `descr` for little-endian storage.
    pub fn npy_descr(self) -> &'static str {
        match self {
            Dtype::Float16 => "<f2",
            Dtype::Float32 => "<f4",
            Dtype::Float64 => "<f8",
            Dtype::Int8 => "|i1",
            Dtype::Uint8 => "|u1",
            Dtype::Int16 => "<i2",
            Dtype::Int32 => "<i4",
            Dtype::Int64 => "<i8",
            Dtype::Uint32 => "<u4",
            Dtype::Uint64 => "<u8",
        }
    }

    pub fn from_npy_descr(descr: &str) -> Option<Dtype> {
        Some(match descr {
            "<f2" => Dtype::Float16,
            "<f4" => Dtype::Float32,
            "<f8" => Dtype::Float64,
            "|i1" | "<i1" => Dtype::Int8,
            "|u1" | "<u1" => Dtype::Uint8,
            "<i2" => Dtype::Int16,
            "<i4" => Dtype::Int32,
            "<i8" => Dtype::Int64,
            "<u4" => Dtype::Uint32,
            "<u8" => Dtype::Uint64,
            _ => return None,
        })
    }

    pub fn name(self) -> &'static str {
        match self {
            Dtype::Float16 => "float16",
            Dtype::Float32 => "float32",
            Dtype::Float64 => "float64",
            Dtype::Int8 => "int8",
            Dtype::Uint8 => "uint8",
            Dtype::Int16 => "int16",
            Dtype::Int32 => "int32",
            Dtype::Int64 => "int64",
            Dtype::Uint32 => "uint32",
            Dtype::Uint64 => "uint64",
        }
    }

    pub fn parse(name: &str) -> Option<Dtype> {
        Some(match name {
            "float16" | "f2" | "half" => Dtype::Float16,
            "float32" | "f4" | "float" => Dtype::Float32,
            "float64" | "f8" | "double" => Dtype::Float64,
            "int8" => Dtype::Int8,
            "uint8" => Dtype::Uint8,
            "int16" => Dtype::Int16,
            "int32" => Dtype::Int32,
            "int64" => Dtype::Int64,
            "uint32" => Dtype::Uint32,
            "uint64" => Dtype::Uint64,
            _ => return None,
        })
    }
}

/// Decode element `i` of a little-endian array of `dtype` as f64.
/// Caller guarantees `bytes.len() >= (i+1)*size`.
pub fn read_f64(dtype: Dtype, bytes: &[u8], i: usize) -> f64 {
    let s = dtype.size();
    let b = &bytes[i * s..(i + 1) * s];
    match dtype {
        Dtype::Float16 => half::f16::from_le_bytes([b[0], b[1]]).to_f64(),
        Dtype::Float32 => f32::from_le_bytes(b.try_into().unwrap()) as f64,
        Dtype::Float64 => f64::from_le_bytes(b.try_into().unwrap()),
        Dtype::Int8 => b[0] as i8 as f64,
        Dtype::Uint8 => b[0] as f64,
        Dtype::Int16 => i16::from_le_bytes([b[0], b[1]]) as f64,
        Dtype::Int32 => i32::from_le_bytes(b.try_into().unwrap()) as f64,
        Dtype::Int64 => i64::from_le_bytes(b.try_into().unwrap()) as f64,
        Dtype::Uint32 => u32::from_le_bytes(b.try_into().unwrap()) as f64,
        Dtype::Uint64 => u64::from_le_bytes(b.try_into().unwrap()) as f64,
    }
}

/// Decode element `i` of an integer array as i128 (wide enough for every
/// integer dtype, so negative and overflowing ids are reported, not wrapped).
pub fn read_int(dtype: Dtype, bytes: &[u8], i: usize) -> Option<i128> {
    let s = dtype.size();
    let b = &bytes[i * s..(i + 1) * s];
    Some(match dtype {
        Dtype::Int8 => b[0] as i8 as i128,
        Dtype::Uint8 => b[0] as i128,
        Dtype::Int16 => i16::from_le_bytes([b[0], b[1]]) as i128,
        Dtype::Int32 => i32::from_le_bytes(b.try_into().unwrap()) as i128,
        Dtype::Int64 => i64::from_le_bytes(b.try_into().unwrap()) as i128,
        Dtype::Uint32 => u32::from_le_bytes(b.try_into().unwrap()) as i128,
        Dtype::Uint64 => u64::from_le_bytes(b.try_into().unwrap()) as i128,
        _ => return None,
    })
}

/// Encode `v` as `dtype` (a float type) into `out`.
pub fn write_float(dtype: Dtype, v: f64, out: &mut [u8]) {
    match dtype {
        Dtype::Float16 => out[..2].copy_from_slice(&half::f16::from_f64(v).to_le_bytes()),
        Dtype::Float32 => out[..4].copy_from_slice(&(v as f32).to_le_bytes()),
        Dtype::Float64 => out[..8].copy_from_slice(&v.to_le_bytes()),
        _ => unreachable!("write_float called with integer dtype {dtype:?}"),
    }
}

/// Append the float row `src` (stored as `from`) to `out` as `to`, value by
/// value with numpy's `astype` rounding (round to nearest, ties to even;
/// widening is exact). Only float dtypes; `src.len()` must be a multiple of
/// `from.size()` (it is a whole row). Same dtype: a plain copy.
pub fn convert_floats(src: &[u8], from: Dtype, to: Dtype, out: &mut Vec<u8>) {
    debug_assert!(from.is_float() && to.is_float() && src.len().is_multiple_of(from.size()));
    if from == to {
        out.extend_from_slice(src);
        return;
    }
    // f64 holds every f16 and f32 exactly, so each value is rounded once, by `write_float`.
    let n = src.len() / from.size();
    let start = out.len();
    out.resize(start + n * to.size(), 0);
    for (i, dst) in out[start..].chunks_exact_mut(to.size()).enumerate() {
        write_float(to, read_f64(from, src, i), dst);
    }
}

#[cfg(test)]
mod convert_tests {
    use super::*;

    #[test]
    fn converts_like_numpy_astype() {
        let vals = [0.0f32, -1.5, 65504.0, 1.0e-8, 3.140625, f32::INFINITY];
        let src: Vec<u8> = vals.iter().flat_map(|v| v.to_le_bytes()).collect();
        let mut half_row = Vec::new();
        convert_floats(&src, Dtype::Float32, Dtype::Float16, &mut half_row);
        let mut back = Vec::new();
        convert_floats(&half_row, Dtype::Float16, Dtype::Float32, &mut back);
        let got: Vec<f32> = back.chunks_exact(4).map(|c| f32::from_le_bytes(c.try_into().unwrap())).collect();
        assert_eq!(got, vec![0.0, -1.5, 65504.0, 0.0, 3.140625, f32::INFINITY]);
        let mut wide = Vec::new();
        convert_floats(&src, Dtype::Float32, Dtype::Float64, &mut wide);
        assert_eq!(f64::from_le_bytes(wide[8..16].try_into().unwrap()), -1.5);
        let mut same = Vec::new();
        convert_floats(&src, Dtype::Float32, Dtype::Float32, &mut same);
        assert_eq!(same, src);
    }
}
