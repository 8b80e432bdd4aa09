//! `flashgnn verify`: check every byte of a dataset.
//!
//! Order (after `Dataset::open` has checked file sizes and header pages
//! against the manifest): whole-file CRC32Cs (graph.fg and overflow.fg are
//! walked page by page in that same pass: each file is read once, a
//! structure error is held until every CRC has matched); then structure — every slot (checksum, bounds, zero padding, zero page
//! slack), overflow contiguity (node v's overflow range starts where the
//! previous spilling node's ended, so ranges tile `[0, overflow_entries)`),
//! every overflow page (checksum, page number, ids < N), the degree sum
//! against `num_edges`, feature row checksums, and the side arrays (label
//! count, split ids, the relabelling maps being inverse permutations).
//! Typed datasets (format version 3) add: every `t<i>.features.fg` row
//! against its CRC in `t<i>.feature_crc.npy` (bound to the global id), every
//! slot's relation counts (zero beyond its type's incoming edge types), every
//! neighbor inside its relation's source-type range and ascending within its
//! relation, each edge type's stored count, and per-type labels and splits
//! (dtype, shape, range, labeled count).
//! The first failure is returned with file, byte offset, value and bound.

use flashgnn_format::layout::{check_overflow_page, FeaturePlacement};
use flashgnn_format::manifest::*;
use flashgnn_format::slot::{check_slot_padding, decode_slot, read_id};
use flashgnn_format::FormatError;

use crate::dataset::{Dataset, NpyArray, Result, StoreError};

/// Stored feature-row CRCs held at once while rows are checked: 4 MiB.
const VERIFY_CHUNK_BYTES: usize = 4 << 20;

#[derive(Debug, Clone, Default, PartialEq)]
pub struct VerifyReport {
    pub files: u64,
    pub bytes: u64,
    pub slots: u64,
    pub overflow_pages: u64,
    pub feature_rows: u64,
}

impl VerifyReport {
    /// The report `flashgnn verify` prints (before the mutable store's part).
    pub fn report(&self) -> serde_json::Value {
        serde_json::json!({
            "files": self.files,
            "bytes": self.bytes,
            "slots": self.slots,
            "overflow_pages": self.overflow_pages,
            "feature_rows": self.feature_rows,
        })
    }
}

/// What [`verify_scope`] reads back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Scope {
    /// Every byte of every file (`flashgnn verify`, `build --verify all`).
    All,
    /// Every file except a separate `features.fg`, whose size and header
    /// `Dataset::open` checks. The build's default: it copies those rows
    /// unchanged from the input and computes each row's CRC32C (and the
    /// whole file's) from the very bytes it hands to the write, so reading
    /// them back can only find a device fault — the scrubber's and every
    /// later read's job — while it costs a second full read of what is
    /// nearly all of an IGB-shaped dataset (docs/build.md, "Verify").
    Encoded,
}

impl Scope {
    /// Every scope, as `flashgnn build --verify` offers them.
    pub const ALL: [Scope; 2] = [Scope::Encoded, Scope::All];

    /// The `--verify` flag value.
    pub fn name(self) -> &'static str {
        match self {
            Scope::Encoded => "encoded",
            Scope::All => "all",
        }
    }
}

/// Every check of [`verify_scope`], reading every byte back.
/// `progress(done_bytes, total_bytes)` is called periodically.
pub fn verify(ds: &Dataset, progress: &mut dyn FnMut(u64, u64)) -> Result<VerifyReport> {
    verify_scope(ds, Scope::All, progress)
}

/// [`verify`] of what `scope` names.
pub fn verify_scope(ds: &Dataset, scope: Scope, progress: &mut dyn FnMut(u64, u64)) -> Result<VerifyReport> {
    let m = ds.manifest();
    let l = ds.layout();
    let mut rep = VerifyReport::default();
    let separate = l.placement == FeaturePlacement::Separate;
    // Separate feature rows read back and checked (`Scope::Encoded` skips them).
    let rows_read = separate && scope == Scope::All;
    // A typed dataset's per-type feature files are skipped alike.
    let skip = |name: &str| {
        !rows_read && separate && name == FEATURES_FILE || scope != Scope::All && typed_feature_type(ds, name).is_some()
    };
    let total: u64 = m.files.iter().filter(|(n, _)| !skip(n)).map(|(_, f)| f.bytes).sum::<u64>();

    // 1. Whole files. graph.fg and overflow.fg are checked page by page in
    // the same pass (one read of each, where the CRC pass and the structure
    // pass used to read them twice); a structure error found there is held
    // until every whole-file CRC has matched, so errors keep the order above.
    let mut pass = WholeFilePass::run(ds, rows_read, &skip, total, progress, &mut rep)?;

    // 2. Slots (checked above, in page order).
    rep.slots = pass.slots(ds)?;
    if ds.is_typed() {
        check_typed_relations(ds)?;
    }

    // 3. Overflow pages (checked above).
    rep.overflow_pages = pass.overflow_pages(ds)?;

    // 4. Separate feature rows (checked above).
    rep.feature_rows = pass.feature_rows(ds, rows_read)?;

    // 5. Side arrays: dtype and shape against the manifest (`side_array`),
    // every value in its documented range, the labeled count.
    check_side_arrays(ds)?;
    if m.reorder != "none" {
        check_node_maps(ds)?;
    }

    // 6. A drawn link split's promises (ids were checked with the side arrays).
    check_link_split(ds)?;
    progress(total, total);
    Ok(rep)
}

