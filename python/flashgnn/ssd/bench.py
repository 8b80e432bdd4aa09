"""`flashgnn bench`: the sampling engines against each other and the device.

For each engine: batches/s, seeds/s, sampled nodes/s, IOPS, MB/s, read
amplification, io_efficiency (engine IOPS / device-limit IOPS measured by the
probe in the same run, 4 KiB O_DIRECT random reads at the engine's depth), and
speedups against ``mmap`` and ``memory``. ``--memory-limit`` runs each engine
in a child process inside a cgroup memory cap (v1 or v2), page cache dropped
first. Verdicts are ratios, never bare times.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

import flashgnn
from flashgnn import _core
from flashgnn._util import proc_status_bytes
from flashgnn.sample.sampler import ENGINES

ALL = [e for e in ENGINES if e != "pread-pool"]  # pread-pool, the fallback, runs with --engine pread-pool
CACHED = "uring+cache"  # uring with the cross-batch DRAM cache (flashgnn.Cache)



def engine_base_bytes(workers: int) -> int:
    """Resident memory of an engine child without a cache — what
    --memory-limit must leave beside the cache when the budget is derived from
    it. Measured peak RSS on data/ooc (fanout 25,10, batch 1024, prefetch 4):
    184 MiB with one producer, 295 MiB with two — about 75 MiB of interpreter,
    numpy and labels plus ~110 MiB per producer (its batch being built: node
    table, gathered rows, per-batch page copies, buffer pool; and batches
    queued for the consumer). Re-measured 2026-11-21: 209 MiB with one
    producer; a cache's static part is now filled up front (slot-sized
    entries), so the allowance keeps ~30 MiB of headroom over that.
    Re-measured 2026-11-27 (`uring`, 20 batches): 178 MiB with one producer,
    261 MiB with two — ~84 MiB per producer; 112 MiB each keeps ~30 MiB of
    headroom per producer (144 MiB each had left two producers under a
    768 MiB cap a 384 MiB cache where 448 MiB fit)."""
    return (96 << 20) + (112 << 20) * max(int(workers), 1)


def default_workers(path, fanouts, batch_size: int, memory_budget, memory_limit: int | None) -> int:
    """Producers per engine when ``--workers`` is not given: every core this
    process may use (``budget.cpu_cores``: affinity and cgroup quota; the
    bench has no trainer to leave a core to), as many as fit — an explicit
    ``--memory-budget`` must hold their buffers and the prefetch window
    (``budget.producers_that_fit``), a ``--memory-limit`` their measured
    resident size (:func:`engine_base_bytes`). Says what it chose."""
    from flashgnn.sample import budget

    cores = budget.cpu_cores()
    n, why = cores, f"the {cores} core(s) this process may use"
    if isinstance(memory_budget, int) and memory_budget > 0:
        n = budget.producers_that_fit(n, memory_budget, budget.batch_bytes(path, fanouts, batch_size), prefetch=4)
        why += f", {n} fit --memory-budget" if n < cores else ""
    if memory_limit:
        while n > 1 and engine_base_bytes(n) > memory_limit:
            n -= 1
        why += f", {n} fit --memory-limit" if n < cores else ""
    print(f"bench: {n} producer(s) per engine ({why})", file=sys.stderr)
    return n


def drop_caches() -> bool:
    try:
        os.sync()
        Path("/proc/sys/vm/drop_caches").write_text("3\n")
        return True
    except OSError:
        return False


def make_cgroup(limit: int) -> tuple[Path, str]:
    """Create a memory cgroup capped at ``limit``; returns (dir, procs file)."""
    name = f"flashgnn-bench-{os.getpid()}"
    v1 = Path("/sys/fs/cgroup/memory")
    if v1.is_dir() and os.access(v1, os.W_OK):
        d = v1 / name
        d.mkdir(exist_ok=True)
        (d / "memory.limit_in_bytes").write_text(str(limit))
        try:
            (d / "memory.memsw.limit_in_bytes").write_text(str(limit))
        except OSError:
            pass  # no swap accounting: the cap is on RAM only
        return d, "cgroup.procs"
    v2 = Path("/sys/fs/cgroup")
    if (v2 / "cgroup.controllers").exists() and "memory" in (v2 / "cgroup.controllers").read_text():
        d = v2 / name
        d.mkdir(exist_ok=True)
        (d / "memory.max").write_text(str(limit))
        return d, "cgroup.procs"
    raise RuntimeError(
        "--memory-limit needs a writable cgroup memory controller (v1 /sys/fs/cgroup/memory or v2 with 'memory' "
        "in cgroup.controllers); run as root or drop --memory-limit"
    )


def cgroup_peak(cg: Path) -> int | None:
    """A cgroup's memory high-water mark (v1 ``memory.max_usage_in_bytes``,
    v2 ``memory.peak``): RSS plus page cache, the cap's view; None when the
    kernel shows neither."""
    for f in ("memory.max_usage_in_bytes", "memory.peak"):
        try:
            return int((cg / f).read_text().split()[0])
        except (OSError, ValueError, IndexError):
            pass
    return None


def run_child(cmd: list[str], memory_limit: int | None) -> tuple[int, str]:
    """Run ``cmd`` in a child process — inside a fresh cgroup capped at
    ``memory_limit`` when one is given — and return (exit code, stdout)."""
    cg = procs = None
    if memory_limit:
        cg, procs = make_cgroup(memory_limit)
    p = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True,
                         preexec_fn=(lambda: (cg / procs).write_text(str(os.getpid()))) if cg else None)
    out, _ = p.communicate()
    if cg is not None:
        try:
            cg.rmdir()
        except OSError:
            pass
    return p.returncode, out


def cpu_per_extent(tel: dict) -> dict:
    """Producer CPU per served extent (a slot, an overflow page or a feature
    row handed to the batch), from an engine's telemetry: served from a read
    (``reads``: misses), from a page already read in the batch
    (``page_hits``) or from the cross-batch cache (``cache_*_hits``)."""
    hits = tel.get("cache_static_hits", 0) + tel.get("cache_dynamic_hits", 0)
    read = tel["reads"] + tel.get("page_hits", 0)
    n = hits + read
    return {"extents": n, "extents_read": read, "extents_hit": hits,
            "cpu_us_per_extent": tel["cpu_seconds"] * 1e6 / n if n else 0.0}


def cpu_split(by: dict) -> dict | None:
    """CPU per cache hit and per miss for ``uring+cache``, measured in the
    same run: a miss costs what an extent costs the plain ``uring`` engine
    (every one of its extents is read), the hits pay the rest:
    ``per_hit = (cpu - misses * uring_per_extent) / hits``. Compared with the
    ``memory`` engine's CPU per extent (everything in DRAM, read by copy)."""
    if CACHED not in by or "uring" not in by or "memory" not in by:
        return None
    c, u, m = by[CACHED], by["uring"], by["memory"]
    if c.get("incomplete") or u.get("incomplete") or m.get("incomplete") or not c.get("extents_hit"):
        return None
    cpu = c["cpu_us_per_extent"] * c["extents"]
    miss = u["cpu_us_per_extent"]
    hit = max(cpu - c["extents_read"] * miss, 0.0) / c["extents_hit"]
    return {"cpu_us_per_hit": hit, "cpu_us_per_miss": miss, "cpu_us_per_memory_extent": m["cpu_us_per_extent"],
            "hit_vs_memory_cpu": hit / m["cpu_us_per_extent"] if m["cpu_us_per_extent"] else None,
            "cached_vs_memory_batches": c["batches_per_s"] / m["batches_per_s"]}


