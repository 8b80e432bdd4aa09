"""A user's model class and weights for ``flashgnn embed --model-class``.

    flashgnn embed DATASET OUT --checkpoint model.pt --model-class mypkg.models:Net \\
        --model-kwargs '{"in_channels": 128, "hidden_channels": 256, "out_channels": 47}'

- ``--model-class package.module:ClassName``: imported with the current
  directory on ``sys.path`` (as ``python -m`` would); must be a
  ``torch.nn.Module`` subclass that :func:`flashgnn.inference` can run.
- ``--checkpoint``: a file written by ``torch.save(model.state_dict(), f)``,
  a file or directory holding a flashgnn checkpoint (``checkpoint.pt``, its
  ``model`` entry: the best weights), or a directory holding exactly one
  ``*.pt``/``*.pth`` state dict. Always read with
  ``torch.load(weights_only=True)``: a checkpoint is data, never code.
- The constructor's keyword arguments: ``--model-kwargs JSON``, else
  ``model_kwargs.json`` beside the weights, else none.

Every failure names what failed: the import path, the class, the kwargs, the
file, and for a state dict that does not fit the class, the missing,
unexpected and mis-shaped keys.
"""

from __future__ import annotations

import importlib
import json
import os
import sys
from pathlib import Path

KWARGS_FILE = "model_kwargs.json"


def import_class(spec: str):
    """``package.module:ClassName`` -> the class (an ``nn.Module`` subclass)."""
    import torch

    mod_name, sep, attr = str(spec).partition(":")
    if not sep or not mod_name or not attr:
        raise ValueError(f"--model-class {spec!r}: expected package.module:ClassName")
    if os.getcwd() not in sys.path and "" not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        mod = importlib.import_module(mod_name)
    except Exception as e:  # noqa: BLE001 - any import failure is reported with the path that failed
        raise ValueError(f"--model-class {spec!r}: cannot import module {mod_name!r} ({type(e).__name__}: {e})") \
            from None
    obj = mod
    for part in attr.split("."):
        if not hasattr(obj, part):
            raise ValueError(f"--model-class {spec!r}: module {mod_name!r} ({getattr(mod, '__file__', '?')}) has no "
                             f"attribute {attr!r}")
        obj = getattr(obj, part)
    if not (isinstance(obj, type) and issubclass(obj, torch.nn.Module)):
        raise ValueError(f"--model-class {spec!r}: {attr} is a {type(obj).__name__}, not a torch.nn.Module subclass")
    return obj


def parse_kwargs(text: str | None) -> dict | None:
    """``--model-kwargs`` JSON -> dict (None when not given)."""
    if text is None:
        return None
    try:
        kw = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"--model-kwargs: not valid JSON at line {e.lineno} column {e.colno}: {e.msg} "
                         f"(got {text[:80]!r})") from None
    if not isinstance(kw, dict):
        raise ValueError(f"--model-kwargs: expected a JSON object of constructor arguments, got a "
                         f"{type(kw).__name__}")
    return kw


def _weights_file(path: Path) -> Path:
    from flashgnn.nn.checkpoint import CHECKPOINT_FILE

    if path.is_dir():
        if (path / CHECKPOINT_FILE).exists():
            return path / CHECKPOINT_FILE
        found = sorted(p for p in path.iterdir() if p.suffix in (".pt", ".pth"))
        if len(found) != 1:
            raise FileNotFoundError(f"{path}: expected {CHECKPOINT_FILE} or exactly one *.pt/*.pth file, found "
                                    f"{len(found)} ({', '.join(p.name for p in found[:5]) or 'none'})")
        return found[0]
    if not path.exists():
        raise FileNotFoundError(f"{path}: no such checkpoint file or directory")
    return path


def load_state(path) -> tuple[dict, dict]:
    """``(state_dict, model_config)`` from a state-dict file or a flashgnn
    checkpoint (``model_config`` empty for a plain state dict)."""
    import torch

    from flashgnn._durable import open_regular
    from flashgnn.nn.checkpoint import _NUMPY_PICKLE_GLOBALS, CHECKPOINT_FORMAT

    f = _weights_file(Path(path))
    try:
        with open_regular(f) as fh, torch.serialization.safe_globals(_NUMPY_PICKLE_GLOBALS):
            obj = torch.load(fh, map_location="cpu", weights_only=True)
    except Exception as e:  # noqa: BLE001 - any unpickling failure is a bad file
        raise ValueError(f"{f}: not loadable with torch.load(weights_only=True) ({type(e).__name__}: {e})") from None
    if isinstance(obj, dict) and obj.get("format") == CHECKPOINT_FORMAT:
        return obj["model"], dict(obj.get("model_config") or {})
    if isinstance(obj, dict) and obj and all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                             for k, v in obj.items()):
        return obj, {}
    raise ValueError(f"{f}: neither a state_dict (a dict of name -> Tensor, as torch.save(model.state_dict()) "
                     f"writes) nor a flashgnn checkpoint (got {type(obj).__name__}"
                     f"{' with keys ' + ', '.join(map(str, list(obj)[:5])) if isinstance(obj, dict) else ''})")


def load_user_model(spec: str, checkpoint, kwargs: dict | None = None):
    """``(model in eval mode with the weights loaded, normalize_features)``."""
    cls = import_class(spec)
    weights = _weights_file(Path(checkpoint))
    source = "--model-kwargs"
    if kwargs is None:
        side = weights.parent / KWARGS_FILE
        kwargs, source = ({}, "no kwargs")
        if side.exists():
            kwargs, source = parse_kwargs(side.read_text()), str(side)
    state, cfg = load_state(weights)
    try:
        model = cls(**kwargs)
    except Exception as e:  # noqa: BLE001 - the constructor's own message says what is wrong
        raise ValueError(f"--model-class {spec}: {cls.__name__}(**{kwargs}) ({source}) failed: "
                         f"{type(e).__name__}: {e}") from None
    try:
        model.load_state_dict(state)
    except RuntimeError as e:
        raise ValueError(f"{weights}: the state dict does not fit {spec}({', '.join(f'{k}={v!r}' for k, v in kwargs.items())}"
                         f"): {e}") from None
    return model.eval(), cfg.get("normalize_features", "none")
