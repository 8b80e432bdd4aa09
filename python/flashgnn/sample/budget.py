"""One ``--memory-budget`` split between the engine's buffers, the prefetch
window and the memory tiers (``flashgnn train``, ``bench``, ``serve``,
the loaders).

The arithmetic and the probes live in Rust (``flashgnn_sample::budget``):
what the budget covers, how it is split, the rule that each row is held
once (the lookahead's Belady row cache shares only what the page cache
cannot hold), and cgroup v1/v2 and ``/proc`` readings. This module measures
what only a sampler over the real dataset can tell (a batch's bytes), reads
the per-node figures of the manifest, and words the result.

A split is a dict with the keys ``budget, engine, window, per_batch,
per_lookahead, workers, prefetch, lookahead, lookahead_cache, cache,
cache_static, cache_dynamic`` (``auto`` adds ``auto``, its reason in words,
and ``fits``); ``engine + window + lookahead_cache + cache == budget``.
"""

from __future__ import annotations

import errno
import os
import sys

import numpy as np

from flashgnn import _core
from flashgnn.sample.sampler import DEFAULT_HOT_FRACTION

# batch_bytes: draws that may meet an unreadable page (each then halves the draw) before the error is raised.
MEASURE_RETRIES = 12
# Owned by flashgnn_sample (budget.rs, neighbor.rs); see their comments for the derivations.
ENGINE_FIXED_PER_PRODUCER = _core.ENGINE_BYTES_PER_PRODUCER  # buffer pool + per-batch page cache
HEADROOM = _core.BUDGET_HEADROOM
LOOKAHEAD_SHARE = _core.LOOKAHEAD_SHARE
BELADY_NODE_BYTES = _core.BELADY_NODE_BYTES
STRUCTURE_QUEUE = _core.STRUCTURE_QUEUE
AUTO_LOOKAHEAD = _core.AUTO_LOOKAHEAD
AUTO_RESERVE_TORCH = _core.AUTO_RESERVE_TORCH
AUTO_RESERVE_MODEL = _core.AUTO_RESERVE_MODEL
ACTIVATION_BATCHES = _core.ACTIVATION_BATCHES
CODE_PAGES_KEPT = _core.CODE_PAGES_KEPT
# What grows with the node count N besides the cache (docs/training.md,
# "Per-node memory"), in bytes, one copy per process: the store's side
# arrays — labels as int32, the relabelling maps (node_index + node_order,
# uint32 each) when the dataset was relabelled, the feature CRCs (uint32)
# when features are in a separate file — and per id of a split what the
# loaders hold: the train/val/test ids (int64), plus, per training epoch,
# the train split's shuffled positions, its seed ids in that order and the
# pipeline's copy of them (3 x int64). These are facts of the manifest and
# the loaders, so they are counted here, not in Rust.
NODE_BYTES_LABELS = 4
NODE_BYTES_MAPS = 8
NODE_BYTES_CRCS = 4
SPLIT_ID_BYTES = 8
EPOCH_ORDER_BYTES = 24
# The data files a cache can hold (side arrays are read once, not cached).
_DATA_FILES = (_core.GRAPH_FILE, _core.OVERFLOW_FILE, _core.FEATURES_FILE)


