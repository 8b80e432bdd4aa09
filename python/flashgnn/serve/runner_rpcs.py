"""The GraphRunner RPCs of ``flashgnn serve``: Run (a DFG over a batch of targets) and Plugin.

Owns the server's :mod:`flashgnn.dfg` state (:meth:`RunnerRpcs.preload`
imports it in the background at start, so the first Run does not pay for
torch): the parsed DFGs, kept by the
sha256 of their bytes (LRU of ``DFG_CACHE_ENTRIES``; a client re-sends an
evicted one on NOT_FOUND), the operator registry plugins land in (owned by
this server, never the process-wide default), the sampling context over the
served MutableGraph (so a Run sees every acknowledged mutation), and the
process-wide ledger of ``--max-inflight-bytes``. Each RPC runs as
``work(call)`` on a worker, behind the gate of :mod:`flashgnn.serve.transport`.

Invariants, all checked before any kernel runs:

- a DFG accepted from the network may only sample what the request asks for:
  every BatchPre takes its seeds from the graph input ``Batch``, with at most
  ``--max-hops`` hops of at most ``--max-fanout`` each (``-1``, all
  neighbors, is refused), and at most ``MAX_BATCHPRE_NODES`` sampling ops;
  checked before the DFG is cached;
- ``Run.batch`` is non-empty, at most ``--max-batch`` ids, each in
  ``[0, num_nodes)``; targets x the fanouts stay within
  ``--max-sampled-nodes``;
- the DFG's plan for the batch (every node's shape inferred, none run): its
  peak live bytes plus the reply's copy of the outputs within
  ``--max-request-bytes``, then reserved in the ledger, waiting at most
  ``INFLIGHT_BYTES_WAIT_S`` and never past the deadline (else
  RESOURCE_EXHAUSTED), and released once the reply is built;
- Plugin is PERMISSION_DENIED unless the server runs with ``--allow-plugins``
  (a plugin runs arbitrary code).
"""

from __future__ import annotations

import collections
import hashlib
import json
import threading
import time

import grpc
import numpy as np

from . import flashgnn_pb2 as pb
from .call import Status, invalid
from .codec import to_tensor
from .limits import INFLIGHT_BYTES_WAIT_S
from .transport import log

# Serialised DFGs kept by sha256 (LRU). A client re-sends an evicted one on NOT_FOUND.
DFG_CACHE_ENTRIES = 64


