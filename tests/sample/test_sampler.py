"""Sampling engine from Python: identical batches across engines, PyG
invariants, the prefetching producer, fork safety (DataLoader-style workers)
and telemetry."""

from __future__ import annotations

import multiprocessing as mp

import numpy as np
import pytest

import flashgnn
from flashgnn.sample.sampler import ENGINES


@pytest.fixture(scope="module")
def ds_path(tmp_path_factory):
    d = tmp_path_factory.mktemp("samp")
    flashgnn.generate(d / "raw", progress=False, scale=12, edge_factor=8, dim=24, classes=4, seed=11)
    flashgnn.build(d / "raw", d / "ds", progress=False, symmetrize=True, dedup=True)
    return d / "ds"


def _eq(a, b):
    for f in ["n_id", "edge_index", "num_sampled_nodes", "num_sampled_edges", "x", "y"]:
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    assert a.batch_size == b.batch_size


def test_engines_identical_and_match_dataset(ds_path):
    """Every engine returns the same batch; x and y equal the Dataset API's
    rows and labels for n_id; sampled edges are real edges of the graph."""
    ds = flashgnn.open(ds_path)
    seeds = ds.split("train")[:128]
    ref = flashgnn.Sampler(ds_path, [10, 5], engine="memory").sample(seeds, seed=3)
    for e in ENGINES:
        _eq(flashgnn.Sampler(ds_path, [10, 5], engine=e, depth=64, pool_threads=8).sample(seeds, seed=3), ref)
    np.testing.assert_array_equal(ref.n_id[: len(seeds)], seeds)
    np.testing.assert_array_equal(ref.x, ds.features(ref.n_id))
    np.testing.assert_array_equal(ref.y, ds.labels(ref.n_id))
    nb = ds.neighbors(ref.n_id[ref.col].tolist())
    for k in range(0, len(ref.row), 97):
        assert ref.n_id[ref.row[k]] in set(nb[k].tolist())


def test_fanout_bounds_and_determinism(ds_path):
    """Each target gets min(fanout, degree) distinct neighbors; the same seed
    gives the same batch, another seed a different one."""
    ds = flashgnn.open(ds_path)
    s = flashgnn.Sampler(ds_path, [4], engine="uring")
    seeds = np.arange(0, 300, 3)
    b = s.sample(seeds, seed=1)
    deg = np.array([len(x) for x in ds.neighbors(seeds.tolist())])
    counts = np.bincount(b.col, minlength=len(seeds))
    np.testing.assert_array_equal(counts, np.minimum(deg, 4))
    for t in range(len(seeds)):
        nbrs = b.row[b.col == t]
        assert len(set(nbrs.tolist())) == len(nbrs)
    _eq(s.sample(seeds, seed=1), b)
    assert not np.array_equal(s.sample(seeds, seed=2).row, b.row)
    full = flashgnn.Sampler(ds_path, [-1], engine="uring").sample(seeds, seed=0)
    np.testing.assert_array_equal(np.bincount(full.col, minlength=len(seeds)), deg)


def test_prefetching_iterator_matches_direct_calls(ds_path):
    """iter_batches (background producer, prefetch 3) yields exactly the
    batches of direct sample() calls with seeds seed+i, then stops."""
    s = flashgnn.Sampler(ds_path, [5, 5], engine="uring")
    order = np.random.default_rng(0).permutation(4096)[:1000]
    got = list(s.iter_batches(order, batch_size=256, seed=10, prefetch=3))
    assert [g.batch_size for g in got] == [256, 256, 256, 232]
    for i, g in enumerate(got):
        _eq(g, s.sample(order[i * 256:(i + 1) * 256], seed=10 + i))
    assert s.last_iter_telemetry["batches"] == 4
    assert len(list(s.iter_batches(order, batch_size=256, drop_last=True))) == 3


def _child(sampler, seeds, q):
    b = sampler.sample(seeds, seed=5)
    q.put((b.n_id.tolist(), b.row.tolist(), float(b.x.sum())))


