"""flashgnn.pyg.remote_backend on a typed dataset, as PyG's remote-backend
API defines it: the FeatureStore serves ``TensorAttr(group_name=<node type>,
attr_name="x"|"y", index=<local ids>)`` with one engine request per type,
the GraphStore lists one ``EdgeAttr((src, rel, dst), "csc", size=(N_src,
N_dst))`` per edge type, and NeighborSampler returns PyG's
HeteroSamplerOutput from the typed engine (one engine sampler per loader).
Stock PyG's loaders over ``(fs, gs)`` yield the HeteroData of
``flashgnn.NeighborLoader`` (same seed) and, for -1 fanouts, of PyG's
NodeLoader on the graph in memory sampled by the HeteroReferenceSampler;
unknown node and edge types are refused by name.

The dataset is written by ``_core._write_typed_dataset`` (test-only)."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from torch_geometric.data import HeteroData  # noqa: E402
from torch_geometric.loader import NeighborLoader as PygNeighborLoader  # noqa: E402
from torch_geometric.loader import NodeLoader  # noqa: E402

import flashgnn  # noqa: E402
import flashgnn.pyg  # noqa: E402
from flashgnn import _core  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pyg_reference import (HETERO_CLASSES, HETERO_COUNTS, HETERO_DIMS, HETERO_EDGE_TYPES,  # noqa: E402
                           HeteroReferenceSampler, write_hetero_graph)

COUNTS, DIMS, CLASSES, EDGE_TYPES = HETERO_COUNTS, HETERO_DIMS, HETERO_CLASSES, HETERO_EDGE_TYPES


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    """(dataset path, the same graph as an in-memory HeteroData)."""
    path = tmp_path_factory.mktemp("hetero_backend") / "typed"
    data = write_hetero_graph(path, seed=11)
    return str(path), data

def _same_batch(a, b, what):
    """x, y, node ids, edges and per-hop counts of every node and edge type, and the seeds' fields."""
    for t in COUNTS:
        assert torch.equal(a[t].n_id, b[t].n_id), (what, t)
        assert list(a[t].num_sampled_nodes) == list(b[t].num_sampled_nodes), (what, t)
        for k in ("x", "y"):
            assert (k in a[t]) == (k in b[t]), (what, t, k)
            if k in a[t]:
                assert torch.equal(a[t][k], b[t][k]), (what, t, k)
        assert a[t].num_nodes == b[t].num_nodes, (what, t)
    for et in EDGE_TYPES:
        assert torch.equal(a[et].edge_index, b[et].edge_index), (what, et)
        assert list(a[et].num_sampled_edges) == list(b[et].num_sampled_edges), (what, et)
        assert "e_id" not in a[et], (what, et)  # the store keeps no global edge numbering
    assert a["paper"].batch_size == b["paper"].batch_size, what
    assert torch.equal(a["paper"].input_id, b["paper"].input_id), what


def test_stores_describe_and_serve_every_type(graph):
    path, data = graph
    fs, gs, sampler = flashgnn.pyg.remote_backend(path, num_neighbors=[2])
    assert [(a.group_name, a.attr_name) for a in fs.get_all_tensor_attrs()] == [
        ("paper", "x"), ("paper", "y"), ("author", "x")]
    attrs = gs.get_all_edge_attrs()
    assert [a.edge_type for a in attrs] == EDGE_TYPES
    assert all(a.layout.value == "csc" and a.is_sorted for a in attrs)
    assert [a.size for a in attrs] == [(COUNTS[s], COUNTS[d]) for s, _, d in EDGE_TYPES]
    assert fs.get_tensor_size(group_name="paper", attr_name="x") == (40, 6)
    assert fs.get_tensor_size(group_name="paper", attr_name="y") == (40,)
    assert fs.get_tensor_size(group_name="author", attr_name="y") is None
    before = fs.gather_calls
    idx = torch.tensor([3, 0, 24, 3])
    got = fs.get_tensor(group_name="author", attr_name="x", index=idx)
    assert torch.equal(got, data["author"].x[idx]) and fs.gather_calls - before == 1  # one engine request
    px, py = fs.multi_get_tensor([flashgnn.pyg.backend.TensorAttr("paper", "x", idx),
                                  flashgnn.pyg.backend.TensorAttr("paper", "y", idx)])
    assert torch.equal(px, data["paper"].x[idx]) and torch.equal(py, data["paper"].y[idx])
    assert fs.gather_calls - before == 2  # x and y of one index: one request
    assert torch.equal(fs["paper", "y", None], data["paper"].y)  # PyG's view syntax, the whole type
    # PyG's remote-backend helpers read sizes from these stores.
    from torch_geometric.data import remote_backend_utils as rbu
    assert [rbu.num_nodes(fs, gs, t) for t in COUNTS] == list(COUNTS.values())
    assert sampler.rel_fanouts == [[2, 2, 2, 2]]


