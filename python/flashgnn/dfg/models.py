"""Built-in DFGs: GCN, GIN, GraphSAGE (stock ``torch_geometric.nn`` models as
``flashgnn train`` builds them) and NGCF (:mod:`flashgnn.dfg.reference`).

    g = models.from_checkpoint("ck/")                 # a `flashgnn train --checkpoint ck/` run
    g = models.sage(model.state_dict(), [25, 10])     # or any weights of the same architecture
    g = models.from_weights("w.npz", "gcn", [10, 5])  # torch.save'd state_dict or .npz

Each DFG takes input ``Batch`` (int64 seed ids) and returns ``Result``
(one row per seed), computing what the PyTorch model computes in eval mode
on the same sampled batch with ``num_sampled_nodes_per_hop`` /
``num_sampled_edges_per_hop`` trimming, then ``[:batch_size]``: layer ``i``
runs on the nodes and edges PyG's ``trim_to_layer`` keeps for it. Dropout is
the identity in eval mode and has no node. The weights become DFG params
(linear weights stored transposed, [in, out], so GEMM is a plain ``X @ W``).

The state dict must hold exactly the architecture's keys: a model built with
options these DFGs do not express (norm layers, jumping knowledge, other
aggregations) is refused with the unexpected keys named, never mistranslated.
The per-model node sequences are listed in ``docs/graphrunner.md``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np
import torch

from flashgnn.dfg.graph import Graph

INPUT = "Batch"
OUTPUT = "Result"


def load_weights(path) -> dict[str, torch.Tensor]:
    """A state dict from a file: ``.npz`` (read with allow_pickle=False) or a
    ``torch.save``d state dict (read with ``weights_only=True``)."""
    p = Path(path)
    if not p.is_file():
        raise ValueError(f"{p}: no such weights file")
    if p.suffix == ".npz":
        with np.load(p, allow_pickle=False) as z:
            return {k: torch.from_numpy(z[k].copy()) for k in z.files}
    try:
        sd = torch.load(p, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unpickling failure means "not a plain state dict"
        raise ValueError(f"{p}: not a torch.save'd state dict of tensors ({type(e).__name__}: {e})") from None
    if isinstance(sd, Mapping) and "model" in sd and isinstance(sd["model"], Mapping):
        sd = sd["model"]
    if not isinstance(sd, Mapping) or not all(isinstance(v, torch.Tensor) for v in sd.values()):
        raise ValueError(f"{p}: expected a mapping of names to tensors")
    return dict(sd)


def _checkpoint(path):
    from flashgnn.nn.checkpoint import load_checkpoint

    return load_checkpoint(path)


def _state(weights) -> dict[str, torch.Tensor]:
    """A state dict from a module, a state dict, a checkpoint dict, a
    checkpoint directory or a weights file."""
    if isinstance(weights, torch.nn.Module):
        return {k: v.detach().cpu() for k, v in weights.state_dict().items()}
    if isinstance(weights, (str, os.PathLike)):
        p = Path(weights)
        weights = _checkpoint(p) if p.is_dir() else load_weights(p)
    if isinstance(weights, Mapping) and "model_config" in weights and "model" in weights:
        weights = weights["model"]
    if not isinstance(weights, Mapping):
        raise ValueError(f"weights: expected a state dict, module, checkpoint or path, got {type(weights).__name__}")
    out = {}
    for k, v in weights.items():
        if isinstance(v, np.ndarray):
            v = torch.from_numpy(v)
        if not isinstance(v, torch.Tensor):
            raise ValueError(f"weights[{k!r}]: expected a tensor, got {type(v).__name__}")
        out[k] = v.detach().cpu()
    return out


def _num_layers(sd: dict, key: str, model: str) -> int:
    pat = re.compile(r"^convs\.(\d+)\." + re.escape(key) + "$")
    layers = sorted(int(m.group(1)) for k in sd if (m := pat.match(k)))
    if not layers or layers != list(range(len(layers))):
        raise ValueError(f"{model}: state dict has no convs.<i>.{key} for i = 0, 1, ... (keys: {sorted(sd)[:8]}...)")
    return len(layers)


def _expect_keys(sd: dict, want: set, model: str) -> None:
    missing, extra = sorted(want - sd.keys()), sorted(sd.keys() - want)
    if missing or extra:
        raise ValueError(f"{model}: state dict does not match the built-in {model} DFG: "
                         f"missing {missing or 'none'}, unexpected {extra or 'none'}")


def _start(model: str, fanouts, seed: int, num_layers: int, in_dim: int, degrees: bool = False):
    fanouts = [int(f) for f in fanouts]
    if len(fanouts) != num_layers:
        raise ValueError(f"{model}: {num_layers} layers need {num_layers} fanouts (one hop per layer, as trimming "
                         f"assumes), got {fanouts}")
    g = Graph()
    batch = g.create_in(INPUT)
    attrs = {"fanouts": fanouts, "seed": int(seed)}
    if degrees:  # degree-normalised models: whole-graph degrees, exact on any batch (flashgnn.nn)
        attrs["degrees"] = True
    sub, x = g.create_op("BatchPre", [batch], attrs=attrs, num_outputs=2)
    g.meta = {"model": model, "fanouts": fanouts, "num_layers": num_layers, "in_dim": in_dim}
    return g, sub, x


def _linear(g: Graph, sd: dict, prefix: str, name: str, x, bias: bool = True):
    """GEMM with a PyG Linear's weight ([out, in], stored transposed) and bias."""
    w = g.create_param(f"{name}.W", sd[f"{prefix}.weight"].t().contiguous())
    ins = [x, w]
    if bias:
        ins.append(g.create_param(f"{name}.b", sd[f"{prefix}.bias"]))
    return g.create_op("GEMM", ins)


