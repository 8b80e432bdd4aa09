"""OGB link-prediction splits (``ogbl-*``: ``split/<name>/{train,valid,test}.pt``) into flashgnn's link
split files.

The ``.pt`` files are read with ``torch.load(weights_only=True)`` (tensors and containers only: no code
runs), checked, and written as ``link_<split>_<part>.npy`` int64 arrays into a staging directory, which
the build then checks again and copies (``--link-split-files``; docs/format.md, *Link splits*). Shapes:

- ogbl-collab / ppa / ddi: ``{'edge': [E, 2], 'edge_neg': [M, 2]}`` → positives ``src``/``dst`` and free
  negative pairs ``neg_src``/``neg_dst``; ``weight`` and ``year`` (collab) are not imported and are named
  in the build's notes;
- ogbl-citation2: ``{'source_node': [n], 'target_node': [n], 'target_node_neg': [n, 1000]}`` →
  ``src``/``dst`` and ``neg`` [n, 1000], all 1,000 negatives per source kept.

Nothing is removed from the graph: OGB's ``raw/edge.csv.gz`` holds the training edges only, and OGB lets a
model use validation edges as input at test time (ogbl-collab), so which edges pass messages at test time is
the trainer's choice, not the importer's. Any other key, dtype or shape, and any id outside the node count,
is refused naming the file, the key, the value and the bound.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np

#: OGB's split file names and flashgnn's split names.
SPLIT_FILES = (("train", "train"), ("valid", "val"), ("test", "test"))
#: Keys read, and keys named in a note but not imported.
_PAIR_KEYS = ("edge", "edge_neg")
_NODE_KEYS = ("source_node", "target_node", "target_node_neg")
_IGNORED_KEYS = ("weight", "year")


class LinkSplitError(ValueError):
    """A ``.pt`` split file that is not what OGB writes."""


def find_link_split(input, ogb_split: str | None = None) -> Path | None:
    """The ``split/<name>/`` directory of an OGB link-prediction dataset at ``input`` (one holding
    ``.pt`` files), or None. Several split names need ``ogb_split``, as the node importer does."""
    root = Path(input)
    if not (root / "raw").is_dir() or not (root / "split").is_dir():
        return None
    names = sorted(p.name for p in (root / "split").iterdir() if p.is_dir())
    if ogb_split is not None:
        names = [ogb_split] if ogb_split in names else []
    if len(names) != 1:
        return None
    d = root / "split" / names[0]
    return d if any(d.glob("*.pt")) else None


def num_nodes_of(input) -> int | None:
    """``raw/num-node-list.csv.gz``'s count (OGB's node count), or None."""
    for name in ("num-node-list.csv.gz", "num-node-list.csv"):
        p = Path(input) / "raw" / name
        if p.exists():
            opener = gzip.open if name.endswith(".gz") else open
            with opener(p, "rt") as f:
                return int(f.readline().strip())
    return None


def _ids(path: Path, key: str, t, num_nodes: int, dims: int) -> np.ndarray:
    import torch

    if not isinstance(t, torch.Tensor):
        raise LinkSplitError(f"{path}: key {key!r}: {type(t).__name__} is not a tensor")
    if t.dtype.is_floating_point or t.dtype.is_complex or t.dtype == torch.bool:
        raise LinkSplitError(f"{path}: key {key!r}: dtype {t.dtype} is not an integer dtype (node ids)")
    if t.dim() != dims:
        raise LinkSplitError(f"{path}: key {key!r}: shape {list(t.shape)} is not {dims}-D")
    a = t.detach().cpu().numpy().astype(np.int64, copy=False)
    bad = np.flatnonzero((a.reshape(-1) < 0) | (a.reshape(-1) >= num_nodes))
    if bad.size:
        i = int(bad[0])
        pos = np.unravel_index(i, a.shape)
        raise LinkSplitError(f"{path}: key {key!r}: index {tuple(int(x) for x in pos)}: node id "
                             f"{int(a.reshape(-1)[i])} out of range [0, {num_nodes})")
    return a


def _save(path: Path, a: np.ndarray) -> None:
    np.save(path, np.ascontiguousarray(a, dtype=np.int64))


def stage_ogb_link_split(split_dir, staging, num_nodes: int) -> list[str]:
    """Convert ``split_dir``'s ``{train,valid,test}.pt`` into ``staging/link_<split>_<part>.npy``;
    returns notes for what was not imported."""
    import torch

    split_dir, staging = Path(split_dir), Path(staging)
    staging.mkdir(parents=True, exist_ok=True)
    notes: list[str] = []
    for ogb, ours in SPLIT_FILES:
        path = split_dir / f"{ogb}.pt"
        if not path.exists():
            continue
        try:
            d = torch.load(path, map_location="cpu", weights_only=True)
        except Exception as e:  # noqa: BLE001 - a pickle of anything else: name the file
            raise LinkSplitError(f"{path}: not a tensor dict torch.load(weights_only=True) reads: {e}") from None
        if not isinstance(d, dict):
            raise LinkSplitError(f"{path}: a {type(d).__name__}, expected a dict of tensors "
                                 f"(keys {_PAIR_KEYS} or {_NODE_KEYS})")
        unknown = sorted(set(d) - set(_PAIR_KEYS) - set(_NODE_KEYS) - set(_IGNORED_KEYS))
        if unknown:
            raise LinkSplitError(f"{path}: keys {unknown} are not imported (flashgnn reads {_PAIR_KEYS} or "
                                 f"{_NODE_KEYS} of a homogeneous link split)")
        ignored = [k for k in _IGNORED_KEYS if k in d]
        if ignored:
            notes.append(f"{path}: {ignored} not imported (edge attributes; the link split keeps the edges)")
        out = lambda part: staging / f"link_{ours}_{part}.npy"  # noqa: E731
        if "edge" in d or "edge_neg" in d:
            if any(k in d for k in _NODE_KEYS):
                raise LinkSplitError(f"{path}: mixes {_PAIR_KEYS} and {_NODE_KEYS}")
            if "edge" not in d:
                raise LinkSplitError(f"{path}: key 'edge_neg' without 'edge' (the positives)")
            for key, (s, t) in (("edge", ("src", "dst")), ("edge_neg", ("neg_src", "neg_dst"))):
                if key not in d:
                    continue
                e = _ids(path, key, d[key], num_nodes, 2)
                if e.shape[1] != 2:
                    raise LinkSplitError(f"{path}: key {key!r}: shape {list(e.shape)} is not [E, 2]")
                _save(out(s), e[:, 0])
                _save(out(t), e[:, 1])
        elif "source_node" in d:
            if "target_node" not in d:
                raise LinkSplitError(f"{path}: key 'source_node' without 'target_node'")
            s = _ids(path, "source_node", d["source_node"], num_nodes, 1)
            t = _ids(path, "target_node", d["target_node"], num_nodes, 1)
            if len(s) != len(t):
                raise LinkSplitError(f"{path}: key 'target_node': {len(t)} ids, expected {len(s)} as 'source_node'")
            _save(out("src"), s)
            _save(out("dst"), t)
            if "target_node_neg" in d:
                n = _ids(path, "target_node_neg", d["target_node_neg"], num_nodes, 2)
                if n.shape[0] != len(s):
                    raise LinkSplitError(f"{path}: key 'target_node_neg': shape {list(n.shape)}, expected "
                                         f"[{len(s)}, K] (one row per source)")
                _save(out("neg"), n)
        else:
            raise LinkSplitError(f"{path}: no positives: expected key 'edge' or 'source_node'/'target_node'")
    return notes
