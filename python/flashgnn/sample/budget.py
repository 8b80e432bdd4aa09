"""One ``--memory-budget`` split between the engine's buffers, the prefetch
window and the cache tiers (``flashgnn train``, ``bench``, ``serve``).

What the budget covers is flashgnn's own memory on the data path — not the
interpreter, torch or the model, which the caller sizes separately:

- **engine**: per producer, the aligned buffer pool
  (``_core.BUF_POOL_BYTES``) and the per-batch page cache
  (``_core.BATCH_PAGE_CACHE_BYTES``) — together
  ``_core.ENGINE_BYTES_PER_PRODUCER``, owned by ``flashgnn-sample`` — and
  the batch it is building;
- **prefetch window**: ``prefetch`` finished batches queued for the consumer,
  plus, with online lookahead, the ``lookahead`` structure batches held
  ahead of the one being filled;
- **lookahead cache** (with ``lookahead``): ``LOOKAHEAD_SHARE`` of what is
  left, for the Belady row cache of :mod:`flashgnn.loader.window`;
- **cache**: the rest — ``hot_fraction`` of it for the static hot set, the
  remainder for the dynamic (S3-FIFO/CLOCK) part.

A batch's size is measured, not guessed: two batches of the real dataset with
the real fanouts are sampled (features included) and the larger, plus 25 %
headroom for the variance between batches, is the per-batch figure. A budget
smaller than engine + window is refused with the minimum it needs.
"""

from __future__ import annotations

import os
import threading
import weakref

import numpy as np

from flashgnn import _core
from flashgnn.sample.sampler import DEFAULT_HOT_FRACTION

ENGINE_FIXED_PER_PRODUCER = _core.ENGINE_BYTES_PER_PRODUCER  # buffer pool + per-batch page cache
HEADROOM = 1.25
LOOKAHEAD_SHARE = 0.5
# The lookahead's Belady row cache keeps two 4-byte arrays per node of the
# dataset (flashgnn.loader.window.BeladyRowCache): a lookahead cache share
# below this x N holds no row.
BELADY_NODE_BYTES = 8
# With lookahead, the structure stage keeps this many batches queued besides
# the known window (flashgnn.loader.neighbor: prefetch=min(prefetch, 2)).
STRUCTURE_QUEUE = 2
# `--memory-budget auto` leaves room for what the budget does not cover:
# torch itself (about 0.6 GiB of RSS on import; reserved only when it is not
# imported yet — once imported it is already in the usage the headroom is
# measured against), and the model: its weights, optimizer state, Python
# objects (a fixed part) and its activations and gradients, which scale with
# the batch (ACTIVATION_BATCHES measured batches).
AUTO_RESERVE_TORCH = 768 << 20
AUTO_RESERVE_MODEL = 320 << 20
ACTIVATION_BATCHES = 6
# ... and for what grows with the node count N (issue 19: at 67 M nodes this
# was 1.4 GiB that auto handed the cache and the process did not have; see
# docs/training.md, "Per-node memory"). Bytes per node, one copy per process:
# the store's side arrays, shared by every sampler and producer
# (flashgnn_store's shared module) — labels as int32, the relabelling maps
# (node_index + node_order, uint32 each) when the dataset was relabelled, the
# feature CRCs (uint32) when features are in a separate file; and per id of
# a split, what the loaders hold: the train/val/test ids (int64), plus, per
# training epoch, the train split's shuffled positions, its seed ids in that
# order and the pipeline's copy of them (3 x int64).
NODE_BYTES_LABELS = 4
NODE_BYTES_MAPS = 8
NODE_BYTES_CRCS = 4
SPLIT_ID_BYTES = 8
EPOCH_ORDER_BYTES = 24
# The share of the process's own resident file pages (its mapped code) that
# `auto` treats as in use although the kernel lists them as reclaimable page
# cache (see available_memory). Measured on a quiet machine (make
# bench-defaults, 2026-11-25 03:23, data/ooc under 1.5 GiB): 384/431/512/640
# MiB budgets took 44.8/40.2/33.6/31.3 s, the 640 MiB run peaking at 1524 MiB
# RSS; half (0.5) gave 431 MiB there, a fifth gives ~510 MiB.
CODE_PAGES_KEPT = 0.2
# The lookahead window `auto` picks for training: the measured sweet spot
# (docs/benchmarks.md, online lookahead: 1.46x the default online cache at the
# same memory). It pays even when the cache holds the whole dataset: the
# window's rows go out as one engine call per batch over known ids, off the
# sampling path, where cache lookups sit on it (make bench-defaults: data/demo
# under a 1.5 GiB cap, 16.0 s with lookahead vs 28.3 s without).
AUTO_LOOKAHEAD = 8
# The data files a cache can hold (side arrays are read once, not cached).
_DATA_FILES = ("graph.fg", "overflow.fg", "features.fg")


