"""Link-prediction mini-batches over a flashgnn dataset, with the arguments,
meanings and batches of PyG's ``torch_geometric.loader.LinkNeighborLoader``.

    loader = flashgnn.LinkNeighborLoader("data/demo", num_neighbors=[15, 10], edge_label_index=train_edges,
                                         neg_sampling=dict(mode="binary", amount=1), batch_size=1024,
                                         shuffle=True)
    for data in loader:            # torch_geometric.data.Data
        h = model(data.x, data.edge_index)
        s, d = data.edge_label_index
        loss = F.binary_cross_entropy_with_logits((h[s] * h[d]).sum(-1), data.edge_label)

One engine request per batch (``crates/flashgnn-sample``, ``link.rs``): the
negatives are drawn next to the data, the endpoints of the positives and
negatives become the batch's seeds (sorted, distinct, as PyG's
``torch.unique``) and are sampled together; pages read to check negatives
against the stored edges serve the sampling pass too.

What PyG's ``edge_sample`` defines, and this loader yields:

- no negatives: ``edge_label_index`` (``[2, B]``, local ids), ``edge_label``
  (the user's, when given);
- ``"binary"``: ``ceil(B * amount)`` random (source, destination) pairs
  appended; ``edge_label`` 1 for positives (float) and 0 for negatives,
  or the user's labels (shifted by one when their minimum is 0, over the
  whole ``edge_label``, as PyG does) and 0;
- ``"triplet"``: ``src_index``, ``dst_pos_index`` (``[B]``) and
  ``dst_neg_index`` (``[B, amount]``, ``[B]`` for amount 1);
  ``edge_label`` must be None;
- ``n_id``, ``x``, ``y``, ``edge_index`` (row = neighbour, col = target),
  ``num_sampled_nodes``, ``num_sampled_edges``, ``input_id`` (positions in
  ``edge_label_index``, or the given ``input_id``). No ``batch_size`` (PyG's
  link batches have none) and no ``e_id`` (a homogeneous dataset keeps no
  global edge numbering).

flashgnn's own options (PyG's defaults keep PyG's behaviour):
``neg_distribution="degree"`` draws negatives with probability proportional
to degree^0.75 (word2vec, PinSage; a 4 B/node table built by one scan of the
slots) instead of uniformly; ``neg_exclude_edges=True`` redraws a negative
that is a stored edge (PyG's negatives may be false negatives);
``exclude_seed_edges=True`` (GraphBolt's name) removes each batch's
positives and their reverses from its own sampled ``edge_index``.

Typed datasets take ``edge_label_index=(edge_type, [2, M] ids within the
source and destination types)``, as PyG's does for ``HeteroData``, and
yield ``HeteroData``: ``input_id``, ``edge_label_index`` and ``edge_label``
on the edge type (binary), ``src_index`` on its source type and
``dst_pos_index``/``dst_neg_index`` on its destination type (triplet);
negatives are drawn within the source and destination types (uniformly,
or with ``neg_distribution="degree"`` by degree^0.75 within the type, a
node's degree being its stored incoming edges of every edge type: an item's
ratings; a user's only when ``--add-reverse`` stored them, else refused by
name);
sources and destinations of two node types are made distinct apart, each
type's ``n_id`` starting with its own sorted seeds (PyG's ``edge_sample``).
``exclude_seed_edges=True`` removes the positives from their edge type's
sampled edges (both directions when its source and destination types are
one) and their reverses from the reverse edge type (``rev_<rel>``, as
``--add-reverse`` names it; ``<rel>`` for a ``rev_<rel>`` type); edges of
other relations between the same nodes stay; ``neg_exclude_edges=True``
checks a negative against its destination's list along the edge type
alone (redrawn within the destination type). Typed batches of a format-4
dataset carry ``e_id`` per edge type.

Memory: the supervision edges are read a group of at most ``GROUP_EDGES``
at a time, so ``edge_label_index`` may be a pair ``(src, dst)`` of
memory-mapped 1-D arrays (``Dataset.link_split("train", mmap=True)``: a
billion-edge split is 16 GB of int64) that is never copied whole; their ids
are then checked group by group as they are read, where an in-memory
``edge_label_index`` is checked whole up front. The epoch order is one
permutation of every position, as PyG's, for up to ``PERMUTATION_EDGES_MAX``
edges; beyond, a block shuffle in bounded memory (``_order``).
"""

