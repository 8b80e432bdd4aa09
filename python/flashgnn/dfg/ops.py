"""Built-in ops (C-operations) and their torch kernels (C-kernels).

Every built-in kernel is device-agnostic torch code: the same function is
registered for "CPU" and, where CUDA is available, for "CUDA"; the runner has
already moved tensor inputs to the bound device. ``BatchPre`` is the
exception: it calls the sampling engine and is registered on "CPU" only.

Values flowing between nodes are torch tensors or a :class:`SubGraph`.
Sampled subgraphs follow PyG's conventions: ``edge_index = [row, col]`` is
local, row = neighbor (message source), col = target; nodes and edges are
ordered by hop, ``n_id[:batch_size]`` are the seeds.

*Layer trimming* (``layer`` attribute): PyG's ``trim_to_layer`` drops, before
GNN layer ``i``, the nodes of the last ``i`` hops and the edges of the last
``i`` hops, since nothing downstream reads them. A kernel given ``layer=i``
uses exactly that node and edge prefix, so a DFG trimmed layer by layer
computes what a trimmed PyG model computes. Every attribute read here is
checked (type, range) and a bad one raises ValueError naming it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
import torch
import torch.nn.functional as F

MAX_HOPS = 8
MAX_FANOUT = 1 << 16
MAX_BATCH_SEEDS = 1 << 22  # seeds of one BatchPre call (4 Mi ids = 32 MiB of int64)
# Largest value an op may produce: 2^28 elements = 1 GiB of float32. Checked
# *before* allocating by the ops whose output can outgrow their inputs
# (GEMM's outer products, ElementWise broadcasting); the runner checks every
# output after the fact, which bounds chains of Concat doublings.
MAX_VALUE_ELEMENTS = 1 << 28


def _check_numel(shape, what: str) -> None:
    n = 1
    for d in shape:
        n *= int(d)
    if n > MAX_VALUE_ELEMENTS:
        raise ValueError(f"{what} of shape {list(shape)} has {n} elements, "
                         f"limit MAX_VALUE_ELEMENTS {MAX_VALUE_ELEMENTS}")


@dataclass
class SubGraph:
    """A sampled (or derived) subgraph: the value ``BatchPre`` produces.

    ``num_sampled_nodes`` has hops + 1 entries and ``num_sampled_edges`` hops
    entries (empty when the subgraph is no longer trimmable, e.g. after
    ``GCNNorm``); ``edge_weight`` is None for unweighted edges; ``deg``
    (BatchPre with ``degrees=true``) holds each node's degree in the whole
    graph, which ``GCNNorm`` then normalises by (:mod:`flashgnn.nn`)."""

    n_id: torch.Tensor
    edge_index: torch.Tensor
    num_sampled_nodes: list[int]
    num_sampled_edges: list[int]
    batch_size: int
    x: torch.Tensor | None = None
    edge_weight: torch.Tensor | None = None
    num_nodes: int = -1
    deg: torch.Tensor | None = None

    def __post_init__(self):
        if self.num_nodes < 0:
            self.num_nodes = int(self.n_id.numel())

    def to(self, device) -> "SubGraph":
        def mv(t):
            return None if t is None else t.to(device)

        if self.edge_index.device == torch.device(device):
            return self
        return replace(self, n_id=mv(self.n_id), edge_index=mv(self.edge_index), x=mv(self.x),
                       edge_weight=mv(self.edge_weight), deg=mv(self.deg))

    @property
    def num_hops(self) -> int:
        return len(self.num_sampled_edges)

    def trim_sizes(self, layer) -> tuple[int, int]:
        """(nodes, edges) kept before GNN layer ``layer`` (None or 0: all)."""
        if layer is None or layer == 0:
            return self.num_nodes, int(self.edge_index.shape[1])
        if not 0 <= layer < self.num_hops:
            # layer i of an L-layer model reads hops 0..L-1-i; layer L would read nothing
            raise ValueError(f"attr layer = {layer}: this subgraph has {self.num_hops} hops, so layers "
                             f"0..{self.num_hops - 1}")
        n = self.num_nodes - sum(self.num_sampled_nodes[len(self.num_sampled_nodes) - layer:])
        e = int(self.edge_index.shape[1]) - sum(self.num_sampled_edges[len(self.num_sampled_edges) - layer:])
        return n, e

    def trimmed(self, layer) -> tuple[torch.Tensor, torch.Tensor | None, int]:
        """(edge_index, edge_weight, num_nodes) for GNN layer ``layer``."""
        n, e = self.trim_sizes(layer)
        ew = None if self.edge_weight is None else self.edge_weight[:e]
        return self.edge_index[:, :e], ew, n


# -- attribute helpers -------------------------------------------------------------------------


def _int(attrs: dict, name: str, default=None, lo=None, hi=None, required=False):
    v = attrs.get(name, default)
    if v is None:
        if required:
            raise ValueError(f"attr {name}: required")
        return None
    if not isinstance(v, int) or isinstance(v, bool):
        raise ValueError(f"attr {name} = {v!r}: expected an integer")
    if (lo is not None and v < lo) or (hi is not None and v > hi):
        raise ValueError(f"attr {name} = {v}: outside {lo}..{hi}")
    return v


def _choice(attrs: dict, name: str, default: str, allowed) -> str:
    v = attrs.get(name, default)
    if v not in allowed:
        raise ValueError(f"attr {name} = {v!r}: expected one of {', '.join(map(repr, allowed))}")
    return v


def _float(attrs: dict, name: str, default: float) -> float:
    v = attrs.get(name, default)
    if not isinstance(v, (int, float)) or isinstance(v, bool):
        raise ValueError(f"attr {name} = {v!r}: expected a number")
    return float(v)


def _bool(attrs: dict, name: str, default: bool) -> bool:
    v = attrs.get(name, default)
    if not isinstance(v, bool):
        raise ValueError(f"attr {name} = {v!r}: expected true or false")
    return v


def _only(attrs: dict, *names: str) -> None:
    extra = set(attrs) - set(names)
    if extra:
        raise ValueError(f"unknown attr(s) {', '.join(sorted(extra))} (this op takes: {', '.join(names) or 'none'})")


def _tensor(v, what: str) -> torch.Tensor:
    if not isinstance(v, torch.Tensor):
        raise ValueError(f"{what}: expected a tensor, got {type(v).__name__}")
    return v


def _subgraph(v, what: str) -> SubGraph:
    if not isinstance(v, SubGraph):
        raise ValueError(f"{what}: expected a SubGraph (the output of BatchPre), got {type(v).__name__}")
    return v


def _dim(x: torch.Tensor, attrs: dict, default: int) -> int:
    nd = max(x.dim(), 1)
    return _int(attrs, "dim", default, -nd, nd - 1)


def _rows(x: torch.Tensor, n: int, what: str) -> torch.Tensor:
    if x.dim() < 1 or x.shape[0] < n:
        raise ValueError(f"{what}: has {x.shape[0] if x.dim() else 0} rows, the (trimmed) subgraph needs {n}")
    return x[:n]


# -- kernels -----------------------------------------------------------------------------------

_DTYPES = {"float32": torch.float32, "float64": torch.float64, "float16": torch.float16, "bfloat16": torch.bfloat16}


def batch_pre(ctx, batch, seed_in=None, **attrs):
    """Sample the k-hop subgraph of the seed ids ``batch`` and gather its
    features (and, with ``degrees=true``, every node's whole-graph degree)."""
    _only(attrs, "fanouts", "seed", "dtype", "degrees")
    fanouts = attrs.get("fanouts")
    if not isinstance(fanouts, list) or not 1 <= len(fanouts) <= MAX_HOPS:
        raise ValueError(f"attr fanouts = {fanouts!r}: expected a list of 1..{MAX_HOPS} integers")
    for i, f in enumerate(fanouts):
        if not isinstance(f, int) or isinstance(f, bool) or not -1 <= f <= MAX_FANOUT:
            raise ValueError(f"attr fanouts[{i}] = {f!r}: expected -1 (all) or 0..{MAX_FANOUT}")
    seed = _int(attrs, "seed", 0, 0, 2**63 - 1)
    if seed_in is not None:
        s = _tensor(seed_in, "input 1 (Seed)")
        if s.numel() != 1 or s.dtype.is_floating_point:
            raise ValueError(f"input 1 (Seed): expected one integer, got a {s.dtype} tensor of shape {list(s.shape)}")
        seed = int(s.reshape(()).item())
    dtype = _DTYPES[_choice(attrs, "dtype", "float32", tuple(_DTYPES))]
    degrees = _bool(attrs, "degrees", False)
    seeds = _tensor(batch, "input 0 (Batch)")
    if seeds.dtype.is_floating_point or seeds.dtype == torch.bool:
        raise ValueError(f"input 0 (Batch): expected integer node ids, got {seeds.dtype}")
    if seeds.dim() != 1 or not 1 <= seeds.numel() <= MAX_BATCH_SEEDS:
        raise ValueError(f"input 0 (Batch): expected 1..{MAX_BATCH_SEEDS} node ids in a 1-D tensor, got shape "
                         f"{list(seeds.shape)}")
    if ctx.context is None or not hasattr(ctx.context, "sample"):
        raise ValueError("BatchPre needs a sampling context: Runner(context=SamplerContext(dataset_path))")
    ids, fl = seeds.detach().to("cpu", torch.int64).numpy(), [int(f) for f in fanouts]
    b = ctx.context.sample(ids, fl, seed, degrees=True) if degrees else ctx.context.sample(ids, fl, seed)
    ei = torch.from_numpy(np.asarray(b.edge_index, np.int64))
    x = torch.from_numpy(np.ascontiguousarray(b.x)).to(dtype)
    deg = None
    if degrees:
        d = getattr(b, "deg", None)
        if d is None or len(d) != len(b.n_id):
            raise ValueError("attr degrees = true: the sampling context returned no node degrees (its sampler must "
                             "be opened with degrees=True)")
        deg = torch.from_numpy(np.asarray(d, np.int64))
    sub = SubGraph(torch.from_numpy(np.asarray(b.n_id, np.int64)), ei, [int(v) for v in b.num_sampled_nodes],
                   [int(v) for v in b.num_sampled_edges], int(b.batch_size), x, deg=deg)
    return sub, x


def trim(ctx, sub, x, **attrs):
    """Rows of ``x`` that GNN layer ``layer`` keeps (PyG ``trim_feat``)."""
    _only(attrs, "layer")
    sub = _subgraph(sub, "input 0")
    n, _ = sub.trim_sizes(_int(attrs, "layer", 0, 0, MAX_HOPS))
    return _rows(_tensor(x, "input 1"), n, "input 1")


def _spmm(sub, x, attrs, reduce: str):
    _only(attrs, "layer")
    sub = _subgraph(sub, "input 0")
    x = _tensor(x, "input 1")
    ei, ew, n = sub.trimmed(_int(attrs, "layer", None, 0, MAX_HOPS))
    row, col = ei[0], ei[1]
    if ei.shape[1] and (int(row.max()) >= x.shape[0] or int(col.max()) >= n):
        raise ValueError(f"input 1: {x.shape[0]} rows, but the edges reference node {int(row.max())} "
                         f"(targets up to {int(col.max())}, {n} nodes)")
    msg = x.index_select(0, row)
    if ew is not None:
        msg = msg * ew.to(msg.dtype).view(-1, *([1] * (msg.dim() - 1)))
    out = torch.zeros((n, *x.shape[1:]), dtype=x.dtype, device=x.device)
    out.index_add_(0, col, msg)
    if reduce == "mean":
        cnt = torch.zeros(n, dtype=x.dtype, device=x.device)
        cnt.index_add_(0, col, torch.ones_like(col, dtype=x.dtype))
        out = out / cnt.clamp(min=1).view(-1, *([1] * (out.dim() - 1)))
    return out


def spmm_sum(ctx, sub, x, **attrs):
    """out[c] = sum over edges (r, c) of w * x[r]; [num_nodes, ...]."""
    return _spmm(sub, x, attrs, "sum")


def spmm_mean(ctx, sub, x, **attrs):
    """out[c] = mean over edges (r, c) of w * x[r] (0 for no edge)."""
    return _spmm(sub, x, attrs, "mean")


def gcn_norm(ctx, sub, **attrs):
    """GCNConv's symmetric normalisation on the (trimmed) edge set: by the
    whole graph's degrees when the subgraph carries them (BatchPre with
    ``degrees=true``), else by the degrees its own edges show."""
    _only(attrs, "layer", "self_loops", "improved")
    sub = _subgraph(sub, "input 0")
    ei, ew, n = sub.trimmed(_int(attrs, "layer", None, 0, MAX_HOPS))
    self_loops = _bool(attrs, "self_loops", True)
    fill = 2.0 if _bool(attrs, "improved", False) else 1.0
    dev = ei.device
    if ei.shape[1] and int(ei.max()) >= n:
        raise ValueError(f"edges reference node {int(ei.max())}, but the (trimmed) subgraph has {n} nodes")
    w = torch.ones(ei.shape[1], device=dev) if ew is None else ew.to(torch.float32)
    if sub.deg is not None:
        return _stored_degree_norm(sub, ei, w, n, self_loops, fill)
    if self_loops:
        # add_remaining_self_loops: existing loops keep their weight, every
        # node without one gets a loop of weight `fill`.
        is_loop = ei[0] == ei[1]
        loop_w = torch.full((n,), fill, device=dev)
        loop_w[ei[0][is_loop]] = w[is_loop]
        keep = ~is_loop
        loops = torch.arange(n, device=dev)
        ei = torch.cat([ei[:, keep], torch.stack([loops, loops])], dim=1)
        w = torch.cat([w[keep], loop_w])
    row, col = ei[0], ei[1]
    deg = torch.zeros(n, device=dev).index_add_(0, col, w)
    dis = deg.pow(-0.5)
    dis = dis.masked_fill(dis == float("inf"), 0.0)
    w = dis[row] * w * dis[col]
    return SubGraph(sub.n_id[:n], ei, [], [], sub.batch_size, None, w, n)


def _stored_degree_norm(sub, ei, w, n, self_loops: bool, fill: float) -> SubGraph:
    """Edge j -> i weighs w (d_i / s_i) / sqrt(D_i D_j) with d the whole-graph
    degree, s_i the edges into i here and D = d (+ fill with self-loops); each
    node's added self-loop weighs fill / D_i. A stored self-loop is an
    ordinary edge here (it is counted in d)."""
    dev = ei.device
    if sub.deg.numel() < n:
        raise ValueError(f"input 0: {sub.deg.numel()} node degrees for {n} nodes")
    d = sub.deg[:n].to(device=dev, dtype=torch.float32)
    row, col = ei[0], ei[1]
    s = torch.zeros(n, device=dev).index_add_(0, col, torch.ones(col.numel(), device=dev))
    big_d = d + fill if self_loops else d
    inv = torch.where(big_d > 0, big_d.clamp(min=1e-30).rsqrt(), torch.zeros_like(big_d))
    w = w * inv[row] * inv[col] * d[col] / s[col].clamp(min=1)
    if self_loops:
        loops = torch.arange(n, device=dev)
        ei = torch.cat([ei, torch.stack([loops, loops])], dim=1)
        w = torch.cat([w, fill * inv * inv])
    return SubGraph(sub.n_id[:n], ei, [], [], sub.batch_size, None, w, n)


# A GEMM on CPU larger than this many multiply-adds runs in row blocks of about this size, with the run's
# deadline checked between them (KernelContext.stop_point): 2^28 MACs is ~20 ms at the ~15 GMAC/s of one
# core's float32 BLAS, so an expired request stops within about that instead of after the whole product
# (one [9000, 9000] @ [9000, 9000] within --max-request-bytes is 2^39.5 MACs: minutes on one core). A block
# keeps at least GEMM_MIN_BLOCK_ROWS rows so BLAS stays efficient; since B holds at most MAX_VALUE_ELEMENTS
# (k x m <= 2^28), such a block is at most 2^34 MACs.
GEMM_BLOCK_MACS = 1 << 28
GEMM_MIN_BLOCK_ROWS = 64


def _matmul_in_blocks(ctx, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    """``a @ b``; for a large 2-D product on CPU, row block by row block into one output, checking
    ``ctx.stop_point()`` between blocks. Same result and bytes as ``a @ b`` (each block is written in place
    into its rows of the output). CUDA kernels run asynchronously and are fast at any size the plan admits,
    so they are not split; batched (rank > 2) products are not split either."""
    if (getattr(ctx, "check", None) is None or a.dim() != 2 or b.dim() != 2 or a.device.type != "cpu"
            or b.device != a.device or a.dtype != b.dtype):
        return a @ b
    n, k = a.shape
    m = b.shape[1]
    per_row = max(1, k * m)
    if n * per_row <= GEMM_BLOCK_MACS:
        return a @ b
    rows = max(GEMM_MIN_BLOCK_ROWS, GEMM_BLOCK_MACS // per_row)
    out = torch.empty((n, m), dtype=a.dtype, device=a.device)
    for i in range(0, n, rows):
        ctx.stop_point()
        torch.matmul(a[i:i + rows], b, out=out[i:i + rows])
    return out


def gemm(ctx, a, b, bias=None, **attrs):
    """A @ B (+ bias); ``transpose_a`` / ``transpose_b`` transpose the last two dims."""
    _only(attrs, "transpose_a", "transpose_b")
    a, b = _tensor(a, "input 0"), _tensor(b, "input 1")
    if _bool(attrs, "transpose_a", False):
        a = a.transpose(-1, -2)
    if _bool(attrs, "transpose_b", False):
        b = b.transpose(-1, -2)
    if a.dim() < 1 or b.dim() < 1 or a.shape[-1] != b.shape[0 if b.dim() == 1 else -2]:
        raise ValueError(f"shapes {list(a.shape)} @ {list(b.shape)} do not chain")
    _check_numel([*torch.broadcast_shapes(a.shape[:-2], b.shape[:-2]), *a.shape[-2:-1], *b.shape[-1:]]
                 if b.dim() > 1 else a.shape[:-1], "GEMM output")
    out = _matmul_in_blocks(ctx, a, b)
    if bias is not None:
        out = bias_add(ctx, out, bias)
    return out


_ELEMENTWISE = {"add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div, "max": torch.maximum,
                "min": torch.minimum}


def elementwise(ctx, a, b, **attrs):
    """a (op) b with broadcasting; op in add, sub, mul, div, max, min."""
    _only(attrs, "op")
    op = _choice(attrs, "op", "add", tuple(_ELEMENTWISE))
    a, b = _tensor(a, "input 0"), _tensor(b, "input 1")
    try:
        shape = torch.broadcast_shapes(a.shape, b.shape)
    except RuntimeError:
        raise ValueError(f"shapes {list(a.shape)} and {list(b.shape)} do not broadcast") from None
    _check_numel(shape, f"ElementWise {op} output")
    return _ELEMENTWISE[op](a, b)


def add(ctx, a, b, **attrs):
    _only(attrs)
    return elementwise(ctx, a, b, op="add")


def bias_add(ctx, x, b, **attrs):
    """x + b with b a vector of x's last dimension."""
    _only(attrs)
    x, b = _tensor(x, "input 0"), _tensor(b, "input 1")
    if b.dim() != 1 or x.dim() < 1 or b.shape[0] != x.shape[-1]:
        raise ValueError(f"bias of shape {list(b.shape)} does not match the last dimension of {list(x.shape)}")
    return x + b


def relu(ctx, x, **attrs):
    _only(attrs)
    return torch.relu(_tensor(x, "input 0"))


def leaky_relu(ctx, x, **attrs):
    _only(attrs, "negative_slope")
    return F.leaky_relu(_tensor(x, "input 0"), _float(attrs, "negative_slope", 0.01))


def sigmoid(ctx, x, **attrs):
    _only(attrs)
    return torch.sigmoid(_tensor(x, "input 0"))


def tanh(ctx, x, **attrs):
    _only(attrs)
    return torch.tanh(_tensor(x, "input 0"))


def reduce(ctx, x, **attrs):
    """sum/mean/max/min over ``dim`` (default 0)."""
    _only(attrs, "op", "dim", "keepdim")
    x = _tensor(x, "input 0")
    op = _choice(attrs, "op", "sum", ("sum", "mean", "max", "min"))
    dim, keep = _dim(x, attrs, 0), _bool(attrs, "keepdim", False)
    if op in ("max", "min"):
        if x.dim() and x.shape[dim] == 0:
            raise ValueError(f"{op} over an empty dimension {dim}")
        return getattr(torch, f"a{op}")(x, dim=dim, keepdim=keep)
    return getattr(torch, op)(x, dim=dim, keepdim=keep)


def sddmm(ctx, sub, a, b, **attrs):
    """Per-edge values from source rows of ``a`` and target rows of ``b``:
    op "dot" gives [E], "mul"/"add" give [E, D]."""
    _only(attrs, "op", "layer")
    sub = _subgraph(sub, "input 0")
    a, b = _tensor(a, "input 1"), _tensor(b, "input 2")
    op = _choice(attrs, "op", "dot", ("dot", "mul", "add"))
    ei, _, n = sub.trimmed(_int(attrs, "layer", None, 0, MAX_HOPS))
    if ei.shape[1] and (int(ei[0].max()) >= a.shape[0] or int(ei[1].max()) >= b.shape[0]):
        raise ValueError(f"edges reference rows past inputs of {a.shape[0]} and {b.shape[0]} rows")
    ar, bc = a.index_select(0, ei[0]), b.index_select(0, ei[1])
    if op == "dot":
        return (ar * bc).sum(dim=-1)
    return ar * bc if op == "mul" else ar + bc


def slice_(ctx, x, **attrs):
    """x[start:stop] along ``dim`` (default 0); stop None = to the end."""
    _only(attrs, "start", "stop", "dim")
    x = _tensor(x, "input 0")
    dim = _dim(x, attrs, 0)
    size = x.shape[dim]
    start = _int(attrs, "start", 0, 0, size)
    stop = _int(attrs, "stop", None, start, size)
    return x.narrow(dim, start, (size if stop is None else stop) - start)


def take(ctx, x, idx, **attrs):
    """Rows of ``x``: the first ``batch_size`` when ``idx`` is a SubGraph
    (the seeds' rows), else ``x[idx]`` for an int64 index tensor."""
    _only(attrs)
    x = _tensor(x, "input 0")
    if isinstance(idx, SubGraph):
        return _rows(x, idx.batch_size, "input 0")
    idx = _tensor(idx, "input 1")
    if idx.dtype not in (torch.int64, torch.int32) or idx.dim() != 1:
        raise ValueError(f"input 1: expected a 1-D integer index, got {idx.dtype} of shape {list(idx.shape)}")
    if idx.numel() and (int(idx.min()) < 0 or int(idx.max()) >= x.shape[0]):
        raise ValueError(f"input 1: index values {int(idx.min())}..{int(idx.max())} outside 0..{x.shape[0] - 1}")
    return x.index_select(0, idx.to(torch.int64))


def concat(ctx, *xs, **attrs):
    """Concatenate along ``dim`` (default -1)."""
    _only(attrs, "dim")
    xs = [_tensor(x, f"input {i}") for i, x in enumerate(xs)]
    dim = _dim(xs[0], attrs, -1)
    try:
        return torch.cat(xs, dim=dim)
    except RuntimeError as e:
        raise ValueError(f"shapes {[list(x.shape) for x in xs]} do not concatenate along {dim}: {e}") from None


def softmax(ctx, x, **attrs):
    _only(attrs, "dim")
    x = _tensor(x, "input 0")
    return torch.softmax(x, dim=_dim(x, attrs, -1))


def log_softmax(ctx, x, **attrs):
    _only(attrs, "dim")
    x = _tensor(x, "input 0")
    return torch.log_softmax(x, dim=_dim(x, attrs, -1))


def l2_normalize(ctx, x, **attrs):
    """x / max(||x||_2, eps) along ``dim`` (``torch.nn.functional.normalize``)."""
    _only(attrs, "dim", "eps")
    x = _tensor(x, "input 0")
    return F.normalize(x, p=2.0, dim=_dim(x, attrs, -1), eps=_float(attrs, "eps", 1e-12))


def features(ctx, sub, **attrs):
    """The feature matrix a SubGraph carries."""
    _only(attrs)
    sub = _subgraph(sub, "input 0")
    if sub.x is None:
        raise ValueError("input 0: this SubGraph carries no features")
    return sub.x


# name -> (kernel, arity, num_outputs, on CPU only, doc)
BUILTINS = {
    "BatchPre": (batch_pre, (1, 2), 2, True,
                 "(Batch int64[B][, Seed]) -> (SubGraph, X[N, F]); attrs fanouts, seed=0, dtype='float32', "
                 "degrees=false"),
    "Features": (features, 1, 1, False, "(SubGraph) -> X[N, F]"),
    "Trim": (trim, 2, 1, False, "(SubGraph, X[N, D]) -> X[N_layer, D]; attr layer=0"),
    "SpMM_Sum": (spmm_sum, 2, 1, False, "(SubGraph, X[>=N, D]) -> [N_layer, D]; attr layer=None"),
    "SpMM_Mean": (spmm_mean, 2, 1, False, "(SubGraph, X[>=N, D]) -> [N_layer, D]; attr layer=None"),
    "GCNNorm": (gcn_norm, 1, 1, False, "(SubGraph) -> weighted SubGraph; attrs layer, self_loops=true, improved=false"),
    "GEMM": (gemm, (2, 3), 1, False, "(A, B[, bias]) -> A @ B (+ bias); attrs transpose_a, transpose_b"),
    "ElementWise": (elementwise, 2, 1, False, "(a, b) -> a op b; attr op in add/sub/mul/div/max/min"),
    "Add": (add, 2, 1, False, "(a, b) -> a + b"),
    "Bias": (bias_add, 2, 1, False, "(X[..., D], b[D]) -> X + b"),
    "ReLU": (relu, 1, 1, False, "(X) -> max(X, 0)"),
    "LeakyReLU": (leaky_relu, 1, 1, False, "(X) -> leaky_relu(X); attr negative_slope=0.01"),
    "Sigmoid": (sigmoid, 1, 1, False, "(X) -> sigmoid(X)"),
    "Tanh": (tanh, 1, 1, False, "(X) -> tanh(X)"),
    "Reduce": (reduce, 1, 1, False, "(X) -> reduction; attrs op in sum/mean/max/min, dim=0, keepdim=false"),
    "SDDMM": (sddmm, 3, 1, False, "(SubGraph, A, B) -> per-edge A[row] op B[col]; attrs op in dot/mul/add, layer"),
    "Slice": (slice_, 1, 1, False, "(X) -> X[start:stop] along dim; attrs start=0, stop=None, dim=0"),
    "Take": (take, 2, 1, False, "(X, SubGraph | index) -> X[:batch_size] | X[index]"),
    "Concat": (concat, (1, None), 1, False, "(X0, X1, ...) -> cat along dim; attr dim=-1"),
    "Softmax": (softmax, 1, 1, False, "(X) -> softmax along dim; attr dim=-1"),
    "LogSoftmax": (log_softmax, 1, 1, False, "(X) -> log_softmax along dim; attr dim=-1"),
    "L2Normalize": (l2_normalize, 1, 1, False, "(X) -> X / ||X||_2 along dim; attrs dim=-1, eps=1e-12"),
}


def register_builtins(registry, shapes: dict) -> None:
    """Register every built-in op on ``registry``'s CPU (and CUDA) devices
    with its shape function from ``shapes`` (``flashgnn.dfg.shapes.SHAPES``;
    passed in so this module does not import the one that imports it)."""
    names = {d.name for d in registry.devices()}
    for op, (kernel, arity, n_out, cpu_only, doc) in BUILTINS.items():
        for dev in ("CPU", "CUDA"):
            if dev in names and (dev == "CPU" or not cpu_only):
                registry.register_op(op, dev, kernel, arity=arity, num_outputs=n_out, doc=doc, shape=shapes[op])