def batch_bytes(path, fanouts, batch_size: int, seed: int = 0, engine: str = "uring", features=True) -> int:
    """Measured bytes of one mini-batch as handed to the consumer (ids, edges,
    features, labels), the larger of two, with headroom. ``features="free"``:
    a structure-stage batch of lookahead (only the rows that came with the
    structure's reads, packed; the rest of ``x`` is filled later)."""
    from flashgnn.store.dataset import Dataset
    from flashgnn.sample.sampler import Sampler

    ds = Dataset(path)
    s = Sampler(path, fanouts, engine=engine, labels=True, features=features)
    rng = np.random.default_rng(seed)
    pool = ds.split("train") if "train" in ds.split_names else np.arange(ds.num_nodes)
    worst = 0
    for _ in range(2):
        b = s.sample(rng.choice(pool, min(batch_size, len(pool)), replace=False), seed=int(rng.integers(1 << 31)))
        extra = b.missing.nbytes if b.missing is not None else 0
        worst = max(worst, sum(a.nbytes for a in (b.n_id, b.row, b.col, b.x, b.y)) + extra)
    return int(worst * HEADROOM)


def window_bytes(prefetch: int, lookahead: int, per_batch: int, per_lookahead: int) -> int:
    """The prefetch window: ``prefetch`` full batches, and with lookahead the
    structure-stage batches held ahead — ``lookahead`` known batches plus the
    structure stage's own queue (STRUCTURE_QUEUE) — each holding only the rows
    that came free (``per_lookahead``, measured)."""
    return prefetch * per_batch + ((lookahead + STRUCTURE_QUEUE) * per_lookahead if lookahead else 0)


def split(budget: int, path, fanouts, batch_size: int, workers: int = 1, prefetch: int = 4,
          hot_fraction: float = DEFAULT_HOT_FRACTION, per_batch: int | None = None, lookahead: int = 0,
          per_lookahead: int | None = None) -> dict:
    """The budget split; raises ValueError when it cannot hold engine + window.
    ``per_batch`` / ``per_lookahead``: the measured bytes of a full and of a
    structure-stage batch (:func:`batch_bytes`), measured here when None."""
    per_batch = batch_bytes(path, fanouts, batch_size) if per_batch is None else int(per_batch)
    workers, prefetch, lookahead = max(1, int(workers)), max(1, int(prefetch)), max(0, int(lookahead))
    if not lookahead:
        per_lookahead = 0
    elif per_lookahead is None:
        per_lookahead = batch_bytes(path, fanouts, batch_size, features="free")
    engine = workers * (ENGINE_FIXED_PER_PRODUCER + per_batch)
    window = window_bytes(prefetch, lookahead, per_batch, int(per_lookahead))
    rest = int(budget) - engine - window
    if rest < 0:
        raise ValueError(f"--memory-budget {budget:,} bytes is below the {engine + window:,} bytes the engine "
                         f"({workers} producer(s) x ({ENGINE_FIXED_PER_PRODUCER >> 20} MiB buffers + a {per_batch:,}-byte batch)) "
                         f"and the prefetch "
                         f"window ({prefetch} + {lookahead} lookahead batches) need; raise it or lower "
                         "--prefetch/--lookahead/--workers/--batch-size")
    lookahead_cache = int(rest * LOOKAHEAD_SHARE) if lookahead else 0
    cache = rest - lookahead_cache
    static = int(cache * hot_fraction)
    return {"budget": int(budget), "engine": engine, "window": window, "per_batch": per_batch,
            "per_lookahead": int(per_lookahead), "workers": workers,
            "prefetch": prefetch, "lookahead": lookahead, "lookahead_cache": lookahead_cache, "cache": cache,
            "cache_static": static, "cache_dynamic": cache - static}


