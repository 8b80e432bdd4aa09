//! Minimal, strict `.npy` header reading and writing (format 1.0/2.0/3.0,
//! little-endian, C order). Used for the importer's inputs and for the
//! dataset's side arrays (labels, splits, id maps), so Python users can open
//! those with `numpy.load` directly.

use crate::dtype::Dtype;
use crate::error::{FormatError, Result};

/// A parsed header: where the data starts, its dtype and shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct NpyHeader {
    pub data_offset: u64,
    pub dtype: Dtype,
    pub shape: Vec<u64>,
}

impl NpyHeader {
    pub fn num_elements(&self) -> Option<u64> {
        self.shape.iter().try_fold(1u64, |a, &d| a.checked_mul(d))
    }
    pub fn data_bytes(&self) -> Option<u64> {
        self.num_elements()?.checked_mul(self.dtype.size() as u64)
    }
}

const NPY_MAGIC: &[u8] = b"\x93NUMPY";

/// Parse the header from the first bytes of a file (read at least 64 KiB or
/// the whole file). `file` is used in error messages.
pub fn parse_header(file: &str, bytes: &[u8]) -> Result<NpyHeader> {
    if bytes.len() < 10 || &bytes[..6] != NPY_MAGIC {
        return Err(FormatError::invalid(
            file,
            "byte offset 0: not a .npy file (missing \\x93NUMPY magic); for a headerless raw array pass its shape and dtype (e.g. --feat-shape N,D --feat-dtype float32)",
        ));
    }
    let major = bytes[6];
    let (hlen, start) = match major {
        1 => (u16::from_le_bytes([bytes[8], bytes[9]]) as usize, 10usize),
        2 | 3 => {
            if bytes.len() < 12 {
                return Err(FormatError::Truncated {
                    file: file.into(),
                    offset: 8,
                    needed: 4,
                    available: bytes.len() as u64 - 8,
                });
            }
            (u32::from_le_bytes(bytes[8..12].try_into().unwrap()) as usize, 12usize)
        }
        v => return Err(FormatError::oob(file, 6, "npy major version", v as u64, "1, 2 or 3")),
    };
    let end = start.checked_add(hlen).filter(|e| *e <= bytes.len()).ok_or(FormatError::Truncated {
        file: file.into(),
        offset: start as u64,
        needed: hlen as u64,
        available: (bytes.len() - start) as u64,
    })?;
    let text = std::str::from_utf8(&bytes[start..end]).map_err(|e| {
        FormatError::invalid(file, format!("byte offset {}: npy header is not text", start + e.valid_up_to()))
    })?;
    // Every header error names the byte offset of the key at fault (or of the
    // header text when the key is missing).
    let at = |key: &str| start + text.find(key).unwrap_or(0);
    let bad = |key: &str, m: String| FormatError::invalid(file, format!("byte offset {}: {m}", at(key)));
    // numpy evaluates the header as a Python dict, where a repeated key
    // keeps its last value; `dict_value` would take the first. Refuse
    // duplicates rather than read the array differently from numpy.
    for key in ["descr", "fortran_order", "shape"] {
        let n = text.matches(&format!("'{key}'")).count() + text.matches(&format!("\"{key}\"")).count();
        if n > 1 {
            return Err(bad(
                key,
                format!("npy header has the key {key:?} {n} times (numpy would read the last, flashgnn refuses to guess): {text:?}"),
            ));
        }
    }
    let descr =
        dict_value(text, "descr").ok_or_else(|| bad("descr", format!("npy header has no 'descr': {text:?}")))?;
    let descr = descr.trim().trim_matches(|c| c == '\'' || c == '"');
    let dtype = Dtype::from_npy_descr(descr).ok_or_else(|| {
        bad(
            "descr",
            format!("unsupported dtype {descr:?} (expected little-endian int8..int64, uint8..uint64, float16/32/64)"),
        )
    })?;
    let fortran = dict_value(text, "fortran_order").map(|v| v.trim().starts_with("True")).unwrap_or(false);
    if fortran {
        return Err(bad(
            "fortran_order",
            "Fortran-ordered arrays are not supported; save with np.ascontiguousarray".into(),
        ));
    }
    let shape_txt = dict_value(text, "shape").ok_or_else(|| bad("shape", "npy header has no 'shape'".into()))?;
    let inner = shape_txt.trim().trim_start_matches('(');
    let inner = &inner[..inner.find(')').ok_or_else(|| bad("shape", "npy shape is not a tuple".into()))?];
    let mut shape = Vec::new();
    for part in inner.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        shape.push(
            part.parse::<u64>()
                .map_err(|_| bad("shape", format!("npy shape entry {part:?} is not a non-negative integer")))?,
        );
    }
    let h = NpyHeader { data_offset: end as u64, dtype, shape };
    h.data_bytes().ok_or_else(|| bad("shape", "npy shape overflows 64 bits".into()))?;
    Ok(h)
}

