"""`make bench-hetero-accuracy`: test accuracy of `flashgnn train --model sage` on a typed dataset against PyG's
own recipe on the same graph in memory: ``to_hetero(GraphSAGE)`` (the same module, ``flashgnn.nn.hetero``)
trained with PyG's hetero ``NeighborLoader`` (torch-sparse) over ``T.ToUndirected()`` of the same input, with
the same seeds, fanouts, batch size, hidden width, learning rate and epochs. The verdict is the difference in
test accuracy (target: within 1 point); the graph is IGBH-shaped (``flashgnn generate igbh``).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

import numpy as np


def pyg_side(raw: Path, fanouts, batch_size: int, hidden: int, lr: float, epochs: int, seed: int) -> dict:
    import torch
    import torch.nn.functional as F
    import torch_geometric.transforms as T
    from torch_geometric.data import HeteroData
    from torch_geometric.loader import NeighborLoader

    from flashgnn.nn.hetero import hetero_sage, seed_logits

    torch.manual_seed(seed)
    counts = json.loads((raw / "num_nodes.json").read_text())
    data = HeteroData()
    for nt, n in counts.items():
        data[nt].x = torch.from_numpy(np.load(raw / nt / "node_feat.npy"))
    for d in sorted(p for p in raw.iterdir() if p.is_dir() and p.name.count("__") == 2):
        e = np.load(d / "edge_index.npy")
        data[tuple(d.name.split("__"))].edge_index = torch.from_numpy(np.ascontiguousarray(e.T, dtype=np.int64))
    data["paper"].y = torch.from_numpy(np.load(raw / "paper" / "node_label.npy"))
    data = T.ToUndirected()(data)
    split = {s: torch.from_numpy(np.load(raw / "paper" / f"{s}_idx.npy")) for s in ("train", "val", "test")}
    classes = int(data["paper"].y.max()) + 1
    model = hetero_sage(data.metadata(), {t: data[t].x.shape[1] for t in data.node_types}, classes, hidden=hidden,
                        layers=len(fanouts), target="paper")
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    gen = torch.Generator().manual_seed(seed)
    train = NeighborLoader(data, num_neighbors=list(fanouts), input_nodes=("paper", split["train"]),
                           batch_size=batch_size, shuffle=True, generator=gen)
    t0 = time.perf_counter()
    for _ in range(epochs):
        model.train()
        for b in train:
            opt.zero_grad()
            out = seed_logits(model, b, "paper")
            y = b["paper"].y[: b["paper"].batch_size]
            F.cross_entropy(out, y, ignore_index=-1).backward()
            opt.step()
    model.eval()
    correct = total = 0
    with torch.no_grad():
        for b in NeighborLoader(data, num_neighbors=list(fanouts), input_nodes=("paper", split["test"]),
                                batch_size=batch_size):
            y = b["paper"].y[: b["paper"].batch_size]
            pred = seed_logits(model, b, "paper").argmax(-1)
            keep = y >= 0
            correct += int((pred[keep] == y[keep]).sum())
            total += int(keep.sum())
    return {"test_acc": correct / max(total, 1), "seconds": time.perf_counter() - t0}


def main(argv=None) -> int:
    import flashgnn
    from flashgnn.train import TrainConfig, Trainer

    ap = argparse.ArgumentParser(prog="python -m benchmarks.hetero_accuracy", description=__doc__.split("\n\n")[0])
    ap.add_argument("--work", default="/tmp/flashgnn-hetero-acc")
    ap.add_argument("--scale", type=int, default=20000, help="papers (flashgnn generate igbh --scale)")
    ap.add_argument("--feature-dim", type=int, default=64)
    ap.add_argument("--fanout", default="10,5")
    ap.add_argument("--batch-size", type=int, default=512)
    ap.add_argument("--hidden", type=int, default=64)
    ap.add_argument("--lr", type=float, default=3e-3)
    ap.add_argument("--epochs", type=int, default=3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--row-codec", choices=("fp16", "int8"),
                    help="also train with every row served from a cache holding them encoded (uring engine, "
                         "--cache-row-codec): the codec's accuracy effect")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    work = Path(a.work)
    raw, ds = work / "raw", work / "ds"
    flashgnn.generate(raw, model="igbh", scale=a.scale, feature_dim=a.feature_dim, seed=a.seed, force=True,
                      progress=False)
    flashgnn.build(raw, ds, add_reverse=True, force=True, progress=False)
    fanouts = [int(f) for f in a.fanout.split(",")]
    pyg = pyg_side(raw, fanouts, a.batch_size, a.hidden, a.lr, a.epochs, a.seed)
    def train(**extra) -> dict:
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(sys.stderr):  # the trainer's summary line; stdout is the report
            s = Trainer(TrainConfig(str(ds), model="sage", epochs=a.epochs, fanout=a.fanout, batch_size=a.batch_size,
                                    hidden=a.hidden, lr=a.lr, seed=a.seed, quiet=True, no_progress=True,
                                    **extra)).fit()
        return {"test_acc": s["final_test_acc"], "best_epoch_test_acc": s["test_acc"],
                "seconds": time.perf_counter() - t0}

    fg = train()
    report = {"pyg": pyg, "flashgnn": fg, "difference_points": 100 * (fg["test_acc"] - pyg["test_acc"]),
              "settings": vars(a)}
    if a.row_codec:
        # Every row through the cache's static set (a budget of the whole dataset), held encoded.
        whole = sum(f.stat().st_size for f in ds.iterdir())
        enc = train(engine="uring", cache_budget=whole, cache_row_codec=a.row_codec)
        report[f"flashgnn_{a.row_codec}"] = enc
        report["codec_effect_points"] = 100 * (enc["test_acc"] - fg["test_acc"])
    if a.json:
        print(json.dumps(report, indent=2))
        return 0
    codec = (f"; rows held {a.row_codec} in the cache: {report[f'flashgnn_{a.row_codec}']['test_acc']:.4f} "
             f"({report['codec_effect_points']:+.2f} points against rows as stored)") if a.row_codec else ""
    print(f"summary: test accuracy flashgnn {fg['test_acc']:.4f} (last epoch; best-val epoch "
          f"{fg['best_epoch_test_acc']:.4f}) vs PyG to_hetero(GraphSAGE) {pyg['test_acc']:.4f}: "
          f"{report['difference_points']:+.2f} points (target: within 1){codec}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
