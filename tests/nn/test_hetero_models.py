"""Typed-graph models (flashgnn.nn.hetero): RGAT (MLPerf's R-GAT), RGCN and to_hetero GraphSAGE learn.

How: a small random HeteroData made here with a fixed seed — papers (features, labels), authors (features)
and fields (no features: a learnable embedding) joined by five edge types, reverse ones included. Classes
are planted as in a citation graph: a paper's class shifts its features (weakly) and biases the papers it
cites, its authors (whose features carry their own class) and its field (which only an embedding can
tell apart), so one hop or two, every model has signal — R-GAT has no self-loops and sees a paper's own
features only through its neighbours. Mini-batches are
built by a small sampler in this file with the layout of PyG's hetero NeighborLoader (n_id,
num_sampled_nodes, num_sampled_edges, batch_size; hop by hop), because PyG's own loader needs pyg-lib or
torch-sparse, which this environment lacks. Each model trains a few dozen steps: the loss must fall
clearly and held-out accuracy must beat the majority class by a margin. Trimming per layer must not change
the seeds' outputs; the embedding refusal must name the type and the bytes.
"""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from torch_geometric.data import HeteroData  # noqa: E402
from torch_geometric.nn import GATConv, HeteroConv  # noqa: E402
from torch_geometric.utils import trim_to_layer  # noqa: E402

from flashgnn.nn import zoo  # noqa: E402
from flashgnn.nn.hetero import (  # noqa: E402
    MLPERF_RGAT, RGAT, RGCN, hetero_sage, seed_logits)
from flashgnn.nn.zoo import build_hetero_model  # noqa: E402

SEED = 0
NP, NA, NF = 600, 300, 12  # papers, authors, fields
DP, DA = 16, 8
CLASSES = 4
TRAIN = 400  # papers [0, TRAIN) train, the rest are held out
FANOUT = [5, 5]
EDGE_TYPES = [("paper", "cites", "paper"), ("author", "writes", "paper"), ("paper", "rev_writes", "author"),
              ("paper", "has_topic", "field"), ("field", "rev_has_topic", "paper")]


def make_graph() -> HeteroData:
    """Planted classes, as in a citation graph: a paper's class shows (noisily) in its features, and its
    citations, authors and field lean to the same class; one hop or two, every model has signal."""
    g = torch.Generator().manual_seed(SEED)

    def pick(cls_of_pick, want, n, same):
        # For each of the `want` classes, n picks among the nodes whose class is `cls_of_pick`: of the same
        # class with probability `same`, uniform otherwise.
        by_class = [torch.nonzero(cls_of_pick == c).flatten() for c in range(CLASSES)]
        out = torch.randint(0, len(cls_of_pick), (len(want), n), generator=g)
        hit = torch.rand(len(want), n, generator=g) < same
        for c in range(CLASSES):
            rows = want == c
            m = hit & rows.unsqueeze(1)
            out[m] = by_class[c][torch.randint(0, len(by_class[c]), (int(m.sum()),), generator=g)]
        return out

    y = torch.randint(0, CLASSES, (NP,), generator=g)
    author_cls = torch.randint(0, CLASSES, (NA,), generator=g)
    field_cls = torch.arange(NF) % CLASSES
    d = HeteroData()
    d["paper"].x = 0.3 * torch.randn(CLASSES, DP, generator=g)[y] + torch.randn(NP, DP, generator=g)
    d["author"].x = 0.3 * torch.randn(CLASSES, DA, generator=g)[author_cls] + torch.randn(NA, DA, generator=g)
    d["paper"].y = y
    d["field"].num_nodes = NF
    papers = torch.arange(NP)
    cites = torch.stack([pick(y, y, 3, 0.5).flatten(), papers.repeat_interleave(3)])
    writes = torch.stack([pick(author_cls, y, 2, 0.5).flatten(), papers.repeat_interleave(2)])
    topic = torch.stack([papers, pick(field_cls, y, 1, 0.5).flatten()])
    d["paper", "cites", "paper"].edge_index = cites
    d["author", "writes", "paper"].edge_index = writes
    d["paper", "rev_writes", "author"].edge_index = writes.flip(0)
    d["paper", "has_topic", "field"].edge_index = topic
    d["field", "rev_has_topic", "paper"].edge_index = topic.flip(0)
    return d


