"""Link-prediction evaluation for ``flashgnn train --task link``: which metric a dataset's split is judged
by, and the metric's value for the current model, in bounded memory.

Metrics are computed by the ``ogb`` package's ``ogb.linkproppred.Evaluator`` — never re-implemented here
(its ROC-AUC is scikit-learn's ``roc_auc_score``; MRR and Hits@K are OGB's own code). ``--link-metric auto``
chooses, in this order:

1. an OGB link dataset (the build's source directory is named like ``ogbl_collab``, as OGB downloads it):
   its own evaluator — ogbl-collab Hits@50, -ddi Hits@20, -ppa Hits@100, -citation2 MRR, -vessel ROC-AUC;
2. otherwise by the split's shape: K > 1 fixed negatives per positive (``--neg-per-pos K``, citation2-style
   ``[n, K]``) → MRR (the ``ogbl-citation2`` evaluator); one negative per positive, or free negative pairs
   → ROC-AUC (the ``ogbl-vessel`` evaluator, which flattens both sides).

An explicit ``--link-metric`` names the evaluator the same way (``METRIC_EVALUATORS``); ``mrr`` needs
negatives per positive, the others take either shape (``[n, K]`` negatives are then flattened into pairs).

How a pair is scored (``--link-eval``), both over ``--eval-fanout`` neighbourhoods:

- ``batches`` — PyG's link-prediction recipe: the pairs go through :class:`flashgnn.LinkNeighborLoader` (no
  negative sampling: the stored negatives are pairs of their own) and the model scores each link batch as in
  training, both endpoints seeds of one sampled subgraph;
- ``embeddings`` — OGB's: every distinct endpoint is embedded once by a :class:`flashgnn.NeighborLoader`
  pass over them and the pairs decoded from those rows, which costs one subgraph per node instead of one per
  pair (1,000 negatives per positive: ogbl-citation2).

With every neighbour sampled the two give the same scores. With finite fanouts they differ where a node's
rows depend on its position in the batch: in a link batch an endpoint that is also another pair's neighbour
is a seed, expanded with the first hop's fanout. Attention models feel this (R-GAT's test ROC-AUC on
``benchmarks/link_accuracy.py --typed``: 1.7 points lower scored by embeddings than by link batches, the same
weights; GraphSAGE: 0.05). ``auto`` takes ``batches`` (what PyG's recipe reports) unless the split has K > 1
negatives per positive.

Memory: positives are scored in chunks of at most ``EVAL_PAIRS_MAX`` scored pairs (each chunk's distinct
endpoints embedded at once, or its pairs loaded in link batches). What is kept across chunks is what the
evaluator needs: 4 B per scored pair for ROC-AUC and Hits@K (they rank every positive against all
negatives), 4 B per positive for MRR (OGB's ``mrr_list``, per chunk).
"""

from __future__ import annotations

import os

import numpy as np

from flashgnn.train.config import LINK_METRICS, TrainError  # noqa: F401 - LINK_METRICS: re-exported

# Metric name -> the OGB evaluator that computes it (the --link-metric choices, less auto).
METRIC_EVALUATORS = {"rocauc": "ogbl-vessel", "mrr": "ogbl-citation2", "hits@20": "ogbl-ddi",
                     "hits@50": "ogbl-collab", "hits@100": "ogbl-ppa"}
# Scored pairs per evaluation chunk: 2^20 pairs embed at most 2^21 distinct endpoints, 1 GiB of float32
# rows at 128 wide (the embeddings are freed between chunks).
EVAL_PAIRS_MAX = 1 << 20
# OGB's homogeneous link datasets (their evaluators' names); the KG ones (wikikg2, biokg) are typed.
OGB_LINK_DATASETS = ("ogbl-ppa", "ogbl-collab", "ogbl-ddi", "ogbl-citation2", "ogbl-vessel")


def evaluator(name: str):
    """``ogb.linkproppred.Evaluator(name)``; a missing ``ogb`` package is a :class:`TrainError` that says how
    to install it."""
    try:
        from ogb.linkproppred import Evaluator
    except ImportError as e:
        raise TrainError(f"--task link evaluates with the ogb package's Evaluator, which cannot be imported "
                         f"({e}): pip install ogb (or flashgnn[train])") from None
    return Evaluator(name=name)


def ogb_dataset_name(ds) -> str | None:
    """The OGB link dataset ``ds`` was imported from (its build source directory, ``ogbl_collab`` as OGB
    names it), or None."""
    src = (ds.manifest.get("build") or {}).get("source") or ""
    name = os.path.basename(os.path.normpath(str(src))).replace("_", "-")
    return name if name in OGB_LINK_DATASETS else None


def split_shape(ds, split: str) -> dict:
    """``{"positives", "k", "neg_pairs"}`` of link split ``split`` (from the manifest: nothing is read)."""
    s = (ds.link_split_info or {}).get("splits", {}).get(split) or {}
    return {"positives": int(s.get("positives", 0)), "k": int(s.get("neg_per_positive", 0)),
            "neg_pairs": int(s.get("neg_pairs", 0))}


