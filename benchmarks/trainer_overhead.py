"""Trainer overhead: `flashgnn train`'s loop against a bare PyG-style loop on the same loader.

    python -m benchmarks.trainer_overhead [--dataset DIR] [--scale 19] [--batches 30] [--rounds 3] [--json]

Each round runs, in alternating order (bare first in even rounds, the
trainer first in odd ones, so neither always runs on a warmer machine):

- ``bare``: ``flashgnn.NeighborLoader(**trainer.train_loader_options)`` — the
  loader arguments of a set-up :class:`~flashgnn.train.Trainer` of this
  round's config, so the two can never drift apart (cache, lookahead,
  producers, prefetch) — the model from ``flashgnn.nn.zoo.build_model``,
  Adam and cross-entropy, written as a PyG user writes the loop;
- ``trainer``: ``Trainer(TrainConfig(...)).fit()`` for one epoch of the same
  ``--batches`` batches (``max_batches``), progress on (its output captured).
- ``bare_forward``: the bare loop with the trainer's own forward
  (``flashgnn.nn.zoo.forward``) instead of PyG's call, so that what differs
  from the trainer is only the trainer's per-step work: the ratio against it
  is the trainer's overhead proper.

Both time the training loop only (first batch wait to the last step,
iterator closed): set-up (opening the dataset, filling the cache) and the
trainer's evaluation are excluded. Both start from the same seed, so they
do the same work: the weights' digests are compared every round. Printed:
ms/batch of each, the ratio trainer/bare per round and its median (target
<= 1.05). ``--default-loader`` adds a third variant, the bare loop over
``flashgnn.NeighborLoader`` built with its own defaults (what a PyG user
writes without the trainer's options), to see what the trainer's loader
configuration costs or saves. The machine should be otherwise idle; on a
shared one, read the median over more rounds. No timed assertion.
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import gc
import hashlib
import io
import json
import statistics
import sys
import time
from pathlib import Path

TARGET = 1.05


def log(s: str) -> None:
    print(s, file=sys.stderr, flush=True)


def ensure_dataset(path: Path, scale: int, seed: int = 1) -> Path:
    """``path`` as built from an R-MAT graph of 2^scale nodes (128-d float32, 16 classes, edge factor 16,
    the generator's default splits), generated and built once; an existing dataset is used as it is."""
    import flashgnn

    if (path / "manifest.json").exists():
        return path
    raw = path.with_name(path.name + "-raw")
    log(f"trainer-overhead: generating {raw} (scale {scale}) and building {path}")
    t = time.perf_counter()
    flashgnn.generate(raw, scale=scale, edge_factor=16, dim=128, classes=16, seed=seed, progress=False, force=True)
    flashgnn.build(raw, path, symmetrize=True, dedup=True, progress=False)
    log(f"trainer-overhead: dataset ready in {time.perf_counter() - t:.0f} s")
    return path


def digest(model) -> str:
    """The weights' digest, as ``Trainer.fit`` computes it (``rank_weight_digests``)."""
    h = hashlib.sha256()
    for t in model.state_dict().values():
        h.update(t.detach().cpu().contiguous().numpy().tobytes())
    return h.hexdigest()[:16]


def bare(config, trainer_cls=None, default_loader: bool = False, zoo_forward: bool = False) -> dict:
    """The bare loop over ``config.max_batches`` batches: the loader a set-up trainer of ``config`` would
    train on (``default_loader``: NeighborLoader's own defaults instead), a fresh model, Adam, cross-entropy.
    ``zoo_forward``: the step calls ``flashgnn.nn.zoo.forward`` — the trainer's own forward — so the
    difference left is only the trainer's per-step work; otherwise PyG's call with its per-layer trimming."""
    import torch
    import torch.nn.functional as F

    import flashgnn
    from flashgnn.nn.zoo import build_model, forward
    from flashgnn.train import Trainer

    t = (trainer_cls or Trainer)(dataclasses.replace(config, quiet=True))
    t.setup()  # the trainer's loader options, threads and seeds; its own loop never runs
    if t.train_loader_options is None:
        raise SystemExit("trainer-overhead: --presampled runs have no NeighborLoader to compare with")
    if default_loader:
        o = t.train_loader_options
        loader = flashgnn.NeighborLoader(config.dataset, num_neighbors=o["num_neighbors"], batch_size=o["batch_size"],
                                         split="train", shuffle=True, seed=o["seed"], num_workers=o["num_workers"],
                                         quiet=True)
    else:
        loader = flashgnn.NeighborLoader(**t.train_loader_options)
    mc = t.model_config
    torch.manual_seed(config.seed)  # as the trainer seeds before it builds its model: the same initial weights
    model = build_model(mc["model"], mc["in_dim"], mc["hidden"], mc["out_dim"], mc["num_layers"], mc["dropout"])
    opt = torch.optim.Adam(model.parameters(), lr=config.lr, weight_decay=config.weight_decay)
    gcn = mc["model"] == "gcn"
    model.train()
    n = 0
    t0 = time.perf_counter()
    it = iter(loader)
    for data in it:
        opt.zero_grad(set_to_none=True)
        bs = data.batch_size
        if zoo_forward:
            out = forward(model, data)
        elif mc["model"] == "mlp":
            out = model(data.x[:bs])
        else:  # PyG's per-layer trimming, as flashgnn.NeighborLoader's docstring writes the call
            out = model(data.x, data.edge_index, num_sampled_nodes_per_hop=data.num_sampled_nodes,
                        num_sampled_edges_per_hop=data.num_sampled_edges, **({"deg": data.deg} if gcn else {}))[:bs]
        loss = F.cross_entropy(out, data.y[:bs], ignore_index=-1)
        loss.backward()
        opt.step()
        n += 1
        if n >= config.max_batches:
            break
    it.close()
    seconds = time.perf_counter() - t0
    return dict(batches=n, seconds=seconds, ms_per_batch=1000 * seconds / max(n, 1), digest=digest(model),
                lookahead=getattr(loader, "lookahead", 0), cache=loader.cache is not None)


def trained(config, trainer_cls=None) -> dict:
    """``Trainer(config).fit()``: one epoch of ``config.max_batches`` batches, its printed output captured."""
    from flashgnn.train import Trainer

    with contextlib.redirect_stdout(io.StringIO()), contextlib.redirect_stderr(io.StringIO()):
        s = (trainer_cls or Trainer)(config).fit()
    h = s["history"][0]
    return dict(batches=h["batches"], seconds=h["train_seconds"],
                ms_per_batch=1000 * h["train_seconds"] / max(h["batches"], 1), digest=s["rank_weight_digests"][0],
                data_wait=h["data_wait"])


def measure(config, rounds: int, default_loader: bool = False, trainer_cls=None, progress=log) -> dict:
    """``rounds`` alternating rounds of the bare loop and the trainer on ``config``: per round both figures,
    the ratio trainer/bare and whether the weights agree; the medians."""
    per_round = []
    for r in range(rounds):
        order = ["bare", "trainer", "bare_forward"] if r % 2 == 0 else ["bare_forward", "trainer", "bare"]
        if default_loader:
            order.append("default")
        res = {}
        for v in order:
            if v == "trainer":
                res[v] = trained(config, trainer_cls)
            else:
                res[v] = bare(config, trainer_cls, default_loader=v == "default", zoo_forward=v == "bare_forward")
            gc.collect()  # the variant's cache and loaders go before the next one opens its own
        rec = dict(round=r + 1, order=order, **{f"{v}_ms_per_batch": res[v]["ms_per_batch"] for v in order},
                   ratio=res["trainer"]["ms_per_batch"] / res["bare"]["ms_per_batch"],
                   ratio_vs_forward=res["trainer"]["ms_per_batch"] / res["bare_forward"]["ms_per_batch"],
                   same_weights=res["trainer"]["digest"] == res["bare"]["digest"] == res["bare_forward"]["digest"],
                   batches=res["trainer"]["batches"], data_wait=res["trainer"]["data_wait"])
        if default_loader:
            rec["ratio_vs_default"] = res["trainer"]["ms_per_batch"] / res["default"]["ms_per_batch"]
        per_round.append(rec)
        progress(f"trainer-overhead: round {r + 1}/{rounds}: bare {rec['bare_ms_per_batch']:.1f} ms/batch, trainer "
                 f"{rec['trainer_ms_per_batch']:.1f} ms/batch (data wait {100 * rec['data_wait']:.1f}%) -> ratio "
                 f"{rec['ratio']:.3f}; bare loop with the trainer's forward {rec['bare_forward_ms_per_batch']:.1f} "
                 f"ms/batch -> ratio {rec['ratio_vs_forward']:.3f}"
                 + (f"; default loader {rec['default_ms_per_batch']:.1f} ms/batch" if default_loader else "")
                 + ("" if rec["same_weights"] else "; WEIGHTS DIFFER"))
    med = lambda k: statistics.median(x[k] for x in per_round)  # noqa: E731
    summary = dict(ratio_median=med("ratio"), ratio_vs_forward_median=med("ratio_vs_forward"),
                   bare_forward_ms_per_batch_median=med("bare_forward_ms_per_batch"),
                   bare_ms_per_batch_median=med("bare_ms_per_batch"),
                   trainer_ms_per_batch_median=med("trainer_ms_per_batch"), target=TARGET,
                   same_weights=all(x["same_weights"] for x in per_round))
    if default_loader:
        summary.update(default_ms_per_batch_median=med("default_ms_per_batch"),
                       ratio_vs_default_median=med("ratio_vs_default"))
    return dict(rounds=per_round, summary=summary)


def main(argv=None) -> int:
    from flashgnn._util import ArgumentParser
    from flashgnn.cli import quiet_warnings

    p = ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--dataset", type=Path, default=Path("data/trainer"),
                   help="dataset directory; generated and built (--scale) when it has no manifest")
    p.add_argument("--scale", type=int, default=19, help="2^scale nodes for a dataset built here")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--batches", type=int, default=30, help="training batches per variant per round")
    p.add_argument("--model", default="sage")
    p.add_argument("--hidden", type=int, default=256)
    p.add_argument("--dropout", type=float, default=0.0)
    p.add_argument("--fanout", default="25,10")
    p.add_argument("--batch-size", type=int, default=1024)
    p.add_argument("--threads", type=int, default=None, help="torch threads (default: the trainer's)")
    p.add_argument("--memory-budget", default="auto", help="the trainer's --memory-budget")
    p.add_argument("--lookahead", type=int, default=None, help="the trainer's --lookahead (default: auto's)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--default-loader", action="store_true",
                   help="also time the bare loop over NeighborLoader's own defaults")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    for name in ("rounds", "batches"):
        if getattr(a, name) < 1:
            p.error(f"--{name} {getattr(a, name)}: must be >= 1")
    quiet_warnings()
    from flashgnn.train import TrainConfig

    ds = ensure_dataset(a.dataset, a.scale)
    config = TrainConfig(dataset=str(ds), model=a.model, hidden=a.hidden, dropout=a.dropout, fanout=a.fanout,
                         batch_size=a.batch_size, epochs=1, max_batches=a.batches, eval_batches=1,
                         threads=a.threads, memory_budget=a.memory_budget, lookahead=a.lookahead, seed=a.seed)
    log(f"trainer-overhead: {ds}, {a.model} hidden {a.hidden}, fanout {a.fanout}, batch {a.batch_size}, "
        f"{a.batches} batches x {a.rounds} rounds")
    rep = measure(config, a.rounds, a.default_loader)
    rep.update(dataset=str(ds), model=a.model, hidden=a.hidden, fanout=a.fanout, batch_size=a.batch_size,
               batches=a.batches, memory_budget=a.memory_budget, lookahead=a.lookahead)
    s = rep["summary"]
    if a.json:
        print(json.dumps(rep, indent=2))
    ratios = ", ".join(f"{x['ratio']:.3f}" for x in rep["rounds"])
    extra = (f"; trainer/default-loader bare loop {s['ratio_vs_default_median']:.3f}" if a.default_loader else "")
    print(f"summary: trainer/bare {s['ratio_median']:.3f} median over {a.rounds} rounds ({ratios}; target <= "
          f"{TARGET}), {s['trainer_ms_per_batch_median']:.1f} vs {s['bare_ms_per_batch_median']:.1f} ms/batch, "
          f"same weights: {'yes' if s['same_weights'] else 'NO'}; trainer/bare loop with the trainer's forward "
          f"{s['ratio_vs_forward_median']:.3f}{extra}", file=sys.stderr if a.json else sys.stdout)
    return 0


if __name__ == "__main__":
    sys.exit(main())
