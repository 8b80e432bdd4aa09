"""PyG remote backend: a flashgnn dataset behind stock PyG loaders.

    loader = flashgnn.pyg.NeighborLoader("data/demo", num_neighbors=[25, 10], input_nodes=train_idx,
                                         batch_size=1024, shuffle=True, num_workers=2)
    # or, with PyG's NodeLoader:
    fs, gs, sampler = flashgnn.pyg.remote_backend("data/demo", num_neighbors=[25, 10])
    loader = torch_geometric.loader.NodeLoader((fs, gs), node_sampler=sampler,
                                               input_nodes=train_idx, batch_size=1024, num_workers=2)

- :class:`GraphStore` describes the graph (one homogeneous CSC edge type of
  size N x N) but never materialises it: ``get_edge_index`` refuses, because
  PyG's own ``NeighborSampler`` would pull every edge into RAM (and needs
  pyg-lib or torch-sparse, which do not exist here). Sampling is
  :class:`NeighborSampler`'s job.
- :class:`NeighborSampler` (a ``torch_geometric.sampler.BaseSampler``) samples with the
  flashgnn engine: one call per mini-batch that reads each needed page once,
  samples the k-hop subgraph out of order and gathers the features and labels
  of every sampled node in the same pass.
- :class:`FeatureStore` serves ``x`` and ``y``. PyG asks it for the sampled
  nodes' features right after sampling, in the same process
  (``filter_per_worker``): when the index is the batch the linked sampler just
  produced, the rows it already gathered are returned with no further I/O.
  Any other index is read with one batched engine call (deep-queue direct
  I/O), so each mini-batch costs exactly one batched read either way.

- :func:`NeighborLoader` returns PyG's own ``NeighborLoader`` over these three (an adapter), with
  its sampling arguments handed to :class:`NeighborSampler` (honoured with PyG's
  meaning or refused by name, :mod:`flashgnn.loader._args`).

Everything opens lazily per process, so the three objects pickle into
DataLoader workers (``num_workers > 0``, fork or spawn).
"""

from __future__ import annotations

import inspect
import sys
import zlib
from dataclasses import dataclass

import numpy as np
import torch
from torch_geometric.data import EdgeAttr, TensorAttr
from torch_geometric.data import FeatureStore as _PygFeatureStore
from torch_geometric.data import GraphStore as _PygGraphStore
from torch_geometric.loader import NeighborLoader as _PygNeighborLoader
from torch_geometric.sampler import BaseSampler, HeteroSamplerOutput, NodeSamplerInput, SamplerOutput
from torch_geometric.sampler.base import SubgraphType

from flashgnn.loader import _args as _pa
from flashgnn.loader import hetero as _hetero
from flashgnn.loader.neighbor import _INFERENCE_ADVICE, _UNSET, as_dataset, resolve_engine
from flashgnn.sample.shared import shared_cache
from flashgnn.sample.sampler import DEFAULT_DEPTH
from flashgnn.sample.sampler import Sampler as _EngineSampler

_GATHER_CHUNK = 1 << 16  # ids per engine call when a caller asks for a huge index


@dataclass
class _Handoff:
    """The last batch the sampler gathered in this process (n_id, x, y); on a
    typed dataset per node type: ``typed[name] = (n_id, x, y)``, each type
    served once."""

    n_id: torch.Tensor | None = None
    x: torch.Tensor | None = None
    y: torch.Tensor | None = None
    typed: dict | None = None


class _Types:
    """A typed dataset's node and edge types as PyG names them (node type
    strings, ``(src, rel, dst)`` tuples), with what each node type stores;
    unknown names are refused by name."""

    def __init__(self, path: str, types: dict):
        self.path = path
        nts = types["node_types"]
        self.node_types = [t["name"] for t in nts]
        self.count = {t["name"]: int(t["count"]) for t in nts}
        self.dim = {t["name"]: int((t.get("features") or {}).get("dim") or 0) for t in nts}
        self.labels = {t["name"]: bool(t.get("labels")) for t in nts}
        self.offset, o = {}, 0
        for t in nts:
            self.offset[t["name"]] = o
            o += int(t["count"])
        self.edge_types = [(e["src"], e["rel"], e["dst"]) for e in types["edge_types"]]
        self.raw = types

    def attrs(self, group: str) -> list[str]:
        return [a for a, has in (("x", self.dim[group] > 0), ("y", self.labels[group])) if has]

    def node_type(self, group) -> str:
        if group not in self.count:
            raise KeyError(f"{self.path}: no node type {group!r} (group_name); node types: "
                           f"{', '.join(self.node_types)}")
        return group

    def edge_type(self, edge_type) -> tuple:
        et = tuple(edge_type.split("__")) if isinstance(edge_type, str) else edge_type
        if not isinstance(et, tuple) or et not in self.edge_types:
            raise KeyError(f"{self.path}: no edge type {edge_type!r}; edge types: "
                           f"{', '.join(map(str, self.edge_types))}")
        return et

    def local_ids(self, group: str, index) -> np.ndarray:
        """``index`` (None, a slice, ids within node type ``group``) as int64 local ids, bounds checked."""
        n = self.count[group]
        if index is None:
            return np.arange(n, dtype=np.int64)
        if isinstance(index, slice):
            return np.arange(n, dtype=np.int64)[index]
        if isinstance(index, torch.Tensor):
            index = index.cpu().numpy()
        ids = np.ascontiguousarray(np.asarray(index), dtype=np.int64).reshape(-1)
        if len(ids) and (ids.min() < 0 or ids.max() >= n):
            bad = ids[(ids < 0) | (ids >= n)][0]
            raise IndexError(f"{self.path}: node id {bad} out of range [0, {n}) of node type {group!r}")
        return ids