def _csc(ei: torch.Tensor, num_dst: int):
    order = torch.argsort(ei[1], stable=True)
    ptr = torch.zeros(num_dst + 1, dtype=torch.long)
    ptr[1:] = torch.cumsum(torch.bincount(ei[1], minlength=num_dst), 0)
    return ptr, ei[0][order]


def _sample_in(ptr, src, dst_nodes, k, g):
    """Up to k in-edges of each of dst_nodes, uniformly without replacement (k < 0: all)."""
    deg = ptr[dst_nodes + 1] - ptr[dst_nodes]
    grp = torch.repeat_interleave(torch.arange(len(dst_nodes)), deg)
    first = torch.cumsum(deg, 0) - deg
    eid = ptr[dst_nodes][grp] + torch.arange(len(grp)) - first[grp]
    if k >= 0:
        # A random order within each destination's edges (sorted by destination, random keys), keep k.
        order = torch.argsort(torch.rand(len(grp), generator=g))
        order = order[torch.argsort(grp[order], stable=True)]
        eid, grp = eid[order], grp[order]
        keep = torch.arange(len(grp)) - first[grp] < k
        eid, grp = eid[keep], grp[keep]
    return src[eid], dst_nodes[grp]


def sample(d: HeteroData, csc, seeds: torch.Tensor, fanouts, g) -> HeteroData:
    """A batch laid out as PyG's hetero NeighborLoader lays it out (directed, not disjoint)."""
    g2l = {t: torch.full((d[t].num_nodes,), -1, dtype=torch.long) for t in d.node_types}
    ids = {t: [] for t in d.node_types}
    count = {t: 0 for t in d.node_types}

    def add(t, glob):  # global ids of type t -> the ones new to the batch, given the next local ids
        new = torch.unique(glob[g2l[t][glob] < 0])
        g2l[t][new] = torch.arange(count[t], count[t] + len(new))
        count[t] += len(new)
        ids[t].append(new)
        return new

    frontier = {t: torch.empty(0, dtype=torch.long) for t in d.node_types}
    frontier["paper"] = add("paper", seeds)
    nsn = {t: [len(frontier[t])] for t in d.node_types}
    edges = {et: [] for et in d.edge_types}
    nse = {et: [] for et in d.edge_types}
    for k in fanouts:
        nxt = {t: [] for t in d.node_types}
        for et in d.edge_types:
            s, _, t = et
            src, dst = _sample_in(*csc[et], frontier[t], k, g)
            nxt[s].append(add(s, src))
            edges[et].append(torch.stack([g2l[s][src], g2l[t][dst]]))
            nse[et].append(src.numel())
        frontier = {t: torch.cat(v) for t, v in nxt.items()}
        for t in d.node_types:
            nsn[t].append(len(frontier[t]))
    b = HeteroData()
    for t in d.node_types:
        n_id = torch.cat(ids[t])
        b[t].n_id, b[t].num_sampled_nodes = n_id, nsn[t]
        if "x" in d[t]:
            b[t].x = d[t].x[n_id]
        else:
            b[t].num_nodes = len(n_id)
    for et in d.edge_types:
        b[et].edge_index, b[et].num_sampled_edges = torch.cat(edges[et], 1), nse[et]
    b["paper"].y = d["paper"].y[b["paper"].n_id]
    b["paper"].batch_size = len(seeds)
    return b


