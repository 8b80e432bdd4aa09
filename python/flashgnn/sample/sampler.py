"""`flashgnn.Sampler`: one call per mini-batch over a dataset on disk.

    s = flashgnn.Sampler("data/demo", fanouts=[25, 10], engine="uring")
    b = s.sample(seeds, seed=0)        # SampledBatch of numpy arrays
    for b in s.iter_batches(order, batch_size=1024, seed=0, prefetch=4): ...

Engines: ``uring`` (io_uring + O_DIRECT, ours), ``pread`` (synchronous
O_DIRECT), ``pread-pool`` (thread pool; automatic fallback when io_uring is
blocked), ``mmap`` (page cache, MADV_RANDOM), ``mmap-default`` (page cache,
readahead), ``memory`` (dataset in RAM). All return identical batches.

A :class:`Cache` (cross-batch DRAM cache: static hot set + S3-FIFO/CLOCK
dynamic part under one byte budget) can be shared by samplers: pass
``cache=`` — batches are identical with or without it.

Fork safety: the Rust sampler (ring, thread pool) is opened lazily in each
process, so a Sampler pickled into or inherited by DataLoader workers works.
"""

from __future__ import annotations

import os
from dataclasses import dataclass

import numpy as np

from flashgnn import _core

_NP = {"float16": np.float16, "float32": np.float32, "float64": np.float64}
ENGINES = tuple(_core.ENGINES)  # owned by flashgnn_io::engine::EngineKind::ALL
# What the user-facing `engine=` arguments accept: `auto` (the engine's own choice, see
# flashgnn.loader.neighbor.resolve_engine) or one of ENGINES.
ENGINE_CHOICES = ("auto", *ENGINES)
DEFAULT_DEPTH = _core.DEFAULT_DEPTH  # reads in flight (flashgnn_io::engine::DEFAULT_DEPTH, its derivation there)
DEFAULT_POOL_THREADS = _core.DEFAULT_POOL_THREADS  # pread-pool threads (flashgnn_io::engine)
# Share of a cache budget for the static hot set: owned by flashgnn_sample::tiers
# (the measurements behind 0.9 are documented there).
DEFAULT_HOT_FRACTION = _core.DEFAULT_HOT_FRACTION
# How a cache's static hot set may hold float32 rows (Cache(row_codec=...)).
ROW_CODECS = tuple(_core.ROW_CODECS)


@dataclass
class SampledBatch:
    """A mini-batch in PyG order: ``n_id[:batch_size]`` are the seeds;
    ``edge_index`` (``[2, E]`` int64) is local with row = neighbor, col =
    target. Every array is the one the engine wrote, in its final shape and
    dtype: nothing is copied between the engine and ``torch.from_numpy``."""

    n_id: np.ndarray
    edge_index: np.ndarray
    num_sampled_nodes: np.ndarray
    num_sampled_edges: np.ndarray
    x: np.ndarray
    y: np.ndarray
    batch_size: int
    # With a DeviceCache: per node, its row of the device table (x's row is
    # then zeros; DeviceCache.gather fills it on the device), or -1.
    resident: np.ndarray | None = None
    # With features="free": positions in n_id whose row was not gathered;
    # x is packed then (the other rows, in order) — the lookahead stage
    # fills them (flashgnn.loader.window) into expanded_x().
    missing: np.ndarray | None = None
    # With degrees=True: per node, its degree in the whole graph (the stored
    # neighbor count of its slot), int64.
    deg: np.ndarray | None = None
    # A link batch's endpoints and negatives (Sampler.sample_link), None for a node batch.
    link: LinkPart | None = None

    @property
    def row(self) -> np.ndarray:
        """The neighbor end of every edge (a view of ``edge_index[0]``)."""
        return self.edge_index[0]

    @property
    def col(self) -> np.ndarray:
        """The target end of every edge (a view of ``edge_index[1]``)."""
        return self.edge_index[1]

    def expanded_x(self) -> np.ndarray:
        """``x`` with one row per ``n_id``: a packed ``x`` (``features="free"``)
        gets zero rows at the ``missing`` positions; otherwise ``x`` itself."""
        if self.missing is None or len(self.x) == len(self.n_id):
            return self.x
        return expand_packed(self.x, len(self.n_id), self.missing, np.zeros)


