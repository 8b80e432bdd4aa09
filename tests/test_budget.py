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
    one = sum(a.nbytes for a in (b.n_id, b.row, b.col, b.x, b.y))
    assert one // 2 < per < one * 3  # measured on real batches of this size, with headroom
    sp = budget.split(160 << 20, ds_path, [5, 3], 128, workers=2, prefetch=3, hot_fraction=0.25, per_batch=per)
    assert sp["engine"] + sp["window"] + sp["cache"] == 160 << 20
    assert sp["engine"] == 2 * (budget.ENGINE_FIXED_PER_PRODUCER + per) and sp["window"] == 3 * per
    assert sp["cache_static"] + sp["cache_dynamic"] == sp["cache"] and sp["cache_static"] == int(sp["cache"] * 0.25)
    bigger = budget.split(160 << 20, ds_path, [5, 3], 128, workers=1, prefetch=3, per_batch=per)
    assert bigger["cache"] > sp["cache"]  # one producer fewer leaves more to the cache
    la = budget.split(160 << 20, ds_path, [5, 3], 128, workers=2, prefetch=3, per_batch=per, lookahead=8)
    assert la["window"] == (3 + 8) * per and la["lookahead_cache"] > 0  # the structure batches held ahead count
    assert la["engine"] + la["window"] + la["lookahead_cache"] + la["cache"] == 160 << 20
    assert sp["lookahead_cache"] == 0 and "lookahead cache" in budget.describe(la)
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

    R = budget.auto_reserve(per, torch_loaded="torch" in sys.modules)
    assert budget.auto_reserve(per, True) == budget.AUTO_RESERVE_MODEL + budget.ACTIVATION_BATCHES * per
    assert budget.auto_reserve(per, False) == budget.auto_reserve(per, True) + budget.AUTO_RESERVE_TORCH
    base = budget.ENGINE_FIXED_PER_PRODUCER + per + 4 * per
    plenty = budget.auto(ds_path, [5, 3], 256, available=64 << 30, per_batch=per)
    assert plenty["lookahead"] == budget.AUTO_LOOKAHEAD and plenty["cache"] >= data and "fit" in plenty["auto"]
    assert plenty["budget"] == base + budget.AUTO_LOOKAHEAD * per + 2 * data  # cache and Belady halves hold it all
    serving = budget.auto(ds_path, [5, 3], 256, available=64 << 30, per_batch=per, training=False)
    assert serving["lookahead"] == 0 and serving["cache"] == data and serving["budget"] == base + data
    small = budget.auto(ds_path, [5, 3], 256, available=R + base + per, per_batch=per)
    assert small["lookahead"] == 0 and small["budget"] == base + per  # no room for a lookahead window
    room = base + budget.AUTO_LOOKAHEAD * per + data // 2  # the cache cannot hold the data: lookahead pays
    tight = budget.auto(ds_path, [5, 3], 256, available=R + room, per_batch=per)
    assert tight["lookahead"] == budget.AUTO_LOOKAHEAD and tight["budget"] == room
    assert tight["lookahead_cache"] > 0 and tight["cache"] + tight["lookahead_cache"] + tight["engine"] + \
        tight["window"] == room
    none = budget.auto(ds_path, [5, 3], 256, available=R + base - 1, per_batch=per)
    assert none["budget"] == 0 and "without a cache" in none["auto"] and "without a cache" in budget.describe(none)
    two = budget.auto(ds_path, [5, 3], 256, available=2 * (R + room), processes=2, per_batch=per)
    assert two["budget"] == room  # each local rank gets its share
    forced = budget.auto(ds_path, [5, 3], 256, available=R + room, lookahead=0, per_batch=per)
    assert forced["lookahead"] == 0 and forced["lookahead_cache"] == 0
    assert budget.parse_budget("auto") == "auto" and budget.parse_budget("AUTO") == "auto"
    assert budget.parse_budget("1GiB") == 1 << 30 and budget.parse_budget("0") == 0
    assert 0 < budget.available_memory()
