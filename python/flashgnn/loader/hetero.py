"""Typed (heterogeneous) datasets through :class:`flashgnn.NeighborLoader`:
batches as ``torch_geometric.data.HeteroData``, as PyG's hetero
``NeighborLoader`` yields them.

    loader = flashgnn.NeighborLoader("data/mag", num_neighbors={("paper", "cites", "paper"): [15, 10], ...},
                                     input_nodes=("paper", train_idx), batch_size=1024, shuffle=True)
    for data in loader:            # HeteroData
        data["paper"].x, data["paper"].y, data["paper"].n_id, data["paper"].batch_size
        data["paper", "cites", "paper"].edge_index

One engine (``crates/flashgnn-sample``, ``neighbor/typed.rs``): a node of
type ``t`` reached at hop ``h`` draws ``num_neighbors[e][h]`` neighbours
along each incoming edge type ``e`` of ``t``, uniformly without
replacement; rows come from the type's own feature table. Per node type the
batch has ``x`` (types with features), ``y`` (types with labels), ``n_id``
(ids within the type, seeds first for the input type) and
``num_sampled_nodes``; per edge type ``edge_index`` (row: index into the
source type's ``n_id``, col: the destination's), ``e_id`` (each edge's
position in the edge type's stored edge list, the order of
``flashgnn.to_pyg``'s ``edge_index``; absent for a dataset written before
format version 4) and ``num_sampled_edges``;
the input type has ``batch_size`` and ``input_id``. Every node and edge type
of the dataset appears in every batch, empty when not reached (as PyG's
``filter_hetero_data``).

``cache=`` takes a :class:`flashgnn.Cache` built on the dataset (slots,
overflow pages and typed rows are cached); without one, ``memory_budget``
sizes the process's shared cache for the dataset as for a homogeneous one
(one budget over slots, overflow pages and every type's rows).
``lookahead=S`` samples the structure ``S`` batches ahead and fills every
type's rows at the head of the window, through a Belady tier per node type
(:class:`flashgnn.loader.window.TypedWindowGather`); batches are the same.
Not yet for typed datasets (refused by name): ``device_cache``,
``degrees``, ``split``.
"""

from __future__ import annotations

import json
import os

import numpy as np
import torch

from flashgnn import _core
from flashgnn.loader import _args as _pa

HETERO_REFUSED = {
    "device_cache": "the device tier does not hold typed rows yet",
    "degrees": "whole-graph degrees are not carried for typed datasets yet",
    "split": "splits of a typed dataset are per node type: pass input_nodes=(node_type, ids)",
}


def typed_manifest(data) -> dict | None:
    """The ``types`` section of the manifest of dataset path ``data`` (or of
    an open :class:`flashgnn.Dataset`), None for a homogeneous dataset or
    anything that is not a dataset directory."""
    path = getattr(data, "path", data)
    if not isinstance(path, (str, os.PathLike)):
        return None
    try:
        with open(os.path.join(os.fspath(path), _core.MANIFEST_FILE), encoding="utf-8") as f:
            m = json.load(f)
    except (OSError, ValueError):
        return None
    return m.get("types") if isinstance(m, dict) else None


def _edge_key(who: str, key, edge_types: list[tuple]) -> tuple:
    """An edge type as given in a num_neighbors dict (a ``(src, rel, dst)``
    tuple or PyG's ``"src__rel__dst"`` string) as a tuple."""
    if isinstance(key, str):
        parts = tuple(key.split("__"))
    elif isinstance(key, tuple):
        parts = key
    else:
        parts = None
    if parts is None or len(parts) != 3 or parts not in edge_types:
        raise ValueError(f"{who}: num_neighbors key {key!r} is not an edge type of the dataset; edge types: "
                         f"{', '.join(map(str, edge_types))}")
    return parts