def test_fork_safe(ds_path):
    """A sampler used in the parent, then inherited by forked children (the
    PyTorch DataLoader situation), works in each child and gives the
    parent's answer; the parent keeps working afterwards."""
    s = flashgnn.Sampler(ds_path, [6, 3], engine="uring")
    pool_s = flashgnn.Sampler(ds_path, [6, 3], engine="pread-pool", pool_threads=4)
    seeds = np.arange(50)
    want = s.sample(seeds, seed=5)
    ctx = mp.get_context("fork")
    for sampler in (s, pool_s):
        q = ctx.Queue()
        procs = [ctx.Process(target=_child, args=(sampler, seeds, q)) for _ in range(2)]
        for p in procs:
            p.start()
        outs = [q.get(timeout=60) for _ in procs]
        for p in procs:
            p.join(timeout=60)
            assert p.exitcode == 0
        for n_id, row, xs in outs:
            assert n_id == want.n_id.tolist() and row == want.row.tolist()
            assert xs == pytest.approx(float(want.x.sum()))
    _eq(s.sample(seeds, seed=5), want)


def test_telemetry(ds_path):
    """Telemetry counts reads and bytes, and its histograms add up."""
    s = flashgnn.Sampler(ds_path, [10, 5], engine="uring", depth=32)
    s.sample(np.arange(256), seed=0)
    t = s.telemetry()
    assert t["batches"] == 1 and t["reads"] > 0 and t["bytes_read"] >= t["reads"] * 512
    assert sum(t["depth_hist"]) == t["reads"] == sum(t["size_hist"])
    assert t["read_amplification"] >= 1.0
    assert max(i for i, c in enumerate(t["depth_hist"]) if c) >= 3, "several reads were in flight at once"
    s.sample(np.arange(8), seed=1)
    last, total = s.telemetry(last_batch=True), s.telemetry()
    assert last["batches"] == 1 and total["batches"] == 2
    assert last["reads"] + t["reads"] == total["reads"] and 0 < last["reads"] < t["reads"]
    assert len(t["timeline"]) > 1, "in-flight depth sampled during the batch"


def test_bad_requests(ds_path):
    """Out-of-range seeds and unknown engines are clear errors."""
    s = flashgnn.Sampler(ds_path, [2], engine="uring")
    with pytest.raises(IndexError, match="out of range"):
        s.sample([10**9], seed=0)
    with pytest.raises(ValueError, match="engine"):
        flashgnn.Sampler(ds_path, [2], engine="spdk")
    s.sample([1, 2], seed=0)  # still usable


def test_random_walk_from_python(ds_path):
    """GraphSAINT batches: roots first, every edge is a stored edge between
    two visited nodes, and all engines agree."""
    ds = flashgnn.open(ds_path)
    roots = np.arange(0, 400, 20)
    ref = flashgnn.Sampler(ds_path, [1], engine="memory").random_walk(roots, 3, seed=4)
    np.testing.assert_array_equal(ref.n_id[: ref.batch_size], roots)
    nb = ds.neighbors(ref.n_id.tolist())
    members = set(ref.n_id.tolist())
    want = sum(sum(1 for u in nb[c].tolist() if u in members) for c in range(len(ref.n_id)))
    assert len(ref.row) == want
    for e in ("uring", "pread", "mmap"):
        _eq(flashgnn.Sampler(ds_path, [1], engine=e).random_walk(roots, 3, seed=4), ref)


