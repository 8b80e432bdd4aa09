//! Shared pieces of the fuzz targets: a reader that draws layout parameters
//! from the front of the input, CRC fix-ups so the fuzzer reaches the checks
//! behind a checksum, and a scratch file for decoders reached through a path.
//!
//! Invariant every target keeps: a decoder given hostile bytes returns a
//! typed error or a value that satisfies its documented bounds; it never
//! panics, hangs or allocates beyond the limits `make fuzz` sets
//! (`-rss_limit_mb`, `-malloc_limit_mb`).

use std::path::PathBuf;

use flashgnn_format::layout::FeaturePlacement;
use flashgnn_format::{Dtype, Layout};

/// Draws fixed-width values off the front of the fuzz input; past its end
/// every value is zero (so a short input is still a valid parameter set).
pub struct Draw<'a> {
    pub rest: &'a [u8],
}

impl<'a> Draw<'a> {
    pub fn new(data: &'a [u8]) -> Self {
        Draw { rest: data }
    }
    fn take<const N: usize>(&mut self) -> [u8; N] {
        let mut out = [0u8; N];
        let n = N.min(self.rest.len());
        out[..n].copy_from_slice(&self.rest[..n]);
        self.rest = &self.rest[n..];
        out
    }
    pub fn u8(&mut self) -> u8 {
        self.take::<1>()[0]
    }
    pub fn u16(&mut self) -> u16 {
        u16::from_le_bytes(self.take())
    }
    pub fn u32(&mut self) -> u32 {
        u32::from_le_bytes(self.take())
    }
    pub fn u64(&mut self) -> u64 {
        u64::from_le_bytes(self.take())
    }
}

/// A layout drawn from the input: mostly small, valid parameters (so the
/// slot and page checks behind `Layout::new` are reached), sometimes raw
/// values (so `Layout::new`'s own checks are fuzzed too). `None` when the
/// parameters are refused — with a typed error, which is all we check.
pub fn draw_layout(d: &mut Draw) -> Option<Layout> {
    let flags = d.u8();
    let raw = flags & 0x80 != 0;
    let page_size = if raw { d.u32() } else { 512u32 << (d.u8() % 4) };
    let num_nodes = if raw { d.u64() } else { d.u16() as u64 };
    let num_edges = if raw { d.u64() } else { d.u32() as u64 };
    let id_bytes = if raw { d.u32() } else { 4 << (d.u8() & 1) };
    let feature_dim = if raw { d.u32() } else { d.u8() as u32 };
    let dtype = Dtype::from_code(d.u8() % 11).unwrap_or(Dtype::Float32);
    let placement = if flags & 1 == 0 { FeaturePlacement::Inline } else { FeaturePlacement::Separate };
    let inline_cap = if raw { d.u32() } else { (d.u8() % 32) as u32 };
    let overflow_entries = if raw { d.u64() } else { d.u32() as u64 % (num_edges + 1) };
    let dataset_id = if flags & 2 != 0 { Some(d.u64()) } else { None };
    let rel_counts = if flags & 4 != 0 { (d.u8() % 8) as u32 } else { 0 };
    let l = Layout::new(
        "graph.fg",
        page_size,
        num_nodes,
        num_edges,
        id_bytes,
        feature_dim,
        dtype,
        placement,
        inline_cap,
        overflow_entries,
    )
    .ok()?
    .with_dataset_id(dataset_id);
    let l = if rel_counts > 0 { l.with_rel_counts("graph.fg", rel_counts, flags & 16 != 0).ok()? } else { l };
    if flags & 8 != 0 {
        Some(l.with_packed_rows())
    } else {
        Some(l)
    }
}

/// Whether the target should repair the checksums of its input before
/// decoding (decided by one input byte): the fuzzer then explores the
/// structural checks behind the checksum, which random bytes never pass.
pub fn fix_crc(d: &mut Draw) -> bool {
    d.u8() & 1 == 1
}

/// A per-process scratch file holding `bytes`, for the decoders whose entry
/// point is a path (text inputs, traces). `name` keeps the extension that
/// the decoder looks at (`.gz`). Lives in /dev/shm when there is one.
pub fn scratch_file(name: &str, bytes: &[u8]) -> PathBuf {
    let dir = if std::path::Path::new("/dev/shm").is_dir() { PathBuf::from("/dev/shm") } else { std::env::temp_dir() };
    let p = dir.join(format!("flashgnn-fuzz-{}-{name}", std::process::id()));
    std::fs::write(&p, bytes).expect("write the scratch file");
    p
}
