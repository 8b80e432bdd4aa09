"""`flashgnn recommend`: each query node's top-k candidates by the inner
product of node embeddings, exactly in bounded memory or through a faiss
index, published atomically.

    flashgnn recommend DATASET (--checkpoint DIR | --embeddings FILE|DIR) [--k 10] [--exclude-seen]
                       [--nodes A:B|ids.npy|ids.txt] [--candidates A:B] [--index exact|faiss] [--out DIR]

The score of (query q, candidate c) is what the link model scores over the
final embeddings ``E`` (``flashgnn embed``'s ``embeddings.npy``):
``dot(E[q], E[c])`` for ``--decoder dot``; for ``--decoder mlp`` the
checkpoint's own MLP on ``E[q] * E[c]`` (:func:`mlp_scorer`, the decoder's
weights read from the checkpoint given or the one ``embed.json`` names),
exactly only: an MLP score is not an inner product, so no inner-product
index (faiss) computes it and the norm order's bound does not hold for it.

**Exact** (:func:`topk_exact`): queries in blocks of ``qb`` rows, candidates
in blocks of ``cb`` rows read from the memory-mapped table (file-backed
pages, reclaimable); per pair of blocks one matrix product ``[qb, cb]``, the
block's top-k per row, and a merge into the running ``[qb, k]`` top-k.
Invariant: the result does not depend on the block sizes; ties are broken
by the smaller candidate id (order: score descending, then id ascending),
so the answer equals ``np.lexsort((ids, -scores))`` over all candidates.
Resident memory beyond the table's pages is at most :func:`memory_bound`
(``9 qb cb`` bytes for the block's scores, their partition copy and a mask,
plus the query rows, the running top-k and the block's seen lists, and 24 B
per candidate for the norm order below), sized from ``--memory-budget`` by
:func:`block_sizes`.

**Norm-ordered early stop** (exact, not an approximation): with more than
one candidate block, the candidates are visited by Euclidean norm,
largest first (one pass computes the norms; blocks of ``cb`` in that order,
each block's ids ascending, so block-local ties still go to the smaller
id). By Cauchy-Schwarz no candidate left can score above ``|q| * n`` (``n``:
the largest norm left), so a query whose k-th score already exceeds that
bound, widened by the float32 rounding a ``dim``-long dot product can make
(:data:`ROUNDING`), is finished and leaves the block's matrix product.
Trained embeddings' norms are skewed (popular nodes' are large): most
queries stop after the first blocks. ``stats`` reports the pairs scored
against the full ``queries x candidates``.

**ANN** (``--index faiss``, :func:`topk_faiss`): a faiss index of the
candidates with the inner-product metric (``--faiss-index``, a faiss
factory string, default ``HNSW32``), searched for ``k`` plus the most ids a
query of the block excludes; its recall@k against the exact answer is
measured on ``--recall-sample`` queries and reported. The index holds every
candidate vector in RAM (``num_candidates x dim x 4`` bytes at least),
checked against ``--memory-budget`` before it is built.

**Seen** (``--exclude-seen``): a query's current neighbours in the dataset
(read per query block through :meth:`flashgnn.Dataset.neighbors_csr`) and the
query itself are never recommended. A query with fewer than ``k`` eligible
candidates gets id ``-1`` and score ``-inf`` in the rest of its row.

Output (``--out DIR``, published like ``embed``'s): ``ids.npy`` int64
``[n, k]``, ``scores.npy`` float32 ``[n, k]``, ``queries.npy`` int64 ``[n]``
(row ``i`` answers node ``queries[i]``), ``recommend.json`` (the report).
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import numpy as np

from flashgnn._durable import check_output, create_tmp_dir, fsync_path, load_npy, publish_dir, remove_stale_tmps

INDEXES = ("exact", "faiss")
DEFAULT_FAISS_INDEX = "HNSW32"  # graph index: no training pass, recall > 0.9 at efSearch 128 on clustered data
DEFAULT_FAISS_PARAMS = "efSearch=128"
DEFAULT_RECALL_SAMPLE = 1000  # queries whose ANN answer is checked against the exact one
DEFAULT_MEMORY_BUDGET = 1 << 30
CANDIDATE_BLOCK_MAX = 1 << 16  # 64 Ki candidates per matrix product: ~0.25 GiB of scores at 1 Ki queries
# Bytes per (query, candidate) pair of one block: the float32 scores, then either np.partition's float32 copy
# (4) or, when ties straddle the k-th score, the >= mask, the == mask, their int32 running count and the kept
# ties (1 + 1 + 4 + 1): at most 4 + 7 = 11.
PAIR_BYTES = 11
# Bytes per query row and unit of k beyond the block's pairs: the running top-k (int64 id + float32 score, 12),
# the block's <= k kept entries (row, column, id: int64; score: float32; 28), and the merge's <= 2k entries
# (row, id, score and their sorted copies, the order, positions: about 80 each, so 160): 200, rounded up.
TOPK_ENTRY_BYTES = 256
# Bytes per query row of a block whatever k: the k-th scores, counts, row starts and positions (5 x 8), and the
# norm order's query norm, bound and active position (3 x 8), rounded up.
ROW_BYTES = 96
# Bytes per candidate of the norm order: its norm (float64), its place in the order and in its block (int64 each).
ORDER_BYTES = 24
# Relative widening of the Cauchy-Schwarz bound per unit of dim: float32 dot products round by at most about
# dim * 2^-24 of |q| |c| (a summation's error bound); twice that, and never below 1e-6.
ROUNDING = 2.0 ** -23
# Bytes of one step whatever its shape: array headers, Python objects and the small index arrays numpy makes.
STEP_FIXED_BYTES = 64 << 10
# Bytes per excluded (query, id) pair of a block: the pair (16), the in-block mask (1), the fancy-index
# copies of both halves (16), rounded up.
SEEN_PAIR_BYTES = 40


class RecommendError(ValueError):
    """Bad input to `flashgnn recommend` or the Recommend RPC; the message names the argument, value and bound."""


# -- inputs ------------------------------------------------------------------------------------------------


def parse_ids(spec, n: int, what: str) -> np.ndarray:
    """Node ids from ``A:B`` (a half-open range), an ``.npy`` integer array or a text file (one id per line),
    each checked against ``[0, n)``."""
    if isinstance(spec, np.ndarray):
        ids = spec
    elif isinstance(spec, str) and ":" in spec and not os.path.exists(spec):
        lo, hi = _range(spec, n, what)
        return np.arange(lo, hi, dtype=np.int64)
    else:
        p = Path(spec)
        if not p.exists():
            raise RecommendError(f"{what} {spec}: neither A:B nor an existing file of ids")
        if p.suffix == ".npy":
            ids = load_npy(p)
            if ids.dtype.kind not in "iu":
                raise RecommendError(f"{what} {p}: dtype {ids.dtype}, expected an integer array of node ids")
        else:
            try:
                ids = np.loadtxt(p, dtype=np.int64, ndmin=1)
            except ValueError as e:
                raise RecommendError(f"{what} {p}: not one integer id per line ({e})") from None
    ids = np.asarray(ids).reshape(-1).astype(np.int64, copy=False)
    if ids.size == 0:
        raise RecommendError(f"{what}: no ids")
    bad = np.flatnonzero((ids < 0) | (ids >= n))
    if bad.size:
        i = int(bad[0])
        raise RecommendError(f"{what}[{i}]: node id {int(ids[i])} " + ("< 0" if ids[i] < 0 else f">= num_nodes {n}"))
    return ids


def _range(spec: str, n: int, what: str) -> tuple[int, int]:
    a, _, b = spec.partition(":")
    try:
        lo = int(a) if a.strip() else 0
        hi = int(b) if b.strip() else n
    except ValueError:
        raise RecommendError(f"{what} {spec!r}: expected A:B (integers; either may be empty)") from None
    if not 0 <= lo < hi <= n:
        raise RecommendError(f"{what} {spec!r}: range [{lo}, {hi}) is empty or outside [0, num_nodes {n})")
    return lo, hi


def candidate_range(spec, ds) -> tuple[int, int]:
    """``--candidates``: ``A:B`` (default: every node)."""
    n = int(ds.num_nodes)
    if spec is None:
        return 0, n
    if isinstance(spec, tuple):
        return _range(f"{spec[0]}:{spec[1]}", n, "--candidates")
    if ":" not in str(spec):
        raise RecommendError(f"--candidates {spec!r}: expected a range A:B of node ids (node types are not yet "
                             "supported: typed datasets are refused)")
    return _range(str(spec), n, "--candidates")


def link_info(model_config: dict) -> tuple[str, str]:
    """``(task, decoder)`` a checkpoint's ``model_config`` records (``node``/``dot`` when it records none)."""
    return str(model_config.get("task", "node")), str(model_config.get("decoder", "dot"))


