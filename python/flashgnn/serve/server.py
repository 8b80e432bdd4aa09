"""``flashgnn serve``: the gRPC server over a :class:`flashgnn.MutableGraph`.

Owns docs/reliability.md promise 5. Every request passes one gate,
:meth:`Service._serve_rpc`, in this order:

1. **authentication** — metadata ``authorization: Bearer <token>`` compared in
   constant time (``hmac.compare_digest``) on every RPC except Health;
   otherwise UNAUTHENTICATED at once, before the request message is read;
2. **admission** — a semaphore of ``max_inflight`` slots taken *without
   blocking*; when none is free the answer is RESOURCE_EXHAUSTED at once
   (a queue would only turn overload into latency). Also before the request
   message is read;
3. **the request message** — awaited at most ``request_body_timeout_s``
   (``--request-body-timeout``; for UpdateGraph: per chunk), else
   DEADLINE_EXCEEDED naming the flag. Health and Stats never read theirs
   (it is empty);
4. **deadline** — the client's deadline (at most ``max_deadline_s``), or ``default_deadline_s`` when it set
   none; the handler waits for the work at most that long and answers
   DEADLINE_EXCEEDED. A mutation checks the deadline before it starts; one
   already committing finishes (its slot stays taken until it does, so the
   cap bounds real work, not just waiting handlers);
5. **validation** — ids against ``num_nodes``, Tensor bytes against dtype and
   shape, Run batch and fanouts against ``max_batch`` / ``max_fanout``:
   INVALID_ARGUMENT naming the field, value and bound. ``ValueError`` from
   the graph or the runner maps to INVALID_ARGUMENT with its message.

Why ``grpc.aio`` and stream-request handlers (issue 15, item 2). grpcio's
thread-pool server reads a unary request message *inside a pool thread, before
the handler runs*: a call that never sends its message pinned a thread with
no server-side timeout, and ``max_inflight`` + 8 such calls, token or not,
refused everybody. Here every RPC is registered as a stream-request coroutine
(:meth:`Service.handlers`), so the gate runs when the call starts, with the
metadata in hand and no message read: an unauthenticated call is answered at
once and holds nothing; an authenticated one takes its slot, then awaits its
message on the event loop (no thread) for at most ``--request-body-timeout``.
No gRPC-wide ``maximum_concurrent_rpcs`` is set: it would count
unauthenticated calls against authenticated ones, which is the lockout itself.
Per connection: ``grpc.max_connection_idle_ms`` closes connections without
calls, ``grpc.server_handshake_timeout_ms`` bounds the HTTP/2 handshake,
keepalive pings find peers that vanished (their calls are cancelled), and
``grpc.max_concurrent_streams`` bounds one connection's streams. Alternative
weighed: stream-request handlers on the thread-pool server; the gate would
run early too, but a thread would still block in the message read with no
way to time it out.

Message sizes are bounded by gRPC itself (``max_receive_message_length`` /
``max_send_message_length`` = ``max_message_bytes``): a larger request is
answered RESOURCE_EXHAUSTED by the gRPC core (the handler sees the stream end
without a message, counted as ``no_message`` in Stats' rejections).

Threads: the event loop (one thread) authenticates, admits, reads messages and
waits; the work runs on a pool of ``workers`` threads, Stats on
``UNMETERED_THREADS`` of its own, Health on the loop. MutableGraph releases
the GIL in its blocking calls, so concurrent mutations share fsyncs (group
commit).

Shutdown (SIGTERM/SIGINT): Health turns DRAINING, gRPC stops accepting, the
in-flight requests get ``grace_s`` to finish, the work pool is joined, the
graph is closed, one summary line is printed and the process exits 0. A
second SIGTERM/SIGINT during the drain ends the grace period at once (calls
still in flight are cancelled; work already running on a worker finishes,
since a commit cannot be interrupted) and the summary follows, marked so; the
signal handlers stay installed until it is printed.

The server has no test hooks: tests that need slow calls start it through
``tests/serve/_slow_serve.py``, which wraps :meth:`Service._guarded` from outside.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import hashlib
import hmac
import json
import signal
import sys
import threading
import time
import traceback
import zlib
from dataclasses import asdict

import grpc
import numpy as np

import flashgnn

from . import flashgnn_pb2 as pb
from . import flashgnn_pb2_grpc as pb_grpc
from .codec import from_tensor, to_tensor
from .limits import Limits
from .token import read_token_file  # noqa: F401 - re-exported (flashgnn serve, the tests)

# Requests kept per RPC for the p50/p99 latency in Stats (a sliding window:
# 4096 x 8 B per RPC, bounded whatever the uptime).
LATENCY_WINDOW = 4096
# Serialised DFGs kept by sha256 (LRU). A client re-sends an evicted one on NOT_FOUND.
DFG_CACHE_ENTRIES = 64
# Threads answering Stats (not metered by --max-inflight, so an overloaded server can be watched), and
# the Stats calls in flight at once on them (more: RESOURCE_EXHAUSTED).
UNMETERED_THREADS = 2
UNMETERED_INFLIGHT = 8
# Per connection (see the module docstring). Streams: generous, since every stream is refused at once or
# ends by its message timeout or deadline; this bounds the HTTP/2 state one connection can hold.
MAX_STREAMS_PER_CONNECTION = 1024
CONNECTION_IDLE_S = 300  # a connection without calls is closed after this
HANDSHAKE_TIMEOUT_S = 10  # a connection must finish its HTTP/2 handshake in this
KEEPALIVE_S, KEEPALIVE_TIMEOUT_S = 60, 20  # ping an idle peer; no answer: its calls are cancelled

RPCS = (
    "Health", "Stats", "UpdateGraph", "AddVertex", "DeleteVertex", "AddEdge", "DeleteEdge",
    "UpdateEmbed", "ApplyBatch", "GetEmbed", "GetNeighbors", "Run", "Plugin",
)
# RPCs that do not take an in-flight slot (cheap, and needed to watch an overloaded server).
UNMETERED = ("Health", "Stats")
OPEN_RPCS = ("Health",)  # no token needed


class Status(Exception):
    """A gRPC status to answer with; ``reason`` keys the Stats 'rejected' counters."""

    def __init__(self, code: grpc.StatusCode, message: str, reason: str | None = None):
        super().__init__(message)
        self.code, self.message, self.reason = code, message, reason


def invalid(message: str) -> Status:
    return Status(grpc.StatusCode.INVALID_ARGUMENT, message, "invalid_argument")


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

    def __init__(self, release):
        self._release, self._released = release, False
        self._lock = threading.Lock()

    def release(self, *_):
        with self._lock:
            if self._released:
                return
            self._released = True
        self._release()


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
        self._dfgs: collections.OrderedDict[str, object] = collections.OrderedDict()
        self._dfg_lock = threading.Lock()
        self._update_slot = threading.Lock()  # one UpdateGraph at a time (each buffers a whole graph)
        self._dfg_mod = None
        self._registry = None
        self._context = None
        self._runner_lock = threading.Lock()
        self._side = concurrent.futures.ThreadPoolExecutor(UNMETERED_THREADS, thread_name_prefix="flashgnn-stats")
        self._side_slots = threading.BoundedSemaphore(UNMETERED_INFLIGHT)
        self.scrub = None  # serve/scrubber.BackgroundScrub under --scrub-rate

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
        return _Slot(self._release_slot)

    def shutdown_pools(self) -> None:
        """After the drain: join the worker and Stats threads (running work finishes, queued work is dropped)."""
        self.work.shutdown(wait=True, cancel_futures=True)
        self._side.shutdown(wait=True, cancel_futures=True)

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
        if remaining > self.limits.max_deadline_s:
            return time.monotonic() + self.limits.max_deadline_s, f" (capped by the server's --max-deadline {self.limits.max_deadline_s:g})"
        return time.monotonic() + remaining, ""

    def _call(self, rpc: str, context: "_Admitted", work) -> concurrent.futures.Future:
        """Start ``work(call)`` for a request the transport (:meth:`_serve_rpc`) has authenticated, admitted
        and read; returns the future it awaits. Health runs here and now (it is cheap), Stats on the
        unmetered threads, everything else on the worker pool."""
        call = context.call
        if rpc == "Health":
            fut: concurrent.futures.Future = concurrent.futures.Future()
            try:
                fut.set_result(self._guarded(work, call))
            except Exception as e:  # noqa: BLE001 - delivered to the transport like a worker's error
                fut.set_exception(e)
            return fut
        try:
            return (self._side if rpc in UNMETERED else self.work).submit(self._guarded, work, call)
        except RuntimeError:  # pool shut down: we are draining
            raise Status(grpc.StatusCode.UNAVAILABLE, f"{rpc}: server is shutting down", "draining") from None

    # -- the transport (see the module docstring for why grpc.aio) ------------

    def handlers(self) -> grpc.GenericRpcHandler:
        """Every RPC registered as a stream-request coroutine, so :meth:`_serve_rpc` runs when the call starts,
        with the metadata and before any request message is read."""
        methods = pb.DESCRIPTOR.services_by_name["FlashGNN"].methods_by_name
        table = {}
        for rpc in RPCS:
            request_cls, reply_cls = (getattr(pb, t.name) for t in (methods[rpc].input_type, methods[rpc].output_type))

            async def handler(request_iterator, context, rpc=rpc, request_cls=request_cls):
                return await self._serve_rpc(rpc, request_cls, context)

            table[rpc] = grpc.stream_unary_rpc_method_handler(
                handler, request_deserializer=request_cls.FromString, response_serializer=reply_cls.SerializeToString)
        return grpc.method_handlers_generic_handler("flashgnn.v1.FlashGNN", table)

    async def _serve_rpc(self, rpc: str, request_cls, context):
        """One call, from its start: authenticate, admit, read the message (bounded), run, answer."""
        t0 = time.perf_counter()
        code, reason, message = grpc.StatusCode.OK, None, ""
        reply, slot, fut, call = None, None, None, None
        try:
            if rpc not in OPEN_RPCS:
                self._auth(rpc, context)
            deadline, note = self._deadline(context)
            call = _Call(rpc, deadline, note)
            # The client going away (or the answer having been sent) stops work that has not committed yet.
            context.add_done_callback(lambda _ctx, call=call: call.cancel())
            if rpc == "Stats":
                slot = self._admit_unmetered(rpc)
            elif rpc not in UNMETERED:
                slot = self._admit(rpc)
            if rpc in UNMETERED:
                request = request_cls()  # empty by definition: never waited for
            elif rpc == "UpdateGraph":
                request = _ChunkStream(self, context, call, asyncio.get_running_loop())
            else:
                request = await self._message(rpc, context, call, f"{rpc} request")
                if request is None:
                    raise Status(grpc.StatusCode.INVALID_ARGUMENT,
                                 f"{rpc}: the stream ended without a request message (or the message exceeded "
                                 f"--max-message-bytes {self.limits.max_message_bytes} and the transport refused it)",
                                 "no_message")
            fut = getattr(self, rpc)(request, _Admitted(call))
            if slot is not None:
                fut.add_done_callback(slot.release)
                slot = None
            reply = await self._result(fut, call)
        except Status as s:
            code, reason, message = s.code, s.reason, s.message
        except asyncio.CancelledError:
            # The client cancelled, or the drain ended; gRPC has answered the call already.
            if call is not None:
                call.cancel()
            self.metrics.record(rpc, grpc.StatusCode.CANCELLED, time.perf_counter() - t0, "cancelled")
            raise
        except Exception as e:  # noqa: BLE001 - a bug here: one line to the client, the traceback to the log
            traceback.print_exc(file=sys.stderr)
            code, reason, message = grpc.StatusCode.INTERNAL, None, f"{rpc}: {type(e).__name__}: {e}"
        finally:
            if slot is not None:  # taken, but no work was started
                slot.release()
        self.metrics.record(rpc, code, time.perf_counter() - t0, reason)
        if code != grpc.StatusCode.OK:
            await context.abort(code, message)
        return reply

    def _admit_unmetered(self, rpc: str) -> "_Slot":
        if not self._side_slots.acquire(blocking=False):
            raise Status(grpc.StatusCode.RESOURCE_EXHAUSTED,
                         f"{rpc}: {UNMETERED_INFLIGHT} {rpc} requests in flight (UNMETERED_INFLIGHT); retry later",
                         "overloaded")
        return _Slot(self._side_slots.release)

    async def _message(self, rpc: str, context, call: "_Call", what: str):
        """The next request message, awaited at most --request-body-timeout (and the call's deadline); None
        when the client ended the stream."""
        limit = self.limits.request_body_timeout_s
        wait = min(limit, max(0.0, call.deadline - time.monotonic()))
        try:
            msg = await asyncio.wait_for(context.read(), wait)
        except (asyncio.TimeoutError, TimeoutError):
            if wait < limit:
                raise call.expired() from None
            raise Status(grpc.StatusCode.DEADLINE_EXCEEDED,
                         f"{what}: not received within --request-body-timeout {limit:g} s", "body_timeout") from None
        except (Status, asyncio.CancelledError):
            raise
        except Exception as e:  # noqa: BLE001 - the message does not parse
            raise invalid(f"{what}: not a valid message: {type(e).__name__}: {e}") from None
        return None if msg is grpc.aio.EOF else msg

    async def _result(self, fut: concurrent.futures.Future, call: "_Call"):
        """``fut``'s result, waited for until the call's deadline (DEADLINE_EXCEEDED after it)."""
        waiting = asyncio.wrap_future(fut)
        waiting.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved even if we stop waiting
        done, _ = await asyncio.wait({waiting}, timeout=max(0.0, call.deadline - time.monotonic()))
        if not done:
            call.cancel()
            raise call.expired()
        return waiting.result()

    def _guarded(self, work, call: "_Call"):
        """Runs on a worker: the deadline check, and error mapping."""
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

        return self._call("Health", context, work)

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
        if self.scrub is not None:
            out["scrub"] = self.scrub.status()
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
        but must be the same in every chunk). Published only after the stream's commit chunk
        arrived, its totals and CRC matched what was received, the client half-closed after it,
        and the call is still live; anything else leaves the graph as it was."""

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
            total = chunks = nlab = 0
            crc = 0
            width = dtype = None
            commit = None
            for chunk in request_iterator:
                call.check()
                f = f"UpdateGraph.chunk[{chunks}]"
                if commit is not None:
                    raise invalid(f"{f}: sent after the commit chunk (chunk[{chunks - 1}]); the commit chunk must be the last")
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
                s_, d_ = np.asarray(chunk.src, dtype="<i8"), np.asarray(chunk.dst, dtype="<i8")
                crc = zlib.crc32(d_.tobytes(), zlib.crc32(s_.tobytes(), crc))
                if s_.size:
                    src.append(s_)
                    dst.append(d_)
                if chunk.HasField("embeddings"):
                    crc = zlib.crc32(chunk.embeddings.data, crc)
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
                l_ = np.asarray(chunk.labels, dtype="<i8")
                crc = zlib.crc32(l_.tobytes(), crc)
                if l_.size:
                    lab.append(l_)
                    nlab += l_.size
                chunks += 1
                if chunk.HasField("commit"):
                    commit = chunk.commit
            # The stream ended cleanly (a cancelled or broken one raised above). Only an explicit end counts:
            # without it a client that stopped early (a bug, a killed generator) would publish half a graph.
            if commit is None:
                raise Status(grpc.StatusCode.INVALID_ARGUMENT,
                             f"UpdateGraph: the stream ended after {chunks} chunks without a commit chunk "
                             "(UpdateGraphChunk.commit with the totals sent); nothing applied", "uncommitted")
            rows = sum(len(x) for x in emb)
            edges = sum(len(x) for x in src)
            for name, sent, got in (("chunks", commit.chunks, chunks), ("edges", commit.edges, edges),
                                    ("embedding_rows", commit.embedding_rows, rows), ("labels", commit.labels, nlab),
                                    ("crc32", commit.crc32, crc)):
                if sent != got:
                    raise Status(grpc.StatusCode.INVALID_ARGUMENT,
                                 f"UpdateGraph.commit.{name}: {sent} sent != {got} received; nothing applied",
                                 "uncommitted")
            if not emb:
                raise invalid("UpdateGraph: no embedding rows; the update replaces the whole graph and needs [num_nodes, dim] embeddings")
            e = np.concatenate(emb)
            s = np.concatenate(src) if src else np.zeros(0, np.int64)
            d = np.concatenate(dst) if dst else np.zeros(0, np.int64)
            labels = np.concatenate(lab) if lab else None
            for name, a in (("src", s), ("dst", d)):
                bad = np.flatnonzero((a < 0) | (a >= rows))
                if bad.size:
                    i = int(bad[0])
                    raise invalid(f"UpdateGraph.{name}[{i}]: {int(a[i])} " + ("< 0" if a[i] < 0 else f">= {rows} (the embedding rows)"))
            if labels is not None:
                if len(labels) != rows:
                    raise invalid(f"UpdateGraph.labels: {len(labels)} labels for {rows} embedding rows (one per node, "
                                  "-1 for unlabeled)")
                bad = np.flatnonzero((labels < -1) | (labels >= 2**31 - 1))
                if bad.size:
                    i = int(bad[0])
                    raise invalid(f"UpdateGraph.labels[{i}]: {int(labels[i])} is not a class id (an integer in "
                                  f"[0, {2**31 - 1}), or -1 for unlabeled)")
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

    def __init__(self, rpc: str, deadline: float, note: str = ""):
        self.rpc, self.deadline, self.note = rpc, deadline, note
        self.budget_s = max(0.0, deadline - time.monotonic())
        self._cancelled = threading.Event()
        self._lock = threading.Lock()
        self._reading: concurrent.futures.Future | None = None

    def cancel(self) -> None:
        with self._lock:
            self._cancelled.set()
            if self._reading is not None:
                self._reading.cancel()

    @property
    def cancelled(self) -> bool:
        return self._cancelled.is_set()

    def reading(self, fut: concurrent.futures.Future | None) -> None:
        """The message read a worker now waits for (cancelled with the call), or None."""
        with self._lock:
            self._reading = fut
            if fut is not None and self._cancelled.is_set():
                fut.cancel()

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


class _Admitted:
    """What a servicer method's ``context`` is here: the admitted call (deadline, cancellation)."""

    def __init__(self, call: _Call):
        self.call = call


class _ChunkStream:
    """UpdateGraph's chunks as a plain iterator for the worker that consumes them: each ``next()`` has the
    event loop await one message (at most --request-body-timeout and the call's deadline). Ends when the
    client half-closes; raises CANCELLED when the call is cancelled or the client went away."""

    def __init__(self, service: Service, context, call: _Call, loop: asyncio.AbstractEventLoop):
        self._service, self._context, self._call, self._loop = service, context, call, loop
        self.received = 0

    def __iter__(self):
        return self

    def __next__(self):
        what = f"UpdateGraph.chunk[{self.received}]"
        fut = asyncio.run_coroutine_threadsafe(self._service._message("UpdateGraph", self._context, self._call, what),
                                               self._loop)
        self._call.reading(fut)
        try:
            msg = fut.result()
        except concurrent.futures.CancelledError:
            raise Status(grpc.StatusCode.CANCELLED,
                         f"UpdateGraph: cancelled after {self.received} chunks (the client went away); nothing applied",
                         "cancelled") from None
        finally:
            self._call.reading(None)
        if msg is None:
            raise StopIteration
        self.received += 1
        return msg


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
    memory_budget: int | str = 0,
    scrub_rate: int | None = None,
) -> int:
    """Open the graph, serve until SIGTERM/SIGINT, drain, close. Returns the exit status.

    ``ready(port)`` is called once the port is bound (the CLI prints the
    'listening' line there; tests read the port from it). ``scrub_rate``
    (bytes/s, 0 = unlimited; None = off): run the scrubber in a background
    thread (serve/scrubber.py), reported in Stats' graph_stats_json["scrub"].
    """
    limits = limits or Limits()
    limits.check()
    graph = flashgnn.MutableGraph(dataset, writable=True, group_commit_wait_us=group_commit_wait_us)
    cache = None
    if memory_budget:
        try:
            cache = _serve_cache(dataset, limits, memory_budget)
        except (flashgnn.CorruptDatasetError, OSError) as e:
            if memory_budget != "auto":
                raise
            # The default must not keep a server from starting where it started without a cache: damaged
            # pages are the requests' problem (each gets a clean error) and the scrubber's to report.
            _log(f"memory budget auto: running without a cache ({type(e).__name__}: {e})")
    service = Service(graph, dataset, limits, token, allow_plugins, cache=cache)
    if scrub_rate is not None:
        from .scrubber import BackgroundScrub

        service.scrub = BackgroundScrub(dataset, scrub_rate, _log)
    return asyncio.run(_serve(service, graph, listen, limits, preload, ready))


