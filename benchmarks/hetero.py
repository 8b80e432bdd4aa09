"""`make bench-hetero`: typed (heterogeneous) sampling, flashgnn against PyG's hetero loader, in one run.

An IGBH-shaped graph (``flashgnn generate igbh``; six node types' ratios, power-law degrees) is built once
with ``--add-reverse`` (PyG's ``ToUndirected``). Each variant runs in a fresh child process with the page
cache dropped first, and yields ``--batches`` batches of ``--batch-size`` paper seeds with ``--fanout`` for
every edge type (sampling + every type's feature rows, as a training loop receives them):

- ``pyg-memory``: PyG's hetero ``NeighborLoader`` on a ``HeteroData`` with every array in memory
  (``T.ToUndirected()`` of the same input; torch-sparse's ``hetero_neighbor_sample`` kernel). Not capped.
- ``pyg-mmap``: the same over tuned mappings under the cap: every edge type's CSC (``colptr``, ``row``; written
  once into ``work/pyg`` by PyG's own ``to_csc`` of the ``ToUndirected`` graph) and every feature table are
  ``np.load(mmap_mode="r")`` with ``MADV_RANDOM`` (a fault reads its page, not a readahead window), and each
  edge type is a torch_sparse ``SparseTensor`` (``adj_t``) over its mapped CSC, so PyG's sampler builds nothing
  in RAM. Cut off at ``--max-seconds``.
- ``memory``: flashgnn's ``memory`` engine (everything in DRAM). Not capped.
- ``uring``: flashgnn's ``uring`` engine under the cap, every batch read from the SSD.
- ``uring+cache``: ``uring`` with a cross-batch cache (``--cache-budget``, default what the cap leaves beside
  torch, the engine and the prefetch window, at most a third of the data) under the cap; its static hot set
  (by degree) holds slots and every type's rows as stored, so batches equal the uncached ones.
- ``uring+cache+fp16``, ``uring+cache+int8``: the same cache holding float32 rows encoded
  (``Cache(row_codec=...)``: two or almost four times the rows in the same bytes; ``x`` carries the decoded
  values, fp16 within 2**-11 relative, int8 within max|row|/254), opt-in because batches change.

The cap is a cgroup memory limit (``--memory-limit``); the dataset must be at least 1.5x it. Ratios, never
bare times, are the verdict; with ``--rounds R`` the repeated variants alternate R times and each reports its
median round. torch-sparse is needed for the PyG variants (``make bench-peers`` installs it into
``.venv-peers``); without it they are reported as skipped.
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

VARIANTS = ("pyg-memory", "pyg-mmap", "memory", "uring", "uring+cache", "uring+cache+fp16", "uring+cache+int8")
CAPPED = ("pyg-mmap", "uring", "uring+cache", "uring+cache+fp16", "uring+cache+int8")
REPEATED = ("pyg-memory", "memory", "uring", "uring+cache", "uring+cache+fp16", "uring+cache+int8")
# What a capped flashgnn child holds besides its cache: torch (about 0.6 GiB of RSS) and the engine's buffers,
# plus the prefetch window (measured per run).
CHILD_BASE_BYTES = 700 << 20
PREFETCH = 2
TARGET = "paper"


def prepare(work: Path, scale: str, feature_dim: int, seed: int, progress: bool) -> tuple[Path, Path]:
    """The generated input (``work/raw``) and its typed dataset (``work/ds``), made once per settings."""
    import flashgnn

    raw, ds = work / "raw", work / "ds"
    stamp = work / "settings.json"
    want = {"scale": scale, "feature_dim": feature_dim, "seed": seed}
    if not (stamp.exists() and json.loads(stamp.read_text()) == want):
        stamp.unlink(missing_ok=True)
        work.mkdir(parents=True, exist_ok=True)
        flashgnn.generate(raw, model="igbh", scale=int(float(scale)), feature_dim=feature_dim, seed=seed, force=True,
                          progress=progress)
        stamp.write_text(json.dumps(want))
    manifest = ds / "manifest.json"
    if not (manifest.exists() and json.loads(manifest.read_text())["format_version"] == flashgnn.FORMAT_VERSION):
        flashgnn.build(raw, ds, add_reverse=True, force=True, progress=progress)  # new input or a new format
    return raw, ds


def _pyg_data(raw: Path, csc: Path | None = None):
    """The input as PyG's ``HeteroData``, ``ToUndirected`` as ``--add-reverse``: in memory, or (``csc``: the
    directory ``prepare_pyg_csc`` wrote) every array on a tuned mapping, each edge type a ``SparseTensor``
    over its mapped CSC, so PyG's sampler builds nothing in RAM."""
    import torch
    import torch_geometric.transforms as T
    from torch_geometric.data import HeteroData

    counts = json.loads((raw / "num_nodes.json").read_text())
    data = HeteroData()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # torch.from_numpy of a read-only memmap warns once
        for nt, n in counts.items():
            f = raw / nt / "node_feat.npy"
            if f.exists():
                data[nt].x = torch.from_numpy(np.load(f) if csc is None else _mapped(f))
            else:
                data[nt].num_nodes = int(n)
        data[TARGET].y = torch.from_numpy(np.load(raw / TARGET / "node_label.npy"))
        if csc is None:
            for d in sorted(p for p in raw.iterdir() if p.is_dir() and p.name.count("__") == 2):
                e = np.load(d / "edge_index.npy")
                data[tuple(d.name.split("__"))].edge_index = torch.from_numpy(
                    np.ascontiguousarray(e.T, dtype=np.int64))
            return T.ToUndirected()(data)
        from torch_sparse import SparseTensor

        for d in sorted(p for p in csc.iterdir() if p.is_dir()):
            src, rel, dst = d.name.split("__")
            colptr, row = (torch.from_numpy(_mapped(d / f)) for f in ("colptr.npy", "row.npy"))
            data[src, rel, dst].adj_t = SparseTensor(rowptr=colptr, col=row, is_sorted=True, trust_data=True,
                                                     sparse_sizes=(int(counts[dst]), int(counts[src])))
    return data


