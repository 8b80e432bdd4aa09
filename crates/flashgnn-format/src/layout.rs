//! Address arithmetic of the dataset files, and their header pages.
//!
//! The core idea (after BeaconGNN's DirectGraph, adapted to a host file
//! system): every node owns one fixed-size *slot*, and `slots_per_page` slots
//! are packed into each page of `graph.fg`. A node's slot address is therefore
//! pure arithmetic on its internal id:
//!
//! ```text
//! slot_offset(v) = page_size                      // header page
//!                + (v / slots_per_page) * page_size
//!                + (v % slots_per_page) * slot_bytes
//! ```
//!
//! so neighbor ids stored on disk *are* direct addresses: following an edge
//! costs no index lookup, and the engine keeps **zero bytes of in-memory index
//! per node**. A slot never crosses a page boundary, so one read of at most one
//! page (rounded out to 512 B sectors) returns a node's degree, feature row and
//! first `inline_cap` neighbors. Neighbors beyond `inline_cap` live in
//! `overflow.fg`, contiguous per node, so a hub costs one more (large) read.
//!
//! Architecture invariant: all arithmetic here is checked; [`Layout::new`]
//! refuses parameters whose file sizes would overflow `u64`.

use crate::checksum::crc_bound;
use crate::dtype::Dtype;
use crate::error::{FormatError, Result};
use crate::{FORMAT_VERSION, FORMAT_VERSION_MIN, PAGE_SIZE_MAX, PAGE_SIZE_MIN, SECTOR_BYTES};

/// Bytes of the fixed slot header: crc32c u32, degree u32, original id u64,
/// first overflow entry u64 (see docs/format.md).
pub const SLOT_HEADER_BYTES: u32 = 24;

/// Bytes at the end of every overflow page: page number u32 + crc32c u32.
pub const OVERFLOW_TRAILER_BYTES: u32 = 8;

/// Where feature rows live.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum FeaturePlacement {
    /// Inside each node's slot, beside its adjacency (one read for both).
    Inline,
    /// In `features.fg`, one row per `feature_stride` bytes (a multiple of
    /// 512), because a row is too large to share a page with adjacency.
    Separate,
}

/// Everything needed to compute any address in a dataset. Derived from the
/// manifest and re-checked against the header pages on open.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Layout {
    pub page_size: u32,
    pub num_nodes: u64,
    /// Stored neighbor entries (directed), the sum of all degrees.
    pub num_edges: u64,
    pub id_bytes: u32,
    pub feature_dim: u32,
    pub feature_dtype: Dtype,
    pub placement: FeaturePlacement,
    pub inline_cap: u32,
    pub slot_bytes: u32,
    pub slots_per_page: u32,
    pub overflow_entries: u64,
    /// The dataset id every per-structure checksum is bound to (format
    /// version 2; `None` for a version-1 dataset, whose checksums are seeded
    /// with the position only). Set by `Manifest::layout` and the builder;
    /// [`Layout::new`] leaves it `None`.
    pub dataset_id: Option<u64>,
    /// Typed graphs (format version 3): per-relation neighbor counts `R`
    /// stored in every slot after its header (one `u32` per incoming edge
    /// type of the node's type, unused ones zero). 0 for a homogeneous
    /// graph, whose one relation's count is the degree: the one-type case
    /// of the same slot. Set with [`Layout::with_rel_counts`].
    pub rel_counts: u32,
    /// Typed graphs of format version 4: after its relation counts every
    /// slot stores one `u64` *edge base* per relation (at
    /// [`Layout::edge_bases_offset`]): the position, in its edge type's
    /// stored edge list, of the node's first neighbor along it, so a sampled
    /// edge's `e_id` is its base plus its place in the relation's list, with
    /// no per-node index. False for version 3 (a typed dataset without
    /// them: readable, no `e_id`) and for homogeneous graphs.
    pub edge_bases: bool,
    /// A typed node type's feature table (`t<i>.features.fg`): rows smaller
    /// than a sector are packed at a power-of-two stride ([`Layout::feature_stride`]).
    /// False for `features.fg` (version 1 and 2: one row per sector at least).
    pub packed_rows: bool,
}

/// Bytes of a slot before its feature row: the header and `r` relation
/// counts, then with `edge_bases` the padding to 8 and `r` u64 bases.
pub fn fixed_bytes(r: u32, edge_bases: bool) -> u32 {
    let counts = SLOT_HEADER_BYTES + 4 * r;
    if edge_bases && r > 0 {
        counts.next_multiple_of(8) + 8 * r
    } else {
        counts
    }
}

fn round_up(x: u64, to: u64) -> Option<u64> {
    x.checked_add(to - 1).map(|v| v / to * to)
}

