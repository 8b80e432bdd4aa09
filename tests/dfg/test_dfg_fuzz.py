"""A DFG from the wire (`Graph.from_bytes`, what `Run` and `query run`
decode) never fails with anything but `DFGError`, and what it accepts
serialises and loads back to the same bytes.

How: the decoder is Python, so instead of a libFuzzer target (the Rust
decoders' are under fuzz/) this is a seeded property test with no extra
dependency. Starting from real serialised DFGs (a small GEMM/ReLU graph and
the built-in GraphSAGE and GCN graphs with their weights), it makes
thousands of hostile variants at two levels: bytes (bit flips, byte
changes, insertions, deletions, truncation, with the header lengths and the
CRC recomputed half of the time so the checks behind them are reached) and
the JSON document (a random field replaced by a hostile value — null,
negative, huge, NaN-like, wrong type, deep nesting, long strings — then
re-encoded with consistent lengths and CRC). Any exception other than
`DFGError` (KeyError, TypeError, OverflowError, RecursionError,
MemoryError...) fails the test with the seed and case that produced it.
"""

from __future__ import annotations

import copy
import json
import random
import struct
import zlib

import pytest

torch = pytest.importorskip("torch")

import flashgnn.dfg as dfg  # noqa: E402
from test_dfg import small_graph  # noqa: E402  (the suite's small GEMM graph)

CASES = 600  # per seed graph and level: ~5 s for both levels on one core

HOSTILE = [
    None, True, False, 0, -1, 1, 2**31, 2**63, 2**64, -(2**63), 10**30, 1.5, -0.0, 1e308, "", "x", "GEMM",
    "1_0", "../../etc/passwd", "a" * 5000, "\u0000", [], [0], [[[[]]]], {}, {"": 1}, ["X"] * 300,
    {"seq": 1}, [-1, 3], [2**40, 2**40],
]


DEEP = "<deeply nested list>"


def seed_graphs():
    out = {"small": small_graph().to_bytes()}
    from flashgnn.nn.zoo import build_model

    from flashgnn.dfg import models

    torch.manual_seed(0)
    for name in ("sage", "gcn"):
        m = build_model(name, 4, 8, 3, 2, dropout=0.0)
        out[name] = getattr(models, name)(m.state_dict(), [3, 2]).to_bytes()
    return out


def seal(body: bytearray) -> bytes:
    """Set json_len/blob_len consistently with the JSON's end and recompute the CRC."""
    if len(body) < 32:
        return bytes(body) + struct.pack("<I", zlib.crc32(body))
    _, _, _, jl, _ = struct.unpack_from("<8sIIQQ", body, 0)
    jl = min(jl, len(body) - 32)
    struct.pack_into("<QQ", body, 16, jl, len(body) - 32 - jl)
    return bytes(body) + struct.pack("<I", zlib.crc32(body))


def byte_variant(blob: bytes, rng: random.Random) -> bytes:
    b = bytearray(blob[:-4])
    for _ in range(rng.randint(1, 4)):
        k = rng.randrange(5)
        at = rng.randrange(len(b)) if b else 0
        if k == 0 and b:
            b[at] ^= 1 << rng.randrange(8)
        elif k == 1 and b:
            b[at] = rng.randrange(256)
        elif k == 2:
            b[at:at] = bytes(rng.randrange(256) for _ in range(rng.randint(1, 8)))
        elif k == 3 and b:
            del b[at: at + rng.randint(1, 8)]
        else:
            del b[at:]
    if rng.random() < 0.5:
        return seal(b)
    return bytes(b) + blob[-4:]


def paths(v, prefix=()):
    yield prefix
    if isinstance(v, dict):
        for k, x in v.items():
            yield from paths(x, prefix + (k,))
    elif isinstance(v, list):
        for i, x in enumerate(v):
            yield from paths(x, prefix + (i,))


def json_variant(blob: bytes, rng: random.Random) -> bytes:
    magic, ver, flags, jl, bl = struct.unpack_from("<8sIIQQ", blob, 0)
    doc = json.loads(blob[32: 32 + jl])
    params = blob[32 + jl: 32 + jl + bl]
    for _ in range(rng.randint(1, 3)):
        where = rng.choice(list(paths(doc))[1:])
        parent = doc
        for k in where[:-1]:
            parent = parent[k]
        r = rng.random()
        if r < 0.1 and isinstance(parent, dict):
            parent.pop(where[-1])
        elif r < 0.2 and isinstance(parent, list):
            parent.append(copy.deepcopy(rng.choice(HOSTILE)))
        elif r < 0.25:
            parent[where[-1]] = DEEP  # spliced into the text below: json.dumps itself would recurse
        else:
            parent[where[-1]] = copy.deepcopy(rng.choice(HOSTILE))
    depth = rng.choice([50, 5000])
    js = json.dumps(doc).replace(json.dumps(DEEP), "[" * depth + "]" * depth).encode()
    body = struct.pack("<8sIIQQ", magic, ver, flags, len(js), len(params)) + js + params
    return body + struct.pack("<I", zlib.crc32(body))


@pytest.mark.parametrize("level", ["bytes", "json"])
def test_hostile_dfg_bytes_raise_only_dfg_error(level):
    variant = byte_variant if level == "bytes" else json_variant
    accepted = refused = 0
    for name, blob in seed_graphs().items():
        dfg.Graph.from_bytes(blob)  # the seed itself is valid
        rng = random.Random(f"{level}-{name}")
        for case in range(CASES):
            data = variant(blob, rng)
            try:
                g = dfg.Graph.from_bytes(data)
            except dfg.DFGError:
                refused += 1
                continue
            except Exception as e:  # noqa: BLE001 - the property under test
                raise AssertionError(f"{level} case {case} of {name}: {type(e).__name__}: {e}") from e
            accepted += 1
            again = g.to_bytes()
            assert dfg.Graph.from_bytes(again).to_bytes() == again, f"{level} case {case} of {name}"
    assert refused > 0
    print(f"{level}: {accepted} accepted, {refused} refused")


def test_found_a_param_dtype_that_is_a_list_is_a_dfg_error():
    # Found by the json level above: an unhashable dtype made the
    # `in DTYPES` check raise TypeError instead of naming the field.
    blob = seed_graphs()["small"]
    for bad in (["float32"], {"a": 1}):
        _, ver, _, jl, bl = struct.unpack_from("<8sIIQQ", blob, 0)
        doc = json.loads(blob[32: 32 + jl])
        doc["params"][0]["dtype"] = bad
        js = json.dumps(doc).encode()
        body = struct.pack("<8sIIQQ", b"FLASHDFG", ver, 0, len(js), bl) + js + blob[32 + jl: 32 + jl + bl]
        with pytest.raises(dfg.DFGError, match=r"params\[0\]\.dtype"):
            dfg.Graph.from_bytes(body + struct.pack("<I", zlib.crc32(body)))