from __future__ import annotations

import math
import os
import warnings

import numpy as np
import torch
from torch_geometric.loader import LinkNeighborLoader as _PygLinkNeighborLoader

from flashgnn.loader import _args as _pa
from flashgnn.loader import hetero as _hetero
from flashgnn.loader.neighbor import _UNSET, NeighborLoader, _Base, _epoch_seed, _to_data
from flashgnn.sample.sampler import DEFAULT_DEPTH

NEG_DISTRIBUTIONS = ("uniform", "degree")

# Up to this many supervision edges an epoch's order is one permutation of every position (PyG's
# ``randperm``): 8 B per position, 128 MiB at 2^24 edges. Beyond, the order is a block shuffle whose memory
# does not grow with the edges: the positions in blocks of SHUFFLE_BLOCK consecutive ones, the blocks in a
# random order, SHUFFLE_WINDOW_BLOCKS blocks at a time permuted together. Each edge is still visited once
# per epoch; a batch draws from SHUFFLE_WINDOW_BLOCKS places of the list (a shuffle buffer of 2^20 edges).
# A drawn link split lists its training edges in a random order already (the build sorts the pairs by a
# seeded bijection of their key), so for it nothing is lost.
PERMUTATION_EDGES_MAX = 1 << 24
# 2^16 positions per block: one contiguous read of 512 KiB per int64 array (a memory map reads it ahead).
SHUFFLE_BLOCK = 1 << 16
# 16 blocks = 2^20 edges permuted together: 8 MiB of positions and 16 MiB of (src, dst).
SHUFFLE_WINDOW_BLOCKS = 16
# Supervision edges handed to one engine iterator: 2^20, i.e. 16 MiB of int64 (src, dst) and 8 MiB of
# positions, whatever the number of edges. Batch i of the epoch is sampled with seed base + i in whichever
# group it falls, so the grouping does not change a batch; each new group restarts the prefetch pipeline
# (one batch's latency per 2^20 / batch_size batches).
GROUP_EDGES = 1 << 20
# Telemetry counters summed over an epoch's groups (the others are the last group's).
_ADDITIVE_TELEMETRY = ("reads", "bytes_read", "bytes_used", "cache_static_hits", "cache_dynamic_hits")

# NeighborLoader options a link loader does not take yet, with the reason.
_LINK_REFUSED = {
    "input_nodes": "a link loader's seeds are the endpoints of edge_label_index (and its negatives)",
    "split": "stored splits are node splits: pass the supervision edges as edge_label_index",
    "lookahead": "lookahead does not plan link batches yet",
    "lookahead_budget": "lookahead does not plan link batches yet",
    "device_cache": "the device tier is not wired to link batches yet",
}


def _typed_pair(value) -> bool:
    return isinstance(value, (tuple, list)) and len(value) == 2 and isinstance(value[0], (str, tuple))


