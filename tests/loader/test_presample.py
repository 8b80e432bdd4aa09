"""Pre-sampled training (`flashgnn presample` + `flashgnn train --presampled`):
the stored batches are the online loader's batches, training from them gives
bit-identical weights, and a corrupt or mismatched pre-sample is refused
with a clear error."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

torch = pytest.importorskip("torch")

import flashgnn  # noqa: E402
from flashgnn.loader.presample import PresampledLoader, PresampleError, presample  # noqa: E402
from flashgnn.train import TrainError  # noqa: E402
from flashgnn.train.trainer import parser, run  # noqa: E402

from conftest import generated_dataset, run_cli  # noqa: E402


@pytest.fixture(scope="module")
def ds_path(tmp_path_factory):
    return generated_dataset(tmp_path_factory.mktemp("presample"), scale=12, edge_factor=8, dim=16, classes=4, seed=4,
                             split=(0.3, 0.1, 0.6))


def _args(ds_path, *extra):
    return parser().parse_args([str(ds_path), "--fanout", "5,3", "--batch-size", "128", "--hidden", "16",
                                "--no-progress", *extra])


def test_presampled_batches_equal_online_batches(ds_path, tmp_path):
    rep = presample(ds_path, tmp_path / "ps", [5, 3], batch_size=128, epochs=2, seed=9, progress=False)
    assert rep["bytes"] > 0 and len(rep["epochs"]) == 2
    online = flashgnn.NeighborLoader(ds_path, [5, 3], batch_size=128, split="train", shuffle=True, seed=9)
    stored = PresampledLoader(tmp_path / "ps", ds_path)
    for epoch in (0, 1):
        online.set_epoch(epoch)
        stored.set_epoch(epoch)
        a, b = list(online), list(stored)
        assert len(a) == len(b) == len(stored) > 1
        for x, y in zip(a, b):
            for k in ("n_id", "edge_index", "x", "y", "input_id"):
                assert getattr(x, k).dtype == getattr(y, k).dtype and torch.equal(getattr(x, k), getattr(y, k)), k
            assert x.num_sampled_nodes == y.num_sampled_nodes and x.num_sampled_edges == y.num_sampled_edges
            assert x.batch_size == y.batch_size
    # The two epochs differ (a new permutation and new draws each epoch).
    stored.set_epoch(0)
    first0 = next(iter(stored)).n_id
    stored.set_epoch(1)
    assert not torch.equal(first0, next(iter(stored)).n_id)
    with pytest.raises(PresampleError, match="holds 2 epoch"):
        stored.set_epoch(2)
        next(iter(stored))


def test_train_from_presample_gives_identical_weights(ds_path, tmp_path):
    p = run_cli("presample", ds_path, str(tmp_path / "ps"), "--epochs", "2", "--fanout", "5,3", "--batch-size", "128",
                "--seed", "0", timeout=300)
    assert p.returncode == 0, p.stderr
    last = p.stdout.strip().splitlines()[-1]
    assert "presampled 2 epochs" in last and "of the dataset" in last, last
    a = run(_args(ds_path, "--epochs", "2"))
    b = run(_args(ds_path, "--epochs", "2", "--presampled", str(tmp_path / "ps")))
    sa, sb = a["model_obj"].state_dict(), b["model_obj"].state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)
    assert [h["train_loss"] for h in a["history"]] == [h["train_loss"] for h in b["history"]]
    with pytest.raises(TrainError, match="holds 2 epoch"):
        run(_args(ds_path, "--epochs", "3", "--presampled", str(tmp_path / "ps")))
    with pytest.raises(TrainError, match="stored with --batch-size 128, this run has --batch-size 64"):
        run(parser().parse_args([str(ds_path), "--fanout", "5,3", "--batch-size", "64", "--no-progress",
                                 "--epochs", "1", "--presampled", str(tmp_path / "ps")]))


def test_gcn_from_presample_gets_whole_graph_degrees(ds_path, tmp_path):
    """GCN normalises by whole-graph degrees (flashgnn.nn), which a pre-sample
    does not store: the loader reads them per batch, through its one engine
    sampler (the one that gathers its rows and sized its cache), and the
    weights equal online GCN training's."""
    from flashgnn import _core
    from flashgnn.sample.shared import _SHARED

    presample(ds_path, tmp_path / "ps", [5, 3], batch_size=128, epochs=1, seed=0, progress=False)
    _SHARED.clear()
    before = _core.samplers_opened()
    stored = PresampledLoader(tmp_path / "ps", ds_path, degrees=True, quiet=True)
    assert _core.samplers_opened() - before == 1 and stored.cache is not None
    ds = flashgnn.open(ds_path)
    deg = np.diff(ds.neighbors_csr(np.arange(ds.num_nodes))[0])
    d = next(iter(stored))
    np.testing.assert_array_equal(d.deg.numpy(), deg[d.n_id.numpy()])
    a = run(_args(ds_path, "--model", "gcn", "--epochs", "1"))
    b = run(_args(ds_path, "--model", "gcn", "--epochs", "1", "--presampled", str(tmp_path / "ps")))
    sa, sb = a["model_obj"].state_dict(), b["model_obj"].state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)


