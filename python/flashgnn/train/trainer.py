"""`flashgnn train`: mini-batch GNN training over an SSD-resident dataset.

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
rendezvous), ``WORLD_SIZE``/``RANK``/``LOCAL_RANK`` select DDP with gloo on
CPU or NCCL on CUDA. Each rank trains on its own equal-sized shard of each
epoch's seed permutation; evaluation counts are summed over ranks; rank 0
logs and writes checkpoints.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import random
import sys
import time
from pathlib import Path

import numpy as np

from flashgnn._util import parse_size
from flashgnn.sample.budget import parse_budget
from flashgnn.sample.sampler import DEFAULT_HOT_FRACTION, ENGINES
from flashgnn.nn.checkpoint import CHECKPOINT_FILE, CHECKPOINT_FORMAT, CHECKPOINT_VERSION, load_checkpoint, save_checkpoint
from flashgnn.nn.zoo import DEGREE_MODELS, MODELS, NORMALIZE_FEATURES, build_model, forward, normalize_features




# Defaults `train` shares with `presample` (same batches for the same flags).
DEFAULT_FANOUT = "25,10"
DEFAULT_BATCH_SIZE = 1024
DEFAULT_SEED = 0


def parser(prog: str = "flashgnn train") -> argparse.ArgumentParser:
    from flashgnn._util import ArgumentParser  # --fanout -1,-1 is a value, not an option

    p = ArgumentParser(prog=prog, description="Train a GNN on a flashgnn dataset (mini-batch, SSD-resident).")
    p.add_argument("dataset", help="a dataset directory written by `flashgnn build`")
    m = p.add_argument_group("model and optimisation")
    m.add_argument("--model", default="sage", choices=MODELS, help="mlp = features-only baseline")
    m.add_argument("--hidden", type=int, default=128, help="hidden channels")
    m.add_argument("--dropout", type=float, default=0.2, help="dropout probability, in [0, 1)")
    m.add_argument("--epochs", type=int, default=3, help="epochs to train (>= 1)")
    m.add_argument("--lr", type=float, default=3e-3, help="Adam learning rate")
    m.add_argument("--weight-decay", type=float, default=0.0,
                   help="L2 penalty of the Adam optimizer (PyG's Planetoid examples use 5e-4)")
    m.add_argument("--normalize-features", default="none", choices=NORMALIZE_FEATURES,
                   help="row: divide each feature row by its sum (clamped at 1), as PyG's NormalizeFeatures does for "
                        "non-negative features; applied as batches load, recorded in the checkpoint so `embed` "
                        "applies it too")
    m.add_argument("--patience", type=int, default=0,
                   help="stop after this many epochs without a better validation accuracy (0 = run every epoch); "
                        "either way the checkpoint and the reported test accuracy are the best-validation epoch's")
    m.add_argument("--seed", type=int, default=DEFAULT_SEED, help="weights, batch order and sampling")
    m.add_argument("--device", default="cpu", help="cpu | cuda | cuda:N")
    m.add_argument("--threads", type=int, help="torch intra-op threads (default: cores / local ranks - 1)")
    sm = p.add_argument_group("sampling and reading")
    sm.add_argument("--fanout", default=DEFAULT_FANOUT, help="neighbors per hop, comma separated (-1 = all)")
    sm.add_argument("--eval-fanout", help="fanouts for validation/test (default: --fanout)")
    sm.add_argument("--batch-size", type=int, default=DEFAULT_BATCH_SIZE, help="seed nodes per batch")
    sm.add_argument("--engine", default="auto", help="|".join(("auto", *ENGINES)))
    sm.add_argument("--prefetch", type=int, default=4, help="batches prepared ahead of the trainer")
    sm.add_argument("--workers", type=int, default=1, help="sampling producer threads")
    sm.add_argument("--presampled", help="train from the subgraphs stored by `flashgnn presample` (same --seed, "
                    "--fanout, --batch-size: the weights are identical to online sampling)")
    mem = p.add_argument_group("memory and caches")
    mem.add_argument("--memory-budget", type=parse_budget, default="auto",
                     help="one budget for the engine's buffers, the prefetch window, the cache and the lookahead "
                          "(the split is printed at start). auto: what this process may use (cgroup limit, else "
                          "available RAM) less a reserve for torch and the model, capped at what caching the whole "
                          "dataset needs, with lookahead when the data does not fit; 0 = no cache; overrides "
                          "--cache-budget unless that is given")
    mem.add_argument("--cache-budget", type=parse_size, default=0,
                     help="cross-batch DRAM cache for pages and feature rows, e.g. 256MiB (0 = none); shared by the "
                          "train/val/test loaders")
    mem.add_argument("--cache-policy", default="s3fifo", choices=["s3fifo", "clock"])
    mem.add_argument("--cache-hot", default="degree", choices=["degree", "presample", "none"],
                     help="how the cache's static hot set (--hot-fraction of the budget) is chosen")
    mem.add_argument("--hot-fraction", type=float, default=DEFAULT_HOT_FRACTION,
                     help="share of the cache budget for the static hot set, in [0, 1]")
    mem.add_argument("--device-cache", type=parse_size, default=0,
                     help="GPU tier: this many bytes of the highest-degree feature rows resident on --device and "
                          "gathered there, never read from disk (0 = off; online sampling only)")
    mem.add_argument("--lookahead", type=int, default=None,
                     help="online lookahead: sample each training batch's structure this many batches ahead and fill "
                          "its feature rows through a Belady cache that knows those batches (0 = off; default: "
                          "--memory-budget auto chooses)")
    mem.add_argument("--lookahead-budget", type=parse_size, default=0,
                     help="bytes of the lookahead's Belady row cache (with --memory-budget: its share is taken from "
                          "the cache part)")
    out = p.add_argument_group("checkpoints and output")
    out.add_argument("--checkpoint", help="directory for checkpoint.pt (written after every epoch)")
    out.add_argument("--resume", action="store_true", help="continue from --checkpoint")
    out.add_argument("--metrics-json", help="write per-epoch metrics and the summary to this file")
    out.add_argument("--max-batches", type=int,
                     help="stop each epoch's training and each evaluation after this many batches (smoke runs)")
    out.add_argument("--no-progress", action="store_true", help="no progress bars (epoch lines still print)")
    out.add_argument("--quiet", "-q", action="store_true", help="print only errors and the final summary line")
    return p


def check_args(args) -> None:
    """Every flag checked before anything is opened, read or imported: a run
    that cannot finish stops here, naming the flag, its value and the bound."""
    def bad(flag: str, value, bound: str) -> None:
        raise SystemExit(f"flashgnn train: error: {flag} {value}: {bound}")

    for flag, value, lo in (("--epochs", args.epochs, 1), ("--batch-size", args.batch_size, 1),
                            ("--hidden", args.hidden, 1), ("--prefetch", args.prefetch, 1),
                            ("--workers", args.workers, 1), ("--patience", args.patience, 0),
                            ("--lookahead", 0 if args.lookahead is None else args.lookahead, 0)):
        if value < lo:
            bad(flag, value, f"must be >= {lo}")
    for flag, value in (("--threads", args.threads), ("--max-batches", args.max_batches)):
        if value is not None and value < 1:
            bad(flag, value, "must be >= 1 (leave it out for the default)")
    if not (0.0 <= args.dropout < 1.0):
        bad("--dropout", args.dropout, "must be in [0, 1)")
    if not (args.lr > 0.0 and math.isfinite(args.lr)):
        bad("--lr", args.lr, "must be a finite number > 0")
    if not (args.weight_decay >= 0.0 and math.isfinite(args.weight_decay)):
        bad("--weight-decay", args.weight_decay, "must be a finite number >= 0")
    if not (0.0 <= args.hot_fraction <= 1.0):
        bad("--hot-fraction", args.hot_fraction, "must be in [0, 1]")
    parse_fanout(args.fanout)
    if args.eval_fanout:
        parse_fanout(args.eval_fanout)
    if args.resume and not args.checkpoint:
        raise SystemExit("flashgnn train: error: --resume needs --checkpoint DIR")
    if args.checkpoint:
        ck = Path(args.checkpoint)
        if ck.exists() and not ck.is_dir():
            bad("--checkpoint", ck, "exists and is not a directory")
        parent = ck if ck.exists() else next((q for q in ck.absolute().parents if q.exists()), Path("/"))
        if not os.access(parent, os.W_OK | os.X_OK):
            bad("--checkpoint", ck, f"{parent} is not writable")
    if args.metrics_json:
        mj = Path(args.metrics_json)
        if mj.is_dir():
            bad("--metrics-json", mj, "is a directory; give a file name")
        if not os.access(mj.absolute().parent, os.W_OK) if mj.absolute().parent.exists() else True:
            bad("--metrics-json", mj, f"{mj.absolute().parent} is not a writable directory")


def parse_fanout(text: str) -> list[int]:
    try:
        f = [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise SystemExit(f"flashgnn train: error: --fanout {text!r}: expected integers like 25,10") from None
    if not f or any(v < -1 for v in f):
        raise SystemExit(f"flashgnn train: error: --fanout {text!r}: each hop must be -1 (all) or >= 0")
    return f


def _hit_rate(cache) -> float:
    """Cumulative share of extent requests the cache served (both tiers)."""
    st = cache.stats()
    hits = st["static_hits"] + st["dynamic_hits"]
    return hits / max(hits + st["misses"], 1)


def default_threads(local_world: int = 1) -> int:
    """torch intra-op threads: this process's share of the cores, less one
    core left to the sampling producers (on 2 cores: 1 thread). Overlap needs
    the producer to run while the step computes; oversubscribed cores make
    the epoch slower than the sum of its parts."""
    share = max(1, (os.cpu_count() or 1) // max(local_world, 1))
    return max(1, share - 1)


class DeviceFeeder:
    """Moves batches to a CUDA device ahead of use: a background thread
    (:func:`flashgnn.loader.neighbor.run_ahead`) pins each batch and issues its
    host-to-device copy on a side stream, so the copy of batch i+1 overlaps
    the compute of batch i. On CPU it passes batches through."""

    def __init__(self, it, device, depth: int = 2):
        self.it, self.device, self.depth = it, device, depth

    def __iter__(self):
        if self.device.type != "cuda":
            yield from self.it
            return
        import torch

        from flashgnn.loader.neighbor import run_ahead

        stream = torch.cuda.Stream(device=self.device)

        def staged():
            for data in self.it:
                with torch.cuda.stream(stream):
                    data = data.pin_memory().to(self.device, non_blocking=True)
                    ev = torch.cuda.Event()
                    ev.record(stream)
                yield data, ev

        ahead = run_ahead(staged(), self.depth)
        try:
            for data, ev in ahead:
                cur = torch.cuda.current_stream(self.device)
                cur.wait_event(ev)
                for _, v in data:  # memory made on the side stream is used on this one
                    if torch.is_tensor(v):
                        v.record_stream(cur)
                yield data
        finally:
            ahead.close()


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
    labels_file = os.path.join(ds.path, "labels.npy")
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
                f"[0, {bound}) (num_classes {bound} in {os.path.join(ds.path, 'manifest.json')}); {bad.size} such "
                f"label(s) in the {s!r} split")


class _Dist:
    """torch.distributed context from torchrun's environment (or none)."""

    def __init__(self, device_arg: str):
        import torch

        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(self.world)))
        if device_arg.startswith("cuda"):
            if not torch.cuda.is_available():
                raise SystemExit("flashgnn train: error: --device cuda requested but no CUDA device is available "
                                 "(torch.cuda.is_available() is False); use --device cpu")
            idx = self.local_rank if self.world > 1 and device_arg == "cuda" else (
                int(device_arg.split(":")[1]) if ":" in device_arg else 0)
            self.device = torch.device("cuda", idx)
            torch.cuda.set_device(self.device)
        elif device_arg == "cpu":
            self.device = torch.device("cpu")
        else:
            raise SystemExit(f"flashgnn train: error: --device {device_arg!r}: expected cpu, cuda or cuda:N")
        self.enabled = self.world > 1
        if self.enabled:
            import torch.distributed as dist

            dist.init_process_group(backend="nccl" if self.device.type == "cuda" else "gloo")

    @property
    def main(self) -> bool:
        return self.rank == 0

    def sum(self, values: list[float]) -> list[float]:
        if not self.enabled:
            return values
        import torch
        import torch.distributed as dist

        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return t.tolist()

    def max(self, value: float) -> float:
        if not self.enabled:
            return value
        import torch
        import torch.distributed as dist

        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    def gather(self, obj) -> list:
        if not self.enabled:
            return [obj]
        import torch.distributed as dist

        out = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def barrier(self) -> None:
        if self.enabled:
            import torch.distributed as dist

            dist.barrier()

    def close(self) -> None:
        if self.enabled:
            import torch.distributed as dist

            dist.destroy_process_group()


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
            data.x = normalize_features(data.x, normalize)
            y = data.y[: data.batch_size]
            keep = y >= 0
            pred = forward(model, data).argmax(-1)
            correct += int((pred[keep] == y[keep]).sum())
            total += int(keep.sum())
    return correct, total


