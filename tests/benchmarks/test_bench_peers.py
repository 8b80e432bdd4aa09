"""`make bench-peers`' own pieces, without torch_sparse: PyG's arrays are the
dataset's graph in CSC (checked against the stored neighbour lists and
features), are reused while the dataset is the same, and the benchmark
refuses a dataset smaller than 1.5x the cap and reports the PyG variants as
skipped, not failed, when torch_sparse is missing."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

import flashgnn
from benchmarks import peers

from conftest import cli_env, generated_dataset


def test_prepare_writes_the_graph_as_csc_and_reuses_it(tmp_path):
    ds_path = generated_dataset(tmp_path / "g", scale=9, edge_factor=6, dim=8, classes=3, seed=2)
    ds = flashgnn.open(ds_path)
    meta = peers.prepare(ds_path, tmp_path / "w", progress=False)
    assert meta["num_nodes"] == ds.num_nodes and meta["num_edges"] == ds.num_edges
    colptr, row = np.load(tmp_path / "w" / "colptr.npy"), np.load(tmp_path / "w" / "row.npy")
    assert colptr[0] == 0 and colptr[-1] == ds.num_edges and np.all(np.diff(colptr) >= 0)
    for v in (0, 5, ds.num_nodes - 1):
        ptr, idx = ds.neighbors_csr(np.array([v]))
        np.testing.assert_array_equal(row[colptr[v]:colptr[v + 1]], idx)
    np.testing.assert_array_equal(np.load(tmp_path / "w" / "x.npy")[:7], ds.features(np.arange(7)))
    stamp = (tmp_path / "w" / "x.npy").stat().st_mtime_ns
    peers.prepare(ds_path, tmp_path / "w", progress=False)
    assert (tmp_path / "w" / "x.npy").stat().st_mtime_ns == stamp  # same dataset: not rewritten


def test_refuses_a_small_dataset_and_skips_pyg_without_torch_sparse(tmp_path):
    ds_path = generated_dataset(tmp_path / "g", scale=9, edge_factor=6, dim=8, classes=3, seed=2)
    cmd = [sys.executable, "-m", "benchmarks.peers", "--dataset", str(ds_path), "--work", str(tmp_path / "w")]
    p = subprocess.run(cmd, capture_output=True, text=True, env=cli_env(), timeout=120)
    assert p.returncode != 0 and "less than 1.5x" in p.stderr
    if peers.have_torch_sparse():
        return  # the skip path exists only without it
    p = subprocess.run(cmd + ["--memory-limit", "1KiB", "--cache-budget", "1KiB", "--only", "pyg-memory", "--json"],
                       capture_output=True, text=True, env=cli_env(), timeout=120)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert "torch_sparse" in r["results"]["pyg-memory"]["skipped"] and r["ratios"]["uring+cache_vs_pyg_memory"] is None


def test_training_variant_runs_flashgnn_train_and_reports_its_epoch(tmp_path):
    """The uncapped training variant runs `flashgnn train` with the defaults for the asked steps (a
    whole epoch of the train split when --train-batches is left out) and reports its seconds, data wait
    and resolved budget; without PyG's side there is no ratio."""
    ds_path = generated_dataset(tmp_path / "g", scale=9, edge_factor=6, dim=8, classes=3, seed=2)
    cmd = [sys.executable, "-m", "benchmarks.peers", "--dataset", str(ds_path), "--work", str(tmp_path / "w"),
           "--memory-limit", "1KiB", "--only", "train-flashgnn-nocap", "--batch-size", "16", "--json"]
    p = subprocess.run(cmd + ["--train-batches", "2"], capture_output=True, text=True, env=cli_env(), timeout=300)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    t = r["results"]["train-flashgnn-nocap"]
    assert t["batches"] == 2 and t["train_seconds"] > 0 and 0 <= t["data_wait"] <= 1 and not t["capped"], t
    assert r["train_batches"] == 2 and r["ratios"]["train_flashgnn_nocap_vs_pyg"] is None
    p = subprocess.run(cmd, capture_output=True, text=True, env=cli_env(), timeout=300)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    n_train = json.loads((ds_path / "manifest.json").read_text())["splits"]["train"]
    assert r["train_batches"] == -(-n_train // 16) == r["results"]["train-flashgnn-nocap"]["batches"] > 2


def test_median_round_takes_the_middle_run_and_keeps_every_rate():
    runs = [{"batches_per_s": x, "tag": i} for i, x in enumerate((5.0, 2.0, 9.0, 4.0))]
    m = peers.median_round(runs)
    assert m["tag"] == 3 and m["batches_per_s"] == 4.0  # sorted 2, 4, 5, 9: the lower middle
    assert m["rounds_batches_per_s"] == [5.0, 2.0, 9.0, 4.0]
    assert peers.median_round(runs[:1]) is runs[0]


def test_rounds_rerun_the_sampling_variants_and_report_the_median(tmp_path):
    ds_path = generated_dataset(tmp_path / "g", scale=9, edge_factor=6, dim=8, classes=3, seed=2)
    cmd = [sys.executable, "-m", "benchmarks.peers", "--dataset", str(ds_path), "--work", str(tmp_path / "w"),
           "--memory-limit", "1KiB", "--cache-budget", "1KiB", "--only", "memory", "--batch-size", "16",
           "--batches", "3", "--rounds", "3", "--json"]
    p = subprocess.run(cmd, capture_output=True, text=True, env=cli_env(), timeout=300)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    m = r["results"]["memory"]
    rates = m["rounds_batches_per_s"]
    assert len(rates) == 3 and all(x > 0 for x in rates), m
    assert m["batches_per_s"] == sorted(rates)[1] and r["rounds"] == 3
    assert p.stderr.count("(round ") == 3, p.stderr
    assert r["round_ratios"] == {}  # no uring+cache run, no ratio by round