def test_unknown_node_and_edge_types_are_refused_by_name(graph):
    path, _ = graph
    fs, gs, _ = flashgnn.pyg.remote_backend(path, num_neighbors=[1])
    with pytest.raises(KeyError, match=r"no node type 'venue' \(group_name\); node types: paper, author, fos"):
        fs.get_tensor(group_name="venue", attr_name="x", index=torch.tensor([0]))
    with pytest.raises(KeyError, match="no node type 'venue'"):
        fs.get_tensor_size(group_name="venue", attr_name="x")
    with pytest.raises(KeyError, match=r"node type 'fos' has no attribute 'x' \(has: none\)"):
        fs.get_tensor(group_name="fos", attr_name="x", index=torch.tensor([0]))
    with pytest.raises(KeyError, match=r"node type 'author' has no attribute 'y' \(has: x\)"):
        fs.get_tensor(group_name="author", attr_name="y", index=torch.tensor([0]))
    with pytest.raises(IndexError, match=r"node id 25 out of range \[0, 25\) of node type 'author'"):
        fs.get_tensor(group_name="author", attr_name="x", index=torch.tensor([1, 25]))
    with pytest.raises(KeyError, match=r"no edge type \('paper', 'cites', 'author'\); edge types: "):
        gs.get_edge_index(edge_type=("paper", "cites", "author"), layout="csc")
    with pytest.raises(RuntimeError, match=r"edge type \('paper', 'cites', 'paper'\)"):
        gs.get_edge_index(edge_type=("paper", "cites", "paper"), layout="csc")
    with pytest.raises(ValueError, match=r"key \('paper', 'x', 'paper'\) is not an edge type"):
        flashgnn.pyg.remote_backend(path, num_neighbors={("paper", "x", "paper"): [1]})
    with pytest.raises(ValueError, match="memory_budget"):
        flashgnn.pyg.remote_backend(path, num_neighbors=[1], memory_budget=1 << 20)
    with pytest.raises(ValueError, match="node type 'venue'"):
        flashgnn.pyg.NeighborLoader(path, num_neighbors=[1], input_nodes=("venue", None))
    fs, gs, sampler = flashgnn.pyg.remote_backend(path, num_neighbors=[1])
    with pytest.raises(ValueError, match="no node type 'venue'"):
        next(iter(NodeLoader((fs, gs), node_sampler=sampler, input_nodes=("venue", torch.tensor([0])))))
    two = flashgnn.pyg.NeighborSampler(path, num_neighbors=[2])
    with pytest.raises(ValueError, match=r"neighbor_sampler samples \[\[2, 2, 2, 2\]\]"):
        flashgnn.pyg.NeighborLoader((fs, gs), num_neighbors=[1], neighbor_sampler=two, input_nodes="paper")


@pytest.mark.parametrize("hops", [1, 2])
def test_all_neighbours_equal_flashgnn_and_pyg_in_memory(graph, hops):
    path, data = graph
    seeds = np.array([0, 1, 7, 13, 39, 22, 5], dtype=np.int64)
    nn = {et: [-1] * hops for et in EDGE_TYPES}
    before = _core.samplers_opened()
    stock = flashgnn.pyg.NeighborLoader(path, num_neighbors=nn, input_nodes=("paper", seeds), batch_size=3)
    assert type(stock) is PygNeighborLoader  # PyG's own loader, over (fs, gs)
    ours = list(stock)
    assert _core.samplers_opened() - before == 1  # one engine sampler: it samples and serves the store
    fs, gs, sampler = flashgnn.pyg.remote_backend(path, num_neighbors=nn)
    node_loader = list(NodeLoader((fs, gs), node_sampler=sampler, input_nodes=("paper", torch.from_numpy(seeds)),
                                  batch_size=3))
    native = list(flashgnn.NeighborLoader(path, num_neighbors=nn, input_nodes=("paper", seeds), batch_size=3))
    ref = HeteroReferenceSampler(data, nn)
    theirs = list(NodeLoader(data, node_sampler=ref, input_nodes=("paper", torch.from_numpy(seeds)), batch_size=3))
    assert len(ours) == len(node_loader) == len(native) == len(theirs) == 3
    for a, b, c, d in zip(ours, node_loader, native, theirs):
        assert isinstance(a, HeteroData)
        _same_batch(a, b, "NodeLoader")
        _same_batch(a, c, "flashgnn.NeighborLoader")
        _same_batch(a, d, "PyG in memory")
    assert fs.gather_calls == 0  # every row came with the batch its sampler gathered


def test_finite_fanouts_equal_flashgnn_loader_with_the_same_seed(graph):
    path, _ = graph
    nn = {("paper", "cites", "paper"): [3, 2], ("author", "writes", "paper"): [2, 1],
          ("paper", "rev_writes", "author"): [1, 4], ("fos", "topic", "paper"): [-1, 0]}
    fs, gs, sampler = flashgnn.pyg.remote_backend(path, num_neighbors=nn, seed=5)
    assert sampler.rel_fanouts == [[3, 2, 1, -1], [2, 1, 4, 0]]
    seeds = torch.tensor([4, 9, 0, 31, 2, 17, 8, 33])
    native = flashgnn.NeighborLoader(path, num_neighbors=nn, input_nodes="paper")
    got = list(NodeLoader((fs, gs), node_sampler=sampler, input_nodes=("paper", seeds), batch_size=3))
    for i, a in enumerate(got):
        input_id = torch.arange(3 * i, min(3 * i + 3, len(seeds)))
        b = native.sample(seeds[input_id].numpy(), seed=sampler._batch_seed(input_id))
        b["paper"].input_id = input_id
        _same_batch(a, b, f"batch {i}")
    # A boolean mask: PyG's input_id is then the node id.
    mask = torch.zeros(25, dtype=torch.bool)
    mask[[2, 4, 11]] = True
    b = next(iter(flashgnn.pyg.NeighborLoader((fs, gs), num_neighbors=nn, input_nodes=("author", mask),
                                              batch_size=3)))
    assert b["author"].input_id.tolist() == [2, 4, 11] and b["author"].n_id[:3].tolist() == [2, 4, 11]
    assert b["author"].batch_size == 3 and torch.equal(b["author"].x[:3], fs["author", "x", torch.tensor([2, 4, 11])])
