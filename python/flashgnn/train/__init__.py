"""Mini-batch GNN training over an SSD-resident dataset: a library, with ``flashgnn train`` on top.

    from flashgnn.train import TrainConfig, Trainer, fit
    summary = fit("data/demo", epochs=3, fanout=[25, 10])          # == flashgnn train data/demo --epochs 3
    trainer = Trainer(TrainConfig("data/demo", epochs=3)); trainer.fit(); trainer.evaluate("test")
    torchrun --nproc-per-node 2 -m flashgnn.train DATASET ...        # data-parallel (DDP)

One job per module: :mod:`~flashgnn.train.config` (every option, its default
and help, defined once; the CLI parser is generated from it),
:mod:`~flashgnn.train.dist` (the DDP context), :mod:`~flashgnn.train.feeder`
(CUDA batch staging), :mod:`~flashgnn.train.trainer` (the loop). Errors are
:class:`TrainError` (a ``ValueError``); only the command line exits the process.
"""

from flashgnn.train.config import TrainConfig, TrainError
from flashgnn.train.trainer import Trainer

__all__ = ["TrainConfig", "TrainError", "Trainer", "fit"]


def fit(dataset, **options) -> dict:
    """Train on ``dataset`` with ``options`` (the fields of :class:`TrainConfig`, e.g. ``epochs=3``,
    ``fanout=[10, 5]``, ``cache_budget="256MiB"``; an unknown one is refused naming the accepted ones) and
    return the summary ``flashgnn train`` prints (plus ``model_obj`` and ``history``)."""
    return Trainer(TrainConfig(dataset=dataset, **options)).fit()
