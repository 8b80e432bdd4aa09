"""Link splits through the Python surface: `flashgnn build --link-split` and
`flashgnn.open(DS).link_split(...)`, and OGB link datasets imported with their
official `.pt` split.

How: a small random undirected graph is built with a split; the test checks
the leakage promise (no validation/test edge nor its reverse among the stored
neighbors), the negatives' promises and the exact counts, then that `verify`
accepts it and a dataset without a split is refused by name. OGB-shaped
directories (raw CSVs + `split/<name>/*.pt` written here with `torch.save`,
collab and citation2 styles) import with every given negative, and malformed
split files are refused naming the file, the key, the value and the bound.
"""

from __future__ import annotations

import gzip

import numpy as np
import pytest

import flashgnn
from flashgnn import _core


def _graph(d, n=120, pairs=500, seed=0):
    rng = np.random.default_rng(seed)
    e = rng.integers(0, n, size=(pairs, 2))
    e = e[e[:, 0] != e[:, 1]]
    both = np.concatenate([e, e[:, ::-1]])
    d.mkdir()
    np.save(d / "edge_index.npy", both.astype(np.int64))
    np.save(d / "node_feat.npy", np.zeros((n, 2), np.float32))
    return {(min(a, b), max(a, b)) for a, b in e.tolist()}


def test_random_split_python_surface(tmp_path):
    pairs = _graph(tmp_path / "raw")
    out = tmp_path / "ds"
    rep = flashgnn.build(tmp_path / "raw", out, progress=False, link_split=(0.1, 0.2), neg_per_pos=2,
                         link_split_seed=3)
    assert rep["manifest"]["link_split"]["undirected"] is True
    ds = flashgnn.open(out)
    m = len(pairs)
    val, test, train = ds.link_split("val"), ds.link_split("test"), ds.link_split("train")
    assert len(val.src) == int(0.1 * m) and len(test.src) == int(0.2 * m)
    assert train.neg is None and len(train.src) == m - len(val.src) - len(test.src)
    seen = set()
    for s in (val, test):
        assert s.neg.shape == (len(s.src), 2) and s.neg.dtype == np.int64
        for u, v in zip(s.src.tolist(), s.dst.tolist()):
            assert u not in ds.neighbors(v) and v not in ds.neighbors(u)  # no leakage, either direction
        for u, row in zip(s.src.tolist(), s.neg.tolist()):
            for w in row:
                key = (min(u, w), max(u, w))
                assert u != w and key not in pairs and key not in seen
                seen.add(key)
    flashgnn.verify(out, progress=False)
    # The CLI's spelling reaches the same options.
    import argparse

    from flashgnn import cli

    sub = next(a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction))
    a = sub.choices["build"].parse_args(["in", "out", "--link-split", "0.1,0.2", "--disjoint-train-ratio", "0.5",
                                    "--neg-per-pos", "3"])
    assert (a.link_split, a.disjoint_train_ratio, a.neg_per_pos) == ((0.1, 0.2), 0.5, 3)


def test_no_link_split_is_refused_by_name(tmp_path):
    _graph(tmp_path / "raw")
    flashgnn.build(tmp_path / "raw", tmp_path / "plain", progress=False)
    with pytest.raises(Exception, match="plain has no link split"):
        flashgnn.open(tmp_path / "plain").link_split("val")