def parse_budget(text: str):
    """``--memory-budget`` values: ``auto`` (the default where it applies) or a size (``0`` = none)."""
    if str(text).strip().lower() == "auto":
        return "auto"
    from flashgnn._util import parse_size

    return parse_size(text)


def dataset_bytes(path) -> int:
    """Bytes of the dataset's page files: what a cache would need to hold it all."""
    return sum(os.path.getsize(os.path.join(path, f)) for f in _DATA_FILES if os.path.exists(os.path.join(path, f)))


def auto_reserve(per_batch: int, torch_loaded: bool, node_bytes: int = 0) -> int:
    """Bytes `auto` leaves outside the budget: torch unless already imported,
    the model's fixed part, activations of ACTIVATION_BATCHES batches, and
    ``node_bytes`` of per-node state (:func:`node_reserve`)."""
    return (0 if torch_loaded else AUTO_RESERVE_TORCH) + AUTO_RESERVE_MODEL + ACTIVATION_BATCHES * int(per_batch) + \
        int(node_bytes)


def node_reserve(path, training: bool = True) -> dict:
    """What a process training on (``training``) or serving dataset ``path``
    keeps per node besides the cache, from its manifest: ``parts`` (bytes by
    what: labels, maps, feature CRCs, splits), ``per_node`` (their sum / N),
    ``held`` (the side arrays this process already holds for it now — counted
    in the usage the available memory was measured against, so not reserved
    twice) and ``bytes`` (the sum less ``held``: what auto reserves)."""
    from flashgnn.store.dataset import Dataset

    ds = path if isinstance(path, Dataset) else Dataset(os.fspath(path))
    m, n = ds.manifest, int(ds.num_nodes)
    files = m.get("files", {})
    parts = {}
    if "labels.npy" in files:
        parts["labels"] = NODE_BYTES_LABELS * n
    if m.get("reorder", "none") != "none":
        parts["maps"] = NODE_BYTES_MAPS * n
    if m.get("features", {}).get("placement") == "separate" and ds.feature_dim:
        parts["feature CRCs"] = NODE_BYTES_CRCS * n
    sp = m.get("splits", {})
    if training and sp:
        parts["splits"] = SPLIT_ID_BYTES * sum(int(sp.get(k, 0)) for k in ("train", "val", "test")) + \
            EPOCH_ORDER_BYTES * int(sp.get("train", 0))
    total = sum(parts.values())
    held = int(ds._core.side_bytes_held())
    return {"nodes": n, "parts": parts, "per_node": total / max(n, 1), "held": held, "bytes": max(0, total - held)}


def _node_text(node: dict) -> str:
    """The per-node term in words, for auto's one-line reason (it is part of the reserve)."""
    from flashgnn._util import human_bytes as h

    what = ", ".join(node["parts"]) or "nothing"
    held = f"; {h(node['held'])} of it already held" if node["held"] else ""
    return f" and {node['nodes']:,} nodes ({h(node['bytes'])} of it: {node['per_node']:.1f} B/node of {what}{held})"