/// What the whole-file pass found besides the CRCs: the structure of the
/// slot, overflow and feature pages it read on the way, errors held until
/// every whole-file CRC has matched.
struct WholeFilePass {
    walk: SlotWalk,
    slot_err: Option<StoreError>,
    overflow_err: Option<StoreError>,
    rows: FeatureRows,
    feature_err: Option<StoreError>,
    slots: u64,
    slot_pages_seen: u64,
    overflow_checked: u64,
}

impl WholeFilePass {
    /// Check every file's CRC32C (but those `skip` names), counting its
    /// bytes and files into `rep`, and check the structure of what it reads.
    fn run(
        ds: &Dataset,
        rows_read: bool,
        skip: &dyn Fn(&str) -> bool,
        total: u64,
        progress: &mut dyn FnMut(u64, u64),
        rep: &mut VerifyReport,
    ) -> Result<WholeFilePass> {
        let m = ds.manifest();
        let l = ds.layout();
        let separate = l.placement == FeaturePlacement::Separate;
        let mut done = 0u64;
        let p = l.page_size as usize;
        let (slot_pages, overflow_pages) = (l.slot_pages(), l.overflow_pages());
        let mut walk = SlotWalk::start();
        let (mut slot_err, mut overflow_err) = (None, None);
        // An error opening feature_crc.npy is held like a row's, so every
        // whole-file CRC is checked first; no row is checked after one.
        let (mut rows, mut feature_err) = FeatureRows::open(ds, rows_read);
        let (mut slots, mut slot_pages_seen, mut overflow_checked) = (0u64, 0u64, 0u64);
        for name in m.files.keys().filter(|n| !skip(n)) {
            let mut count = |k| {
                done += k;
                progress(done, total);
            };
            // Page 0 is the header (checked by `Dataset::open`).
            rep.bytes += match name.as_str() {
                GRAPH_FILE => ds.check_whole_file_records(name, p, p, &mut count, &mut |pg, page| {
                    if (1..=slot_pages).contains(&pg) && slot_err.is_none() && page.len() == p {
                        slot_pages_seen += 1;
                        match check_slot_page(ds, pg - 1, page, true, &mut walk) {
                            Ok(n) => slots += n,
                            Err(e) => slot_err = Some(e),
                        }
                    }
                })?,
                OVERFLOW_FILE => ds.check_whole_file_records(name, p, p, &mut count, &mut |pg, page| {
                    if (1..=overflow_pages).contains(&pg) && overflow_err.is_none() && page.len() == p {
                        match check_overflow_data_page(ds, pg, page) {
                            Ok(()) => overflow_checked += 1,
                            Err(e) => overflow_err = Some(e),
                        }
                    }
                })?,
                FEATURES_FILE if separate => {
                    ds.check_whole_file_records(name, p, l.feature_stride() as usize, &mut count, &mut |n, row| {
                        if n >= 1 && feature_err.is_none() {
                            if let Err(e) = rows.check(ds, n - 1, row) {
                                feature_err = Some(e);
                            }
                        }
                    })?
                }
                _ if typed_feature_type(ds, name).is_some() => {
                    let t = typed_feature_type(ds, name).expect("checked");
                    let fl = ds.type_feature_layout(t).expect("a type with features").clone();
                    let types = ds.manifest().types.as_ref().expect("typed");
                    let (first, count_t) = (types.offset(t), types.node_types[t].count);
                    // The stored CRCs of this type, a window at a time.
                    let (mut win, mut win_first) = (Vec::<i64>::new(), 0u64);
                    let crcs = match ds.side_array(&flashgnn_format::types::feature_crc_file(t)) {
                        Ok(c) => Some(c),
                        Err(e) => {
                            feature_err.get_or_insert(e);
                            None
                        }
                    };
                    let mut checked = 0u64;
                    let b = ds.check_whole_file_records(
                        name,
                        p,
                        fl.feature_stride() as usize,
                        &mut count,
                        &mut |n, row| {
                            if n >= 1 && feature_err.is_none() {
                                if let Some(c) = &crcs {
                                    let local = n - 1;
                                    if local >= count_t {
                                        // Packed rows end on a whole sector: the tail is zeros.
                                        let tail = fl.features_file_bytes() - fl.page_size as u64;
                                        let at = local * fl.feature_stride();
                                        let bad = row.iter().position(|&b| b != 0);
                                        if at >= tail || bad.is_some() {
                                            feature_err = Some(
                                                FormatError::oob(
                                                    ds.file(name),
                                                    fl.page_size as u64 + at + bad.unwrap_or(0) as u64,
                                                    if at >= tail { "feature row" } else { "tail padding byte" },
                                                    if at >= tail { local } else { row[bad.unwrap_or(0)] as u64 },
                                                    if at >= tail { format!("< count {count_t}") } else { "0".into() },
                                                )
                                                .into(),
                                            );
                                        }
                                        return;
                                    }
                                    if local < win_first || local >= win_first + win.len() as u64 {
                                        let k = ((VERIFY_CHUNK_BYTES / 8) as u64).min(count_t - local);
                                        match c.read_i64(local, k) {
                                            Ok(w) => (win, win_first) = (w, local),
                                            Err(e) => {
                                                feature_err = Some(e);
                                                return;
                                            }
                                        }
                                    }
                                    let stored = win[(local - win_first) as usize] as u32;
                                    match check_typed_feature_row(ds, t, &fl, first + local, local, row, stored) {
                                        Ok(()) => checked += 1,
                                        Err(e) => feature_err = Some(e),
                                    }
                                }
                            }
                        },
                    )?;
                    if feature_err.is_none() && crcs.is_some() && checked != count_t {
                        feature_err = Some(
                            FormatError::oob(
                                ds.file(name),
                                0,
                                "feature rows read",
                                checked,
                                format!("== count {count_t}"),
                            )
                            .into(),
                        );
                    }
                    rows.checked += checked;
                    b
                }
                _ => ds.check_whole_file(name, &mut count)?,
            };
            rep.files += 1;
        }
        Ok(WholeFilePass { walk, slot_err, overflow_err, rows, feature_err, slots, slot_pages_seen, overflow_checked })
    }