def _trim(g, sub, x, i):
    return x if i == 0 else g.create_op("Trim", [sub, x], attrs={"layer": i})


def _finish(g: Graph, sub, x, out_dim: int) -> Graph:
    g.create_out(OUTPUT, g.create_op("Take", [x, sub]))
    g.meta["out_dim"] = int(out_dim)
    return g.validate()


def gcn(weights, fanouts, *, seed: int = 0) -> Graph:
    """:class:`flashgnn.nn.GCN` (PyG's GCN normalised by whole-graph degrees, as
    ``flashgnn train`` builds it): BatchPre with degrees; per layer GCNNorm ->
    X W -> SpMM_Sum -> + b (-> ReLU)."""
    sd = _state(weights)
    L = _num_layers(sd, "lin.weight", "gcn")
    _expect_keys(sd, {f"convs.{i}.{k}" for i in range(L) for k in ("lin.weight", "bias")}, "gcn")
    g, sub, x = _start("gcn", fanouts, seed, L, sd["convs.0.lin.weight"].shape[1], degrees=True)
    for i in range(L):
        xi = _trim(g, sub, x, i)
        adj = g.create_op("GCNNorm", [sub], attrs={"layer": i, "self_loops": True})
        h = _linear(g, sd, f"convs.{i}.lin", f"conv{i}.lin", xi, bias=False)
        h = g.create_op("SpMM_Sum", [adj, h])
        h = g.create_op("Bias", [h, g.create_param(f"conv{i}.bias", sd[f"convs.{i}.bias"])])
        x = g.create_op("ReLU", [h]) if i < L - 1 else h
    return _finish(g, sub, x, sd[f"convs.{L - 1}.bias"].shape[0])


def sage(weights, fanouts, *, seed: int = 0) -> Graph:
    """``torch_geometric.nn.GraphSAGE`` (mean): SpMM_Mean -> lin_l, + lin_r(Trim x) (-> ReLU)."""
    sd = _state(weights)
    L = _num_layers(sd, "lin_l.weight", "sage")
    _expect_keys(sd, {f"convs.{i}.{k}" for i in range(L) for k in ("lin_l.weight", "lin_l.bias", "lin_r.weight")},
                 "sage")
    g, sub, x = _start("sage", fanouts, seed, L, sd["convs.0.lin_l.weight"].shape[1])
    for i in range(L):
        agg = g.create_op("SpMM_Mean", [sub, x], attrs={"layer": i})
        xi = _trim(g, sub, x, i)
        h = g.create_op("Add", [_linear(g, sd, f"convs.{i}.lin_l", f"conv{i}.lin_l", agg),
                                _linear(g, sd, f"convs.{i}.lin_r", f"conv{i}.lin_r", xi, bias=False)])
        x = g.create_op("ReLU", [h]) if i < L - 1 else h
    return _finish(g, sub, x, sd[f"convs.{L - 1}.lin_l.bias"].shape[0])


def gin(weights, fanouts, *, seed: int = 0) -> Graph:
    """``torch_geometric.nn.GIN``: SpMM_Sum + (1 + eps) Trim x -> Linear -> ReLU -> Linear (-> ReLU)."""
    sd = _state(weights)
    L = _num_layers(sd, "eps", "gin")
    _expect_keys(sd, {f"convs.{i}.{k}" for i in range(L)
                      for k in ("eps", "nn.lins.0.weight", "nn.lins.0.bias", "nn.lins.1.weight", "nn.lins.1.bias")},
                 "gin")
    g, sub, x = _start("gin", fanouts, seed, L, sd["convs.0.nn.lins.0.weight"].shape[1])
    for i in range(L):
        agg = g.create_op("SpMM_Sum", [sub, x], attrs={"layer": i})
        xi = _trim(g, sub, x, i)
        scale = g.create_param(f"conv{i}.one_plus_eps", (1 + sd[f"convs.{i}.eps"]).reshape(1))
        h = g.create_op("Add", [agg, g.create_op("ElementWise", [xi, scale], attrs={"op": "mul"})])
        h = g.create_op("ReLU", [_linear(g, sd, f"convs.{i}.nn.lins.0", f"conv{i}.mlp0", h)])
        h = _linear(g, sd, f"convs.{i}.nn.lins.1", f"conv{i}.mlp1", h)
        x = g.create_op("ReLU", [h]) if i < L - 1 else h
    return _finish(g, sub, x, sd[f"convs.{L - 1}.nn.lins.1.bias"].shape[0])


