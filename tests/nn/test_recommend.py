"""`flashgnn recommend` and :mod:`flashgnn.recommend`: exact top-k, ANN recall, exclude-seen, bounded memory.

What is proved, and how (no torch, no server; a few seconds):

- exact top-k equals a brute-force ``np.lexsort((ids, -scores))`` over every
  candidate (score descending, ties to the smaller id) for every block shape
  down to 1 x 1, on integer-valued embeddings whose scores tie often (float
  sums of small integers are exact, so ties are real ties), with and without
  a candidate range;
- ``--exclude-seen`` removes exactly each query's neighbours (read from the
  dataset) and the query itself, nothing else;
- a tiny ``--memory-budget`` picks small blocks, the answer is unchanged, and
  the bytes numpy allocates while searching (tracemalloc) stay within the
  stated bound;
- faiss's HNSW reaches recall@10 >= 0.9 against exact on clustered data and
  the report carries the figure; without faiss, ``--index faiss`` is refused
  naming the package;
- bad input is refused by name: k <= 0, ids beyond the node count, a table
  of another dataset; the output is published only whole.
"""

from __future__ import annotations

import json
import tracemalloc

import numpy as np
import pytest

import flashgnn
from conftest import generated_dataset, run_cli
from flashgnn.recommend import RecommendError, memory_bound, recommend, topk_exact


@pytest.fixture(scope="module")
def ds(tmp_path_factory):
    d = tmp_path_factory.mktemp("recds")
    return generated_dataset(d, scale=8, edge_factor=4, dim=4, classes=2, seed=1)


@pytest.fixture(scope="module")
def emb(ds, tmp_path_factory):
    n = flashgnn.open(ds).num_nodes
    E = np.random.default_rng(0).integers(-2, 3, (n, 3)).astype(np.float32)
    p = tmp_path_factory.mktemp("recemb") / "emb.npy"
    np.save(p, E)
    return p


def brute(E, queries, lo, hi, k, exclude=None):
    out = np.full((len(queries), k), -1, np.int64)
    for r, q in enumerate(queries):
        s = (E[lo:hi] @ E[q]).astype(np.float64)
        ids = np.arange(lo, hi)
        if exclude is not None:
            keep = ~np.isin(ids, list(exclude(q)))
            s, ids = s[keep], ids[keep]
        order = np.lexsort((ids, -s))[:k]
        out[r, :len(order)] = ids[order]
    return out


@pytest.mark.parametrize("qb,cb", [(1, 1), (3, 7), (17, 5), (256, 256)])
def test_exact_equals_brute_force_argsort_with_ties(emb, qb, cb):
    E = np.load(emb)
    n = len(E)
    q = np.arange(n)
    ids, scores, _ = topk_exact(E, q, (0, n), 10, qb=qb, cb=cb)
    assert (ids == brute(E, q, 0, n, 10)).all()
    assert np.array_equal(scores, np.take_along_axis(E[q] @ E.T, ids, 1))
    ids, _, _ = topk_exact(E, q[::5], (40, 200), 7, qb=qb, cb=cb)
    assert (ids == brute(E, q[::5], 40, 200, 7)).all()


@pytest.mark.parametrize("cb", [1, 16, 100])
def test_norm_order_skips_pairs_and_keeps_the_exact_answer(ds, cb):
    """Skewed norms (integer rows times a power-law integer scale: exact float32 arithmetic, real ties): most
    queries finish after the largest-norm blocks, and the answer is still brute force's, seen pairs excluded."""
    meta = flashgnn.open(ds)
    n = meta.num_nodes
    rng = np.random.default_rng(3)
    E = (rng.integers(-3, 4, (n, 4)) * np.minimum(rng.zipf(1.6, n), 20)[:, None]).astype(np.float32)
    q = np.arange(n)
    ids, scores, st = topk_exact(E, q, (0, n), 5, qb=64, cb=cb)
    assert (ids == brute(E, q, 0, n, 5)).all()
    assert np.array_equal(scores, np.take_along_axis(E[q] @ E.T, ids, 1))
    assert st["pairs_total"] == n * n and st["pairs_scored"] < st["pairs_total"] // 2, st
    seen = {v: set(meta.neighbors(v).tolist()) | {v} for v in range(n)}
    def seen_of(block):
        rows = [r for r, v in enumerate(block) for _ in seen[int(v)]]
        cols = [u for v in block for u in sorted(seen[int(v)])]
        return np.asarray(rows, np.int64), np.asarray(cols, np.int64)
    ids, _, _ = topk_exact(E, q, (0, n), 5, qb=64, cb=cb, seen_of=seen_of)
    assert (ids == brute(E, q, 0, n, 5, exclude=lambda v: seen[v])).all()