def run_engine(path, engine, fanouts, batch_size, batches, seed, depth, workers=2, max_seconds=120.0,
               cache: dict | None = None) -> dict:
    from flashgnn.store.dataset import Dataset
    from flashgnn.sample.sampler import Cache, Sampler, resolve_hot

    ds = Dataset(path)
    rng = np.random.default_rng(seed)
    pool = ds.split("train") if "train" in ds.split_names else np.arange(ds.num_nodes)
    need = (batches + 9) * batch_size
    order = rng.permutation(pool)
    while len(order) < need:
        order = np.concatenate([order, rng.permutation(pool)])
    t_open = time.perf_counter()
    c = None
    cache_s = 0.0
    if engine == CACHED:
        # The hot set is chosen from seeds outside the timed batches (the
        # presample pass must not preview the very batches it is scored on).
        # "touches" takes the seed pool (a distribution, previews no batch).
        hot = resolve_hot(path, cache["hot"])
        seeds = pool if hot == "touches" else order[-8 * batch_size:]
        c = Cache(path, fanouts, cache["budget"], policy=cache["policy"], hot=hot,
                  hot_fraction=cache["hot_fraction"], presample_seeds=seeds, batch_size=batch_size,
                  depth=depth, row_codec=cache.get("row_codec", "none"))
        cache_s = time.perf_counter() - t_open
    s = Sampler(path, fanouts, engine="uring" if engine == CACHED else engine, depth=depth, labels=True, cache=c)
    open_s = time.perf_counter() - t_open
    # Pipelined like training: `workers` producers run ahead (prefetch 4).
    # The clock starts at the first batch's arrival, so opening (and the
    # memory engine's load) is excluded; batches 1..n are timed.
    # A slow engine (mmap-default thrashing) is cut off after `max_seconds`
    # from the start: its figures then cover the batches it finished, or give
    # an upper bound when it finished fewer than two. (This runs in a child
    # process, which exits without waiting for a producer stuck mid-batch.)
    import threading

    stamps: list[float] = []
    it = s.iter_batches(order[: (batches + 1) * batch_size], batch_size, seed=seed, prefetch=4, drop_last=True,
                        workers=workers)
    t_start = time.perf_counter()
    th = threading.Thread(target=lambda: [stamps.append(time.perf_counter()) for _ in it], daemon=True)
    th.start()
    th.join(max_seconds)
    if th.is_alive():
        # With several batches done, the rate between the first and last
        # arrival (as for complete runs); with fewer, batches over the whole
        # span (first-batch latency included), an upper bound when none.
        n = len(stamps)
        el = time.perf_counter() - t_start
        rate = (n - 1) / (stamps[-1] - stamps[0]) if n >= 4 and stamps[-1] > stamps[0] else (n if n else 1) / el
        return {"engine": engine, "batches": n, "workers": workers, "seconds": el, "open_seconds": open_s,
                "incomplete": True, "batches_per_s": rate, "seeds_per_s": None,
                "nodes_per_s": None, "iops": 0.0, "read_mb_per_s": None, "read_amplification": None,
                "reads_per_node": None, "cpu_us_per_read": 0.0, "depth_hist": [], "size_hist": [], "depth_timeline": [],
                "peak_rss_bytes": None}
    el = stamps[-1] - stamps[0]
    tel = s.last_iter_telemetry
    done_batches = tel.get("batches", len(stamps)) or len(stamps)
    batches = len(stamps) - 1
    # Per-batch means from the producers' totals, scaled to the timed span.
    frac = batches / done_batches
    tel = {k: (v * frac if isinstance(v, (int, float)) and k not in ("read_amplification", "cpu_us_per_read") else v)
           for k, v in tel.items()}
    rss = proc_status_bytes("VmHWM")
    cstats = c.stats() if c is not None else None
    return {
        "engine": engine,
        "batches": batches,
        "workers": workers,
        "seconds": el,
        "open_seconds": open_s,
        "cache_seconds": cache_s,
        "cache": cstats,
        "cache_hit_rate": tel.get("cache_hit_rate", 0.0),
        "cache_static_hits": tel.get("cache_static_hits", 0),
        "cache_dynamic_hits": tel.get("cache_dynamic_hits", 0),
        "reads_saved_per_s": (tel.get("cache_static_hits", 0) + tel.get("cache_dynamic_hits", 0)) / el,
        "batches_per_s": batches / el,
        "seeds_per_s": tel["seeds"] / el,
        "nodes_per_s": tel["nodes"] / el,
        "iops": tel["reads"] / el,
        "read_mb_per_s": tel["bytes_read"] / el / 1e6,
        "read_amplification": tel["read_amplification"],
        "reads_per_node": tel["reads"] / max(tel["nodes"], 1),
        "reads_per_batch": tel["reads"] / max(batches, 1),
        "cpu_us_per_read": tel["cpu_us_per_read"],
        # Producer time blocked on a read with nothing served from memory to do.
        "io_wait_ms_per_batch": tel.get("io_wait_seconds", 0.0) * 1e3 / max(tel["batches"], 1),
        "cpu_ms_per_batch": tel["cpu_seconds"] * 1e3 / max(tel["batches"], 1),
        **cpu_per_extent(tel),
        "depth_hist": tel["depth_hist"],
        "depth_timeline": tel.get("timeline", [])[:4096],
        "size_hist": tel["size_hist"],
        "peak_rss_bytes": rss,
    }