/// Return the raw text after `'key':` up to the next top-level comma/brace.
fn dict_value<'a>(text: &'a str, key: &str) -> Option<&'a str> {
    let pat1 = format!("'{key}':");
    let pat2 = format!("\"{key}\":");
    let i = text.find(&pat1).map(|i| i + pat1.len()).or_else(|| text.find(&pat2).map(|i| i + pat2.len()))?;
    let rest = &text[i..];
    let mut depth = 0i32;
    for (j, c) in rest.char_indices() {
        match c {
            '(' | '[' => depth += 1,
            ')' | ']' => depth -= 1,
            ',' | '}' if depth == 0 => return Some(&rest[..j]),
            _ => {}
        }
    }
    Some(rest)
}

/// Encode a version-1.0 header whose total length is a multiple of 64.
pub fn encode_header(dtype: Dtype, shape: &[u64]) -> Vec<u8> {
    let shape_txt = match shape.len() {
        1 => format!("({},)", shape[0]),
        _ => format!("({})", shape.iter().map(|d| d.to_string()).collect::<Vec<_>>().join(", ")),
    };
    let mut dict = format!("{{'descr': '{}', 'fortran_order': False, 'shape': {}, }}", dtype.npy_descr(), shape_txt);
    // Pad so that magic(6)+ver(2)+len(2)+dict+\n is a multiple of 64, leaving
    // room for a shape that grows by a few digits when rewritten in place.
    let base = 10 + dict.len() + 1;
    let total = (base + 24).div_ceil(64) * 64;
    dict.push_str(&" ".repeat(total - base));
    dict.push('\n');
    let mut out = Vec::with_capacity(total);
    out.extend_from_slice(NPY_MAGIC);
    out.extend_from_slice(&[1, 0]);
    out.extend_from_slice(&((dict.len()) as u16).to_le_bytes());
    out.extend_from_slice(dict.as_bytes());
    out
}

/// Encode a header of exactly `len` bytes (for patching a streamed file whose
/// row count was unknown when it started). Returns None if it cannot fit.
pub fn encode_header_len(dtype: Dtype, shape: &[u64], len: usize) -> Option<Vec<u8>> {
    let mut h = encode_header(dtype, shape);
    if h.len() > len {
        return None;
    }
    // Re-pad the dict to the requested length.
    let newline = h.pop();
    debug_assert_eq!(newline, Some(b'\n'));
    h.resize(len - 1, b' ');
    h.push(b'\n');
    let dict_len = (len - 10) as u16;
    h[8..10].copy_from_slice(&dict_len.to_le_bytes());
    Some(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn roundtrip() {
        let h = encode_header(Dtype::Int64, &[12, 2]);
        assert_eq!(h.len() % 64, 0);
        let p = parse_header("x.npy", &h).unwrap();
        assert_eq!(p, NpyHeader { data_offset: h.len() as u64, dtype: Dtype::Int64, shape: vec![12, 2] });
        let h = encode_header_len(Dtype::Float32, &[5], 128).unwrap();
        assert_eq!(h.len(), 128);
        assert_eq!(parse_header("x", &h).unwrap().shape, vec![5]);
    }

    #[test]
    fn numpy_written_header() {
        // Exactly what numpy 1.x/2.x writes for np.zeros((3,4), '<f2').
        let dict = b"{'descr': '<f2', 'fortran_order': False, 'shape': (3, 4), }";
        let mut h = b"\x93NUMPY\x01\x00".to_vec();
        let pad = 64 - (10 + dict.len() + 1) % 64;
        let len = (dict.len() + pad + 1) as u16;
        h.extend_from_slice(&len.to_le_bytes());
        h.extend_from_slice(dict);
        h.extend(std::iter::repeat_n(b' ', pad));
        h.push(b'\n');
        let p = parse_header("f.npy", &h).unwrap();
        assert_eq!(h.len() % 64, 0);
        assert_eq!((p.dtype, p.shape.clone(), p.data_offset), (Dtype::Float16, vec![3, 4], h.len() as u64));
    }

    #[test]
    fn rejects_garbage() {
        assert!(parse_header("a", b"hello world").unwrap_err().to_string().contains("not a .npy"));
        let mut h = encode_header(Dtype::Int64, &[2]);
        h.truncate(20);
        assert!(parse_header("a", &h).is_err());
        let mut h = encode_header(Dtype::Int64, &[2]);
        let at = h.windows(3).position(|w| w == b"<i8").unwrap();
        h[at] = b'>';
        assert!(parse_header("a", &h).unwrap_err().to_string().contains("unsupported dtype"));
    }

    #[test]
    fn rejects_duplicate_keys() {
        let dict = b"{'descr': '<i8', 'fortran_order': False, 'shape': (2,), 'shape': (4,), }";
        let mut h = b"\x93NUMPY\x01\x00".to_vec();
        h.extend_from_slice(&(dict.len() as u16 + 1).to_le_bytes());
        h.extend_from_slice(dict);
        h.push(b'\n');
        let e = parse_header("d.npy", &h).unwrap_err().to_string();
        assert!(e.contains("d.npy") && e.contains("\"shape\" 2 times"), "{e}");
    }
}