@dataclass
class LinkPart:
    """A link batch's part (``flashgnn_sample::link``): ``index`` is the
    local id (into ``n_id``) of every endpoint in PyG's order — ``[src,
    src_neg, dst, dst_neg]`` (binary, or no negatives) or ``[src, dst,
    dst_neg]`` (triplet); ``src_neg``/``dst_neg`` the negatives drawn
    (original ids); ``num_pos`` the positives; ``redrawn`` negatives that
    were stored edges and were drawn again, ``false_negatives`` those still
    stored edges after the round limit; ``seed_edges_removed`` sampled
    edges removed as positives or their reverses."""

    index: np.ndarray
    src_neg: np.ndarray
    dst_neg: np.ndarray
    num_pos: int
    redrawn: int
    false_negatives: int
    seed_edges_removed: int


@dataclass
class NodeTypePart:
    """One node type's part of a :class:`TypedBatch`: ``n_id`` local ids
    (within the type; seeds first for the input type), ``x`` ``[N, dim]``
    (None for a type without features), ``y`` (None without labels),
    ``num_sampled_nodes`` per hop (``hops + 1``)."""

    n_id: np.ndarray
    x: np.ndarray | None
    y: np.ndarray | None
    num_sampled_nodes: np.ndarray


@dataclass
class EdgeTypePart:
    """One edge type's part of a :class:`TypedBatch`: ``edge_index``
    ``[2, E]`` int64, row = index into the source type's ``n_id``, col =
    into the destination type's; ``num_sampled_edges`` per hop; ``e_id``
    ``[E]`` int64, each edge's position in its edge type's stored edge list
    (the order of ``flashgnn.to_pyg``'s ``edge_index``; None for a dataset written
    before format version 4)."""

    edge_index: np.ndarray
    num_sampled_edges: np.ndarray
    e_id: np.ndarray | None = None


@dataclass
class TypedBatch:
    """A typed dataset's mini-batch: per node type (by name) and per edge
    type (``(src, rel, dst)``) parts, every array the engine's own (no
    copy). ``input_type`` is the seeds' node type."""

    input_type: str
    batch_size: int
    node: dict
    edge: dict
    # A link batch's part (LinkPart; local ids are within the endpoint's node type), else None.
    link: object = None


def expand_packed(x: np.ndarray, n: int, missing: np.ndarray, alloc=np.empty) -> np.ndarray:
    """A packed ``x`` (the rows of the positions not in ``missing``, in order)
    spread over ``n`` rows; the ``missing`` rows are as ``alloc`` leaves them
    (``np.empty``: for a caller that writes every one of them)."""
    if len(x) + len(missing) != n:
        raise ValueError(f"packed x has {len(x)} rows, {len(missing)} missing, for {n} nodes")
    full = alloc((n, x.shape[1]), x.dtype)
    have = np.ones(n, bool)
    have[missing] = False
    full[have] = x
    return full


def resolve_hot(path, hot: str) -> str:
    """``"auto"`` (the default hot-set choice) → ``"touches"`` on a homogeneous dataset, ``"degree"`` on a typed one
    (touches' propagation follows one fanout over untyped lists); any other name as given."""
    if hot != "auto":
        return hot
    from flashgnn.store.dataset import Dataset

    return "degree" if Dataset(path).is_typed else "touches"


