"""`make bench-link-accuracy`: test ROC-AUC of `flashgnn train --task link` against PyG's standard
link-prediction recipe on the same graph in memory: ``torch_geometric.loader.LinkNeighborLoader``
(torch-sparse) over the stored message-passing graph, binary negatives (one per training edge), BCE on the
logits, the same model (``flashgnn.nn.link.LinkModel``), seeds, fanouts, batch size, hidden width,
learning rate and epochs; PyG's test scores come from a ``LinkNeighborLoader`` over the test positives and
their stored negatives with ``edge_label`` (as PyG's examples evaluate) and ``roc_auc_score``. The verdict
is the difference in test ROC-AUC (target: within 1 point).

The graph is a generated recommendation graph written here as an npy input (no `flashgnn generate` model
makes a bipartite one): users and items with latent factors ``u, v ~ N(0, I_r)``; each user picks
``--per-user`` items by Gumbel top-k on ``BETA * <u, v>`` (a draw from the softmax over items, so the
links follow the factors and are learnable); node features are a random projection of the factors plus
noise. Built with ``--symmetrize --dedup --link-split 0.1,0.1`` (one fixed negative per held-out edge).

``--typed``: the same graph as a typed one, the way a recommender is usually held (PyG's MovieLens
examples): node types ``user`` (no features: a learnable embedding per user) and ``item`` (the feature
rows), edge type ``user__rates__item``, built ``--add-reverse --link-split 0.1,0.1 --link-edge-type
user__rates__item``; the model is ``flashgnn.nn.link.HeteroLinkModel`` (``to_hetero(GraphSAGE)`` for
``sage``) on both sides, PyG's side a hetero ``LinkNeighborLoader`` with ``edge_label_index=(edge type,
edges)`` over ``flashgnn.to_pyg``'s ``HeteroData`` of the stored graph.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import shutil
import sys
import time
from pathlib import Path

import numpy as np

# Softmax temperature of the item choice: 2.0 over 16 factors makes a user's choices clearly structured
# (a dot model on the true factors ranks a held-out item above a random one ~95% of the time) yet noisy.
BETA = 2.0
RANK = 16


def write_graph(raw: Path, users: int, items: int, per_user: int, dim: int, seed: int) -> None:
    """The recommendation graph (module docs) as ``raw/edge_index.npy`` [E, 2] and ``raw/node_feat.npy``."""
    rng = np.random.default_rng(seed)
    u = rng.standard_normal((users, RANK)).astype(np.float32)
    v = rng.standard_normal((items, RANK)).astype(np.float32)
    src, dst = [], []
    for lo in range(0, users, 1024):  # users x items scores a block of users at a time
        s = BETA * (u[lo:lo + 1024] @ v.T) / np.sqrt(RANK)
        s += rng.gumbel(size=s.shape).astype(np.float32)
        top = np.argpartition(-s, per_user, axis=1)[:, :per_user]
        src.append(np.repeat(np.arange(lo, lo + len(s)), per_user))
        dst.append(users + top.reshape(-1))
    edges = np.stack([np.concatenate(src), np.concatenate(dst)], axis=1).astype(np.int64)
    proj = rng.standard_normal((RANK, dim)).astype(np.float32) / np.sqrt(RANK)
    feat = np.concatenate([u, v]) @ proj + 0.5 * rng.standard_normal((users + items, dim)).astype(np.float32)
    raw.mkdir(parents=True, exist_ok=True)
    np.save(raw / "edge_index.npy", edges)
    np.save(raw / "node_feat.npy", feat.astype(np.float32))


EDGE_TYPE = ("user", "rates", "item")


def write_typed_graph(raw: Path, users: int, items: int, per_user: int, dim: int, seed: int) -> None:
    """:func:`write_graph`'s graph in the typed npy layout (module docs): users featureless, items with rows."""
    flat = raw.parent / (raw.name + "-flat")
    write_graph(flat, users, items, per_user, dim, seed)
    edges = np.load(flat / "edge_index.npy")
    feat = np.load(flat / "node_feat.npy")
    (raw / "item").mkdir(parents=True, exist_ok=True)
    (raw / "__".join(EDGE_TYPE)).mkdir(exist_ok=True)
    np.save(raw / "item" / "node_feat.npy", feat[users:])
    np.save(raw / "__".join(EDGE_TYPE) / "edge_index.npy", np.stack([edges[:, 0], edges[:, 1] - users], axis=1))
    (raw / "num_nodes.json").write_text(json.dumps({"user": users, "item": items}))