def _mapped(f: Path) -> np.ndarray:
    """``f`` mapped read-only, tuned for random access: a fault reads its own page, not a readahead window."""
    import mmap as _mm

    a = np.load(f, mmap_mode="r")
    a._mmap.madvise(_mm.MADV_RANDOM)
    return a


def prepare_pyg_csc(raw: Path, work: Path, progress: bool) -> Path:
    """Every edge type's CSC (``colptr`` [n_dst + 1], ``row`` [e], int64) of the ``ToUndirected`` input, by PyG's
    own ``to_csc``, in ``work/<src>__<rel>__<dst>/`` (made once per input: ``done.json`` is written last)."""
    from torch_geometric.sampler.utils import to_csc

    done = work / "done.json"
    stamp = {"input": str(raw.resolve()), "mtime": (raw / "num_nodes.json").stat().st_mtime}
    if done.exists() and json.loads(done.read_text()) == stamp:
        return work
    done.unlink(missing_ok=True)
    data = _pyg_data(raw)
    for et in data.edge_types:
        colptr, row, _ = to_csc(data[et])
        d = work / "__".join(et)
        d.mkdir(parents=True, exist_ok=True)
        np.save(d / "colptr.npy", colptr.numpy())
        np.save(d / "row.npy", row.numpy())
        if progress:
            print(f"bench-hetero: PyG CSC of {et}: {row.numel():,} entries", file=sys.stderr)
    done.write_text(json.dumps(stamp))
    return work


def _hetero_nodes(b) -> int:
    return sum(int(b[t].num_nodes) for t in b.node_types)


def child_pyg(raw: Path, ds: Path, mmap: bool, fanouts, batch_size, batches, seed, threads, max_seconds) -> dict:
    """PyG's hetero NeighborLoader over the same input, in memory or over tuned mappings (``_pyg_data``)."""
    import torch
    from torch_geometric.loader import NeighborLoader

    torch.set_num_threads(threads)
    t_open = time.perf_counter()
    data = _pyg_data(raw, ds.parent / "pyg" if mmap else None)
    train = torch.from_numpy(np.load(raw / TARGET / "train_idx.npy"))
    loader = NeighborLoader(data, num_neighbors=list(fanouts), input_nodes=(TARGET, train), batch_size=batch_size,
                            shuffle=True, generator=torch.Generator().manual_seed(seed))
    open_s = time.perf_counter() - t_open
    r = measure_batches(loader, batches, max_seconds, _hetero_nodes)
    r["open_seconds"] = open_s
    return r


