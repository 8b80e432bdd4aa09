"""flashgnn.LinkNeighborLoader on a typed dataset yields PyG's hetero LinkNeighborLoader batches.

How: PyG's own LinkNeighborLoader runs on the same typed graph held in memory as HeteroData, through
tests/pyg_reference.py's HeteroReferenceSampler (pyg-lib's hetero sampling with -1 fanouts, deterministic,
from a seed dict of one or two node types) inside PyG's own ``edge_sample``; PyG is handed the negatives
flashgnn drew (``NegativeSampling.sample`` patched, in its call order), so seed merging per node type,
``input_id``, ``edge_label_index``, ``edge_label`` and the triplet indices are PyG's code, compared exactly.
Two supervision edge types: one joining two node types (author -> paper: sources and destinations made
distinct apart) and one within a type (paper -> paper: together)."""

from __future__ import annotations

import math
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from torch_geometric.loader import LinkNeighborLoader as PygLinkNeighborLoader  # noqa: E402
from torch_geometric.sampler import NegativeSampling  # noqa: E402

import flashgnn  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pyg_reference import HETERO_COUNTS, HETERO_EDGE_TYPES, HeteroReferenceSampler, write_hetero_graph  # noqa: E402

HOPS = 2


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    path = tmp_path_factory.mktemp("hetero-link") / "typed"
    return path, write_hetero_graph(path, seed=11)


def _eli(data, et, n=20):
    g = torch.Generator().manual_seed(2)
    stored = data[et].edge_index[:, torch.randperm(data[et].edge_index.size(1), generator=g)[:n - 4]]
    s, _, d = et
    rand = torch.stack([torch.randint(HETERO_COUNTS[s], (4,), generator=g), torch.randint(HETERO_COUNTS[d], (4,),
                                                                                           generator=g)])
    return torch.cat([stored, rand], dim=1)


def _theirs(data, et, eli, ours, monkeypatch, **kw):
    s, _, d = et
    queue = []
    for b in ours:
        if "src_index" in b[s]:
            queue.append(b[d].n_id[b[d].dst_neg_index.reshape(-1)])
        elif "edge_label" in b[et] and b[et].edge_label.size(0) > b[et].input_id.size(0):
            p = b[et].input_id.size(0)
            queue += [b[s].n_id[b[et].edge_label_index[0, p:]], b[d].n_id[b[et].edge_label_index[1, p:]]]

    def sample(self, num_samples, endpoint, num_nodes=None):
        got = queue.pop(0)
        assert got.numel() == num_samples, (got.numel(), num_samples)
        return got

    monkeypatch.setattr(NegativeSampling, "sample", sample)
    sampler = HeteroReferenceSampler(data, {t: [-1] * HOPS for t in data.edge_types})
    out = list(PygLinkNeighborLoader(data, [-1] * HOPS, edge_label_index=(et, eli), neighbor_sampler=sampler,
                                     batch_size=8, **kw))
    assert not queue
    return out


@pytest.mark.parametrize("et", [("author", "writes", "paper"), ("paper", "cites", "paper")],
                         ids=["two-types", "one-type"])
@pytest.mark.parametrize("neg", [None, dict(mode="binary", amount=1), dict(mode="binary", amount=1.5),
                                 NegativeSampling("triplet", 2)], ids=["none", "binary1", "binary1.5", "triplet2"])
