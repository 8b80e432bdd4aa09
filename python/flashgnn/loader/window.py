"""Lookahead: feature rows gathered through a cache that knows the next batches.

Two producers of known-ahead batches share this module:

- the pre-sampled path (:class:`flashgnn.loader.presample.PresampledLoader`), whose
  structure comes from ``epoch-EEEE.fgps``;
- online lookahead (:class:`flashgnn.NeighborLoader` with ``lookahead=S``):
  a structure stage samples batches ``S`` ahead of the one being served with
  ``Sampler(features="free")`` — an expanded node's row comes with its inline
  slot, no read is spent on a row alone — and this module fills the rows
  still missing when the batch reaches the head of the window.

Either way, the next ``S`` batches' node ids are known when a batch is
filled, so :class:`BeladyRowCache` keeps the rows whose next use is soonest
(Ginex's superbatch Belady): rows the window needs are protected from
eviction by construction (GIDS's window buffering), rows it never needs go
first. Rows it misses are read with one fanout-``[0]`` engine call per batch,
through the shared :class:`flashgnn.Cache` when there is one.
"""

from __future__ import annotations

import numpy as np

from flashgnn import _core

from flashgnn.sample.budget import BELADY_NODE_BYTES
from flashgnn.sample.sampler import expand_packed


class PresampleError(ValueError):
    """A stored pre-sample that does not match, or is corrupt. Defined here,
    in the lowest module that raises it, so this module imports nothing of
    the loaders above it; ``flashgnn.loader.presample.PresampleError`` is the same
    class."""


class BeladyRowCache:
    """Feature rows kept under Belady's optimal replacement within a
    superbatch (Ginex): the next ``superbatch`` batches' ids are known, so
    after each batch the cache keeps the ``capacity`` rows whose next use is
    soonest — rows the window needs are protected by construction (GIDS'
    window buffering), rows it never needs go first.

    The tier itself is Rust's (``flashgnn_sample::belady``, beside the
    budget that sizes it): its ``budget`` is the split's ``lookahead_cache``,
    only what the page cache cannot hold, so no row is held twice. Rows cross
    as bytes of the caller's ``x`` (no copy). The two node-sized arrays (8 B
    per node) are paid from the budget:
    ``capacity = (budget - 8 N) // (row bytes + 8)``."""

    def __init__(self, budget: int, feature_dim: int, dtype, num_nodes: int):
        self.dtype = np.dtype(dtype)
        self.feature_dim = int(feature_dim)
        self.row_bytes = self.feature_dim * self.dtype.itemsize
        # Rows of zero width hold nothing worth caching: no tier then (every row is "read", at no cost).
        self._core = _core.BeladyRows(int(budget) if self.row_bytes else 0, max(self.row_bytes, 1), int(num_nodes))
        self.capacity = self._core.capacity

    @property
    def hits(self) -> int:
        return self._core.hits

    @property
    def misses(self) -> int:
        return self._core.misses

    @property
    def slot_of(self) -> np.ndarray:
        """node id -> slot (-1: not held), a copy (for inspection and tests)."""
        return self._core.slot_of()

    @property
    def slot(self) -> dict:
        """node id -> slot of every cached row (for inspection and tests)."""
        s = self.slot_of
        held = np.flatnonzero(s >= 0)
        return dict(zip(held.tolist(), s[held].tolist()))

    @staticmethod
    def _bytes(x: np.ndarray) -> np.ndarray:
        if not x.flags.c_contiguous:  # reshape would copy, and rows filled into the copy would be lost
            raise ValueError(f"lookahead rows: x of shape {x.shape} is not C-contiguous")
        return x.reshape(-1).view(np.uint8)

    def fill(self, ids: np.ndarray, need: np.ndarray, x: np.ndarray) -> np.ndarray:
        """Copy the held rows of ``ids[need]`` into ``x`` (``[len(ids), dim]``,
        C-contiguous); the positions still needed. Counts hits and misses."""
        if self.capacity == 0:
            return np.asarray(need, np.int64)
        return self._core.fill(np.ascontiguousarray(ids, np.int64), np.ascontiguousarray(need, np.int64),
                               self._bytes(x))

    def update(self, ids: np.ndarray, x: np.ndarray, window: list[np.ndarray]) -> None:
        """After serving a batch (``ids``, rows ``x``): keep the rows whose
        next use within ``window`` (the following batches, in order) is
        soonest."""
        if self.capacity == 0:
            return
        self._core.update(np.ascontiguousarray(ids, np.int64), self._bytes(np.ascontiguousarray(x)),
                          [np.ascontiguousarray(w, np.int64) for w in window])