def main_bench(a) -> int:
    from flashgnn.store.dataset import Dataset
    from flashgnn.sample.sampler import probe_random_reads

    path = a.dataset
    _check_outputs(a)
    ds = Dataset(path)
    fanouts = [int(x) for x in a.fanout.split(",")]
    split, cache_budget = _memory_split(a, path, fanouts)
    engines, cache = _engines_and_cache(a, cache_budget)
    graph = _announce(a, path, ds, fanouts)
    reuse = _reuse(a, path, fanouts)
    if not engines:
        if a.json:
            print(json.dumps({"dataset": path, "fanout": fanouts, "batch_size": a.batch_size, "reuse": reuse}, indent=2))
        return 0
    drop_caches()  # also syncs: pending writeback would steal the probe's IOPS
    dev_qd = probe_random_reads(graph, 4096, a.depth, a.probe_seconds)
    dev_qd1 = probe_random_reads(graph, 4096, 1, a.probe_seconds)
    print(f"bench: device probe (4 KiB O_DIRECT random reads on {_core.GRAPH_FILE}): {dev_qd:,.0f} IOPS at QD "
          f"{a.depth}, {dev_qd1:,.0f} at QD 1 (ratio {dev_qd / dev_qd1:.2f})", file=sys.stderr)
    results, by = _run_engines(a, path, engines, cache, dev_qd, dev_qd1)
    trace = _capture_trace(a, path, fanouts, dev_qd, dev_qd1)
    figures = _plots(a, results, trace)
    split_cpu = cpu_split(by)
    report = {"dataset": path, "fanout": fanouts, "batch_size": a.batch_size, "batches": a.batches,
              "cache_cpu": split_cpu,
              "device_iops": dev_qd, "device_iops_qd1": dev_qd1, "device_depth_ratio": dev_qd / dev_qd1,
              "memory_limit": a.memory_limit, "memory_budget_split": split, "cache": cache, "reuse": reuse, "results": results,
              "trace": trace, "plots": figures}
    if a.json:
        print(json.dumps(report, indent=2))
        return 0
    _print_results(a, results, by, split_cpu, dev_qd, dev_qd1)
    return 0


