"""Recommend on the live graph (`flashgnn serve --recommend`, `flashgnn.Client.recommend`).

What is proved, and how: a random-weight GraphSAGE link checkpoint (decoder
"dot") is embedded with `flashgnn embed` over a small generated dataset and
served. One server run checks that

- the answer equals a brute-force ranking (numpy lexsort: score descending,
  then id ascending) of every candidate row against the query's embedding,
  the embedding taken from `Run` of the same DFG on the same snapshot;
- exclude_seen drops exactly the node's current neighbours and itself;
- an AddEdge changes the next answer: the new neighbour leaves the
  exclude-seen answer, the query's scores move (its neighbourhood changed),
  and both touched nodes get recomputed rows (Stats: pending 0);
- a vertex added a moment ago can be queried and becomes a candidate;
- k <= 0, k over --max-recommend-k and a node beyond the node count are
  INVALID_ARGUMENT naming the field, value and bound.

A second start with embeddings of another dataset is refused by name before
the port opens, and `flashgnn recommend` refuses a checkpoint of another
dataset, and an "mlp" decoder with an inner-product index, by name. A
checkpoint with an "mlp" decoder is served, ranked by its own MLP.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import flashgnn
from conftest import generated_dataset, run_cli

grpc = pytest.importorskip("grpc")
torch = pytest.importorskip("torch")

from flashgnn.serve.client import ServerError  # noqa: E402
from flashgnn.serve.process import ServeStartError  # noqa: E402


def make_checkpoint(ds, d: Path, decoder: str = "dot", out_dim: int = 8, fanouts=(5, 5), in_dim=None) -> Path:
    """A link checkpoint as `flashgnn train --task link` records it (a random-weight LinkModel whose GraphSAGE
    encoder gives ``out_dim``-wide embeddings)."""
    from flashgnn.nn.checkpoint import CHECKPOINT_FORMAT, CHECKPOINT_VERSION, save_checkpoint
    from flashgnn.nn.link import LinkModel

    torch.manual_seed(0)
    in_dim = in_dim or flashgnn.open(ds).feature_dim
    m = LinkModel("sage", in_dim, out_dim, len(fanouts), 0.0, decoder)
    cfg = dict(model="sage", in_dim=in_dim, hidden=out_dim, out_dim=None, num_layers=len(fanouts), dropout=0.0,
               fanouts=list(fanouts), task="link", decoder=decoder, num_embeddings=0)
    save_checkpoint(d, dict(format=CHECKPOINT_FORMAT, version=CHECKPOINT_VERSION, model_config=cfg,
                            model=m.state_dict(), epoch=1))
    return d


@pytest.fixture(scope="module")
def base_dataset(tmp_path_factory) -> Path:
    return generated_dataset(tmp_path_factory.mktemp("rec"), scale=8, edge_factor=8, dim=8, classes=4, seed=3)


@pytest.fixture(scope="module")
def served(base_dataset, tmp_path_factory):
    """(checkpoint, embed dir) of the module's dataset."""
    from flashgnn.embed import embed

    d = tmp_path_factory.mktemp("recmodel")
    ck = make_checkpoint(base_dataset, d / "ck")
    embed(base_dataset, ck, d / "emb", progress=False, quiet=True)
    return ck, d / "emb"


def _expected(table, q, k, exclude=()):
    s = table @ q
    s[list(exclude)] = -np.inf
    order = np.lexsort((np.arange(len(s)), -s))
    order = order[np.isfinite(s[order])]
    return order[:k]


