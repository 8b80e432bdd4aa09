"""Models: the layers and model zoo flashgnn trains, and their checkpoints.

Named after ``torch_geometric.nn``, which it extends:

- :class:`GCN` — PyG's ``GCN`` normalised by whole-graph degrees (:mod:`~flashgnn.nn.gcn`, ``degnorm``).
- :mod:`~flashgnn.nn.zoo` — the one list of models ``train``/``embed``/``serve`` build (``MODEL_CLASSES``).
- :mod:`~flashgnn.nn.checkpoint` — the checkpoint format (``weights_only`` loads) and rebuilding a model from it.
- :mod:`~flashgnn.nn.layerwise` — ``flashgnn.inference(model, DATASET[, OUT])``: whole-graph inference one layer
  at a time with bounded memory, for any PyG ``BasicGNN`` or per-layer module (``flashgnn embed`` runs it).
- :mod:`~flashgnn.nn.usermodel` — a user's own model class and ``state_dict`` (``embed --model-class``).
- :mod:`~flashgnn.nn.link` — ``LinkModel``, the encoder + pair decoder of ``train --task link``;
  :mod:`~flashgnn.nn.ngcf` — NGCF, which PyG lacks.
"""

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from flashgnn.nn.degnorm import degree_norm
    from flashgnn.nn.gcn import GCN

# Loaded on first use: `import flashgnn` reaches this package (for `flashgnn.inference`) and must not import
# torch (the CLI and the builder stay light; tests/package/test_imports.py checks it).
_LAZY = {"GCN": "flashgnn.nn.gcn", "degree_norm": "flashgnn.nn.degnorm"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'flashgnn.nn' has no attribute {name!r}")


__all__ = ["GCN", "degree_norm"]
