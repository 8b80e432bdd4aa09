"""The PyG side of flashgnn: a dataset as PyG's remote backend, and data in and out.

- :mod:`flashgnn.pyg.backend` — ``remote_backend(DATASET)`` gives PyG's ``(FeatureStore, GraphStore)``
  pair and a ``BaseSampler`` backed by the engine (``NeighborSampler``); ``NeighborLoader(...)`` returns PyG's own
  loader over them (an adapter: the package's loader is :class:`flashgnn.NeighborLoader`).
- :mod:`flashgnn.pyg.convert` — ``from_pyg(data, OUT)`` through the importer, ``to_pyg(DATASET)`` when it fits.

The backend imports torch and torch_geometric; it loads on first use so that
``flashgnn.from_pyg`` (imported by ``import flashgnn``) stays light.
"""

from typing import TYPE_CHECKING

from flashgnn.pyg.convert import from_pyg, to_pyg

if TYPE_CHECKING:
    from flashgnn.pyg.backend import FeatureStore, GraphStore, NeighborLoader, NeighborSampler, remote_backend

_BACKEND = ("FeatureStore", "GraphStore", "NeighborLoader", "NeighborSampler", "remote_backend")


def __getattr__(name):
    if name in _BACKEND or name == "Sampler":  # Sampler: the deprecated name of NeighborSampler
        from flashgnn.pyg import backend

        return getattr(backend, name)
    raise AttributeError(f"module 'flashgnn.pyg' has no attribute {name!r}")


__all__ = [*_BACKEND, "from_pyg", "to_pyg"]
