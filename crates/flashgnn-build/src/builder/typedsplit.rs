//! `--link-split` on a typed input (PyG's `RandomLinkSplit(edge_types=...,
//! rev_edge_types=...)` at build time): one input edge type is split by
//! `linksplit::random_split`, the rest of the input is built as it is.
//!
//! How: the relation's edges are read with the typed reader's checks (ids
//! against each type's count, errors by file, row, value and bound) and,
//! for a relation between two types, the destination ids shifted past the
//! source type's (`Space::Bipartite`), so the pair keys and the negatives'
//! draws work on one id range. The split writes the message-passing edges
//! (local ids) as the relation's `edge_index.npy` in a staging directory
//! beside the build's, whose other entries are symbolic links to the
//! input's; the typed build then reads that staging directory. So the
//! held-out edges are absent from the stored relation and, with
//! `--add-reverse`, from its `rev_<rel>` type (made from the staged
//! edges). An input relation from the destination type back to the source
//! type could hold the reverses of held-out edges: refused by name.
//!
//! Memory and disk: the homogeneous split's (`linksplit.rs`), for this
//! relation's edges; the staging directory is removed whatever happens and
//! never published.

use std::path::Path;
use std::time::Instant;

use flashgnn_format::manifest::FileEntry;

use super::linksplit::{self, Space};
use super::publish::{self, TmpGuard};
use super::{typed, BuildReport};
use crate::options::BuildOptions;
use crate::progress::Progress;
use crate::source::npy::NpyEdges;
use crate::source::typed::{open_typed, TypedInputs};
use crate::source::{EdgeSource, NODES_MAX};
use crate::{BuildError, Result};

/// The typed build, with `--link-split` when asked.
pub(super) fn build_typed_or_split(
    tmp: &Path,
    opts: &BuildOptions,
    progress: &Progress,
    t0: Instant,
) -> Result<BuildReport> {
    if opts.link_split.is_none() {
        return typed::build_typed(tmp, opts, progress, t0);
    }
    // Refuse what the typed build would refuse before the split's work.
    typed::check_typed_options(opts)?;
    let inp = open_typed(opts)?;
    let e = target(opts, &inp)?;
    let et = &inp.edges[e];
    let folder = format!("{}__{}__{}", et.src, et.rel, et.dst);
    let (si, di) = (inp.node_index(&et.src).expect("checked at open"), inp.node_index(&et.dst).expect("checked"));
    let (ns, nd) = (inp.nodes[si].count, inp.nodes[di].count);
    let (space, num_nodes) = if si == di {
        (Space::Single { symmetric: opts.add_reverse, flag: "--add-reverse" }, ns)
    } else {
        (Space::Bipartite { ns, nd }, ns + nd)
    };
    if num_nodes >= NODES_MAX {
        return Err(BuildError::config(format!(
            "--link-edge-type {folder}: its node types hold {num_nodes} nodes together, beyond the link split's bound \
             {} (32-bit pair keys)",
            NODES_MAX - 1
        )));
    }

    // The staging directory: the input's entries as links, the split
    // relation's folder real (its edge_index.npy is the split's output).
    let name = tmp.file_name().map(|n| n.to_string_lossy().into_owned()).unwrap_or_default();
    let stage = tmp.with_file_name(format!("{name}.link-stage"));
    // Scratch: on the real disk whatever `opts.disk` is.
    let _guard = TmpGuard(Some(stage.clone()), flashgnn_io::Disk::Real);
    stage_links(&inp.root, &stage, &folder)?;
    let mp = stage.join(&folder).join("edge_index.npy");

    // The split runs before the typed build, so it has the budget's sort chunk to itself.
    let chunk = super::plan::sort_chunk_bytes(opts, None)?;
    let edges = Shifted { inner: inp.open_edges(e)?, shift: space.dst_shift() };
    let r = linksplit::random_split(tmp, opts, Box::new(edges), Some(num_nodes), space, &mp, chunk, progress)?;
    drop(r.edges);

    let mut staged = opts.clone();
    staged.input = stage.clone();
    staged.format = crate::options::InputFormat::TypedNpy;
    let mut report = typed::build_typed(tmp, &staged, progress, t0)?;
    for f in linksplit::intermediates(tmp) {
        let _ = std::fs::remove_file(f);
    }
    let m = &mut report.manifest;
    m.build.source = opts.input.display().to_string();
    for (name, bytes, crc32c) in r.out.files {
        m.files.insert(name, FileEntry { bytes, crc32c });
    }
    let mut info = r.out.info;
    info.edge_type = Some(folder);
    m.link_split = Some(info);
    report.notes.extend(r.out.notes);
    publish::write_manifest(&opts.disk, tmp, m)?;
    Ok(report)
}

