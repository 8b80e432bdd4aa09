"""``flashgnn.Client``: one Python method per RPC of ``flashgnn serve``.

    with Client("127.0.0.1:50051", token=open("token").read().strip()) as c:
        c.add_edge(3, 4)                       # durable when it returns
        c.get_neighbors(3)                     # np.ndarray[int64]
        out = c.run(dfg, [1, 2, 3])            # dict[str, np.ndarray]; c.last_profile

Errors: every failed RPC raises :class:`ServerError`, a ``grpc.RpcError``
whose ``code()`` is the ``grpc.StatusCode`` (``code_name`` the string:
"INVALID_ARGUMENT", "UNAUTHENTICATED", "RESOURCE_EXHAUSTED", ...) and
``details()`` the server's message (which names the field, value and bound).
The original error is chained as ``__cause__``. A DEADLINE_EXCEEDED or UNAVAILABLE on a mutation means its
outcome is unknown (it may or may not have been applied).

``timeout`` (seconds) is the deadline the client sets on every call; None
leaves it to the server's ``--default-deadline``. The channel sends and
receives messages of any size; the server's ``--max-message-bytes`` is the
bound that applies.
"""

from __future__ import annotations

import hashlib
import json
import zlib
from typing import Iterable

import grpc
import numpy as np

from flashgnn import _core

from . import flashgnn_pb2 as pb
from . import flashgnn_pb2_grpc as pb_grpc
from .codec import from_tensor, to_tensor
from .token import read_token_file

# Rows (edges, embedding rows, labels) per UpdateGraph chunk by default:
# 64 Ki edges are ~1 MiB of varints, well under the default 64 MiB message cap.
UPDATE_CHUNK_ROWS = 65536


class ServerError(grpc.RpcError):
    """A failed RPC, shaped like ``grpc.RpcError`` (``except grpc.RpcError`` catches it).

    ``code()`` is the ``grpc.StatusCode``, ``details()`` the server's message;
    the attributes ``code_name`` ("INVALID_ARGUMENT", ...), ``message`` and
    ``rpc`` carry the same as plain strings. ``str(e)`` reads
    "GetNeighbors: INVALID_ARGUMENT: GetNeighbors.vid: 1234 >= num_nodes 1000".
    """

    def __init__(self, rpc: str, code: grpc.StatusCode, details: str):
        super().__init__(f"{rpc}: {code.name}: {details}")
        self.rpc, self._code, self.message = rpc, code, details
        self.code_name = code.name

    def code(self) -> grpc.StatusCode:
        return self._code

    def details(self) -> str:
        return self.message


