"""One --memory-budget split between engine buffers, prefetch window and
cache: the parts add up to the budget, the batch size is measured on the
dataset, a budget too small is refused with the minimum, and `flashgnn
train --memory-budget` prints the split and runs with that cache."""

from __future__ import annotations

import numpy as np
import pytest

import flashgnn
from flashgnn.sample import budget

from conftest import generated_dataset, run_cli


@pytest.fixture(scope="module")
def ds_path(tmp_path_factory):
    return generated_dataset(tmp_path_factory.mktemp("budget"), scale=12, edge_factor=8, dim=16, classes=4, seed=6,
                             split=(0.3, 0.1, 0.6))


def test_split_adds_up_and_measures_batches(ds_path):
    per = budget.batch_bytes(ds_path, [5, 3], 128)
    s = flashgnn.Sampler(ds_path, [5, 3])
    b = s.sample(np.arange(128), seed=1)
    one = sum(a.nbytes for a in (b.n_id, b.edge_index, b.x, b.y))
    assert one // 2 < per < one * 3  # measured on real batches of this size, with headroom
    sp = budget.split(160 << 20, ds_path, [5, 3], 128, workers=2, prefetch=3, hot_fraction=0.25, per_batch=per)
    assert sp["engine"] + sp["window"] + sp["cache"] == 160 << 20
    assert sp["engine"] == 2 * (budget.ENGINE_FIXED_PER_PRODUCER + per) and sp["window"] == 3 * per
    assert sp["cache_static"] + sp["cache_dynamic"] == sp["cache"] and sp["cache_static"] == int(sp["cache"] * 0.25)
    bigger = budget.split(160 << 20, ds_path, [5, 3], 128, workers=1, prefetch=3, per_batch=per)
    assert bigger["cache"] > sp["cache"]  # one producer fewer leaves more to the cache
    la = budget.split(160 << 20, ds_path, [5, 3], 128, workers=2, prefetch=3, per_batch=per, lookahead=8)
    # The structure batches held ahead count, at their own measured size (packed: only the rows that came free).
    assert 0 < la["per_lookahead"] < per
    assert la["window"] == 3 * per + (8 + budget.STRUCTURE_QUEUE) * la["per_lookahead"]
    assert la["engine"] + la["window"] + la["lookahead_cache"] + la["cache"] == 160 << 20
    # Each row is held once: the page cache holds the whole dataset here, so the Belady row cache gets nothing.
    data = budget.dataset_bytes(ds_path)
    assert la["cache"] >= data and la["lookahead_cache"] == 0 and sp["lookahead_cache"] == 0
    tight = budget.split(la["engine"] + la["window"] + data // 2, ds_path, [5, 3], 128, workers=2, prefetch=3,
                         per_batch=per, per_lookahead=la["per_lookahead"], lookahead=8)
    assert 0 < tight["lookahead_cache"] and tight["cache"] < data  # only what the page cache cannot hold is shared
    assert "lookahead cache" in budget.describe(tight)
    with pytest.raises(ValueError, match=r"below the [\d,]+ bytes the engine"):
        budget.split(1 << 20, ds_path, [5, 3], 128, per_batch=per)


def test_train_memory_budget_prints_split_and_caches(ds_path):
    p = run_cli("train", ds_path, "--epochs", "1", "--fanout", "5,3", "--batch-size", "128", "--memory-budget",
                "96MiB", "--no-progress", timeout=300)
    assert p.returncode == 0, p.stderr
    line = next(ln for ln in p.stdout.splitlines() if ln.startswith("memory budget"))
    assert "memory budget 96.0 MiB = engine" in line and "prefetch window" in line and "+ cache" in line
    assert "cache: " in p.stdout  # the cache got the remainder
    p = run_cli("train", ds_path, "--epochs", "1", "--memory-budget", "2MiB", "--no-progress", timeout=300)
    assert p.returncode != 0 and "below the" in p.stderr