def test_corrupt_presample_is_a_clean_error(ds_path, tmp_path):
    presample(ds_path, tmp_path / "ps", [5, 3], batch_size=128, epochs=1, progress=False)
    f = tmp_path / "ps" / "epoch-0000.fgps"
    good = f.read_bytes()
    rng = np.random.default_rng(0)
    for _ in range(30):
        b = bytearray(good)
        i = int(rng.integers(0, len(b)))
        b[i] ^= 1 << int(rng.integers(0, 8))
        f.write_bytes(bytes(b))
        with pytest.raises(PresampleError, match=r"epoch-0000.fgps: record at byte \d+"):
            list(PresampledLoader(tmp_path / "ps", ds_path))
    f.write_bytes(good[: len(good) - 7])
    with pytest.raises(PresampleError, match="truncated"):
        list(PresampledLoader(tmp_path / "ps", ds_path))
    f.write_bytes(good)
    assert len(list(PresampledLoader(tmp_path / "ps", ds_path))) > 0
    meta = json.loads((tmp_path / "ps" / "presample.json").read_text())
    meta["dataset"]["num_edges"] += 1
    (tmp_path / "ps" / "presample.json").write_text(json.dumps(meta))
    with pytest.raises(PresampleError, match="different dataset"):
        PresampledLoader(tmp_path / "ps", ds_path)


FIXTURE_V1 = Path(__file__).resolve().parents[1] / "fixtures" / "presample-v1"
FIELDS = ("n_id", "row", "col", "num_sampled_nodes", "num_sampled_edges", "input_id", "y")


def test_version_1_presample_is_still_read(tmp_path):
    """A pre-sample written by the version-1 Python writer (FGPSBAT1 records, zlib CRC-32; fixture made by
    tests/fixtures/presample-v1/make.py) reads back record for record as the version-1 reader returned it."""
    from flashgnn.loader.presample import open_presample, read_records

    exp = np.load(FIXTURE_V1 / "expected.npz")
    meta = json.loads((FIXTURE_V1 / "ps" / "presample.json").read_text())
    assert meta["version"] == 1 < flashgnn._core.PRESAMPLE_VERSION
    num_nodes = int(exp["num_nodes"])
    for e in (0, 1):
        f = FIXTURE_V1 / "ps" / f"epoch-{e:04d}.fgps"
        recs = list(read_records(f, num_nodes, meta["version"]))
        assert [r[0] for r in recs] == exp[f"e{e}_batch_size"].tolist()
        for k, name in enumerate(FIELDS, start=1):
            got = np.concatenate([r[k] for r in recs])
            assert got.dtype == exp[f"e{e}_{name}"].dtype, name
            np.testing.assert_array_equal(got, exp[f"e{e}_{name}"], err_msg=name)
            np.testing.assert_array_equal(np.cumsum([len(r[k]) for r in recs]), exp[f"e{e}_{name}_ends"])
        # Read as the current version, a version-1 record is refused by its magic, naming both.
        with pytest.raises(PresampleError, match=r"record at byte 0: magic \"FGPSBAT1\" != \"FGPSBAT2\""):
            list(read_records(f, num_nodes))
    # presample.json of version 1 is accepted (the dataset check comes next), one of a future version is not.
    class Ds:
        path = str(tmp_path)
        manifest = {"num_nodes": meta["dataset"]["num_nodes"], "num_edges": meta["dataset"]["num_edges"],
                    "files": {flashgnn._core.GRAPH_FILE: {"crc32c": meta["dataset"]["graph_crc"]}}}

    assert open_presample(FIXTURE_V1 / "ps", Ds())["version"] == 1
    (tmp_path / "ps").mkdir()
    meta["version"] = flashgnn._core.PRESAMPLE_VERSION + 1
    (tmp_path / "ps" / "presample.json").write_text(json.dumps(meta))
    with pytest.raises(PresampleError, match="versions 1 to 2"):
        open_presample(tmp_path / "ps", Ds())