def _types_of(ds) -> _Types | None:
    return _Types(ds.path, ds.types) if ds.is_typed else None


def _no_typed_budget(who: str, memory_budget) -> None:
    if memory_budget not in ("auto", 0, None):
        raise ValueError(f"{who}: memory_budget={memory_budget!r} on a typed dataset: the remote backend's "
                         "cross-batch cache is not sized for typed datasets yet (use 'auto' or 0: none; "
                         "flashgnn.NeighborLoader sizes one)")


class FeatureStore(_PygFeatureStore):
    """``x`` (features, float32 by default) and ``y`` (labels, int64) of a
    flashgnn dataset, read with the engine. Read-only: unit updates of
    embeddings belong to the mutable graph store of the serving layer."""

    def __init__(self, dataset, engine: str = "auto", dtype=torch.float32, depth: int = DEFAULT_DEPTH,
                 memory_budget="auto", quiet: bool = False):
        super().__init__()
        ds = as_dataset(dataset)
        self.path = ds.path
        self.num_nodes, self.feature_dim = ds.num_nodes, ds.feature_dim
        self.has_labels = bool(ds.manifest.get("labels"))
        self.engine, self.dtype, self.depth = resolve_engine(engine), dtype, depth
        # A typed dataset: per node type ``x``/``y`` under group_name = the type (local ids).
        self.types = _types_of(ds)
        if self.types is not None:
            _no_typed_budget("flashgnn.pyg.FeatureStore", memory_budget)
        # The process's one cache for this dataset (shared with the sampler and any loader on it); a
        # process this store is pickled into reads uncached (the cache is process-local). None for a typed
        # dataset (no shared cache is sized for one yet).
        self._cache = None if self.types is not None else shared_cache(ds, [0], 1024, memory_budget, quiet=quiet,
                                                                       who="flashgnn.pyg")
        # The engine sampler reads go through: the linked NeighborSampler's own (remote_backend, NeighborLoader:
        # one engine sampler for both), else one opened on first use.
        self._gather: _EngineSampler | None = None
        self._handoff = _Handoff()
        self.gather_calls = 0  # batched engine reads issued by this store (not the sampler's)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_gather"] = None
        state["_cache"] = None
        return state

    def _gatherer(self) -> _EngineSampler:
        if self._gather is None:
            np_dtype = torch.empty(0, dtype=self.dtype).numpy().dtype
            self._gather = _EngineSampler(self.path, [0], engine=self.engine, depth=self.depth, dtype=np_dtype,
                                          cache=self._cache)
        return self._gather

    def _ids(self, index) -> np.ndarray:
        if index is None:
            return np.arange(self.num_nodes, dtype=np.int64)
        if isinstance(index, slice):
            return np.arange(self.num_nodes, dtype=np.int64)[index]
        if isinstance(index, torch.Tensor):
            index = index.cpu().numpy()
        ids = np.ascontiguousarray(np.asarray(index), dtype=np.int64).reshape(-1)
        if len(ids) and (ids.min() < 0 or ids.max() >= self.num_nodes):
            bad = ids[(ids < 0) | (ids >= self.num_nodes)][0]
            raise IndexError(f"{self.path}: node id {bad} out of range [0, {self.num_nodes})")
        return ids

    def _read(self, ids: np.ndarray) -> tuple[torch.Tensor, torch.Tensor]:
        xs, ys = [], []
        g = self._gatherer()
        for lo in range(0, max(len(ids), 1), _GATHER_CHUNK):
            chunk = ids[lo : lo + _GATHER_CHUNK]
            uniq, inverse = np.unique(chunk, return_inverse=True)
            b = g.gather(chunk if len(uniq) == len(chunk) else uniq, labels=True)
            x, y = b.x, b.y
            if len(uniq) != len(chunk):  # an index that repeats ids gets each row as often as it is asked for
                x, y = x[inverse], (y[inverse] if len(y) else y)
            self.gather_calls += 1
            xs.append(torch.from_numpy(x))
            ys.append(torch.from_numpy(y))
        return torch.cat(xs), torch.cat(ys)

    def _take_handoff(self, index):
        """The sampler's rows when ``index`` is the batch it just produced (served once)."""
        h = self._handoff
        if h.n_id is None or not isinstance(index, torch.Tensor):
            return None
        if index is not h.n_id and not (index.shape == h.n_id.shape and torch.equal(index.cpu(), h.n_id)):
            return None
        self._handoff = _Handoff()
        return h.x, h.y

    def _read_typed(self, group: str, ids: np.ndarray) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        """Rows and labels of node type ``group``'s local ``ids``: one engine request (per 64 Ki ids)."""
        tt = self.types
        dim, off = tt.dim[group], tt.offset[group]
        xs = [torch.empty((0, dim), dtype=self.dtype)] if dim else None
        ys = [torch.empty(0, dtype=torch.int64)] if tt.labels[group] else None
        if not dim and not tt.labels[group]:
            return None, None
        g = self._gatherer()
        for lo in range(0, len(ids), _GATHER_CHUNK):
            chunk = ids[lo : lo + _GATHER_CHUNK]
            uniq, inverse = np.unique(chunk, return_inverse=True)
            repeats = len(uniq) != len(chunk)
            p = g.gather((uniq if repeats else chunk) + off, labels=True).node[group]
            self.gather_calls += 1
            if xs is not None:
                xs.append(torch.from_numpy(p.x[inverse] if repeats else p.x))
            if ys is not None:
                ys.append(torch.from_numpy(p.y[inverse] if repeats else p.y))
        cat = lambda parts: parts[-1] if len(parts) == 2 else torch.cat(parts)  # noqa: E731
        return (cat(xs) if xs is not None else None), (cat(ys) if ys is not None else None)

    def _lookup_typed(self, attrs: list[TensorAttr]) -> list[torch.Tensor]:
        tt = self.types
        groups: dict = {}
        for i, a in enumerate(attrs):
            group = tt.node_type(a.group_name)
            if a.attr_name not in tt.attrs(group):
                raise KeyError(f"{self.path}: node type {group!r} has no attribute {a.attr_name!r} (has: "
                               f"{', '.join(tt.attrs(group)) or 'none'})")
            groups.setdefault((group, id(a.index)), []).append(i)
        out: list = [None] * len(attrs)
        for (group, _), pos in groups.items():
            index = attrs[pos[0]].index
            x, y = self._take_handoff_typed(group, index) or self._read_typed(group, tt.local_ids(group, index))
            for i in pos:
                out[i] = x if attrs[i].attr_name == "x" else y
        return out

    def _take_handoff_typed(self, group: str, index):
        """The sampler's rows of node type ``group`` when ``index`` is that type's ``n_id`` it just produced."""
        h = (self._handoff.typed or {}).get(group)
        if h is None or not isinstance(index, torch.Tensor):
            return None
        n_id = h[0]
        if index is not n_id and not (index.shape == n_id.shape and torch.equal(index.cpu(), n_id)):
            return None
        del self._handoff.typed[group]
        return h[1], h[2]

    def _lookup(self, attrs: list[TensorAttr]) -> list[torch.Tensor]:
        if self.types is not None:
            return self._lookup_typed(attrs)
        index = attrs[0].index
        if any(a.index is not index for a in attrs):
            return [self._lookup([a])[0] for a in attrs]
        x, y = self._take_handoff(index) or self._read(self._ids(index))
        by_name = {"x": x, "y": y}
        for a in attrs:
            if a.attr_name not in by_name:
                raise KeyError(f"{self.path}: no node attribute {a.attr_name!r} (has: x, y)")
        return [by_name[a.attr_name] for a in attrs]

    # -- PyG FeatureStore contract ---------------------------------------------------------

    def _multi_get_tensor(self, attrs: list[TensorAttr]) -> list[torch.Tensor]:
        return self._lookup(list(attrs))

    def _get_tensor(self, attr: TensorAttr) -> torch.Tensor | None:
        return self._lookup([attr])[0]

    def _put_tensor(self, tensor, attr: TensorAttr) -> bool:
        raise NotImplementedError(
            f"{self.path}: flashgnn.pyg.FeatureStore is read-only; rebuild the dataset with new features, "
            "or update embeddings through the mutable graph store"
        )

    def _remove_tensor(self, attr: TensorAttr) -> bool:
        raise NotImplementedError(f"{self.path}: flashgnn.pyg.FeatureStore is read-only")

    def _get_tensor_size(self, attr: TensorAttr):
        if self.types is not None:
            group = self.types.node_type(attr.group_name)
            if attr.attr_name not in self.types.attrs(group):
                return None
            n = self.types.count[group]
            return (n, self.types.dim[group]) if attr.attr_name == "x" else (n,)
        if attr.attr_name == "x":
            return (self.num_nodes, self.feature_dim)
        if attr.attr_name == "y":
            return (self.num_nodes,)
        return None

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        # Fresh objects each call: the loader sets ``attr.index`` on them.
        if self.types is not None:  # per node type: x (a type with features), y (a type with labels)
            return [TensorAttr(group_name=t, attr_name=a) for t in self.types.node_types
                    for a in self.types.attrs(t)]
        attrs = [TensorAttr(group_name=None, attr_name="x")]
        if self.has_labels:
            attrs.append(TensorAttr(group_name=None, attr_name="y"))
        return attrs


