"""Striping over 1, 2 and 4 devices (docs/benchmarks.md "Striping", docs/simulator.md
"Several SSDs"): correctness and measured batches/s of `flashgnn stripe` here, and the scaling the SSD
simulator predicts for real separate SSDs.

    python -m benchmarks.stripe [--dataset DIR] [--work DIR] [--devices 1,2,4] [--json]

(a) correctness: the dataset is copied and striped over N directories for each N (64 KiB chunks, as
    `flashgnn stripe` by default), verified, and every sampled batch (ids, edges, features, labels) must equal
    the unstriped dataset's; (b) measured: batches/s of the same batches on the `uring` engine, page cache
    dropped before each run. On a machine whose directories all sit on one disk (this one: one virtio disk)
    (a) proves correctness only and (b) cannot scale; (c) predicted: a trace of the same batches is replayed
    with `--sweep devices=...` under `configs/ssd/this-machine.toml` and BeaconGNN's Table II config, and the
    busiest queue of each run says which resource saturates.

The dataset is never modified (copies are striped); without ``--dataset`` a small R-MAT one is generated in
``--work``.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CONFIGS = {"this-machine": REPO / "configs" / "ssd" / "this-machine.toml",
           "beacongnn-table2": REPO / "configs" / "ssd" / "beacongnn-table2.toml"}
KNEE = 0.8  # scaling counts as near-linear while batches/s stay >= 80 % of N x one device's
FIELDS = ("n_id", "row", "col", "num_sampled_nodes", "num_sampled_edges", "x", "y")


def _same(a, b) -> bool:
    import numpy as np

    return a.batch_size == b.batch_size and all(np.array_equal(getattr(a, f), getattr(b, f)) for f in FIELDS)


def _seeds(ds, batches: int, batch_size: int):
    import numpy as np

    pool = ds.split("train") if "train" in ds.split_names else np.arange(ds.num_nodes)
    order = np.random.default_rng(0).permutation(pool)
    while len(order) < batches * batch_size:
        order = np.concatenate([order, order])
    return [np.ascontiguousarray(order[b * batch_size:(b + 1) * batch_size], dtype=np.int64) for b in range(batches)]


def _timed(root, fanouts, seeds, drop: bool = True, engine: str = "uring"):
    """Batches/s sampling ``seeds`` from a cold page cache; returns (batches/s, batches, cache dropped)."""
    import flashgnn
    from flashgnn.ssd.bench import drop_caches

    s = flashgnn.Sampler(str(root), fanouts, engine=engine)
    dropped = drop_caches() if drop else False
    t = time.perf_counter()
    out = [s.sample(x, seed=b) for b, x in enumerate(seeds)]
    return len(seeds) / (time.perf_counter() - t), out, dropped


def devices_of(paths) -> list[str]:
    """The block devices (major:minor) the paths sit on: one entry means one disk under them all."""
    return sorted({f"{os.major(os.stat(p).st_dev)}:{os.minor(os.stat(p).st_dev)}" for p in paths})


def run(dataset: str | None, work: str, devices: list[int], fanouts: list[int], batch_size: int, batches: int,
        chunk: int = 64 << 10, predict: list[int] | None = None, drop: bool = True, progress: bool = True) -> dict:
    from tqdm.auto import tqdm

    import flashgnn
    from flashgnn.ssd.simulate import record_trace, servers, simulate, utilization
    from flashgnn.store.stripe import stripe

    w = Path(work)
    w.mkdir(parents=True, exist_ok=True)
    if dataset is None:
        dataset = w / "ds"
        if not (dataset / "manifest.json").exists():
            flashgnn.generate(w / "raw", scale=16, edge_factor=16, dim=128, dtype="float16", seed=1,
                              progress=progress)
            flashgnn.build(w / "raw", dataset, progress=progress, symmetrize=True, dedup=True)
            shutil.rmtree(w / "raw")
    dataset = Path(dataset)
    ds = flashgnn.open(str(dataset))
    seeds = _seeds(ds, batches, batch_size)
    steps = len(devices) * 2 + 2 + 2 * len(CONFIGS)
    bar = tqdm(total=steps, desc="stripe bench", unit="step", disable=not progress)

    # Reference: the unstriped dataset, memory engine (no device), then timed on uring.
    ref_s = flashgnn.Sampler(str(dataset), fanouts, engine="memory")
    ref = [ref_s.sample(x, seed=b) for b, x in enumerate(seeds)]
    base_bps, got, dropped = _timed(dataset, fanouts, seeds, drop)
    base_ok = all(_same(a, b) for a, b in zip(got, ref))
    bar.update(1)
    rows = []
    for n in devices:
        root = w / f"s{n}" / "ds"
        if root.parent.exists():
            shutil.rmtree(root.parent)
        shutil.copytree(dataset, root)
        dirs = [w / f"s{n}" / f"dev{k}" for k in range(n)]
        stripe(root, dirs, chunk, progress=False)
        flashgnn.verify(str(root), progress=False)
        bar.update(1)
        bps, got, _ = _timed(root, fanouts, seeds, drop)
        same = sum(_same(a, b) for a, b in zip(got, ref))
        rows.append({"directories": n, "block_devices": devices_of(dirs), "identical_batches": same,
                     "batches": len(seeds), "batches_per_s": bps})
        bar.update(1)
    one = next((r["batches_per_s"] for r in rows if r["directories"] == 1), base_bps)
    for r in rows:
        r["ratio_vs_1"] = r["batches_per_s"] / one

    # Predicted: the same batches' reads (logical offsets, unstriped) replayed on 1, 2, 4 SSDs.
    trace = w / "t.fgt"
    rec = record_trace(str(dataset), str(trace), fanouts, batch_size, batches, engine="uring", progress=False,
                       force=True)
    bar.update(1)
    predicted = []
    predict = predict or devices
    sweep = "devices=" + ",".join(map(str, predict))
    for cname, cpath in CONFIGS.items():
        for design in ("host", "cc"):
            r = simulate(str(trace), str(cpath), [design], sweep, timing=False)
            first = None
            for run in r["runs"]:
                d = run["results"][0]
                n = int(run["value"])
                first = first or d["batches_per_s"]
                util = utilization(d, servers(str(cpath), {"devices": n}, design))
                top = next(iter(util.items()))
                predicted.append({"config": cname, "design": design, "devices": n,
                                  "batches_per_s": d["batches_per_s"], "ratio_vs_1": d["batches_per_s"] / first,
                                  "efficiency": d["batches_per_s"] / first / (n / predict[0]),
                                  "busiest": top[0], "busiest_share": top[1],
                                  "utilization": {k: round(v, 4) for k, v in util.items()},
                                  "per_device_reads": [x["reads"] for x in d.get("devices", [])] or [d["reads"]]})
        bar.update(2)
    bar.close()
    return {"dataset": str(dataset), "fanouts": fanouts, "batch_size": batch_size, "batches": batches,
            "chunk_bytes": chunk, "page_cache_dropped": dropped,
            "unstriped": {"batches_per_s": base_bps, "identical_batches": base_ok},
            "measured": rows, "trace": {"path": str(trace), "reads": rec["records"]}, "predicted": predicted}


def report(r: dict) -> str:
    L = [f"dataset {r['dataset']}, fanout {','.join(map(str, r['fanouts']))}, batch {r['batch_size']}, "
         f"{r['batches']} batches, chunk {r['chunk_bytes'] >> 10} KiB"]
    devs = sorted({d for m in r["measured"] for d in m["block_devices"]})
    one_disk = len(devs) == 1
    L.append(f"(a) correctness and (b) measured here (uring, page cache "
             f"{'dropped' if r['page_cache_dropped'] else 'NOT dropped: not root'} before each run); block devices "
             f"under the stripe directories: {', '.join(devs)}"
             + (" -- ONE disk: this proves correctness only, no scaling is possible" if one_disk else ""))
    L.append(f"{'dirs':>5}{'identical':>12}{'batch/s':>10}{'vs 1 dir':>10}")
    L.append(f"{'none':>5}{'yes' if r['unstriped']['identical_batches'] else 'NO':>12}"
             f"{r['unstriped']['batches_per_s']:>10.1f}{'':>10}")
    for m in r["measured"]:
        L.append(f"{m['directories']:>5}{str(m['identical_batches']) + '/' + str(m['batches']):>12}"
                 f"{m['batches_per_s']:>10.1f}{m['ratio_vs_1']:>9.2f}x")
    L.append(f"(c) predicted by the SSD simulator for separate SSDs (trace of the same batches: "
             f"{r['trace']['reads']:,} reads)")
    L.append(f"{'config':<18}{'design':<7}{'SSDs':>5}{'batch/s':>10}{'vs 1':>8}{'of linear':>10}  "
             "busiest queues (busy share)")
    for p in r["predicted"]:
        top = list(p["utilization"].items())[:2]
        L.append(f"{p['config']:<18}{p['design']:<7}{p['devices']:>5}{p['batches_per_s']:>10.1f}"
                 f"{p['ratio_vs_1']:>7.2f}x{p['efficiency']:>10.0%}  " + ", ".join(f"{k} {v:.0%}" for k, v in top))
    ok = all(m["identical_batches"] == m["batches"] for m in r["measured"]) and r["unstriped"]["identical_batches"]
    # Where the host design stops scaling: the first count below 80 % of linear, and what saturates there.
    best = {}
    for p in r["predicted"]:
        if p["design"] == "host" and (p["config"] not in best or best[p["config"]]["efficiency"] >= KNEE):
            best[p["config"]] = p
    L.append(f"summary: striped batches {'identical' if ok else 'DIFFER'} over "
             f"{'/'.join(str(m['directories']) for m in r['measured'])} dirs; measured "
             + ", ".join(f"{m['ratio_vs_1']:.2f}x" for m in r["measured"])
             + " (one disk); predicted host design at "
             + "; ".join(f"{c} {p['devices']} SSDs {p['ratio_vs_1']:.2f}x "
                         f"({'below' if p['efficiency'] < KNEE else 'still'} {KNEE:.0%} of linear; {p['busiest']} "
                         f"{p['busiest_share']:.0%} busy)"
                         for c, p in best.items()))
    return "\n".join(L)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.stripe", description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", help="an existing dataset (read-only: striped copies are made); default: generate")
    ap.add_argument("--work", default="/tmp/flashgnn-bench-stripe", help="scratch directory (copies, parts, trace)")
    ap.add_argument("--devices", default="1,2,4", help="directories to stripe over here (measured)")
    ap.add_argument("--predict", default="1,2,4,8,16", help="SSD counts to simulate (predicted)")
    ap.add_argument("--fanout", default="10,5")
    ap.add_argument("--batch-size", type=int, default=256)
    ap.add_argument("--batches", type=int, default=20)
    ap.add_argument("--keep", action="store_true", help="keep the striped copies")
    ap.add_argument("--no-drop-caches", action="store_true", help="leave the page cache (tests; figures are then warm)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    devices = [int(x) for x in a.devices.split(",")]
    if any(n < 1 for n in devices):
        ap.error(f"--devices {a.devices}: counts must be >= 1")
    predict = [int(x) for x in a.predict.split(",")]
    if any(not 1 <= n <= 64 for n in predict):
        ap.error(f"--predict {a.predict}: counts must be in [1, 64] (the simulator's array.devices bound)")
    r = run(a.dataset, a.work, devices, [int(x) for x in a.fanout.split(",")], a.batch_size, a.batches,
            predict=predict, drop=not a.no_drop_caches, progress=sys.stderr.isatty())
    if not a.keep:
        for n in devices:
            shutil.rmtree(Path(a.work) / f"s{n}", ignore_errors=True)
    print(json.dumps(r, indent=2) if a.json else report(r))
    ok = r["unstriped"]["identical_batches"] and all(m["identical_batches"] == m["batches"] for m in r["measured"])
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
