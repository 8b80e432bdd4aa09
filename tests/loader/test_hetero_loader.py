"""flashgnn.NeighborLoader on a typed dataset yields PyG's HeteroData, equal
to stock PyG's hetero loader (NodeLoader over the same graph held in memory
as HeteroData, sampled by tests/pyg_reference.HeteroReferenceSampler, which
does what pyg-lib does: pyg-lib is not installed here): with -1 fanouts the
same node sets per type and edge sets per edge type (as original ids), and
in fact the same batches; finite fanouts draw min(fanout, count) per
relation, each neighbour equally often; num_neighbors and input_nodes are
parsed as PyG's and refused by name where wrong.

The dataset is written by the format crate's encoders through the test-only
``_core._write_typed_dataset`` (the typed builder is not used)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from torch_geometric.data import HeteroData  # noqa: E402
from torch_geometric.loader import NodeLoader  # noqa: E402
from torch_geometric.sampler import NumNeighbors  # noqa: E402

import flashgnn  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pyg_reference import (HETERO_CLASSES, HETERO_COUNTS, HETERO_DIMS, HETERO_EDGE_TYPES,  # noqa: E402
                           HeteroReferenceSampler, write_hetero_graph)

COUNTS, DIMS, CLASSES, EDGE_TYPES = HETERO_COUNTS, HETERO_DIMS, HETERO_CLASSES, HETERO_EDGE_TYPES


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    """(dataset path, the same graph as an in-memory HeteroData)."""
    path = tmp_path_factory.mktemp("hetero") / "typed"
    data = write_hetero_graph(path, seed=7)
    return path, data

def _pyg_loader(data, num_neighbors, seeds, batch_size):
    sampler = HeteroReferenceSampler(data, {et: num_neighbors for et in data.edge_types})
    return NodeLoader(data, node_sampler=sampler, input_nodes=("paper", torch.as_tensor(seeds)),
                      batch_size=batch_size)


def _node_set(b, t):
    return set(b[t].n_id.tolist())


def _edge_set(b, et):
    s, _, d = et
    row, col = b[et].edge_index
    return sorted(zip(b[s].n_id[row].tolist(), b[d].n_id[col].tolist()))


@pytest.mark.parametrize("hops", [1, 2, 3])
def test_all_neighbours_equal_pyg_hetero_loader(graph, hops):
    path, data = graph
    seeds = np.array([0, 1, 7, 13, 39, 22, 5], dtype=np.int64)
    ours = list(flashgnn.NeighborLoader(path, num_neighbors=[-1] * hops, input_nodes=("paper", seeds),
                                        batch_size=3))
    theirs = list(_pyg_loader(data, [-1] * hops, seeds, 3))
    assert len(ours) == len(theirs) == 3
    for a, b in zip(ours, theirs):
        assert isinstance(a, HeteroData)
        assert sorted(a.node_types) == sorted(b.node_types) and sorted(a.edge_types) == sorted(b.edge_types)
        for t in COUNTS:
            assert set(a[t].keys()) == set(b[t].keys()), t
            assert _node_set(a, t) == _node_set(b, t), t
            # pyg-lib's order too: seeds first, then hop by hop, edge type by edge type.
            assert torch.equal(a[t].n_id, b[t].n_id), t
            assert list(a[t].num_sampled_nodes) == list(b[t].num_sampled_nodes), t
            if DIMS[t]:
                assert torch.equal(a[t].x, b[t].x), t
            if CLASSES[t]:
                assert torch.equal(a[t].y, b[t].y), t
        for et in EDGE_TYPES:
            assert set(a[et].keys()) == set(b[et].keys()), et
            assert _edge_set(a, et) == _edge_set(b, et), et
            assert torch.equal(a[et].edge_index, b[et].edge_index), et
            # The graph's edges are stored in its edge_index order (by
            # destination, then source), so the e_id of each edge is PyG's.
            assert torch.equal(a[et].e_id, b[et].e_id), et
            assert list(a[et].num_sampled_edges) == list(b[et].num_sampled_edges), et
        assert a["paper"].batch_size == b["paper"].batch_size
        assert torch.equal(a["paper"].input_id, b["paper"].input_id)


def test_every_type_appears_even_unreached(graph):
    path, _ = graph
    # fos has no incoming edge types, author is reached only at hop 2 from papers.
    b = flashgnn.NeighborLoader(path, num_neighbors={et: [0] for et in EDGE_TYPES}, input_nodes="paper",
                                batch_size=4).sample([0, 1, 2, 3])
    assert b["author"].n_id.numel() == 0 and b["author"].x.shape == (0, 3)
    assert b["fos"].n_id.numel() == 0 and b["fos"].num_nodes == 0
    for et in EDGE_TYPES:
        assert b[et].edge_index.shape == (2, 0), et
        assert list(b[et].num_sampled_edges) == [0]


def test_finite_fanouts_draw_min_count_uniformly(graph):
    path, data = graph
    edges = {et: data[et].edge_index.t().numpy() for et in EDGE_TYPES}
    fan = {("paper", "cites", "paper"): [3, 2], ("author", "writes", "paper"): [2, 1],
           ("paper", "rev_writes", "author"): [1, 4], ("fos", "topic", "paper"): [-1, 0]}
    loader = flashgnn.NeighborLoader(path, num_neighbors=fan, input_nodes=("paper", None), batch_size=8)
    hub_counts: dict = {}
    trials = 400
    for s in range(trials):
        b = loader.sample([0, 1], seed=s)
        for et in EDGE_TYPES:
            src, _, dst = et
            row, col = b[et].edge_index
            # Each drawn edge's e_id names it in the graph's edge list.
            named = edges[et][b[et].e_id.numpy()]
            assert (named[:, 0] == b[src].n_id[row].numpy()).all() and (named[:, 1] == b[dst].n_id[col].numpy()).all()
            nsn = b[dst].num_sampled_nodes
            for pos in range(b[dst].n_id.numel()):
                hop = 0 if pos < nsn[0] else (1 if pos < nsn[0] + nsn[1] else 2)
                got = b[src].n_id[row[col == pos]].tolist()
                if hop >= 2:
                    assert got == []
                    continue
                v = int(b[dst].n_id[pos])
                nbrs = edges[et][edges[et][:, 1] == v, 0]
                k = fan[et][hop]
                assert len(got) == (len(nbrs) if k < 0 else min(k, len(nbrs))), (et, v, hop)
                assert set(got) <= set(nbrs.tolist()) and len(set(got)) == len(got)
                if pos < 2:  # the seeds
                    for u in got:
                        hub_counts.setdefault((et, v), {}).setdefault(u, 0)
                        hub_counts[(et, v)][u] += 1
    # The seed's own draws: every neighbour included fanout/count of the time (chi-square, 0.999 quantile).
    chi_999 = {2: 13.8, 3: 16.3, 4: 18.5, 5: 20.5, 6: 22.5, 7: 24.3, 8: 26.1, 9: 27.9, 10: 29.6, 11: 31.3, 12: 32.9,
               13: 34.5, 14: 36.1, 15: 37.7, 16: 39.3, 17: 40.8, 18: 42.3}
    for et, hub in ((("paper", "cites", "paper"), 0), (("author", "writes", "paper"), 1)):
        nbrs = edges[et][edges[et][:, 1] == hub, 0].tolist()
        k = fan[et][0]
        assert len(nbrs) > k + 2, f"paper {hub} is a hub of {et}"
        expect = trials * k / len(nbrs)
        counts = [hub_counts[(et, hub)].get(u, 0) for u in nbrs]
        chi = sum((c - expect) ** 2 / expect for c in counts)
        assert chi < chi_999[len(nbrs) - 1], (et, counts, expect)


def test_num_neighbors_and_input_nodes_as_pyg_parses_them(graph):
    path, _ = graph
    some = {("paper", "cites", "paper"): [2], ("author", "writes", "paper"): [1]}
    with pytest.raises(ValueError, match=r"no entry for edge type \('paper', 'rev_writes', 'author'\)"):
        flashgnn.NeighborLoader(path, num_neighbors=some, input_nodes="paper")
    # PyG's NumNeighbors(values, default=...) covers the rest; its keys may be 'src__rel__dst' strings.
    ok = flashgnn.NeighborLoader(path, num_neighbors=NumNeighbors(some, default=[0]), input_nodes="paper")
    assert ok.rel_fanouts == [[2, 1, 0, 0]]
    with pytest.raises(ValueError, match=r"key \('paper', 'cites', 'author'\) is not an edge type"):
        flashgnn.NeighborLoader(path, num_neighbors={("paper", "cites", "author"): [1]}, input_nodes="paper")
    with pytest.raises(ValueError, match="differ in length"):
        flashgnn.NeighborLoader(path, num_neighbors={et: [1] * (1 + (et[1] == "topic")) for et in EDGE_TYPES},
                                input_nodes="paper")
    with pytest.raises(ValueError, match="node type 'venue'"):
        flashgnn.NeighborLoader(path, num_neighbors=[1], input_nodes=("venue", None))
    with pytest.raises(IndexError, match=r"out of range \[0, 25\) of node type 'author'"):
        flashgnn.NeighborLoader(path, num_neighbors=[1], input_nodes=("author", [3, 25]))
    with pytest.raises(ValueError, match="lookahead_budget 1024 needs lookahead >= 1"):
        flashgnn.NeighborLoader(path, num_neighbors=[1], input_nodes="paper", lookahead_budget=1024)
    mask = torch.zeros(25, dtype=torch.bool)
    mask[[2, 4]] = True
    b = next(iter(flashgnn.NeighborLoader(path, num_neighbors=[1], input_nodes=("author", mask), batch_size=2)))
    assert b["author"].n_id[:2].tolist() == [2, 4] and b["author"].input_id.tolist() == [2, 4]
    assert b["author"].batch_size == 2 and "batch_size" not in b["paper"]
    assert isinstance(ok, flashgnn.NeighborLoader)


def _same(a, b):
    for t in COUNTS:
        for k in a[t].keys():
            va, vb = a[t][k], b[t][k]
            assert (torch.equal(va, vb) if isinstance(va, torch.Tensor) else va == vb), (t, k)
    for et in EDGE_TYPES:
        assert torch.equal(a[et].edge_index, b[et].edge_index), et


def test_epochs_workers_and_cache(graph):
    path, _ = graph
    kw = dict(num_neighbors=[2, 2], input_nodes="paper", batch_size=7, shuffle=True)
    loader = flashgnn.NeighborLoader(path, num_workers=2, **kw)
    first = list(loader)
    seen = torch.cat([b["paper"].n_id[: b["paper"].batch_size] for b in first])
    assert sorted(seen.tolist()) == list(range(40))
    again = torch.cat([b["paper"].n_id[: b["paper"].batch_size] for b in loader])
    assert not torch.equal(seen, again), "another epoch, another order"
    # The batches depend on neither the producer count nor a cache.
    cache = flashgnn.Cache(path, [2, 2], budget=1 << 20)
    assert cache.stats()["hot"] == "degree", "auto: degree on a typed dataset (touches is not built for one)"
    for other in (flashgnn.NeighborLoader(path, num_workers=1, **kw),
                  flashgnn.NeighborLoader(path, cache=cache, **kw)):
        got = list(other)
        assert len(got) == len(first) == 6
        for a, b in zip(first, got):
            _same(a, b)
    hot = list(flashgnn.NeighborLoader(path, cache=cache, **kw))
    assert len(hot) == len(first)
    for a, b in zip(first, hot):  # a second pass: dynamic hits on slots, pages and typed rows
        _same(a, b)
    assert cache.stats()["static_hits"] + cache.stats()["dynamic_hits"] > 0


def test_typed_arrays_are_the_engines_own(graph):
    path, _ = graph
    s = flashgnn.Sampler(path, [2], rel_fanouts=[[2, 2, 2, 2]])
    assert [t["name"] for t in s.types["node_types"]] == list(COUNTS)
    b = s.sample(np.arange(5), seed=1)
    assert b.input_type == "paper" and b.batch_size == 5
    p, e = b.node["paper"], b.edge[("paper", "cites", "paper")]
    assert type(p.n_id.base).__name__ == "PySliceContainer"  # owned by the engine's vector, not a copy
    assert type(e.edge_index.base).__name__ == "PySliceContainer"
    assert p.x.base is not None and type(p.x.base.base).__name__ == "PySliceContainer"  # a view of its bytes
    data = flashgnn.loader.hetero.to_hetero_data(b, np.arange(5))
    assert data["paper"].x.data_ptr() == p.x.ctypes.data and data["paper"].n_id.data_ptr() == p.n_id.ctypes.data
    assert b.node["fos"].x is None and b.node["author"].y is None


def test_typed_rows_join_the_static_hot_set(graph, tmp_path):
    path, _ = graph
    kw = dict(num_neighbors=[2, 2], input_nodes="paper", batch_size=7)
    plain = list(flashgnn.NeighborLoader(path, **kw))
    nodes = sum(COUNTS.values())
    for hot in ("degree", "presample"):
        cache = flashgnn.Cache(path, [2, 2], budget=1 << 20, hot=hot, hot_fraction=1.0,
                               presample_seeds=np.arange(COUNTS["paper"]), batch_size=7)
        # More extents than nodes: typed rows beside the slots (slots alone are at most one a node).
        assert cache.stats()["static_entries"] > nodes, hot
        got = list(flashgnn.NeighborLoader(path, cache=cache, **kw))
        for a, b in zip(plain, got):
            _same(a, b)
        st = cache.stats()
        assert st["static_hits"] > 3 * (st["misses"] + st["dynamic_hits"]), (hot, st)
    with pytest.raises(Exception, match="touches"):
        flashgnn.Cache(path, [2, 2], budget=1 << 20, hot="touches")
    # A damaged row is caught when the hot set is read, by file and node.
    bad = tmp_path / "bad"
    shutil.copytree(path, bad)
    f = bad / "t0.features.fg"
    raw = bytearray(f.read_bytes())
    for at in range(512, len(raw), 29):  # past the 512-B header: every row
        raw[at] ^= 0x5A
    f.write_bytes(bytes(raw))
    with pytest.raises(Exception, match=r"t0\.features\.fg.*(row|node)|checksum"):
        flashgnn.Cache(bad, [2, 2], budget=1 << 20, hot="degree", hot_fraction=1.0)


@pytest.mark.parametrize("codec", ["fp16", "int8", "int4"])
def test_encoded_hot_rows_change_only_x_and_within_their_bound(graph, codec):
    path, _ = graph
    kw = dict(num_neighbors=[2, 2], input_nodes="paper", batch_size=7)
    plain = list(flashgnn.NeighborLoader(path, **kw))
    cache = flashgnn.Cache(path, [2, 2], budget=1 << 20, hot="degree", hot_fraction=1.0, row_codec=codec)
    assert cache.stats()["row_codec"] == codec
    changed = 0
    for a, b in zip(plain, flashgnn.NeighborLoader(path, cache=cache, **kw)):
        for t in ("paper", "author"):
            assert torch.equal(a[t].n_id, b[t].n_id)
            xa, xb = a[t].x, b[t].x
            assert xa.dtype == xb.dtype == torch.float32 and xa.shape == xb.shape
            if codec == "fp16":
                bound = xa.abs() * 2.0 ** -11 + 1e-7
            elif codec == "int4":  # per group of 32 values
                g = torch.nn.functional.pad(xa.abs(), (0, -xa.shape[1] % 32)).reshape(len(xa), -1, 32).amax(dim=2)
                bound = (g / 14 * 1.002).repeat_interleave(32, dim=1)[:, :xa.shape[1]]
            else:
                bound = (xa.abs().amax(dim=1, keepdim=True) / 254 * 1.0001).expand_as(xa)
            assert bool(((xa - xb).abs() <= bound).all()), t
            changed += int((xa != xb).any())
        for et in EDGE_TYPES:
            assert torch.equal(a[et].edge_index, b[et].edge_index)
    assert changed > 0, "rows came from the encoded set"
    st = cache.stats()
    assert st["static_hits"] > 3 * (st["misses"] + st["dynamic_hits"]), st
    with pytest.raises(Exception, match="row codec 'int2'|row codec \"int2\""):
        flashgnn.Cache(path, [2, 2], budget=1 << 20, row_codec="int2")


@pytest.mark.parametrize("engine", ["uring", "memory"])
def test_lookahead_and_memory_budget_keep_the_batches(graph, engine):
    """lookahead=S samples the structure S batches ahead and fills every type's rows at the head of the
    window through a Belady tier per node type; memory_budget sizes the shared cache over slots, overflow
    pages and every type's rows. Batches equal the plain loader's, field for field."""
    path, _ = graph
    kw = dict(num_neighbors=[2, 2], input_nodes="paper", batch_size=5, shuffle=True, seed=4, engine=engine)
    plain = list(flashgnn.NeighborLoader(path, memory_budget=0, **kw))
    ahead = flashgnn.NeighborLoader(path, memory_budget=0, lookahead=3, lookahead_budget=1 << 20, **kw)
    for a, b in zip(plain, ahead, strict=True):
        _same(a, b)
    la = ahead.telemetry["lookahead"]
    assert la["superbatch"] == 3 and la["hits"] > 0 and la["per_type"].keys() == {"paper", "author"}, la
    # A budget the window's demand splits: every row still comes, from the tiers or the engine.
    assert la["hits"] + la["misses"] == sum(int(b[t].num_nodes) for b in plain for t in ("paper", "author"))
    one = flashgnn.NeighborLoader(path, memory_budget=0, lookahead=1, **kw).sample([3, 1], seed=9)
    _same(flashgnn.NeighborLoader(path, memory_budget=0, **kw).sample([3, 1], seed=9), one)
    if engine == "uring":
        cached = flashgnn.NeighborLoader(path, memory_budget=40 << 20, quiet=True, **kw)
        assert cached.cache is not None and cached.cache.budget > 0
        for a, b in zip(plain, cached, strict=True):
            _same(a, b)
        st = cached.cache.stats()
        assert st["static_hits"] + st["dynamic_hits"] > 0, st


def test_a_version_3_dataset_samples_without_e_id():
    """A typed dataset written before format version 4 (tests/fixtures/format-v3) has no edge bases in its
    slots: its batches are whole but for ``e_id``, which is left out rather than made up."""
    path = Path(__file__).resolve().parents[1] / "fixtures" / "format-v3" / "typed"
    b = flashgnn.NeighborLoader(path, num_neighbors=[-1, -1], input_nodes="paper", batch_size=4,
                                memory_budget=0).sample([0, 3, 5, 7])
    reached = 0
    for et in b.edge_types:
        assert "e_id" not in b[et], et
        reached += b[et].edge_index.shape[1]
    assert reached > 0 and b["paper"].x.shape[1] == 5
