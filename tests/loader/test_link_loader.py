"""flashgnn.LinkNeighborLoader yields PyG's LinkNeighborLoader batches:
same nodes, edges, label layout, negative counts and triplet indices; its
flashgnn options (exclusion of seed edges, of true-edge negatives) do what
they say; bad and unsupported arguments are refused by name.

How: PyG's own LinkNeighborLoader runs on the same graph held in memory.
Stock PyG cannot sample without pyg-lib or torch-sparse (neither exists
here), so it is given tests/pyg_reference.py's LinkReferenceSampler:
pyg-lib's node sampling with -1 fanouts (deterministic) inside PyG's own
``edge_sample``. Negatives are random in both, so PyG is handed the
negatives flashgnn drew (its ``NegativeSampling.sample`` patched to return
them, in its call order): everything else — seed merging, ``input_id``,
``edge_label_index``, ``edge_label`` (shifted user labels), the triplet
indices — is PyG's code, compared exactly.
"""

from __future__ import annotations

import math
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from torch_geometric.loader import LinkNeighborLoader as PygLinkNeighborLoader  # noqa: E402
from torch_geometric.sampler import NegativeSampling  # noqa: E402

import flashgnn  # noqa: E402

from conftest import generated_dataset  # noqa: E402
from pyg_reference import LinkReferenceSampler, stored_data  # noqa: E402

HOPS = 2


@pytest.fixture(scope="module")
def ds_path(tmp_path_factory):
    return generated_dataset(tmp_path_factory.mktemp("link"), scale=7, edge_factor=4, dim=4, classes=3, seed=3)


@pytest.fixture(scope="module")
def graph(ds_path):
    """The dataset as an in-memory PyG Data: edge_index row = neighbour, col = node (as stored)."""
    return stored_data(ds_path)


@pytest.fixture(scope="module")
def eli(graph):
    """50 supervision edges: 40 stored edges and 10 pairs drawn at random."""
    g = torch.Generator().manual_seed(1)
    stored = graph.edge_index[:, torch.randperm(graph.edge_index.size(1), generator=g)[:40]]
    return torch.cat([stored, torch.randint(graph.num_nodes, (2, 10), generator=g)], dim=1)


def ours(ds_path, eli, **kw):
    kw.setdefault("memory_budget", 0)
    kw.setdefault("batch_size", 16)
    return list(flashgnn.LinkNeighborLoader(ds_path, [-1] * HOPS, edge_label_index=eli, **kw))


def theirs(graph, eli, batches, monkeypatch, **kw):
    """PyG's loader over ``graph``, drawing the negatives of ``batches`` (flashgnn's) in PyG's order."""
    queue = []
    for b in batches:
        if "src_index" in b:
            queue.append(b.n_id[b.dst_neg_index.reshape(-1)])
        elif "edge_label" in b and b.edge_label.size(0) > b.input_id.size(0):
            p = b.input_id.size(0)
            queue += [b.n_id[b.edge_label_index[0, p:]], b.n_id[b.edge_label_index[1, p:]]]

    def sample(self, num_samples, endpoint, num_nodes=None):
        got = queue.pop(0)
        assert got.numel() == num_samples, (got.numel(), num_samples)
        return got

    monkeypatch.setattr(NegativeSampling, "sample", sample)
    kw.setdefault("batch_size", 16)
    out = list(PygLinkNeighborLoader(graph, [-1] * HOPS, edge_label_index=eli,
                                     neighbor_sampler=LinkReferenceSampler(graph, [-1] * HOPS), **kw))
    assert not queue
    return out


def assert_same(a_batches, b_batches):
    assert len(a_batches) == len(b_batches) > 0
    for a, b in zip(a_batches, b_batches):
        # num_nodes: an attribute of the test's in-memory graph, which PyG copies into every batch.
        assert set(a.keys()) == set(b.keys()) - {"num_nodes"}, (sorted(a.keys()), sorted(b.keys()))
        for k in a.keys():
            x, y = a[k], b[k]
            if isinstance(x, torch.Tensor):
                assert x.dtype == y.dtype and torch.equal(x, y), k
            else:
                assert list(x) == list(y), k


@pytest.mark.parametrize("neg", [None, dict(mode="binary", amount=1), dict(mode="binary", amount=2.5),
                                 dict(mode="triplet", amount=1), NegativeSampling("triplet", 3)],
                         ids=["none", "binary1", "binary2.5", "triplet1", "triplet3"])