impl Layout {
    /// Builds and validates a layout. `file` names the source of the values
    /// for error messages.
    #[allow(clippy::too_many_arguments)]
    pub fn new(
        file: &str,
        page_size: u32,
        num_nodes: u64,
        num_edges: u64,
        id_bytes: u32,
        feature_dim: u32,
        feature_dtype: Dtype,
        placement: FeaturePlacement,
        inline_cap: u32,
        overflow_entries: u64,
    ) -> Result<Layout> {
        if !(PAGE_SIZE_MIN..=PAGE_SIZE_MAX).contains(&page_size) || !page_size.is_power_of_two() {
            return Err(FormatError::oob(
                file,
                0,
                "page_size",
                page_size as u64,
                format!("a power of two in [{PAGE_SIZE_MIN}, {PAGE_SIZE_MAX}]"),
            ));
        }
        if id_bytes != 4 && id_bytes != 8 {
            return Err(FormatError::oob(file, 0, "id_bytes", id_bytes as u64, "4 or 8"));
        }
        let id_max = if id_bytes == 4 { u32::MAX as u64 } else { u64::MAX };
        if num_nodes > id_max {
            return Err(FormatError::oob(
                file,
                0,
                "num_nodes",
                num_nodes,
                format!("<= {id_max} for {id_bytes}-byte ids"),
            ));
        }
        if !feature_dtype.is_float() {
            return Err(FormatError::invalid(
                file,
                format!("feature dtype {} is not a float type", feature_dtype.name()),
            ));
        }
        let row = (feature_dim as u64)
            .checked_mul(feature_dtype.size() as u64)
            .filter(|r| *r <= u32::MAX as u64)
            .ok_or_else(|| FormatError::oob(file, 0, "feature_dim", feature_dim as u64, "a row of at most 4 GiB"))?;
        let inline_row = if placement == FeaturePlacement::Inline { row } else { 0 };
        let slot = (SLOT_HEADER_BYTES as u64)
            .checked_add(inline_row)
            .and_then(|s| s.checked_add(inline_cap as u64 * id_bytes as u64))
            .and_then(|s| round_up(s, 8))
            .unwrap_or(u64::MAX);
        if slot > page_size as u64 {
            return Err(FormatError::oob(
                file,
                0,
                "slot_bytes",
                slot,
                format!("<= page_size {page_size} (inline_cap {inline_cap}, inline feature row {inline_row} B)"),
            ));
        }
        if overflow_entries > num_edges {
            return Err(FormatError::oob(
                file,
                0,
                "overflow_entries",
                overflow_entries,
                format!("<= num_edges {num_edges}"),
            ));
        }
        let layout = Layout {
            page_size,
            num_nodes,
            num_edges,
            id_bytes,
            feature_dim,
            feature_dtype,
            placement,
            inline_cap,
            slot_bytes: slot as u32,
            slots_per_page: (page_size as u64 / slot) as u32,
            overflow_entries,
            dataset_id: None,
            rel_counts: 0,
            edge_bases: false,
            packed_rows: false,
        };
        // Every file size must be representable: compute them once, checked.
        layout
            .graph_file_bytes_checked()
            .zip(layout.overflow_file_bytes_checked())
            .zip(layout.features_file_bytes_checked())
            .ok_or_else(|| FormatError::invalid(file, "layout parameters overflow 64-bit file sizes"))?;
        Ok(layout)
    }

    /// The same layout bound to `dataset_id` (format version 2).
    pub fn with_dataset_id(mut self, dataset_id: Option<u64>) -> Layout {
        self.dataset_id = dataset_id;
        self
    }

    /// The same layout with `r` per-relation counts in every slot (a typed
    /// graph): the slot grows by `4·r` bytes (format version 3), and with
    /// `edge_bases` (version 4) by the padding to 8 and `8·r` more, checked
    /// against the page size again.
    pub fn with_rel_counts(self, file: &str, r: u32, edge_bases: bool) -> Result<Layout> {
        let inline_row = if self.placement == FeaturePlacement::Inline { self.row_bytes() as u64 } else { 0 };
        let slot =
            round_up(fixed_bytes(r, edge_bases) as u64 + inline_row + self.inline_cap as u64 * self.id_bytes as u64, 8)
                .unwrap_or(u64::MAX);
        if slot > self.page_size as u64 {
            return Err(FormatError::oob(
                file,
                0,
                "slot_bytes",
                slot,
                format!("<= page_size {} (inline_cap {}, {r} relation counts)", self.page_size, self.inline_cap),
            ));
        }
        let l = Layout {
            rel_counts: r,
            edge_bases: edge_bases && r > 0,
            slot_bytes: slot as u32,
            slots_per_page: (self.page_size as u64 / slot) as u32,
            ..self
        };
        l.graph_file_bytes_checked()
            .ok_or_else(|| FormatError::invalid(file, "layout parameters overflow 64-bit file sizes"))?;
        Ok(l)
    }

    /// Format version of the files this layout describes: 4 for a typed
    /// graph with edge bases in its slots, 3 for one without, 2 when they
    /// carry a dataset id, 1 otherwise.
    pub fn format_version(&self) -> u32 {
        match (self.dataset_id, self.rel_counts, self.edge_bases) {
            (None, _, _) => 1,
            (Some(_), 0, _) => 2,
            (Some(_), _, false) => 3,
            _ => 4,
        }
    }

    /// Bytes before a slot's feature row: the header, the relation counts
    /// and the edge bases.
    pub fn slot_fixed_bytes(&self) -> u32 {
        fixed_bytes(self.rel_counts, self.edge_bases)
    }

    /// Offset of the first edge base inside a slot (with [`Layout::edge_bases`]).
    pub fn edge_bases_offset(&self) -> u32 {
        (SLOT_HEADER_BYTES + 4 * self.rel_counts).next_multiple_of(8)
    }