def auto(path, fanouts, batch_size: int, workers: int = 1, prefetch: int = 4,
         hot_fraction: float = DEFAULT_HOT_FRACTION, lookahead: int | None = None, training: bool = True,
         processes: int = 1, available: int | None = None, per_batch: int | None = None,
         reserve: int | None = None, per_lookahead: int | None = None, engine: str | None = None) -> dict:
    """``--memory-budget auto``: the budget sized from what this process may
    really use and split as :func:`split` splits it.

    With ``engine="memory"`` the budget is 0: that engine already holds every
    page file in RAM, so a cache or a lookahead row cache would only copy the
    same bytes a second and third time (it used to: 3.8 GiB of peak RSS for a
    1.3 GiB dataset).

    available = :func:`available_memory` (cgroup headroom, else MemAvailable)
    ÷ ``processes`` (ranks on this machine); room = available −
    :func:`auto_reserve`; the budget is the smaller of room and what caching the
    whole dataset needs (engine + window + the page files). ``lookahead``
    None lets auto choose: ``AUTO_LOOKAHEAD`` for training when the cache
    cannot hold the data, else 0. When room cannot even hold the engine and
    the window, the budget is 0 (no cache) and the reason says so.
    ``reserve`` replaces :func:`auto_reserve` (and its per-node term) for a
    process without torch or a model (``flashgnn bench``'s engine child, which
    measures its own)."""
    import sys

    from flashgnn._util import human_bytes as h

    if engine == "memory":
        return {"budget": 0, "lookahead": 0, "per_batch": 0,
                "auto": "auto: the memory engine holds the whole dataset in RAM: no cache or lookahead on top of it"}
    avail = (available_memory() if available is None else int(available)) // max(1, int(processes))
    per_batch = batch_bytes(path, fanouts, batch_size) if per_batch is None else int(per_batch)
    workers, prefetch = max(1, int(workers)), max(1, int(prefetch))
    data = dataset_bytes(path)
    base = workers * (ENGINE_FIXED_PER_PRODUCER + per_batch) + prefetch * per_batch
    given = reserve is not None
    node = None if given else node_reserve(path, training)
    reserve = int(reserve) if given else auto_reserve(per_batch, torch_loaded="torch" in sys.modules,
                                                      node_bytes=node["bytes"])
    room = avail - reserve
    why = f"auto: {h(avail)} available" + (f" per process ({processes})" if processes > 1 else "") + \
          f" - {h(reserve)} reserve for " + ("the interpreter" if given else
                                              ("" if "torch" in sys.modules else "torch and ") + "the model" +
                                              _node_text(node))
    if room < base:
        return {"budget": 0, "lookahead": 0 if lookahead is None else int(lookahead), "per_batch": per_batch,
                "auto": why + f" leaves {h(max(room, 0))}, less than the {h(base)} the engine and prefetch window "
                               "need: running without a cache"}
    def ahead(la: int) -> int:  # what `la` lookahead batches add to the window (structure batches, measured once)
        nonlocal per_lookahead
        if not la:
            return 0
        if per_lookahead is None:
            per_lookahead = batch_bytes(path, fanouts, batch_size, features="free")
        return window_bytes(prefetch, la, per_batch, per_lookahead) - prefetch * per_batch

    if lookahead is None:
        # Lookahead for training whenever its window leaves room for the caches and its half of the rest
        # pays the Belady cache's node-sized arrays at least twice over (else it would hold no rows, or few).
        def pays() -> bool:
            if node is not None:
                n = node["nodes"]
            else:
                from flashgnn.store.dataset import Dataset

                n = int(Dataset(os.fspath(path)).num_nodes)
            return (room - base - ahead(AUTO_LOOKAHEAD)) * LOOKAHEAD_SHARE > 2 * BELADY_NODE_BYTES * n

        lookahead = AUTO_LOOKAHEAD if training and pays() else 0
    lookahead = int(lookahead)
    need = base + ahead(lookahead) + (int(data / (1 - LOOKAHEAD_SHARE)) if lookahead else data)
    budget = min(room, need)
    s = split(budget, path, fanouts, batch_size, workers=workers, prefetch=prefetch, hot_fraction=hot_fraction,
              per_batch=per_batch, lookahead=lookahead, per_lookahead=per_lookahead)
    s["auto"] = why + (f"; the dataset's {h(data)} fit" if budget == need else f"; dataset {h(data)}") + \
        (f"; lookahead {lookahead}" if lookahead else "")
    return s


