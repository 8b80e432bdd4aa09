"""`flashgnn.MutableGraph`: HolisticGNN-style unit operations over a dataset.

    g = flashgnn.MutableGraph("data/demo")            # writable; replays the log
    v = g.add_vertex(np.zeros(g.feature_dim))         # -> new id (lowest freed id first)
    g.add_edge(v, 17)                                 # undirected: both directions
    g.apply([("add_vertex", e), ("add_edge", 3, 4)])  # one atomic, durable batch
    g.get_neighbors(v), g.get_embed(v)                # durable state, original ids
    g.compact()                                       # fold the log into a new generation
    s = flashgnn.Sampler("data/demo", [10, 5], graph=g)   # batches see every acknowledged write

Every write is acknowledged only after its log frame is fdatasync'ed; writes
from concurrent threads share fsyncs (group commit; the GIL is released).
Ids are the dataset's original ids; new vertices get ids from ``num_nodes``
up (or reuse deleted ones). The dataset must have been built with
``--symmetrize``. Errors: ``ValueError`` for bad arguments (naming the
argument, the value and the bound), ``RuntimeError`` for a closed/read-only
graph and for a writable open while another writer holds the dataset (one
writer at a time: ``DATASET/mut/LOCK``; ``close()`` or dropping the graph
releases it), ``OSError`` for I/O, ``flashgnn.CorruptDatasetError`` for a damaged
log. On-disk layout: ``docs/format.md`` § *Mutable store*.
"""

from __future__ import annotations

import os

import numpy as np

from flashgnn import _core

from flashgnn.store.dataset import _NP_DTYPES as _NP
_OPS = tuple(_core.MUTATION_OPS)  # the store's own operations (flashgnn_mutate::OPS)


