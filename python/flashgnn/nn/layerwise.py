"""Layer-wise full-graph inference with bounded memory, for any model (``flashgnn.inference``).

    flashgnn.inference(model, "data/demo")                  # -> Tensor [num_nodes, out] when it fits
    flashgnn.inference(model, "data/demo", "emb/")          # -> embed.json metadata; emb/embeddings.npy
    flashgnn embed DATASET OUT --checkpoint DIR [--model-class pkg.mod:Class] [--output logits|hidden]

Mini-batch inference recomputes every shared neighbor once per batch (the
k-hop neighborhood explodes); PyG's ``BasicGNN.inference()`` avoids that by
going layer by layer, but it keeps the feature table and every layer's
outputs in RAM. Here each layer is one pass over all nodes in chunks of
``batch_size`` targets:

- the chunk's full neighbor lists come from the engine (one call per chunk,
  deep-queue direct I/O, fanout -1, one hop);
- layer 0 takes the input rows from the dataset in that same call; later
  layers read them from the previous layer's table on disk (a memory map:
  pages are reclaimable, so resident memory stays bounded by the chunk);
- the chunk's outputs are written to this layer's table, rows in original id
  order; the previous layer's table is deleted once the layer is done.

Which models (:func:`_layers_of`, one implementation for the built-in models
of ``flashgnn train`` and a user's own):

- any ``torch_geometric.nn.models.basic_gnn.BasicGNN`` (GraphSAGE, GCN, GIN,
  GAT, PNA, EdgeCNN, ...; ``jk=None`` or ``'last'``): layer ``i`` is PyG's own
  ``model.inference_per_layer(i, x, edge_index, batch_size)`` — the conv,
  then activation/norm (and ``lin`` after the last layer with ``jk='last'``)
  exactly as ``BasicGNN.inference`` applies them;
- GCN-normalised convolutions (:class:`flashgnn.nn.GCN`, and PyG's
  ``GCNConv`` with ``normalize=True`` inside a BasicGNN) are normalised by
  every node's degree in the whole graph, read from the slots
  (``degrees=True``; :mod:`flashgnn.nn`), not by degrees as seen in the
  chunk's subgraph (where a target's neighbors would have their self-loop
  only — which is what PyG's own layer-wise inference computes);
- ``torch_geometric.nn.MLP``: one pass, no neighbors;
- any other module with the per-layer protocol: an integer ``num_layers``
  and ``layer(i, x, edge_index) -> Tensor`` returning layer ``i``'s output
  (everything applied between layers included) for at least the first
  ``batch_size`` rows of ``x``; ``x`` holds the chunk's targets first, then
  their neighbors; ``edge_index`` is local, row = neighbor, col = target. A
  module that also sets ``layer_needs_degrees = True`` is called with
  ``deg=`` (each row's degree in the whole graph).

Typed datasets (:func:`run_typed`): a hetero model of
:mod:`flashgnn.nn.hetero` (or a module with its per-layer protocol:
``num_layers``, ``input_dict``, ``layer(i, x_dict, edge_index_dict,
types=None)``, ``layer_types``) runs over every node type, layer by layer, in
blocks of one type's nodes with their whole one-hop in-neighbourhood over
every edge type; per-type tables on disk; output per node type
(``embeddings/<type>.npy``; docs/training.md, *Typed datasets*).

Output directory (published atomically, like a dataset build):
``embeddings.npy`` float32 ``[num_nodes, dim]`` (row = original node id),
``predictions.npy`` int64 (argmax, with ``--output logits``), ``embed.json``
(model, layers, dims, chunks, timings). ``embeddings.npy`` is a plain
feature table: ``flashgnn build`` can import it as ``node_feat.npy`` and the
serving layer reads it directly.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
import time
from pathlib import Path

import numpy as np

from flashgnn._malloc import large_blocks_reused
from flashgnn._durable import check_output, create_tmp_dir, fsync_path, makedirs_durable, publish_dir, remove_stale_tmps

PROTOCOL = ("a torch_geometric BasicGNN (GraphSAGE, GCN, GIN, GAT, ...), torch_geometric.nn.MLP, or a module with "
            "an integer `num_layers` and `layer(i, x, edge_index) -> Tensor` (docs/training.md, layer-wise inference)")


def _tables(tmp: Path, name: str, n: int, dim: int, npy: bool):
    path = tmp / name
    if npy:
        return np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, dim))
    return np.memmap(path, mode="w+", dtype=np.float32, shape=(n, dim))


def _rows(table: np.ndarray, ids: np.ndarray) -> np.ndarray:
    """``table[ids]``. From a memory-mapped table (out of core) the rows are taken in id order — page order, so
    the kernel reads ahead along the file instead of faulting a page in per row — and put back in ``ids``'
    order."""
    if not isinstance(table, np.memmap) or len(ids) < 2:
        return table[ids]
    order = np.argsort(ids, kind="stable")
    out = np.empty((len(ids), table.shape[1]), table.dtype)
    out[order] = table[ids[order]]
    return out


def _gcn_conv(conv) -> bool:
    """A PyG ``GCNConv`` that normalises by degrees (and so needs the whole graph's)."""
    from torch_geometric.nn import GCNConv

    return isinstance(conv, GCNConv) and conv.normalize and not conv.cached and conv.add_self_loops


def _after_conv(model, i: int, h):
    """What ``BasicGNN.inference_per_layer`` applies after conv ``i``
    (dropout is off in eval), for the convs called here directly."""
    if i == model.num_layers - 1 and model.jk_mode is None:
        return h
    if model.act is not None and model.act_first:
        h = model.act(h)
    if model.norms is not None:
        h = model.norms[i](h)
    if model.act is not None and not model.act_first:
        h = model.act(h)
    if i == model.num_layers - 1 and hasattr(model, "lin"):
        h = model.lin(h)
    return h


def _csr(ei, bs: int, x):
    """A chunk's one-hop ``edge_index`` (row = neighbour, col = target < ``bs``, grouped by target as the engine
    writes them) as a CSR matrix ``[bs, len(x)]`` of ones (PyG's ``adj_t``); ``ei`` as it is when not grouped."""
    import warnings

    import torch

    col = ei[1]
    if col.numel() and not bool((col[1:] >= col[:-1]).all()):
        return ei
    crow = torch.zeros(bs + 1, dtype=torch.long, device=ei.device)
    crow[1:] = torch.bincount(col, minlength=bs).cumsum(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # "sparse CSR tensor support is in beta"
        return torch.sparse_csr_tensor(crow, ei[0], torch.ones(col.numel(), dtype=x.dtype, device=ei.device),
                                       size=(bs, x.size(0)))


def _layers_of(model):
    """``(num_layers, step, needs_degrees, kind)`` where ``step(i, x,
    edge_index, deg, batch_size)`` is layer ``i``'s output for the first
    ``batch_size`` rows; ``num_layers == 0`` means a neighbor-free model
    (one pass of ``model(x)``)."""
    from torch_geometric.nn import MLP
    from torch_geometric.nn.models.basic_gnn import BasicGNN

    from flashgnn.nn.degnorm import degree_norm

    if isinstance(model, MLP):
        return 0, lambda i, x, ei, deg, bs: model(x[:bs]), False, "MLP"
    if isinstance(model, BasicGNN):
        name = type(model).__name__
        if model.jk_mode not in (None, "last"):
            raise ValueError(f"layer-wise inference of {name}: jk={model.jk_mode!r} combines every layer's output; "
                             "only jk=None or 'last' can run layer by layer (as in PyG's BasicGNN.inference)")
        if getattr(model, "whole_graph_degrees", False):  # flashgnn.nn.GCN: its convs take degree_norm's weights
            def step(i, x, ei, deg, bs):
                return _after_conv(model, i, model.conv(i, x, ei, deg)[:bs])
            return model.num_layers, step, True, name
        gcn = [_gcn_conv(c) for c in model.convs]
        if any(gcn):
            def step(i, x, ei, deg, bs):
                conv = model.convs[i]
                if not gcn[i]:
                    return model.inference_per_layer(i, x, ei, bs)
                fill = 2.0 if conv.improved else 1.0
                ei2, w, _ = degree_norm(ei, x.size(0), deg, fill=fill)
                conv.normalize = False  # weights given: the whole graph's normalisation, not the chunk's
                try:
                    h = conv(x, ei2, w)
                finally:
                    conv.normalize = True
                return _after_conv(model, i, h[:bs])
            return model.num_layers, step, True, name
        from torch_geometric.nn import SAGEConv

        if all(type(c) is SAGEConv for c in model.convs):
            # Bipartite: the chunk's rows as sources, its targets (its first rows) as destinations, so the conv's
            # linear maps run on the targets alone; PyG's inference_per_layer runs them on every row of the
            # chunk (targets and all their neighbours: ~25x the rows on a 4096-target chunk of a power-law
            # graph) and keeps the first rows. The edges as a CSR matrix [targets, rows], so the conv takes
            # its fused sparse-dense product instead of gathering a row per edge and scattering it back
            # (4.5x faster on such a chunk, same values). Then what inference_per_layer applies after the conv.
            return (model.num_layers,
                    lambda i, x, ei, deg, bs: _after_conv(model, i, model.convs[i]((x, x[:bs]), _csr(ei, bs, x))),
                    False, name)
        return model.num_layers, lambda i, x, ei, deg, bs: model.inference_per_layer(i, x, ei, bs), False, name
    nl = getattr(model, "num_layers", None)
    layer = getattr(model, "layer", None)
    if callable(layer) and isinstance(nl, int) and not isinstance(nl, bool):
        if nl < 1:
            raise ValueError(f"{type(model).__name__}.num_layers = {nl}: expected >= 1")
        if getattr(model, "layer_needs_degrees", False):
            return nl, lambda i, x, ei, deg, bs: model.layer(i, x, ei, deg=deg)[:bs], True, type(model).__name__
        return nl, lambda i, x, ei, deg, bs: model.layer(i, x, ei)[:bs], False, type(model).__name__
    raise TypeError(f"layer-wise inference: {type(model).__module__}.{type(model).__qualname__} is not {PROTOCOL}")


def _tiled_sage(model):
    """Whether every conv of ``model`` is a SAGEConv whose aggregation is a plain sum or mean of its neighbours'
    rows (no projection first): then a layer can be computed source block by source block
    (:func:`_sage_layer_tiled`)."""
    from torch_geometric.nn import SAGEConv
    from torch_geometric.nn.models.basic_gnn import BasicGNN

    return isinstance(model, BasicGNN) and all(
        type(c) is SAGEConv and c.aggr in ("mean", "sum", "add") and not c.project for c in model.convs)


def _tile_rows(room: int, dim: int, avg_degree: float) -> tuple[int, int]:
    """(targets per destination block, rows per source block) of :func:`_sage_layer_tiled` for ``room``
    bytes. The table is read once per destination block, so that block takes what it safely can: a sixth of
    the room for, per target, its sums, its own row, its output and its edges (two int64 ids and a sort
    index each) — the linear maps and the sort hold as much again meanwhile; a half (of 209 MiB of room
    under a 900 MiB cap) went over the cap and thrashed. A source block takes a sixteenth. ``dim``: the
    input rows' width, also taken for the output's (not known before the layer runs)."""
    per_target = 4 * 3 * dim + 24 * avg_degree
    return max(64, int(room // 6 // max(per_target, 1))), max(64, int(room // 16 // (4 * max(dim, 1))))


def _table_rows(f, table: np.ndarray, a: int, z: int, into: np.ndarray | None = None) -> np.ndarray:
    """Rows ``a:z`` of memory-mapped ``table``, read from its open file ``f`` in one sequential call (into
    ``into`` when given): a slice of the map would fault its pages in one at a time as they are touched."""
    dim = table.shape[1]
    rows = np.empty((z - a, dim), np.float32) if into is None else into[: z - a]
    at = table.offset + a * dim * 4
    view = memoryview(rows).cast("B")
    got = 0
    while got < len(view):
        k = os.preadv(f.fileno(), [view[got:]], at + got)
        if not k:
            raise EOFError(f"{table.filename}: rows {a}..{z} end early at byte {at + got}")
        got += k
    return rows


def _sage_layer_tiled(model, i: int, sampler, src: np.ndarray, new_table, chunks: list, tiles: tuple, bar):
    """Layer ``i`` of an all-SAGE ``model`` (:func:`_tiled_sage`) over every node, for an input table ``src``
    (a memory map) larger than the room, where gathering each chunk's rows would read most of the table's
    pages once per chunk. Instead, a destination block of targets at a time (whole ``chunks``, at least one;
    ``tiles``: targets per destination block, rows per source block), the block's one-hop edges are sampled
    (structure only, chunk by chunk) and sorted by source, and the table is read in id order a source
    block at a time, each block's rows summed into the targets; then the conv's linear maps on the sums
    (divided by the degree for a mean) and the targets' own rows, and what ``BasicGNN.inference_per_layer``
    applies after the conv. The same values as the conv on the gathered rows, up to the order of the float
    sums. Returns the output table (``new_table(dim)``)."""
    import torch
    import torch.nn.functional as F

    conv = model.convs[i]
    n, dim = src.shape
    rows, width = tiles
    per = max(1, rows // max(chunks[0][1] - chunks[0][0], 1)) if chunks else 1
    buf = np.empty((min(width, n), dim), np.float32)
    out = None
    with open(src.filename, "rb", buffering=0) as f:
        for k in range(0, len(chunks), per):
            group = chunks[k:k + per]
            lo, hi = group[0][0], group[-1][1]
            sources, targets = [], []
            for clo, chi in group:
                b = sampler.sample(np.arange(clo, chi, dtype=np.int64), 0)
                sources.append(b.n_id[b.edge_index[0]])
                targets.append(b.edge_index[1] + (clo - lo))
                bar.update(1)
            srcs, dsts = np.concatenate(sources), np.concatenate(targets)
            del sources, targets
            order = np.argsort(srcs, kind="stable")
            srcs, dsts = srcs[order], torch.from_numpy(dsts[order])
            del order
            with torch.no_grad():
                acc = torch.zeros((hi - lo, dim), dtype=torch.float32)
                for slo in range(0, n, width):
                    a, z = np.searchsorted(srcs, [slo, min(slo + width, n)])
                    if a < z:
                        block = torch.from_numpy(_table_rows(f, src, slo, min(slo + width, n), buf))
                        acc.index_add_(0, dsts[a:z], block[torch.from_numpy(srcs[a:z] - slo)])
                if conv.aggr == "mean":
                    acc /= torch.bincount(dsts, minlength=hi - lo).clamp_(min=1).to(acc.dtype).unsqueeze(1)
                h = conv.lin_l(acc)
                if conv.root_weight:
                    h = h + conv.lin_r(torch.from_numpy(_table_rows(f, src, lo, hi)))
                if conv.normalize:
                    h = F.normalize(h, p=2.0, dim=-1)
                h = _after_conv(model, i, h)
            if out is None:
                out = new_table(h.shape[1])
            out[lo:hi] = h.numpy()
    return out


def _input_table(ds, engine: str, cache, x_transform, dev, block: int, table: np.ndarray) -> int:
    """Fill ``table`` (float32 ``[num_nodes, dim]``, memory or a memory map) with every node's input row,
    ``x_transform`` applied, read in id order in blocks of ``block`` rows through the engine and ``cache``;
    returns the reads it took."""
    import torch

    from flashgnn.sample.sampler import rows_in_id_order

    def each(rows):
        with torch.no_grad():
            return x_transform(torch.from_numpy(np.ascontiguousarray(rows)).to(dev)).float().cpu().numpy()

    return rows_in_id_order(ds.path, table, engine=engine, cache=cache, block=block,
                            each=None if x_transform is None else each)


def _dev(model, device):
    import torch

    if device is not None:
        return torch.device(device)
    p = next(iter(model.parameters()), None)
    return p.device if p is not None else torch.device("cpu")


_UNSET = object()


def _work_dir(out, tmp_dir) -> Path:
    """Where a run writes its tables: a temporary directory beside ``out`` (published at the end; stale ones of
    killed runs removed first), else a private one under ``tmp_dir`` (removed at the end)."""
    if out is not None:
        makedirs_durable(out.parent)  # a parent lost in a power loss would take the published output with it
        remove_stale_tmps(out)
        return create_tmp_dir(out)
    return Path(tempfile.mkdtemp(prefix="flashgnn-inference-", dir=tmp_dir))


def _publish(tmp: Path, out, meta: dict, meta_extra) -> dict:
    """Write ``embed.json``, make every file durable (deepest first) and publish ``tmp`` as ``out``."""
    meta.update(meta_extra or {})
    (tmp / "embed.json").write_text(json.dumps(meta, indent=2))
    for f in sorted(tmp.rglob("*"), key=lambda p: -len(p.parts)):
        fsync_path(f)
    publish_dir(tmp, out)
    return meta


def inference(model, dataset, out=None, *, batch_size: int = 16384, device=None, engine: str = "auto",
              progress_bar=_UNSET, layers: int | None = None, force: bool = False, predictions: bool = False,
              max_bytes: int | None = None, tmp_dir=None, x_transform=None, node_types=None, **kwargs):
    """Run ``model`` over every node of ``dataset`` layer by layer (module docs).

    ``progress_bar`` (default True; PyG's name, as in ``BasicGNN.inference``;
    ``progress`` is its deprecated spelling): draw a bar per layer.
    ``out=None``: returns the outputs as a float32 ``Tensor [num_nodes,
    dim]`` (row = node id), refused with the figures (``MemoryError``) when
    that table needs more than ``max_bytes`` (default: the memory this
    process may still use) — checked when the last layer's width is known,
    before it runs; the layer tables then live under ``tmp_dir`` (default:
    the system temporary directory) and are deleted. ``out=DIR``: publishes
    ``DIR/embeddings.npy`` (+ ``predictions.npy`` with ``predictions=True``)
    and ``DIR/embed.json`` atomically and returns the metadata.
    ``layers=k`` stops after the first ``k`` layers (hidden representations).
    ``batch_size``: targets per engine call (bounds resident memory).
    ``device``: where the layers run (default: the model's). ``x_transform``
    maps the input rows of each chunk (row-wise, e.g. feature normalisation).
    The model runs in eval mode under ``torch.no_grad()`` and its mode is
    restored afterwards.

    **Typed dataset** (a hetero model of :mod:`flashgnn.nn.hetero`, or any
    module with its per-layer protocol; :func:`run_typed`): every node type's
    rows are computed layer by layer, a layer's blocks of ``batch_size`` nodes
    of one type at a time; ``node_types`` (default: every type the last layer
    outputs; a target model's is its target) picks the output types, and only
    the rows those need are computed in earlier layers. ``out=None`` returns
    ``{node type: Tensor [count, dim]}`` (row = id within the type);
    ``out=DIR`` publishes ``DIR/embeddings/<type>.npy`` per type (+
    ``DIR/predictions/<target>.npy`` with ``predictions=True``, the target
    type of a target model) and ``DIR/embed.json`` (``node_types``: per type
    its rows, width and file) and returns the metadata."""
    from flashgnn.loader import _args as _pa

    who = "flashgnn.inference"
    progress_bar = _pa.renamed(who, "progress", "progress_bar", kwargs.pop("progress", _UNSET), progress_bar, _UNSET)
    _pa.refuse_unknown(who, kwargs, ("model", "dataset", "out", "batch_size", "device", "engine", "progress_bar",
                                     "layers", "force", "predictions", "max_bytes", "tmp_dir", "x_transform",
                                     "node_types"))
    progress = True if progress_bar is _UNSET else bool(progress_bar)
    return run(model, dataset, out, batch_size=batch_size, device=device, engine=engine, progress=progress,
               layers=layers, force=force, predictions=predictions, max_bytes=max_bytes, tmp_dir=tmp_dir,
               x_transform=x_transform, node_types=node_types)


def run(model, dataset, out=None, *, batch_size, device, engine, progress, layers, force, predictions, max_bytes,
        tmp_dir, x_transform, inputs=(), meta_extra: dict | None = None, cache=None, node_types=None):
    """:func:`inference`, plus what ``flashgnn embed`` adds: more ``inputs``
    that ``out`` must not overwrite (the checkpoint), ``embed.json`` fields
    and a :class:`flashgnn.Cache` (``--memory-budget``) that every layer's
    pass reads through (layers after the first re-read the same structure)."""
    import torch

    from flashgnn import _progress
    from flashgnn.sample.budget import available_memory
    from flashgnn.loader.neighbor import as_dataset, resolve_engine
    from flashgnn.sample.sampler import Sampler

    if isinstance(batch_size, bool) or not isinstance(batch_size, (int, np.integer)) or batch_size <= 0:
        raise ValueError(f"batch_size must be an integer > 0, got {batch_size!r}")
    from flashgnn.loader.hetero import typed_manifest

    if typed_manifest(dataset) is not None:
        return run_typed(model, dataset, out, batch_size=batch_size, device=device, engine=engine, progress=progress,
                         layers=layers, force=force, predictions=predictions, max_bytes=max_bytes, tmp_dir=tmp_dir,
                         x_transform=x_transform, inputs=inputs, meta_extra=meta_extra, cache=cache,
                         node_types=node_types)
    if node_types is not None:
        raise ValueError(f"node_types={node_types!r}: {getattr(dataset, 'path', dataset)} is a homogeneous dataset "
                         "(node_types picks the output types of a typed one)")
    if is_typed_model(model):
        raise TypeError(f"layer-wise inference: {type(model).__name__} is a typed-graph model and "
                        f"{getattr(dataset, 'path', dataset)} is a homogeneous dataset")
    total, step, needs_deg, kind = _layers_of(model)
    passes = max(total, 1)
    if layers is not None:
        if isinstance(layers, bool) or not isinstance(layers, (int, np.integer)) or not 1 <= layers <= passes:
            raise ValueError(f"layers={layers!r}: {kind} has {passes} layer(s); expected 1..{passes}")
        passes = int(layers)
    if out is not None:
        out = Path(out)
        check_output(out, force, (getattr(dataset, "path", dataset), *inputs))
    ds = as_dataset(dataset)
    dev = _dev(model, device)
    n = ds.num_nodes
    eng = resolve_engine(engine)
    tmp = _work_dir(out, tmp_dir)
    # What this process may still use: the output table's bound when it comes back in memory, and the room
    # the input table must fit half of.
    room = available_memory() if max_bytes is None else int(max_bytes)
    limit = None if out is not None else room
    chunks = [(lo, min(lo + batch_size, n)) for lo in range(0, n, batch_size)]
    was_training = model.training
    model.eval()
    t0 = time.perf_counter()
    reads = tiled_layers = 0
    # All-SAGE models on the CPU take a layer source block by source block when its input table is a memory
    # map beyond half the room (_sage_layer_tiled).
    tiled = _tiled_sage(model) and dev.type == "cpu"
    try:
        # The input rows, read once in id (page) order into a table — in memory when they fit half the memory
        # this process may use, else a memory map beside the layers' own tables: then the first layer samples
        # structure only and takes each neighbour's row from this table, as later layers take theirs from the
        # previous layer's, instead of the engine gathering a row per neighbour (on a 131 K-node graph, 3.5 M
        # edges: 0.16 s for the table and 0.3 s of structure, against 6.4 s; out of core the gathers then go
        # through the page cache, as every later layer's do).
        resident = None
        if total > 0 and ds.feature_dim:
            shape = (n, ds.feature_dim)
            resident = np.empty(shape, np.float32) if n * ds.feature_dim * 4 <= room // 2 else \
                _tables(tmp, "input.f32", *shape, npy=False)
            reads += _input_table(ds, eng, cache, x_transform, dev, max(batch_size, 16384), resident)
        bar = _progress.bar(total=passes * len(chunks), desc="inference", unit="chunk", disable=not progress)
        # Each chunk allocates its layer's large tensors again: the heap serves and reuses them (_malloc).
        with large_blocks_reused(room):
            prev = None
            for li in range(passes):
                last = li == passes - 1
                table = None  # created at the first chunk, when the layer's width is known
                first = li == 0
                rows_here = first and resident is None  # the engine gathers this layer's input rows
                s = Sampler(ds.path, [0] if total == 0 else [-1], engine=eng, dtype=np.float32, labels=False,
                            features=rows_here, degrees=needs_deg, cache=cache)
                bar.set_description(f"inference layer {li + 1}/{passes}")

                def new_table(dim, li=li, last=last):
                    if last and limit is not None and n * dim * 4 > limit:
                        raise MemoryError(
                            f"inference({ds.path}): the output table, {n:,} nodes x {dim} float32 = "
                            f"{n * dim * 4:,} bytes, needs more than the {limit:,} bytes available (pass "
                            "out=DIR to write it to disk, or max_bytes= to override)")
                    return _tables(tmp, "embeddings.npy" if last else f"layer{li}.f32", n, dim, npy=last)

                src = resident if first else prev
                if tiled and isinstance(src, np.memmap) and src.nbytes > room // 2:
                    tiles = _tile_rows(room, src.shape[1], ds.num_edges / max(n, 1))
                    table = _sage_layer_tiled(model, li, s, src, new_table, chunks, tiles, bar)
                    tiled_layers += 1
                    chunks_here = ()
                else:
                    chunks_here = chunks
                for lo, hi in chunks_here:
                    b = s.sample(np.arange(lo, hi, dtype=np.int64), 0)
                    h_in = b.x if rows_here else _rows(src, b.n_id)
                    with torch.no_grad():
                        x = torch.from_numpy(np.ascontiguousarray(h_in, dtype=np.float32)).to(dev)
                        if rows_here and x_transform is not None:
                            x = x_transform(x)
                        ei = torch.from_numpy(b.edge_index).to(dev)
                        deg = torch.from_numpy(b.deg).to(dev) if needs_deg else None
                        h = step(li, x, ei, deg, hi - lo)
                    if h.dim() != 2 or h.shape[0] < hi - lo:
                        raise ValueError(f"layer-wise inference: {kind} layer {li} returned shape {tuple(h.shape)} for a "
                                         f"chunk of {hi - lo} targets; expected [>= {hi - lo}, dim]")
                    h = h[: hi - lo]
                    if table is None:
                        table = new_table(h.shape[1])
                    table[lo:hi] = h.float().cpu().numpy()
                    bar.update(1)
                reads += s.telemetry()["reads"]
                table.flush()
                for done in (prev, resident if first else None):  # this layer's input table, on disk or not
                    if isinstance(done, np.memmap):
                        os.unlink(done.filename)  # its pages stay valid until unmapped (POSIX)
                if first:
                    resident = None
                prev = table
        bar.close()
        final = prev
        dim = final.shape[1]
        seconds = time.perf_counter() - t0
        if out is None:
            result = torch.from_numpy(np.array(final))
            del final, prev
            return result
        if predictions:
            pred = np.lib.format.open_memmap(tmp / "predictions.npy", mode="w+", dtype=np.int64, shape=(n,))
            for lo, hi in chunks:
                pred[lo:hi] = np.asarray(final[lo:hi]).argmax(axis=1)
            pred.flush()
            del pred
        del final, prev
        meta = dict(flashgnn_output="embed", dataset=os.path.abspath(ds.path), model=kind, num_nodes=n, dim=dim,
                    layers=passes, chunks=len(chunks), batch_size=int(batch_size), engine=eng, seconds=seconds,
                    reads=reads, dtype="float32", tiled_layers=tiled_layers)
        return _publish(tmp, out, meta, meta_extra)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        model.train(was_training)
        if out is None:
            shutil.rmtree(tmp, ignore_errors=True)


# -- typed datasets --------------------------------------------------------------------------------------

TYPED_PROTOCOL = ("a typed-graph model (flashgnn.nn.hetero: RGAT, RGCN, hetero_sage) or a module with an integer "
                  "`num_layers`, `input_dict(x_dict, n_id_dict)`, `layer(i, x_dict, edge_index_dict, types=None)` and "
                  "`layer_types(i)` (docs/training.md, layer-wise inference)")


def is_typed_model(model) -> bool:
    """Whether ``model`` has the typed per-layer protocol (:class:`flashgnn.nn.hetero._HeteroBase`)."""
    inner = getattr(model, "module", model)
    return all(callable(getattr(inner, a, None)) for a in ("layer", "layer_types", "input_dict")) \
        and isinstance(getattr(inner, "num_layers", None), int)


def typed_plan(model, edge_types, passes: int, node_types=None) -> tuple[list[list[str]], list[str]]:
    """Which node types each layer computes: ``(need, final)`` where
    ``need[i]`` lists the types whose layer-``i`` rows are computed and
    ``final`` the output types. Backwards from ``node_types`` (default: all
    that layer ``passes - 1`` outputs): a type's layer-``i`` rows read layer
    ``i - 1``'s rows of itself and of every source type of an edge type into
    it (those that layer outputs)."""
    produced = [list(model.layer_types(i)) for i in range(passes)]
    last = produced[passes - 1]
    if node_types is None:
        want = list(last)
    else:
        if isinstance(node_types, str):
            node_types = [node_types]
        want = list(dict.fromkeys(node_types))
        missing = [t for t in want if t not in last]
        if missing:
            raise ValueError(f"node_types={want!r}: {type(model).__name__}'s layer {passes} outputs rows for "
                             f"{last!r} only (not {missing!r})")
    need = [[] for _ in range(passes)]
    need[-1] = want
    for i in range(passes - 1, 0, -1):
        req = set(need[i]) | {s for s, _, d in edge_types if d in need[i]}
        need[i - 1] = [t for t in produced[i - 1] if t in req]
    return need, want


def run_typed(model, dataset, out=None, *, batch_size, device, engine, progress, layers, force, predictions,
              max_bytes, tmp_dir, x_transform, inputs=(), meta_extra=None, cache=None, node_types=None):
    """Layer-wise inference of a typed-graph model over a typed dataset (:func:`inference`).

    For layer ``i`` and each node type ``t`` it computes (:func:`typed_plan`), in
    blocks of ``batch_size`` of ``t``'s nodes: the block's whole one-hop
    in-neighbourhood over every edge type (one engine call, fanout -1 for every
    edge type, the typed loader's sampler); the previous layer's rows of every
    node in it, by type and id (layer 0: the dataset's features, through
    ``x_transform``, or the model's embedding rows, ``model.input_dict``;
    later layers: the previous layer's per-type table, a memory map on disk);
    ``model.layer(i, x_dict, edge_index_dict, types=[t])`` (the code the
    model's forward runs for that layer); its first rows (the block) go to
    layer ``i``'s table of ``t``. A layer's tables are deleted once the next
    layer is done. Resident memory: one block, its neighbours' rows and the
    pages of the maps in use."""
    import torch

    from flashgnn import _progress
    from flashgnn.loader.neighbor import as_dataset, resolve_engine
    from flashgnn.sample.budget import available_memory
    from flashgnn.sample.sampler import Sampler

    if not is_typed_model(model):
        raise TypeError(f"layer-wise inference on a typed dataset: {type(model).__module__}."
                        f"{type(model).__qualname__} is not {TYPED_PROTOCOL}")
    kind = type(model).__name__
    total = int(model.num_layers)
    passes = total
    if layers is not None:
        if isinstance(layers, bool) or not isinstance(layers, (int, np.integer)) or not 1 <= layers <= total:
            raise ValueError(f"layers={layers!r}: {kind} has {total} layer(s); expected 1..{total}")
        passes = int(layers)
    if out is not None:
        out = Path(out)
        check_output(out, force, (getattr(dataset, "path", dataset), *inputs))
    ds = as_dataset(dataset)
    names = ds.node_types
    counts = {t: int(ds.node_type(t)["count"]) for t in names}
    offsets = dict(zip(names, np.cumsum([0] + [counts[t] for t in names])[:-1].tolist()))
    edge_types = ds.edge_types
    need, final = typed_plan(model, edge_types, passes, node_types)
    unknown = sorted({t for ts in need for t in ts} - set(names))
    if unknown:
        raise ValueError(f"layer-wise inference: {kind} computes node types {unknown} that {ds.path} lacks "
                         f"(node types: {names})")
    dev = _dev(model, device)
    eng = resolve_engine(engine)
    tmp = _work_dir(out, tmp_dir)
    limit = None if out is not None else (available_memory() if max_bytes is None else int(max_bytes))
    target = getattr(model, "target", None)
    pred_type = target if (predictions and target in final) else None

    def blocks(t):
        return [(lo, min(lo + batch_size, counts[t])) for lo in range(0, counts[t], batch_size)]

    was_training = model.training
    model.eval()
    t0 = time.perf_counter()
    reads = 0
    chunks = 0
    try:
        bar = _progress.bar(total=sum(len(blocks(t)) for ts in need for t in ts), desc="inference", unit="block",
                            disable=not progress)
        prev: dict = {}
        for li in range(passes):
            last = li == passes - 1
            first = li == 0
            tables: dict = {}
            s = Sampler(ds.path, [-1], engine=eng, dtype=np.float32, labels=False, features=first, cache=cache,
                        rel_fanouts=[[-1] * len(edge_types)])
            planned = 0  # bytes of the last layer's tables created so far
            for t in need[li]:
                bar.set_description(f"inference layer {li + 1}/{passes} {t}")
                for lo, hi in blocks(t):
                    b = s.sample(np.arange(offsets[t] + lo, offsets[t] + hi, dtype=np.int64), 0)
                    with torch.no_grad():
                        if first:
                            x_dict = {}
                            for u, part in b.node.items():
                                if part.x is not None:
                                    x = torch.from_numpy(np.ascontiguousarray(part.x, dtype=np.float32)).to(dev)
                                    x_dict[u] = x_transform(x) if x_transform is not None else x
                            n_id_dict = {u: torch.from_numpy(part.n_id).to(dev) for u, part in b.node.items()}
                            x_dict = model.input_dict(x_dict, n_id_dict)
                        else:
                            x_dict = {u: torch.from_numpy(np.asarray(prev[u][part.n_id], dtype=np.float32)).to(dev)
                                      for u, part in b.node.items() if u in prev}
                        ei = {et: torch.from_numpy(part.edge_index).to(dev) for et, part in b.edge.items()}
                        res = model.layer(li, x_dict, ei, types=[t])
                    h = res.get(t)
                    if h is None or h.dim() != 2 or h.shape[0] < hi - lo:
                        raise ValueError(f"layer-wise inference: {kind} layer {li} returned "
                                         f"{None if h is None else tuple(h.shape)} for a block of {hi - lo} nodes of "
                                         f"type {t!r}; expected [>= {hi - lo}, dim]")
                    h = h[: hi - lo]
                    if t not in tables:
                        if last and limit is not None:
                            # checked at each type's first block, when its width is known, before it runs on:
                            # the tables made so far plus this one, the types still to come as wide as this
                            planned += counts[t] * h.shape[1] * 4
                            rest = need[li][need[li].index(t) + 1:]
                            need_bytes = planned + sum(counts[u] for u in rest) * h.shape[1] * 4
                            if need_bytes > limit:
                                raise MemoryError(
                                    f"inference({ds.path}): the output tables of {need[li]} (float32, "
                                    f"{h.shape[1]} wide for {t!r}) need {need_bytes:,} bytes, more than the "
                                    f"{limit:,} bytes available (pass out=DIR to write them to disk, or max_bytes= "
                                    "to override)")
                        if last:
                            (tmp / "embeddings").mkdir(exist_ok=True)
                            tables[t] = _tables(tmp / "embeddings", f"{t}.npy", counts[t], h.shape[1], npy=True)
                        else:
                            tables[t] = _tables(tmp, f"layer{li}.{t}.f32", counts[t], h.shape[1], npy=False)
                    tables[t][lo:hi] = h.float().cpu().numpy()
                    chunks += 1
                    bar.update(1)
            reads += s.telemetry()["reads"]
            for tab in tables.values():
                tab.flush()
            for u in list(prev):
                name = prev.pop(u).filename
                os.unlink(name)
            prev = tables
        bar.close()
        seconds = time.perf_counter() - t0
        if out is None:
            result = {t: torch.from_numpy(np.array(prev[t])) for t in final}
            for u in list(prev):
                del prev[u]
            return result
        if pred_type is not None:
            (tmp / "predictions").mkdir()
            src = prev[pred_type]
            pred = np.lib.format.open_memmap(tmp / "predictions" / f"{pred_type}.npy", mode="w+", dtype=np.int64,
                                             shape=(counts[pred_type],))
            for lo, hi in blocks(pred_type):
                pred[lo:hi] = np.asarray(src[lo:hi]).argmax(axis=1)
            pred.flush()
            del pred, src
        types_meta = {t: dict(num_nodes=counts[t], dim=int(prev[t].shape[1]), file=f"embeddings/{t}.npy")
                      for t in final}
        if pred_type is not None:
            types_meta[pred_type]["predictions"] = f"predictions/{pred_type}.npy"
        for u in list(prev):
            del prev[u]
        dims = {types_meta[t]["dim"] for t in final}
        meta = dict(flashgnn_output="embed", dataset=os.path.abspath(ds.path), model=kind, typed=True,
                    num_nodes=sum(counts[t] for t in final), dim=dims.pop() if len(dims) == 1 else None,
                    node_types=types_meta, layers=passes, chunks=chunks, batch_size=int(batch_size), engine=eng,
                    seconds=seconds, reads=reads, dtype="float32")
        return _publish(tmp, out, meta, meta_extra)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        model.train(was_training)
        if out is None:
            shutil.rmtree(tmp, ignore_errors=True)