def _check_outputs(a) -> None:
    """Refuse unusable --plots and --trace outputs before any timed run."""
    if getattr(a, "plots", None):
        from flashgnn.ssd import plots

        try:
            plots.require()  # before any timed run
        except ImportError as e:
            raise flashgnn.InputError(str(e)) from None
    if getattr(a, "trace", None):
        from flashgnn.ssd.simulate import check_trace_output

        # Before any timed run: --trace replaces only an existing trace file, never a user's file.
        check_trace_output(a.trace, force=True)


def _memory_split(a, path, fanouts):
    """Default the producers and split --memory-budget between them and the
    cache. Returns (the budget split or None, the cache budget or None)."""
    cache_budget = a.cache_budget
    split = None
    mb = getattr(a, "memory_budget", "auto")
    if getattr(a, "workers", None) is None:
        a.workers = default_workers(path, fanouts, a.batch_size, mb, a.memory_limit)
    elif a.workers < 1:
        raise flashgnn.InputError(f"bench: --workers {a.workers}: must be >= 1 (leave it out for the default)")
    if cache_budget is None and mb:  # an explicit --cache-budget is the user's sizing
        from flashgnn.sample import budget

        if mb == "auto":
            # What the engine child may use: the --memory-limit cap it runs under, else available memory; less
            # what engine_base_bytes measured beyond the split's engine + window (interpreter, numpy, labels).
            per = budget.batch_bytes(path, fanouts, a.batch_size)
            base = a.workers * (budget.ENGINE_FIXED_PER_PRODUCER + per) + 4 * per
            split = budget.auto(path, fanouts, a.batch_size, workers=a.workers, prefetch=4,
                                hot_fraction=a.hot_fraction, lookahead=0, training=False,
                                available=a.memory_limit or None, per_batch=per,
                                reserve=max(engine_base_bytes(a.workers) - base, 96 << 20))
        else:
            split = budget.split(mb, path, fanouts, a.batch_size, workers=a.workers, prefetch=4,
                                 hot_fraction=a.hot_fraction)
        cache_budget = split["cache"] if split["budget"] else None
        print(f"bench: {budget.describe(split)}", file=sys.stderr)
    return split, cache_budget


