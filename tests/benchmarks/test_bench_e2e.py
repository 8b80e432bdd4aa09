"""The end-to-end latency benchmark (python -m benchmarks.e2e) on a tiny
generated input: both paths must produce a GCN result for every target and
the printed ratios must be the ratios of the stage times it reports."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest

import flashgnn

from conftest import cli_env


@pytest.fixture(scope="module")
def raw(tmp_path_factory):
    d = tmp_path_factory.mktemp("e2e") / "raw"
    flashgnn.generate(d, progress=False, scale=11, edge_factor=8, dim=16, classes=4, seed=5, force=True)
    return d


def test_e2e_both_paths_produce_results(raw):
    targets = 64
    p = subprocess.run([sys.executable, "-m", "benchmarks.e2e", str(raw), "--targets", str(targets),
                        "--fanouts", "5,3", "--json", "--via", "pyg"], capture_output=True, text=True, env=cli_env(),
                       timeout=300)
    assert p.returncode == 0, p.stderr[-2000:]
    r = json.loads(p.stdout)
    st = r["stages"]
    for name in ("pyg", "ingest", "first_result", "first_result#2"):
        assert "failed" not in st[name], (name, st[name])
    # Every target gets a GCN output row on both paths (16 classes out).
    assert st["pyg"]["out_shape"] == [targets, 16]
    assert st["first_result"]["out_shape"] == [targets, 16]
    # Sampling really expanded the targets' neighbourhoods.
    assert st["pyg"]["sampled_nodes"] > targets
    assert st["first_result"]["sampled_nodes"] > targets
    # The ingest built a dataset that the first-result stage read (it was removed afterwards: no --keep).
    assert not (raw.with_name("raw.e2e")).exists()
    pyg = st["pyg"]["seconds"]
    assert pyg["total"] >= pyg["load"] + pyg["preprocess"]
    assert r["speedup_service"] == pytest.approx(r["pyg_total_s"] / r["first_result_s"])
    assert r["speedup_with_ingest"] == pytest.approx(r["pyg_total_s"] / (r["ingest_s"] + r["first_result_s"]))
    n = np.load(raw / "node_feat.npy", mmap_mode="r").shape[0]
    assert r["targets"] == targets <= n
