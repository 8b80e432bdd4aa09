//! The flashgnn dataset format: everything about *bytes on disk* and nothing
//! about how they are read or written.
//!
//! A dataset is a directory (see `docs/format.md` for every byte):
//!
//! - `manifest.json` — magic, format version, counts, dtypes, page size,
//!   file sizes and whole-file CRC32C checksums ([`manifest`]).
//! - `graph.fg` — a header page, then pages of fixed-size node *slots*: a
//!   node's degree, original id, feature row (when it fits) and its first
//!   `inline_cap` neighbor ids ([`layout`], [`slot`]).
//! - `overflow.fg` — neighbor ids that did not fit inline, in checksummed
//!   pages.
//! - `features.fg` + `feature_crc.npy` — feature rows, only when a row is too
//!   large to sit beside the adjacency.
//! - `labels.npy`, `split_<name>.npy`, and when relabelled `node_order.npy` /
//!   `node_index.npy` ([`npy`]).
//!
//! Beside datasets, the pre-sampled batches of `flashgnn presample`
//! ([`presample`]) and I/O traces ([`trace`]) are encoded here too.
//!
//! Architecture invariant: this crate performs no I/O. Every function that
//! decodes bytes takes a slice, checks every length, offset, id and count
//! against its bound with checked arithmetic, and returns a [`FormatError`]
//! naming what was wrong — it never panics on hostile input.

pub mod checksum;
pub mod dtype;
pub mod error;
pub mod hash;
pub mod layout;
pub mod manifest;
pub mod npy;
pub mod presample;
pub mod slot;
pub mod trace;
pub mod types;

pub use dtype::Dtype;
pub use error::{FormatError, Result};
pub use layout::{FeatureHeader, GraphHeader, Layout, OverflowHeader};
pub use manifest::Manifest;

/// Newest format version this build writes (docs/format.md keeps the version
/// log). Version 2 binds every per-structure checksum to a random 64-bit
/// dataset id ([`checksum::crc_bound`]); version 3 adds typed graphs (node
/// and edge types, [`types`]); version 4 stores per-relation edge bases in
/// a typed graph's slots (`e_id` per edge type). A homogeneous dataset is
/// still written as version 2, byte for byte: it is the one-type case, and
/// a version-2 reader keeps reading it.
pub const FORMAT_VERSION: u32 = 4;
/// The version a homogeneous dataset is written as.
pub const FORMAT_VERSION_HOMOGENEOUS: u32 = 2;

/// Oldest format version this build still reads. Readers refuse a version
/// outside `[FORMAT_VERSION_MIN, FORMAT_VERSION]` with a message naming both.
/// Version 1 datasets have no dataset id: their checksums keep version 1's
/// position-only seed.
pub const FORMAT_VERSION_MIN: u32 = 1;

/// O_DIRECT granularity that every on-disk structure is aligned to. 512 B is
/// the logical block size of every NVMe/virtio device we target; a feature
/// read is rounded out to whole sectors of this size.
pub const SECTOR_BYTES: u64 = 512;

/// Default page size: 4 KiB, the NVMe sweet spot for random reads (measured:
/// ~90K IOPS here at 4 KiB or 512 B alike, so bigger pages cost bandwidth only).
pub const DEFAULT_PAGE_SIZE: u32 = 4096;

/// Smallest and largest page sizes accepted. The slot index within a page is
/// computed, never stored, so the upper bound only limits buffer sizes.
pub const PAGE_SIZE_MIN: u32 = 512;
pub const PAGE_SIZE_MAX: u32 = 1 << 20;