def test_memory_mapped_split_equals_the_read_one_and_is_checked_first(tmp_path):
    """``link_split(name, mmap=True)`` maps the files (``np.memmap``, nothing read whole) after the same
    CRC and id checks: the same arrays as the read split, a flipped byte refused naming the file, a
    dataset without a split refused by name."""
    _graph(tmp_path / "raw")
    out = tmp_path / "ds"
    flashgnn.build(tmp_path / "raw", out, progress=False, link_split=(0.1, 0.2), neg_per_pos=2)
    ds = flashgnn.open(out)
    for name in ("train", "val", "test"):
        a, b = ds.link_split(name), ds.link_split(name, mmap=True)
        assert isinstance(b.src, np.memmap) and isinstance(b.dst, np.memmap)
        assert np.array_equal(a.src, b.src) and np.array_equal(a.dst, b.dst)
        assert (a.neg is None) == (b.neg is None) and (a.neg is None or np.array_equal(a.neg, b.neg))
    f = out / "link_train_dst.npy"
    raw = bytearray(f.read_bytes())
    raw[-3] ^= 0x01
    f.write_bytes(bytes(raw))
    with pytest.raises(flashgnn.CorruptDatasetError, match="link_train_dst.npy"):
        flashgnn.open(out).link_split("train", mmap=True)
    _graph(tmp_path / "raw2")
    flashgnn.build(tmp_path / "raw2", tmp_path / "plain", progress=False)
    with pytest.raises(Exception, match="plain has no link split"):
        flashgnn.open(tmp_path / "plain").link_split("train", mmap=True)


def _ogb(root, n, edges, split):
    torch = pytest.importorskip("torch")
    raw = root / "raw"
    raw.mkdir(parents=True)
    with gzip.open(raw / "edge.csv.gz", "wt") as f:
        f.writelines(f"{a},{b}\n" for a, b in edges)
    with gzip.open(raw / "num-node-list.csv.gz", "wt") as f:
        f.write(f"{n}\n")
    sd = root / "split" / "time"
    sd.mkdir(parents=True)
    for name, d in split.items():
        torch.save(d, sd / f"{name}.pt")
    return torch


def test_ogb_collab_and_citation2_styles_import(tmp_path):
    torch = pytest.importorskip("torch")
    t = lambda a: torch.tensor(a, dtype=torch.int64)  # noqa: E731
    collab = tmp_path / "collab"
    _ogb(collab, 10, [(0, 1), (1, 2), (2, 3)], {
        "train": {"edge": t([[0, 1], [1, 2], [2, 3]]), "weight": t([1, 1, 2]), "year": t([2000, 2001, 2002])},
        "valid": {"edge": t([[4, 5]]), "edge_neg": t([[0, 9], [1, 8], [2, 7]])},
        "test": {"edge": t([[6, 7]]), "edge_neg": t([[3, 9], [4, 8]])},
    })
    rep = flashgnn.build(collab, tmp_path / "c", progress=False, symmetrize=True)
    assert any("weight" in n and "year" in n for n in rep["notes"]), rep["notes"]
    assert not any("split not imported" in n for n in rep["notes"]), rep["notes"]
    ds = flashgnn.open(tmp_path / "c")
    v = ds.link_split("val")
    assert (v.src.tolist(), v.dst.tolist(), v.neg) == ([4], [5], None)
    ns, nd = ds.link_negative_pairs("val")
    assert (ns.tolist(), nd.tolist()) == ([0, 1, 2], [9, 8, 7])
    assert ds.link_split_info["origin"] == "given"
    flashgnn.verify(tmp_path / "c", progress=False)

    cit = tmp_path / "cit"
    neg = np.arange(2 * 1000).reshape(2, 1000) % 50
    _ogb(cit, 50, [(0, 1), (2, 3)], {
        "train": {"source_node": t([0, 2]), "target_node": t([1, 3])},
        "valid": {"source_node": t([4, 5]), "target_node": t([6, 7]), "target_node_neg": t(neg)},
    })
    flashgnn.build(cit, tmp_path / "ct", progress=False)
    v = flashgnn.open(tmp_path / "ct").link_split("val")
    assert v.neg.shape == (2, 1000) and (v.neg == neg).all()  # all 1,000 given negatives kept