def test_auto_sizes_from_available_memory(ds_path):
    """--memory-budget auto: available − reserve, capped at caching the whole
    dataset; lookahead only when the data does not fit; no cache when even
    the engine and window do not fit."""
    assert budget.batch_bytes(ds_path, [5, 3], 256) > 0
    data = budget.dataset_bytes(ds_path)
    assert data > 0
    per = data // 64  # a batch small against the dataset, as on a graph larger than memory
    import sys

    node = budget.node_reserve(ds_path)["bytes"]
    assert node > 0
    R = budget.auto_reserve(per, torch_loaded="torch" in sys.modules, node_bytes=node)
    assert budget.auto_reserve(per, True) == budget.AUTO_RESERVE_MODEL + budget.ACTIVATION_BATCHES * per
    assert budget.auto_reserve(per, False) == budget.auto_reserve(per, True) + budget.AUTO_RESERVE_TORCH
    assert budget.auto_reserve(per, True, node_bytes=node) == budget.auto_reserve(per, True) + node
    base = budget.ENGINE_FIXED_PER_PRODUCER + per + 4 * per
    pla = per // 4  # a structure-stage batch of lookahead
    ahead = (budget.AUTO_LOOKAHEAD + budget.STRUCTURE_QUEUE) * pla
    plenty = budget.auto(ds_path, [5, 3], 256, available=64 << 30, per_batch=per, per_lookahead=pla)
    assert plenty["lookahead"] == budget.AUTO_LOOKAHEAD and plenty["cache"] >= data and "fit" in plenty["auto"]
    # The page cache holds it all and each row is held once: no Belady row cache beside it.
    assert plenty["budget"] == base + ahead + data and plenty["lookahead_cache"] == 0
    serving = budget.auto(ds_path, [5, 3], 256, available=64 << 30, per_batch=per, training=False)
    assert serving["lookahead"] == 0 and serving["cache"] == data and serving["budget"] == base + data
    small = budget.auto(ds_path, [5, 3], 256, available=R + base + ahead, per_batch=per, per_lookahead=pla)
    assert small["lookahead"] == 0 and small["budget"] == base + ahead  # no room for a lookahead window
    room = base + ahead + data // 2  # the cache cannot hold the data: lookahead pays
    tight = budget.auto(ds_path, [5, 3], 256, available=R + room, per_batch=per, per_lookahead=pla)
    assert tight["lookahead"] == budget.AUTO_LOOKAHEAD and tight["budget"] == room
    assert tight["lookahead_cache"] > 0 and tight["cache"] + tight["lookahead_cache"] + tight["engine"] + \
        tight["window"] == room
    none = budget.auto(ds_path, [5, 3], 256, available=R + base - 1, per_batch=per)
    assert none["budget"] == 0 and "without a cache" in none["auto"] and "without a cache" in budget.describe(none)
    two = budget.auto(ds_path, [5, 3], 256, available=2 * (R + room), processes=2, per_batch=per, per_lookahead=pla)
    assert two["budget"] == room  # each local rank gets its share
    forced = budget.auto(ds_path, [5, 3], 256, available=R + room, lookahead=0, per_batch=per)
    assert forced["lookahead"] == 0 and forced["lookahead_cache"] == 0
    assert budget.parse_budget("auto") == "auto" and budget.parse_budget("AUTO") == "auto"
    assert budget.parse_budget("1GiB") == 1 << 30 and budget.parse_budget("0") == 0
    assert 0 < budget.available_memory()