    /// The slots the pass checked: its first slot error, then every slot
    /// page read, the degree sum and the overflow entries referenced.
    /// Returns the slots checked.
    fn slots(&mut self, ds: &Dataset) -> Result<u64> {
        let l = ds.layout();
        let gname = ds.file(GRAPH_FILE);
        let slot_pages = l.slot_pages();
        let (slot_pages_seen, walk) = (self.slot_pages_seen, &self.walk);
        if let Some(e) = self.slot_err.take() {
            return Err(e);
        }
        // Every page the layout promises was there (`Dataset::open` checked the
        // sizes; this holds against a file changed since).
        if slot_pages_seen != slot_pages {
            return Err(
                FormatError::oob(&gname, 0, "slot pages read", slot_pages_seen, format!("== {slot_pages}")).into()
            );
        }
        let (degree_sum, next_overflow) = (walk.degree_sum, walk.next_overflow.unwrap_or(0));
        if degree_sum != l.num_edges {
            return Err(FormatError::oob(
                &gname,
                0,
                "sum of degrees",
                degree_sum,
                format!("== num_edges {}", l.num_edges),
            )
            .into());
        }
        if next_overflow != l.overflow_entries {
            return Err(FormatError::oob(
                &gname,
                0,
                "overflow entries referenced",
                next_overflow,
                format!("== overflow_entries {}", l.overflow_entries),
            )
            .into());
        }
        Ok(self.slots)
    }

    /// The overflow pages the pass checked: its first error, then every
    /// page read. Returns the pages checked.
    fn overflow_pages(&mut self, ds: &Dataset) -> Result<u64> {
        let overflow_pages = ds.layout().overflow_pages();
        let overflow_checked = self.overflow_checked;
        if let Some(e) = self.overflow_err.take() {
            return Err(e);
        }
        if overflow_checked != overflow_pages {
            let oname = ds.file(OVERFLOW_FILE);
            return Err(FormatError::oob(
                oname,
                0,
                "overflow pages read",
                overflow_checked,
                format!("== {overflow_pages}"),
            )
            .into());
        }
        Ok(overflow_checked)
    }

    /// The separate feature rows the pass checked: its first error, then
    /// every row read (when `rows_read`). Returns the rows checked.
    fn feature_rows(&mut self, ds: &Dataset, rows_read: bool) -> Result<u64> {
        let l = ds.layout();
        let rows = &self.rows;
        if let Some(e) = self.feature_err.take() {
            return Err(e);
        }
        if rows_read && rows.checked != l.num_nodes {
            return Err(FormatError::oob(
                ds.file(FEATURES_FILE),
                0,
                "feature rows read",
                rows.checked,
                format!("== num_nodes {}", l.num_nodes),
            )
            .into());
        }
        Ok(rows.checked)
    }
}