def describe(s: dict) -> str:
    from flashgnn._util import human_bytes as h

    la = s.get("lookahead", 0)
    if s.get("budget", 0) == 0:
        return f"memory budget 0 ({s['auto']})" if s.get("auto") else "memory budget 0 (no cache)"
    return ((f"{s['auto']} -> " if s.get("auto") else "") + f"memory budget {h(s['budget'])} = engine {h(s['engine'])} ({s['workers']} producer(s) x (32.0 MiB buffers "
            f"+ {h(s['per_batch'])} batch)) + prefetch window {h(s['window'])} ({s['prefetch']} x {h(s['per_batch'])}"
            + (f" + {la} lookahead + {STRUCTURE_QUEUE} queued x {h(s['per_lookahead'])} structure" if la else "") + ")"
            + (f" + lookahead cache {h(s['lookahead_cache'])}" if la else "")
            + f" + cache {h(s['cache'])} (static {h(s['cache_static'])} + dynamic {h(s['cache_dynamic'])})")


def _read_int(path: str) -> int | None:
    try:
        with open(path) as f:
            text = f.read().strip()
    except OSError:
        return None
    return None if text in ("", "max") else int(text)


def _own_cgroups() -> list[tuple[str, str]] | None:
    """This process's cgroups as ``(controllers, path)`` (``controllers`` is empty for v2), or None."""
    try:
        with open("/proc/self/cgroup") as f:
            return [tuple(line.split(":", 2)[1:]) for line in f.read().splitlines() if line.count(":") >= 2]
    except OSError:
        return None


def _cgroup_headroom() -> int | None:
    """Bytes this process's memory cgroup may still grow by (limit − usage),
    v2 or v1; None when no limit applies (or none can be read)."""
    lines = _own_cgroups()
    if lines is None:
        return None
    best = None
    for controllers, path in lines:
        if controllers == "":  # cgroup v2: limits anywhere up the tree apply
            roots = [("/sys/fs/cgroup", "memory.max", "memory.current")]
        elif "memory" in controllers.split(","):
            roots = [("/sys/fs/cgroup/memory", "memory.limit_in_bytes", "memory.usage_in_bytes")]
        else:
            continue
        for root, limit_name, usage_name in roots:
            for d in _cgroup_dirs(root, path):
                limit, usage = _read_int(f"{d}/{limit_name}"), _read_int(f"{d}/{usage_name}")
                if limit is not None and limit < (1 << 60) and usage is not None:
                    usage -= _inactive_file(d)  # clean page cache the kernel reclaims before it OOM-kills
                    room = max(limit - usage, 0)
                    best = room if best is None else min(best, room)
    return best


def _cgroup_dirs(root: str, path: str):
    """The directories of cgroup ``path`` under ``root`` and of each ancestor up to the root: a limit
    anywhere up the tree applies."""
    p = path
    while True:
        yield root + (p if p != "/" else "")
        if p in ("/", ""):
            return
        p = p.rsplit("/", 1)[0] or "/"


def _inactive_file(cgroup_dir: str) -> int:
    """The cgroup's inactive file pages (v1 ``total_inactive_file``, v2
    ``inactive_file``): counted in its usage, yet reclaimable."""
    try:
        with open(f"{cgroup_dir}/memory.stat") as f:
            for line in f:
                k, _, v = line.partition(" ")
                if k in ("total_inactive_file", "inactive_file"):
                    return int(v)
    except (OSError, ValueError):
        pass
    return 0