def pyg_typed_side(ds_path: Path, model_name: str, fanouts, batch_size: int, hidden: int, lr: float, epochs: int,
                   seed: int) -> dict:
    """PyG's hetero recipe on the stored typed graph in memory (module docs)."""
    import torch

    import flashgnn
    from flashgnn.nn.link import HeteroLinkModel

    ds = flashgnn.open(ds_path)
    data = flashgnn.to_pyg(ds)  # the message-passing graph: held-out edges (and their reverses) are not in it
    for t in data.node_types:  # node splits and labels play no part
        for k in ("y", "train_mask", "val_mask", "test_mask"):
            if k in data[t]:
                del data[t][k]
    in_dims = {t: int(data[t].x.size(1)) for t in data.node_types if "x" in data[t]}
    embed = {t: int(data[t].num_nodes) for t in data.node_types if t not in in_dims}
    train, test = ds.link_split("train"), ds.link_split("test")
    torch.manual_seed(seed)
    model = HeteroLinkModel(model_name, data.metadata(), EDGE_TYPE, in_dims, hidden, len(fanouts), 0.2, "dot",
                            embed=embed)
    return _pyg_recipe(data, model, train, test, fanouts, batch_size, lr, epochs, seed, EDGE_TYPE)


def pyg_side(ds_path: Path, model_name: str, fanouts, batch_size: int, hidden: int, lr: float, epochs: int,
             seed: int) -> dict:
    import torch
    from torch_geometric.data import Data

    import flashgnn
    from flashgnn.nn.link import LinkModel, uses_embedding

    ds = flashgnn.open(ds_path)
    n = ds.num_nodes
    ids = np.arange(n)
    ptr, idx = ds.neighbors_csr(ids)  # the stored (message-passing) graph: held-out edges are not in it
    col = np.repeat(ids, np.diff(ptr))
    data = Data(x=torch.from_numpy(ds.features(ids).astype(np.float32)),
                edge_index=torch.from_numpy(np.stack([idx, col])), num_nodes=n)
    deg = torch.from_numpy(np.diff(ptr)).float()
    train, test = ds.link_split("train"), ds.link_split("test")
    torch.manual_seed(seed)
    emb = n if uses_embedding(model_name, ds.feature_dim) else 0
    model = LinkModel(model_name, ds.feature_dim, hidden, len(fanouts), 0.2, "dot", num_nodes=emb)
    # The degree-normalised models' whole-graph degrees (flashgnn.nn.link).
    return _pyg_recipe(data, model, train, test, fanouts, batch_size, lr, epochs, seed,
                       prepare=lambda b: setattr(b, "deg", deg[b.n_id]))


def _pyg_recipe(data, model, train, test, fanouts, batch_size, lr, epochs, seed, edge_type=None,
                prepare=lambda b: None) -> dict:
    """PyG's link-prediction recipe on ``data`` in memory: ``LinkNeighborLoader`` over the training edges with
    one binary negative each, BCE on the logits, Adam; the test ROC-AUC over a ``LinkNeighborLoader`` of the
    test positives and their stored negatives with ``edge_label`` (as PyG's examples evaluate). ``edge_type``:
    a typed graph's supervision edge type (PyG's ``(edge_type, edges)``)."""
    import torch
    import torch.nn.functional as F
    from sklearn.metrics import roc_auc_score
    from torch_geometric.loader import LinkNeighborLoader

    def eli_of(a):
        t = torch.from_numpy(a)
        return t if edge_type is None else (edge_type, t)

    def fields(b):
        return b if edge_type is None else b[edge_type]

    opt = torch.optim.Adam(model.parameters(), lr=lr)
    loader = LinkNeighborLoader(data, num_neighbors=list(fanouts),
                                edge_label_index=eli_of(np.stack([train.src, train.dst])),
                                neg_sampling=dict(mode="binary", amount=1), batch_size=batch_size, shuffle=True,
                                generator=torch.Generator().manual_seed(seed))
    t0 = time.perf_counter()
    for _ in range(epochs):
        model.train()
        for b in loader:
            prepare(b)
            opt.zero_grad()
            F.binary_cross_entropy_with_logits(model(b), fields(b).edge_label).backward()
            opt.step()
    k = test.neg.shape[1]
    eli = np.concatenate([np.stack([test.src, test.dst]), np.stack([np.repeat(test.src, k), test.neg.reshape(-1)])],
                         axis=1)
    label = torch.cat([torch.ones(len(test.src)), torch.zeros(len(test.src) * k)])
    model.eval()
    scores, labels = [], []
    with torch.no_grad():
        for b in LinkNeighborLoader(data, num_neighbors=list(fanouts), edge_label_index=eli_of(eli), edge_label=label,
                                    batch_size=batch_size):
            prepare(b)
            scores.append(model(b))
            labels.append(fields(b).edge_label)
    auc = roc_auc_score(torch.cat(labels).numpy(), torch.cat(scores).numpy())
    return {"test_rocauc": float(auc), "seconds": time.perf_counter() - t0}