def choose_metric(ds, choice: str, eval_splits) -> tuple[str, str]:
    """``(metric, evaluator name)`` for ``--link-metric choice`` on ``ds`` (module docs); raises
    :class:`TrainError` where a split cannot be judged by it."""
    shapes = {s: split_shape(ds, s) for s in eval_splits}
    for s, sh in shapes.items():
        if not sh["k"] and not sh["neg_pairs"]:
            raise TrainError(f"{ds.path}: link split {s!r} has no negatives to evaluate against (rebuild with "
                             "--link-split VAL,TEST --neg-per-pos K, K >= 1)")
    if choice == "auto":
        name = ogb_dataset_name(ds)
        if name is not None:
            metric = next(m for m, n in METRIC_EVALUATORS.items() if n == name)
            return metric, name
        metric = "mrr" if shapes and all(sh["k"] > 1 for sh in shapes.values()) else "rocauc"
        return metric, METRIC_EVALUATORS[metric]
    if choice not in METRIC_EVALUATORS:
        raise TrainError(f"--link-metric {choice}: expected one of {', '.join(LINK_METRICS)}")
    if choice == "mrr":
        for s, sh in shapes.items():
            if not sh["k"]:
                raise TrainError(f"--link-metric mrr ranks each positive among its own negatives; link split {s!r} "
                                 f"of {ds.path} has free negative pairs only (choose rocauc or hits@K)")
    return choice, METRIC_EVALUATORS[choice]


def node_embeddings(model, ds, nodes: np.ndarray, fanouts, batch_size: int, device, normalize: str = "none",
                    **loader_options):
    """``model.encode`` of ``nodes`` (original ids), ``[len(nodes), out_dim]`` in their order: one
    :class:`flashgnn.NeighborLoader` pass over them (the seeds of each batch are its first rows). Call under
    ``torch.no_grad()`` with the model in eval mode. ``loader_options`` go to the loader (``degrees=True``
    for the degree-normalised models, ``seed``, ``engine``, ``cache``...)."""
    return _embeddings(model, ds, None, nodes, fanouts, batch_size, device, normalize, **loader_options)


def typed_node_embeddings(model, ds, node_type: str, nodes: np.ndarray, num_neighbors, batch_size: int, device,
                          normalize: str = "none", **loader_options):
    """:func:`node_embeddings` on a typed dataset for a :class:`flashgnn.nn.link.HeteroLinkModel`: the rows of
    ``node_type``'s ``nodes`` (local ids), from one typed :class:`flashgnn.NeighborLoader` pass over them
    (``num_neighbors`` per edge type, PyG's dict)."""
    return _embeddings(model, ds, node_type, nodes, num_neighbors, batch_size, device, normalize, **loader_options)


def _embeddings(model, ds, node_type, nodes, num_neighbors, batch_size, device, normalize, **loader_options):
    import torch

    from flashgnn.loader.neighbor import NeighborLoader
    from flashgnn.nn.zoo import normalize_batch
    from flashgnn.train.feeder import DeviceFeeder

    seeds = nodes if node_type is None else (node_type, nodes)
    loader = NeighborLoader(ds, num_neighbors, input_nodes=seeds, batch_size=batch_size, shuffle=False,
                            **loader_options)
    out = []
    for data in DeviceFeeder(loader, device):
        normalize_batch(data, normalize)
        out.append(model.encode(data) if node_type is None else model.encode(data, node_type))
    if not out:
        return torch.empty(0, model.out_dim, device=device)
    return torch.cat(out)


def _score(model, emb_src, emb_dst, src, dst):
    """Logits of pairs ``src[i] -> dst[i]`` (int64 arrays), from the chunk's embeddings ``(rows, ids)`` of
    the sources and of the destinations."""
    import torch

    (hs, ws), (hd, wd) = emb_src, emb_dst
    return model.decode(hs[torch.from_numpy(np.searchsorted(ws, src)).to(hs.device)],
                        hd[torch.from_numpy(np.searchsorted(wd, dst)).to(hd.device)]).float().cpu()


def _link_batch_scores(model, ds, src, dst, fanouts, batch_size, device, normalize, edge_type, loader_options):
    """Logits of pairs ``src[i] -> dst[i]`` scored by link batches (``--link-eval batches``, module docs)."""
    import torch

    from flashgnn.loader.link import LinkNeighborLoader
    from flashgnn.nn.zoo import normalize_batch
    from flashgnn.train.feeder import DeviceFeeder

    eli = np.stack([np.asarray(src, dtype=np.int64), np.asarray(dst, dtype=np.int64)])
    opts = {k: v for k, v in loader_options.items() if k != "device_cache"}  # no device tier for link batches
    loader = LinkNeighborLoader(ds, fanouts, edge_label_index=eli if edge_type is None else (edge_type, eli),
                                batch_size=max(1, batch_size), shuffle=False, **opts)
    out = []
    for b in DeviceFeeder(loader, device):
        normalize_batch(b, normalize)
        out.append(model(b).float().cpu())
    return torch.cat(out) if out else torch.empty(0)


