"""`flashgnn train` on a typed dataset: an IGBH-shaped graph built with --add-reverse trains R-GCN, R-GAT and
to_hetero(GraphSAGE) through the same Trainer; model/dataset mismatches are refused by name; from_pyg takes a
HeteroData."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np
import pytest
import torch

import flashgnn
from flashgnn.train import TrainConfig, Trainer, TrainError


@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    root = tmp_path_factory.mktemp("typed")
    raw, ds = root / "raw", root / "ds"
    flashgnn.generate(raw, model="igbh", scale=4000, feature_dim=16, seed=3, progress=False)
    flashgnn.build(raw, ds, add_reverse=True, progress=False)
    return ds


def _fit(ds, **kw):
    torch.set_num_threads(1)
    opts = dict(model="rgcn", epochs=2, fanout="5,5", hidden=32, batch_size=256, quiet=True, no_progress=True,
                workers=1, threads=1)
    opts.update(kw)
    return Trainer(TrainConfig(str(ds), **opts)).fit()


def test_rgcn_learns_the_typed_graph(typed):
    s = _fit(typed, epochs=3)
    # 19 classes: chance is about 0.05; paper features and citations carry the class.
    assert s["test_acc"] > 0.5, s
    assert s["history"][-1]["train_loss"] < s["history"][0]["train_loss"]


@pytest.mark.parametrize("model", ["rgat", "sage"])
def test_every_typed_model_trains(typed, model):
    s = _fit(typed, model=model, epochs=1, max_batches=3, eval_batches=1)
    assert s["history"][0]["batches"] == 3 and np.isfinite(s["history"][0]["train_loss"])


def test_memory_budget_caches_typed_batches(typed):
    """--memory-budget sizes a cross-batch cache on a typed dataset (slots, overflow pages and typed rows);
    the batches, and so the weights, are the uncached run's."""
    cached = _fit(typed, epochs=1, max_batches=4, eval_batches=1, memory_budget="150MiB")
    plain = _fit(typed, epochs=1, max_batches=4, eval_batches=1, memory_budget=0)
    assert cached["history"][0]["telemetry"]["cache_hit_rate"] > 0
    assert cached["history"][0]["train_loss"] == plain["history"][0]["train_loss"]
    # Lookahead fills every type's rows at the head of its window (a Belady tier per node type): same batches.
    ahead = _fit(typed, epochs=1, max_batches=4, eval_batches=1, memory_budget=0, lookahead=3,
                 lookahead_budget="2MiB")
    assert ahead["history"][0]["train_loss"] == plain["history"][0]["train_loss"]
    la = ahead["history"][0]["lookahead"]
    assert la["superbatch"] == 3 and la["hits"] > 0 and la["fill_reads"] > 0, la


def test_type_fanouts_and_refusals(typed, tmp_path):
    s = _fit(typed, epochs=1, max_batches=2, eval_batches=1, type_fanouts="paper__cites__paper=3,3")
    assert s["history"][0]["batches"] == 2
    with pytest.raises(TrainError, match="paper__nope__paper is not an edge type"):
        _fit(typed, type_fanouts="paper__nope__paper=3,3")
    with pytest.raises(TrainError, match="has 1 hops, --fanout has 2"):
        _fit(typed, type_fanouts="paper__cites__paper=3")
    with pytest.raises(TrainError, match="--model gat on a typed dataset"):
        _fit(typed, model="gat")
    with pytest.raises(TrainError, match="--target-type venue"):
        _fit(typed, target_type="venue")
    with pytest.raises(TrainError, match="node type 'author' has no labels"):
        _fit(typed, target_type="author")


def test_typed_dataset_api_reads_the_target_type(typed):
    ds = flashgnn.open(typed)
    assert ds.is_typed and ds.target_type == "paper"
    assert ("author", "rev_written_by", "paper") in ds.edge_types
    tr = ds.split("train")
    assert len(tr) == ds.split_size("train") and tr.max() < ds.node_type("paper")["count"]
    y = ds.labels(tr[:50])
    assert ((y >= 0) & (y < ds.num_classes)).all()
    with pytest.raises(Exception, match="out of range"):
        ds.labels([ds.node_type("paper")["count"]])


def test_from_pyg_heterodata_round_trip(tmp_path):
    from torch_geometric.data import HeteroData

    g = torch.Generator().manual_seed(0)
    d = HeteroData()
    d["a"].x = torch.randn(50, 4, generator=g)
    d["a"].y = torch.randint(0, 3, (50,), generator=g)
    d["a"].train_mask = torch.rand(50, generator=g) < 0.5
    d["b"].num_nodes = 30
    d["b", "r", "a"].edge_index = torch.stack([torch.randint(0, 30, (200,), generator=g),
                                              torch.randint(0, 50, (200,), generator=g)])
    flashgnn.from_pyg(d, tmp_path / "ds", progress=False)
    ds = flashgnn.open(tmp_path / "ds")
    assert ds.metadata() == (["a", "b"], [("b", "r", "a")])
    assert (ds.split("train") == np.flatnonzero(d["a"].train_mask.numpy())).all()
    assert (ds.labels(np.arange(50)) == d["a"].y.numpy()).all()
    assert ds.node_type("b")["count"] == 30 and ds.node_type("b")["features"] is None
    back = flashgnn.to_pyg(tmp_path / "ds")
    assert back.metadata() == d.metadata()
    assert torch.equal(back["a"].x, d["a"].x) and torch.equal(back["a"].y, d["a"].y)
    assert torch.equal(back["a"].train_mask, d["a"].train_mask) and back["b"].num_nodes == 30
    # The same edges (a multiset: duplicates kept, as the input had them).
    def pairs(ei):
        return sorted(map(tuple, ei.t().tolist()))
    assert pairs(back["b", "r", "a"].edge_index) == pairs(d["b", "r", "a"].edge_index)
    # e_id numbers to_pyg's edge order (by destination, then source): every
    # edge once in a batch of every node with all neighbours, each naming its own.
    et = ("b", "r", "a")
    b = next(iter(flashgnn.NeighborLoader(tmp_path / "ds", num_neighbors=[-1], input_nodes="a", batch_size=50)))
    assert sorted(b[et].e_id.tolist()) == list(range(200))
    named = back[et].edge_index[:, b[et].e_id]
    assert torch.equal(named, torch.stack([b["b"].n_id[b[et].edge_index[0]], b["a"].n_id[b[et].edge_index[1]]]))
    d["b", "r", "a"].edge_attr = torch.ones(200, 1)
    with pytest.raises(flashgnn.InputError, match="edge_attr"):
        flashgnn.from_pyg(d, tmp_path / "ds2", progress=False)


def test_ddp_two_processes_on_a_typed_dataset(typed, tmp_path):
    """torchrun with a typed model: its last layer computes only the edge types into the target, so DDP runs
    with find_unused_parameters; both ranks end with the same weights."""
    from conftest import cli_env

    metrics = tmp_path / "ddp.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m",
           "flashgnn.train", str(typed), "--model", "rgat", "--epochs", "1", "--fanout", "4,3", "--hidden", "16",
           "--batch-size", "256", "--max-batches", "3", "--eval-batches", "1", "--workers", "1", "--no-progress",
           "--threads", "1", "--metrics-json", str(metrics)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=cli_env(), timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert "(uring, 2 processes)" in p.stdout
    m = json.loads(metrics.read_text())
    assert m["summary"]["world_size"] == 2 and m["summary"]["ranks_agree"]