def _engines_and_cache(a, cache_budget):
    """The engines to run and the uring+cache engine's cache settings."""
    from flashgnn._util import human_bytes

    engines = ALL if a.engine == "all" else [e for e in a.engine.split(",") if e != "none"]
    if a.engine == "all" and cache_budget is not None:
        engines = ["uring", CACHED] + ALL[1:]
    cache = None
    if CACHED in engines:
        if cache_budget is None:
            raise flashgnn.InputError("engine uring+cache needs a cache: --memory-budget auto (the default) found no "
                                      "room for one, or --memory-budget 0 was given; pass --cache-budget or a larger "
                                      "--memory-budget")
        cache = {"budget": cache_budget, "policy": a.cache_policy, "hot": a.cache_hot, "hot_fraction": a.hot_fraction}
        hot = int(cache_budget * a.hot_fraction)
        print(f"bench: uring+cache budget {human_bytes(cache_budget)}"
              + (f" of the {human_bytes(a.memory_limit)} limit ({human_bytes(engine_base_bytes(a.workers))} left to "
                 f"the engine's {a.workers} producer(s))"
                 if a.memory_limit else "")
              + f": static hot set ({a.cache_hot}) {human_bytes(hot)}, dynamic ({a.cache_policy}) "
                f"{human_bytes(cache_budget - hot)}", file=sys.stderr)
    return engines, cache


def _announce(a, path, ds, fanouts) -> Path:
    """Say what is benchmarked; returns the file the device probe reads."""
    from flashgnn._util import human_bytes

    files = sum(f["bytes"] for f in ds.manifest["files"].values())
    graph = Path(path) / _core.GRAPH_FILE
    stripes = Path(path) / _core.STRIPES_FILE
    if stripes.exists():  # probe the first device of a striped dataset
        graph = Path(json.loads(stripes.read_text())["files"][_core.GRAPH_FILE]["parts"][0])
    print(f"bench: {path}: {ds.num_nodes:,} nodes, {ds.num_edges:,} edges, {human_bytes(files)} on disk; "
          f"fanout {fanouts}, batch {a.batch_size}, {a.batches} batches, depth {a.depth}", file=sys.stderr)
    return graph


def _reuse(a, path, fanouts):
    """The --reuse report (printed unless --json), or None."""
    from flashgnn._util import human_bytes

    reuse = None
    if getattr(a, "reuse", False):
        from flashgnn.ssd.reuse import print_report, report

        reuse = report(path, fanouts, a.batch_size, a.batches, a.seed)
        if not a.json:
            print_report(reuse, human_bytes)
    return reuse


