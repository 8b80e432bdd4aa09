//! [`Dataset`]: an opened, validated dataset directory.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use flashgnn_format::layout::{check_overflow_page, header_mismatch, FeaturePlacement};
use flashgnn_format::manifest::*;
use flashgnn_format::npy::{parse_header, NpyHeader};
use flashgnn_format::slot::{decode_slot, read_id};
use flashgnn_format::{Dtype, FeatureHeader, FormatError, GraphHeader, Layout, Manifest, OverflowHeader};
use flashgnn_io::{FileReader, IoError, ReadAt};

use crate::shared::{self, SideKey};

/// A relabelled dataset's maps: original -> internal, internal -> original.
pub type Maps = (Arc<[u32]>, Arc<[u32]>);

/// Elements per read when a side array is loaded or checked whole: 1 Mi
/// elements = 8 MiB of int64 (the only transient besides the result; a
/// whole-array read would add 8 B/node: 537 MB at 67 M nodes).
const SIDE_CHUNK_ELEMS: u64 = 1 << 20;

#[derive(Debug, thiserror::Error)]
pub enum StoreError {
    #[error(transparent)]
    Format(#[from] FormatError),
    #[error(transparent)]
    Io(#[from] IoError),
    /// The path is not a dataset at all.
    #[error("{0}")]
    NotADataset(String),
    /// A caller asked for something that does not exist (id, split).
    #[error("{0}")]
    BadRequest(String),
}

pub type Result<T, E = StoreError> = std::result::Result<T, E>;

/// A side array (`.npy`) opened for positional reads.
pub struct NpyArray {
    pub reader: FileReader,
    pub header: NpyHeader,
    pub name: String,
}

impl NpyArray {
    pub fn open(path: &Path, name: &str) -> Result<NpyArray> {
        let reader = FileReader::open(path)?;
        let mut head = vec![0u8; (reader.len() as usize).min(4096)];
        reader.read_exact_at(&mut head, 0)?;
        let header = parse_header(name, &head)?;
        let need = header.data_offset + header.data_bytes().unwrap_or(u64::MAX);
        if reader.len() != need {
            return Err(FormatError::Truncated {
                file: name.into(),
                offset: reader.len(),
                needed: need,
                available: reader.len(),
            }
            .into());
        }
        Ok(NpyArray { reader, header, name: name.into() })
    }
    pub fn len(&self) -> u64 {
        self.header.shape.first().copied().unwrap_or(0)
    }
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }
    /// Read elements [start, start+count) as i64 (integer arrays only).
    pub fn read_i64(&self, start: u64, count: u64) -> Result<Vec<i64>> {
        let s = self.header.dtype.size() as u64;
        let mut buf = vec![0u8; (count * s) as usize];
        self.reader.read_exact_at(&mut buf, self.header.data_offset + start * s)?;
        Ok((0..count as usize)
            .map(|i| flashgnn_format::dtype::read_int(self.header.dtype, &buf, i).unwrap_or(0) as i64)
            .collect())
    }
    pub fn read_all_i64(&self) -> Result<Vec<i64>> {
        self.read_i64(0, self.len())
    }

    /// Call `f(first, values)` on consecutive chunks of at most
    /// [`SIDE_CHUNK_ELEMS`] elements (as i64), `first` being the index of
    /// `values[0]`; stops at the first error.
    pub fn for_each_chunk(&self, mut f: impl FnMut(u64, &[i64]) -> Result<()>) -> Result<()> {
        let n = self.len();
        let mut first = 0;
        while first < n {
            let k = SIDE_CHUNK_ELEMS.min(n - first);
            f(first, &self.read_i64(first, k)?)?;
            first += k;
        }
        Ok(())
    }

    /// Every element, converted (and checked) by `f(index, value)`, in one
    /// exactly-sized shared slice. Read chunk by chunk, and collected from an
    /// exact-length iterator (`Range::map` is `TrustedLen`), which std
    /// documents as one allocation for `Arc<[T]>`: the result is the only
    /// per-element memory, with no `Vec<i64>` of the whole file nor a `Vec`
    /// copied into the `Arc`.
    pub fn collect_shared<T: Default>(&self, mut f: impl FnMut(u64, i64) -> Result<T>) -> Result<Arc<[T]>> {
        let n = usize::try_from(self.len()).map_err(|_| {
            FormatError::invalid(&self.name, format!("{} elements do not fit this machine's memory", self.len()))
        })?;
        let (mut chunk, mut first, mut err): (Vec<i64>, u64, Option<StoreError>) = (Vec::new(), 0, None);
        let out: Arc<[T]> = (0..n)
            .map(|i| {
                let i = i as u64;
                if err.is_some() {
                    return T::default();
                }
                if i >= first + chunk.len() as u64 {
                    first = i;
                    match self.read_i64(i, SIDE_CHUNK_ELEMS.min(n as u64 - i)) {
                        Ok(v) => chunk = v,
                        Err(e) => {
                            err = Some(e);
                            return T::default();
                        }
                    }
                }
                f(i, chunk[(i - first) as usize]).unwrap_or_else(|e| {
                    err = Some(e);
                    T::default()
                })
            })
            .collect();
        match err {
            Some(e) => Err(e),
            None => Ok(out),
        }
    }
}

/// Drops a side array's pages from the page cache when it goes out of scope
/// (after a whole load, or its failure): see [`FileReader::drop_cached`].
struct DropCached<'a>(&'a NpyArray);

impl Drop for DropCached<'_> {
    fn drop(&mut self) {
        self.0.reader.drop_cached();
    }
}

/// What a side array must be: see [`Dataset::side_spec`].
#[derive(Debug, Clone)]
pub struct SideSpec {
    pub dtype: Dtype,
    /// Elements (the array is 1-D).
    pub len: u64,
    /// Values in [lo, hi); None: any value of the dtype.
    pub range: Option<(i128, i128)>,
    /// What one value is ("label", "split id", "node id"), for errors.
    pub what: &'static str,
    /// The range in words, for errors.
    pub bound: String,
}

/// One link-prediction split as [`Dataset::link_split`] reads it (original
/// ids; a typed dataset's: local ids of its edge type's source and
/// destination types).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct LinkSplit {
    /// Positive edges `src[i] -> dst[i]`.
    pub src: Vec<i64>,
    pub dst: Vec<i64>,
    /// `k` negative destinations per positive, row-major `[src.len(), k]`
    /// (each paired with the positive's source); None when the split has none.
    pub neg: Option<Vec<i64>>,
    pub k: u64,
    /// Free negative pairs (sources, destinations), e.g. OGB's `edge_neg`.
    pub neg_pairs: Option<(Vec<i64>, Vec<i64>)>,
}