    /// Checksum of a slot (position = internal node id), overflow page
    /// (position = page index) or separate feature row (position = internal
    /// node id), bound to this dataset: [`crc_bound`].
    pub fn crc(&self, position: u64, bytes: &[u8]) -> u32 {
        crc_bound(self.dataset_id, position, bytes)
    }

    /// Bytes of one feature row as stored.
    pub fn row_bytes(&self) -> u32 {
        self.feature_dim * self.feature_dtype.size() as u32
    }

    /// Row pitch in `features.fg`: the row rounded up to whole 512 B sectors,
    /// so every row starts on a sector and is fetched by one O_DIRECT read of
    /// exactly `ceil(row/512)` sectors. A typed table ([`Layout::packed_rows`])
    /// packs rows smaller than a sector at the next power of two (at least
    /// 8 B): a power of two divides the sector, so no row straddles two and
    /// each is still one sector's read, without 512 B per 8-B row.
    pub fn feature_stride(&self) -> u64 {
        let row = self.row_bytes() as u64;
        if self.packed_rows && row < SECTOR_BYTES {
            return row.next_power_of_two().max(8);
        }
        round_up(row, SECTOR_BYTES).unwrap_or(0).max(SECTOR_BYTES)
    }

    /// The same layout with packed rows (a typed feature table).
    pub fn with_packed_rows(mut self) -> Layout {
        self.packed_rows = true;
        self
    }

    pub fn slot_pages(&self) -> u64 {
        self.num_nodes.div_ceil(self.slots_per_page as u64)
    }

    fn graph_file_bytes_checked(&self) -> Option<u64> {
        self.slot_pages().checked_add(1)?.checked_mul(self.page_size as u64)
    }
    pub fn graph_file_bytes(&self) -> u64 {
        self.graph_file_bytes_checked().expect("checked in Layout::new")
    }

    /// Byte offset of node `v`'s slot in `graph.fg`. Caller checks `v < num_nodes`.
    pub fn slot_offset(&self, v: u64) -> u64 {
        debug_assert!(v < self.num_nodes);
        let k = self.slots_per_page as u64;
        self.page_size as u64 + (v / k) * self.page_size as u64 + (v % k) * self.slot_bytes as u64
    }

    /// Offset of the feature row inside a slot (inline placement).
    pub fn inline_feature_offset(&self) -> u32 {
        self.slot_fixed_bytes()
    }

    /// Offset of the first inline neighbor id inside a slot.
    pub fn inline_ids_offset(&self) -> u32 {
        self.slot_fixed_bytes() + if self.placement == FeaturePlacement::Inline { self.row_bytes() } else { 0 }
    }

    /// Absolute byte range of node `v`'s feature row, and whether it lies in
    /// `graph.fg` (true) or `features.fg` (false).
    pub fn feature_range(&self, v: u64) -> (bool, u64, u64) {
        match self.placement {
            FeaturePlacement::Inline => {
                let start = self.slot_offset(v) + self.slot_fixed_bytes() as u64;
                (true, start, start + self.row_bytes() as u64)
            }
            FeaturePlacement::Separate => {
                let start = self.page_size as u64 + v * self.feature_stride();
                (false, start, start + self.row_bytes() as u64)
            }
        }
    }

    /// The O_DIRECT read that covers node `v`'s row in `features.fg`:
    /// `(offset, len)` rounded out to whole sectors, and where the row starts
    /// inside it. Separate placement only.
    pub fn feature_extent(&self, v: u64) -> (u64, u32, usize) {
        let (_, start, end) = self.feature_range(v);
        let lo = start / SECTOR_BYTES * SECTOR_BYTES;
        (lo, (end.div_ceil(SECTOR_BYTES) * SECTOR_BYTES - lo) as u32, (start - lo) as usize)
    }

    pub fn overflow_ids_per_page(&self) -> u64 {
        ((self.page_size - OVERFLOW_TRAILER_BYTES) / self.id_bytes) as u64
    }
    pub fn overflow_pages(&self) -> u64 {
        self.overflow_entries.div_ceil(self.overflow_ids_per_page())
    }
    fn overflow_file_bytes_checked(&self) -> Option<u64> {
        self.overflow_pages().checked_add(1)?.checked_mul(self.page_size as u64)
    }
    pub fn overflow_file_bytes(&self) -> u64 {
        self.overflow_file_bytes_checked().expect("checked in Layout::new")
    }
    /// Byte offset of overflow entry `e` in `overflow.fg`.
    pub fn overflow_entry_offset(&self, e: u64) -> u64 {
        let per = self.overflow_ids_per_page();
        self.page_size as u64 + (e / per) * self.page_size as u64 + (e % per) * self.id_bytes as u64
    }

    fn features_file_bytes_checked(&self) -> Option<u64> {
        match self.placement {
            FeaturePlacement::Inline => Some(0),
            // Packed rows end on a whole sector too: the last row's read is one sector, in the file.
            FeaturePlacement::Separate => round_up(
                self.num_nodes.checked_mul(self.feature_stride())?.checked_add(self.page_size as u64)?,
                SECTOR_BYTES,
            ),
        }
    }
    pub fn features_file_bytes(&self) -> u64 {
        self.features_file_bytes_checked().expect("checked in Layout::new")
    }

    /// Bytes of a plain CSR with the same content, the baseline for the
    /// overhead figure: int64 indptr (N+1), `id_bytes` per edge, and dense
    /// feature rows.
    pub fn csr_bytes(&self) -> u64 {
        (self.num_nodes + 1) * 8 + self.num_edges * self.id_bytes as u64 + self.num_nodes * self.row_bytes() as u64
    }