def test_striping_gives_identical_results(ds_path, tmp_path):
    """A dataset striped over 1, 2 and 3 directories (chunk 4 KiB so every
    file spans all parts) verifies, reads back the same through the Dataset
    API, and samples identical batches on every engine."""
    import shutil
    import subprocess
    import sys

    ds0 = flashgnn.open(ds_path)
    seeds = np.arange(0, 2000, 7)
    ref = flashgnn.Sampler(ds_path, [8, 4], engine="memory").sample(seeds, seed=9)
    walk = flashgnn.Sampler(ds_path, [1], engine="memory").random_walk(seeds[:30], 3, seed=2)
    for n in (1, 2, 3):
        root = tmp_path / f"s{n}" / "ds"
        shutil.copytree(ds_path, root)
        dirs = [str(tmp_path / f"s{n}" / f"dev{k}") for k in range(n)]
        r = subprocess.run([sys.executable, "-m", "flashgnn.cli", "stripe", str(root), *dirs, "--chunk", "4KiB"],
                           capture_output=True, text=True)
        assert r.returncode == 0, r.stderr
        assert not (root / "graph.fg").exists() and (root / "stripes.json").exists()
        flashgnn.verify(root, progress=False)
        ds = flashgnn.open(root)
        np.testing.assert_array_equal(ds.features(seeds), ds0.features(seeds))
        assert [a.tolist() for a in ds.neighbors(seeds[:50].tolist())] == [a.tolist() for a in ds0.neighbors(seeds[:50].tolist())]
        for e in ("uring", "pread", "mmap", "memory"):
            _eq(flashgnn.Sampler(root, [8, 4], engine=e).sample(seeds, seed=9), ref)
        _eq(flashgnn.Sampler(root, [1], engine="uring").random_walk(seeds[:30], 3, seed=2), walk)
        # The cache keys extents by logical offset: hits on a striped dataset
        # return the right bytes (the engine hands back physical requests).
        cached = flashgnn.Sampler(root, [8, 4], cache=flashgnn.Cache(root, [8, 4], 1 << 20, hot="degree"))
        reads = []
        for _ in range(2):
            _eq(cached.sample(seeds, seed=9), ref)
            reads.append(cached.telemetry(last_batch=True)["reads"])
        assert cached.telemetry()["cache_static_hits"] > 0 and reads[1] < reads[0], reads
    # Separate feature rows on stripes (sector-exact reads, CRC per row).
    sep = tmp_path / "sep"
    flashgnn.build(ds_path.parent / "raw", sep, progress=False, symmetrize=True, dedup=True, feature_layout="separate")
    sref = flashgnn.Sampler(sep, [8, 4], engine="memory").sample(seeds, seed=9)
    r = subprocess.run([sys.executable, "-m", "flashgnn.cli", "stripe", str(sep), str(tmp_path / "sd0"),
                        str(tmp_path / "sd1"), "--chunk", "4KiB"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    cached = flashgnn.Sampler(sep, [8, 4], cache=flashgnn.Cache(sep, [8, 4], 4 << 20, hot="degree"))
    for e in ("uring", "pread"):
        _eq(flashgnn.Sampler(sep, [8, 4], engine=e).sample(seeds, seed=9), sref)
    for _ in range(2):
        _eq(cached.sample(seeds, seed=9), sref)
    # Random walks fetch whole rows through fetch_lists: same on stripes.
    swalk = flashgnn.Sampler(sep, [1], engine="memory").random_walk(seeds[:30], 3, seed=2)
    _eq(flashgnn.Sampler(sep, [1], engine="uring").random_walk(seeds[:30], 3, seed=2), swalk)
    # A corrupt stripe part is a clean error, not a crash.
    part = tmp_path / "s2" / "dev1" / "ds.graph.fg.part1"
    with open(part, "r+b") as f:
        f.seek(100)
        b = f.read(1)
        f.seek(100)
        f.write(bytes([b[0] ^ 0xFF]))
    with pytest.raises(flashgnn.CorruptDatasetError):
        flashgnn.verify(tmp_path / "s2" / "ds", progress=False)


def test_uring_blocked_falls_back_with_notice(ds_path):
    """When io_uring is refused (simulated with FLASHGNN_DISABLE_URING=1, as a
    container seccomp profile would), engine='uring' prints a one-line notice
    and runs on the pread thread pool with identical results."""
    import subprocess
    import sys

    code = (
        "import flashgnn, numpy as np; s = flashgnn.Sampler(%r, [5, 3], engine='uring');"
        "b = s.sample(np.arange(40), seed=1); print(s.core().engine, int(b.row.sum()), len(b.n_id))" % str(ds_path)
    )
    env = dict(__import__("os").environ, FLASHGNN_DISABLE_URING="1")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=60)
    assert r.returncode == 0, r.stderr
    assert "io_uring unavailable" in r.stderr and r.stderr.strip().count("\n") == 0
    ref = flashgnn.Sampler(ds_path, [5, 3], engine="memory").sample(np.arange(40), seed=1)
    assert r.stdout.split() == ["pread-pool", str(int(ref.row.sum())), str(len(ref.n_id))]


def test_feature_dtype_conversion(tmp_path, ds_path):
    """Features stored as float16 come back as float16 by default and as
    float32 or float64 on request, converted by the engine with numpy's
    astype values (also for random walks, and float32 rows narrowed to
    float16); a non-float dtype is refused by name."""
    flashgnn.generate(tmp_path / "raw", progress=False, scale=9, edge_factor=4, dim=8, seed=2)
    flashgnn.build(tmp_path / "raw", tmp_path / "ds", progress=False, feature_dtype="float16")
    a = flashgnn.Sampler(tmp_path / "ds", [3]).sample(np.arange(20), seed=0)
    assert a.x.dtype == np.float16
    for want in (np.float32, np.float64):
        b = flashgnn.Sampler(tmp_path / "ds", [3], dtype=want).sample(np.arange(20), seed=0)
        assert b.x.dtype == want
        np.testing.assert_array_equal(a.x.astype(want), b.x)
    wa = flashgnn.Sampler(tmp_path / "ds", [1]).random_walk(np.arange(5), 2, seed=1)
    wb = flashgnn.Sampler(tmp_path / "ds", [1], dtype=np.float32).random_walk(np.arange(5), 2, seed=1)
    np.testing.assert_array_equal(wa.x.astype(np.float32), wb.x)
    full = flashgnn.Sampler(ds_path, [3]).sample(np.arange(20), seed=0)
    narrow = flashgnn.Sampler(ds_path, [3], dtype=np.float16).sample(np.arange(20), seed=0)
    assert full.x.dtype == np.float32 and narrow.x.dtype == np.float16
    np.testing.assert_array_equal(full.x.astype(np.float16), narrow.x)
    with pytest.raises(flashgnn.InputError, match="x_dtype \"int32\": expected float16, float32 or float64"):
        flashgnn.Sampler(ds_path, [3], dtype=np.int32)


def test_batches_cross_into_torch_without_a_copy(ds_path):
    """The engine writes each array in its final shape and dtype and numpy
    takes ownership of it: edge_index is one [2, E] int64 array, x (in the
    stored dtype or a requested one) a view of the engine's buffer, and the
    loader's Data tensors share that memory (zero bytes copied on the
    consumer thread; pin_memory aside, which needs CUDA)."""
    torch = pytest.importorskip("torch")
    s = flashgnn.Sampler(ds_path, [5, 3])
    b = s.sample(np.arange(64), seed=1)
    assert b.edge_index.dtype == np.int64 and b.edge_index.shape == (2, int(b.num_sampled_edges.sum()))
    assert b.edge_index.flags.c_contiguous and np.shares_memory(b.row, b.edge_index)
    assert type(b.edge_index.base).__name__ == "PySliceContainer"  # owned by the engine's vector, not a copy
    assert b.x.base is not None and type(b.x.base.base).__name__ == "PySliceContainer"  # a view of the engine's bytes
    from flashgnn.loader.neighbor import _to_data

    data = _to_data(b, np.arange(b.batch_size), pin=False)  # what the loader yields for each batch
    for name in ("edge_index", "x", "n_id", "y"):
        assert getattr(data, name).data_ptr() == getattr(b, name).ctypes.data, name  # the same memory
    assert data.edge_index.dtype == torch.int64 and data.x.dtype == torch.float32


def test_one_engine_sampler_per_loader(ds_path):
    """A loader opens one engine sampler for everything it does before an
    epoch: the batch measurement that sizes the shared cache, the cache's
    hot set, its own sampling and the lookahead's fill reads. Producers
    open one each while an epoch runs."""
    from flashgnn import _core
    from flashgnn.sample.shared import _SHARED

    _SHARED.clear()
    before = _core.samplers_opened()
    loader = flashgnn.NeighborLoader(ds_path, [5, 3], batch_size=64, split=None, lookahead=2,
                                     lookahead_budget=1 << 20, memory_budget=64 << 20, quiet=True)
    assert _core.samplers_opened() - before == 1
    assert loader.cache is not None and loader.window.gather is loader.sampler
    assert loader.cache.stats()["static_bytes"] > 0  # the hot set was chosen, through the loader's sampler
    plain = flashgnn.NeighborLoader(ds_path, [5, 3], batch_size=64, memory_budget=0)
    mid = _core.samplers_opened()
    first = list(loader)
    assert _core.samplers_opened() - mid == loader.workers  # the epoch's producers
    want = list(plain)
    assert [torch_equal(a, b) for a, b in zip(first, want)] == [True] * len(want)


def torch_equal(a, b) -> bool:
    import torch

    return all(torch.equal(a[k], b[k]) for k in ("x", "y", "edge_index", "n_id"))


def test_features_off_gives_same_structure_with_fewer_reads(ds_path):
    seeds = np.arange(0, 4096, 211)  # few seeds: most neighbors' pages hold no seed
    on = flashgnn.Sampler(ds_path, [-1])
    off = flashgnn.Sampler(ds_path, [-1], features=False)
    a, b = on.sample(seeds, 3), off.sample(seeds, 3)
    for f in ["n_id", "row", "col", "num_sampled_nodes", "num_sampled_edges", "y"]:
        np.testing.assert_array_equal(getattr(a, f), getattr(b, f), err_msg=f)
    assert a.x.shape == (len(a.n_id), on.feature_dim) and b.x.shape == (0, on.feature_dim)
    # last-hop nodes need no read at all without features
    assert off.telemetry()["reads"] < on.telemetry()["reads"]


def _cached_child(sampler, seeds, q):
    b = sampler.sample(seeds, seed=5)
    q.put((b.n_id.tolist(), sampler.telemetry()["cache_static_hits"] + sampler.telemetry()["cache_dynamic_hits"]))


@pytest.mark.parametrize("hot,policy", [("degree", "s3fifo"), ("touches", "s3fifo"), ("presample", "clock"),
                                        ("none", "s3fifo"), ("auto", "clock")])
def test_cache_changes_speed_not_batches(ds_path, hot, policy):
    """flashgnn.Cache shared by two samplers and a producer: every batch equals
    the uncached one; hits are counted per tier and reads drop; held bytes
    stay within the budget; a zero budget caches nothing; a forked child runs
    uncached with the same answer; the cache refuses to be pickled."""
    plain = flashgnn.Sampler(ds_path, [8, 4], engine="uring")
    order = np.random.default_rng(3).permutation(4096)[:1536]
    want = [plain.sample(order[i * 256:(i + 1) * 256], seed=i) for i in range(6)] * 2
    base_reads = plain.telemetry()["reads"] * 2
    for budget in (0, 2 << 20):
        # A tenth of the budget stays dynamic (the default is all static) so both tiers are exercised.
        cache = flashgnn.Cache(ds_path, [8, 4], budget, policy=policy, hot=hot, presample_seeds=order[::-1][:512],
                               batch_size=256, hot_fraction=0.9)
        a = flashgnn.Sampler(ds_path, [8, 4], engine="uring", cache=cache)
        b = flashgnn.Sampler(ds_path, [8, 4], engine="pread", cache=cache)
        for j, w in enumerate(want):
            _eq((a if j % 2 else b).sample(order[(j % 6) * 256:(j % 6 + 1) * 256], seed=j % 6), w)
        for i, g in enumerate(a.iter_batches(order, batch_size=256, seed=0, prefetch=2)):
            _eq(g, want[i])
        st = cache.stats()
        assert st["static_bytes"] + st["dynamic_bytes"] <= budget
        assert st["hot"] == ("touches" if hot == "auto" else hot), "auto: touches on a homogeneous dataset"
        ta, tb = a.telemetry(), b.telemetry()
        hits = ta["cache_static_hits"] + ta["cache_dynamic_hits"] + tb["cache_static_hits"] + tb["cache_dynamic_hits"]
        if budget == 0:
            assert hits == 0 and st["static_hits"] + st["dynamic_hits"] == 0
            assert ta["reads"] + tb["reads"] == base_reads
        else:
            assert hits > 0 and ta["reads"] + tb["reads"] < base_reads, (hits, ta["reads"] + tb["reads"], base_reads)
            assert st["dynamic_hits"] > 0 and 0 < ta["cache_hit_rate"] <= 1
            assert (st["static_hits"] > 0) == (hot != "none"), st
    with pytest.raises(TypeError, match="process-local"):
        import pickle
        pickle.dumps(cache)
    q = mp.get_context("fork").Queue()
    p = mp.get_context("fork").Process(target=_cached_child, args=(a, order[:256], q))
    p.start()
    n_id, child_hits = q.get(timeout=60)
    p.join(timeout=60)
    assert p.exitcode == 0 and child_hits == 0
    assert n_id == a.sample(order[:256], seed=5).n_id.tolist()


def _within_codec_bound(codec, want, got):
    """Every value of ``got`` within ``codec``'s bound of ``want`` (float32 rows)."""
    if codec == "fp16":
        bound = np.abs(want) * 2.0 ** -11 + 1e-7
    elif codec == "int4":  # half a step of each group of 32 values: max|group| / 14
        pad = -want.shape[1] % 32
        groups = np.abs(np.pad(want, ((0, 0), (0, pad)))).reshape(len(want), -1, 32).max(axis=2)
        bound = np.repeat(groups / 14 * 1.002, 32, axis=1)[:, :want.shape[1]]
    else:
        bound = np.broadcast_to(np.abs(want).max(axis=1, keepdims=True) / 254 * 1.0001, want.shape)
    return bool((np.abs(want - got) <= bound).all())


@pytest.mark.parametrize("codec", ["fp16", "int8", "int4"])
def test_encoded_rows_change_only_x_within_the_codecs_bound(ds_path, codec):
    """Cache(row_codec=...) on a homogeneous dataset (inline rows): every batch
    equals the uncached one but for x, each value within the codec's bound
    (fp16: relative 2**-11; int8: max|row| / 254; int4: max|group of 32| / 14); some rows did come from
    the encoded set; the same budget holds more slots than rows as stored do
    (the static set charges encoded bytes) and stays within it; a float16
    ``x`` is the decoded rows converted."""
    plain = flashgnn.Sampler(ds_path, [8, 4], engine="uring")
    order = np.random.default_rng(5).permutation(4096)[:1024]
    want = [plain.sample(order[i * 256:(i + 1) * 256], seed=i) for i in range(4)]
    budget = 256 << 10
    stored = flashgnn.Cache(ds_path, [8, 4], budget, hot="degree")
    cache = flashgnn.Cache(ds_path, [8, 4], budget, hot="degree", row_codec=codec)
    st = cache.stats()
    assert st["row_codec"] == codec and st["static_bytes"] <= budget
    assert st["static_entries"] > 1.25 * stored.stats()["static_entries"], (st, stored.stats())
    s = flashgnn.Sampler(ds_path, [8, 4], engine="uring", cache=cache)
    other = flashgnn.Sampler(ds_path, [8, 4], engine="pread", cache=cache)
    changed = 0
    for i, w in enumerate(want):
        g = s.sample(order[i * 256:(i + 1) * 256], seed=i)
        _eq(g, other.sample(order[i * 256:(i + 1) * 256], seed=i))  # whatever the read order
        for f in ["n_id", "edge_index", "num_sampled_nodes", "num_sampled_edges", "y"]:
            np.testing.assert_array_equal(getattr(g, f), getattr(w, f), err_msg=f)
        assert g.x.dtype == w.x.dtype == np.float32 and g.x.shape == w.x.shape
        assert _within_codec_bound(codec, w.x, g.x), codec
        changed += int((g.x != w.x).any(axis=1).sum())
    assert changed > 0, "no row came from the encoded set"
    assert s.telemetry()["cache_static_hits"] > 0
    half = flashgnn.Sampler(ds_path, [8, 4], engine="uring", cache=cache, dtype=np.float16)
    g = half.sample(order[:256], seed=0)
    # Decoded to float32, then converted as any stored row is.
    np.testing.assert_array_equal(g.x, s.sample(order[:256], seed=0).x.astype(np.float16))


def test_row_codec_budget_and_refusals(ds_path):
    """The budget counts rows at their encoded size (dataset_bytes with a
    codec: num_nodes x the bytes a row saves); an unknown codec is refused
    wherever it is given, naming the value; a loader cannot ask a shared
    cache or a given cache for another codec than the one it holds."""
    from flashgnn.sample import budget

    ds = flashgnn.open(ds_path)
    plain, dim = budget.dataset_bytes(ds_path), ds.feature_dim
    assert budget.row_held_bytes("int8", "float32", dim) == 4 + dim
    assert budget.row_held_bytes("fp16", "float32", dim) == 2 * dim
    assert budget.row_held_bytes("int8", "float32", 1) == 4  # no smaller: held as stored
    assert budget.row_held_bytes("int8", "float16", dim) == 2 * dim  # not float32: as stored
    assert budget.row_held_bytes("int4", "float32", 128) == 64 + 8  # nibbles, a half-precision scale per 32
    assert budget.row_held_bytes("int4", "float32", 33) == 17 + 4
    assert budget.dataset_bytes(ds_path, "int8") == plain - ds.num_nodes * (4 * dim - (4 + dim))
    assert budget.dataset_bytes(ds_path, "none") == plain
    for bad in (lambda: flashgnn.Cache(ds_path, [4], 1 << 20, row_codec="int2"),
                lambda: budget.row_held_bytes("int2", "float32", 8),
                lambda: flashgnn.NeighborLoader(ds_path, [4], batch_size=64, row_codec="int2", quiet=True)):
        with pytest.raises(Exception, match="row codec \"int2\""):
            bad()
    with pytest.raises(Exception, match="feature dtype \"complex64\""):
        budget.row_held_bytes("int8", "complex64", 8)
    import gc

    gc.collect()
    a = flashgnn.NeighborLoader(ds_path, [4], batch_size=64, split="train", memory_budget=96 << 20,
                                row_codec="int8", quiet=True)
    assert a.cache.row_codec == "int8" and a.cache.stats()["row_codec"] == "int8"
    with pytest.raises(ValueError, match="row_codec='fp16'.*holds rows as 'int8'"):
        flashgnn.NeighborLoader(ds_path, [4], batch_size=64, split="val", row_codec="fp16", quiet=True)
    given = flashgnn.Cache(ds_path, [4], 1 << 20)
    with pytest.raises(ValueError, match="row_codec='int8' and cache= .*holds rows as 'none'"):
        flashgnn.NeighborLoader(ds_path, [4], batch_size=64, cache=given, row_codec="int8")


def test_cache_bad_arguments(ds_path):
    with pytest.raises(flashgnn.InputError, match="policy"):
        flashgnn.Cache(ds_path, [4], 1 << 20, policy="lru")
    with pytest.raises(flashgnn.InputError, match="hot_fraction"):
        flashgnn.Cache(ds_path, [4], 1 << 20, hot_fraction=1.5)
    with pytest.raises(flashgnn.InputError, match="presample_seeds"):
        flashgnn.Cache(ds_path, [4], 1 << 20, hot="presample")


def test_reuse_model_and_measurement(ds_path):
    """The RDMA study's reuse model on a path graph 0-1-2 equals the hand
    calculation; on a real dataset the fanout-weighted model never exceeds the
    full-adjacency one and the measured reuse is a proper share."""
    from flashgnn.ssd.reuse import model, report

    indptr, indices = np.array([0, 1, 3, 4]), np.array([1, 0, 2, 1])
    m = model(indptr, indices, 3, 1, [-1])
    p = np.array([5 / 9, 7 / 9, 5 / 9])
    assert m["full"]["mean_p"] == pytest.approx(p.mean())
    assert m["full"]["reuse"] == pytest.approx((p * p).sum() / p.sum())
    assert m["fanout"] == pytest.approx(m["full"])  # fanout -1 keeps every neighbor
    m1 = model(indptr, indices, 3, 1, [1])  # node 1 keeps each of its 2 neighbors with probability 1/2
    assert m1["fanout"]["expected_nodes"] == pytest.approx(1 - (2 / 3) * (1 - 1 / 6) + 7 / 9 + 1 - (2 / 3) * (1 - 1 / 6))
    r = report(ds_path, [5, 5], 256, 4, 0)
    assert r["model"]["fanout"]["mean_p"] <= r["model"]["full"]["mean_p"]
    assert 0 < r["measured"]["reuse"] < 1 and r["measured"]["mean_nodes"] >= 256


def test_bench_reports_cpu_per_extent_hits_and_misses(ds_path):
    """`flashgnn bench` gives every engine's CPU per served extent and, with
    memory, uring and uring+cache in one run, CPU per cache hit and per miss
    and the two target ratios; the split follows its definition."""
    from flashgnn.ssd.bench import cpu_per_extent, cpu_split

    t = {"reads": 30, "page_hits": 10, "cache_static_hits": 50, "cache_dynamic_hits": 10, "cpu_seconds": 2e-4}
    assert cpu_per_extent(t) == {"extents": 100, "extents_read": 40, "extents_hit": 60, "cpu_us_per_extent": 2.0}
    by = {"memory": {"cpu_us_per_extent": 1.0, "batches_per_s": 10.0},
          "uring": {"cpu_us_per_extent": 3.5, "batches_per_s": 2.0},
          "uring+cache": {**cpu_per_extent(t), "batches_per_s": 8.0}}
    s = cpu_split(by)
    # 200 us in all, 40 extents from reads at uring's 3.5 us: 60 us over 60 hits.
    assert s["cpu_us_per_hit"] == pytest.approx(1.0) and s["cpu_us_per_miss"] == 3.5
    assert s["hit_vs_memory_cpu"] == pytest.approx(1.0) and s["cached_vs_memory_batches"] == pytest.approx(0.8)
    assert cpu_split({k: v for k, v in by.items() if k != "uring"}) is None

    import json
    import subprocess
    import sys

    from conftest import cli_env

    p = subprocess.run([sys.executable, "-m", "flashgnn", "bench", str(ds_path), "--engine", "memory,uring,uring+cache",
                        "--cache-budget", "256KiB", "--batches", "3", "--batch-size", "64", "--fanout", "5,3",
                        "--workers", "1", "--probe-seconds", "0.1", "--json"],
                       capture_output=True, text=True, env=cli_env(), timeout=120)
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    for e in r["results"]:
        assert e["extents"] > 0 and e["cpu_us_per_extent"] > 0, e["engine"]
    cached = next(e for e in r["results"] if e["engine"] == "uring+cache")
    assert cached["extents_hit"] > 0
    assert r["cache_cpu"]["cpu_us_per_memory_extent"] > 0 and r["cache_cpu"]["cpu_us_per_hit"] >= 0