/// Every side array: dtype and shape against the manifest, every value in
/// its documented range, the labeled count.
fn check_side_arrays(ds: &Dataset) -> Result<()> {
    let m = ds.manifest();
    for name in m.files.keys() {
        if ds.side_spec(name).is_some() {
            // Chunk by chunk, counting what the labels check needs: a link
            // split's training positives are 8 B per edge a file (7.5 GiB
            // each at 10^9 edges), which read whole made verify's, and the
            // build's, peak RSS twice the file.
            let a = ds.side_array(name)?;
            let mut labeled = 0u64;
            a.for_each_chunk(|first, v| {
                ds.check_side_chunk(name, a.header.data_offset, first, v)?;
                labeled += v.iter().filter(|&&x| x >= 0).count() as u64;
                Ok(())
            })?;
            if name == LABELS_FILE {
                let want = m.labels.as_ref().map_or(0, |l| l.labeled);
                if labeled != want {
                    return Err(FormatError::oob(
                        ds.file(LABELS_FILE),
                        0,
                        "labeled count",
                        labeled,
                        format!("== labels.labeled {want} in manifest.json"),
                    )
                    .into());
                }
            }
            // A typed dataset's per-type labels: the labeled count of that type.
            if let Some(types) = &m.types {
                for (t, nt) in types.node_types.iter().enumerate() {
                    if *name != flashgnn_format::types::labels_file(t) {
                        continue;
                    }
                    let want = nt.labels.as_ref().map_or(0, |l| l.labeled);
                    if labeled != want {
                        return Err(FormatError::oob(
                            ds.file(name),
                            0,
                            "labeled count",
                            labeled,
                            format!("== types.node_types[{t}].labels.labeled {want} ({:?}) in manifest.json", nt.name),
                        )
                        .into());
                    }
                }
            }
        }
    }
    Ok(())
}

/// The relabelling maps: node_order.npy and node_index.npy inverse
/// permutations, and the original ids in a sample of slot headers.
fn check_node_maps(ds: &Dataset) -> Result<()> {
    let l = ds.layout();
    let gname = ds.file(GRAPH_FILE);
    let order_arr = ds.side_array(NODE_ORDER_FILE)?;
    let order = order_arr.read_all_i64()?;
    let index = ds.side_array(NODE_INDEX_FILE)?.read_all_i64()?;
    for (i, &o) in order.iter().enumerate() {
        let ok = o >= 0 && (o as u64) < l.num_nodes && index.get(o as usize) == Some(&(i as i64));
        if !ok {
            return Err(FormatError::oob(
                ds.file(NODE_ORDER_FILE),
                order_arr.header.data_offset + 8 * i as u64,
                "node_order entry",
                o as u64,
                "a permutation inverse to node_index.npy",
            )
            .into());
        }
    }
    // Slot headers must carry the original ids of the map.
    for (i, &o) in order.iter().enumerate().step_by(((l.num_nodes / 1024).max(1)) as usize) {
        let buf = ds.read_slot(i as u64)?;
        let slot = decode_slot(l, i as u64, &buf, &gname)?;
        if slot.original_id != o as u64 {
            return Err(FormatError::oob(
                &gname,
                l.slot_offset(i as u64) + 8,
                "original id",
                slot.original_id,
                format!("== {o} from node_order.npy"),
            )
            .into());
        }
    }
    Ok(())
}

/// The rows of a separate `features.fg` checked against `feature_crc.npy`
/// as the whole-file pass reads them, the stored CRCs read a window at a
/// time (4 B per node is too much to hold for a billion-node graph).
struct FeatureRows {
    /// `feature_crc.npy`; None without separate features (or when it could
    /// not be opened: see [`FeatureRows::open`]).
    crcs: Option<NpyArray>,
    window: Vec<i64>,
    window_first: u64,
    checked: u64,
}

impl FeatureRows {
    /// The checker, and the error opening `feature_crc.npy` for the caller
    /// to hold (`side_array` checks its dtype and its length, `num_nodes`).
    /// Opened only when the rows are read.
    fn open(ds: &Dataset, rows_read: bool) -> (FeatureRows, Option<crate::dataset::StoreError>) {
        let (crcs, err) = match rows_read.then(|| ds.side_array(FEATURE_CRC_FILE)) {
            Some(Ok(a)) => (Some(a), None),
            Some(Err(e)) => (None, Some(e)),
            None => (None, None),
        };
        (FeatureRows { crcs, window: Vec::new(), window_first: 0, checked: 0 }, err)
    }

    /// Check row `v` (`bytes`: its stride of `features.fg`).
    fn check(&mut self, ds: &Dataset, v: u64, bytes: &[u8]) -> Result<()> {
        let n = ds.layout().num_nodes;
        let Some(crcs) = self.crcs.as_ref() else { return Ok(()) };
        if v >= n || bytes.len() != ds.layout().feature_stride() as usize {
            // `Dataset::open` checked the size; this holds against a file
            // changed since.
            return Err(
                FormatError::oob(ds.file(FEATURES_FILE), 0, "feature row", v, format!("< num_nodes {n}")).into()
            );
        }
        let end = self.window_first + self.window.len() as u64;
        if v < self.window_first || v >= end {
            let k = ((VERIFY_CHUNK_BYTES / 8) as u64).min(n - v);
            self.window = crcs.read_i64(v, k)?;
            self.window_first = v;
        }
        check_feature_row_bytes(ds, v, bytes, self.window[(v - self.window_first) as usize] as u32)?;
        self.checked += 1;
        Ok(())
    }
}

