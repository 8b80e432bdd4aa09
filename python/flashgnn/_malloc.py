"""glibc malloc settings flashgnn chooses for the process, where the default costs time or memory.

Two, each measured (docs/benchmarks.md, *Layer-wise inference*; docs/reliability.md, *Soak*):

- :func:`large_blocks_reused`, around a layer-wise inference pass. Every batch of a full-neighbourhood
  pass allocates tensors of tens to hundreds of MiB (a GraphSAGE layer's messages are edges x width
  floats: 56-112 MiB a batch of 4,096 nodes on a 3.5 M-edge graph). glibc serves a block above its
  mmap threshold — at most 32 MiB however it adapts — with a fresh ``mmap`` and unmaps it on free, so
  every batch faults its pages in again: 0.7-2.4 M minor faults in a pass that computes for 4 s, and
  whether an allocation happens to fit a free chunk of the heap instead depends on what ran before,
  which made the same pass take 6 to 12 s from run to run. With the threshold raised to
  :data:`REUSE_BYTES` for the pass the blocks come from the heap and are reused by the next batch:
  0.14-0.19 M faults, 5.1-6.5 s, the same peak RSS. Only with room to spare (:data:`ROOM_NEEDED`):
  under a tight memory cap the heap's free chunks are what the cap kills. When the pass ends, ``malloc_trim`` hands back
  what the heap keeps free, and the thresholds go to glibc's own ceilings (32 MiB, trim at 64 MiB):
  glibc has no way back to its adaptive rule once a threshold is set, and its ceiling is where that
  rule ends up in a process that allocates large tensors.
- :func:`limit_arenas`, in ``flashgnn serve`` (its threads churn small records), and :func:`trim` after
  each of its compactions: the delta a compaction folds is freed in small pieces spread over the heap,
  which glibc keeps resident (it returns only the heap's top on its own).

Nothing is changed where the C library is not glibc, where the environment already sets glibc's
malloc (``MALLOC_MMAP_THRESHOLD_``, ``MALLOC_TRIM_THRESHOLD_``, ``MALLOC_TOP_PAD_``,
``MALLOC_ARENA_MAX`` for the arenas, or ``glibc.malloc`` tunables), or where ``FLASHGNN_MALLOC=default``.
"""

from __future__ import annotations

import ctypes
import functools
import os
import threading
from contextlib import contextmanager

# glibc <malloc.h>
_M_TRIM_THRESHOLD, _M_MMAP_THRESHOLD, _M_ARENA_MAX = -1, -3, -8
# The largest block served from the heap during a layer-wise pass: 256 MiB covered every batch of the
# measured passes with the same peak RSS; 512 MiB kept 0.4 GiB more resident and was no faster.
REUSE_BYTES = 256 << 20
# Only where the process may still use 8x that: a heap keeps free chunks between the blocks it serves,
# and under a tight cap that anonymous memory is what the cap then kills (out-of-core inference of
# data/ooc under 900 MiB, ~300 MiB of room: killed with the setting, 190 s without).
ROOM_NEEDED = 8 * REUSE_BYTES
# glibc's adaptive rule never raises the mmap threshold past 32 MiB (DEFAULT_MMAP_THRESHOLD_MAX on
# 64-bit) and keeps the trim threshold at twice it: where a pass leaves the process.
GLIBC_CEILING = 32 << 20
_ENV = ("MALLOC_MMAP_THRESHOLD_", "MALLOC_TRIM_THRESHOLD_", "MALLOC_TOP_PAD_", "MALLOC_MMAP_MAX_")
# `flashgnn serve`: glibc gives every new thread an arena of its own, up to 8 per core, and each keeps what
# its threads freed for their own reuse. Every acknowledged write copies the delta records it edits, and
# the versions the last snapshot let go are freed on whichever thread dropped it; spread over up to 16
# arenas (2 cores) that churn left 55-66 MiB free but resident in the arenas by the end of two 4-minute
# soaks, still rising. Capped at 2: 12-21 MiB, arenas 240 -> 190 MiB, the same requests served
# (docs/reliability.md, *Soak*).
SERVER_ARENAS = 2

_lock = threading.Lock()
_depth = 0  # passes running now (nested or on several threads): settings made by the first, undone by the last


@functools.cache
def _libc():
    """libc's ``mallopt`` and ``malloc_trim``, or None where the C library has none (not glibc)."""
    try:
        libc = ctypes.CDLL(None)
        return libc.mallopt, libc.malloc_trim
    except (OSError, AttributeError):
        return None


def _glibc():
    """:func:`_libc`, or None where the user chose glibc's defaults (``FLASHGNN_MALLOC=default``)."""
    return None if os.environ.get("FLASHGNN_MALLOC", "").lower() == "default" else _libc()


def user_tuned() -> bool:
    """Whether the environment already sets glibc malloc's thresholds (then flashgnn leaves them)."""
    return any(k in os.environ for k in _ENV) or "glibc.malloc" in os.environ.get("GLIBC_TUNABLES", "")


@contextmanager
def large_blocks_reused(room: int | None = None):
    """Serve blocks up to :data:`REUSE_BYTES` from the heap and keep up to twice that free in it while the
    body runs; then trim the heap and leave the thresholds at glibc's ceilings (module docs). Nothing is
    changed when ``room`` (bytes the process may still use; None: unknown, not bounded) is under
    :data:`ROOM_NEEDED`. Yields whether the settings were made."""
    global _depth
    fns = None if user_tuned() or (room is not None and int(room) < ROOM_NEEDED) else _glibc()
    if fns is None:
        yield False
        return
    mallopt, trim = fns
    with _lock:
        _depth += 1
        if _depth == 1:
            mallopt(_M_MMAP_THRESHOLD, REUSE_BYTES)
            mallopt(_M_TRIM_THRESHOLD, 2 * REUSE_BYTES)
    try:
        yield True
    finally:
        with _lock:
            _depth -= 1
            if _depth == 0:
                mallopt(_M_TRIM_THRESHOLD, 2 * GLIBC_CEILING)
                mallopt(_M_MMAP_THRESHOLD, GLIBC_CEILING)
                trim(0)


def limit_arenas(n: int = SERVER_ARENAS) -> bool:
    """Cap glibc's malloc arenas at ``n`` (before the caller starts its threads); False where the C library
    is not glibc, the environment sets ``MALLOC_ARENA_MAX`` or ``FLASHGNN_MALLOC=default``."""
    fns = None if "MALLOC_ARENA_MAX" in os.environ else _glibc()
    return fns is not None and bool(fns[0](_M_ARENA_MAX, n))


def trim() -> bool:
    """Hand the heap's free pages back to the system (``malloc_trim(0)``: every arena, free pages in the
    middle too); False where the C library is not glibc or ``FLASHGNN_MALLOC=default``."""
    fns = _glibc()
    return fns is not None and bool(fns[1](0))