pub struct Dataset {
    root: PathBuf,
    manifest: Manifest,
    layout: Layout,
    graph: Box<dyn ReadAt>,
    overflow: Box<dyn ReadAt>,
    features: Option<Box<dyn ReadAt>>,
    /// Typed datasets (format version 3): the node and edge types, and per
    /// node type its feature file (`t<i>.features.fg`) and layout.
    types: Option<flashgnn_format::types::TypeTable>,
    type_features: Vec<Option<(Layout, Box<dyn ReadAt>)>>,
    /// What this dataset's side arrays are shared under ([`crate::shared`]).
    key: SideKey,
    /// original -> internal and internal -> original (relabelled datasets only).
    maps: OnceLock<Result<Maps, String>>,
    crcs: OnceLock<Result<Arc<[u32]>, String>>,
    /// Labels as i32 (4 B/node), loaded on first [`Dataset::labels_shared`].
    labels: OnceLock<Arc<[i32]>>,
    /// Side arrays whose whole-file CRC32C has been checked in this process.
    side_checked: std::sync::Mutex<std::collections::BTreeSet<String>>,
}

fn file_name(root: &Path, f: &str) -> String {
    root.join(f).display().to_string()
}

impl Dataset {
    /// Open and validate a dataset directory.
    pub fn open(root: impl AsRef<Path>) -> Result<Dataset> {
        let root = root.as_ref().to_path_buf();
        let mpath = root.join(MANIFEST_FILE);
        if !root.is_dir() {
            return Err(StoreError::NotADataset(format!("{}: no such dataset directory", root.display())));
        }
        let bytes = flashgnn_io::read_regular(&mpath)
            .map_err(|e| StoreError::NotADataset(format!("{}: not a flashgnn dataset ({e})", root.display())))?;
        let mname = mpath.display().to_string();
        let text = String::from_utf8(bytes).map_err(|e| {
            FormatError::invalid(
                &mname,
                format!("byte offset {}: not UTF-8 text (corrupt manifest)", e.utf8_error().valid_up_to()),
            )
        })?;
        let manifest = Manifest::from_json(&mname, &text)?;
        let layout = manifest.layout(&mname)?;
        for (name, entry) in &manifest.files {
            if name.contains('/') || name.contains("..") {
                return Err(
                    FormatError::invalid(&mname, format!("file name {name:?} escapes the dataset directory")).into()
                );
            }
            let p = root.join(name);
            let striped = root.join(flashgnn_io::stripe::STRIPES_FILE).exists();
            if !p.exists() && !striped {
                return Err(
                    FormatError::invalid(p.display().to_string(), "missing: manifest.json lists this file").into()
                );
            }
            // Striped files are sized through their parts (stripes.json).
            let len = flashgnn_io::stripe::open_reader(&root, name)?.len();
            if len != entry.bytes {
                return Err(FormatError::Truncated {
                    file: p.display().to_string(),
                    offset: len.min(entry.bytes),
                    needed: entry.bytes,
                    available: len,
                }
                .into());
            }
        }
        let graph = flashgnn_io::stripe::open_reader(&root, GRAPH_FILE)?;
        let overflow = flashgnn_io::stripe::open_reader(&root, OVERFLOW_FILE)?;
        let p = layout.page_size as usize;
        let mut page = vec![0u8; p];
        graph.read_exact_at(&mut page, 0)?;
        check_header_page(&root, &layout, GRAPH_FILE, &page)?;
        overflow.read_exact_at(&mut page, 0)?;
        check_header_page(&root, &layout, OVERFLOW_FILE, &page)?;
        let features = if layout.placement == FeaturePlacement::Separate {
            let f = flashgnn_io::stripe::open_reader(&root, FEATURES_FILE)?;
            f.read_exact_at(&mut page, 0)?;
            check_header_page(&root, &layout, FEATURES_FILE, &page)?;
            Some(f)
        } else {
            None
        };
        // Typed: every node type's feature file, its header against the
        // type's layout (`TypeTable::feature_layout`).
        let mut type_features = Vec::new();
        if let Some(t) = &manifest.types {
            for i in 0..t.node_types.len() {
                let fl = t.feature_layout(i, layout.page_size, layout.dataset_id)?;
                type_features.push(match fl {
                    Some(fl) => {
                        let name = flashgnn_format::types::features_file(i);
                        let f = flashgnn_io::stripe::open_reader(&root, &name)?;
                        f.read_exact_at(&mut page, 0)?;
                        check_type_feature_header(&root, &fl, &name, &page)?;
                        Some((fl, f))
                    }
                    None => None,
                });
            }
        }
        let types = manifest.types.clone();
        let key = SideKey::new(&root, &text, &[LABELS_FILE, NODE_INDEX_FILE, NODE_ORDER_FILE, FEATURE_CRC_FILE]);
        let ds = Dataset {
            root,
            manifest,
            layout,
            graph,
            overflow,
            features,
            types,
            type_features,
            key,
            maps: OnceLock::new(),
            crcs: OnceLock::new(),
            labels: OnceLock::new(),
            side_checked: Default::default(),
        };
        // Every side file's dtype and shape against the manifest (one header
        // read each); their values are checked on first use and by verify.
        for name in ds.manifest.files.keys() {
            if ds.side_spec(name).is_some() {
                ds.side_array(name)?;
            }
        }
        Ok(ds)
    }

