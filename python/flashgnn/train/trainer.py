"""The training loop: :class:`Trainer` runs one :class:`~flashgnn.train.config.TrainConfig`.

    from flashgnn.train import TrainConfig, Trainer, fit
    summary = Trainer(TrainConfig("data/demo", epochs=3, fanout="25,10")).fit()
    summary = fit("data/demo", epochs=3)                       # the same
    flashgnn train DATASET --model sage --fanout 25,10 --batch-size 1024 --epochs 3
    torchrun --nproc-per-node 2 -m flashgnn.train DATASET ...      # data-parallel (DDP)

The trainer never samples: :class:`flashgnn.NeighborLoader` producers (Rust,
GIL released) prepare the next ``--prefetch`` batches while the current one
trains. The time the training loop spends blocked waiting for a batch is
reported as *data wait* (SmartSAGE's GPU-idle share).

Determinism: for a given ``--seed`` the seed order, the sampled neighbors,
the initial weights and dropout are fixed, so two runs (and a run resumed
from a checkpoint) produce the same weights bit for bit on CPU.

Distributed: launched by ``torchrun`` (or SLURM via ``torchrun``'s
rendezvous), ``WORLD_SIZE``/``RANK``/``LOCAL_RANK`` select DDP
(:mod:`flashgnn.train.dist`). Each rank trains on its own equal-sized shard of
each epoch's seed permutation; evaluation counts are summed over ranks; rank 0
logs and writes checkpoints.

``--task link`` trains link prediction in the same loop (``Trainer`` docs; docs/training.md).

Invariants: the config is never changed (derived values — parsed fanouts,
the memory-budget split, the resolved cache and lookahead sizes — are
attributes of the Trainer); every error is a :class:`TrainError` (or the
store's own exception); only the command line exits the process.
"""

from __future__ import annotations

import json
import os
import random
import time
from pathlib import Path

import numpy as np

from flashgnn import _core
from flashgnn._util import human_bytes, proc_status_bytes
from flashgnn.nn.checkpoint import (CHECKPOINT_FILE, CHECKPOINT_FORMAT, CHECKPOINT_VERSION, load_checkpoint,
                                    save_checkpoint)
from flashgnn.nn.zoo import (DEGREE_MODELS, HETERO_MODELS, LINK_MODELS, MODELS, build_hetero_model, build_model,
                             forward, normalize_batch, seed_count, seed_labels)

# --task link: the models whose batches carry whole-graph degrees (flashgnn.nn.link.DEGREE_LINK_MODELS; that
# module imports torch).
DEGREE_LINK_MODELS = ("gcn", "lightgcn", "ngcf")
from flashgnn.train.config import TrainConfig, TrainError, parse_fanout, parse_type_fanouts, parser
from flashgnn.train.dist import Dist
from flashgnn.train.feeder import DeviceFeeder

__all__ = ["Trainer", "TrainConfig", "TrainError", "evaluate", "check_labels", "default_threads", "parser", "run"]


# The splits a run evaluates on, where the dataset has them ("train" is required: it is what is trained on).
EVAL_SPLITS = ("val", "test")
# What picks the best epoch (and drives --patience), in the words the run prints.
SELECT_WORDS = {"val_acc": "validation accuracy", "train_acc": "train accuracy", "val_metric": "validation metric"}
# Seconds between refreshes of the epoch bar's figures (loss, seeds/s, data wait, cache hit rates): reading
# them costs a host sync and a read of every tier's counters, not worth paying on every step.
POSTFIX_INTERVAL_S = 0.5


def splits_note(eval_splits) -> str:
    """The one line a run prints at start when the dataset lacks ``val`` or ``test``: what it evaluates on
    and what then selects the best epoch."""
    if not eval_splits:
        return ("no 'val' or 'test' split: training on 'train' without evaluation; best-epoch selection and "
                "--patience use train accuracy")
    if "val" not in eval_splits:
        return ("no 'val' split: evaluating on 'test'; best-epoch selection and --patience use train accuracy "
                "(never test accuracy)")
    return "no 'test' split: evaluating on 'val' (best-epoch selection and --patience as usual); no test accuracy"


def _link_splits_note(eval_splits) -> str:
    """:func:`splits_note` for --task link (train accuracy: scored pairs on the right side of logit 0)."""
    if not eval_splits:
        return ("no 'val' or 'test' link positives: training without evaluation; best-epoch selection and "
                "--patience use train accuracy")
    if "val" not in eval_splits:
        return ("no 'val' link positives: evaluating on 'test'; best-epoch selection and --patience use train "
                "accuracy (never the test metric)")
    return "no 'test' link positives: evaluating on 'val' (best-epoch selection and --patience as usual)"


def _accuracy_words(best: dict | None, last: dict, key: str, eval_splits, metric: str | None = None) -> str:
    """The figures of the final ``trained ...`` line: the best epoch's test accuracy (``metric``: the link
    metric, where there is a test split) at its selecting figure, and the final epoch's."""
    if best is None:
        return "no epoch trained"
    sel, _, kind = key.partition("_")
    test = "test_metric" if metric else "test_acc"
    word = {"acc": "acc", "metric": metric}[kind]
    head = f"test {metric or 'acc'} {best[test]:.4f} at the " if "test" in eval_splits else ""
    final = [f"test {last[test]:.4f}"] if "test" in eval_splits else []
    final.append(f"{sel} {last[key]:.4f}")
    return f"{head}best {sel} {word} {best[key]:.4f} (epoch {best['epoch']}; final epoch: {', '.join(final)})"


def _hit_rate(cache) -> float:
    """Cumulative share of extent requests the cache served (both tiers)."""
    st = cache.stats()
    hits = st["static_hits"] + st["dynamic_hits"]
    return hits / max(hits + st["misses"], 1)


