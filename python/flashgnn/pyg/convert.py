"""Getting data in and out like a PyG user: :func:`from_pyg` builds a dataset
from a ``torch_geometric.data.Data``; :func:`to_pyg` reads a dataset back into
one when it fits in memory (docs/input.md).

``from_pyg`` writes the Data's arrays in the npy input layout to a temporary
directory beside the output and runs the ordinary importer on it, so every
check and guarantee of ``flashgnn build`` applies (ids in range, labels in
range, all-or-nothing publish). Attributes flashgnn does not store are
refused by name unless the caller drops them explicitly with ``ignore=``:
nothing the user put in the Data is lost silently.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import numpy as np

from flashgnn._core import InputError

# Data attribute -> what the npy layout calls it.
_READ = ("edge_index", "x", "y", "train_mask", "val_mask", "test_mask", "num_nodes")
_SPLITS = ("train", "val", "test")
_FEATURE_DTYPES = (np.float16, np.float32, np.float64)


def _numpy(value, name: str) -> np.ndarray:
    import torch

    if isinstance(value, torch.Tensor):
        if value.is_sparse or value.layout != torch.strided:
            raise InputError(f"Data.{name}: a sparse tensor; pass a dense one")
        if value.dtype == torch.bfloat16:
            raise InputError(f"Data.{name}: bfloat16 has no numpy type; convert it with .float() or .half() first")
        return value.detach().cpu().numpy()
    return np.asarray(value)


def _split_ids(value, name: str, num_nodes: int) -> np.ndarray:
    a = _numpy(value, name)
    if a.dtype == np.bool_:
        if a.shape != (num_nodes,):
            raise InputError(f"Data.{name}: boolean mask of shape {list(a.shape)}; expected [{num_nodes}] (one per node)")
        return np.flatnonzero(a).astype(np.int64)
    if a.dtype.kind in "iu" and a.ndim == 1:
        return a.astype(np.int64)  # an index tensor (OGB style); the importer checks the range
    raise InputError(f"Data.{name}: dtype {a.dtype}, shape {list(a.shape)}; expected a bool mask [{num_nodes}] "
                     "or an integer index vector")


def from_pyg(data, output, *, ignore=(), force: bool = False, progress: bool = True, **build_options) -> dict:
    """Build the dataset ``output`` from a PyG ``Data`` (or ``HeteroData``:
    one typed dataset, per node type ``x``/``y``/masks and per edge type
    ``edge_index``, in the same rules).

    Reads ``edge_index`` ([2, E], source row first: PyG's own convention and
    flashgnn's, so messages flow the same way), ``x`` ([N, D] float16/32/64),
    ``y`` ([N] or [N, 1] integer class ids, -1 = unlabeled), and
    ``train_mask``/``val_mask``/``test_mask`` (bool [N] masks or index
    vectors). Any other attribute (``edge_attr``, ``pos``, ...) is an error
    naming it unless listed in ``ignore``. ``build_options`` are those of
    :func:`flashgnn.build` (``symmetrize``, ``dedup``, ``feature_dtype``,
    ...); PyG's undirected datasets already hold both directions, so nothing
    is symmetrised unless asked. Returns the build report."""
    from flashgnn._durable import check_output
    from flashgnn.store.jobs import build

    if type(data).__name__ == "HeteroData":
        return _from_hetero(data, output, ignore=ignore, force=force, progress=progress, **build_options)
    keys = set(data.keys()) if callable(getattr(data, "keys", None)) else set(vars(data))
    extra = sorted(keys - set(_READ) - set(ignore))
    if extra:
        raise InputError(f"from_pyg: Data has attribute{'s' if len(extra) > 1 else ''} {', '.join(extra)} that "
                         f"flashgnn does not store; pass ignore={tuple(extra)!r} to build without "
                         f"{'them' if len(extra) > 1 else 'it'} (stored: edge_index, x, y, train/val/test masks)")
    if getattr(data, "edge_index", None) is None:
        raise InputError("from_pyg: Data has no edge_index")
    edges = _numpy(data.edge_index, "edge_index")
    if edges.ndim != 2 or edges.shape[0] != 2 or edges.dtype.kind not in "iu":
        raise InputError(f"from_pyg: Data.edge_index has dtype {edges.dtype}, shape {list(edges.shape)}; "
                         "expected an integer tensor [2, E]")
    num_nodes = int(data.num_nodes)
    output = Path(output)
    check_output(output, force, ())  # refuse before writing anything
    arrays = {"edge_index.npy": np.ascontiguousarray(edges.astype(np.int64, copy=False))}
    x = getattr(data, "x", None)
    if x is not None:
        x = _numpy(x, "x")
        if x.ndim != 2 or x.shape[0] != num_nodes or x.dtype.type not in _FEATURE_DTYPES:
            raise InputError(f"from_pyg: Data.x has dtype {x.dtype}, shape {list(x.shape)}; expected float16/32/64 "
                             f"[{num_nodes}, D]")
        arrays["node_feat.npy"] = np.ascontiguousarray(x)
    y = getattr(data, "y", None)
    if y is not None:
        y = _numpy(y, "y")
        if y.ndim == 2 and y.shape[1] == 1:
            y = y[:, 0]
        if y.ndim != 1 or y.shape[0] != num_nodes or y.dtype.kind not in "iu":
            raise InputError(f"from_pyg: Data.y has dtype {y.dtype}, shape {list(y.shape)}; expected integer class "
                             f"ids [{num_nodes}] (multi-label and regression targets are not stored)")
        arrays["node_label.npy"] = y.astype(np.int64, copy=False)
    for s in _SPLITS:
        m = getattr(data, f"{s}_mask", None)
        if m is not None:
            arrays[f"{s}_idx.npy"] = _split_ids(m, f"{s}_mask", num_nodes)
    staging = output.parent / f".{output.name}.from-pyg-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        for name, a in arrays.items():
            np.save(staging / name, a)
        return build(staging, output, progress=progress, num_nodes=num_nodes, force=force, **build_options)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


# Per node type / edge type attributes a typed dataset stores.
_READ_NODE = ("x", "y", "train_mask", "val_mask", "test_mask", "num_nodes")
_READ_EDGE = ("edge_index",)


def _store_keys(store) -> set:
    return set(store.keys()) if callable(getattr(store, "keys", None)) else set(vars(store))


def _from_hetero(data, output, *, ignore, force, progress, **build_options) -> dict:
    """:func:`from_pyg` for a ``HeteroData``: the typed npy layout (one folder
    per node type, one ``<src>__<rel>__<dst>`` folder per edge type, and
    ``num_nodes.json``; docs/input.md), then the ordinary typed build."""
    import json

    from flashgnn._durable import check_output
    from flashgnn.store.jobs import build

    output = Path(output)
    check_output(output, force, ())
    if not data.edge_types:
        raise InputError(f"from_pyg: the HeteroData has no edge types (node types: {', '.join(data.node_types)}); "
                         "a typed dataset needs at least one")
    files: dict[str, np.ndarray] = {}
    counts: dict[str, int] = {}
    for nt in data.node_types:
        st = data[nt]
        extra = sorted(_store_keys(st) - set(_READ_NODE) - {f"{nt}.{k}" for k in ignore} - set(ignore))
        if extra:
            raise InputError(f"from_pyg: HeteroData[{nt!r}] has attribute{'s' if len(extra) > 1 else ''} "
                             f"{', '.join(extra)} that flashgnn does not store; pass ignore={tuple(extra)!r} to build "
                             "without them (stored per node type: x, y, train/val/test masks)")
        n = int(st.num_nodes)
        counts[nt] = n
        x = getattr(st, "x", None)
        if x is not None:
            x = _numpy(x, f"[{nt!r}].x")
            if x.ndim != 2 or x.shape[0] != n or x.dtype.type not in _FEATURE_DTYPES:
                raise InputError(f"from_pyg: HeteroData[{nt!r}].x has dtype {x.dtype}, shape {list(x.shape)}; "
                                 f"expected float16/32/64 [{n}, D]")
            files[f"{nt}/node_feat.npy"] = np.ascontiguousarray(x)
        y = getattr(st, "y", None)
        if y is not None:
            y = _numpy(y, f"[{nt!r}].y")
            if y.ndim == 2 and y.shape[1] == 1:
                y = y[:, 0]
            if y.ndim != 1 or y.shape[0] != n or y.dtype.kind not in "iu":
                raise InputError(f"from_pyg: HeteroData[{nt!r}].y has dtype {y.dtype}, shape {list(y.shape)}; "
                                 f"expected integer class ids [{n}]")
            files[f"{nt}/node_label.npy"] = y.astype(np.int64, copy=False)
        for sp in _SPLITS:
            m = getattr(st, f"{sp}_mask", None)
            if m is not None:
                files[f"{nt}/{sp}_idx.npy"] = _split_ids(m, f"[{nt!r}].{sp}_mask", n)
    for et in data.edge_types:
        st = data[et]
        key = "__".join(et)
        extra = sorted(_store_keys(st) - set(_READ_EDGE) - set(ignore))
        if extra:
            raise InputError(f"from_pyg: HeteroData[{et!r}] has attribute{'s' if len(extra) > 1 else ''} "
                             f"{', '.join(extra)} that flashgnn does not store; pass ignore={tuple(extra)!r} to build "
                             "without them (stored per edge type: edge_index)")
        if any("__" in part or not part for part in et):
            raise InputError(f"from_pyg: edge type {et!r}: names must be non-empty and free of '__' (the typed "
                             "layout's separator)")
        e = _numpy(st.edge_index, f"[{et!r}].edge_index")
        if e.ndim != 2 or e.shape[0] != 2 or e.dtype.kind not in "iu":
            raise InputError(f"from_pyg: HeteroData[{et!r}].edge_index has dtype {e.dtype}, shape "
                             f"{list(e.shape)}; expected an integer tensor [2, E]")
        # [E, 2], source first: the typed npy layout (IGBH's own shape).
        files[f"{key}/edge_index.npy"] = np.ascontiguousarray(e.T.astype(np.int64, copy=False))
    staging = output.parent / f".{output.name}.from-pyg-{os.getpid()}"
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    try:
        for name, a in files.items():
            (staging / name).parent.mkdir(parents=True, exist_ok=True)
            np.save(staging / name, a)
        for nt in counts:
            (staging / nt).mkdir(exist_ok=True)
        (staging / "num_nodes.json").write_text(json.dumps(counts))
        return build(staging, output, progress=progress, force=force, **build_options)
    finally:
        shutil.rmtree(staging, ignore_errors=True)


def _to_hetero(ds, max_bytes):
    """:func:`to_pyg` of a typed dataset: a ``HeteroData`` with per node type ``x``, ``y`` and split masks, per
    edge type ``edge_index`` (ids within each type), read through the typed engine one block of destination
    nodes at a time with every incoming neighbour (the order of each relation's edges: by destination, then
    source: the stored order, which a typed batch's ``e_id`` indexes)."""
    import torch
    from torch_geometric.data import HeteroData

    from flashgnn.loader.neighbor import NeighborLoader
    from flashgnn.sample.budget import available_memory

    types = ds.types
    rows = sum(t["count"] * t["features"]["dim"] * np.dtype(t["features"]["dtype"]).itemsize
               for t in types["node_types"] if t.get("features"))
    need = 16 * ds.num_edges + rows + 8 * ds.num_nodes
    limit = available_memory() if max_bytes is None else int(max_bytes)
    if need > limit:
        raise MemoryError(f"to_pyg({ds.path}): {ds.num_nodes:,} nodes and {ds.num_edges:,} edges need {need:,} bytes "
                          f"in memory, more than the {limit:,} available (pass max_bytes= to override; for out-of-core "
                          "training use flashgnn.NeighborLoader instead)")
    data = HeteroData()
    edges = {et: [] for et in ds.edge_types}
    block = 1 << 15
    for ti, t in enumerate(types["node_types"]):
        name, count = t["name"], int(t["count"])
        xs = []
        has_in = any(et[2] == name for et in ds.edge_types)
        for lo in range(0, count, block):
            ids = np.arange(lo, min(lo + block, count), dtype=np.int64)
            if not has_in and not t.get("features"):
                break
            b = next(iter(NeighborLoader(ds.path, num_neighbors=[-1] if has_in else [0], input_nodes=(name, ids),
                                         batch_size=len(ids), memory_budget=0)))
            if t.get("features"):
                xs.append(b[name].x[: len(ids)])
            for et in ds.edge_types:
                if et[2] == name and b[et].edge_index.numel():
                    row, col = b[et].edge_index
                    # Stored order, which a batch's e_id numbers: check they agree.
                    at = sum(p.shape[1] for p in edges[et])
                    if "e_id" in b[et] and not torch.equal(b[et].e_id, torch.arange(at, at + len(row))):
                        raise ValueError(f"to_pyg({ds.path}): the e_id of {et}'s edges into {name} {lo:,}.. do not "
                                         f"follow the stored order from {at:,}")
                    edges[et].append(torch.stack([b[et[0]].n_id[row], b[name].n_id[col]]))
        if xs:
            data[name].x = torch.cat(xs)
        else:
            data[name].num_nodes = count
        if t.get("labels"):
            data[name].y = torch.from_numpy(ds._core.type_labels(ti, np.arange(count, dtype=np.int64)))
        for sp in _SPLITS:
            if sp in (t.get("splits") or {}):
                mask = torch.zeros(count, dtype=torch.bool)
                mask[torch.from_numpy(np.asarray(ds._core.type_split(ti, sp), dtype=np.int64))] = True
                setattr(data[name], f"{sp}_mask", mask)
    for et, parts in edges.items():
        data[et].edge_index = torch.cat(parts, dim=1) if parts else torch.empty(2, 0, dtype=torch.long)
    got = sum(data[et].edge_index.shape[1] for et in ds.edge_types)
    if got != ds.num_edges:
        raise ValueError(f"to_pyg({ds.path}): read {got:,} neighbor entries, the manifest says {ds.num_edges:,}")
    return data


def to_pyg(dataset, *, max_bytes: int | None = None):
    """Read a whole dataset into a ``torch_geometric.data.Data`` (a typed dataset: a ``HeteroData``) with
    ``edge_index`` (sources of edges into each node, row 0), ``x``, ``y`` and
    ``train_mask``/``val_mask``/``test_mask`` for the splits it has, all in
    original ids. Refused, with the figures, when the arrays would need more
    than ``max_bytes`` (default: the memory this process may still use)."""
    import torch
    from torch_geometric.data import Data

    from flashgnn.sample.budget import available_memory
    from flashgnn.store.dataset import _NP_DTYPES, Dataset

    ds = dataset if isinstance(dataset, Dataset) else Dataset(dataset)
    if ds.is_typed:
        return _to_hetero(ds, max_bytes)
    n, e, d = ds.num_nodes, ds.num_edges, ds.feature_dim
    has_labels = ds.num_classes > 0 or ds._core.has_labels()
    need = 16 * e + n * d * np.dtype(_NP_DTYPES[ds.feature_dtype]).itemsize + (8 * n if has_labels else 0) + 3 * n
    limit = available_memory() if max_bytes is None else int(max_bytes)
    if need > limit:
        raise MemoryError(f"to_pyg({ds.path}): {n:,} nodes and {e:,} edges need {need:,} bytes in memory, more than "
                          f"the {limit:,} available (pass max_bytes= to override; for out-of-core training use "
                          "flashgnn.NeighborLoader instead)")
    src = np.empty(e, dtype=np.int64)
    dst = np.empty(e, dtype=np.int64)
    x = np.empty((n, d), dtype=_NP_DTYPES[ds.feature_dtype]) if d else None
    y = np.empty(n, dtype=np.int64) if has_labels else None
    at = 0
    chunk = 1 << 16
    for lo in range(0, n, chunk):
        ids = np.arange(lo, min(lo + chunk, n), dtype=np.int64)
        ptr, idx = ds.neighbors_csr(ids)
        k = len(idx)
        src[at:at + k] = idx
        dst[at:at + k] = np.repeat(ids, np.diff(ptr))
        at += k
        if x is not None:
            x[lo:lo + len(ids)] = ds.features(ids)
        if y is not None:
            y[lo:lo + len(ids)] = ds.labels(ids)
    if at != e:
        raise ValueError(f"to_pyg({ds.path}): read {at:,} neighbor entries, the manifest says {e:,}")
    data = Data(edge_index=torch.from_numpy(np.stack([src, dst])), num_nodes=n)
    if x is not None:
        data.x = torch.from_numpy(x)
    if y is not None:
        data.y = torch.from_numpy(y)
    for s in _SPLITS:
        if s in ds.split_names:
            mask = torch.zeros(n, dtype=torch.bool)
            mask[torch.from_numpy(np.asarray(ds.split(s), dtype=np.int64))] = True
            setattr(data, f"{s}_mask", mask)
    return data