class Cache:
    """Cross-batch DRAM cache of pages and feature rows under ``budget`` bytes.

    ``hot_fraction`` of the budget holds a static hot set chosen by ``hot``:
    ``"touches"`` (the chance that a batch of ``batch_size`` seeds asks for
    each slot or page under ``fanouts``, propagated over the stored lists in
    ``len(fanouts) + 2`` scans; seeds drawn from ``presample_seeds`` when
    given, e.g. the train split, else from every node), ``"degree"`` (one
    sequential scan; nodes ranked by degree), ``"presample"`` (access
    counts over batches of ``presample_seeds``), ``"none"``, or ``"auto"``
    (the default: touches, or degree on a typed dataset; on data/ooc with a
    tenth of the data cached, touches reads about half what degree does,
    docs/benchmarks.md); the rest is a dynamic part under
    ``policy`` (``"s3fifo"``, the default, or ``"clock"``). The default
    ``hot_fraction`` is 1.0: on data/ooc the whole budget as a static set
    reads less than a dynamic share does (docs/benchmarks.md). Any budget,
    including 0, gives identical batches. Process-local: a forked DataLoader
    worker runs uncached.

    ``row_codec``: ``"fp16"``, ``"int8"`` or ``"int4"`` holds the static
    set's float32 rows encoded (a homogeneous dataset's inline rows inside
    their cached slots, separate rows alone; a typed dataset's rows per
    type), two, almost four or about seven times as many in the same bytes;
    batches then carry the decoded values (fp16: relative error <= 2**-11;
    int8: per-row scale, error <= max|row| / 254; int4: a scale per group of
    32 values, error <= max|group| / 14), so it is opt-in. ``"none"`` (the default)
    holds rows as stored."""

    def __init__(self, path, fanouts, budget: int, policy: str = "s3fifo", hot: str = "auto",
                 hot_fraction: float = DEFAULT_HOT_FRACTION, presample_seeds=None, batch_size: int = 1024,
                 engine: str = "uring", depth: int = DEFAULT_DEPTH, row_codec: str = "none"):
        seeds = None if presample_seeds is None else np.ascontiguousarray(presample_seeds, dtype=np.int64)
        self.budget, self.row_codec = int(budget), row_codec
        hot = resolve_hot(path, hot)
        self._core = _core.Cache(os.fspath(path), [int(f) for f in fanouts], self.budget, policy, hot,
                                 float(hot_fraction), seeds, int(batch_size), engine, int(depth), row_codec)

    @classmethod
    def for_sampler(cls, sampler: "Sampler", budget: int, policy: str = "s3fifo", hot: str = "auto",
                    hot_fraction: float = DEFAULT_HOT_FRACTION, presample_seeds=None, batch_size: int = 1024,
                    row_codec: str = "none") -> "Cache":
        """A cache whose hot set is chosen through ``sampler`` (its dataset,
        fanouts and engine) instead of a sampler of its own; attach it with
        :meth:`Sampler.attach_cache`. What a loader does: one engine sampler
        measures its batches, picks the hot set and then samples."""
        seeds = None if presample_seeds is None else np.ascontiguousarray(presample_seeds, dtype=np.int64)
        hot = resolve_hot(sampler.path, hot)
        self = cls.__new__(cls)
        self.budget, self.row_codec = int(budget), row_codec
        self._core = _core.Cache.for_sampler(sampler.core(), self.budget, policy, hot, float(hot_fraction), seeds,
                                             int(batch_size), row_codec)
        return self

    def stats(self) -> dict:
        """Budget, static/dynamic bytes, hits per tier, misses, evictions."""
        return self._core.stats()

    def __getstate__(self):
        raise TypeError("flashgnn.Cache is process-local and cannot be pickled; samplers in other processes run "
                        "uncached")