def test_same_batches_as_pyg(ds_path, graph, eli, neg, monkeypatch):
    a = ours(ds_path, eli, neg_sampling=neg)
    assert_same(a, theirs(graph, eli, a, monkeypatch, neg_sampling=neg))
    mode = None if neg is None else (neg["mode"] if isinstance(neg, dict) else neg.mode.value)
    amount = 1 if neg is None else (neg["amount"] if isinstance(neg, dict) else neg.amount)
    for b in a:
        p = b.input_id.numel()
        if mode == "triplet":
            assert b.dst_neg_index.shape == ((p,) if amount == 1 else (p, amount))
            src, pos = b.n_id[b.src_index], b.n_id[b.dst_pos_index]
            assert torch.equal(torch.stack([src, pos]), eli[:, b.input_id])
        else:
            k = math.ceil(p * amount) if mode else 0
            assert b.edge_label_index.shape == (2, p + k)
            assert torch.equal(b.n_id[b.edge_label_index[:, :p]], eli[:, b.input_id])
        if mode == "binary":
            assert b.edge_label.dtype == torch.float32
            assert b.edge_label.tolist() == [1.0] * p + [0.0] * k


def test_user_labels_shifted_as_pyg(ds_path, graph, eli, monkeypatch):
    labels = torch.arange(eli.size(1)) % 3  # min 0: PyG shifts every label by one, 0 = negative
    for neg in (None, dict(mode="binary", amount=2)):
        a = ours(ds_path, eli, edge_label=labels, neg_sampling=neg)
        assert_same(a, theirs(graph, eli, a, monkeypatch, edge_label=labels, neg_sampling=neg))
    b = a[0]
    assert b.edge_label[:16].tolist() == (labels[:16] + 1).tolist() and b.edge_label[16:].eq(0).all()


def test_deprecated_ratio_shuffle_and_input_id(ds_path, graph, eli, monkeypatch):
    with pytest.warns(DeprecationWarning, match="neg_sampling_ratio"):
        a = ours(ds_path, eli, neg_sampling_ratio=2)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        assert_same(a, theirs(graph, eli, a, monkeypatch, neg_sampling_ratio=2))
    loader = flashgnn.LinkNeighborLoader(ds_path, [2, 2], edge_label_index=eli, batch_size=16, shuffle=True,
                                         seed=4, memory_budget=0, input_id=torch.arange(50) + 1000)
    assert isinstance(loader, PygLinkNeighborLoader) and len(loader) == 4
    e0, e1 = [torch.cat([b.input_id for b in loader]) for _ in range(2)]
    assert sorted(e0.tolist()) == list(range(1000, 1050)) and not torch.equal(e0, e1)  # each epoch reshuffles
    loader.set_epoch(0)
    assert torch.equal(torch.cat([b.input_id for b in loader]), e0)  # and is reproducible


def test_exclude_seed_edges_removes_positives_and_reverses(ds_path, eli):
    def leaked(batches):
        """Sampled edges of each batch that are one of its own positives, or a reverse."""
        n = 0
        for b in batches:
            own = eli[:, b.input_id]
            held = set(map(tuple, own.t().tolist())) | set(map(tuple, own.flip(0).t().tolist()))
            n += sum((int(b.n_id[r]), int(b.n_id[c])) in held for r, c in b.edge_index.t())
        return n

    assert leaked(ours(ds_path, eli, neg_sampling=dict(mode="binary"))) > 0  # PyG's default keeps them
    clean = ours(ds_path, eli, neg_sampling=dict(mode="binary"), exclude_seed_edges=True)
    assert leaked(clean) == 0
    for b in clean:
        assert sum(b.num_sampled_edges) == b.edge_index.size(1)


def test_negatives_exclude_stored_edges(ds_path, graph, eli):
    stored = set(map(tuple, graph.edge_index.t().tolist()))
    for neg in (dict(mode="binary", amount=3), dict(mode="triplet", amount=3)):
        for exclude in (False, True):
            hits = 0
            for b in ours(ds_path, eli, neg_sampling=neg, neg_distribution="degree", neg_exclude_edges=exclude):
                if "src_index" in b:
                    s = b.n_id[b.src_index].repeat_interleave(3)
                    d = b.n_id[b.dst_neg_index.reshape(-1)]
                else:
                    p = b.input_id.numel()
                    s, d = b.n_id[b.edge_label_index[:, p:]]
                hits += sum((int(u), int(v)) in stored for u, v in zip(s, d))
            assert (hits == 0) == exclude, (neg, exclude, hits)


