"""Training-speed benchmark (``make bench-train``): does the trainer wait?

For each engine, in a child process (inside a cgroup memory cap with
``--memory-limit``, page cache dropped first; ``memory`` is the uncapped DRAM
oracle), on the same ``--batches`` training batches (epoch 0, same seed):

1. *preparation*: the loader alone (sampling + feature gather, producers
   running ahead) — the time to prepare every batch;
2. *training*: the training steps alone, on batches already in memory;
3. *epoch*: the real pipelined loop — loader and training overlapped — with
   the data-wait share (time the loop sat blocked on the loader).

``uring+cache`` adds the default DRAM cache (:class:`flashgnn.Cache`, degree
hot set + S3-FIFO) of ``--cache-budget`` bytes; ``uring+lookahead`` spends
the same bytes on the window's batches first, then splits the rest between
that cache and online lookahead's Belady row cache over ``--lookahead``
batches as ``--memory-budget`` does (:mod:`flashgnn.loader.window`). Both count
inside the same ``--memory-limit`` as the other engines.

Targets: overlap — epoch <= 1.15 x max(preparation, training) for
every engine; and, when preparation is the bottleneck, ``uring`` epochs beat
tuned ``mmap`` epochs by at least the preparation ratio.

    python -m benchmarks.train DATASET --memory-limit 1GiB --batches 10 [--json]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time

from flashgnn.ssd.bench import drop_caches, run_child
from flashgnn._util import ArgumentParser, proc_status_bytes  # negative-leading list values (--fanout -1,-1)

ENGINES = ["uring", "uring+cache", "uring+lookahead", "mmap", "memory"]


def _child(a) -> dict:
    import torch
    import torch.nn.functional as F

    import flashgnn
    from flashgnn.loader.neighbor import NeighborLoader
    from flashgnn.nn.zoo import build_model, forward
    from flashgnn.train.trainer import default_threads

    torch.set_num_threads(a.threads or default_threads())
    torch.manual_seed(a.seed)
    ds = flashgnn.open(a.dataset)
    fan = [int(x) for x in a.fanout.split(",")]
    base, *extra = a.engine.split("+")
    if extra not in ([], ["cache"], ["lookahead"]):
        raise SystemExit(f"bench-train: engine {a.engine!r}: expected ENGINE, ENGINE+cache or ENGINE+lookahead")
    cache, la, la_budget = None, a.lookahead if extra == ["lookahead"] else 0, 0
    if extra:
        total = a.cache_budget
        if la:
            # Same bytes as uring+cache: the structure batches held in the window are paid from them first
            # (measured), the rest split as --memory-budget splits it.
            from flashgnn.sample import budget

            held = budget.window_bytes(0, la, 0, budget.batch_bytes(ds.path, fan, a.batch_size, features="free"))
            total = max(0, total - held)
            la_budget = int(total * budget.LOOKAHEAD_SHARE)
        cache = flashgnn.Cache(ds.path, fan, total - la_budget, engine=base)
    loader = NeighborLoader(ds, fan, batch_size=a.batch_size, split="train", shuffle=True, seed=a.seed,
                            engine=base, prefetch=a.prefetch, num_workers=a.workers, cache=cache, lookahead=la,
                            lookahead_budget=la_budget, memory_budget=0)  # the variant's own cache, or none
    model = build_model(a.model, ds.feature_dim, a.hidden, ds.num_classes, len(fan), 0.2)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    # One batch more than are timed: timing starts at the first arrival. A small split (a demo at scale 14)
    # may hold fewer than that; then every batch it has is used, and fewer are timed (reported in `batches`).
    n = min(a.batches + 1, len(loader))
    if n < 2:
        raise SystemExit(f"bench-train: {a.dataset}: the train split ({len(loader.input_nodes):,} nodes) makes "
                         f"{len(loader)} batch(es) of {a.batch_size}; timing needs at least 2 (lower --batch-size)")

    def step(d):
        opt.zero_grad(set_to_none=True)
        out = forward(model, d)
        F.cross_entropy(out, d.y[: d.batch_size], ignore_index=-1).backward()
        opt.step()

    # Warm-up on another epoch's first batch (imports, lazy init, producers'
    # first open), then drop the page cache so every pass starts cold.
    loader.set_epoch(1)
    w = iter(loader)
    step(next(w))
    w.close()
    drop_caches()
    # Every pass is timed from the first batch's arrival, as in `flashgnn
    # bench`: opening the engine (and the memory engine's load of the whole
    # dataset) is excluded, so the figures are steady-state rates.
    # 1. preparation alone
    loader.set_epoch(0)
    kept = []
    it = iter(loader)
    kept.append(next(it))
    t0 = time.perf_counter()
    for _ in range(n - 1):
        d = next(it)
        if len(kept) < 3:
            kept.append(d)
    prep = time.perf_counter() - t0
    it.close()
    # 2. training alone, on batches already in memory (a ring of 3)
    model.train()
    step(kept[0])  # warm-up (allocator, lazy init)
    t0 = time.perf_counter()
    for i in range(n - 1):
        step(kept[i % len(kept)])
    train = time.perf_counter() - t0
    del kept
    drop_caches()
    # 3. the pipelined epoch over the same batches: step i overlaps the
    # preparation of batches i+1.. (n-1 steps and n-1 arrivals are timed)
    loader.set_epoch(0)
    wait = 0.0
    it = iter(loader)
    d = next(it)
    t0 = time.perf_counter()
    for _ in range(n - 1):
        step(d)
        tw = time.perf_counter()
        d = next(it)
        wait += time.perf_counter() - tw
    epoch = time.perf_counter() - t0
    it.close()
    rss = proc_status_bytes("VmHWM")
    return dict(engine=a.engine, batches=n - 1, prep_seconds=prep, train_seconds=train, epoch_seconds=epoch,
                wait_seconds=wait, data_wait=wait / epoch, overlap=epoch / max(prep, train),
                bottleneck="preparation" if prep > train else "training", peak_rss_bytes=rss)


def measure(dataset, engines=ENGINES, memory_limit=None, batches=10, batch_size=1024, fanout="25,10", model="sage",
            hidden=128, workers=1, prefetch=4, threads=None, seed=0, log=print, cache_budget=256 << 20,
            lookahead=8) -> dict:
    """Run every engine in its own child; returns the report dict."""
    results = []
    for e in engines:
        dropped = drop_caches()
        capped = bool(memory_limit) and e != "memory"
        cmd = [sys.executable, "-m", "benchmarks.train", "--child", str(dataset), "--engines", e,
               "--batches", str(batches), "--batch-size", str(batch_size), "--fanout", fanout, "--model", model,
               "--hidden", str(hidden), "--workers", str(workers), "--prefetch", str(prefetch), "--seed", str(seed),
               "--cache-budget", str(cache_budget), "--lookahead", str(lookahead)]
        if threads:
            cmd += ["--threads", str(threads)]
        rc, out = run_child(cmd, memory_limit if capped else None)
        if rc != 0:
            log(f"bench-train: engine {e} failed (exit {rc})")
            continue
        r = json.loads(out.strip().splitlines()[-1])
        r.update(memory_capped=capped, cache_dropped=dropped)
        results.append(r)
        log(f"bench-train: {e:<15} epoch {r['epoch_seconds']:7.2f} s = prep {r['prep_seconds']:6.2f} s | "
            f"train {r['train_seconds']:6.2f} s -> overlap {r['overlap']:.2f}x of the bottleneck "
            f"({r['bottleneck']}), data wait {100 * r['data_wait']:.0f}%, peak RSS {r['peak_rss_bytes'] / 2**20:.0f} MiB")
    by = {r["engine"]: r for r in results}
    summary = {}
    if "uring" in by and "mmap" in by:
        u, m = by["uring"], by["mmap"]
        summary = dict(
            epoch_speedup_vs_mmap=m["epoch_seconds"] / u["epoch_seconds"],
            prep_speedup_vs_mmap=m["prep_seconds"] / u["prep_seconds"],
            uring_prep_bound=u["bottleneck"] == "preparation",
        )
    for e, r in by.items():  # every engine's epochs against tuned mmap and the DRAM oracle
        if "mmap" in by:
            summary[f"{e}_epoch_vs_mmap"] = by["mmap"]["epoch_seconds"] / r["epoch_seconds"]
        if "memory" in by:
            summary[f"{e}_epoch_vs_memory"] = by["memory"]["epoch_seconds"] / r["epoch_seconds"]
    summary["overlap_max"] = max((r["overlap"] for r in results), default=None)
    return dict(dataset=str(dataset), memory_limit=memory_limit, batches=batches, batch_size=batch_size,
                fanout=fanout, model=model, results=results, summary=summary)


def main(argv=None) -> int:
    from flashgnn._util import human_bytes, parse_size

    p = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset")
    p.add_argument("--engines", default=",".join(ENGINES))
    p.add_argument("--memory-limit", type=parse_size)
    p.add_argument("--batches", type=int, default=10)
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--fanout", default="25,10")
    p.add_argument("--model", default="sage")
    p.add_argument("--hidden", type=int, default=128)
    p.add_argument("--workers", type=int, default=1)
    p.add_argument("--prefetch", type=int, default=4)
    p.add_argument("--threads", type=int)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--cache-budget", type=parse_size, default=256 << 20,
                   help="bytes of cache for uring+cache / uring+lookahead (inside --memory-limit)")
    p.add_argument("--lookahead", type=int, default=8, help="window of uring+lookahead, in batches")
    p.add_argument("--json", action="store_true")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    a = p.parse_args(argv)
    from flashgnn.cli import quiet_warnings

    quiet_warnings()  # the child imports torch_geometric: no torch FutureWarning on the demo's screen
    if a.child:
        a.engine = a.engines
        print(json.dumps(_child(a)), flush=True)
        os._exit(0)
    log = (lambda s: print(s, file=sys.stderr, flush=True))
    cap = f", memory limit {human_bytes(a.memory_limit)}" if a.memory_limit else ""
    log(f"bench-train: {a.dataset}, {a.model}, fanout {a.fanout}, batch {a.batch_size}, {a.batches} batches{cap}")
    rep = measure(a.dataset, a.engines.split(","), a.memory_limit, a.batches, a.batch_size, a.fanout, a.model,
                  a.hidden, a.workers, a.prefetch, a.threads, a.seed, log, a.cache_budget, a.lookahead)
    if a.json:
        print(json.dumps(rep, indent=2))
        return 0
    print(f"{'engine':<16}{'epoch s':>9}{'prep s':>9}{'train s':>9}{'wait %':>8}{'overlap':>9}  bottleneck")
    for r in rep["results"]:
        print(f"{r['engine']:<16}{r['epoch_seconds']:9.2f}{r['prep_seconds']:9.2f}{r['train_seconds']:9.2f}"
              f"{100 * r['data_wait']:8.1f}{r['overlap']:8.2f}x  {r['bottleneck']}")
    s = rep["summary"]
    if s["overlap_max"] is None:
        print("summary: no engine ran to the end (see the failures above)")
        return 1
    line = f"summary: overlap worst {s['overlap_max']:.2f}x (target <= 1.15)"
    if "epoch_speedup_vs_mmap" in s:
        line += (f"; uring epochs {s['epoch_speedup_vs_mmap']:.2f}x tuned mmap, batch preparation "
                 f"{s['prep_speedup_vs_mmap']:.2f}x (target: epoch ratio >= preparation ratio while uring is "
                 f"preparation-bound: {'yes' if s['uring_prep_bound'] else 'no, training-bound'})")
    print(line)
    for e in rep["results"]:
        k = e["engine"]
        if f"{k}_epoch_vs_mmap" in s or f"{k}_epoch_vs_memory" in s:
            ratios = [f"{s[f'{k}_epoch_vs_{b}']:.2f}x {b}" for b in ("mmap", "memory") if f"{k}_epoch_vs_{b}" in s]
            print(f"  {k} epochs: {', '.join(ratios)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
