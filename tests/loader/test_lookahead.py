"""Online lookahead (`NeighborLoader(lookahead=S)`, flashgnn.loader.window): the
structure stage keeps only the rows that come with its own reads, the window
fills the rest through a Belady cache over the next S batches — the batches
are exactly the plain loader's, on both feature layouts, with and without the
shared cache, and the fill stage reads fewer rows than it serves."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import flashgnn  # noqa: E402
from flashgnn.loader.neighbor import NeighborLoader  # noqa: E402
from flashgnn.sample.sampler import Sampler  # noqa: E402
from flashgnn.train.trainer import parser, run  # noqa: E402

from conftest import generated_dataset  # noqa: E402


@pytest.fixture(scope="module", params=["inline", "separate"])
def ds_path(request, tmp_path_factory):
    return generated_dataset(tmp_path_factory.mktemp(f"lookahead-{request.param}"), scale=12, edge_factor=8, dim=16,
                             classes=4, seed=5, split=(0.3, 0.1, 0.6), build_opts={"feature_layout": request.param})


def _epoch(loader, epoch=0):
    loader.set_epoch(epoch)
    return list(loader)


def test_free_rows_and_missing_positions(ds_path):
    full = Sampler(ds_path, [5, 3])
    free = Sampler(ds_path, [5, 3], features="free")
    seeds = np.arange(0, 400, 3)
    a, b = full.sample(seeds, 7), free.sample(seeds, 7)
    assert np.array_equal(a.n_id, b.n_id) and np.array_equal(a.row, b.row) and a.missing is None
    have = np.ones(len(b.n_id), bool)
    have[b.missing] = False
    # x is packed: the free rows only, in order; expanded_x() puts zero rows at the missing positions.
    assert b.x.shape == (int(have.sum()), a.x.shape[1]) and np.array_equal(a.x[have], b.x)
    ex = b.expanded_x()
    assert ex.shape == a.x.shape and np.array_equal(ex[have], a.x[have]) and not ex[~have].any()
    assert len(b.missing) > 0
    if flashgnn.open(ds_path).manifest["features"]["placement"] == "separate":
        assert len(b.missing) == len(b.n_id)  # no row comes with a structure read
    else:  # every expanded node's row came with its slot
        expanded = len(b.n_id) - int(b.num_sampled_nodes[-1])
        assert b.missing.min() >= expanded
    with pytest.raises(ValueError, match="features"):
        Sampler(ds_path, [5, 3], features="some")


@pytest.mark.parametrize("cached", [False, True])
def test_lookahead_batches_equal_plain_batches(ds_path, cached):
    plain = NeighborLoader(ds_path, [5, 3], batch_size=128, split="train", shuffle=True, seed=3)
    n = flashgnn.open(ds_path).num_nodes
    row = flashgnn.open(ds_path).feature_dim * 4
    cache = flashgnn.Cache(ds_path, [5, 3], 64 << 10) if cached else None
    budget = 8 * n + 400 * (row + 8)  # 400 rows: far below an epoch's working set
    # memory_budget=0: uncached means uncached here (the default would cache this small dataset whole).
    la = NeighborLoader(ds_path, [5, 3], batch_size=128, split="train", shuffle=True, seed=3, lookahead=4,
                        lookahead_budget=budget, cache=cache, memory_budget=0)
    for epoch in (0, 1):
        want, got = _epoch(plain, epoch), _epoch(la, epoch)
        assert len(want) == len(got) > 3
        for a, b in zip(want, got):
            for k in ("x", "y", "edge_index", "n_id", "input_id"):
                assert torch.equal(a[k], b[k]), (epoch, k)
    st = la.telemetry["lookahead"]
    assert st["superbatch"] == 4 and st["capacity_rows"] == 400
    assert st["hits"] > 0 and st["rows_gathered"] == st["misses"]
    served = sum(len(d.n_id) for d in want)
    assert st["hits"] + st["misses"] < served or flashgnn.open(ds_path).manifest["features"]["placement"] == "separate"
    assert la.telemetry["reads"] >= st["fill_reads"] > 0


def test_lookahead_checks_its_arguments(ds_path):
    with pytest.raises(ValueError, match="lookahead_budget"):
        NeighborLoader(ds_path, [5, 3], lookahead=0, lookahead_budget=1 << 20)


def test_train_with_lookahead_gives_the_same_weights(ds_path, tmp_path):
    base = [str(ds_path), "--fanout", "5,3", "--batch-size", "128", "--hidden", "16", "--epochs", "1",
            "--no-progress"]
    a = run(parser().parse_args(base + ["--metrics-json", str(tmp_path / "a.json")]))
    b = run(parser().parse_args(base + ["--lookahead", "4", "--lookahead-budget", "1MiB",
                                        "--metrics-json", str(tmp_path / "b.json")]))
    assert a["rank_weight_digests"] == b["rank_weight_digests"]
    assert b["history"][0]["lookahead"]["hits"] > 0


def test_window_cache_too_small_for_its_node_arrays_is_none(ds_path):
    """The Belady cache pays 8 B per node (slot_of, next-use marks) from its
    budget; a budget that cannot pay them would hold no row yet allocate
    them past the budget (512 MiB at 67 M nodes: an OOM kill under a 2 GiB cap),
    so it is not built, and rows are read instead."""
    from flashgnn.loader.window import WindowGather

    n = flashgnn.open(ds_path).num_nodes
    gather = Sampler(ds_path, [0], labels=False)
    row = gather.feature_dim * np.dtype(gather.dtype).itemsize
    assert WindowGather(gather, 8 * n, n).belady is None
    assert WindowGather(gather, 8 * n + 10 * (row + 8), n).belady.capacity == 10
    w = WindowGather(gather, 4 * n, n)
    ids = np.arange(min(n, 50))
    assert np.array_equal(w.fill(ids, None, None, []), gather.sample(ids).x)
