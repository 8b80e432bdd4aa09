"""The checkpoint format ``flashgnn train`` writes: one ``checkpoint.pt`` holding tensors, numbers and
strings only, so it loads with ``torch.load(..., weights_only=True)`` — into flashgnn or into the stock
PyG model (docs/training.md) — and is published atomically."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np

from flashgnn._durable import makedirs_durable, replace_durably
from flashgnn.nn.zoo import build_model

CHECKPOINT_FILE = "checkpoint.pt"
CHECKPOINT_FORMAT = "flashgnn-checkpoint"
CHECKPOINT_VERSION = 2  # 2: `model` holds the best-validation weights, `last` the latest (for --resume)
CHECKPOINT_VERSIONS = (1, 2)


def save_checkpoint(directory: str | os.PathLike, state: dict) -> Path:
    """Write ``checkpoint.pt`` atomically: temp file, fsync, rename, fsync dir.

    Directories this call creates (``--checkpoint`` need not exist) are made
    durable in their parents (fsync of each parent) before the file is
    written: an fsync of the new directory alone does not promise that its
    entry in the parent survives a power loss, and without it an
    acknowledged checkpoint could vanish with its directory
    (docs/reliability.md § *Power-loss crash states*).

    On every failure (an unpicklable value, ENOSPC or EIO from ``torch.save``
    or ``fsync``, KeyboardInterrupt) the temporary file is removed, the
    previous ``checkpoint.pt`` is left as it was, and directories this call
    created are removed again if still empty. The temporary is created with
    O_EXCL under a fresh name (never follows a planted link); temporaries
    whose writer process is gone (a SIGKILLed run) are removed first."""
    import secrets

    import torch

    d = Path(directory)
    made = [p for p in (d, *d.parents) if not p.exists()][::-1]  # outermost first
    final = d / CHECKPOINT_FILE
    tmp = None
    try:
        makedirs_durable(d)
        _remove_stale_tmps(d)
        name = d / f"{_TMP_PREFIX}{os.getpid()}-{secrets.token_hex(4)}"
        # 0o666 less the umask, as open() would give (mkstemp's 0o600 would hide the checkpoint from the group).
        fd = os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o666)
        tmp = name
        with os.fdopen(fd, "wb") as f:
            w = _Writes(f)
            try:
                torch.save(state, w)
            except RuntimeError as e:
                if w.error is None:
                    raise
                # torch's zip writer turns the failed write into "unexpected pos N vs M": raise the write's own
                # error (ENOSPC, EIO), with its errno, naming the checkpoint.
                raise OSError(w.error.errno, f"writing the checkpoint: {w.error.strerror}", str(final)) from e
            f.flush()
            os.fsync(f.fileno())
        replace_durably(tmp, final)
    except OSError as e:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        _remove_made(made)
        if e.filename is None:  # an fsync or flush: name the checkpoint too
            raise OSError(e.errno, f"writing the checkpoint: {e.strerror}", str(final)) from e
        raise
    except BaseException:
        if tmp is not None:
            tmp.unlink(missing_ok=True)
        _remove_made(made)
        raise
    return final


def _remove_made(made: list[Path]) -> None:
    """Remove the directories a failed save created, innermost first, while empty (one someone else filled
    meanwhile stays)."""
    for p in reversed(made):
        try:
            p.rmdir()
        except OSError:
            break


class _Writes:
    """A write-only file for ``torch.save`` that keeps the OSError a write raised: torch's writer replaces it
    with a RuntimeError that names neither the errno nor the file."""

    def __init__(self, f):
        self.f, self.error = f, None

    def write(self, b) -> int:
        try:
            return self.f.write(b)
        except OSError as e:
            self.error = e
            raise

    def flush(self) -> None:
        self.f.flush()


_TMP_PREFIX = f".{CHECKPOINT_FILE}.tmp"  # + "<writer pid>-<random>"


def _remove_stale_tmps(d: Path) -> None:
    """Remove ``.checkpoint.pt.tmp<pid>-*`` files in ``d`` whose writer ``pid`` no longer runs."""
    try:
        names = [e.name for e in os.scandir(d) if e.name.startswith(_TMP_PREFIX)]
    except OSError:
        return
    for name in names:
        pid = name[len(_TMP_PREFIX):].split("-", 1)[0]
        if not pid.isdigit() or int(pid) == os.getpid() or _pid_alive(int(pid)):
            continue
        try:
            (d / name).unlink()
        except OSError:
            pass


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # exists, owned by someone else
        return True
    return True


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
    check_model_state(path, state)
    return state


def checkpoint_metadata(config: dict) -> tuple[list[str], list[tuple[str, str, str]]]:
    """A typed model_config's ``metadata`` as PyG's ``(node_types, edge_types)``."""
    nts, ets = config["metadata"]
    return [str(t) for t in nts], [tuple(str(x) for x in e) for e in ets]


def _build(c: dict):
    """The (untrained) model ``model_config`` ``c`` describes, as the trainer built it."""
    if c.get("task") == "link":  # flashgnn.nn.link.LinkModel: .encode(batch) gives node embeddings
        from flashgnn.nn.link import build_link_model

        return build_link_model(c, checkpoint_metadata(c) if c.get("edge_type") else None)
    if "metadata" in c:  # a typed dataset's model (flashgnn.nn.hetero), as the trainer built it
        from flashgnn.nn.zoo import build_hetero_model

        return build_hetero_model(c["model"], checkpoint_metadata(c), dict(c["in_dim"]), c["hidden"], c["out_dim"],
                                  c["num_layers"], c.get("heads", 4), c["dropout"], embed=dict(c.get("embed") or {})
                                  or None, target=c.get("target"), max_embedding_bytes=None)
    return build_model(c["model"], c["in_dim"], c["hidden"], c["out_dim"], c["num_layers"], c["dropout"])


def model_from_checkpoint(state: dict):
    """Rebuild the model a checkpoint describes and load its weights (``--task link``: a
    :class:`flashgnn.nn.link.LinkModel`)."""
    model = _build(state["model_config"])
    model.load_state_dict(state["model"])
    return model


# Bounds on model_config's sizes: far above any model flashgnn trains, far below what would exhaust memory
# before the weights are compared (a width is a count of values, not bytes).
CONFIG_LIMITS = {"in_dim": 1 << 20, "hidden": 1 << 20, "out_dim": 1 << 20, "num_layers": 64, "heads": 64}


def check_model_state(path, state: dict) -> None:
    """A checkpoint's ``model_config`` against its ``model`` weights, before anything is allocated for them:
    sizes are integers within :data:`CONFIG_LIMITS`, and the model the config describes, built on the meta
    device (shapes only, no memory), has exactly the stored weights' names and shapes. A hostile or foreign
    file is so refused by name (file, key, value, bound) instead of failing inside ``load_state_dict`` or
    allocating a model of the config's size."""
    import torch

    c, w = state.get("model_config"), state.get("model")
    if w is not None and not (isinstance(w, dict) and all(isinstance(k, str) and isinstance(v, torch.Tensor)
                                                          for k, v in w.items())):
        raise ValueError(f"{path}: model is a {type(w).__name__}, expected a dict of named tensors")
    if c is None:  # weights without a description (not one `flashgnn train` wrote): nothing to build from
        return
    if not isinstance(c, dict) or w is None:
        raise ValueError(f"{path}: model_config is a {type(c).__name__} beside "
                         f"{'no weights' if w is None else 'the weights'}; expected a dict with its weights")
    for key, hi in CONFIG_LIMITS.items():
        v = c.get(key)
        for name, x in (v.items() if isinstance(v, dict) else [(None, v)] if v is not None else []):
            if isinstance(x, bool) or not isinstance(x, int) or not 0 < x <= hi:
                at = key if name is None else f"{key}[{name!r}]"
                raise ValueError(f"{path}: model_config.{at} = {x!r} is out of bounds (must be an integer in "
                                 f"[1, {hi}])")
    try:
        with torch.device("meta"):
            want = _build(c).state_dict()
    except Exception as e:  # noqa: BLE001 - a config the zoo cannot build is a foreign file, named
        raise ValueError(f"{path}: model_config does not describe a model flashgnn builds "
                         f"({type(e).__name__}: {e})") from None
    what = f"the {c.get('model')!r} model its model_config describes"
    for k in sorted(set(want) | set(w)):
        if k not in w:
            raise ValueError(f"{path}: weight {k!r} of {what} is missing (shape {tuple(want[k].shape)})")
        if k not in want:
            raise ValueError(f"{path}: weight {k!r} (shape {tuple(w[k].shape)}) is not a weight of {what}")
        if not torch.nn.parameter.is_lazy(want[k]) and tuple(w[k].shape) != tuple(want[k].shape):
            raise ValueError(f"{path}: weight {k!r} has shape {tuple(w[k].shape)}; {what} has "
                             f"{tuple(want[k].shape)}")


