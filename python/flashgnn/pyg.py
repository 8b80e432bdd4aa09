"""PyG remote backend: a flashgnn dataset behind stock PyG loaders.

    fs, gs, sampler = flashgnn.pyg.remote_backend("data/demo", fanouts=[25, 10])
    loader = torch_geometric.loader.NodeLoader((fs, gs), node_sampler=sampler,
                                               input_nodes=train_idx, batch_size=1024, num_workers=2)

- :class:`GraphStore` describes the graph (one homogeneous CSC edge type of
  size N x N) but never materialises it: ``get_edge_index`` refuses, because
  PyG's own ``NeighborSampler`` would pull every edge into RAM (and needs
  pyg-lib or torch-sparse, which do not exist here). Sampling is
  :class:`Sampler`'s job.
- :class:`Sampler` (a ``torch_geometric.sampler.BaseSampler``) samples with the
  flashgnn engine: one call per mini-batch that reads each needed page once,
  samples the k-hop subgraph out of order and gathers the features and labels
  of every sampled node in the same pass.
- :class:`FeatureStore` serves ``x`` and ``y``. PyG asks it for the sampled
  nodes' features right after sampling, in the same process
  (``filter_per_worker``): when the index is the batch the linked sampler just
  produced, the rows it already gathered are returned with no further I/O.
  Any other index is read with one batched engine call (deep-queue direct
  I/O), so each mini-batch costs exactly one batched read either way.

Everything opens lazily per process, so the three objects pickle into
DataLoader workers (``num_workers > 0``, fork or spawn).
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass

import numpy as np
import torch
from torch_geometric.data import EdgeAttr, TensorAttr
from torch_geometric.data import FeatureStore as _PygFeatureStore
from torch_geometric.data import GraphStore as _PygGraphStore
from torch_geometric.sampler import BaseSampler, NodeSamplerInput, SamplerOutput

from flashgnn.loader import as_dataset, resolve_engine
from flashgnn.sampler import Sampler as _EngineSampler

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

    def __init__(self, dataset, engine: str = "auto", dtype=torch.float32, depth: int = 256):
        super().__init__()
        ds = as_dataset(dataset)
        self.path = ds.path
        self.num_nodes, self.feature_dim = ds.num_nodes, ds.feature_dim
        self.has_labels = bool(ds.manifest.get("labels"))
        self.engine, self.dtype, self.depth = resolve_engine(engine), dtype, depth
        self._gather: _EngineSampler | None = None
        self._handoff = _Handoff()
        self.gather_calls = 0  # batched engine reads issued by this store (not the sampler's)

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_gather"] = None
        return state

    def _gatherer(self) -> _EngineSampler:
        if self._gather is None:
            np_dtype = torch.empty(0, dtype=self.dtype).numpy().dtype
            self._gather = _EngineSampler(self.path, [0], engine=self.engine, depth=self.depth, dtype=np_dtype)
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
            b = g.sample(ids[lo : lo + _GATHER_CHUNK], 0)
            self.gather_calls += 1
            xs.append(torch.from_numpy(b.x))
            ys.append(torch.from_numpy(b.y))
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
            "neighbor_sampler=/node_sampler=flashgnn.pyg.Sampler(...) — see flashgnn.pyg.remote_backend()"
        )

    def _put_edge_index(self, edge_index, edge_attr: EdgeAttr) -> bool:
        raise NotImplementedError(f"{self.path}: flashgnn.pyg.GraphStore is read-only; use `flashgnn build`")

    def _remove_edge_index(self, edge_attr: EdgeAttr) -> bool:
        raise NotImplementedError(f"{self.path}: flashgnn.pyg.GraphStore is read-only")


class Sampler(BaseSampler):
    """k-hop uniform neighbor sampling by the flashgnn engine, for PyG's
    ``NodeLoader`` / ``NeighborLoader(neighbor_sampler=...)``.

    Each batch's randomness is a function of ``seed`` and the batch's
    ``input_id``s, so a run is reproducible whatever the worker count.
    """

    def __init__(self, dataset, fanouts, engine: str = "auto", seed: int = 0, feature_store: FeatureStore | None = None,
                 dtype=torch.float32, depth: int = 256):
        self.path = as_dataset(dataset).path
        self.fanouts = [int(f) for f in fanouts]
        self.engine = resolve_engine(engine)
        self.seed = int(seed)
        self.feature_store = feature_store
        np_dtype = torch.empty(0, dtype=dtype).numpy().dtype
        self._engine = _EngineSampler(self.path, self.fanouts, engine=self.engine, depth=depth, dtype=np_dtype)

    def _batch_seed(self, input_id: torch.Tensor) -> int:
        return (self.seed * 0x9E3779B97F4A7C15 ^ zlib.crc32(input_id.numpy().tobytes())) & (2**63 - 1)

    def sample_from_nodes(self, inputs: NodeSamplerInput, **kwargs) -> SamplerOutput:
        if inputs.time is not None:
            raise ValueError("flashgnn.pyg.Sampler: temporal sampling (input_time) is not supported")
        input_id = inputs.input_id if inputs.input_id is not None else torch.arange(inputs.node.numel())
        b = self._engine.sample(inputs.node.numpy(), self._batch_seed(input_id.cpu()))
        node = torch.from_numpy(b.n_id)
        if self.feature_store is not None:
            self.feature_store._handoff = _Handoff(node, torch.from_numpy(b.x), torch.from_numpy(b.y))
        return SamplerOutput(
            node=node,
            row=torch.from_numpy(b.row),
            col=torch.from_numpy(b.col),
            edge=None,
            batch=None,
            num_sampled_nodes=[int(v) for v in b.num_sampled_nodes],
            num_sampled_edges=[int(v) for v in b.num_sampled_edges],
            metadata=(input_id, None),
        )

    def sample_from_edges(self, inputs, neg_sampling=None):
        raise NotImplementedError("flashgnn.pyg.Sampler: link-level (edge) sampling is not implemented; use node seeds")


def remote_backend(dataset, fanouts=(25, 10), engine: str = "auto", seed: int = 0, dtype=torch.float32):
    """``(feature_store, graph_store, sampler)`` over one dataset, linked so
    that features gathered while sampling serve the loader's feature fetch."""
    ds = as_dataset(dataset)  # opened once for all three
    fs = FeatureStore(ds, engine=engine, dtype=dtype)
    gs = GraphStore(ds)
    sampler = Sampler(ds, fanouts, engine=engine, seed=seed, feature_store=fs, dtype=dtype)
    return fs, gs, sampler
