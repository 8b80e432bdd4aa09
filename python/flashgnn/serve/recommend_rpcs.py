"""The Recommend RPC of ``flashgnn serve --recommend EMBED_DIR``: a node's top-k nodes on the live graph.

Owns the served recommender: the candidates' embedding table (``flashgnn
embed``'s ``embeddings.npy`` for the base graph, loaded into memory at
start), the served model's DFG (the encoder of the checkpoint ``embed.json``
names, as :func:`flashgnn.dfg.models.from_checkpoint` builds it), and the
rows recomputed for nodes mutations touched since the server started.

A request's answer (docs/serving.md, *Recommend*):

1. the query's embedding is computed by the model's DFG over the query's
   **current sampled neighbourhood** (the runner's ``SamplerContext`` over
   the served MutableGraph, as ``Run``), so a vertex or edge acknowledged a
   moment ago is in it — inductive, no retraining;
2. in the same DFG batch, up to ``--max-batch`` candidates that mutations
   touched (both ends of an added or deleted edge, an added vertex, an updated
   feature row, the neighbours of a deleted vertex) get their rows recomputed
   the same way; the rest wait for the next request (``stale`` in the reply);
3. scores are the dot products with every candidate row (the table, then the
   recomputed rows over it); deleted vertices are never candidates, nor, with
   ``exclude_seen``, the node's current neighbours and the node itself; the
   top-k by :func:`flashgnn.recommend.score_one` (ties to the smaller id).

Approximation, documented: a mutation also moves the embeddings of nodes up
to L-1 hops from its endpoints (L layers); those keep their embed-time rows
until the next ``flashgnn embed``. The table was computed with every
neighbour (``embed``'s layer-wise pass), a recomputed row from the model's
sampled fanouts. Mutations replayed from the log before the server started
are not known individually: a warning names how many there were.

Invariants: ``k`` in ``[1, --max-recommend-k]`` and ``node`` in ``[0,
num_nodes)`` are checked before any work; the DFG batch is planned and
reserved in ``--max-inflight-bytes`` like a ``Run``, and runs under the
call's deadline as a ``Run`` does (checked before each node, inside GEMM
between row blocks, and again before scoring); after ``UpdateGraph``
the table describes another graph, so Recommend answers FAILED_PRECONDITION
until the server is restarted with a fresh embedding.
"""

from __future__ import annotations

import threading
from pathlib import Path

import grpc
import numpy as np

from . import flashgnn_pb2 as pb
from .call import Status, invalid
from .codec import to_tensor
from .transport import log