/// The input edge type to split: `--link-edge-type`, or the only one; and
/// no input relation that could hold the reverses of its held-out edges.
fn target(opts: &BuildOptions, inp: &TypedInputs) -> Result<usize> {
    let names: Vec<String> = inp.edges.iter().map(|e| format!("{}__{}__{}", e.src, e.rel, e.dst)).collect();
    let e = match &opts.link_edge_type {
        Some(want) => names.iter().position(|n| n == want).ok_or_else(|| {
            BuildError::config(format!(
                "--link-edge-type {want}: no such edge type in {} (its edge types: {names:?})",
                opts.input.display()
            ))
        })?,
        None if names.len() == 1 => 0,
        None => {
            return Err(BuildError::config(format!(
                "--link-split: {} has {} edge types; name the one to split with --link-edge-type SRC__REL__DST (one \
                 of {names:?})",
                opts.input.display(),
                names.len()
            )))
        }
    };
    let et = &inp.edges[e];
    if et.src != et.dst {
        if let Some(back) = inp.edges.iter().position(|x| x.src == et.dst && x.dst == et.src) {
            return Err(BuildError::config(format!(
                "--link-split of {}: the input also has edge type {}, from its destination type back to its source \
                 type, whose edges may be the reverses of held-out edges (leakage): drop the folder {} and build \
                 with --add-reverse, which makes rev_{} from the kept edges only",
                names[e],
                names[back],
                inp.root.join(&names[back]).display(),
                et.rel
            )));
        }
    }
    Ok(e)
}

/// Create `stage` holding a symbolic link to every entry of the typed
/// input root `root` except `folder`, which is created empty.
fn stage_links(root: &Path, stage: &Path, folder: &str) -> Result<()> {
    let io =
        |what: &'static str, p: &Path, e: std::io::Error| BuildError::from(flashgnn_io::IoError::new(what, p, None, e));
    let root = std::fs::canonicalize(root).map_err(|e| io("resolve", root, e))?;
    std::fs::create_dir(stage).map_err(|e| io("create", stage, e))?;
    for entry in std::fs::read_dir(&root).map_err(|e| io("list", &root, e))? {
        let entry = entry.map_err(|e| io("list", &root, e))?;
        if entry.file_name() == folder {
            continue;
        }
        let to = stage.join(entry.file_name());
        std::os::unix::fs::symlink(entry.path(), &to).map_err(|e| io("link", &to, e))?;
    }
    let dir = stage.join(folder);
    std::fs::create_dir(&dir).map_err(|e| io("create", &dir, e))?;
    Ok(())
}

/// A relation's edges with the destination ids shifted past the source
/// type's (`Space::Bipartite`); the reader's own checks name the input.
struct Shifted {
    inner: NpyEdges,
    shift: u64,
}

impl EdgeSource for Shifted {
    fn next_batch(&mut self, out: &mut Vec<(u64, u64)>, max: usize) -> Result<bool> {
        let from = out.len();
        let more = self.inner.next_batch(out, max)?;
        for e in &mut out[from..] {
            e.1 += self.shift;
        }
        Ok(more)
    }
    fn bytes_total(&self) -> u64 {
        self.inner.bytes_total()
    }
    fn bytes_done(&self) -> u64 {
        self.inner.bytes_done()
    }
    fn edges_hint(&self) -> Option<u64> {
        self.inner.edges_hint()
    }
    // The reader keeps its per-column bounds (the types' counts).
    fn set_num_nodes(&mut self, _: Option<u64>) {}
}