class GraphStore(_PygGraphStore):
    """Describes the stored graph as one CSC edge type ``(N, N)`` — on a
    typed dataset one CSC edge type ``(src, rel, dst)`` of size
    ``(N_src, N_dst)`` per stored edge type — and never loads it."""

    def __init__(self, dataset):
        super().__init__()
        ds = as_dataset(dataset)
        self.path = ds.path
        self.num_nodes, self.num_edges = ds.num_nodes, ds.num_edges
        self.types = _types_of(ds)

    def get_all_edge_attrs(self) -> list[EdgeAttr]:
        if self.types is not None:
            c = self.types.count
            return [EdgeAttr(edge_type=et, layout="csc", is_sorted=True, size=(c[et[0]], c[et[2]]))
                    for et in self.types.edge_types]
        return [EdgeAttr(edge_type=None, layout="csc", is_sorted=True, size=(self.num_nodes, self.num_nodes))]

    def _get_edge_index(self, edge_attr: EdgeAttr):
        if self.types is not None:
            et = self.types.edge_type(edge_attr.edge_type)
            raise RuntimeError(
                f"{self.path}: flashgnn.pyg.GraphStore does not materialise the edges of edge type {et} in RAM "
                "(that is what PyG's default NeighborSampler would do); pass "
                "neighbor_sampler=/node_sampler=flashgnn.pyg.NeighborSampler(...) — see flashgnn.pyg.remote_backend()")
        raise RuntimeError(
            f"{self.path}: flashgnn.pyg.GraphStore does not materialise its {self.num_edges:,} edges in RAM "
            "(that is what PyG's default NeighborSampler would do); pass "
            "neighbor_sampler=/node_sampler=flashgnn.pyg.NeighborSampler(...) — see flashgnn.pyg.remote_backend()"
        )

    def _put_edge_index(self, edge_index, edge_attr: EdgeAttr) -> bool:
        raise NotImplementedError(f"{self.path}: flashgnn.pyg.GraphStore is read-only; use `flashgnn build`")

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        raise NotImplementedError(f"{self.path}: flashgnn.pyg.GraphStore is read-only")


