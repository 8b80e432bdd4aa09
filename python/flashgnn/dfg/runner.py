"""Executing a DFG: :class:`Runner` and the sampling context BatchPre uses.

    runner = Runner(context=SamplerContext("data/demo"))
    out = runner.run(graph, {"Batch": torch.tensor([0, 5, 9])})["Result"]
    runner.last_profile   # [{"seq": 1, "op": "BatchPre", "device": "CPU", "kernel": ..., "ms": ...}, ...]

For every run the runner validates the graph against its registry (unknown
ops, arity, output counts), then visits the nodes in their stored
(topological) order. Each node is bound *at that moment* to the kernel of
the highest-priority device that has one (HolisticGNN's dynamic binding), its
tensor inputs are moved to that device's torch device, and the kernel's
wall time is recorded (CUDA is synchronised around the kernel so the figure
is the kernel's own). A value is dropped as soon as its last reader has run.
"""

from __future__ import annotations

import os
import threading
import time
from collections import OrderedDict

import numpy as np
import torch

from flashgnn.dfg.graph import DFGError, Graph
from flashgnn.dfg.ops import MAX_VALUE_ELEMENTS, SubGraph
from flashgnn.dfg.registry import KernelContext, Registry, default_registry

MAX_CACHED_SAMPLERS = 8  # one flashgnn.Sampler (io_uring ring + threads) per fanout tuple, LRU beyond this


class NodeError(ValueError):
    """A node's kernel failed; ``seq``, ``op`` and ``device`` say which."""

    def __init__(self, msg: str, seq: int, op: str, device: str):
        super().__init__(msg)
        self.seq, self.op, self.device = seq, op, device


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
    Outputs are moved to ``output_device`` (None: left where computed)."""

    def __init__(self, registry: Registry | None = None, context=None, output_device: str | None = "cpu"):
        self.registry = registry if registry is not None else default_registry()
        self.context = context
        self.output_device = None if output_device is None else torch.device(output_device)
        self.last_profile: list[dict] = []
        self.last_total_ms = 0.0

    def run(self, graph: Graph, inputs: dict, check=None) -> dict:
        """``check``: called before each node (a server passes its deadline /
        cancellation check, so an expired request stops between nodes)."""
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
        # last reader of each value, so that intermediates are freed early
        last_use: dict[str, int] = {}
        for i, n in enumerate(graph.nodes):
            for r in n.inputs:
                last_use[r] = i
        keep = set(graph.outputs.values())
        profile = []
        t_run = time.perf_counter()
        for i, node in enumerate(graph.nodes):
            if check is not None:
                check()
            device, kernel = self.registry.select(node.op)
            tdev = torch.device(device.torch_device)
            args = [graph.param_on(r, tdev) if r in graph.params else _move(values[r], tdev) for r in node.inputs]
            ctx = KernelContext(device, tdev, self.context, node.seq, node.op)
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
                if isinstance(v, torch.Tensor) and v.numel() > MAX_VALUE_ELEMENTS:
                    raise NodeError(f"node {node.seq} ({node.op} on {device.name}): output {k} has {v.numel()} "
                                    f"elements, limit MAX_VALUE_ELEMENTS {MAX_VALUE_ELEMENTS}", node.seq, node.op,
                                    device.name)
                values[f"{node.seq}_{k}"] = v
            for r in set(node.inputs):
                if last_use.get(r) == i and r not in keep and r not in graph.params:
                    values.pop(r, None)
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

    def sampler(self, fanouts) -> object:
        return self._entry(tuple(int(f) for f in fanouts))[0]

    def _entry(self, key: tuple):
        with self._lock:
            if key in self._samplers:
                self._samplers.move_to_end(key)
                return self._samplers[key]
        if callable(self.source):
            s = self.source(list(key))
        else:
            import flashgnn

            kw = {"labels": False, **self.sampler_kwargs}
            s = flashgnn.Sampler(os.fspath(self.source), list(key), **kw)
        with self._lock:
            entry = self._samplers.setdefault(key, (s, threading.Lock()))
            self._samplers.move_to_end(key)
            while len(self._samplers) > MAX_CACHED_SAMPLERS:
                self._samplers.popitem(last=False)
            return entry

    def sample(self, seeds, fanouts, seed: int = 0):
        s, lock = self._entry(tuple(int(f) for f in fanouts))
        with lock:
            return s.sample(seeds, seed)


def run(graph: Graph, inputs: dict, context=None, registry: Registry | None = None) -> dict:
    """One-shot ``Runner(registry, context).run(graph, inputs)``."""
    return Runner(registry, context).run(graph, inputs)


__all__ = ["DFGError", "NodeError", "Runner", "SamplerContext", "run"]
