"""flashgnn.from_pyg / flashgnn.to_pyg and the npy layout's PyG-style names (docs/input.md)."""
from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")
from torch_geometric.data import Data, HeteroData  # noqa: E402

import flashgnn  # noqa: E402


def random_data(n=300, e=2400, d=8, classes=4, seed=0) -> Data:
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(0, n, (e,), generator=g)
    dst = torch.randint(0, n, (e,), generator=g)
    perm = torch.randperm(n, generator=g)
    train, val, test = (torch.zeros(n, dtype=torch.bool) for _ in range(3))
    train[perm[:100]], val[perm[100:150]], test[perm[150:250]] = True, True, True
    return Data(edge_index=torch.stack([src, dst]), x=torch.randn(n, d, generator=g),
                y=torch.randint(0, classes, (n,), generator=g), train_mask=train, val_mask=val, test_mask=test,
                num_nodes=n)


def edge_set(ei: torch.Tensor) -> list[tuple[int, int]]:
    return sorted(map(tuple, ei.t().tolist()))


@pytest.mark.parametrize("reorder", [None, "degree"])
def test_round_trip(tmp_path, reorder):
    data = random_data()
    opts = {"reorder": reorder} if reorder else {}
    rep = flashgnn.from_pyg(data, tmp_path / "ds", progress=False, **opts)
    assert rep["manifest"]["num_nodes"] == data.num_nodes
    back = flashgnn.to_pyg(tmp_path / "ds")
    assert back.num_nodes == data.num_nodes
    assert edge_set(back.edge_index) == edge_set(data.edge_index)  # same direction: row 0 is the source
    assert torch.equal(back.x, data.x)
    assert torch.equal(back.y, data.y)
    for s in ("train", "val", "test"):
        assert torch.equal(getattr(back, f"{s}_mask"), getattr(data, f"{s}_mask"))
    # the sampler sees the same neighbors PyG would aggregate from: sources of edges into v
    ds = flashgnn.open(tmp_path / "ds")
    v = int(data.edge_index[1, 0])
    want = sorted(data.edge_index[0, data.edge_index[1] == v].tolist())
    assert sorted(ds.neighbors(v).tolist()) == want


def test_stock_fake_dataset_and_build_options(tmp_path):
    from torch_geometric.datasets import FakeDataset

    data = FakeDataset(num_graphs=1, avg_num_nodes=200, num_channels=6, num_classes=3, task="node")[0]
    flashgnn.from_pyg(data, tmp_path / "ds", progress=False, symmetrize=True, dedup=True)
    back = flashgnn.to_pyg(tmp_path / "ds")
    want = set(edge_set(data.edge_index)) | {(b, a) for a, b in edge_set(data.edge_index)}
    assert set(edge_set(back.edge_index)) == want
    assert torch.equal(back.x, data.x) and torch.equal(back.y, data.y)
    # --force rules apply: a second build over it needs force=True
    with pytest.raises(FileExistsError):
        flashgnn.from_pyg(data, tmp_path / "ds", progress=False)
    flashgnn.from_pyg(data, tmp_path / "ds", progress=False, force=True)
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".")], "staging directory left behind"


def test_index_splits_and_column_labels(tmp_path):
    data = random_data()
    data.train_mask = torch.arange(0, 50)  # OGB-style index vector
    data.y = data.y.view(-1, 1)
    flashgnn.from_pyg(data, tmp_path / "ds", progress=False)
    back = flashgnn.to_pyg(tmp_path / "ds")
    assert back.train_mask.nonzero().view(-1).tolist() == list(range(50))
    assert torch.equal(back.y, data.y.view(-1))


def test_unstored_attributes_are_refused_by_name(tmp_path):
    data = random_data()
    data.edge_attr = torch.randn(data.num_edges, 3)
    data.pos = torch.randn(data.num_nodes, 2)
    with pytest.raises(flashgnn.InputError, match=r"edge_attr, pos .*ignore=\('edge_attr', 'pos'\)"):
        flashgnn.from_pyg(data, tmp_path / "ds", progress=False)
    assert not (tmp_path / "ds").exists()
    flashgnn.from_pyg(data, tmp_path / "ds", progress=False, ignore=("edge_attr", "pos"))
    assert flashgnn.open(tmp_path / "ds").num_nodes == data.num_nodes


@pytest.mark.parametrize("attr, value, words", [
    ("x", lambda d: torch.randint(0, 5, (d.num_nodes, 4)), "Data.x has dtype int64"),
    ("x", lambda d: torch.randn(d.num_nodes - 1, 4), "shape [299, 4]"),
    ("y", lambda d: torch.randn(d.num_nodes), "Data.y has dtype float32"),
    ("y", lambda d: torch.randint(0, 2, (d.num_nodes, 3)), "multi-label"),
    ("train_mask", lambda d: torch.ones(5, dtype=torch.bool), "Data.train_mask: boolean mask of shape [5]"),
    ("edge_index", lambda d: torch.zeros(3, 4, dtype=torch.long), "expected an integer tensor [2, E]"),
])
def test_bad_attributes(tmp_path, attr, value, words):
    data = random_data()
    setattr(data, attr, value(data))
    with pytest.raises(flashgnn.InputError, match=words.replace("[", r"\[").replace("]", r"\]")):
        flashgnn.from_pyg(data, tmp_path / "ds", progress=False)
    assert list(tmp_path.iterdir()) == []


def test_out_of_range_edge_is_the_importers_error(tmp_path):
    data = random_data()
    data.edge_index[0, 7] = data.num_nodes + 5
    with pytest.raises(flashgnn.InputError, match=str(data.num_nodes + 5)):
        flashgnn.from_pyg(data, tmp_path / "ds", progress=False)
    assert list(tmp_path.iterdir()) == []


def test_hetero_without_edge_types_refused(tmp_path):
    # A HeteroData builds a typed dataset (tests/train/test_typed_train.py); one without edge types is refused.
    h = HeteroData()
    h["paper"].x = torch.randn(4, 2)
    with pytest.raises(flashgnn.InputError, match="HeteroData has no edge types"):
        flashgnn.from_pyg(h, tmp_path / "ds", progress=False)
    assert not (tmp_path / "ds").exists()


def test_to_pyg_refuses_what_does_not_fit(tmp_path):
    flashgnn.from_pyg(random_data(), tmp_path / "ds", progress=False)
    with pytest.raises(MemoryError, match=r"need [\d,]+ bytes in memory, more than the 1,000 available"):
        flashgnn.to_pyg(tmp_path / "ds", max_bytes=1000)


def test_npy_layout_refuses_pyg_names_and_notes_unread_files(tmp_path):
    raw = tmp_path / "raw"
    raw.mkdir()
    np.save(raw / "edge_index.npy", np.array([[0, 1], [1, 2]], dtype=np.int64))
    np.save(raw / "x.npy", np.zeros((3, 2), dtype=np.float32))
    with pytest.raises(flashgnn.InputError, match=r"x\.npy: a PyG-style name .* node_feat\.npy"):
        flashgnn.build(raw, tmp_path / "ds", progress=False)
    (raw / "x.npy").rename(raw / "node_feat.npy")
    np.save(raw / "node_year.npy", np.zeros(3, dtype=np.int64))
    rep = flashgnn.build(raw, tmp_path / "ds", progress=False)
    assert any("node_year.npy: not read" in n for n in rep["notes"])
    assert flashgnn.open(tmp_path / "ds").feature_dim == 2
