"""PyG-native mini-batch loaders over a flashgnn dataset.

    loader = flashgnn.NeighborLoader("data/demo", num_neighbors=[25, 10], batch_size=1024, split="train",
                                     shuffle=True)
    for data in loader:            # torch_geometric.data.Data
        out = model(data.x, data.edge_index,
                    num_sampled_nodes_per_hop=data.num_sampled_nodes,
                    num_sampled_edges_per_hop=data.num_sampled_edges)[:data.batch_size]

Each batch is one engine call (sampling + feature gather next to the data);
background producers in Rust run ``prefetch`` batches ahead with the GIL
released, so sampling of upcoming batches overlaps the training step.

Determinism: epoch ``e`` of a loader with ``seed=s`` always visits the same
seed order and draws the same neighbors, whatever the engine, the number of
producers or the process (``set_epoch`` pins the epoch, as with
``DistributedSampler``). With ``world_size > 1`` each rank takes its own,
equal-sized shard of the epoch's permutation, so every rank runs the same
number of steps (DDP never waits on a rank that has run out).
"""

from __future__ import annotations

import os
import queue
import threading
import time
import warnings
from collections import deque

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.loader import NeighborLoader as _PygNeighborLoader

from flashgnn._malloc import large_blocks_reused
from flashgnn.loader import _args as _pa
from flashgnn.loader import hetero as _hetero
from flashgnn.store.dataset import Dataset
from flashgnn.sample.sampler import DEFAULT_DEPTH, ENGINE_CHOICES, Sampler

_UNSET = object()  # "not given", for arguments whose deprecated name may carry the value


# What a user of PyG's BasicGNN.inference(loader) is told where it cannot run.
_INFERENCE_ADVICE = (
    "for layer-wise full-graph inference with bounded memory use flashgnn.inference(model, DATASET[, OUT]) "
    "(or `flashgnn embed DATASET OUT --checkpoint DIR [--model-class pkg.mod:Class]`); model.inference(loader) "
    "runs on flashgnn.NeighborLoader(DATASET, num_neighbors=[-1], input_nodes=None, batch_size=...)")


def resolve_engine(engine: str) -> str:
    """``auto`` is ``uring``; the engine itself falls back to the pread pool
    (with a one-line notice) where io_uring is blocked."""
    if engine not in ENGINE_CHOICES:
        raise ValueError(f"engine {engine!r}: expected one of {', '.join(ENGINE_CHOICES)}")
    return "uring" if engine == "auto" else engine


def as_dataset(dataset) -> Dataset:
    """A :class:`Dataset` from a path or an already open one (not reopened)."""
    return dataset if isinstance(dataset, Dataset) else Dataset(os.fspath(dataset))


def _epoch_seed(seed: int, epoch: int) -> int:
    """A 63-bit stream seed for (seed, epoch): batch i samples with ``base + i``."""
    return int(np.random.SeedSequence([seed & (2**63 - 1), epoch]).generate_state(1, np.uint64)[0] >> 1)


def _input_nodes(ds: Dataset, input_nodes, split: str | None) -> tuple[np.ndarray, bool]:
    """The seed nodes, and whether PyG's ``input_id`` is the node id itself
    (a boolean mask or None, as in PyG) rather than the position in them."""
    if input_nodes is not None and split is not None:
        raise ValueError("give input_nodes or split, not both")
    if input_nodes is not None:
        if isinstance(input_nodes, torch.Tensor):
            input_nodes = input_nodes.cpu().numpy()
        a = np.asarray(input_nodes)
        if a.ndim != 1:
            raise ValueError(f"input_nodes has shape {tuple(a.shape)}: expected a 1-D tensor of node ids or a "
                             "boolean mask (as in PyG)")
        if a.size == 0 and a.dtype.kind == "f":  # [] (numpy reads it as float64): no seeds
            return np.empty(0, dtype=np.int64), False
        if a.dtype == np.bool_:
            if len(a) != ds.num_nodes:
                raise ValueError(f"input_nodes mask has {len(a):,} entries; the dataset has {ds.num_nodes:,} nodes")
            return np.flatnonzero(a).astype(np.int64), True
        if a.dtype.kind not in "iu":
            raise TypeError(f"input_nodes must be node ids or a boolean mask, got dtype {a.dtype}")
        a = np.ascontiguousarray(a, dtype=np.int64)
        if len(a) and (a.min() < 0 or a.max() >= ds.num_nodes):
            bad = a[(a < 0) | (a >= ds.num_nodes)][0]
            raise IndexError(f"input_nodes: node id {bad} out of range [0, {ds.num_nodes})")
        return a, False
    if split is not None:
        if split not in ds.split_names:
            raise ValueError(f"split {split!r} not in dataset {ds.path} (has: {', '.join(ds.split_names) or 'none'})")
        return ds.split(split), False
    return np.arange(ds.num_nodes, dtype=np.int64), True


def run_ahead(items, depth: int):
    """Iterate ``items`` on a background thread, at most ``depth`` items
    ahead of the consumer. An exception in ``items`` is re-raised in the
    consumer; closing the returned generator stops the thread."""
    q: queue.Queue = queue.Queue(maxsize=max(1, depth))
    stop = threading.Event()
    end = object()

    def put(entry) -> bool:
        while not stop.is_set():
            try:
                q.put(entry, timeout=0.1)
                return True
            except queue.Full:
                continue
        return False

    def produce():
        try:
            for x in items:
                if not put((x, None)):
                    return
        except BaseException as e:  # noqa: BLE001 - re-raised in the consumer
            put((None, e))
            return
        put((end, None))

    th = threading.Thread(target=produce, name="flashgnn-run-ahead", daemon=True)
    th.start()
    try:
        while True:
            x, err = q.get()
            if err is not None:
                raise err
            if x is end:
                return
            yield x
    finally:
        stop.set()
        th.join()