    /// Bytes of this layout's graph + overflow + feature files.
    pub fn stored_bytes(&self) -> u64 {
        self.graph_file_bytes() + self.overflow_file_bytes() + self.features_file_bytes()
    }
}

/// Degree histogram with exact counts below `counts.len()` and an exact
/// count and sum above it (a hub of 10^9 neighbors costs one bucket, not 10^9).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct DegreeHistogram {
    pub counts: Vec<u64>,
    pub tail_count: u64,
    pub tail_sum: u64,
}

impl DegreeHistogram {
    /// Exact buckets kept: 64 Ki (512 KiB), above every feasible inline cap
    /// for pages up to 256 KiB.
    pub const BUCKETS: usize = 1 << 16;

    pub fn new() -> Self {
        DegreeHistogram { counts: vec![0; Self::BUCKETS], tail_count: 0, tail_sum: 0 }
    }
    #[inline]
    pub fn add(&mut self, degree: u64) {
        match self.counts.get_mut(degree as usize) {
            Some(c) => *c += 1,
            None => {
                self.tail_count += 1;
                self.tail_sum += degree;
            }
        }
    }
    pub fn nodes(&self) -> u64 {
        self.counts.iter().sum::<u64>() + self.tail_count
    }
    /// Smallest degree d with at least `q` of the nodes at degree <= d;
    /// None when it lies in the tail.
    pub fn quantile(&self, q: f64) -> Option<u64> {
        let n = self.nodes();
        if n == 0 {
            return Some(0);
        }
        let target = ((q * n as f64).ceil() as u64).max(1);
        let mut acc = 0;
        for (d, c) in self.counts.iter().enumerate() {
            acc += c;
            if acc >= target {
                return Some(d as u64);
            }
        }
        None
    }
}

/// Chooses `inline_cap` for a degree distribution.
///
/// Cost model: total bytes of `graph.fg` + `overflow.fg`, plus 512 B for each
/// node whose list spills into `overflow.fg`, because a spill costs one more
/// request and one request is worth about one sector of space (random reads
/// run at the same IOPS at 512 B and 4 KiB on the devices we target, see
/// docs/format.md). Evaluated exactly
/// for every feasible cap in O(buckets) from the histogram.
pub fn choose_inline_cap(
    page_size: u32,
    id_bytes: u32,
    inline_row_bytes: u32,
    num_nodes: u64,
    hist: &DegreeHistogram,
) -> u32 {
    let p = page_size as u64;
    let w = id_bytes as u64;
    let fixed = SLOT_HEADER_BYTES as u64 + inline_row_bytes as u64;
    if fixed > p {
        return 0;
    }
    let max_cap = ((p - fixed) / w).min(hist.counts.len() as u64 - 1) as usize;
    let h = hist.counts.len();
    // nodes_gt[c] = #nodes with degree > c; sum_gt[c] = sum of their degrees.
    let mut nodes_gt = vec![0u64; h];
    let mut sum_gt = vec![0u64; h];
    let (mut n_acc, mut s_acc) = (hist.tail_count, hist.tail_sum);
    for c in (0..h).rev() {
        nodes_gt[c] = n_acc;
        sum_gt[c] = s_acc;
        n_acc += hist.counts[c];
        s_acc += hist.counts[c] * c as u64;
    }
    let per_ovf = (p - OVERFLOW_TRAILER_BYTES as u64) / w;
    let mut best = (u64::MAX, 0u32);
    for c in 0..=max_cap {
        let slot = (fixed + c as u64 * w).div_ceil(8) * 8;
        if slot > p {
            break;
        }
        let k = p / slot;
        let primary = num_nodes.div_ceil(k) * p;
        let spill_nodes = nodes_gt[c];
        let spill_entries = sum_gt[c] - spill_nodes * c as u64;
        let cost = primary + spill_entries.div_ceil(per_ovf) * p + spill_nodes * SECTOR_BYTES;
        if cost < best.0 {
            best = (cost, c as u32);
        }
        if spill_nodes == 0 {
            break; // larger caps only add space
        }
    }
    best.1
}

/// Magic of the three binary files (8 bytes each).
pub const GRAPH_MAGIC: [u8; 8] = *b"FGNNGRPH";
pub const OVERFLOW_MAGIC: [u8; 8] = *b"FGNNOVFL";
pub const FEATURE_MAGIC: [u8; 8] = *b"FGNNFEAT";

/// Header page: magic (8) | version u32 | page_size u32 | n fields u64... |
/// (version 2) dataset id u64 | crc32c u32 at page_size-4. A header with a
/// dataset id is written as version 2 and its checksum is bound to the id; a
/// header without one is version 1 (position-only seed), as version 1 wrote it.
fn encode_header(magic: [u8; 8], page_size: u32, dataset_id: Option<u64>, fields: &[u64]) -> Vec<u8> {
    let version: u32 = if dataset_id.is_some() { 2 } else { 1 };
    encode_header_v(magic, page_size, version, dataset_id, fields)
}