class RunnerRpcs:
    """The GraphRunner half of the servicer. Expects ``self.graph``, ``self.dataset``, ``self.limits``,
    ``self.cache``, ``self.allow_plugins`` and the transport's ``self._call``."""

    def _init_runner(self) -> None:
        self._dfgs: collections.OrderedDict[str, object] = collections.OrderedDict()
        self._dfg_lock = threading.Lock()
        self._dfg_mod = None
        self._registry = None
        self._context = None
        self._runner_lock = threading.Lock()

    def preload(self) -> None:
        """Import flashgnn.dfg (torch) in the background so the first Run does not pay for it."""

        def load():
            try:
                self._dfg()
            except Exception as e:  # noqa: BLE001 - Run retries and reports it
                log(f"GraphRunner not loaded ({type(e).__name__}: {e}); Run and Plugin will retry")

        threading.Thread(target=load, name="flashgnn-dfg-preload", daemon=True).start()

    def _dfg(self):
        """flashgnn.dfg, its shared registry (plugins land there) and the sampling context."""
        with self._runner_lock:
            if self._dfg_mod is None:
                import flashgnn.dfg as dfg

                # Owned by this server: plugins loaded over RPC land here, not in the process-wide default.
                self._registry = dfg.builtin_registry()
                kw = {"cache": self.cache} if self.cache is not None else {}
                self._context = dfg.SamplerContext(self.dataset, graph=self.graph, **kw)
                self._dfg_mod = dfg
            return self._dfg_mod

    def set_cache(self, cache) -> None:
        """Serve Runs from ``cache`` (or none) from now on: after a compaction the old cache's keys name the
        previous generation's files, so every sampler would run without it. Runs already sampling finish
        with the sampler they hold."""
        with self._runner_lock:
            self.cache = cache
            if self._context is not None:
                self._context.set_sampler_kwargs(cache=cache)

    def _graph_for(self, request):
        dfg = self._dfg()
        if request.dfg:
            digest = hashlib.sha256(request.dfg).hexdigest()
            if request.dfg_id and request.dfg_id != digest:
                raise invalid(f"Run.dfg_id: {request.dfg_id} != sha256 of Run.dfg {digest}")
            with self._dfg_lock:
                g = self._dfgs.get(digest)
            if g is None:
                try:
                    g = dfg.Graph.from_bytes(request.dfg)
                except ValueError as e:
                    raise invalid(f"Run.dfg: {e}") from None
                self._check_fanouts(g)
                with self._dfg_lock:
                    self._dfgs[digest] = g
                    while len(self._dfgs) > DFG_CACHE_ENTRIES:
                        self._dfgs.popitem(last=False)
            return digest, g
        if not request.dfg_id:
            raise invalid("Run: neither dfg nor dfg_id set")
        with self._dfg_lock:
            g = self._dfgs.get(request.dfg_id)
            if g is not None:
                self._dfgs.move_to_end(request.dfg_id)
        if g is None:
            raise Status(grpc.StatusCode.NOT_FOUND, f"Run.dfg_id: {request.dfg_id} not cached; re-send with dfg bytes", "dfg_not_cached")
        return request.dfg_id, g

    MAX_BATCHPRE_NODES = 4  # sampling ops in one DFG (a k-layer model needs one)

    def _check_fanouts(self, graph) -> None:
        """A DFG accepted from the network may only sample what the request asks for: every BatchPre takes
        its seeds from the graph input ``Batch`` (which Run validates), with at most --max-hops hops of at
        most --max-fanout each; at most MAX_BATCHPRE_NODES sampling ops."""
        pre = [nd for nd in getattr(graph, "nodes", ()) if nd.op == "BatchPre"]
        if len(pre) > self.MAX_BATCHPRE_NODES:
            raise invalid(f"Run.dfg: {len(pre)} BatchPre nodes > {self.MAX_BATCHPRE_NODES}")
        for nd in pre:
            if not nd.inputs or nd.inputs[0] != "Batch":
                raise invalid(f"Run.dfg node {nd.seq} (BatchPre) input 0: {nd.inputs[0] if nd.inputs else None!r}; "
                              "a served DFG samples the request's targets: input 0 must be the graph input 'Batch'")
        for where, fanouts in _dfg_fanouts(graph):
            if len(fanouts) > self.limits.max_hops:
                raise invalid(f"Run.dfg {where} fanouts: {len(fanouts)} hops > --max-hops {self.limits.max_hops}")
            for i, k in enumerate(fanouts):
                if isinstance(k, bool) or not isinstance(k, (int, np.integer)):
                    raise invalid(f"Run.dfg {where} fanouts[{i}]: {k!r} is not an integer")
                k = int(k)
                if k < 0:
                    raise invalid(f"Run.dfg {where} fanouts[{i}]: {k} (all neighbors) is not allowed; at most --max-fanout {self.limits.max_fanout}")
                if k > self.limits.max_fanout:
                    raise invalid(f"Run.dfg {where} fanouts[{i}]: {k} > --max-fanout {self.limits.max_fanout}")

    def _check_work(self, graph, targets: int, runner=None, inputs=None):
        """Upper bound on the nodes a Run samples: targets x (1 + f1 + f1 f2 + ...) per BatchPre. With a
        runner: the DFG's plan (every node's shape inferred, none run), its bytes (peak + the reply's copy of
        the outputs) checked against --max-request-bytes, and the process-wide ledger of
        --max-inflight-bytes; returns (plan, bytes, ledger)."""
        bound = 0
        for _, fanouts in _dfg_fanouts(graph):
            level, per = 1, 1
            for k in fanouts:
                level *= int(k)
                per += level
            bound += targets * per
        if bound > self.limits.max_sampled_nodes:
            raise invalid(f"Run.batch: {targets} targets x the DFG's fanouts may sample {bound} nodes > "
                          f"--max-sampled-nodes {self.limits.max_sampled_nodes}")
        if runner is None:
            return None
        plan = runner.plan(graph, inputs)  # ShapeError (a ValueError) -> INVALID_ARGUMENT naming node/op/shape/bound
        need = plan.peak_bytes + plan.output_bytes
        if need > self.limits.max_request_bytes:
            raise invalid(f"Run.dfg: refused before running: peak {plan.peak_bytes} bytes (at {plan.describe_peak()}) "
                          f"+ reply {plan.output_bytes} bytes > --max-request-bytes {self.limits.max_request_bytes}")
        with self._runner_lock:
            ledger = self.__dict__.get("_bytes_ledger")
            if ledger is None:
                ledger = self._bytes_ledger = self._dfg_mod.ByteLedger(self.limits.max_inflight_bytes,
                                                                       "--max-inflight-bytes")
        return plan, need, ledger

    def Run(self, request, context):
        def work(call):
            n = int(self.graph.num_nodes)
            batch = np.asarray(request.batch, dtype=np.int64)
            if batch.size == 0:
                raise invalid("Run.batch: empty")
            if batch.size > self.limits.max_batch:
                raise invalid(f"Run.batch: {batch.size} targets > --max-batch {self.limits.max_batch}")
            bad = np.flatnonzero((batch < 0) | (batch >= n))
            if bad.size:
                i = int(bad[0])
                raise invalid(f"Run.batch[{i}]: {int(batch[i])} " + ("< 0" if batch[i] < 0 else f">= num_nodes {n}"))
            digest, g = self._graph_for(request)

            def reply(out, runner):
                r = pb.RunReply(profile_json=json.dumps(getattr(runner, "last_profile", [])), dfg_id=digest)
                for name, t in out.items():
                    a = t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)
                    r.outputs[name].CopyFrom(to_tensor(a))
                return r

            return self._run_within_ledger(call, g, batch, f"Run ({batch.size} targets, DFG {digest[:12]})", reply)

        return self._call("Run", context, work)

    def _run_within_ledger(self, call, graph, batch: np.ndarray, what: str, finish):
        """``finish(outputs, runner)`` of ``graph`` run on ``batch`` (Run, Recommend): its shapes and peak
        checked before anything runs, its bytes held in the server's memory ledger until ``finish`` returns,
        ``call``'s deadline checked at every node and inside long kernels."""
        dfg = self._dfg()
        import torch

        inputs = {"Batch": torch.from_numpy(batch)}
        runner = dfg.Runner(registry=self._registry, context=self._context,
                            max_request_bytes=self.limits.max_request_bytes, bound_name="--max-request-bytes")
        plan, need, ledger = self._check_work(graph, int(batch.size), runner, inputs)  # nothing has run yet
        wait = max(0.0, min(INFLIGHT_BYTES_WAIT_S, call.deadline - time.monotonic()))
        try:
            ledger.acquire(need, wait, what)
        except dfg.LedgerFull as e:
            raise Status(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e), "memory") from None
        try:
            call.check()
            return finish(runner.run(graph, inputs, check=call.check, plan=plan), runner)
        finally:
            ledger.release(need)

    def Plugin(self, request, context):
        def work(call):
            if not self.allow_plugins:
                raise Status(
                    grpc.StatusCode.PERMISSION_DENIED,
                    "Plugin: refused; this server was started without --allow-plugins (a plugin runs arbitrary code)",
                    "permission_denied",
                )
            if not request.name:
                raise invalid("Plugin.name: empty")
            dfg = self._dfg()
            try:
                module = dfg.load_plugin_source(request.name, request.source, self._registry)
            except ValueError:
                raise
            except Exception as e:  # noqa: BLE001 - the plugin's own error (syntax, register() raising) is the caller's
                raise invalid(f"Plugin {request.name}: {type(e).__name__}: {e}") from None
            result = {
                "module": getattr(module, "__name__", str(module)),
                "ops": list(self._registry.ops()),
                "devices": [d.name for d in self._registry.devices()],
            }
            return pb.PluginReply(result_json=json.dumps(result))

        return self._call("Plugin", context, work)


def _dfg_fanouts(graph):
    """(where, fanouts) for every op of a DFG that carries sampling fanouts (BatchPre)."""
    for node in getattr(graph, "nodes", ()):
        attrs = getattr(node, "attrs", None)
        if isinstance(attrs, dict) and "fanouts" in attrs:
            fanouts = attrs["fanouts"]
            if not isinstance(fanouts, (list, tuple)):
                fanouts = [fanouts]
            yield f"node {getattr(node, 'seq', '?')} ({getattr(node, 'op', '?')})", list(fanouts)