def batch_bytes(path, fanouts, batch_size: int, seed: int = 0, engine: str = "uring", features=True,
                sampler=None, pool=None) -> int:
    """Measured bytes of one mini-batch as handed to the consumer (ids, edges,
    features, labels), the larger of two, with headroom. ``features="free"``:
    a structure-stage batch of lookahead (only the rows that came with the
    structure's reads, packed; the rest of ``x`` is filled later).
    ``sampler``: measure with this :class:`flashgnn.Sampler` (a loader's
    own; ``features=True`` then counts a full row for every node even where
    it hands rows out packed) instead of opening one. ``pool``: the seeds
    to draw from (the engine's ids; a typed loader's input type), else the
    train split (of the target type), else every node."""
    from flashgnn.store.dataset import Dataset
    from flashgnn.sample.sampler import Sampler

    ds = Dataset(path)
    if ds.is_typed and features == "free":
        features = False  # the typed lookahead's structure stage: a typed row never comes with a slot
    if sampler is None:
        sampler = Sampler(path, fanouts, engine=engine, labels=True, features=features)
    elif features == "free" and sampler.features != "free":
        raise ValueError("batch_bytes(features='free') needs a sampler with features='free'")
    rng = np.random.default_rng(seed)
    if pool is not None:
        pool = np.asarray(pool, dtype=np.int64)
    elif ds.is_typed:  # seeds of the target type, as global ids (the engine's)
        t = ds.target_type
        local = ds.split("train") if "train" in ds.split_names else np.arange(ds.node_type(t)["count"])
        pool = np.asarray(local, dtype=np.int64) + ds.type_offset(t)
    else:
        pool = ds.split("train") if "train" in ds.split_names else np.arange(ds.num_nodes)
    worst, measured, failed = 0, 0, 0
    want = size = min(batch_size, len(pool))
    while measured < 2:
        try:
            b = sampler.sample(rng.choice(pool, size, replace=False), seed=int(rng.integers(1 << 31)))
        except OSError as e:
            # A page the device cannot read (EIO) fails the batches that need it, not the sizing: a smaller
            # draw that misses it is measured and scaled up (an overestimate, the safe side of a budget).
            # Any other error, or no draw missing it, is raised.
            failed += 1
            if e.errno != errno.EIO or failed > MEASURE_RETRIES or size == 1:
                raise
            size = max(1, size // 2)
            continue
        measured += 1
        scale = want / size
        if ds.is_typed:  # every type's ids, rows and labels, every edge type's edges
            parts = [a for p in b.node.values() for a in (p.n_id, p.x, p.y) if a is not None]
            parts += [p.edge_index for p in b.edge.values()]
            # A structure-only sampler's batches get their rows later (typed lookahead): counted as filled.
            unfilled = sum(len(b.node[t["name"]].n_id) * t["features"]["dim"]
                           * np.dtype(sampler.out_dtype or t["features"]["dtype"]).itemsize
                           for t in ds.types["node_types"]
                           if features is True and t.get("features") and b.node[t["name"]].x is None)
            worst = max(worst, (sum(a.nbytes for a in parts) + unfilled) * scale)
            continue
        full = features is True and sampler.features is not False
        x = len(b.n_id) * b.x.shape[1] * b.x.itemsize if full else b.x.nbytes
        extra = b.missing.nbytes if b.missing is not None and not full else 0
        worst = max(worst, (sum(a.nbytes for a in (b.n_id, b.edge_index, b.y)) + x + extra) * scale)
    return int(worst * HEADROOM)


def window_bytes(prefetch: int, lookahead: int, per_batch: int, per_lookahead: int) -> int:
    """The prefetch window: ``prefetch`` full batches, and with lookahead the
    structure-stage batches held ahead (``lookahead`` + STRUCTURE_QUEUE)."""
    return _core.budget_window_bytes(int(prefetch), int(lookahead), int(per_batch), int(per_lookahead))


def split(budget: int, path, fanouts, batch_size: int, workers: int = 1, prefetch: int = 4,
          hot_fraction: float = DEFAULT_HOT_FRACTION, per_batch: int | None = None, lookahead: int = 0,
          per_lookahead: int | None = None, row_codec: str = "none") -> dict:
    """The budget split; raises ValueError when it cannot hold engine + window.
    ``per_batch`` / ``per_lookahead``: the measured bytes of a full and of a
    structure-stage batch (:func:`batch_bytes`), measured here when None.
    ``path`` None: a split without a dataset (its page files count as 0 bytes).
    ``row_codec``: the cache's (:func:`dataset_bytes`)."""
    lookahead = max(0, int(lookahead))
    per_batch = batch_bytes(path, fanouts, batch_size) if per_batch is None else int(per_batch)
    if not lookahead:
        per_lookahead = 0
    elif per_lookahead is None:
        per_lookahead = batch_bytes(path, fanouts, batch_size, features="free")
    data = dataset_bytes(path, row_codec) if path is not None else 0
    try:
        return _core.budget_split(int(budget), per_batch, int(per_lookahead), max(1, int(workers)),
                                  max(1, int(prefetch)), lookahead, float(hot_fraction), data)
    except _core.InputError as e:
        raise ValueError(str(e)) from None


def parse_budget(text: str):
    """``--memory-budget`` values: ``auto`` (the default where it applies) or a size (``0`` = none)."""
    if str(text).strip().lower() == "auto":
        return "auto"
    from flashgnn._util import parse_size

    return parse_size(text)


def dataset_bytes(path, row_codec: str = "none") -> int:
    """Bytes of the dataset's page files: what a cache would need to hold it all (a typed dataset's
    per-type feature tables, ``t<i>.features.fg``, included). ``row_codec``: a homogeneous dataset's rows
    counted at the size a static set holds them in (:func:`row_held_bytes`), as the cache charges them."""
    names = list(_DATA_FILES)
    if os.path.isdir(path):  # t<i>.features.fg: the typed form of features.fg (docs/format.md)
        names += [f for f in os.listdir(path) if f.endswith("." + _core.FEATURES_FILE)]
    total = sum(os.path.getsize(os.path.join(path, f)) for f in names if os.path.exists(os.path.join(path, f)))
    if row_codec != "none":
        import json

        with open(os.path.join(os.fspath(path), _core.MANIFEST_FILE), encoding="utf-8") as f:
            m = json.load(f)
        feats = m.get("features") or {}
        if "types" not in m and feats.get("dim"):  # a typed dataset's tables: counted as stored
            dim, dt = int(feats["dim"]), str(feats["dtype"])
            total -= int(m["num_nodes"]) * (dim * np.dtype(dt).itemsize - row_held_bytes(row_codec, dt, dim))
    return total


def row_held_bytes(row_codec: str, dtype: str, dim: int) -> int:
    """Bytes the cache's static set holds one row of ``dim`` values of ``dtype`` in under ``row_codec``
    (``flashgnn.Cache(row_codec=...)``): fp16 2 B a float32 value, int8 one byte a value plus a 4-B scale,
    int4 half a byte a value plus a 2-B scale per 32 values;
    other dtypes, and ``"none"``, as stored. Unknown names are refused, named."""
    return _core.row_held_bytes(str(row_codec), str(dtype), int(dim))


def auto_reserve(per_batch: int, torch_loaded: bool, node_bytes: int = 0) -> int:
    """Bytes `auto` leaves outside the budget: torch unless already imported,
    the model's fixed part, activations of ACTIVATION_BATCHES batches, and
    ``node_bytes`` of per-node state (:func:`node_reserve`)."""
    return _core.budget_reserve(int(per_batch), bool(torch_loaded), int(node_bytes))


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
         reserve: int | None = None, per_lookahead: int | None = None, engine: str | None = None,
         row_codec: str = "none") -> dict:
    """``--memory-budget auto``: the budget sized from what this process may
    really use (``flashgnn_sample::budget::auto``), with its reason in words.

    With ``engine="memory"`` the budget is 0: that engine already holds every
    page file in RAM, so a cache or a lookahead row cache would only copy the
    same bytes again.

    available = :func:`available_memory` ÷ ``processes`` (ranks on this
    machine); room = available − :func:`auto_reserve` (or ``reserve``, for a
    process without torch or a model, e.g. ``flashgnn bench``'s engine
    child); the budget is the smaller of room and what caching the whole
    dataset needs (its rows at their ``row_codec`` size: :func:`dataset_bytes`). ``lookahead`` None lets
    auto choose (training only)."""
    from flashgnn._util import human_bytes as h

    if engine == "memory":
        return {"budget": 0, "lookahead": 0, "per_batch": 0,
                "auto": "auto: the memory engine holds the whole dataset in RAM: no cache or lookahead on top of it"}
    avail = (available_memory() if available is None else int(available)) // max(1, int(processes))
    per_batch = batch_bytes(path, fanouts, batch_size) if per_batch is None else int(per_batch)
    given = reserve is not None
    node = None if given else node_reserve(path, training)
    reserve = int(reserve) if given else auto_reserve(per_batch, "torch" in sys.modules, node["bytes"])
    if per_lookahead is None and (lookahead is None and training or lookahead):
        per_lookahead = batch_bytes(path, fanouts, batch_size, features="free")
    nodes = node["nodes"] if node is not None else _num_nodes(path)
    data = dataset_bytes(path, row_codec)
    s = _core.budget_auto(avail, reserve, data, nodes, bool(training), None if lookahead is None else int(lookahead),
                          per_batch, int(per_lookahead or 0), max(1, int(workers)), max(1, int(prefetch)),
                          float(hot_fraction))
    why = f"auto: {h(avail)} available" + (f" per process ({processes})" if processes > 1 else "") + \
          f" - {h(reserve)} reserve for " + ("the interpreter" if given else
                                              ("" if "torch" in sys.modules else "torch and ") + "the model" +
                                              _node_text(node))
    if not s["budget"]:
        s["auto"] = why + (f" leaves {h(s['room'])}, less than the {h(s['base'])} the engine and prefetch window "
                           "need: running without a cache")
        return s
    s["auto"] = why + (f"; the dataset's {h(data)} fit" if s["fits"] else f"; dataset {h(data)}") + \
        (f"; lookahead {s['lookahead']}" if s["lookahead"] else "")
    return s