/// Running state of a walk over the slot pages in order: where the next
/// spilling node's overflow range must start (ranges tile the overflow
/// file) and the degrees seen so far (their sum must be `num_edges`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct SlotWalk {
    /// None: not known (the scrubber, after a damaged page, takes the next
    /// spilling slot's `overflow_first` as given instead of reporting every
    /// later page).
    pub next_overflow: Option<u64>,
    pub degree_sum: u64,
}

impl SlotWalk {
    pub fn start() -> SlotWalk {
        SlotWalk { next_overflow: Some(0), degree_sum: 0 }
    }
}

/// Check slot page `pg` (0-based; page `pg + 1` of `graph.fg`): every slot's
/// checksum, header bounds and zero padding, its inline ids, its overflow
/// range against `walk`, its original id against the id maps (when
/// `check_original`), and zero page slack. Returns the slots checked; the
/// first failure is the error (file, byte offset, value, bound).
pub fn check_slot_page(ds: &Dataset, pg: u64, page: &[u8], check_original: bool, walk: &mut SlotWalk) -> Result<u64> {
    let l = ds.layout();
    let gname = ds.file(GRAPH_FILE);
    let s = l.slot_bytes as usize;
    let k = l.slots_per_page as u64;
    let first = pg * k;
    let count = (l.num_nodes - first).min(k);
    for i in 0..count {
        let v = first + i;
        let bytes = &page[i as usize * s..(i as usize + 1) * s];
        let slot = decode_slot(l, v, bytes, &gname)?;
        check_slot_padding(l, &slot, bytes, &gname)?;
        slot.inline_ids(l, &gname)?;
        if slot.overflow_len() > 0 {
            let want = walk.next_overflow.unwrap_or(slot.overflow_first);
            if slot.overflow_first != want {
                return Err(FormatError::oob(
                    &gname,
                    l.slot_offset(v) + 16,
                    "overflow_first",
                    slot.overflow_first,
                    format!("== {want} (ranges must tile the overflow file)"),
                )
                .into());
            }
            walk.next_overflow = Some(want + slot.overflow_len());
        }
        if check_original {
            ds.check_slot_original(v, slot.original_id, ds.original_id(v)?)?;
        }
        walk.degree_sum += slot.degree as u64;
    }
    let used = count as usize * s;
    if let Some(j) = page[used..].iter().position(|b| *b != 0) {
        return Err(FormatError::oob(
            &gname,
            (pg + 1) * l.page_size as u64 + (used + j) as u64,
            "page slack byte",
            page[used + j] as u64,
            "0",
        )
        .into());
    }
    Ok(count)
}

/// Check overflow page `pg` (1-based page of `overflow.fg`): trailer
/// checksum and page number, every id < N, zero padding after the last entry.
pub fn check_overflow_data_page(ds: &Dataset, pg: u64, page: &[u8]) -> Result<()> {
    let l = ds.layout();
    let oname = ds.file(OVERFLOW_FILE);
    let (p, per, w) = (l.page_size as usize, l.overflow_ids_per_page(), l.id_bytes as usize);
    check_overflow_page(l, &oname, pg, page)?;
    let base = (pg - 1) * per;
    let n_here = (l.overflow_entries - base).min(per) as usize;
    for j in 0..n_here {
        let id = read_id(&page[j * w..(j + 1) * w]);
        ds.check_overflow_id(id, pg * p as u64 + (j * w) as u64)?;
    }
    if let Some(j) = page[n_here * w..p - 8].iter().position(|b| *b != 0) {
        return Err(FormatError::oob(
            &oname,
            pg * p as u64 + (n_here * w + j) as u64,
            "overflow padding byte",
            page[n_here * w + j] as u64,
            "0",
        )
        .into());
    }
    Ok(())
}

/// Check the stored row of node `v` in `features.fg` (`bytes`: one stride,
/// the row and its padding) against its CRC32C `stored` from
/// `feature_crc.npy`, and its padding for zeros.
pub fn check_feature_row_bytes(ds: &Dataset, v: u64, bytes: &[u8], stored: u32) -> Result<()> {
    let l = ds.layout();
    let rb = l.row_bytes() as usize;
    let offset = l.page_size as u64 + v * l.feature_stride();
    ds.check_feature_row(v, &bytes[..rb], &[stored], offset, v)?;
    if let Some(j) = bytes[rb..].iter().position(|b| *b != 0) {
        return Err(FormatError::oob(
            ds.file(FEATURES_FILE),
            offset + (rb + j) as u64,
            "row padding byte",
            bytes[rb + j] as u64,
            "0",
        )
        .into());
    }
    Ok(())
}

