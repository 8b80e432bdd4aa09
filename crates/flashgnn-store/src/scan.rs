//! Sequential scan of every node of a dataset in internal (layout) order:
//! [`scan`] reads `graph.fg`, `overflow.fg` and `features.fg` front to back
//! in large chunks instead of one point read per node.
//!
//! Used where a whole dataset is rewritten (compaction of the mutable store):
//! for N nodes a point-read pass costs N slot reads + N feature reads + one
//! overflow read per spilling node, each a syscall and, cold, a random
//! device read; the scan costs `file_bytes / chunk` sequential reads.
//!
//! Every byte is checked as the point reads check it: slot checksums and
//! bounds (`decode_slot`, inline ids < N), the slot's original id against the
//! relabelling map, overflow page checksums and page numbers, overflow ids <
//! N, separate feature rows against their CRC32C. Overflow ranges must tile
//! the overflow file in internal order (the importer writes them so and
//! `verify` checks it); a range that does not start where the previous one
//! ended is refused as corruption rather than read out of order.
//!
//! Memory: one chunk of slot pages, the feature rows of the nodes in that
//! chunk, one chunk of overflow pages, and the neighbor list of one node.

use flashgnn_format::layout::{check_overflow_page, FeaturePlacement};
use flashgnn_format::manifest::{GRAPH_FILE, OVERFLOW_FILE};
use flashgnn_format::slot::{decode_slot, read_id};
use flashgnn_format::FormatError;

use flashgnn_io::{IoError, ReadAt};

use crate::dataset::{Dataset, StoreError};

/// Default chunk for [`scan`]: 4 MiB per file (sequential reads at device
/// bandwidth; three of them bound the scan's buffers at ~12 MiB plus the
/// feature rows of one slot chunk).
pub const SCAN_CHUNK_BYTES: usize = 4 << 20;

/// `r.read_exact_at(buf, offset)` for a chunk of whole pages of `page`
/// bytes. When the chunk read fails, its pages are read one by one and the
/// first that fails is the error: it names the page a point read of that
/// data would name (a bad sector in a 4 MiB chunk is otherwise reported at
/// the chunk's start). A chunk whose pages all read alone still fails with
/// the chunk's own error.
fn read_pages(r: &dyn ReadAt, buf: &mut [u8], offset: u64, page: usize) -> Result<(), IoError> {
    let whole = r.read_exact_at(buf, offset);
    if whole.is_ok() || buf.len() <= page {
        return whole;
    }
    for (i, chunk) in buf.chunks_mut(page).enumerate() {
        r.read_exact_at(chunk, offset + (i * page) as u64)?;
    }
    whole
}

/// One node as the scan hands it over. Ids are original (API) ids.
pub struct ScanNode<'a> {
    pub internal: u64,
    pub original: u64,
    pub neighbors: &'a [u64],
    /// Feature row in the stored dtype (`row_bytes` long; empty when dim 0).
    pub row: &'a [u8],
}

/// Sequential reader of the overflow entries, which internal-order nodes
/// consume front to back.
struct OverflowCursor<'d> {
    ds: &'d Dataset,
    chunk_pages: u64,
    buf: Vec<u8>,
    /// Overflow page number (1-based) of the first page in `buf`; pages in buf.
    first_page: u64,
    pages: u64,
    /// Next overflow entry expected.
    next: u64,
}

