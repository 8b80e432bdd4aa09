"""The few durability steps the Python layer needs when it publishes files
(stripes.json, checkpoints, embedding tables): fsync a file or a directory,
and write-then-rename. The Rust builder has its own publish path."""

from __future__ import annotations

import os
from pathlib import Path


def fsync_path(p: str | os.PathLike) -> None:
    """fsync a file or directory by path (a directory fsync makes renames in it durable)."""
    fd = os.open(p, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def replace_durably(tmp: str | os.PathLike, final: str | os.PathLike) -> None:
    """Rename ``tmp`` (already written and fsynced) over ``final`` and fsync the parent."""
    os.replace(tmp, final)
    fsync_path(Path(final).parent)
