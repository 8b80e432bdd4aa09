"""glibc malloc settings flashgnn makes (`flashgnn._malloc`).

1. `flashgnn serve` caps glibc's malloc arenas (`_malloc.limit_arenas`, docs/reliability.md *Soak*).

What is proved, and how: in a fresh interpreter (no MALLOC_ARENA_MAX in its environment), eight threads
started after the cap each allocate; glibc's `malloc_info` then lists no more arenas than before the
threads plus what the cap allows. Without the cap each new thread gets an arena of its own (up to 8 per
core), so the count rises by eight and the check fails; `test_without_the_cap_threads_add_arenas` shows
the counting sees that. glibc only: elsewhere the cap is a no-op and the test is skipped.

2. A layer-wise inference pass serves large blocks from the heap (`_malloc.large_blocks_reused`,
docs/benchmarks.md *Layer-wise inference*). Proved by where a 64 MiB `malloc` lands, read from glibc's
`mallinfo2` (`hblkhd`: bytes in blocks glibc mapped on their own): during the pass — in the body of
PyG's `model.inference` loop over a `flashgnn.NeighborLoader`, and of `large_blocks_reused` itself —
the block comes from the heap; before the pass and after it (thresholds back at glibc's 32 MiB
ceiling) it is mapped on its own; and with `MALLOC_MMAP_THRESHOLD_` in the environment,
`FLASHGNN_MALLOC=default` or less room than `ROOM_NEEDED`, nothing changes. Without the setting every
64 MiB block is mapped, so the "during" checks fail.
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

from flashgnn._malloc import SERVER_ARENAS, limit_arenas
capped = limit_arenas() if sys.argv[1] == "cap" else False
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
print(int(capped), before, arenas(), SERVER_ARENAS)
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


BLOCKS = r"""
import ctypes, json, sys

libc = ctypes.CDLL(None)
class Info(ctypes.Structure):
    _fields_ = [(n, ctypes.c_size_t) for n in
                "arena ordblks smblks hblks hblkhd usmblks fsmblks uordblks fordblks keepcost".split()]
libc.mallinfo2.restype = Info
libc.malloc.restype = ctypes.c_void_p
libc.malloc.argtypes = [ctypes.c_size_t]
libc.free.argtypes = [ctypes.c_void_p]
BIG = 64 << 20

def mapped_alone():
    before = libc.mallinfo2().hblkhd
    p = libc.malloc(BIG)
    ctypes.memset(p, 1, BIG)  # used, as a tensor would be
    grew = libc.mallinfo2().hblkhd - before >= BIG
    libc.free(p)
    return grew

from flashgnn._malloc import ROOM_NEEDED, large_blocks_reused
seen = {"before": mapped_alone()}
if sys.argv[1] in ("context", "tight"):
    with large_blocks_reused(None if sys.argv[1] == "context" else ROOM_NEEDED - 1) as made:
        seen["during"] = mapped_alone()
    seen["made"] = made
else:
    import torch
    from torch_geometric.nn import GraphSAGE
    import flashgnn
    ld = flashgnn.NeighborLoader(sys.argv[2], num_neighbors=[-1], batch_size=100, input_nodes=None)
    model = GraphSAGE(ld.data.x.shape[1], 8, 2, 3).eval()
    during = []
    class Probe(torch.nn.Module):  # the first conv, noting where a large block lands while the pass runs
        def __init__(self, conv):
            super().__init__()
            self.conv = conv
        def forward(self, *a, **k):
            during.append(mapped_alone())
            return self.conv(*a, **k)
    model.convs[0] = Probe(model.convs[0])
    model.inference(ld)
    seen["during"] = all(during) if during else None
    seen["made"] = bool(during)
seen["after"] = mapped_alone()
print(json.dumps(seen))
"""


def _blocks(mode: str, *args, env=None) -> dict:
    import json

    base = {k: v for k, v in os.environ.items() if not k.startswith("MALLOC_") and k != "FLASHGNN_MALLOC"}
    out = subprocess.run([sys.executable, "-c", BLOCKS, mode, *args], env={**base, **(env or {})}, check=True,
                         capture_output=True, text=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(not _glibc(), reason="malloc thresholds are glibc's")
def test_a_large_block_comes_from_the_heap_only_while_a_pass_runs():
    seen = _blocks("context")
    assert seen == {"before": True, "during": False, "made": True, "after": True}, seen


@pytest.mark.skipif(not _glibc(), reason="malloc thresholds are glibc's")
def test_nothing_changes_without_room_to_spare():
    seen = _blocks("tight")
    assert seen == {"before": True, "during": True, "made": False, "after": True}, seen


@pytest.mark.skipif(not _glibc(), reason="malloc thresholds are glibc's")
@pytest.mark.parametrize("env", [{"MALLOC_MMAP_THRESHOLD_": str(1 << 30)}, {"FLASHGNN_MALLOC": "default"}])
def test_the_users_malloc_settings_are_left_alone(env):
    seen = _blocks("context", env=env)
    assert seen["made"] is False, seen
    if "FLASHGNN_MALLOC" in env:
        assert seen["during"] is True, f"the threshold moved although FLASHGNN_MALLOC=default: {seen}"


@pytest.mark.skipif(not _glibc(), reason="malloc thresholds are glibc's")
def test_pygs_inference_over_the_loader_gets_large_blocks_from_the_heap(tmp_path):
    pytest.importorskip("torch_geometric")
    from conftest import generated_dataset

    ds = generated_dataset(tmp_path, scale=8, edge_factor=4, dim=8, classes=3, seed=1)
    seen = _blocks("loader", str(ds))
    assert seen == {"before": True, "during": False, "made": True, "after": True}, seen
