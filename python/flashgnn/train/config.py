"""Every option of ``flashgnn train``, defined once: :class:`TrainConfig`.

Each field carries its default, its option group and its one-line help; the
``flashgnn train`` parser (:func:`parser`), the defaults ``presample`` shares
with ``train`` (fanout, batch size, seed) and the Python API
(``flashgnn.train.fit(dataset, **options)``) all derive from these fields, so
an option is added in one place.

Invariants:

- ``TrainConfig(**kw)`` refuses a key that is not a field, naming the
  accepted ones (a misspelt option never trains with the default silently).
- A config is frozen: derived values (the parsed fanouts, the memory-budget
  split, the resolved lookahead) live on the :class:`~flashgnn.train.Trainer`.
- :meth:`TrainConfig.validate` checks every option before anything is
  opened, read or imported, and raises :class:`TrainError` naming the flag,
  its value and the bound. Nothing here exits the process: the command line turns a
  :class:`TrainError` into ``flashgnn train: error: ...`` and exit status 2.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
import os
from dataclasses import dataclass, field
from pathlib import Path

from flashgnn import _core
from flashgnn.nn.zoo import ALL_MODELS, LINK_DECODERS, LINK_ONLY_MODELS, NORMALIZE_FEATURES
from flashgnn.sample.budget import parse_budget
from flashgnn.sample.sampler import DEFAULT_HOT_FRACTION, ENGINE_CHOICES, ROW_CODECS


class TrainError(ValueError):
    """A training run that cannot start or continue: a bad option, a dataset
    without labels/features/splits, a checkpoint or pre-sample that does not
    match. The message names the flag or file, the value and the bound."""


# Option groups of `flashgnn train --help`, in the order they print.
TASKS = ("node", "link")
# --task link: the metrics (flashgnn.train.link maps each to its OGB evaluator; that module imports torch and
# the config must not).
LINK_METRICS = ("auto", "rocauc", "mrr", "hits@20", "hits@50", "hits@100")
# --task link: how evaluation scores a pair (flashgnn.train.link module docs).
LINK_EVALS = ("auto", "batches", "embeddings")
GROUPS = ("model and optimisation", "sampling and reading", "memory and caches", "checkpoints and output")
CACHE_POLICIES = ("s3fifo", "clock")
CACHE_HOT = ("auto", "touches", "degree", "presample", "none")


def _size(text) -> int:
    from flashgnn._util import parse_size

    return parse_size(text)


def _opt(default, group: int, help: str, *, type=None, choices=None, short: str | None = None):
    """A field of :class:`TrainConfig`: its default, option group (index into
    :data:`GROUPS`), help line, argparse ``type`` (sizes parse ``256MiB``) and
    choices. A default of None is explained in the help's own words; a bool
    is an off-by-default flag; any other default is shown by ``--help``."""
    meta = dict(group=GROUPS[group], help=help, type=type, choices=choices, short=short)
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class TrainConfig:
    """The options of one training run (``flashgnn train --help`` lists the same, with the same defaults)."""

    dataset: str = field(metadata=dict(help="a dataset directory written by `flashgnn build`"))
    # model and optimisation
    model: str = _opt("sage", 0, "mlp = features-only baseline; a typed dataset takes rgat (MLPerf's R-GAT), rgcn "
                              "or sage (to_hetero(GraphSAGE)); --task link takes sage, gcn, gat, lightgcn or "
                              "ngcf (typed: rgat, rgcn or sage)",
                      choices=ALL_MODELS + LINK_ONLY_MODELS)
    task: str = _opt("node", 0, "node: classify the nodes of the 'train' split; link: predict the edges of the "
                                "dataset's link split (built with --link-split; docs/training.md, Link prediction)",
                     choices=TASKS)
    decoder: str = _opt("dot", 0, "--task link: how a (source, destination) pair is scored from its two node "
                                  "embeddings: dot product, or an MLP on their elementwise product",
                        choices=LINK_DECODERS)
    negatives: float = _opt(1.0, 0, "--task link: random negative pairs per training edge (PyG's binary "
                                    "neg_sampling amount)", type=float)
    link_metric: str = _opt("auto", 0, "--task link: the metric of validation and test, computed by the ogb "
                                       "package's Evaluator (auto: the OGB dataset's own, else mrr with K > 1 stored "
                                       "negatives per positive, else rocauc)", choices=LINK_METRICS)
    link_eval: str = _opt("auto", 0, "--task link: how a pair is scored in evaluation: batches = link batches over "
                                     "the pairs (PyG's recipe), embeddings = each endpoint embedded once by a node "
                                     "batch (OGB's); auto: embeddings with K > 1 stored negatives per positive, else "
                                     "batches", choices=LINK_EVALS)
    exclude_seed_edges: bool = _opt(False, 1, "--task link: remove each batch's training edges (and their reverses) "
                                              "from its own sampled subgraph (GraphBolt's exclude_seed_edges)")
    hidden: int = _opt(128, 0, "hidden channels", type=int)
    dropout: float = _opt(0.2, 0, "dropout probability, in [0, 1)", type=float)
    epochs: int = _opt(3, 0, "epochs to train (>= 1)", type=int)
    lr: float = _opt(3e-3, 0, "Adam learning rate", type=float)
    weight_decay: float = _opt(0.0, 0, "L2 penalty of the Adam optimizer (PyG's Planetoid examples use 5e-4)",
                               type=float)
    normalize_features: str = _opt(
        "none", 0, "row: divide each feature row by its sum (clamped at 1), as PyG's NormalizeFeatures does for "
        "non-negative features; applied as batches load, recorded in the checkpoint so `embed` applies it too",
        choices=NORMALIZE_FEATURES)
    patience: int = _opt(0, 0, "stop after this many epochs without a better validation accuracy (--task link: "
                               "validation metric; training accuracy on a dataset without a val split; 0 = run "
                               "every epoch); either way the checkpoint and the reported test figure are the best "
                               "epoch's", type=int)
    seed: int = _opt(0, 0, "weights, batch order and sampling", type=int)
    device: str = _opt("cpu", 0, "cpu | cuda | cuda:N")
    threads: int | None = _opt(None, 0, "torch intra-op threads (default: cores / local ranks - 1)", type=int)
    # sampling and reading
    fanout: str = _opt("25,10", 1, "neighbors per hop, comma separated (-1 = all); on a typed dataset, per hop for "
                                   "every edge type not in --type-fanouts")
    type_fanouts: str | None = _opt(None, 1, "typed datasets: per edge type fanouts, 'SRC__REL__DST=15,10' entries "
                                             "separated by spaces (as many hops as --fanout; default: --fanout for "
                                             "every edge type)")
    target_type: str | None = _opt(None, 1, "typed datasets: the node type to classify (default: the one with labels "
                                            "and a train split)")
    eval_fanout: str | None = _opt(None, 1, "fanouts for validation/test (default: --fanout)")
    batch_size: int = _opt(1024, 1, "seed nodes per batch", type=int)
    engine: str = _opt("auto", 1, "|".join(ENGINE_CHOICES))
    prefetch: int = _opt(4, 1, "batches prepared ahead of the trainer", type=int)
    workers: int | None = _opt(None, 1, "sampling producer threads (default: the cores this process may use, per "
                               "local rank, less the trainer's --threads; at least 1)", type=int)
    presampled: str | None = _opt(None, 1, "train from the subgraphs stored by `flashgnn presample` (same --seed, "
                                           "--fanout, --batch-size: the weights are identical to online sampling; "
                                           "default: sample online)")
    # memory and caches
    memory_budget: int | str = _opt(
        "auto", 2, "one budget for the engine's buffers, the prefetch window, the cache and the lookahead (the split "
        "is printed at start). auto: what this process may use (cgroup limit, else available RAM) less a reserve "
        "for torch and the model, capped at what caching the whole dataset needs, with lookahead when the data "
        "does not fit; 0 = no cache; overrides --cache-budget unless that is given", type=parse_budget)
    cache_budget: int = _opt(0, 2, "cross-batch DRAM cache for pages and feature rows, e.g. 256MiB (0 = none); "
                                   "shared by the train/val/test loaders", type=_size)
    cache_policy: str = _opt("s3fifo", 2, "replacement policy of the cache's dynamic tier", choices=CACHE_POLICIES)
    cache_hot: str = _opt("auto", 2, "how the cache's static hot set (--hot-fraction of the budget) is chosen (auto: "
                                     "touches, or degree on a typed dataset)", choices=CACHE_HOT)
    hot_fraction: float = _opt(DEFAULT_HOT_FRACTION, 2, "share of the cache budget for the static hot set, in [0, 1]",
                               type=float)
    cache_row_codec: str = _opt("none", 2, "how the cache's static hot set holds float32 rows: as stored, "
                                           "or encoded (fp16, int8, int4: two, almost four or about seven times the "
                                           "rows in the same bytes; batches then carry the decoded values)", choices=ROW_CODECS)
    device_cache: int = _opt(0, 2, "GPU tier: this many bytes of the highest-degree feature rows resident on "
                                   "--device and gathered there, never read from disk (0 = off; online sampling "
                                   "only)", type=_size)
    lookahead: int | None = _opt(None, 2, "online lookahead: sample each training batch's structure this many "
                                          "batches ahead and fill its feature rows through a Belady cache that "
                                          "knows those batches (0 = off; default: --memory-budget auto chooses)",
                                 type=int)
    lookahead_budget: int = _opt(0, 2, "bytes of the lookahead's Belady row cache (with --memory-budget: its share "
                                       "is taken from the cache part)", type=_size)
    # checkpoints and output
    checkpoint: str | None = _opt(None, 3, "directory for checkpoint.pt (written after every epoch; default: none)")
    resume: bool = _opt(False, 3, "continue from --checkpoint")
    metrics_json: str | None = _opt(None, 3, "write per-epoch metrics and the summary to this file (default: none)")
    max_batches: int | None = _opt(None, 3, "stop each epoch's training and each evaluation after this many batches "
                                            "(smoke runs; default: every batch)", type=int)
    eval_batches: int | None = _opt(None, 3, "stop each evaluation after this many batches (a timed training run "
                                             "that needs only a sample of val/test; default: --max-batches)",
                                    type=int)
    no_progress: bool = _opt(False, 3, "no progress bars (epoch lines still print)")
    quiet: bool = _opt(False, 3, "print only errors and the final summary line", short="-q")

    def __new__(cls, *args, **kw):
        # Checked before the generated __init__ runs, so the error names the accepted options
        # (a plain TypeError "unexpected keyword argument" would not).
        unknown = sorted(k for k in kw if k not in _NAMES)
        if unknown:
            raise TrainError(f"TrainConfig: unknown option(s) {', '.join(unknown)}; accepted: {', '.join(_NAMES)}")
        return super().__new__(cls)

    def __post_init__(self):
        # The Python API takes what the command line would parse: paths, sizes as "256MiB", fanouts as lists.
        # Normalised here, once, so the stored config (checkpoint, metrics) holds plain strings and numbers.
        def put(name, value):
            object.__setattr__(self, name, value)

        for name in ("dataset", "checkpoint", "metrics_json", "presampled"):
            v = getattr(self, name)
            if isinstance(v, os.PathLike):
                put(name, os.fspath(v))
        for name in ("fanout", "eval_fanout"):
            v = getattr(self, name)
            if isinstance(v, (list, tuple)):
                put(name, ",".join(str(x) for x in v))
        for name in ("memory_budget", "cache_budget", "device_cache", "lookahead_budget"):
            v = getattr(self, name)
            if isinstance(v, str):
                try:
                    put(name, FIELDS[name].metadata["type"](v))
                except argparse.ArgumentTypeError as e:
                    raise TrainError(f"{flag(name)} {v!r}: {e}") from None

    @classmethod
    def from_namespace(cls, ns: argparse.Namespace) -> "TrainConfig":
        """The config of a parsed ``flashgnn train`` command line; attributes that are no option of
        ``train`` (the CLI's ``command``) are left out, options an older caller's namespace lacks take
        their defaults."""
        return cls(**{k: v for k, v in vars(ns).items() if k in FIELDS})

    def as_dict(self) -> dict:
        """Every option as given (what a checkpoint and ``--metrics-json`` record)."""
        return dataclasses.asdict(self)

    def validate(self) -> None:
        """Every option checked before anything is opened, read or imported: a run that cannot finish
        stops here, naming the flag, its value and the bound. Raises :class:`TrainError`."""
        def bad(name: str, value, bound: str) -> None:
            raise TrainError(f"{flag(name)} {value}: {bound}")

        if not isinstance(self.dataset, str) or not self.dataset:
            raise TrainError(f"dataset {self.dataset!r}: expected a dataset directory (written by `flashgnn build`)")
        for name in FIELDS:
            f, v = FIELDS[name], getattr(self, name)
            if f.metadata.get("choices") and v not in f.metadata["choices"]:
                bad(name, repr(v), f"expected one of {', '.join(f.metadata['choices'])}")
            kind = f.metadata.get("type")
            if kind is int and v is not None and (not isinstance(v, int) or isinstance(v, bool)):
                bad(name, repr(v), "must be an integer")
            if kind is float and (not isinstance(v, (int, float)) or isinstance(v, bool)):
                bad(name, repr(v), "must be a number")
        for name, lo in (("epochs", 1), ("batch_size", 1), ("hidden", 1), ("prefetch", 1), ("workers", 1),
                         ("patience", 0)):
            if getattr(self, name) is not None and getattr(self, name) < lo:
                bad(name, getattr(self, name), f"must be >= {lo}")
        if self.lookahead is not None and self.lookahead < 0:
            bad("lookahead", self.lookahead, "must be >= 0")
        for name in ("threads", "max_batches", "eval_batches"):
            v = getattr(self, name)
            if v is not None and v < 1:
                bad(name, v, "must be >= 1 (leave it out for the default)")
        if not (self.negatives > 0.0 and math.isfinite(self.negatives)):
            bad("negatives", float(self.negatives), "must be a finite number > 0")
        self._check_task()
        if not (0.0 <= self.dropout < 1.0):
            bad("dropout", self.dropout, "must be in [0, 1)")
        if not (self.lr > 0.0 and math.isfinite(self.lr)):
            bad("lr", float(self.lr), "must be a finite number > 0")
        if not (self.weight_decay >= 0.0 and math.isfinite(self.weight_decay)):
            bad("weight_decay", float(self.weight_decay), "must be a finite number >= 0")
        if not (0.0 <= self.hot_fraction <= 1.0):
            bad("hot_fraction", float(self.hot_fraction), "must be in [0, 1]")
        if self.memory_budget != "auto" and (not isinstance(self.memory_budget, int) or self.memory_budget < 0):
            bad("memory_budget", repr(self.memory_budget), "must be auto or a size in bytes >= 0")
        for name in ("cache_budget", "device_cache", "lookahead_budget"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                bad(name, repr(v), "must be a size in bytes >= 0 (e.g. 256MiB)")
        parse_fanout(self.fanout)
        if self.type_fanouts:
            parse_type_fanouts(self.type_fanouts, len(parse_fanout(self.fanout)))
        if self.eval_fanout:
            parse_fanout(self.eval_fanout, "eval_fanout")
        if self.presampled:
            self._check_presampled()
        if self.lookahead and self.device_cache and not self.presampled:
            raise TrainError("--lookahead and --device-cache cannot be combined (rows are filled on the host by the "
                             "one, gathered on the device by the other)")
        if self.resume and not self.checkpoint:
            raise TrainError("--resume needs --checkpoint DIR")
        if self.checkpoint:
            ck = Path(self.checkpoint)
            if ck.exists() and not ck.is_dir():
                bad("checkpoint", ck, "exists and is not a directory")
            _writable_dir("checkpoint", ck if ck.exists() else _existing_ancestor(ck), ck)
        if self.metrics_json:
            mj = Path(self.metrics_json)
            if mj.is_dir():
                bad("metrics_json", mj, "is a directory; give a file name")
            parent = mj.absolute().parent
            if not parent.exists():
                bad("metrics_json", mj, f"{parent} does not exist")
            _writable_dir("metrics_json", parent, mj)
        if not os.path.isfile(os.path.join(self.dataset, _core.MANIFEST_FILE)):
            # Last (every flag is checked first), yet before torch loads: the store's own error, with its
            # advice (a raw input directory or edge list is told to run `flashgnn build`).
            from flashgnn.store.dataset import Dataset

            Dataset(self.dataset)

    def _check_task(self) -> None:
        """The options ``--task`` decides: the models each task takes, and what link prediction does not do."""
        from flashgnn.nn.zoo import HETERO_MODELS, LINK_MODELS

        if self.task == "node":
            if self.model in LINK_ONLY_MODELS:
                raise TrainError(f"--model {self.model} is a link-prediction model: give --task link (node "
                                 f"classification takes {', '.join(ALL_MODELS)})")
            return
        # Which of these the dataset takes (homogeneous: LINK_MODELS, typed: HETERO_MODELS) is the trainer's
        # check: the dataset is not opened here.
        if self.model not in LINK_MODELS + HETERO_MODELS:
            raise TrainError(f"--model {self.model} with --task link: expected one of {', '.join(LINK_MODELS)} (a "
                             f"typed dataset: {', '.join(HETERO_MODELS)})")
        for name, given in (("presampled", self.presampled), ("lookahead", self.lookahead),
                            ("device_cache", self.device_cache), ("target_type", self.target_type)):
            if given:
                raise TrainError(f"{flag(name)} {given} with --task link: link batches do not support it yet "
                                 "(leave it out)")

    def _check_presampled(self) -> None:
        """``--presampled DIR`` holds a pre-sample this run can use (its ``presample.json`` only: no dataset
        is opened): refused with the flags to give `presample` (or `train`) where they differ."""
        import json

        from flashgnn._durable import read_regular

        pj = Path(self.presampled) / "presample.json"
        redo = f"`flashgnn presample {self.dataset} {self.presampled} --force` with this run's flags"
        if not pj.is_file():
            raise TrainError(f"--presampled {self.presampled}: has no {pj.name}, so it is not a pre-sample "
                             f"directory; write one with `flashgnn presample {self.dataset} {self.presampled}`")
        try:
            meta = json.loads(read_regular(pj))
            stored = dict(fanout=",".join(str(int(v)) for v in meta["fanouts"]), batch_size=int(meta["batch_size"]),
                          seed=int(meta["seed"]), epochs=len(meta["epochs"]))
        except (OSError, ValueError, KeyError, TypeError) as e:
            raise TrainError(f"{pj}: not a readable pre-sample description ({type(e).__name__}: {e})") from None
        if self.model == "mlp":
            raise TrainError(f"--presampled {self.presampled} with --model mlp: an MLP samples no neighbors, so "
                             "there is nothing to pre-sample; leave out --presampled")
        if meta.get("split") != "train":
            raise TrainError(f"--presampled {self.presampled}: holds the {meta.get('split')!r} split; training "
                             f"reads 'train' (run {redo})")
        fanout = ",".join(map(str, parse_fanout(self.fanout)))
        for name, want in (("fanout", fanout), ("batch_size", self.batch_size), ("seed", self.seed)):
            if stored[name] != want:
                raise TrainError(f"--presampled {self.presampled}: stored with {flag(name)} {stored[name]}, this run "
                                 f"has {flag(name)} {want}; give the same, or run {redo}")
        if stored["epochs"] < self.epochs:
            raise TrainError(f"--presampled {self.presampled}: holds {stored['epochs']} epoch(s), --epochs is "
                             f"{self.epochs}; train with --epochs {stored['epochs']}, or run {redo}")


def _existing_ancestor(p: Path) -> Path:
    """The nearest existing directory entry on ``p``'s path (what creating ``p`` starts from)."""
    return next((q for q in p.absolute().parents if os.path.lexists(q)), Path("/"))


def _writable_dir(name: str, d: Path, given: Path) -> None:
    """Refuse ``--NAME GIVEN`` unless ``d`` (the directory it is written in, or created under) is a directory
    this process may create files in. A file in the way is named as such: root passes os.access on any file."""
    if not d.is_dir():
        raise TrainError(f"{flag(name)} {given}: {d} is not a directory")
    if not os.access(d, os.W_OK | os.X_OK):
        raise TrainError(f"{flag(name)} {given}: {d} is not writable")


FIELDS = {f.name: f for f in dataclasses.fields(TrainConfig)}
_NAMES = tuple(FIELDS)


def flag(name: str) -> str:
    """The command-line flag of a field: ``batch_size`` -> ``--batch-size``."""
    return "--" + name.replace("_", "-")


def default(name: str):
    """A field's default (``presample`` takes fanout, batch size and seed from here: same batches)."""
    return FIELDS[name].default


def parse_fanout(text: str, name: str = "fanout") -> list[int]:
    """``"25,10"`` -> ``[25, 10]``; -1 = every neighbor. A hop of 0 is refused: it samples no neighbor, so
    the model would see the seeds' features alone (that is ``--model mlp``). Raises :class:`TrainError`
    naming ``--NAME``."""
    from flashgnn.loader._args import HOPS_MAX

    try:
        f = [int(x) for x in str(text).split(",") if x.strip()]
    except ValueError:
        raise TrainError(f"{flag(name)} {text!r}: expected integers like 25,10") from None
    if not f:
        raise TrainError(f"{flag(name)} {text!r}: expected one integer per hop, like 25,10")
    for hop, v in enumerate(f):
        if v < -1 or v == 0:
            raise TrainError(f"{flag(name)} {text!r}: hop {hop + 1} is {v}; each hop must be >= 1, or -1 for every "
                             "neighbor (0 would sample none: for a features-only model use --model mlp)")
    if len(f) > HOPS_MAX:
        raise TrainError(f"{flag(name)} {text!r}: {len(f)} hops; at most {HOPS_MAX}")
    return f


def parse_type_fanouts(text: str, hops: int) -> dict[tuple[str, str, str], list[int]]:
    """``--type-fanouts``: ``SRC__REL__DST=15,10`` entries separated by spaces, each with ``hops`` fanouts."""
    out = {}
    for item in text.split():
        key, eq, value = item.partition("=")
        parts = tuple(key.split("__"))
        if not eq or len(parts) != 3 or not all(parts):
            raise TrainError(f"--type-fanouts: {item!r} is not SRC__REL__DST=F1,F2,...")
        fan = parse_fanout(value, f"type-fanouts {key}")
        if len(fan) != hops:
            raise TrainError(f"--type-fanouts: {key} has {len(fan)} hops, --fanout has {hops} (every edge type "
                             "takes the same number of hops)")
        out[parts] = fan
    return out


def parser(prog: str = "flashgnn train") -> argparse.ArgumentParser:
    """The ``flashgnn train`` parser, generated from :class:`TrainConfig`'s fields (groups, defaults,
    help); ``TrainConfig.from_namespace(parser().parse_args(argv))`` is the run's config."""
    from flashgnn._util import ArgumentParser  # --fanout -1,-1 is a value, not an option

    p = ArgumentParser(prog=prog, description="Train a GNN on a flashgnn dataset (mini-batch, SSD-resident).")
    groups = {g: p.add_argument_group(g) for g in GROUPS}
    for f in dataclasses.fields(TrainConfig):
        m = f.metadata
        if f.default is dataclasses.MISSING:
            p.add_argument(f.name, help=m["help"])
            continue
        names = [flag(f.name)] + ([m["short"]] if m.get("short") else [])
        if isinstance(f.default, bool):
            groups[m["group"]].add_argument(*names, action="store_true", help=m["help"])
            continue
        kw = dict(default=f.default, help=m["help"])  # the formatter shows the default (0 too; None never)
        if m.get("type") is not None:
            kw["type"] = m["type"]
        if m.get("choices"):
            kw["choices"] = list(m["choices"])
        groups[m["group"]].add_argument(*names, **kw)
    return p
