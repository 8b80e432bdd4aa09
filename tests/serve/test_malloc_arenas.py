"""`flashgnn serve` caps glibc's malloc arenas (`serve.server.limit_malloc_arenas`, docs/reliability.md *Soak*).

What is proved, and how: in a fresh interpreter (no MALLOC_ARENA_MAX in its environment), eight threads
started after the cap each allocate; glibc's `malloc_info` then lists no more arenas than before the
threads plus what the cap allows. Without the cap each new thread gets an arena of its own (up to 8 per
core), so the count rises by eight and the check fails; `test_without_the_cap_threads_add_arenas` shows
the counting sees that. glibc only: elsewhere the cap is a no-op and the test is skipped.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

CHILD = r"""
import ctypes, os, sys, tempfile, threading

libc = ctypes.CDLL(None)
libc.fopen.restype = ctypes.c_void_p
libc.fopen.argtypes = [ctypes.c_char_p, ctypes.c_char_p]
libc.malloc_info.argtypes = [ctypes.c_int, ctypes.c_void_p]
libc.fclose.argtypes = [ctypes.c_void_p]

def arenas():
    with tempfile.NamedTemporaryFile(suffix=".xml") as f:
        fp = libc.fopen(f.name.encode(), b"w")
        libc.malloc_info(0, fp)
        libc.fclose(fp)
        return open(f.name).read().count("<heap nr=")

from flashgnn.serve.server import MALLOC_ARENAS_MAX, limit_malloc_arenas
capped = limit_malloc_arenas() if sys.argv[1] == "cap" else False
before = arenas()
go = threading.Barrier(8)

def work():
    go.wait()  # all alive at once: none can inherit a finished thread's arena
    keep = [bytearray(1 << 16) for _ in range(64)]  # above pymalloc's 512 B: straight to malloc
    go.wait()

ts = [threading.Thread(target=work) for _ in range(8)]
for t in ts:
    t.start()
for t in ts:
    t.join()
print(int(capped), before, arenas(), MALLOC_ARENAS_MAX)
"""


def _run(mode: str) -> tuple[bool, int, int, int]:
    env = {k: v for k, v in os.environ.items() if k != "MALLOC_ARENA_MAX"}
    out = subprocess.run([sys.executable, "-c", CHILD, mode], env=env, check=True, capture_output=True, text=True)
    capped, before, after, cap = (int(x) for x in out.stdout.split())
    return bool(capped), before, after, cap


def _glibc() -> bool:
    import platform

    return platform.libc_ver()[0] == "glibc"


@pytest.mark.skipif(not _glibc(), reason="malloc arenas are glibc's")
def test_threads_started_after_the_cap_add_no_arena_past_it():
    capped, before, after, cap = _run("cap")
    assert capped, "mallopt(M_ARENA_MAX) was refused"
    assert after <= max(before, cap), f"{before} arenas before 8 threads, {after} after, cap {cap}"


@pytest.mark.skipif(not _glibc(), reason="malloc arenas are glibc's")
def test_without_the_cap_threads_add_arenas():
    _, before, after, cap = _run("none")
    assert after > max(before, cap), f"{before} arenas before 8 threads, {after} after: the count sees no new arena"
