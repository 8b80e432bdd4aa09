"""`make bench-stripe` (python -m benchmarks.stripe) on a tiny generated dataset: striped copies over 1 and
2 directories sample batches identical to the unstriped dataset (the benchmark compares every array), the
dataset itself is left as it was, and the prediction replays the same batches' trace on 1 and 2 simulated
SSDs, reporting each run's saturated queue."""

from __future__ import annotations

import json
import subprocess
import sys

import flashgnn

from conftest import cli_env


def test_bench_stripe_small(tmp_path):
    flashgnn.generate(tmp_path / "raw", progress=False, scale=11, edge_factor=8, dim=16, classes=4, seed=3)
    ds = tmp_path / "ds"
    flashgnn.build(tmp_path / "raw", ds, progress=False, symmetrize=True, dedup=True)
    before = sorted(p.name for p in ds.iterdir())
    p = subprocess.run([sys.executable, "-m", "benchmarks.stripe", "--dataset", str(ds), "--work", str(tmp_path / "w"),
                        "--devices", "1,2", "--predict", "1,2", "--batches", "3", "--batch-size", "32",
                        "--fanout", "4,2", "--no-drop-caches", "--json"],
                       capture_output=True, text=True, env=cli_env(), timeout=300)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert sorted(x.name for x in ds.iterdir()) == before, "the dataset is read-only to the benchmark"
    assert r["unstriped"]["identical_batches"]
    assert [(m["directories"], m["identical_batches"]) for m in r["measured"]] == [(1, 3), (2, 3)]
    assert all(m["batches_per_s"] > 0 and m["block_devices"] for m in r["measured"])
    assert not (tmp_path / "w" / "s2").exists(), "striped copies are removed without --keep"
    assert {(x["config"], x["design"]) for x in r["predicted"]} == {
        (c, d) for c in ("this-machine", "beacongnn-table2") for d in ("host", "cc")}
    for x in r["predicted"]:
        assert x["busiest"] == next(iter(x["utilization"])) and 0 < x["busiest_share"] <= 1.0 + 1e-9, x
        if x["devices"] == 1:
            assert x["ratio_vs_1"] == 1.0 and len(x["per_device_reads"]) == 1
        else:
            assert len(x["per_device_reads"]) == 2 and x["ratio_vs_1"] > 0.99, x