def main(argv=None) -> int:
    import flashgnn
    from flashgnn.train import TrainConfig, Trainer

    ap = argparse.ArgumentParser(prog="python -m benchmarks.link_accuracy", description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="/tmp/flashgnn-link-acc")
    ap.add_argument("--users", type=int, default=4000)
    ap.add_argument("--items", type=int, default=2000)
    ap.add_argument("--per-user", type=int, default=10, help="items each user links to")
    ap.add_argument("--feature-dim", type=int, default=32)
    ap.add_argument("--model", default="sage", choices=("sage", "gcn", "gat", "lightgcn", "ngcf", "rgcn", "rgat"))
    ap.add_argument("--typed", action="store_true", help="the graph as user and item node types (module docs)")
    ap.add_argument("--fanout", default="10,5")
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--epochs", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    work = Path(a.work)
    raw, ds = work / "raw", work / "ds"
    fanouts = [int(f) for f in a.fanout.split(",")]
    shutil.rmtree(raw, ignore_errors=True)  # the other layout's files would change how the input is read
    if a.typed:
        write_typed_graph(raw, a.users, a.items, a.per_user, a.feature_dim, a.seed)
        flashgnn.build(raw, ds, add_reverse=True, dedup=True, link_split=(0.1, 0.1),
                       link_edge_type="__".join(EDGE_TYPE), force=True, progress=False)
        pyg = pyg_typed_side(ds, a.model, fanouts, a.batch_size, a.hidden, a.lr, a.epochs, a.seed)
    else:
        write_graph(raw, a.users, a.items, a.per_user, a.feature_dim, a.seed)
        flashgnn.build(raw, ds, symmetrize=True, dedup=True, link_split=(0.1, 0.1), force=True, progress=False)
        pyg = pyg_side(ds, a.model, fanouts, a.batch_size, a.hidden, a.lr, a.epochs, a.seed)
    t0 = time.perf_counter()
    with contextlib.redirect_stdout(sys.stderr):  # the trainer's summary line: stdout stays the report (--json)
        s = Trainer(TrainConfig(str(ds), task="link", model=a.model, epochs=a.epochs, fanout=a.fanout,
                                batch_size=a.batch_size, hidden=a.hidden, lr=a.lr, seed=a.seed, link_metric="rocauc",
                                quiet=True, no_progress=True)).fit()
    fg = {"test_rocauc": s["final_test_metric"], "best_epoch_test_rocauc": s["test_metric"],
          "seconds": time.perf_counter() - t0}
    report = {"pyg": pyg, "flashgnn": fg, "difference_points": 100 * (fg["test_rocauc"] - pyg["test_rocauc"]),
              "settings": vars(a)}
    if a.json:
        print(json.dumps(report, indent=2))
        return 0
    print(f"summary: {'typed ' if a.typed else ''}test ROC-AUC flashgnn {fg['test_rocauc']:.4f} (last epoch; "
          f"best-val epoch "
          f"{fg['best_epoch_test_rocauc']:.4f}) vs PyG LinkNeighborLoader recipe {pyg['test_rocauc']:.4f}: "
          f"{report['difference_points']:+.2f} points (target: within 1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