def eval_mode(choice: str, k: int) -> str:
    """``--link-eval`` resolved for a split of ``k`` stored negatives per positive (module docs)."""
    if choice == "auto":
        return "embeddings" if k > 1 else "batches"
    return choice


def evaluate_split(model, ds, split: str, metric: str, ev, fanouts, batch_size: int, device, *,
                   normalize: str = "none", max_positives: int | None = None, progress=None, edge_type=None,
                   mode: str = "embeddings", **loader_options) -> float:
    """The value of ``metric`` (computed by the OGB evaluator ``ev``) for ``model`` on link split ``split``:
    its positives against its stored negatives (module docs). ``max_positives`` evaluates a prefix (smoke
    runs: ``--eval-batches``); ``progress`` is advanced by the pairs scored. A typed split (``edge_type``
    given, ``fanouts`` PyG's per-edge-type dict) holds local ids: sources of ``edge_type[0]``, destinations
    and negatives of ``edge_type[2]``, embedded by one typed pass per node type. ``mode``: ``embeddings`` or
    ``batches`` (module docs); ``batch_size`` counts seeds, so a link batch holds half as many pairs."""
    import torch

    ls = ds.link_split(split)
    free = ds.link_negative_pairs(split)
    src, dst, neg = ls.src, ls.dst, ls.neg
    if max_positives is not None:
        src, dst = src[:max_positives], dst[:max_positives]
        neg = None if neg is None else neg[:max_positives]
        free = None if free is None else (free[0][:max_positives], free[1][:max_positives])
    k = 0 if neg is None else neg.shape[1]
    step = max(1, EVAL_PAIRS_MAX // (1 + k))
    types = (None, None) if edge_type is None else (edge_type[0], edge_type[-1])

    def embed(s_ids, *d_ids):
        """(rows, ids) of the sources and of the destinations; one pass when both are of one node type."""
        def pass_over(t, *ids):
            nodes = np.unique(np.concatenate([np.asarray(a, dtype=np.int64).ravel() for a in ids]))
            return _embeddings(model, ds, t, nodes, fanouts, batch_size, device, normalize, **loader_options), nodes
        if types[0] == types[1]:
            both = pass_over(types[0], s_ids, *d_ids)
            return both, both
        return pass_over(types[0], s_ids), pass_over(types[1], *d_ids)

    def pairs(s, d):
        return _link_batch_scores(model, ds, s, d, fanouts, batch_size // 2, device, normalize, edge_type,
                                  loader_options)

    pos_scores, neg_scores, mrr = [], [], []
    model.eval()
    with torch.no_grad():
        for i in range(0, len(src), step):
            s, d = src[i:i + step], dst[i:i + step]
            nk = None if neg is None else neg[i:i + step]
            if mode == "batches":  # positives, then each one's K negatives, in one pass of link batches
                ns = np.repeat(s, k)
                nd = ns if nk is None else np.asarray(nk).reshape(-1)  # k == 0: both empty
                both = pairs(np.concatenate([s, ns]), np.concatenate([d, nd]))
                p, n = both[:len(s)], (None if nk is None else both[len(s):].view(len(s), k))
            else:
                es, ed = embed(s, d) if nk is None else embed(s, d, nk)
                p = _score(model, es, ed, s, d)
                n = None if nk is None else _score(model, es, ed, np.repeat(s, k), nk.reshape(-1)).view(len(s), k)
            pos_scores.append(p)
            if nk is not None:
                if metric == "mrr":
                    mrr.append(ev.eval({"y_pred_pos": p, "y_pred_neg": n})["mrr_list"])
                else:
                    neg_scores.append(n.reshape(-1))
            if progress is not None:
                progress.update(len(s) * (1 + k))
        if free is not None and metric != "mrr":
            for i in range(0, len(free[0]), EVAL_PAIRS_MAX):
                s, d = free[0][i:i + EVAL_PAIRS_MAX], free[1][i:i + EVAL_PAIRS_MAX]
                neg_scores.append(pairs(s, d) if mode == "batches" else _score(model, *embed(s, d), s, d))
                if progress is not None:
                    progress.update(len(s))
    if metric == "mrr":
        return float(torch.cat(mrr).mean()) if mrr else float("nan")
    out = ev.eval({"y_pred_pos": torch.cat(pos_scores), "y_pred_neg": torch.cat(neg_scores)})
    return float(out[metric])


def eval_pairs(ds, split: str, metric: str, max_positives: int | None = None) -> int:
    """Pairs :func:`evaluate_split` scores (the progress bar's total)."""
    sh = split_shape(ds, split)
    n = sh["positives"] if max_positives is None else min(sh["positives"], max_positives)
    free = 0 if metric == "mrr" else (sh["neg_pairs"] if max_positives is None else min(sh["neg_pairs"], max_positives))
    return n * (1 + sh["k"]) + free
