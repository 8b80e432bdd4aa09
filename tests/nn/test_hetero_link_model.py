"""flashgnn.nn.link.HeteroLinkModel scores a typed link batch's pairs as the same weights do on the whole
graph in memory: with every neighbour sampled (-1 fanouts, as many hops as layers) a seed's embedding is its
full-graph embedding, so each pair's logit must equal the full-graph encoder's rows decoded for that pair."""

from __future__ import annotations

import sys
import warnings
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

import flashgnn  # noqa: E402
from flashgnn.nn.link import HeteroLinkModel, build_link_model  # noqa: E402

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from pyg_reference import HETERO_COUNTS, HETERO_DIMS, write_hetero_graph  # noqa: E402

HOPS = 2


@pytest.fixture(scope="module")
def graph(tmp_path_factory):
    path = tmp_path_factory.mktemp("hetero-link-model") / "typed"
    return path, write_hetero_graph(path, seed=5)


def _model(kind, data, et, decoder):
    in_dims = {t: d for t, d in HETERO_DIMS.items() if d}
    # fos has no features: rgcn and rgat learn a row per node; to_hetero(GraphSAGE) needs every type to be a
    # destination, which fos is not, so sage leaves it out (its edge type takes no part).
    embed = {} if kind == "sage" else {"fos": HETERO_COUNTS["fos"]}
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", UserWarning)
        return HeteroLinkModel(kind, data.metadata(), et, in_dims, 16, HOPS, 0.0, decoder, embed=embed,
                               heads=4).eval()


@pytest.mark.parametrize("kind", ["sage", "rgcn", "rgat"])
@pytest.mark.parametrize("et,decoder", [(("author", "writes", "paper"), "dot"), (("paper", "cites", "paper"), "mlp")],
                         ids=["two-types-dot", "one-type-mlp"])
def test_batch_logits_equal_full_graph(graph, kind, et, decoder):
    path, data = graph
    model = _model(kind, data, et, decoder)
    ei = data[et].edge_index
    eli = ei[:, torch.randperm(ei.size(1), generator=torch.Generator().manual_seed(1))[:30]]
    n_id_full = {t: torch.arange(n) for t, n in HETERO_COUNTS.items()}
    with torch.no_grad():
        full = model.encoder(data.x_dict, data.edge_index_dict, n_id_full)
        checked = 0
        for b in flashgnn.LinkNeighborLoader(path, [-1] * HOPS, edge_label_index=(et, eli),
                                             neg_sampling=dict(mode="binary", amount=2), batch_size=8,
                                             memory_budget=0):
            got = model(b)
            s, d = b[et].edge_label_index
            want = model.decode(full[et[0]][b[et[0]].n_id[s]], full[et[-1]][b[et[-1]].n_id[d]])
            assert got.shape == (b[et].edge_label.numel(),)
            torch.testing.assert_close(got, want, rtol=1e-4, atol=1e-4)
            checked += got.numel()
    assert checked == 30 * 3  # every positive and its two negatives


def test_checkpoint_config_rebuilds_the_model(graph):
    _, data = graph
    et = ("author", "writes", "paper")
    m = _model("rgcn", data, et, "mlp")
    config = dict(task="link", model="rgcn", edge_type=list(et), metadata=[list(x) for x in data.metadata()],
                  in_dim={t: d for t, d in HETERO_DIMS.items() if d}, embed={"fos": HETERO_COUNTS["fos"]},
                  hidden=16, num_layers=HOPS, dropout=0.0, decoder="mlp", heads=4)
    rebuilt = build_link_model(config)
    rebuilt.load_state_dict(m.state_dict())
    assert isinstance(rebuilt, HeteroLinkModel) and rebuilt.edge_type == et
    assert set(rebuilt.state_dict()) == set(m.state_dict())


def test_refusals(graph):
    _, data = graph
    in_dims = {"paper": 6, "author": 3}
    with pytest.raises(ValueError, match="typed link model 'gcn'"):
        HeteroLinkModel("gcn", data.metadata(), ("author", "writes", "paper"), in_dims, 16, 2)
    with pytest.raises(ValueError, match="not in the metadata"):
        HeteroLinkModel("rgcn", data.metadata(), ("author", "cites", "paper"), in_dims, 16, 2)
    # fos is never a destination: R-GAT's last layer has no row for a pair's source of that type (R-GCN's
    # root term gives every type one).
    with pytest.raises(ValueError, match="'fos'.*gets no output"):
        HeteroLinkModel("rgat", data.metadata(), ("fos", "topic", "paper"), in_dims, 16, 2, embed={"fos": 8})
    assert HeteroLinkModel("rgcn", data.metadata(), ("fos", "topic", "paper"), in_dims, 16, 2, embed={"fos": 8})