def _run_engines(a, path, engines, cache, dev_qd, dev_qd1):
    """Each engine in its own child process, in order; returns the results
    and the same keyed by engine, with speedups against mmap and memory."""
    from flashgnn._util import human_bytes

    results = []
    for e in engines:
        dropped = drop_caches()
        # Every engine runs in a fresh child process (clean page cache state,
        # a hard stop for engines that stall). With --memory-limit the child
        # sits in a memory cgroup — except `memory`, the DRAM oracle.
        capped = bool(a.memory_limit) and e != "memory"
        cmd = [sys.executable, "-m", "flashgnn.ssd.bench", "--child", path, e, a.fanout, str(a.batch_size),
               str(a.batches), str(a.seed), str(a.depth), str(a.workers), str(a.max_seconds), json.dumps(cache)]
        rc, out = run_child(cmd, a.memory_limit if capped else None)
        if rc != 0:
            print(f"bench: engine {e} failed (exit {rc})" + (f" under --memory-limit {human_bytes(a.memory_limit)}" if capped else ""),
                  file=sys.stderr)
            continue
        r = json.loads(out.strip().splitlines()[-1])
        r["memory_capped"] = capped
        r["cache_dropped"] = dropped
        r["device_iops"] = dev_qd
        r["device_iops_qd1"] = dev_qd1
        r["io_efficiency"] = r["iops"] / dev_qd if dev_qd else 0.0
        results.append(r)
        if r.get("incomplete"):
            print(f"bench: {e:<13} cut off after {r['seconds']:.0f} s with {r['batches']} batches done: "
                  f"{'<' if r['batches'] == 0 else '~'}{r['batches_per_s']:.3f} batches/s", file=sys.stderr)
        else:
            extra = (f"  cache hits {r['cache_hit_rate']:.0%} (hot set {r['cache_seconds']:.1f} s)"
                     if r.get("cache") else "")
            print(f"bench: {e:<13} {r['batches_per_s']:8.2f} batches/s  {r['iops']:9,.0f} IOPS  io_eff {r['io_efficiency']:.2f}  "
                  f"amp {r['read_amplification']:.1f}{extra}", file=sys.stderr)
    by = {r["engine"]: r for r in results}
    for r in results:
        r["speedup_vs_mmap"] = r["batches_per_s"] / by["mmap"]["batches_per_s"] if "mmap" in by else None
        r["speedup_vs_memory"] = r["batches_per_s"] / by["memory"]["batches_per_s"] if "memory" in by else None
    return results, by


def _capture_trace(a, path, fanouts, dev_qd, dev_qd1):
    """The --trace capture pass, or None."""
    from flashgnn._util import human_bytes

    trace = None
    if getattr(a, "trace", None):
        # A separate capture pass with the bench's settings on the uring
        # engine (the timed runs above are not slowed by capture).
        from flashgnn.ssd.simulate import record_trace

        trace = record_trace(path, a.trace, fanouts, a.batch_size, a.batches, engine="uring", depth=a.depth,
                             seed=a.seed, progress=False, force=True,
                             extra={"device_iops": dev_qd, "device_iops_qd1": dev_qd1, "probe_depth": a.depth})
        print(f"bench: trace {a.trace}: {trace['records']} reads over {trace['batches']} batches "
              f"({human_bytes(trace['trace_bytes'])})", file=sys.stderr)
    return trace


def _plots(a, results, trace):
    """The --plots figures, or None."""
    figures = None
    if getattr(a, "plots", None):
        from flashgnn.ssd import plots
        from flashgnn.ssd.simulate import measured_in_flight

        figures = plots.bench_plots(results, a.plots)
        if trace is not None:  # the capture pass's own submit/complete times, exact
            figures += plots.trace_plots(measured_in_flight(a.trace), a.plots)
        print(f"bench: plots in {a.plots}: {', '.join(Path(f).name for f in figures)}", file=sys.stderr)
    return figures