impl OverflowCursor<'_> {
    fn take(&mut self, node: u64, first: u64, count: u64, out: &mut Vec<u64>) -> Result<(), StoreError> {
        let l = self.ds.layout();
        let oname = self.ds.file(OVERFLOW_FILE);
        if first != self.next {
            return Err(FormatError::oob(
                self.ds.file(GRAPH_FILE),
                l.slot_offset(node) + 16,
                "overflow_first",
                first,
                format!("== {} (ranges must tile the overflow file)", self.next),
            )
            .into());
        }
        let (per, p, w) = (l.overflow_ids_per_page(), l.page_size as u64, l.id_bytes as usize);
        for e in first..first + count {
            let page_no = 1 + e / per;
            if page_no >= self.first_page + self.pages {
                let total = l.overflow_pages();
                let n = self.chunk_pages.min(total + 1 - page_no);
                self.buf.resize((n * p) as usize, 0);
                read_pages(self.ds.overflow_reader(), &mut self.buf, page_no * p, p as usize)?;
                for (i, page) in self.buf.chunks_exact(p as usize).enumerate() {
                    check_overflow_page(l, &oname, page_no + i as u64, page)?;
                }
                (self.first_page, self.pages) = (page_no, n);
            }
            let at = ((page_no - self.first_page) * p) as usize + (e % per) as usize * w;
            let id = read_id(&self.buf[at..at + w]);
            self.ds.check_overflow_id(id, page_no * p + (e % per) * w as u64)?;
            out.push(id);
        }
        self.next = first + count;
        Ok(())
    }
}

/// Call `f` for every node of `ds` in internal order, reading the files
/// sequentially in chunks of about `chunk_bytes`. Stops at the first error
/// (of the scan or of `f`).
pub fn scan<E: From<StoreError>>(
    ds: &Dataset,
    chunk_bytes: usize,
    mut f: impl FnMut(&ScanNode) -> Result<(), E>,
) -> Result<(), E> {
    let l = ds.layout();
    let gname = ds.file(GRAPH_FILE);
    let p = l.page_size as u64;
    let chunk_pages = (chunk_bytes as u64 / p).max(1);
    let k = l.slots_per_page as u64;
    let s = l.slot_bytes as usize;
    let rb = l.row_bytes() as usize;
    let order = ds.maps()?.map(|(_, order)| &order[..]);
    let orig = |i: u64| order.map_or(i, |o| o[i as usize] as u64);
    let separate = l.placement == FeaturePlacement::Separate && rb > 0;
    let crcs = if separate { Some(&ds.feature_crcs()?[..]) } else { None };
    let stride = l.feature_stride() as usize;
    let mut ov = OverflowCursor { ds, chunk_pages, buf: Vec::new(), first_page: 1, pages: 0, next: 0 };
    let (mut pages, mut feats, mut nbrs) = (Vec::new(), Vec::new(), Vec::new());
    let total_pages = l.slot_pages();
    let mut pg = 0;
    while pg < total_pages {
        let np = chunk_pages.min(total_pages - pg);
        pages.resize((np * p) as usize, 0);
        read_pages(ds.graph_reader(), &mut pages, (pg + 1) * p, p as usize).map_err(StoreError::from)?;
        let first = pg * k;
        let count = (l.num_nodes - first).min(np * k);
        if separate {
            feats.resize(count as usize * stride, 0);
            let fr = ds.features_reader().expect("separate placement has a feature file");
            read_pages(fr, &mut feats, p + first * stride as u64, p as usize).map_err(StoreError::from)?;
        }
        for i in 0..count {
            let v = first + i;
            let at = ((i / k) * p) as usize + (i % k) as usize * s;
            let bytes = &pages[at..at + s];
            let slot = decode_slot(l, v, bytes, &gname).map_err(StoreError::from)?;
            let want = orig(v);
            ds.check_slot_original(v, slot.original_id, want)?;
            nbrs.clear();
            for j in 0..slot.inline_len() {
                nbrs.push(slot.inline_id(j, l, &gname).map_err(StoreError::from)?);
            }
            if slot.overflow_len() > 0 {
                ov.take(v, slot.overflow_first, slot.overflow_len(), &mut nbrs)?;
            }
            if order.is_some() {
                nbrs.iter_mut().for_each(|u| *u = orig(*u));
            }
            let row: &[u8] = if separate {
                let r = &feats[i as usize * stride..i as usize * stride + rb];
                ds.check_feature_row(v, r, crcs.expect("loaded above"), p + v * stride as u64, 0)?;
                r
            } else {
                &slot.features[..rb.min(slot.features.len())]
            };
            f(&ScanNode { internal: v, original: want, neighbors: &nbrs, row })?;
        }
        pg += np;
    }
    Ok(())
}