def _stock_neighbor_loader(loader) -> bool:
    """Whether ``loader`` is torch_geometric's own ``NeighborLoader`` (not
    one of flashgnn's, which hand their arguments to the sampler)."""
    from flashgnn.loader.neighbor import NeighborLoader as _Native

    return (isinstance(loader, _PygNeighborLoader) and not isinstance(loader, _Native)
            and not getattr(loader, "_flashgnn_adapter", False))


class NeighborSampler(BaseSampler):
    """k-hop uniform neighbor sampling by the flashgnn engine, for PyG's
    ``NodeLoader`` and for :class:`flashgnn.pyg.NeighborLoader`.

    ``NeighborSampler(dataset, num_neighbors, ...)``: ``num_neighbors`` a list per
    hop, -1 = all neighbours (``fanouts`` is its deprecated name). PyG's
    sampling options are taken with PyG's meaning: the engine samples without
    replacement, one shared subgraph per batch, sampled edges only
    (``replace=False``, ``disjoint=False``, ``subgraph_type='directional'``,
    ``directed=True``); any other value, and temporal or weighted sampling,
    is refused by name. ``SamplerOutput.edge`` is None: the store keeps no
    global edge numbering, so batches carry no ``e_id``.

    Under ``torch_geometric.loader.NeighborLoader(..., neighbor_sampler=S)``
    the loader's ``num_neighbors``, ``disjoint``, ``replace``... never reach
    ``S`` (PyG uses them only to build its own sampler), so a batch could
    differ from what the loader was asked for: that combination is refused at
    the first batch, naming :class:`flashgnn.pyg.NeighborLoader` (same
    arguments, passed on) and ``NodeLoader``.

    Each batch's randomness is a function of ``seed`` and the batch's
    ``input_id``s, so a run is reproducible whatever the worker count.

    On a typed dataset ``num_neighbors`` is PyG's heterogeneous form (a
    list per hop for every edge type, a dict ``{(src, rel, dst): list}`` or
    a ``NumNeighbors``; parsed as :class:`flashgnn.NeighborLoader` parses
    it), the loader's ``input_nodes`` is ``(node_type, ids)`` and each batch
    is PyG's ``HeteroSamplerOutput`` from the typed engine: ``node[type]``
    local ids (seeds first), ``row``/``col[(src, rel, dst)]``, ``edge`` None
    per edge type, ``num_sampled_nodes``/``num_sampled_edges`` per type.
    The batch equals ``flashgnn.NeighborLoader(...).sample(seeds,
    seed=sampler._batch_seed(input_id))``. No shared cache yet
    (``memory_budget`` other than "auto"/0 is refused).
    """

    ACCEPTED = ("dataset", "num_neighbors", "engine", "seed", "feature_store", "dtype", "depth", "replace",
                "subgraph_type", "disjoint", "temporal_strategy", "time_attr", "weight_attr", "directed",
                "memory_budget", "quiet")

    def __init__(self, dataset, num_neighbors=_UNSET, engine: str = "auto", seed: int = 0,
                 feature_store: FeatureStore | None = None, dtype=torch.float32, depth: int = DEFAULT_DEPTH, *,
                 memory_budget="auto", quiet: bool = False,
                 replace: bool = False, subgraph_type="directional", disjoint: bool = False,
                 temporal_strategy: str = "uniform", time_attr=None, weight_attr=None, directed: bool = True,
                 **kwargs):
        who = "flashgnn.pyg.NeighborSampler"
        num_neighbors = _pa.renamed(who, "fanouts", "num_neighbors", kwargs.pop("fanouts", _UNSET), num_neighbors,
                                    _UNSET)
        # Batch size the shared cache is sized for when this sampler makes it (the adapter passes the loader's).
        cache_batch = int(kwargs.pop("_cache_batch_size", 1024))
        _pa.refuse_unknown(who, kwargs, self.ACCEPTED)
        ds = as_dataset(dataset)
        self.types = _types_of(ds)
        self.rel_fanouts = None
        if self.types is not None:
            if num_neighbors is _UNSET or num_neighbors is None:
                raise TypeError(f"{who}: num_neighbors is required (a list per hop, or a dict per edge type)")
            _no_typed_budget(who, memory_budget)
            self.rel_fanouts = _hetero.hetero_num_neighbors(who, num_neighbors, self.types.edge_types)
            # The engine's per-hop fanouts: the largest per hop (-1 when any is); draws use rel_fanouts.
            self.num_neighbors = [-1 if any(f < 0 for f in h) else max(h, default=0) for h in self.rel_fanouts]
        else:
            self.num_neighbors = _pa.num_neighbors(who, None if num_neighbors is _UNSET else num_neighbors)
        _pa.check_sampling(who, replace=replace, subgraph_type=subgraph_type, disjoint=disjoint,
                           temporal_strategy=temporal_strategy, time_attr=time_attr, weight_attr=weight_attr,
                           directed=directed)
        # What the engine does, under PyG's NeighborSampler attribute names.
        self.replace, self.disjoint, self.subgraph_type = False, False, SubgraphType.directional
        self.path = ds.path
        self.fanouts = self.num_neighbors  # the engine's name, kept for callers of the old attribute
        self.engine = resolve_engine(engine)
        self.seed = int(seed)
        self.dtype = dtype
        np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
        # One engine sampler: it measures the batches and picks the hot set of the process's shared cache
        # when this is the first user of the dataset, samples, and serves the linked feature store's reads.
        self._engine = _EngineSampler(self.path, self.fanouts, engine=self.engine, depth=depth, dtype=np_dtype,
                                      rel_fanouts=self.rel_fanouts)
        cache = None if self.types is not None else shared_cache(
            self.path, self.fanouts, cache_batch, memory_budget, quiet=quiet, who="flashgnn.pyg", sampler=self._engine)
        if cache is not None:
            self._engine.attach_cache(cache)
        self.feature_store = None
        if feature_store is not None:
            self.link(feature_store)

    def link(self, feature_store: FeatureStore) -> None:
        """Hand ``feature_store`` the rows of each batch this sampler gathers, and let its other reads go
        through this sampler's engine (no second engine sampler) when their dtypes agree."""
        self.feature_store = feature_store
        if feature_store._gather is None and feature_store.dtype == self.dtype:
            feature_store._gather = self._engine

    def _batch_seed(self, input_id: torch.Tensor) -> int:
        return (self.seed * 0x9E3779B97F4A7C15 ^ zlib.crc32(input_id.numpy().tobytes())) & (2**63 - 1)

    def _check_caller(self) -> None:
        # PyG's NodeLoader.collate_fn calls sample_from_nodes directly: its `self` is the loader.
        try:
            caller = sys._getframe(2).f_locals.get("self")
        except ValueError:  # called from the outermost frame: no loader
            return
        if _stock_neighbor_loader(caller):
            raise ValueError(
                "flashgnn.pyg.NeighborSampler under torch_geometric.loader.NeighborLoader(..., neighbor_sampler=...): that "
                "loader does not pass num_neighbors, disjoint, replace, subgraph_type, ... to a given sampler, so "
                f"the batches would follow this sampler's num_neighbors={self.num_neighbors} whatever the loader "
                "was asked; use flashgnn.pyg.NeighborLoader with the same arguments (it builds the sampler from "
                "them), or torch_geometric.loader.NodeLoader((fs, gs), node_sampler=sampler)")

    def sample_from_nodes(self, inputs: NodeSamplerInput, **kwargs) -> SamplerOutput:
        self._check_caller()
        if inputs.time is not None:
            raise ValueError("flashgnn.pyg.NeighborSampler: input_time is not supported: temporal sampling needs time "
                             "attributes, which a flashgnn dataset does not store")
        input_id = inputs.input_id if inputs.input_id is not None else torch.arange(inputs.node.numel())
        if self.types is not None:
            return self._sample_typed(inputs, input_id)
        if inputs.input_type is not None:
            raise ValueError(f"flashgnn.pyg.NeighborSampler: input_type={inputs.input_type!r}, but {self.path} is "
                             "homogeneous (one node type): pass node ids, not (node_type, ids)")
        b = self._engine.sample(inputs.node.numpy(), self._batch_seed(input_id.cpu()))
        node = torch.from_numpy(b.n_id)
        if self.feature_store is not None:
            self.feature_store._handoff = _Handoff(node, torch.from_numpy(b.x), torch.from_numpy(b.y))
        return SamplerOutput(
            node=node,
            row=torch.from_numpy(b.row),
            col=torch.from_numpy(b.col),
            edge=None,  # no global edge ids in the store: no e_id (docs/training.md)
            batch=None,
            num_sampled_nodes=[int(v) for v in b.num_sampled_nodes],
            num_sampled_edges=[int(v) for v in b.num_sampled_edges],
            metadata=(input_id, None),
        )

    def _sample_typed(self, inputs: NodeSamplerInput, input_id: torch.Tensor) -> HeteroSamplerOutput:
        tt = self.types
        if inputs.input_type is None:
            raise ValueError(f"flashgnn.pyg.NeighborSampler: {self.path} is a typed dataset: the loader needs "
                             f"input_nodes=(node_type, ids) or a node type; node types: {', '.join(tt.node_types)}")
        try:
            group = tt.node_type(inputs.input_type)
        except KeyError as e:
            raise ValueError(e.args[0]) from None
        seeds = tt.local_ids(group, inputs.node) + tt.offset[group]
        b = self._engine.sample(seeds, self._batch_seed(input_id.cpu()))
        node = {t: torch.from_numpy(p.n_id) for t, p in b.node.items()}
        if self.feature_store is not None:
            opt = lambda a: None if a is None else torch.from_numpy(a)  # noqa: E731
            self.feature_store._handoff = _Handoff(typed={t: (node[t], opt(p.x), opt(p.y))
                                                         for t, p in b.node.items()})
        return HeteroSamplerOutput(
            node=node,
            row={et: torch.from_numpy(p.edge_index[0]) for et, p in b.edge.items()},
            col={et: torch.from_numpy(p.edge_index[1]) for et, p in b.edge.items()},
            edge={et: None for et in b.edge},  # no global edge ids in the store: no e_id
            batch=None,
            num_sampled_nodes={t: [int(v) for v in p.num_sampled_nodes] for t, p in b.node.items()},
            num_sampled_edges={et: [int(v) for v in p.num_sampled_edges] for et, p in b.edge.items()},
            metadata=(input_id, None),
        )

    def sample_from_edges(self, inputs, neg_sampling=None):
        raise NotImplementedError("flashgnn.pyg.NeighborSampler: link-level (edge) sampling is not implemented; use node seeds")