/// [`encode_header`] at an explicit version (a typed `graph.fg`: 3).
fn encode_header_v(magic: [u8; 8], page_size: u32, version: u32, dataset_id: Option<u64>, fields: &[u64]) -> Vec<u8> {
    let mut page = vec![0u8; page_size as usize];
    page[0..8].copy_from_slice(&magic);
    page[8..12].copy_from_slice(&version.to_le_bytes());
    page[12..16].copy_from_slice(&page_size.to_le_bytes());
    let all: Vec<u64> = fields.iter().copied().chain(dataset_id).collect();
    for (i, f) in all.iter().enumerate() {
        page[16 + i * 8..24 + i * 8].copy_from_slice(&f.to_le_bytes());
    }
    let n = page.len();
    let c = crc_bound(dataset_id, 0, &page[..n - 4]);
    page[n - 4..].copy_from_slice(&c.to_le_bytes());
    page
}

/// Decoded common part of a header page: page size, the `nfields` fields, and
/// the dataset id (version 2) or `None` (version 1).
type HeaderFields = (u32, Vec<u64>, Option<u64>);

fn decode_header(file: &str, magic: [u8; 8], bytes: &[u8], nfields: usize) -> Result<HeaderFields> {
    decode_header_v(file, magic, bytes, |_| nfields)
}

/// [`decode_header`] with the field count chosen by the header's version.
fn decode_header_v(file: &str, magic: [u8; 8], bytes: &[u8], nfields: impl Fn(u32) -> usize) -> Result<HeaderFields> {
    if bytes.len() < 16 {
        return Err(FormatError::Truncated { file: file.into(), offset: 0, needed: 16, available: bytes.len() as u64 });
    }
    if bytes[0..8] != magic {
        return Err(FormatError::BadMagic {
            file: file.into(),
            found: String::from_utf8_lossy(&bytes[0..8]).into_owned(),
            expected: String::from_utf8_lossy(&magic).into_owned(),
        });
    }
    let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
    if !(FORMAT_VERSION_MIN..=FORMAT_VERSION).contains(&version) {
        return Err(FormatError::UnsupportedVersion {
            file: format!("{file}: byte offset 8"),
            found: version,
            supported: FORMAT_VERSION,
        });
    }
    let page_size = u32::from_le_bytes(bytes[12..16].try_into().unwrap());
    if !(PAGE_SIZE_MIN..=PAGE_SIZE_MAX).contains(&page_size) || !page_size.is_power_of_two() {
        return Err(FormatError::oob(
            file,
            12,
            "page_size",
            page_size as u64,
            format!("a power of two in [{PAGE_SIZE_MIN}, {PAGE_SIZE_MAX}]"),
        ));
    }
    let p = page_size as usize;
    let nfields = nfields(version);
    if bytes.len() < p {
        return Err(FormatError::Truncated {
            file: file.into(),
            offset: 0,
            needed: p as u64,
            available: bytes.len() as u64,
        });
    }
    // Version 2 stores the dataset id after the fields; the smallest page
    // (512 B) holds any of our headers (at most 16 + 11·8 + 4 bytes).
    let total = nfields + (version >= 2) as usize;
    let field = |i: usize| u64::from_le_bytes(bytes[16 + i * 8..24 + i * 8].try_into().unwrap());
    let dataset_id = (version >= 2).then(|| field(nfields));
    let stored = u32::from_le_bytes(bytes[p - 4..p].try_into().unwrap());
    let computed = crc_bound(dataset_id, 0, &bytes[..p - 4]);
    if stored != computed {
        return Err(FormatError::Checksum {
            file: file.into(),
            offset: (p - 4) as u64,
            what: "header page".into(),
            stored,
            computed,
        });
    }
    debug_assert!(16 + total * 8 + 4 <= p);
    let fields = (0..nfields).map(field).collect();
    Ok((page_size, fields, dataset_id))
}

/// Header of `graph.fg` (page 0): the layout parameters, repeated from the
/// manifest so a lone file is self-describing and a mismatched pair is caught.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct GraphHeader {
    pub page_size: u32,
    pub num_nodes: u64,
    pub num_edges: u64,
    pub id_bytes: u64,
    pub feature_dim: u64,
    pub feature_dtype_code: u64,
    pub inline_features: u64,
    pub inline_cap: u64,
    pub slot_bytes: u64,
    pub slots_per_page: u64,
    pub overflow_entries: u64,
    /// Version 3 (a typed graph): relation counts per slot, at byte offset
    /// 96 (the dataset id then follows at 104); 0 and absent before.
    pub rel_counts: u64,
    /// Version 2: the dataset id at byte offset 96 (104 in version 3);
    /// `None` in a version-1 header.
    pub dataset_id: Option<u64>,
    /// The header's version field for a typed graph: 3, or 4 with edge
    /// bases in the slots (the field list is the same). 0 for a
    /// homogeneous graph, whose version follows from its dataset id.
    pub typed_version: u32,
}