/// The node type whose `t<i>.features.fg` file `name` is (typed datasets).
pub fn typed_feature_type(ds: &Dataset, name: &str) -> Option<usize> {
    let t = ds.manifest().types.as_ref()?;
    (0..t.node_types.len())
        .find(|&i| ds.type_feature_layout(i).is_some() && flashgnn_format::types::features_file(i) == name)
}

/// Check row `local` of node type `t` (`bytes`: its stride of
/// `t<i>.features.fg`) against its stored CRC32C, bound to the global id,
/// and its padding for zeros.
pub fn check_typed_feature_row(
    ds: &Dataset,
    t: usize,
    fl: &flashgnn_format::Layout,
    global: u64,
    local: u64,
    bytes: &[u8],
    stored: u32,
) -> Result<()> {
    let name = flashgnn_format::types::features_file(t);
    let file = ds.file(&name);
    let rb = fl.row_bytes() as usize;
    let offset = fl.page_size as u64 + local * fl.feature_stride();
    if bytes.len() != fl.feature_stride() as usize {
        return Err(FormatError::oob(
            file,
            offset,
            "feature row bytes",
            bytes.len() as u64,
            format!("== stride {}", fl.feature_stride()),
        )
        .into());
    }
    let computed = fl.crc(global, &bytes[..rb]);
    if computed != stored {
        let tname = ds.manifest().types.as_ref().map_or(String::new(), |x| x.node_types[t].name.clone());
        return Err(FormatError::Checksum {
            file,
            offset,
            what: format!("feature row of node {global} (type {tname:?}, local id {local})"),
            stored,
            computed,
        }
        .into());
    }
    if let Some(j) = bytes[rb..].iter().position(|b| *b != 0) {
        return Err(
            FormatError::oob(file, offset + (rb + j) as u64, "row padding byte", bytes[rb + j] as u64, "0").into()
        );
    }
    Ok(())
}

/// Typed datasets: every slot's relation counts (zero beyond its type's
/// incoming edge types; their sum, the degree, is checked on decode), every
/// neighbor inside its relation's source-type range and ascending within
/// its relation, each slot's edge base per relation (version 4) equal to
/// the entries of that edge type in the slots before it, and each edge
/// type's stored count against the manifest. Errors name the file (graph.fg or overflow.fg), the byte offset of the
/// count or id, the value and the bound.
pub fn check_typed_relations(ds: &Dataset) -> Result<()> {
    let Some(types) = ds.manifest().types.as_ref() else { return Ok(()) };
    let l = ds.layout();
    let gname = ds.file(GRAPH_FILE);
    let oname = ds.file(OVERFLOW_FILE);
    let offsets = types.offsets();
    let in_rels: Vec<Vec<usize>> = (0..types.node_types.len()).map(|t| types.in_relations(t)).collect();
    let mut stored = vec![0u64; types.edge_types.len()];
    let per = l.overflow_ids_per_page();
    let (p, w) = (l.page_size as u64, l.id_bytes as u64);
    // The slot pages in order, a window at a time (sequential reads; the
    // overflow ranges of spilling nodes tile overflow.fg in the same order).
    let k = l.slots_per_page as u64;
    let window_pages = (VERIFY_CHUNK_BYTES as u64 / p).max(1);
    let mut window: Vec<u8> = Vec::new();
    let mut window_first_page = u64::MAX;
    for (t, rels) in in_rels.iter().enumerate() {
        for v in offsets[t]..offsets[t + 1] {
            let pg = v / k;
            if pg < window_first_page || pg >= window_first_page + window_pages {
                let pages = window_pages.min(l.slot_pages() - pg);
                window.resize((pages * p) as usize, 0);
                ds.graph_reader().read_exact_at(&mut window, (1 + pg) * p)?;
                window_first_page = pg;
            }
            let at = ((pg - window_first_page) * p + (v % k) * l.slot_bytes as u64) as usize;
            let buf = &window[at..at + l.slot_bytes as usize];
            let slot = decode_slot(l, v, buf, &gname)?;
            let count_at = |j: usize| l.slot_offset(v) + 24 + 4 * j as u64;
            let base_at = |j: usize| l.slot_offset(v) + l.edge_bases_offset() as u64 + 8 * j as u64;
            for j in rels.len()..l.rel_counts as usize {
                if let Some(b) = slot.edge_base(j).filter(|&b| b != 0) {
                    return Err(FormatError::oob(
                        &gname,
                        base_at(j),
                        "edge base",
                        b,
                        format!(
                            "0 (node {v} of type {:?} has {} incoming edge types)",
                            types.node_types[t].name,
                            rels.len()
                        ),
                    )
                    .into());
                }
                if slot.rel_count(j) != 0 {
                    return Err(FormatError::oob(
                        &gname,
                        count_at(j),
                        "relation count",
                        slot.rel_count(j) as u64,
                        format!(
                            "0 (node {v} of type {:?} has {} incoming edge types)",
                            types.node_types[t].name,
                            rels.len()
                        ),
                    )
                    .into());
                }
            }
            let mut ids = slot.inline_ids(l, &gname)?;
            if slot.overflow_len() > 0 {
                ids.extend(ds.overflow_range(slot.overflow_first, slot.overflow_len())?);
            }
            let inline = slot.inline_len() as u64;
            let place = |i: u64| -> (String, u64) {
                if i < inline {
                    (gname.clone(), l.slot_offset(v) + l.inline_ids_offset() as u64 + i * w)
                } else {
                    let e = slot.overflow_first + (i - inline);
                    (oname.clone(), (1 + e / per) * p + (e % per) * w)
                }
            };
            let mut at = 0u64;
            for (j, &r) in rels.iter().enumerate() {
                let c = slot.rel_count(j) as u64;
                let e = &types.edge_types[r];
                if let Some(b) = slot.edge_base(j).filter(|&b| b != stored[r]) {
                    return Err(FormatError::oob(
                        &gname,
                        base_at(j),
                        "edge base",
                        b,
                        format!("== {} (entries of {} in the slots before node {v})", stored[r], e.key()),
                    )
                    .into());
                }
                let s = types.node_type_index(&e.src).expect("checked on open");
                let (lo, hi) = (offsets[s], offsets[s + 1]);
                let mut prev = None;
                for i in at..at + c {
                    let id = ids[i as usize];
                    if id < lo || id >= hi {
                        let (f, off) = place(i);
                        return Err(FormatError::oob(
                            f,
                            off,
                            "neighbor id",
                            id,
                            format!("in [{lo}, {hi}) (node type {:?}; node {v}'s relation {})", e.src, e.key()),
                        )
                        .into());
                    }
                    if prev.is_some_and(|q| id < q) {
                        let (f, off) = place(i);
                        return Err(FormatError::oob(
                            f,
                            off,
                            "neighbor id",
                            id,
                            format!(">= {} (ascending within node {v}'s relation {})", prev.unwrap(), e.key()),
                        )
                        .into());
                    }
                    prev = Some(id);
                }
                stored[r] += c;
                at += c;
            }
        }
    }
    for (r, e) in types.edge_types.iter().enumerate() {
        if stored[r] != e.num_edges {
            return Err(FormatError::oob(
                &gname,
                0,
                "stored neighbors of an edge type",
                stored[r],
                format!("== num_edges {} of {} in manifest.json", e.num_edges, e.key()),
            )
            .into());
        }
    }
    Ok(())
}