@pytest.mark.parametrize("kw, err, words", [
    (dict(edge_label_index=torch.tensor([[0, 1], [2, 128]])), IndexError, ["edge_label_index[1][1] = 128", "[0, 128)"]),
    (dict(edge_label_index=torch.tensor([[-1], [2]])), IndexError, ["edge_label_index[0][0] = -1"]),
    (dict(edge_label_index=torch.zeros(3, 4, dtype=torch.long)), ValueError, ["shape (3, 4)", "[2, num_edges]"]),
    (dict(edge_label_index=None), ValueError, ["edge_label_index=None"]),
    (dict(edge_label_index=(("n", "to", "n"), torch.zeros(2, 1, dtype=torch.long))), ValueError,
     ["edge_label_index=(", "typed"]),
    (dict(neg_sampling=dict(mode="binary", amount=0)), ValueError, ["neg_sampling", "amount=0", "> 0"]),
    (dict(neg_sampling=dict(mode="triplet", amount=1.5)), ValueError, ["amount=1.5", "integer"]),
    (dict(neg_sampling=dict(mode="pairs")), ValueError, ["mode='pairs'"]),
    (dict(neg_sampling=dict(mode="binary", ratio=1)), TypeError, ["ratio"]),
    (dict(neg_sampling=NegativeSampling("binary", src_weight=torch.ones(128))), ValueError, ["src_weight"]),
    (dict(neg_sampling_ratio=-1), ValueError, ["neg_sampling_ratio", "amount=-1"]),
    (dict(edge_label=torch.ones(3)), ValueError, ["edge_label has 3 entries", "50 edges"]),
    (dict(edge_label=torch.ones(50), neg_sampling=dict(mode="triplet")), ValueError, ["edge_label", "triplet"]),
    (dict(input_id=torch.arange(7)), ValueError, ["input_id", "50"]),
    (dict(disjoint=True), ValueError, ["disjoint"]),
    (dict(replace=True), ValueError, ["replace"]),
    (dict(edge_label_time=torch.zeros(50)), ValueError, ["edge_label_time"]),
    (dict(neighbor_sampler=object()), ValueError, ["neighbor_sampler"]),
    (dict(neg_distribution="pagerank"), ValueError, ["neg_distribution='pagerank'"]),
    (dict(lookahead=2), ValueError, ["lookahead"]),
    (dict(input_nodes=torch.arange(3)), ValueError, ["input_nodes"]),
    (dict(collate_fn=print), ValueError, ["collate_fn"]),
    (dict(bogus=1), TypeError, ["bogus", "accepted"]),
])
def test_refused_by_name(ds_path, eli, kw, err, words):
    kw.setdefault("edge_label_index", eli)
    with pytest.raises(err) as e:
        flashgnn.LinkNeighborLoader(ds_path, [2], memory_budget=0, **kw)
    for w in words:
        assert w in str(e.value), (w, str(e.value))


def test_one_request_per_batch(ds_path, eli):
    """Seeds and negatives go to the engine as one batch: the loader's
    batches are the engine's link batches, and each equals the node batch
    of its endpoints."""
    loader = flashgnn.LinkNeighborLoader(ds_path, [3, 2], edge_label_index=eli, batch_size=16, memory_budget=0,
                                         neg_sampling=dict(mode="binary"))
    batches = list(loader)
    assert loader.telemetry["batches"] == len(batches) == 4
    b = batches[0]
    seeds = b.n_id[:b.num_sampled_nodes[0]]
    assert torch.equal(seeds, torch.unique(b.n_id[b.edge_label_index.reshape(-1)]))


def _memmap_pair(tmp_path, eli):
    """``eli`` as two memory-mapped int64 files, as ``Dataset.link_split(..., mmap=True)`` gives them."""
    out = []
    for r, name in enumerate(("src", "dst")):
        np.save(tmp_path / f"{name}.npy", eli[r].numpy().astype(np.int64))
        out.append(np.load(tmp_path / f"{name}.npy", mmap_mode="r"))
    return tuple(out)


def _same(a, b):
    assert len(a) == len(b) > 0
    for x, y in zip(a, b):
        assert set(x.keys()) == set(y.keys())
        for k in x.keys():
            assert torch.equal(x[k], y[k]) if isinstance(x[k], torch.Tensor) else list(x[k]) == list(y[k]), k