impl GraphHeader {
    pub fn from_layout(l: &Layout) -> Self {
        GraphHeader {
            page_size: l.page_size,
            num_nodes: l.num_nodes,
            num_edges: l.num_edges,
            id_bytes: l.id_bytes as u64,
            feature_dim: l.feature_dim as u64,
            feature_dtype_code: l.feature_dtype.code() as u64,
            inline_features: (l.placement == FeaturePlacement::Inline) as u64,
            inline_cap: l.inline_cap as u64,
            slot_bytes: l.slot_bytes as u64,
            slots_per_page: l.slots_per_page as u64,
            overflow_entries: l.overflow_entries,
            rel_counts: l.rel_counts as u64,
            dataset_id: l.dataset_id,
            typed_version: if l.rel_counts > 0 { l.format_version() } else { 0 },
        }
    }
    pub fn encode(&self) -> Vec<u8> {
        let mut fields = vec![
            self.num_nodes,
            self.num_edges,
            self.id_bytes,
            self.feature_dim,
            self.feature_dtype_code,
            self.inline_features,
            self.inline_cap,
            self.slot_bytes,
            self.slots_per_page,
            self.overflow_entries,
        ];
        if self.rel_counts == 0 {
            return encode_header(GRAPH_MAGIC, self.page_size, self.dataset_id, &fields);
        }
        fields.push(self.rel_counts);
        encode_header_v(GRAPH_MAGIC, self.page_size, self.typed_version, self.dataset_id, &fields)
    }
    pub fn decode(file: &str, bytes: &[u8]) -> Result<Self> {
        let (page_size, f, dataset_id) = decode_header_v(file, GRAPH_MAGIC, bytes, |v| if v >= 3 { 11 } else { 10 })?;
        let version = u32::from_le_bytes(bytes[8..12].try_into().unwrap());
        Ok(GraphHeader {
            page_size,
            num_nodes: f[0],
            num_edges: f[1],
            id_bytes: f[2],
            feature_dim: f[3],
            feature_dtype_code: f[4],
            inline_features: f[5],
            inline_cap: f[6],
            slot_bytes: f[7],
            slots_per_page: f[8],
            overflow_entries: f[9],
            rel_counts: f.get(10).copied().unwrap_or(0),
            dataset_id,
            typed_version: if version >= 3 { version } else { 0 },
        })
    }
}

/// Header of `overflow.fg`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct OverflowHeader {
    pub page_size: u32,
    pub entries: u64,
    pub id_bytes: u64,
    /// Version 2: the dataset id at byte offset 32.
    pub dataset_id: Option<u64>,
}
impl OverflowHeader {
    pub fn from_layout(l: &Layout) -> Self {
        OverflowHeader {
            page_size: l.page_size,
            entries: l.overflow_entries,
            id_bytes: l.id_bytes as u64,
            dataset_id: l.dataset_id,
        }
    }
    pub fn encode(&self) -> Vec<u8> {
        encode_header(OVERFLOW_MAGIC, self.page_size, self.dataset_id, &[self.entries, self.id_bytes])
    }
    pub fn decode(file: &str, bytes: &[u8]) -> Result<Self> {
        let (page_size, f, dataset_id) = decode_header(file, OVERFLOW_MAGIC, bytes, 2)?;
        Ok(OverflowHeader { page_size, entries: f[0], id_bytes: f[1], dataset_id })
    }
}

/// Header of `features.fg` (separate placement only).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct FeatureHeader {
    pub page_size: u32,
    pub num_nodes: u64,
    pub feature_dim: u64,
    pub feature_dtype_code: u64,
    pub stride: u64,
    /// Version 2: the dataset id at byte offset 48.
    pub dataset_id: Option<u64>,
}
impl FeatureHeader {
    pub fn from_layout(l: &Layout) -> Self {
        FeatureHeader {
            page_size: l.page_size,
            num_nodes: l.num_nodes,
            feature_dim: l.feature_dim as u64,
            feature_dtype_code: l.feature_dtype.code() as u64,
            stride: l.feature_stride(),
            dataset_id: l.dataset_id,
        }
    }
    pub fn encode(&self) -> Vec<u8> {
        encode_header(
            FEATURE_MAGIC,
            self.page_size,
            self.dataset_id,
            &[self.num_nodes, self.feature_dim, self.feature_dtype_code, self.stride],
        )
    }
    pub fn decode(file: &str, bytes: &[u8]) -> Result<Self> {
        let (page_size, f, dataset_id) = decode_header(file, FEATURE_MAGIC, bytes, 4)?;
        Ok(FeatureHeader {
            page_size,
            num_nodes: f[0],
            feature_dim: f[1],
            feature_dtype_code: f[2],
            stride: f[3],
            dataset_id,
        })
    }
}