def test_exclude_seen_removes_exactly_the_neighbours(ds, emb, tmp_path):
    E = np.load(emb)
    meta = flashgnn.open(ds)
    n = len(E)
    r = recommend(ds, tmp_path / "out", embeddings=emb, k=12, exclude_seen=True, progress=False, query_block=9,
                  candidate_block=31)
    ids = np.load(tmp_path / "out" / "ids.npy")
    assert (np.load(tmp_path / "out" / "queries.npy") == np.arange(n)).all()
    seen = {q: set(meta.neighbors(q).tolist()) | {q} for q in range(n)}
    assert (ids == brute(E, np.arange(n), 0, n, 12, exclude=lambda q: seen[q])).all()
    plain = recommend(ds, None, embeddings=emb, k=12, progress=False)["ids"]
    dropped = [set(plain[q].tolist()) - set(ids[q].tolist()) for q in range(n)]
    assert all(d <= seen[q] for q, d in enumerate(dropped)) and any(dropped)
    rep = json.loads((tmp_path / "out" / "recommend.json").read_text())
    assert rep["flashgnn_output"] == "recommend" and rep["exclude_seen"] and rep["memory_bound"] == r["memory_bound"]
    # published output is flashgnn output: --force replaces it; a second run without it is refused by name
    recommend(ds, tmp_path / "out", embeddings=emb, k=3, progress=False, force=True)
    with pytest.raises(FileExistsError):
        recommend(ds, tmp_path / "out", embeddings=emb, k=3, progress=False)


def test_tiny_memory_budget_bounds_what_a_step_allocates(ds, emb):
    E = np.load(emb)
    n = len(E)
    budget = 160 << 10
    small = recommend(ds, None, embeddings=emb, k=10, exclude_seen=True, progress=False, memory_budget=budget)
    assert small["query_block"] < n and small["memory_bound"] <= budget
    full = recommend(ds, None, embeddings=emb, k=10, exclude_seen=True, progress=False)
    assert (small["ids"] == full["ids"]).all()
    qb, cb = 32, 64
    out = (np.full((n, 10), -1, np.int64), np.full((n, 10), -np.inf, np.float32))
    tracemalloc.start()
    try:
        _, _, st = topk_exact(E, np.arange(n), (0, n), 10, qb=qb, cb=cb, out=out)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    bound = memory_bound(qb, cb, 10, E.shape[1], ordered=n)  # more than one block: the norm order
    assert st["peak_block_bytes"] == bound and peak <= bound, (peak, bound)
    with pytest.raises(RecommendError, match="--memory-budget 100 B: too small"):
        recommend(ds, None, embeddings=emb, k=10, progress=False, memory_budget=100)