def _edge_label_index(who: str, value, num_nodes, types: tuple = ("", "")) -> tuple[np.ndarray, np.ndarray, bool]:
    """``edge_label_index`` as (src, dst, checked): 1-D arrays of M ids, checked against ``num_nodes`` (one
    count, or the source's and the destination's: node types ``types``). A pair of memory-mapped 1-D
    arrays (``np.memmap``) is kept as it is, never read whole: its ids are checked as groups are read
    (``checked`` False). Anything else becomes a ``[2, M]`` int64 array whose every id is checked here."""
    if value is None:
        raise ValueError(f"{who}: edge_label_index=None (every stored edge) is not supported: the edges stay on "
                         "disk; pass the supervision edges as a [2, num_edges] tensor")
    if _typed_pair(value):
        raise ValueError(f"{who}: edge_label_index=({_pa._short(value[0])}, ...) is an (edge_type, edges) pair for "
                         "typed (heterogeneous) graphs; this dataset is homogeneous and takes a [2, num_edges] tensor")
    if (isinstance(value, (tuple, list)) and len(value) == 2
            and all(isinstance(v, np.memmap) for v in value)):
        src, dst = value
        if src.ndim != 1 or dst.ndim != 1 or len(src) != len(dst):
            raise ValueError(f"{who}: edge_label_index = (src, dst) of shapes {tuple(src.shape)} and "
                             f"{tuple(dst.shape)}: expected two 1-D arrays of the same length")
        for v in (src, dst):
            if v.size and v.dtype.kind not in "iu":
                raise TypeError(f"{who}: edge_label_index must hold integer node ids, got dtype {v.dtype}")
        return src, dst, False
    if isinstance(value, torch.Tensor):
        value = value.detach().cpu().numpy()
    a = np.asarray(value)
    if a.ndim != 2 or a.shape[0] != 2:
        raise ValueError(f"{who}: edge_label_index has shape {tuple(a.shape)}: expected [2, num_edges]")
    if a.size and a.dtype.kind not in "iu":
        raise TypeError(f"{who}: edge_label_index must hold integer node ids, got dtype {a.dtype}")
    a = np.ascontiguousarray(a, dtype=np.int64)
    counts = num_nodes if isinstance(num_nodes, tuple) else (num_nodes, num_nodes)
    for r in range(2):
        _check_ids(who, r, a[r], 0, counts[r], type_name=types[r])
    return a[0], a[1], True


def _check_ids(who: str, row: int, ids: np.ndarray, first: int, num_nodes: int, pos: np.ndarray | None = None,
               type_name: str = ""):
    """Refuse an id of ``edge_label_index[row]`` out of ``[0, num_nodes)`` (of node type ``type_name``),
    naming its position: ``first`` plus its index in ``ids``, or ``pos[index]`` when given (ids gathered in a
    shuffled order)."""
    bad = np.flatnonzero((ids < 0) | (ids >= num_nodes))
    if len(bad):
        i = int(bad[0])
        at = int(pos[i]) if pos is not None else first + i
        of = f" of node type {type_name!r}" if type_name else ""
        raise IndexError(f"{who}: edge_label_index[{row}][{at}] = {ids[i]} "
                         f"({('source', 'destination')[row]} node id) out of range [0, {num_nodes}){of}")


def _neg_sampling(who: str, value, ratio):
    """PyG's ``neg_sampling`` (a ``NegativeSampling``, a dict, a
    ``(mode, amount)`` tuple or a mode name) or the deprecated
    ``neg_sampling_ratio`` (binary, which PyG lets win), as (mode, amount) or
    None."""
    if ratio is not None and ratio != 0.0:
        value, arg = {"mode": "binary", "amount": ratio}, "neg_sampling_ratio"
    else:
        arg = "neg_sampling"
    if value is None:
        return None
    fields = {"mode": None, "amount": 1, "src_weight": None, "dst_weight": None}
    if type(value).__name__ == "NegativeSampling":
        fields.update(mode=getattr(value.mode, "value", value.mode), amount=value.amount,
                      src_weight=value.src_weight, dst_weight=value.dst_weight)
    elif isinstance(value, dict):
        unknown = sorted(set(value) - set(fields))
        if unknown:
            raise TypeError(f"{who}: {arg} has unknown key(s) {', '.join(unknown)}; accepted: mode, amount "
                            "(and PyG's src_weight, dst_weight, refused)")
        fields.update(value)
    elif isinstance(value, tuple):
        fields.update(zip(fields, value))
    elif isinstance(value, str):
        fields["mode"] = value
    else:
        raise TypeError(f"{who}: {arg}={_pa._short(value)}: expected dict(mode=..., amount=...) or a "
                        "torch_geometric.sampler.NegativeSampling")
    mode, amount = getattr(fields["mode"], "value", fields["mode"]), fields["amount"]
    if mode not in ("binary", "triplet"):
        raise ValueError(f"{who}: {arg}: mode={mode!r}: expected 'binary' or 'triplet'")
    if isinstance(amount, (bool, np.bool_)) or not isinstance(amount, (int, float, np.integer, np.floating)):
        raise TypeError(f"{who}: {arg}: amount={amount!r} is not a number")
    if not math.isfinite(amount) or amount <= 0:
        raise ValueError(f"{who}: {arg}: amount={amount!r} must be > 0")
    if mode == "triplet":
        if amount != math.ceil(amount):
            raise ValueError(f"{who}: {arg}: amount={amount!r} must be an integer for 'triplet' negative sampling "
                             "(negatives per positive)")
        amount = int(amount)
    for w in ("src_weight", "dst_weight"):
        if fields[w] is not None:
            raise ValueError(f"{who}: {arg}: {w} is not supported: per-node weights would be held in memory; "
                             "neg_distribution='degree' draws by degree^0.75 next to the data")
    if arg == "neg_sampling_ratio":
        warnings.warn(f"{who}: neg_sampling_ratio= is deprecated (as in PyG); use "
                      f"neg_sampling=dict(mode='binary', amount={ratio!r})", DeprecationWarning, stacklevel=3)
    return mode, amount