def test_auto_reserves_per_node_memory(ds_path, tmp_path):
    """auto's reserve has a per-node term (a 67 M-node graph was
    OOM-killed under a 2 GiB cap because auto handed the cache the memory the
    trainer's per-node arrays took): N x the bytes per node of what the
    manifest says is kept (labels int32, split ids), less what the process
    already holds. It grows with N, the budget shrinks by exactly as much,
    and the one-line reason states it. The side arrays are one copy per
    process, however many samplers are open."""
    import gc

    big = generated_dataset(tmp_path, scale=14, edge_factor=2, dim=16, classes=4, seed=6, split=(0.3, 0.1, 0.6))
    gc.collect()
    small_r, big_r = budget.node_reserve(ds_path), budget.node_reserve(big)
    n_small, n_big = flashgnn.open(ds_path).num_nodes, flashgnn.open(big).num_nodes
    assert (small_r["nodes"], big_r["nodes"]) == (n_small, n_big) and n_big == 4 * n_small
    assert small_r["held"] == big_r["held"] == 0
    for r, p in ((small_r, ds_path), (big_r, big)):
        sp = flashgnn.open(p).manifest["splits"]
        # labels (int32) + train/val/test ids (int64) + the train epoch's order (3 x int64 per train id)
        want = budget.NODE_BYTES_LABELS * r["nodes"] + budget.SPLIT_ID_BYTES * (sp["train"] + sp["val"] + sp["test"]) \
            + budget.EPOCH_ORDER_BYTES * sp["train"]
        assert r["bytes"] == want and set(r["parts"]) == {"labels", "splits"}  # not relabelled, features inline
    assert big_r["bytes"] > 3 * small_r["bytes"]  # grows with N
    per = 4096
    import sys

    fixed = budget.auto_reserve(per, torch_loaded="torch" in sys.modules)
    base = budget.ENGINE_FIXED_PER_PRODUCER + per + 4 * per  # engine + prefetch window
    # Room above the engine and window, below caching either dataset whole: the budget is the room.
    avail = fixed + base + big_r["bytes"] + budget.dataset_bytes(ds_path) // 4
    assert big_r["bytes"] - small_r["bytes"] < budget.dataset_bytes(ds_path) // 2
    a_small = budget.auto(ds_path, [5, 3], 256, available=avail, per_batch=per, lookahead=0)
    a_big = budget.auto(big, [5, 3], 256, available=avail, per_batch=per, lookahead=0)
    assert a_small["budget"] == avail - fixed - small_r["bytes"]
    assert a_big["budget"] == avail - fixed - big_r["bytes"]
    assert a_small["budget"] - a_big["budget"] == big_r["bytes"] - small_r["bytes"] > 0
    assert f"{n_big:,} nodes" in a_big["auto"] and "B/node of labels, splits" in a_big["auto"]
    assert "B/node" in budget.describe(a_big)
    # What the process already holds is in the measured usage: not reserved twice.
    samplers = [flashgnn.Sampler(big, [5, 3], labels=True) for _ in range(3)]
    held = flashgnn.open(big)._core.side_bytes_held()
    assert held == 4 * n_big  # one int32 copy of the labels for three samplers
    assert budget.node_reserve(big)["bytes"] == big_r["bytes"] - held
    assert "already held" in budget.auto(big, [5, 3], 256, available=avail, per_batch=per, lookahead=0)["auto"]
    del samplers
    gc.collect()
    assert flashgnn.open(big)._core.side_bytes_held() == 0  # freed with the last sampler


def test_loaders_default_to_auto_and_share_one_cache(ds_path, capsys):
    """The Python loaders' memory_budget defaults to "auto": the first loader on
    a dataset makes the process's one cache for it (its split printed once to
    stderr), a second loader on the same dataset (val beside train) gets the
    very same cache object, and memory_budget=0 runs without one."""
    import gc
    import inspect

    from flashgnn.loader.presample import PresampledLoader

    for cls in (flashgnn.NeighborLoader, PresampledLoader):
        assert inspect.signature(cls.__init__).parameters["memory_budget"].default == "auto"
    gc.collect()  # caches of earlier tests in this process are gone (held weakly by the registry)
    capsys.readouterr()
    train = flashgnn.NeighborLoader(ds_path, [5, 3], batch_size=64, split="train")
    val = flashgnn.NeighborLoader(ds_path, [5, 3], batch_size=64, split="val")
    err = capsys.readouterr().err
    assert train.cache is not None and val.cache is train.cache  # one cache, not one per loader
    lines = [ln for ln in err.splitlines() if "memory budget" in ln]
    assert len(lines) == 1, err  # printed once, when the cache was made
    assert lines[0].startswith("flashgnn.NeighborLoader: ") and "auto:" in lines[0] and "shared by its loaders" in lines[0]
    assert train.cache.requested == "auto" and train.cache.budget == train.cache.split["cache"] > 0
    next(iter(val))  # the val loader's batches go through the shared cache
    st = train.cache.stats()
    assert st["static_hits"] + st["dynamic_hits"] + st["misses"] > 0
    off = flashgnn.NeighborLoader(ds_path, [5, 3], batch_size=64, split="val", memory_budget=0)
    assert off.cache is None and off.sampler.cache is None
    quiet = flashgnn.NeighborLoader(ds_path, [5, 3], batch_size=64, split="test", quiet=True)
    assert quiet.cache is train.cache and capsys.readouterr().err == ""
    with pytest.raises(ValueError, match="memory_budget=.* and cache="):
        flashgnn.NeighborLoader(ds_path, [5, 3], batch_size=64, cache=train.cache, memory_budget=1 << 30)