class _Base:
    """Seed order, epochs, rank sharding and data-wait accounting."""

    def __init__(self, dataset, batch_size, input_nodes, split, shuffle, drop_last, seed, rank, world_size,
                 equal_shards=True):
        # torch's DataLoader (BatchSampler) check: 2.5 or "4" is refused, never truncated or compared.
        if isinstance(batch_size, (bool, np.bool_)) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
            raise ValueError(f"batch_size must be > 0 and an integer (as torch's DataLoader asks), got "
                             f"batch_size={batch_size!r}")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} out of range for world_size {world_size}")
        self.dataset = as_dataset(dataset)
        self.path = self.dataset.path
        self.input_nodes, self._input_id_is_node = _input_nodes(self.dataset, input_nodes, split)
        self.batch_size = int(batch_size)
        self.shuffle = shuffle
        self.drop_last = drop_last
        self.seed = int(seed)
        self.rank, self.world_size = int(rank), int(world_size)
        # Training shards drop the remainder so every rank runs the same number
        # of steps; evaluation shards (equal_shards=False) cover every node.
        self.equal_shards = equal_shards
        self.epoch = 0
        self.wait_seconds = 0.0  # time the consumer spent blocked in __next__ (last epoch)

    def set_epoch(self, epoch: int) -> None:
        """The next ``iter()`` runs ``epoch`` (resume, DDP); each ``iter()``
        then advances the epoch by one."""
        self.epoch = int(epoch)

    def _positions(self, epoch: int) -> np.ndarray:
        """Positions into ``input_nodes`` this rank visits in ``epoch``, in order."""
        n = len(self.input_nodes)
        pos = np.random.default_rng([self.seed & (2**63 - 1), epoch]).permutation(n) if self.shuffle else np.arange(n)
        if self.world_size > 1:
            if self.equal_shards:
                pos = pos[: n - n % self.world_size]
            pos = pos[self.rank :: self.world_size]
        return pos

    def __len__(self) -> int:
        n = len(self._positions(self.epoch)) if self.world_size > 1 else len(self.input_nodes)
        return n // self.batch_size if self.drop_last else -(-n // self.batch_size)

    def _input_id(self, pos: np.ndarray) -> np.ndarray:
        """PyG's ``input_id`` for the seeds at positions ``pos`` of ``input_nodes``."""
        return self.input_nodes[pos] if self._input_id_is_node else pos

    def _timed(self, it):
        """Yield from ``it``, adding the time spent blocked on it to ``wait_seconds``."""
        self.wait_seconds = 0.0
        while True:
            t = time.perf_counter()
            item = next(it, None)
            self.wait_seconds += time.perf_counter() - t
            if item is None:
                return
            yield item

    def _next_epoch(self) -> int:
        e = self.epoch
        self.epoch = e + 1
        return e


def _to_data(b, input_id: np.ndarray, pin: bool, device_cache=None) -> Data:
    edge_index = torch.from_numpy(b.edge_index)
    y = torch.from_numpy(b.y)
    if device_cache is not None:
        # GPU tier: x is built on the device (resident rows from its table).
        x = device_cache.gather(b)
        if pin:
            edge_index, y = edge_index.pin_memory(), y.pin_memory()
    else:
        x = torch.from_numpy(b.x)
        if pin:
            x, edge_index, y = x.pin_memory(), edge_index.pin_memory(), y.pin_memory()
    return Data(
        x=x,
        y=y,
        edge_index=edge_index,
        n_id=torch.from_numpy(b.n_id),
        input_id=torch.from_numpy(input_id),
        batch_size=int(b.batch_size),
        num_sampled_nodes=[int(v) for v in b.num_sampled_nodes],
        num_sampled_edges=[int(v) for v in b.num_sampled_edges],
        **({"deg": torch.from_numpy(b.deg)} if getattr(b, "deg", None) is not None else {}),
    )


def _graph_view(ds: Dataset, engine: str, cache=None, chunk: int = 1 << 16) -> Data:
    """``loader.data`` (see :attr:`NeighborLoader.data`): x and y read once in
    id order (``chunk`` rows per read) into memory when x fits half the
    memory this process may use, else into memory-mapped .npy files (resident
    memory then stays ``chunk x dim``); masks from the stored splits."""
    import shutil
    import tempfile
    import weakref

    from flashgnn import _progress
    from flashgnn.sample.budget import available_memory
    from flashgnn.sample.sampler import rows_in_id_order

    n, d = ds.num_nodes, ds.feature_dim
    has_y = ds.num_classes > 0 or ds._core.has_labels()
    in_memory = n * d * 4 <= available_memory() // 2
    tmp = None if in_memory else tempfile.mkdtemp(prefix="flashgnn-loader-data-")
    where = "memory" if in_memory else "a memory map"
    try:
        if in_memory:
            # Anonymous memory: PyG's inference gathers rows from it every batch, and a memory map's pages
            # would fault in one by one (and miss the TLB more often than memory that may take huge pages).
            x = np.empty((n, d), np.float32)
            y = np.empty(n, np.int64) if has_y else None
        else:
            x = np.lib.format.open_memmap(os.path.join(tmp, "x.npy"), mode="w+", dtype=np.float32, shape=(n, d))
            y = np.lib.format.open_memmap(os.path.join(tmp, "y.npy"), mode="w+", dtype=np.int64, shape=(n,)) \
                if has_y else None
        bar = _progress.bar(total=n, desc=f"loader.data: x, y of {ds.path} to {where}", unit="node",
                            disable=n <= 4 * chunk)
        rows_in_id_order(ds.path, x, engine=engine, cache=cache, block=chunk, bar=bar)
        bar.close()
        if y is not None:
            for lo in range(0, n, chunk):
                y[lo:min(lo + chunk, n)] = ds.labels(np.arange(lo, min(lo + chunk, n), dtype=np.int64))
        if in_memory:
            data = Data(x=torch.from_numpy(x), num_nodes=n)
            if has_y:
                data.y = torch.from_numpy(y)
        else:
            for a in (x, y):
                if a is not None:
                    a.flush()
            del x, y
            # Copy-on-write maps: writable (torch wants that), never written back, pages reclaimable.
            data = Data(x=torch.from_numpy(np.load(os.path.join(tmp, "x.npy"), mmap_mode="c")), num_nodes=n)
            if has_y:
                data.y = torch.from_numpy(np.load(os.path.join(tmp, "y.npy"), mmap_mode="c"))
    except BaseException:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)
        raise
    if tmp is not None:
        weakref.finalize(data, shutil.rmtree, tmp, True)  # mapped pages stay valid after the unlink (POSIX)
    for s in ("train", "val", "test"):
        if s in ds.split_names:
            mask = torch.zeros(n, dtype=torch.bool)
            mask[torch.from_numpy(np.asarray(ds.split(s), dtype=np.int64))] = True
            setattr(data, f"{s}_mask", mask)
    return data