def test_records_are_version_2_and_bound_to_their_offset(ds_path, tmp_path):
    """Written records carry the current version's magic and a CRC32C bound to their byte offset: two
    records swapped in their file are refused although each is intact."""
    presample(ds_path, tmp_path / "ps", [5, 3], batch_size=128, epochs=1, progress=False)
    meta = json.loads((tmp_path / "ps" / "presample.json").read_text())
    assert (meta["format"], meta["version"]) == (flashgnn._core.PRESAMPLE_FORMAT, flashgnn._core.PRESAMPLE_VERSION)
    f = tmp_path / "ps" / "epoch-0000.fgps"
    good = f.read_bytes()
    assert good[:8] == b"FGPSBAT2"
    first = flashgnn._core.presample_record_size(str(f), good[:32], 0, len(good), 2)
    second = flashgnn._core.presample_record_size(str(f), good[first:first + 32], first, len(good), 2)
    f.write_bytes(good[first:first + second] + good[:first] + good[first + second:])
    with pytest.raises(PresampleError, match=r"epoch-0000.fgps: record at byte 0: crc32c"):
        list(PresampledLoader(tmp_path / "ps", ds_path))


def _lru_hits(stream, capacity):
    from collections import OrderedDict

    c, hits = OrderedDict(), 0
    for ids in stream:
        for i in ids.tolist():
            if i in c:
                hits += 1
                c.move_to_end(i)
        for i in ids.tolist():
            if i not in c:
                c[i] = True
                if len(c) > capacity:
                    c.popitem(last=False)
    return hits


def test_belady_superbatch_cache_same_batches_fewer_gathers(ds_path, tmp_path):
    presample(ds_path, tmp_path / "ps", [5, 3], batch_size=128, epochs=1, seed=2, progress=False)
    plain = list(PresampledLoader(tmp_path / "ps", ds_path))
    row = flashgnn.open(ds_path).feature_dim * 4
    n = flashgnn.open(ds_path).num_nodes
    budget = 8 * n + 300 * (row + 8)  # the id maps + 300 rows: far smaller than the working set
    ld = PresampledLoader(tmp_path / "ps", ds_path, belady_budget=budget, superbatch=1000)
    cached = list(ld)
    assert len(plain) == len(cached) > 3
    for a, b in zip(plain, cached):
        assert torch.equal(a.x, b.x) and torch.equal(a.n_id, b.n_id)
    c = ld.belady
    total = sum(len(a.n_id) for a in plain)
    assert c.capacity == 300 and len(c.slot) <= c.capacity
    held = c.slot  # the two maps agree: id -> slot and slot -> id
    assert int((c.slot_of >= 0).sum()) == len(held) and all(int(c.slot_of[i]) == k for i, k in held.items())
    assert c.hits + c.misses == total and ld.rows_gathered == c.misses
    # With the whole epoch as the superbatch, Belady is optimal: at least LRU's hits at the same capacity.
    lru = _lru_hits([a.n_id.numpy() for a in plain], c.capacity)
    assert c.hits >= lru and c.hits > 0, (c.hits, lru)
