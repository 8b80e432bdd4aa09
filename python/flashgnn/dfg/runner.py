"""Executing a DFG: :class:`Runner` and the sampling context BatchPre uses.

    runner = Runner(context=SamplerContext("data/demo"))
    out = runner.run(graph, {"Batch": torch.tensor([0, 5, 9])})["Result"]
    runner.last_profile   # [{"seq": 1, "op": "BatchPre", "device": "CPU", "kernel": ..., "ms": ...}, ...]

For every run the runner validates the graph against its registry (unknown
ops, arity, output counts), then *plans* it (:mod:`flashgnn.dfg.shapes`):
every node's output shape and dtype is inferred from the real inputs, each
checked against ``MAX_VALUE_ELEMENTS``, and the run's peak live bytes
computed; with ``max_request_bytes`` a plan over it (or one that cannot be
bounded, e.g. an op without a shape function) is refused, and with a
``ledger`` the peak is reserved there before the first kernel and given back
after the last. All of that happens before any kernel runs. Then it visits
the nodes in their stored (topological) order. Each node is bound *at that moment* to the kernel of
the highest-priority device that has one (HolisticGNN's dynamic binding), its
tensor inputs are moved to that device's torch device, and the kernel's
wall time is recorded (CUDA is synchronised around the kernel so the figure
is the kernel's own). The caller's ``check`` (a server's deadline) runs
before every node and, through ``KernelContext.stop_point``, inside kernels
that split long work (GEMM on CPU, by row blocks). Each output must fit its inferred spec (same dtype and
rank, every dimension within the bound), else a :class:`NodeError` says
which, so a wrong shape function cannot let a larger value flow on. A value
is dropped as soon as its last reader has run (at once when nothing reads it).
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict

import numpy as np
import torch

from flashgnn import _core
from flashgnn.dfg import shapes
from flashgnn.dfg.graph import DFGError, Graph
from flashgnn.dfg.ops import MAX_VALUE_ELEMENTS, SubGraph
from flashgnn.dfg.registry import KernelContext, Registry, default_registry
from flashgnn.dfg.shapes import NodeError, Plan, ShapeError

MAX_CACHED_SAMPLERS = 8  # one flashgnn.Sampler (io_uring ring + threads) per fanout tuple, LRU beyond this


class _Stopped(Exception):
    """The run's ``check`` raised inside a kernel (:meth:`KernelContext.stop_point`); carries that error out
    past the wrapping of kernel failures in :class:`NodeError`, so the caller sees its own error."""

    def __init__(self, error: BaseException):
        super().__init__(str(error))
        self.error = error


def _in_kernel(check):
    """``check`` as a kernel calls it: its error travels as :class:`_Stopped`."""
    if check is None:
        return None

    def stop_point():
        try:
            check()
        except BaseException as e:  # noqa: BLE001 - whatever the caller's check raises is the caller's to see
            raise _Stopped(e) from None

    return stop_point


def _move(v, device: torch.device):
    if isinstance(v, torch.Tensor):
        return v if v.device == device else v.to(device)
    if isinstance(v, SubGraph):
        return v.to(device)
    return v


def _as_input(name: str, v):
    if isinstance(v, (torch.Tensor, SubGraph)):
        return v
    try:
        return torch.as_tensor(np.asarray(v))
    except (TypeError, ValueError) as e:
        raise ValueError(f"input {name!r}: cannot be made a tensor ({e})") from None


class Runner:
    """Runs DFGs on a registry's kernels. ``context`` is handed to every
    kernel (``ctx.context``); BatchPre needs one with
    ``sample(seeds, fanouts, seed)``, e.g. :class:`SamplerContext`.
    Outputs are moved to ``output_device`` (None: left where computed).

    ``max_request_bytes``: refuse (:class:`ShapeError`, before any kernel)
    a run whose inferred peak live bytes exceed it, or that has a node whose
    output cannot be bounded; ``bound_name`` is how errors name the bound.
    ``ledger``: a :class:`flashgnn.dfg.memory.ByteLedger` shared by
    concurrent runs; each reserves its peak there (waiting at most
    ``ledger_wait_s``) for the whole run."""

    def __init__(self, registry: Registry | None = None, context=None, output_device: str | None = "cpu", *,
                 max_request_bytes: int | None = None, ledger=None, ledger_wait_s: float = 0.0,
                 bound_name: str = "max_request_bytes"):
        self.registry = registry if registry is not None else default_registry()
        self.context = context
        self.output_device = None if output_device is None else torch.device(output_device)
        self.max_request_bytes = max_request_bytes
        self.ledger = ledger
        self.ledger_wait_s = ledger_wait_s
        self.bound_name = bound_name
        self.last_profile: list[dict] = []
        self.last_total_ms = 0.0
        self.last_plan: Plan | None = None

    def _values(self, graph: Graph, inputs: dict) -> dict:
        if not isinstance(graph, Graph):
            raise TypeError(f"run: expected a flashgnn.dfg.Graph, got {type(graph).__name__}")
        graph.validate(self.registry)
        inputs = dict(inputs)
        missing = [n for n in graph.inputs if n not in inputs]
        extra = [n for n in inputs if n not in graph.inputs]
        if missing:
            raise ValueError(f"run: missing input(s) {', '.join(missing)} (the graph takes {', '.join(graph.inputs)})")
        if extra:
            raise ValueError(f"run: unknown input(s) {', '.join(extra)} (the graph takes {', '.join(graph.inputs)})")
        values: dict[str, object] = {n: _as_input(n, v) for n, v in inputs.items()}
        values.update(graph.params)
        return values

    def plan(self, graph: Graph, inputs: dict) -> Plan:
        """Infer every node's outputs and the run's peak bytes from these inputs, running nothing.
        Raises :class:`ShapeError` (a ValueError) naming the node, op, inferred shape and bound."""
        return self._plan(graph, self._values(graph, inputs))

    def _plan(self, graph: Graph, values: dict) -> Plan:
        limit = self.max_request_bytes
        p = shapes.plan(graph, self.registry, values, self.context, require_shapes=limit is not None,
                        max_value_elements=MAX_VALUE_ELEMENTS)
        if limit is not None and p.peak_bytes > limit:
            raise ShapeError(f"request refused before running: its peak live memory is {p.peak_bytes} bytes "
                             f"(at {p.describe_peak()}) > {self.bound_name} {limit}", max(p.peak_seq, 0),
                             p.node(p.peak_seq).op if p.peak_seq > 0 else "")
        return p

    def run(self, graph: Graph, inputs: dict, check=None, plan: Plan | None = None) -> dict:
        """``check``: called before each node, and by kernels that can run long between pieces of their
        work (``ctx.stop_point()``, e.g. GEMM between row blocks); whatever it raises ends the run and
        reaches the caller as it was raised. A server passes its deadline / cancellation check, so an
        expired request stops at the next node boundary or block, whichever comes first.
        ``plan``: one :meth:`plan` made for these same inputs (else it is made here)."""
        values = self._values(graph, inputs)
        if plan is None:
            plan = self._plan(graph, values)
        self.last_plan = plan
        if self.ledger is None:
            return self._run(graph, values, check, plan)
        with self.ledger.reserve(plan.peak_bytes, self.ledger_wait_s, "run"):
            return self._run(graph, values, check, plan)

    def _run(self, graph: Graph, values: dict, check, plan: Plan) -> dict:
        # last reader of each value, so that intermediates are freed early
        last_use: dict[str, int] = {}
        for i, n in enumerate(graph.nodes):
            for r in n.inputs:
                last_use[r] = i
        keep = set(graph.outputs.values())
        profile = []
        t_run = time.perf_counter()
        stop_point = _in_kernel(check)
        for i, node in enumerate(graph.nodes):
            if check is not None:
                check()
            device, kernel = self.registry.select(node.op)
            tdev = torch.device(device.torch_device)
            args = [graph.param_on(r, tdev) if r in graph.params else _move(values[r], tdev) for r in node.inputs]
            ctx = KernelContext(device, tdev, self.context, node.seq, node.op, stop_point)
            sync = tdev.type == "cuda"
            if sync:
                torch.cuda.synchronize(tdev)
            t0 = time.perf_counter()
            try:
                with torch.inference_mode():
                    out = kernel(ctx, *args, **node.attrs)
                if sync:
                    torch.cuda.synchronize(tdev)
            except (MemoryError, KeyboardInterrupt):
                raise
            except _Stopped as s:  # the request expired or was cancelled inside the kernel
                raise s.error from None
            except (OSError, _core.FlashgnnError):
                # The store's own errors (a device error, a damaged page, a bad sample request) keep their type:
                # they name the file, offset or bound, and a server maps them by it (DATA_LOSS, not the
                # caller's INVALID_ARGUMENT).
                raise
            except Exception as e:  # noqa: BLE001 - any kernel failure is reported against its node
                raise NodeError(f"node {node.seq} ({node.op} on {device.name}): {type(e).__name__}: {e}", node.seq,
                                node.op, device.name) from e
            ms = (time.perf_counter() - t0) * 1e3
            outs = out if isinstance(out, tuple) else (out,)
            if len(outs) != node.num_outputs:
                raise NodeError(f"node {node.seq} ({node.op} on {device.name}): kernel returned {len(outs)} values, "
                                f"the op declares {node.num_outputs}", node.seq, node.op, device.name)
            for k, v in enumerate(outs):
                if not isinstance(v, (torch.Tensor, SubGraph)):
                    raise NodeError(f"node {node.seq} ({node.op} on {device.name}): output {k} is a "
                                    f"{type(v).__name__}, expected a tensor or SubGraph", node.seq, node.op,
                                    device.name)
                why = shapes.fits(v, plan.specs.get(f"{node.seq}_{k}"))
                if why:
                    raise NodeError(f"node {node.seq} ({node.op} on {device.name}): output {k} {why} (the op's "
                                    "shape function is wrong; the memory bound assumed the inferred size)",
                                    node.seq, node.op, device.name)
                if isinstance(v, torch.Tensor) and v.numel() > MAX_VALUE_ELEMENTS:
                    raise NodeError(f"node {node.seq} ({node.op} on {device.name}): output {k} has {v.numel()} "
                                    f"elements, limit MAX_VALUE_ELEMENTS {MAX_VALUE_ELEMENTS}", node.seq, node.op,
                                    device.name)
                values[f"{node.seq}_{k}"] = v
            for r in set(node.inputs):
                if last_use.get(r) == i and r not in keep and r not in graph.params:
                    values.pop(r, None)
            for k in range(len(outs)):  # an output nothing reads is dropped at once (the plan assumes so)
                r = f"{node.seq}_{k}"
                if r not in last_use and r not in keep:
                    values.pop(r, None)
            del out, outs, args, v
            profile.append({"seq": node.seq, "op": node.op, "device": device.name,
                            "kernel": f"{getattr(kernel, '__module__', '?')}.{getattr(kernel, '__qualname__', kernel)}",
                            "ms": ms})
        result = {name: _move(values[ref], self.output_device) if self.output_device is not None else values[ref]
                  for name, ref in graph.outputs.items()}
        self.last_profile = profile
        self.last_total_ms = (time.perf_counter() - t_run) * 1e3
        return result


class SamplerContext:
    """What BatchPre samples with: one :class:`flashgnn.Sampler` per fanout
    tuple, opened on first use and kept (at most MAX_CACHED_SAMPLERS, LRU).

    ``source``: a dataset path, or a callable ``factory(fanouts) -> sampler``
    (anything with ``sample(seeds, seed)`` returning a SampledBatch-like
    object). ``graph``: a live :class:`flashgnn.MutableGraph`, passed to
    ``flashgnn.Sampler(..., graph=graph)`` (each batch samples a fresh
    snapshot of base + delta); ``sampler_kwargs`` go to
    ``flashgnn.Sampler`` too (``engine``, ``cache``, ...). Samples are taken
    under a per-sampler lock, so one context may serve several threads."""

    def __init__(self, source, *, graph=None, **sampler_kwargs):
        self.source = source
        self.graph = graph
        self.sampler_kwargs = dict(sampler_kwargs)
        self.graph_passed = graph is not None and not callable(source)
        if self.graph_passed:
            self.sampler_kwargs["graph"] = graph
        self._lock = threading.Lock()
        self._samplers: OrderedDict[tuple, tuple[object, threading.Lock]] = OrderedDict()
        self._epoch = 0  # bumped by set_sampler_kwargs: a sampler opened with older arguments is not kept

    def set_sampler_kwargs(self, **kwargs) -> None:
        """Open samplers with these ``flashgnn.Sampler`` arguments from now on (e.g. a cache rebuilt for a
        new generation); the samplers opened so far are dropped (a sample in progress keeps its own)."""
        with self._lock:
            self.sampler_kwargs = {**self.sampler_kwargs, **kwargs}
            self._samplers.clear()
            self._epoch += 1

    def sampler(self, fanouts) -> object:
        return self._entry(tuple(int(f) for f in fanouts))[0]

    def _entry(self, key: tuple):
        with self._lock:
            if key in self._samplers:
                self._samplers.move_to_end(key)
                return self._samplers[key]
            epoch, sampler_kwargs = self._epoch, self.sampler_kwargs
        degrees = bool(key) and key[-1] == "degrees"
        fanouts = list(key[:-1] if degrees else key)
        if callable(self.source):
            s = self.source(fanouts, degrees=True) if degrees else self.source(fanouts)
        else:
            import flashgnn

            kw = {"labels": False, **sampler_kwargs, **({"degrees": True} if degrees else {})}
            s = flashgnn.Sampler(os.fspath(self.source), fanouts, **kw)
        with self._lock:
            if epoch != self._epoch:
                return s, threading.Lock()  # opened with arguments replaced meanwhile: used once, not kept
            entry = self._samplers.setdefault(key, (s, threading.Lock()))
            self._samplers.move_to_end(key)
            while len(self._samplers) > MAX_CACHED_SAMPLERS:
                self._samplers.popitem(last=False)
            return entry

    def sample(self, seeds, fanouts, seed: int = 0, degrees: bool = False):
        """One batch; ``degrees=True`` (BatchPre's attr, GCN/NGCF): it carries
        every node's whole-graph degree (a sampler of its own, keyed apart)."""
        key = tuple(int(f) for f in fanouts) + (("degrees",) if degrees else ())
        s, lock = self._entry(key)
        with lock:
            return s.sample(seeds, seed)

    def sampling_info(self, fanouts) -> dict | None:
        """What BatchPre's shape function needs: ``feature_dim`` and ``feature_itemsize`` (bytes per
        stored feature value), from the live graph when one was given, else from the sampler (opened and
        cached as :meth:`sample` would). None when the sampler does not say."""
        g = self.graph
        if g is not None and hasattr(g, "feature_dim") and hasattr(g, "dtype"):
            return {"feature_dim": int(g.feature_dim), "feature_itemsize": int(np.dtype(g.dtype).itemsize)}
        s = self.sampler(fanouts)
        dim, dt = getattr(s, "feature_dim", None), getattr(s, "dtype", None)
        if dim is None or dt is None:
            return None
        sizes = [np.dtype(dt).itemsize] + ([np.dtype(s.out_dtype).itemsize] if getattr(s, "out_dtype", None) else [])
        return {"feature_dim": int(dim), "feature_itemsize": max(sizes)}


def run(graph: Graph, inputs: dict, context=None, registry: Registry | None = None) -> dict:
    """One-shot ``Runner(registry, context).run(graph, inputs)``."""
    return Runner(registry, context).run(graph, inputs)


__all__ = ["DFGError", "NodeError", "Runner", "SamplerContext", "run"]