@pytest.mark.parametrize("bad, want", [
    ({"edge": [[0, 1], [2, 99]]}, "key 'edge': index (1, 1): node id 99 out of range [0, 10)"),
    ({"edge": [[0.5, 1.0]]}, "key 'edge': dtype torch.float"),
    ({"edge": [0, 1, 2]}, "key 'edge': shape [3] is not 2-D"),
    ({"edge": [[0, 1, 2]]}, "key 'edge': shape [1, 3] is not [E, 2]"),
    ({"head": [0], "tail": [1]}, "keys ['head', 'tail'] are not imported"),
    ("tensor", "a Tensor, expected a dict of tensors"),
])
def test_malformed_ogb_split_is_refused_by_name(tmp_path, bad, want):
    torch = pytest.importorskip("torch")
    if bad == "tensor":
        d = torch.tensor([[0, 1]])
    else:
        d = {k: torch.tensor(v) for k, v in bad.items()}
    root = tmp_path / "o"
    _ogb(root, 10, [(0, 1)], {"train": {"edge": torch.tensor([[0, 1]])}, "valid": d})
    with pytest.raises(ValueError) as e:
        flashgnn.build(root, tmp_path / "out", progress=False)
    assert "valid.pt" in str(e.value) and want in str(e.value), str(e.value)
    assert not (tmp_path / "out").exists()


def test_link_split_options_are_core_options():
    names = {o["name"]: o for o in _core.BUILD_OPTIONS}
    assert names["link_split"]["kind"] == "fraction_pair" and names["neg_per_pos"]["default"] == 1


def test_typed_split_from_hetero_data(tmp_path):
    """``from_pyg(HeteroData, link_split=..., link_edge_type=..., add_reverse=True)``: the split is of that edge
    type, in local ids (PyG's ``edge_label_index`` convention); every validation/test positive is an edge of
    the input, absent from the stored edge type and from its ``rev_`` type (``to_pyg``), and every negative is
    a destination-type id that is no input edge; ``verify`` accepts it."""
    torch = pytest.importorskip("torch")
    HeteroData = pytest.importorskip("torch_geometric.data").HeteroData
    rng = np.random.default_rng(4)
    nu, nm = 40, 50
    data = HeteroData()
    data["user"].x = torch.zeros(nu, 2)
    data["movie"].x = torch.ones(nm, 3)
    e = np.unique(np.stack([rng.integers(0, nu, 400), rng.integers(0, nm, 400)], axis=1), axis=0)
    data["user", "rates", "movie"].edge_index = torch.from_numpy(e.T.copy())
    data["movie", "in", "movie"].edge_index = torch.tensor([[0, 1], [1, 2]])
    out = tmp_path / "ds"
    flashgnn.from_pyg(data, out, progress=False, link_split=(0.1, 0.2), neg_per_pos=2,
                      link_edge_type="user__rates__movie", add_reverse=True)
    ds = flashgnn.open(out)
    assert ds.link_edge_type == ("user", "rates", "movie")
    edges = {(int(a), int(b)) for a, b in e}
    g = flashgnn.to_pyg(out)
    stored = {tuple(p) for p in g["user", "rates", "movie"].edge_index.T.tolist()}
    rev = {(b, a) for a, b in g["movie", "rev_rates", "user"].edge_index.T.tolist()}
    assert stored and stored == rev
    seen = set()
    for name, frac in (("val", 0.1), ("test", 0.2)):
        s = ds.link_split(name)
        assert len(s.src) == int(frac * len(edges))
        for u, v in zip(s.src.tolist(), s.dst.tolist()):
            assert (u, v) in edges and (u, v) not in stored and (u, v) not in rev
        for u, row in zip(s.src.tolist(), s.neg.tolist()):
            for w in row:
                assert 0 <= w < nm and (u, w) not in edges and (u, w) not in seen
                seen.add((u, w))
    flashgnn.verify(out, progress=False)
    # The CLI's spelling.
    import argparse

    from flashgnn import cli

    sub = next(a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction))
    a = sub.choices["build"].parse_args(["in", "out", "--link-split", "0.1,0.2", "--link-edge-type", "a__r__b"])
    assert a.link_edge_type == "a__r__b"