_REMOTE_ACCEPTED = ("dataset", "num_neighbors", "engine", "seed", "dtype", "replace", "subgraph_type", "disjoint",
                    "temporal_strategy", "time_attr", "weight_attr", "directed", "memory_budget", "quiet")


def remote_backend(dataset, num_neighbors=_UNSET, engine: str = "auto", seed: int = 0, dtype=torch.float32,
                   **kwargs):
    """``(feature_store, graph_store, sampler)`` over one dataset, linked so
    that features gathered while sampling serve the loader's feature fetch.
    ``num_neighbors`` (default ``[25, 10]``; ``fanouts`` is its deprecated
    name) and PyG's sampling options go to :class:`NeighborSampler`, which honours or
    refuses them; any other keyword is refused, naming the accepted ones."""
    who = "flashgnn.pyg.remote_backend"
    num_neighbors = _pa.renamed(who, "fanouts", "num_neighbors", kwargs.pop("fanouts", _UNSET), num_neighbors,
                                _UNSET)
    opts = {k: kwargs.pop(k) for k in list(kwargs) if k in _REMOTE_ACCEPTED}
    _pa.refuse_unknown(who, kwargs, _REMOTE_ACCEPTED)
    num_neighbors = [25, 10] if num_neighbors is _UNSET else num_neighbors
    ds = as_dataset(dataset)  # opened once for all three
    if ds.is_typed:  # refused here, under this function's name
        _hetero.hetero_num_neighbors(who, num_neighbors, ds.edge_types)
        _no_typed_budget(who, opts.get("memory_budget", "auto"))
    else:
        _pa.num_neighbors(who, num_neighbors)
    mem = {k: opts[k] for k in ("memory_budget", "quiet") if k in opts}
    # The sampler first: its engine sampler sizes the process's one cache for the dataset (with its fanouts) and
    # then serves the feature store too; the store shares the cache.
    sampler = NeighborSampler(ds, num_neighbors, engine=engine, seed=seed, dtype=dtype, **opts)
    fs = FeatureStore(ds, engine=engine, dtype=dtype, **mem)
    sampler.link(fs)
    return fs, GraphStore(ds), sampler