class LinkNeighborLoader(_Base, _PygLinkNeighborLoader):
    """PyG's ``LinkNeighborLoader`` over a flashgnn dataset (module docs).

    ``LinkNeighborLoader(data, num_neighbors, edge_label_index, edge_label=None,
    ..., neg_sampling=None, neg_sampling_ratio=None, ..., batch_size=1,
    shuffle=False, ...)``: PyG's arguments in PyG's order, with PyG's
    meanings and defaults; those the engine cannot honour (``replace``,
    ``disjoint``, temporal and weighted sampling, ``subgraph_type`` other
    than ``'directional'``, ``neighbor_sampler``, ``transform_sampler_output``,
    ``edge_label_time``, ``NegativeSampling``'s ``src_weight``/``dst_weight``,
    ``edge_label_index=None``) are refused by
    name. The engine options (``engine``, ``prefetch``, ``num_workers``,
    ``cache``, ``memory_budget``, ``dtype``, ``depth``, ``degrees``,
    ``seed``, ``rank``/``world_size``, ``pin_memory``) are
    :class:`flashgnn.NeighborLoader`'s: the loader runs one, over the same
    sampler, cache and budget. Batches are a pure function of (dataset,
    arguments, seed, epoch), whatever the engine or the number of producers.

    The class is a ``torch_geometric.loader.LinkNeighborLoader`` for
    ``isinstance`` checks only (PyG's DataLoader machinery is not run).
    """

    ACCEPTED = ("data", "num_neighbors", "edge_label_index", "edge_label", "edge_label_time", "replace",
                "subgraph_type", "disjoint", "temporal_strategy", "neg_sampling", "neg_sampling_ratio", "time_attr",
                "weight_attr", "transform", "transform_sampler_output", "is_sorted", "filter_per_worker",
                "neighbor_sampler", "directed", "input_id", "batch_size", "shuffle", "drop_last", "num_workers",
                "persistent_workers", "pin_memory", "engine", "prefetch", "seed", "dtype", "depth", "rank",
                "world_size", "equal_shards", "cache", "degrees", "memory_budget", "quiet", "neg_distribution",
                "neg_exclude_edges", "exclude_seed_edges")

    def __init__(self, data=_UNSET, num_neighbors=_UNSET, edge_label_index=None, edge_label=None,
                 edge_label_time=None, replace: bool = False, subgraph_type="directional", disjoint: bool = False,
                 temporal_strategy: str = "uniform", neg_sampling=None, neg_sampling_ratio=None, time_attr=None,
                 weight_attr=None, transform=None, transform_sampler_output=None, is_sorted: bool = False,
                 filter_per_worker=None, neighbor_sampler=None, directed: bool = True, *, input_id=None,
                 batch_size=1, shuffle: bool = False, drop_last: bool = False, num_workers: int = 0,
                 persistent_workers: bool = False, pin_memory: bool = False, engine: str = "auto",
                 prefetch: int = 4, seed: int = 0, dtype=np.float32, depth: int = DEFAULT_DEPTH, rank: int = 0,
                 world_size: int = 1, equal_shards: bool = True, cache=None, degrees: bool = False,
                 memory_budget="auto", quiet: bool = False, neg_distribution: str = "uniform",
                 neg_exclude_edges: bool = False, exclude_seed_edges: bool = False, **kwargs):
        who = "flashgnn.LinkNeighborLoader"
        for k in list(kwargs):
            if k in _LINK_REFUSED:
                raise ValueError(f"{who}: {k}={_pa._short(kwargs[k])} is not supported: {_LINK_REFUSED[k]}")
        _pa.refuse_unknown(who, kwargs, self.ACCEPTED)
        if data is _UNSET:
            raise TypeError(f"{who}: data (a dataset path or flashgnn.Dataset) is required")
        types = _hetero.typed_manifest(data)
        self.edge_type = None  # typed: the supervision edges' (src, rel, dst)
        if types is not None:
            if not _typed_pair(edge_label_index):
                raise ValueError(f"{who}: {getattr(data, 'path', data)} is a typed (heterogeneous) dataset: pass "
                                 "edge_label_index=(edge_type, [2, num_edges] edges), as PyG does for HeteroData")
            edge_types = [(e["src"], e["rel"], e["dst"]) for e in types["edge_types"]]
            self.edge_type = _hetero._edge_key(who, edge_label_index[0], edge_types)
            edge_label_index = edge_label_index[1]
        if edge_label_time is not None:
            raise ValueError(f"{who}: edge_label_time is not supported: temporal sampling needs time attributes, "
                             "which a flashgnn dataset does not store")
        _pa.check_sampling(who, replace=replace, subgraph_type=subgraph_type, disjoint=disjoint,
                           temporal_strategy=temporal_strategy, time_attr=time_attr, weight_attr=weight_attr,
                           directed=directed)
        if neg_distribution not in NEG_DISTRIBUTIONS:
            raise ValueError(f"{who}: neg_distribution={neg_distribution!r}: expected one of "
                             f"{', '.join(NEG_DISTRIBUTIONS)}")
        if isinstance(batch_size, (bool, np.bool_)) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
            raise ValueError(f"batch_size must be > 0 and an integer (as torch's DataLoader asks), got "
                             f"batch_size={batch_size!r}")
        neg = _neg_sampling(who, neg_sampling, neg_sampling_ratio)
        mode, amount = neg if neg is not None else ("none", 1)
        if neighbor_sampler is not None or transform_sampler_output is not None:
            name = "neighbor_sampler" if neighbor_sampler is not None else "transform_sampler_output"
            raise ValueError(f"{who}: {name} is not supported: batches come from the flashgnn engine without a "
                             "SamplerOutput; use transform= (applied to each Data batch)")
        # Seeds per batch at most (every endpoint distinct): what the shared cache's sizing measures.
        per_batch = {"none": 2, "binary": 2 + 2 * amount, "triplet": 2 + amount}[mode]
        # The node loader lends its sampler, cache and engine options; its seeds are never used, so it gets
        # none (input_nodes=None would be every node: an 8 B/node arange, 512 MiB at 2^26 nodes).
        none = np.empty(0, dtype=np.int64)
        self._nodes = NeighborLoader(data, num_neighbors, batch_size=max(1, math.ceil(batch_size * per_batch)),
                                     input_nodes=none if self.edge_type is None else (self.edge_type[0], none),
                                     transform=None, is_sorted=is_sorted, filter_per_worker=filter_per_worker,
                                     num_workers=num_workers, persistent_workers=persistent_workers,
                                     pin_memory=pin_memory, engine=engine, prefetch=prefetch, seed=seed, dtype=dtype,
                                     depth=depth, cache=cache, degrees=degrees, memory_budget=memory_budget,
                                     quiet=quiet)
        if transform is not None and not callable(transform):
            raise TypeError(f"{who}: transform={transform!r} is not callable")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} out of range for world_size {world_size}")
        self._offsets, self._link_type = (0, 0), {}
        if self.edge_type is None:
            n = self._nodes.dataset.num_nodes
            self._counts, self._types = (n, n), ("", "")
        else:
            s_t, _, d_t = self.edge_type
            counts = {t["name"]: int(t["count"]) for t in types["node_types"]}
            self._counts, self._types = (counts[s_t], counts[d_t]), (s_t, d_t)
            ds = self._nodes.dataset
            self._offsets = (ds.type_offset(s_t), ds.type_offset(d_t))
            self._link_type = {"edge_type": edge_types.index(self.edge_type)}
        self._src, self._dst, self._ids_checked = _edge_label_index(who, edge_label_index, self._counts, self._types)
        m = len(self._src)
        if edge_label is not None:
            edge_label = edge_label if isinstance(edge_label, torch.Tensor) else torch.as_tensor(np.asarray(edge_label))
            if edge_label.dim() == 0 or edge_label.size(0) != m:
                got = "a scalar" if edge_label.dim() == 0 else f"{edge_label.size(0):,} entries"
                raise ValueError(f"{who}: edge_label has {got}; edge_label_index has {m:,} edges")
            if mode == "triplet":
                raise ValueError(f"{who}: edge_label must be None for 'triplet' negative sampling (as in PyG): use "
                                 "src_index, dst_pos_index and dst_neg_index of the batch")
            if mode == "binary" and m and edge_label.min() == 0:
                edge_label = edge_label + 1  # PyG: 0 now denotes a negative
        if input_id is not None:
            input_id = input_id if isinstance(input_id, torch.Tensor) else torch.as_tensor(np.asarray(input_id))
            if input_id.dim() != 1 or input_id.size(0) != m:
                raise ValueError(f"{who}: input_id has shape {tuple(input_id.shape)}; edge_label_index has {m:,} "
                                 "edges (expected [num_edges])")
        self.edge_label = edge_label
        self.neg_sampling = None if neg is None else {"mode": mode, "amount": amount}
        self._link = dict(mode=mode, amount=float(amount), weighted=neg_distribution == "degree",
                          exclude_true_edges=bool(neg_exclude_edges), exclude_seed_edges=bool(exclude_seed_edges),
                          **self._link_type)
        self.neg_distribution, self.neg_exclude_edges = neg_distribution, bool(neg_exclude_edges)
        self.exclude_seed_edges = bool(exclude_seed_edges)
        self._given_input_id = input_id
        # _Base's epoch state, over edge positions (no input_nodes: positions are computed by _order, which
        # never holds one per edge beyond PERMUTATION_EDGES_MAX).
        self.dataset, self.path = self._nodes.dataset, self._nodes.path
        self._num_label_edges, self._input_id_is_node = m, False
        self.batch_size, self.shuffle, self.drop_last, self.seed = int(batch_size), shuffle, drop_last, int(seed)
        self.rank, self.world_size, self.equal_shards = int(rank), int(world_size), equal_shards
        self.epoch, self.wait_seconds = 0, 0.0
        self.num_neighbors, self.transform = self._nodes.num_neighbors, transform
        self.num_workers, self.persistent_workers = self._nodes.num_workers, self._nodes.persistent_workers
        self.filter_per_worker, self.is_sorted = filter_per_worker, bool(is_sorted)
        self.sampler, self.cache, self.engine = self._nodes.sampler, self._nodes.cache, self._nodes.engine
        self.telemetry: dict = {}

    @property
    def data(self):
        """The graph without its edges, as :attr:`flashgnn.NeighborLoader.data`."""
        return self._nodes.data

    @property
    def edge_label_index(self) -> np.ndarray:
        """The supervision edges as a ``[2, M]`` int64 array (read whole from a memory-mapped pair)."""
        return np.stack([np.asarray(self._src, dtype=np.int64), np.asarray(self._dst, dtype=np.int64)])

    def _rank_edges(self) -> int:
        """How many supervision edges this rank visits per epoch (``_Base._positions``'s count)."""
        m, w = self._num_label_edges, self.world_size
        if w == 1:
            return m
        total = m - m % w if self.equal_shards else m
        return len(range(self.rank, total, w))

    def __len__(self) -> int:
        n = self._rank_edges()
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _gather(self, pos: np.ndarray, lo: int | None = None):
        """(src, dst) of positions ``pos``, int64; ``lo`` given: ``pos`` is the range ``lo ..`` (a slice)."""
        if lo is not None:
            s, d = self._src[lo:lo + len(pos)], self._dst[lo:lo + len(pos)]
        else:
            s, d = self._src[pos], self._dst[pos]
        return np.asarray(s, dtype=np.int64), np.asarray(d, dtype=np.int64)

    def _order(self, epoch: int):
        """The epoch's order over every position (before sharding), as chunks ``(pos, src, dst)``: in place
        without ``shuffle``; one permutation of every position (``_Base._positions``'s, so batches are what
        they were) up to ``PERMUTATION_EDGES_MAX`` edges; a block shuffle beyond (module constants)."""
        m = self._num_label_edges
        if not self.shuffle:
            for lo in range(0, m, GROUP_EDGES):
                pos = np.arange(lo, min(lo + GROUP_EDGES, m), dtype=np.int64)
                yield (pos, *self._gather(pos, lo))
            return
        rng = np.random.default_rng([self.seed & (2**63 - 1), epoch])
        if m <= PERMUTATION_EDGES_MAX:
            perm = rng.permutation(m)
            for lo in range(0, m, GROUP_EDGES):
                pos = perm[lo:lo + GROUP_EDGES]
                yield (pos, *self._gather(pos))
            return
        blocks = rng.permutation(-(-m // SHUFFLE_BLOCK))
        for w in range(0, len(blocks), SHUFFLE_WINDOW_BLOCKS):
            parts = [(int(b) * SHUFFLE_BLOCK, min((int(b) + 1) * SHUFFLE_BLOCK, m))
                     for b in blocks[w:w + SHUFFLE_WINDOW_BLOCKS]]
            pos = np.concatenate([np.arange(lo, hi, dtype=np.int64) for lo, hi in parts])
            s = np.concatenate([np.asarray(self._src[lo:hi], dtype=np.int64) for lo, hi in parts])
            d = np.concatenate([np.asarray(self._dst[lo:hi], dtype=np.int64) for lo, hi in parts])
            perm = rng.permutation(len(pos))
            yield pos[perm], s[perm], d[perm]

    def _groups(self, epoch: int):
        """This rank's share of :meth:`_order` (``_Base._positions``'s sharding: equal shards cut the order
        to a multiple of world_size, rank r takes every world_size-th position from r), regrouped into
        ``(pos, src, dst, last)`` of a multiple of ``batch_size`` edges (about ``GROUP_EDGES``), ids checked
        where the input was not."""
        w, r, m = self.world_size, self.rank, self._num_label_edges
        total = m - m % w if (w > 1 and self.equal_shards) else m
        want = max(1, GROUP_EDGES // self.batch_size) * self.batch_size
        held, size, g = [], 0, 0  # chunks waiting, their edges, global index of the next chunk
        for pos, s, d in self._order(epoch):
            if w > 1:
                keep = slice((r - g) % w, max(0, total - g), w)
                g += len(pos)
                pos, s, d = pos[keep], s[keep], d[keep]
            if not self._ids_checked:
                _check_ids("flashgnn.LinkNeighborLoader", 0, s, 0, self._counts[0], pos, self._types[0])
                _check_ids("flashgnn.LinkNeighborLoader", 1, d, 0, self._counts[1], pos, self._types[1])
            held.append((pos, s, d))
            size += len(pos)
            while size >= want:
                cat = [np.concatenate(x) for x in zip(*held)]
                # Hand out one full group, keep the rest; `last` only when nothing can follow.
                held, size = [tuple(c[want:] for c in cat)], size - want
                yield (*(c[:want] for c in cat), False)
        cat = [np.concatenate(x) for x in zip(*held)] if held else None
        if cat is not None and len(cat[0]):
            yield (*cat, True)
        else:
            yield (np.empty(0, np.int64), np.empty(0, np.int64), np.empty(0, np.int64), True)

    def _batches(self, epoch: int):
        """``(batch, positions)`` over the epoch: one engine iterator per group, batch i seeded
        ``base + i`` across groups (:meth:`flashgnn.Sampler.iter_link_batches`)."""
        base, done, tel = _epoch_seed(self.seed, epoch), 0, {}
        for pos, s, d, last in self._groups(epoch):
            if not len(pos) and done:
                break
            # The engine's ids are global: a typed dataset's types start at their offsets.
            it = self.sampler.iter_link_batches(s + self._offsets[0], d + self._offsets[1], self.batch_size,
                                                seed=base + done,
                                                prefetch=self._nodes.prefetch,
                                                drop_last=self.drop_last and last, workers=self._nodes.workers,
                                                **self._link)
            try:
                for i, b in enumerate(it):
                    yield b, pos[i * self.batch_size : i * self.batch_size + b.link.num_pos]
                    done += 1
            finally:
                it.close()
                g = dict(getattr(self.sampler, "last_iter_telemetry", {}) or {})
                for k in _ADDITIVE_TELEMETRY:
                    if k in g and k in tel and g[k] is not None and tel[k] is not None:
                        g[k] += tel[k]
                tel = g
                self.telemetry = tel

    def _batch(self, b, pos: np.ndarray):
        """A link batch as PyG's ``LinkLoader.filter_fn`` builds it: on a typed dataset the link fields of the
        edge type (``input_id``, ``edge_label_index``, ``edge_label``) or, triplet, of its source and
        destination node types (``src_index``; ``dst_pos_index``, ``dst_neg_index``)."""
        input_id = pos if self._given_input_id is None else self._given_input_id[torch.from_numpy(pos)].numpy()
        input_id = np.ascontiguousarray(input_id)
        if self.edge_type is None:
            d = _to_data(b, input_id, self._nodes.pin_memory)
            del d.batch_size  # PyG's link batches carry none
            src_store = dst_store = edge_store = d
        else:
            d = _hetero.to_hetero_data(b, input_id, self._nodes.pin_memory)
            del d[b.input_type].batch_size, d[b.input_type].input_id  # a node batch's; a link batch's are below
            edge_store, src_store, dst_store = d[self.edge_type], d[self.edge_type[0]], d[self.edge_type[-1]]
            edge_store.input_id = torch.from_numpy(input_id)
        lk = b.link
        p = lk.num_pos
        index = torch.from_numpy(lk.index)
        mode = self._link["mode"]
        if mode == "triplet":
            src_store.src_index = index[:p]
            dst_store.dst_pos_index = index[p:2 * p]
            dst_store.dst_neg_index = index[2 * p:].view(p, -1).squeeze(-1)
            return d
        edge_store.edge_label_index = index.view(2, -1)
        label = None if self.edge_label is None else self.edge_label[torch.from_numpy(pos)]
        if mode == "binary":
            if label is None:
                label = torch.ones(p)
            label = torch.cat([label, label.new_zeros((len(lk.dst_neg),) + label.size()[1:])])
        if label is not None:
            edge_store.edge_label = label
        return d

    def __iter__(self):
        epoch = self._next_epoch()
        it = self._batches(epoch)
        try:
            for b, p in self._timed(it):
                d = self._batch(b, p)
                yield d if self.transform is None else self.transform(d)
        finally:
            it.close()

    def sample_edges(self, edge_label_index, seed: int = 0):
        """One batch for explicit supervision edges (``[2, B]``), drawn as the
        loader's batches are; ``input_id`` = 0..B-1."""
        if self.edge_label is not None:
            raise ValueError("LinkNeighborLoader.sample_edges: the loader's edge_label belongs to its "
                             "edge_label_index; sample_edges takes edges without labels")
        src, dst, _ = _edge_label_index("LinkNeighborLoader.sample_edges", edge_label_index, self._counts,
                                        self._types)
        b = self.sampler.sample_link(src + self._offsets[0], dst + self._offsets[1], seed, **self._link)
        d = self._batch(b, np.arange(len(src), dtype=np.int64))
        return d if self.transform is None else self.transform(d)

    def __repr__(self) -> str:
        return f"{self.__class__.__name__}({os.fspath(self.path)!r})"