/// First disagreement between a decoded header and the one the manifest
/// implies, as an error naming the field, its byte offset and both values.
/// `fields` are (name, decoded, expected) in on-disk order after page_size;
/// `dataset_id` is (decoded, expected), stored after the fields (version 2).
/// A header of another format version than the manifest, or with another
/// dataset id, comes from another build.
pub fn header_mismatch(
    file: &str,
    page_size: (u32, u32),
    fields: &[(&'static str, u64, u64)],
    dataset_id: (Option<u64>, Option<u64>),
) -> Option<FormatError> {
    let version = |id: Option<u64>| if id.is_some() { 2 } else { 1 };
    if dataset_id.0.is_some() != dataset_id.1.is_some() {
        return Some(FormatError::oob(
            file,
            8,
            "header format version",
            version(dataset_id.0),
            format!("== {} from manifest.json (files from different builds)", version(dataset_id.1)),
        ));
    }
    if page_size.0 != page_size.1 {
        return Some(FormatError::oob(
            file,
            12,
            "header page_size",
            page_size.0 as u64,
            format!("== {} from manifest.json", page_size.1),
        ));
    }
    if let Some(e) = fields.iter().enumerate().find(|(_, f)| f.1 != f.2).map(|(i, f)| {
        FormatError::oob(
            file,
            16 + 8 * i as u64,
            f.0,
            f.1,
            format!("== {} from manifest.json (files from different builds?)", f.2),
        )
    }) {
        return Some(e);
    }
    match dataset_id {
        (Some(got), Some(want)) if got != want => Some(FormatError::oob(
            file,
            16 + 8 * fields.len() as u64,
            "dataset_id",
            got,
            format!("== {want} from manifest.json (a file from another dataset)"),
        )),
        _ => None,
    }
}

impl GraphHeader {
    /// (name, this, other) for every u64 field, in on-disk order.
    /// (`rel_counts` only when either header is typed: it is absent from a
    /// version-2 header, whose dataset id sits where it would be.)
    pub fn compare(&self, o: &GraphHeader) -> Vec<(&'static str, u64, u64)> {
        let mut v = vec![
            ("num_nodes", self.num_nodes, o.num_nodes),
            ("num_edges", self.num_edges, o.num_edges),
            ("id_bytes", self.id_bytes, o.id_bytes),
            ("feature_dim", self.feature_dim, o.feature_dim),
            ("feature_dtype_code", self.feature_dtype_code, o.feature_dtype_code),
            ("inline_features", self.inline_features, o.inline_features),
            ("inline_cap", self.inline_cap, o.inline_cap),
            ("slot_bytes", self.slot_bytes, o.slot_bytes),
            ("slots_per_page", self.slots_per_page, o.slots_per_page),
            ("overflow_entries", self.overflow_entries, o.overflow_entries),
        ];
        if self.rel_counts != 0 || o.rel_counts != 0 {
            v.push(("rel_counts", self.rel_counts, o.rel_counts));
        }
        v
    }
}

impl OverflowHeader {
    pub fn compare(&self, o: &OverflowHeader) -> Vec<(&'static str, u64, u64)> {
        vec![("entries", self.entries, o.entries), ("id_bytes", self.id_bytes, o.id_bytes)]
    }
}

impl FeatureHeader {
    pub fn compare(&self, o: &FeatureHeader) -> Vec<(&'static str, u64, u64)> {
        vec![
            ("num_nodes", self.num_nodes, o.num_nodes),
            ("feature_dim", self.feature_dim, o.feature_dim),
            ("feature_dtype_code", self.feature_dtype_code, o.feature_dtype_code),
            ("stride", self.stride, o.stride),
        ]
    }
}

/// Encode the trailer of overflow page `page_no` (1-based file page) in place,
/// its checksum bound to the layout's dataset id.
pub fn seal_overflow_page(layout: &Layout, page_no: u64, page: &mut [u8]) {
    let n = page.len();
    page[n - 8..n - 4].copy_from_slice(&(page_no as u32).to_le_bytes());
    let c = layout.crc(page_no, &page[..n - 4]);
    page[n - 4..].copy_from_slice(&c.to_le_bytes());
}

/// Check the trailer of overflow page `page_no` (checksum bound to the
/// layout's dataset id, then the stored page number).
pub fn check_overflow_page(layout: &Layout, file: &str, page_no: u64, page: &[u8]) -> Result<()> {
    let n = page.len();
    if n < OVERFLOW_TRAILER_BYTES as usize {
        return Err(FormatError::Truncated {
            file: file.into(),
            offset: page_no.saturating_mul(layout.page_size as u64),
            needed: layout.page_size as u64,
            available: n as u64,
        });
    }
    let off = page_no.saturating_mul(n as u64);
    let stored_no = u32::from_le_bytes(page[n - 8..n - 4].try_into().unwrap());
    let stored = u32::from_le_bytes(page[n - 4..].try_into().unwrap());
    let computed = layout.crc(page_no, &page[..n - 4]);
    if stored != computed {
        return Err(FormatError::Checksum {
            file: file.into(),
            offset: off + n as u64 - 4,
            what: format!("overflow page {page_no}"),
            stored,
            computed,
        });
    }
    if stored_no != page_no as u32 {
        return Err(FormatError::oob(
            file,
            off + n as u64 - 8,
            "overflow page number",
            stored_no as u64,
            format!("== {page_no} (page is misplaced)"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn layout(n: u64, dim: u32, placement: FeaturePlacement, cap: u32) -> Layout {
        Layout::new("t", 4096, n, 1000, 4, dim, Dtype::Float32, placement, cap, 10).unwrap()
    }

    #[test]
    fn slots_never_cross_pages() {
        // Proves the invariant the engine relies on: every slot lies within one page.
        for dim in [0, 3, 16, 100, 128, 250] {
            for cap in [0, 1, 7, 30] {
                let l = layout(10_000, dim, FeaturePlacement::Inline, cap);
                for v in [0, 1, 17, 9_999] {
                    let s = l.slot_offset(v);
                    let e = s + l.slot_bytes as u64 - 1;
                    assert_eq!(s / 4096, e / 4096, "dim {dim} cap {cap} node {v}");
                }
                assert!(l.slots_per_page >= 1);
            }
        }
    }

    #[test]
    fn separate_rows_are_sector_aligned() {
        let l = layout(100, 1024, FeaturePlacement::Separate, 8);
        assert_eq!(l.feature_stride(), 4096);
        let (in_graph, s, e) = l.feature_range(3);
        assert!(!in_graph);
        assert_eq!(s % 512, 0);
        assert_eq!(e - s, 4096);
        let l = layout(100, 100, FeaturePlacement::Separate, 8);
        assert_eq!(l.feature_stride(), 512);
    }

    #[test]
    fn rejects_bad_parameters() {
        assert!(Layout::new("t", 3000, 1, 0, 4, 0, Dtype::Float32, FeaturePlacement::Inline, 0, 0).is_err());
        assert!(Layout::new("t", 4096, 1, 0, 3, 0, Dtype::Float32, FeaturePlacement::Inline, 0, 0).is_err());
        let e = Layout::new("t", 4096, 1, 0, 4, 2000, Dtype::Float32, FeaturePlacement::Inline, 0, 0).unwrap_err();
        assert!(e.to_string().contains("slot_bytes"), "{e}");
        assert!(Layout::new("t", 4096, 1, 5, 4, 0, Dtype::Float32, FeaturePlacement::Inline, 0, 6).is_err());
        assert!(Layout::new("t", 4096, u64::MAX, 0, 8, 0, Dtype::Float32, FeaturePlacement::Inline, 0, 0).is_err());
    }

    #[test]
    fn inline_cap_tracks_degree_distribution() {
        // All nodes of degree 5: the best cap holds exactly 5 (no spills, no slack).
        let mut hist = DegreeHistogram::new();
        (0..1000).for_each(|_| hist.add(5));
        assert_eq!(choose_inline_cap(4096, 4, 0, 1000, &hist), 5);
        assert_eq!(hist.quantile(0.5), Some(5));
        // A few hubs (in the tail bucket) do not drag the cap up.
        let mut hist = DegreeHistogram::new();
        (0..100_000).for_each(|_| hist.add(3));
        hist.add(100_000);
        hist.add(1 << 30);
        assert_eq!(hist.tail_count, 2);
        let c = choose_inline_cap(4096, 4, 512, 100_002, &hist);
        assert!((3..10).contains(&c), "cap {c}");
    }

    #[test]
    fn header_roundtrip_and_corruption() {
        let l = layout(1234, 16, FeaturePlacement::Inline, 4);
        let h = GraphHeader::from_layout(&l);
        let mut page = h.encode();
        assert_eq!(GraphHeader::decode("g", &page).unwrap(), h);
        page[20] ^= 1;
        let e = GraphHeader::decode("g", &page).unwrap_err();
        assert!(matches!(e, FormatError::Checksum { .. }), "{e}");
        let mut page = h.encode();
        page[8] = 9;
        assert!(matches!(
            GraphHeader::decode("g", &page).unwrap_err(),
            FormatError::UnsupportedVersion { found: 9, .. }
        ));
        assert!(matches!(OverflowHeader::decode("g", &h.encode()).unwrap_err(), FormatError::BadMagic { .. }));
    }

    #[test]
    fn header_carries_and_binds_dataset_id() {
        // Version 2: the id is stored after the fields and seeds the header checksum;
        // version 1 (no id) still decodes, and a header of another build is named.
        let l = layout(1234, 16, FeaturePlacement::Inline, 4).with_dataset_id(Some(0xfeed_beef));
        let h = GraphHeader::from_layout(&l);
        let page = h.encode();
        assert_eq!(u32::from_le_bytes(page[8..12].try_into().unwrap()), crate::FORMAT_VERSION_HOMOGENEOUS);
        assert_eq!(u64::from_le_bytes(page[96..104].try_into().unwrap()), 0xfeed_beef);
        assert_eq!(GraphHeader::decode("g", &page).unwrap(), h);
        // Rewriting the id without re-sealing breaks the checksum.
        let mut forged = page.clone();
        forged[96] ^= 1;
        assert!(matches!(GraphHeader::decode("g", &forged).unwrap_err(), FormatError::Checksum { .. }));
        // A well-formed header of another dataset: refused by header_mismatch at byte 96.
        let other = GraphHeader::from_layout(&l.clone().with_dataset_id(Some(7)));
        let got = GraphHeader::decode("g", &other.encode()).unwrap();
        let e = header_mismatch("g", (got.page_size, h.page_size), &got.compare(&h), (got.dataset_id, h.dataset_id))
            .unwrap();
        assert!(e.to_string().contains("byte offset 96") && e.to_string().contains("dataset_id"), "{e}");
        // Version 1 header (no id) still decodes; against a v2 manifest it is refused at byte 8.
        let v1 = GraphHeader::from_layout(&layout(1234, 16, FeaturePlacement::Inline, 4));
        let got1 = GraphHeader::decode("g", &v1.encode()).unwrap();
        assert_eq!(got1.dataset_id, None);
        let e = header_mismatch("g", (got1.page_size, h.page_size), &got1.compare(&h), (None, h.dataset_id)).unwrap();
        assert!(e.to_string().contains("byte offset 8"), "{e}");
        // Overflow pages are bound too.
        let mut pg = vec![0u8; 4096];
        seal_overflow_page(&l, 3, &mut pg);
        assert!(check_overflow_page(&l, "o", 3, &pg).is_ok());
        let e = check_overflow_page(&l.clone().with_dataset_id(Some(7)), "o", 3, &pg).unwrap_err();
        assert!(matches!(e, FormatError::Checksum { offset, .. } if offset == 3 * 4096 + 4092), "{e}");
    }
}