@pytest.fixture(scope="module")
def graph():
    d = make_graph()
    csc = {et: _csc(d[et].edge_index, d[et[-1]].num_nodes) for et in d.edge_types}
    g = torch.Generator().manual_seed(SEED + 1)
    train = []
    for _ in range(2):  # two epochs of shuffled batches, sampled once, shared by every model
        perm = torch.randperm(TRAIN, generator=g)
        train += [sample(d, csc, perm[i:i + 50], FANOUT, g) for i in range(0, TRAIN, 50)]
    held_out = sample(d, csc, torch.arange(TRAIN, NP), [-1, -1], g)
    return d, train, held_out


@pytest.fixture(autouse=True, scope="module")
def one_thread():
    # Tiny tensors: intra-op threads only add overhead, and on a busy 2-core machine they made sampling
    # 50x slower. Restored for the rest of the session.
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def build(name, d, **kw):
    in_dims = {"paper": DP, "author": DA}
    return build_hetero_model(name, d.metadata(), in_dims, hidden=32, out=CLASSES, layers=2, heads=4, dropout=0.1,
                              embed={"field": NF}, target="paper", **kw)


@pytest.mark.parametrize("name", ["rgat", "rgcn", "sage"])
def test_learns(graph, name):
    d, train, held_out = graph
    torch.manual_seed(SEED)
    model = build(name, d)
    opt = torch.optim.Adam(model.parameters(), lr=0.01)
    field0 = model.inputs.tables["field"].weight.detach().clone()
    losses = []
    model.train()
    for b in train * 2:  # 32 steps
        out = seed_logits(model, b)
        assert out.shape == (b["paper"].batch_size, CLASSES)
        loss = torch.nn.functional.cross_entropy(out, b["paper"].y[:b["paper"].batch_size])
        opt.zero_grad()
        loss.backward()
        opt.step()
        losses.append(loss.item())
    first, last = sum(losses[:5]) / 5, sum(losses[-5:]) / 5
    assert last < 0.75 * first, (name, losses)
    # The featureless type's embedding is learned (its rows reach the loss through rev_has_topic).
    assert not torch.equal(field0, model.inputs.tables["field"].weight)

    model.eval()
    with torch.no_grad():
        pred = seed_logits(model, held_out).argmax(1)
    y = held_out["paper"].y[:held_out["paper"].batch_size]
    acc = (pred == y).float().mean().item()
    majority = torch.bincount(y, minlength=CLASSES).max().item() / len(y)
    assert acc > majority + 0.2, (name, acc, majority)


@pytest.mark.parametrize("name", ["rgat", "rgcn"])
def test_trim_keeps_seed_outputs(graph, name, monkeypatch):
    import flashgnn.nn.hetero as hetero

    d, train, _ = graph
    torch.manual_seed(SEED)
    model = build(name, d).eval()
    b = train[0]
    calls = []

    def counting(layer, *args):
        calls.append(layer)
        return trim_to_layer(layer, *args)

    monkeypatch.setattr(hetero, "trim_to_layer", counting)
    with torch.no_grad():
        trimmed = seed_logits(model, b)
        assert calls == [0, 1]  # it did trim (the batch's per-hop counts reached the model)
        full = seed_logits(model, b, trim=False)
        assert calls == [0, 1]
    assert trimmed.shape == full.shape == (50, CLASSES)
    assert torch.allclose(trimmed, full, atol=1e-5)


