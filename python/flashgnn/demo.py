"""`make demo`: the main job on a generated dataset.

generate (R-MAT, npy layout) -> build (symmetrize, dedup) -> verify -> info.
Training joins this pipeline when the training layer lands; until then the
demo ends with the dataset's description and one summary line.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import flashgnn
from flashgnn.cli import main as cli


def run(argv: list[str]) -> None:
    print(f"\n$ flashgnn {' '.join(argv)}", flush=True)
    rc = cli(argv)
    if rc != 0:
        sys.exit(rc)


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__)
    p.add_argument("--data", default="data", help="working directory (default ./data)")
    p.add_argument("--scale", type=int, default=18, help="2^scale nodes (default 18)")
    p.add_argument("--edge-factor", type=int, default=16)
    p.add_argument("--dim", type=int, default=128)
    a = p.parse_args(argv)
    data = Path(a.data)
    data.mkdir(parents=True, exist_ok=True)
    raw, ds = data / "demo-raw", data / "demo"
    t = time.perf_counter()
    run(["generate", "rmat", str(raw), "--scale", str(a.scale), "--edge-factor", str(a.edge_factor),
         "--dim", str(a.dim), "--classes", "16", "--seed", "1", "--force"])
    run(["build", str(raw), str(ds), "--symmetrize", "--dedup", "--force"])
    run(["verify", str(ds)])
    run(["info", str(ds)])
    d = flashgnn.open(ds)
    print(
        f"\ndemo: {d.num_nodes:,} nodes / {d.num_edges:,} edges generated, built, verified and described "
        f"in {time.perf_counter() - t:.1f} s -> {ds}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