class Recommender:
    """What ``--recommend`` loads at start; every check that can fail is made here, before the port opens."""

    def __init__(self, dataset: str, embed_dir, checkpoint=None, fanouts=None, limits=None, graph=None):
        import flashgnn
        from flashgnn.dfg import models
        from flashgnn.nn.checkpoint import encoder_state, link_decoder, load_checkpoint
        from flashgnn.recommend import check_decoder, mlp_scorer, open_embeddings

        ds = flashgnn.open(dataset)
        table, meta = open_embeddings(embed_dir, ds)
        checkpoint = checkpoint or meta.get("checkpoint")
        if not checkpoint:
            raise ValueError(f"--recommend {embed_dir}: its embed.json names no checkpoint; give "
                             "--recommend-checkpoint DIR (the model that computed the embeddings)")
        state = load_checkpoint(checkpoint)
        self.decoder = link_decoder(state) or "dot"
        check_decoder(self.decoder, f"--recommend-checkpoint {checkpoint}", mlp_ok=True)
        # --decoder mlp: the checkpoint's MLP scores the query against every candidate row (exact, as
        # `flashgnn recommend` does); dot: one matrix-vector product.
        self._mlp = mlp_scorer(state, str(checkpoint)) if self.decoder == "mlp" else None
        cfg = state["model_config"]
        if cfg.get("in_dim") != ds.feature_dim:
            raise ValueError(f"--recommend-checkpoint {checkpoint}: model_config.in_dim {cfg.get('in_dim')} != "
                             f"feature_dim {ds.feature_dim} of {dataset}")
        self.dfg = models.from_checkpoint(encoder_state(state), fanouts)
        self.fanouts = list(self.dfg.meta["fanouts"])
        out_dim = int(self.dfg.meta["out_dim"])
        if out_dim != table.shape[1]:
            raise ValueError(f"--recommend {embed_dir}: embeddings of width {table.shape[1]}, but the model of "
                             f"{checkpoint} outputs {out_dim} (embeddings of another model?)")
        if limits is not None:
            if len(self.fanouts) > limits.max_hops or any(f < 0 or f > limits.max_fanout for f in self.fanouts):
                raise ValueError(f"--recommend-fanouts {','.join(map(str, self.fanouts))}: each hop in [0, "
                                 f"--max-fanout {limits.max_fanout}], at most --max-hops {limits.max_hops} hops")
        self.table = np.ascontiguousarray(table, dtype=np.float32)  # in memory: every request reads all of it
        if not np.isfinite(self.table).all():
            bad = int(np.flatnonzero(~np.isfinite(self.table).all(axis=1))[0])
            raise ValueError(f"--recommend {embed_dir}: the embedding of node {bad} holds NaN or Inf")
        self.base_rows = int(self.table.shape[0])
        self.checkpoint = str(checkpoint)
        self.lock = threading.Lock()
        self.rows: dict[int, np.ndarray] = {}  # recomputed rows, by node id
        self.dirty: set[int] = set()  # touched since their row was last computed
        self.deleted: set[int] = set()
        self.replaced = False  # UpdateGraph ran: the table describes another graph
        if graph is not None:
            n = int(graph.num_nodes)
            self.dirty.update(range(self.base_rows, n))  # vertices added by an earlier run of the server
            if int(graph.seq):
                log(f"recommend: {int(graph.seq)} mutations were replayed from the log before start; the candidates "
                    "they touched keep their embed-time rows until the next `flashgnn embed`")
        log(f"recommend: {self.base_rows:,} candidate rows x {self.table.shape[1]} "
            f"({self.table.nbytes / 2**20:.1f} MiB in memory), model {self.dfg.meta['model']} from {checkpoint}, "
            f"fanouts {','.join(map(str, self.fanouts))}")

    def score(self, rows: np.ndarray, q: np.ndarray) -> np.ndarray:
        """The model's score of query embedding ``q`` against every row of ``rows``."""
        return rows @ q if self._mlp is None else self._mlp(q[None, :], rows)[0]

    def touched(self, ids=(), deleted=()) -> None:
        with self.lock:
            self.dirty.update(int(i) for i in ids)
            for v in deleted:
                self.deleted.add(int(v))
                self.dirty.discard(int(v))
                self.rows.pop(int(v), None)

    def stats(self) -> dict:
        with self.lock:
            return {"base_rows": self.base_rows, "dim": int(self.table.shape[1]), "recomputed": len(self.rows),
                    "pending": len(self.dirty), "deleted": len(self.deleted), "replaced": self.replaced,
                    "fanouts": self.fanouts, "checkpoint": self.checkpoint, "decoder": self.decoder}