def test_same_batches_as_pyg_hetero(graph, et, neg, monkeypatch):
    path, data = graph
    eli = _eli(data, et)
    ours = list(flashgnn.LinkNeighborLoader(path, [-1] * HOPS, edge_label_index=(et, eli), neg_sampling=neg,
                                            batch_size=8, memory_budget=0))
    theirs = _theirs(data, et, eli, ours, monkeypatch, neg_sampling=neg)
    assert len(ours) == len(theirs) == math.ceil(eli.size(1) / 8)
    for a, b in zip(ours, theirs):
        for store in [*HETERO_COUNTS, *HETERO_EDGE_TYPES]:
            for k in a[store].keys():
                x, y = a[store][k], b[store][k]
                if isinstance(x, torch.Tensor):
                    assert x.dtype == y.dtype and torch.equal(x, y), (store, k)
                else:  # num_sampled_* lists, num_nodes of a type without features
                    assert (list(x) if isinstance(x, (list, tuple)) else x) == \
                        (list(y) if isinstance(y, (list, tuple)) else y), (store, k)
        # Every link field PyG puts on the batch is there.
        link_keys = {"input_id", "edge_label_index", "edge_label", "src_index", "dst_pos_index", "dst_neg_index"}
        for store in [et[0], et[-1], et]:
            assert (set(b[store].keys()) & link_keys) <= set(a[store].keys()), store
        s, _, d = et
        p = a[et].input_id.numel()
        if neg is not None and not isinstance(neg, dict):  # triplet: the positives are the supervision edges
            assert torch.equal(torch.stack([a[s].n_id[a[s].src_index], a[d].n_id[a[d].dst_pos_index]]),
                               eli[:, a[et].input_id])
        else:
            assert torch.equal(torch.stack([a[s].n_id[a[et].edge_label_index[0, :p]],
                                            a[d].n_id[a[et].edge_label_index[1, :p]]]), eli[:, a[et].input_id])
            # Negatives lie in their own node types.
            assert a[et].edge_label_index[0].max() < a[s].num_nodes
            assert a[et].edge_label_index[1].max() < a[d].num_nodes


def test_typed_link_refusals_and_sample_edges(graph):
    path, data = graph
    et = ("author", "writes", "paper")
    eli = _eli(data, et)
    with pytest.raises(ValueError, match=r"typed \(heterogeneous\) dataset: pass edge_label_index=\(edge_type"):
        flashgnn.LinkNeighborLoader(path, [2], edge_label_index=eli)
    with pytest.raises(ValueError, match=r"key \('author', 'cites', 'paper'\) is not an edge type"):
        flashgnn.LinkNeighborLoader(path, [2], edge_label_index=(("author", "cites", "paper"), eli))
    bad = eli.clone()
    bad[0, 3] = HETERO_COUNTS["author"]
    with pytest.raises(IndexError, match=r"edge_label_index\[0\]\[3\] = 25 \(source node id\) out of range \[0, 25\) "
                                         "of node type 'author'"):
        flashgnn.LinkNeighborLoader(path, [2], edge_label_index=(et, bad))
    fos = ("fos", "topic", "paper")  # no stored edge leads into a fos node: nothing to weigh its draws by
    with pytest.raises(flashgnn.InputError, match='degree-weighted negatives of node type "fos".*--add-reverse'):
        next(iter(flashgnn.LinkNeighborLoader(path, [2], edge_label_index=(fos, _eli(data, fos)), neg_sampling="binary",
                                              neg_distribution="degree", memory_budget=0)))
    loader = flashgnn.LinkNeighborLoader(path, [2, 2], edge_label_index=("author__writes__paper", eli),
                                         neg_sampling="binary", batch_size=8, memory_budget=0)
    one = loader.sample_edges(eli[:, :5], seed=3)
    again = loader.sample_edges(eli[:, :5], seed=3)
    assert torch.equal(one[et].edge_label_index, again[et].edge_label_index)
    assert torch.equal(one["author"].n_id[one[et].edge_label_index[0, :5]], eli[0, :5])


@pytest.mark.parametrize("et", [("author", "writes", "paper"), ("paper", "cites", "paper")])
def test_exclude_seed_edges_removes_the_positives_and_their_reverses(graph, et):
    """The same batch with and without exclude_seed_edges: exactly the positives' edges of their type (both
    directions within one node type) and their reverses' of the rev_ type are gone, each kept edge with its
    e_id; the nodes stay."""
    path, data = graph
    eli = _eli(data, et)
    kw = dict(edge_label_index=(et, eli), neg_sampling="binary", batch_size=20, memory_budget=0)
    plain = flashgnn.LinkNeighborLoader(path, [-1, -1], **kw).sample_edges(eli, seed=5)
    cut = flashgnn.LinkNeighborLoader(path, [-1, -1], exclude_seed_edges=True, **kw).sample_edges(eli, seed=5)
    pos = set(map(tuple, eli.t().tolist()))
    rev = ("paper", "rev_writes", "author") if et[1] == "writes" else et

    def edges(b, t):
        s, _, d = t
        r, c = b[t].edge_index
        return list(zip(zip(b[s].n_id[r].tolist(), b[d].n_id[c].tolist()), b[t].e_id.tolist()))

    removed = 0
    for t in plain.edge_types:
        assert torch.equal(plain[t[0]].n_id, cut[t[0]].n_id)
        drop = [(p, e) for p, e in edges(plain, t) if (t == et and p in pos) or (t == rev and p[::-1] in pos)]
        keep = [x for x in edges(plain, t) if x not in drop]
        assert edges(cut, t) == keep, t
        assert sum(cut[t].num_sampled_edges) == len(keep)
        removed += len(drop)
    assert removed > 0


