"""Out-of-core build benchmark (`make bench-build`).

Generates an R-MAT input whose raw size is at least ``--factor`` x
``--budget``, builds it under ``--memory-budget``, and prints:

- peak RSS of the build process (ru_maxrss of the child) against the budget
  and the documented constant (python + numpy + extension: see
  ``RSS_CONSTANT_BYTES``);
- build throughput in input MB/s against the disk's sequential write and
  read bandwidth measured in the same run (O_DIRECT 8 MiB writes + fsync,
  then O_DIRECT reads, of a file of ``--probe`` bytes on the same
  filesystem: :func:`benchmarks.scale.disk_probe`), as ratios.

``--raw DIR`` builds an existing input instead of generating one (kept
afterwards), so two builds — e.g. two versions of the extension, through
``PYTHONPATH`` — can be compared on the same bytes.

Nothing here is a timed assertion: the verdict line compares against the
budget and the baseline measured in this run.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from flashgnn._util import human_bytes, parse_size

# Interpreter + numpy + tqdm + the extension's code and static data (~60 MiB
# measured for `flashgnn build` of a 1-edge graph) plus allocator slack:
# 96 MiB. Budget accounting in the builder covers everything else.
RSS_CONSTANT_BYTES = 96 << 20


def dir_bytes(p: Path) -> int:
    return sum(f.stat().st_size for f in p.iterdir() if f.is_file())


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--data", default="data/bench")
    ap.add_argument("--budget", type=parse_size, default=parse_size("2GiB"))
    ap.add_argument("--factor", type=float, default=4.0, help="raw input >= factor x budget")
    ap.add_argument("--dim", type=int, default=128)
    ap.add_argument("--probe", type=parse_size, default=parse_size("2GiB"), help="bytes written by the disk probe")
    ap.add_argument("--json", help="write the results as JSON to this file")
    ap.add_argument("--keep", action="store_true", help="keep the generated input and dataset")
    ap.add_argument("--raw", help="build this existing npy input instead of generating one (never deleted)")
    ap.add_argument("--dataset-id", type=int, help="pin the dataset id (byte-identical rebuilds)")
    a = ap.parse_args(argv)
    data = Path(a.data)
    data.mkdir(parents=True, exist_ok=True)
    flashgnn_cli = [sys.executable, "-m", "flashgnn.cli"]

    # Size the input: N = 2^scale nodes of dim*4 B features + 8 B labels, and
    # edge_factor * N edges of 16 B. Pick scale so features are ~1/4 of the
    # target, then the edge factor that reaches it.
    target = int(a.factor * a.budget)
    scale = 10
    while (1 << (scale + 1)) * (a.dim * 4 + 8) <= target // 4:
        scale += 1
    n = 1 << scale
    edge_factor = max(1, -(-(target - n * (a.dim * 4 + 8)) // (16 * n)))
    raw, out = (Path(a.raw) if a.raw else data / "ooc-raw"), data / "ooc"
    if not a.raw:
        print(f"bench-build: target raw input {human_bytes(target)} = {a.factor} x budget {human_bytes(a.budget)}; "
              f"scale {scale} ({n:,} nodes), edge factor {edge_factor}", flush=True)
        subprocess.run(flashgnn_cli + ["generate", "rmat", str(raw), "--scale", str(scale), "--edge-factor", str(edge_factor),
                                       "--dim", str(a.dim), "--force"], check=True)
    raw_bytes = dir_bytes(raw)

    print(f"bench-build: measuring sequential O_DIRECT write + read bandwidth ({human_bytes(a.probe)})", flush=True)
    from benchmarks.scale import disk_probe

    probe = disk_probe(data / "probe.bin", a.probe)
    disk_bps, disk_read_bps = probe["write_MBps"] * 1e6, probe["read_MBps"] * 1e6

    subprocess.run(["sync"], check=False)
    t = time.perf_counter()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    pin = ["--dataset-id", str(a.dataset_id)] if a.dataset_id else []
    proc = subprocess.run(flashgnn_cli + ["build", str(raw), str(out), "--symmetrize", "--dedup", "--force",
                                          "--memory-budget", str(a.budget), *pin])
    seconds = time.perf_counter() - t
    if proc.returncode != 0:
        print(f"bench-build: build failed with exit code {proc.returncode}", file=sys.stderr)
        return proc.returncode
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024
    if peak < before * 1024:
        peak = before * 1024
    manifest = json.loads((out / "manifest.json").read_text())
    b = manifest["build"]
    in_bps = raw_bytes / seconds
    res = {
        "raw_input_bytes": raw_bytes,
        "budget_bytes": a.budget,
        "input_over_budget": raw_bytes / a.budget,
        "peak_rss_bytes": peak,
        "rss_limit_bytes": a.budget + RSS_CONSTANT_BYTES,
        "within_budget": peak <= a.budget + RSS_CONSTANT_BYTES,
        "build_seconds": seconds,
        "input_MBps": in_bps / 1e6,
        "disk_seq_write_MBps": disk_bps / 1e6,
        "throughput_vs_disk": in_bps / disk_bps,
        "disk_seq_read_MBps": disk_read_bps / 1e6,
        "throughput_vs_disk_read": in_bps / disk_read_bps,
        "disk_probe_o_direct": probe["o_direct"],
        "preprocess_seconds": b["preprocess_seconds"],
        "feature_seconds": b["feature_seconds"],
        "layout_seconds": b["layout_seconds"],
        "sort_runs": b["sort_runs"],
        "num_nodes": manifest["num_nodes"],
        "num_edges": manifest["num_edges"],
        "dataset_bytes": dir_bytes(out),
    }
    print(
        f"bench-build: input {human_bytes(raw_bytes)} ({res['input_over_budget']:.1f}x budget) built in {seconds:.1f} s: "
        f"{res['input_MBps']:.0f} MB/s = {res['throughput_vs_disk']:.2f}x disk sequential write ({res['disk_seq_write_MBps']:.0f} MB/s), "
        f"{res['throughput_vs_disk_read']:.2f}x read ({res['disk_seq_read_MBps']:.0f} MB/s); "
        f"peak RSS {human_bytes(peak)} vs budget {human_bytes(a.budget)} + constant {human_bytes(RSS_CONSTANT_BYTES)} -> "
        f"{'WITHIN' if res['within_budget'] else 'OVER'}; {b['sort_runs']} sort runs"
    )
    if a.json:
        Path(a.json).write_text(json.dumps(res, indent=2))
    if not a.keep:
        import shutil
        if not a.raw:
            shutil.rmtree(raw, ignore_errors=True)
        shutil.rmtree(out, ignore_errors=True)
    return 0 if res["within_budget"] else 1


if __name__ == "__main__":
    sys.exit(main())
