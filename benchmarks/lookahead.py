"""Lookahead on the pre-sampled path: what knowing the next batches buys.

Over the first ``--batches`` stored batches of a pre-sample (``flashgnn
presample``), gather every batch's feature rows through the engine under the
same byte budget with:

- ``online``: the same batches sampled online (``NeighborLoader``, same seed)
  — the baseline a pre-sample replaces;
- ``online+degree``: online with the default cache (:class:`flashgnn.Cache`,
  degree hot set + S3-FIFO) of the whole budget;
- ``online+belady/S``: online lookahead (``NeighborLoader(lookahead=S)``):
  structure sampled S batches ahead, the remaining rows filled through a
  Belady cache of the whole budget (:mod:`flashgnn.loader.window`);
- ``online+degree+belady/S``: both, the budget split as ``--memory-budget``
  splits it (``budget.LOOKAHEAD_SHARE`` to Belady);
- ``none``: no cross-batch memory (every row read);
- ``s3fifo``: the online cache (:class:`flashgnn.Cache`, dynamic part only —
  no knowledge of the future);
- ``degree+s3fifo``: the online default (static hot set by degree + S3-FIFO);
- ``belady/S``: Belady's optimal replacement within a superbatch of S batches
  (:class:`flashgnn.loader.presample.BeladyRowCache`; rows the window needs are kept).

Printed per variant: hit rate, engine reads, reads saved against ``none`` and
batches/s of the gather loop (page cache dropped before each). ``--json``
emits the same. No timed assertions.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path


def _drain(loader, batches: int) -> tuple[int, int, float]:
    """Iterate ``loader`` for at most ``batches`` batches; (batches, rows, seconds). The iterator is
    closed afterwards (the online loader records its producers' telemetry then; run-ahead threads stop)."""
    t = time.perf_counter()
    n = rows = 0
    it = iter(loader)
    for d in it:
        rows += len(d.n_id)
        n += 1
        if n >= batches:
            break
    el = time.perf_counter() - t
    it.close()
    return n, rows, el


def run_online(presample_dir, dataset, batches: int, name: str = "online", budget: int = 0) -> dict:
    """The same epoch sampled online (NeighborLoader with the pre-sample's fanouts, batch size and seed), with
    the cache and/or the lookahead window ``name`` asks for."""
    import flashgnn
    from flashgnn.ssd.bench import drop_caches
    from flashgnn.sample.budget import LOOKAHEAD_SHARE
    from flashgnn.loader.neighbor import NeighborLoader
    from flashgnn.loader.presample import open_presample
    from flashgnn.store.dataset import Dataset

    drop_caches()
    meta = open_presample(presample_dir, Dataset(dataset))
    parts = name.split("+")[1:]
    window = next((int(p.split("/")[1]) for p in parts if p.startswith("belady/")), 0)
    # With both, the budget is split as --memory-budget splits it.
    belady = (int(budget * LOOKAHEAD_SHARE) if "degree" in parts else budget) if window else 0
    cache = flashgnn.Cache(dataset, meta["fanouts"], budget - belady, hot="degree") if "degree" in parts else None
    ld = NeighborLoader(dataset, meta["fanouts"], batch_size=meta["batch_size"], split=meta["split"], shuffle=True,
                        seed=meta["seed"], cache=cache, lookahead=window, lookahead_budget=belady,
                        memory_budget=0)  # the variant's own cache, or none
    n, rows, el = _drain(ld, batches)
    tel = ld.telemetry
    hits = (tel.get("cache_static_hits", 0) or 0) + (tel.get("cache_dynamic_hits", 0) or 0)
    la = tel.get("lookahead") or {}
    hits += la.get("hits", 0)
    return {"variant": "online sampling" if name == "online" else name, "batches": n, "rows": rows,
            "reads": tel.get("reads", 0), "hit_rate": hits / max(hits + tel.get("reads", 0), 1),
            "batches_per_s": n / el, "seconds": el}


def run_variant(presample_dir, dataset, name: str, budget: int, batches: int) -> dict:
    import flashgnn
    from flashgnn.ssd.bench import drop_caches
    from flashgnn.loader.presample import PresampledLoader

    if name.split("+")[0] == "online":
        return run_online(presample_dir, dataset, batches, name, budget)
    drop_caches()
    cache = None
    kw = {}
    if name in ("s3fifo", "degree+s3fifo"):
        cache = flashgnn.Cache(dataset, [0], budget, policy="s3fifo", hot="degree" if name == "degree+s3fifo" else "none")
    elif name.startswith("belady/"):
        kw = dict(belady_budget=budget, superbatch=int(name.split("/")[1]))
    ld = PresampledLoader(presample_dir, dataset, cache=cache, memory_budget=0, **kw)  # the variant's cache or none
    n, rows, el = _drain(ld, batches)
    tel = ld.gather.telemetry()
    if ld.belady is not None:
        hit = ld.belady.hits / max(ld.belady.hits + ld.belady.misses, 1)
    elif cache is not None:
        hit = tel.get("cache_hit_rate") or 0.0
    else:
        hit = 0.0
    return {"variant": name, "batches": n, "rows": rows, "reads": tel.get("reads", 0), "hit_rate": hit,
            "batches_per_s": n / el, "seconds": el}


def main(argv: list[str] | None = None) -> int:
    from tqdm import tqdm

    from flashgnn._util import human_bytes, parse_size

    p = argparse.ArgumentParser(prog="python -m benchmarks.lookahead", description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", type=Path)
    p.add_argument("presample", type=Path, help="directory written by `flashgnn presample`")
    p.add_argument("--budget", type=parse_size, default=256 << 20)
    p.add_argument("--batches", type=int, default=40)
    p.add_argument("--variants", default="online,online+degree,online+belady/8,online+degree+belady/8,none,s3fifo,"
                   "degree+s3fifo,belady/8,belady/32",
                   help="online[+degree][+belady/S] = the same batches sampled online by NeighborLoader (with the "
                        "default cache, online lookahead, or both); the rest gather from the pre-sample")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    rows = []
    for v in tqdm(a.variants.split(","), desc="lookahead", unit="variant"):
        rows.append(run_variant(a.presample, a.dataset, v, a.budget, a.batches))
    base = next((r["reads"] for r in rows if r["variant"] == "none"), None)
    for r in rows:
        r["reads_saved"] = (1 - r["reads"] / base) if base else None
    if a.json:
        print(json.dumps({"dataset": str(a.dataset), "budget": a.budget, "rows": rows}, indent=2))
        return 0
    print(f"lookahead on {a.presample} ({a.batches} batches), cache budget {human_bytes(a.budget)}")
    print(f"  {'variant':<15}{'hit rate':>9}{'reads':>11}{'saved':>8}{'batch/s':>9}")
    for r in rows:
        saved = f"{100 * r['reads_saved']:>7.1f}%" if r["reads_saved"] is not None else f"{'-':>8}"
        print(f"  {r['variant']:<15}{100 * r['hit_rate']:>8.1f}%{r['reads']:>11,}{saved}{r['batches_per_s']:>9.2f}")
    deg = next((r for r in rows if r["variant"] == "online+degree"), None)
    la = max((r for r in rows if r["variant"].startswith("online+") and "belady" in r["variant"]),
             key=lambda r: r["batches_per_s"], default=None)
    if deg and la:
        print(f"online lookahead: {la['variant']} {la['batches_per_s']:.2f} batches/s, {la['reads']:,} reads vs the "
              f"default online cache {deg['batches_per_s']:.2f} batches/s, {deg['reads']:,} reads "
              f"({la['batches_per_s'] / max(deg['batches_per_s'], 1e-9):.2f}x)")
    s3 = next((r for r in rows if r["variant"] == "s3fifo"), None)
    best = max((r for r in rows if r["variant"].startswith("belady")), key=lambda r: r["hit_rate"], default=None)
    if s3 and best:
        print(f"lookahead: {best['variant']} hit rate {100 * best['hit_rate']:.1f}% vs online s3fifo "
              f"{100 * s3['hit_rate']:.1f}% at the same budget ({best['reads']:,} vs {s3['reads']:,} reads)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