class Sampler:
    def __init__(self, path, fanouts, engine: str = "uring", depth: int = DEFAULT_DEPTH, pool_threads: int = DEFAULT_POOL_THREADS,
                 labels: bool = True, dtype=None, features: bool | str = True, cache: Cache | None = None, graph=None,
                 device_cache=None, degrees: bool = False, rel_fanouts=None):
        """``dtype``: None keeps the stored feature dtype; e.g. ``np.float32``
        converts float16-stored features per batch, in the engine as rows are
        gathered (on the producer threads, never the consumer's).
        ``features=False``: structure and labels only; ``x`` is empty
        (shape ``(0, feature_dim)``) and no read is spent on feature rows.
        ``features="free"``: only the rows that come with the structure's own
        reads (an expanded node's inline slot); no read is spent on a row
        alone, whose positions are listed in ``SampledBatch.missing``; ``x``
        is then packed (only the rows of the other positions, in order: a
        batch waiting in the lookahead window holds no zero rows) and
        :meth:`SampledBatch.expanded_x` gives the full table — the structure
        stage of lookahead (:mod:`flashgnn.loader.window`).
        A mutated dataset (``DATASET/mut/``) is read as its current
        generation plus its replayed log; ``graph=`` (a live
        :class:`flashgnn.MutableGraph`) takes a fresh snapshot per batch.
        ``device_cache``: a :class:`flashgnn.DeviceCache` (GPU tier); its rows
        are not read, batches carry ``resident`` and ``DeviceCache.gather``
        builds ``x`` on the device. Its table dtype must equal ``dtype``.
        ``degrees=True``: batches carry ``deg``, every node's degree in the
        whole graph (read from its slot: last-hop nodes, never expanded,
        then cost a slot read each unless their features are inline) — what
        :class:`flashgnn.nn.GCN` normalises by.
        ``rel_fanouts`` (typed datasets): fanouts per hop and edge type
        (``[hop][edge type]``, edge types in :attr:`types` order, as many
        hops as ``fanouts``); without it every edge type draws
        ``fanouts[h]``. A typed dataset's batches are :class:`TypedBatch`."""
        if engine not in ENGINES:
            raise ValueError(f"engine {engine!r}: expected one of {', '.join(ENGINES)}")
        self.path = os.fspath(path)
        self.fanouts = [int(f) for f in fanouts]
        self.engine = engine
        self.depth = depth
        self.pool_threads = pool_threads
        self.labels = labels
        if features not in (True, False, "free"):
            raise ValueError(f"features {features!r}: expected True, False or 'free'")
        self.features = features
        self.cache = cache
        self.graph = graph
        self.device_cache = device_cache
        self.degrees = bool(degrees)
        self.rel_fanouts = None if rel_fanouts is None else [[int(f) for f in h] for h in rel_fanouts]
        if device_cache is not None and dtype is not None and np.dtype(dtype) != device_cache.np_dtype:
            raise ValueError(f"dtype {np.dtype(dtype)} differs from the device cache's {device_cache.np_dtype}")
        self._core = None
        self._pid = None
        self.out_dtype = np.dtype(dtype) if dtype is not None else None
        core = self.core()  # open now so errors surface at construction
        self.feature_dim = core.feature_dim
        self.dtype = _NP[core.feature_dtype]
        # A typed dataset's types (the manifest's), None for a homogeneous one.
        self.types = core.types

    def core(self):
        if self._core is None or self._pid != os.getpid():
            cache = self.cache._core if self.cache is not None else None
            graph = self.graph._core if self.graph is not None else None
            resident = self.device_cache._core if self.device_cache is not None else None
            x_dtype = self.out_dtype.name if self.out_dtype is not None else None
            self._core = _core.Sampler(self.path, self.fanouts, self.engine, self.depth, self.pool_threads, self.labels,
                                       bool(self.features), cache, graph, resident, self.features == "free",
                                       self.degrees, x_dtype, self.rel_fanouts)
            self._pid = os.getpid()
        return self._core

    def __getstate__(self):
        state = self.__dict__.copy()
        state["_core"] = None  # re-opened in the receiving process
        state["_pid"] = None
        state["cache"] = None  # process-local: the receiving process runs uncached
        state["graph"] = None  # process-local: the receiving process replays DATASET/mut/ read-only
        state["device_cache"] = None  # device memory: the receiving process reads every row
        return state

    def _wrap(self, d: dict, degrees: bool | None = None) -> SampledBatch:
        """The engine's arrays as they are: ``x``'s bytes viewed as ``[N, dim]`` of their dtype (no copy)."""
        if "typed" in d:
            b = self._wrap_typed(d["typed"], d["batch_size"])
            b.link = LinkPart(**d["link"]) if "link" in d else None
            return b
        if self.feature_dim:
            x = d["x"].view(d["x_dtype"]).reshape(-1, self.feature_dim)
        else:
            x = np.zeros((len(d["n_id"]), 0), d["x_dtype"])
        res = d.get("resident")
        link = LinkPart(**d["link"]) if "link" in d else None
        return SampledBatch(d["n_id"], d["edge_index"], d["num_sampled_nodes"], d["num_sampled_edges"], x, d["y"],
                            d["batch_size"], res if res is not None and len(res) else None,
                            d["missing"] if self.features == "free" else None,
                            d["deg"] if (self.degrees if degrees is None else degrees) and len(d["deg"]) == len(d["n_id"])
                            else None, link)

    def _wrap_typed(self, t: dict, batch_size: int) -> TypedBatch:
        nts, ets = self.types["node_types"], self.types["edge_types"]
        node = {}
        for nt, p in zip(nts, t["node_types"]):
            x = p["x"].view(p["x_dtype"]).reshape(-1, p["dim"]) if p["dim"] else None
            y = p["y"] if nt.get("labels") is not None and len(p["y"]) == len(p["n_id"]) else None
            node[nt["name"]] = NodeTypePart(p["n_id"], x, y, p["num_sampled_nodes"])
        eids = self.core().edge_ids
        edge = {(et["src"], et["rel"], et["dst"]):
                EdgeTypePart(p["edge_index"], p["num_sampled_edges"], p["e_id"] if eids else None)
                for et, p in zip(ets, t["edge_types"])}
        return TypedBatch(nts[t["input_type"]]["name"], int(batch_size), node, edge)

    def sample(self, seeds, seed: int = 0) -> SampledBatch:
        seeds = np.ascontiguousarray(seeds, dtype=np.int64)
        return self._wrap(self.core().sample(seeds, int(seed) & (2**64 - 1)))

    def gather(self, ids, features: bool = True, labels: bool = False,
               degrees: bool = False) -> SampledBatch | TypedBatch:
        """The rows of ``ids`` (node ids, no repeats), in order, through this
        sampler's engine and cache, as a batch without edges: ``x`` in this
        sampler's dtype (with ``features``), ``y`` (with ``labels``, empty
        when the sampler loads none), ``deg`` (with ``degrees``). What a
        fanout-0 sampler would return, with no sampler of its own: the
        lookahead's fill reads, the PyG feature store's, a pre-sample's
        degrees. On a typed dataset ``ids`` are global ids of one node type
        and the result is a zero-hop :class:`TypedBatch` (that type's rows
        from its own feature file, its labels; no slot read)."""
        ids = np.ascontiguousarray(ids, dtype=np.int64)
        b = self._wrap(self.core().gather(ids, bool(features), bool(labels), bool(degrees)), degrees=bool(degrees))
        if isinstance(b, TypedBatch):
            return b
        if len(b.n_id) != len(ids) or not np.array_equal(b.n_id, ids):
            raise ValueError(f"{self.path}: gather: ids repeat (asked {len(ids)}, {len(b.n_id)} distinct)")
        return b

    def attach_cache(self, cache: Cache | None) -> None:
        """Read through ``cache`` from now on (this sampler and the producers
        of its next :meth:`iter_batches`); batches are the same with or
        without it."""
        self.cache = cache
        self.core().set_cache(cache._core if cache is not None else None)

    def random_walk(self, roots, walk_length: int, seed: int = 0) -> SampledBatch:
        """GraphSAINT random-walk batch: each root walks ``walk_length`` steps;
        returns the subgraph induced by the visited nodes (roots first)."""
        roots = np.ascontiguousarray(roots, dtype=np.int64)
        return self._wrap(self.core().random_walk(roots, int(walk_length), int(seed) & (2**64 - 1)))

    def iter_batches(self, order, batch_size: int, seed: int = 0, prefetch: int = 4, drop_last: bool = False,
                     workers: int = 1):
        """Yield batches over ``order`` prepared up to ``prefetch`` ahead by
        ``workers`` background producers (GIL released while they work;
        batches come out in order, batch i sampled with seed ``seed + i``)."""
        it = self.core().iter_batches(np.ascontiguousarray(order, dtype=np.int64), batch_size, int(seed), prefetch,
                                      drop_last, workers)
        yield from self._drain(it)

    def _drain(self, it):
        """The engine iterator's batches, wrapped; its telemetry kept when it ends."""
        try:
            for d in it:
                yield self._wrap(d)
        finally:
            it.close()
            self.last_iter_telemetry = it.telemetry() or {}

    def sample_link(self, src, dst, seed: int = 0, mode: str = "none", amount: float = 1.0, weighted: bool = False,
                    exclude_true_edges: bool = False, exclude_seed_edges: bool = False,
                    edge_type: int | None = None) -> SampledBatch | TypedBatch:
        """One link batch: the supervision edges ``src[i] -> dst[i]``, the
        negatives ``mode`` (``"none"``, ``"binary"``, ``"triplet"``) and
        ``amount`` ask for — uniform, or by degree^0.75 with ``weighted``
        (a 4 B/node table built on first use by one scan of the slots),
        redrawn while they are stored edges with ``exclude_true_edges`` —
        and the neighbourhood of every endpoint, in one request; with
        ``exclude_seed_edges`` the positives and their reverses are removed
        from the sampled edges. The batch's ``link`` says where each
        endpoint is (:class:`LinkPart`). On a typed dataset ``edge_type``
        (its index) names the supervision edges' type, ``src``/``dst`` are
        global ids of its source and destination types and the batch is a
        :class:`TypedBatch` whose ``link`` indices are local within those
        types."""
        return self._wrap(self.core().sample_link(
            np.ascontiguousarray(src, dtype=np.int64), np.ascontiguousarray(dst, dtype=np.int64),
            int(seed) & (2**64 - 1), mode, float(amount), bool(weighted), bool(exclude_true_edges),
            bool(exclude_seed_edges), edge_type))

    def iter_link_batches(self, src, dst, batch_size: int, seed: int = 0, prefetch: int = 4, drop_last: bool = False,
                          workers: int = 1, **link):
        """:meth:`iter_batches` over supervision edges: batch i is edges
        ``i*batch_size ..`` of ``src``/``dst`` drawn as :meth:`sample_link`
        does (``link``: its keyword arguments) with seed ``seed + i``."""
        it = self.core().iter_link_batches(np.ascontiguousarray(src, dtype=np.int64),
                                           np.ascontiguousarray(dst, dtype=np.int64), batch_size, int(seed),
                                           prefetch, drop_last, workers, **link)
        yield from self._drain(it)

    def telemetry(self, last_batch: bool = False) -> dict:
        """Cumulative figures (or the last batch's alone): reads, bytes
        read/used, read amplification, IOPS, MB/s, CPU us per read, in-flight
        and request-size histograms, and the in-flight timeline."""
        return self.core().telemetry(last_batch)

    def reset_telemetry(self) -> None:
        self.core().reset_telemetry()