def test_neg_exclude_edges_draws_no_stored_edge_of_the_edge_type(graph):
    """Uniform negatives within (author, paper) hit a stored `writes` edge now and then; with
    neg_exclude_edges none of a batch's negatives is one (checked against the edge type's own edges: the
    destination's other relations do not count), and the negatives stay within their node types."""
    path, data = graph
    et = ("author", "writes", "paper")
    stored = set(map(tuple, data[et].edge_index.t().tolist()))
    eli = _eli(data, et)
    kw = dict(edge_label_index=(et, eli), neg_sampling=dict(mode="binary", amount=5), batch_size=20,
              memory_budget=0)
    hits = {False: 0, True: 0}
    for exclude in (False, True):
        loader = flashgnn.LinkNeighborLoader(path, [1], neg_exclude_edges=exclude, **kw)
        for seed in range(8):
            b = loader.sample_edges(eli, seed=seed)
            lab, idx = b[et].edge_label, b[et].edge_label_index
            neg = torch.stack([b["author"].n_id[idx[0]], b["paper"].n_id[idx[1]]])[:, lab == 0]
            assert neg.shape[1] == 5 * eli.shape[1]
            assert (neg[0] < HETERO_COUNTS["author"]).all() and (neg[1] < HETERO_COUNTS["paper"]).all()
            hits[exclude] += sum(tuple(p) in stored for p in neg.t().tolist())
    assert hits[False] > 0 and hits[True] == 0, hits



def test_degree_negatives_keep_to_their_type_by_stored_degree(graph):
    """neg_distribution="degree" on a typed dataset: negative sources (authors) and destinations (papers) each
    follow degree^0.75 within their own node type, a node's degree being its stored incoming edges of every
    edge type (an author's: rev_writes; a paper's: cites + writes + topic)."""
    import numpy as np

    path, data = graph
    et = ("author", "writes", "paper")
    deg = {t: np.zeros(n) for t, n in HETERO_COUNTS.items()}
    for (_, _, d), store in data.edge_items():
        np.add.at(deg[d], store.edge_index[1].numpy(), 1)
    loader = flashgnn.LinkNeighborLoader(path, [1], edge_label_index=(et, _eli(data, et)), batch_size=20,
                                         neg_sampling=dict(mode="binary", amount=50), neg_distribution="degree",
                                         memory_budget=0)
    drawn = {"author": np.zeros(HETERO_COUNTS["author"]), "paper": np.zeros(HETERO_COUNTS["paper"])}
    for seed in range(12):
        b = loader.sample_edges(_eli(data, et), seed=seed)
        p = b[et].input_id.numel()
        neg = b[et].edge_label_index[:, p:]
        np.add.at(drawn["author"], b["author"].n_id[neg[0]].numpy(), 1)
        np.add.at(drawn["paper"], b["paper"].n_id[neg[1]].numpy(), 1)
    for t, got in drawn.items():
        w = deg[t] ** 0.75
        want = w / w.sum() * got.sum()
        assert got.sum() == 12 * 1000
        assert (got[w == 0] == 0).all(), t  # never a node of degree 0
        dev = np.abs(got - want) / np.sqrt(np.maximum(want, 1))
        assert dev.max() < 5, (t, dev.max())
        # Not uniform: the draws follow the weights, which differ.
        uniform = got.sum() / len(got)
        assert np.abs(got - uniform).max() > 5 * np.sqrt(uniform), t
