"""``flashgnn serve``: the gRPC server over a :class:`flashgnn.MutableGraph`.

Owns RELIABILITY.md promise 5. Every request passes one gate,
:meth:`Service._call`, in this order:

1. **authentication** — metadata ``authorization: Bearer <token>`` compared in
   constant time (``hmac.compare_digest``) on every RPC except Health;
   otherwise UNAUTHENTICATED, before any request field is looked at;
2. **admission** — a semaphore of ``max_inflight`` slots taken *without
   blocking*; when none is free the answer is RESOURCE_EXHAUSTED at once
   (a queue would only turn overload into latency);
3. **deadline** — the client's deadline, or ``default_deadline_s`` when it set
   none; the handler waits for the work at most that long and answers
   DEADLINE_EXCEEDED. A mutation checks the deadline before it starts; one
   already committing finishes (its slot stays taken until it does, so the
   cap bounds real work, not just waiting handlers);
4. **validation** — ids against ``num_nodes``, Tensor bytes against dtype and
   shape, Run batch and fanouts against ``max_batch`` / ``max_fanout``:
   INVALID_ARGUMENT naming the field, value and bound. ``ValueError`` from
   the graph or the runner maps to INVALID_ARGUMENT with its message.

Message sizes are bounded by gRPC itself (``max_receive_message_length`` /
``max_send_message_length`` = ``max_message_bytes``): a larger request is
answered RESOURCE_EXHAUSTED by the gRPC core before a handler runs.

Threads: gRPC's handler pool (``max_inflight + HANDLER_SPARE_THREADS``, and
gRPC's own ``maximum_concurrent_rpcs`` at the same number, so even rejections
are bounded) only authenticates, admits and waits; the work runs on a pool of
``workers`` threads. MutableGraph releases the GIL in its blocking calls, so
concurrent mutations share fsyncs (group commit).

Shutdown (SIGTERM/SIGINT): Health turns DRAINING, gRPC stops accepting, the
in-flight requests get ``grace_s`` to finish, the work pool is joined, the
graph is closed, one summary line is printed and the process exits 0.

Test hook: ``FLASHGNN_SERVE_TEST_DELAY="Rpc:seconds[,Rpc:seconds]"`` makes the
named RPCs sleep inside their admitted work (tests of the in-flight cap,
deadlines and the drain). It is read once at start and announced on stderr.
"""

from __future__ import annotations

import collections
import concurrent.futures
import hashlib
import hmac
import json
import os
import signal
import stat
import sys
import threading
import time
import traceback
from dataclasses import asdict
from pathlib import Path

import grpc
import numpy as np

import flashgnn

from . import flashgnn_pb2 as pb
from . import flashgnn_pb2_grpc as pb_grpc
from .codec import from_tensor, to_tensor
from .limits import Limits

# Requests kept per RPC for the p50/p99 latency in Stats (a sliding window:
# 4096 x 8 B per RPC, bounded whatever the uptime).
LATENCY_WINDOW = 4096
# Serialised DFGs kept by sha256 (LRU). A client re-sends an evicted one on NOT_FOUND.
DFG_CACHE_ENTRIES = 64
# gRPC handler threads beyond max_inflight: room to answer Health, Stats and
# rejections while every admitted slot is busy.
HANDLER_SPARE_THREADS = 8
ENV_TEST_DELAY = "FLASHGNN_SERVE_TEST_DELAY"

RPCS = (
    "Health", "Stats", "UpdateGraph", "AddVertex", "DeleteVertex", "AddEdge", "DeleteEdge",
    "UpdateEmbed", "ApplyBatch", "GetEmbed", "GetNeighbors", "Run", "Plugin",
)
# RPCs that do not take an in-flight slot (cheap, and needed to watch an overloaded server).
UNMETERED = ("Health", "Stats")


class Status(Exception):
    """A gRPC status to answer with; ``reason`` keys the Stats 'rejected' counters."""

    def __init__(self, code: grpc.StatusCode, message: str, reason: str | None = None):
        super().__init__(message)
        self.code, self.message, self.reason = code, message, reason


def invalid(message: str) -> Status:
    return Status(grpc.StatusCode.INVALID_ARGUMENT, message, "invalid_argument")