def _print_results(a, results, by, split_cpu, dev_qd, dev_qd1) -> None:
    """The text report: the table, cache and I/O shape lines, summaries."""
    from flashgnn._util import human_bytes

    hdr = f"{'engine':<13}{'batch/s':>9}{'seeds/s':>10}{'nodes/s':>11}{'IOPS':>9}{'MB/s':>8}{'amp':>6}{'io_eff':>8}{'vs mmap':>9}{'vs mem':>8}"
    print(hdr)
    for r in results:
        sm = f"{r['speedup_vs_mmap']:.2f}x" if r["speedup_vs_mmap"] else "-"
        sM = f"{r['speedup_vs_memory']:.2f}x" if r["speedup_vs_memory"] else "-"
        if r.get("incomplete"):
            print(f"{r['engine']:<13}{('<' if r['batches'] == 0 else '~') + format(r['batches_per_s'], '.3f'):>9}{'(cut off after ' + format(r['seconds'], '.0f') + ' s)':>36}"
                  f"{'':>22}{sm:>9}{sM:>8}")
            continue
        print(f"{r['engine']:<13}{r['batches_per_s']:9.2f}{r['seeds_per_s']:10,.0f}{r['nodes_per_s']:11,.0f}{r['iops']:9,.0f}"
              f"{r['read_mb_per_s']:8.1f}{r['read_amplification']:6.1f}{r['io_efficiency']:8.2f}{sm:>9}{sM:>8}")
    for r in results:
        if r.get("cache") and not r.get("incomplete"):
            cs = r["cache"]
            print(f"cache ({r['engine']}): {cs['policy']}, hot set by {cs['hot']} {human_bytes(cs['static_bytes'])} "
                  f"({cs['static_entries']:,} extents, chosen+read in {cs['hot_seconds']:.1f} s), dynamic "
                  f"{human_bytes(cs['dynamic_bytes'])}; hit rate {r['cache_hit_rate']:.1%} "
                  f"(static {r['cache_static_hits']:,.0f}, dynamic {r['cache_dynamic_hits']:,.0f} over the timed "
                  f"batches): {r['reads_saved_per_s']:,.0f} reads saved/s")
    print("reads in flight at submission (power-of-two buckets) and request sizes:")
    for r in [r for r in results if not r.get("incomplete")]:
        dh = " ".join(f"{1 << i}:{c}" for i, c in enumerate(r["depth_hist"]) if c)
        sh = " ".join(f"{512 << i}B:{c}" for i, c in enumerate(r["size_hist"]) if c)
        print(f"  {r['engine']:<13} depth {dh}\n  {'':<13} sizes {sh}; CPU {r['cpu_us_per_read']:.1f} us/read, "
              f"{r['cpu_us_per_extent']:.2f} us per served extent ({r['extents_hit']:,.0f} cache hits, "
              f"{r['extents_read']:,.0f} from reads); per batch and producer {r['cpu_ms_per_batch']:.1f} ms CPU, "
              f"{r['io_wait_ms_per_batch']:.1f} ms blocked on reads")
    if split_cpu:
        sc = split_cpu
        print(f"summary: uring+cache CPU {sc['cpu_us_per_hit']:.2f} us per cache hit, {sc['cpu_us_per_miss']:.2f} us per miss "
              f"(uring's per extent); memory engine {sc['cpu_us_per_memory_extent']:.2f} us per extent: "
              f"hit/memory CPU {sc['hit_vs_memory_cpu']:.2f} (target <= 1.5), uring+cache/memory batches/s "
              f"{sc['cached_vs_memory_batches']:.2f} (target >= 0.9)")
    if "uring" in by and "mmap" in by:
        u = by["uring"]
        print(f"summary: uring {u['batches_per_s']:.2f} batches/s = {u['speedup_vs_mmap']:.2f}x tuned mmap "
              f"(device QD{a.depth}/QD1 ratio {dev_qd / dev_qd1:.2f}), io_efficiency {u['io_efficiency']:.2f}, "
              f"{u['reads_per_node']:.2f} reads per sampled node")
    if CACHED in by and "mmap" in by:
        u = by[CACHED]
        print(f"summary: uring+cache {u['batches_per_s']:.2f} batches/s = {u['speedup_vs_mmap']:.2f}x tuned mmap "
              f"= {u['speedup_vs_mmap'] / (dev_qd / dev_qd1):.2f} of the device ratio"
              + (f", {u['speedup_vs_memory']:.2f}x memory" if u["speedup_vs_memory"] else "")
              + f", cache hit rate {u['cache_hit_rate']:.1%}")


def _child(argv) -> int:
    path, engine, fanout, bs, nb, seed, depth, workers, max_s, cache = argv
    r = run_engine(path, engine, [int(x) for x in fanout.split(",")], int(bs), int(nb), int(seed), int(depth), int(workers),
                   float(max_s), json.loads(cache))
    print(json.dumps(r), flush=True)
    os._exit(0)  # do not wait for producers of an engine cut off mid-batch


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.exit(_child(sys.argv[2:]))
