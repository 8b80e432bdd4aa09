"""Typed importers beyond the typed npy layout: OGB's heterogeneous raw layout (ogbn-mag's files) and IGBH
large/full's headerless arrays, each built and read back through the typed loader."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest

import flashgnn


def _gz(path, lines):
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write("".join(line + "\n" for line in lines))


def _all_edges(ds_path, ntype, count):
    """Every (src type, src, dst) edge into `ntype`'s nodes, from one typed batch with every neighbour."""
    loader = flashgnn.NeighborLoader(str(ds_path), num_neighbors=[-1], input_nodes=(ntype, None), batch_size=count)
    b = next(iter(loader))
    out = {}
    for et in b.edge_types:
        if et[2] != ntype:
            continue
        row, col = b[et].edge_index
        src, dst = b[et[0]].n_id[row], b[ntype].n_id[col]
        out[et] = sorted(zip(src.tolist(), dst.tolist()))
    return b, out


def test_ogb_heterogeneous_raw_layout(tmp_path):
    raw = tmp_path / "ogbn-mini"
    r = raw / "raw"
    _gz(r / "num-node-dict.csv.gz", ["author,field_of_study,paper", "3,2,4"])
    writes = [(0, 0), (0, 1), (1, 1), (2, 3)]
    cites = [(0, 1), (1, 2), (3, 0)]
    topic = [(0, 1), (2, 0), (3, 1)]
    _gz(r / "relations/author___writes___paper/edge.csv.gz", [f"{a},{b}" for a, b in writes])
    _gz(r / "relations/author___writes___paper/num-edge-list.csv.gz", ["4"])
    _gz(r / "relations/paper___cites___paper/edge.csv.gz", [f"{a},{b}" for a, b in cites])
    _gz(r / "relations/paper___has_topic___field_of_study/edge.csv.gz", [f"{a},{b}" for a, b in topic])
    x = np.arange(12, dtype=np.float32).reshape(4, 3) / 7
    _gz(r / "node-feat/paper/node-feat.csv.gz", [",".join(repr(float(v)) for v in row) for row in x])
    _gz(r / "node-feat/paper/node_year.csv.gz", ["2001", "2002", "2003", "2004"])
    _gz(r / "node-label/paper/node-label.csv.gz", ["1", "0", "2", "1"])
    _gz(raw / "split/time/paper/train.csv.gz", ["0", "1"])
    _gz(raw / "split/time/paper/valid.csv.gz", ["2"])
    _gz(raw / "split/time/paper/test.csv.gz", ["3"])
    rep = flashgnn.build(raw, tmp_path / "ds", progress=False)
    assert rep["manifest"]["build"]["source_format"] == "ogb-typed"
    assert any("node_year" in n for n in rep["notes"]) and any("num-edge-list" in n for n in rep["notes"])
    assert not list(tmp_path.glob("*ogb-stage*")), "the staging directory is never left behind"
    ds = flashgnn.open(tmp_path / "ds")
    assert ds.node_types == ["author", "field_of_study", "paper"]
    assert set(ds.edge_types) == {("author", "writes", "paper"), ("paper", "cites", "paper"),
                                  ("paper", "has_topic", "field_of_study")}
    assert list(ds.split("train")) == [0, 1] and list(ds.split("val")) == [2] and list(ds.split("test")) == [3]
    assert list(ds.labels(np.arange(4))) == [1, 0, 2, 1]
    b, edges = _all_edges(tmp_path / "ds", "paper", 4)
    order = np.argsort(b["paper"].n_id.numpy())
    np.testing.assert_allclose(b["paper"].x.numpy()[order], x, rtol=1e-6)
    assert edges[("author", "writes", "paper")] == sorted(writes)
    assert edges[("paper", "cites", "paper")] == sorted(cites)
    # A link split of one edge type, drawn on the staged layout: local ids, the held-out edge not stored.
    rep = flashgnn.build(raw, tmp_path / "ls", progress=False, link_split=(0.25, 0.25),
                         link_edge_type="author__writes__paper")
    assert rep["manifest"]["build"]["source_format"] == "ogb-typed"
    assert not list(tmp_path.glob("*-stage*")), "no staging directory is left behind"
    ls = flashgnn.open(tmp_path / "ls")
    assert ls.link_edge_type == ("author", "writes", "paper")
    held = {(int(u), int(v)) for name in ("val", "test")
            for u, v in zip(ls.link_split(name).src, ls.link_split(name).dst)}
    assert len(held) == 2 and held <= set(writes)
    _, kept = _all_edges(tmp_path / "ls", "paper", 4)
    assert kept[("author", "writes", "paper")] == sorted(set(writes) - held)
    flashgnn.verify(tmp_path / "ls", progress=False)
    # An id beyond its type's count is refused with the staged file, row and bound.
    _gz(r / "relations/author___writes___paper/edge.csv.gz", ["0,0", "3,1"])
    with pytest.raises(flashgnn.InputError, match=r"edge_index.npy: edge 1, column 0.*node id 3 >= 3.*\"author\""):
        flashgnn.build(raw, tmp_path / "bad", progress=False)
    assert not (tmp_path / "bad").exists()


