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
from torch_geometric.sampler import BaseSampler, NodeSamplerInput, SamplerOutput
from torch_geometric.sampler.base import SubgraphType

from flashgnn.loader import _args as _pa
from flashgnn.loader.neighbor import _INFERENCE_ADVICE, _UNSET, as_dataset, resolve_engine
from flashgnn.sample.shared import shared_cache
from flashgnn.sample.sampler import DEFAULT_DEPTH
from flashgnn.sample.sampler import Sampler as _EngineSampler

_GATHER_CHUNK = 1 << 16  # ids per engine call when a caller asks for a huge index


@dataclass
class _Handoff:
    """The last batch the sampler gathered in this process (n_id, x, y)."""

    n_id: torch.Tensor | None = None
    x: torch.Tensor | None = None
    y: torch.Tensor | None = None


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
        # The process's one cache for this dataset (shared with the sampler and any loader on it); a
        # process this store is pickled into reads uncached (the cache is process-local).
        self._cache = shared_cache(ds, [0], 1024, memory_budget, quiet=quiet, who="flashgnn.pyg")
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

    def _lookup(self, attrs: list[TensorAttr]) -> list[torch.Tensor]:
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
        if attr.attr_name == "x":
            return (self.num_nodes, self.feature_dim)
        if attr.attr_name == "y":
            return (self.num_nodes,)
        return None

    def get_all_tensor_attrs(self) -> list[TensorAttr]:
        # Fresh objects each call: the loader sets ``attr.index`` on them.
        attrs = [TensorAttr(group_name=None, attr_name="x")]
        if self.has_labels:
            attrs.append(TensorAttr(group_name=None, attr_name="y"))
        return attrs


class GraphStore(_PygGraphStore):
    """Describes the stored graph as one CSC edge type ``(N, N)``; never loads it."""

    def __init__(self, dataset):
        super().__init__()
        ds = as_dataset(dataset)
        self.path = ds.path
        self.num_nodes, self.num_edges = ds.num_nodes, ds.num_edges

    def get_all_edge_attrs(self) -> list[EdgeAttr]:
        return [EdgeAttr(edge_type=None, layout="csc", is_sorted=True, size=(self.num_nodes, self.num_nodes))]

    def _get_edge_index(self, edge_attr: EdgeAttr):
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
        self.num_neighbors = _pa.num_neighbors(who, None if num_neighbors is _UNSET else num_neighbors)
        _pa.check_sampling(who, replace=replace, subgraph_type=subgraph_type, disjoint=disjoint,
                           temporal_strategy=temporal_strategy, time_attr=time_attr, weight_attr=weight_attr,
                           directed=directed)
        # What the engine does, under PyG's NeighborSampler attribute names.
        self.replace, self.disjoint, self.subgraph_type = False, False, SubgraphType.directional
        self.path = as_dataset(dataset).path
        self.fanouts = self.num_neighbors  # the engine's name, kept for callers of the old attribute
        self.engine = resolve_engine(engine)
        self.seed = int(seed)
        self.dtype = dtype
        np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
        # One engine sampler: it measures the batches and picks the hot set of the process's shared cache
        # when this is the first user of the dataset, samples, and serves the linked feature store's reads.
        self._engine = _EngineSampler(self.path, self.fanouts, engine=self.engine, depth=depth, dtype=np_dtype)
        cache = shared_cache(self.path, self.fanouts, cache_batch, memory_budget, quiet=quiet, who="flashgnn.pyg",
                             sampler=self._engine)
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
    _pa.num_neighbors(who, num_neighbors)  # refused here, under this function's name
    ds = as_dataset(dataset)  # opened once for all three
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
    num_neighbors = _pa.num_neighbors(who, None if num_neighbors is _UNSET else num_neighbors)
    _pa.check_input_nodes(who, input_nodes)
    _pa.check_sampling(who, replace=replace, subgraph_type=subgraph_type, disjoint=disjoint,
                       temporal_strategy=temporal_strategy, time_attr=time_attr, weight_attr=weight_attr,
                       input_time=input_time, directed=directed)
    if isinstance(data, tuple):
        if len(data) != 2 or not isinstance(data[1], GraphStore):
            raise TypeError(f"{who}: data must be a dataset path, a flashgnn.Dataset or (fs, gs) from "
                            "flashgnn.pyg.remote_backend(); got a tuple of "
                            f"{', '.join(type(d).__name__ for d in data)}")
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
    elif neighbor_sampler.num_neighbors != num_neighbors:
        raise ValueError(f"{who}: num_neighbors={num_neighbors} but neighbor_sampler samples "
                         f"num_neighbors={neighbor_sampler.num_neighbors}; give the same, or leave out "
                         "neighbor_sampler")
    if input_nodes is None:  # PyG's meaning: every node (its remote-backend path requires them spelled out)
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


def __getattr__(name):
    if name == "Sampler":  # the old name, beside flashgnn.Sampler (the numpy-level engine sampler)
        import warnings

        warnings.warn("flashgnn.pyg.Sampler is now flashgnn.pyg.NeighborSampler (PyG's name for the class it "
                      "stands in for); the old name goes in the next release", DeprecationWarning, stacklevel=2)
        return NeighborSampler
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
