"""`flashgnn generate igbh`: the typed npy-directory layout it promises (the typed builder's input), counts
that follow IGBH's per-size ratios, ids inside their type, determinism by seed, and labels that follow the
citation graph (most cites edges join same-class papers, against 1/19 at random)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import flashgnn
from flashgnn import _core
from flashgnn.cli import main

PAPERS = 3000
TYPES = ["paper", "author", "institute", "fos", "journal", "conference"]
RELS = {
    "paper__cites__paper": ("paper", "paper"),
    "paper__written_by__author": ("paper", "author"),
    "author__affiliated_to__institute": ("author", "institute"),
    "paper__topic__fos": ("paper", "fos"),
    "paper__published__journal": ("paper", "journal"),
    "paper__venue__conference": ("paper", "conference"),
}
# IGBH-tiny (100,000 papers): node and core-edge counts (sources: flashgnn-datagen's igbh module docs).
TINY_NODES = {"author": 357041, "institute": 8738, "fos": 84220, "journal": 8101, "conference": 398}
TINY_EDGES = {"paper__cites__paper": 447416, "paper__written_by__author": 471443,
              "author__affiliated_to__institute": 325410, "paper__topic__fos": 718445}


def _gen(out, **kw):
    opts = dict(model="igbh", scale=PAPERS, feature_dim=8, seed=3, venues="on")
    opts.update(kw)
    return flashgnn.generate(out, progress=False, **opts)


@pytest.fixture(scope="module")
def gen(tmp_path_factory):
    d = tmp_path_factory.mktemp("igbh")
    return d / "g", _gen(d / "g")


def test_layout_is_exactly_the_typed_npy_directory(gen):
    out, rep = gen
    files = sorted(str(p.relative_to(out)) for p in out.rglob("*") if p.is_file())
    want = ["generate.json", "num_nodes.json"]
    want += [f"{t}/node_feat.npy" for t in TYPES]
    want += [f"paper/{f}.npy" for f in ("node_label", "train_idx", "val_idx", "test_idx")]
    want += [f"{r}/edge_index.npy" for r in RELS]
    assert files == sorted(want)
    assert json.loads((out / "generate.json").read_text())["flashgnn_output"] == "generate"
    nn = json.loads((out / "num_nodes.json").read_text())
    assert nn == rep["node_types"] and set(nn) == set(TYPES)
    assert rep["num_nodes"] == sum(nn.values()) and rep["num_edges"] == sum(rep["edge_types"].values())


def test_counts_follow_igbh_tiny_ratios(gen):
    _, rep = gen
    f = PAPERS / 100_000  # below IGBH-tiny every count keeps tiny's ratio to papers
    assert rep["node_types"]["paper"] == PAPERS
    for t, n in TINY_NODES.items():
        assert rep["node_types"][t] == max(1, round(n * f)), t
    for r, e in TINY_EDGES.items():
        assert rep["edge_types"][r] == round(e * f), r
    assert _core.IGBH_SIZES["tiny"] == 100_000 and _core.IGBH_SIZES["full"] == 269_346_174


def test_shapes_dtypes_and_ids_inside_their_type(gen):
    out, rep = gen
    nn = rep["node_types"]
    for t in TYPES:
        x = np.load(out / t / "node_feat.npy", mmap_mode="r")
        assert x.shape == (nn[t], 8) and x.dtype == np.float32, t
    for r, (s, d) in RELS.items():
        e = np.load(out / r / "edge_index.npy")
        assert e.shape == (rep["edge_types"][r], 2) and e.dtype == np.int64, r
        assert e.min() >= 0 and e[:, 0].max() < nn[s] and e[:, 1].max() < nn[d], r
    y = np.load(out / "paper" / "node_label.npy")
    assert y.shape == (PAPERS,) and y.dtype == np.int64
    assert y.min() >= 0 and y.max() < 19 and len(np.unique(y)) == 19
    parts = [np.load(out / "paper" / f"{s}_idx.npy") for s in ("train", "val", "test")]
    assert all(p.dtype == np.int64 for p in parts)
    allp = np.concatenate(parts)
    assert len(np.unique(allp)) == len(allp) == PAPERS  # disjoint, every labeled paper in one
    assert abs(len(parts[0]) / PAPERS - 0.6) < 0.04 and abs(len(parts[1]) / PAPERS - 0.2) < 0.04


def test_cites_are_homophilous_and_in_degrees_skewed(gen):
    out, _ = gen
    y = np.load(out / "paper" / "node_label.npy")
    e = np.load(out / "paper__cites__paper" / "edge_index.npy")
    same = float((y[e[:, 0]] == y[e[:, 1]]).mean())
    assert same > 0.5, same  # ~0.6 + 0.4/19, against 1/19 at random
    deg = np.bincount(e[:, 1], minlength=PAPERS)
    assert deg.max() > 10 * deg.mean()


def test_features_carry_the_class(gen):
    out, _ = gen
    y = np.load(out / "paper" / "node_label.npy")
    x = np.load(out / "paper" / "node_feat.npy").astype(np.float64)
    cent = np.stack([x[y == c].mean(0) for c in range(19)])
    acc = float((((x[:, None, :] - cent[None]) ** 2).sum(-1).argmin(1) == y).mean())
    assert acc > 2 / 19, acc


def test_deterministic_for_a_seed_and_int32_edges(tmp_path, gen):
    out, _ = gen
    _gen(tmp_path / "b")
    _gen(tmp_path / "c", seed=4)
    for f in ["paper__cites__paper/edge_index.npy", "author/node_feat.npy", "paper/node_label.npy",
              "paper/train_idx.npy", "num_nodes.json"]:
        assert (out / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f
    assert (out / "paper__cites__paper/edge_index.npy").read_bytes() != \
        (tmp_path / "c" / "paper__cites__paper/edge_index.npy").read_bytes()
    _gen(tmp_path / "n", edge_dtype="int32")
    for r in RELS:
        w, n = np.load(out / r / "edge_index.npy"), np.load(tmp_path / "n" / r / "edge_index.npy")
        assert n.dtype == np.int32
        np.testing.assert_array_equal(w, n.astype(np.int64))


def test_venues_auto_and_unlabeled_papers(tmp_path):
    rep = _gen(tmp_path / "a", venues="auto", feature_dim=0, labeled=0.5)
    assert set(rep["node_types"]) == {"paper", "author", "institute", "fos"}  # venues from IGBH-large up
    assert not (tmp_path / "a" / "journal").exists() and not (tmp_path / "a" / "paper" / "node_feat.npy").exists()
    y = np.load(tmp_path / "a" / "paper" / "node_label.npy")
    assert 0.4 < float((y == -1).mean()) < 0.6
    tr = np.load(tmp_path / "a" / "paper" / "train_idx.npy")
    assert (y[tr] >= 0).all()


def test_cli(tmp_path, capsys):
    rc = main(["generate", "igbh", "--scale", "2000", "--out", str(tmp_path / "g"), "--feature-dim", "4", "-q"])
    out = capsys.readouterr().out
    assert rc == 0 and out.startswith(f"generated {tmp_path / 'g'}: 4 node types") and len(out.splitlines()) == 1
    assert json.loads((tmp_path / "g" / "num_nodes.json").read_text())["paper"] == 2000
    rc = main(["generate", "igbh", str(tmp_path / "g"), "--scale", "2000", "-q"])
    assert rc == 2 and "already exists; pass --force" in capsys.readouterr().err
    with pytest.raises(flashgnn.InputError, match="unknown option"):
        flashgnn.generate(tmp_path / "x", model="igbh", edge_factor=3)