def _embed(embed, what: str = "embed") -> np.ndarray:
    a = np.asarray(embed)
    if a.ndim != 1:
        raise ValueError(f"{what} must be 1-D (feature_dim values), got shape {a.shape}")
    if not (np.issubdtype(a.dtype, np.floating) or np.issubdtype(a.dtype, np.integer)):
        raise ValueError(f"{what} must hold numbers, got dtype {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.float64)


def _id(v, what: str) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise ValueError(f"{what} must be an integer node id, got {v!r}")
    return int(v)


class MutableGraph:
    MAX_BATCH_OPS = _core.MAX_BATCH_OPS

    def __init__(self, path, writable: bool = True, group_commit_wait_us: int = 0):
        self._core = _core.MutableGraph(os.fspath(path), bool(writable), int(group_commit_wait_us))
        self.path = os.fspath(path)
        self.writable = bool(writable)

    # -- unit operations (each one durable batch) ------------------------------------------------
    def add_vertex(self, embed) -> int:
        return self._core.add_vertex(_embed(embed))

    def delete_vertex(self, vid: int) -> None:
        self._core.delete_vertex(_id(vid, "vid"))

    def add_edge(self, dst: int, src: int) -> None:
        self._core.add_edge(_id(dst, "dst"), _id(src, "src"))

    def delete_edge(self, dst: int, src: int) -> None:
        self._core.delete_edge(_id(dst, "dst"), _id(src, "src"))

    def update_embed(self, vid: int, embed) -> None:
        self._core.update_embed(_id(vid, "vid"), _embed(embed))

    def apply(self, ops) -> list:
        """Apply ``ops`` as one atomic, durable batch: every op is validated
        (against the state the earlier ops of the batch leave) before
        anything is logged; either all become durable or none. Returns one
        result per op: the new id for ``add_vertex``, else None. At most
        ``MutableGraph.MAX_BATCH_OPS`` (65,536) ops per batch (``ValueError``
        beyond: split the work into several batches)."""
        if hasattr(ops, "__len__") and len(ops) > self.MAX_BATCH_OPS:
            raise ValueError(f"a batch of {len(ops)} operations exceeds the maximum of {self.MAX_BATCH_OPS} "
                             "operations per batch: split it into several apply() calls")
        conv = []
        for i, op in enumerate(ops):
            if not isinstance(op, tuple) or not op or op[0] not in _OPS:
                raise ValueError(f"ops[{i}]: expected a tuple (name, args...) with name in {', '.join(_OPS)}, "
                                 f"got {op!r}")
            name = op[0]
            fields = _core.MUTATION_OPS[name]
            try:
                # A wrong arity is left to the binding, which names the operation and both counts.
                if len(op) == 1 + len(fields):
                    op = (name, *(_embed(v) if f == "embed" else _id(v, f) for f, v in zip(fields, op[1:])))
            except ValueError as e:
                raise ValueError(f"ops[{i}]: {e}") from None
            conv.append(op)
        return self._core.apply(conv)

    # -- reads (durable state) ---------------------------------------------------------------------
    def get_embed(self, vid: int) -> np.ndarray:
        """The feature row of ``vid`` (``feature_dim`` values, stored dtype)."""
        return self._core.get_embed(_id(vid, "vid")).view(self.dtype)

    def get_neighbors(self, vid: int) -> np.ndarray:
        """Neighbors of ``vid`` (int64 original ids)."""
        return self._core.get_neighbors(_id(vid, "vid"))

    # -- generations -------------------------------------------------------------------------------
    def compact(self, progress: bool = True) -> dict:
        """Fold the log into a new base generation built by the importer
        (writes continue meanwhile); returns its statistics (generation,
        num_nodes, num_edges, folded_frames/ops/wal_bytes, delta_nodes,
        bytes, seconds, ...). ``progress`` draws tqdm bars for the export and
        the build stages; Ctrl-C cancels (generation unchanged)."""
        from flashgnn.store.jobs import run_job

        return run_job(self._core.start_compact(), progress, desc="compact ")

    def update_graph(self, src, dst, embeddings, labels=None, progress: bool = True) -> dict:
        """Replace the whole graph (HolisticGNN's UpdateGraph): directed edges
        ``(src[i], dst[i])`` (symmetrized and deduplicated by the importer),
        ``embeddings`` ``[N, D]`` (N = node count; D may differ from the
        current width), optional ``labels`` ``[N]``. Operations applied
        before it are superseded. Returns statistics of the new generation.
        ``progress`` draws tqdm bars for the build stages."""
        src = np.ascontiguousarray(src, dtype=np.int64).ravel()
        dst = np.ascontiguousarray(dst, dtype=np.int64).ravel()
        emb = np.asarray(embeddings)
        if emb.ndim != 2:
            raise ValueError(f"embeddings must be 2-D [num_nodes, dim], got shape {emb.shape}")
        if emb.dtype not in (np.float16, np.float32, np.float64):
            emb = emb.astype(np.float32)
        emb = np.ascontiguousarray(emb, dtype=emb.dtype.newbyteorder("<"))
        n, d = emb.shape
        lab = None if labels is None else np.ascontiguousarray(labels, dtype=np.int64).ravel()
        raw = emb.reshape(-1).view(np.uint8) if d > 0 else None
        from flashgnn.store.jobs import run_job

        job = self._core.start_update_graph(src, dst, int(n), raw, emb.dtype.name, int(d), lab)
        return run_job(job, progress, desc="update_graph ")

    # -- properties --------------------------------------------------------------------------------
    @property
    def num_nodes(self) -> int:
        return self._core.num_nodes

    @property
    def feature_dim(self) -> int:
        return self._core.feature_dim

    @property
    def feature_dtype(self) -> str:
        return self._core.feature_dtype

    @property
    def dtype(self):
        return _NP[self._core.feature_dtype]

    @property
    def generation(self) -> int:
        return self._core.generation

    @property
    def seq(self) -> int:
        """Sequence number of the last durable batch."""
        return self._core.seq

    def stats(self) -> dict:
        """ops, frames, fsyncs, ops_per_fsync, delta_nodes, delta_bytes,
        wal_bytes, generation, seq, replay figures of the open."""
        return self._core.stats()

    def close(self) -> None:
        self._core.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def __getstate__(self):
        raise TypeError("flashgnn.MutableGraph is process-local and cannot be pickled; open it by path in the "
                        "other process (flashgnn.Sampler(path) replays its log read-only)")

    def __repr__(self) -> str:
        return (f"MutableGraph({self.path!r}, generation={self.generation}, seq={self.seq}, "
                f"num_nodes={self.num_nodes})")