def _serve_cache(dataset, limits: Limits, memory_budget):
    """The DRAM cache shared by every Run's sampler, sized by ``--memory-budget`` (a size or ``auto``); None when
    the budget leaves nothing for it. One budget: per worker thread the engine's buffers and one request's batch
    (measured at BUDGET_FANOUTS and min(--max-batch, 1024) targets); no prefetch window (requests are not known
    ahead); the cache gets the rest."""
    from flashgnn.sample import budget

    if memory_budget == "auto":
        # What the process may use, less what in-flight Runs may hold (--max-inflight-bytes) and the
        # reserve; capped at caching the whole dataset.
        split = budget.auto(dataset, BUDGET_FANOUTS, min(limits.max_batch, 1024), workers=limits.workers,
                            prefetch=1, lookahead=0, training=False,
                            available=max(budget.available_memory() - limits.max_inflight_bytes, 0))
    else:
        split = budget.split(memory_budget, dataset, BUDGET_FANOUTS, min(limits.max_batch, 1024),
                             workers=limits.workers, prefetch=1)
    cache = None
    if split["budget"]:
        split["cache"] += split["window"]
        split["cache_static"] = split["cache"] // 2
        split["cache_dynamic"] = split["cache"] - split["cache_static"]
        split["window"], split["prefetch"] = 0, 0
        cache = flashgnn.Cache(dataset, BUDGET_FANOUTS, split["cache"], hot="degree")
    _log(budget.describe(split))
    return cache


