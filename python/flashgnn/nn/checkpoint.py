"""The checkpoint format ``flashgnn train`` writes: one ``checkpoint.pt`` holding tensors, numbers and
strings only, so it loads with ``torch.load(..., weights_only=True)`` — into flashgnn or into the stock
PyG model (docs/training.md) — and is published atomically."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from flashgnn._durable import replace_durably
from flashgnn.nn.zoo import build_model

CHECKPOINT_FILE = "checkpoint.pt"
CHECKPOINT_FORMAT = "flashgnn-checkpoint"
CHECKPOINT_VERSION = 2  # 2: `model` holds the best-validation weights, `last` the latest (for --resume)
CHECKPOINT_VERSIONS = (1, 2)

def save_checkpoint(directory: str | os.PathLike, state: dict) -> Path:
    """Write ``checkpoint.pt`` atomically: temp file, fsync, rename, fsync dir."""
    import torch

    d = Path(directory)
    d.mkdir(parents=True, exist_ok=True)
    final, tmp = d / CHECKPOINT_FILE, d / f".{CHECKPOINT_FILE}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        torch.save(state, f)
        f.flush()
        os.fsync(f.fileno())
    replace_durably(tmp, final)
    return final


_NP_CORE = getattr(np, "_core", None) or np.core  # numpy 2 renamed numpy.core
_NUMPY_PICKLE_GLOBALS = [_NP_CORE.multiarray._reconstruct, np.ndarray, np.dtype, np.dtypes.UInt32DType]


def load_checkpoint(directory: str | os.PathLike, map_location="cpu") -> dict:
    import torch

    path = Path(directory) / CHECKPOINT_FILE
    if not path.exists():
        raise FileNotFoundError(f"{path}: no checkpoint (train with --checkpoint {directory} first)")
    from flashgnn._durable import open_regular

    try:
        with open_regular(path) as f:  # a FIFO or device is refused by name, never waited on
            # weights_only: a checkpoint is data, never code (an unpickled file could run anything). The
            # numpy names let checkpoints of flashgnn <= 0.1.0, whose numpy RNG state is an ndarray, load too.
            with torch.serialization.safe_globals(_NUMPY_PICKLE_GLOBALS):
                state = torch.load(f, map_location=map_location, weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unpickling failure is a corrupt file
        raise ValueError(f"{path}: not a readable checkpoint ({type(e).__name__}: {e})") from None
    if not isinstance(state, dict) or state.get("format") != CHECKPOINT_FORMAT:
        raise ValueError(f"{path}: not a flashgnn checkpoint (format field {state.get('format') if isinstance(state, dict) else None!r})")
    if state.get("version") not in CHECKPOINT_VERSIONS:
        raise ValueError(f"{path}: checkpoint version {state.get('version')!r}; this flashgnn reads versions "
                         f"{', '.join(map(str, CHECKPOINT_VERSIONS))}")
    return state


def model_from_checkpoint(state: dict):
    """Rebuild the model a checkpoint describes and load its weights."""
    c = state["model_config"]
    model = build_model(c["model"], c["in_dim"], c["hidden"], c["out_dim"], c["num_layers"], c["dropout"])
    model.load_state_dict(state["model"])
    return model
