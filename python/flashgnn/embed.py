"""`flashgnn embed`: layer-wise full-graph inference with bounded memory.

    flashgnn embed DATASET --checkpoint DIR OUT [--output logits|hidden] [--batch-size 16384]

Mini-batch inference recomputes every shared neighbor once per batch (the
k-hop neighborhood explodes); PyG's ``BasicGNN.inference()`` avoids that by
going layer by layer, but it reads ``loader.data.x`` — the whole feature
table in RAM. Here each layer is one pass over all nodes in chunks of
``--batch-size`` targets:

- the chunk's full neighbor lists come from the engine (one call per chunk,
  deep-queue direct I/O, fanout -1);
- layer 0 takes the input rows from the dataset in that same call; later
  layers read them from the previous layer's table on disk (a memory map:
  pages are reclaimable, so resident memory stays bounded by the chunk);
- the chunk's outputs are written to this layer's table, rows in original id
  order.

Output directory (published atomically, like a dataset build):
``embeddings.npy`` float32 ``[num_nodes, dim]`` (row = original node id),
``predictions.npy`` int64 (argmax, with ``--output logits``), ``embed.json``
(model, layers, dims, timings). ``embeddings.npy`` is a plain feature table:
``flashgnn build`` can import it as ``node_feat.npy`` and the serving layer
reads it directly.

GCN normalises by every node's degree in the whole graph, which the
sampler reads from the slots (``degrees=True``; :mod:`flashgnn.nn`), not by
degrees as seen in the chunk's subgraph (where a target's neighbors would
have their self-loop only). So SAGE, GCN, GIN, GAT and MLP all match a
full-graph forward pass to float tolerance (tested).
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np

from flashgnn._durable import check_output, create_tmp_dir, fsync_path, publish_dir, remove_stale_tmps


def _tables(tmp: Path, name: str, n: int, dim: int, npy: bool):
    path = tmp / name
    if npy:
        return np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, dim))
    return np.memmap(path, mode="w+", dtype=np.float32, shape=(n, dim))


def embed(dataset, checkpoint, out, batch_size: int = 16384, output: str = "logits", engine: str = "auto",
          device: str = "cpu", force: bool = False, progress: bool = True) -> dict:
    import torch
    from torch_geometric.nn import MLP
    from tqdm.auto import tqdm

    import flashgnn
    from flashgnn.loader import resolve_engine
    from flashgnn.nn import GCN
    from flashgnn.sampler import Sampler
    from flashgnn.train import load_checkpoint, model_from_checkpoint, normalize_features

    if output not in ("logits", "hidden"):
        raise ValueError(f"output {output!r}: expected logits or hidden")
    if batch_size <= 0:
        raise ValueError(f"batch_size must be > 0, got {batch_size}")
    out = Path(out)
    check_output(out, force, (dataset, checkpoint))  # the --force rule of every publishing command, before any work
    ds = flashgnn.open(dataset)
    state = load_checkpoint(checkpoint)
    cfg = state["model_config"]
    if cfg["in_dim"] != ds.feature_dim:
        raise ValueError(f"{checkpoint}: model_config.in_dim {cfg['in_dim']} != feature_dim {ds.feature_dim} of {ds.path}")
    model = model_from_checkpoint(state).to(device).eval()
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_tmps(out)
    tmp = create_tmp_dir(out)
    n = ds.num_nodes
    eng = resolve_engine(engine)
    t0 = time.perf_counter()
    chunks = [(lo, min(lo + batch_size, n)) for lo in range(0, n, batch_size)]
    reads = 0
    try:
        if isinstance(model, MLP):
            layers = [None]
        else:
            layers = list(range(len(model.convs)))
            if output == "hidden":
                layers = layers[:-1]
                if not layers:
                    raise ValueError("--output hidden needs a model with at least 2 layers")
        bar = tqdm(total=len(layers) * len(chunks), desc="embed", unit="chunk", disable=not progress,
                   dynamic_ncols=True)
        prev = None
        for li, layer in enumerate(layers):
            last = li == len(layers) - 1
            table = None  # created at the first chunk, when the layer's width is known
            first = li == 0
            s = Sampler(ds.path, [0] if layer is None else [-1], engine=eng, dtype=np.float32, labels=False,
                        features=first, degrees=isinstance(model, GCN))
            bar.set_description(f"embed layer {li + 1}/{len(layers)}")
            for lo, hi in chunks:
                b = s.sample(np.arange(lo, hi, dtype=np.int64), 0)
                h_in = b.x if first else np.asarray(prev[b.n_id])
                with torch.no_grad():
                    x = torch.from_numpy(np.ascontiguousarray(h_in, dtype=np.float32)).to(device)
                    if first:  # as the model was trained (train --normalize-features)
                        x = normalize_features(x, cfg.get("normalize_features", "none"))
                    if layer is None:
                        h = model(x)
                    else:
                        ei = torch.from_numpy(np.stack([b.row, b.col])).to(device)
                        if isinstance(model, GCN):
                            h = model.conv(layer, x, ei, torch.from_numpy(b.deg).to(device))
                        else:
                            h = model.convs[layer](x, ei)
                        h = _between_layers(model, layer, h[: hi - lo])
                if table is None:
                    table = _tables(tmp, "embeddings.npy" if last else f"layer{li}.f32", n, h.shape[1], npy=last)
                table[lo:hi] = h.cpu().numpy()
                bar.update(1)
            reads += s.telemetry()["reads"]
            table.flush()
            if prev is not None:
                name = prev.filename
                del prev
                os.unlink(name)
            prev = table
        bar.close()
        final = prev
        if output == "logits":
            pred = np.lib.format.open_memmap(tmp / "predictions.npy", mode="w+", dtype=np.int64, shape=(n,))
            for lo, hi in chunks:
                pred[lo:hi] = np.asarray(final[lo:hi]).argmax(axis=1)
            pred.flush()
            del pred
        dim = final.shape[1]
        del final, prev
        seconds = time.perf_counter() - t0
        meta = dict(flashgnn_output="embed", dataset=os.path.abspath(ds.path), checkpoint=os.path.abspath(checkpoint), model=cfg["model"],
                    output=output, num_nodes=n, dim=dim, layers=len(layers), batch_size=batch_size, engine=eng,
                    seconds=seconds, reads=reads, dtype="float32")
        (tmp / "embed.json").write_text(json.dumps(meta, indent=2))
        for f in tmp.iterdir():
            fsync_path(f)
        publish_dir(tmp, out)
        return meta
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def _between_layers(model, i: int, h):
    """What ``BasicGNN.forward`` applies after conv ``i`` when it is not the
    last layer: activation (before or after the norm) — dropout is off in eval."""
    if i >= len(model.convs) - 1 and getattr(model, "jk_mode", None) is None:
        return h
    if model.act is not None and model.act_first:
        h = model.act(h)
    if model.norms is not None:
        h = model.norms[i](h)
    if model.act is not None and not model.act_first:
        h = model.act(h)
    return h