    /// What side file `name` must hold (docs/format.md, "Side arrays"):
    /// dtype, length and value range; None for a file that is not a side
    /// array (the `.fg` files).
    pub fn side_spec(&self, name: &str) -> Option<SideSpec> {
        let n = self.num_nodes();
        let node_ids = |len: u64, what: &'static str| SideSpec {
            dtype: Dtype::Int64,
            len,
            range: Some((0, n as i128)),
            what,
            bound: format!("in [0, num_nodes {n})"),
        };
        if name == LABELS_FILE {
            let c = self.manifest.labels.as_ref().map_or(0, |l| l.num_classes);
            return Some(SideSpec {
                dtype: Dtype::Int64,
                len: n,
                range: Some((-1, c as i128)),
                what: "label",
                bound: format!("in [0, num_classes {c}) or -1 (unlabeled)"),
            });
        }
        if name == NODE_ORDER_FILE || name == NODE_INDEX_FILE {
            return Some(node_ids(n, "node id"));
        }
        if let Some(spec) = self.typed_side_spec(name) {
            return Some(spec);
        }
        if name == FEATURE_CRC_FILE {
            return Some(SideSpec { dtype: Dtype::Uint32, len: n, range: None, what: "", bound: String::new() });
        }
        if let Some(rest) = name.strip_prefix("link_").and_then(|s| s.strip_suffix(".npy")) {
            let ls = self.manifest.link_split.as_ref()?;
            let (split, part) =
                LINK_SPLITS.iter().find_map(|s| rest.strip_prefix(s)?.strip_prefix('_').map(|p| (*s, p)))?;
            let len = ls.splits.get(split)?.len_of(part)?;
            // A typed split holds local ids: sources of the edge type's
            // source type, destinations and negatives of its destination type.
            if let (Some(t), Some(r)) = (self.types.as_ref(), self.link_edge_type()) {
                let e = &t.edge_types[r];
                let end = if part == "src" || part == "neg_src" { &e.src } else { &e.dst };
                let c = t.node_types[t.node_type_index(end)?].count;
                return Some(SideSpec {
                    dtype: Dtype::Int64,
                    len,
                    range: Some((0, c as i128)),
                    what: "link split node id",
                    bound: format!("in [0, count {c} of node type {end:?}) (local ids of edge type {})", e.key()),
                });
            }
            return Some(node_ids(len, "link split node id"));
        }
        let split = name.strip_prefix("split_").and_then(|s| s.strip_suffix(".npy"))?;
        let len = *self.manifest.splits.get(split)?;
        Some(node_ids(len, "split id"))
    }

    /// Every value of side file `name` against its range (O(file)); the
    /// values, as i64. The error names the file, the value's byte offset, the
    /// value and the bound.
    pub fn check_side_values(&self, name: &str) -> Result<Vec<i64>> {
        let a = self.side_array(name)?;
        let v = a.read_all_i64()?;
        self.check_side_chunk(name, a.header.data_offset, 0, &v)?;
        Ok(v)
    }

    /// Values `v` of side file `name`, elements `[first, first + v.len())`
    /// of an array whose data starts at byte `data_offset`, against the
    /// file's range: the first one out of range is the error (file, byte
    /// offset, value, bound). Shared by [`Dataset::check_side_values`] and
    /// the scrubber, which checks the array chunk by chunk.
    pub fn check_side_chunk(&self, name: &str, data_offset: u64, first: u64, v: &[i64]) -> Result<()> {
        if let Some(spec) = self.side_spec(name) {
            if let Some((lo, hi)) = spec.range {
                if let Some(i) = v.iter().position(|&x| (x as i128) < lo || (x as i128) >= hi) {
                    let index = first + i as u64;
                    return Err(FormatError::invalid(
                        self.file(name),
                        format!(
                            "byte offset {}: {} = {} at index {index} is out of bounds (must be {})",
                            data_offset + spec.dtype.size() as u64 * index,
                            spec.what,
                            v[i],
                            spec.bound
                        ),
                    )
                    .into());
                }
            }
        }
        Ok(())
    }

    /// Side files of a typed dataset: `t<i>.labels.npy`, `t<i>.split_<s>.npy`
    /// (local ids of the type), `t<i>.feature_crc.npy`.
    fn typed_side_spec(&self, name: &str) -> Option<SideSpec> {
        let t = self.types.as_ref()?;
        let rest = name.strip_prefix('t')?;
        let (i, file) = rest.split_once('.')?;
        let i: usize = i.parse().ok()?;
        let nt = t.node_types.get(i)?;
        let c = nt.count;
        if file == "labels.npy" {
            let k = nt.labels.as_ref().map_or(0, |l| l.num_classes);
            return Some(SideSpec {
                dtype: Dtype::Int64,
                len: c,
                range: Some((-1, k as i128)),
                what: "label",
                bound: format!("in [0, num_classes {k}) of node type {:?}, or -1 (unlabeled)", nt.name),
            });
        }
        if file == "feature_crc.npy" {
            return Some(SideSpec { dtype: Dtype::Uint32, len: c, range: None, what: "", bound: String::new() });
        }
        let split = file.strip_prefix("split_").and_then(|s| s.strip_suffix(".npy"))?;
        let len = *nt.splits.get(split)?;
        Some(SideSpec {
            dtype: Dtype::Int64,
            len,
            range: Some((0, c as i128)),
            what: "split id",
            bound: format!("in [0, count {c} of node type {:?}) (local ids)", nt.name),
        })
    }

    /// The node and edge types (a homogeneous dataset's one-type view).
    pub fn type_table(&self) -> flashgnn_format::types::TypeTable {
        self.manifest.type_table()
    }

    /// Whether the dataset is typed (format version 3, `types` section).
    pub fn is_typed(&self) -> bool {
        self.types.is_some()
    }

    /// Node type `t`'s feature layout (typed datasets; None without features).
    pub fn type_feature_layout(&self, t: usize) -> Option<&Layout> {
        self.type_features.get(t)?.as_ref().map(|(l, _)| l)
    }

    /// Feature row bytes of node `local` of type `t` (typed datasets),
    /// appended to `out` and checked against `t<i>.feature_crc.npy`'s CRC,
    /// which is bound to the global id.
    pub fn type_feature_row(&self, t: usize, local: u64, out: &mut Vec<u8>) -> Result<()> {
        let types = self.types.as_ref().ok_or_else(|| StoreError::BadRequest("not a typed dataset".into()))?;
        let nt = types
            .node_types
            .get(t)
            .ok_or_else(|| StoreError::BadRequest(format!("no node type {t} in {}", self.root.display())))?;
        let Some((fl, f)) = self.type_features.get(t).and_then(|x| x.as_ref()) else {
            return Err(StoreError::BadRequest(format!("node type {:?} has no features", nt.name)));
        };
        if local >= nt.count {
            return Err(StoreError::BadRequest(format!(
                "node {local} of type {:?} is out of range (count {})",
                nt.name, nt.count
            )));
        }
        let rb = fl.row_bytes() as usize;
        let at = out.len();
        out.resize(at + rb, 0);
        let (_, start, _) = fl.feature_range(local);
        f.read_exact_at(&mut out[at..], start)?;
        let crc_name = flashgnn_format::types::feature_crc_file(t);
        let a = self.side_array(&crc_name)?;
        let stored = a.read_i64(local, 1)?[0] as u32;
        let global = types.offset(t) + local;
        let computed = fl.crc(global, &out[at..]);
        if stored != computed {
            return Err(FormatError::Checksum {
                file: self.file(&flashgnn_format::types::features_file(t)),
                offset: start,
                what: format!("feature row of node {global} (type {:?}, local id {local})", nt.name),
                stored,
                computed,
            }
            .into());
        }
        Ok(())
    }

    pub fn root(&self) -> &Path {
        &self.root
    }
    pub fn manifest(&self) -> &Manifest {
        &self.manifest
    }
    pub fn layout(&self) -> &Layout {
        &self.layout
    }

    /// Layout figures (`flashgnn info`, `Dataset.layout`): the layout's
    /// sizes, bytes per file, the CSR baseline it is compared with, and the
    /// in-memory index bytes per node (the relabelling map of a reordered
    /// dataset).
    pub fn layout_report(&self) -> serde_json::Value {
        let l = &self.layout;
        // A typed dataset's rows live in its per-type tables: counted in the
        // stored bytes and in the CSR baseline (dense rows) alike.
        let (typed_files, typed_rows) = (0..self.type_table().node_types.len())
            .filter_map(|t| self.type_feature_layout(t))
            .fold((0u64, 0u64), |(f, r), fl| (f + fl.features_file_bytes(), r + fl.num_nodes * fl.row_bytes() as u64));
        serde_json::json!({
            "page_size": l.page_size,
            "slot_bytes": l.slot_bytes,
            "slots_per_page": l.slots_per_page,
            "inline_cap": l.inline_cap,
            "slot_pages": l.slot_pages(),
            "overflow_pages": l.overflow_pages(),
            "graph_file_bytes": l.graph_file_bytes(),
            "overflow_file_bytes": l.overflow_file_bytes(),
            "features_file_bytes": l.features_file_bytes() + typed_files,
            "stored_bytes": l.stored_bytes() + typed_files,
            "csr_bytes": l.csr_bytes() + typed_rows,
            "csr_structure_bytes": (l.num_nodes + 1) * 8 + l.num_edges * l.id_bytes as u64,
            "row_bytes": l.row_bytes(),
            "feature_stride": if l.placement == FeaturePlacement::Separate { l.feature_stride() } else { 0 },
            "index_bytes_per_node": if self.manifest.reorder == "none" { 0 } else { 8 },
        })
    }
    pub fn num_nodes(&self) -> u64 {
        self.layout.num_nodes
    }
    pub fn num_edges(&self) -> u64 {
        self.layout.num_edges
    }
    pub fn feature_dim(&self) -> u32 {
        self.layout.feature_dim
    }
    pub fn feature_dtype(&self) -> Dtype {
        self.layout.feature_dtype
    }
    pub(crate) fn graph_reader(&self) -> &dyn ReadAt {
        self.graph.as_ref()
    }
    pub(crate) fn overflow_reader(&self) -> &dyn ReadAt {
        self.overflow.as_ref()
    }
    pub(crate) fn features_reader(&self) -> Option<&dyn ReadAt> {
        self.features.as_deref()
    }
    pub fn file(&self, name: &str) -> String {
        file_name(&self.root, name)
    }

    /// The relabelling maps `(node_index, node_order)` (original -> internal,
    /// internal -> original), loaded and checked to be inverse permutations
    /// on first use; None when the dataset was not relabelled. Shared with
    /// every other open of the same files in this process ([`crate::shared`]).
    pub fn maps(&self) -> Result<Option<&Maps>> {
        if self.manifest.reorder == "none" {
            return Ok(None);
        }
        let r = self.maps.get_or_init(|| {
            let load = |name: &str| -> Result<Arc<[u32]>> {
                let a = self.side_array(name)?;
                let n = self.num_nodes();
                let _drop = DropCached(&a);
                a.collect_shared(|i, x| {
                    if x < 0 || x as u64 >= n {
                        return Err(FormatError::oob(
                            self.file(name),
                            a.header.data_offset + i * 8,
                            "node id",
                            x as u64,
                            format!("< {n}"),
                        )
                        .into());
                    }
                    Ok(x as u32)
                })
            };
            shared::with_slots(&self.key, |slots| -> Result<Maps> {
                if let (Some(i), Some(o)) = (shared::upgrade(&slots.node_index), shared::upgrade(&slots.node_order)) {
                    return Ok((i, o)); // checked by the open that loaded them
                }
                let (index, order) = (load(NODE_INDEX_FILE)?, load(NODE_ORDER_FILE)?);
                // The two maps must be inverse permutations, or ids would be
                // silently swapped: O(N) once per load.
                if let Some(i) = (0..order.len()).find(|&i| index[order[i] as usize] as usize != i) {
                    let a = NpyArray::open(&self.root.join(NODE_ORDER_FILE), &self.file(NODE_ORDER_FILE))?;
                    return Err(FormatError::oob(
                        self.file(NODE_ORDER_FILE),
                        a.header.data_offset + 8 * i as u64,
                        "node_order entry",
                        order[i] as u64,
                        "inverse of node_index.npy",
                    )
                    .into());
                }
                slots.node_index = Some(Arc::downgrade(&index));
                slots.node_order = Some(Arc::downgrade(&order));
                Ok((index, order))
            })
            .map_err(|e| e.to_string())
        });
        match r {
            Ok(m) => Ok(Some(m)),
            Err(e) => Err(StoreError::Format(FormatError::invalid(self.root.display().to_string(), e.clone()))),
        }
    }

    /// Per-row CRC32Cs of `features.fg` (4 B/node, loaded on first use,
    /// shared like [`Dataset::maps`]).
    pub fn feature_crcs(&self) -> Result<&Arc<[u32]>> {
        let r = self.crcs.get_or_init(|| {
            shared::with_slots(&self.key, |slots| -> Result<Arc<[u32]>> {
                if let Some(c) = shared::upgrade(&slots.feature_crcs) {
                    return Ok(c);
                }
                let a = self.node_sized(FEATURE_CRC_FILE, self.side_array(FEATURE_CRC_FILE)?)?;
                let _drop = DropCached(&a);
                let c = a.collect_shared(|_, c| Ok(c as u32))?;
                slots.feature_crcs = Some(Arc::downgrade(&c));
                Ok(c)
            })
            .map_err(|e| e.to_string())
        });
        r.as_ref().map_err(|e| StoreError::Format(FormatError::invalid(self.root.display().to_string(), e.clone())))
    }

    /// Every label as i32 (4 B/node; -1 = unlabeled), the whole file checked
    /// first as [`Dataset::check_side_file`] does (CRC32C against the
    /// manifest, every value in range), read chunk by chunk straight into
    /// i32: no 8 B/node transient. Loaded once per process for all opens of
    /// the same files ([`crate::shared`]); a sampler keeps the `Arc`.
    pub fn labels_shared(&self) -> Result<Arc<[i32]>> {
        if let Some(l) = self.labels.get() {
            return Ok(l.clone());
        }
        // Errors are not kept (a later call retries), and keep their type
        // (a checksum mismatch stays one).
        let l = shared::with_slots(&self.key, |slots| -> Result<Arc<[i32]>> {
            if let Some(l) = shared::upgrade(&slots.labels) {
                return Ok(l);
            }
            let l = self.load_labels()?;
            slots.labels = Some(Arc::downgrade(&l));
            Ok(l)
        })?;
        self.side_checked.lock().unwrap().insert(LABELS_FILE.to_string());
        Ok(self.labels.get_or_init(|| l).clone())
    }

    /// Bytes of this dataset's per-node arrays (labels, maps, feature CRCs)
    /// held in this process now, by any open of the same files: what a
    /// memory budget measured now already sees as used.
    pub fn side_bytes_held(&self) -> u64 {
        shared::held_bytes(&self.key)
    }

    /// Labels loaded by some open of the same files that is still alive, if
    /// any (no I/O).
    pub fn labels_if_loaded(&self) -> Option<Arc<[i32]>> {
        if let Some(l) = self.labels.get() {
            return Some(l.clone());
        }
        shared::with_slots(&self.key, |slots| shared::upgrade(&slots.labels))
    }

    fn load_labels(&self) -> Result<Arc<[i32]>> {
        self.check_whole_file(LABELS_FILE, &mut |_| {})?;
        let a = self.node_sized(LABELS_FILE, self.side_array(LABELS_FILE)?)?;
        let _drop = DropCached(&a);
        let spec = self.side_spec(LABELS_FILE).expect("labels.npy has a spec");
        let (lo, hi) = spec.range.expect("labels have a range");
        a.collect_shared(|i, l| {
            if (l as i128) < lo || (l as i128) >= hi {
                // The error names file, byte offset, value and bound.
                self.check_side_chunk(LABELS_FILE, a.header.data_offset, i, &[l])?;
            }
            Ok(l as i32) // in [-1, num_classes), num_classes a u32 in the manifest: no wrap
        })
    }

    fn check_id(&self, id: i64) -> Result<u64> {
        if id < 0 || id as u64 >= self.num_nodes() {
            return Err(StoreError::BadRequest(format!("node id {id} out of range [0, {})", self.num_nodes())));
        }
        Ok(id as u64)
    }

    /// Internal (layout) id of an original id.
    pub fn internal_id(&self, original: i64) -> Result<u64> {
        let v = self.check_id(original)?;
        Ok(match self.maps()? {
            Some((index, _)) => index[v as usize] as u64,
            None => v,
        })
    }

    /// Original id of an internal id.
    pub fn original_id(&self, internal: u64) -> Result<u64> {
        if internal >= self.num_nodes() {
            return Err(StoreError::BadRequest(format!(
                "internal id {internal} out of range [0, {})",
                self.num_nodes()
            )));
        }
        Ok(match self.maps()? {
            Some((_, order)) => order[internal as usize] as u64,
            None => internal,
        })
    }

    /// Read and validate the slot of internal node `v`.
    pub fn read_slot(&self, v: u64) -> Result<Vec<u8>> {
        let mut buf = vec![0u8; self.layout.slot_bytes as usize];
        self.graph.read_exact_at(&mut buf, self.layout.slot_offset(v))?;
        let slot = decode_slot(&self.layout, v, &buf, &self.file(GRAPH_FILE))?;
        // The slot names its node: it must be the one the id maps say.
        self.check_slot_original(v, slot.original_id, self.original_id(v)?)?;
        Ok(buf)
    }

    /// The slot of internal node `v` names original id `found`; the id maps
    /// say `want`.
    pub(crate) fn check_slot_original(&self, v: u64, found: u64, want: u64) -> Result<()> {
        if found != want {
            return Err(FormatError::oob(
                self.file(GRAPH_FILE),
                self.layout.slot_offset(v) + 8,
                "original id",
                found,
                format!("== {want} (reorder {:?})", self.manifest.reorder),
            )
            .into());
        }
        Ok(())
    }

    /// A neighbor id read from the overflow file at byte `offset` must be a
    /// node.
    pub(crate) fn check_overflow_id(&self, id: u64, offset: u64) -> Result<()> {
        let n = self.layout.num_nodes;
        if id >= n {
            return Err(FormatError::oob(
                self.file(OVERFLOW_FILE),
                offset,
                "neighbor id",
                id,
                format!("< num_nodes {n}"),
            )
            .into());
        }
        Ok(())
    }

    /// Feature row `row` of internal node `v`, read at byte `offset` of the
    /// feature file, against its stored CRC32C in `crcs`.
    /// `crcs[i]` is node `crcs_first + i`'s.
    pub(crate) fn check_feature_row(
        &self,
        v: u64,
        row: &[u8],
        crcs: &[u32],
        offset: u64,
        crcs_first: u64,
    ) -> Result<()> {
        let (stored, computed) = (crcs[(v - crcs_first) as usize], self.layout.crc(v, row));
        if stored != computed {
            return Err(FormatError::Checksum {
                file: self.file(FEATURES_FILE),
                offset,
                what: format!("feature row {v}"),
                stored,
                computed,
            }
            .into());
        }
        Ok(())
    }

    /// Neighbors of internal node `v`, as internal ids, every one checked.
    pub fn neighbors_internal(&self, v: u64) -> Result<Vec<u64>> {
        let buf = self.read_slot(v)?;
        self.slot_neighbors(&decode_slot(&self.layout, v, &buf, &self.file(GRAPH_FILE))?)
    }

    /// The neighbors a decoded slot lists, inline then overflow, every one checked.
    fn slot_neighbors(&self, slot: &flashgnn_format::slot::SlotView<'_>) -> Result<Vec<u64>> {
        let mut out = slot.inline_ids(&self.layout, &self.file(GRAPH_FILE))?;
        let spill = slot.overflow_len();
        if spill > 0 {
            out.extend(self.overflow_range(slot.overflow_first, spill)?);
        }
        Ok(out)
    }

    /// Overflow entries [first, first+count): reads the covering pages in one
    /// request, checks each page's checksum and number, and every id.
    pub fn overflow_range(&self, first: u64, count: u64) -> Result<Vec<u64>> {
        let l = &self.layout;
        let oname = self.file(OVERFLOW_FILE);
        let per = l.overflow_ids_per_page();
        let p = l.page_size as u64;
        let first_page = first / per;
        let last_page = (first + count - 1) / per;
        let npages = last_page - first_page + 1;
        let mut buf = vec![0u8; (npages * p) as usize];
        self.overflow.read_exact_at(&mut buf, p + first_page * p)?;
        let w = l.id_bytes as usize;
        let mut out = Vec::with_capacity(count as usize);
        for (i, page) in buf.chunks_exact(p as usize).enumerate() {
            let page_no = 1 + first_page + i as u64;
            check_overflow_page(&self.layout, &oname, page_no, page)?;
            let lo = if i == 0 { (first % per) as usize } else { 0 };
            let hi = if i as u64 == npages - 1 { ((first + count - 1) % per) as usize + 1 } else { per as usize };
            for j in lo..hi {
                let id = read_id(&page[j * w..(j + 1) * w]);
                self.check_overflow_id(id, page_no * p + (j * w) as u64)?;
                out.push(id);
            }
        }
        Ok(out)
    }

    /// Neighbors of an original id, as original ids.
    pub fn neighbors(&self, original: i64) -> Result<Vec<u64>> {
        let v = self.internal_id(original)?;
        let ids = self.neighbors_internal(v)?;
        match self.maps()? {
            Some((_, order)) => Ok(ids.into_iter().map(|i| order[i as usize] as u64).collect()),
            None => Ok(ids),
        }
    }

    /// Feature row bytes (stored dtype) of an original id, appended to `out`.
    pub fn feature_row(&self, original: i64, out: &mut Vec<u8>) -> Result<()> {
        let v = self.internal_id(original)?;
        let rb = self.layout.row_bytes() as usize;
        let at = out.len();
        match self.layout.placement {
            FeaturePlacement::Inline => {
                let buf = self.read_slot(v)?;
                let s = self.layout.inline_feature_offset() as usize;
                out.extend_from_slice(&buf[s..s + rb]);
            }
            FeaturePlacement::Separate => {
                let (_, start, _) = self.layout.feature_range(v);
                out.resize(at + rb, 0);
                self.features
                    .as_ref()
                    .expect("separate placement has a feature file")
                    .read_exact_at(&mut out[at..], start)?;
                self.check_feature_row(v, &out[at..], &self.feature_crcs()?[..], start, 0)?;
            }
        }
        Ok(())
    }

    /// Check a side array's whole-file CRC32C against the manifest, and
    /// every value against its range ([`Dataset::side_spec`]), once per
    /// process: labels and splits have no per-page checksums, so this is
    /// what stops a flipped label from being served (O(file) on first use).
    pub fn check_side_file(&self, name: &str) -> Result<()> {
        if self.side_checked.lock().unwrap().contains(name) {
            return Ok(());
        }
        self.check_whole_file(name, &mut |_| {})?;
        // Chunk by chunk: no whole-file Vec<i64> (8 B/node for labels).
        let a = self.side_array(name)?;
        a.for_each_chunk(|first, v| self.check_side_chunk(name, a.header.data_offset, first, v))?;
        self.side_checked.lock().unwrap().insert(name.to_string());
        Ok(())
    }

    /// Compare file `name` (striped or not) against its manifest CRC32C
    /// (`progress(bytes)` after each chunk) and return its length: the one
    /// whole-file check, for side files on first use and for `verify`. A file
    /// the manifest does not list is refused before anything is opened.
    pub(crate) fn check_whole_file(&self, name: &str, progress: &mut dyn FnMut(u64)) -> Result<u64> {
        let stored = self.manifest_crc(name)?;
        let r = flashgnn_io::stripe::open_reader(&self.root, name)?;
        self.crc_matches(name, stored, whole_file_crc(r.as_ref(), progress)?)?;
        Ok(r.len())
    }

    /// [`Self::check_whole_file`] for a file `verify` also walks record by
    /// record: a `first`-byte header record (number 0), then `record`-byte
    /// records (1, 2, ...; the last may be short) — a layout's pages, or a
    /// feature file's header page and rows — each handed to
    /// `each(number, bytes)` on the way, so one read serves the checksum
    /// and the structure checks. Read straight from the device (O_DIRECT
    /// where the file system allows it) on a reader thread: nothing reads
    /// these bytes again soon, so they are not copied into the page cache.
    pub(crate) fn check_whole_file_records(
        &self,
        name: &str,
        first: usize,
        record: usize,
        progress: &mut dyn FnMut(u64),
        each: &mut dyn FnMut(u64, &[u8]),
    ) -> Result<u64> {
        let stored = self.manifest_crc(name)?;
        let mut f = flashgnn_io::direct::DirectFile::open(&self.root, name)?;
        let len = f.len();
        self.crc_matches(name, stored, direct_crc_records(&mut f, first, record, progress, each)?)?;
        Ok(len)
    }

    /// The manifest's CRC32C of `name`; a file it does not list is refused.
    fn manifest_crc(&self, name: &str) -> Result<u32> {
        match self.manifest.files.get(name) {
            Some(entry) => Ok(entry.crc32c),
            None => Err(StoreError::BadRequest(format!("{} has no {name}", self.root.display()))),
        }
    }

    fn crc_matches(&self, name: &str, stored: u32, computed: u32) -> Result<()> {
        if computed != stored {
            return Err(FormatError::Checksum {
                file: self.file(name),
                offset: 0,
                what: "whole file".into(),
                stored,
                computed,
            }
            .into());
        }
        Ok(())
    }

    /// Labels of original ids (-1 = unlabeled). From the labels in memory
    /// when this process has them loaded ([`Dataset::labels_if_loaded`]) or
    /// when `ids` asks for at least 1/64 of the nodes (one sequential load
    /// then beats that many random reads; the array is kept, shared); else
    /// one read per id, holding nothing per node.
    pub fn labels(&self, ids: &[i64]) -> Result<Vec<i64>> {
        let held = match self.labels_if_loaded() {
            Some(l) => Some(l),
            None if self.has_labels() && ids.len() as u64 * 64 >= self.num_nodes() => Some(self.labels_shared()?),
            None => None,
        };
        if let Some(lab) = held {
            return ids.iter().map(|&id| Ok(lab[self.check_id(id)? as usize] as i64)).collect();
        }
        self.check_side_file(LABELS_FILE)?;
        let a = self.side_array(LABELS_FILE)?;
        ids.iter()
            .map(|&id| {
                let v = self.check_id(id)?;
                Ok(a.read_i64(v, 1)?[0])
            })
            .collect()
    }

    pub fn has_labels(&self) -> bool {
        self.manifest.files.contains_key(LABELS_FILE)
    }

    /// Seed ids of a split (original ids).
    /// Split `name` of node type `t` of a typed dataset: ids within the type,
    /// the file checked whole (CRC) and every id against the type's count.
    pub fn type_split(&self, t: usize, name: &str) -> Result<Vec<i64>> {
        let table = self.type_table();
        let nt = table.node_types.get(t).ok_or_else(|| {
            StoreError::BadRequest(format!("node type index {t}: the dataset has {}", table.node_types.len()))
        })?;
        if !nt.splits.contains_key(name) {
            let have: Vec<&String> = nt.splits.keys().collect();
            return Err(StoreError::BadRequest(format!(
                "no split {name:?} of node type {:?} in {} (available: {have:?})",
                nt.name,
                self.root.display()
            )));
        }
        let file = flashgnn_format::types::split_file(t, name);
        self.check_side_file(&file)?;
        self.check_side_values(&file)
    }

    /// Labels of ids `ids` (within node type `t`) of a typed dataset, -1 for
    /// unlabeled; an id beyond the type's count is refused by name.
    pub fn type_labels(&self, t: usize, ids: &[i64]) -> Result<Vec<i64>> {
        let table = self.type_table();
        let nt = table.node_types.get(t).ok_or_else(|| {
            StoreError::BadRequest(format!("node type index {t}: the dataset has {}", table.node_types.len()))
        })?;
        if nt.labels.is_none() {
            return Err(StoreError::BadRequest(format!("node type {:?} has no labels", nt.name)));
        }
        let file = flashgnn_format::types::labels_file(t);
        self.check_side_file(&file)?;
        let all = self.check_side_values(&file)?;
        ids.iter()
            .map(|&i| {
                all.get(usize::try_from(i).unwrap_or(usize::MAX)).copied().ok_or_else(|| {
                    StoreError::BadRequest(format!(
                        "node id {i} out of range [0, {}) of node type {:?}",
                        nt.count, nt.name
                    ))
                })
            })
            .collect()
    }

    pub fn split(&self, name: &str) -> Result<Vec<i64>> {
        if !self.manifest.splits.contains_key(name) {
            let have: Vec<&String> = self.manifest.splits.keys().collect();
            return Err(StoreError::BadRequest(format!(
                "no split {name:?} in {} (available: {have:?})",
                self.root.display()
            )));
        }
        self.check_side_file(&split_file(name))?;
        let a = self.side_array(&split_file(name))?;
        let _drop = DropCached(&a);
        let v = a.read_all_i64()?;
        for (i, &x) in v.iter().enumerate() {
            if x < 0 || x as u64 >= self.num_nodes() {
                return Err(FormatError::oob(
                    a.name.clone(),
                    a.header.data_offset + 8 * i as u64,
                    "split id",
                    x as u64,
                    format!("< num_nodes {}", self.num_nodes()),
                )
                .into());
            }
        }
        Ok(v)
    }

    /// The edge type a typed dataset's link split is of (index into
    /// `types.edge_types`; checked on open); None without a split or for a
    /// homogeneous dataset.
    pub fn link_edge_type(&self) -> Option<usize> {
        let key = self.manifest.link_split.as_ref()?.edge_type.as_ref()?;
        self.types.as_ref()?.edge_types.iter().position(|e| e.key() == *key)
    }

    /// Neighbors of global node `v` (a typed dataset) along edge type `r`
    /// alone, as global ids, every one checked; empty when `r` does not
    /// end at `v`'s type.
    pub fn relation_neighbors(&self, v: u64, r: usize) -> Result<Vec<u64>> {
        let t = self.types.as_ref().ok_or_else(|| StoreError::BadRequest("not a typed dataset".into()))?;
        let Some((ty, _)) = t.type_of(v) else {
            return Err(StoreError::BadRequest(format!("node {v} out of range [0, {})", self.num_nodes())));
        };
        let Some(j) = t.in_relations(ty).iter().position(|&x| x == r) else { return Ok(Vec::new()) };
        let buf = self.read_slot(v)?;
        let slot = decode_slot(&self.layout, v, &buf, &self.file(GRAPH_FILE))?;
        let ids = self.slot_neighbors(&slot)?;
        let at: u64 = (0..j).map(|i| slot.rel_count(i) as u64).sum();
        let c = slot.rel_count(j) as u64;
        ids.get(at as usize..(at + c) as usize).map(|x| x.to_vec()).ok_or_else(|| {
            FormatError::oob(
                self.file(GRAPH_FILE),
                self.layout.slot_offset(v),
                "relation counts",
                at + c,
                format!("<= degree {} of node {v}", ids.len()),
            )
            .into()
        })
    }

    /// Link-prediction split `name` (`train`, `val`, `test`; docs/format.md
    /// § *Link splits*): every file of it checked whole (CRC) and every id
    /// against the node count (a typed split: its types' counts, local ids)
    /// on first use. A dataset without a link split,
    /// or without this split, is refused naming the dataset.
    pub fn link_split(&self, name: &str) -> Result<LinkSplit> {
        let Some(ls) = &self.manifest.link_split else {
            return Err(StoreError::BadRequest(format!(
                "{} has no link split (build it with --link-split VAL,TEST, or import one: --link-split-files)",
                self.root.display()
            )));
        };
        let Some(part) = ls.splits.get(name) else {
            let have: Vec<&String> = ls.splits.keys().collect();
            return Err(StoreError::BadRequest(format!(
                "no link split {name:?} in {} (available: {have:?})",
                self.root.display()
            )));
        };
        let read = |p: &str| -> Result<Option<Vec<i64>>> {
            if part.len_of(p).is_none() {
                return Ok(None);
            }
            let f = link_file(name, p);
            self.check_side_file(&f)?;
            let a = self.side_array(&f)?;
            let _drop = DropCached(&a);
            Ok(Some(a.read_all_i64()?))
        };
        let neg_pairs = match (read("neg_src")?, read("neg_dst")?) {
            (Some(s), Some(d)) => Some((s, d)),
            _ => None,
        };
        Ok(LinkSplit {
            src: read("src")?.unwrap_or_default(),
            dst: read("dst")?.unwrap_or_default(),
            neg: read("neg")?,
            k: part.neg_per_positive,
            neg_pairs,
        })
    }

    /// Open side file `name` and check its header against [`Dataset::side_spec`]:
    /// the dtype and a 1-D shape of the length the manifest implies (N, or
    /// the split's count). A file of the wrong dtype is refused, never
    /// reinterpreted (an int32 or float split read as int64 would name other
    /// nodes).
    pub fn side_array(&self, name: &str) -> Result<NpyArray> {
        if !self.manifest.files.contains_key(name) {
            return Err(StoreError::BadRequest(format!("{} has no {name}", self.root.display())));
        }
        let a = NpyArray::open(&self.root.join(name), &self.file(name))?;
        if let Some(spec) = self.side_spec(name) {
            if a.header.dtype != spec.dtype {
                return Err(FormatError::invalid(
                    self.file(name),
                    format!(
                        "byte offset 10: dtype = {} is out of bounds (must be {} as docs/format.md specifies for this file)",
                        a.header.dtype.name(),
                        spec.dtype.name()
                    ),
                )
                .into());
            }
            if a.header.shape.len() != 1 || a.header.shape[0] != spec.len {
                return Err(FormatError::invalid(
                    self.file(name),
                    format!(
                        "byte offset 10: shape = {:?} is out of bounds (must be [{}]: {})",
                        a.header.shape,
                        spec.len,
                        if name.starts_with("link_") {
                            "the link split's counts in manifest.json"
                        } else if name.contains("split_") {
                            "the split's count in manifest.json"
                        } else {
                            "num_nodes"
                        }
                    ),
                )
                .into());
            }
        }
        Ok(a)
    }

    /// `a` (side file `name`) if it has one entry per node; otherwise the
    /// corruption error naming the file, its length and the bound.
    pub fn node_sized(&self, name: &str, a: NpyArray) -> Result<NpyArray> {
        if a.len() != self.num_nodes() {
            return Err(FormatError::oob(
                self.file(name),
                0,
                "length",
                a.len(),
                format!("== num_nodes {}", self.num_nodes()),
            )
            .into());
        }
        Ok(a)
    }
}