def read_token_file(path: str | os.PathLike) -> str:
    """The bearer token: first line of ``path``. Refuses a file others can read or write."""
    p = Path(path)
    try:
        st = p.stat()
    except OSError as e:
        raise ValueError(f"--token-file {p}: {e.strerror}") from None
    if st.st_mode & (stat.S_IROTH | stat.S_IWOTH):
        raise ValueError(
            f"--token-file {p}: mode {stat.filemode(st.st_mode)} is readable or writable by others; "
            f"run `chmod 600 {p}` (the token grants read and write access to the graph)"
        )
    token = p.read_text(encoding="utf-8").strip()
    if not token:
        raise ValueError(f"--token-file {p}: empty; put one line of at least 16 random characters in it")
    if len(token) < 16:
        raise ValueError(f"--token-file {p}: token of {len(token)} characters < 16; use e.g. `openssl rand -hex 32`")
    return token


def _test_delays() -> dict[str, float]:
    spec = os.environ.get(ENV_TEST_DELAY, "").strip()
    out: dict[str, float] = {}
    for part in filter(None, (s.strip() for s in spec.split(","))):
        name, _, secs = part.partition(":")
        if name not in RPCS:
            raise ValueError(f"{ENV_TEST_DELAY}: unknown RPC {name!r} (known: {', '.join(RPCS)})")
        out[name] = float(secs)
    return out


class Metrics:
    """Per-RPC counters and latency windows, and rejection counts by reason (thread-safe)."""

    def __init__(self):
        self._lock = threading.Lock()
        self.requests = collections.Counter()
        self.ok = collections.Counter()
        self.errors: dict[str, collections.Counter] = collections.defaultdict(collections.Counter)
        self.rejected = collections.Counter()
        self.latency_s = {r: collections.deque(maxlen=LATENCY_WINDOW) for r in RPCS}

    def record(self, rpc: str, code: grpc.StatusCode, seconds: float, reason: str | None) -> None:
        with self._lock:
            self.requests[rpc] += 1
            if code == grpc.StatusCode.OK:
                self.ok[rpc] += 1
            else:
                self.errors[rpc][code.name] += 1
            if reason:
                self.rejected[reason] += 1
            self.latency_s[rpc].append(seconds)

    def snapshot(self) -> tuple[dict, dict]:
        with self._lock:
            rpcs = {}
            for r in RPCS:
                if not self.requests[r]:
                    continue
                lat = np.sort(np.fromiter(self.latency_s[r], dtype=np.float64))
                rpcs[r] = dict(
                    requests=self.requests[r], ok=self.ok[r], errors=dict(self.errors[r]),
                    latency_p50_ms=float(np.percentile(lat, 50) * 1e3), latency_p99_ms=float(np.percentile(lat, 99) * 1e3),
                )
            return rpcs, dict(self.rejected)

    def totals(self) -> tuple[int, int]:
        with self._lock:
            return sum(self.requests.values()), sum(self.rejected.values())


class _Slot:
    """An admitted request's in-flight slot; released exactly once when its work ends."""

    def __init__(self, service: "Service"):
        self._service, self._released = service, False
        self._lock = threading.Lock()

    def release(self, *_):
        with self._lock:
            if self._released:
                return
            self._released = True
        self._service._release_slot()