class _Stores(tuple):
    """``(feature_store, graph_store)`` as PyG's loader keeps it in
    ``loader.data``; asked for an in-memory graph's attributes (what
    ``BasicGNN.inference(loader)`` reads: ``loader.data.num_nodes``,
    ``.x``), it says what to use instead of a bare AttributeError."""

    __slots__ = ()

    def __getattr__(self, name):
        if name.startswith("__"):
            raise AttributeError(name)
        raise AttributeError(
            f"flashgnn.pyg.NeighborLoader: loader.data is (FeatureStore, GraphStore) over {self[1].path}, not an "
            f"in-memory graph, so it has no .{name}: PyG's BasicGNN.inference(loader) reads loader.data.x into "
            f"RAM and cannot run on it; {_INFERENCE_ADVICE}")


# torch.utils.data.DataLoader's keyword arguments (PyG passes them through **kwargs).
_DATALOADER_ARGS = tuple(p for p in inspect.signature(torch.utils.data.DataLoader.__init__).parameters
                         if p not in ("self", "dataset"))


def NeighborLoader(data, num_neighbors=_UNSET, input_nodes=None, input_time=None, replace: bool = False,  # noqa: N802
                   subgraph_type="directional", disjoint: bool = False, temporal_strategy: str = "uniform",
                   time_attr=None, weight_attr=None, transform=None, transform_sampler_output=None,
                   is_sorted: bool = False, filter_per_worker=None, neighbor_sampler=None, directed: bool = True, *,
                   engine: str = "auto", seed: int = 0, dtype=torch.float32, memory_budget="auto",
                   quiet: bool = False, **kwargs) -> _PygNeighborLoader:
    """PyG's own ``torch_geometric.loader.NeighborLoader`` over the remote
    backend — an adapter, not a second loader: it returns the stock loader,
    with every sampling argument handed to :class:`NeighborSampler` (honoured
    with PyG's meaning or refused by name, never dropped as the stock loader
    drops them when given ``neighbor_sampler=``).

        loader = flashgnn.pyg.NeighborLoader("data/demo", num_neighbors=[25, 10], input_nodes=train_idx,
                                             batch_size=1024, shuffle=True, num_workers=2)

    Use it for PyG's own pipeline (DataLoader worker processes,
    ``transform_sampler_output``, ``filter_per_worker``);
    :class:`flashgnn.NeighborLoader` is the loader of this package (producer
    threads in Rust, one engine call per batch, no per-batch Python
    sampling). ``data``: a dataset path, a :class:`flashgnn.Dataset`, or
    ``(fs, gs)`` from :func:`remote_backend`. PyG's defaults
    (``batch_size=1``, ``shuffle=False``); ``input_nodes=None`` means every
    node, as in PyG. ``neighbor_sampler`` may be a :class:`NeighborSampler`
    whose ``num_neighbors`` equal the loader's; ``engine``, ``seed`` and
    ``dtype`` configure the sampler built otherwise. ``fanouts`` is the
    deprecated name of ``num_neighbors``.
    """
    who = "flashgnn.pyg.NeighborLoader"
    num_neighbors = _pa.renamed(who, "fanouts", "num_neighbors", kwargs.pop("fanouts", _UNSET), num_neighbors,
                                _UNSET)
    accepted = ("data", "num_neighbors", "input_nodes", "input_time", "replace", "subgraph_type", "disjoint",
                "temporal_strategy", "time_attr", "weight_attr", "transform", "transform_sampler_output",
                "is_sorted", "filter_per_worker", "neighbor_sampler", "directed", "engine", "seed", "dtype",
                "memory_budget", "quiet", *_DATALOADER_ARGS)
    unknown = {k: v for k, v in kwargs.items() if k not in _DATALOADER_ARGS}
    _pa.refuse_unknown(who, unknown, accepted)
    if isinstance(data, tuple):
        if len(data) != 2 or not isinstance(data[1], GraphStore):
            raise TypeError(f"{who}: data must be a dataset path, a flashgnn.Dataset or (fs, gs) from "
                            "flashgnn.pyg.remote_backend(); got a tuple of "
                            f"{', '.join(type(d).__name__ for d in data)}")
        types = data[1].types
    else:
        types = _types_of(as_dataset(data))
    rel_fanouts = None
    if types is not None:  # a typed dataset: PyG's heterogeneous num_neighbors and input_nodes
        if num_neighbors is _UNSET or num_neighbors is None:
            raise TypeError(f"{who}: num_neighbors is required (a list per hop, or a dict per edge type)")
        rel_fanouts = _hetero.hetero_num_neighbors(who, num_neighbors, types.edge_types)
        input_nodes = _typed_input_nodes(who, input_nodes, types)
        _no_typed_budget(who, memory_budget)
    else:
        num_neighbors = _pa.num_neighbors(who, None if num_neighbors is _UNSET else num_neighbors)
        _pa.check_input_nodes(who, input_nodes)
    _pa.check_sampling(who, replace=replace, subgraph_type=subgraph_type, disjoint=disjoint,
                       temporal_strategy=temporal_strategy, time_attr=time_attr, weight_attr=weight_attr,
                       input_time=input_time, directed=directed)
    if isinstance(data, tuple):
        fs, gs = data
    else:
        ds = as_dataset(data)
        if neighbor_sampler is None:
            # The sampler first: its engine sampler sizes the process's one cache for the dataset with this
            # loader's fanouts and batch size, then serves the feature store's reads too.
            neighbor_sampler = NeighborSampler(ds, num_neighbors, engine=engine, seed=seed, dtype=dtype,
                                               memory_budget=memory_budget, quiet=quiet,
                                               _cache_batch_size=int(kwargs.get("batch_size", 1)))
        fs = FeatureStore(ds, engine=engine, dtype=dtype, memory_budget=memory_budget, quiet=quiet)
        gs = GraphStore(ds)
        if isinstance(neighbor_sampler, NeighborSampler) and neighbor_sampler.feature_store is None:
            neighbor_sampler.link(fs)
    if neighbor_sampler is None:
        neighbor_sampler = NeighborSampler(gs.path, num_neighbors, engine=engine, seed=seed,
                                           feature_store=fs if isinstance(fs, FeatureStore) else None, dtype=dtype,
                                           memory_budget=memory_budget, quiet=quiet)
    elif not isinstance(neighbor_sampler, NeighborSampler):
        raise ValueError(f"{who}: neighbor_sampler={type(neighbor_sampler).__name__} is not a "
                         "flashgnn.pyg.NeighborSampler, so this loader's num_neighbors and sampling options could not "
                         "reach it; use torch_geometric.loader.NodeLoader(data, node_sampler=...) for a sampler "
                         "of your own")
    elif rel_fanouts is not None and neighbor_sampler.rel_fanouts != rel_fanouts:
        raise ValueError(f"{who}: num_neighbors={num_neighbors} ([hop][edge type] {rel_fanouts}) but "
                         f"neighbor_sampler samples {neighbor_sampler.rel_fanouts}; give the same, or leave out "
                         "neighbor_sampler")
    elif rel_fanouts is None and neighbor_sampler.num_neighbors != num_neighbors:
        raise ValueError(f"{who}: num_neighbors={num_neighbors} but neighbor_sampler samples "
                         f"num_neighbors={neighbor_sampler.num_neighbors}; give the same, or leave out "
                         "neighbor_sampler")
    if types is not None:
        pass  # (node_type, tensor), spelled out by _typed_input_nodes
    elif input_nodes is None:  # PyG's meaning: every node (its remote-backend path requires them spelled out)
        input_nodes = torch.arange(gs.num_nodes)
    elif not isinstance(input_nodes, torch.Tensor):
        input_nodes = torch.as_tensor(np.asarray(input_nodes))
    loader = _PygNeighborLoader(_Stores((fs, gs)), num_neighbors=num_neighbors, input_nodes=input_nodes,
                                transform=transform, transform_sampler_output=transform_sampler_output,
                                is_sorted=is_sorted, filter_per_worker=filter_per_worker,
                                neighbor_sampler=neighbor_sampler, **kwargs)
    # The sampler was built from (or checked against) this loader's arguments, so PyG may call it.
    loader._flashgnn_adapter = True
    return loader