def check_decoder(decoder: str, where: str, mlp_ok: bool = False) -> None:
    """Refuse a decoder whose score the caller cannot compute: ``mlp`` unless ``mlp_ok`` (exact scoring only)."""
    if decoder == "dot" or (decoder == "mlp" and mlp_ok):
        return
    if decoder == "mlp":
        raise RecommendError(f"{where}: decoder 'mlp': its scores are not the inner product of the two embeddings, "
                             "so no inner-product index (faiss) and no single-query product computes them; only "
                             "`flashgnn recommend --index exact` scores them, with the checkpoint's MLP on every pair")
    raise RecommendError(f"{where}: decoder {decoder!r}: expected dot or mlp")


# Bytes of working memory the MLP scorer uses at most per call (pairs are scored in chunks that fit it).
MLP_SCRATCH_BYTES = 64 << 20


def mlp_scorer(state: dict, where: str):
    """The link checkpoint ``state``'s MLP decoder as a scorer ``(Q [q, d], C [c, d]) -> S [q, c]`` (float32):
    the model's own ``decode(h_q, h_c)`` on every pair, in chunks of at most :data:`MLP_SCRATCH_BYTES`."""
    import torch

    from flashgnn.nn.checkpoint import model_from_checkpoint

    model = model_from_checkpoint(state).eval()
    if getattr(model, "decoder_kind", None) != "mlp":
        raise RecommendError(f"{where}: not a link checkpoint with an MLP decoder")
    hidden = int(state["model_config"].get("hidden", 1))

    def score(Q: np.ndarray, C: np.ndarray) -> np.ndarray:
        q, c, d = len(Q), len(C), Q.shape[1]
        out = np.empty((q, c), np.float32)
        # Per pair: the two gathered rows and their product (3d), the hidden layer twice (2 hidden), the score.
        per = max(1, MLP_SCRATCH_BYTES // (4 * (3 * d + 2 * hidden + 2)))
        # Writable copies when the rows are a read-only mapping's (torch takes no read-only array): the block's
        # 4 dim bytes per row that memory_bound counts.
        Qt, Ct = (torch.from_numpy(np.require(a, np.float32, ["C", "W"])) for a in (Q, C))
        with torch.no_grad():
            for r in range(q):
                for c0 in range(0, c, per):
                    cc = Ct[c0:c0 + per]
                    out[r, c0:c0 + len(cc)] = model.decode(Qt[r].expand(len(cc), d), cc).numpy()
        return out

    return score


def open_embeddings(path, ds) -> tuple[np.ndarray, dict]:
    """The embedding table (memory-mapped) of ``path`` (an ``embeddings.npy``, or a ``flashgnn embed`` output
    directory) and what its ``embed.json`` says, checked against the dataset: one float row per node."""
    p = Path(path)
    meta: dict = {}
    if p.is_dir():
        mj = p / "embed.json"
        if mj.exists():
            from flashgnn._durable import read_regular

            try:
                meta = json.loads(read_regular(mj))
            except ValueError as e:
                raise RecommendError(f"--embeddings {mj}: not JSON ({e})") from None
            if not isinstance(meta, dict):
                raise RecommendError(f"--embeddings {mj}: a JSON {type(meta).__name__}, expected an object")
            if meta.get("typed"):
                raise RecommendError(f"--embeddings {p}: embeddings of a typed dataset (per node type); recommend "
                                     "reads one homogeneous table")
        p = p / "embeddings.npy"
    if not p.exists():
        raise RecommendError(f"--embeddings {path}: no such file (an embeddings.npy, or the directory `flashgnn "
                             "embed` wrote)")
    table = load_npy(p, mmap_mode="r")
    n = int(ds.num_nodes)
    if table.ndim != 2 or table.shape[0] != n:
        raise RecommendError(f"--embeddings {p}: shape {list(table.shape)} does not match {ds.path}: expected "
                             f"[num_nodes {n}, dim] (embeddings of another dataset?)")
    if table.dtype.kind != "f":
        raise RecommendError(f"--embeddings {p}: dtype {table.dtype}, expected a float table")
    if table.shape[1] == 0:
        raise RecommendError(f"--embeddings {p}: shape {list(table.shape)}: rows of 0 values score nothing")
    # One streamed pass: a NaN or infinite value would make every score it touches unordered, silently.
    rows = max(1, (64 << 20) // max(table.shape[1] * table.itemsize, 1))
    for lo in range(0, n, rows):
        bad = ~np.isfinite(table[lo:lo + rows]).all(axis=1)
        if bad.any():
            r = lo + int(np.flatnonzero(bad)[0])
            at = getattr(table, "offset", 0) + r * table.shape[1] * table.itemsize
            raise RecommendError(f"--embeddings {p}: row {r} (byte offset {at}) holds a non-finite value (NaN or "
                                 "inf): every value must be finite")
    if meta.get("decoder"):
        check_decoder(meta["decoder"], f"--embeddings {path} (embed.json)", mlp_ok=True)
    return table, meta


# -- memory --------------------------------------------------------------------------------------------------


def memory_bound(qb: int, cb: int, k: int, dim: int, seen_per_query: int = 0, ordered: int = 0,
                 scratch: int = 0) -> int:
    """Bytes one exact step may hold beyond the table's (file-backed) pages: a constant, a ``[qb, cb]`` block of
    scores with its partition copy and masks, the ``[qb, dim]`` query rows and a ``[cb, dim]`` candidate block
    (gathered in norm order, or converted when the table is not float32), the running top-k and its merge,
    ``seen_per_query`` excluded ids per query (SEEN_PAIR_BYTES each), the norm order of ``ordered``
    candidates (ORDER_BYTES each) and a scorer's ``scratch`` (the MLP decoder's)."""
    return (STEP_FIXED_BYTES + PAIR_BYTES * qb * cb + 4 * dim * (qb + cb) + qb * (ROW_BYTES + k * TOPK_ENTRY_BYTES)
            + SEEN_PAIR_BYTES * qb * seen_per_query + ORDER_BYTES * ordered + scratch)


def block_sizes(budget: int, num_queries: int, num_candidates: int, k: int, dim: int,
                seen_per_query: int = 0, scratch: int = 0) -> tuple[int, int]:
    """The largest ``(qb, cb)`` whose :func:`memory_bound` fits ``budget``: ``cb`` up to CANDIDATE_BLOCK_MAX,
    then as many queries as fit. Raises naming the budget when not even one query fits."""
    cb = min(num_candidates, CANDIDATE_BLOCK_MAX)
    while cb >= 1:
        per_q = PAIR_BYTES * cb + 4 * dim + ROW_BYTES + k * TOPK_ENTRY_BYTES + SEEN_PAIR_BYTES * seen_per_query
        ordered = ordered_candidates(num_candidates, cb) if not scratch else 0
        fixed = STEP_FIXED_BYTES + 4 * dim * cb + ORDER_BYTES * ordered + scratch
        qb = (budget - fixed) // per_q if budget > fixed else 0
        if qb >= 1:
            return int(min(qb, num_queries)), int(cb)
        cb //= 2
    raise RecommendError(f"--memory-budget {budget} B: too small for one query against one candidate (needs "
                         f"{memory_bound(1, 1, k, dim, seen_per_query, num_candidates, scratch)} B at k {k}, "
                         f"dim {dim})")


def ordered_candidates(num_candidates: int, cb: int) -> int:
    """Candidates the norm order holds: all of them when they span more than one block, else none."""
    return num_candidates if num_candidates > cb else 0


# -- top-k ---------------------------------------------------------------------------------------------------


def merge_topk(best_ids: np.ndarray, best_scores: np.ndarray, rows: np.ndarray, ids: np.ndarray,
               scores: np.ndarray) -> None:
    """Fold entries ``(rows[i], ids[i], scores[i])`` into the running ``[qb, k]`` top-k in place: per row the k
    largest scores, ties to the smaller id; empty slots hold id -1 and score -inf."""
    qb, k = best_ids.shape
    have = best_ids >= 0
    r = np.concatenate([np.nonzero(have)[0], rows])
    i = np.concatenate([best_ids[have], ids])
    s = np.concatenate([best_scores[have], scores])
    order = np.lexsort((i, -s, r))  # by row, then score descending, then id ascending
    r, i, s = r[order], i[order], s[order]
    starts = np.searchsorted(r, np.arange(qb))
    pos = np.arange(r.size) - starts[r]
    keep = pos < k
    best_ids.fill(-1)
    best_scores.fill(-np.inf)
    best_ids[r[keep], pos[keep]] = i[keep]
    best_scores[r[keep], pos[keep]] = s[keep]


def block_topk(S: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, cols)`` of each row's top-k entries of ``S`` by (score descending, column ascending): the entries
    above the row's k-th largest value, then the first of those equal to it; -inf (excluded) never. At most k
    per row, so what the merge holds is bounded by k whatever the ties."""
    qb, cb = S.shape
    torch = _torch()
    if torch is not None and cb > k:
        # torch.topk selects in one pass (numpy's partition copies the block and is 3x slower); its choice among
        # ties at the k-th score is arbitrary, so it is taken only when no row has such ties.
        T = torch.from_numpy(S)
        v, i = torch.topk(T, k, dim=1, sorted=False)
        kth = v.min(dim=1).values
        if bool(torch.isfinite(kth).all()) and bool(((T >= kth[:, None]).sum(dim=1) == k).all()):
            return np.repeat(np.arange(qb, dtype=np.int64), k), i.numpy().reshape(-1)
        kth = kth.numpy().copy()
    elif cb > k:
        kth = np.partition(S, cb - k, axis=1)[:, cb - k].copy()  # the k-th largest per row (a float32 copy of S)
    else:
        kth = np.full(qb, -np.inf, np.float32)
    np.maximum(kth, np.finfo(np.float32).min, out=kth)  # -inf entries are excluded ones: never kept
    ge = S >= kth[:, None]
    cnt = ge.sum(axis=1)
    if (cnt > k).any():  # ties at the k-th score: keep the smallest columns among them
        eq = S == kth[:, None]
        need = k - (cnt - eq.sum(axis=1))  # ties each row may keep
        keep = np.cumsum(eq, axis=1, dtype=np.int32) <= need[:, None]
        keep &= eq
        np.logical_not(eq, out=eq)
        ge &= eq
        ge |= keep
    return np.nonzero(ge)


def above_kth(S: np.ndarray, kth: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """``(rows, cols)`` of the entries of ``S`` that may enter each row's running top-k: when every row's k-th
    score ``kth`` is known and at most ``2 k`` entries per row on average reach it (ties included: a tie may
    win on its smaller id), those entries, found by one comparison; else :func:`block_topk`'s selection. Once
    the first blocks have set the k-th scores, most of a block falls below them, and the comparison costs a
    fraction of a top-k selection."""
    if np.isfinite(kth).all():
        ge = S >= kth[:, None]  # 1 B a pair, as block_topk's mask; freed before it runs
        if np.count_nonzero(ge) <= 2 * k * len(kth):
            return np.nonzero(ge)
        del ge
    return block_topk(S, k)


_TORCH = []


def _torch():
    """torch when installed (its top-k is the fast path of :func:`block_topk`), else None: numpy alone works."""
    if not _TORCH:
        try:
            import torch
        except ImportError:
            torch = None
        _TORCH.append(torch)
    return _TORCH[0]


def _check_finite(a: np.ndarray, first_id: int, ids, what: str) -> None:
    bad = ~np.isfinite(a).all(axis=1)
    if bad.any():
        j = int(np.flatnonzero(bad)[0])
        node = int(ids[j]) if ids is not None else first_id + j
        raise RecommendError(f"{what}: the embedding of node {node} holds NaN or Inf; nothing can be ranked by it")


def _seen(ds, ids: np.ndarray, exclude_seen: bool):
    """``(rows, cols)``: query row ``rows[i]`` must not be recommended node ``cols[i]`` (its neighbours and itself)."""
    if not exclude_seen:
        return None
    ptr, idx = ds.neighbors_csr(ids)
    rows = np.repeat(np.arange(len(ids), dtype=np.int64), np.diff(ptr))
    return (np.concatenate([rows, np.arange(len(ids), dtype=np.int64)]),
            np.concatenate([np.asarray(idx, np.int64), ids]))


def norm_order(table, cand: tuple[int, int], cb: int) -> tuple[list[np.ndarray], np.ndarray]:
    """The candidates in blocks of ``cb`` by norm, largest first (ties: smaller id first), each block's ids
    ascending; and each block's largest norm (float64). One pass over the candidate rows."""
    lo, hi = cand
    norms = np.empty(hi - lo, np.float64)
    for c0 in range(lo, hi, CANDIDATE_BLOCK_MAX):
        C = np.asarray(table[c0:min(c0 + CANDIDATE_BLOCK_MAX, hi)], dtype=np.float32)
        _check_finite(C, c0, None, "candidate")
        norms[c0 - lo:c0 - lo + len(C)] = np.sqrt(np.einsum("ij,ij->i", C, C, dtype=np.float64))
    order = np.argsort(-norms, kind="stable")
    top = norms[order[::cb]]  # the first of each block is its largest
    blocks = [np.sort(order[b:b + cb]) + lo for b in range(0, len(order), cb)]
    return blocks, top


def topk_exact(table, queries: np.ndarray, cand: tuple[int, int], k: int, *, qb: int, cb: int, seen_of=None,
               progress=None, out=None, score=None) -> tuple[np.ndarray, np.ndarray, dict]:
    """Exact top-k of every query (ids into ``table``) among candidates ``cand = (lo, hi)`` (see the module
    docstring). ``seen_of(block_ids) -> (rows, cols) | None`` lists the pairs to exclude; ``out``: the
    ``(ids [n, k], scores [n, k])`` arrays to fill (memory-mapped files for a large answer). Returns ``(ids,
    scores, stats)``; ``stats["peak_block_bytes"]`` is the largest :func:`memory_bound` of a step,
    ``stats["pairs_scored"]`` the (query, candidate) pairs the norm order did not skip. ``score(Q, C) -> S``
    replaces the inner product (:func:`mlp_scorer`; no norm order then)."""
    lo, hi = cand
    n, dim = len(queries), int(table.shape[1])
    out_ids, out_scores = out if out is not None else _answer(n, k)
    ordered = ordered_candidates(hi - lo, cb) if score is None else 0
    scratch = MLP_SCRATCH_BYTES if score is not None else 0
    if ordered:
        blocks, top = norm_order(table, cand, cb)  # the candidates' rows are all read (and checked) once here
    else:  # id order, each block a range (its ids made when it is scored)
        blocks, top = [range(c0, min(c0 + cb, hi)) for c0 in range(lo, hi, cb)], None
    widen = 1.0 + max(1e-6, ROUNDING * dim)
    checked = False
    peak = pairs = 0
    for q0 in range(0, n, qb):
        qids = queries[q0:q0 + qb]
        Q = np.asarray(table[qids], dtype=np.float32)
        _check_finite(Q, 0, qids, "query")
        qnorm = np.sqrt(np.einsum("ij,ij->i", Q, Q, dtype=np.float64))
        seen = seen_of(qids) if seen_of is not None else None
        best_ids = np.full((len(qids), k), -1, np.int64)
        best_scores = np.full((len(qids), k), -np.inf, np.float32)
        active = np.arange(len(qids))
        where = np.arange(len(qids))  # a query row's position among the active ones, -1 once finished
        for b, ids in enumerate(blocks):
            if ordered:
                C = np.asarray(table[ids], dtype=np.float32)
            else:
                C = np.asarray(table[ids.start:ids.stop], dtype=np.float32)  # a view of the mapped pages (float32)
                if not checked:
                    _check_finite(C, ids.start, None, "candidate")
                ids = np.arange(ids.start, ids.stop)
            whole = len(active) == len(qids)
            Qa = Q if whole else Q[active]
            S = Qa @ C.T if score is None else score(Qa, C)
            pairs += S.size
            if seen is not None:  # the block's excluded pairs: their column by id, their row among the active
                col = np.searchsorted(ids, seen[1])
                hit = (col < len(ids)) & (ids[np.minimum(col, len(ids) - 1)] == seen[1])
                row = seen[0][hit] if whole else where[seen[0][hit]]
                S[row[row >= 0], col[hit][row >= 0]] = -np.inf
            r, c = above_kth(S, best_scores[:, k - 1] if whole else best_scores[active, k - 1], k)
            if whole:
                merge_topk(best_ids, best_scores, r, ids[c], S[r, c])
            else:
                sub_ids, sub_scores = best_ids[active], best_scores[active]
                merge_topk(sub_ids, sub_scores, r, ids[c], S[r, c])
                best_ids[active], best_scores[active] = sub_ids, sub_scores
            peak = max(peak, memory_bound(len(active), len(ids), k, dim,
                                          0 if seen is None else -(-len(seen[0]) // len(qids)), ordered, scratch))
            if top is not None and b + 1 < len(blocks):
                # Nothing left can score above |q| * (the largest norm left), widened by the rounding.
                bound = qnorm[active] * top[b + 1] * widen
                active = active[~(best_scores[active, k - 1] > bound)]
                if active.size == 0:
                    break
                if seen is not None:
                    where.fill(-1)
                    where[active] = np.arange(len(active))
        out_ids[q0:q0 + qb], out_scores[q0:q0 + qb] = best_ids, best_scores
        checked = True
        if progress is not None:
            progress.update(len(qids))
    return out_ids, out_scores, {"peak_block_bytes": peak, "pairs_scored": int(pairs),
                                 "pairs_total": int(n) * int(hi - lo)}


def _answer(n: int, k: int, directory: Path | None = None):
    """The ``[n, k]`` ids (-1) and scores (-inf): ``ids.npy`` / ``scores.npy`` memory-mapped in ``directory``
    (pages written back as they fill, so an answer for every node of a large graph is not held in RAM), else
    in memory."""
    if directory is None:
        return np.full((n, k), -1, np.int64), np.full((n, k), -np.inf, np.float32)
    ids = np.lib.format.open_memmap(directory / "ids.npy", mode="w+", dtype=np.int64, shape=(n, k))
    scores = np.lib.format.open_memmap(directory / "scores.npy", mode="w+", dtype=np.float32, shape=(n, k))
    return ids, scores


def _faiss():
    try:
        import faiss
    except ImportError:
        raise RecommendError("--index faiss needs the faiss-cpu package: pip install 'flashgnn[ann]' (or "
                             "pip install faiss-cpu); --index exact needs nothing") from None
    return faiss


def build_faiss(table, cand: tuple[int, int], factory: str, params: str, budget: int, block: int = 1 << 16):
    """A faiss inner-product index of candidate rows ``[lo, hi)``, added in blocks of ``block`` rows."""
    faiss = _faiss()
    lo, hi = cand
    dim = int(table.shape[1])
    need = (hi - lo) * dim * 4
    if need > budget:
        raise RecommendError(f"--index faiss: the index holds every candidate vector in RAM, {need} B ({hi - lo} x "
                             f"dim {dim} x 4) > --memory-budget {budget} B; use --index exact (bounded by blocks) "
                             "or a larger budget")
    try:
        index = faiss.index_factory(dim, factory, faiss.METRIC_INNER_PRODUCT)
    except RuntimeError as e:
        raise RecommendError(f"--faiss-index {factory!r}: not a faiss index factory string ({str(e).strip()[:200]})") from None
    if not index.is_trained:
        rng = np.random.default_rng(0)
        sample = np.sort(rng.choice(hi - lo, size=min(hi - lo, 256 * 1024), replace=False)) + lo
        index.train(np.ascontiguousarray(table[sample], dtype=np.float32))
    for c0 in range(lo, hi, block):
        C = np.ascontiguousarray(table[c0:min(c0 + block, hi)], dtype=np.float32)
        _check_finite(C, c0, None, "candidate")
        index.add(C)
    if params:
        try:
            faiss.ParameterSpace().set_index_parameters(index, params)
        except RuntimeError as e:
            raise RecommendError(f"--faiss-params {params!r}: {str(e).strip()[:200]}") from None
    return index


def topk_faiss(index, table, queries: np.ndarray, cand: tuple[int, int], k: int, *, qb: int, seen_of=None,
               progress=None, out=None) -> tuple[np.ndarray, np.ndarray]:
    """Top-k through ``index``: per query block one search for ``k`` + the most pairs a query of the block
    excludes, then the excluded ids dropped and ties re-ordered by id (the exact path's order)."""
    lo, hi = cand
    n = len(queries)
    out_ids, out_scores = out if out is not None else _answer(n, k)
    for q0 in range(0, n, qb):
        qids = queries[q0:q0 + qb]
        Q = np.ascontiguousarray(table[qids], dtype=np.float32)
        _check_finite(Q, 0, qids, "query")
        seen = seen_of(qids) if seen_of is not None else None
        extra = int(np.bincount(seen[0], minlength=len(qids)).max()) if seen is not None else 0
        kk = min(k + extra, hi - lo)
        D, I = index.search(Q, kk)
        ids = np.where(I >= 0, I + lo, -1)
        valid = ids >= 0
        if seen is not None:
            # A pair (row, id) is excluded: compare against the seen pairs keyed row * n + id.
            span = int(table.shape[0]) + 1
            key = np.arange(len(qids))[:, None] * span + ids
            bad = np.isin(key, seen[0] * span + seen[1])
            valid &= ~bad
        rows = np.nonzero(valid)
        best_ids = np.full((len(qids), k), -1, np.int64)
        best_scores = np.full((len(qids), k), -np.inf, np.float32)
        merge_topk(best_ids, best_scores, rows[0], ids[rows], D[rows].astype(np.float32))
        out_ids[q0:q0 + qb], out_scores[q0:q0 + qb] = best_ids, best_scores
        if progress is not None:
            progress.update(len(qids))
    return out_ids, out_scores


def recall_at_k(ann: np.ndarray, exact: np.ndarray) -> float:
    """Mean over queries of |ann ∩ exact| / |exact| (ids -1 ignored; a query with no exact answer counts 1)."""
    hits, total = 0, 0
    for a, e in zip(ann, exact):
        e = e[e >= 0]
        total += len(e)
        hits += len(np.intersect1d(a[a >= 0], e))
    return hits / total if total else 1.0


# -- the command ---------------------------------------------------------------------------------------------


def recommend(dataset, out=None, *, checkpoint=None, embeddings=None, k: int = 10, exclude_seen: bool = False,
              nodes=None, candidates=None, index: str = "exact", faiss_index: str = DEFAULT_FAISS_INDEX,
              faiss_params: str = DEFAULT_FAISS_PARAMS, recall_sample: int = DEFAULT_RECALL_SAMPLE,
              memory_budget: int = DEFAULT_MEMORY_BUDGET, query_block: int | None = None,
              candidate_block: int | None = None, force: bool = False, progress: bool = True,
              embed_batch_size: int = 16384, quiet: bool = False) -> dict:
    """``flashgnn recommend`` (see the module docstring). Returns the report (also ``recommend.json``)."""
    import flashgnn

    t0 = time.perf_counter()
    if isinstance(k, bool) or not isinstance(k, (int, np.integer)) or k < 1:
        raise RecommendError(f"--k {k}: must be an integer >= 1")
    if index not in INDEXES:
        raise RecommendError(f"--index {index!r}: expected one of {', '.join(INDEXES)}")
    if (checkpoint is None) == (embeddings is None):
        raise RecommendError("give exactly one of --checkpoint (a `flashgnn train` checkpoint; its embeddings are "
                             "computed first) and --embeddings (what `flashgnn embed` wrote)")
    if memory_budget < 1:
        raise RecommendError(f"--memory-budget {memory_budget}: must be > 0 (exact top-k is bounded by it)")
    for name, v in (("--query-block", query_block), ("--candidate-block", candidate_block)):
        if v is not None and v < 1:
            raise RecommendError(f"{name} {v}: must be >= 1")
    if out is not None:
        check_output(out, force, (dataset, checkpoint, embeddings))
    ds = flashgnn.open(dataset)
    if ds.is_typed:
        raise RecommendError(f"{ds.path}: a typed dataset; recommend reads one homogeneous embedding table (typed "
                             "queries and candidates are not supported yet)")
    n = int(ds.num_nodes)
    queries = parse_ids(nodes, n, "--nodes") if nodes is not None else np.arange(n, dtype=np.int64)
    cand = candidate_range(candidates, ds)
    k = int(k)
    tmp = None  # the output's temporary directory (answer files, and the checkpoint's embeddings while scoring)
    try:
        if out is not None:
            remove_stale_tmps(out)
            tmp = create_tmp_dir(out)
        if checkpoint is not None:
            from flashgnn.nn.checkpoint import link_decoder, load_checkpoint

            if not os.path.isdir(checkpoint):
                raise RecommendError(f"--checkpoint {checkpoint}: not a directory written by `flashgnn train "
                                     "--checkpoint DIR`")
            state = load_checkpoint(checkpoint)
            check_decoder(link_decoder(state) or "dot", f"--checkpoint {checkpoint}", mlp_ok=index == "exact")
            cfg = state["model_config"]
            if "metadata" in cfg or cfg.get("in_dim") != ds.feature_dim:
                raise RecommendError(f"--checkpoint {checkpoint}: model_config.in_dim {cfg.get('in_dim')} != "
                                     f"feature_dim {ds.feature_dim} of {ds.path} (a model of another dataset)")
            del state
            from flashgnn.embed import embed

            import tempfile

            scratch = Path(tempfile.mkdtemp(prefix=".recommend-", dir=tmp or Path(ds.path).parent))
            try:
                embed_report = embed(dataset, checkpoint, scratch / "embeddings", batch_size=embed_batch_size,
                                     output="logits", progress=progress, memory_budget="auto", quiet=quiet)
                table, meta = open_embeddings(scratch / "embeddings", ds)
                return _run(ds, table, meta, queries, cand, k, exclude_seen, index, faiss_index, faiss_params,
                            recall_sample, memory_budget, query_block, candidate_block, progress, out, tmp, t0,
                            {"checkpoint": os.path.abspath(checkpoint), "embed_s": embed_report.get("seconds")})
            finally:
                import shutil

                shutil.rmtree(scratch, ignore_errors=True)
        table, meta = open_embeddings(embeddings, ds)
        return _run(ds, table, meta, queries, cand, k, exclude_seen, index, faiss_index, faiss_params, recall_sample,
                    memory_budget, query_block, candidate_block, progress, out, tmp, t0,
                    {"embeddings": os.path.abspath(embeddings)})
    except BaseException:
        if tmp is not None:
            import shutil

            shutil.rmtree(tmp, ignore_errors=True)
        raise


def _run(ds, table, meta, queries, cand, k, exclude_seen, index, faiss_index, faiss_params, recall_sample,
         memory_budget, query_block, candidate_block, progress, out, tmp, t0, source) -> dict:
    from flashgnn._progress import bar

    ncand = cand[1] - cand[0]
    dim = int(table.shape[1])
    seen_of = (lambda ids: _seen(ds, ids, True)) if exclude_seen else None
    # Under --exclude-seen a query block holds its queries' neighbour lists: sized by the largest degree.
    seen_per_query = 1 + int((ds.manifest.get("degree") or {}).get("max", 0)) if exclude_seen else 0
    score, decoder = None, meta.get("decoder") or "dot"
    if decoder == "mlp":  # the checkpoint's MLP on every pair (embed.json names the checkpoint)
        from flashgnn.nn.checkpoint import load_checkpoint

        where = source.get("checkpoint") or f"--embeddings {source.get('embeddings')}"
        check_decoder(decoder, where, mlp_ok=index == "exact")
        ck = meta.get("checkpoint")
        if not isinstance(ck, str) or not os.path.isdir(ck):
            raise RecommendError(f"{where}: decoder 'mlp' scores pairs with the checkpoint's MLP, and embed.json "
                                 f"names {ck!r}, not a checkpoint directory")
        score = mlp_scorer(load_checkpoint(ck), ck)
    scratch = MLP_SCRATCH_BYTES if score is not None else 0
    qb0, cb0 = block_sizes(memory_budget, len(queries), ncand, k, dim, seen_per_query, scratch)
    qb, cb = query_block or qb0, min(candidate_block or cb0, ncand)
    ordered = ordered_candidates(ncand, cb) if score is None else 0
    bound = memory_bound(qb, cb, k, dim, seen_per_query, ordered, scratch)
    if bound > memory_budget:
        raise RecommendError(f"--query-block {qb} x --candidate-block {cb}: a step may hold {bound} B > "
                             f"--memory-budget {memory_budget} B")
    report = {"flashgnn_output": "recommend", "dataset": str(ds.path), "num_queries": int(len(queries)),
              "candidates": [int(cand[0]), int(cand[1])], "k": k, "exclude_seen": bool(exclude_seen),
              "index": index, "dim": dim, "query_block": int(qb), "candidate_block": int(cb),
              "memory_budget": int(memory_budget), "memory_bound": int(bound), "source": source,
              "embed": {key: meta[key] for key in ("model", "checkpoint", "task", "decoder") if key in meta} or None,
              "decoder": decoder, "norm_order": bool(ordered) and index == "exact",
              "tie_break": "score descending, then candidate id ascending"}
    answer = _answer(len(queries), k, tmp)
    t1 = time.perf_counter()
    with bar(total=len(queries), desc=f"recommend ({index})", unit="query", disable=not progress) as pb:
        if index == "exact":
            ids, scores, st = topk_exact(table, queries, cand, k, qb=qb, cb=cb, seen_of=seen_of, progress=pb,
                                         out=answer, score=score)
            report["peak_block_bytes"] = st["peak_block_bytes"]
            report["pairs_scored"], report["pairs_total"] = st["pairs_scored"], st["pairs_total"]
        else:
            fidx = build_faiss(table, cand, faiss_index, faiss_params, memory_budget)
            report["faiss"] = {"index": faiss_index, "params": faiss_params,
                               "build_s": round(time.perf_counter() - t1, 3)}
            ids, scores = topk_faiss(fidx, table, queries, cand, k, qb=qb, seen_of=seen_of, progress=pb, out=answer)
    report["search_s"] = round(time.perf_counter() - t1, 3)
    if index == "faiss" and recall_sample:
        m = min(int(recall_sample), len(queries))
        pick = np.unique(np.linspace(0, len(queries) - 1, m).astype(np.int64))  # spread over the queries
        e_ids, _, _ = topk_exact(table, queries[pick], cand, k, qb=qb, cb=cb, seen_of=seen_of)
        report["recall_at_k"] = round(recall_at_k(np.asarray(ids[pick]), e_ids), 4)
        report["recall_sample"] = int(len(pick))
    report["seconds"] = round(time.perf_counter() - t0, 3)
    report["queries_per_s"] = round(len(queries) / max(report["search_s"], 1e-9), 1)
    if out is not None:
        ids.flush()
        scores.flush()
        del ids, scores, answer
        _publish(out, tmp, queries, report)
        report["out"] = os.path.abspath(out)
        return report
    report["ids"], report["scores"] = ids, scores
    return report


def _publish(out, tmp: Path, queries, report) -> None:
    """``tmp`` holds ids.npy and scores.npy; add queries.npy and recommend.json, make every file durable, publish."""
    with open(tmp / "queries.npy", "wb") as f:
        np.save(f, queries)
    (tmp / "recommend.json").write_text(json.dumps(report, indent=2) + "\n")
    for name in ("ids.npy", "scores.npy", "queries.npy", "recommend.json"):
        fsync_path(tmp / name)
    fsync_path(tmp)
    publish_dir(tmp, out)


def score_one(table_scores: np.ndarray, k: int, exclude=None) -> tuple[np.ndarray, np.ndarray]:
    """Top-k of one query's scores over every candidate (the Recommend RPC): ``exclude`` ids get -inf; the same
    selection and tie rule as :func:`topk_exact`."""
    S = np.asarray(table_scores, np.float32).reshape(1, -1).copy()
    if exclude is not None and len(exclude):
        S[0, np.asarray(exclude, np.int64)] = -np.inf
    best_ids = np.full((1, k), -1, np.int64)
    best_scores = np.full((1, k), -np.inf, np.float32)
    rows, cols = block_topk(S, k)
    merge_topk(best_ids, best_scores, rows, cols.astype(np.int64), S[rows, cols])
    return best_ids[0], best_scores[0]
