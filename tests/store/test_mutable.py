"""flashgnn.MutableGraph from Python: the API, its errors, durability across
reopen, compaction, update_graph, apply's atomicity, group commit from
threads, flashgnn.Sampler over a mutated dataset, and the operational side:
`flashgnn compact`, `flashgnn verify` on a mutated store (read-only; torn
tail reported, corruption in the middle refused with file, offset and
sequence) and tqdm progress for compact/update_graph.

Each test builds a small R-MAT dataset (256 nodes, --symmetrize --dedup) in
its own directory and checks the graph against what the operations imply.
"""

from __future__ import annotations

import os
import threading
from pathlib import Path

import numpy as np
import pytest

import flashgnn
from conftest import generated_dataset

DIM = 8


@pytest.fixture
def ds(tmp_path):
    return generated_dataset(tmp_path, {"memory_budget": 80 << 20}, scale=8, edge_factor=4, dim=DIM, classes=3, seed=3)


def nbrs(g, v) -> set:
    return set(g.get_neighbors(v).tolist())


def test_unit_operations_and_reopen(ds):
    g = flashgnn.MutableGraph(ds)
    n = g.num_nodes
    assert (g.generation, g.seq, g.feature_dim, g.feature_dtype) == (0, 0, DIM, "float32")
    v = g.add_vertex(np.arange(DIM, dtype=np.float32))
    assert v == n and g.num_nodes == n + 1
    g.add_edge(v, 3)
    g.add_edge(5, v)
    assert nbrs(g, v) == {3, 5} and v in nbrs(g, 3) and v in nbrs(g, 5)
    g.update_embed(3, np.full(DIM, 0.25))
    assert g.get_embed(3).dtype == np.float32 and np.all(g.get_embed(3) == 0.25)
    u = next(iter(nbrs(g, 7) - {v}))
    g.delete_edge(7, u)
    assert u not in nbrs(g, 7) and 7 not in nbrs(g, u)
    g.delete_vertex(5)
    assert 5 not in nbrs(g, v)
    st = g.stats()
    assert st["ops"] == 6 and st["fsyncs"] == 6 and st["delta_nodes"] > 0 and st["wal_bytes"] > 40
    seq = g.seq
    g.close()
    with pytest.raises(RuntimeError, match="closed"):
        g.add_edge(1, 2)
    g = flashgnn.MutableGraph(ds)
    assert g.seq == seq and g.num_nodes == n + 1
    assert nbrs(g, v) == {3} and np.array_equal(g.get_embed(v), np.arange(DIM, dtype=np.float32))
    assert g.add_vertex(np.zeros(DIM)) == 5  # the deleted id is reused
    ro = flashgnn.MutableGraph(ds, writable=False)
    assert nbrs(ro, v) == {3}
    with pytest.raises(RuntimeError, match="read-only"):
        ro.add_edge(1, 2)


def test_errors_name_argument_value_and_bound(ds):
    g = flashgnn.MutableGraph(ds)
    n = g.num_nodes
    cases = [
        (lambda: g.add_edge(n, 0), f"dst {n} out of range [0, {n})"),
        (lambda: g.add_edge(0, -1), f"src -1 out of range [0, {n})"),
        (lambda: g.get_neighbors(n + 3), f"vid {n + 3} out of range"),
        (lambda: g.add_vertex(np.zeros(3)), f"embed has 3 values; feature_dim is {DIM}"),
        (lambda: g.add_vertex(np.zeros((2, DIM))), "embed must be 1-D"),
        (lambda: g.update_embed(1, [0.0] * (DIM - 1) + [float("inf")]), f"embed[{DIM - 1}] = inf is not finite"),
        (lambda: g.add_edge(1.5, 2), "dst must be an integer"),
        (lambda: g.apply([("frobnicate", 1)]), "ops[0]"),
    ]
    for call, fragment in cases:
        with pytest.raises(ValueError) as e:
            call()
        assert fragment in str(e.value), (fragment, str(e.value))
    g.delete_vertex(4)
    with pytest.raises(ValueError, match="vid 4 is a deleted vertex"):
        g.get_embed(4)
    assert g.seq == 1  # only the delete was logged


