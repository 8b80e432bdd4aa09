"""Out-of-core build benchmark (`make bench-build`).

Generates R-MAT inputs whose raw size is at least ``--factor`` x
``--budget``, builds them under ``--memory-budget``, and prints per build:

- peak RSS of the build process (ru_maxrss of the child) against the budget
  and the documented constant (python + numpy + extension: see
  ``RSS_CONSTANT_BYTES``);
- build throughput in input MB/s against the disk's sequential write and
  read bandwidth measured in the same run (O_DIRECT 8 MiB writes + fsync,
  then O_DIRECT reads, of a file of ``--probe`` bytes on the same
  filesystem: :func:`benchmarks.scale.disk_probe`), as ratios;
- the bytes the build made the device read and write (the child's block-I/O
  accounting) and the I/O floor they set: those bytes at the probe's
  bandwidths, one after the other, and the input ratio a build moving them
  would reach at zero CPU — what the 0.5x target can be held against on
  this disk for this input (:func:`io_floor`).

Two input shapes (``--shape``, default both):

- ``edges``: edge-dominated (features a quarter of the bytes, 128 x fp32,
  int64 edges): the external sort's worst case.
- ``igb``: shaped like IGB and papers100M, where nearly all of the bytes
  are features (1024 x fp32 rows, 13 edges per node as in IGB): what an
  import of those datasets costs.

Each shape is built with ``--symmetrize --dedup`` once per ``--verify``
mode (default ``encoded,all``: the build's default, then reading every byte
back), so the cost of the full read-back is measured, not guessed.

``--raw DIR`` builds an existing input instead of generating one (kept
afterwards), so two builds — e.g. two versions of the extension, through
``PYTHONPATH`` — can be compared on the same bytes.

Nothing here is a timed assertion: the verdict line compares against the
budget and the baseline measured in this run.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from pathlib import Path

from benchmarks.scale import dir_bytes, disk_probe, run_child
from flashgnn._util import human_bytes, parse_size

# Interpreter + numpy + tqdm + the extension's code and static data (~60 MiB
# measured for `flashgnn build` of a 1-edge graph) plus allocator slack:
# 96 MiB. Budget accounting in the builder covers everything else.
RSS_CONSTANT_BYTES = 96 << 20
FLASHGNN_CLI = [sys.executable, "-m", "flashgnn.cli"]


# (dim, edges per node) of each input shape; see the module docstring.
SHAPES = {"edges": (128, None), "igb": (1024, 13)}


def plan_input(shape: str, target: int) -> tuple[int, int, int]:
    """(scale, edge factor, dim) of an R-MAT input of at least ``target`` raw bytes."""
    dim, degree = SHAPES[shape]
    scale = 10
    if degree is None:
        # Features ~1/4 of the target (dim*4 B + 8 B label per node), then
        # the edge factor (16 B per int64 edge) that reaches it.
        while (1 << (scale + 1)) * (dim * 4 + 8) <= target // 4:
            scale += 1
        n = 1 << scale
        return scale, max(1, -(-(target - n * (dim * 4 + 8)) // (16 * n))), dim
    while (1 << scale) * (dim * 4 + 8 + 16 * degree) < target:
        scale += 1
    return scale, degree, dim


def io_counts() -> dict[str, int]:
    """This process's ``/proc/self/io``. It includes every child the process has waited for: the kernel
    adds a reaped child's counts to its parent's."""
    lines = Path("/proc/self/io").read_text().splitlines()
    return {k: int(v) for k, v in (line.split(": ") for line in lines)}


def device_bytes(before: dict[str, int], after: dict[str, int]) -> tuple[int, int]:
    """(read, written) bytes the block device moved between two :func:`io_counts`: reads that missed the
    page cache, and writes less those cancelled by truncating or deleting dirty pages before writeback
    (the build's temporary files)."""
    d = {k: after[k] - before[k] for k in ("read_bytes", "write_bytes", "cancelled_write_bytes")}
    return d["read_bytes"], max(d["write_bytes"] - d["cancelled_write_bytes"], 0)


def build_once(raw: Path, out: Path, a, verify: str) -> dict:
    """Build ``raw`` once in a child process and return the figures; exit with the child's code if it
    fails."""
    raw_bytes = dir_bytes(raw)
    subprocess.run(["sync"], check=False)
    pin = ["--dataset-id", str(a.dataset_id)] if a.dataset_id else []
    io0 = io_counts()
    rc, seconds, usage = run_child(FLASHGNN_CLI + ["build", str(raw), str(out), "--symmetrize", "--dedup", "--force",
                                                   "-q", "--verify", verify, "--memory-budget", str(a.budget), *pin])
    rd, wr = device_bytes(io0, io_counts())
    if rc != 0:
        print(f"bench-build: build failed with exit code {rc}", file=sys.stderr)
        raise SystemExit(rc)
    peak = usage.ru_maxrss * 1024
    manifest = json.loads((out / "manifest.json").read_text())
    b = manifest["build"]
    return {
        "verify": verify,
        "raw_input_bytes": raw_bytes,
        "budget_bytes": a.budget,
        "input_over_budget": raw_bytes / a.budget,
        "peak_rss_bytes": peak,
        "rss_limit_bytes": a.budget + RSS_CONSTANT_BYTES,
        "within_budget": peak <= a.budget + RSS_CONSTANT_BYTES,
        "build_seconds": seconds,
        "input_MBps": raw_bytes / seconds / 1e6,
        "preprocess_seconds": b["preprocess_seconds"],
        "feature_seconds": b["feature_seconds"],
        "layout_seconds": b["layout_seconds"],
        "sort_runs": b["sort_runs"],
        "num_nodes": manifest["num_nodes"],
        "num_edges": manifest["num_edges"],
        "dataset_bytes": dir_bytes(out),
        # What the build made the device move.
        "device_read_bytes": rd,
        "device_write_bytes": wr,
    }


def io_floor(res: dict) -> dict:
    """The disk alone: this build's device bytes at the probe's bandwidths, one after the other (this
    virtual disk's reads and writes share one bandwidth, docs/benchmarks.md), and the input ratio to the
    read bandwidth a build moving those bytes could reach at zero CPU."""
    secs = res["device_read_bytes"] / (res["disk_seq_read_MBps"] * 1e6) \
        + res["device_write_bytes"] / (res["disk_seq_write_MBps"] * 1e6)
    best = res["raw_input_bytes"] / secs / (res["disk_seq_read_MBps"] * 1e6) if secs > 0 else None
    return {"io_floor_seconds": secs, "io_floor_ratio_read": best,
            "of_io_floor": secs / res["build_seconds"] if res["build_seconds"] > 0 else None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="data/bench")
    ap.add_argument("--budget", type=parse_size, default=parse_size("2GiB"))
    ap.add_argument("--factor", type=float, default=4.0, help="raw input >= factor x budget")
    ap.add_argument("--shape", default="edges,igb", help="input shapes, comma-separated: edges, igb")
    ap.add_argument("--verify", default="encoded,all", help="build --verify modes to time, comma-separated")
    ap.add_argument("--probe", type=parse_size, default=parse_size("2GiB"), help="bytes written by the disk probe")
    ap.add_argument("--json", help="write the results as JSON to this file")
    ap.add_argument("--keep", action="store_true", help="keep the generated inputs and datasets")
    ap.add_argument("--raw", help="build this existing npy input instead of generating one (never deleted)")
    ap.add_argument("--dataset-id", type=int, help="pin the dataset id (byte-identical rebuilds)")
    a = ap.parse_args(argv)
    data = Path(a.data)
    data.mkdir(parents=True, exist_ok=True)
    shapes = ["raw"] if a.raw else [x for x in a.shape.split(",") if x]
    for x in shapes:
        if x != "raw" and x not in SHAPES:
            ap.error(f"--shape {x!r}: expected {', '.join(SHAPES)}")
    modes = [x for x in a.verify.split(",") if x]
    target = int(a.factor * a.budget)

    from tqdm import tqdm

    runs = []
    for shape in tqdm(shapes, desc="bench-build shapes", unit="shape", disable=len(shapes) < 2):
        raw, out = (Path(a.raw) if a.raw else data / f"{shape}-raw"), data / f"{shape}-out"
        if not a.raw:
            scale, edge_factor, dim = plan_input(shape, target)
            print(f"bench-build [{shape}]: target raw input {human_bytes(target)} = {a.factor} x budget "
                  f"{human_bytes(a.budget)}; scale {scale} ({1 << scale:,} nodes), edge factor {edge_factor}, "
                  f"dim {dim}", flush=True)
            subprocess.run(FLASHGNN_CLI + ["generate", "rmat", str(raw), "--scale", str(scale), "--edge-factor",
                                           str(edge_factor), "--dim", str(dim), "--force", "-q"], check=True)
        for verify in modes:
            print(f"bench-build [{shape}]: disk probe ({human_bytes(a.probe)} O_DIRECT write + read)", flush=True)
            probe = disk_probe(data / "probe.bin", a.probe)
            res = build_once(raw, out, a, verify)
            res.update({
                "shape": shape,
                "disk_seq_write_MBps": probe["write_MBps"],
                "disk_seq_read_MBps": probe["read_MBps"],
                "disk_probe_o_direct": probe["o_direct"],
                "throughput_vs_disk": res["input_MBps"] / probe["write_MBps"],
                "throughput_vs_disk_read": res["input_MBps"] / probe["read_MBps"],
            })
            res.update(io_floor(res))
            runs.append(res)
            print(
                f"bench-build [{shape}, --verify {verify}]: input {human_bytes(res['raw_input_bytes'])} "
                f"({res['input_over_budget']:.1f}x budget) built in {res['build_seconds']:.1f} s: "
                f"{res['input_MBps']:.0f} MB/s = {res['throughput_vs_disk_read']:.2f}x disk sequential read "
                f"({res['disk_seq_read_MBps']:.0f} MB/s), {res['throughput_vs_disk']:.2f}x write "
                f"({res['disk_seq_write_MBps']:.0f} MB/s); peak RSS {human_bytes(res['peak_rss_bytes'])} vs budget "
                f"{human_bytes(a.budget)} + constant {human_bytes(RSS_CONSTANT_BYTES)} -> "
                f"{'WITHIN' if res['within_budget'] else 'OVER'}; {res['sort_runs']} sort runs; device "
                f"{human_bytes(res['device_read_bytes'])} read + {human_bytes(res['device_write_bytes'])} written = "
                f"{res['io_floor_seconds']:.1f} s at the probe's bandwidths (at zero CPU: "
                f"{res['io_floor_ratio_read'] or 0:.2f}x read; this build ran at {res['of_io_floor'] or 0:.2f} of that)",
                flush=True)
        if not a.keep:
            import shutil
            if not a.raw:
                shutil.rmtree(raw, ignore_errors=True)
            shutil.rmtree(out, ignore_errors=True)
    worst = int(not all(r["within_budget"] for r in runs))
    print("bench-build: " + "; ".join(
        f"{r['shape']}/{r['verify']} {r['throughput_vs_disk_read']:.2f}x read (I/O floor "
        f"{r['io_floor_ratio_read'] or 0:.2f}x)" for r in runs)
        + f" (target 0.5x); peak RSS {'within' if not worst else 'OVER'} budget + constant")
    if a.json:
        Path(a.json).write_text(json.dumps({"runs": runs}, indent=2))
    return worst


if __name__ == "__main__":
    sys.exit(main())
