"""flashgnn: graph neural networks over SSD-resident graphs.

Entry points:

- :func:`open` — open a built dataset (:class:`Dataset`).
- :func:`build` / :func:`generate` — the importer and the synthetic generator
  (also ``flashgnn build`` / ``flashgnn generate`` on the command line).
- :func:`verify` — check every checksum and bound of a dataset.
"""

from flashgnn._core import (
    FORMAT_VERSION,
    CorruptDatasetError,
    DatasetNotFoundError,
    FlashgnnError,
    InputError,
    __version__,
)
from flashgnn.dataset import Dataset, open
from flashgnn.jobs import build, generate, verify
from flashgnn.sampler import SampledBatch, Sampler

__all__ = [
    "FORMAT_VERSION",
    "CorruptDatasetError",
    "Dataset",
    "SampledBatch",
    "Sampler",
    "DatasetNotFoundError",
    "FlashgnnError",
    "InputError",
    "__version__",
    "build",
    "generate",
    "open",
    "verify",
]
