"""`make bench-scale`: generate, build, verify and train a graph at scale.

A benchmark, not a test. In one run, on one filesystem:

1. checks free disk against what the run will need (raw input + sort buckets +
   dataset + probe, plus a reserve) and refuses, with the numbers, if short;
2. probes the disk's sequential bandwidth with O_DIRECT 8 MiB writes and
   reads of ``--probe`` bytes (``dd oflag=direct`` / ``iflag=direct``);
3. generates a power-law (R-MAT) graph of ``--edges`` directed edges,
   streaming (``flashgnn generate`` holds bounded memory), with features
   sized so the dataset exceeds RAM when the disk allows, and at least 4x the
   training memory cap otherwise (``--dim auto``);
4. builds it (no ``--symmetrize``/``--dedup``: every generated edge is a
   stored directed edge) under ``--build-budget`` and verifies it;
5. trains GraphSAGE for ``--batches`` batches in a child process inside a
   cgroup capped at ``--memory-limit``, with ``flashgnn train``'s default
   memory budget (``--memory-budget auto``), page cache dropped first;
6. prints bytes per node and per edge on disk, build time and input MB/s as
   a ratio of the disk's sequential bandwidth, training batches/s, and an
   extrapolation to IGB-full and to 100 B edges with its arithmetic.

``--task link``: the build also draws a link split (``--link-split VAL,TEST``,
default ``LINK_SPLIT``), and step 5 trains ``flashgnn train --task link``
(GraphSAGE encoder, dot decoder, one random negative per edge) for
``--batches`` batches of ``--batch-size`` training edges under the same cap
and budget, evaluating ``--eval-batches`` batches of each held-out split; then
node classification on the same dataset, the same way, as the in-run
comparison. It reports the link split's share of the build (the build's
total less its edge pass and layout: the split runs first and overlaps
nothing), the split's files, batches/s and edges/s, data wait, peak RSS and
the cgroup peak, and the budget line of both tasks.

    python -m benchmarks.scale --data /mnt/ssd/scale --edges 1e9 [--json]
    python -m benchmarks.scale --data /tmp/scale --edges 1e8   # reduced
    python -m benchmarks.scale --data /tmp/scale --edges 1e9 --task link
"""

from __future__ import annotations

import json
import math
import mmap
import os
import resource
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from flashgnn._util import ArgumentParser, human_bytes, parse_size

# IGB-full (IGB260M, the IGB paper's largest homogeneous graph): nodes,
# edges, feature width (float32).
IGB_FULL = {"nodes": 269_346_174, "edges": 3_995_777_033, "dim": 1024}
# Planning constants (checked against the measured dataset in the report):
# stored neighbor ids are 4 B; a slot header + page slack is ~64 B per node.
ID_BYTES = 4
NODES_MAX = (1 << 32) - 1
NODE_OVERHEAD_BYTES = 64
# Raw npy input: edge_index uint32 [E, 2] = 8 B per edge while node ids fit
# 32 bits (`generate --edge-dtype uint32`), int64 = 16 B beyond; labels int64.
RAW_EDGE_BYTES = 16
RAW_EDGE_BYTES_U32 = 8
RAW_NODE_BYTES = 8 + 8  # labels + split index files (upper bound)
# External-sort buckets: at most 8 B per key (the bucket files keep only the
# bits a bucket's keys differ in: 5-7 B for graph keys, an upper bound here
# for the disk check), on disk from the edge pass until the layout pass has
# loaded them (each bucket file is removed once loaded).
SORT_KEY_BYTES = 8
# Smallest cap the baseline training runs under: `flashgnn train` (torch,
# GraphSAGE, sampler) was OOM-killed under 640 MiB on data/ooc and ran under
# 1 GiB (2026-11-24).
BASELINE_CAP_MIN = 1 << 30
# Feature rows of at most a quarter of a (4 KiB) page are stored inline and
# staged once during the build (features.stage, deleted after the layout);
# wider rows go straight to features.fg.
PAGE_BYTES = 4096
# --task link's disk, per input edge (upper bounds: distinct pairs <= edges), from
# crates/flashgnn-build/src/builder/linksplit.rs: the pair sort's runs (8 B keys), the sorted pair file
# (16 B: key, copies), the message-passing edges staged for the build (8 B: uint32 pairs) and the training
# positives kept in the dataset (link_train_{src,dst}.npy: 2 x int64; without --symmetrize every directed
# edge of a kept pair is a positive). The pair file, the staged edges and the positives coexist while the
# pairs are classified: the split's peak, over the raw input.
LINK_RUN_BYTES = 8
LINK_PAIR_BYTES = 16
LINK_STAGED_BYTES = 8
LINK_TRAIN_BYTES = 16
# --link-split VAL,TEST of --task link: 0.1 % + 0.1 % of the pairs. At 1e9 edges that is ~1 M validation and
# ~1 M test positives, each with one fixed negative: the negative pass is one chunk of 2 M slots x 40 B =
# 80 MB (one merge-join over the pair file per round instead of several), the held-out arrays are 24 MB a
# split, and a timed run evaluates only --eval-batches batches of them anyway. Larger fractions only cost
# build time here: 1 M positives already put the metric's standard error near 0.0005 (ROC-AUC).
LINK_SPLIT = "0.001,0.001"
DIMS = [8, 16, 24, 32, 48, 64, 96, 128, 192, 256, 384, 512, 768, 1024]


