"""PyG's canonical GraphSAGE example, on stock PyG (in memory) or on flashgnn (on disk).

    python examples/pyg_graphsage.py DATASET [--backend flashgnn|pyg] [--epochs 10]

This is PyG's ``examples/reddit.py`` pattern unchanged: a ``NeighborLoader``
with ``num_neighbors=[25, 10]`` over the training nodes, ``GraphSAGE`` from
``torch_geometric.nn``, the seeds' outputs sliced with ``batch.batch_size``,
and evaluation by layer-wise inference, ``model.inference(subgraph_loader)``
over a ``num_neighbors=[-1]`` loader of every node. The two backends differ in
two lines only, in :func:`load` — where ``NeighborLoader`` is imported from,
and what ``data`` is:

- ``--backend pyg``: ``torch_geometric.loader.NeighborLoader`` over a
  ``Data`` in memory (``DATASET`` is a ``.pt`` file holding
  ``data.to_dict()``, read with ``torch.load(weights_only=True)``, or a
  flashgnn dataset read whole with ``flashgnn.to_pyg``). Stock PyG samples
  with pyg-lib or torch-sparse;
- ``--backend flashgnn`` (the default; or ``FLASHGNN_EXAMPLE_BACKEND``):
  ``flashgnn.NeighborLoader`` over the dataset directory; the graph stays on
  disk and ``subgraph_loader.data`` holds x and y memory-mapped.

Everything after :func:`load` is the same code for both.
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import torch
import torch.nn.functional as F
from torch_geometric.nn import GraphSAGE
from tqdm.auto import tqdm


def load(backend: str, path: str):
    """``(NeighborLoader, data)``: the only lines that depend on the backend."""
    if backend == "flashgnn":
        from flashgnn import NeighborLoader

        data = path  # a flashgnn dataset directory: the graph stays on disk
    else:
        from torch_geometric.data import Data
        from torch_geometric.loader import NeighborLoader

        if path.endswith(".pt"):
            data = Data.from_dict(torch.load(path, weights_only=True))
        else:
            import flashgnn

            data = flashgnn.to_pyg(path)  # the whole graph in memory
    return NeighborLoader, data


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("dataset")
    p.add_argument("--backend", choices=["flashgnn", "pyg"],
                   default=os.environ.get("FLASHGNN_EXAMPLE_BACKEND", "flashgnn"))
    p.add_argument("--epochs", type=int, default=10)
    p.add_argument("--num-neighbors", default="25,10", help="per hop, -1 = all (PyG's num_neighbors)")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--eval-batch-size", type=int, default=4096)
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--dropout", type=float, default=0.5)
    p.add_argument("--lr", type=float, default=0.01)
    p.add_argument("--seed", type=int, default=12345)
    p.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    p.add_argument("--quiet", action="store_true", help="no progress bars or per-epoch lines")
    return p


def main(argv=None) -> dict:
    args = parser().parse_args(argv)
    torch.manual_seed(args.seed)
    device = torch.device(args.device)
    NeighborLoader, data = load(args.backend, args.dataset)
    num_neighbors = [int(v) for v in args.num_neighbors.split(",")]

    # ---- from here on: PyG's example, the same code for both backends ----
    subgraph_loader = NeighborLoader(data, num_neighbors=[-1], input_nodes=None, batch_size=args.eval_batch_size,
                                     shuffle=False)
    graph = subgraph_loader.data  # x, y and the masks (flashgnn: x and y memory-mapped, no edges in RAM)
    train_loader = NeighborLoader(data, num_neighbors=num_neighbors, input_nodes=graph.train_mask,
                                  batch_size=args.batch_size, shuffle=True)
    num_classes = int(graph.y.max()) + 1
    model = GraphSAGE(graph.num_features, args.hidden, len(num_neighbors), num_classes,
                      dropout=args.dropout).to(device)
    optimizer = torch.optim.Adam(model.parameters(), lr=args.lr)
    show = not args.quiet

    def train(epoch: int) -> tuple[float, float]:
        model.train()
        pbar = tqdm(total=int(graph.train_mask.sum()), desc=f"Epoch {epoch:02d}", disable=not show)
        total_loss = total_correct = total_examples = 0
        for batch in train_loader:
            optimizer.zero_grad()
            y = batch.y[:batch.batch_size].to(device)
            y_hat = model(batch.x.to(device), batch.edge_index.to(device))[:batch.batch_size]
            loss = F.cross_entropy(y_hat, y)
            loss.backward()
            optimizer.step()
            total_loss += float(loss.detach()) * batch.batch_size
            total_correct += int((y_hat.argmax(dim=-1) == y).sum())
            total_examples += batch.batch_size
            pbar.update(batch.batch_size)
        pbar.close()
        return total_loss / total_examples, total_correct / total_examples

    @torch.no_grad()
    def test() -> list[float]:
        model.eval()
        y_hat = model.inference(subgraph_loader, device=device, progress_bar=show).argmax(dim=-1)
        y = graph.y.to(y_hat.device)
        return [int((y_hat[m] == y[m]).sum()) / max(int(m.sum()), 1)
                for m in (graph.train_mask, graph.val_mask, graph.test_mask)]

    t0 = time.perf_counter()
    best_val = test_acc = 0.0
    for epoch in range(1, args.epochs + 1):
        loss, approx_acc = train(epoch)
        train_acc, val_acc, tst_acc = test()
        if val_acc > best_val:
            best_val, test_acc = val_acc, tst_acc
        if show:
            print(f"Epoch {epoch:02d}, Loss: {loss:.4f}, Approx. Train: {approx_acc:.4f}, Train: {train_acc:.4f}, "
                  f"Val: {val_acc:.4f}, Test: {tst_acc:.4f}")
    result = dict(backend=args.backend, epochs=args.epochs, loss=loss, train_acc=train_acc, val_acc=val_acc,
                  test_acc=tst_acc, best_val_acc=best_val, test_acc_at_best_val=test_acc,
                  seconds=time.perf_counter() - t0)
    print(f"{args.backend}: {args.epochs} epochs in {result['seconds']:.1f} s, test {tst_acc:.4f} (at best val "
          f"{best_val:.4f}: {test_acc:.4f})", file=sys.stderr if args.quiet else sys.stdout)
    return result


if __name__ == "__main__":
    main()
