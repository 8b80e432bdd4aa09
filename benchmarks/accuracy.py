"""Accuracy check of the training layer, in one run:

- GraphSAGE trained with ``flashgnn train`` on the ``uring`` and ``memory``
  engines (identical batches, so identical accuracy is expected);
- the same model trained by a stock PyG loop, ``torch_geometric.loader.NodeLoader((fs, gs),
  node_sampler=flashgnn.pyg.NeighborSampler)`` over the remote backend;
- an MLP on features alone (the baseline a GNN must beat by >= 10 points);
- with ``--row-codecs none,fp16,int8``: GraphSAGE on ``uring`` with a cache of
  each ``--codec-cache`` fraction of the data whose static set holds rows as
  stored or encoded (``train --cache-row-codec``; train and eval batches then
  carry the decoded rows of cached nodes), each codec's test accuracy minus
  that of rows as stored at the same cache (target: within 0.5 points).

    python -m benchmarks.accuracy DATASET [--epochs 5] [--row-codecs none,fp16,int8] [--json]

Prints one line per run and a summary with the margins; ``--json`` emits it all.
"""

from __future__ import annotations

import argparse
import json
import sys
import time

from flashgnn._util import ArgumentParser  # negative-leading list values (--fanout -1,-1)


def train_stock_pyg(dataset, fanouts, epochs: int, batch_size: int = 1024, hidden: int = 128, lr: float = 3e-3,
                    dropout: float = 0.2, seed: int = 0, num_workers: int = 0, eval_fanouts=None) -> dict:
    """Train ``torch_geometric.nn.GraphSAGE`` with stock PyG loaders over the
    flashgnn remote backend; returns test/val accuracy and timings."""
    import torch
    import torch.nn.functional as F
    from torch_geometric.loader import NodeLoader
    from torch_geometric.nn import GraphSAGE

    import flashgnn
    from flashgnn.pyg.backend import remote_backend
    from flashgnn.train.trainer import evaluate

    ds = flashgnn.open(dataset)
    torch.manual_seed(seed)
    fs, gs, sampler = remote_backend(ds, num_neighbors=fanouts, seed=seed)
    _, _, eval_sampler = remote_backend(ds, num_neighbors=eval_fanouts or fanouts, seed=seed + 1)
    eval_sampler.feature_store = fs
    model = GraphSAGE(ds.feature_dim, hidden, len(fanouts), ds.num_classes, dropout=dropout)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    split = {k: torch.from_numpy(ds.split(k)) for k in ("train", "val", "test")}
    g = torch.Generator().manual_seed(seed)
    train = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=split["train"], batch_size=batch_size,
                       shuffle=True, num_workers=num_workers, generator=g)

    def run_eval(name):
        loader = NodeLoader((fs, gs), node_sampler=eval_sampler, input_nodes=split[name], batch_size=batch_size,
                            num_workers=num_workers)
        correct, total = evaluate(model, loader, torch.device("cpu"))
        return correct / max(total, 1)

    t0 = time.perf_counter()
    for _ in range(epochs):
        model.train()
        for d in train:
            opt.zero_grad()
            out = model(d.x, d.edge_index, num_sampled_nodes_per_hop=d.num_sampled_nodes,
                        num_sampled_edges_per_hop=d.num_sampled_edges)[: d.batch_size]
            F.cross_entropy(out, d.y[: d.batch_size], ignore_index=-1).backward()
            opt.step()
    return dict(run="sage/stock-pyg-NodeLoader", test_acc=run_eval("test"), val_acc=run_eval("val"),
                seconds=time.perf_counter() - t0)


def train_flashgnn(dataset, model: str, engine: str, epochs: int, fanout: str, seed: int = 0, **extra) -> dict:
    from flashgnn.train import fit

    s = fit(str(dataset), model=model, engine=engine, epochs=epochs, fanout=fanout, seed=seed, no_progress=True,
            **extra)
    return dict(run=f"{model}/{engine}", test_acc=s["test_acc"], val_acc=s["val_acc"], seconds=s["seconds"],
                data_wait=s["data_wait"])


def codec_runs(a) -> int:
    """``--row-codecs``: the same training with the cache's rows as stored and
    encoded, at each cache fraction; each codec's accuracy minus rows as stored."""
    from flashgnn.sample.budget import dataset_bytes

    data = dataset_bytes(a.dataset)
    runs, summary = [], {}
    for frac in [float(x) for x in a.codec_cache.split(",")]:
        by = {}
        for codec in a.row_codecs.split(","):
            r = train_flashgnn(a.dataset, "sage", "uring", a.epochs, a.fanout, a.seed,
                               cache_budget=int(frac * data), cache_row_codec=codec)
            r.update(run=f"sage/uring/cache {frac:g}/{codec}", row_codec=codec, cache_fraction=frac)
            runs.append(r)
            by[codec] = r["test_acc"]
            if not a.json:
                print(f"{r['run']:<30} test acc {r['test_acc']:.4f}  val acc {r['val_acc']:.4f}  "
                      f"{r['seconds']:.1f} s", flush=True)
        for codec, acc in by.items():
            if codec != "none" and "none" in by:
                summary[f"{codec}_minus_none_at_{frac:g}"] = acc - by["none"]
    if a.json:
        print(json.dumps(dict(runs=runs, summary=summary), indent=2))
    else:
        print("accuracy: " + ", ".join(f"{k} {100 * v:+.2f} points" for k, v in summary.items())
              + " (target within 0.5)")
    return 0


def main(argv=None) -> int:
    p = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("dataset")
    p.add_argument("--epochs", type=int, default=5)
    p.add_argument("--fanout", default="10,5")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--row-codecs", default="",
                   help="comma list (none, fp16, int8): only the codec runs, each at every --codec-cache fraction")
    p.add_argument("--codec-cache", default="0.1,1.0",
                   help="comma list of cache budgets as fractions of the dataset's page files (1.0: every row "
                        "of the static set encoded)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    if a.row_codecs:
        return codec_runs(a)
    fan = [int(x) for x in a.fanout.split(",")]
    runs = [
        train_flashgnn(a.dataset, "sage", "uring", a.epochs, a.fanout, a.seed),
        train_flashgnn(a.dataset, "sage", "memory", a.epochs, a.fanout, a.seed),
        train_stock_pyg(a.dataset, fan, a.epochs, seed=a.seed),
        train_flashgnn(a.dataset, "mlp", "uring", a.epochs, a.fanout, a.seed),
    ]
    by = {r["run"]: r["test_acc"] for r in runs}
    summary = dict(
        sage_minus_mlp=by["sage/uring"] - by["mlp/uring"],
        uring_minus_memory=by["sage/uring"] - by["sage/memory"],
        uring_minus_stock_pyg=by["sage/uring"] - by["sage/stock-pyg-NodeLoader"],
    )
    if a.json:
        print(json.dumps(dict(runs=runs, summary=summary), indent=2))
    else:
        for r in runs:
            print(f"{r['run']:<30} test acc {r['test_acc']:.4f}  val acc {r['val_acc']:.4f}  {r['seconds']:.1f} s")
        print(f"accuracy: sage - mlp {100 * summary['sage_minus_mlp']:+.1f} points (target >= +10), "
              f"uring - memory {100 * summary['uring_minus_memory']:+.2f}, "
              f"uring - stock PyG {100 * summary['uring_minus_stock_pyg']:+.2f} (target within 1)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