class Service(pb_grpc.FlashGNNServicer):
    """The servicer. ``graph`` is an open, writable ``flashgnn.MutableGraph``."""

    def __init__(self, graph, dataset: str, limits: Limits, token: str | None, allow_plugins: bool = False,
                 cache=None):
        limits.check()
        self.graph, self.dataset, self.limits = graph, str(dataset), limits
        self.cache = cache  # flashgnn.Cache shared by every BatchPre sampler (--memory-budget), or None
        self._token = None if token is None else ("Bearer " + token).encode()
        self.allow_plugins = allow_plugins
        self.metrics = Metrics()
        self.started = time.monotonic()
        self.draining = False
        self._slots = threading.BoundedSemaphore(limits.max_inflight)
        self._inflight = 0
        self._inflight_lock = threading.Lock()
        self.work = concurrent.futures.ThreadPoolExecutor(limits.workers, thread_name_prefix="flashgnn-work")
        self._delays = _test_delays()
        self._dfgs: collections.OrderedDict[str, object] = collections.OrderedDict()
        self._dfg_lock = threading.Lock()
        self._update_slot = threading.Lock()  # one UpdateGraph at a time (each buffers a whole graph)
        self._dfg_mod = None
        self._registry = None
        self._context = None
        self._runner_lock = threading.Lock()

    # -- the gate -----------------------------------------------------------

    def _auth(self, rpc: str, context) -> None:
        if self._token is None:
            return
        got = b""
        for key, value in context.invocation_metadata() or ():
            if key == "authorization":
                got = value.encode() if isinstance(value, str) else bytes(value)
                break
        # compare_digest's time depends only on the length of its arguments.
        if not hmac.compare_digest(got, self._token):
            why = "missing 'authorization: Bearer <token>' metadata" if not got else "wrong token"
            raise Status(grpc.StatusCode.UNAUTHENTICATED, f"{rpc}: {why}", "unauthenticated")

    def _admit(self, rpc: str) -> _Slot:
        if not self._slots.acquire(blocking=False):
            raise Status(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{rpc}: {self.limits.max_inflight} requests in flight (--max-inflight {self.limits.max_inflight}); retry later",
                "overloaded",
            )
        with self._inflight_lock:
            self._inflight += 1
        return _Slot(self)

    def _release_slot(self) -> None:
        with self._inflight_lock:
            self._inflight -= 1
        self._slots.release()

    @property
    def in_flight(self) -> int:
        with self._inflight_lock:
            return self._inflight

    def _deadline(self, context) -> tuple[float, str]:
        """(monotonic deadline, note for the error message)."""
        remaining = context.time_remaining()
        if remaining is None or remaining > 1e9:  # gRPC reports "no deadline" as None or a huge value
            return time.monotonic() + self.limits.default_deadline_s, f" (server default --default-deadline {self.limits.default_deadline_s:g})"
        return time.monotonic() + remaining, ""

    def _call(self, rpc: str, context, work, *, auth: bool = True):
        """Run ``work(call)`` for one request behind auth, admission and the deadline."""
        t0 = time.perf_counter()
        code, reason, message = grpc.StatusCode.OK, None, ""
        reply = None
        try:
            if auth:
                self._auth(rpc, context)
            deadline, note = self._deadline(context)
            call = _Call(rpc, deadline, self._delays.get(rpc, 0.0), note)
            if rpc in UNMETERED:
                reply = self._guarded(work, call)
            else:
                slot = self._admit(rpc)
                try:
                    fut = self.work.submit(self._guarded, work, call)
                except RuntimeError:  # pool shut down: we are draining
                    slot.release()
                    raise Status(grpc.StatusCode.UNAVAILABLE, f"{rpc}: server is shutting down", "draining") from None
                fut.add_done_callback(slot.release)
                # The client going away also stops work that has not committed yet.
                context.add_callback(call.cancel)
                try:
                    reply = fut.result(timeout=max(0.0, deadline - time.monotonic()))
                except concurrent.futures.TimeoutError:
                    call.cancel()
                    raise call.expired() from None
        except Status as s:
            code, reason, message = s.code, s.reason, s.message
        finally:
            self.metrics.record(rpc, code, time.perf_counter() - t0, reason)
        if code != grpc.StatusCode.OK:
            context.abort(code, message)
        return reply

    def _guarded(self, work, call: "_Call"):
        """Runs on a worker: the test delay, the deadline check, and error mapping."""
        if call.delay_s:
            call.sleep(call.delay_s)
        call.check()
        try:
            return work(call)
        except Status:
            raise
        except ValueError as e:
            raise invalid(str(e)) from None
        except flashgnn.InputError as e:
            raise invalid(f"{call.rpc}: {e}") from None
        except flashgnn.CorruptDatasetError as e:
            traceback.print_exc(file=sys.stderr)
            raise Status(grpc.StatusCode.DATA_LOSS, f"{call.rpc}: {e}", "data_loss") from None
        except RuntimeError as e:
            # The store refuses writes after a log failure, or is closed: not the caller's fault, not a bug here.
            raise Status(grpc.StatusCode.FAILED_PRECONDITION, f"{call.rpc}: {e}", "failed_precondition") from None
        except IndexError as e:
            raise invalid(f"{call.rpc}: {e}") from None
        except KeyError as e:
            raise Status(grpc.StatusCode.NOT_FOUND, f"{call.rpc}: {e.args[0] if e.args else e}", "not_found") from None
        except Exception as e:  # noqa: BLE001 - one line to the client, the traceback to the log
            traceback.print_exc(file=sys.stderr)
            raise Status(grpc.StatusCode.INTERNAL, f"{call.rpc}: {type(e).__name__}: {e}") from None

    # -- validation helpers -------------------------------------------------

    def _vid(self, field: str, vid: int, n: int | None = None) -> int:
        """``vid`` checked against ``n`` (default: the graph's node count)."""
        n = int(self.graph.num_nodes) if n is None else n
        if vid < 0:
            raise invalid(f"{field}: {vid} < 0")
        if vid >= n:
            raise invalid(f"{field}: {vid} >= num_nodes {n}")
        return int(vid)

    def _embed(self, field: str, t) -> np.ndarray:
        a = from_tensor(t, field)
        dim = int(self.graph.feature_dim)
        if a.ndim == 2 and a.shape[0] == 1:
            a = a[0]
        if a.shape != (dim,):
            raise invalid(f"{field}.shape: {list(a.shape)} != [feature_dim {dim}]")
        if a.dtype.kind != "f":
            raise invalid(f"{field}.dtype: {a.dtype.name} is not a float type (feature dtype {self.graph.feature_dtype})")
        return a.astype(self.graph.dtype, copy=False)

    # -- RPCs ---------------------------------------------------------------

    def Health(self, request, context):
        def work(call):
            return pb.HealthReply(
                status="DRAINING" if self.draining else "SERVING",
                version=str(flashgnn.__version__), uptime_s=time.monotonic() - self.started,
            )

        return self._call("Health", context, work, auth=False)

    def Stats(self, request, context):
        def work(call):
            rpcs, rejected = self.metrics.snapshot()
            reply = pb.StatsReply(
                rejected=rejected, in_flight=self.in_flight, max_inflight=self.limits.max_inflight,
                uptime_s=time.monotonic() - self.started, graph_stats_json=json.dumps(self._graph_stats()),
                limits_json=json.dumps(asdict(self.limits)), dfg_cache_entries=len(self._dfgs),
            )
            for name, r in rpcs.items():
                reply.rpcs[name].CopyFrom(pb.RpcStats(**r))
            return reply

        return self._call("Stats", context, work)

    def _graph_stats(self) -> dict:
        g = self.graph
        out = {**g.stats(), "num_nodes": int(g.num_nodes), "feature_dim": int(g.feature_dim),
               "feature_dtype": str(g.feature_dtype)}
        if self.cache is not None:
            out["cache"] = self.cache.stats()
        return out

    def GetNeighbors(self, request, context):
        def work(call):
            vid = self._vid("GetNeighbors.vid", request.vid)
            return pb.NeighborsReply(neighbors=np.asarray(self.graph.get_neighbors(vid), dtype=np.int64).tolist())

        return self._call("GetNeighbors", context, work)

    def GetEmbed(self, request, context):
        def work(call):
            vid = self._vid("GetEmbed.vid", request.vid)
            return pb.EmbedReply(embed=to_tensor(self.graph.get_embed(vid)))

        return self._call("GetEmbed", context, work)

    def AddVertex(self, request, context):
        def work(call):
            embed = self._embed("AddVertex.embed", request.embed)
            call.check()
            vid = self.graph.add_vertex(embed)
            return pb.AddVertexReply(vid=int(vid), seq=int(self.graph.seq))

        return self._call("AddVertex", context, work)

    def DeleteVertex(self, request, context):
        def work(call):
            vid = self._vid("DeleteVertex.vid", request.vid)
            call.check()
            self.graph.delete_vertex(vid)
            return pb.MutationReply(seq=int(self.graph.seq))

        return self._call("DeleteVertex", context, work)

    def _edge(self, rpc: str, request) -> tuple[int, int]:
        return self._vid(f"{rpc}.dst", request.dst), self._vid(f"{rpc}.src", request.src)

    def AddEdge(self, request, context):
        def work(call):
            dst, src = self._edge("AddEdge", request)
            call.check()
            self.graph.add_edge(dst, src)
            return pb.MutationReply(seq=int(self.graph.seq))

        return self._call("AddEdge", context, work)

    def DeleteEdge(self, request, context):
        def work(call):
            dst, src = self._edge("DeleteEdge", request)
            call.check()
            self.graph.delete_edge(dst, src)
            return pb.MutationReply(seq=int(self.graph.seq))

        return self._call("DeleteEdge", context, work)

    def UpdateEmbed(self, request, context):
        def work(call):
            vid = self._vid("UpdateEmbed.vid", request.vid)
            embed = self._embed("UpdateEmbed.embed", request.embed)
            call.check()
            self.graph.update_embed(vid, embed)
            return pb.MutationReply(seq=int(self.graph.seq))

        return self._call("UpdateEmbed", context, work)

    def ApplyBatch(self, request, context):
        def work(call):
            ops = self._batch_ops(request)
            call.check()
            results = self.graph.apply(ops)
            reply = pb.ApplyBatchReply(seq=int(self.graph.seq))
            for r in results:
                reply.results.add(has_vid=r is not None, vid=int(r) if r is not None else 0)
            return reply

        return self._call("ApplyBatch", context, work)

    def _batch_ops(self, request) -> list[tuple]:
        if not request.ops:
            raise invalid("ApplyBatch.ops: empty batch")
        if len(request.ops) > self.limits.max_batch_ops:
            raise invalid(f"ApplyBatch.ops: {len(request.ops)} ops > --max-batch-ops {self.limits.max_batch_ops}")
        # Vertices added earlier in the same batch get ids num_nodes, num_nodes+1, ...;
        # later ops of the batch may name them, so the bound grows as we go.
        n = int(self.graph.num_nodes)
        added = 0
        ops: list[tuple] = []

        def vid(field, v):
            return self._vid(field, v, n + added)

        for i, op in enumerate(request.ops):
            kind = op.WhichOneof("op")
            f = f"ApplyBatch.ops[{i}].{kind}"
            if kind == "add_vertex":
                ops.append(("add_vertex", self._embed(f"{f}.embed", op.add_vertex.embed)))
                added += 1
            elif kind == "delete_vertex":
                ops.append(("delete_vertex", vid(f"{f}.vid", op.delete_vertex.vid)))
            elif kind in ("add_edge", "delete_edge"):
                e = getattr(op, kind)
                ops.append((kind, vid(f"{f}.dst", e.dst), vid(f"{f}.src", e.src)))
            elif kind == "update_embed":
                u = op.update_embed
                ops.append(("update_embed", vid(f"{f}.vid", u.vid), self._embed(f"{f}.embed", u.embed)))
            else:
                raise invalid(f"ApplyBatch.ops[{i}]: no operation set")
        return ops

    def UpdateGraph(self, request_iterator, context):
        """Replace the whole graph: edges ``src[i] -> dst[i]`` and ``[N, D]`` embedding rows
        (N = the new node count; D and the float dtype may differ from the current ones,
        but must be the same in every chunk)."""

        def work(call):
            if not self._update_slot.acquire(blocking=False):
                raise Status(grpc.StatusCode.RESOURCE_EXHAUSTED,
                             "UpdateGraph: another UpdateGraph is running (one at a time); retry later", "overloaded")
            try:
                return update(call)
            finally:
                self._update_slot.release()

        def update(call):
            src, dst, emb, lab = [], [], [], []
            total = chunks = 0
            width = dtype = None
            for chunk in request_iterator:
                call.check()
                f = f"UpdateGraph.chunk[{chunks}]"
                if len(chunk.src) != len(chunk.dst):
                    raise invalid(f"{f}: len(src) {len(chunk.src)} != len(dst) {len(chunk.dst)}")
                # Counted as decoded arrays (ids are 1-byte varints on the wire but 8 bytes each here).
                total += 16 * len(chunk.src) + 8 * len(chunk.labels) + len(chunk.embeddings.data)
                if total > self.limits.max_update_bytes:
                    raise Status(
                        grpc.StatusCode.RESOURCE_EXHAUSTED,
                        f"{f}: stream reached {total} bytes > --max-update-bytes {self.limits.max_update_bytes}",
                        "too_large",
                    )
                if chunk.src:
                    src.append(np.asarray(chunk.src, dtype=np.int64))
                    dst.append(np.asarray(chunk.dst, dtype=np.int64))
                if chunk.HasField("embeddings"):
                    e = from_tensor(chunk.embeddings, f"{f}.embeddings")
                    if e.ndim != 2:
                        raise invalid(f"{f}.embeddings.shape: {list(e.shape)} is not [rows, dim]")
                    if e.dtype.kind != "f":
                        raise invalid(f"{f}.embeddings.dtype: {e.dtype.name} is not a float type")
                    if width is None:
                        width, dtype = e.shape[1], e.dtype
                    elif (e.shape[1], e.dtype) != (width, dtype):
                        raise invalid(f"{f}.embeddings: {e.dtype.name}[{e.shape[1]}] rows after {dtype.name}[{width}] rows in earlier chunks")
                    emb.append(e)
                if chunk.labels:
                    lab.append(np.asarray(chunk.labels, dtype=np.int64))
                chunks += 1
            if not emb:
                raise invalid("UpdateGraph: no embedding rows; the update replaces the whole graph and needs [num_nodes, dim] embeddings")
            e = np.concatenate(emb)
            s = np.concatenate(src) if src else np.zeros(0, np.int64)
            d = np.concatenate(dst) if dst else np.zeros(0, np.int64)
            labels = np.concatenate(lab) if lab else None
            rows = len(e)
            for name, a in (("src", s), ("dst", d)):
                bad = np.flatnonzero((a < 0) | (a >= rows))
                if bad.size:
                    i = int(bad[0])
                    raise invalid(f"UpdateGraph.{name}[{i}]: {int(a[i])} " + ("< 0" if a[i] < 0 else f">= {rows} (the embedding rows)"))
            call.check()  # nothing is applied once the deadline or the client is gone
            report = self.graph.update_graph(s, d, e, labels=labels, progress=False)
            return pb.UpdateGraphReply(
                report_json=json.dumps(report), chunks=chunks, edges=len(s), embedding_rows=len(e)
            )

        return self._call("UpdateGraph", context, work)

    # -- GraphRunner ----------------------------------------------------------

    def preload(self) -> None:
        """Import flashgnn.dfg (torch) in the background so the first Run does not pay for it."""

        def load():
            try:
                self._dfg()
            except Exception as e:  # noqa: BLE001 - Run retries and reports it
                _log(f"GraphRunner not loaded ({type(e).__name__}: {e}); Run and Plugin will retry")

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
            dfg = self._dfg_mod
            import torch

            from .limits import INFLIGHT_BYTES_WAIT_S

            inputs = {"Batch": torch.from_numpy(batch)}
            runner = dfg.Runner(registry=self._registry, context=self._context,
                                max_request_bytes=self.limits.max_request_bytes, bound_name="--max-request-bytes")
            plan, need, ledger = self._check_work(g, int(batch.size), runner, inputs)  # nothing has run yet
            wait = max(0.0, min(INFLIGHT_BYTES_WAIT_S, call.deadline - time.monotonic()))
            try:
                ledger.acquire(need, wait, f"Run ({batch.size} targets, DFG {digest[:12]})")
            except dfg.LedgerFull as e:
                raise Status(grpc.StatusCode.RESOURCE_EXHAUSTED, str(e), "memory") from None
            try:
                call.check()
                out = runner.run(g, inputs, check=call.check, plan=plan)
                reply = pb.RunReply(profile_json=json.dumps(getattr(runner, "last_profile", [])), dfg_id=digest)
                for name, t in out.items():
                    a = t.detach().cpu().numpy() if hasattr(t, "detach") else np.asarray(t)
                    reply.outputs[name].CopyFrom(to_tensor(a))
                return reply
            finally:
                ledger.release(need)

        return self._call("Run", context, work)

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


