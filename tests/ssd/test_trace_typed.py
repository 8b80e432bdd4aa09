"""`flashgnn trace` on a typed dataset records typed batches: the trace's
file table (params ``files``, trace version 2, docs/trace.md) names each
``t<i>.features.fg``, feature-row reads carry their type's file index, the
rows read per file are the rows of that type the sampler gathered, the bytes
recorded are what the engine read, and ``flashgnn simulate`` replays it.

The dataset is written by ``_core._write_typed_dataset`` (test-only)."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import numpy as np

import flashgnn
from flashgnn import _core
from flashgnn.ssd.simulate import record_trace
from conftest import run_cli

TABLE2 = Path(__file__).resolve().parents[2] / "configs" / "ssd" / "beacongnn-table2.toml"
COUNTS = {"paper": 40, "author": 25, "fos": 8}
DIMS = {"paper": 6, "author": 3, "fos": None}
EDGE_TYPES = [("paper", "cites", "paper"), ("author", "writes", "paper"), ("paper", "rev_writes", "author"),
              ("fos", "topic", "paper")]


def _dataset(tmp_path) -> str:
    rng = np.random.default_rng(3)
    edges = []
    for e, (s, r, d) in enumerate(EDGE_TYPES):
        pairs = {(int(a), int(b)) for a, b in zip(rng.integers(0, COUNTS[s], 3 * COUNTS[d]),
                                                  rng.integers(0, COUNTS[d], 3 * COUNTS[d]))}
        pairs |= {(a, e % 2) for a in range(min(COUNTS[s], 9 + e))}
        p = np.array(sorted(pairs, key=lambda x: (x[1], x[0])), dtype=np.int64)
        edges.append((s, r, d, p[:, 0].copy(), p[:, 1].copy()))
    path = tmp_path / "typed"
    _core._write_typed_dataset(str(path), [(t, COUNTS[t], DIMS[t], 3 if t == "paper" else None) for t in COUNTS],
                               edges)
    return str(path)


def _records(path: str) -> tuple[dict, list[tuple]]:
    """(params, [(batch, file, kind, length)]) of a trace, parsed per docs/trace.md."""
    b = Path(path).read_bytes()
    assert b[:8] == b"FGNNTRC\0" and struct.unpack_from("<I", b, 8)[0] == 2
    n = struct.unpack_from("<I", b, 24)[0]
    params = json.loads(b[32 : 32 + n])
    at, out = 32 + n, []
    while True:
        count = struct.unpack_from("<I", b, at + 4)[0]
        if count == 0:
            return params, out
        for k in range(count):
            r = at + 16 + 64 * k
            out.append((struct.unpack_from("<I", b, r)[0], b[r + 8], b[r + 9], struct.unpack_from("<I", b, r + 12)[0]))
        at += 16 + 64 * count


def test_typed_trace_names_each_feature_file_and_replays(tmp_path):
    path = _dataset(tmp_path)
    out = tmp_path / "t.fgt"
    fan = {("fos", "topic", "paper"): [-1, 0], ("paper", "rev_writes", "author"): [2, 4]}
    r = record_trace(path, str(out), [3, 2], 8, 4, engine="pread", progress=False, type_fanouts=fan)
    files = ["graph.fg", "overflow.fg", "t0.features.fg", "t1.features.fg"]  # fos (t2) has no features
    assert r["files"] == files
    params, recs = _records(str(out))
    assert params["files"] == files and params["input_type"] == "paper"
    assert params["rel_fanouts"] == [[3, 3, 2, -1], [2, 2, 4, 0]]
    assert len(recs) == r["records"] and {b for b, *_ in recs} == {0, 1, 2, 3}
    # Every byte the engine read is a record; feature rows only from the typed files.
    assert sum(x[3] for x in recs) == r["bytes_read"] == r["engine_bytes_read"]
    assert {f for _, f, k, _ in recs if k == 2} == {2, 3} and {f for _, f, k, _ in recs if k != 2} <= {0, 1}
    # Per batch and file: one row read per node of that type the sampler gathered (same seeds, same seed).
    order = np.random.default_rng(0).permutation(np.arange(40))
    s = flashgnn.Sampler(path, params["fanouts"], engine="pread", rel_fanouts=params["rel_fanouts"])
    for b in range(4):
        got = s.sample(order[b * 8 : (b + 1) * 8], seed=b)
        for f, t in ((2, "paper"), (3, "author")):
            rows = [x for x in recs if x[0] == b and x[1] == f]
            assert len(rows) == len(got.node[t].n_id), (b, t)
        batch_bytes = sum(x[3] for x in recs if x[0] == b)
        assert batch_bytes == s.telemetry(last_batch=True)["bytes_read"], b

    p = run_cli("simulate", out, "--config", TABLE2, "--design", "host,bg-1", "--json", "--no-timing")
    assert p.returncode == 0, p.stderr
    for d in json.loads(p.stdout)["runs"][0]["results"]:
        assert d["reads"] == d["reads_served"] == r["records"] and d["batches"] == 4, d["design"]

    # The CLI takes --type-fanouts as flashgnn train does.
    p = run_cli("trace", path, tmp_path / "c.fgt", "--fanout", "3,2", "--type-fanouts",
                "fos__topic__paper=-1,1 paper__rev_writes__author=2,4", "--batch-size", "8", "--batches", "4",
                "--engine", "pread", "--json")
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["files"] == files
    cli_params, cli_recs = _records(str(tmp_path / "c.fgt"))
    assert cli_params["rel_fanouts"] == [[3, 3, 2, -1], [2, 2, 4, 1]] and {x[1] for x in cli_recs} >= {2, 3}
    p = run_cli("trace", path, tmp_path / "d.fgt", "--type-fanouts", "paper__x__paper=1,1")
    assert p.returncode != 0 and "paper__x__paper is not an edge type" in p.stderr
