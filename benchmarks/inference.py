"""Layer-wise inference against PyG's whole graph in memory (``make bench-inference``).

    python -m benchmarks.inference DATASET [--hidden 128] [--layers 2] [--batch-size 16384] [--json]

The same GraphSAGE (same seed, same weights) over every node, each way in a
child process of its own so its peak resident memory (``ru_maxrss``) is its
own:

- ``pyg-memory`` (the baseline): ``flashgnn.to_pyg`` then
  ``model(x, edge_index)`` — PyG's full-graph forward, everything in RAM;
- ``inference``: ``flashgnn.inference(model, DATASET)`` -> tensor;
- ``inference-out``: ``flashgnn.inference(model, DATASET, OUT)`` -> disk;
- ``pyg-loader``: PyG's ``model.inference(loader)`` on
  ``flashgnn.NeighborLoader(DATASET, num_neighbors=[-1])``;
- ``pyg-layerwise``: PyG's own layer-wise inference in memory,
  ``model.inference(torch_geometric.loader.NeighborLoader(data,
  num_neighbors=[-1], batch_size=B))`` over ``flashgnn.to_pyg`` (needs
  torch-sparse or pyg-lib: ``make bench-peers`` installs torch-sparse into
  ``.venv-peers``; skipped without).

``--rounds R`` runs the ways R times, alternated, and reports each one's
median round. ``--only a,b`` runs those ways (the first is then the
baseline). ``--memory-limit SIZE`` runs flashgnn's ways (``inference``,
``inference-out``, ``pyg-loader``) in a memory cgroup capped at SIZE, PyG's
uncapped, with the page cache dropped before each way: the out-of-core case
(a dataset >= 1.5x the cap), where PyG is given the memory it needs.

The summary line gives issue-level ratios against PyG's layer-wise
``model.inference`` in memory: ``flashgnn.inference``'s, and that of PyG's
own loop over ``flashgnn.NeighborLoader``.

Reports seconds, peak RSS and peak RSS above what the imports alone take
(torch + PyG, ~0.7 GiB), as ratios to the baseline measured in the same run,
and each way's largest difference from the baseline's outputs. File-backed
pages of the memory-mapped layer tables count in RSS although the kernel
may reclaim them.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time

import numpy as np

METHODS = ("pyg-memory", "inference", "inference-out", "pyg-loader", "pyg-layerwise")
CAPPED = ("inference", "inference-out", "pyg-loader")


def _child(method: str, dataset: str, hidden: int, layers: int, batch_size: int, out: str) -> dict:
    import resource

    import torch
    from torch_geometric.nn import GraphSAGE

    import flashgnn

    torch.set_num_threads(max(1, (os.cpu_count() or 2) - 1))
    ds = flashgnn.open(dataset)
    torch.manual_seed(0)
    model = GraphSAGE(ds.feature_dim, hidden, layers, max(ds.num_classes, 2)).eval()
    base_rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024  # torch + PyG imported, nothing read
    t0 = time.perf_counter()
    if method == "pyg-memory":
        data = flashgnn.to_pyg(dataset)
        with torch.no_grad():
            y = model(data.x.float(), data.edge_index).numpy()
    elif method == "inference":
        y = flashgnn.inference(model, dataset, batch_size=batch_size, progress_bar=False).numpy()
    elif method == "inference-out":
        flashgnn.inference(model, dataset, os.path.join(out, "emb"), batch_size=batch_size, progress_bar=False,
                           force=True)  # the output of the round before
        y = np.load(os.path.join(out, "emb", "embeddings.npy"), mmap_mode="r")
    elif method == "pyg-layerwise":
        from torch_geometric.loader import NeighborLoader

        data = flashgnn.to_pyg(dataset)
        data.x = data.x.float()
        loader = NeighborLoader(data, num_neighbors=[-1], batch_size=batch_size, shuffle=False)
        y = model.inference(loader, progress_bar=False).numpy()
    else:
        # No cache: the figures compare the loader's own memory with PyG's (as recorded in docs/benchmarks.md).
        loader = flashgnn.NeighborLoader(dataset, num_neighbors=[-1], batch_size=batch_size, memory_budget=0)
        y = model.inference(loader).numpy()
    seconds = time.perf_counter() - t0
    np.save(os.path.join(out, f"{method}.npy"), np.asarray(y))
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
    return dict(method=method, seconds=seconds, peak_rss_bytes=peak, work_rss_bytes=peak - base_rss)


def main(argv=None) -> int:
    from flashgnn._util import parse_size

    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dataset")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--layers", type=int, default=2)
    p.add_argument("--batch-size", type=int, default=16384)
    p.add_argument("--rounds", type=int, default=1, help="alternated rounds (median round reported)")
    p.add_argument("--only", help="comma list of ways (default: all; the first is the baseline)")
    p.add_argument("--memory-limit", type=parse_size, default=None,
                   help="cap flashgnn's ways at this much memory (cgroup; PyG's run uncapped)")
    p.add_argument("--json", action="store_true", help="print the results as JSON")
    p.add_argument("--child", choices=METHODS, help=argparse.SUPPRESS)
    p.add_argument("--out", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    if a.child:
        print(json.dumps(_child(a.child, a.dataset, a.hidden, a.layers, a.batch_size, a.out)))
        return 0
    from flashgnn import _progress
    from flashgnn.ssd.bench import drop_caches, run_child

    from benchmarks.peers import have_torch_sparse

    methods = [m for m in METHODS if m != "pyg-layerwise" or have_torch_sparse()]
    if a.only:
        methods = [m.strip() for m in a.only.split(",")]
        bad = [m for m in methods if m not in METHODS]
        if bad:
            raise SystemExit(f"bench-inference: --only: unknown way {bad[0]!r} (ways: {', '.join(METHODS)})")
    runs: dict = {m: [] for m in methods}
    with tempfile.TemporaryDirectory(prefix="flashgnn-bench-inference-") as tmp:
        bar = _progress.bar(total=len(methods) * max(a.rounds, 1), desc="bench-inference", unit="way")
        for _ in range(max(a.rounds, 1)):
            for m in methods:
                bar.set_description(f"bench-inference: {m}")
                cmd = [sys.executable, "-m", "benchmarks.inference", a.dataset, "--hidden", str(a.hidden),
                       "--layers", str(a.layers), "--batch-size", str(a.batch_size), "--child", m, "--out", tmp]
                if a.memory_limit:
                    drop_caches()
                rc, out = run_child(cmd, a.memory_limit if m in CAPPED else None)
                if rc != 0:
                    raise SystemExit(f"bench-inference: {m} failed (exit {rc}); its stderr is above")
                runs[m].append(json.loads(out.strip().splitlines()[-1]))
                bar.update(1)
        bar.close()
        rows = []
        for m in methods:
            rs = sorted(runs[m], key=lambda r: r["seconds"])
            row = dict(rs[len(rs) // 2], rounds=[r["seconds"] for r in runs[m]])
            rows.append(row)
        base = np.load(os.path.join(tmp, f"{methods[0]}.npy"))
        for r in rows:
            r["max_abs_diff"] = float(np.abs(np.load(os.path.join(tmp, f"{r['method']}.npy")) - base).max())
    b = rows[0]
    for r in rows:
        r["time_ratio"] = r["seconds"] / b["seconds"]
        r["rss_ratio"] = r["peak_rss_bytes"] / b["peak_rss_bytes"]
        r["work_rss_ratio"] = r["work_rss_bytes"] / max(b["work_rss_bytes"], 1)
    if a.json:
        print(json.dumps(dict(dataset=a.dataset, hidden=a.hidden, layers=a.layers, batch_size=a.batch_size,
                              memory_limit=a.memory_limit, results=rows), indent=2))
    else:
        for r in rows:
            print(f"{r['method']:>14}: {r['seconds']:7.2f} s ({r['time_ratio']:.2f}x), peak RSS "
                  f"{r['peak_rss_bytes'] / 2**20:6.0f} MiB ({r['rss_ratio']:.2f}x), above the imports "
                  f"{r['work_rss_bytes'] / 2**20:6.0f} MiB ({r['work_rss_ratio']:.2f}x), max |diff| {r['max_abs_diff']:.1e}")
    by = {r["method"]: r for r in rows}
    lw = by.get("pyg-layerwise")
    parts = [f"{m} {lw['seconds'] / by[m]['seconds']:.2f}x" for m in ("inference", "pyg-loader") if lw and m in by]
    print(f"bench-inference: against PyG's layer-wise model.inference in memory: " + (", ".join(parts) or "n/a")
          + f" (baseline {b['method']}; largest |diff| {max(r['max_abs_diff'] for r in rows):.0e}"
          + (f"; flashgnn capped at {a.memory_limit / 2**20:.0f} MiB" if a.memory_limit else "") + ")",
          file=sys.stderr if a.json else sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