def test_memmapped_pair_and_groups_give_the_same_batches(ds_path, eli, tmp_path, monkeypatch):
    """A memory-mapped (src, dst) pair is read a group at a time and gives the in-memory [2, M] batches;
    so do groups of a few batches (GROUP_EDGES lowered to 32 = 2 batches): batch i keeps seed base + i."""
    from flashgnn.loader import link as link_mod

    pair = _memmap_pair(tmp_path, eli)
    kw = dict(neg_sampling=dict(mode="binary", amount=2), shuffle=True, seed=5)
    whole = ours(ds_path, eli, **kw)
    _same(whole, ours(ds_path, pair, **kw))
    monkeypatch.setattr(link_mod, "GROUP_EDGES", 32)
    _same(whole, ours(ds_path, pair, **kw))
    for drop_last in (False, True):  # 50 edges: the last batch of 2 is the last group's, dropped or not
        a = ours(ds_path, pair, drop_last=drop_last)
        assert [b.input_id.numel() for b in a] == [16, 16, 16] + ([] if drop_last else [2])


def test_block_shuffle_beyond_the_permutation_limit_visits_every_edge_once(ds_path, eli, tmp_path, monkeypatch):
    """Beyond PERMUTATION_EDGES_MAX the order is a block shuffle (blocks of 4, 2 blocks per window here):
    every edge once per epoch, a new order each epoch, the same order again for the same epoch; shards of
    2 ranks are disjoint and cover the order cut to a multiple of 2, as the permutation's shards."""
    from flashgnn.loader import link as link_mod

    monkeypatch.setattr(link_mod, "PERMUTATION_EDGES_MAX", 8)
    monkeypatch.setattr(link_mod, "SHUFFLE_BLOCK", 4)
    monkeypatch.setattr(link_mod, "SHUFFLE_WINDOW_BLOCKS", 2)
    monkeypatch.setattr(link_mod, "GROUP_EDGES", 16)
    pair = _memmap_pair(tmp_path, eli)
    loader = flashgnn.LinkNeighborLoader(ds_path, [2, 2], edge_label_index=pair, batch_size=7, shuffle=True,
                                         seed=4, memory_budget=0)
    assert len(loader) == 8
    e0, e1 = [torch.cat([b.input_id for b in loader]) for _ in range(2)]
    assert sorted(e0.tolist()) == list(range(50)) and not torch.equal(e0, e1)
    loader.set_epoch(0)
    b0 = list(loader)
    assert torch.equal(torch.cat([b.input_id for b in b0]), e0)
    for b in b0:  # each batch's positives are the edges at its input_id
        p = b.input_id.numel()
        assert torch.equal(b.n_id[b.edge_label_index[:, :p]], eli[:, b.input_id])
    shards = [torch.cat([b.input_id for b in flashgnn.LinkNeighborLoader(
        ds_path, [2, 2], edge_label_index=pair, batch_size=7, shuffle=True, seed=4, memory_budget=0, rank=r,
        world_size=2)]) for r in range(2)]
    assert len(shards[0]) == len(shards[1]) == 25
    assert set(shards[0].tolist()) | set(shards[1].tolist()) == set(range(50))


def test_memmapped_ids_are_checked_as_they_are_read(ds_path, eli, tmp_path):
    bad = eli.clone()
    bad[1, 37] = 128
    pair = _memmap_pair(tmp_path, bad)
    loader = flashgnn.LinkNeighborLoader(ds_path, [2], edge_label_index=pair, batch_size=16, memory_budget=0)
    with pytest.raises(IndexError, match=r"edge_label_index\[1\]\[37\] = 128 \(destination node id\)"):
        list(loader)


def test_nothing_is_held_per_node_or_per_edge(ds_path, eli, tmp_path):
    """The loader's inner node loader holds no seeds (not an arange over every node), and a memory-mapped
    pair stays mapped: no array of the loader grows with the nodes or the supervision edges."""
    pair = _memmap_pair(tmp_path, eli)
    loader = flashgnn.LinkNeighborLoader(ds_path, [2], edge_label_index=pair, batch_size=16, memory_budget=0)
    assert len(loader._nodes.input_nodes) == 0
    assert loader._src is pair[0] and loader._dst is pair[1]
    assert not hasattr(loader, "input_nodes")
