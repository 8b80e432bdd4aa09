"""Layer-wise inference on typed datasets (flashgnn.inference, `flashgnn embed`).

A small typed npy directory (papers with features, labels and a train split; authors with float16
features; fields of study without features: an embedding table) is built by `flashgnn build`
(--add-reverse, PyG's ToUndirected: every type is some edge type's destination, as to_hetero(GraphSAGE)
needs; without it the authors are a source-only type, which RGAT drops after layer 0 and RGCN keeps by its root weight).
The reference is each model applied to the whole graph in memory — a HeteroData made from the same npy
inputs, not from the dataset — in eval mode. `flashgnn.inference` must equal it to 1e-5 for every node
type and, for a target model, its target; with a block of 3 nodes (many blocks per type and layer: the
memory bound) as with one block; `node_types=` computes only what the chosen types need. `flashgnn
embed` rebuilds a checkpoint `flashgnn train` wrote on the typed dataset and writes per-type files.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from torch_geometric.data import HeteroData  # noqa: E402
from torch_geometric.utils import to_undirected  # noqa: E402

import flashgnn  # noqa: E402
from flashgnn.nn.zoo import build_hetero_model  # noqa: E402

COUNTS = {"paper": 30, "author": 12, "fos": 5}
CLASSES = 3
EDGES = ("paper__cites__paper", "author__writes__paper", "paper__topic__fos")


@pytest.fixture(autouse=True)
def _one_thread():
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def _inputs(d):
    rng = np.random.default_rng(5)
    feats = {"paper": rng.standard_normal((30, 4)).astype(np.float32),
             "author": rng.standard_normal((12, 3)).astype(np.float16)}
    for t, x in feats.items():
        (d / t).mkdir(parents=True)
        np.save(d / t / "node_feat.npy", x)
    np.save(d / "paper" / "node_label.npy", np.arange(30) % CLASSES)
    np.save(d / "paper" / "train_idx.npy", np.arange(0, 30, 2))
    (d / "num_nodes.json").write_text(json.dumps({"fos": COUNTS["fos"]}))

    def pairs(ns, nd, k):  # distinct, no self-loops: the stored graph is exactly these edges
        e = {(int(a), int(b)) for a, b in zip(rng.integers(0, ns, k), rng.integers(0, nd, k)) if a != b}
        return np.array(sorted(e), dtype=np.int64)

    edges = {"paper__cites__paper": pairs(30, 30, 70), "author__writes__paper": pairs(12, 30, 40),
             "paper__topic__fos": np.column_stack([np.arange(30), np.arange(30) % 5]).astype(np.int64)}
    for k, e in edges.items():
        (d / k).mkdir()
        np.save(d / k / "edge_index.npy", e)
    return feats, edges


def _build(tmp, reverse: bool):
    from flashgnn.cli import main

    inp = tmp / "in"
    feats, edges = _inputs(inp)
    out = tmp / "ds"
    rc = main(["build", str(inp), str(out), "--page-size", "512", "-q", *(["--add-reverse"] if reverse else [])])
    assert rc == 0
    data = HeteroData()
    for t, n in COUNTS.items():
        if t in feats:
            data[t].x = torch.from_numpy(feats[t].astype(np.float32))
        else:
            data[t].num_nodes = n
    for k, e in edges.items():
        s, r, d = k.split("__")
        ei = torch.from_numpy(e.T.copy())
        # --add-reverse is PyG's ToUndirected: a relation within one type made undirected in place (duplicates
        # coalesced), every other one given a reverse edge type.
        data[s, r, d].edge_index = to_undirected(ei) if (reverse and s == d) else ei
        if reverse and s != d:
            data[d, f"rev_{r}", s].edge_index = ei.flip(0)
    return out, data


@pytest.fixture(scope="module")
def typed(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("hinf"), reverse=True)


@pytest.fixture(scope="module")
def typed_sources(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("hinf_src"), reverse=False)


def _model(name, ds, target, layers=2):
    ds = flashgnn.open(ds)
    in_dims = {t: ds.node_type(t)["features"]["dim"] for t in ds.node_types if ds.node_type(t).get("features")}
    embed = {t: ds.node_type(t)["count"] for t in ds.node_types if t not in in_dims}
    torch.manual_seed(0)
    out = CLASSES if target else 4  # without a target RGAT ends in a GAT layer: a multiple of its 2 heads
    m = build_hetero_model(name, ds.metadata(), in_dims, 8, out, layers, 2, 0.5, embed=embed, target=target)
    for p in m.parameters():  # non-zero biases too: a missing bias term would show
        torch.nn.init.normal_(p, std=0.3)
    return m.train()  # inference must switch to eval (dropout 0.5 would show) and restore the mode


def _whole_graph(m, data):
    m.eval()
    with torch.no_grad():
        out = m(data.x_dict, data.edge_index_dict, {t: torch.arange(n) for t, n in COUNTS.items()})
    m.train()
    return out


def _same(got, ref, types):
    assert sorted(got) == sorted(types)
    for t in types:
        assert got[t].shape == ref[t].shape, t
        torch.testing.assert_close(got[t], ref[t], atol=1e-5, rtol=0, msg=t)


@pytest.mark.parametrize("name", ["rgat", "rgcn", "sage"])
@pytest.mark.parametrize("target", ["paper", None])
def test_inference_equals_whole_graph(typed, name, target):
    path, data = typed
    m = _model(name, path, target)
    ref = _whole_graph(m, data)
    types = ["paper"] if target and name != "sage" else sorted(ref)  # sage returns every type (target recorded)
    assert sorted(ref) == sorted(types)
    for bs in (1000, 3):  # one block per type and layer; many (the memory bound: same outputs)
        got = flashgnn.inference(m, path, batch_size=bs, progress_bar=False)
        assert m.training
        _same(got, ref, types)


@pytest.mark.filterwarnings("ignore:There exist node types")
@pytest.mark.parametrize("name", ["rgat", "rgcn"])
def test_source_only_type(typed_sources, name):
    path, data = typed_sources
    m = _model(name, path, None, layers=3)
    ref = _whole_graph(m, data)
    # RGAT: authors receive nothing, so only paper and fos have layer outputs; RGCN keeps every type.
    assert ("author" in ref) == (name == "rgcn")
    _same(flashgnn.inference(m, path, batch_size=4, progress_bar=False), ref, sorted(ref))


def test_node_types_and_hidden_layers(typed):
    from flashgnn.nn.layerwise import typed_plan

    path, data = typed
    m = _model("rgcn", path, None)
    ref = _whole_graph(m, data)
    got = flashgnn.inference(m, path, batch_size=7, progress_bar=False, node_types=["fos"])
    _same(got, ref, ["fos"])
    # fos's last layer reads layer 0's paper and fos rows only (its one in-edge type is paper -> fos).
    need, final = typed_plan(m, flashgnn.open(path).edge_types, 2, ["fos"])
    assert final == ["fos"] and sorted(need[0]) == ["fos", "paper"]
    # layers=1: layer 0's outputs (after ReLU), the model's first layer on the whole graph.
    m.eval()
    with torch.no_grad():
        h = m.layer(0, m.input_dict(data.x_dict, {"fos": torch.arange(5)}), data.edge_index_dict)
    hidden = flashgnn.inference(m, path, batch_size=5, progress_bar=False, layers=1)
    _same(hidden, h, sorted(h))
    with pytest.raises(ValueError, match="outputs rows for"):
        flashgnn.inference(_model("rgat", path, "paper"), path, progress_bar=False, node_types=["author"])


def test_inference_to_directory(typed, tmp_path):
    path, data = typed
    m = _model("rgat", path, "paper")
    ref = _whole_graph(m, data)
    meta = flashgnn.inference(m, path, tmp_path / "emb", batch_size=8, progress_bar=False, predictions=True)
    assert meta["typed"] and meta["node_types"]["paper"] == dict(
        num_nodes=30, dim=CLASSES, file="embeddings/paper.npy", predictions="predictions/paper.npy")
    emb = np.load(tmp_path / "emb" / "embeddings" / "paper.npy")
    np.testing.assert_allclose(emb, ref["paper"].numpy(), atol=1e-5, rtol=0)
    assert np.array_equal(np.load(tmp_path / "emb" / "predictions" / "paper.npy"), emb.argmax(1))
    assert json.loads((tmp_path / "emb" / "embed.json").read_text())["flashgnn_output"] == "embed"


def test_embed_cli_from_typed_checkpoint(typed, tmp_path, capsys):
    from flashgnn.cli import main
    from flashgnn.nn.checkpoint import load_checkpoint, model_from_checkpoint
    from flashgnn.train import TrainConfig, Trainer

    path, data = typed
    ck = tmp_path / "ck"
    Trainer(TrainConfig(str(path), model="rgcn", epochs=1, fanout="5,5", hidden=8, batch_size=8, checkpoint=str(ck),
                        no_progress=True, quiet=True)).fit()
    model = model_from_checkpoint(load_checkpoint(ck))
    ref = _whole_graph(model, data)["paper"]
    capsys.readouterr()
    assert main(["embed", str(path), str(tmp_path / "out"), "--checkpoint", str(ck), "--batch-size", "6"]) == 0
    line = capsys.readouterr().out.strip().splitlines()[-1]
    assert line.startswith(f"embedded paper 30 x {CLASSES} (rgcn, 2 layer passes"), line
    emb = np.load(tmp_path / "out" / "embeddings" / "paper.npy")
    np.testing.assert_allclose(emb, ref.numpy(), atol=1e-5, rtol=0)
    assert np.array_equal(np.load(tmp_path / "out" / "predictions" / "paper.npy"), emb.argmax(1))
    meta = json.loads((tmp_path / "out" / "embed.json").read_text())
    assert meta["model"] == "rgcn" and meta["output"] == "logits" and meta["checkpoint"] == str(ck.resolve())
    # --output hidden: the first layer's 8-wide rows of every node type.
    assert main(["embed", str(path), str(tmp_path / "hid"), "--checkpoint", str(ck), "--output", "hidden",
                 "-q"]) == 0
    meta = json.loads((tmp_path / "hid" / "embed.json").read_text())
    assert {t: v["dim"] for t, v in meta["node_types"].items()} == {"author": 8, "fos": 8, "paper": 8}
    assert not (tmp_path / "hid" / "predictions").exists()


def test_sage_forward_is_to_hetero_code(typed):
    """HeteroSAGE.forward runs gnn's modules layer by layer; the outputs are to_hetero's generated code's."""
    path, data = typed
    m = _model("sage", path, None).eval()
    x = m.input_dict(data.x_dict, {"fos": torch.arange(5)})
    with torch.no_grad():
        ours = m(data.x_dict, data.edge_index_dict, {"fos": torch.arange(5)})
        theirs = m.gnn(x, data.edge_index_dict)
    for t in theirs:
        torch.testing.assert_close(ours[t], theirs[t], atol=0, rtol=0)
