"""Scrubber benchmark: does ``flashgnn scrub`` hold its rate, and what does a
background scrub (``flashgnn serve --scrub-rate``) cost request latency?

``rate``: one scrub pass per target rate; the figure is achieved/target
(bytes read / seconds over the ``--rate``), plus the unlimited rate.

``serve``: the same dataset copy served twice per round — without and with
``--scrub-rate`` — and one client sending GetNeighbors and GetEmbed of random
vertices back to back for ``--seconds``; rounds alternate (off, on, off, on,
...) so drift hits both sides. Reported: p50/p99 per side and the with/without
ratios, and the scrubber's own progress from the server's Stats.

Everything is measured in this run and printed as ratios (``--json`` for the
raw figures); nothing here is a timed assertion.
"""

from __future__ import annotations

import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
from tqdm.auto import tqdm

import flashgnn
from flashgnn._util import ArgumentParser, parse_rate
from flashgnn.serve.process import ServeProcess


def bench_rate(dataset: Path, rates: list[int], work: Path) -> list[dict]:
    rows = []
    for r in tqdm(rates + [0], desc="scrub rate", unit=" pass"):
        rep = flashgnn.scrub(dataset, rate=r, state=work / f"state-{r}", progress=False)
        rows.append({
            "target_bytes_per_s": r, "achieved_bytes_per_s": rep["rate_achieved_bytes_per_s"],
            "ratio": rep["rate_achieved_bytes_per_s"] / r if r else None, "bytes_read": rep["bytes_read"],
            "seconds": rep["seconds"], "direct": rep["direct"], "damaged": rep["damaged_count"],
        })
    return rows


def _loop(address: str, token: str, n: int, seconds: float, seed: int) -> list[float]:
    from flashgnn.serve.client import Client

    rng = np.random.default_rng(seed)
    lat = []
    with Client(address, token=token) as c:
        c.wait_ready()
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            v = int(rng.integers(0, n))
            t = time.perf_counter()
            c.get_neighbors(v)
            c.get_embed(v)
            lat.append(time.perf_counter() - t)
    return lat


def bench_serve(dataset: Path, scrub_rate: int, seconds: float, rounds: int, work: Path, token: str,
                token_file: Path) -> dict:
    from flashgnn.serve.client import Client

    copy = work / "served"
    shutil.copytree(dataset, copy)  # serve opens the store writable (it creates mut/): never the original
    n = flashgnn.open(copy).num_nodes
    lat: dict[str, list[float]] = {"off": [], "on": []}
    per_round = []
    scrub_status = None
    for i in tqdm(range(rounds * 2), desc="serve rounds", unit=" round"):
        side = "off" if i % 2 == 0 else "on"
        extra = ["--scrub-rate", str(scrub_rate)] if side == "on" else []
        srv = ServeProcess(copy, token_file, *extra, stderr_path=work / f"server-{i}.err", timeout=120.0)
        try:
            got = _loop(srv.address, token, n, seconds, seed=i)
            lat[side] += got
            per_round.append({"side": side, "requests": len(got), "p50_ms": float(np.percentile(got, 50) * 1e3),
                              "p99_ms": float(np.percentile(got, 99) * 1e3)})
            if side == "on":
                with Client(srv.address, token=token) as c:
                    scrub_status = c.stats()["graph"].get("scrub")
        finally:
            srv.stop()
    pct = lambda xs, q: float(np.percentile(np.asarray(xs) * 1e3, q))  # noqa: E731
    out = {"scrub_rate_bytes_per_s": scrub_rate, "seconds_per_round": seconds, "rounds": rounds,
           "num_nodes": n, "scrub_status": scrub_status}
    for side in ("off", "on"):
        out[side] = {"requests": len(lat[side]), "p50_ms": pct(lat[side], 50), "p99_ms": pct(lat[side], 99)}
    out["p50_ratio"] = out["on"]["p50_ms"] / out["off"]["p50_ms"]
    out["p99_ratio"] = out["on"]["p99_ms"] / out["off"]["p99_ms"]
    # The noise floor: how far rounds of the same side differ (max/min p99 over the "off" rounds).
    offs = [r["p99_ms"] for r in per_round if r["side"] == "off"]
    out["off_p99_spread"] = max(offs) / min(offs) if len(offs) > 1 else None
    out["per_round"] = per_round
    return out


def main(argv: list[str] | None = None) -> int:
    p = ArgumentParser(prog="python -m benchmarks.scrub", description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", type=Path, nargs="?", help="default: an R-MAT graph generated at --scale")
    p.add_argument("--scale", type=int, default=16, help="2^scale nodes for the generated dataset (default 16)")
    p.add_argument("--rates", default="20MB/s,100MB/s", help="target rates of the rate test, comma-separated")
    p.add_argument("--scrub-rate", type=parse_rate, default=parse_rate("50MB/s"), help="the serving test's rate")
    p.add_argument("--seconds", type=float, default=5.0, help="request loop per round")
    p.add_argument("--rounds", type=int, default=2, help="off/on pairs")
    p.add_argument("--mode", choices=["rate", "serve", "all"], default="all")
    p.add_argument("--work", default=None, help="scratch directory (default: system temp)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    rates = [parse_rate(r) for r in a.rates.split(",")]
    token = os.urandom(16).hex()
    out: dict = {}
    with tempfile.TemporaryDirectory(dir=a.work) as td:
        work = Path(td)
        token_file = work / "token"
        token_file.write_text(token)
        token_file.chmod(0o600)
        ds = a.dataset
        if ds is None:
            flashgnn.generate(work / "raw", progress=False, scale=a.scale, dim=64)
            flashgnn.build(work / "raw", work / "ds", progress=False, symmetrize=True, dedup=True)
            ds = work / "ds"
        out["dataset"] = str(a.dataset or f"generated R-MAT scale {a.scale}")
        if a.mode in ("rate", "all"):
            out["rate"] = bench_rate(ds, rates, work)
        if a.mode in ("serve", "all"):
            out["serve"] = bench_serve(ds, a.scrub_rate, a.seconds, a.rounds, work, token, token_file)
    if a.json:
        print(json.dumps(out, indent=2))
        return 0
    mib = 2**20
    for r in out.get("rate", []):
        if r["target_bytes_per_s"]:
            print(f"rate: target {r['target_bytes_per_s'] / mib:.1f} MiB/s, achieved {r['achieved_bytes_per_s'] / mib:.1f} "
                  f"MiB/s: ratio {r['ratio']:.3f} ({r['bytes_read'] / mib:.1f} MiB in {r['seconds']:.2f} s)")
        else:
            print(f"rate: unlimited: {r['achieved_bytes_per_s'] / mib:.1f} MiB/s "
                  f"({'O_DIRECT' if r['direct'] else 'buffered'})")
    if "serve" in out:
        s = out["serve"]
        print(f"serve: GetNeighbors+GetEmbed, 1 client, {s['rounds']}x{s['seconds_per_round']:g} s per side: "
              f"p50 {s['off']['p50_ms']:.3f} -> {s['on']['p50_ms']:.3f} ms ({s['p50_ratio']:.2f}x), "
              f"p99 {s['off']['p99_ms']:.3f} -> {s['on']['p99_ms']:.3f} ms ({s['p99_ratio']:.2f}x) "
              f"with --scrub-rate {s['scrub_rate_bytes_per_s'] / mib:.0f} MiB/s; scrub passes {s['scrub_status']['passes'] if s['scrub_status'] else '?'}")
        if s["off_p99_spread"] is not None:
            print(f"serve: noise floor: p99 of rounds without scrub differ by up to {s['off_p99_spread']:.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