def ngcf(weights, fanouts, *, seed: int = 0, negative_slope: float = 0.2, normalize: bool = False) -> Graph:
    """:class:`flashgnn.dfg.reference.NGCF`: per layer s = SpMM_Sum(GCNNorm without
    self-loops, e); LeakyReLU(W1 (e + s) + W2 (s * e)); Concat of e0 and every
    layer's output (seed rows)."""
    sd = _state(weights)
    L = _num_layers(sd, "W1.weight", "ngcf")
    _expect_keys(sd, {f"convs.{i}.{k}" for i in range(L)
                      for k in ("W1.weight", "W1.bias", "W2.weight", "W2.bias")}, "ngcf")
    in_dim = sd["convs.0.W1.weight"].shape[1]
    g, sub, x = _start("ngcf", fanouts, seed, L, in_dim, degrees=True)
    g.meta.update(negative_slope=float(negative_slope), normalize=bool(normalize))
    layers = [g.create_op("Take", [x, sub])]
    for i in range(L):
        adj = g.create_op("GCNNorm", [sub], attrs={"layer": i, "self_loops": False})
        xi = _trim(g, sub, x, i)
        s = g.create_op("SpMM_Sum", [adj, xi])
        t1 = _linear(g, sd, f"convs.{i}.W1", f"conv{i}.W1", g.create_op("Add", [xi, s]))
        t2 = _linear(g, sd, f"convs.{i}.W2", f"conv{i}.W2", g.create_op("ElementWise", [s, xi], attrs={"op": "mul"}))
        x = g.create_op("LeakyReLU", [g.create_op("Add", [t1, t2])], attrs={"negative_slope": float(negative_slope)})
        seeds = g.create_op("Take", [x, sub])
        layers.append(g.create_op("L2Normalize", [seeds]) if normalize else seeds)
    g.create_out(OUTPUT, g.create_op("Concat", layers, attrs={"dim": -1}))
    g.meta["out_dim"] = int(in_dim + sum(sd[f"convs.{i}.W1.bias"].shape[0] for i in range(L)))
    return g.validate()


BUILDERS = {"gcn": gcn, "gin": gin, "sage": sage, "ngcf": ngcf}
MODELS = tuple(BUILDERS)


def checkpoint_models() -> tuple[str, ...]:
    """Models `flashgnn train` builds that have a built-in DFG (what `serve` can run from a checkpoint)."""
    from flashgnn.nn.zoo import MODELS as TRAINED

    return tuple(m for m in BUILDERS if m in TRAINED)


def build(model: str, weights, fanouts, **kw) -> Graph:
    """The built-in DFG ``model`` (one of MODELS) with these weights."""
    if model not in BUILDERS:
        raise ValueError(f"model {model!r}: no built-in DFG (built-in: {', '.join(MODELS)})")
    return BUILDERS[model](weights, fanouts, **kw)


def from_weights(path, model: str, fanouts, **kw) -> Graph:
    """A built-in DFG from a weights file (``.npz`` or a ``torch.save``d state dict)."""
    return build(model, load_weights(path), fanouts, **kw)


def from_checkpoint(checkpoint_dir, fanouts=None, *, seed: int = 0) -> Graph:
    """The DFG of a ``flashgnn train --checkpoint DIR`` model (or of a
    checkpoint dict already loaded with ``load_checkpoint``); ``fanouts``
    default to the ones it was trained with."""
    state = checkpoint_dir if isinstance(checkpoint_dir, dict) else _checkpoint(checkpoint_dir)
    c = state["model_config"]
    name = c["model"]
    if name not in checkpoint_models():
        raise ValueError(f"{checkpoint_dir}: model {name!r} has no built-in DFG (built-in for checkpoints: "
                         f"{', '.join(checkpoint_models())})")
    if c.get("normalize_features", "none") != "none":
        raise ValueError(f"{checkpoint_dir}: trained with --normalize-features {c['normalize_features']}; the built-in "
                         "DFGs feed stored features unchanged, so serving it would not reproduce the trained model "
                         "(train without it, or store normalised features at build time)")
    fanouts = list(c.get("fanouts") or []) if fanouts is None else list(fanouts)
    g = build(name, state["model"], fanouts, seed=seed)
    g.meta.update(checkpoint_epoch=int(state.get("epoch", 0)), hidden=int(c["hidden"]))
    return g