def test_output_dicts(graph):
    d, train, _ = graph
    b = train[0]
    n_id = {"field": b["field"].n_id}
    torch.manual_seed(SEED)
    # Without target the RGAT ends in a GAT layer of out_channels for every type with in-edges.
    rgat = RGAT(d.metadata(), {"paper": DP, "author": DA}, 8, hidden=16, layers=2, heads=4, embed={"field": NF})
    out = rgat(b.x_dict, b.edge_index_dict, n_id)
    assert {t: tuple(v.shape) for t, v in out.items()} == {t: (b[t].num_nodes, 8) for t in d.node_types}
    rgcn = RGCN(d.metadata(), {"paper": DP, "author": DA}, 5, hidden=16, embed={"field": NF})
    out = rgcn(b.x_dict, b.edge_index_dict, n_id)
    assert {t: tuple(v.shape) for t, v in out.items()} == {t: (b[t].num_nodes, 5) for t in d.node_types}
    sage = hetero_sage(d.metadata(), {"paper": DP, "author": DA}, 5, hidden=16, embed={"field": NF})
    out = sage(b.x_dict, b.edge_index_dict, n_id)
    assert {t: tuple(v.shape) for t, v in out.items()} == {t: (b[t].num_nodes, 5) for t in d.node_types}
    # A target model returns the target's logits only; on a whole graph (no n_id) every row.
    whole = build("rgcn", d).eval()
    assert set(whole(b.x_dict, b.edge_index_dict, n_id)) == {"paper"}
    with torch.no_grad():
        assert seed_logits(whole, d).shape == (NP, CLASSES)


def test_rgat_is_mlperf_definition(graph):
    d, _, _ = graph
    m = RGAT(d.metadata(), 1024, 2983, target="paper")  # IGBH-like: every type 1024 wide, as MLPerf builds it
    assert (MLPERF_RGAT["hidden"], MLPERF_RGAT["layers"], MLPERF_RGAT["heads"], MLPERF_RGAT["dropout"]) == \
        (512, 3, 4, 0.2)
    assert len(m.convs) == 3 and m.dropout.p == 0.2
    assert (m.lin.in_features, m.lin.out_features) == (512, 2983)
    for layer in m.convs:
        assert isinstance(layer, HeteroConv) and layer.aggr == "sum"
        for conv in layer.convs.values():
            assert isinstance(conv, GATConv)
            assert (conv.heads, conv.out_channels, conv.concat, conv.add_self_loops, conv.dropout) == \
                (4, 128, True, False, 0.0)
            # Equal widths at both ends: one shared projection, as GATConv(int, ...) in the reference.
            assert hasattr(conv, "lin") and conv.lin is not None


def test_embedding_refused_with_type_and_bytes(graph):
    d, _, _ = graph
    with pytest.raises(ValueError) as e:
        RGAT(d.metadata(), {"paper": DP, "author": DA}, CLASSES, hidden=64, target="paper",
             embed={"field": 10_000_000}, max_embedding_bytes=1 << 30)
    msg = str(e.value)
    assert "'field'" in msg and str(10_000_000 * 64 * 4) in msg and "max_embedding_bytes" in msg
    for name in zoo.HETERO_MODELS:  # the same check whichever model builds the table
        with pytest.raises(ValueError, match=rf"'field'.* needs {NF * 32 * 4} bytes"):
            build(name, d, max_embedding_bytes=NF * 32 * 4 - 1)
        build(name, d, max_embedding_bytes=NF * 32 * 4)  # exactly enough


def test_registry_and_featureless_types(graph):
    d, train, _ = graph
    assert zoo.HETERO_MODELS == ("rgat", "rgcn", "sage")
    assert "rgat" not in zoo.MODELS  # the homogeneous choices are unchanged
    with pytest.raises(ValueError, match="'gin' on a typed graph"):
        build("gin", d)
    # Without an embedding, fields take no part (with a warning), and the model still runs.
    with pytest.warns(UserWarning, match="field"):
        m = RGAT(d.metadata(), {"paper": DP, "author": DA}, CLASSES, hidden=16, layers=2, target="paper")
    assert seed_logits(m, train[0]).shape == (50, CLASSES)
    # to_hetero(GraphSAGE) cannot serve a type that is no edge type's destination: a clear error, not fx's.
    meta = (d.metadata()[0], [et for et in d.metadata()[1] if et[-1] != "author"])
    with pytest.raises(ValueError, match=r"\['author'\] are not"):
        hetero_sage(meta, {"paper": DP, "author": DA}, CLASSES, embed={"field": NF})
