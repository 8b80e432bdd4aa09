"""CPU per batch of the sampler alone: flashgnn's ``memory`` engine (optionally
``uring`` + a cache of a third of the data) against torch_sparse's
``neighbor_sample`` plus the feature/label gather PyG's loader does, in one
process, on the same seeds, interleaved batch by batch.

    PYTHONPATH=python .venv-peers/bin/python -m benchmarks.sample_cpu --dataset data/ooc [--cached [--hot touches]] [--json]

Each side runs on the calling thread with one torch thread; the figure is
thread CPU time (``time.thread_time``) per batch, median over ``--batches``
after ``--warmup`` batches, and the verdict is the ratio of the medians
(``pyg_us / flashgnn_us``: above 1, flashgnn spends less CPU). Wall time is
reported beside it (``uring`` waits on the device). PyG's arrays come from
``benchmarks.peers.prepare`` (written once into ``--work``). This isolates
the sampling kernels that ``make bench-peers`` compares through the loaders;
needs torch_sparse (``make bench-peers`` builds ``.venv-peers``).
The flashgnn side also reports its reads and cache hits per timed batch and
its CPU per extent served: deterministic for a seed (reads, hits), or
thread CPU — figures that hold with other jobs on the machine.
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


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.sample_cpu", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="data/ooc")
    ap.add_argument("--work", default=None, help="PyG's arrays (default: /tmp/flashgnn-peers, as bench-peers)")
    ap.add_argument("--fanout", default="25,10")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--batches", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=3, help="untimed batches first (and cache warm-up with --cached)")
    ap.add_argument("--cached", action="store_true",
                    help="flashgnn side: uring with a cache of a third of the data (hot set by degree)")
    ap.add_argument("--hot", default="degree", help="with --cached: how the static hot set is chosen (degree, "
                    "touches — seeded with the train split —, presample, none)")
    ap.add_argument("--hot-fraction", type=float, default=None,
                    help="with --cached: share of the cache for the static set (default: the package's)")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    try:
        import torch
        import torch_sparse  # noqa: F401  (registers torch.ops.torch_sparse)
    except ImportError:
        raise SystemExit("sample_cpu: torch_sparse is not importable (make bench-peers builds .venv-peers with it)")
    import flashgnn
    from flashgnn import _progress
    from flashgnn.sample import budget

    from benchmarks.peers import prepare

    warnings.simplefilter("ignore")
    torch.set_num_threads(1)
    fan = [int(f) for f in a.fanout.split(",")]
    work = Path(a.work or "/tmp/flashgnn-peers")
    prepare(a.dataset, work, progress=not a.json)
    colptr, row, x, y = (torch.from_numpy(np.load(work / f"{f}.npy")) for f in ("colptr", "row", "x", "y"))
    train = np.load(work / "train.npy")
    if a.cached:
        kw = {} if a.hot_fraction is None else {"hot_fraction": a.hot_fraction}
        if a.hot in ("touches", "presample"):
            # touches: the seed distribution; presample: 8 batches of it.
            kw["presample_seeds"] = train if a.hot == "touches" else train[:8 * a.batch_size]
        cache = flashgnn.Cache(a.dataset, fan, budget.dataset_bytes(a.dataset) // 3, hot=a.hot,
                               batch_size=a.batch_size, **kw)
        s = flashgnn.Sampler(a.dataset, fan, engine="uring", cache=cache)
    else:
        s = flashgnn.Sampler(a.dataset, fan, engine="memory")
    rng = np.random.default_rng(a.seed)
    cpu = {"pyg": [], "flashgnn": []}
    wall = {"pyg": [], "flashgnn": []}
    nodes = {"pyg": 0, "flashgnn": 0}
    total = a.warmup + a.batches
    bar = _progress.bar(total=total, desc="sample_cpu", unit="batch", disable=a.json)
    if a.warmup == 0:
        s.reset_telemetry()
    for i in range(total):
        seeds = rng.choice(train, a.batch_size, replace=False)
        c, w = time.thread_time(), time.perf_counter()
        node, _, _, _ = torch.ops.torch_sparse.neighbor_sample(colptr, row, torch.from_numpy(seeds), fan, False, True)
        x.index_select(0, node), y.index_select(0, node)
        pc, pw, pn = time.thread_time() - c, time.perf_counter() - w, len(node)
        c, w = time.thread_time(), time.perf_counter()
        b = s.sample(seeds, seed=a.seed + i)
        fc, fw, fn = time.thread_time() - c, time.perf_counter() - w, len(b.n_id)
        if i == a.warmup - 1:
            s.reset_telemetry()  # the timed batches' reads and hits alone
        if i >= a.warmup:
            for k, (cc, ww, nn) in (("pyg", (pc, pw, pn)), ("flashgnn", (fc, fw, fn))):
                cpu[k].append(cc)
                wall[k].append(ww)
                nodes[k] += nn
        bar.update(1)
    bar.close()
    res = {k: {"cpu_us_median": float(np.median(cpu[k]) * 1e6), "cpu_us_mean": float(np.mean(cpu[k]) * 1e6),
               "wall_us_median": float(np.median(wall[k]) * 1e6), "nodes_per_batch": nodes[k] / a.batches}
           for k in cpu}
    tel = s.telemetry()
    hits = tel["cache_static_hits"] + tel["cache_dynamic_hits"]
    # Extents served (reads + cache hits; the memory engine counts each
    # extent it serves as a read) and what the cache did, per timed batch.
    res["flashgnn"].update(reads_per_batch=tel["reads"] / a.batches, cache_hits_per_batch=hits / a.batches,
                           cache_hit_rate=tel["cache_hit_rate"],
                           cpu_us_per_extent=res["flashgnn"]["cpu_us_mean"] * a.batches / max(1, tel["reads"] + hits))
    if a.cached:
        res["flashgnn"]["cache"] = {k: v for k, v in cache.stats().items() if not isinstance(v, (list, dict))}
    ratio = res["pyg"]["cpu_us_median"] / res["flashgnn"]["cpu_us_median"]
    side = "uring+cache" if a.cached else "memory"

    load = os.getloadavg()
    report = {"dataset": a.dataset, "flashgnn_engine": side, "hot": a.hot if a.cached else None, "fanout": a.fanout, "batch_size": a.batch_size,
              "batches": a.batches, "results": res, "pyg_cpu_vs_flashgnn_cpu": ratio, "loadavg": load}
    if a.json:
        print(json.dumps(report, indent=2))
        return 0
    for k, r in res.items():
        print(f"  {k:<9} CPU {r['cpu_us_median']:9,.0f} us/batch (mean {r['cpu_us_mean']:,.0f}), wall "
              f"{r['wall_us_median']:9,.0f} us, {r['nodes_per_batch']:,.0f} nodes/batch")
    f = res["flashgnn"]
    print(f"  flashgnn  {f['reads_per_batch']:,.0f} reads + {f['cache_hits_per_batch']:,.0f} cache hits per batch "
          f"(hit rate {100 * f['cache_hit_rate']:.1f} %), {f['cpu_us_per_extent']:.2f} us CPU per extent served")
    print(f"summary: flashgnn {side} {res['flashgnn']['cpu_us_median']:,.0f} us vs torch_sparse "
          f"{res['pyg']['cpu_us_median']:,.0f} us CPU per batch (median of {a.batches}); "
          f"torch_sparse / flashgnn = {ratio:.2f}; load average {load[0]:.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