/// Most pairs [`check_link_split`] holds to check a drawn split's
/// negatives against each other and every positive: 2^25 x 8 B = 256 MiB.
pub const LINK_VERIFY_PAIRS_MAX: u64 = 1 << 25;
/// Most held-out positives and negatives [`check_link_split`] looks up in
/// the graph (one slot read each, both endpoints: 2 x 2^20 reads at most).
pub const LINK_VERIFY_LOOKUPS_MAX: u64 = 1 << 20;

/// A typed dataset's link split: where its local ids live and which stored
/// relations could leak it.
struct TypedLink {
    /// The split's edge type, its source and destination types' offsets.
    rel: usize,
    src_offset: u64,
    dst_offset: u64,
    /// The relation holding its reverses: itself within one node type, else
    /// `rev_<rel>` from the destination type back when stored.
    rev: Option<usize>,
    /// Added to destination ids in the pair keys (the source type's count
    /// between two types), so a source and a destination never collide.
    shift: u64,
}

impl TypedLink {
    fn of(ds: &Dataset) -> Option<TypedLink> {
        let (t, rel) = (ds.manifest().types.as_ref()?, ds.link_edge_type()?);
        let e = &t.edge_types[rel];
        let (s, d) = (t.node_type_index(&e.src)?, t.node_type_index(&e.dst)?);
        let (rev, shift) = if s == d {
            (Some(rel), 0)
        } else {
            (t.edge_type_index(&e.dst, &format!("rev_{}", e.rel), &e.src), t.node_types[s].count)
        };
        Some(TypedLink { rel, src_offset: t.offset(s), dst_offset: t.offset(d), rev, shift })
    }
}

