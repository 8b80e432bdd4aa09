"""flashgnn: graph neural networks over SSD-resident graphs.

Entry points:

- :func:`open` — open a built dataset (:class:`Dataset`).
- :func:`build` / :func:`generate` — the importer and the synthetic generator
  (also ``flashgnn build`` / ``flashgnn generate`` on the command line).
- :func:`verify` — check every checksum and bound of a dataset.
- :func:`scrub` — the same, rate-limited and resumable, reporting every damaged page.
- :func:`from_pyg` / :func:`to_pyg` — a PyG ``Data`` in, and back out when it fits in memory.
- :func:`inference` — layer-wise full-graph inference of any PyG ``BasicGNN`` (or per-layer module) with
  bounded memory, to a tensor or an ``embed`` directory on disk.
- :class:`Sampler` — one engine call per mini-batch (numpy).
- :class:`Cache` — cross-batch DRAM cache shared by samplers (static hot set + S3-FIFO).
- :class:`DeviceCache` — the GPU tier: hottest rows resident on the device, gathered there.
- :class:`MutableGraph` — unit updates over a dataset (WAL, group commit, compaction).
- :class:`Client` — the gRPC client of ``flashgnn serve`` (loads grpc on first use).
- :class:`NeighborLoader` / :class:`RandomWalkLoader` / :class:`LinkNeighborLoader` — PyG ``Data`` batches;
  :mod:`flashgnn.pyg` — PyG remote backend. These import torch, so they load
  on first use (``import flashgnn`` stays light for the CLI and the builder).
"""

from typing import TYPE_CHECKING

from flashgnn._core import (
    FORMAT_VERSION,
    CorruptDatasetError,
    DatasetNotFoundError,
    FlashgnnError,
    InputError,
    __version__,
)
from flashgnn.pyg.convert import from_pyg, to_pyg
from flashgnn.nn.layerwise import inference
from flashgnn.store.dataset import Dataset, open
from flashgnn.store.graph import MutableGraph
from flashgnn.store.jobs import build, generate, scrub, verify
from flashgnn.sample.sampler import Cache, SampledBatch, Sampler

if TYPE_CHECKING:  # the lazily loaded names below, visible to type checkers and IDEs
    from flashgnn import pyg
    from flashgnn.sample.device import DeviceCache, DeviceUnavailable
    from flashgnn.loader.link import LinkNeighborLoader
    from flashgnn.loader.neighbor import NeighborLoader, RandomWalkLoader
    from flashgnn.serve.client import Client, ServerError

# Loaded on first use: torch (loaders, pyg) and grpc (the client) stay out of `import flashgnn`.
_LAZY = {"NeighborLoader": "flashgnn.loader.neighbor", "RandomWalkLoader": "flashgnn.loader.neighbor",
         "LinkNeighborLoader": "flashgnn.loader.link", "pyg": "flashgnn.pyg",
         "Client": "flashgnn.serve.client", "ServerError": "flashgnn.serve.client",
         "DeviceCache": "flashgnn.sample.device", "DeviceUnavailable": "flashgnn.sample.device"}


def __getattr__(name):
    if name in _LAZY:
        import importlib

        mod = importlib.import_module(_LAZY[name])
        return mod if name == "pyg" else getattr(mod, name)
    raise AttributeError(f"module 'flashgnn' has no attribute {name!r}")


__all__ = [
    "Client",
    "ServerError",
    "NeighborLoader",
    "LinkNeighborLoader",
    "RandomWalkLoader",
    "FORMAT_VERSION",
    "CorruptDatasetError",
    "Dataset",
    "SampledBatch",
    "Sampler",
    "Cache",
    "DeviceCache",
    "DeviceUnavailable",
    "MutableGraph",
    "DatasetNotFoundError",
    "FlashgnnError",
    "InputError",
    "__version__",
    "build",
    "from_pyg",
    "to_pyg",
    "inference",
    "generate",
    "open",
    "scrub",
    "verify",
]