class NeighborLoader(_Base, _PygNeighborLoader):
    """GraphSAGE-style k-hop neighbor sampling, one engine call per batch,
    with the arguments, defaults and batches of PyG's ``NeighborLoader``.

    ``NeighborLoader(data, num_neighbors, input_nodes=None, batch_size=1,
    shuffle=False, ...)``: ``data`` is a dataset path (or an open
    :class:`flashgnn.Dataset`), ``num_neighbors`` a list per hop (-1 = all
    neighbours). PyG's arguments keep PyG's meaning and defaults
    (``batch_size=1``, ``shuffle=False``); those the engine cannot honour
    (``replace=True``, ``disjoint=True``, ``subgraph_type`` other than
    ``'directional'``, ``directed=False``, temporal or weighted sampling,
    heterogeneous ``num_neighbors``/``input_nodes``, ``neighbor_sampler``,
    ``transform_sampler_output``) are refused by name (:mod:`flashgnn.loader._args`).
    ``num_workers`` is the number of producer threads (the batches do not
    depend on it); ``persistent_workers``, ``filter_per_worker`` and
    ``is_sorted`` are accepted and change nothing (threads are restarted per
    epoch at no cost, features are always gathered in the sampling pass, the
    stored graph is already sorted). Deprecated names (one release):
    ``fanouts`` -> ``num_neighbors``, ``dataset`` -> ``data``, ``workers`` ->
    ``num_workers``, ``batch_size`` as the third positional argument.

    Yields :class:`torch_geometric.data.Data` with ``x, y, edge_index, n_id,
    input_id, batch_size, num_sampled_nodes, num_sampled_edges`` in PyG's
    order: ``n_id[:batch_size]`` are the seeds (in order), ``edge_index`` is
    local with row = sampled neighbor and col = target, nodes and edges grouped
    by hop. ``input_id`` is PyG's: the seeds' positions in ``input_nodes``
    (node ids themselves when ``input_nodes`` is a boolean mask or None).
    No ``e_id``: the store keeps no global edge numbering (docs/training.md).

    The class is a ``torch_geometric.loader.NeighborLoader`` for ``isinstance``
    checks only (PyG's DataLoader machinery is not run); ``loader.data`` is
    the graph without its edges, with x and y memory-mapped (:attr:`data`),
    which is what ``BasicGNN.inference(loader)`` reads.

    ``engine``: ``auto`` or one of ``flashgnn.sample.sampler.ENGINES`` (all give
    identical batches). ``prefetch`` batches are prepared ahead by
    ``num_workers`` producer threads. ``cache``: a :class:`flashgnn.Cache`
    (cross-batch DRAM cache; may be shared by the train/val/test loaders) —
    speed only, the batches are the same. Without one, ``memory_budget``
    (``"auto"``, the default; a size in bytes; or 0 for no cache) sizes the
    process's one cache for the dataset (:func:`flashgnn.sample.shared.shared_cache`):
    the first loader on a dataset makes it and prints its split in one line
    to stderr (``quiet=True`` silences it), every later loader on the same
    dataset shares it. ``dtype`` converts features (default
    float32; None keeps the stored dtype). ``pin_memory`` pins batch tensors
    for non-blocking host-to-device copies. ``device_cache``: a
    :class:`flashgnn.DeviceCache` (GPU tier): ``x`` then arrives on its
    device, its resident rows gathered there and never read from disk.
    ``split="train"|"val"|"test"`` takes the stored split (instead of
    ``input_nodes``). ``seed`` fixes the shuffle order and the draws.
    ``row_codec`` (``"fp16"``/``"int8"``/``"int4"``, opt-in): the shared cache holds
    float32 rows encoded (:class:`flashgnn.Cache`), more of them in the same
    budget; ``x`` then carries the decoded values of the rows it serves.

    ``lookahead=S`` (online lookahead, :mod:`flashgnn.loader.window`): the structure
    of each batch is sampled ``S`` batches before it is served (rows that come
    with structure reads kept), and its remaining rows are filled when it
    reaches the head of the window — through a Belady cache of
    ``lookahead_budget`` bytes that knows the next ``S`` batches, then
    ``cache``, then the disk. Batches are identical to ``lookahead=0``.
    Excludes ``device_cache``.

    ``degrees=True``: each batch also carries ``deg`` (int64, per ``n_id``:
    the node's degree in the whole graph, from its slot), which
    :class:`flashgnn.nn.GCN` normalises by so that a sampled batch computes
    the whole graph's GCN (``flashgnn train --model gcn`` sets it).
    """

    # PyG's keyword arguments, then flashgnn's own: what an unknown one is told.
    ACCEPTED = ("data", "num_neighbors", "input_nodes", "input_time", "replace", "subgraph_type", "disjoint",
                "temporal_strategy", "time_attr", "weight_attr", "transform", "transform_sampler_output",
                "is_sorted", "filter_per_worker", "neighbor_sampler", "directed", "batch_size", "shuffle",
                "drop_last", "num_workers", "persistent_workers", "pin_memory", "split", "engine", "prefetch",
                "seed", "dtype", "depth", "rank", "world_size", "equal_shards", "cache", "device_cache",
                "lookahead", "lookahead_budget", "degrees", "memory_budget", "row_codec", "quiet")

    def __new__(cls, *args, **kwargs):
        # A typed dataset's batches are HeteroData: its loader is HeteroNeighborLoader (same arguments).
        data = args[0] if args else kwargs.get("data", kwargs.get("dataset"))
        if cls is NeighborLoader and _hetero.typed_manifest(data) is not None:
            return object.__new__(HeteroNeighborLoader)
        return object.__new__(cls)

    def __init__(self, data=_UNSET, num_neighbors=_UNSET, input_nodes=None, input_time=None, replace: bool = False,
                 subgraph_type="directional", disjoint: bool = False, temporal_strategy: str = "uniform",
                 time_attr=None, weight_attr=None, transform=None, transform_sampler_output=None,
                 is_sorted: bool = False, filter_per_worker=None, neighbor_sampler=None, directed: bool = True, *,
                 batch_size=_UNSET, shuffle: bool = False, drop_last: bool = False, num_workers=_UNSET,
                 persistent_workers: bool = False, pin_memory: bool = False, split: str | None = None,
                 engine: str = "auto", prefetch: int = 4, seed: int = 0, dtype=np.float32, depth: int = DEFAULT_DEPTH,
                 rank: int = 0, world_size: int = 1, equal_shards: bool = True, cache=None, device_cache=None,
                 lookahead: int = 0, lookahead_budget: int = 0, degrees: bool = False, memory_budget="auto",
                 row_codec: str = "none", quiet: bool = False, **kwargs):
        who = "flashgnn.NeighborLoader"
        data = _pa.renamed(who, "dataset", "data", kwargs.pop("dataset", _UNSET), data, _UNSET)
        num_neighbors = _pa.renamed(who, "fanouts", "num_neighbors", kwargs.pop("fanouts", _UNSET), num_neighbors,
                                    _UNSET)
        num_workers = _pa.renamed(who, "workers", "num_workers", kwargs.pop("workers", _UNSET), num_workers, _UNSET)
        _pa.refuse_unknown(who, kwargs, self.ACCEPTED)
        if data is _UNSET:
            raise TypeError(f"{who}: data (a dataset path or flashgnn.Dataset) is required")
        if num_neighbors is _UNSET:
            num_neighbors = None
        if isinstance(input_nodes, (int, np.integer)) and not isinstance(input_nodes, (bool, np.bool_)):
            # The old signature was (dataset, fanouts, batch_size, ...); PyG's third argument is input_nodes.
            if batch_size is not _UNSET:
                raise TypeError(f"{who}: input_nodes={input_nodes!r} is a single integer: as the deprecated "
                                f"positional batch_size it conflicts with batch_size={batch_size!r} (give batch_size "
                                "once, by keyword); as input_nodes, pass node ids as a tensor/array, a boolean mask "
                                "or None")
            warnings.warn(f"{who}: batch_size as the third positional argument is deprecated (in PyG's order the "
                          "third argument is input_nodes); pass batch_size= by keyword", DeprecationWarning,
                          stacklevel=2)
            batch_size, input_nodes = int(input_nodes), None
        batch_size = 1 if batch_size is _UNSET else batch_size  # PyG's (DataLoader's) default
        num_workers = 0 if num_workers is _UNSET else num_workers
        self.num_neighbors = _pa.num_neighbors(who, num_neighbors)
        _pa.check_input_nodes(who, input_nodes)
        _pa.check_sampling(who, replace=replace, subgraph_type=subgraph_type, disjoint=disjoint,
                           temporal_strategy=temporal_strategy, time_attr=time_attr, weight_attr=weight_attr,
                           input_time=input_time, directed=directed)
        if neighbor_sampler is not None:
            raise ValueError(f"{who}: neighbor_sampler={type(neighbor_sampler).__name__} is not supported: this "
                             "loader samples with the flashgnn engine; to drive a sampler of your own over a "
                             "flashgnn dataset use torch_geometric.loader.NodeLoader with "
                             "flashgnn.pyg.remote_backend()")
        if transform_sampler_output is not None:
            raise ValueError(f"{who}: transform_sampler_output is not supported: batches come from the engine "
                             "without a SamplerOutput; use transform= (applied to each Data batch), or "
                             "flashgnn.pyg.NeighborLoader, which runs PyG's own pipeline")
        if transform is not None and not callable(transform):
            raise TypeError(f"{who}: transform={transform!r} is not callable")
        if isinstance(num_workers, bool) or not isinstance(num_workers, (int, np.integer)) or num_workers < 0:
            raise ValueError(f"{who}: num_workers={num_workers!r}: expected an integer >= 0")
        if persistent_workers and num_workers == 0:
            raise ValueError(f"{who}: persistent_workers=True needs num_workers > 0 (as in PyG)")
        if not isinstance(data, (str, os.PathLike, Dataset)):
            hint = (" held in memory: write it to disk once with flashgnn.from_pyg(data, OUT) and pass OUT, or keep "
                    "torch_geometric.loader.NeighborLoader for graphs that fit in memory"
                    if hasattr(data, "edge_index") or type(data).__name__ in ("Data", "HeteroData") else "")
            raise TypeError(f"{who}: data must be a flashgnn dataset directory (or a flashgnn.Dataset); got "
                            f"{type(data).__module__}.{type(data).__name__}{hint}")
        super().__init__(data, batch_size, input_nodes, split, shuffle, drop_last, seed, rank, world_size,
                         equal_shards)
        self.transform = transform
        self.filter_per_worker, self.is_sorted = filter_per_worker, bool(is_sorted)
        self.num_workers, self.persistent_workers = int(num_workers), bool(persistent_workers)
        self.degrees = bool(degrees)
        self.fanouts = self.num_neighbors  # the engine's name, kept for callers of the old attribute
        self.engine = resolve_engine(engine)
        self.prefetch = max(1, int(prefetch))
        # PyG's num_workers=0 means "in the main process"; here sampling always
        # runs on producer threads (GIL released), and their count never
        # changes the batches (tested), so 0 gets one producer.
        self.workers = max(1, self.num_workers)
        self.memory_budget = memory_budget
        # Pinning needs a CUDA driver; without one it would fail on every batch.
        self.pin_memory = bool(pin_memory) and torch.cuda.is_available()
        self.device_cache = device_cache
        self.lookahead = max(0, int(lookahead))
        if self.lookahead and device_cache is not None:
            raise ValueError("lookahead and device_cache cannot be combined (the device tier gathers on the device; "
                             "lookahead fills rows on the host)")
        if lookahead_budget and not self.lookahead:
            raise ValueError(f"lookahead_budget {lookahead_budget} needs lookahead >= 1 (the window it plans over)")
        # The loader's one engine sampler: it measures the batches that size a new shared cache, chooses that
        # cache's hot set, samples, and gathers the lookahead's rows. Producers open their own per epoch.
        self.sampler = Sampler(self.path, self.fanouts, engine=self.engine, depth=depth, dtype=dtype, cache=cache,
                               device_cache=device_cache, features="free" if self.lookahead else True,
                               degrees=self.degrees)
        # The process's one cache for this dataset (flashgnn.sample.shared.shared_cache), sized on first use,
        # unless the caller brought its own tier.
        from flashgnn.sample.shared import loader_cache

        shared = loader_cache(cache, self.dataset, self.num_neighbors, self.batch_size, memory_budget,
                              device_cache=device_cache, given_name="cache= (or device_cache=)", workers=self.workers,
                              prefetch=self.prefetch, quiet=quiet, who=who, engine=self.engine, sampler=self.sampler,
                              row_codec=row_codec)
        if shared is not cache:
            self.sampler.attach_cache(shared)
        self.cache = shared  # flashgnn.Cache shared with other loaders, or None
        self.window = None
        if self.lookahead:
            from flashgnn.loader.window import WindowGather

            self.window = WindowGather(self.sampler, int(lookahead_budget), self.dataset.num_nodes)
        self.telemetry: dict = {}
        self._pyg_data = None

    @property
    def data(self) -> Data:
        """The graph as PyG's code reads it from ``loader.data``, without its
        edges (they stay on disk): ``x`` (float32) and ``y`` (int64, -1 =
        unlabeled), read once on first access in id order — into memory when
        ``x`` fits half the memory this process may use, else into
        memory-mapped copies in a temporary directory removed with the
        loader —, ``train_mask``/``val_mask``/``test_mask`` for the stored
        splits, ``num_nodes``. This is what ``BasicGNN.inference(loader)``
        reads (``x_all = loader.data.x``; rows gathered per batch), so PyG's
        own layer-wise inference runs on a loader built with
        ``num_neighbors=[-1], input_nodes=None, shuffle=False``. PyG's
        implementation keeps each layer's outputs for all nodes in RAM
        (``torch.cat``): ``num_nodes x width x 4`` bytes; where that does not
        fit, :func:`flashgnn.inference` keeps them on disk too."""
        if self._pyg_data is None:
            self._pyg_data = _graph_view(self.dataset, self.engine, self.cache)
        return self._pyg_data

    @property
    def node_sampler(self):
        """What PyG's ``BasicGNN.inference(loader)`` reads of its loader's
        sampler (``num_neighbors``, one hop), after ``loader.data``. Only a
        loader over every node in id order gives it the rows it expects (it
        concatenates the batches' outputs as the next layer's table), so
        anything else is refused here by name rather than failing later on
        an index or returning permuted rows.

        Reading it also tells the loader that PyG's layer-wise inference is
        about to iterate: that loop takes every layer's input rows from
        ``loader.data.x`` (then from its own previous layer), never from a
        batch's ``x``, so from then on this loader's batches come without
        ``x`` and the engine reads structure only — no row gathered per
        neighbour (on a 131 K-node graph with 3.5 M edges, 0.3 s of
        structure against 6.4 s with the rows)."""
        import types

        bad = []
        if list(self.num_neighbors) != [-1]:
            bad.append(f"num_neighbors={list(self.num_neighbors)} (layer-wise inference needs [-1])")
        if self.shuffle:
            bad.append("shuffle=True (rows would come back permuted)")
        if len(self.input_nodes) != self.dataset.num_nodes or (
                len(self.input_nodes) and not np.array_equal(self.input_nodes, np.arange(self.dataset.num_nodes))):
            bad.append(f"input_nodes selects {len(self.input_nodes):,} of {self.dataset.num_nodes:,} nodes (needs None)")
        if self.drop_last or self.world_size > 1:
            bad.append("drop_last=True" if self.drop_last else f"world_size={self.world_size}")
        if bad:
            raise ValueError("flashgnn.NeighborLoader: PyG's layer-wise model.inference(loader) needs a loader over "
                             "every node in order: " + "; ".join(bad) + ". Build it as NeighborLoader(DATASET, "
                             "num_neighbors=[-1], input_nodes=None, batch_size=B), or call flashgnn.inference(model, "
                             "DATASET)")
        if self.window is None and self.device_cache is None:
            self._rows_unused = True
        return types.SimpleNamespace(num_neighbors=list(self.num_neighbors))

    def _structure_sampler(self):
        """The sampler of batches without rows (:attr:`node_sampler`), made on first use over the same
        dataset, engine and cache."""
        if getattr(self, "_structure", None) is None:
            s = self.sampler
            self._structure = Sampler(self.path, self.fanouts, engine=self.engine, depth=s.depth, dtype=s.out_dtype,
                                      cache=self.cache, features=False, degrees=self.degrees)
        return self._structure

    def _emit(self, d: Data) -> Data:
        return d if self.transform is None else self.transform(d)

    # The engine's id of the first seed type's node 0 (a typed loader's input type starts at its offset).
    _offset = 0

    def _to_batch(self, b, input_id: np.ndarray, rows_unused: bool):
        """Engine batch ``b`` as the PyG object this loader yields."""
        d = _to_data(b, input_id, self.pin_memory, self.device_cache)
        if rows_unused:
            del d.x  # structure only (node_sampler): PyG's inference reads loader.data.x
        return d

    def __iter__(self):
        epoch = self._next_epoch()
        pos = self._positions(epoch)
        order = self.input_nodes[pos] + self._offset
        base = _epoch_seed(self.seed, epoch)
        if getattr(self, "_rows_unused", False):
            yield from self._layer_pass(order, pos, base)
            return
        sampler = self.sampler
        # With lookahead the window itself runs ahead: the structure stage
        # keeps only two batches queued (each holds its free rows).
        it = sampler.iter_batches(order, self.batch_size, seed=base,
                                  prefetch=min(self.prefetch, 2) if self.window is not None else self.prefetch,
                                  drop_last=self.drop_last, workers=self.workers)
        batches = it
        if self.window is not None:
            self.window.gather.reset_telemetry()
            # The window is filled on its own thread, `prefetch` batches ahead
            # of the consumer (the engine releases the GIL while it reads).
            batches = run_ahead(self._filled(it), self.prefetch)
        try:
            for i, b in enumerate(self._timed(batches)):
                p = pos[i * self.batch_size : i * self.batch_size + b.batch_size]
                yield self._emit(self._to_batch(b, self._input_id(p), False))
        finally:
            if batches is not it:
                batches.close()  # stops the fill thread before the structure stage closes
            it.close()
            self.telemetry = self._telemetry(getattr(sampler, "last_iter_telemetry", {}))

    def _layer_pass(self, order, pos, base):
        """One pass of PyG's layer-wise inference (structure only, every node in id order, one full hop: see
        :attr:`node_sampler`). Such a pass is the same every time — a batch is a pure function of its seeds and
        a full hop draws nothing —, and the inference makes one per layer, so a pass whose batches fit a
        quarter of the memory this process may use is kept and the next ones are copies of it (copied as kept
        and as handed out, so a consumer that writes into a batch changes nothing kept): the engine reads and
        samples the graph once, not once per layer. The consumer's large per-batch tensors are served from
        the heap meanwhile (:func:`flashgnn._malloc.large_blocks_reused`)."""
        from flashgnn.sample.budget import available_memory

        room = available_memory()
        with large_blocks_reused(room):
            yield from self._layer_batches(order, pos, base, room)

    def _layer_batches(self, order, pos, base, room):
        if getattr(self, "_kept_pass", None) is not None:
            self.wait_seconds = 0.0
            for d in self._kept_pass:
                yield self._emit(d.clone())
            self.telemetry = dict(self.telemetry, replayed=True)
            return
        room //= 4
        kept, size = [], 0
        sampler = self._structure_sampler()
        it = sampler.iter_batches(order, self.batch_size, seed=base, prefetch=self.prefetch, drop_last=self.drop_last,
                                  workers=self.workers)
        try:
            for i, b in enumerate(self._timed(it)):
                p = pos[i * self.batch_size : i * self.batch_size + b.batch_size]
                d = self._to_batch(b, self._input_id(p), True)
                if kept is not None:
                    size += sum(v.numel() * v.element_size() for v in d.values() if isinstance(v, torch.Tensor))
                    if size <= room:
                        kept.append(d.clone())
                    else:
                        kept = None
                yield self._emit(d)
            self._kept_pass = kept
        finally:
            it.close()
            self.telemetry = self._telemetry(getattr(sampler, "last_iter_telemetry", {}))

    def _filled(self, it):
        """Structure-stage batches with their rows filled, in order: each is
        filled once the next ``lookahead`` batches are known."""
        ahead: deque = deque()
        while True:
            while len(ahead) <= self.lookahead:
                b = next(it, None)
                if b is None:
                    break
                ahead.append(b)
            if not ahead:
                return
            b = ahead.popleft()
            self._fill(b, ahead)
            yield b

    def _fill(self, b, window) -> None:
        """Batch ``b``'s remaining rows, ``window`` = the batches after it."""
        b.x = self.window.fill(b.n_id, b.x, b.missing, [a.n_id for a in window])

    def _telemetry(self, structure: dict) -> dict:
        """The structure stage's telemetry, with the fill stage's reads added
        and its figures under ``lookahead``."""
        if self.window is None:
            return structure
        t = dict(structure)
        g = self.window.gather.telemetry()
        for k in ("reads", "bytes_read", "bytes_used"):
            t[k] = t.get(k, 0) + g.get(k, 0)
        t["lookahead"] = dict(self.window.stats(), superbatch=self.lookahead, fill_reads=g.get("reads", 0))
        return t

    def sample(self, seeds, seed: int = 0) -> Data:
        """One batch for explicit ``seeds`` (no prefetch); ``input_id`` = 0..len-1."""
        b = self.sampler.sample(seeds, seed)
        if self.window is not None:
            self._fill(b, [])
        return self._emit(_to_data(b, np.arange(b.batch_size, dtype=np.int64), self.pin_memory, self.device_cache))