class _Call:
    """One admitted request's deadline and cancellation flag, seen by its worker."""

    def __init__(self, rpc: str, deadline: float, delay_s: float, note: str = ""):
        self.rpc, self.deadline, self.delay_s, self.note = rpc, deadline, delay_s, note
        self.budget_s = max(0.0, deadline - time.monotonic())
        self._cancelled = threading.Event()

    def cancel(self) -> None:
        self._cancelled.set()

    def sleep(self, seconds: float) -> None:
        self._cancelled.wait(min(seconds, max(0.0, self.deadline - time.monotonic())))

    def expired(self) -> Status:
        return Status(grpc.StatusCode.DEADLINE_EXCEEDED, f"{self.rpc}: deadline of {self.budget_s:.3g} s exceeded{self.note}",
                      "deadline_exceeded")

    def check(self) -> None:
        """Raise before starting (or committing) work whose answer nobody will read."""
        if time.monotonic() >= self.deadline:
            raise self.expired()
        if self._cancelled.is_set():
            raise Status(grpc.StatusCode.CANCELLED, f"{self.rpc}: cancelled before the work started", "cancelled")


def _dfg_fanouts(graph):
    """(where, fanouts) for every op of a DFG that carries sampling fanouts (BatchPre)."""
    for node in getattr(graph, "nodes", ()):
        attrs = getattr(node, "attrs", None)
        if isinstance(attrs, dict) and "fanouts" in attrs:
            fanouts = attrs["fanouts"]
            if not isinstance(fanouts, (list, tuple)):
                fanouts = [fanouts]
            yield f"node {getattr(node, 'seq', '?')} ({getattr(node, 'op', '?')})", list(fanouts)


