"""examples/pyg_graphsage.py — PyG's canonical GraphSAGE example — runs on
stock PyG (in memory) and on flashgnn (on disk), the backends differing only
in the loader import and the dataset path.

How: one small generated graph is built as a flashgnn dataset and also saved
as an in-memory PyG ``Data`` (``data.to_dict()`` in a .pt file). Stock PyG's
NeighborLoader cannot sample here (no pyg-lib, no torch-sparse), so for the
stock run it is given a reference sampler doing what pyg-lib does (uniform
without replacement, every neighbour for -1; directional, not disjoint);
the rest — the loader, GraphSAGE, model.inference(loader) — is PyG's code.
With full neighbourhoods the batches must be identical hop by hop; with
[25, 10] the first hop's edge count (min(degree, 25) per seed) must be. The
example trains both ways from the same seed with deterministic batches (full
neighbourhoods, one batch per epoch, no dropout) and the test accuracies must
agree within 1 point.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

import torch_geometric.loader  # noqa: E402

import flashgnn  # noqa: E402

from conftest import generated_dataset  # noqa: E402
from pyg_reference import ReferenceSampler  # noqa: E402

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "pyg_graphsage.py"
_StockNeighborLoader = torch_geometric.loader.NeighborLoader


class StockWithReferenceSampler(_StockNeighborLoader):
    """torch_geometric.loader.NeighborLoader, given the reference sampler pyg-lib would be."""

    def __init__(self, data, num_neighbors, **kwargs):
        super().__init__(data, num_neighbors=num_neighbors, neighbor_sampler=ReferenceSampler(data, num_neighbors),
                         **kwargs)


@pytest.fixture(scope="module")
def paths(tmp_path_factory):
    d = tmp_path_factory.mktemp("example")
    ds = generated_dataset(d, build_opts=dict(self_loops="drop"), scale=10, edge_factor=8, dim=16, classes=4,
                           seed=3, split=(0.3, 0.2, 0.5))
    pt = d / "data.pt"
    torch.save(flashgnn.to_pyg(ds).to_dict(), pt)
    return str(ds), str(pt)


@pytest.fixture
def example(monkeypatch):
    monkeypatch.setattr(torch_geometric.loader, "NeighborLoader", StockWithReferenceSampler)
    spec = importlib.util.spec_from_file_location("pyg_graphsage", EXAMPLE)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _batches(example, backend, path, num_neighbors):
    NeighborLoader, data = example.load(backend, path)
    mask = NeighborLoader(data, num_neighbors=[-1], input_nodes=None, batch_size=4096).data.train_mask
    return list(NeighborLoader(data, num_neighbors=num_neighbors, input_nodes=mask, batch_size=64, shuffle=False))


def test_batches_have_the_same_shapes_per_hop(example, paths):
    ds, pt = paths
    ours, theirs = _batches(example, "flashgnn", ds, [-1, -1]), _batches(example, "pyg", pt, [-1, -1])
    assert len(ours) == len(theirs) > 1
    for a, b in zip(ours, theirs):
        assert a.batch_size == b.batch_size
        assert list(a.num_sampled_nodes) == list(b.num_sampled_nodes)
        assert list(a.num_sampled_edges) == list(b.num_sampled_edges)
        assert a.x.shape == b.x.shape and a.edge_index.shape == b.edge_index.shape
        assert torch.equal(a.n_id, b.n_id) and torch.equal(a.y, b.y)
    # Sampled hops: the draws differ, the first hop's size (min(degree, 25) per seed) cannot.
    ours, theirs = _batches(example, "flashgnn", ds, [25, 10]), _batches(example, "pyg", pt, [25, 10])
    assert len(ours) == len(theirs)
    deg = np.diff(flashgnn.open(ds).neighbors_csr(np.arange(flashgnn.open(ds).num_nodes))[0])
    for a, b in zip(ours, theirs):
        want = int(np.minimum(deg[a.n_id[:a.batch_size].numpy()], 25).sum())
        assert a.num_sampled_edges[0] == b.num_sampled_edges[0] == want
        assert len(a.num_sampled_nodes) == len(b.num_sampled_nodes) == 3 and a.x.shape[1] == b.x.shape[1]


def test_example_runs_both_ways_and_accuracy_agrees(example, paths):
    ds, pt = paths
    common = ["--epochs", "8", "--hidden", "32", "--num-neighbors=-1,-1", "--batch-size", "100000",
              "--dropout", "0", "--device", "cpu", "--quiet"]
    ours = example.main([ds, "--backend", "flashgnn", *common])
    theirs = example.main([pt, "--backend", "pyg", *common])
    assert ours["backend"] == "flashgnn" and theirs["backend"] == "pyg"
    assert ours["test_acc"] > 0.4  # learned something (4 classes)
    assert abs(ours["test_acc"] - theirs["test_acc"]) <= 0.01, (ours, theirs)
    assert abs(ours["loss"] - theirs["loss"]) < 1e-3
