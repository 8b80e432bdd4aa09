"""Generator tests: determinism, the npy layout it promises, and that its
labels follow the graph (a neighbor-aggregating model beats features alone)."""

from __future__ import annotations

import numpy as np
import pytest

import flashgnn


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    d = tmp_path_factory.mktemp("gen")
    rep = flashgnn.generate(d / "raw", progress=False, scale=13, edge_factor=12, dim=32, classes=8, seed=3,
                            split=(0.3, 0.1, 0.3))
    flashgnn.build(d / "raw", d / "ds", progress=False, symmetrize=True, dedup=True)
    return d, rep


def test_layout_and_shapes(small):
    """The generator writes the importer's npy layout with consistent shapes."""
    d, rep = small
    raw = d / "raw"
    e = np.load(raw / "edge_index.npy")
    x = np.load(raw / "node_feat.npy")
    y = np.load(raw / "node_label.npy")
    assert e.shape == (rep["num_edges"], 2) and e.dtype == np.int64
    assert x.shape == (2**13, 32) and x.dtype == np.float32
    assert y.shape == (2**13,) and set(np.unique(y)) <= set(range(8))
    assert e.min() >= 0 and e.max() < 2**13
    parts = [np.load(raw / f"{s}_idx.npy") for s in ("train", "val", "test")]
    allp = np.concatenate(parts)
    assert len(np.unique(allp)) == len(allp), "splits are disjoint"
    assert abs(len(parts[0]) / 2**13 - 0.3) < 0.03


def test_deterministic_for_a_seed(tmp_path):
    """Same seed -> byte-identical files; another seed -> different edges."""
    a = flashgnn.generate(tmp_path / "a", progress=False, scale=10, edge_factor=4, dim=8, seed=7)
    flashgnn.generate(tmp_path / "b", progress=False, scale=10, edge_factor=4, dim=8, seed=7)
    flashgnn.generate(tmp_path / "c", progress=False, scale=10, edge_factor=4, dim=8, seed=8)
    for f in ["edge_index.npy", "node_feat.npy", "node_label.npy", "train_idx.npy"]:
        assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    assert (tmp_path / "a" / "edge_index.npy").read_bytes() != (tmp_path / "c" / "edge_index.npy").read_bytes()
    assert a["num_edges"] == 4 * 2**10


def test_uint32_edges_are_the_int64_edges_in_half_the_bytes(tmp_path):
    """`edge_dtype="uint32"` writes the same edges as int64 in 8 B per edge instead of 16, and the importer
    builds both into byte-identical graph files; a non-integer edge dtype is refused by name."""
    kw = dict(progress=False, scale=10, edge_factor=6, dim=8, seed=4)
    flashgnn.generate(tmp_path / "w", **kw)
    flashgnn.generate(tmp_path / "n", edge_dtype="uint32", **kw)
    w, n = np.load(tmp_path / "w" / "edge_index.npy"), np.load(tmp_path / "n" / "edge_index.npy")
    assert w.dtype == np.int64 and n.dtype == np.uint32
    np.testing.assert_array_equal(w, n.astype(np.int64))
    assert (tmp_path / "n" / "edge_index.npy").stat().st_size < 0.51 * (tmp_path / "w" / "edge_index.npy").stat().st_size
    for name in ("w", "n"):
        flashgnn.build(tmp_path / name, tmp_path / f"ds-{name}", progress=False, dataset_id=11)
    for f in ("graph.fg", "overflow.fg"):
        assert (tmp_path / "ds-w" / f).read_bytes() == (tmp_path / "ds-n" / f).read_bytes(), f
    with pytest.raises(flashgnn.InputError, match="edge-dtype float32 must be int64, int32 or uint32"):
        flashgnn.generate(tmp_path / "bad", edge_dtype="float32", **kw)


def test_power_law_degrees(small):
    """Degrees are heavy-tailed: the max in-degree is far above the mean."""
    d, _ = small
    ds = flashgnn.open(d / "ds")
    m = ds.manifest["degree"]
    assert m["max"] > 20 * m["mean"], m


def _centroid_accuracy(z, y, train, test):
    classes = np.unique(y[train])
    cent = np.stack([z[train][y[train] == c].mean(0) for c in classes])
    zt = z[test]
    dist = ((zt[:, None, :] - cent[None, :, :]) ** 2).sum(-1)
    return float((classes[dist.argmin(1)] == y[test]).mean())


def test_gnn_beats_features_only(small):
    """Labels follow the graph: a nearest-centroid classifier on features
    averaged over 2 hops of the *built* dataset's neighbors (SGC-style
    propagation, read through flashgnn.Dataset) beats the same classifier on
    raw features, by a clear margin."""
    d, _ = small
    ds = flashgnn.open(d / "ds")
    n = ds.num_nodes
    ids = np.arange(n)
    x = ds.features(ids).astype(np.float64)
    y = ds.labels(ids)
    ptr, idx = ds.neighbors_csr(ids)
    deg = np.diff(ptr)
    rows = np.repeat(np.arange(n), deg)

    def propagate(h):
        agg = np.zeros_like(h)
        np.add.at(agg, rows, h[idx])
        return (h + agg) / (1 + deg)[:, None]

    h2 = propagate(propagate(x))
    train, test = ds.split("train"), ds.split("test")
    acc_x = _centroid_accuracy(x, y, train, test)
    acc_g = _centroid_accuracy(h2, y, train, test)
    print(f"features-only accuracy {acc_x:.3f}, 2-hop aggregated {acc_g:.3f}")
    assert acc_x < 0.9, "features alone should not solve the task"
    assert acc_g > acc_x + 0.1, (acc_x, acc_g)


def test_rejects_bad_options(tmp_path):
    """Invalid generator options fail with a message naming the option."""
    with pytest.raises(flashgnn.InputError, match="--scale 0"):
        flashgnn.generate(tmp_path / "x", progress=False, scale=0)
    with pytest.raises(flashgnn.InputError, match="--split"):
        flashgnn.generate(tmp_path / "x", progress=False, scale=4, split=(0.9, 0.9, 0.1))
    # A negative or huge integer names the option, the value and the bound (it used to surface
    # pyo3's "OverflowError: out of range integral type conversion attempted").
    for kw, value in ((dict(scale=-3), "-3"), (dict(scale=4, edge_factor=-1), "-1"),
                      (dict(scale=4, dim=2**40), str(2**40))):
        key = list(kw)[-1]
        with pytest.raises(flashgnn.InputError, match=rf"option {key}: {value} is out of range: expected an "
                                                      rf"integer in 0\.\.=4294967295"):
            flashgnn.generate(tmp_path / "x", progress=False, **kw)
    assert not (tmp_path / "x").exists()