def _num_nodes(path) -> int:
    from flashgnn.store.dataset import Dataset

    return int(Dataset(os.fspath(path)).num_nodes)


def describe(s: dict) -> str:
    from flashgnn._util import human_bytes as h

    la = s.get("lookahead", 0)
    if s.get("budget", 0) == 0:
        return f"memory budget 0 ({s['auto']})" if s.get("auto") else "memory budget 0 (no cache)"
    return ((f"{s['auto']} -> " if s.get("auto") else "") + f"memory budget {h(s['budget'])} = engine {h(s['engine'])} ({s['workers']} producer(s) x ({h(ENGINE_FIXED_PER_PRODUCER)} buffers "
            f"+ {h(s['per_batch'])} batch)) + prefetch window {h(s['window'])} ({s['prefetch']} x {h(s['per_batch'])}"
            + (f" + {la} lookahead + {STRUCTURE_QUEUE} queued x {h(s['per_lookahead'])} structure" if la else "") + ")"
            + (f" + lookahead cache {h(s['lookahead_cache'])}" if la else "")
            + f" + cache {h(s['cache'])} (static {h(s['cache_static'])} + dynamic {h(s['cache_dynamic'])})")


def available_memory() -> int:
    """Bytes this process may still allocate: the smaller of its memory
    cgroup's headroom (v2 or v1, the tightest up the hierarchy, less
    reclaimable inactive file pages) and ``MemAvailable``, less
    CODE_PAGES_KEPT of the process's own mapped code, which both count as
    reclaimable page cache although the process would fault it straight
    back (under a cap the step ran up to 1.8x slower once the budget ate
    into it: make bench-defaults, 2026-11-25). 1 GiB when neither can be
    read (a stated floor, not a measurement). Read in Rust
    (``flashgnn_sample::budget::probe``)."""
    return int(_core.available_memory())


def cpu_cores() -> int:
    """Cores this process may run on: its CPU affinity, capped by its
    cgroup's CPU quota (rounded down, at least 1)."""
    return int(_core.cpu_cores())


def producers_that_fit(want: int, budget: int | None, per_batch: int, prefetch: int = 4, lookahead: int = 0) -> int:
    """The most producers, up to ``want``, whose engine buffers and the
    prefetch window fit ``budget`` (None: no bound); at least 1."""
    return int(_core.producers_that_fit(int(want), None if budget is None else int(budget), int(per_batch),
                                        int(prefetch), int(lookahead)))
