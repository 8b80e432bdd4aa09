"""`make bench-peers`: flashgnn against PyG's own loader, side by side in one run.

The comparisons against PyG, measured on one dataset with one thread count, each
variant in a fresh child process with the page cache dropped first:

- ``pyg-memory``: PyG's ``NeighborLoader`` with the graph (a torch_sparse
  ``SparseTensor``, so the torch_sparse kernel samples) and the features in
  memory — what PyG users run when the data fits. Not capped.
- ``pyg-mmap``: the same over ``np.load(mmap_mode="r")`` arrays (structure and
  features), under the memory cap — PyG's way to go past memory.
- ``memory``: flashgnn's ``memory`` engine (everything in DRAM). Not capped.
- ``uring``: flashgnn's ``uring`` engine without a cache, under the cap (the
  CPU a miss costs, for the per-hit figure).
- ``uring+cache``: ``uring`` with a cross-batch cache of at most a third of
  the data, under the cap. ``--row-codecs none,fp16,int8`` and ``--hots
  degree,presample`` run it once per (codec, hot set), named by the levers
  that differ from rows as stored with the default hot set, ``auto``
  (``uring+cache/int8``, ``uring+cache/presample``,
  ``uring+cache/int8/presample``), alternated
  with the others in every round; each one's ratio to ``pyg-memory`` and
  ``memory``, hit rate and reads per batch are reported (``levers``).
- ``train-pyg`` / ``train-flashgnn`` / ``train-flashgnn-nocap``: a training
  epoch (``--train-batches`` steps; default the train split's whole epoch) of
  the same model (``flashgnn train``'s defaults: GraphSAGE, hidden 128,
  Adam): PyG's ``NeighborLoader`` in memory feeding PyG's example loop
  (``model(batch.x, batch.adj_t)``), against ``flashgnn train`` with its
  defaults (memory budget auto, producers the cores its torch threads leave;
  evaluation cut to one batch per split, outside the timed epoch anyway)
  under ``--train-memory-limit`` (default 1.5 GiB, ``make bench-defaults``'
  cap: torch and the model need room; the dataset does not fit beside them)
  and without a cap (auto then sizes its cache from the machine's free
  memory). ``flashgnn train`` trims each layer to the nodes it still feeds
  (PyG's ``trim_to_layer``); PyG's loader here cannot, because its
  torch_sparse sampler gives no per-hop counts (only pyg-lib's does, and no
  pyg-lib exists for this platform), so its loop runs the full subgraph
  through both layers, as PyG's example does.

Sampling variants yield ``--batches`` batches of ``--batch-size`` seeds with
``--fanout`` (one producer / one torch thread each with ``--threads 1``); the
rate is taken between the first and the last batch's arrival, as in
``flashgnn bench``. The cap is a cgroup memory limit (``--memory-limit``,
default 768 MiB); the dataset must be at least 1.5x the cap. Ratios, never
bare times, are the verdict. With ``--rounds R`` the sampling variants (all
but ``pyg-mmap``) run R times, alternated, and each reports its median
round (every round's rate beside it), and the two headline ratios are also
given per round: this shared machine drifts between runs (another tenant,
the virtual disk's IOPS), and a drift then moves every variant of a round
alike instead of one of them:

- ``uring+cache / pyg-memory`` (target >= 1.0) and ``uring+cache / memory``
  (>= 0.9), batches/s;
- with ``--scaling``, ``memory`` and each ``uring+cache`` lever also run
  with twice the producers (``memory/2x``, ``uring+cache/2x``, same cache)
  in every round: ``uring+cache_2x_vs_1x`` (target >= 1.8) beside
  ``memory_2x_vs_1x``;
- CPU per cache hit / the ``memory`` engine's CPU per extent (<= 1.5);
- ``train-pyg seconds / train-flashgnn seconds`` (>= 1.0: flashgnn's epoch
  with the default budget at least as fast as PyG's in memory), for the
  capped and the uncapped run.

PyG's arrays are written once into ``--work`` (int64 CSC ``colptr``/``row``,
float32 ``x``, ``y``, the train split; ``meta.json`` last marks them
complete) and reused while the dataset is the same. torch_sparse is needed
(``make bench-peers`` installs it into its own virtualenv, ``.venv-peers``);
without it the PyG variants are reported as skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import threading
import time
import warnings
from pathlib import Path

import numpy as np

SAMPLING = ("pyg-memory", "pyg-mmap", "memory", "uring", "uring+cache")
TRAINING = ("train-pyg", "train-flashgnn", "train-flashgnn-nocap")
CAPPED = ("pyg-mmap", "uring", "uring+cache")  # train-flashgnn runs under --train-memory-limit
# Run once per round with --rounds (pyg-mmap is cut off at --max-seconds: once is enough).
REPEATED = ("pyg-memory", "memory", "uring", "uring+cache")
# Suffix of a variant run with twice the producers (--scaling).
TWICE = "/2x"


def measure_batches(loader, batches: int, max_seconds: float, count=lambda b: int(b.num_nodes)) -> dict:
    """Batches/s (and process CPU per batch) between the first and the last of ``batches + 1`` arrivals of
    ``loader``, cut off at ``max_seconds`` (even inside a batch: the caller's child then exits at once);
    ``count(batch)``: its nodes. What the typed and link benchmarks measure."""
    stamps, cpu, nodes = [], [], [0]
    stop = threading.Event()

    def drain():
        for b in loader:
            stamps.append(time.perf_counter())
            cpu.append(time.process_time())
            nodes[0] += count(b)
            if len(stamps) > batches or stop.is_set():
                return

    t0 = time.perf_counter()
    th = threading.Thread(target=drain, daemon=True)
    th.start()
    th.join(max_seconds)
    stop.set()
    done = max(len(stamps) - 1, 0)
    el = stamps[-1] - stamps[0] if done > 0 else time.perf_counter() - t0
    rate = done / el if done > 0 else max(len(stamps), 1) / el
    return {"batches": done, "seconds": el, "batches_per_s": rate, "incomplete": done < batches,
            "upper_bound": done == 0, "nodes_per_batch": nodes[0] / max(len(stamps), 1),
            "cpu_ms_per_batch": (cpu[-1] - cpu[0]) / done * 1e3 if done > 0 else None,
            "finished": not th.is_alive()}


def median_round(runs: list[dict]) -> dict:
    """A variant's result over its rounds: the round with the median rate (the lower middle one of an even
    count), with every round's rate beside it."""
    if len(runs) == 1:
        return runs[0]
    rated = sorted(runs, key=lambda r: r.get("batches_per_s") or 0.0)
    return dict(rated[(len(rated) - 1) // 2], rounds_batches_per_s=[r.get("batches_per_s") for r in runs])


def prepare(path, work: Path, progress: bool = True) -> dict:
    """PyG's arrays for dataset ``path`` in ``work`` (reused when ``meta.json``
    names the same dataset): CSC ``colptr`` [n+1] and ``row`` [e] (the stored
    neighbour lists are the in-neighbours), ``x`` float32 [n, d], ``y`` [n],
    ``train`` (the stored split, else every node)."""
    from flashgnn import _progress
    from flashgnn.store.dataset import Dataset

    ds = Dataset(path)
    n, e, d = ds.num_nodes, ds.num_edges, ds.feature_dim
    meta = {"dataset": os.path.realpath(ds.path), "dataset_id": ds.manifest.get("dataset_id"), "num_nodes": n,
            "num_edges": e, "feature_dim": d, "num_classes": ds.num_classes}
    work.mkdir(parents=True, exist_ok=True)
    done = work / "meta.json"
    if done.exists() and json.loads(done.read_text()) == meta:
        return meta
    done.unlink(missing_ok=True)  # written last: arrays without it are incomplete
    mm = np.lib.format.open_memmap
    colptr = mm(work / "colptr.npy", mode="w+", dtype=np.int64, shape=(n + 1,))
    row = mm(work / "row.npy", mode="w+", dtype=np.int64, shape=(e,))
    x = mm(work / "x.npy", mode="w+", dtype=np.float32, shape=(n, d))
    y = mm(work / "y.npy", mode="w+", dtype=np.int64, shape=(n,))
    chunk, at = 1 << 16, 0
    colptr[0] = 0
    bar = _progress.bar(total=n, desc="peers: PyG arrays", unit="node", disable=not progress)
    for lo in range(0, n, chunk):
        ids = np.arange(lo, min(lo + chunk, n), dtype=np.int64)
        ptr, idx = ds.neighbors_csr(ids)
        if at + len(idx) > e:
            raise ValueError(f"{ds.path}: more neighbour entries than the manifest's {e:,} edges")
        row[at:at + len(idx)] = idx
        colptr[lo + 1:lo + 1 + len(ids)] = at + ptr[1:]
        at += len(idx)
        x[lo:lo + len(ids)] = ds.features(ids)
        y[lo:lo + len(ids)] = ds.labels(ids)
        bar.update(len(ids))
    bar.close()
    if at != e:
        raise ValueError(f"{ds.path}: read {at:,} neighbour entries, the manifest says {e:,}")
    train = ds.split("train") if "train" in ds.split_names else np.arange(n, dtype=np.int64)
    np.save(work / "train.npy", np.asarray(train, dtype=np.int64))
    for a in (colptr, row, x, y):
        a.flush()
    done.write_text(json.dumps(meta))
    return meta


def _pyg_loader(work: Path, mmap: bool, fanouts, batch_size: int, seed: int):
    import torch
    from torch_geometric.data import Data
    from torch_geometric.loader import NeighborLoader
    from torch_sparse import SparseTensor

    mode = "r" if mmap else None
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.from_numpy on a read-only memmap warns once
        colptr, row, x, y = (torch.from_numpy(np.load(work / f, mmap_mode=mode))
                             for f in ("colptr.npy", "row.npy", "x.npy", "y.npy"))
    n = len(y)
    adj_t = SparseTensor(rowptr=colptr, col=row, sparse_sizes=(n, n), is_sorted=True, trust_data=True)
    data = Data(x=x, y=y, adj_t=adj_t, num_nodes=n)
    train = torch.from_numpy(np.load(work / "train.npy"))
    gen = torch.Generator().manual_seed(seed)
    return NeighborLoader(data, num_neighbors=list(fanouts), batch_size=batch_size, input_nodes=train, shuffle=True,
                          generator=gen), data


def child_pyg_sample(work: Path, mmap: bool, fanouts, batch_size: int, batches: int, seed: int, threads: int,
                     max_seconds: float) -> dict:
    import torch

    torch.set_num_threads(threads)
    t_open = time.perf_counter()
    loader, _ = _pyg_loader(work, mmap, fanouts, batch_size, seed)
    open_s = time.perf_counter() - t_open
    r = measure_batches(loader, batches, max_seconds)  # sampling + feature gather, as a training loop receives them
    r.update(variant="pyg-mmap" if mmap else "pyg-memory", open_seconds=open_s)
    return r


def child_pyg_train(work: Path, fanouts, batch_size: int, steps: int, seed: int, threads: int) -> dict:
    import torch
    import torch.nn.functional as F

    from flashgnn.nn.zoo import build_model
    from flashgnn.train.trainer import parser

    torch.set_num_threads(threads)
    torch.manual_seed(seed)
    d = parser().parse_args(["unused"])  # flashgnn train's model defaults, so both sides train the same model
    meta = json.loads((work / "meta.json").read_text())
    loader, _ = _pyg_loader(work, False, fanouts, batch_size, seed)
    model = build_model(d.model, meta["feature_dim"], d.hidden, meta["num_classes"], len(fanouts), d.dropout)
    opt = torch.optim.Adam(model.parameters(), lr=d.lr)
    model.train()
    t0 = time.perf_counter()
    done = 0
    for b in loader:
        opt.zero_grad(set_to_none=True)
        out = model(b.x, b.adj_t)[: b.batch_size]
        loss = F.cross_entropy(out, b.y[: b.batch_size], ignore_index=-1)
        loss.backward()
        opt.step()
        done += 1
        if done >= steps:
            break
    return {"variant": "train-pyg", "batches": done, "train_seconds": time.perf_counter() - t0, "model": d.model,
            "hidden": d.hidden}


def _child(argv) -> int:
    kind, work, mmap, fanout, bs, n, seed, threads, max_s = argv
    fan = [int(f) for f in fanout.split(",")]
    if kind == "sample":
        r = child_pyg_sample(Path(work), mmap == "1", fan, int(bs), int(n), int(seed), int(threads), float(max_s))
    else:
        r = child_pyg_train(Path(work), fan, int(bs), int(n), int(seed), int(threads))
    print(json.dumps(r), flush=True)
    os._exit(0)  # do not wait for a loader cut off mid-batch


def have_torch_sparse() -> bool:
    import importlib.util

    return importlib.util.find_spec("torch_sparse") is not None


def cached_name(codec: str, hot: str) -> str:
    """``uring+cache`` with the levers that differ from the default (rows as stored, hot set ``auto``)."""
    return "uring+cache" + "".join(f"/{x}" for x, d in ((codec, "none"), (hot, "auto")) if x != d)


def main(argv=None) -> int:
    from flashgnn.sample import budget
    from flashgnn._util import human_bytes as h
    from flashgnn._util import parse_size
    from flashgnn.sample.sampler import DEFAULT_HOT_FRACTION
    from flashgnn.ssd.bench import CACHED, cpu_split, drop_caches, engine_base_bytes, run_child

    ap = argparse.ArgumentParser(prog="python -m benchmarks.peers", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="data/ooc")
    ap.add_argument("--work", default=None, help="where PyG's arrays are written (default: /tmp/flashgnn-peers)")
    ap.add_argument("--memory-limit", type=parse_size, default=parse_size("768MiB"),
                    help="cgroup cap of the capped variants (the dataset must be >= 1.5x it)")
    ap.add_argument("--train-memory-limit", type=parse_size, default=parse_size("1.5GiB"),
                    help="cgroup cap of train-flashgnn (torch and the model need room beside the budget: "
                         "make bench-defaults' cap)")
    ap.add_argument("--cache-budget", type=parse_size,
                    help="uring+cache's cache (default and bound: a third of the data, and what the cap leaves "
                         "beside the engine)")
    ap.add_argument("--fanout", default="25,10")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--train-batches", type=int, default=None,
                    help="training steps per side (default: the train split's whole epoch; 0: no training pair)")
    ap.add_argument("--threads", type=int, default=1, help="producers (flashgnn) / torch threads (PyG), each")
    ap.add_argument("--depth", type=int, default=256)
    ap.add_argument("--max-seconds", type=float, default=120.0, help="cut a variant off after this long")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", help="comma list of variants (default: all)")
    ap.add_argument("--rounds", type=int, default=1,
                    help="run the sampling variants (not pyg-mmap) this many times, alternated, and report each "
                         "one's median round: drift of a shared host then moves every variant alike")
    ap.add_argument("--row-codecs", default="none",
                    help="comma list (none, fp16, int8): uring+cache once per codec the static set holds rows in, "
                         "alternated in rounds (uring+cache/fp16, ...)")
    ap.add_argument("--hots", default="auto",
                    help="comma list of hot-set choices (auto, touches, degree, presample): uring+cache once per choice "
                         "(uring+cache/presample, ...), crossed with --row-codecs")
    ap.add_argument("--scaling", action="store_true",
                    help="also run memory and uring+cache with twice --threads producers (memory/2x, "
                         "uring+cache/2x) in the same rounds: the ratios 2x / 1x by round (issue target >= 1.8)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    path = a.dataset
    data = budget.dataset_bytes(path)
    if data < 1.5 * a.memory_limit:
        raise SystemExit(f"bench-peers: {path} holds {h(data)} of page files, less than 1.5x the {h(a.memory_limit)} "
                         "cap; give a larger dataset or a smaller --memory-limit")
    # uring+cache once per (codec, hot set) asked for; the first pair is the plain name.
    levers = {cached_name(c, hot): (c, hot) for hot in a.hots.split(",") for c in a.row_codecs.split(",")}
    sampling = [x for v in SAMPLING for x in (levers if v == CACHED else (v,))]
    variants = [v for v in (*sampling, *(TRAINING if a.train_batches != 0 else ()))
                if not a.only or v in a.only.split(",") or (v in levers and CACHED in a.only.split(","))]
    # Producer scaling: each engine beside itself with twice the producers, same cache, same rounds.
    doubled = {f"{v}{TWICE}": v for v in ("memory", *levers) if a.scaling and v in variants}
    for v2, v in doubled.items():
        variants.insert(variants.index(v) + 1, v2)
    cache_max = min(data // 3, a.memory_limit - engine_base_bytes(a.threads))
    cache_budget = max(min(a.cache_budget or cache_max, cache_max), 0)
    if cache_budget <= 0 and any(v in levers for v in variants):
        raise SystemExit(f"bench-peers: the {h(a.memory_limit)} cap leaves no cache beside the engine's "
                         f"{h(engine_base_bytes(a.threads))}")
    pyg_ok = have_torch_sparse()
    work = Path(a.work or "/tmp/flashgnn-peers")
    train_steps = a.train_batches
    if train_steps is None and any(v in TRAINING for v in variants):  # a whole epoch of the train split
        from flashgnn.store.dataset import Dataset

        ds = Dataset(path)
        n_train = ds.split_size("train") if "train" in ds.split_names else ds.num_nodes
        train_steps = -(-n_train // a.batch_size)
    print(f"bench-peers: {path} ({h(data)}), cap {h(a.memory_limit)} ({data / a.memory_limit:.2f}x), uring+cache "
          f"cache {h(cache_budget)} ({cache_budget / data:.0%} of the data), fanout {a.fanout}, batch "
          f"{a.batch_size}, {a.batches} batches, {a.threads} thread(s) each; load {os.getloadavg()[0]:.2f}",
          file=sys.stderr)
    if pyg_ok and any(v.startswith("pyg") or v == "train-pyg" for v in variants):
        prepare(path, work, progress=not a.json)
    cache = {"budget": cache_budget, "policy": "s3fifo", "hot": "auto", "hot_fraction": DEFAULT_HOT_FRACTION}
    results = {}
    rounds = {}  # variant -> its results, one per round (none once it failed)
    plan = [(r, v) for r in range(max(a.rounds, 1)) for v in variants
            if r == 0 or v in REPEATED or v in levers or v in doubled]
    for rnd, v in plan:
        if rnd > 0 and ("skipped" in results.get(v, {}) or "failed" in results.get(v, {})):
            continue
        if (v.startswith("pyg") or v == "train-pyg") and not pyg_ok:
            results[v] = {"variant": v, "skipped": "torch_sparse is not importable (make bench-peers installs it)"}
            print(f"bench-peers: {v:<15} skipped: torch_sparse is not importable", file=sys.stderr)
            continue
        threads = a.threads * (2 if v in doubled else 1)
        v1 = doubled.get(v, v)  # the variant run, with `threads` producers
        cap = a.memory_limit if v1 in CAPPED or v1 in levers else a.train_memory_limit if v == "train-flashgnn" else None
        if v in ("pyg-memory", "pyg-mmap"):
            cmd = [sys.executable, "-m", "benchmarks.peers", "--child", "sample", str(work),
                   "1" if v == "pyg-mmap" else "0", a.fanout, str(a.batch_size), str(a.batches), str(a.seed),
                   str(a.threads), str(a.max_seconds)]
        elif v == "train-pyg":
            cmd = [sys.executable, "-m", "benchmarks.peers", "--child", "train", str(work), "0", a.fanout,
                   str(a.batch_size), str(train_steps), str(a.seed), str(a.threads), "0"]
        elif v.startswith("train-flashgnn"):
            metrics = work / f"{v}.json"
            work.mkdir(parents=True, exist_ok=True)
            cmd = [sys.executable, "-m", "flashgnn", "train", path, "--epochs", "1", "--max-batches",
                   str(train_steps), "--eval-batches", "1", "--fanout", a.fanout, "--batch-size", str(a.batch_size),
                   "--threads", str(a.threads), "--seed", str(a.seed), "--metrics-json", str(metrics),
                   "--no-progress"]
        else:
            codec, hot = levers.get(v1, ("none", "auto"))
            engine = CACHED if v1 in levers else v1
            cmd = [sys.executable, "-m", "flashgnn.ssd.bench", "--child", path, engine, a.fanout, str(a.batch_size),
                   str(a.batches), str(a.seed), str(a.depth), str(threads), str(a.max_seconds),
                   json.dumps(dict(cache, row_codec=codec, hot=hot))]
        dropped = drop_caches()
        t = time.perf_counter()
        rc, out = run_child(cmd, cap)
        wall = time.perf_counter() - t
        if rc != 0:
            results[v] = {"variant": v, "failed": rc, "capped": bool(cap)}
            rounds.pop(v, None)
            print(f"bench-peers: {v:<15} failed (exit {rc}{', killed: over the cap?' if rc < 0 else ''})",
                  file=sys.stderr)
            continue
        if v.startswith("train-flashgnn"):
            m = json.loads(metrics.read_text())
            ep = m["epochs"][0]
            r = {"variant": v, "batches": ep["batches"], "train_seconds": ep["train_seconds"],
                 "data_wait": ep["data_wait"], "memory_budget": m["args"].get("memory_budget"),
                 "workers": m["args"].get("workers"), "resolved": m.get("resolved"),
                 "cache_hit_rate": ep["telemetry"].get("cache_hit_rate"), "reads": ep["telemetry"].get("reads"),
                 "peak_rss_bytes": m["summary"].get("peak_rss_bytes")}
        else:
            r = json.loads(out.strip().splitlines()[-1])
            r["variant"] = v
        r.update(capped=bool(cap), cache_dropped=dropped, wall_seconds=wall)
        rounds.setdefault(v, []).append(r)
        results[v] = median_round(rounds[v])
        if "train_seconds" in r:
            print(f"bench-peers: {v:<15} {r['batches']} steps in {r['train_seconds']:.1f} s", file=sys.stderr)
        else:
            bound = "< " if r.get("upper_bound") else ""
            print(f"bench-peers: {v:<15} {bound}{r['batches_per_s']:.4g} batches/s"
                  + (f", {r['reads_per_batch']:.0f} reads/batch" if r.get("reads_per_batch") is not None else "")
                  + (f", {r['cache_hit_rate']:.1%} hits" if v in levers else "")
                  + (f" (round {rnd + 1} of {a.rounds})" if a.rounds > 1 and (v in REPEATED or v in levers
                                                                               or v in doubled) else "")
                  + (f" (cut off after {r['seconds']:.0f} s)" if r.get("incomplete") else ""), file=sys.stderr)
    rate = {v: r.get("batches_per_s") for v, r in results.items() if r.get("batches_per_s")}

    def ratio(x, y):
        return rate[x] / rate[y] if x in rate and y in rate else None

    by = {v: results[v] for v in ("memory", "uring", CACHED) if v in results and "extents" in results[v]}
    split_cpu = cpu_split({k: dict(v, engine=k) for k, v in by.items()}) if len(by) == 3 else None
    tr = {v: results.get(v, {}).get("train_seconds") for v in TRAINING}

    def speedup(v):  # PyG's epoch seconds / flashgnn's
        return tr["train-pyg"] / tr[v] if tr["train-pyg"] and tr[v] else None

    # The same ratio within each round (a round runs its variants back to back).
    per_round = {k: [c["batches_per_s"] / m["batches_per_s"] for c, m in zip(rounds[x], rounds[y])]
                 for k, x, y in (("uring+cache_vs_memory", CACHED, "memory"),
                                 ("uring+cache_vs_pyg_memory", CACHED, "pyg-memory"),
                                 *((f"{v}_2x_vs_1x", v2, v) for v2, v in doubled.items()))
                 if x in rounds and y in rounds}
    # Each lever alone (and crossed): its rate against PyG's and the memory engine's, per round too.
    by_lever = {}
    for v in levers:
        if v not in rate:
            continue
        rr = results[v]
        by_lever[v] = {
            "row_codec": levers[v][0], "hot": levers[v][1], "vs_pyg_memory": ratio(v, "pyg-memory"),
            "vs_memory": ratio(v, "memory"), "cache_hit_rate": rr.get("cache_hit_rate"),
            "reads_per_batch": rr.get("reads_per_batch"), "static_entries": (rr.get("cache") or {}).get(
                "static_entries"), "cache_seconds": rr.get("cache_seconds"),
            "vs_pyg_memory_by_round": [c["batches_per_s"] / m["batches_per_s"]
                                       for c, m in zip(rounds.get(v, []), rounds.get("pyg-memory", []))]}
    ratios = {
        "uring+cache_vs_pyg_memory": ratio(CACHED, "pyg-memory"),
        "uring+cache_vs_memory": ratio(CACHED, "memory"),
        "uring+cache_vs_pyg_mmap": ratio(CACHED, "pyg-mmap"),
        "memory_vs_pyg_memory": ratio("memory", "pyg-memory"),
        "hit_vs_memory_cpu": split_cpu["hit_vs_memory_cpu"] if split_cpu else None,
        "train_flashgnn_vs_pyg": speedup("train-flashgnn"),
        "train_flashgnn_nocap_vs_pyg": speedup("train-flashgnn-nocap"),
        **{f"{v}_2x_vs_1x": ratio(v2, v) for v2, v in doubled.items()},
    }
    if results.get("pyg-mmap", {}).get("upper_bound"):
        ratios["uring+cache_vs_pyg_mmap_is_lower_bound"] = True  # pyg-mmap's rate is an upper bound
    load = os.getloadavg()
    report = {"dataset": path, "dataset_bytes": data, "memory_limit": a.memory_limit, "cache_budget": cache_budget,
              "fanout": a.fanout, "batch_size": a.batch_size, "batches": a.batches,
              "train_batches": train_steps if any(v in TRAINING for v in variants) else 0, "threads": a.threads,
              "results": results, "cache_cpu": split_cpu, "ratios": ratios, "rounds": a.rounds,
              "round_ratios": per_round, "levers": by_lever, "loadavg": load}
    if a.json:
        print(json.dumps(report, indent=2))
        return 0
    targets = {"uring+cache_vs_pyg_memory": ">= 1.0", "uring+cache_vs_memory": ">= 0.9",
               "hit_vs_memory_cpu": "<= 1.5", "train_flashgnn_vs_pyg": ">= 1.0",
               "train_flashgnn_nocap_vs_pyg": ">= 1.0", f"{CACHED}_2x_vs_1x": ">= 1.8"}
    for k, v in ratios.items():
        if isinstance(v, bool):
            continue
        print(f"  {k:<28} {'-' if v is None else format(v, '.2f'):>6}" + (f"  (target {targets[k]})"
                                                                           if k in targets else ""))
    for k, rs in per_round.items():
        print(f"  {k + ' by round':<28} " + " ".join(f"{x:.2f}" for x in rs))
    for v, x in by_lever.items():
        f = lambda y: "-" if y is None else format(y, ".2f")  # noqa: E731
        print(f"  {v:<28} vs pyg-memory {f(x['vs_pyg_memory'])} (by round "
              + " ".join(f(y) for y in x["vs_pyg_memory_by_round"]) + f"), vs memory {f(x['vs_memory'])}, "
              f"hits {x['cache_hit_rate']:.1%}, {x['reads_per_batch']:.0f} reads/batch, "
              f"{x['static_entries']:,} static entries")
    shown = ", ".join(f"{k} {v:.2f}" for k, v in ratios.items() if v is not None and not isinstance(v, bool))
    print(f"summary: {shown or 'no ratio (variants failed or skipped)'}; load average {load[0]:.2f}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.exit(_child(sys.argv[2:]))
    sys.exit(main())