def _log(msg: str) -> None:
    print(f"flashgnn serve: {msg}", file=sys.stderr, flush=True)


BUDGET_FANOUTS = [10, 5]  # the batch the --memory-budget split is measured with (the query CLI's default)


def serve(
    dataset: str,
    listen: str,
    *,
    token: str | None,
    limits: Limits | None = None,
    allow_plugins: bool = False,
    group_commit_wait_us: int = 0,
    preload: bool = True,
    ready=None,
    memory_budget: int = 0,
) -> int:
    """Open the graph, serve until SIGTERM/SIGINT, drain, close. Returns the exit status.

    ``ready(port)`` is called once the port is bound (the CLI prints the
    'listening' line there; tests read the port from it).
    """
    limits = limits or Limits()
    limits.check()
    graph = flashgnn.MutableGraph(dataset, writable=True, group_commit_wait_us=group_commit_wait_us)
    cache = None
    if memory_budget:
        # One budget: per worker thread the engine's buffers and one request's batch (measured at
        # BUDGET_FANOUTS and min(--max-batch, 1024) targets); no prefetch window (requests are not known
        # ahead); the cache gets the rest and is shared by every BatchPre sampler.
        from flashgnn import budget

        split = budget.split(memory_budget, dataset, BUDGET_FANOUTS, min(limits.max_batch, 1024),
                             workers=limits.workers, prefetch=1)
        split["cache"] += split["window"]
        split["cache_static"] = split["cache"] // 2
        split["cache_dynamic"] = split["cache"] - split["cache_static"]
        split["window"], split["prefetch"] = 0, 0
        _log(budget.describe(split))
        cache = flashgnn.Cache(dataset, BUDGET_FANOUTS, split["cache"], hot="degree")
    service = Service(graph, dataset, limits, token, allow_plugins, cache=cache)
    handlers = limits.max_inflight + HANDLER_SPARE_THREADS
    server = grpc.server(
        concurrent.futures.ThreadPoolExecutor(handlers, thread_name_prefix="flashgnn-rpc"),
        options=[
            ("grpc.max_receive_message_length", limits.max_message_bytes),
            ("grpc.max_send_message_length", limits.max_message_bytes),
            ("grpc.so_reuseport", 0),
        ],
        maximum_concurrent_rpcs=handlers,
    )
    pb_grpc.add_FlashGNNServicer_to_server(service, server)
    try:
        port = server.add_insecure_port(listen)
    except RuntimeError as e:
        graph.close()
        raise OSError(f"--listen {listen}: cannot bind ({e})") from None
    if not port:
        graph.close()
        raise OSError(f"--listen {listen}: cannot bind")
    stop = threading.Event()
    got: list[str] = []

    def on_signal(signum, frame):
        got.append(signal.Signals(signum).name)
        stop.set()

    old = {s: signal.signal(s, on_signal) for s in (signal.SIGTERM, signal.SIGINT)}
    server.start()
    if preload:
        service.preload()
    if service._delays:
        _log(f"TEST HOOK {ENV_TEST_DELAY} active: {service._delays}")
    if ready is not None:
        ready(port)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        for s, h in old.items():
            signal.signal(s, h)
    t0 = time.monotonic()
    service.draining = True
    in_flight_at_stop = service.in_flight
    _log(f"{got[0] if got else 'stop'}: draining {in_flight_at_stop} in-flight request(s), grace {limits.grace_s:g} s")
    server.stop(limits.grace_s).wait()
    service.work.shutdown(wait=True)  # work past the grace period still finishes before the graph closes
    seq = getattr(graph, "seq", None)
    graph.close()
    served, rejected = service.metrics.totals()
    print(
        f"flashgnn serve: stopped after {time.monotonic() - service.started:.1f} s: {served} requests "
        f"({rejected} rejected), drained {in_flight_at_stop} in flight in {time.monotonic() - t0:.2f} s, "
        f"graph closed at seq {seq}",
        flush=True,
    )
    return 0