def rows_in_id_order(path, out: np.ndarray, *, engine: str, cache=None, block: int = 1 << 16,
                     each=None, bar=None) -> int:
    """Fill ``out`` (``[num_nodes, dim]`` float32: memory or a memory map) with
    every node's row, read in id order — page order — ``block`` rows at a time
    through ``engine`` and ``cache``; ``each(rows)`` maps a block first (a
    model's input transform), ``bar`` counts the nodes. Returns the reads it
    took. ``loader.data`` and :func:`flashgnn.inference` read their tables
    here."""
    s = Sampler(path, [0], engine=engine, dtype=np.float32, labels=False, cache=cache)
    n = out.shape[0]
    for lo in range(0, n, block):
        b = s.gather(np.arange(lo, min(lo + block, n), dtype=np.int64))
        out[lo:lo + len(b.x)] = b.x if each is None else each(b.x)
        if bar is not None:
            bar.update(len(b.x))
    return int(s.telemetry()["reads"])


def probe_random_reads(path, length: int = 4096, depth: int = 1, seconds: float = 2.0, engine: str = "uring") -> float:
    """fio-style random-read IOPS on ``path`` (O_DIRECT) at ``depth``."""
    return _core.probe_random_reads(os.fspath(path), length, depth, seconds, engine)