def hetero_num_neighbors(who: str, value, edge_types: list[tuple]) -> list[list[int]]:
    """PyG's ``num_neighbors`` for a typed dataset as ``[hop][edge type]``:
    a list per hop (every edge type), a dict ``{(src, rel, dst): list}``, or a
    ``torch_geometric.sampler.NumNeighbors`` (whose ``default`` covers the
    edge types its dict leaves out). Every list has the same length."""
    values, default = value, None
    if type(value).__name__ == "NumNeighbors":
        values, default = value.values, value.default
    if not isinstance(values, dict):
        per_hop = _pa.num_neighbors(who, values)
        return [[f] * len(edge_types) for f in per_hop]
    given = {_edge_key(who, k, edge_types): v for k, v in values.items()}
    per_type = {}
    for et in edge_types:
        if et in given:
            per_type[et] = _pa.num_neighbors(f"{who}: num_neighbors[{et!r}]", given[et])
        elif default is not None:
            per_type[et] = _pa.num_neighbors(f"{who}: num_neighbors default", default)
        else:
            raise ValueError(f"{who}: num_neighbors has no entry for edge type {et!r} (give one, or a default "
                             "with torch_geometric.sampler.NumNeighbors(values, default=[...]))")
    hops = {len(v) for v in per_type.values()}
    if len(hops) > 1:
        lens = {str(et): len(v) for et, v in per_type.items()}
        raise ValueError(f"{who}: num_neighbors lists differ in length ({lens}): every edge type takes the same "
                         "number of hops")
    k = hops.pop() if hops else 0
    return [[per_type[et][h] for et in edge_types] for h in range(k)]


def hetero_input_nodes(who: str, input_nodes, types: dict) -> tuple[str, np.ndarray, bool]:
    """``input_nodes`` of a typed dataset: a node type name (all its
    nodes), or ``(node_type, ids | bool mask | None)``. Returns the type, the
    seeds (local ids) and whether PyG's ``input_id`` is the node id itself
    (mask or None) rather than the position in them."""
    names = [t["name"] for t in types["node_types"]]
    if input_nodes is None:
        raise ValueError(f"{who}: a typed dataset needs input_nodes=node_type or (node_type, nodes); node types: "
                         f"{', '.join(names)}")
    if isinstance(input_nodes, str):
        input_nodes = (input_nodes, None)
    if not (isinstance(input_nodes, tuple) and len(input_nodes) == 2 and isinstance(input_nodes[0], str)):
        raise TypeError(f"{who}: input_nodes for a typed dataset must be a node type or (node_type, nodes), got "
                        f"{type(input_nodes).__name__}")
    name, nodes = input_nodes
    if name not in names:
        raise ValueError(f"{who}: input_nodes names node type {name!r}, which the dataset does not have; node "
                         f"types: {', '.join(names)}")
    count = types["node_types"][names.index(name)]["count"]
    if nodes is None:
        return name, np.arange(count, dtype=np.int64), True
    if isinstance(nodes, torch.Tensor):
        nodes = nodes.cpu().numpy()
    a = np.asarray(nodes)
    if a.ndim != 1:
        raise ValueError(f"{who}: input_nodes[1] has shape {tuple(a.shape)}: expected a 1-D tensor of node ids or a "
                         "boolean mask")
    if a.dtype == np.bool_:
        if len(a) != count:
            raise ValueError(f"{who}: input_nodes mask has {len(a):,} entries; node type {name!r} has {count:,}")
        return name, np.flatnonzero(a).astype(np.int64), True
    if a.size == 0:
        return name, np.empty(0, dtype=np.int64), False
    if a.dtype.kind not in "iu":
        raise TypeError(f"{who}: input_nodes[1] must be node ids or a boolean mask, got dtype {a.dtype}")
    a = np.ascontiguousarray(a, dtype=np.int64)
    if a.min() < 0 or a.max() >= count:
        bad = a[(a < 0) | (a >= count)][0]
        raise IndexError(f"{who}: input_nodes: node id {bad} out of range [0, {count}) of node type {name!r}")
    return name, a, False


def to_hetero_data(b, input_id: np.ndarray, pin: bool = False):
    """A :class:`flashgnn.sample.sampler.TypedBatch` as PyG's HeteroData (the
    engine's arrays, no copy)."""
    from torch_geometric.data import HeteroData

    def t(a):
        x = torch.from_numpy(a)
        return x.pin_memory() if pin else x

    data = HeteroData()
    for name, p in b.node.items():
        s = data[name]
        if p.x is not None:
            s.x = t(p.x)
        else:
            s.num_nodes = len(p.n_id)  # as PyG's batch of a type without attributes (its num_nodes filtered)
        if p.y is not None:
            s.y = t(p.y)
        s.n_id = torch.from_numpy(p.n_id)
        s.num_sampled_nodes = [int(v) for v in p.num_sampled_nodes]
    for et, p in b.edge.items():
        s = data[et]
        s.edge_index = t(p.edge_index)
        if p.e_id is not None:
            s.e_id = torch.from_numpy(p.e_id)
        s.num_sampled_edges = [int(v) for v in p.num_sampled_edges]
    data[b.input_type].input_id = torch.from_numpy(input_id)
    data[b.input_type].batch_size = int(b.batch_size)
    return data
