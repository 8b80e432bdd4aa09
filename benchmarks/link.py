"""`make bench-link`: link-prediction batches, flashgnn's LinkNeighborLoader against PyG's, in one run.

A power-law graph (``flashgnn generate rmat``) is built once with ``--symmetrize --dedup --link-split 0.05,0.05``
(validation and test edges and their reverses held out of the message-passing graph); the supervision edges
are ``--edges`` training positives drawn once from the dataset's train link split. Each variant runs in a fresh
child process with the page cache dropped first, and yields ``--batches`` batches of ``--batch-size``
supervision edges with binary negatives (amount 1: a batch has up to ``4 * batch_size`` seed nodes) and
``--fanout`` hops, as a training loop receives them (sampling + every node's feature row):

- ``pyg-memory``: PyG's ``LinkNeighborLoader`` over a ``Data`` whose structure (a torch_sparse ``SparseTensor``
  over the stored graph's CSC, so the torch_sparse kernel samples) and features are in memory. Not capped.
- ``pyg-mmap``: the same over ``np.load(mmap_mode="r")`` arrays, tuned (``MADV_RANDOM`` on every array, so a
  fault reads its page and not the kernel's readahead window; the ``SparseTensor`` keeps the CSC on the mapping,
  so PyG builds nothing in RAM), under the cap. Cut off at ``--max-seconds``.
- ``memory``: flashgnn's ``memory`` engine (everything in DRAM). Not capped.
- ``uring``: flashgnn's ``uring`` engine under the cap, every batch read from the SSD.
- ``uring+cache``: ``uring`` with a cross-batch cache (``--cache-budget``, default what the cap leaves beside torch,
  the engine and the prefetch window, at most a third of the data) under the cap; its static hot set (by degree)
  holds slots and rows as stored, so batches equal the uncached ones.
- opt-in (``--only``): ``memory+exclude`` and ``uring+cache+exclude``, flashgnn's negatives redrawn while they
  are stored edges (``neg_exclude_edges=True``; PyG has no such option): what the true-edge check costs.

One producer and one torch thread each (``--threads``). The cap is a cgroup memory limit (``--memory-limit``,
default the dataset / 1.5); the dataset must be at least 1.5x it. Ratios, never bare times, are the verdict; with
``--rounds R`` the repeated variants alternate R times and each reports its median round. PyG's arrays
(int64 CSC, float32 x) are written once beside the dataset (``benchmarks.peers.prepare``). torch-sparse is
needed for the PyG variants (``make bench-peers`` installs it into ``.venv-peers``); without it they are
reported as skipped.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

import numpy as np

from benchmarks.peers import measure_batches

VARIANTS = ("pyg-memory", "pyg-mmap", "memory", "uring", "uring+cache")
# Opt-in (--only): flashgnn's negatives redrawn while they are stored edges (neg_exclude_edges=True; PyG has no
# such option, its negatives may be false negatives): what the check against the stored lists costs.
EXTRA = ("memory+exclude", "uring+cache+exclude")
CAPPED = ("pyg-mmap", "uring", "uring+cache", "uring+cache+exclude")
# pyg-mmap runs once: it is cut off at --max-seconds, and a second round would say the same.
REPEATED = ("pyg-memory", "memory", "uring", "uring+cache") + EXTRA
# What a capped flashgnn child holds besides its cache: torch (about 0.6 GiB of RSS) and the engine's buffers,
# plus the prefetch window (measured per run), as benchmarks.hetero sizes it.
CHILD_BASE_BYTES = 700 << 20
PREFETCH = 2
# Binary negatives, amount 1: a batch of B positives has B negative pairs, so up to 4B distinct endpoints.
NEG_AMOUNT = 1
SEEDS_PER_EDGE = 2 + 2 * NEG_AMOUNT


def prepare(work: Path, scale: int, edge_factor: int, dim: int, seed: int, edges: int, progress: bool) -> Path:
    """The generated input (``work/raw``), its dataset with a link split (``work/ds``), ``edges`` supervision edges
    drawn from the train link split (``work/edges.npy``, ``[2, edges]`` int64) and PyG's arrays (``work/pyg``);
    made once per settings."""
    import flashgnn
    from benchmarks.peers import prepare as pyg_arrays

    raw, ds = work / "raw", work / "ds"
    stamp = work / "settings.json"
    want = {"scale": scale, "edge_factor": edge_factor, "dim": dim, "seed": seed, "edges": edges}
    if not (stamp.exists() and json.loads(stamp.read_text()) == want and (work / "edges.npy").exists()):
        stamp.unlink(missing_ok=True)
        work.mkdir(parents=True, exist_ok=True)
        # The input is the slow part (minutes at scale 22): kept while its own settings match.
        gen = {k: want[k] for k in ("scale", "edge_factor", "dim", "seed")}
        gen_stamp = work / "raw.json"
        if not (gen_stamp.exists() and json.loads(gen_stamp.read_text()) == gen):
            gen_stamp.unlink(missing_ok=True)
            flashgnn.generate(raw, scale=scale, edge_factor=edge_factor, dim=dim, classes=16, seed=seed, force=True,
                              progress=progress)
            gen_stamp.write_text(json.dumps(gen))
        flashgnn.build(raw, ds, symmetrize=True, dedup=True, link_split=(0.05, 0.05), force=True, progress=progress)
        src, dst, _ = flashgnn.open(ds).link_split("train")[:3]
        pick = np.random.default_rng(seed).choice(len(src), size=min(edges, len(src)), replace=False)
        np.save(work / "edges.npy", np.stack([np.asarray(src)[pick], np.asarray(dst)[pick]]).astype(np.int64))
        stamp.write_text(json.dumps(want))
    pyg_arrays(ds, work / "pyg", progress=progress)
    return ds


def child_pyg(work: Path, mmap: bool, fanouts, batch_size, batches, seed, threads, max_seconds) -> dict:
    """PyG's LinkNeighborLoader over the stored graph's CSC (a SparseTensor: the torch_sparse kernel)."""
    import mmap as _mm

    import torch
    from torch_geometric.data import Data
    from torch_geometric.loader import LinkNeighborLoader
    from torch_sparse import SparseTensor

    torch.set_num_threads(threads)
    t_open = time.perf_counter()
    pyg = work / "pyg"
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.from_numpy of a read-only memmap warns once
        arrays = [np.load(pyg / f, mmap_mode="r" if mmap else None) for f in ("colptr.npy", "row.npy", "x.npy")]
        if mmap:
            for a in arrays:  # tuned: a fault reads its own page, not a readahead window of neighbours
                a._mmap.madvise(_mm.MADV_RANDOM)
        colptr, row, x = (torch.from_numpy(a) for a in arrays)
    n = x.size(0)
    adj_t = SparseTensor(rowptr=colptr, col=row, sparse_sizes=(n, n), is_sorted=True, trust_data=True)
    data = Data(x=x, adj_t=adj_t, num_nodes=n)
    edges = torch.from_numpy(np.load(work / "edges.npy"))
    loader = LinkNeighborLoader(data, num_neighbors=list(fanouts), edge_label_index=edges,
                                neg_sampling=dict(mode="binary", amount=NEG_AMOUNT), batch_size=batch_size,
                                shuffle=True, generator=torch.Generator().manual_seed(seed))
    open_s = time.perf_counter() - t_open
    r = measure_batches(loader, batches, max_seconds)
    r["open_seconds"] = open_s
    return r


def child_flashgnn(work: Path, variant: str, fanouts, batch_size, batches, seed, threads, max_seconds,
                   cache_budget: int = 0) -> dict:
    import torch

    import flashgnn

    torch.set_num_threads(1)
    ds = str(work / "ds")
    t_open = time.perf_counter()
    engine, *rest = variant.split("+")
    exclude = "exclude" in rest
    cache = None
    if "cache" in rest:
        cache = flashgnn.Cache(ds, list(fanouts), cache_budget, hot="degree", batch_size=SEEDS_PER_EDGE * batch_size)
    edges = np.load(work / "edges.npy")
    loader = flashgnn.LinkNeighborLoader(ds, num_neighbors=list(fanouts), edge_label_index=edges,
                                         neg_sampling=dict(mode="binary", amount=NEG_AMOUNT), batch_size=batch_size,
                                         shuffle=True, seed=seed, engine=engine, num_workers=threads,
                                         memory_budget=0, cache=cache, prefetch=PREFETCH, neg_exclude_edges=exclude)
    open_s = time.perf_counter() - t_open
    r = measure_batches(loader, batches, max_seconds)
    r["open_seconds"] = open_s
    t = loader.telemetry or {}
    if t.get("batches"):
        # Producers' figures over every batch they made (the prefetched ones too).
        r["reads_per_batch"] = t["reads"] / t["batches"]
        r["producer_cpu_ms_per_batch"] = t["cpu_seconds"] / t["batches"] * 1e3
        r["io_wait_ms_per_batch"] = t["io_wait_seconds"] / t["batches"] * 1e3
    if cache is not None:
        st = cache.stats()
        hits = st["static_hits"] + st["dynamic_hits"]
        r["cache_hit_rate"] = hits / max(hits + st.get("misses", 0), 1)
        r["cache_static_bytes"] = st["static_bytes"]
    return r


def _child(argv) -> int:
    kind, work, fanout, bs, n, seed, threads, max_s, cache_budget = argv
    fan = [int(f) for f in fanout.split(",")]
    common = (fan, int(bs), int(n), int(seed), int(threads), float(max_s))
    if kind.startswith("pyg"):
        r = child_pyg(Path(work), kind == "pyg-mmap", *common)
    else:
        r = child_flashgnn(Path(work), kind, *common, cache_budget=int(cache_budget))
    print(json.dumps(r), flush=True)
    os._exit(0)  # do not wait for a loader cut off mid-batch


def main(argv=None) -> int:
    from benchmarks.peers import have_torch_sparse, median_round
    from flashgnn._util import human_bytes as h
    from flashgnn._util import parse_size
    from flashgnn.sample import budget
    from flashgnn.ssd.bench import drop_caches, run_child

    ap = argparse.ArgumentParser(prog="python -m benchmarks.link", description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="/tmp/flashgnn-link",
                    help="where the input, the dataset and PyG's arrays are kept")
    ap.add_argument("--scale", type=int, default=22, help="2^scale nodes (flashgnn generate rmat --scale)")
    ap.add_argument("--edge-factor", type=int, default=16)
    ap.add_argument("--feature-dim", type=int, default=128)
    ap.add_argument("--edges", type=int, default=1 << 18, help="supervision edges drawn from the train link split")
    ap.add_argument("--memory-limit", type=parse_size, default=None, help="the cap (default: the dataset / 1.5)")
    ap.add_argument("--cache-budget", type=parse_size, default=None,
                    help="uring+cache's cache (default: what the cap leaves, at most a third of the data)")
    ap.add_argument("--fanout", default="10,5")
    ap.add_argument("--batch-size", type=int, default=512, help="supervision edges per batch")
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-seconds", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--only",
                    help=f"comma list of variants (default: {', '.join(VARIANTS)}; opt-in: {', '.join(EXTRA)})")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    work = Path(a.work)
    ds = prepare(work, a.scale, a.edge_factor, a.feature_dim, a.seed, a.edges, progress=not a.json)
    data = budget.dataset_bytes(str(ds))
    limit = a.memory_limit or int(data / 1.5)
    if data < 1.5 * limit:
        print(f"bench-link: note: {ds} holds {h(data)}, less than 1.5x the {h(limit)} cap", file=sys.stderr)
    unknown = set(a.only.split(",")) - set(VARIANTS + EXTRA) if a.only else set()
    if unknown:
        ap.error(f"--only: unknown variant(s) {', '.join(sorted(unknown))}; known: {', '.join(VARIANTS + EXTRA)}")
    variants = [v for v in VARIANTS + EXTRA if (v in a.only.split(",") if a.only else v in VARIANTS)]
    fanouts = [int(f) for f in a.fanout.split(",")]
    window = PREFETCH * budget.batch_bytes(str(ds), fanouts, SEEDS_PER_EDGE * a.batch_size)
    room = max(limit - CHILD_BASE_BYTES - window, 0)
    cache_budget = min(a.cache_budget or room, data // 3)
    pyg_ok = have_torch_sparse()
    load0 = os.getloadavg()
    print(f"bench-link: {ds} ({h(data)}), cap {h(limit)} ({data / limit:.2f}x), fanout {a.fanout}, batch "
          f"{a.batch_size} edges + {NEG_AMOUNT}x binary negatives, {a.batches} batches, {a.threads} thread(s) each, "
          f"uring+cache cache {h(cache_budget)} ({cache_budget / max(data, 1):.0%} of the data); load average "
          f"{load0[0]:.2f}", file=sys.stderr)
    results, rounds = {}, {}
    plan = [(r, v) for r in range(max(a.rounds, 1)) for v in variants if r == 0 or v in REPEATED]
    for rnd, v in plan:
        if rnd > 0 and v not in rounds:
            continue  # skipped or failed in round 1
        if v.startswith("pyg") and not pyg_ok:
            results[v] = {"variant": v, "skipped": "torch_sparse is not importable (make bench-peers installs it)"}
            print(f"bench-link: {v:<12} skipped: torch_sparse is not importable", file=sys.stderr)
            continue
        cmd = [sys.executable, "-m", "benchmarks.link", "--child", v, str(work), a.fanout, str(a.batch_size),
               str(a.batches), str(a.seed), str(a.threads), str(a.max_seconds), str(cache_budget)]
        dropped = drop_caches()
        rc, out = run_child(cmd, limit if v in CAPPED else None)
        if rc != 0:
            results[v] = {"variant": v, "failed": rc, "killed_by_cap": v in CAPPED and rc in (-9, 137)}
            rounds.pop(v, None)
            print(f"bench-link: {v:<12} failed (exit {rc}{', killed under the cap' if v in CAPPED else ''})",
                  file=sys.stderr)
            continue
        r = json.loads(out.strip().splitlines()[-1])
        r.update(variant=v, capped=v in CAPPED, cache_dropped=dropped, loadavg=os.getloadavg()[0])
        rounds.setdefault(v, []).append(r)
        results[v] = median_round(rounds[v])
        extra = [f"{r['nodes_per_batch']:,.0f} nodes/batch"]
        if r.get("cpu_ms_per_batch") is not None:
            extra.append(f"{r['cpu_ms_per_batch']:.0f} ms CPU/batch")
        if "reads_per_batch" in r:
            extra.append(f"{r['reads_per_batch']:,.0f} reads/batch")
        if "cache_hit_rate" in r:
            extra.append(f"{r['cache_hit_rate']:.0%} of extents from the cache")
        print(f"bench-link: {v:<12} {'< ' if r['upper_bound'] else ''}{r['batches_per_s']:.3g} batches/s"
              f"{' (cut off)' if r['incomplete'] else ''}, {', '.join(extra)} (round {rnd + 1}, load "
              f"{r['loadavg']:.2f})", file=sys.stderr)
    rate = {v: r["batches_per_s"] for v, r in results.items() if r.get("batches_per_s")}

    def ratio(x, y):
        return rate[x] / rate[y] if x in rate and y in rate else None

    ratios = {"uring+cache_vs_pyg_memory": ratio("uring+cache", "pyg-memory"),
              "uring_vs_pyg_memory": ratio("uring", "pyg-memory"),
              "memory_vs_pyg_memory": ratio("memory", "pyg-memory"),
              "uring+cache_vs_pyg_mmap": ratio("uring+cache", "pyg-mmap"),
              "uring_vs_pyg_mmap": ratio("uring", "pyg-mmap"),
              "uring+cache+exclude_vs_uring+cache": ratio("uring+cache+exclude", "uring+cache"),
              "memory+exclude_vs_memory": ratio("memory+exclude", "memory")}
    if results.get("pyg-mmap", {}).get("upper_bound"):
        ratios["vs_pyg_mmap_are_lower_bounds"] = True  # pyg-mmap's rate is then an upper bound
    report = {"dataset": str(ds), "dataset_bytes": data, "memory_limit": limit, "fanout": a.fanout,
              "cache_budget": cache_budget, "batch_size": a.batch_size, "neg_sampling": {"mode": "binary",
              "amount": NEG_AMOUNT}, "batches": a.batches, "threads": a.threads, "rounds": a.rounds,
              "results": results, "ratios": ratios, "loadavg_start": load0, "loadavg_end": os.getloadavg()}
    if a.json:
        print(json.dumps(report, indent=2))
        return 0
    for k, v in ratios.items():
        if not isinstance(v, bool):
            print(f"  {k:<27} {'-' if v is None else format(v, '.2f'):>6}")
    shown = ", ".join(f"{k} {v:.2f}" for k, v in ratios.items() if isinstance(v, float))
    print(f"summary: {shown or 'no ratio (variants failed or skipped)'}; load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.exit(_child(sys.argv[2:]))
    sys.exit(main())