def _mem_available() -> int | None:
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except OSError:
        return None
    return None


def _own_file_rss() -> int:
    """This process's resident file-backed pages (``RssFile``: the mapped code
    of the interpreter, torch and the extension), bytes; 0 when unreadable."""
    from flashgnn._util import proc_status_bytes

    return proc_status_bytes("RssFile")


def available_memory() -> int:
    """Bytes this process may still allocate: the smaller of its memory
    cgroup's headroom (limit − usage; v2 ``memory.max`` or v1
    ``memory.limit_in_bytes``, the tightest up the hierarchy) and the
    kernel's ``MemAvailable``, less CODE_PAGES_KEPT of the process's own
    mapped file pages; 1 GiB when neither can be read (a stated floor, not a
    measurement).

    Both sources count clean page cache as available, and that includes the
    process's own mapped code (torch's libraries: ~300 MiB resident after
    ``import torch``, nearly all on the inactive list). The kernel can take
    those pages, but the process faults them straight back: under a cap,
    the training step runs up to 1.8x slower with no data wait once the
    budget eats into them (make bench-defaults, 2026-11-25: data/demo under
    1.5 GiB, a 672 MiB budget 15.9 s against 640 MiB 8.7 s; data/ooc 584 MiB
    82.6 s against 512 MiB 50.9 s, with another job on the cores). The hot
    part of that code is kept (CODE_PAGES_KEPT)."""
    found = [v for v in (_cgroup_headroom(), _mem_available()) if v is not None]
    if not found:
        return 1 << 30
    return max(0, min(found) - int(CODE_PAGES_KEPT * _own_file_rss()))


# One cache per dataset per process. Loaders built without an explicit
# ``cache=`` take the cache registered for their dataset here, so a train and a
# val loader (and the PyG remote backend's feature store and sampler) share one
# budget instead of each claiming all available memory. Keyed by process id,
# canonical directory and the manifest's dataset_id (a rebuild in place is
# another dataset); held weakly, so the cache goes when its last loader goes.
_SHARED: dict[tuple, "weakref.ref"] = {}
_SHARED_LOCK = threading.Lock()


def _dataset_key(path) -> tuple:
    from flashgnn.store.dataset import Dataset

    ds = path if isinstance(path, Dataset) else Dataset(os.fspath(path))
    return (os.getpid(), os.path.realpath(ds.path), ds.manifest.get("dataset_id"))


def loader_cache(cache, path, fanouts, batch_size: int, memory_budget="auto", *, device_cache=None,
                 given_name: str = "cache=", who: str = "flashgnn", **kw):
    """A loader's host cache: the process's :func:`shared_cache` for the
    dataset, unless the caller brought its own tier (``cache`` or
    ``device_cache``, returned as given): then an explicit ``memory_budget``
    is refused, since that tier is already sized."""
    if cache is None and device_cache is None:
        return shared_cache(path, fanouts, batch_size, memory_budget, who=who, **kw)
    if memory_budget not in ("auto", 0, None):
        raise ValueError(f"{who}: memory_budget={memory_budget!r} and {given_name} both given: the cache passed in is "
                         "already sized; leave memory_budget out")
    return cache


