"""`flashgnn train --task link`: every link model learns a learnable graph (val ROC-AUC well above 0.5 after 2
epochs), a resumed run reproduces the uninterrupted one bit for bit, the reported metric is what the ogb
package's Evaluator (and scikit-learn's roc_auc_score under it) gives on the same scores, chunked
evaluation equals one pass, a LightGCN batch with every neighbour sampled equals PyG's LightGCN on the whole
graph, and bad options are refused by name.

How: a small generated recommendation graph (benchmarks/link_accuracy.py's user-item graph with latent
factors) built with --link-split; scores recomputed outside the trainer from the checkpoint's model.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")
pytest.importorskip("ogb")

import flashgnn  # noqa: E402
from benchmarks.link_accuracy import write_graph  # noqa: E402
from flashgnn.nn.checkpoint import load_checkpoint, model_from_checkpoint  # noqa: E402
from flashgnn.train import TrainConfig, TrainError, Trainer, fit  # noqa: E402
from flashgnn.train import link as link_eval  # noqa: E402
from flashgnn.train.config import parser  # noqa: E402

from conftest import run_cli  # noqa: E402

QUICK = dict(task="link", epochs=2, fanout="5,3", batch_size=256, hidden=32, no_progress=True, quiet=True,
             memory_budget=0)


def _build(d, **split):
    write_graph(d / "raw", users=400, items=200, per_user=8, dim=16, seed=1)
    flashgnn.build(d / "raw", d / "ds", symmetrize=True, dedup=True, link_split=(0.1, 0.1), progress=False, **split)
    return d / "ds"


@pytest.fixture(scope="module")
def ds_path(tmp_path_factory):
    return _build(tmp_path_factory.mktemp("linktrain"))


@pytest.fixture(scope="module")
def ds_k3(tmp_path_factory):
    """Three fixed negatives per held-out edge: judged by MRR (citation2-style)."""
    return _build(tmp_path_factory.mktemp("linktrain3"), neg_per_pos=3)


# LightGCN learns ID embeddings from a small xavier init (no features): slower, so more and smaller steps.
@pytest.mark.parametrize("model,decoder,extra,floor", [
    ("sage", "dot", {}, 0.6), ("gcn", "mlp", {}, 0.6), ("gat", "dot", {}, 0.6),
    ("lightgcn", "dot", dict(epochs=5, batch_size=128), 0.55), ("ngcf", "dot", {}, 0.6)])
def test_every_link_model_learns(ds_path, model, decoder, extra, floor):
    s = fit(str(ds_path), model=model, decoder=decoder, lr=1e-2, **{**QUICK, **extra})
    assert s["task"] == "link" and s["metric"] == "rocauc" and s["evaluator"] == "ogbl-vessel"
    assert s["epochs"] == extra.get("epochs", 2)
    assert s["train_edges"] == len(flashgnn.open(ds_path).link_split("train").src)
    assert s["val_metric"] > floor, s["history"]
    assert 0.0 <= s["test_metric"] <= 1.0


def test_resume_equals_uninterrupted_and_checkpoint_records_the_link_model(ds_path, tmp_path, capsys):
    ck = tmp_path / "ck"
    a = fit(str(ds_path), model="sage", decoder="mlp", **dict(QUICK, epochs=3))
    fit(str(ds_path), model="sage", decoder="mlp", checkpoint=str(ck), **QUICK)
    c = fit(str(ds_path), model="sage", decoder="mlp", checkpoint=str(ck), resume=True, **dict(QUICK, epochs=3,
                                                                                                  quiet=False))
    assert "resumed from" in capsys.readouterr().out
    assert [h["train_loss"] for h in c["history"]] == [h["train_loss"] for h in a["history"]]
    assert [h["val_metric"] for h in c["history"]] == [h["val_metric"] for h in a["history"]]
    sa, sc = a["model_obj"].state_dict(), c["model_obj"].state_dict()
    assert all(torch.equal(sa[k], sc[k]) for k in sa)
    st = load_checkpoint(ck)
    cfg = st["model_config"]
    assert (cfg["task"], cfg["model"], cfg["decoder"], cfg["num_embeddings"]) == ("link", "sage", "mlp", 0)
    assert st["best"]["val_metric"] == c["val_metric"] and st["epoch"] == 3
    # A run of another decoder is refused against this checkpoint.
    with pytest.raises(TrainError, match="model_config.decoder is 'mlp', this run asks for 'dot'"):
        fit(str(ds_path), model="sage", decoder="dot", checkpoint=str(ck), resume=True, **QUICK)


def test_embed_writes_a_link_models_encoder_embeddings(ds_path, tmp_path):
    """`flashgnn embed` of a link checkpoint: its GNN encoder layer-wise over every node, which is the
    encoder over every neighbour of every node (the decoder is not run)."""
    from flashgnn.embed import embed

    ck = tmp_path / "ck"
    fit(str(ds_path), model="sage", decoder="mlp", checkpoint=str(ck), **QUICK)
    embed(ds_path, ck, tmp_path / "emb", progress=False, quiet=True)
    table = np.load(tmp_path / "emb" / "embeddings.npy")
    meta = json.loads((tmp_path / "emb" / "embed.json").read_text())
    assert (meta["task"], meta["decoder"]) == ("link", "mlp")
    ds = flashgnn.open(ds_path)
    model = model_from_checkpoint(load_checkpoint(ck)).eval()
    nodes = np.arange(ds.num_nodes)
    with torch.no_grad():
        want = link_eval.node_embeddings(model, ds, nodes, [-1, -1], 512, torch.device("cpu"), memory_budget=0)
    assert table.shape == tuple(want.shape) and np.allclose(table, want.numpy(), atol=1e-4)
    # recommend scores an MLP decoder's pairs exactly with the checkpoint's own MLP (embed.json names it):
    # brute force over every candidate, ties to the smaller id; an inner-product index is refused by name.
    from flashgnn.recommend import recommend

    q = np.arange(0, ds.num_nodes, 7)
    r = recommend(ds_path, None, embeddings=tmp_path / "emb", k=5, nodes=q, candidate_block=37, progress=False)
    assert r["decoder"] == "mlp" and r["pairs_scored"] == r["pairs_total"]  # no norm order for an MLP
    assert r["candidate_block"] == 37 and r["peak_block_bytes"] <= r["memory_bound"]  # blocks of 37, bounded
    E = torch.from_numpy(table)
    with torch.no_grad():
        for row, v in enumerate(q):
            s = model.decode(E[v].expand(len(E), -1), E).numpy()
            order = np.lexsort((np.arange(len(E)), -s))[:5]
            assert (r["ids"][row] == order).all(), v
            assert np.allclose(r["scores"][row], s[order], atol=1e-5)
    with pytest.raises(ValueError, match="decoder 'mlp'.*--index exact"):
        recommend(ds_path, None, embeddings=tmp_path / "emb", k=5, index="faiss", progress=False)
    # An encoder of learnable ids is not a layer-wise GNN over the stored features: refused, with the way that works.
    lg = tmp_path / "lg"
    fit(str(ds_path), model="lightgcn", checkpoint=str(lg), **dict(QUICK, epochs=1))
    with pytest.raises(ValueError, match="lightgcn.*node_embeddings"):
        embed(ds_path, lg, tmp_path / "emb2", progress=False, quiet=True)


def _scores(model, ds, split, fanouts, batch_size, seed):
    """Positive and negative logits of ``split``, recomputed outside the trainer."""
    ls = ds.link_split(split)
    nodes = np.unique(np.concatenate([ls.src, ls.dst, ls.neg.ravel()]))
    model.eval()
    with torch.no_grad():
        h = link_eval.node_embeddings(model, ds, nodes, fanouts, batch_size, torch.device("cpu"), seed=seed,
                                      memory_budget=0)
        at = lambda ids: h[torch.from_numpy(np.searchsorted(nodes, ids))]  # noqa: E731
        k = ls.neg.shape[1]
        pos = model.decode(at(ls.src), at(ls.dst))
        neg = model.decode(at(np.repeat(ls.src, k)), at(ls.neg.ravel())).view(-1, k)
    return pos, neg


def test_metric_is_ogb_evaluators_on_the_same_scores(ds_path, ds_k3, tmp_path):
    from ogb.linkproppred import Evaluator
    from sklearn.metrics import roc_auc_score

    for path, metric, name in ((ds_path, "rocauc", "ogbl-vessel"), (ds_k3, "mrr", "ogbl-citation2")):
        ck = tmp_path / metric
        s = fit(str(path), model="sage", checkpoint=str(ck), eval_fanout="-1,-1", **QUICK)
        assert s["metric"] == metric and s["evaluator"] == name
        model = model_from_checkpoint(load_checkpoint(ck))
        pos, neg = _scores(model, flashgnn.open(path), "test", [-1, -1], 2 * 256 * 2, seed=1)
        if metric == "rocauc":
            want = Evaluator("ogbl-vessel").eval({"y_pred_pos": pos, "y_pred_neg": neg.view(-1)})["rocauc"]
            y = np.r_[np.ones(len(pos)), np.zeros(neg.numel())]
            assert want == pytest.approx(roc_auc_score(y, np.r_[pos.numpy(), neg.view(-1).numpy()]), abs=1e-12)
        else:
            want = float(Evaluator("ogbl-citation2").eval({"y_pred_pos": pos, "y_pred_neg": neg})["mrr_list"].mean())
        assert s["test_metric"] == pytest.approx(want, abs=1e-6)


def test_chunked_evaluation_equals_one_pass(ds_k3, monkeypatch):
    cfg = TrainConfig(str(ds_k3), model="sage", eval_fanout="-1,-1", **dict(QUICK, epochs=1))
    t = Trainer(cfg)
    t.fit()
    whole = t.evaluate("val")["value"]
    monkeypatch.setattr(link_eval, "EVAL_PAIRS_MAX", 16)  # 4 positives (and their 3 negatives) per chunk
    assert t.evaluate("val")["value"] == pytest.approx(whole, abs=1e-6)


def test_lightgcn_batch_with_every_neighbour_equals_pyg_lightgcn_on_the_whole_graph(ds_path):
    from torch_geometric.nn.models import LightGCN

    from flashgnn.nn.link import LinkModel

    ds = flashgnn.open(ds_path)
    torch.manual_seed(0)
    ours = LinkModel("lightgcn", 0, 8, 2, num_nodes=ds.num_nodes)
    ref = LightGCN(ds.num_nodes, 8, 2)
    ref.load_state_dict(ours.encoder.state_dict())
    ptr, idx = ds.neighbors_csr(np.arange(ds.num_nodes))
    ei = torch.from_numpy(np.stack([idx, np.repeat(np.arange(ds.num_nodes), np.diff(ptr))]))
    seeds = np.array([0, 5, 399, 400, 599])
    with torch.no_grad():
        want = ref.get_embedding(ei)[torch.from_numpy(seeds)]
        got = link_eval.node_embeddings(ours, ds, seeds, [-1, -1], 8, torch.device("cpu"), degrees=True,
                                        memory_budget=0)
    assert torch.allclose(got, want, atol=1e-5)


def test_bad_options_are_refused_by_name(ds_path, tmp_path):
    plain = tmp_path / "plain"
    write_graph(tmp_path / "raw", users=40, items=20, per_user=4, dim=4, seed=0)
    flashgnn.build(tmp_path / "raw", plain, symmetrize=True, progress=False)
    with pytest.raises(TrainError, match=rf"{plain}: dataset has no link-prediction split.*--link-split VAL,TEST"):
        fit(str(plain), **QUICK)
    for kw, msg in ((dict(decoder="foo"), "--decoder 'foo': expected one of dot, mlp"),
                    (dict(model="gin"), "--model gin with --task link: expected one of sage, gcn, gat, lightgcn"),
                    (dict(model="lightgcn", task="node"), "--model lightgcn is a link-prediction model: give "
                                                          "--task link"),
                    (dict(link_metric="auc"), "--link-metric 'auc': expected one of auto, rocauc, mrr"),
                    (dict(negatives=0.0), "--negatives 0.0: must be a finite number > 0"),
                    (dict(lookahead=2), "--lookahead 2 with --task link"),
                    (dict(device_cache=1024), "--device-cache 1024 with --task link")):
        with pytest.raises(TrainError, match=msg):
            fit(str(ds_path), **{**QUICK, **kw})
    with pytest.raises(SystemExit):  # argparse: invalid choice, exit 2
        parser().parse_args([str(ds_path), "--task", "link", "--decoder", "foo"])


def test_missing_ogb_is_a_clear_error(ds_path, monkeypatch):
    import sys

    monkeypatch.setitem(sys.modules, "ogb.linkproppred", None)  # `import` then raises ImportError
    with pytest.raises(TrainError, match=r"ogb package's Evaluator.*pip install ogb"):
        fit(str(ds_path), **QUICK)


def test_cli_prints_and_records_the_test_metric(ds_path, tmp_path):
    m = tmp_path / "m.json"
    p = run_cli("train", ds_path, "--task", "link", "--epochs", "1", "--fanout", "5,3", "--batch-size", "256",
                "--hidden", "16", "--no-progress", "--metrics-json", str(m), timeout=300)
    assert p.returncode == 0, p.stderr
    last = p.stdout.strip().splitlines()[-1]
    assert last.startswith("trained sage (dot decoder, link prediction) on") and "test rocauc" in last
    summary = json.loads(m.read_text())["summary"]
    assert summary["metric"] == "rocauc" and 0.0 <= summary["test_metric"] <= 1.0
    assert f"test rocauc {summary['test_metric']:.4f}" in last
    p = run_cli("train", ds_path, "--task", "link", "--decoder", "foo", timeout=120)
    assert p.returncode == 2 and "--decoder" in p.stderr and "foo" in p.stderr


@pytest.mark.slow
def test_link_ddp_two_processes_with_torchrun(ds_path, tmp_path):
    import subprocess
    import sys

    from conftest import cli_env

    metrics = tmp_path / "ddp.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m",
           "flashgnn.train", str(ds_path), "--task", "link", "--epochs", "2", "--fanout", "5,3", "--batch-size",
           "128", "--no-progress", "--threads", "1", "--metrics-json", str(metrics)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=cli_env(), timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    s = json.loads(metrics.read_text())["summary"]
    assert s["world_size"] == 2 and s["ranks_agree"] and s["test_metric"] > 0.5