def child_flashgnn(ds: Path, variant: str, fanouts, batch_size, batches, seed, threads, max_seconds,
                   cache_budget: int = 0) -> dict:
    import torch

    import flashgnn

    torch.set_num_threads(1)
    d = flashgnn.open(ds)
    t_open = time.perf_counter()
    parts = variant.split("+")
    cache = None
    if len(parts) > 1:
        cache = flashgnn.Cache(str(ds), list(fanouts), cache_budget, hot="degree",
                               row_codec=parts[2] if len(parts) > 2 else "none")
    loader = flashgnn.NeighborLoader(str(ds), num_neighbors=list(fanouts), input_nodes=(TARGET, d.split("train")),
                                     batch_size=batch_size, shuffle=True, seed=seed, engine=parts[0],
                                     num_workers=threads, memory_budget=0, cache=cache, prefetch=PREFETCH)
    open_s = time.perf_counter() - t_open
    r = measure_batches(loader, batches, max_seconds, _hetero_nodes)
    r["open_seconds"] = open_s
    if cache is not None:
        st = cache.stats()
        hits = st["static_hits"] + st["dynamic_hits"]
        r["cache_hit_rate"] = hits / max(hits + st.get("misses", 0), 1)
    return r


def _child(argv) -> int:
    kind, raw, ds, fanout, bs, n, seed, threads, max_s, cache_budget = argv
    fan = [int(f) for f in fanout.split(",")]
    common = (fan, int(bs), int(n), int(seed), int(threads), float(max_s))
    if kind.startswith("pyg"):
        r = child_pyg(Path(raw), Path(ds), kind == "pyg-mmap", *common)
    else:
        r = child_flashgnn(Path(ds), kind, *common, cache_budget=int(cache_budget))
    print(json.dumps(r), flush=True)
    os._exit(0)  # do not wait for a loader cut off mid-batch