def run(args) -> dict:
    """Train as ``args`` (see :func:`parser`) says; returns the summary dict."""
    import torch
    import torch.nn.functional as F
    import flashgnn
    from flashgnn import _progress
    from flashgnn.sample import budget
    from flashgnn.loader.neighbor import NeighborLoader

    # Flag checks first: nothing is opened or read for a run that cannot start.
    for name, default in (("quiet", False), ("patience", 0), ("weight_decay", 0.0),
                          ("normalize_features", "none")):  # namespaces built by older callers
        if not hasattr(args, name):
            setattr(args, name, default)
    check_args(args)
    if args.lookahead and args.device_cache and not args.presampled:
        raise SystemExit("flashgnn train: error: --lookahead and --device-cache cannot be combined (rows are filled on "
                         "the host by the one, gathered on the device by the other)")
    dist_ctx = _Dist(args.device)
    device = dist_ctx.device
    progress = dist_ctx.main and not args.no_progress and not args.quiet
    chatty = dist_ctx.main and not args.quiet  # per-epoch lines and set-up notes
    threads = args.threads or default_threads(dist_ctx.local_world)
    torch.set_num_threads(threads)
    fanouts = parse_fanout(args.fanout)
    eval_fanouts = parse_fanout(args.eval_fanout) if args.eval_fanout else fanouts
    ds = flashgnn.open(args.dataset)
    if not ds.num_classes:
        raise SystemExit(f"flashgnn train: error: {ds.path}: dataset has no labels (for an edge list: flashgnn build "
                         "EDGES OUT --labels FILE, with `node label` lines or a .npy array [N])")
    if ds.feature_dim == 0:
        raise SystemExit(
            f"flashgnn train: error: {ds.path}: dataset has no node features (feature dim 0 in "
            f"{os.path.join(ds.path, 'manifest.json')}); a model on zero-width input learns only the class prior. "
            "Rebuild with --features FILE (.npy [N, D] or text rows), or with --synthetic-features D (random "
            "features: the graph structure then carries all the signal). One-hot identity features are not "
            "offered: they take N x N values (N = number of nodes)")
    for split in ("train", "val", "test"):
        if split not in ds.split_names:
            raise SystemExit(f"flashgnn train: error: {ds.path}: no {split!r} split (build with --make-splits "
                             "TRAIN,VAL,TEST, e.g. 0.6,0.2,0.2: stratified by class)")
    try:
        check_labels(ds)
    except ValueError as e:
        raise SystemExit(f"flashgnn train: error: {e}") from None
    if args.model == "mlp":  # features of the seeds only: no neighbor is sampled or read
        fanouts = eval_fanouts = [0]
    torch.manual_seed(args.seed)
    np.random.seed(args.seed)
    random.seed(args.seed)
    config = dict(model=args.model, in_dim=ds.feature_dim, hidden=args.hidden, out_dim=ds.num_classes,
                  num_layers=len(fanouts), dropout=args.dropout, fanouts=fanouts)
    if args.normalize_features != "none":  # absent = none, so older checkpoints still match
        config["normalize_features"] = args.normalize_features
    model = build_model(args.model, ds.feature_dim, args.hidden, ds.num_classes, len(fanouts), args.dropout).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=args.lr, weight_decay=args.weight_decay)
    history: list[dict] = []
    start_epoch = 0
    best = None  # the best-validation epoch so far: {"epoch", "val_acc", "test_acc", "model": weights}
    if args.resume:
        ckpt_path = Path(args.checkpoint) / CHECKPOINT_FILE
        if ckpt_path.exists():
            state = load_checkpoint(args.checkpoint, map_location=device)
            for k, v in config.items():
                if state["model_config"].get(k) != v:
                    raise SystemExit(f"flashgnn train: error: {ckpt_path}: model_config.{k} is "
                                     f"{state['model_config'].get(k)!r}, this run asks for {v!r}")
            model.load_state_dict(state.get("last", state)["model"])
            opt.load_state_dict(state["optimizer"])
            _set_rng_state(state["rng"])
            start_epoch, history = int(state["epoch"]), list(state["history"])
            if state.get("best"):
                best = dict(state["best"], model=state["model"])
            if chatty:
                print(f"resumed from {ckpt_path} after epoch {start_epoch}", flush=True)
        elif chatty:
            print(f"no checkpoint at {ckpt_path}; starting fresh", flush=True)
    raw_model = model
    if dist_ctx.enabled:
        from torch.nn.parallel import DistributedDataParallel as DDP

        model = DDP(model, device_ids=[device.index] if device.type == "cuda" else None)

    cache = None
    mb = getattr(args, "memory_budget", 0)
    split = None
    if mb == "auto" and not args.cache_budget:  # an explicit --cache-budget is the user's sizing: auto steps aside
        # Lookahead is auto's to choose only for online sampling without a device tier (the two exclude each
        # other; with --presampled, --lookahead is the pre-sample's superbatch).
        la = args.lookahead if args.lookahead is not None or not (args.device_cache or args.presampled) else 0
        split = budget.auto(ds.path, fanouts, args.batch_size, workers=args.workers, prefetch=args.prefetch,
                            hot_fraction=args.hot_fraction, lookahead=la, processes=dist_ctx.local_world)
    elif mb and mb != "auto":
        split = budget.split(mb, ds.path, fanouts, args.batch_size, workers=args.workers, prefetch=args.prefetch,
                             hot_fraction=args.hot_fraction, lookahead=args.lookahead or 0)
    args.lookahead = split["lookahead"] if split else (args.lookahead or 0)
    if split is not None:
        if split["budget"]:
            args.cache_budget = split["cache"]
            args.lookahead_budget = split["lookahead_cache"]
        if chatty:
            print(budget.describe(split), flush=True)
    if getattr(args, "cache_budget", 0):
        t_cache = time.perf_counter()
        cache = flashgnn.Cache(ds.path, fanouts, args.cache_budget, policy=args.cache_policy, hot=args.cache_hot,
                               hot_fraction=args.hot_fraction,
                               presample_seeds=np.random.default_rng(args.seed).permutation(ds.split("train"))[:8 * args.batch_size],
                               batch_size=args.batch_size)
        if chatty:
            st = cache.stats()
            print(f"cache: {args.cache_budget / 2**20:.0f} MiB ({args.cache_policy}), static hot set by {args.cache_hot} "
                  f"{st['static_bytes'] / 2**20:.0f} MiB chosen and read in {time.perf_counter() - t_cache:.1f} s",
                  flush=True)
    device_cache = None
    if getattr(args, "device_cache", 0) and not getattr(args, "presampled", None):
        from flashgnn.sample.device import DeviceCache

        device_cache = DeviceCache(ds.path, args.device_cache, device=device, progress=progress)
        if chatty:
            st = device_cache.stats()
            print(f"device cache: {st['rows']:,} rows ({st['bytes'] / 2**20:.0f} MiB) on {st['device']}, loaded in "
                  f"{st['load_seconds']:.1f} s", flush=True)
    common = dict(engine=args.engine, prefetch=args.prefetch, num_workers=args.workers, rank=dist_ctx.rank,
                  world_size=dist_ctx.world, pin_memory=False, cache=cache, device_cache=device_cache,
                  degrees=args.model in DEGREE_MODELS)
    if getattr(args, "presampled", None):
        from flashgnn.loader.presample import PresampledLoader

        # --lookahead here is the pre-sample's superbatch: the next batches are read from the file.
        train_loader = PresampledLoader(args.presampled, ds, engine=args.engine, prefetch=args.prefetch, cache=cache,
                                        belady_budget=args.lookahead_budget if args.lookahead else 0,
                                        superbatch=max(1, args.lookahead), degrees=args.model in DEGREE_MODELS)
        want = dict(fanouts=fanouts, batch_size=args.batch_size, seed=args.seed, split="train")
        for k, v in want.items():
            if train_loader.meta[k] != v:
                raise SystemExit(f"flashgnn train: error: {args.presampled}: stored with {k} {train_loader.meta[k]!r}, "
                                 f"this run asks for {v!r}")
        if args.epochs > train_loader.epochs:
            raise SystemExit(f"flashgnn train: error: {args.presampled}: holds {train_loader.epochs} epoch(s), "
                             f"--epochs is {args.epochs}")
        if dist_ctx.enabled:
            raise SystemExit("flashgnn train: error: --presampled runs in one process (no torchrun)")
    else:
        train_loader = NeighborLoader(ds, fanouts, batch_size=args.batch_size, split="train", shuffle=True,
                                      seed=args.seed, lookahead=args.lookahead,
                                      lookahead_budget=args.lookahead_budget if args.lookahead else 0, **common)
    eval_common = dict(common, shuffle=False, seed=args.seed + 1, equal_shards=False)
    val_loader = NeighborLoader(ds, eval_fanouts, batch_size=args.batch_size, split="val", **eval_common)
    test_loader = NeighborLoader(ds, eval_fanouts, batch_size=args.batch_size, split="test", **eval_common)
    window = getattr(train_loader, "window", None)
    if window is not None and window.belady is not None and chatty:
        print(f"lookahead: {args.lookahead} batches, Belady row cache {args.lookahead_budget / 2**20:.0f} MiB "
              f"({window.belady.capacity:,} rows)", flush=True)
    n_train = len(ds.split("train"))
    t_run = time.perf_counter()
    for epoch in range(start_epoch, args.epochs):
        train_loader.set_epoch(epoch)
        model.train()
        steps = len(train_loader) if args.max_batches is None else min(len(train_loader), args.max_batches)
        bar = _progress.bar(total=steps, desc=f"epoch {epoch + 1}/{args.epochs}", unit="batch", disable=not progress,
                            leave=True)
        t0 = time.perf_counter()
        wait = loss_sum = 0.0
        seeds = correct = batches = 0
        it = iter(DeviceFeeder(train_loader, device))
        while batches < steps:
            tw = time.perf_counter()
            data = next(it, None)
            wait += time.perf_counter() - tw
            if data is None:
                break
            data.x = normalize_features(data.x, args.normalize_features)
            opt.zero_grad(set_to_none=True)
            out = forward(model, data)
            y = data.y[: data.batch_size]
            loss = F.cross_entropy(out, y, ignore_index=-1)
            loss.backward()
            opt.step()
            bs = data.batch_size
            loss_sum += float(loss.detach()) * bs
            correct += int((out.argmax(-1) == y).sum())
            seeds += bs
            batches += 1
            el = time.perf_counter() - t0
            bar.update(1)
            bar.set_postfix_str(f"loss {float(loss.detach()):.3f} | {seeds * dist_ctx.world / el:,.0f} seeds/s | "
                                f"data-wait {100 * wait / el:.0f}%" + (f" | cache {_hit_rate(cache):.0%}" if cache else "")
                                + (f" | device {device_cache.stats()['hit_rate']:.0%}" if device_cache else "")
                                + (f" | window {window.stats()['hit_rate']:.0%}" if window else ""))
        it.close()
        bar.close()
        train_seconds = time.perf_counter() - t0
        loss_sum, correct, seeds = dist_ctx.sum([loss_sum, correct, seeds])
        wait_max = dist_ctx.max(wait / max(train_seconds, 1e-9))
        # The same evaluation sample every epoch (and after a resume).
        val_loader.set_epoch(0)
        test_loader.set_epoch(0)
        eval_steps = [len(ld) if args.max_batches is None else min(len(ld), args.max_batches)
                      for ld in (val_loader, test_loader)]
        ebar = _progress.bar(total=sum(eval_steps), desc=f"eval {epoch + 1}/{args.epochs}", unit="batch",
                             disable=not progress, leave=False)
        vc, vt = evaluate(model, val_loader, device, args.normalize_features, args.max_batches, ebar)
        tc, tt = evaluate(model, test_loader, device, args.normalize_features, args.max_batches, ebar)
        ebar.close()
        vc, vt, tc, tt = dist_ctx.sum([vc, vt, tc, tt])
        rec = dict(
            epoch=epoch + 1, train_loss=loss_sum / max(seeds, 1), train_acc=correct / max(seeds, 1),
            val_acc=vc / max(vt, 1), test_acc=tc / max(tt, 1), train_seconds=train_seconds,
            seconds=time.perf_counter() - t0, seeds=int(seeds), seeds_per_s=seeds / max(train_seconds, 1e-9),
            data_wait=wait / max(train_seconds, 1e-9), data_wait_max_rank=wait_max, batches=batches,
            telemetry={k: train_loader.telemetry.get(k)
                       for k in ("reads", "bytes_read", "bytes_used", "iops", "cache_hit_rate", "cache_static_hits",
                                 "cache_dynamic_hits")},
            device_cache=device_cache.stats() if device_cache else None,
            lookahead=train_loader.telemetry.get("lookahead"),
        )
        history.append(rec)
        if best is None or rec["val_acc"] > best["val_acc"]:  # val/test accuracies are summed over ranks: all agree
            best = dict(epoch=rec["epoch"], val_acc=rec["val_acc"], test_acc=rec["test_acc"],
                        model={k: v.detach().clone() for k, v in raw_model.state_dict().items()})
        stale = rec["epoch"] - best["epoch"]
        if chatty:
            print(f"epoch {rec['epoch']}: loss {rec['train_loss']:.4f}, train acc {rec['train_acc']:.4f}, "
                  f"val acc {rec['val_acc']:.4f}, test acc {rec['test_acc']:.4f}, {rec['seeds_per_s']:,.0f} seeds/s, "
                  f"data wait {100 * rec['data_wait']:.1f}% (max over ranks {100 * wait_max:.1f}%), "
                  f"{rec['train_seconds']:.1f} s train + {rec['seconds'] - rec['train_seconds']:.1f} s eval", flush=True)
        if dist_ctx.main:
            if args.checkpoint:
                save_checkpoint(args.checkpoint, dict(
                    format=CHECKPOINT_FORMAT, version=CHECKPOINT_VERSION, model_config=config,
                    model=best["model"], best={k: v for k, v in best.items() if k != "model"},
                    last=dict(model=raw_model.state_dict()), optimizer=opt.state_dict(), epoch=epoch + 1,
                    rng=_rng_state(), history=history, dataset=os.path.abspath(ds.path), args=vars(args)))
        dist_ctx.barrier()
        if args.patience and stale >= args.patience and epoch + 1 < args.epochs:
            if chatty:
                print(f"early stop after epoch {rec['epoch']}: no better validation accuracy for {stale} epochs "
                      f"(--patience {args.patience}; best {best['val_acc']:.4f} at epoch {best['epoch']})", flush=True)
            break
    total = time.perf_counter() - t_run
    if best is not None:  # the run's model is the best-validation one (what the checkpoint holds)
        raw_model.load_state_dict(best["model"])
    # DDP keeps replicas identical; record each rank's weight digest to show it.
    import hashlib

    h = hashlib.sha256()
    for t in raw_model.state_dict().values():
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    digests = dist_ctx.gather(h.hexdigest()[:16])
    last = history[-1] if history else {}
    ran = history[start_epoch:]  # the epochs this process trained (not those resumed past)
    ran_seconds = max(sum(h["train_seconds"] for h in ran), 1e-9)
    summary = dict(
        model=args.model, dataset=ds.path, engine=train_loader.engine, world_size=dist_ctx.world,
        epochs=len(history), seconds=total,
        test_acc=best["test_acc"] if best else None, val_acc=best["val_acc"] if best else None,
        best_epoch=best["epoch"] if best else None,
        final_test_acc=last.get("test_acc"), final_val_acc=last.get("val_acc"), train_loss=last.get("train_loss"),
        data_wait=sum(h["data_wait"] * h["train_seconds"] for h in ran) / ran_seconds if ran else None,
        seeds_per_s=sum(h["seeds"] for h in ran) / ran_seconds if ran else None,
        train_nodes=n_train, rank_weight_digests=digests, ranks_agree=len(set(digests)) == 1,
    )
    if dist_ctx.main:
        if args.metrics_json:
            Path(args.metrics_json).write_text(json.dumps(dict(config=config, args=vars(args), epochs=history,
                                                               summary=summary), indent=2, default=str))
        if history:
            dw = f"{100 * summary['data_wait']:.1f}%" if summary["data_wait"] is not None else "n/a"
            sps = f"{summary['seeds_per_s']:,.0f}" if summary["seeds_per_s"] is not None else "n/a"
            print(f"trained {args.model} on {ds.path} ({train_loader.engine}, {dist_ctx.world} process"
                  f"{'es' if dist_ctx.world > 1 else ''}): {len(history)} epochs, test acc {summary['test_acc']:.4f} "
                  f"at the best val acc {summary['val_acc']:.4f} (epoch {summary['best_epoch']}; final epoch: test "
                  f"{summary['final_test_acc']:.4f}, val {summary['final_val_acc']:.4f}), data wait {dw}, {sps} "
                  f"seeds/s, {total:.1f} s", flush=True)
    dist_ctx.close()
    summary["model_obj"] = raw_model
    summary["history"] = history
    return summary


def main(argv: list[str] | None = None) -> int:
    args = parser("python -m flashgnn.train").parse_args(argv)
    run(args)
    return 0


if __name__ == "__main__":
    sys.exit(main())