def test_explicit_loader_budget_and_registry_lifetime(ds_path, capsys):
    """An explicit size is split as --memory-budget splits it; the registry
    holds caches weakly (the cache goes with its last loader, the next loader
    makes a fresh one); a size below engine + window is refused."""
    import gc

    gc.collect()
    a = flashgnn.NeighborLoader(ds_path, [5, 3], batch_size=64, split="train", memory_budget=96 << 20)
    assert a.cache is not None and a.cache.requested == 96 << 20
    assert a.cache.budget == budget.split(96 << 20, ds_path, [5, 3], 64, per_batch=a.cache.split["per_batch"])["cache"]
    assert "memory budget 96.0 MiB" in capsys.readouterr().err
    b = flashgnn.NeighborLoader(ds_path, [5, 3], batch_size=64, split="val", memory_budget="80MiB")
    assert b.cache is a.cache and "is not applied" in capsys.readouterr().err  # shared, the other size reported
    del a, b
    gc.collect()
    c = flashgnn.NeighborLoader(ds_path, [5, 3], batch_size=64, split="val", memory_budget="auto", quiet=True)
    assert c.cache is not None and c.cache.requested == "auto"
    del c
    gc.collect()
    with pytest.raises(ValueError, match="below the"):
        flashgnn.NeighborLoader(ds_path, [5, 3], batch_size=64, memory_budget=1 << 20)


def test_pyg_remote_backend_shares_the_cache(ds_path, capsys):
    """The PyG remote backend's feature store and sampler default to "auto" and
    share the process's cache for the dataset; memory_budget=0 disables it."""
    import gc

    from flashgnn import pyg

    gc.collect()
    fs, gs, s = pyg.remote_backend(ds_path, num_neighbors=[5, 3])
    assert fs._cache is not None and s._engine.cache is fs._cache
    assert sum("memory budget" in ln for ln in capsys.readouterr().err.splitlines()) == 1
    fs0, _, s0 = pyg.remote_backend(ds_path, num_neighbors=[5, 3], memory_budget=0)
    assert fs0._cache is None and s0._engine.cache is None


def test_bench_and_embed_default_to_auto(ds_path):
    """`flashgnn bench` sizes the uring+cache row with --memory-budget auto by
    default and prints the split in one line; 0 leaves no cache (the cached
    row is then refused by name); `flashgnn embed` takes the same flag."""
    import json

    from flashgnn.cli import _parser

    args = ("bench", ds_path, "--engine", "uring+cache", "--batches", "2", "--batch-size", "32", "--fanout", "3,2",
            "--workers", "1", "--probe-seconds", "0.05")
    p = run_cli(*args, "--json", timeout=300)
    assert p.returncode == 0, p.stderr
    lines = [ln for ln in p.stderr.splitlines() if "memory budget" in ln]
    assert len(lines) == 1 and lines[0].startswith("bench: auto: ") and "reserve for the interpreter" in lines[0]
    r = json.loads(p.stdout)
    assert r["memory_budget_split"]["cache"] > 0 and r["cache"]["budget"] == r["memory_budget_split"]["cache"]
    assert [e["engine"] for e in r["results"]] == ["uring+cache"]
    p = run_cli(*args, "--memory-budget", "0", timeout=300)
    assert p.returncode != 0 and "needs a cache" in p.stderr
    em = _parser().parse_args(["embed", "d", "out", "--checkpoint", "c"])
    assert em.memory_budget == "auto"
    assert _parser().parse_args(["embed", "d", "out", "--checkpoint", "c", "--memory-budget", "0"]).memory_budget == 0
    assert _parser().parse_args(["bench", "d"]).memory_budget == "auto"