ENCODER_PREFIX = "encoder."  # a link model's GNN weights inside state["model"], beside its decoder's


def link_decoder(state: dict) -> str | None:
    """The decoder a link-prediction checkpoint records (``model_config`` ``task: "link"``, ``decoder: "dot" |
    "mlp"``); None for a node-classification checkpoint."""
    c = state.get("model_config") or {}
    if c.get("task", "node") != "link":
        return None
    return str(c.get("decoder", "dot"))


def encoder_state(state: dict) -> dict:
    """``state`` as the node model's checkpoint of a link checkpoint's GNN encoder (``--task link``:
    :class:`flashgnn.nn.link.LinkModel`): its ``encoder.*`` weights under their own names and a
    ``model_config`` whose output is the embedding (``out_dim = hidden``); the decoder, which scores pairs, is
    left out. A node-classification checkpoint is returned as it is. Refused for an encoder that is not one
    of the zoo's GNNs over the stored features (lightgcn, ngcf, learnable input embeddings): those embed through
    ``flashgnn.train.link.node_embeddings``."""
    c = state.get("model_config") or {}
    if c.get("task", "node") != "link":
        return state
    if c.get("edge_type"):
        raise ValueError(f"a typed link model (edge type {'__'.join(c['edge_type'])}) embeds each node type by its "
                         "own rows: use flashgnn.train.link.typed_node_embeddings(model_from_checkpoint(state), "
                         "dataset, node_type, nodes, num_neighbors, batch_size, device)")
    if c["model"] in ("lightgcn", "ngcf") or c.get("num_embeddings"):
        raise ValueError(f"a link model with a {c['model']!r} encoder"
                         + (" over learnable input embeddings" if c.get("num_embeddings") else "")
                         + " is not a layer-wise GNN over the stored features: embed its nodes with "
                           "flashgnn.train.link.node_embeddings(model_from_checkpoint(state), dataset, nodes, fanouts, "
                           "batch_size, device)")
    enc = {k[len(ENCODER_PREFIX):]: v for k, v in state["model"].items() if k.startswith(ENCODER_PREFIX)}
    cfg = {k: v for k, v in c.items() if k not in ("decoder", "num_embeddings")}
    cfg.update(task="node", out_dim=c["hidden"])
    return {**state, "model": enc, "model_config": cfg}
