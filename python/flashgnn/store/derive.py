"""``flashgnn build --derive-features mean``: feature rows for node types that have none, each node's row the
mean of its typed neighbours' rows, computed before a typed build (MAG240M's published baseline does this for
authors and institutions: an author is the mean of its papers, an institution of its authors).

The input's typed npy layout is mirrored into a staging directory beside the output (links to every input
file, no copy), the derived ``<type>/node_feat.npy`` written there, and the ordinary typed build runs on it,
so every check of that layout applies; the staging directory is removed whatever happens. Memory: the derived
table is written through a memory-mapped ``.npy`` on disk, the neighbours' rows are read through the page
cache (``mmap``), edges stream in chunks; RAM holds one chunk and a count per derived node (8 B).

Rule: a type without features takes, over every edge type joining it to a type that has rows (either
direction), the mean of those neighbours' rows; types whose neighbours are themselves derived come in later
rounds (institutions after authors), until nothing more can be derived. Widths must agree (else refused by
name); a node with no featured neighbour gets a zero row (counted in the notes).
"""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import numpy as np

from flashgnn._core import InputError

DERIVE_CHOICES = ("mean",)
CHUNK = 1 << 20  # edges per step


def _typed_root(p: Path) -> Path:
    return p / "processed" if (p / "processed").is_dir() and not any("__" in c.name for c in p.iterdir()) else p


def _edge_dirs(root: Path) -> list[tuple[str, str, str, Path]]:
    out = []
    for d in sorted(root.iterdir()):
        parts = d.name.split("__")
        if d.is_dir() and len(parts) == 3 and all(parts):
            out.append((*parts, d / "edge_index.npy"))
    return out


def _counts(root: Path) -> dict[str, int]:
    counts = {}
    f = root / "num_nodes.json"
    if f.exists():
        counts.update({k: int(v) for k, v in json.loads(f.read_text()).items()})
    for d in root.iterdir():
        feat = d / "node_feat.npy"
        if d.is_dir() and "__" not in d.name and feat.exists():
            counts.setdefault(d.name, int(np.load(feat, mmap_mode="r").shape[0]))
    return counts


def stage_derived(input_dir, staging, how: str = "mean", progress: bool = True) -> list[str]:
    """Mirror ``input_dir``'s typed npy layout into ``staging`` with derived ``node_feat.npy`` for the
    featureless types; returns the notes (what was derived from what)."""
    from flashgnn import _progress

    if how not in DERIVE_CHOICES:
        raise InputError(f"--derive-features {how!r}: expected one of {', '.join(DERIVE_CHOICES)}")
    root = _typed_root(Path(input_dir))
    edges = _edge_dirs(root)
    if not edges:
        raise InputError(f"{input_dir}: --derive-features takes a typed npy input (<src>__<rel>__<dst>/ folders)")
    staging = Path(staging)
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for item in root.iterdir():  # links to the input, folder by folder
        if item.is_dir():
            (staging / item.name).mkdir()
            for f in item.iterdir():
                os.symlink(f.resolve(), staging / item.name / f.name)
        else:
            os.symlink(item.resolve(), staging / item.name)
    counts = _counts(root)
    names = set(counts) | {e[0] for e in edges} | {e[2] for e in edges}
    feats = {t: staging / t / "node_feat.npy" for t in names if (staging / t / "node_feat.npy").exists()}
    notes = []
    while True:
        todo = {t for t in names if t not in feats and t in counts and any(
            (s == t and d in feats) or (d == t and s in feats) for s, _, d, _ in edges)}
        if not todo:
            break
        for t in sorted(todo):
            joins = [(s, r, d, p) for s, r, d, p in edges if (s == t and d in feats) or (d == t and s in feats)]
            srcs = {(d if s == t else s) for s, _, d, _ in joins}
            widths = {o: np.load(feats[o], mmap_mode="r").shape[1] for o in sorted(srcs)}
            dims = set(widths.values())
            if len(dims) != 1:
                listed = ", ".join(f"{o}: {w}" for o, w in widths.items())
                raise InputError(f"--derive-features: node type {t!r} joins featured types of different widths "
                                 f"({listed}); a mean needs one width")
            dim = dims.pop()
            n = counts[t]
            (staging / t).mkdir(exist_ok=True)
            path = staging / t / "node_feat.npy"
            out = np.lib.format.open_memmap(path, mode="w+", dtype=np.float32, shape=(n, dim))
            cnt = np.zeros(n, dtype=np.int64)
            total = sum(int(np.load(p, mmap_mode="r").size // 2) for _, _, _, p in joins)
            bar = _progress.bar(total=total, desc=f"derive {t} features", unit="edge", disable=not progress)
            for s, r, d, p in joins:
                e = np.load(p, mmap_mode="r")
                rows_first = e.ndim == 2 and e.shape[0] == 2 and e.shape[1] != 2
                other = d if s == t else s
                x = np.load(feats[other], mmap_mode="r")
                m = e.shape[1] if rows_first else e.shape[0]
                for lo in range(0, m, CHUNK):
                    c = np.asarray(e[:, lo:lo + CHUNK].T if rows_first else e[lo:lo + CHUNK], dtype=np.int64)
                    mine, theirs = (c[:, 0], c[:, 1]) if s == t else (c[:, 1], c[:, 0])
                    order = np.argsort(mine, kind="stable")
                    mine, theirs = mine[order], theirs[order]
                    rows = np.asarray(x[np.sort(theirs)], dtype=np.float32)[np.argsort(np.argsort(theirs))]
                    uniq, start = np.unique(mine, return_index=True)
                    out[uniq] += np.add.reduceat(rows, start, axis=0)
                    cnt[uniq] += np.diff(np.append(start, len(mine)))
                    bar.update(len(c))
            bar.close()
            nz = cnt > 0
            out[nz] /= cnt[nz, None]
            out.flush()
            del out
            feats[t] = path
            notes.append(f"node type {t!r}: {dim}-wide rows derived as the mean of its neighbours' rows over "
                         f"{', '.join('__'.join(j[:3]) for j in joins)}; {int((~nz).sum()):,} of {n:,} nodes have no "
                         "such neighbour (zero rows)")
    return notes