def test_igbh_headerless_arrays(tmp_path):
    """IGBH large/full ship node_feat.npy, node_label_19.npy and edge_index.npy without npy headers: the
    typed importer takes their shapes from their sizes (1024 float32 per row, float32 labels, int64 pairs)."""
    p = tmp_path / "igbh" / "processed"
    rng = np.random.default_rng(0)
    npap, nauth = 10, 6
    feats = {"paper": rng.standard_normal((npap, 1024)).astype(np.float32),
             "author": rng.standard_normal((nauth, 1024)).astype(np.float32)}
    for t, a in feats.items():
        (p / t).mkdir(parents=True)
        a.tofile(p / t / "node_feat.npy")
    labels = rng.integers(0, 19, npap).astype(np.float32)
    labels.tofile(p / "paper" / "node_label_19.npy")
    e = np.stack([rng.integers(0, npap, 25), rng.integers(0, nauth, 25)], axis=1).astype(np.int64)
    (p / "paper__written_by__author").mkdir()
    e.tofile(p / "paper__written_by__author" / "edge_index.npy")
    c = np.stack([rng.integers(0, npap, 30), rng.integers(0, npap, 30)], axis=1).astype(np.int64)
    (p / "paper__cites__paper").mkdir()
    c.tofile(p / "paper__cites__paper" / "edge_index.npy")
    flashgnn.build(tmp_path / "igbh", tmp_path / "ds", add_reverse=True, progress=False)
    ds = flashgnn.open(tmp_path / "ds")
    assert ds.node_type("paper")["count"] == npap and ds.node_type("author")["count"] == nauth
    assert ds.num_classes == 19 and list(ds.labels(np.arange(npap))) == labels.astype(int).tolist()
    # IGB's processed/ root without split files gets 0.6/0.2/0.2 of the labeled papers, as homogeneous IGB does.
    # (stratified by class: with 10 papers over 19 classes, rounding may leave one out)
    assert ds.split_names == ["test", "train", "val"]
    assert npap - 2 <= sum(ds.split_size(s) for s in ("train", "val", "test")) <= npap
    b, edges = _all_edges(tmp_path / "ds", "author", nauth)
    assert edges[("paper", "written_by", "author")] == sorted(map(tuple, e.tolist()))
    order = np.argsort(b["author"].n_id.numpy())
    np.testing.assert_array_equal(b["author"].x.numpy()[order], feats["author"])
    # A headerless feature file that is not whole rows is refused by name.
    with open(p / "author" / "node_feat.npy", "ab") as f:
        f.write(b"\0" * 8)
    with pytest.raises(flashgnn.InputError, match=r"author/node_feat.npy.*not a whole number of 4096-byte rows"):
        flashgnn.build(tmp_path / "igbh", tmp_path / "bad", progress=False)


def test_derive_features_mean(tmp_path):
    """--derive-features mean: an author's row is the mean of its papers' rows, an institution's the mean of
    its (derived) authors' rows, exactly; the manifest marks them derived and names the real input."""
    raw = tmp_path / "mag"
    rng = np.random.default_rng(1)
    x = rng.standard_normal((6, 3)).astype(np.float32)
    (raw / "paper").mkdir(parents=True)
    np.save(raw / "paper" / "node_feat.npy", x)
    writes = np.array([[0, 0], [0, 1], [1, 1], [1, 2], [1, 5], [3, 4]])  # author -> paper (author 2 wrote none)
    affil = np.array([[0, 0], [1, 0], [3, 1]])                          # author -> institution
    for name, e in (("author__writes__paper", writes), ("author__affiliated_with__institution", affil)):
        (raw / name).mkdir()
        np.save(raw / name / "edge_index.npy", e.astype(np.int64))
    (raw / "num_nodes.json").write_text(json.dumps({"author": 4, "institution": 2}))
    rep = flashgnn.build(raw, tmp_path / "ds", derive_features="mean", progress=False)
    assert any("'author'" in n and "zero rows" in n for n in rep["notes"])
    assert not list(tmp_path.glob(".ds.derive-*")), "the staging directory is removed"
    m = rep["manifest"]
    assert m["build"]["source"] == str(raw)
    feats = {t["name"]: t["features"] for t in m["types"]["node_types"]}
    assert feats["author"]["synthetic"] and feats["institution"]["synthetic"] and not feats["paper"]["synthetic"]
    authors = np.stack([x[[0, 1]].mean(0), x[[1, 2, 5]].mean(0), np.zeros(3), x[[4]].mean(0)])
    inst = np.stack([authors[[0, 1]].mean(0), authors[[3]].mean(0)])
    back = flashgnn.to_pyg(tmp_path / "ds")
    np.testing.assert_allclose(back["author"].x.numpy(), authors, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(back["institution"].x.numpy(), inst, rtol=1e-6, atol=1e-7)
    flashgnn.verify(tmp_path / "ds", progress=False)