/// A drawn (`origin: "random"`) link split: every negative pair distinct
/// across validation and test and none a positive of any split; no
/// held-out positive and no negative in the message-passing graph in
/// either direction (a typed split: in its edge type, or the reverse one).
/// Skipped above the limits (the ids are still checked).
fn check_link_split(ds: &Dataset) -> Result<()> {
    let Some(ls) = ds.manifest().link_split.clone() else { return Ok(()) };
    if ls.origin != "random" {
        return Ok(());
    }
    let total: u64 = ls.splits.values().map(|p| p.positives + p.positives * p.neg_per_positive).sum();
    if total > LINK_VERIFY_PAIRS_MAX {
        return Ok(());
    }
    let typed = TypedLink::of(ds);
    let shift = typed.as_ref().map_or(0, |t| t.shift);
    // Unordered pair keys (ids checked in range with the side arrays);
    // `pair` gives a key's (source, destination) back in the files' ids.
    let key = |u: i64, v: i64| {
        let (u, v) = (u as u64, v as u64 + shift);
        u.min(v) << 32 | u.max(v)
    };
    let pair = |k: u64| (k >> 32, (k & 0xffff_ffff) - shift);
    // Byte offset of value `i` of a link file, for the messages: its
    // `.npy` header's length (128 B as written; read back, not assumed).
    let value_offset = |file: &str, i: usize| -> u64 {
        use std::io::Read;
        let mut head = Vec::new();
        let data = std::fs::File::open(ds.file(file))
            .and_then(|f| f.take(1 << 16).read_to_end(&mut head))
            .ok()
            .and_then(|_| flashgnn_format::npy::parse_header(file, &head).ok())
            .map_or(0, |h| h.data_offset);
        data + 8 * i as u64
    };
    let mut positives = Vec::new();
    let mut negatives: Vec<(u64, &'static str, usize)> = Vec::new();
    let mut lookups: Vec<(i64, i64, String, usize)> = Vec::new();
    let held_out_train = ls.disjoint_train_ratio > 0.0;
    for name in LINK_SPLITS {
        if !ls.splits.contains_key(name) {
            continue;
        }
        let s = ds.link_split(name)?;
        for (i, (&u, &v)) in s.src.iter().zip(&s.dst).enumerate() {
            positives.push(key(u, v));
            if name != "train" || held_out_train {
                lookups.push((u, v, link_file(name, "src"), i));
            }
        }
        if let Some(neg) = &s.neg {
            let k = s.k.max(1) as usize;
            for (j, &w) in neg.iter().enumerate() {
                let u = s.src[j / k];
                negatives.push((key(u, w), name, j));
                lookups.push((u, w, link_file(name, "neg"), j));
            }
        }
    }
    positives.sort_unstable();
    negatives.sort_unstable();
    for w in negatives.windows(2) {
        if w[0].0 == w[1].0 {
            let f = link_file(w[1].1, "neg");
            return Err(FormatError::invalid(
                ds.file(&f),
                format!(
                    "byte offset {}: negative {} repeats the pair ({}, {}) of {} negative {}: negatives must be \
                     distinct",
                    value_offset(&f, w[1].2),
                    w[1].2,
                    pair(w[1].0).0,
                    pair(w[1].0).1,
                    w[0].1,
                    w[0].2
                ),
            )
            .into());
        }
    }
    for &(k, name, j) in &negatives {
        if positives.binary_search(&k).is_ok() {
            let f = link_file(name, "neg");
            return Err(FormatError::invalid(
                ds.file(&f),
                format!(
                    "byte offset {}: negative {j} is the pair ({}, {}), a positive edge",
                    value_offset(&f, j),
                    pair(k).0,
                    pair(k).1
                ),
            )
            .into());
        }
    }
    if lookups.len() as u64 > LINK_VERIFY_LOOKUPS_MAX {
        return Ok(());
    }
    let types = ds.manifest().types.clone();
    for (u, v, file, i) in lookups {
        // (edge `a -> b` stored?, its words) for both directions of the pair.
        let found: Option<String> = match &typed {
            None => [(u, v), (v, u)]
                .into_iter()
                .find_map(|(a, b)| match ds.neighbors(b) {
                    Ok(n) => n.contains(&(a as u64)).then(|| Ok(format!("the edge {a} -> {b}"))),
                    Err(e) => Some(Err(e)),
                })
                .transpose()?,
            Some(t) => {
                let (gu, gv) = (t.src_offset + u as u64, t.dst_offset + v as u64);
                let key = |r: usize| types.as_ref().map_or(String::new(), |x| x.edge_types[r].key());
                let mut hit = None;
                if ds.relation_neighbors(gv, t.rel)?.contains(&gu) {
                    hit = Some(format!("the edge {u} -> {v} of edge type {}", key(t.rel)));
                } else if let Some(r) = t.rev {
                    if ds.relation_neighbors(gu, r)?.contains(&gv) {
                        hit = Some(format!("the edge {v} -> {u} of edge type {}", key(r)));
                    }
                }
                hit
            }
        };
        if let Some(edge) = found {
            let what = if file.ends_with("_neg.npy") { "negative" } else { "positive" };
            return Err(FormatError::invalid(
                ds.file(&file),
                format!(
                    "byte offset {}: {what} {i} ({u}, {v}): {edge} is in the message-passing graph ({GRAPH_FILE}); a \
                     held-out or negative pair must not be",
                    value_offset(&file, i)
                ),
            )
            .into());
        }
    }
    Ok(())
}
