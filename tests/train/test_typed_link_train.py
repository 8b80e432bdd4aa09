"""`flashgnn train --task link` on a typed dataset: a user-item graph (users without features, items with
rows) built with --add-reverse --link-split --link-edge-type user__rates__item trains each typed encoder to a
validation ROC-AUC well above chance; the reported metric is what the ogb Evaluator gives on the scores the
checkpoint's model produces outside the trainer; no held-out pair reaches a training batch in either
direction; a resumed run equals the uninterrupted one; bad combinations are refused by name.

How: benchmarks/link_accuracy.py's recommendation graph in the typed npy layout (write_typed_graph)."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")
pytest.importorskip("ogb")

import flashgnn  # noqa: E402
from benchmarks.link_accuracy import EDGE_TYPE, write_typed_graph  # noqa: E402
from flashgnn.nn.checkpoint import load_checkpoint, model_from_checkpoint  # noqa: E402
from flashgnn.nn.link import HeteroLinkModel  # noqa: E402
from flashgnn.train import TrainError, Trainer, TrainConfig, fit  # noqa: E402
from flashgnn.train import link as link_eval  # noqa: E402

QUICK = dict(task="link", epochs=2, fanout="5,3", batch_size=256, hidden=32, no_progress=True, quiet=True,
             memory_budget=0, lr=1e-2)
REV = ("item", "rev_rates", "user")


@pytest.fixture(scope="module")
def ds_path(tmp_path_factory):
    d = tmp_path_factory.mktemp("typedlink")
    write_typed_graph(d / "raw", users=1000, items=300, per_user=10, dim=16, seed=1)
    flashgnn.build(d / "raw", d / "ds", add_reverse=True, dedup=True, link_split=(0.1, 0.1),
                   link_edge_type="__".join(EDGE_TYPE), progress=False)
    return d / "ds"


# R-GAT learns slowest on this small graph (its attention starts uniform; PyG's own recipe gives it 0.66 test
# ROC-AUC against sage's 0.77 on benchmarks/link_accuracy.py's full-size graph): a lower floor, still above chance.
@pytest.mark.parametrize("model,decoder,floor", [("sage", "dot", 0.6), ("rgcn", "mlp", 0.6), ("rgat", "dot", 0.53)])
def test_every_typed_encoder_learns(ds_path, model, decoder, floor, tmp_path):
    # Users learn their rows from nothing (no features): more steps than a featured graph needs.
    s = fit(str(ds_path), model=model, decoder=decoder, checkpoint=str(tmp_path / "ck"), link_eval="embeddings",
            **{**QUICK, "epochs": 5})
    assert s["task"] == "link" and s["metric"] == "rocauc" and s["epochs"] == 5
    ds = flashgnn.open(ds_path)
    assert s["train_edges"] == len(ds.link_split("train").src)
    assert s["val_metric"] > floor, s["val_metric"]
    # The reported test metric is the OGB evaluator's on the checkpoint model's own scores, recomputed here.
    state = load_checkpoint(tmp_path / "ck")
    m = model_from_checkpoint(state).eval()
    assert isinstance(m, HeteroLinkModel) and m.edge_type == EDGE_TYPE
    assert state["model_config"]["embed"] == {"user": 1000}  # users have no features: a learnable row each
    nn = {et: [5, 3] for et in ds.edge_types}
    ts = ds.link_split("test")
    with torch.no_grad():
        hu = link_eval.typed_node_embeddings(m, ds, "user", np.unique(ts.src), nn, 1024, torch.device("cpu"), memory_budget=0,
                                             seed=QUICK.get("seed", 0) + 1)
        items = np.unique(np.concatenate([ts.dst, ts.neg.reshape(-1)]))
        hi = link_eval.typed_node_embeddings(m, ds, "item", items, nn, 1024, torch.device("cpu"), memory_budget=0,
                                             seed=1)
        u = torch.from_numpy(np.searchsorted(np.unique(ts.src), ts.src))
        pos = m.decode(hu[u], hi[torch.from_numpy(np.searchsorted(items, ts.dst))])
        neg = m.decode(hu[u], hi[torch.from_numpy(np.searchsorted(items, ts.neg[:, 0]))])
    from ogb.linkproppred import Evaluator

    want = Evaluator("ogbl-vessel").eval({"y_pred_pos": pos, "y_pred_neg": neg})["rocauc"]
    assert abs(s["test_metric"] - want) < 1e-6, (s["test_metric"], want)


def test_link_batch_evaluation_is_the_models_logits_over_link_batches(ds_path, tmp_path):
    """--link-eval batches (auto with one negative per positive: PyG's recipe) scores the test pairs in link
    batches; the metric is the OGB evaluator's on the logits the checkpoint's model gives to the same batches,
    recomputed here through flashgnn.LinkNeighborLoader (positives, then their negatives)."""
    from ogb.linkproppred import Evaluator

    s = fit(str(ds_path), model="rgat", checkpoint=str(tmp_path / "ck"), **QUICK)
    m = model_from_checkpoint(load_checkpoint(tmp_path / "ck")).eval()
    ts = flashgnn.open(ds_path).link_split("test")
    eli = np.stack([np.concatenate([ts.src, ts.src]), np.concatenate([ts.dst, ts.neg[:, 0]])])
    loader = flashgnn.LinkNeighborLoader(ds_path, [5, 3], edge_label_index=(EDGE_TYPE, eli), batch_size=512,
                                         shuffle=False, seed=QUICK.get("seed", 0) + 1, memory_budget=0)
    with torch.no_grad():
        logits = torch.cat([m(b) for b in loader])
    n = len(ts.src)
    want = Evaluator("ogbl-vessel").eval({"y_pred_pos": logits[:n], "y_pred_neg": logits[n:]})["rocauc"]
    assert abs(s["test_metric"] - want) < 1e-6, (s["test_metric"], want)


def test_no_held_out_pair_reaches_a_training_batch(ds_path):
    ds = flashgnn.open(ds_path)
    held = set()
    for split in ("val", "test"):
        ls = ds.link_split(split)
        held |= set(zip(ls.src.tolist(), ls.dst.tolist()))
    assert len(held) == sum(len(ds.link_split(s).src) for s in ("val", "test"))
    t = Trainer(TrainConfig(str(ds_path), model="sage", **{**QUICK, "fanout": "-1,-1"}))
    t.setup()
    seen = 0
    for b in t.train_loader:
        u, i = b["user"].n_id, b["item"].n_id
        for et, (a, c) in ((EDGE_TYPE, (u, i)), (REV, (i, u))):
            ei = b[et].edge_index
            pairs = zip(a[ei[0]].tolist(), c[ei[1]].tolist())
            pairs = pairs if et == EDGE_TYPE else ((y, x) for x, y in pairs)
            for p in pairs:
                assert p not in held, (et, p)
                seen += 1
    assert seen > 1000


def test_resume_equals_the_uninterrupted_run(ds_path, tmp_path):
    full = fit(str(ds_path), model="rgcn", checkpoint=str(tmp_path / "a"), **{**QUICK, "epochs": 2})
    fit(str(ds_path), model="rgcn", checkpoint=str(tmp_path / "b"), **{**QUICK, "epochs": 1})
    resumed = fit(str(ds_path), model="rgcn", checkpoint=str(tmp_path / "b"), resume=True, **{**QUICK, "epochs": 2})
    a = load_checkpoint(tmp_path / "a")["model"]
    b = load_checkpoint(tmp_path / "b")["model"]
    assert all(torch.equal(a[k], b[k]) for k in a)
    assert resumed["final_val_metric"] == full["final_val_metric"]


def test_refusals(ds_path, tmp_path):
    with pytest.raises(TrainError, match="--model gcn on a typed dataset.*rgat, rgcn, sage"):
        fit(str(ds_path), model="gcn", **QUICK)
    with pytest.raises(TrainError, match="--model lightgcn"):
        fit(str(ds_path), model="lightgcn", **QUICK)
    # `flashgnn embed` and `recommend` run a node model's encoder layer-wise; a typed link model embeds per type.
    fit(str(ds_path), model="rgcn", checkpoint=str(tmp_path / "ck"), **{**QUICK, "epochs": 1})
    from flashgnn.nn.checkpoint import encoder_state

    with pytest.raises(ValueError, match="typed link model.*typed_node_embeddings"):
        encoder_state(load_checkpoint(tmp_path / "ck"))