def test_recommend_round_trip_and_add_edge_changes_the_answer(server, dataset, served):
    from flashgnn.dfg import models
    from flashgnn.nn.checkpoint import encoder_state, load_checkpoint

    ck, emb = served
    table = np.load(emb / "embeddings.npy")
    meta = flashgnn.open(dataset)
    assert "predictions.npy" not in {p.name for p in emb.iterdir()}  # a link model has no classes
    s = server("--recommend", emb, "--max-recommend-k", "50", "--memory-budget", "0")
    dfg = models.from_checkpoint(encoder_state(load_checkpoint(ck)))
    with s.client() as c:
        u = 3
        q = c.run(dfg, [u])["Result"][0]
        ids, sc = c.recommend(u, 10)
        assert list(ids) == list(_expected(table, q, 10))
        assert np.allclose(sc, table[ids] @ q, rtol=1e-5, atol=1e-5) and np.all(np.diff(sc) <= 0)
        nb = set(meta.neighbors(u).tolist())
        ids_x, _ = c.recommend(u, 10, exclude_seen=True)
        assert list(ids_x) == list(_expected(table, q, 10, nb | {u}))
        assert not (set(ids_x.tolist()) & (nb | {u}))
        # AddEdge: the best non-neighbour becomes a neighbour; the next answer reflects it.
        v = int(ids_x[0])
        c.add_edge(u, v)
        ids2, sc2 = c.recommend(u, 10, exclude_seen=True)
        assert v not in ids2.tolist() and list(ids2) != list(ids_x)
        q2 = c.run(dfg, [u])["Result"][0]
        assert not np.allclose(q, q2)  # the query's embedding came from its new neighbourhood
        assert c.last_recommend["seq"] >= 1 and c.last_recommend["stale"] == 0
        g = c.stats()["graph"]["recommend"]
        assert g["pending"] == 0 and g["recomputed"] >= 2
        # a vertex added a moment ago: queried, and a candidate once embedded
        w = c.add_vertex(meta.features([u])[0])
        c.add_edge(w, u)
        ids_w, _ = c.recommend(w, 5, exclude_seen=True)
        assert len(ids_w) == 5 and w not in ids_w.tolist() and u not in ids_w.tolist()
        ids_all, _ = c.recommend(u, 50)
        assert c.stats()["graph"]["recommend"]["pending"] == 0
        for bad, frag in (((u, 0), "Recommend.k: 0 < 1"), ((u, 51), "Recommend.k: 51 > --max-recommend-k 50"),
                          ((w + 1000, 3), f"Recommend.node: {w + 1000} >= num_nodes {w + 1}"),
                          ((-1, 3), "Recommend.node: -1 < 0")):
            with pytest.raises(ServerError) as e:
                c.recommend(*bad)
            assert e.value.code_name == "INVALID_ARGUMENT" and frag in e.value.message


def test_recommend_with_an_mlp_decoder_ranks_by_the_checkpoints_mlp(server, dataset, tmp_path):
    """A checkpoint trained with --decoder mlp: every candidate scored by the model's own MLP on the pair."""
    from flashgnn.dfg import models
    from flashgnn.embed import embed
    from flashgnn.nn.checkpoint import encoder_state, load_checkpoint, model_from_checkpoint

    ck = make_checkpoint(dataset, tmp_path / "mlp", decoder="mlp")
    embed(dataset, ck, tmp_path / "emb", progress=False, quiet=True)
    table = np.load(tmp_path / "emb" / "embeddings.npy")
    model = model_from_checkpoint(load_checkpoint(ck)).eval()
    s = server("--recommend", tmp_path / "emb", "--memory-budget", "0")
    with s.client() as c:
        q = c.run(models.from_checkpoint(encoder_state(load_checkpoint(ck))), [5])["Result"][0]
        ids, sc = c.recommend(5, 7)
        assert c.stats()["graph"]["recommend"]["decoder"] == "mlp"
    with torch.no_grad():
        want = model.decode(torch.tensor(q).expand(len(table), -1), torch.from_numpy(table)).numpy()
    order = np.lexsort((np.arange(len(want)), -want))[:7]
    assert list(ids) == list(order) and np.allclose(sc, want[order], atol=1e-5)
    assert not np.array_equal(order, _expected(table, q, 7)), "an MLP ranks otherwise than the dot product"


def test_recommend_refuses_embeddings_of_another_dataset(server, dataset, served, tmp_path):
    ck, emb = served
    other = tmp_path / "other"
    other.mkdir()
    np.save(other / "embeddings.npy", np.zeros((7, 8), np.float32))
    with pytest.raises(ServeStartError, match=r"--embeddings .*embeddings.npy: shape \[7, 8\] does not match"):
        server("--recommend", other, "--recommend-checkpoint", ck, "--memory-budget", "0")


def test_recommend_cli_refuses_mismatched_and_mlp_checkpoints(dataset, tmp_path):
    wrong = make_checkpoint(dataset, tmp_path / "wrong", in_dim=5)
    r = run_cli("recommend", dataset, "--checkpoint", wrong, "--k", "3")
    assert r.returncode == 2 and "model_config.in_dim 5 != feature_dim 8" in r.stderr, r.stderr
    mlp = make_checkpoint(dataset, tmp_path / "mlp", decoder="mlp")
    r = run_cli("recommend", dataset, "--checkpoint", mlp, "--k", "3", "--index", "faiss")
    assert r.returncode == 2 and "decoder 'mlp'" in r.stderr and "faiss" in r.stderr, r.stderr