def test_apply_is_atomic(ds):
    g = flashgnn.MutableGraph(ds)
    n = g.num_nodes
    before = (g.num_nodes, g.seq, nbrs(g, 1))
    with pytest.raises(ValueError, match=r"ops\[2\]: dst"):
        g.apply([("add_vertex", np.ones(DIM)), ("add_edge", 1, 2), ("add_edge", n + 10, 1)])
    assert (g.num_nodes, g.seq, nbrs(g, 1)) == before
    r = g.apply([("add_vertex", np.ones(DIM)), ("add_edge", n, 1), ("update_embed", 1, np.full(DIM, 2.0)),
                 ("delete_vertex", 9)])
    assert r == [n, None, None, None] and g.seq == before[1] + 1
    g.close()
    g = flashgnn.MutableGraph(ds)
    assert nbrs(g, n) == {1} and np.all(g.get_embed(1) == 2.0)


def test_batch_bound_and_a_large_batch_on_one_hub(ds):
    import time

    g = flashgnn.MutableGraph(ds)
    m = flashgnn.MutableGraph.MAX_BATCH_OPS
    assert m == 65536
    seq = g.seq
    with pytest.raises(ValueError, match=f"{m + 1} operations exceeds the maximum of {m}"):
        g.apply([("add_edge", 1, 2)] * (m + 1))
    with pytest.raises(ValueError, match=f"{m + 1} operations exceeds the maximum of {m}"):
        g._core.apply([("add_edge", 1, 2)] * (m + 1))  # the binding checks too
    assert g.seq == seq
    n, k, hub = g.num_nodes, 60_000, 3
    g.apply([("add_vertex", np.zeros(DIM))] * k)
    want = g.get_neighbors(hub).tolist() + list(range(n, n + k))
    t = time.perf_counter()
    g.apply([("add_edge", hub, n + i) for i in range(k)])
    print(f"60k add_edge on one hub in one batch: {time.perf_counter() - t:.3f} s")
    assert g.get_neighbors(hub).tolist() == want
    g.apply([("add_edge", n + i, hub) for i in range(100)] + [("delete_edge", hub, n + i) for i in range(0, k, 2)])
    want = [v for v in want if not (v >= n and (v - n) % 2 == 0)]
    assert g.get_neighbors(hub).tolist() == want
    g.close()
    g = flashgnn.MutableGraph(ds)
    assert g.get_neighbors(hub).tolist() == want
    g.close()