def main(argv=None) -> int:
    from benchmarks.peers import have_torch_sparse, median_round
    from flashgnn._util import human_bytes as h
    from flashgnn._util import parse_size
    from flashgnn.sample import budget
    from flashgnn.ssd.bench import drop_caches, run_child

    ap = argparse.ArgumentParser(prog="python -m benchmarks.hetero", description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="/tmp/flashgnn-hetero", help="where the input and the dataset are kept")
    ap.add_argument("--scale", default="1350000", help="papers (flashgnn generate igbh --scale)")
    ap.add_argument("--feature-dim", type=int, default=128)
    ap.add_argument("--memory-limit", type=parse_size, default=parse_size("1.8GiB"))
    ap.add_argument("--cache-budget", type=parse_size, default=None,
                    help="uring+cache's cache (default: what the cap leaves, at most a third of the data)")
    ap.add_argument("--fanout", default="5,5")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--threads", type=int, default=1)
    ap.add_argument("--rounds", type=int, default=3)
    ap.add_argument("--max-seconds", type=float, default=120.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--only", help="comma list of variants (default: all)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    raw, ds = prepare(Path(a.work), a.scale, a.feature_dim, a.seed, progress=not a.json)
    pyg_ok = have_torch_sparse()
    if pyg_ok and "pyg-mmap" in (a.only or "pyg-mmap"):
        prepare_pyg_csc(raw, Path(a.work) / "pyg", progress=not a.json)
    data = budget.dataset_bytes(str(ds))
    if data < 1.5 * a.memory_limit:
        print(f"bench-hetero: note: {ds} holds {h(data)}, less than 1.5x the {h(a.memory_limit)} cap", file=sys.stderr)
    variants = [v for v in VARIANTS if not a.only or v in a.only.split(",")]
    from flashgnn.sample.budget import batch_bytes

    window = PREFETCH * batch_bytes(str(ds), [int(f) for f in a.fanout.split(",")], a.batch_size)
    room = max(a.memory_limit - CHILD_BASE_BYTES - window, 0)
    cache_budget = min(a.cache_budget or room, data // 3)
    print(f"bench-hetero: {ds} ({h(data)}), cap {h(a.memory_limit)} ({data / a.memory_limit:.2f}x), fanout "
          f"{a.fanout} per edge type, batch {a.batch_size}, {a.batches} batches, {a.threads} thread(s) each, "
          f"uring+cache cache {h(cache_budget)} ({cache_budget / max(data, 1):.0%} of the data)",
          file=sys.stderr)
    results, rounds = {}, {}
    plan = [(r, v) for r in range(max(a.rounds, 1)) for v in variants if r == 0 or v in REPEATED]
    for rnd, v in plan:
        if rnd > 0 and v not in rounds:
            continue  # skipped or failed in round 1
        if v.startswith("pyg") and not pyg_ok:
            results[v] = {"variant": v, "skipped": "torch_sparse is not importable (make bench-peers installs it)"}
            print(f"bench-hetero: {v:<16} skipped: torch_sparse is not importable", file=sys.stderr)
            continue
        cmd = [sys.executable, "-m", "benchmarks.hetero", "--child", v, str(raw), str(ds), a.fanout,
               str(a.batch_size), str(a.batches), str(a.seed), str(a.threads), str(a.max_seconds), str(cache_budget)]
        dropped = drop_caches()
        rc, out = run_child(cmd, a.memory_limit if v in CAPPED else None)
        if rc != 0:
            results[v] = {"variant": v, "failed": rc}
            rounds.pop(v, None)
            print(f"bench-hetero: {v:<16} failed (exit {rc})", file=sys.stderr)
            continue
        r = json.loads(out.strip().splitlines()[-1])
        r.update(variant=v, capped=v in CAPPED, cache_dropped=dropped)
        rounds.setdefault(v, []).append(r)
        results[v] = median_round(rounds[v])
        print(f"bench-hetero: {v:<16} {'< ' if r['upper_bound'] else ''}{r['batches_per_s']:.3g} batches/s, "
              f"{r['nodes_per_batch']:,.0f} nodes/batch"
              + (f", {r['cache_hit_rate']:.0%} of extents from the cache" if "cache_hit_rate" in r else "")
              + f" (round {rnd + 1})", file=sys.stderr)
    rate = {v: r["batches_per_s"] for v, r in results.items() if r.get("batches_per_s")}

    def ratio(x, y):
        return rate[x] / rate[y] if x in rate and y in rate else None

    ratios = {"uring+cache_vs_pyg_memory": ratio("uring+cache", "pyg-memory"),
              "uring+cache+fp16_vs_pyg_memory": ratio("uring+cache+fp16", "pyg-memory"),
              "uring+cache+int8_vs_pyg_memory": ratio("uring+cache+int8", "pyg-memory"),
              "uring_vs_pyg_memory": ratio("uring", "pyg-memory"), "memory_vs_pyg_memory": ratio("memory", "pyg-memory"),
              "uring+cache_vs_pyg_mmap": ratio("uring+cache", "pyg-mmap"), "uring_vs_pyg_mmap": ratio("uring", "pyg-mmap"),
              "uring+cache+int8_vs_pyg_mmap": ratio("uring+cache+int8", "pyg-mmap")}
    report = {"dataset": str(ds), "dataset_bytes": data, "memory_limit": a.memory_limit, "fanout": a.fanout,
              "cache_budget": cache_budget,
              "batch_size": a.batch_size, "batches": a.batches, "threads": a.threads, "rounds": a.rounds,
              "results": results, "ratios": ratios, "loadavg": os.getloadavg()}
    if a.json:
        print(json.dumps(report, indent=2))
        return 0
    for k, v in ratios.items():
        print(f"  {k:<31} {'-' if v is None else format(v, '.2f'):>6}")
    shown = ", ".join(f"{k} {v:.2f}" for k, v in ratios.items() if v is not None)
    print(f"summary: {shown or 'no ratio (variants failed or skipped)'}; load average {os.getloadavg()[0]:.2f}")
    return 0


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.exit(_child(sys.argv[2:]))
    sys.exit(main())