def core_share(local_world: int = 1) -> int:
    """This process's share of the cores it may use (affinity and cgroup
    quota, ``budget.cpu_cores``) among the local ranks; at least 1."""
    from flashgnn.sample.budget import cpu_cores

    return max(1, cpu_cores() // max(local_world, 1))


def default_threads(local_world: int = 1) -> int:
    """torch intra-op threads: this process's share of the cores, less one
    core left to the sampling producers (on 2 cores: 1 thread). Overlap needs
    the producer to run while the step computes; oversubscribed cores make
    the epoch slower than the sum of its parts."""
    return max(1, core_share(local_world) - 1)


def default_workers(threads: int, local_world: int = 1) -> int:
    """Sampling producers: the cores of this process's share the trainer's
    ``threads`` leave, at least 1. With the default threads that is one
    producer; a trainer given fewer threads (``--threads``: a small model,
    preparation-bound) gets the freed cores as producers. Their buffers are
    counted by the memory budget's split (``budget.split``)."""
    return max(1, core_share(local_world) - int(threads))


def _rng_state() -> dict:
    import torch

    # Every value is a tensor, a number, a string or a tuple of them, so the
    # checkpoint loads with torch.load(..., weights_only=True) (numpy's state
    # holds an ndarray of uint32 keys: stored as an int64 tensor).
    name, keys, pos, has_gauss, cached = np.random.get_state()
    s = {"torch": torch.get_rng_state(), "numpy": (name, torch.from_numpy(keys.astype(np.int64)), int(pos),
                                                   int(has_gauss), float(cached)),
         "python": random.getstate()}
    if torch.cuda.is_available():
        s["cuda"] = torch.cuda.get_rng_state_all()
    return s


def _set_rng_state(s: dict) -> None:
    import torch

    torch.set_rng_state(s["torch"])
    name, keys, pos, has_gauss, cached = s["numpy"]
    keys = keys.numpy() if isinstance(keys, torch.Tensor) else np.asarray(keys)
    np.random.set_state((name, keys.astype(np.uint32), pos, has_gauss, cached))
    random.setstate(s["python"])
    if "cuda" in s and torch.cuda.is_available():
        torch.cuda.set_rng_state_all(s["cuda"])


def check_labels(ds, splits=("train", "val", "test")) -> None:
    """Every label a split will train or evaluate on is in ``[0, num_classes)``
    (or -1, unlabeled): checked before the first step, so a label beyond the
    manifest's class count is named with its file, node, split position,
    value and bound instead of surfacing as torch's "Target 99 is out of
    bounds" mid-epoch. Raises ValueError."""
    import flashgnn

    bound = ds.num_classes
    labels_file = ds.labels_file
    for s in splits:
        ids = np.asarray(ds.split(s), dtype=np.int64)
        if ids.size == 0:
            continue
        try:
            y = np.asarray(ds.labels(ids), dtype=np.int64)
        except flashgnn.CorruptDatasetError:
            # The store refuses the whole file at its first out-of-range value;
            # read it (its checksum passed) to name the split's node as below.
            y = np.asarray(np.load(labels_file, mmap_mode="r")[ids], dtype=np.int64)
        bad = np.flatnonzero((y >= bound) | (y < -1))
        if bad.size:
            i = int(bad[0])
            node, v = int(ids[i]), int(y[i])
            raise ValueError(
                f"{labels_file}: row {node} (node {node}, position {i} of the {s!r} split): label {v} is outside "
                f"[0, {bound}) (num_classes {bound} in {os.path.join(ds.path, _core.MANIFEST_FILE)}); {bad.size} such "
                f"label(s) in the {s!r} split")


def evaluate(model, loader, device, normalize: str = "none", max_batches: int | None = None,
             progress=None) -> tuple[int, int]:
    """(correct, total) over a loader's seeds (its first ``max_batches``
    batches when given); ``progress`` is a bar to advance per batch."""
    import torch

    model.eval()
    correct = total = 0
    with torch.no_grad():
        for i, data in enumerate(DeviceFeeder(loader, device)):
            if max_batches is not None and i >= max_batches:
                break
            if progress is not None:
                progress.update(1)
            normalize_batch(data, normalize)
            y = seed_labels(data)
            keep = y >= 0
            pred = forward(model, data).argmax(-1)
            correct += int((pred[keep] == y[keep]).sum())
            total += int(keep.sum())
    return correct, total


class Trainer:
    """One training run of ``config`` (validated here, before anything is opened).

    :meth:`fit` trains and returns the summary dict (the figures of the
    final ``trained ...`` line, plus ``model_obj``: the best epoch's model,
    and ``history``: one dict per epoch); :meth:`evaluate` measures the
    current model on a split. :meth:`setup` (called by both) opens the
    dataset, model and loaders; derived values are set then: ``fanouts``,
    ``eval_fanouts``, ``budget_split`` (the ``--memory-budget`` split, None
    without one), ``cache_budget``, ``lookahead``, ``lookahead_budget``,
    ``device``, ``model``, ``dataset``, ``train_loader`` and
    ``train_loader_options`` (the arguments it was built with: a bare loop
    passes them to :class:`flashgnn.NeighborLoader` for the same batches),
    ``eval_splits`` and ``select_by``.

    ``--task link`` (``link`` True) runs the same loop over :class:`flashgnn.LinkNeighborLoader` batches of
    the dataset's link split with binary negatives and BCE on a :class:`flashgnn.nn.link.LinkModel`; val and
    test are judged by the OGB evaluator's metric (``metric``; :mod:`flashgnn.train.link`), which then
    selects the best epoch (``select_by`` = ``"val_metric"``) where "accuracy" is said below.

    Splits: ``train`` is required. Evaluation runs on whichever of ``val``
    and ``test`` the dataset has (``eval_splits``; a one-line note at start
    says when one is missing). The best epoch — the model :meth:`fit`
    returns and the checkpoint's ``model`` — is the one with the best
    validation accuracy; without a ``val`` split, the best training accuracy
    (``select_by`` = ``"train_acc"``; test accuracy never selects), and
    ``patience`` counts epochs without a better one of the same. Accuracies
    of absent splits are None in the history and the summary.
    """

    def __init__(self, config: TrainConfig):
        if not isinstance(config, TrainConfig):
            raise TypeError(f"Trainer(config): expected a TrainConfig, got {type(config).__name__}")
        config.validate()
        self.config = config
        self.fanouts = parse_fanout(config.fanout)
        self.eval_fanouts = parse_fanout(config.eval_fanout) if config.eval_fanout else self.fanouts
        self.budget_split = None
        self.cache_budget = config.cache_budget
        self.lookahead = config.lookahead or 0
        self.lookahead_budget = config.lookahead_budget
        self.history: list[dict] = []
        self.train_loader_options: dict | None = None  # the NeighborLoader's arguments (None: --presampled)
        self.summary: dict | None = None
        self._ready = False

    # -- set-up -----------------------------------------------------------------------------------------

    def setup(self) -> None:
        """Open everything the run needs, in the order that fails cheapest first: device, dataset checks,
        model (and the checkpoint to resume), caches, loaders."""
        if self._ready:
            return
        c = self.config
        self._open_runtime(c)
        self._open_dataset(c)
        self._build_model(c)
        self._size_memory(c)
        self._open_caches(c)
        self._open_loaders(c)
        self._ready = True

    def _open_runtime(self, c) -> None:
        """The process group and device, what this process prints, its threads and producers."""
        import torch

        self.dist = dist_ctx = Dist(c.device)
        self.device = dist_ctx.device
        self.progress = dist_ctx.main and not c.no_progress and not c.quiet
        self.chatty = dist_ctx.main and not c.quiet  # per-epoch lines and set-up notes
        threads = c.threads or default_threads(dist_ctx.local_world)
        torch.set_num_threads(threads)
        self.workers = c.workers or default_workers(threads, dist_ctx.local_world)

    def _open_dataset(self, c) -> None:
        """Open the dataset and refuse one training cannot use; choose the splits evaluated."""
        import flashgnn

        chatty = self.chatty
        self.dataset = ds = flashgnn.open(c.dataset)
        self.typed = ds.is_typed
        self.link = c.task == "link"
        self.metric = None  # --task link: the metric's name (rocauc, mrr, hits@K)
        self.edge_type = None  # --task link on a typed dataset: the link split's edge type
        if self.link:
            return self._open_link(c, ds)
        if self.typed:
            self._open_typed(c, ds)
        elif c.model not in MODELS:
            raise TrainError(f"--model {c.model} takes a typed dataset (node and edge types); {ds.path} is "
                             f"homogeneous: choose one of {', '.join(MODELS)}")
        elif c.type_fanouts or c.target_type:
            raise TrainError(f"--type-fanouts and --target-type take a typed dataset; {ds.path} is homogeneous")
        if not ds.num_classes:
            raise TrainError(f"{ds.path}: dataset has no labels (for an edge list: flashgnn build "
                             "EDGES OUT --labels FILE, with `node label` lines or a .npy array [N])")
        if ds.feature_dim == 0 and not self.typed:
            raise TrainError(
                f"{ds.path}: dataset has no node features (feature dim 0 in "
                f"{os.path.join(ds.path, _core.MANIFEST_FILE)}); a model on zero-width input learns only the class prior. "
                "Rebuild with --features FILE (.npy [N, D] or text rows), or with --synthetic-features D (random "
                "features: the graph structure then carries all the signal). One-hot identity features are not "
                "offered: they take N x N values (N = number of nodes)")
        if "train" not in ds.split_names:
            raise TrainError(f"{ds.path}: no 'train' split (build with --make-splits "
                             "TRAIN,VAL,TEST, e.g. 0.6,0.2,0.2: stratified by class)")
        # Evaluation covers the splits the dataset has; without `val` the best epoch (and --patience) is judged
        # by training accuracy, never by test accuracy (that would select on the data the result is reported on).
        self.eval_splits = tuple(s for s in EVAL_SPLITS if s in ds.split_names)
        self.select_by = "val_acc" if "val" in self.eval_splits else "train_acc"
        if chatty and len(self.eval_splits) < len(EVAL_SPLITS):
            print(splits_note(self.eval_splits), flush=True)
        try:
            check_labels(ds, ("train", *self.eval_splits))
        except ValueError as e:
            raise TrainError(str(e)) from None

    def _open_link(self, c, ds) -> None:
        """--task link: the dataset's link split, the splits evaluated and their metric (flashgnn.train.link)."""
        from flashgnn.train import link

        info = ds.link_split_info
        if not info:
            raise TrainError(f"{ds.path}: dataset has no link-prediction split, which --task link trains on; build "
                             "it with --link-split VAL,TEST (e.g. flashgnn build IN OUT --link-split 0.1,0.1; "
                             "docs/input.md)")
        self.edge_type = ds.link_edge_type  # typed: the split's (src, rel, dst); its ids are local
        if self.typed:
            if self.edge_type is None:
                raise TrainError(f"{ds.path}: a typed dataset whose link split names no edge type (rebuild with "
                                 "--link-split VAL,TEST --link-edge-type SRC__REL__DST)")
            self._typed_setup(c, ds, "link")
        elif c.model not in LINK_MODELS:
            raise TrainError(f"--model {c.model} with --task link on a homogeneous dataset: choose one of "
                             f"{', '.join(LINK_MODELS)} ({c.model} takes a typed dataset)")
        elif c.type_fanouts:
            raise TrainError(f"--type-fanouts takes a typed dataset; {ds.path} is homogeneous")
        splits = info.get("splits") or {}
        if not (splits.get("train") or {}).get("positives"):
            raise TrainError(f"{ds.path}: its link split has no 'train' edges (splits: {', '.join(splits) or 'none'})")
        self.eval_splits = tuple(s for s in EVAL_SPLITS if (splits.get(s) or {}).get("positives"))
        self.select_by = "val_metric" if "val" in self.eval_splits else "train_acc"
        if self.chatty and len(self.eval_splits) < len(EVAL_SPLITS):
            print(_link_splits_note(self.eval_splits), flush=True)
        self.metric, self.evaluator_name = link.choose_metric(ds, c.link_metric, self.eval_splits)
        self.link_eval_mode = link.eval_mode(c.link_eval, max([link.split_shape(ds, s)["k"] for s in self.eval_splits],
                                                               default=0))
        self.evaluator = link.evaluator(self.evaluator_name) if self.eval_splits else None
        # Memory-mapped: the training positives are every message-passing pair (16 B per edge), read by the
        # loader a group at a time (flashgnn.loader.link.GROUP_EDGES).
        self.train_edges = ds.link_split("train", mmap=True)
        if self.chatty:
            on = "" if self.edge_type is None else f" of edge type {'__'.join(self.edge_type)}"
            print(f"link prediction: {len(self.train_edges.src):,} training edges{on}, {c.negatives:g} random "
                  f"negative(s) "
                  f"each; {', '.join(self.eval_splits) or 'no split'} judged by {self.metric} "
                  f"(ogb Evaluator {self.evaluator_name!r})", flush=True)

    def _open_typed(self, c, ds) -> None:
        """A typed dataset: the node type classified, the model and fanouts it takes, and which node types get
        learnable embeddings (those without features)."""
        self._typed_setup(c, ds, "node")
        ds.target_type_override = c.target_type
        try:
            target = ds.target_type
        except KeyError as e:
            raise TrainError(f"--target-type {c.target_type}: {e.args[0]}") from None
        if not ds.node_type(target).get("labels"):
            raise TrainError(f"{ds.path}: node type {target!r} has no labels (node types with labels: "
                             f"{', '.join(t for t in ds.node_types if ds.node_type(t).get('labels')) or 'none'})")
        self.target = target
        if self.chatty:
            print(f"typed dataset: {len(ds.node_types)} node types, {len(ds.edge_types)} edge types; classifying "
                  f"{target!r}" + (f"; learnable embeddings for {', '.join(self.embed)} (no features)"
                                   if self.embed else ""), flush=True)

    def _typed_setup(self, c, ds, task: str) -> None:
        """What every task on a typed dataset needs: the model name checked, fanouts per edge type, and which
        node types get learnable embeddings (those without features)."""
        if c.model not in HETERO_MODELS:
            raise TrainError(f"--model {c.model} on a typed dataset ({ds.path}): choose one of "
                             f"{', '.join(HETERO_MODELS)}" + (" (--task link too)" if task == "link" else ""))
        # --fanout for every edge type, --type-fanouts per edge type (PyG's NumNeighbors with a default).
        per_type = parse_type_fanouts(c.type_fanouts, len(self.fanouts)) if c.type_fanouts else {}
        unknown = sorted(set(per_type) - set(ds.edge_types))
        if unknown:
            raise TrainError(f"--type-fanouts: {'__'.join(unknown[0])} is not an edge type of {ds.path} (edge "
                             f"types: {', '.join('__'.join(e) for e in ds.edge_types)})")
        self.num_neighbors = {et: per_type.get(et, self.fanouts) for et in ds.edge_types}
        self.eval_num_neighbors = ({et: self.eval_fanouts for et in ds.edge_types} if c.eval_fanout
                                   else self.num_neighbors)
        self.in_dims = {nt: ds.node_type(nt)["features"]["dim"] for nt in ds.node_types
                        if ds.node_type(nt).get("features")}
        self.embed = {nt: int(ds.node_type(nt)["count"]) for nt in ds.node_types if nt not in self.in_dims}
        if self.chatty and task == "link":
            print(f"typed dataset: {len(ds.node_types)} node types, {len(ds.edge_types)} edge types" +
                  (f"; learnable embeddings for {', '.join(self.embed)} (no features)" if self.embed else ""),
                  flush=True)

    def _embedding_limit(self, c) -> int:
        """Bytes a node type's learnable table may take: a third of the memory budget (Adam keeps two more
        tables of its size), else of what this process may use."""
        from flashgnn.sample.budget import available_memory

        mb = c.memory_budget
        return (int(mb) if mb and mb != "auto" else available_memory()) // 3

    def _build_model(self, c) -> None:
        """Seed every generator, build the model and optimizer (from the checkpoint with --resume), wrap it
        for DDP."""
        import torch

        device, ds, dist_ctx = self.device, self.dataset, self.dist
        if c.model == "mlp":  # features of the seeds only: no neighbor is sampled or read
            self.fanouts = self.eval_fanouts = [0]
        fanouts = self.fanouts
        torch.manual_seed(c.seed)
        np.random.seed(c.seed)
        random.seed(c.seed)
        self.model_config = config = dict(model=c.model, in_dim=ds.feature_dim, hidden=c.hidden,
                                          out_dim=ds.num_classes, num_layers=len(fanouts), dropout=c.dropout,
                                          fanouts=fanouts)
        if c.normalize_features != "none":  # absent = none, so older checkpoints still match
            config["normalize_features"] = c.normalize_features
        if self.link and self.typed:
            from flashgnn.nn.hetero import MLPERF_RGAT
            from flashgnn.nn.link import HeteroLinkModel

            config.update(task="link", out_dim=None, decoder=c.decoder, in_dim=self.in_dims,
                          metadata=[list(m) for m in ds.metadata()], embed=self.embed, heads=MLPERF_RGAT["heads"],
                          edge_type=list(self.edge_type))
            try:
                model = HeteroLinkModel(c.model, ds.metadata(), self.edge_type, self.in_dims, c.hidden, len(fanouts),
                                        c.dropout, c.decoder, embed=self.embed, heads=MLPERF_RGAT["heads"],
                                        max_embedding_bytes=self._embedding_limit(c))
            except ValueError as e:
                raise TrainError(f"{ds.path}: {e}") from None
            self.model = model = model.to(device)
        elif self.link:
            from flashgnn.nn.link import LinkModel, uses_embedding

            emb = ds.num_nodes if uses_embedding(c.model, ds.feature_dim) else 0
            config.update(task="link", out_dim=None, decoder=c.decoder, num_embeddings=emb)
            if emb and emb * c.hidden * 4 > self._embedding_limit(c):
                raise TrainError(f"--model {c.model} on {ds.path}: a learnable embedding per node takes "
                                 f"{human_bytes(emb * c.hidden * 4)} ({emb:,} nodes x --hidden {c.hidden} x 4 B), "
                                 f"over a third of the memory budget ({human_bytes(self._embedding_limit(c))}, Adam "
                                 "keeps two more tables of its size); lower --hidden or build with --features")
            self.model = model = LinkModel(c.model, ds.feature_dim, c.hidden, len(fanouts), c.dropout, c.decoder,
                                           num_nodes=emb).to(device)
        elif self.typed:
            from flashgnn.nn.hetero import MLPERF_RGAT

            config.update(in_dim=self.in_dims, target=self.target, metadata=[list(m) for m in ds.metadata()],
                          embed=self.embed, heads=MLPERF_RGAT["heads"])
            try:
                model = build_hetero_model(c.model, ds.metadata(), self.in_dims, c.hidden, ds.num_classes,
                                           len(fanouts), MLPERF_RGAT["heads"], c.dropout, embed=self.embed or None,
                                           target=self.target, max_embedding_bytes=self._embedding_limit(c))
            except ValueError as e:
                raise TrainError(f"{ds.path}: {e}") from None
            self.model = model = model.to(device)
        else:
            self.model = model = build_model(c.model, ds.feature_dim, c.hidden, ds.num_classes, len(fanouts),
                                             c.dropout).to(device)
        self.optimizer = torch.optim.Adam(model.parameters(), lr=c.lr, weight_decay=c.weight_decay)
        self.start_epoch = 0
        # The best epoch so far by `select_by`: {"epoch", "val_acc", "test_acc", "train_acc", "model": weights}.
        self.best = None
        if c.resume:
            self._resume(c)
        self.ddp_model = model
        if dist_ctx.enabled:
            from torch.nn.parallel import DistributedDataParallel as DDP

            # A typed model leaves parameters out of a step (its last layer computes only the edge types into
            # the target; an edge type a batch did not reach passes nothing): DDP must look for them.
            self.ddp_model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None,
                                 find_unused_parameters=self.typed)
        # The batches' seeds: for a link batch every distinct endpoint of its positives and negatives, at most
        # 2 (1 + negatives) per training edge; what the memory budget and cache sizing count per batch.
        self.seed_batch = (int(np.ceil(c.batch_size * 2 * (1 + c.negatives))) if self.link else c.batch_size)

    def _resume(self, c) -> None:
        """Load the checkpoint at --checkpoint, when there is one, into the model, optimizer, RNGs and history;
        refuse one of another model configuration.

        Under DDP rank 0 reads the file — the one it wrote — and broadcasts it (or its error) to every rank:
        the other ranks may run on nodes whose ``--checkpoint`` directory is a different, empty one, and all
        ranks must start at the same epoch or their collectives would not match. Each rank then restores its
        own RNG states (``rng_ranks``): dropout draws differ per rank, so one rank's state restored on all
        would make a resumed run differ from an uninterrupted one."""
        device, chatty, dist_ctx = self.device, self.chatty, self.dist
        config, model, opt = self.model_config, self.model, self.optimizer
        ckpt_path = Path(c.checkpoint) / CHECKPOINT_FILE
        found = None  # rank 0: ("state", dict) | ("error", message) | ("none", None)
        if dist_ctx.main:
            try:
                found = ("state", load_checkpoint(c.checkpoint, map_location="cpu")) if ckpt_path.exists() \
                    else ("none", None)
            except ValueError as e:
                found = ("error", str(e))
        found = dist_ctx.broadcast(found)
        if found[0] == "error":
            raise TrainError(found[1] if dist_ctx.main else f"rank 0: {found[1]}")
        if found[0] == "state":
            state = found[1]
            for k, v in config.items():
                if state["model_config"].get(k) != v:
                    raise TrainError(f"{ckpt_path}: model_config.{k} is "
                                     f"{state['model_config'].get(k)!r}, this run asks for {v!r}")
            model.load_state_dict(state.get("last", state)["model"])
            opt.load_state_dict(state["optimizer"])
            ranks = state.get("rng_ranks") or []
            # Another world size resumes too (each rank from rank 0's state), but no longer bit for bit.
            _set_rng_state(ranks[dist_ctx.rank] if len(ranks) == dist_ctx.world else state["rng"])
            self.start_epoch, self.history = int(state["epoch"]), list(state["history"])
            if state.get("best"):
                self.best = dict(state["best"], model={k: v.to(device) for k, v in state["model"].items()})
            if chatty:
                print(f"resumed from {ckpt_path} after epoch {self.start_epoch}", flush=True)
        elif chatty:
            print(f"no checkpoint at {ckpt_path}; starting fresh", flush=True)

    def _size_memory(self, c) -> None:
        """Split --memory-budget between the caches, the lookahead window and the producers."""
        from flashgnn.sample import budget

        ds, fanouts, workers, dist_ctx, chatty = self.dataset, self.fanouts, self.workers, self.dist, self.chatty
        split = None
        mb = c.memory_budget
        if mb == "auto" and not c.cache_budget:  # an explicit --cache-budget is the user's sizing: auto steps aside
            # Lookahead is auto's to choose only for online sampling without a device tier (the two exclude each
            # other; with --presampled, --lookahead is the pre-sample's superbatch).
            la = (c.lookahead if c.lookahead is not None or not (c.device_cache or c.presampled or self.typed
                                                                  or self.link) else 0)
            split = budget.auto(ds.path, fanouts, self.seed_batch, workers=workers, prefetch=c.prefetch,
                                hot_fraction=c.hot_fraction, lookahead=la, processes=dist_ctx.local_world,
                                engine=c.engine, row_codec=c.cache_row_codec)
        elif mb and mb != "auto":
            split = budget.split(mb, ds.path, fanouts, self.seed_batch, workers=workers, prefetch=c.prefetch,
                                 hot_fraction=c.hot_fraction, lookahead=c.lookahead or 0, row_codec=c.cache_row_codec)
        self.budget_split = split
        self.lookahead = split["lookahead"] if split else (c.lookahead or 0)
        if split is not None:
            if split["budget"]:
                self.cache_budget = split["cache"]
                # An explicit --lookahead-budget is the user's sizing; auto's share is only what the page
                # cache cannot hold (each row held once), 0 when it holds the whole dataset.
                self.lookahead_budget = c.lookahead_budget or split["lookahead_cache"]
            if chatty:
                print(budget.describe(split), flush=True)

    def _open_caches(self, c) -> None:
        """The cross-batch DRAM cache and the device feature cache, when asked for."""
        import flashgnn

        ds, fanouts, device, chatty = self.dataset, self.fanouts, self.device, self.chatty
        self.cache = cache = None
        if self.cache_budget:
            t_cache = time.perf_counter()
            from flashgnn.sample.sampler import resolve_hot

            hot = resolve_hot(ds.path, c.cache_hot)
            if hot == "touches" and not self.link:  # the seed distribution: the whole split, previewing no batch
                seeds = ds.split("train")
            elif self.link:  # the endpoints of the first training edges (a sample of what batches will touch)
                m = len(self.train_edges.src)
                # choice without replacement draws the 4 batches' positions without a permutation of all m.
                pick = np.sort(np.random.default_rng(c.seed).choice(m, size=min(m, 4 * c.batch_size), replace=False))
                src, dst = self.train_edges.src[pick], self.train_edges.dst[pick]
                if self.typed:  # local ids of the edge type's two node types; the engine's ids are global
                    src = src + ds.type_offset(self.edge_type[0])
                    dst = dst + ds.type_offset(self.edge_type[-1])
                seeds = np.unique(np.concatenate([src, dst]))
            else:
                seeds = np.random.default_rng(c.seed).permutation(ds.split("train"))[:8 * c.batch_size]
            if self.typed and not self.link:  # the engine's ids are global: the target type starts at its offset
                seeds = seeds + ds.type_offset(self.target)
            self.cache = cache = flashgnn.Cache(
                ds.path, fanouts, self.cache_budget, policy=c.cache_policy, hot=hot,
                hot_fraction=c.hot_fraction, presample_seeds=seeds, batch_size=self.seed_batch,
                row_codec=c.cache_row_codec)
            if chatty:
                st = cache.stats()
                print(f"cache: {self.cache_budget / 2**20:.0f} MiB ({c.cache_policy}), static hot set by "
                      f"{hot} {st['static_bytes'] / 2**20:.0f} MiB chosen and read in "
                      f"{time.perf_counter() - t_cache:.1f} s", flush=True)
        self.device_cache = device_cache = None
        if c.device_cache and not c.presampled:
            from flashgnn.sample.device import DeviceCache

            self.device_cache = device_cache = DeviceCache(ds.path, c.device_cache, device=device,
                                                           progress=self.progress)
            if chatty:
                st = device_cache.stats()
                print(f"device cache: {st['rows']:,} rows ({st['bytes'] / 2**20:.0f} MiB) on {st['device']}, "
                      f"loaded in {st['load_seconds']:.1f} s", flush=True)

    def _open_loaders(self, c) -> None:
        """The training loader (online sampling or a pre-sample) and one loader per evaluated split."""
        from flashgnn.loader.neighbor import NeighborLoader

        ds, fanouts, workers, dist_ctx, chatty = self.dataset, self.fanouts, self.workers, self.dist, self.chatty
        cache, device_cache = self.cache, self.device_cache
        # memory_budget=0: the cache above is this run's (sized from --memory-budget), or none was asked for.
        self._common = common = dict(memory_budget=0, engine=c.engine, prefetch=c.prefetch, num_workers=workers,
                                     rank=dist_ctx.rank, world_size=dist_ctx.world, pin_memory=False, cache=cache,
                                     device_cache=device_cache,
                                     degrees=c.model in (DEGREE_LINK_MODELS if self.link else DEGREE_MODELS))
        if self.typed:
            # The typed loader takes its seeds as (node type, ids) and refuses the tiers it does not have yet.
            for k in ("device_cache", "degrees"):
                common.pop(k)
            if c.device_cache:
                raise TrainError("--device-cache on a typed dataset: the device tier does not hold typed rows yet")
            if c.presampled:
                raise TrainError("--presampled takes a homogeneous dataset (typed pre-samples are not written yet)")
        if self.link:
            from flashgnn.loader.link import LinkNeighborLoader

            common.pop("device_cache", None)
            # Binary negatives, BCE on the logits: PyG's link-prediction recipe (its examples' LinkNeighborLoader).
            te = self.train_edges
            typed = self.typed
            self.train_loader_options = dict(
                data=ds, num_neighbors=self.num_neighbors if typed else fanouts,
                edge_label_index=(self.edge_type, (te.src, te.dst)) if typed else (te.src, te.dst),
                neg_sampling=dict(mode="binary", amount=c.negatives), batch_size=c.batch_size, shuffle=True,
                seed=c.seed, exclude_seed_edges=c.exclude_seed_edges, **common)
            train_loader = LinkNeighborLoader(**self.train_loader_options)
        elif c.presampled:
            from flashgnn.loader.presample import PresampledLoader

            # --lookahead here is the pre-sample's superbatch: the next batches are read from the file.
            train_loader = PresampledLoader(c.presampled, ds, engine=c.engine, prefetch=c.prefetch, cache=cache,
                                            memory_budget=0,
                                            belady_budget=self.lookahead_budget if self.lookahead else 0,
                                            superbatch=max(1, self.lookahead), degrees=c.model in DEGREE_MODELS)
            # Fanouts, batch size, seed and epochs were matched against presample.json by config.validate().
            if dist_ctx.enabled:
                raise TrainError("--presampled runs in one process (no torchrun)")
        else:
            # Kept as given, so a loop outside the trainer (benchmarks/trainer_overhead.py) can build the very
            # same loader: flashgnn.NeighborLoader(**trainer.train_loader_options).
            if self.typed:
                self.train_loader_options = dict(data=ds.path, num_neighbors=self.num_neighbors,
                                                 input_nodes=(self.target, ds.split("train")),
                                                 batch_size=c.batch_size, shuffle=True, seed=c.seed,
                                                 lookahead=self.lookahead,
                                                 lookahead_budget=self.lookahead_budget if self.lookahead else 0,
                                                 **common)
            else:
                self.train_loader_options = dict(data=ds, num_neighbors=fanouts, batch_size=c.batch_size,
                                                 split="train", shuffle=True, seed=c.seed, lookahead=self.lookahead,
                                                 lookahead_budget=self.lookahead_budget if self.lookahead else 0,
                                                 **common)
            train_loader = NeighborLoader(**self.train_loader_options)
        self.train_loader = train_loader
        self._eval_loaders: dict = {}
        for s in () if self.link else self.eval_splits:
            self._eval_loader(s)
        self.window = window = getattr(train_loader, "window", None)
        if window is not None and window.belady is not None and chatty:
            print(f"lookahead: {self.lookahead} batches, Belady row cache {self.lookahead_budget / 2**20:.0f} MiB "
                  f"({window.belady.capacity:,} rows)", flush=True)

    def _eval_loader(self, split: str):
        """The loader evaluation reads ``split`` through: in seed order, the same sample every epoch."""
        if split not in self._eval_loaders:
            from flashgnn.loader.neighbor import NeighborLoader

            if split not in self.dataset.split_names:
                raise TrainError(f"{self.dataset.path}: no {split!r} split (splits: "
                                 f"{', '.join(self.dataset.split_names)})")
            opts = dict(self._common, shuffle=False, seed=self.config.seed + 1, equal_shards=False)
            if self.typed:
                self._eval_loaders[split] = NeighborLoader(
                    self.dataset.path, self.eval_num_neighbors, input_nodes=(self.target, self.dataset.split(split)),
                    batch_size=self.config.batch_size, **opts)
            else:
                self._eval_loaders[split] = NeighborLoader(
                    self.dataset, self.eval_fanouts, batch_size=self.config.batch_size, split=split, **opts)
        return self._eval_loaders[split]

    def _steps(self, loader, evaluation: bool = False) -> int:
        c = self.config
        mb = c.eval_batches if evaluation and c.eval_batches is not None else c.max_batches
        return len(loader) if mb is None else min(len(loader), mb)

    # -- evaluation -------------------------------------------------------------------------------------

    def _count(self, split: str, bar=None) -> tuple[int, int]:
        """(correct, total) of the current model over ``split`` on this rank (its first --eval-batches, else
        --max-batches)."""
        loader = self._eval_loader(split)
        loader.set_epoch(0)  # the same evaluation sample every epoch (and after a resume)
        return evaluate(self.ddp_model, loader, self.device, self.config.normalize_features,
                        self._steps(loader, evaluation=True), bar)

    def _link_value(self, split: str, bar=None) -> float:
        """--task link: the metric of the current model on link split ``split`` (flashgnn.train.link), over
        its first --eval-batches (else --max-batches) batches of positives. Every rank computes the same value
        (the whole split, with the same weights): no reduction is needed."""
        from flashgnn.train import link

        c = self.config
        mb = c.eval_batches if c.eval_batches is not None else c.max_batches
        opts = dict(self._common, seed=c.seed + 1, rank=0, world_size=1)
        return link.evaluate_split(self.model, self.dataset, split, self.metric, self.evaluator,
                                   self.eval_num_neighbors if self.typed else self.eval_fanouts, self.seed_batch,
                                   self.device, normalize=c.normalize_features,
                                   max_positives=None if mb is None else mb * c.batch_size, progress=bar,
                                   edge_type=self.edge_type, mode=self.link_eval_mode, **opts)

    def _link_eval_pairs(self, split: str) -> int:
        from flashgnn.train import link

        c = self.config
        mb = c.eval_batches if c.eval_batches is not None else c.max_batches
        return link.eval_pairs(self.dataset, split, self.metric, None if mb is None else mb * c.batch_size)

    def evaluate(self, split: str = "test") -> dict:
        """Accuracy of the current model (after :meth:`fit`: the best epoch's) on ``split``'s labelled
        seeds, summed over ranks while the process group is open: ``{"split", "correct", "total", "acc"}``.
        --task link: ``{"split", "metric", "value"}``, the link metric on link split ``split``."""
        self.setup()
        if self.link:
            if split not in self.eval_splits:
                raise TrainError(f"{self.dataset.path}: no link split {split!r} with positives to evaluate "
                                 f"(evaluated: {', '.join(self.eval_splits) or 'none'})")
            return dict(split=split, metric=self.metric, value=self._link_value(split))
        correct, total = self.dist.sum(list(self._count(split)))
        return dict(split=split, correct=int(correct), total=int(total), acc=correct / max(total, 1))

    # -- training ---------------------------------------------------------------------------------------

    def _train_epoch(self, epoch: int) -> tuple[float, int, int, int, float, float, int]:
        """One epoch over this rank's shard: (loss sum, correct, seeds, batches, wait seconds, seconds, scored),
        ``scored`` the outputs the loss and ``correct`` count: the seeds, or for --task link the scored pairs
        (each training edge and its negatives; ``seeds`` counts the training edges).

        The step does what a bare PyG loop does and nothing per step besides: the loss and correct counts are
        summed as tensors (on the device: no host sync per step) and read once at the end of the epoch; the
        bar's figures, which read every tier's counters, are refreshed at most every ``POSTFIX_INTERVAL_S``."""
        import torch
        import torch.nn.functional as F
        from flashgnn import _progress

        c, loader, cache = self.config, self.train_loader, self.cache
        device_cache, window, model, opt = self.device_cache, self.window, self.ddp_model, self.optimizer
        normalize = c.normalize_features if c.normalize_features != "none" else None
        loader.set_epoch(epoch)
        model.train()
        steps = self._steps(loader)
        bar = _progress.bar(total=steps, desc=f"epoch {epoch + 1}/{c.epochs}", unit="batch",
                            disable=not self.progress, leave=True)
        # float64 for the loss: loss * batch size summed in double, as a Python float sum would (the same
        # figures bit for bit); int64 for the counts.
        loss_sum = torch.zeros((), dtype=torch.float64, device=self.device)
        correct = torch.zeros((), dtype=torch.int64, device=self.device)
        loss = None
        seeds = batches = 0
        scored = torch.zeros((), dtype=torch.int64, device=self.device)
        link = self.link
        wait = 0.0
        t0 = time.perf_counter()
        next_postfix = t0  # the first step shows its figures at once

        unit = "edges" if self.link else "seeds"

        def postfix() -> None:
            el = max(time.perf_counter() - t0, 1e-9)
            bar.set_postfix_str(f"loss {float(loss):.3f} | {seeds * self.dist.world / el:,.0f} {unit}/s | "
                                f"data-wait {100 * wait / el:.0f}%"
                                + (f" | cache {_hit_rate(cache):.0%}" if cache else "")
                                + (f" | device {device_cache.stats()['hit_rate']:.0%}" if device_cache else "")
                                + (f" | window {window.stats()['hit_rate']:.0%}" if window else ""),
                                refresh=False)

        it = iter(DeviceFeeder(loader, self.device))
        while batches < steps:
            tw = time.perf_counter()
            data = next(it, None)
            wait += time.perf_counter() - tw
            if data is None:
                break
            if normalize is not None:
                normalize_batch(data, normalize)
            opt.zero_grad(set_to_none=True)
            if link:  # PyG's recipe: BCE on the logits of the training edges and their binary negatives
                out = model(data)
                fields = data if self.edge_type is None else data[self.edge_type]  # typed: on the edge type
                y = fields.edge_label
                loss = F.binary_cross_entropy_with_logits(out, y)
                bs, n = int(fields.input_id.numel()), y.numel()
                hit = ((out.detach() > 0) == (y > 0.5)).sum()
            else:
                out = forward(model, data)
                bs = n = seed_count(data)
                y = seed_labels(data)
                loss = F.cross_entropy(out, y, ignore_index=-1)
                hit = (out.detach().argmax(-1) == y).sum()
            loss.backward()
            opt.step()
            loss = loss.detach()
            loss_sum += loss.double() * n
            correct += hit
            scored += n
            seeds += bs
            batches += 1
            bar.update(1)
            if self.progress and tw >= next_postfix:  # only for a bar that shows it, a few times a second
                next_postfix = tw + POSTFIX_INTERVAL_S
                postfix()
        it.close()
        if self.progress and loss is not None:
            postfix()  # the bar's last line carries the epoch's final figures
        bar.close()
        seconds = time.perf_counter() - t0
        return float(loss_sum), int(correct), seeds, batches, wait, seconds, int(scored)

    def fit(self) -> dict:
        """Train ``config.epochs`` epochs (fewer with ``patience``), checkpointing after each; return the
        summary. The model left in :attr:`model` is the best epoch's (what the checkpoint holds): best by
        validation accuracy, or by training accuracy where the dataset has no ``val`` split."""
        from flashgnn import _progress

        if self.summary is not None:
            raise TrainError("this Trainer has already run fit(); make a new Trainer for another run")
        self.setup()
        c, ds, dist_ctx, chatty = self.config, self.dataset, self.dist, self.chatty
        raw_model, history, key = self.model, self.history, self.select_by
        n_train = len(self.train_edges.src) if self.link else ds.split_size("train")
        t_run = time.perf_counter()
        for epoch in range(self.start_epoch, c.epochs):
            t0 = time.perf_counter()
            loss_sum, correct, seeds, batches, wait, train_seconds, scored = self._train_epoch(epoch)
            loss_sum, correct, seeds, scored = dist_ctx.sum([loss_sum, correct, seeds, scored])
            wait_max = dist_ctx.max(wait / max(train_seconds, 1e-9))
            acc, value = {}, {}
            if self.link and self.eval_splits:
                ebar = _progress.bar(total=sum(self._link_eval_pairs(s) for s in self.eval_splits),
                                     desc=f"eval {epoch + 1}/{c.epochs}", unit="pair", disable=not self.progress,
                                     leave=False)
                value = {s: self._link_value(s, ebar) for s in self.eval_splits}
                ebar.close()
            elif self.eval_splits:
                eval_steps = [self._steps(self._eval_loader(s), evaluation=True) for s in self.eval_splits]
                ebar = _progress.bar(total=sum(eval_steps), desc=f"eval {epoch + 1}/{c.epochs}", unit="batch",
                                     disable=not self.progress, leave=False)
                counts = [n for s in self.eval_splits for n in self._count(s, ebar)]
                ebar.close()
                counts = dist_ctx.sum(counts)
                acc = {s: counts[2 * i] / max(counts[2 * i + 1], 1) for i, s in enumerate(self.eval_splits)}
            tel = self.train_loader.telemetry
            rec = dict(
                epoch=epoch + 1, train_loss=loss_sum / max(scored, 1), train_acc=correct / max(scored, 1),
                val_acc=acc.get("val"), test_acc=acc.get("test"), train_seconds=train_seconds,
                seconds=time.perf_counter() - t0, seeds=int(seeds), seeds_per_s=seeds / max(train_seconds, 1e-9),
                data_wait=wait / max(train_seconds, 1e-9), data_wait_max_rank=wait_max, batches=batches,
                telemetry={k: tel.get(k)
                           for k in ("reads", "bytes_read", "bytes_used", "iops", "cache_hit_rate",
                                     "cache_static_hits", "cache_dynamic_hits")},
                device_cache=self.device_cache.stats() if self.device_cache else None,
                lookahead=tel.get("lookahead"),
            )
            if self.link:  # the link metric (train_acc: pairs on the right side of logit 0)
                rec.update(metric=self.metric, val_metric=value.get("val"), test_metric=value.get("test"))
            history.append(rec)
            best = self.best
            # Accuracies are summed over ranks (train accuracy too): every rank takes the same decision.
            if best is None or best.get(key) is None or rec[key] > best[key]:
                self.best = best = dict(epoch=rec["epoch"], val_acc=rec["val_acc"], test_acc=rec["test_acc"],
                                        train_acc=rec["train_acc"],
                                        model={k: v.detach().clone() for k, v in raw_model.state_dict().items()})
                if self.link:
                    best.update(val_metric=rec["val_metric"], test_metric=rec["test_metric"])
            stale = rec["epoch"] - best["epoch"]
            if chatty:
                if self.link:
                    accs = "".join(f", {s} {self.metric} {rec[s + '_metric']:.4f}" for s in self.eval_splits)
                else:
                    accs = "".join(f", {s} acc {rec[s + '_acc']:.4f}" for s in self.eval_splits)
                print(f"epoch {rec['epoch']}: loss {rec['train_loss']:.4f}, train acc {rec['train_acc']:.4f}{accs}, "
                      f"{rec['seeds_per_s']:,.0f} {'edges' if self.link else 'seeds'}/s, "
                      f"data wait {100 * rec['data_wait']:.1f}% (max over ranks "
                      f"{100 * wait_max:.1f}%), {rec['train_seconds']:.1f} s train + "
                      f"{rec['seconds'] - rec['train_seconds']:.1f} s eval", flush=True)
            # Every rank's RNG states (dropout draws differ per rank), for a bit-identical --resume.
            rngs = dist_ctx.gather(_rng_state())  # on every rank, checkpoint or not: a collective
            if dist_ctx.main and c.checkpoint:
                save_checkpoint(c.checkpoint, dict(
                    format=CHECKPOINT_FORMAT, version=CHECKPOINT_VERSION, model_config=self.model_config,
                    model=best["model"], best={k: v for k, v in best.items() if k != "model"},
                    last=dict(model=raw_model.state_dict()), optimizer=self.optimizer.state_dict(), epoch=epoch + 1,
                    rng=rngs[0], rng_ranks=rngs, history=history, dataset=os.path.abspath(ds.path),
                    args=self.config.as_dict(), resolved=self._resolved()))
            dist_ctx.barrier()
            if c.patience and stale >= c.patience and epoch + 1 < c.epochs:
                if chatty:
                    print(f"early stop after epoch {rec['epoch']}: no better {SELECT_WORDS[key]} for {stale} epochs "
                          f"(--patience {c.patience}; best {best[key]:.4f} at epoch {best['epoch']})", flush=True)
                break
        total = time.perf_counter() - t_run
        best = self.best
        if best is not None:  # the run's model is the best epoch's (what the checkpoint holds)
            raw_model.load_state_dict(best["model"])
        # DDP keeps replicas identical; record each rank's weight digest to show it.
        import hashlib

        h = hashlib.sha256()
        for t in raw_model.state_dict().values():
            h.update(t.detach().cpu().contiguous().numpy().tobytes())
        digests = dist_ctx.gather(h.hexdigest()[:16])
        last = history[-1] if history else {}
        ran = history[self.start_epoch:]  # the epochs this process trained (not those resumed past)
        ran_seconds = max(sum(e["train_seconds"] for e in ran), 1e-9)
        summary = dict(
            model=c.model, dataset=ds.path, engine=self.train_loader.engine, world_size=dist_ctx.world,
            epochs=len(history), seconds=total, eval_splits=list(self.eval_splits), selected_by=key,
            test_acc=best.get("test_acc") if best else None, val_acc=best.get("val_acc") if best else None,
            best_epoch=best["epoch"] if best else None,
            final_test_acc=last.get("test_acc"), final_val_acc=last.get("val_acc"), train_loss=last.get("train_loss"),
            data_wait=sum(e["data_wait"] * e["train_seconds"] for e in ran) / ran_seconds if ran else None,
            seeds_per_s=sum(e["seeds"] for e in ran) / ran_seconds if ran else None,
            train_nodes=n_train, rank_weight_digests=digests, ranks_agree=len(set(digests)) == 1,
            peak_rss_bytes=_peak_rss(), task=c.task,
        )
        if self.link:  # seeds_per_s counts training edges; train_nodes is the number of training edges
            summary.update(train_edges=summary.pop("train_nodes"), decoder=c.decoder, metric=self.metric,
                           evaluator=self.evaluator_name, link_eval=self.link_eval_mode,
                           test_metric=best.get("test_metric") if best else None,
                           val_metric=best.get("val_metric") if best else None,
                           final_test_metric=last.get("test_metric"), final_val_metric=last.get("val_metric"))
        if dist_ctx.main:
            if c.metrics_json:
                Path(c.metrics_json).write_text(json.dumps(dict(config=self.model_config, args=self.config.as_dict(),
                                                                resolved=self._resolved(), epochs=history,
                                                                summary=summary), indent=2, default=str))
            if history:
                dw = f"{100 * summary['data_wait']:.1f}%" if summary["data_wait"] is not None else "n/a"
                sps = f"{summary['seeds_per_s']:,.0f}" if summary["seeds_per_s"] is not None else "n/a"
                what = f"{c.model} ({c.decoder} decoder, link prediction)" if self.link else c.model
                print(f"trained {what} on {ds.path} ({self.train_loader.engine}, {dist_ctx.world} process"
                      f"{'es' if dist_ctx.world > 1 else ''}): {len(history)} epochs, "
                      f"{_accuracy_words(best, last, key, self.eval_splits, self.metric)}, data wait {dw}, {sps} "
                      f"{'edges' if self.link else 'seeds'}/s, peak "
                      f"RSS {human_bytes(summary['peak_rss_bytes'])}, {total:.1f} s", flush=True)
        dist_ctx.close()
        summary["model_obj"] = raw_model
        summary["history"] = history
        self.summary = summary
        return summary

    def _resolved(self) -> dict:
        """What the run derived from its options (recorded beside them in the checkpoint and metrics)."""
        return dict(fanouts=self.fanouts, eval_fanouts=self.eval_fanouts, cache_budget=self.cache_budget,
                    lookahead=self.lookahead, lookahead_budget=self.lookahead_budget)


def run(args) -> dict:
    """``flashgnn train`` from a parsed command line (:func:`parser`): ``Trainer(TrainConfig.from_namespace(args))
    .fit()``. Kept for callers written against the namespace API."""
    return Trainer(TrainConfig.from_namespace(args)).fit()


def _peak_rss() -> int:
    """This process's peak resident memory (VmHWM), bytes: what a memory cap
    must hold, printed beside the budget so a user can see the headroom."""
    return proc_status_bytes("VmHWM")