class RecommendRpcs:
    """The Recommend half of the servicer. Expects ``self.graph``, ``self.limits``, the runner's ``_dfg``,
    ``_registry``, ``_context`` and ``_check_work``, and the transport's ``self._call``. The GraphStore RPCs
    report what each mutation touched through :meth:`_touched` / :meth:`_replaced`."""

    def _init_recommend(self, recommender: Recommender | None) -> None:
        self.recommender = recommender

    def _touched(self, ids=(), deleted=()) -> None:
        if self.recommender is not None:
            self.recommender.touched(ids, deleted)

    def _replaced(self) -> None:
        if self.recommender is not None:
            with self.recommender.lock:
                self.recommender.replaced = True

    def _embed_nodes(self, call, batch: np.ndarray) -> np.ndarray:
        """The served model's output rows for ``batch``, on the live graph (as a Run of its DFG)."""
        return self._run_within_ledger(
            call, self.recommender.dfg, batch, f"Recommend ({batch.size} rows)",
            lambda out, _runner: out["Result"].detach().cpu().numpy().astype(np.float32, copy=False))

    def Recommend(self, request, context):
        def work(call):
            rec = self.recommender
            if rec is None:
                raise Status(grpc.StatusCode.FAILED_PRECONDITION,
                             "Recommend: this server was started without --recommend EMBED_DIR (the embeddings "
                             "`flashgnn embed` wrote for this dataset)", "failed_precondition")
            k = int(request.k)
            if k < 1:
                raise invalid(f"Recommend.k: {k} < 1")
            if k > self.limits.max_recommend_k:
                raise invalid(f"Recommend.k: {k} > --max-recommend-k {self.limits.max_recommend_k}")
            n = int(self.graph.num_nodes)
            node = self._vid("Recommend.node", request.node, n)
            with rec.lock:
                if rec.replaced:
                    raise Status(grpc.StatusCode.FAILED_PRECONDITION,
                                 "Recommend: UpdateGraph replaced the graph after the candidates' embeddings were "
                                 "computed; run `flashgnn embed` on the new graph and restart with --recommend",
                                 "failed_precondition")
                if node in rec.deleted:
                    raise invalid(f"Recommend.node: {node} was deleted")
                # The query first, then up to --max-batch - 1 touched candidates, in one DFG batch.
                pending = sorted(v for v in rec.dirty if v != node and v < n)[: self.limits.max_batch - 1]
            seq = int(self.graph.seq)
            batch = np.asarray([node, *pending], dtype=np.int64)
            rows = self._embed_nodes(call, batch)
            call.check()  # the scoring reads every candidate row: not for an answer nobody will read
            q = rows[0]
            with rec.lock:
                for v, r in zip([node, *pending], rows):
                    if v in rec.dirty and v not in rec.deleted:
                        rec.rows[v] = r
                        rec.dirty.discard(v)
                over_ids = np.fromiter(rec.rows, np.int64, len(rec.rows))
                over = np.stack(list(rec.rows.values())) if rec.rows else np.zeros((0, q.size), np.float32)
                deleted = np.fromiter(rec.deleted, np.int64, len(rec.deleted))
                stale = len(rec.dirty)
            scores = np.full(n, -np.inf, np.float32)  # a vertex added and not yet embedded is no candidate
            base = min(n, rec.base_rows)
            scores[:base] = rec.score(rec.table[:base], q)
            keep = over_ids < n
            scores[over_ids[keep]] = rec.score(over[keep], q)
            scores[deleted[deleted < n]] = -np.inf
            exclude = None
            if request.exclude_seen:
                exclude = np.append(np.asarray(self.graph.get_neighbors(node), np.int64), node)
            from flashgnn.recommend import score_one

            ids, sc = score_one(scores, k, exclude)
            ok = ids >= 0
            return pb.RecommendReply(ids=ids[ok].tolist(), scores=to_tensor(sc[ok]), seq=seq, stale=stale)

        return self._call("Recommend", context, work)


def load_recommender(dataset, embed_dir, checkpoint, fanouts, limits, graph) -> Recommender:
    """``--recommend``: the recommender, or a ValueError naming the flag and what does not match."""
    if not Path(embed_dir).exists():
        raise ValueError(f"--recommend {embed_dir}: no such file or directory (what `flashgnn embed` wrote)")
    return Recommender(dataset, embed_dir, checkpoint, fanouts, limits, graph)


__all__ = ["Recommender", "RecommendRpcs", "load_recommender"]