def test_group_commit_from_threads(ds):
    g = flashgnn.MutableGraph(ds)
    n = g.num_nodes
    per = 25

    def work(t):
        for i in range(per):
            g.add_edge((t * 31 + i) % n, (t * 7 + i * 13 + 1) % n)

    threads = [threading.Thread(target=work, args=(t,)) for t in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    st = g.stats()
    assert st["ops"] == 8 * per
    assert st["ops_per_fsync"] > 1.0, st
    g.close()
    g = flashgnn.MutableGraph(ds)
    for t in range(8):
        for i in range(per):
            a, b = (t * 31 + i) % n, (t * 7 + i * 13 + 1) % n
            assert b in nbrs(g, a)


def test_compaction_and_sampler_sees_mutations(ds):
    g = flashgnn.MutableGraph(ds)
    v = g.add_vertex(np.full(DIM, 7.0))
    g.add_edge(v, 0)
    g.add_edge(v, 1)
    # A live graph: each batch takes a fresh snapshot.
    s = flashgnn.Sampler(ds, [-1], engine="pread", graph=g)
    b = s.sample([v], seed=0)
    assert set(b.n_id.tolist()) == {v, 0, 1}
    assert np.all(b.x[0] == 7.0) and b.y[0] == -1
    w = g.add_vertex(np.full(DIM, 3.0))
    g.add_edge(w, v)
    b = s.sample([v], seed=0)
    assert set(b.n_id.tolist()) == {v, 0, 1, w}
    # A sampler opened on the path replays DATASET/mut/ read-only.
    p = flashgnn.Sampler(ds, [-1], engine="pread")
    assert set(p.sample([v], seed=0).n_id.tolist()) == {v, 0, 1, w}
    with pytest.raises(IndexError):
        p.sample([g.num_nodes], seed=0)
    g.delete_vertex(2)
    before = {u: (nbrs(g, u), g.get_embed(u).tolist()) for u in range(g.num_nodes) if u != 2}
    r = g.compact()
    assert r["generation"] == 1 and g.generation == 1 and r["free_ids"] == 1
    assert (ds / "mut" / "gen-1" / "manifest.json").exists()
    after = {u: (nbrs(g, u), g.get_embed(u).tolist()) for u in range(g.num_nodes) if u != 2}
    assert after == before
    # The live sampler follows the switch; a new path sampler opens gen-1.
    assert set(s.sample([v], seed=0).n_id.tolist()) == {v, 0, 1, w}
    q = flashgnn.Sampler(ds, [-1], engine="pread")
    assert set(q.sample([v], seed=0).n_id.tolist()) == {v, 0, 1, w}
    batches = list(q.iter_batches([v, w, 0], batch_size=2, seed=1))
    assert sum(len(b.n_id) for b in batches) > 0
    g.close()
    g = flashgnn.MutableGraph(ds)
    assert g.generation == 1 and nbrs(g, v) == {0, 1, w}


def test_cache_built_on_a_mutated_store_serves_the_current_generation(ds):
    # Reviewer's repro (node 444 of a larger graph): a Cache built after compaction must not serve
    # generation 0's pages.
    V = 200
    g = flashgnn.MutableGraph(ds)
    old = flashgnn.Sampler(ds, [-1], engine="pread").sample([V], seed=0).x[0].copy()
    g.update_embed(V, np.full(DIM, 7.0))
    g.compact()
    want = g.get_embed(V)
    assert np.all(want == 7.0) and not np.array_equal(old, want)
    for engine in ("pread", "uring"):
        cache = flashgnn.Cache(ds, [-1], 64 << 20, hot="degree", engine=engine)
        assert cache.stats()["static_entries"] > 0
        s = flashgnn.Sampler(ds, [-1], engine=engine, cache=cache)
        for _ in range(2):  # the second batch hits the cache
            assert np.array_equal(s.sample([V], seed=0).x[0], want)
        assert cache.stats()["static_hits"] > 0, "the cache was built on the generation the sampler reads"
        # The live-graph sampler reads the same generation and uses it too.
        s = flashgnn.Sampler(ds, [-1], engine=engine, cache=cache, graph=g)
        assert np.array_equal(s.sample([V], seed=0).x[0], want)
    # A cache of generation 1 after another compaction: not used (generation 2), rows still right.
    g.update_embed(V, np.full(DIM, 5.0))
    g.compact()
    s = flashgnn.Sampler(ds, [-1], engine="pread", cache=cache)
    before = cache.stats()["static_hits"]
    assert np.all(s.sample([V], seed=0).x[0] == 5.0)
    assert cache.stats()["static_hits"] == before
    g.close()


def test_update_graph_replaces_the_graph(ds):
    g = flashgnn.MutableGraph(ds)
    g.add_edge(0, 1)
    n = 40
    src = np.arange(n - 1)
    dst = np.arange(1, n)
    emb = np.arange(n * 4, dtype=np.float32).reshape(n, 4)
    r = g.update_graph(src, dst, emb, labels=np.arange(n) % 2)
    assert r["num_nodes"] == n and r["num_edges"] == 2 * (n - 1)
    assert g.num_nodes == n and g.feature_dim == 4 and nbrs(g, 5) == {4, 6}
    assert g.get_embed(5).tolist() == [20.0, 21.0, 22.0, 23.0]
    with pytest.raises(ValueError, match="embeddings must be 2-D"):
        g.update_graph(src, dst, np.zeros(n))
    s = flashgnn.Sampler(ds, [-1], engine="pread")
    b = s.sample([5], seed=0)
    assert set(b.n_id.tolist()) == {4, 5, 6} and b.y.tolist()[0] == 1


def test_refuses_a_dataset_built_without_symmetrize(tmp_path):
    flashgnn.generate(tmp_path / "raw", progress=False, scale=6, edge_factor=4, dim=4, seed=1)
    flashgnn.build(tmp_path / "raw", tmp_path / "ds", progress=False, memory_budget=80 << 20)
    with pytest.raises(ValueError, match="without --symmetrize.*rebuild"):
        flashgnn.MutableGraph(tmp_path / "ds")


# -- operations: `flashgnn compact`, `flashgnn verify` on a mutated store, progress ---------------


def _tree_bytes(root) -> dict:
    out = {}
    for dirpath, _, files in os.walk(root):
        for f in files:
            p = Path(dirpath) / f
            out[str(p)] = p.read_bytes()
    return out


def test_cli_compact_and_verify_a_mutated_store(ds):
    from conftest import run_cli

    g = flashgnn.MutableGraph(ds)
    g.apply([("add_edge", 1, 2), ("add_vertex", np.ones(DIM))])
    g.delete_vertex(7)
    g.close()
    r = run_cli("compact", ds)
    assert r.returncode == 0, r.stderr
    assert "generation 0 -> 1" in r.stdout and "folded 2 batches / 3 delta ops" in r.stdout, r.stdout
    g = flashgnn.MutableGraph(ds)
    assert g.generation == 1 and 2 in g.get_neighbors(1).tolist()
    g.add_edge(3, 4)
    g.close()
    before = _tree_bytes(ds)
    r = run_cli("info", ds)
    assert r.returncode == 0, r.stderr
    assert "mutable      generation 1" in r.stdout and "log 1 frames / 1 ops" in r.stdout, r.stdout
    assert "1 deleted ids" in r.stdout and "gen-1" in r.stdout, r.stdout
    r = run_cli("verify", ds)
    assert r.returncode == 0, r.stderr
    assert "generation 1" in r.stdout and "WAL 1 frames, 1 ops" in r.stdout and "1 free ids" in r.stdout, r.stdout
    rep = flashgnn.verify(ds, progress=False)
    assert rep["dataset"].endswith("gen-1")
    m = rep["mutable"]
    assert (m["generation"], m["frames"], m["ops"], m["torn_tail_bytes"], m["free_ids"]) == (1, 1, 1, 0, 1)
    assert _tree_bytes(ds) == before, "verify must not modify anything"

    # A torn tail is reported, not cut; a damaged frame in the middle is a clean error.
    wal = ds / "mut" / "wal-1.log"
    good = wal.read_bytes()
    g = flashgnn.MutableGraph(ds)
    g.add_edge(5, 6)
    g.close()
    two = wal.read_bytes()
    wal.write_bytes(two + b"\x01" * 9)
    assert flashgnn.verify(ds, progress=False)["mutable"]["torn_tail_bytes"] == 9
    assert wal.stat().st_size == len(two) + 9
    bad = bytearray(two)
    bad[len(good) - 5] ^= 0xFF  # inside frame seq 3, followed by frame seq 4
    wal.write_bytes(bytes(bad))
    r = run_cli("verify", ds)
    assert r.returncode == 2
    assert "wal-1.log" in r.stderr and "byte offset 40" in r.stderr and "seq 3" in r.stderr, r.stderr
    with pytest.raises(flashgnn.CorruptDatasetError, match="corruption in the middle"):
        flashgnn.verify(ds, progress=False)


def test_one_writer_at_a_time(ds):
    from conftest import run_cli

    g = flashgnn.MutableGraph(ds)
    g.add_edge(1, 2)
    with pytest.raises(RuntimeError, match=r"mut/LOCK.*open for writing by another process"):
        flashgnn.MutableGraph(ds)
    # `flashgnn compact` while a writer (e.g. `flashgnn serve`) holds the store: refused, nothing lost.
    r = run_cli("compact", ds)
    assert r.returncode != 0 and "open for writing by another process" in r.stderr, (r.returncode, r.stderr)
    ro = flashgnn.MutableGraph(ds, writable=False)  # readers take no lock
    assert 2 in ro.get_neighbors(1).tolist()
    g.add_edge(3, 4)
    g.close()
    r = run_cli("compact", ds)
    assert r.returncode == 0, r.stderr
    g = flashgnn.MutableGraph(ds)
    assert g.generation == 1 and 2 in g.get_neighbors(1).tolist() and 4 in g.get_neighbors(3).tolist()
    g.close()


def test_compact_and_update_graph_draw_progress_bars(ds, capsys):
    g = flashgnn.MutableGraph(ds)
    g.add_edge(1, 2)
    rep = g.compact(progress=True)
    err = capsys.readouterr().err
    assert "compact export" in err and rep["folded_frames"] == 1 and rep["bytes"] > 0
    src = np.array([0, 1, 2]), np.array([1, 2, 3])
    g.update_graph(*src, np.zeros((4, DIM), np.float32), progress=True)
    assert "update_graph" in capsys.readouterr().err
    g.update_graph(*src, np.zeros((4, DIM), np.float32), progress=False)
    assert capsys.readouterr().err == ""


def test_replay_reports_a_torn_tail_in_stats(ds):
    """A crash that leaves half a frame: the next writable open truncates it and says so in stats()."""
    import struct

    with flashgnn.MutableGraph(ds) as g:
        g.add_edge(1, 2)
        g.add_edge(3, 4)
        assert g.stats()["wal_version_found"] == 3
    wal = ds / "mut" / "wal-0.log"
    good = wal.read_bytes()
    wal.write_bytes(good + struct.pack("<II", 40, 0) + b"\x07" * 10)  # a frame header promising more than is there
    with flashgnn.MutableGraph(ds) as g:
        st = g.stats()
        assert st["replayed_frames"] == 2 and st["torn_tail_bytes"] == 18 and st["torn_group_frames"] == 0
        assert set(g.get_neighbors(1).tolist()) >= {2} and set(g.get_neighbors(3).tolist()) >= {4}
    assert wal.read_bytes() == good  # truncated back to the last acknowledged frame


# -- damage under mut/: the corruption error with file and offset, never IndexError -------


def _mutated(ds) -> Path:
    with flashgnn.MutableGraph(ds) as g:
        for i in range(4):
            g.add_edge(i, i + 20)
    return ds / "mut" / "wal-0.log"


@pytest.mark.parametrize("who", ["sampler", "loader"])
def test_damaged_log_raises_corruption_from_sampler_and_loader(ds, who):
    wal = _mutated(ds)
    b = bytearray(wal.read_bytes())
    b[40 + 16 + 2] ^= 0x10  # payload of the first of four frames: corruption in the middle
    wal.write_bytes(bytes(b))
    with pytest.raises(flashgnn.CorruptDatasetError, match=r"wal-0\.log: .*byte offset 40") as e:
        if who == "sampler":
            flashgnn.Sampler(ds, [2], engine="pread")
        else:
            flashgnn.NeighborLoader(ds, [2], batch_size=8, engine="pread")
    assert not isinstance(e.value, IndexError)
    with pytest.raises(flashgnn.CorruptDatasetError, match=r"wal-0\.log"):
        flashgnn.verify(ds, progress=False)


@pytest.mark.parametrize("kind", ["regular file", "empty file"])
def test_mut_replaced_by_a_file_is_refused_not_ignored(ds, kind):
    import shutil

    _mutated(ds)
    shutil.rmtree(ds / "mut")
    (ds / "mut").write_bytes(b"x" if kind == "regular file" else b"")
    pat = r"/mut: byte offset 0: is a regular file where the mutable store's directory must be"
    with pytest.raises(flashgnn.CorruptDatasetError, match=pat):
        flashgnn.Sampler(ds, [2], engine="pread")
    with pytest.raises(flashgnn.CorruptDatasetError, match=pat):
        flashgnn.NeighborLoader(ds, [2], batch_size=8, engine="pread")
    with pytest.raises(flashgnn.CorruptDatasetError, match=pat):
        flashgnn.verify(ds, progress=False)
    with pytest.raises(flashgnn.CorruptDatasetError, match=pat):
        flashgnn.MutableGraph(ds)  # a writable open neither ignores nor replaces it
    assert (ds / "mut").is_file()


def test_current_and_log_of_the_wrong_kind_are_refused(ds):
    wal = _mutated(ds)
    cur = ds / "mut" / "CURRENT"
    saved = cur.read_bytes()
    cur.unlink()
    cur.mkdir()
    with pytest.raises(flashgnn.CorruptDatasetError, match=r"mut/CURRENT: byte offset 0: is a directory"):
        flashgnn.Sampler(ds, [2], engine="pread")
    with pytest.raises(flashgnn.CorruptDatasetError, match=r"mut/CURRENT: byte offset 0: is a directory"):
        flashgnn.verify(ds, progress=False)
    cur.rmdir()
    cur.write_bytes(saved)
    wal.unlink()
    wal.mkdir()
    with pytest.raises(flashgnn.CorruptDatasetError, match=r"wal-0\.log: byte offset 0: is a directory"):
        flashgnn.Sampler(ds, [2], engine="pread")


def test_current_damage_names_its_byte_offset(ds):
    _mutated(ds)
    cur = ds / "mut" / "CURRENT"
    text = cur.read_text()
    cur.write_text(text.replace('"generation": 0', '"generation": 1'))  # valid JSON, wrong CRC
    with pytest.raises(flashgnn.CorruptDatasetError, match=rf"CURRENT: byte offset {text.find('crc32c') - 1}: crc32c"):
        flashgnn.Sampler(ds, [2], engine="pread")


def test_mut_of_another_dataset_after_compaction_is_refused_by_every_reader(tmp_path):
    # Two builds of one input (two dataset ids). A's store after a compaction — CURRENT, gen-1, its free
    # list and log, consistent with each other — copied into B was replayed onto B and served. mut/CURRENT
    # (version 2) records the root's dataset_id; every reader compares it with B's manifest.
    import json
    import shutil

    from flashgnn.serve.server import serve

    flashgnn.generate(tmp_path / "raw", progress=False, scale=8, edge_factor=4, dim=DIM, classes=3, seed=3)
    a, b = tmp_path / "a", tmp_path / "b"
    for d in (a, b):
        flashgnn.build(tmp_path / "raw", d, progress=False, symmetrize=True, dedup=True)
    ida, idb = (json.loads((d / "manifest.json").read_text())["dataset_id"] for d in (a, b))
    assert ida != idb
    with flashgnn.MutableGraph(a) as g:
        had = nbrs(g, 1)
        v = next(u for u in range(2, g.num_nodes) if u not in had)
        g.add_edge(1, v)
        g.compact()
        g.add_edge(2, v)
    cur = json.loads((a / "mut" / "CURRENT").read_text())
    assert (cur["version"], cur["generation"], cur["root_dataset_id"]) == (2, 1, ida)
    assert cur["generation_dataset_id"] == json.loads((a / "mut" / "gen-1" / "manifest.json").read_text())["dataset_id"]
    shutil.copytree(a / "mut", b / "mut")
    before = sorted(p.name for p in (b / "mut").iterdir())
    at = (b / "mut" / "CURRENT").read_text().find('"root_dataset_id"')
    pat = rf"b/mut/CURRENT: byte offset {at}: root_dataset_id {ida} is not this dataset's dataset_id {idb}"
    readers = {
        "read-only": lambda: flashgnn.MutableGraph(b, writable=False),
        "writable": lambda: flashgnn.MutableGraph(b),
        "sampler": lambda: flashgnn.Sampler(b, [2], engine="pread"),
        "loader": lambda: flashgnn.NeighborLoader(b, [2], batch_size=8, engine="pread"),
        "verify": lambda: flashgnn.verify(b, progress=False),
        "serve": lambda: serve(str(b), "127.0.0.1:0", token=None),
    }
    for who, f in readers.items():
        with pytest.raises(flashgnn.CorruptDatasetError, match=pat):
            f()
    assert sorted(p.name for p in (b / "mut").iterdir()) == before, "nothing under the foreign mut/ was touched"
    # A keeps serving its own store; B without the foreign mut/ is B unmutated.
    with flashgnn.MutableGraph(a, writable=False) as g:
        assert v in nbrs(g, 1) and v in nbrs(g, 2)
    assert flashgnn.verify(a, progress=False)["mutable"]["generation"] == 1
    shutil.rmtree(b / "mut")
    with flashgnn.MutableGraph(b, writable=False) as g:
        assert v not in nbrs(g, 1)
