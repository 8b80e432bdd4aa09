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

from flashgnn.sample.budget import BELADY_NODE_BYTES
from flashgnn.sample.sampler import expand_packed


class PresampleError(ValueError):
    """A stored pre-sample that does not match, or is corrupt. Defined here,
    in the lowest module that raises it, so this module imports nothing of
    the loaders above it; ``flashgnn.loader.presample.PresampleError`` is the same
    class."""


class BeladyRowCache:
    """Feature rows kept under Belady's optimal replacement within a
    superbatch (Ginex): the pre-sample says exactly which rows the next
    ``superbatch`` batches need, so after each batch the cache keeps the
    ``capacity`` rows whose next use is soonest and drops the rest — rows the
    window needs are protected by construction (GIDS' window buffering), rows
    it never needs go first. Batch-granular: within one batch every row is
    used once, so ordering inside a batch cannot change what is optimal.

    Everything is dense numpy, no per-id Python work: rows live in one
    preallocated array (``capacity`` x row width), ``slot_of`` maps node id ->
    slot (int32, -1 = absent) and ``id_of`` slot -> node id; next uses come
    from a per-node mark array. The two node-sized arrays (8 B per node) are
    paid from the budget: ``capacity = (budget - 8 N) // (row bytes + 8)``."""

    def __init__(self, budget: int, feature_dim: int, dtype, num_nodes: int):
        self.dtype = np.dtype(dtype)
        row = max(1, feature_dim) * self.dtype.itemsize
        self.capacity = max(0, (int(budget) - BELADY_NODE_BYTES * int(num_nodes)) // (row + 8))  # + id_of, int64
        self.rows = np.empty((self.capacity, feature_dim), self.dtype)
        self.slot_of = np.full(int(num_nodes), -1, np.int32)
        self.id_of = np.full(self.capacity, -1, np.int64)
        self._mark = np.full(int(num_nodes), np.iinfo(np.int32).max, np.int32)  # next use within the window
        self.hits = self.misses = 0

    @property
    def slot(self) -> dict:
        """node id -> slot of every cached row (for inspection and tests)."""
        s = np.flatnonzero(self.id_of >= 0)
        return dict(zip(self.id_of[s].tolist(), s.tolist()))

    def _cover(self, *arrays: np.ndarray) -> None:
        """Grow the node-sized arrays to cover every id given: a mutated
        dataset (``mut/``) holds vertices added after its base was built, so
        ids may reach past the base's node count. Growth is by doubling; the
        8 B per added node are beyond the budget's count, as are the new
        vertices themselves."""
        top = max((int(a.max()) for a in arrays if len(a)), default=-1)
        if top < len(self.slot_of):
            return
        n = max(top + 1, 2 * len(self.slot_of))
        self.slot_of = np.concatenate([self.slot_of, np.full(n - len(self.slot_of), -1, np.int32)])
        self._mark = np.concatenate([self._mark, np.full(n - len(self._mark), np.iinfo(np.int32).max, np.int32)])

    def lookup(self, ids: np.ndarray) -> np.ndarray:
        """Slots of ``ids`` (-1 where not cached); counts hits and misses."""
        self._cover(ids)
        slots = self.slot_of[ids].astype(np.int64)
        h = int((slots >= 0).sum())
        self.hits += h
        self.misses += len(ids) - h
        return slots

    def update(self, ids: np.ndarray, x: np.ndarray, window: list[np.ndarray]) -> None:
        """After serving a batch (``ids``, rows ``x``): keep the rows whose
        next use within ``window`` (the following batches, in order) is
        soonest."""
        if self.capacity == 0:
            return
        self._cover(ids, *window)
        occupied = np.flatnonzero(self.id_of >= 0)
        cached = self.id_of[occupied]
        new_pos = np.flatnonzero(self.slot_of[ids] < 0)
        new = ids[new_pos]
        cand = np.concatenate([cached, new])
        far = len(window)  # "not needed inside the window"
        for j in range(len(window) - 1, -1, -1):  # earlier batches overwrite later ones: the first use wins
            self._mark[window[j]] = j
        nxt = np.minimum(self._mark[cand], far)
        for w in window:
            self._mark[w] = np.iinfo(np.int32).max
        if len(cand) > self.capacity:
            keep = np.zeros(len(cand), bool)
            keep[np.argpartition(nxt, self.capacity - 1)[: self.capacity]] = True
        else:
            keep = np.ones(len(cand), bool)
        gone = occupied[~keep[: len(cached)]]
        self.slot_of[self.id_of[gone]] = -1
        self.id_of[gone] = -1
        take = keep[len(cached):]
        add, src = new[take], new_pos[take]
        if len(add):
            free = np.flatnonzero(self.id_of < 0)[: len(add)]
            self.rows[free] = x[src]
            self.id_of[free] = add
            self.slot_of[add] = free


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
            x = self.gather.gather(ids)
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
            x = np.empty((len(n_id), c.rows.shape[1]), c.rows.dtype)
            need = np.arange(len(n_id))
        if c is not None:
            slots = c.lookup(n_id[need])
            hit = slots >= 0
            x[need[hit]] = c.rows[slots[hit]]
            need = need[~hit]
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