/// Check the header page of a typed dataset's `t<i>.features.fg` against
/// its node type's layout (`TypeTable::feature_layout`).
pub fn check_type_feature_header(root: &Path, fl: &Layout, name: &str, page: &[u8]) -> Result<()> {
    let file = file_name(root, name);
    let (h, want) = (FeatureHeader::decode(&file, page)?, FeatureHeader::from_layout(fl));
    match header_mismatch(&file, (h.page_size, want.page_size), &h.compare(&want), (h.dataset_id, want.dataset_id)) {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// Check header page `page` (page 0) of `.fg` file `name` against the
/// layout the manifest describes: magic, version, every field and the
/// dataset id ([`header_mismatch`]). Used by [`Dataset::open`] and the
/// scrubber.
pub fn check_header_page(root: &Path, layout: &Layout, name: &str, page: &[u8]) -> Result<()> {
    let file = file_name(root, name);
    let e = match name {
        GRAPH_FILE => {
            let (h, want) = (GraphHeader::decode(&file, page)?, GraphHeader::from_layout(layout));
            header_mismatch(&file, (h.page_size, want.page_size), &h.compare(&want), (h.dataset_id, want.dataset_id))
        }
        OVERFLOW_FILE => {
            let (h, want) = (OverflowHeader::decode(&file, page)?, OverflowHeader::from_layout(layout));
            header_mismatch(&file, (h.page_size, want.page_size), &h.compare(&want), (h.dataset_id, want.dataset_id))
        }
        FEATURES_FILE => {
            let (h, want) = (FeatureHeader::decode(&file, page)?, FeatureHeader::from_layout(layout));
            header_mismatch(&file, (h.page_size, want.page_size), &h.compare(&want), (h.dataset_id, want.dataset_id))
        }
        _ => return Err(StoreError::BadRequest(format!("{file} is not a .fg file with a header page"))),
    };
    match e {
        Some(e) => Err(e.into()),
        None => Ok(()),
    }
}

/// CRC32C of a whole file read in 4 MiB chunks; `progress(bytes)` after each.
pub fn whole_file_crc(r: &dyn ReadAt, progress: &mut dyn FnMut(u64)) -> Result<u32> {
    let mut crc = flashgnn_format::checksum::FileCrc::default();
    let mut buf = vec![0u8; 4 << 20];
    let mut off = 0;
    while off < r.len() {
        let k = ((r.len() - off) as usize).min(buf.len());
        r.read_exact_at(&mut buf[..k], off)?;
        crc.update(&buf[..k]);
        off += k as u64;
        progress(k as u64);
    }
    Ok(crc.value())
}

/// The whole-file CRC32C through a [`flashgnn_io::direct::DirectFile`],
/// handing the `first`-byte header record and then each `record`-byte
/// record to `each(number, bytes)`: read on a second thread in chunks of
/// about 4 MiB that end on record boundaries, checked on this one.
fn direct_crc_records(
    f: &mut flashgnn_io::direct::DirectFile,
    first: usize,
    record: usize,
    progress: &mut dyn FnMut(u64),
    each: &mut dyn FnMut(u64, &[u8]),
) -> Result<u32> {
    let record = record.max(1);
    let chunk = ((4usize << 20) / record).max(1) * record;
    let len = f.len();
    // A reader thread keeps the next chunks coming while this one is checked
    // (the checks are CPU-bound, ~0.8 GB/s here, the reads not), two ahead,
    // its buffers handed back for reuse. Dropping `chunks` (an error below)
    // stops it at its next send. The first chunk is the header record.
    let (tx, chunks) = std::sync::mpsc::sync_channel::<Result<Vec<u8>>>(2);
    let (back, spare) = std::sync::mpsc::channel::<Vec<u8>>();
    std::thread::scope(|scope| {
        scope.spawn(move || {
            let mut off = 0;
            while off < len {
                let want = if off == 0 { first.max(1) } else { chunk };
                let k = ((len - off) as usize).min(want);
                let mut buf = spare.try_recv().unwrap_or_default();
                buf.resize(k, 0);
                let r = f.read_into(off, &mut buf).map(|_| buf).map_err(StoreError::from);
                let failed = r.is_err();
                if tx.send(r).is_err() || failed {
                    return;
                }
                off += k as u64;
            }
        });
        let mut crc = flashgnn_format::checksum::FileCrc::default();
        let mut number = 0u64;
        for bytes in chunks {
            let bytes = bytes?;
            crc.update(&bytes);
            if number == 0 {
                each(0, &bytes);
                number = 1;
            } else {
                for p in bytes.chunks(record) {
                    each(number, p);
                    number += 1;
                }
            }
            progress(bytes.len() as u64);
            let _ = back.send(bytes);
        }
        Ok(crc.value())
    })
}
