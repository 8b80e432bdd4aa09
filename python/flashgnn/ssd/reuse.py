"""`flashgnn bench --reuse`: feature reuse between consecutive mini-batches —
the page-based RDMA study's model (their Table 1 method) next to the reuse the
sampler actually shows on the dataset at hand.

The model: a node is a seed with probability ``p0 = batch_size / N``; the
probability mass reaching each node after k hops is ``P^k = P^0 A^k`` (clipped
to 1), and ``P(v in S) = 1 - prod_k (1 - P^k_v)`` (the study writes the
inclusion-exclusion form for two hops). The study propagates over the full
adjacency ``A``; with fanouts the sampler keeps each neighbor of ``u`` with
probability ``min(1, f / deg u)``, so a second column uses that weighted
``A_f``. Batches are independent draws, so the share of a batch's nodes that
the next batch needs again is ``sum P^2 / sum P``; the study's table reports
the mean ``P(v in S)`` and the expected subgraph size, printed here too.

The measurement samples consecutive batches (structure only: no feature
row is read) and counts ``|S_i ∩ S_i+1| / |S_i|`` over their unique node sets.
"""

from __future__ import annotations

import numpy as np


def _csr(ds, chunk: int = 1 << 16):
    """Whole adjacency as (indptr, indices), read in chunks of nodes."""
    ptrs, idxs, base = [np.zeros(1, np.int64)], [], 0
    for lo in range(0, ds.num_nodes, chunk):
        ptr, idx = ds.neighbors_csr(np.arange(lo, min(lo + chunk, ds.num_nodes)))
        ptrs.append(ptr[1:] + base)
        idxs.append(idx)
        base += len(idx)
    return np.concatenate(ptrs), np.concatenate(idxs) if idxs else np.zeros(0, np.int64)


def model(indptr, indices, n: int, batch_size: int, fanouts: list[int]) -> dict:
    deg = np.diff(indptr)
    src = np.repeat(np.arange(n), deg)  # edge u -> indices[e]: mass flows from u to its neighbors
    out = {}
    for name, weighted in (("full", False), ("fanout", True)):
        p = np.full(n, min(batch_size / n, 1.0))
        miss = 1.0 - p
        for f in fanouts:
            w = p[src]
            if weighted:
                keep = np.ones(n) if f < 0 else np.minimum(1.0, f / np.maximum(deg, 1))
                w = w * keep[src]
            p = np.minimum(np.bincount(indices, weights=w, minlength=n), 1.0)
            miss *= 1.0 - p
        pv = 1.0 - miss
        out[name] = {"mean_p": float(pv.mean()), "expected_nodes": float(pv.sum()),
                     "reuse": float((pv * pv).sum() / max(pv.sum(), 1e-12))}
    return out


def measure(ds, fanouts, batch_size: int, batches: int, seed: int) -> dict:
    from flashgnn.sample.sampler import Sampler

    pool = ds.split("train") if "train" in ds.split_names else np.arange(ds.num_nodes)
    order = np.random.default_rng(seed).permutation(pool)
    # Every engine gives the same batches; uring reads only the pages the
    # batches touch (the memory engine would load the whole dataset first).
    s = Sampler(ds.path, fanouts, engine="uring", labels=False, features=False)
    prev, shares, sizes = None, [], []
    for i in range(batches + 1):
        seeds = order[(i * batch_size) % len(order):][:batch_size]
        cur = np.unique(s.sample(seeds, seed=seed + i).n_id)
        if prev is not None:
            shares.append(len(np.intersect1d(prev, cur, assume_unique=True)) / max(len(prev), 1))
        sizes.append(len(cur))
        prev = cur
    return {"reuse": float(np.mean(shares)), "mean_nodes": float(np.mean(sizes)),
            "mean_p": float(np.mean(sizes)) / ds.num_nodes}


def report(path, fanouts, batch_size: int, batches: int, seed: int) -> dict:
    """Model (full adjacency and fanout-weighted) and measurement, with the
    expected subgraph's feature bytes."""
    from flashgnn.store.dataset import Dataset

    ds = Dataset(path)
    indptr, indices = _csr(ds)
    m = model(indptr, indices, ds.num_nodes, batch_size, fanouts)
    got = measure(ds, fanouts, batch_size, batches, seed)
    row = ds.feature_dim * np.dtype(ds.feature_dtype).itemsize
    return {"batch_fraction": batch_size / ds.num_nodes, "row_bytes": int(row), "model": m, "measured": got}


def print_report(r: dict, human_bytes) -> None:
    row = r["row_bytes"]
    print(f"feature reuse between consecutive batches (seeds = {100 * r['batch_fraction']:.3f} % of the nodes):")
    print(f"  {'':<34}{'mean P(v in S)':>15}{'subgraph':>12}{'features':>11}{'reuse':>8}")
    for name, label in (("full", "model, full adjacency (RDMA study)"), ("fanout", "model, fanout-weighted")):
        x = r["model"][name]
        print(f"  {label:<34}{x['mean_p']:15.4f}{x['expected_nodes']:12,.0f}{human_bytes(x['expected_nodes'] * row):>11}"
              f"{x['reuse']:8.1%}")
    x = r["measured"]
    print(f"  {'measured (sampler)':<34}{x['mean_p']:15.4f}{x['mean_nodes']:12,.0f}"
          f"{human_bytes(x['mean_nodes'] * row):>11}{x['reuse']:8.1%}")