class Client:
    """A connection to ``flashgnn serve`` at ``address`` ('host:port')."""

    def __init__(self, address: str, token: str | None = None, timeout: float | None = None, *, token_file: str | None = None):
        if token is None and token_file is not None:
            # The server's rules (one line, a regular file, never blocks on a FIFO), but not its mode check.
            token = read_token_file(token_file, private=False)
        self.address, self.timeout = address, timeout
        self._metadata = (("authorization", f"Bearer {token}"),) if token else ()
        self._channel = grpc.insecure_channel(
            address, options=[("grpc.max_receive_message_length", -1), ("grpc.max_send_message_length", -1)]
        )
        self._stub = pb_grpc.FlashGNNStub(self._channel)
        self._sent_dfgs: set[str] = set()
        self.last_profile: list = []

    # -- plumbing -------------------------------------------------------------

    def _rpc(self, name: str, request, timeout: float | None = None):
        try:
            return getattr(self._stub, name)(request, timeout=timeout or self.timeout, metadata=self._metadata)
        except grpc.RpcError as e:
            raise ServerError(name, e.code(), e.details() or "") from e

    def close(self) -> None:
        self._channel.close()

    def __enter__(self) -> "Client":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def wait_ready(self, timeout: float = 10.0) -> None:
        """Block until the channel connects (raises ServerError UNAVAILABLE after ``timeout``)."""
        try:
            grpc.channel_ready_future(self._channel).result(timeout=timeout)
        except grpc.FutureTimeoutError:
            raise ServerError("connect", grpc.StatusCode.UNAVAILABLE, f"no server at {self.address} after {timeout:g} s") from None

    # -- service ----------------------------------------------------------------

    def health(self) -> dict:
        r = self._rpc("Health", pb.HealthRequest())
        return {"status": r.status, "version": r.version, "uptime_s": r.uptime_s}

    def stats(self) -> dict:
        r = self._rpc("Stats", pb.StatsRequest())
        return {
            "rpcs": {
                k: {
                    "requests": v.requests, "ok": v.ok, "errors": dict(v.errors),
                    "latency_p50_ms": v.latency_p50_ms, "latency_p99_ms": v.latency_p99_ms,
                }
                for k, v in r.rpcs.items()
            },
            "rejected": dict(r.rejected),
            "in_flight": r.in_flight,
            "max_inflight": r.max_inflight,
            "uptime_s": r.uptime_s,
            "graph": json.loads(r.graph_stats_json or "{}"),
            "limits": json.loads(r.limits_json or "{}"),
            "dfg_cache_entries": r.dfg_cache_entries,
        }

    # -- GraphStore: unit reads -------------------------------------------------

    def get_neighbors(self, vid: int) -> np.ndarray:
        return np.asarray(self._rpc("GetNeighbors", pb.VertexRequest(vid=int(vid))).neighbors, dtype=np.int64)

    def get_embed(self, vid: int) -> np.ndarray:
        return from_tensor(self._rpc("GetEmbed", pb.VertexRequest(vid=int(vid))).embed, "GetEmbed.embed")

    # -- GraphStore: unit updates (durable when they return; the ints are the graph's seq) ----

    def add_vertex(self, embed) -> int:
        """Returns the new vertex id."""
        return int(self._rpc("AddVertex", pb.AddVertexRequest(embed=to_tensor(embed))).vid)

    def delete_vertex(self, vid: int) -> int:
        return int(self._rpc("DeleteVertex", pb.VertexRequest(vid=int(vid))).seq)

    def add_edge(self, dst: int, src: int) -> int:
        return int(self._rpc("AddEdge", pb.EdgeRequest(dst=int(dst), src=int(src))).seq)

    def delete_edge(self, dst: int, src: int) -> int:
        return int(self._rpc("DeleteEdge", pb.EdgeRequest(dst=int(dst), src=int(src))).seq)

    def update_embed(self, vid: int, embed) -> int:
        return int(self._rpc("UpdateEmbed", pb.UpdateEmbedRequest(vid=int(vid), embed=to_tensor(embed))).seq)

    def apply(self, ops: Iterable[tuple]) -> list:
        """One atomic durable batch; ops as for ``MutableGraph.apply``:
        ("add_vertex", embed), ("delete_vertex", v), ("add_edge", dst, src),
        ("delete_edge", dst, src), ("update_embed", v, embed).
        Returns per-op results: the new id for add_vertex, else None."""
        return [r.vid if r.has_vid else None for r in self._rpc("ApplyBatch", ops_request(ops)).results]

    # -- GraphStore: bulk ---------------------------------------------------------

    def update_graph(self, src, dst, embeddings=None, labels=None, chunk_rows: int = UPDATE_CHUNK_ROWS) -> dict:
        """Stream edges (``src[i] -> dst[i]``), embedding rows and labels in chunks of
        ``chunk_rows``, then a commit chunk with the totals and CRC sent; the server applies
        them as one update only once that arrived and matched (a broken stream changes
        nothing). Returns the graph's report plus the counts the server received."""
        if chunk_rows < 1:
            raise ValueError(f"chunk_rows: {chunk_rows} < 1")
        src = np.asarray(src, dtype=np.int64).reshape(-1)
        dst = np.asarray(dst, dtype=np.int64).reshape(-1)
        if src.shape != dst.shape:
            raise ValueError(f"src and dst lengths differ: {src.size} != {dst.size}")
        emb = None if embeddings is None else np.asarray(embeddings)
        if emb is not None and emb.ndim != 2:
            raise ValueError(f"embeddings: expected [rows, dim], got shape {list(emb.shape)}")
        lab = None if labels is None else np.asarray(labels, dtype=np.int64).reshape(-1)

        def chunks():
            rows = max(src.size, 0 if emb is None else emb.shape[0], 0 if lab is None else lab.size)
            commit = pb.UpdateGraphCommit()
            crc = 0
            for lo in range(0, max(rows, 1), chunk_rows):
                hi = lo + chunk_rows
                c = pb.UpdateGraphChunk(src=src[lo:hi].tolist(), dst=dst[lo:hi].tolist())
                # The CRC the server recomputes: per chunk src, dst (int64 LE), embeddings.data, labels (int64 LE).
                crc = zlib.crc32(dst[lo:hi].astype("<i8").tobytes(), zlib.crc32(src[lo:hi].astype("<i8").tobytes(), crc))
                commit.edges += min(hi, src.size) - min(lo, src.size)
                if emb is not None and lo < emb.shape[0]:
                    c.embeddings.CopyFrom(to_tensor(emb[lo:hi]))
                    crc = zlib.crc32(c.embeddings.data, crc)
                    commit.embedding_rows += len(emb[lo:hi])
                if lab is not None and lo < lab.size:
                    c.labels.extend(lab[lo:hi].tolist())
                    crc = zlib.crc32(lab[lo:hi].astype("<i8").tobytes(), crc)
                    commit.labels += len(lab[lo:hi])
                commit.chunks += 1
                yield c
            commit.chunks += 1  # the commit chunk itself
            commit.crc32 = crc
            yield pb.UpdateGraphChunk(commit=commit)

        r = self._rpc("UpdateGraph", chunks())
        return {"report": json.loads(r.report_json or "{}"), "chunks": r.chunks, "edges": r.edges, "embedding_rows": r.embedding_rows}

    # -- GraphRunner ------------------------------------------------------------------

    def run(self, dfg, batch) -> dict[str, np.ndarray]:
        """Run a DFG (``flashgnn.dfg.Graph`` or its serialised bytes) on target ids ``batch``.

        The DFG travels once per connection: later calls send only its sha256,
        and re-send the bytes if the server answers NOT_FOUND (evicted or
        restarted). The server's per-op profile is left in ``self.last_profile``."""
        data = dfg if isinstance(dfg, (bytes, bytearray, memoryview)) else dfg.to_bytes()
        data = bytes(data)
        dfg_id = hashlib.sha256(data).hexdigest()
        ids = np.asarray(batch, dtype=np.int64).reshape(-1).tolist()
        if dfg_id in self._sent_dfgs:
            try:
                r = self._rpc("Run", pb.RunRequest(dfg_id=dfg_id, batch=ids))
            except ServerError as e:
                if e.code() != grpc.StatusCode.NOT_FOUND:
                    raise
                r = self._rpc("Run", pb.RunRequest(dfg_id=dfg_id, dfg=data, batch=ids))
        else:
            r = self._rpc("Run", pb.RunRequest(dfg_id=dfg_id, dfg=data, batch=ids))
            self._sent_dfgs.add(dfg_id)
        self.last_profile = json.loads(r.profile_json or "[]")
        return {name: from_tensor(t, f"Run.outputs[{name}]") for name, t in r.outputs.items()}

    def plugin(self, name: str, source: str):
        """Load plugin ``source`` (Python) into the server's op registry (needs --allow-plugins)."""
        return json.loads(self._rpc("Plugin", pb.PluginRequest(name=name, source=source)).result_json or "null")


    # -- Recommendation ------------------------------------------------------------------

    def recommend(self, node: int, k: int, exclude_seen: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The top-``k`` nodes for ``node`` on the live graph: ``(ids int64, scores float32)``, best first, ties to
        the smaller id (fewer when fewer candidates remain). ``exclude_seen`` drops the node's current neighbours
        and the node itself. Needs a server started with ``--recommend EMBED_DIR``; ``self.last_recommend`` keeps
        the reply's ``seq`` and ``stale`` (touched candidates still awaiting their recomputed rows)."""
        r = self._rpc("Recommend", pb.RecommendRequest(node=int(node), k=int(k), exclude_seen=bool(exclude_seen)))
        self.last_recommend = {"seq": int(r.seq), "stale": int(r.stale)}
        scores = from_tensor(r.scores, "Recommend.scores") if r.HasField("scores") else np.zeros(0, np.float32)
        return np.asarray(r.ids, dtype=np.int64), scores


def ops_request(ops: Iterable[tuple]) -> pb.ApplyBatchRequest:
    """Encode MutableGraph.apply-style op tuples as an ApplyBatchRequest."""
    req = pb.ApplyBatchRequest()
    for i, op in enumerate(ops):
        if not op:
            raise ValueError(f"ops[{i}]: empty operation")
        kind, args = op[0], op[1:]
        fields = _core.MUTATION_OPS.get(kind)
        if fields is None:
            raise ValueError(f"ops[{i}]: unknown operation {kind!r} ({', '.join(_core.MUTATION_OPS)})")
        want = len(fields)
        if len(args) != want:
            raise ValueError(f"ops[{i}]: {kind} takes {want} argument(s), got {len(args)}")
        o = req.ops.add()
        if kind == "add_vertex":
            o.add_vertex.embed.CopyFrom(to_tensor(args[0]))
        elif kind == "delete_vertex":
            o.delete_vertex.vid = int(args[0])
        elif kind in ("add_edge", "delete_edge"):
            e = getattr(o, kind)
            e.dst, e.src = int(args[0]), int(args[1])
        else:
            o.update_embed.vid = int(args[0])
            o.update_embed.embed.CopyFrom(to_tensor(args[1]))
    return req
