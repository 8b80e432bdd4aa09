"""The transport of ``flashgnn serve``: the gRPC server and the one gate every RPC passes.

Owns docs/reliability.md promise 5 (with the validation in
:mod:`flashgnn.serve.graph_rpcs` and :mod:`flashgnn.serve.runner_rpcs`): the
gRPC server and its per-connection bounds, token authentication, the
in-flight slots, request-message timeouts, deadlines, the mapping of errors to
status codes, the per-RPC metrics, and the drain on shutdown. Every request
passes one gate, :meth:`Transport._serve_rpc`, in this order:

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
   DEADLINE_EXCEEDED, and the work stops too, whichever side set it (it
   checks ``Call.check``: Run and Recommend before every DFG node and between
   a large GEMM's row blocks), giving its slot back. A mutation checks the deadline before it starts; one
   already committing finishes (its slot stays taken until it does, so the
   cap bounds real work, not just waiting handlers);
5. **validation** — ids against ``num_nodes``, Tensor bytes against dtype and
   shape, Run batch and fanouts against ``max_batch`` / ``max_fanout``:
   INVALID_ARGUMENT naming the field, value and bound (by the work, in the
   RPC modules). ``ValueError`` from the graph or the runner maps to
   INVALID_ARGUMENT with its message (:meth:`Transport._guarded`).

Why ``grpc.aio`` and stream-request handlers. grpcio's
thread-pool server reads a unary request message *inside a pool thread, before
the handler runs*: a call that never sends its message pinned a thread with
no server-side timeout, and ``max_inflight`` + 8 such calls, token or not,
refused everybody. Here every RPC is registered as a stream-request coroutine
(:meth:`Transport.handlers`), so the gate runs when the call starts, with the
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

Shutdown (SIGTERM/SIGINT, :func:`run_until_signalled`): Health turns DRAINING,
gRPC stops accepting, the in-flight requests get ``grace_s`` to finish, the
work pool is joined, the graph is closed, one summary line is printed and the
process exits 0. A second SIGTERM/SIGINT during the drain ends the grace
period at once (calls still in flight are cancelled; work already running on a
worker finishes, since a commit cannot be interrupted) and the summary
follows, marked so; the signal handlers stay installed until it is printed.

The server has no test hooks: tests that need slow calls start it through
``tests/serve/_slow_serve.py``, which wraps ``Service._guarded`` from outside
(every RPC's work reaches :meth:`Transport._guarded` through ``self``).
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import errno
import hmac
import signal
import sys
import threading
import time
import traceback

import grpc
import numpy as np

import flashgnn

from . import flashgnn_pb2 as pb
from .call import Admitted, Call, Slot, Status, invalid
from .limits import Limits

# Requests kept per RPC for the p50/p99 latency in Stats (a sliding window:
# 4096 x 8 B per RPC, bounded whatever the uptime).
LATENCY_WINDOW = 4096
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
    "UpdateEmbed", "ApplyBatch", "GetEmbed", "GetNeighbors", "Run", "Plugin", "Recommend",
)
# RPCs that do not take an in-flight slot (cheap, and needed to watch an overloaded server).
UNMETERED = ("Health", "Stats")
OPEN_RPCS = ("Health",)  # no token needed


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


class _ChunkStream:
    """UpdateGraph's chunks as a plain iterator for the worker that consumes them: each ``next()`` has the
    event loop await one message (at most --request-body-timeout and the call's deadline). Ends when the
    client half-closes; raises CANCELLED when the call is cancelled or the client went away."""

    def __init__(self, service: Transport, context, call: Call, loop: asyncio.AbstractEventLoop):
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


class Transport:
    """The gate, the pools and the metrics of a servicer (:class:`flashgnn.serve.server.Service`).

    An RPC method returns ``self._call(rpc, context, work)``: ``work(call)`` then runs on a worker with the
    deadline checked and its errors mapped to status codes. Expects ``self.limits`` (:class:`Limits`)."""

    def _init_transport(self, token: str | None) -> None:
        limits = self.limits
        self._token = None if token is None else ("Bearer " + token).encode()
        self.metrics = Metrics()
        self.started = time.monotonic()
        self.draining = False
        self._slots = threading.BoundedSemaphore(limits.max_inflight)
        self._inflight = 0
        self._inflight_lock = threading.Lock()
        self.work = concurrent.futures.ThreadPoolExecutor(limits.workers, thread_name_prefix="flashgnn-work")
        self._side = concurrent.futures.ThreadPoolExecutor(UNMETERED_THREADS, thread_name_prefix="flashgnn-stats")
        self._side_slots = threading.BoundedSemaphore(UNMETERED_INFLIGHT)

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

    def _admit(self, rpc: str) -> Slot:
        if not self._slots.acquire(blocking=False):
            raise Status(
                grpc.StatusCode.RESOURCE_EXHAUSTED,
                f"{rpc}: {self.limits.max_inflight} requests in flight (--max-inflight {self.limits.max_inflight}); retry later",
                "overloaded",
            )
        with self._inflight_lock:
            self._inflight += 1
        return Slot(self._release_slot)

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

    def _call(self, rpc: str, context: Admitted, work) -> concurrent.futures.Future:
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
            call = Call(rpc, deadline, note)
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
            fut = getattr(self, rpc)(request, Admitted(call))
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

    def _admit_unmetered(self, rpc: str) -> Slot:
        if not self._side_slots.acquire(blocking=False):
            raise Status(grpc.StatusCode.RESOURCE_EXHAUSTED,
                         f"{rpc}: {UNMETERED_INFLIGHT} {rpc} requests in flight (UNMETERED_INFLIGHT); retry later",
                         "overloaded")
        return Slot(self._side_slots.release)

    async def _message(self, rpc: str, context, call: Call, what: str):
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

    async def _result(self, fut: concurrent.futures.Future, call: Call):
        """``fut``'s result, waited for until the call's deadline (DEADLINE_EXCEEDED after it)."""
        waiting = asyncio.wrap_future(fut)
        waiting.add_done_callback(lambda f: f.cancelled() or f.exception())  # retrieved even if we stop waiting
        done, _ = await asyncio.wait({waiting}, timeout=max(0.0, call.deadline - time.monotonic()))
        if not done:
            call.cancel()
            raise call.expired()
        return waiting.result()

    def _guarded(self, work, call: Call):
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
            _log_once(e)
            raise Status(grpc.StatusCode.DATA_LOSS, f"{call.rpc}: {e}", "data_loss") from None
        except OSError as e:
            # A full file system (a write the store refused and rolled back: writes resume once space is
            # free) is a resource exhausted; a device error on stored bytes (EIO: a bad sector) is data
            # lost to the requests that need those bytes, and only to them.
            if e.errno in (errno.ENOSPC, errno.EDQUOT):
                raise Status(grpc.StatusCode.RESOURCE_EXHAUSTED, f"{call.rpc}: {e}", "no_space") from None
            if e.errno == errno.EIO:
                _log_once(e)
                raise Status(grpc.StatusCode.DATA_LOSS, f"{call.rpc}: {e}", "data_loss") from None
            traceback.print_exc(file=sys.stderr)
            raise Status(grpc.StatusCode.INTERNAL, f"{call.rpc}: {type(e).__name__}: {e}") from None
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


def log(msg: str) -> None:
    print(f"flashgnn serve: {msg}", file=sys.stderr, flush=True)


# Damage errors already logged, by message, with when: under load one bad page fails every request that needs
# it, and a traceback per request would flood the log (and cost the CPU the healthy requests need).
_LOGGED: dict[str, float] = {}
LOG_REPEAT_S = 60.0


def _log_once(e: BaseException) -> None:
    """The traceback of ``e``, once per distinct message per ``LOG_REPEAT_S``."""
    now, key = time.monotonic(), str(e)
    if now - _LOGGED.get(key, -LOG_REPEAT_S) >= LOG_REPEAT_S:
        if len(_LOGGED) > 1024:
            _LOGGED.clear()
        _LOGGED[key] = now
        traceback.print_exc(file=sys.stderr)


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


async def run_until_signalled(service, graph, listen: str, limits: Limits, preload: bool, ready) -> int:
    """Serve ``service`` (a :class:`flashgnn.serve.server.Service` over ``graph``) on ``listen`` until SIGTERM/SIGINT,
    then drain and close the graph (module docstring); returns the exit status."""
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
            log(f"{name} again while draining: grace period ended; cancelling the calls still in flight "
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
        for task in service.background():
            task.start()
        await stop.wait()
        t0 = time.monotonic()
        service.draining = True
        in_flight_at_stop = service.in_flight
        log(f"{got[0]}: draining {in_flight_at_stop} in-flight request(s), grace {limits.grace_s:g} s")
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
        for task in service.background():
            await loop.run_in_executor(None, task.stop)
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