class HeteroNeighborLoader(NeighborLoader):
    """:class:`NeighborLoader` over a typed (heterogeneous) dataset, which
    ``flashgnn.NeighborLoader(path, ...)`` returns for one: yields
    ``torch_geometric.data.HeteroData`` as PyG's hetero ``NeighborLoader``
    does (:mod:`flashgnn.loader.hetero`). ``num_neighbors``: a list per hop
    (every edge type), a dict ``{(src, rel, dst): list}`` or a PyG
    ``NumNeighbors`` (with its ``default``); ``input_nodes``: a node type
    (all its nodes) or ``(node_type, ids | bool mask | None)``, ids within
    the type. The sampling, seed-order, sharding and determinism arguments
    are :class:`NeighborLoader`'s; those refused for typed datasets are
    listed in :data:`flashgnn.loader.hetero.HETERO_REFUSED`. ``cache``: a
    :class:`flashgnn.Cache` built on the dataset (slots, overflow pages and
    typed rows are cached; batches are the same); without one
    ``memory_budget`` sizes the shared cache, as for a homogeneous dataset.
    ``lookahead``: every type's rows filled at the head of the window
    (:class:`flashgnn.loader.window.TypedWindowGather`)."""

    def __init__(self, data=_UNSET, num_neighbors=_UNSET, input_nodes=None, input_time=None, replace: bool = False,
                 subgraph_type="directional", disjoint: bool = False, temporal_strategy: str = "uniform",
                 time_attr=None, weight_attr=None, transform=None, transform_sampler_output=None,
                 is_sorted: bool = False, filter_per_worker=None, neighbor_sampler=None, directed: bool = True, *,
                 batch_size=_UNSET, shuffle: bool = False, drop_last: bool = False, num_workers=_UNSET,
                 persistent_workers: bool = False, pin_memory: bool = False, split: str | None = None,
                 engine: str = "auto", prefetch: int = 4, seed: int = 0, dtype=np.float32, depth: int = DEFAULT_DEPTH,
                 rank: int = 0, world_size: int = 1, equal_shards: bool = True, cache=None, device_cache=None,
                 lookahead: int = 0, lookahead_budget: int = 0, degrees: bool = False, memory_budget="auto",
                 row_codec: str = "none", quiet: bool = False, **kwargs):
        who = "flashgnn.NeighborLoader"
        data = _pa.renamed(who, "dataset", "data", kwargs.pop("dataset", _UNSET), data, _UNSET)
        num_neighbors = _pa.renamed(who, "fanouts", "num_neighbors", kwargs.pop("fanouts", _UNSET), num_neighbors,
                                    _UNSET)
        num_workers = _pa.renamed(who, "workers", "num_workers", kwargs.pop("workers", _UNSET), num_workers, _UNSET)
        _pa.refuse_unknown(who, kwargs, self.ACCEPTED)
        given = {"device_cache": device_cache, "degrees": degrees or None, "split": split}
        for name, value in given.items():
            if value is not None:
                raise ValueError(f"{who}: {name}={_pa._short(value)} on a typed dataset: "
                                 f"{_hetero.HETERO_REFUSED[name]}")
        if lookahead_budget and not lookahead:
            raise ValueError(f"lookahead_budget {lookahead_budget} needs lookahead >= 1 (the window it plans over)")
        _pa.check_sampling(who, replace=replace, subgraph_type=subgraph_type, disjoint=disjoint,
                           temporal_strategy=temporal_strategy, time_attr=time_attr, weight_attr=weight_attr,
                           input_time=input_time, directed=directed)
        if neighbor_sampler is not None or transform_sampler_output is not None:
            raise ValueError(f"{who}: neighbor_sampler and transform_sampler_output are not supported (batches come "
                             "from the flashgnn engine)")
        if transform is not None and not callable(transform):
            raise TypeError(f"{who}: transform={transform!r} is not callable")
        batch_size = 1 if batch_size is _UNSET else batch_size
        if isinstance(batch_size, (bool, np.bool_)) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
            raise ValueError(f"batch_size must be > 0 and an integer (as torch's DataLoader asks), got "
                             f"batch_size={batch_size!r}")
        num_workers = 0 if num_workers is _UNSET else num_workers
        if isinstance(num_workers, bool) or not isinstance(num_workers, (int, np.integer)) or num_workers < 0:
            raise ValueError(f"{who}: num_workers={num_workers!r}: expected an integer >= 0")
        if not 0 <= rank < world_size:
            raise ValueError(f"rank {rank} out of range for world_size {world_size}")
        self.path = os.fspath(getattr(data, "path", data))
        self.types = _hetero.typed_manifest(data)
        self.node_types = [t["name"] for t in self.types["node_types"]]
        self.edge_types = [(e["src"], e["rel"], e["dst"]) for e in self.types["edge_types"]]
        if num_neighbors is _UNSET or num_neighbors is None:
            raise TypeError(f"{who}: num_neighbors is required (a list per hop, or a dict per edge type)")
        self.rel_fanouts = _hetero.hetero_num_neighbors(who, num_neighbors, self.edge_types)
        self.num_neighbors = num_neighbors
        # The engine's per-hop fanouts: the largest per hop (what sizes its buffers); draws use rel_fanouts.
        self.fanouts = [max(h) if h else 0 for h in self.rel_fanouts]
        self.fanouts = [-1 if any(f < 0 for f in h) else m for h, m in zip(self.rel_fanouts, self.fanouts)]
        self.input_type, self.input_nodes, self._input_id_is_node = _hetero.hetero_input_nodes(
            who, input_nodes, self.types)
        self._offset = sum(t["count"] for t in self.types["node_types"][: self.node_types.index(self.input_type)])
        self.batch_size = int(batch_size)
        self.shuffle, self.drop_last, self.seed = shuffle, drop_last, int(seed)
        self.rank, self.world_size, self.equal_shards = int(rank), int(world_size), equal_shards
        self.epoch, self.wait_seconds = 0, 0.0
        self.transform = transform
        self.filter_per_worker, self.is_sorted = filter_per_worker, bool(is_sorted)
        self.num_workers, self.persistent_workers = int(num_workers), bool(persistent_workers)
        self.degrees, self.device_cache = False, None
        self.engine = resolve_engine(engine)
        self.prefetch = max(1, int(prefetch))
        self.workers = max(1, self.num_workers)
        self.memory_budget = memory_budget
        self.pin_memory = bool(pin_memory) and torch.cuda.is_available()
        # With lookahead the structure stage samples without rows (a typed row never comes with a slot): every
        # row is filled at the head of the window, per node type (flashgnn.loader.window.TypedWindowGather).
        self.lookahead = max(0, int(lookahead))
        self.sampler = Sampler(self.path, self.fanouts, engine=self.engine, depth=depth, dtype=dtype, cache=cache,
                               rel_fanouts=self.rel_fanouts, features=not self.lookahead)
        from flashgnn.sample.shared import loader_cache

        shared = loader_cache(cache, self.path, self.fanouts, self.batch_size, memory_budget, workers=self.workers,
                              prefetch=self.prefetch, quiet=quiet, who=who, engine=self.engine, sampler=self.sampler,
                              pool=self.input_nodes + self._offset if len(self.input_nodes) else None,
                              row_codec=row_codec)
        if shared is not cache:
            self.sampler.attach_cache(shared)
        self.cache = shared
        self.window = None
        if self.lookahead:
            from flashgnn.loader.window import TypedWindowGather

            self.window = TypedWindowGather(self.sampler, int(lookahead_budget), self.types)
        self.telemetry: dict = {}
        self._pyg_data = None

    @property
    def dataset(self):
        return as_dataset(self.path)

    def _fill(self, b, window) -> None:
        self.window.fill(b, window)

    @property
    def data(self):
        raise NotImplementedError("loader.data (the in-memory graph view) is not available for typed datasets yet")

    @property
    def node_sampler(self):
        raise NotImplementedError("PyG's layer-wise model.inference(loader) is not available for typed datasets: "
                                  "flashgnn.inference(model, dataset) runs a hetero model layer by layer")

    def _to_batch(self, b, input_id: np.ndarray, rows_unused: bool):
        return _hetero.to_hetero_data(b, input_id, self.pin_memory)

    def sample(self, seeds, seed: int = 0):
        """One batch for explicit ``seeds`` (ids within the input type); ``input_id`` = 0..len-1."""
        seeds = np.ascontiguousarray(seeds, dtype=np.int64) + self._offset
        b = self.sampler.sample(seeds, seed)
        if self.window is not None:
            self._fill(b, [])
        return self._emit(_hetero.to_hetero_data(b, np.arange(b.batch_size, dtype=np.int64), self.pin_memory))