def mem_total() -> int:
    for line in Path("/proc/meminfo").read_text().splitlines():
        if line.startswith("MemTotal:"):
            return int(line.split()[1]) * 1024
    return 0


def plan_sizes(edges: int, degree: int) -> tuple[int, int, int]:
    """(scale, edge factor, edges) with 2^scale * edge factor >= edges."""
    scale = max(10, round(math.log2(max(edges / degree, 1))))
    ef = max(1, -(-edges // (1 << scale)))
    return scale, ef, ef << scale


def raw_edge_bytes(n: int) -> int:
    """Bytes per edge of the generated edge_index.npy: uint32 ids when they fit."""
    return RAW_EDGE_BYTES_U32 if n - 1 <= NODES_MAX else RAW_EDGE_BYTES


def estimate(n: int, e: int, dim: int, link: bool = False) -> dict:
    """Planned bytes of each artefact for N nodes, E edges, dim float32.

    Peak during the build: the raw input, the feature stage (inline rows
    only) and the larger of the sort buckets and the dataset (buckets are
    removed as the layout consumes them while the dataset grows, so the two
    peak at opposite ends of the layout pass). With ``link`` (a link split
    drawn first): the dataset holds the training positives too, the staged
    message-passing edges stay until the build is published, and the
    split's own peak is the sorted pairs + staged edges + positives (or the
    pair sort's runs + the sorted pairs while they merge)."""
    feat = n * dim * 4
    raw = raw_edge_bytes(n) * e + feat + RAW_NODE_BYTES * n
    dataset = ID_BYTES * e + n * NODE_OVERHEAD_BYTES + feat + (LINK_TRAIN_BYTES * e if link else 0)
    sort = SORT_KEY_BYTES * e
    stage = feat if 4 * dim * 4 <= PAGE_BYTES else 0
    peak = raw + stage + max(sort, dataset)
    out = {"raw": raw, "dataset": dataset, "sort_runs": sort, "stage": stage}
    if link:
        split_peak = raw + max(LINK_RUN_BYTES + LINK_PAIR_BYTES,
                               LINK_PAIR_BYTES + LINK_STAGED_BYTES + LINK_TRAIN_BYTES) * e
        peak = max(split_peak, peak + LINK_STAGED_BYTES * e)
        out["link_split_peak"] = split_peak
    out["peak"] = peak
    return out


def choose_dim(n: int, e: int, free: int, reserve: int, probe: int, ram: int, cap: int, dim: str,
               link: bool = False) -> tuple[int, str]:
    """The feature width, and why; raises SystemExit with the numbers when
    nothing fits."""
    room = free - reserve - probe
    if dim != "auto":
        d = int(dim)
        est = estimate(n, e, d, link)
        need = est["peak"]
        if need > room:
            split = (f"; the link split's own peak {human_bytes(est['link_split_peak'])}, and "
                     f"{human_bytes(LINK_STAGED_BYTES * e)} of staged edges during the build" if link else "")
            raise SystemExit(
                f"bench-scale: not enough disk: {n:,} nodes, {e:,} edges, dim {d} need {human_bytes(need)} at peak "
                f"(raw {human_bytes(est['raw'])} + feature stage {human_bytes(est['stage'])} "
                f"+ max(sort buckets {human_bytes(est['sort_runs'])}, "
                f"dataset {human_bytes(est['dataset'])}){split}) but {human_bytes(free)} are free "
                f"(keeping {human_bytes(reserve)} reserve + {human_bytes(probe)} probe); use a smaller --edges or --dim"
            )
        return d, "--dim"
    fitting = [d for d in DIMS if estimate(n, e, d, link)["peak"] <= room]
    if not fitting:
        need = estimate(n, e, DIMS[0], link)["peak"]
        raise SystemExit(
            f"bench-scale: not enough disk: {n:,} nodes and {e:,} edges need {human_bytes(need)} at peak even with "
            f"dim {DIMS[0]}; {human_bytes(free)} free, {human_bytes(reserve)} reserve + {human_bytes(probe)} probe "
            f"kept; use a smaller --edges"
        )
    over_ram = [d for d in fitting if estimate(n, e, d, link)["dataset"] > ram]
    if over_ram:
        return over_ram[0], f"smallest width whose dataset exceeds RAM ({human_bytes(ram)})"
    over_cap = [d for d in fitting if estimate(n, e, d, link)["dataset"] >= 4 * cap]
    if over_cap:
        return over_cap[0], (f"dataset cannot exceed RAM ({human_bytes(ram)}) on {human_bytes(free)} free disk: "
                             f"smallest width with dataset >= 4x the {human_bytes(cap)} cap")
    d = fitting[-1]
    raise SystemExit(
        f"bench-scale: the largest dataset that fits ({human_bytes(estimate(n, e, d, link)['dataset'])}, dim {d}) is under "
        f"4x the training cap {human_bytes(cap)} = {human_bytes(4 * cap)}: lower --memory-limit or raise --edges"
    )


def disk_probe(path: Path, nbytes: int) -> dict:
    """Sequential O_DIRECT write then read of ``nbytes`` in 8 MiB blocks.

    Falls back to buffered writes + fsync and a read after
    POSIX_FADV_DONTNEED where the filesystem refuses O_DIRECT (tmpfs)."""
    block = 8 << 20
    buf = mmap.mmap(-1, block)  # page-aligned, as O_DIRECT wants
    buf.write(os.urandom(block))
    nblocks = max(1, nbytes // block)
    direct = hasattr(os, "O_DIRECT")
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | (os.O_DIRECT if direct else 0), 0o644)
    except OSError:
        direct = False
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    try:
        t = time.perf_counter()
        for _ in range(nblocks):
            os.write(fd, buf)
        os.fsync(fd)
        w = time.perf_counter() - t
    finally:
        os.close(fd)
    fd = os.open(path, os.O_RDONLY | (os.O_DIRECT if direct else 0))
    try:
        if not direct:
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
        t = time.perf_counter()
        while os.readv(fd, [buf]) > 0:
            pass
        r = time.perf_counter() - t
    finally:
        os.close(fd)
        path.unlink(missing_ok=True)
    total = nblocks * block
    return {"bytes": total, "o_direct": direct, "write_MBps": total / w / 1e6, "read_MBps": total / r / 1e6}


def dir_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.iterdir() if f.is_file())


def run_child(cmd: list[str]) -> tuple[int, float, "resource.struct_rusage"]:
    """Run ``cmd``; its exit code, wall seconds and its own rusage (``wait4``: ``RUSAGE_CHILDREN`` would
    give the largest peak RSS of every child waited for so far, not this one's)."""
    t = time.perf_counter()
    p = subprocess.Popen(cmd)
    _, status, usage = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    return p.returncode, time.perf_counter() - t, usage


def run(cmd: list[str], what: str) -> tuple[float, int]:
    """Run ``cmd`` or exit naming it; its wall seconds and peak RSS in bytes."""
    rc, seconds, usage = run_child(cmd)
    if rc != 0:
        raise SystemExit(f"bench-scale: {what} failed (exit {rc}): {' '.join(cmd)}")
    return seconds, usage.ru_maxrss * 1024


def train_cmd(dataset: Path, batches: int, batch_size: int, fanout: str, metrics: Path, task: str = "node",
              eval_batches: int | None = None) -> list[str]:
    """The ``flashgnn train`` command of a timed run: GraphSAGE, one epoch cut at ``batches``; ``--task
    link`` with a dot decoder and ``--eval-batches`` (each held-out split evaluated on that many batches of
    positives: all of them at 1e9 edges would be ~2 M pairs a split, minutes, for a throughput figure)."""
    cmd = [sys.executable, "-m", "flashgnn.cli", "train", str(dataset), "--model", "sage", "--epochs", "1",
           "--max-batches", str(batches), "--batch-size", str(batch_size), "--fanout", fanout,
           "--no-progress", "--metrics-json", str(metrics)]
    if task == "link":
        cmd += ["--task", "link", "--decoder", "dot"]
    if eval_batches is not None:
        cmd += ["--eval-batches", str(eval_batches)]
    return cmd


def train_capped(dataset: Path, batches: int, cap: int, batch_size: int, fanout: str, task: str = "node",
                 eval_batches: int | None = None) -> dict:
    from flashgnn.ssd.bench import cgroup_peak, drop_caches, make_cgroup

    with tempfile.TemporaryDirectory() as tmp:
        metrics = Path(tmp) / "m.json"
        cmd = train_cmd(dataset, batches, batch_size, fanout, metrics, task, eval_batches)
        drop_caches()
        cg, procs = make_cgroup(cap)
        peak = None
        try:
            p = subprocess.run(cmd, capture_output=True, text=True,
                               preexec_fn=lambda: (cg / procs).write_text(str(os.getpid())))
        finally:
            peak = cgroup_peak(cg)  # what the run came closest to the cap, page cache included
            try:
                cg.rmdir()
            except OSError:
                pass
        budget = next((ln.strip() for ln in p.stdout.splitlines() if "memory budget" in ln), "")
        if p.returncode != 0 or not metrics.exists():
            oom = " (killed: the cgroup's OOM killer)" if p.returncode in (-9, 137) else ""
            raise SystemExit(f"bench-scale: training failed with exit {p.returncode}{oom}: {p.stderr[-800:]}")
        m = json.loads(metrics.read_text())
    ep = m["epochs"][0]
    summary = m.get("summary", {})
    out = {"task": task, "batches": ep["batches"], "train_seconds": ep["train_seconds"],
           "batches_per_s": ep["batches"] / max(ep["train_seconds"], 1e-9),
           # seeds: training nodes (node), training edges (link)
           "seeds_per_s": ep.get("seeds_per_s"), "eval_seconds": ep["seconds"] - ep["train_seconds"],
           "data_wait": ep.get("data_wait"), "budget_line": budget, "cgroup_peak_bytes": peak,
           "peak_rss_bytes": summary.get("peak_rss_bytes"), "eval_batches": eval_batches, "command": cmd}
    if task == "link":
        out.update(metric=summary.get("metric"), val_metric=ep.get("val_metric"), test_metric=ep.get("test_metric"),
                   train_edges=summary.get("train_edges"))
    return out


def train_line(tr: dict, cap: int) -> str:
    """One report line of a timed training run."""
    what = "edges" if tr["task"] == "link" else "seed nodes"
    evals = (f"; {tr['metric']} on {tr['eval_batches']} eval batches: val {tr['val_metric']:.4f}, test "
             f"{tr['test_metric']:.4f} ({tr['eval_seconds']:.1f} s)" if tr["task"] == "link" and tr.get("metric")
             and tr.get("val_metric") is not None and tr.get("test_metric") is not None else "")
    return (f"{tr['task']}: {tr['batches']} batches in {tr['train_seconds']:.1f} s = {tr['batches_per_s']:.2f} "
            f"batches/s, {tr['seeds_per_s'] or 0:,.0f} {what}/s under {human_bytes(cap)} ({tr['budget_line']}; "
            f"data wait {100 * (tr['data_wait'] or 0):.0f} %; peak RSS {human_bytes(tr['peak_rss_bytes'] or 0)}, cgroup peak "
            f"{human_bytes(tr['cgroup_peak_bytes']) if tr.get('cgroup_peak_bytes') else 'unknown'}){evals}")


def extrapolate(name: str, n: int, e: int, dim: int, per_node_base: float, per_edge: float, s_per_edge: float,
                disk: dict, batches_per_s: float, train_frac: float, batch_size: int,
                train_per_edge: float | None = None) -> dict:
    """Linear model from this run: disk = N x (base + 4 dim) + E x per_edge;
    build = E x this run's build seconds per edge (its input is nearly all
    edges: sort, layout, checks) + the feature rows read once and written
    once at the probe's sequential bandwidths (a separate features.fg is
    copied, not sorted: `make bench-build`'s igb shape measures that copy
    near this floor, docs/benchmarks.md), and the disk-bound floor of the
    whole build (raw read + dataset write); epoch = train seeds / batch
    size / measured batches/s (same fanout: per-batch work does not grow
    with the graph; ``train_per_edge`` given, link prediction: training
    edges = that fraction of E). Beyond 2^32 - 1 nodes the 4-byte ids of today's
    format no longer suffice: such a graph is costed at 8 B per stored id
    and flagged."""
    ids_fit = n <= NODES_MAX
    if not ids_fit:
        per_edge = per_edge * 2
    disk_bytes = n * (per_node_base + 4 * dim) + e * per_edge
    raw = RAW_EDGE_BYTES * e + n * (4 * dim + RAW_NODE_BYTES)
    rd, wr = disk["read_MBps"] * 1e6, disk["write_MBps"] * 1e6
    feature_bytes = n * 4 * dim
    edge_s, feature_s = e * s_per_edge, feature_bytes / rd + feature_bytes / wr
    build_s = edge_s + feature_s
    floor_s = raw / rd + disk_bytes / wr
    seeds = train_per_edge * e if train_per_edge is not None else train_frac * n
    batches = seeds / batch_size
    epoch_s = batches / batches_per_s
    return {
        "name": name, "nodes": n, "edges": e, "dim": dim, "disk_bytes": disk_bytes, "raw_input_bytes": raw,
        "build_seconds": build_s, "build_disk_floor_seconds": floor_s, "epoch_batches": batches,
        "epoch_seconds": epoch_s, "ids_fit_u32": ids_fit,
        "arithmetic": (
            ("" if ids_fit else f"{n:.3g} nodes > 2^32 - 1: 8-byte ids needed (not in format v2), costed at 8 B/edge; ") +
            f"disk = {n:.3g} x ({per_node_base:.1f} + 4 x {dim}) + {e:.3g} x {per_edge:.2f} = {human_bytes(disk_bytes)}; "
            f"build = {e:.3g} edges x {s_per_edge * 1e9:.0f} ns + features {human_bytes(feature_bytes)} / "
            f"{disk['read_MBps']:.0f} + / {disk['write_MBps']:.0f} MB/s = {edge_s / 3600:.2f} + "
            f"{feature_s / 3600:.2f} = {build_s / 3600:.2f} h "
            f"(disk floor {raw / 1e6:.3g} MB / {disk['read_MBps']:.0f} + {disk_bytes / 1e6:.3g} MB / "
            f"{disk['write_MBps']:.0f} MB/s = {floor_s / 3600:.2f} h); " +
            (f"epoch = {train_per_edge:.4f} x {e:.3g} edges" if train_per_edge is not None else
             f"epoch = {train_frac:.2f} x {n:.3g}") +
            f" / {batch_size} = {batches:.3g} batches / {batches_per_s:.2f} per s = {epoch_s / 3600:.2f} h"
        ),
    }


def main(argv: list[str] | None = None) -> int:
    ap = ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="data/scale", help="work directory (raw input, dataset, probe file)")
    ap.add_argument("--edges", type=float, default=1e9, help="stored directed edges (default 1e9)")
    ap.add_argument("--degree", type=int, default=16, help="average degree: edges per node (default 16)")
    ap.add_argument("--dim", default="auto", help="feature width, or auto (see the module docs)")
    ap.add_argument("--memory-limit", type=parse_size, default=parse_size("4GiB"), help="training cgroup cap")
    ap.add_argument("--build-budget", type=parse_size, default=parse_size("2GiB"), help="build --memory-budget")
    ap.add_argument("--batches", type=int, default=20, help="training batches (default 20)")
    ap.add_argument("--batch-size", type=int, default=1024)
    ap.add_argument("--fanout", default="25,10")
    ap.add_argument("--task", choices=("node", "link"), default="node",
                    help="node: GraphSAGE node classification; link: a link split in the build, link prediction "
                         "trained (then node classification on the same dataset, for comparison)")
    ap.add_argument("--link-split", default=LINK_SPLIT,
                    help=f"--task link: the build's --link-split VAL,TEST (default {LINK_SPLIT}, see LINK_SPLIT)")
    ap.add_argument("--link-batch-size", type=int, default=None,
                    help="--task link: training edges per batch (default --batch-size / 4: with one negative each, "
                         "at most 4 endpoints per edge, so as many seed nodes as a node batch)")
    ap.add_argument("--eval-batches", type=int, default=8,
                    help="--task link: batches of each held-out split evaluated (default 8)")
    ap.add_argument("--probe", type=parse_size, default=parse_size("1GiB"), help="bytes of the disk probe")
    ap.add_argument("--reserve", type=parse_size, default=parse_size("4GiB"), help="free disk to leave untouched")
    ap.add_argument("--plan", action="store_true", help="print the plan and the disk check, then stop")
    ap.add_argument("--keep", action="store_true", help="keep the raw input and the dataset")
    ap.add_argument("--baseline", default="data/ooc",
                    help="dataset trained the same way under the same dataset/cap ratio, for the batches/s "
                         "comparison (floor: BASELINE_CAP_MIN); skipped when absent")
    ap.add_argument("--json", nargs="?", const="-", help="print (or write to FILE) the results as JSON")
    a = ap.parse_args(argv)
    data = Path(a.data)
    data.mkdir(parents=True, exist_ok=True)
    cli = [sys.executable, "-m", "flashgnn.cli"]
    log = (lambda *x: print(*x, file=sys.stderr, flush=True)) if a.json == "-" else (lambda *x: print(*x, flush=True))

    # 1. Plan and disk check.
    scale, ef, e = plan_sizes(int(a.edges), a.degree)
    n = 1 << scale
    free = shutil.disk_usage(data).free
    ram = mem_total()
    link = a.task == "link"
    # A link batch of B edges seeds up to 2B endpoints of positives and 2B of their negatives (one each):
    # B = batch size / 4 samples as many seed nodes as a node batch, so the two tasks' batches/s compare.
    link_batch = a.link_batch_size or max(1, a.batch_size // 4)
    dim, why = choose_dim(n, e, free, a.reserve, a.probe, ram, a.memory_limit, a.dim, link)
    est = estimate(n, e, dim, link)
    log(f"bench-scale: {n:,} nodes (scale {scale}) x {ef} = {e:,} edges, dim {dim} ({why}); planned raw "
        f"{human_bytes(est['raw'])} ({raw_edge_bytes(n)} B/edge), sort buckets {human_bytes(est['sort_runs'])}, "
        f"feature stage {human_bytes(est['stage'])}, dataset {human_bytes(est['dataset'])}, "
        f"{'link split peak ' + human_bytes(est['link_split_peak']) + ' (--link-split ' + a.link_split + '), ' if link else ''}"
        f"peak {human_bytes(est['peak'])} of {human_bytes(free)} free; RAM {human_bytes(ram)}, training cap "
        f"{human_bytes(a.memory_limit)}")
    if a.plan:
        return 0

    # 2. Disk probe.
    log(f"bench-scale: disk probe ({human_bytes(a.probe)} O_DIRECT sequential write + read)")
    disk = disk_probe(data / "probe.bin", a.probe)
    log(f"bench-scale: disk {disk['write_MBps']:.0f} MB/s write, {disk['read_MBps']:.0f} MB/s read"
        f"{'' if disk['o_direct'] else ' (no O_DIRECT here: buffered + fsync)'}")

    # 3-4. Generate, build, verify.
    raw, out = data / "raw", data / "dataset"
    edge_dtype = "uint32" if raw_edge_bytes(n) == RAW_EDGE_BYTES_U32 else "int64"
    gen_s, _ = run(cli + ["generate", "rmat", str(raw), "--scale", str(scale), "--edge-factor", str(ef),
                       "--dim", str(dim), "--edge-dtype", edge_dtype, "--force"], "generate")
    raw_bytes = dir_bytes(raw)
    subprocess.run(["sync"], check=False)
    build_s, peak = run(cli + ["build", str(raw), str(out), "--force", "--memory-budget", str(a.build_budget)]
                        + (["--link-split", a.link_split] if link else []), "build")
    if not a.keep:
        shutil.rmtree(raw, ignore_errors=True)  # room for training; the dataset is what remains
    verify_s, _ = run(cli + ["verify", str(out)], "verify")
    manifest = json.loads((out / "manifest.json").read_text())
    ds_bytes = dir_bytes(out)
    # The link split's files (16 B per training positive) are no part of the graph's per-node cost.
    link_bytes = sum(f.stat().st_size for f in out.glob("link_*.npy"))
    n_real, e_real = manifest["num_nodes"], manifest["num_edges"]
    feat_bytes = n_real * dim * 4
    per_node_base = (ds_bytes - link_bytes - ID_BYTES * e_real - feat_bytes) / n_real
    # The build's time outside its edge pass and layout: with a link split, the split (it runs first and
    # overlaps nothing); without, what planning and publishing take (the comparison).
    b = manifest["build"]
    outside_s = b["total_seconds"] - b["preprocess_seconds"] - b["layout_seconds"]
    in_MBps = raw_bytes / build_s / 1e6

    # 5. Training under the cap.
    log(f"bench-scale: training GraphSAGE ({a.task}) for {a.batches} batches under a {human_bytes(a.memory_limit)} "
        f"cgroup cap")
    node_tr = None
    try:
        tr = train_capped(out, a.batches, a.memory_limit, link_batch if link else a.batch_size, a.fanout, a.task,
                          a.eval_batches if link else None)
        if link:
            log("bench-scale: " + train_line(tr, a.memory_limit))
            log(f"bench-scale: node classification on the same dataset for {a.batches} batches, same cap")
            node_tr = train_capped(out, a.batches, a.memory_limit, a.batch_size, a.fanout)
    except SystemExit:
        # Keep what this run measured, and never leave the (huge) dataset behind unasked.
        log(f"bench-scale: build {build_s:.1f} s, input {human_bytes(raw_bytes)} at {in_MBps:.0f} MB/s = "
            f"{in_MBps / disk['read_MBps']:.2f}x disk sequential read; peak RSS {human_bytes(peak)}; dataset "
            f"{human_bytes(ds_bytes)} ({ds_bytes / n_real:.1f} B/node, {ds_bytes / e_real:.2f} B/edge)"
            f"{' kept' if a.keep else ' removed'}")
        if not a.keep:
            shutil.rmtree(out, ignore_errors=True)
        raise
    base = None
    bdir = Path(a.baseline)
    if (bdir / "manifest.json").exists():
        b_bytes = dir_bytes(bdir)
        b_cap = max(int(b_bytes * a.memory_limit / ds_bytes), BASELINE_CAP_MIN)
        log(f"bench-scale: baseline {bdir} ({human_bytes(b_bytes)}) for {a.batches} batches under "
            f"{human_bytes(b_cap)} (dataset/cap {b_bytes / b_cap:.1f} vs {ds_bytes / a.memory_limit:.1f} here"
            f"{'; floor: a smaller cap OOM-kills the trainer' if b_cap == BASELINE_CAP_MIN else ''})")
        base = train_capped(bdir, a.batches, b_cap, a.batch_size, a.fanout)
        base.update({"dataset": str(bdir), "dataset_bytes": b_bytes, "memory_limit": b_cap,
                     "dataset_over_cap": b_bytes / b_cap})

    # 6. Report.
    train_n = manifest.get("splits", {}).get("train")  # {"train": count, ...}
    train_frac = (train_n / n_real) if train_n else 0.1
    ls = manifest.get("link_split")
    # Link prediction: an epoch is every training positive (per stored edge, as the graph grows).
    train_per_edge = ls["splits"]["train"]["positives"] / e_real if link and ls else None
    # The build's cost per stored edge, extrapolated below (a link split's time is part of it: it is per edge).
    s_per_edge = build_s / e_real
    ext = [extrapolate("IGB-full", IGB_FULL["nodes"], IGB_FULL["edges"], IGB_FULL["dim"], per_node_base,
                       ID_BYTES, s_per_edge, disk, tr["batches_per_s"], train_frac, link_batch if link else a.batch_size, train_per_edge),
           extrapolate("100B edges", int(1e11 / (e_real / n_real)), int(1e11), dim, per_node_base, ID_BYTES,
                       s_per_edge, disk, tr["batches_per_s"], train_frac, link_batch if link else a.batch_size, train_per_edge)]
    res = {
        "nodes": n_real, "edges": e_real, "dim": dim, "dim_reason": why, "ram_bytes": ram,
        "memory_limit": a.memory_limit, "build_budget": a.build_budget,
        "raw_input_bytes": raw_bytes, "dataset_bytes": ds_bytes, "dataset_over_ram": ds_bytes / max(ram, 1),
        "dataset_over_cap": ds_bytes / a.memory_limit,
        "bytes_per_node": ds_bytes / n_real, "bytes_per_edge": ds_bytes / e_real,
        "structure_bytes_per_node_excl_ids_and_features": per_node_base,
        "generate_seconds": gen_s, "build_seconds": build_s, "verify_seconds": verify_s,
        "build_peak_rss_bytes": peak, "build_input_MBps": in_MBps, "disk": disk,
        "build_vs_disk_read": in_MBps / disk["read_MBps"], "build_vs_disk_write": in_MBps / disk["write_MBps"],
        "build_phases": {k: manifest["build"][k] for k in ("preprocess_seconds", "feature_seconds",
                                                           "layout_seconds", "sort_runs")},
        "build_outside_edge_pass_and_layout_seconds": outside_s,
        "task": a.task, "link_split": ls, "link_batch_size": link_batch if link else None, "link_split_option": a.link_split if link else None,
        "link_split_seconds": outside_s if link else None, "link_split_bytes": link_bytes,
        "train": tr, "train_fraction": train_frac, "extrapolation": ext, "baseline_train": base,
        "train_vs_baseline": tr["batches_per_s"] / base["batches_per_s"] if base else None,
        "node_train_same_dataset": node_tr,
        "link_vs_node_batches": tr["batches_per_s"] / node_tr["batches_per_s"] if node_tr else None,
    }
    log(f"bench-scale: {n_real:,} nodes, {e_real:,} edges, dim {dim}: dataset {human_bytes(ds_bytes)} "
        f"({res['dataset_over_ram']:.2f}x RAM, {res['dataset_over_cap']:.1f}x cap) = {res['bytes_per_node']:.1f} B/node, "
        f"{res['bytes_per_edge']:.2f} B/edge ({per_node_base:.1f} B/node besides 4 B/edge ids and {4 * dim} B/node features)")
    log(f"bench-scale: build {build_s:.1f} s ({res['build_phases']}), input {human_bytes(raw_bytes)} at "
        f"{in_MBps:.0f} MB/s = {res['build_vs_disk_read']:.2f}x disk sequential read, {res['build_vs_disk_write']:.2f}x "
        f"write; peak RSS {human_bytes(peak)} under --memory-budget {human_bytes(a.build_budget)}; verify {verify_s:.1f} s")
    if link:
        sp = ls["splits"]
        log(f"bench-scale: link batches of {link_batch} edges (<= {4 * link_batch} seed endpoints); "
            f"link split {a.link_split}: {outside_s:.1f} s of the build (total less edge pass and "
            f"layout); {ls['input_pairs']:,} input pairs, {ls['held_out_edges']:,} edges held out; positives train "
            f"{sp['train']['positives']:,}, val {sp['val']['positives']:,}, test {sp['test']['positives']:,} "
            f"(undirected: {ls['undirected']}); files {human_bytes(link_bytes)}")
    log(f"bench-scale: training {train_line(tr, a.memory_limit)}")
    if node_tr:
        log(f"bench-scale: same dataset, {train_line(node_tr, a.memory_limit)}; link / node = "
            f"{res['link_vs_node_batches']:.2f}x batches/s")
    if base:
        log(f"bench-scale: baseline {base['dataset']}: {base['batches_per_s']:.2f} batches/s under "
            f"{human_bytes(base['memory_limit'])} (dataset/cap {base['dataset_over_cap']:.1f}); this run / baseline = "
            f"{res['train_vs_baseline']:.2f}x")
    for x in ext:
        log(f"bench-scale: {x['name']}: {x['arithmetic']}")
    if a.json == "-":
        print(json.dumps(res, indent=2))
    elif a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))
    if not a.keep:
        shutil.rmtree(out, ignore_errors=True)
    log(f"bench-scale: done: {e_real:,} edges built at {res['build_vs_disk_read']:.2f}x disk read bandwidth, "
        f"trained at {tr['batches_per_s']:.2f} batches/s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
