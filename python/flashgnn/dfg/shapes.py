"""Shape and memory inference: what every node of a DFG will produce, before any kernel runs.

A *spec* describes a value without holding it: :class:`TensorSpec` (shape,
dtype) or :class:`SubGraphSpec` (batch size, per-hop node/edge counts,
features). A spec's dimensions are **upper bounds**; ``exact`` says they
are also the real sizes. Sampling is the only source of data-dependent
sizes: ``BatchPre`` with B seeds and fanouts f1..fk samples at most
``B * f1 * ... * fi`` nodes and edges at hop i (each frontier node draws at
most ``fi`` neighbours, and a new node is reached by at least one drawn
edge), and every downstream size is derived from those bounds.

Each op has a *shape function* registered next to its kernels
(``Registry.register_op(..., shape=fn)`` or ``register_shape``)::

    def shape(sctx, *input_specs, **attrs) -> Inferred | spec | tuple[spec, ...]

It validates the attributes as the kernel does (same messages) and refuses
what is statically wrong (shapes that do not chain, an unknown attr) with a
``ValueError``. :class:`Inferred` adds the kernel's temporary bytes
(``scratch``), the outputs that are views of an input (``views``: they add no
bytes but keep the input's storage alive) and per-output ``fresh`` bytes.

:func:`plan` runs the shape functions in node order and a liveness pass over
storage (a value is freed after its last reader, as the runner does; a view
keeps its base alive): ``Plan.peak_bytes`` is the largest sum, over the
nodes, of the storage alive while that node runs, its scratch, and copies
made to move inputs to another device. Params are not counted (they live in
the parsed DFG, whoever runs it); graph inputs are counted for the whole run.
The runner checks every real output against its spec (same dtype and
rank, each dimension within the bound), so a wrong shape function cannot let
a larger value flow on unnoticed.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass, field

import numpy as np
import torch

from flashgnn.dfg import ops as _ops
from flashgnn.dfg.ops import _ELEMENTWISE as _EW
from flashgnn.dfg.ops import SubGraph, _bool, _choice, _float, _int, _only

INF = math.inf


@functools.lru_cache(maxsize=64)
def _itemsize(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def _dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


@dataclass(frozen=True)
class TensorSpec:
    shape: tuple[int, ...]
    dtype: torch.dtype
    exact: bool = True

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def numel(self) -> int:
        return math.prod(self.shape)

    @property
    def nbytes(self) -> int:
        return self.numel * _itemsize(self.dtype)

    def __str__(self) -> str:
        return f"{_dtype_name(self.dtype)}{list(self.shape)}" + ("" if self.exact else " (upper bound)")

    @classmethod
    def of(cls, t: torch.Tensor) -> "TensorSpec":
        return cls(tuple(int(d) for d in t.shape), t.dtype, True)


@dataclass(frozen=True)
class SubGraphSpec:
    batch_size: int
    num_nodes: int  # bound on nodes (and on len(n_id))
    num_edges: int  # bound on edges
    hop_nodes: tuple[int, ...]  # hops + 1 bounds ([] when not trimmable)
    hop_edges: tuple[int, ...]  # hops bounds
    x: TensorSpec | None
    nbytes: int  # n_id + edge_index + edge_weight (x is counted as its own value)
    exact: bool = False

    @property
    def numel(self) -> int:
        return self.num_nodes + 2 * self.num_edges

    @property
    def num_hops(self) -> int:
        return len(self.hop_edges)

    def __str__(self) -> str:
        return (f"SubGraph[batch {self.batch_size}, <= {self.num_nodes} nodes, <= {self.num_edges} edges"
                f"{', features ' + str(self.x) if self.x is not None else ''}]")

    def trim(self, layer) -> tuple[int, int]:
        """Bounds of (nodes, edges) GNN layer ``layer`` keeps (``SubGraph.trim_sizes``, same errors)."""
        if layer is None or layer == 0:
            return self.num_nodes, self.num_edges
        if not 0 <= layer < self.num_hops:
            raise ValueError(f"attr layer = {layer}: this subgraph has {self.num_hops} hops, so layers "
                             f"0..{self.num_hops - 1}")
        keep_n, keep_e = len(self.hop_nodes) - layer, len(self.hop_edges) - layer
        if self.exact:  # the kernel's own arithmetic on the real counts
            return (self.num_nodes - sum(self.hop_nodes[keep_n:]), self.num_edges - sum(self.hop_edges[keep_e:]))
        return min(self.num_nodes, sum(self.hop_nodes[:keep_n])), min(self.num_edges, sum(self.hop_edges[:keep_e]))

    @classmethod
    def of(cls, s: SubGraph) -> "SubGraphSpec":
        """The exact spec of a real SubGraph (its ``nbytes`` counts every tensor it holds, ``x`` included)."""
        nb = sum(t.numel() * t.element_size() for t in (s.n_id, s.edge_index, s.edge_weight, s.x) if t is not None)
        return cls(int(s.batch_size), int(s.num_nodes), int(s.edge_index.shape[1]),
                   tuple(int(v) for v in s.num_sampled_nodes), tuple(int(v) for v in s.num_sampled_edges),
                   None if s.x is None else TensorSpec.of(s.x), nb, True)


def spec_of(v):
    """The exact spec of a real value (a graph input or param)."""
    if isinstance(v, torch.Tensor):
        return TensorSpec.of(v)
    if isinstance(v, SubGraph):
        return SubGraphSpec.of(v)
    return None


def bytes_of(spec) -> int:
    return 0 if spec is None else spec.nbytes


def fits(v, spec) -> str | None:
    """None when the real value ``v`` fits ``spec``; else why not."""
    if isinstance(spec, TensorSpec):
        if not isinstance(v, torch.Tensor):
            return f"is a {type(v).__name__}, inferred a tensor {spec}"
        if v.dtype != spec.dtype or v.dim() != spec.ndim or any(int(a) > b for a, b in zip(v.shape, spec.shape)):
            return f"is {_dtype_name(v.dtype)}{list(v.shape)}, which does not fit its inferred {spec}"
        return None
    if isinstance(spec, SubGraphSpec):
        if not isinstance(v, SubGraph):
            return f"is a {type(v).__name__}, inferred {spec}"
        e = int(v.edge_index.shape[1]) if v.edge_index.dim() == 2 else v.edge_index.numel()
        if v.n_id.numel() > spec.num_nodes or v.num_nodes > spec.num_nodes or e > spec.num_edges:
            return (f"is a SubGraph of {v.n_id.numel()} nodes and {e} edges, which does not fit its inferred "
                    f"{spec}")
        if spec.x is not None and v.x is not None:
            why = fits(v.x, spec.x)
            if why:
                return f"carries features that {why}"
        return None
    return None


@dataclass
class Inferred:
    """What a shape function returns: output specs, the kernel's temporary bytes,
    outputs that are views (``views[k]``: ``("in", i)`` / ``("out", j)`` whose storage
    output ``k`` keeps alive) and per-output new bytes (default: the spec's size; 0 for a view)."""

    outputs: tuple
    scratch: int = 0
    views: dict = field(default_factory=dict)
    fresh: dict = field(default_factory=dict)


@dataclass
class ShapeContext:
    """What a shape function knows: the runner's context (``sampling_info``), the node."""

    context: object
    seq: int
    op: str


class Unbounded(ValueError):
    """A shape function cannot bound an output (e.g. fanout -1 without a degree bound)."""


# -- helpers -----------------------------------------------------------------------------------


def _t(v, what: str) -> TensorSpec:
    if not isinstance(v, TensorSpec):
        raise ValueError(f"{what}: expected a tensor, got {'a SubGraph' if isinstance(v, SubGraphSpec) else v!r}")
    return v


def _s(v, what: str) -> SubGraphSpec:
    if not isinstance(v, SubGraphSpec):
        raise ValueError(f"{what}: expected a SubGraph (the output of BatchPre), got a tensor")
    return v


@functools.lru_cache(maxsize=4096)
def _meta_dtype(fn, args: tuple, kwargs: tuple) -> torch.dtype:
    """The dtype ``fn`` gives on tensors of these (dtype, ndim), run on 1-sized meta tensors (no memory;
    cached, since a meta call costs about a millisecond and a DFG may have thousands of nodes)."""
    metas = [torch.empty((1,) * nd, dtype=dt, device="meta") for dt, nd in args]
    if fn is torch.cat:
        return torch.cat(metas, **dict(kwargs)).dtype
    return fn(*metas, **dict(kwargs)).dtype


def _result_dtype(fn, *ts: TensorSpec, **kwargs) -> torch.dtype:
    """The dtype ``fn`` gives on tensors of these dtypes and ranks."""
    return _meta_dtype(fn, tuple((t.dtype, t.ndim) for t in ts), tuple(sorted(kwargs.items())))


def _broadcast(a: tuple, b: tuple, exact: bool, what: str) -> tuple:
    """Broadcast shape; with bounds, each dimension's bound is the larger one."""
    if exact:
        try:
            return tuple(torch.broadcast_shapes(a, b))
        except RuntimeError:
            raise ValueError(f"shapes {list(a)} and {list(b)} do not broadcast{what}") from None
    n = max(len(a), len(b))
    a, b = (1,) * (n - len(a)) + tuple(a), (1,) * (n - len(b)) + tuple(b)
    return tuple(max(x, y) for x, y in zip(a, b))


def _dim_of(ndim: int, attrs: dict, default: int) -> int:
    nd = max(ndim, 1)
    return _int(attrs, "dim", default, -nd, nd - 1)


def _same(x: TensorSpec, dtype=None) -> TensorSpec:
    return TensorSpec(x.shape, x.dtype if dtype is None else dtype, x.exact)


# -- built-in shape functions ------------------------------------------------------------------


def batch_pre(sctx, batch, seed_in=None, **attrs):
    _only(attrs, "fanouts", "seed", "dtype", "degrees")
    degrees = _bool(attrs, "degrees", False)
    fanouts = attrs.get("fanouts")
    if not isinstance(fanouts, list) or not 1 <= len(fanouts) <= _ops.MAX_HOPS:
        raise ValueError(f"attr fanouts = {fanouts!r}: expected a list of 1..{_ops.MAX_HOPS} integers")
    for i, f in enumerate(fanouts):
        if not isinstance(f, int) or isinstance(f, bool) or not -1 <= f <= _ops.MAX_FANOUT:
            raise ValueError(f"attr fanouts[{i}] = {f!r}: expected -1 (all) or 0..{_ops.MAX_FANOUT}")
    _int(attrs, "seed", 0, 0, 2**63 - 1)
    dtype = _ops._DTYPES[_choice(attrs, "dtype", "float32", tuple(_ops._DTYPES))]
    if seed_in is not None:
        s = _t(seed_in, "input 1 (Seed)")
        if (s.exact and s.numel != 1) or s.dtype.is_floating_point:
            raise ValueError(f"input 1 (Seed): expected one integer, got a {s}")
    b = _t(batch, "input 0 (Batch)")
    if b.dtype.is_floating_point or b.dtype == torch.bool:
        raise ValueError(f"input 0 (Batch): expected integer node ids, got {b.dtype}")
    if b.ndim != 1 or (b.exact and not 1 <= b.shape[0] <= _ops.MAX_BATCH_SEEDS):
        raise ValueError(f"input 0 (Batch): expected 1..{_ops.MAX_BATCH_SEEDS} node ids in a 1-D tensor, got shape "
                         f"{list(b.shape)}")
    ctx = sctx.context
    if ctx is None or not hasattr(ctx, "sample"):
        raise ValueError("BatchPre needs a sampling context: Runner(context=SamplerContext(dataset_path))")
    info_fn = getattr(ctx, "sampling_info", None)
    info = info_fn([int(f) for f in fanouts]) if callable(info_fn) else None
    if not info or info.get("feature_dim") is None:
        raise Unbounded("the sampling context does not report feature_dim (give it a sampling_info(fanouts) "
                        "method), so the feature matrix's size is unknown")
    fdim = int(info["feature_dim"])
    stored = int(info.get("feature_itemsize") or 8)
    max_degree = info.get("max_degree")
    nodes, edges = [b.shape[0]], []
    for i, f in enumerate(fanouts):
        if f < 0:
            if max_degree is None:
                raise Unbounded(f"attr fanouts[{i}] = -1 (all neighbours) has no bound: the sampling context reports "
                                "no max_degree")
            f = int(max_degree)
        edges.append(nodes[-1] * f)
        nodes.append(nodes[-1] * f)
    n, e = sum(nodes), sum(edges)
    x = TensorSpec((n, fdim), dtype, exact=all(f == 0 for f in fanouts) and b.exact)
    sub_bytes = n * 8 + 2 * e * 8 + (n * 8 if degrees else 0)
    sub = SubGraphSpec(b.shape[0], n, e, tuple(nodes), tuple(edges), x, sub_bytes, x.exact)
    # The sampler's own arrays: its feature buffer and the gathered batch (stored dtype), row/col and
    # their int64 copies, n_id — held while the kernel builds the outputs.
    scratch = 2 * n * fdim * max(stored, _itemsize(dtype)) + 4 * e * 8 + 2 * n * 8
    return Inferred((sub, x), scratch=scratch, views={1: (("out", 0),)}, fresh={0: sub_bytes + x.nbytes, 1: 0})


def features(sctx, sub, **attrs):
    _only(attrs)
    sub = _s(sub, "input 0")
    if sub.x is None:
        raise ValueError("input 0: this SubGraph carries no features")
    return Inferred((sub.x,), views={0: (("in", 0),)})


def trim(sctx, sub, x, **attrs):
    _only(attrs, "layer")
    sub = _s(sub, "input 0")
    n, _ = sub.trim(_int(attrs, "layer", 0, 0, _ops.MAX_HOPS))
    x = _t(x, "input 1")
    if x.ndim < 1 or (x.exact and sub.exact and x.shape[0] < n):
        raise ValueError(f"input 1: has {x.shape[0] if x.ndim else 0} rows, the (trimmed) subgraph needs {n}")
    return Inferred((TensorSpec((min(n, x.shape[0]), *x.shape[1:]), x.dtype, x.exact and sub.exact),),
                    views={0: (("in", 1),)})


def _spmm(sctx, sub, x, attrs, mean: bool):
    _only(attrs, "layer")
    sub = _s(sub, "input 0")
    x = _t(x, "input 1")
    n, e = sub.trim(_int(attrs, "layer", None, 0, _ops.MAX_HOPS))
    if x.ndim < 1:
        raise ValueError(f"input 1: expected at least one dimension, got {x}")
    out = TensorSpec((n, *x.shape[1:]), x.dtype, x.exact and sub.exact)
    row = math.prod(x.shape[1:]) * _itemsize(x.dtype)
    scratch = e * row * 2 + e * _itemsize(x.dtype) + (n * row + n * _itemsize(x.dtype) if mean else 0)
    return Inferred((out,), scratch=scratch)


def spmm_sum(sctx, sub, x, **attrs):
    return _spmm(sctx, sub, x, attrs, False)


def spmm_mean(sctx, sub, x, **attrs):
    return _spmm(sctx, sub, x, attrs, True)


def gcn_norm(sctx, sub, **attrs):
    _only(attrs, "layer", "self_loops", "improved")
    sub = _s(sub, "input 0")
    n, e = sub.trim(_int(attrs, "layer", None, 0, _ops.MAX_HOPS))
    loops = _bool(attrs, "self_loops", True)
    _bool(attrs, "improved", False)
    e_out = e + (n if loops else 0)
    fresh = 2 * e_out * 8 + e_out * 4
    out = SubGraphSpec(sub.batch_size, n, e_out, (), (), None, n * 8 + fresh, sub.exact and not loops)
    scratch = e * 16 + n * 48 + e_out * 16
    return Inferred((out,), scratch=scratch, views={0: (("in", 0),)}, fresh={0: fresh})


def gemm(sctx, a, b, bias=None, **attrs):
    _only(attrs, "transpose_a", "transpose_b")
    a, b = _t(a, "input 0"), _t(b, "input 1")
    sa, sb = list(a.shape), list(b.shape)
    for flag, s, what in (("transpose_a", sa, "input 0"), ("transpose_b", sb, "input 1")):
        if _bool(attrs, flag, False):
            if len(s) < 2:
                raise ValueError(f"attr {flag}: {what} has {len(s)} dimension(s), transposing needs 2")
            s[-1], s[-2] = s[-2], s[-1]
    exact = a.exact and b.exact
    if not sa or not sb or (exact and sa[-1] != sb[0 if len(sb) == 1 else -2]):
        raise ValueError(f"shapes {sa} @ {sb} do not chain")
    if a.dtype != b.dtype:
        raise ValueError(f"dtypes {_dtype_name(a.dtype)} @ {_dtype_name(b.dtype)} differ")
    if len(sb) == 1:
        shape = tuple(sa[:-1])
    elif len(sa) == 1:
        shape = (*sb[:-2], sb[-1])
    else:
        shape = (*_broadcast(tuple(sa[:-2]), tuple(sb[:-2]), exact, " (batch dims)"), sa[-2], sb[-1])
    out = TensorSpec(shape, a.dtype, exact)
    scratch = _matmul_copies(sa, sb, _itemsize(a.dtype))
    if bias is None:
        return Inferred((out,), scratch=scratch)
    fin = bias_add(sctx, out, bias).outputs[0]
    return Inferred((fin,), scratch=scratch + out.nbytes)


def _matmul_copies(sa: list, sb: list, itemsize: int) -> int:
    """Bytes ``torch.matmul`` copies before its bmm: with batch dimensions on both sides (no folding into one
    mm), each operand is expanded to the broadcast batch and reshaped to ``[prod(batch), rows, cols]``; that
    reshape is a copy of the *expanded* operand when the operand has a batch dimension of its own and another
    batch dimension is broadcast (``[32, 1, 64, 512] @ [1, 1024, 512, 1]`` copies A as ``[32768, 64, 512]``,
    4 GiB, for an 8 MiB output)."""
    if len(sa) < 3 and len(sb) < 3:
        return 0
    mats = [(1, sa[0]) if len(sa) == 1 else tuple(sa[-2:]), (sb[0], 1) if len(sb) == 1 else tuple(sb[-2:])]
    batches = [tuple(s[:-2]) for s in (sa, sb)]
    k = max(len(x) for x in batches)
    batches = [(1,) * (k - len(x)) + x for x in batches]
    full = tuple(max(x, y) for x, y in zip(*batches))
    if sum(1 for x in full if x > 1) < 2:
        return 0
    total = 0
    for bo, (r, c) in zip(batches, mats):
        if bo != full and any(x > 1 for x in bo):
            total += math.prod(full) * r * c * itemsize
    return total


def elementwise(sctx, a, b, **attrs):
    _only(attrs, "op")
    op = _choice(attrs, "op", "add", tuple(_EW))
    a, b = _t(a, "input 0"), _t(b, "input 1")
    shape = _broadcast(a.shape, b.shape, a.exact and b.exact, "")
    return Inferred((TensorSpec(shape, _result_dtype(_EW[op], a, b), a.exact and b.exact),))


def add(sctx, a, b, **attrs):
    _only(attrs)
    return elementwise(sctx, a, b, op="add")


def bias_add(sctx, x, b, **attrs):
    _only(attrs)
    x, b = _t(x, "input 0"), _t(b, "input 1")
    if b.ndim != 1 or x.ndim < 1 or (x.exact and b.exact and b.shape[0] != x.shape[-1]):
        raise ValueError(f"bias of shape {list(b.shape)} does not match the last dimension of {list(x.shape)}")
    return Inferred((TensorSpec(x.shape, _result_dtype(torch.add, x, b), x.exact and b.exact),))


def _unary(fn):
    def shape(sctx, x, **attrs):
        _only(attrs, *(("negative_slope",) if fn is torch.nn.functional.leaky_relu else ()))
        if fn is torch.nn.functional.leaky_relu:
            _float(attrs, "negative_slope", 0.01)
        x = _t(x, "input 0")
        return Inferred((_same(x, _result_dtype(fn, x)),))

    shape.__name__ = f"{fn.__name__}_shape"
    return shape


def _reduced_shape(x: TensorSpec, dim: int, keep: bool) -> tuple:
    if x.ndim == 0:
        return ()
    d = dim % x.ndim
    return tuple(1 if i == d else s for i, s in enumerate(x.shape)) if keep else tuple(
        s for i, s in enumerate(x.shape) if i != d)


def reduce(sctx, x, **attrs):
    _only(attrs, "op", "dim", "keepdim")
    x = _t(x, "input 0")
    op = _choice(attrs, "op", "sum", ("sum", "mean", "max", "min"))
    dim, keep = _dim_of(x.ndim, attrs, 0), _bool(attrs, "keepdim", False)
    fn = getattr(torch, f"a{op}" if op in ("max", "min") else op)
    if op in ("max", "min") and x.ndim and x.exact and x.shape[dim] == 0:
        raise ValueError(f"{op} over an empty dimension {dim}")
    dtype = _result_dtype(fn, x, dim=dim, keepdim=keep)
    return Inferred((TensorSpec(_reduced_shape(x, dim, keep), dtype, x.exact),))


def sddmm(sctx, sub, a, b, **attrs):
    _only(attrs, "op", "layer")
    sub = _s(sub, "input 0")
    a, b = _t(a, "input 1"), _t(b, "input 2")
    op = _choice(attrs, "op", "dot", ("dot", "mul", "add"))
    _, e = sub.trim(_int(attrs, "layer", None, 0, _ops.MAX_HOPS))
    if a.ndim < 1 or b.ndim < 1:
        raise ValueError(f"inputs 1 and 2 need a row dimension, got {a} and {b}")
    exact = a.exact and b.exact and sub.exact
    ar, bc = TensorSpec((e, *a.shape[1:]), a.dtype), TensorSpec((e, *b.shape[1:]), b.dtype)
    prod = _broadcast(ar.shape, bc.shape, exact, "")
    fn = torch.mul if op in ("dot", "mul") else torch.add
    dtype = _result_dtype(fn, a, b)
    shape = prod[:-1] if op == "dot" else prod
    scratch = ar.nbytes + bc.nbytes + (math.prod(prod) * _itemsize(dtype) if op == "dot" else 0)
    return Inferred((TensorSpec(shape, dtype, exact),), scratch=scratch)


def slice_(sctx, x, **attrs):
    _only(attrs, "start", "stop", "dim")
    x = _t(x, "input 0")
    dim = _dim_of(x.ndim, attrs, 0)
    if x.ndim == 0:
        raise ValueError("input 0: a 0-dimensional tensor cannot be sliced")
    size = x.shape[dim]
    start = _int(attrs, "start", 0, 0, size)  # a start past the bound is past the real size too
    stop = _int(attrs, "stop", None, start, size)
    shape = list(x.shape)
    shape[dim] = (size if stop is None else stop) - start
    return Inferred((TensorSpec(tuple(shape), x.dtype, x.exact),), views={0: (("in", 0),)})


def take(sctx, x, idx, **attrs):
    _only(attrs)
    x = _t(x, "input 0")
    if x.ndim < 1:
        raise ValueError("input 0: has 0 rows")
    if isinstance(idx, SubGraphSpec):
        if x.exact and x.shape[0] < idx.batch_size:
            raise ValueError(f"input 0: has {x.shape[0]} rows, the (trimmed) subgraph needs {idx.batch_size}")
        return Inferred((TensorSpec((min(idx.batch_size, x.shape[0]), *x.shape[1:]), x.dtype, x.exact),),
                        views={0: (("in", 0),)})
    idx = _t(idx, "input 1")
    if idx.dtype not in (torch.int64, torch.int32) or idx.ndim != 1:
        raise ValueError(f"input 1: expected a 1-D integer index, got {idx.dtype} of shape {list(idx.shape)}")
    return Inferred((TensorSpec((idx.shape[0], *x.shape[1:]), x.dtype, x.exact and idx.exact),))


def concat(sctx, *xs, **attrs):
    _only(attrs, "dim")
    xs = [_t(x, f"input {i}") for i, x in enumerate(xs)]
    dim = _dim_of(xs[0].ndim, attrs, -1)
    exact = all(x.exact for x in xs)
    nd = xs[0].ndim
    if nd == 0 or any(x.ndim != nd for x in xs):
        raise ValueError(f"shapes {[list(x.shape) for x in xs]} do not concatenate along {dim}")
    d = dim % nd
    shape = []
    for i in range(nd):
        if i == d:
            shape.append(sum(x.shape[i] for x in xs))
        else:
            sizes = {x.shape[i] for x in xs}
            if exact and len(sizes) > 1:
                raise ValueError(f"shapes {[list(x.shape) for x in xs]} do not concatenate along {dim}")
            shape.append(max(sizes))
    dtype = _result_dtype(torch.cat, *xs, dim=d)
    return Inferred((TensorSpec(tuple(shape), dtype, exact),))


def _along_dim(fn, name):
    def shape(sctx, x, **attrs):
        _only(attrs, *(("dim", "eps") if fn is None else ("dim",)))
        x = _t(x, "input 0")
        dim = _dim_of(x.ndim, attrs, -1)
        if fn is None:  # L2Normalize: F.normalize holds the norms (x reduced along dim) twice
            _float(attrs, "eps", 1e-12)
            dtype = _result_dtype(torch.nn.functional.normalize, x, p=2.0, dim=dim)
            red = math.prod(_reduced_shape(x, dim, True)) * _itemsize(dtype)
            return Inferred((_same(x, dtype),), scratch=2 * red)
        return Inferred((_same(x, _result_dtype(fn, x, dim=dim)),))

    shape.__name__ = f"{name}_shape"
    return shape


SHAPES = {
    "BatchPre": batch_pre,
    "Features": features,
    "Trim": trim,
    "SpMM_Sum": spmm_sum,
    "SpMM_Mean": spmm_mean,
    "GCNNorm": gcn_norm,
    "GEMM": gemm,
    "ElementWise": elementwise,
    "Add": add,
    "Bias": bias_add,
    "ReLU": _unary(torch.relu),
    "LeakyReLU": _unary(torch.nn.functional.leaky_relu),
    "Sigmoid": _unary(torch.sigmoid),
    "Tanh": _unary(torch.tanh),
    "Reduce": reduce,
    "SDDMM": sddmm,
    "Slice": slice_,
    "Take": take,
    "Concat": concat,
    "Softmax": _along_dim(torch.softmax, "softmax"),
    "LogSoftmax": _along_dim(torch.log_softmax, "log_softmax"),
    "L2Normalize": _along_dim(None, "l2_normalize"),
}


# -- the plan ----------------------------------------------------------------------------------


class NodeError(ValueError):
    """A node's kernel failed (or, as :class:`ShapeError`, was refused before running); ``seq``, ``op``
    and ``device`` say which."""

    def __init__(self, msg: str, seq: int, op: str, device: str):
        super().__init__(msg)
        self.seq, self.op, self.device = seq, op, device


class ShapeError(NodeError):
    """A DFG refused before running: a shape function's refusal, a value or the whole request over a
    bound, or an op whose output cannot be bounded. ``seq``/``op`` name the node (0/"" for the request
    as a whole)."""

    def __init__(self, msg: str, seq: int = 0, op: str = "", device: str = ""):
        super().__init__(msg, seq, op, device)


@dataclass
class NodePlan:
    seq: int
    op: str
    device: str
    outputs: tuple  # specs (None: unknown)
    scratch: int
    live_bytes: int  # storage alive while this node runs, scratch and device copies included


@dataclass
class Plan:
    nodes: list[NodePlan]
    specs: dict  # ref -> spec (graph inputs, params and every node output)
    peak_bytes: int
    peak_seq: int
    sum_bytes: int  # every node's outputs plus the largest scratch: the bound without freeing anything
    input_bytes: int
    output_bytes: int
    unknown: list  # (seq, op, why) of nodes whose outputs could not be bounded

    @property
    def bounded(self) -> bool:
        return not self.unknown

    def node(self, seq: int) -> NodePlan:
        return next(n for n in self.nodes if n.seq == seq)

    def describe_peak(self) -> str:
        if self.peak_seq == 0:
            return "the inputs"
        if self.peak_seq < 0:
            return "the outputs held at the end"
        n = self.node(self.peak_seq)
        outs = ", ".join(str(s) for s in n.outputs)
        return f"node {n.seq} ({n.op} on {n.device}, output {outs})"


def _normalise(res, n_in: int, n_out: int) -> Inferred:
    if not isinstance(res, Inferred):
        res = Inferred(res if isinstance(res, tuple) else (res,))
    outs = tuple(res.outputs)
    if len(outs) != n_out:
        raise ValueError(f"shape function returned {len(outs)} specs, the op declares {n_out}")
    for k, s in enumerate(outs):
        if not isinstance(s, (TensorSpec, SubGraphSpec)):
            raise ValueError(f"shape function output {k} is a {type(s).__name__}, expected a TensorSpec or "
                             "SubGraphSpec")
        dims = s.shape if isinstance(s, TensorSpec) else (s.batch_size, s.num_nodes, s.num_edges, s.nbytes)
        if any(isinstance(d, bool) or not isinstance(d, (int, np.integer)) or d < 0 for d in dims):
            raise ValueError(f"shape function output {k} has sizes {list(dims)}: they must be integers >= 0")
    if isinstance(res.scratch, bool) or not isinstance(res.scratch, int) or res.scratch < 0:
        raise ValueError(f"shape function scratch {res.scratch!r}: expected an integer >= 0")
    for k, refs in dict(res.views).items():
        if k not in range(n_out) or not isinstance(refs, (tuple, list)) or not all(
                isinstance(v, (tuple, list)) and len(v) == 2 and v[0] in ("in", "out")
                and v[1] in range(n_in if v[0] == "in" else n_out) for v in refs):
            raise ValueError(f"shape function views {{{k!r}: {refs!r}}}: expected output index -> "
                             f"(('in', 0..{n_in - 1}) | ('out', 0..{n_out - 1}), ...)")
    for k, b in dict(res.fresh).items():
        if k not in range(n_out) or isinstance(b, bool) or not isinstance(b, int) or b < 0:
            raise ValueError(f"shape function fresh {{{k!r}: {b!r}}}: expected output index -> bytes >= 0")
    res.outputs = outs
    return res


def plan(graph, registry, values: dict, context=None, *, require_shapes: bool = False,
         max_value_elements: int | None = None) -> Plan:
    """Infer every node's outputs from ``values`` (the graph inputs and params, real tensors) and bound the
    run's memory. Raises :class:`ShapeError` naming the node, op and inferred shape. With
    ``require_shapes`` an op without a shape function, or an output that cannot be bounded, is refused;
    without it such outputs are unknown (``Plan.unknown``) and the nodes after them are not checked."""
    specs: dict[str, object] = {r: spec_of(v) for r, v in values.items()}
    param_refs = set(graph.params)
    # storage groups: bytes, the node that creates them (-1: before the run), the device they live on
    g_bytes: list[int] = []
    g_made: list[int] = []
    g_dev: list[str] = []
    v_groups: dict[str, tuple[int, ...]] = {}
    for r, v in values.items():
        if r in param_refs:
            v_groups[r] = ()  # held by the parsed DFG, not by this run
            continue
        g_bytes.append(bytes_of(specs[r]))
        g_made.append(-1)
        dev = str(v.edge_index.device if isinstance(v, SubGraph) else getattr(v, "device", "cpu"))
        g_dev.append(dev)
        v_groups[r] = (len(g_bytes) - 1,)
    input_bytes = sum(g_bytes)
    nodes: list[NodePlan] = []
    unknown: list = []
    for i, node in enumerate(graph.nodes):
        device, _ = registry.select(node.op)
        where = f"node {node.seq} ({node.op} on {device.name})"
        tdev = str(torch.device(device.torch_device))
        ins = [specs.get(r) for r in node.inputs]
        opdef = registry.op(node.op)
        fn = getattr(opdef, "shape", None)
        res = None
        if fn is None:
            why = (f"op {node.op} has no shape function, so its output size is unknown before it runs "
                   "(register one: registry.register_shape(op, fn))")
        elif any(s is None for s in ins):
            why = "an input's size is unknown (an earlier node could not be bounded)"
        else:
            why = None
            try:
                res = _normalise(fn(ShapeContext(context, node.seq, node.op), *ins, **node.attrs), len(ins),
                                 node.num_outputs)
            except Unbounded as e:
                why = str(e)
            except Exception as e:  # noqa: BLE001 - a shape function's failure refuses its node, whatever it was
                msg = str(e) if isinstance(e, ValueError) else f"{type(e).__name__}: {e}"
                raise ShapeError(f"{where}: {msg} (inferred before running; inputs "
                                 f"{', '.join(str(s) for s in ins) or 'none'})", node.seq, node.op,
                                 device.name) from None
        if res is None:
            if require_shapes:
                raise ShapeError(f"{where}: refused before running: {why}", node.seq, node.op, device.name)
            unknown.append((node.seq, node.op, why))
            res = Inferred((None,) * node.num_outputs)
        if max_value_elements is not None:
            for k, s in enumerate(res.outputs):
                if s is not None and s.numel > max_value_elements:
                    raise ShapeError(f"{where}: output {k} inferred {s} has {s.numel} elements, limit "
                                     f"MAX_VALUE_ELEMENTS {max_value_elements} (refused before running)",
                                     node.seq, node.op, device.name)
        new_groups = []
        for k, s in enumerate(res.outputs):
            ref = f"{node.seq}_{k}"
            specs[ref] = s
            fresh = res.fresh.get(k, 0 if k in res.views else bytes_of(s))
            g_bytes.append(int(fresh))
            g_made.append(i)
            g_dev.append(tdev)
            new_groups.append(len(g_bytes) - 1)
        for k in range(len(res.outputs)):
            gs = {new_groups[k]}
            for kind, j in res.views.get(k, ()):
                gs.update(v_groups.get(node.inputs[j], ()) if kind == "in" else (new_groups[j],))
            v_groups[f"{node.seq}_{k}"] = tuple(sorted(gs))
        # inputs moved to this node's device are copies, alive while it runs
        moved = sum(g_bytes[g] for r in set(node.inputs) for g in v_groups.get(r, ()) if g_dev[g] != tdev)
        nodes.append(NodePlan(node.seq, node.op, device.name, res.outputs, res.scratch + moved, 0))
    # liveness: a value dies after its last reader (right after its node when nothing reads it), never when
    # it is a graph output; a storage group dies with the last value that refers to it
    death: dict[str, float] = {}
    for i, node in enumerate(graph.nodes):
        for k in range(node.num_outputs):
            death[f"{node.seq}_{k}"] = i
        for r in node.inputs:
            death[r] = max(death.get(r, -1), i)
    for r in graph.outputs.values():
        death[r] = INF
    for r in values:
        if r not in param_refs:
            death[r] = INF  # the caller holds the inputs for the whole run
    g_last = [-1.0] * len(g_bytes)
    for r, gs in v_groups.items():
        for g in gs:
            g_last[g] = max(g_last[g], death.get(r, g_made[g]))
    # one sweep over the nodes: a group adds its bytes where it is made and drops them after its last use
    delta = [0] * (len(nodes) + 2)
    for g, b in enumerate(g_bytes):
        delta[max(g_made[g], 0)] += b
        if g_last[g] != INF:
            delta[int(g_last[g]) + 1] -= b
    peak, peak_seq, alive = input_bytes, 0, 0
    for i, np_ in enumerate(nodes):
        alive += delta[i]
        live = alive + np_.scratch
        np_.live_bytes = live
        if live > peak:
            peak, peak_seq = live, np_.seq
    out_groups = {g for r in graph.outputs.values() for g in v_groups.get(r, ())}
    output_bytes = sum(bytes_of(specs.get(r)) for r in graph.outputs.values())
    at_end = sum(g_bytes[g] for g in range(len(g_bytes)) if g_last[g] == INF) + sum(
        g_bytes[g] for g in out_groups if g_dev[g] != "cpu")  # outputs copied to the CPU
    if at_end > peak:
        peak, peak_seq = at_end, -1
    sum_bytes = sum(g_bytes) + max((p.scratch for p in nodes), default=0)
    return Plan(nodes, specs, peak, peak_seq, sum_bytes, input_bytes, output_bytes, unknown)