def shared_cache(path, fanouts, batch_size: int, memory_budget="auto", *, workers: int = 1, prefetch: int = 4,
                 quiet: bool = False, who: str = "flashgnn", engine: str | None = None):
    """The :class:`flashgnn.Cache` every loader on dataset ``path`` in this
    process shares, made on first use; None for ``memory_budget`` 0/None.

    ``memory_budget``: ``"auto"`` (:func:`auto`, without lookahead: the
    loader's own window is not part of the shared cache) or a size in bytes
    (:func:`split`; refused with the minimum when below engine + window). The
    first loader on a dataset sizes the cache with its fanouts, batch size and
    producers; later ones reuse it as it is (a different explicit size is
    reported, not applied). One line describing the split is printed to
    stderr when the cache is made, unless ``quiet``."""
    import sys

    if memory_budget in (0, None):
        return None
    if isinstance(memory_budget, str):
        memory_budget = parse_budget(memory_budget)
        if memory_budget == 0:
            return None
    key = _dataset_key(path)
    with _SHARED_LOCK:
        ref = _SHARED.get(key)
        cache = ref() if ref is not None else None
        if cache is not None:
            if memory_budget != "auto" and memory_budget != cache.requested and not quiet:
                print(f"{who}: {key[1]}: sharing the cache already made for this dataset in this process "
                      f"({cache.budget:,} bytes, memory_budget={cache.requested!r}); memory_budget={memory_budget!r} "
                      "is not applied", file=sys.stderr, flush=True)
            return cache
        from flashgnn.sample.sampler import Cache

        ds_path = key[1]
        if memory_budget == "auto":
            s = auto(ds_path, fanouts, batch_size, workers=workers, prefetch=prefetch, lookahead=0, training=False,
                     engine=engine)
        else:
            s = split(memory_budget, ds_path, fanouts, batch_size, workers=workers, prefetch=prefetch)
        if not quiet:
            print(f"{who}: {ds_path}: {describe(s)}; one cache per dataset per process, shared by its loaders",
                  file=sys.stderr, flush=True)
        if not s.get("cache"):
            return None
        cache = Cache(ds_path, fanouts, s["cache"], hot_fraction=DEFAULT_HOT_FRACTION, batch_size=batch_size)
        cache.requested, cache.split = memory_budget, s
        _SHARED[key] = weakref.ref(cache)
        return cache


def _cgroup_cpu_quota() -> float | None:
    """CPUs this process's cgroup may use (v2 ``cpu.max``, v1
    ``cpu.cfs_quota_us / cpu.cfs_period_us``, the tightest up the
    hierarchy); None when no quota applies or none can be read."""
    lines = _own_cgroups()
    if lines is None:
        return None
    best = None
    for controllers, path in lines:
        v2 = controllers == ""
        if not v2 and "cpu" not in controllers.split(","):
            continue
        root = "/sys/fs/cgroup" if v2 else "/sys/fs/cgroup/cpu"
        for d in _cgroup_dirs(root, path):
            quota = None
            try:
                if v2:
                    with open(f"{d}/cpu.max") as f:
                        parts = f.read().split()
                    if parts and parts[0] != "max":
                        quota = int(parts[0]) / int(parts[1])
                else:
                    q, period = _read_int(f"{d}/cpu.cfs_quota_us"), _read_int(f"{d}/cpu.cfs_period_us")
                    if q is not None and q > 0 and period:
                        quota = q / period
            except (OSError, ValueError, IndexError):
                quota = None
            if quota is not None:
                best = quota if best is None else min(best, quota)
    return best


def cpu_cores() -> int:
    """Cores this process may run on: its CPU affinity
    (``os.sched_getaffinity``), capped by its cgroup's CPU quota (rounded
    down, at least 1)."""
    try:
        n = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        n = os.cpu_count() or 1
    q = _cgroup_cpu_quota()
    if q is not None:
        n = min(n, max(1, int(q)))
    return max(1, n)


def producers_that_fit(want: int, budget: int | None, per_batch: int, prefetch: int = 4, lookahead: int = 0) -> int:
    """The most producers, up to ``want``, whose engine buffers (see
    :func:`split`) and the prefetch window fit ``budget`` (None: no bound);
    at least 1 (a budget too small even for one is refused by :func:`split`)."""
    n = max(1, int(want))
    if budget is None:
        return n
    window = (max(1, prefetch) + max(0, lookahead)) * per_batch
    while n > 1 and n * (ENGINE_FIXED_PER_PRODUCER + per_batch) + window > budget:
        n -= 1
    return n