def test_producers_default_to_the_cores_within_the_budget(ds_path):
    """Producers scale to the cores this process may use (affinity, capped by
    a cgroup CPU quota), less the trainer's threads for training, within the
    memory budget: each producer's buffers must fit beside the window."""
    import json
    import os

    from flashgnn.train import trainer as train

    aff = len(os.sched_getaffinity(0))
    assert 1 <= budget.cpu_cores() <= aff
    from flashgnn import _core

    assert _core.cores_from(aff, 1.5) == 1  # a quota of 1.5 CPUs: one core's worth
    assert _core.cores_from(aff, None) == aff
    per = 1 << 20
    one = budget.ENGINE_FIXED_PER_PRODUCER + per
    assert budget.producers_that_fit(8, None, per) == 8
    assert budget.producers_that_fit(8, 3 * one + 4 * per, per, prefetch=4) == 3  # exactly three fit
    assert budget.producers_that_fit(8, 3 * one + 4 * per - 1, per, prefetch=4) == 2
    assert budget.producers_that_fit(8, 1, per) == 1  # never below one (split refuses what cannot fit)
    share = train.core_share()
    assert train.default_workers(1) == max(1, share - 1) and train.default_workers(share + 3) == 1
    assert train.default_workers(train.default_threads()) >= 1
    p = run_cli("bench", ds_path, "--engine", "uring", "--batches", "2", "--batch-size", "32", "--fanout", "3,2",
                "--probe-seconds", "0.05", "--json", timeout=300)
    assert p.returncode == 0, p.stderr
    assert json.loads(p.stdout)["results"][0]["workers"] == budget.cpu_cores()
    assert f"bench: {budget.cpu_cores()} producer(s) per engine" in p.stderr


def test_available_keeps_the_processes_own_code_pages():
    """Page cache counts as available, but the process's own mapped code is
    kept in part (CODE_PAGES_KEPT): evicting it makes the step refault. The
    readings come from one probe (Rust), combined by one rule."""
    from flashgnn import _core

    kept = int(budget.CODE_PAGES_KEPT * (300 << 20))
    assert _core.available_from(None, 1000 << 20, 300 << 20) == (1000 << 20) - kept
    assert _core.available_from(800 << 20, 1000 << 20, 300 << 20) == (800 << 20) - kept  # the tighter source counts
    assert _core.available_from(800 << 20, 1000 << 20, 4 << 30) == 0  # never negative
    assert _core.available_from(None, None, 0) == 1 << 30  # the stated floor
    probe = _core.memory_probe()
    assert probe["file_rss"] > 0 and budget.available_memory() > 0
    assert budget.available_memory() <= _core.available_from(probe["cgroup_headroom"], probe["mem_available"], 0)


def test_auto_lookahead_only_when_its_cache_pays_its_node_arrays(ds_path):
    """auto turns lookahead on only when its half of the rest pays the Belady
    cache's per-node arrays twice over; else every byte goes to the cache."""
    n = flashgnn.open(ds_path).num_nodes
    per, pla = 64 << 10, 16 << 10
    base = budget.ENGINE_FIXED_PER_PRODUCER + per + 4 * per
    ahead = (budget.AUTO_LOOKAHEAD + budget.STRUCTURE_QUEUE) * pla
    R = budget.auto_reserve(per, True, budget.node_reserve(ds_path)["bytes"])
    import sys

    if "torch" not in sys.modules:
        R += budget.AUTO_RESERVE_TORCH
    just = 2 * budget.BELADY_NODE_BYTES * n / budget.LOOKAHEAD_SHARE  # the rest at which the arrays are paid twice
    short = budget.auto(ds_path, [5, 3], 256, available=R + base + ahead + int(just) - 1, per_batch=per,
                        per_lookahead=pla)
    assert short["lookahead"] == 0 and short["lookahead_cache"] == 0 and short["cache"] > 0
    enough = budget.auto(ds_path, [5, 3], 256, available=R + base + ahead + int(just) + 4096, per_batch=per,
                         per_lookahead=pla)
    assert enough["lookahead"] == budget.AUTO_LOOKAHEAD
    assert enough["lookahead_cache"] > budget.BELADY_NODE_BYTES * n


def test_auto_gives_the_memory_engine_no_cache_or_lookahead(ds_path, capsys):
    """The memory engine already holds every page file in RAM: auto adds no cache and no lookahead row
    cache on top (it used to size both from the free memory: three copies of the dataset)."""
    import gc

    s = budget.auto(ds_path, [5, 3], 64, lookahead=None, engine="memory", available=8 << 30)
    assert s["budget"] == 0 and s["lookahead"] == 0 and "memory engine" in s["auto"]
    assert budget.auto(ds_path, [5, 3], 64, lookahead=None, engine="uring", available=8 << 30)["cache"] > 0
    gc.collect()
    capsys.readouterr()
    ld = flashgnn.NeighborLoader(ds_path, [5, 3], batch_size=64, split="train", engine="memory")
    assert ld.cache is None and ld.sampler.cache is None
    assert "memory engine holds the whole dataset" in capsys.readouterr().err
    assert next(iter(ld)).x.shape[0] > 0