def test_faiss_recall_on_clustered_embeddings(ds, tmp_path):
    faiss = pytest.importorskip("faiss")  # noqa: F841
    n = flashgnn.open(ds).num_nodes
    rng = np.random.default_rng(1)
    centers = rng.standard_normal((8, 16)).astype(np.float32) * 3
    E = (centers[rng.integers(0, 8, n)] + rng.standard_normal((n, 16)).astype(np.float32)).astype(np.float32)
    np.save(tmp_path / "e.npy", E)
    r = recommend(ds, None, embeddings=tmp_path / "e.npy", k=10, index="faiss", progress=False, exclude_seen=True)
    assert r["recall_sample"] == n and r["recall_at_k"] >= 0.9, r["recall_at_k"]
    exact = recommend(ds, None, embeddings=tmp_path / "e.npy", k=10, progress=False, exclude_seen=True)["ids"]
    assert abs(np.mean([len(set(a) & set(b)) / 10 for a, b in zip(r["ids"], exact)]) - r["recall_at_k"]) < 1e-3


def test_bad_input_is_refused_by_name(ds, emb, tmp_path, monkeypatch):
    n = flashgnn.open(ds).num_nodes
    for kw, frag in ((dict(k=0), "--k 0: must be an integer >= 1"),
                     (dict(nodes=f"0:{n + 5}"), f"outside [0, num_nodes {n})"),
                     (dict(nodes=np.array([1, n])), f"--nodes[1]: node id {n} >= num_nodes {n}"),
                     (dict(candidates="x"), "--candidates 'x': expected a range A:B"),
                     (dict(index="annoy"), "--index 'annoy'")):
        with pytest.raises(RecommendError) as e:
            recommend(ds, None, embeddings=emb, progress=False, **{"k": 5, **kw})
        assert frag in str(e.value)
    np.save(tmp_path / "short.npy", np.zeros((n - 1, 3), np.float32))
    with pytest.raises(RecommendError, match=rf"shape \[{n - 1}, 3\] does not match .*num_nodes {n}"):
        recommend(ds, None, embeddings=tmp_path / "short.npy", progress=False)
    # Hostile tables and embed.json: a non-finite value (named by row and byte offset), zero-width rows,
    # an embed.json that is not JSON or not an object.
    table = np.ones((n, 3), np.float32)
    table[n // 2, 1] = np.nan
    np.save(tmp_path / "nan.npy", table)
    with pytest.raises(RecommendError, match=rf"nan\.npy: row {n // 2} \(byte offset {128 + n // 2 * 12}\) holds a "
                                             "non-finite value"):
        recommend(ds, None, embeddings=tmp_path / "nan.npy", progress=False)
    np.save(tmp_path / "flat.npy", np.zeros((n, 0), np.float32))
    with pytest.raises(RecommendError, match=rf"shape \[{n}, 0\]: rows of 0 values score nothing"):
        recommend(ds, None, embeddings=tmp_path / "flat.npy", progress=False)
    for text, frag in (("{not json", "not JSON"), ("[1, 2]", "a JSON list, expected an object")):
        d = tmp_path / f"emb-{len(text)}"
        d.mkdir()
        np.save(d / "embeddings.npy", np.ones((n, 3), np.float32))
        (d / "embed.json").write_text(text)
        with pytest.raises(RecommendError, match=frag):
            recommend(ds, None, embeddings=d, progress=False)
    import builtins

    real = builtins.__import__
    monkeypatch.setattr(builtins, "__import__",
                        lambda name, *a, **k: (_ for _ in ()).throw(ImportError(name)) if name == "faiss" else real(name, *a, **k))
    with pytest.raises(RecommendError, match=r"--index faiss needs the faiss-cpu package"):
        recommend(ds, None, embeddings=emb, index="faiss", progress=False)


def test_cli_summary_and_json(ds, emb, tmp_path):
    r = run_cli("recommend", ds, "--embeddings", emb, "--k", "5", "--exclude-seen", "--out", tmp_path / "o")
    assert r.returncode == 0, r.stderr
    assert "recommended top-5 of 256 candidates for 256 queries (exact, exclude-seen)" in r.stdout
    assert np.load(tmp_path / "o" / "ids.npy").shape == (256, 5)
    r = run_cli("recommend", ds, "--embeddings", emb, "--k", "-1", "--json")
    assert r.returncode == 2 and "--k -1: must be >= 1" in r.stderr