def server_options(limits: Limits) -> list[tuple[str, int]]:
    """The gRPC server's channel arguments: message sizes and the per-connection bounds (module docstring)."""
    return [
        ("grpc.max_receive_message_length", limits.max_message_bytes),
        ("grpc.max_send_message_length", limits.max_message_bytes),
        ("grpc.so_reuseport", 0),
        ("grpc.max_concurrent_streams", MAX_STREAMS_PER_CONNECTION),
        ("grpc.max_connection_idle_ms", CONNECTION_IDLE_S * 1000),
        ("grpc.server_handshake_timeout_ms", HANDSHAKE_TIMEOUT_S * 1000),
        ("grpc.keepalive_time_ms", KEEPALIVE_S * 1000),
        ("grpc.keepalive_timeout_ms", KEEPALIVE_TIMEOUT_S * 1000),
    ]


async def _serve(service: Service, graph, listen: str, limits: Limits, preload: bool, ready) -> int:
    loop = asyncio.get_running_loop()
    server = grpc.aio.server(options=server_options(limits))
    server.add_generic_rpc_handlers((service.handlers(),))
    try:
        port = server.add_insecure_port(listen)
    except RuntimeError as e:
        graph.close()
        raise OSError(f"--listen {listen}: cannot bind ({e})") from None
    if not port:
        graph.close()
        raise OSError(f"--listen {listen}: cannot bind")
    stop, cut = asyncio.Event(), asyncio.Event()
    got: list[str] = []

    def on_signal(name: str) -> None:
        got.append(name)
        if len(got) == 1:
            stop.set()
        elif not cut.is_set():
            cut.set()
            _log(f"{name} again while draining: grace period ended; cancelling the calls still in flight "
                 "(work already running finishes), then the graph is closed and the summary printed")

    # Installed until the summary is printed: a second signal shortens the drain, it never kills the process.
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, on_signal, sig.name)
    try:
        await server.start()
        if preload:
            service.preload()
        if ready is not None:
            ready(port)
        if service.scrub is not None:
            service.scrub.start()
        await stop.wait()
        t0 = time.monotonic()
        service.draining = True
        in_flight_at_stop = service.in_flight
        _log(f"{got[0]}: draining {in_flight_at_stop} in-flight request(s), grace {limits.grace_s:g} s")
        stopping = asyncio.ensure_future(server.stop(limits.grace_s))
        cutting = asyncio.ensure_future(cut.wait())
        await asyncio.wait({stopping, cutting}, return_when=asyncio.FIRST_COMPLETED)
        if not stopping.done():
            await server.stop(0)
        await stopping
        cutting.cancel()
        # Every call has been answered; work already running still finishes before the graph closes, work
        # not started is dropped. Joined off the loop, so signals are still handled meanwhile.
        await loop.run_in_executor(None, service.shutdown_pools)
        if service.scrub is not None:
            await loop.run_in_executor(None, service.scrub.stop)
        seq = getattr(graph, "seq", None)
        graph.close()
        served, rejected = service.metrics.totals()
        cut_note = f" (grace cut short by a second {got[1]})" if len(got) > 1 and cut.is_set() else ""
        print(
            f"flashgnn serve: stopped after {time.monotonic() - service.started:.1f} s: {served} requests "
            f"({rejected} rejected), drained {in_flight_at_stop} in flight in {time.monotonic() - t0:.2f} s{cut_note}, "
            f"graph closed at seq {seq}",
            flush=True,
        )
    finally:
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.remove_signal_handler(sig)
    return 0
