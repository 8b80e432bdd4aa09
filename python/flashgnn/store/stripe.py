"""`flashgnn stripe DATASET DIR [DIR ...]`: spread a dataset's data files
over several directories (one per SSD), round-robin in ``--chunk`` pieces.

Crash safety: parts are written and fsynced first; ``stripes.json`` is
written to a temporary name, fsynced and renamed into place (that rename is
the commit point; readers prefer it); only then are the original files
removed. A crash before the rename leaves the dataset as it was (plus orphan
parts); after it, the striped dataset is complete.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

from flashgnn import _core, _progress

from flashgnn._durable import fsync_path, open_regular, replace_durably

DATA_FILES = (_core.GRAPH_FILE, _core.OVERFLOW_FILE, _core.FEATURES_FILE)  # the page files (flashgnn_format::manifest)
COPY_BYTES = 8 << 20



def stripe(dataset, dirs, chunk_bytes: int = 64 << 10, progress: bool = True) -> dict:
    root = Path(dataset)
    if (root / _core.STRIPES_FILE).exists():
        raise ValueError(f"{root}: already striped (stripes.json exists)")
    if not (root / _core.MANIFEST_FILE).exists():
        raise FileNotFoundError(f"{root}: not a flashgnn dataset (no manifest.json)")
    if chunk_bytes <= 0 or chunk_bytes % 4096:
        raise ValueError(f"--chunk {chunk_bytes}: must be a positive multiple of 4096")
    dirs = [Path(d).resolve() for d in dirs]
    if not dirs:
        raise ValueError("give at least one directory to stripe over")
    for d in dirs:
        d.mkdir(parents=True, exist_ok=True)
    n = len(dirs)
    files = {}
    names = [f for f in DATA_FILES if (root / f).exists()]
    total = sum((root / f).stat().st_size for f in names)
    bar = _progress.bar(total=total, unit="B", unit_scale=True, unit_divisor=1024, desc="stripe", disable=not progress)
    for name in names:
        src = root / name
        length = src.stat().st_size
        parts = [dirs[k] / f"{root.name}.{name}.part{k}" for k in range(n)]
        outs = [open(p, "wb") for p in parts]
        try:
            with open_regular(src) as f:
                c = 0
                while True:
                    block = f.read(chunk_bytes)
                    if not block:
                        break
                    outs[c % n].write(block)
                    c += 1
                    bar.update(len(block))
            for o in outs:
                o.flush()
                os.fsync(o.fileno())
        finally:
            for o in outs:
                o.close()
        files[name] = {"len": length, "parts": [str(p) for p in parts]}
    bar.close()
    for d in set(dirs):
        fsync_path(d)
    tmp = root / "stripes.json.tmp"
    with open(tmp, "w") as f:
        json.dump({"chunk_bytes": chunk_bytes, "files": files}, f, indent=2)
        f.flush()
        os.fsync(f.fileno())
    replace_durably(tmp, root / _core.STRIPES_FILE)
    for name in names:
        (root / name).unlink()
    fsync_path(root)
    return {"files": names, "parts": n, "chunk_bytes": chunk_bytes, "bytes": total}
