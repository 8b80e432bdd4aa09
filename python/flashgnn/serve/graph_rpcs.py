"""The GraphStore RPCs of ``flashgnn serve``, over a :class:`flashgnn.MutableGraph`.

Owns the unit gets (GetNeighbors, GetEmbed), the unit updates (AddVertex,
DeleteVertex, AddEdge, DeleteEdge, UpdateEmbed), ApplyBatch, and the bulk
UpdateGraph: what each request must hold, and the mutation it makes. Each runs
as ``work(call)`` on a worker, behind the gate of :mod:`flashgnn.serve.transport`.

Invariants:

- every field is validated before anything changes: ids against
  ``num_nodes``, embeddings against ``[feature_dim]`` and a float dtype, op
  counts against ``--max-batch-ops``; INVALID_ARGUMENT names the field, the
  value and the bound;
- a mutation checks its call (deadline, client still there) right before it
  starts; one already committing finishes. It is acknowledged only after its
  log record is fsynced (docs/reliability.md promise 2), with the graph's
  ``seq`` after it;
- ApplyBatch is one atomic, durable batch: all ops or none. Vertices added
  earlier in the batch get ids ``num_nodes``, ``num_nodes + 1``, ...; later
  ops may name them, so the id bound grows as the batch is read;
- UpdateGraph replaces the whole graph, one at a time (each buffers a whole
  graph; another gets RESOURCE_EXHAUSTED), at most ``--max-update-bytes``
  counted as decoded arrays. It is published only after the commit chunk
  arrived, its totals and CRC matched what was received, the client
  half-closed after it, and the call is still live; anything else leaves the
  graph as it was (docs/serving.md, "The end of an UpdateGraph stream").
"""

from __future__ import annotations

import json
import threading
import zlib

import grpc
import numpy as np

from . import flashgnn_pb2 as pb
from .call import Status, invalid
from .codec import from_tensor, to_tensor


class GraphRpcs:
    """The GraphStore half of the servicer. Expects ``self.graph`` (an open, writable MutableGraph),
    ``self.limits``, the transport's ``self._call``, and ``self._touched(ids, deleted)`` /
    ``self._replaced()`` (serve/recommend_rpcs.py), told after each acknowledged mutation what it changed."""

    def _init_graph_rpcs(self) -> None:
        self._update_slot = threading.Lock()  # one UpdateGraph at a time (each buffers a whole graph)

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
            self._touched([vid])
            return pb.AddVertexReply(vid=int(vid), seq=int(self.graph.seq))

        return self._call("AddVertex", context, work)

    def DeleteVertex(self, request, context):
        def work(call):
            vid = self._vid("DeleteVertex.vid", request.vid)
            call.check()
            was = self.graph.get_neighbors(vid)  # their embeddings change with it
            self.graph.delete_vertex(vid)
            self._touched(was, deleted=[vid])
            return pb.MutationReply(seq=int(self.graph.seq))

        return self._call("DeleteVertex", context, work)

    def _edge(self, rpc: str, request) -> tuple[int, int]:
        return self._vid(f"{rpc}.dst", request.dst), self._vid(f"{rpc}.src", request.src)

    def AddEdge(self, request, context):
        def work(call):
            dst, src = self._edge("AddEdge", request)
            call.check()
            self.graph.add_edge(dst, src)
            self._touched([dst, src])
            return pb.MutationReply(seq=int(self.graph.seq))

        return self._call("AddEdge", context, work)

    def DeleteEdge(self, request, context):
        def work(call):
            dst, src = self._edge("DeleteEdge", request)
            call.check()
            self.graph.delete_edge(dst, src)
            self._touched([dst, src])
            return pb.MutationReply(seq=int(self.graph.seq))

        return self._call("DeleteEdge", context, work)

    def UpdateEmbed(self, request, context):
        def work(call):
            vid = self._vid("UpdateEmbed.vid", request.vid)
            embed = self._embed("UpdateEmbed.embed", request.embed)
            call.check()
            self.graph.update_embed(vid, embed)
            self._touched([vid])
            return pb.MutationReply(seq=int(self.graph.seq))

        return self._call("UpdateEmbed", context, work)

    def ApplyBatch(self, request, context):
        def work(call):
            ops = self._batch_ops(request)
            call.check()
            gone = {op[1]: self.graph.get_neighbors(op[1]) for op in ops if op[0] == "delete_vertex"}
            results = self.graph.apply(ops)
            touched = [v for op in ops if op[0] in ("add_edge", "delete_edge", "update_embed") for v in op[1:3]
                       if not isinstance(v, np.ndarray)]
            touched += [r for r in results if r is not None]
            touched += [int(u) for was in gone.values() for u in was]
            self._touched(touched, deleted=list(gone))
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
            self._replaced()
            return pb.UpdateGraphReply(
                report_json=json.dumps(report), chunks=chunks, edges=len(s), embedding_rows=len(e)
            )

        return self._call("UpdateGraph", context, work)