class WindowGather:
    """Fills batches' feature rows: from a :class:`BeladyRowCache` of
    ``budget`` bytes (0: none) when it holds them, else one engine call over
    the rest through ``gather`` (a :class:`flashgnn.Sampler`, the loader's
    own: :meth:`flashgnn.Sampler.gather` returns exactly the rows asked for,
    in order)."""

    def __init__(self, gather, budget: int, num_nodes: int):
        self.gather = gather
        # A budget that cannot pay the cache's two node-sized arrays (8 B per
        # node) would leave it no row (capacity 0) yet allocate them beyond
        # the budget: 512 MiB at 67 M nodes, which OOM-killed training under
        # a 2 GiB cap. Then there is no cache: the same rows, read.
        self.belady = (BeladyRowCache(budget, gather.feature_dim, gather.out_dtype or gather.dtype, num_nodes)
                       if budget and int(budget) > BELADY_NODE_BYTES * int(num_nodes) else None)
        self.rows_gathered = 0

    def _read(self, ids: np.ndarray, where) -> np.ndarray:
        try:
            x = self.gather.gather(ids).x
        except ValueError:
            raise PresampleError(f"{where}: a batch's n_id has repeated ids (not a sampled batch)") from None
        self.rows_gathered += len(ids)
        return x

    def fill(self, n_id: np.ndarray, x: np.ndarray | None, need: np.ndarray | None, window: list[np.ndarray],
             where="batch") -> np.ndarray:
        """``x`` for ``n_id`` with the rows at positions ``need`` filled
        (``x`` None: every row; ``x`` packed — only the rows of the positions
        not in ``need``, as ``Sampler(features="free")`` hands them — is
        expanded first), ``window`` = the next batches' ``n_id`` in
        order. Every row of the result then enters the cache's choice, the
        ones that came free included."""
        c = self.belady
        if x is not None and need is not None and len(x) != len(n_id):
            x = expand_packed(x, len(n_id), need)  # the `need` rows are all written below
        if x is None:
            if c is None:
                return self._read(n_id, where)
            x = np.empty((len(n_id), c.feature_dim), c.dtype)
            need = np.arange(len(n_id))
        if c is not None:
            need = c.fill(n_id, need, x)
        if len(need):
            x[need] = self._read(n_id[need], where)
        if c is not None:
            c.update(n_id, x, window)
        return x

    def stats(self) -> dict:
        c = self.belady
        hits, misses = (c.hits, c.misses) if c is not None else (0, self.rows_gathered)
        return {"rows_gathered": self.rows_gathered, "hits": hits, "misses": misses,
                "hit_rate": hits / max(hits + misses, 1), "capacity_rows": c.capacity if c is not None else 0}


class _TypeRows:
    """One node type's rows as :class:`WindowGather` reads them: local ids
    in, that type's rows out, through the loader's sampler (global ids of
    one type: a zero-hop typed batch, no slot read)."""

    def __init__(self, sampler, name: str, offset: int, features: dict):
        self.sampler, self.name, self.offset = sampler, name, int(offset)
        self.feature_dim = int(features["dim"])
        self.out_dtype, self.dtype = sampler.out_dtype, np.dtype(features["dtype"])

    def gather(self, ids: np.ndarray):
        b = self.sampler.gather(np.asarray(ids, np.int64) + self.offset)
        return b.node[self.name]


class TypedWindowGather:
    """Lookahead's fill for a typed dataset: per node type with rows, a
    :class:`WindowGather` over that type's local ids, with its own Belady
    tier (a tier holds rows of one width) and one engine call per batch for
    the rows it misses.

    ``budget`` is shared out when the first batch is filled, in proportion
    to each type's row bytes in the window then known (what the batches
    ask of it), a type never given more than its whole table and node
    arrays, what that leaves going to the others: the small types a batch
    reuses most (fields of study, institutes) are held whole, instead of
    getting a share by table size that would hold a few hundred of their
    rows. Each tier pays its own node arrays (8 B per node of its type)."""

    def __init__(self, sampler, budget: int, types: dict):
        counts = [int(t["count"]) for t in types["node_types"]]
        offsets = np.concatenate([[0], np.cumsum(counts)])
        self.rows = {t["name"]: _TypeRows(sampler, t["name"], offsets[i], t["features"])
                     for i, t in enumerate(types["node_types"]) if t.get("features")}
        self.counts = {t["name"]: int(t["count"]) for t in types["node_types"]}
        self.budget = int(budget)
        self.per_type: dict = {}
        self.gather = sampler  # its telemetry counts the fill's reads
        # WindowGather's one tier: none here (the tiers are per type, made at the first fill; stats() sums them).
        self.belady = None

    def _share(self, first) -> dict:
        """Each type's bytes of the budget, from the first window's demand."""
        row_bytes = {n: r.feature_dim * np.dtype(r.out_dtype or r.dtype).itemsize for n, r in self.rows.items()}
        demand = {n: sum(len(b.node[n].n_id) for b in first) * row_bytes[n] for n in self.rows}
        cap = {n: self.counts[n] * (row_bytes[n] + 8 + BELADY_NODE_BYTES) for n in self.rows}
        # Water-filling: the types whose cap is smallest against their demand are settled first, each taking
        # its proportional part of what is left (at most its cap), so what a capped type leaves goes to the rest.
        share, left, want = {}, self.budget, sum(demand.values())
        for n in sorted(self.rows, key=lambda n: cap[n] / max(demand[n], 1)):
            share[n] = min(left * demand[n] // max(want, 1), cap[n])
            left, want = left - share[n], want - demand[n]
        return share

    def fill(self, b, window) -> None:
        """Every row of typed batch ``b`` (a structure-only batch: no ``x``),
        ``window`` = the next batches, in order."""
        window = list(window)
        if not self.per_type:
            share = self._share([b, *window])
            self.per_type = {n: WindowGather(r, share[n], self.counts[n]) for n, r in self.rows.items()}
        for name, wg in self.per_type.items():
            part = b.node[name]
            part.x = wg.fill(part.n_id, None, None, [a.node[name].n_id for a in window])

    def stats(self) -> dict:
        per = {name: wg.stats() for name, wg in self.per_type.items()}
        keys = ("rows_gathered", "hits", "misses", "capacity_rows")
        total = {k: sum(s[k] for s in per.values()) for k in keys}
        total["hit_rate"] = total["hits"] / max(total["hits"] + total["misses"], 1)
        total["per_type"] = per
        return total