def _typed_input_nodes(who: str, input_nodes, types: _Types) -> tuple:
    """PyG's heterogeneous ``input_nodes`` (a node type, or ``(node_type, ids | mask | None)``), checked as
    :class:`flashgnn.NeighborLoader` checks them, as ``(node_type, tensor)`` for PyG's loader: a mask stays a
    mask (PyG's ``input_id`` is then the node id), every other form becomes the ids (None: all the type's)."""
    name, ids, _ = _hetero.hetero_input_nodes(who, input_nodes, types.raw)
    nodes = input_nodes[1] if isinstance(input_nodes, tuple) else None
    if nodes is not None and np.asarray(nodes.cpu() if isinstance(nodes, torch.Tensor) else nodes).dtype == np.bool_:
        return name, torch.as_tensor(np.asarray(nodes.cpu() if isinstance(nodes, torch.Tensor) else nodes))
    return name, torch.from_numpy(ids)


def __getattr__(name):
    if name == "Sampler":  # the old name, beside flashgnn.Sampler (the numpy-level engine sampler)
        import warnings

        warnings.warn("flashgnn.pyg.Sampler is now flashgnn.pyg.NeighborSampler (PyG's name for the class it "
                      "stands in for); the old name goes in the next release", DeprecationWarning, stacklevel=2)
        return NeighborSampler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