class RandomWalkLoader(_Base):
    """GraphSAINT random-walk sampling: each batch draws ``batch_size`` roots
    from ``input_nodes`` (without replacement, reshuffled per epoch), walks
    ``walk_length`` steps from each and yields the induced subgraph.

    ``Data`` fields: ``x, y, edge_index`` (local, both directions as stored),
    ``n_id`` (roots first), ``batch_size`` (number of distinct roots) and
    ``train_mask``/``input_mask``: which nodes of the subgraph belong to
    ``input_nodes`` (the loss is usually taken over those). A background
    thread (:func:`run_ahead`) keeps ``prefetch`` batches ready.
    """

    def __init__(self, dataset, batch_size: int = 1024, walk_length: int = 2, input_nodes=None,
                 split: str | None = None, shuffle: bool = True, engine: str = "auto", prefetch: int = 2,
                 drop_last: bool = False, seed: int = 0, dtype=np.float32, depth: int = DEFAULT_DEPTH, rank: int = 0,
                 world_size: int = 1, equal_shards: bool = True):
        super().__init__(dataset, batch_size, input_nodes, split, shuffle, drop_last, seed, rank, world_size,
                         equal_shards)
        if walk_length < 0:
            raise ValueError(f"walk_length must be >= 0, got {walk_length}")
        self.walk_length = int(walk_length)
        self.engine = resolve_engine(engine)
        self.prefetch = max(1, int(prefetch))
        self.sampler = Sampler(self.path, [1], engine=self.engine, depth=depth, dtype=dtype)
        self._member = np.zeros(self.dataset.num_nodes, dtype=np.bool_)
        self._member[self.input_nodes] = True

    def _batch(self, roots: np.ndarray, seed: int) -> Data:
        b = self.sampler.random_walk(roots, self.walk_length, seed)
        n_id = torch.from_numpy(b.n_id)
        mask = torch.from_numpy(self._member[b.n_id])
        return Data(x=torch.from_numpy(b.x), y=torch.from_numpy(b.y),
                    edge_index=torch.from_numpy(b.edge_index), n_id=n_id,
                    batch_size=int(b.batch_size), train_mask=mask, input_mask=mask)

    def __iter__(self):
        epoch = self._next_epoch()
        order = self.input_nodes[self._positions(epoch)]
        nb = len(order) // self.batch_size if self.drop_last else -(-len(order) // self.batch_size)
        base = _epoch_seed(self.seed, epoch)
        bs = self.batch_size
        batches = (self._batch(order[i * bs : (i + 1) * bs], base + i) for i in range(nb))
        ahead = run_ahead(batches, self.prefetch)  # the engine releases the GIL while it works
        try:
            yield from self._timed(ahead)
        finally:
            ahead.close()
