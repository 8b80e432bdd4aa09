"""Dataset API: counts, neighbors/features/labels/splits equal a numpy reference, clear errors, `info --json`."""

from __future__ import annotations

import json

import numpy as np
import pytest

import flashgnn
from conftest import assert_error, build, expected_neighbors, run_cli, write_npy_dir

N, E, D = 300, 2500, 12


def random_graph(seed: int, n: int = N, e: int = E, dim: int = D, dtype=np.float32, hub: int | None = 17):
    """Random directed multigraph (self-loops and duplicates included) with one hub, features, labels, splits."""
    rng = np.random.default_rng(seed)
    edges = rng.integers(0, n, (e, 2))
    if hub is not None:  # a hub with more in-neighbors than fit inline: exercises overflow pages
        edges = np.vstack([edges, np.column_stack([rng.integers(0, n, 1500), np.full(1500, hub)])])
    feats = rng.standard_normal((n, dim)).astype(dtype)
    labels = rng.integers(-1, 9, n)  # -1 = unlabeled
    perm = rng.permutation(n)
    splits = {"train": np.sort(perm[:150]), "val": np.sort(perm[150:200]), "test": perm[200:240]}
    return edges, feats, labels, splits


def assert_matches_reference(ds, edges, feats, labels, splits, n=N):
    """Every node's neighbors (as a multiset), feature row, label, and every split equal the input."""
    want = expected_neighbors(edges, n)
    got = ds.neighbors(np.arange(n))
    assert len(got) == n
    for v in range(n):
        assert got[v].dtype == np.int64
        np.testing.assert_array_equal(np.sort(got[v]), want[v], err_msg=f"neighbors of node {v}")
    np.testing.assert_array_equal(ds.features(np.arange(n)), feats)
    np.testing.assert_array_equal(ds.labels(np.arange(n)), labels)
    assert sorted(ds.split_names) == sorted(splits)
    for name, ids in splits.items():
        np.testing.assert_array_equal(ds.split(name), ids)


@pytest.fixture(scope="module")
def graph_data():
    return random_graph(1)


@pytest.fixture(scope="module")
def built(tmp_path_factory, graph_data):
    root = tmp_path_factory.mktemp("api")
    inp = write_npy_dir(root / "in", *graph_data)
    build(inp, root / "ds")
    return root, inp


def test_counts_and_dtype(built, graph_data):
    """num_nodes, num_edges (directed entries stored), feature_dim, feature_dtype and len() match the input."""
    root, _ = built
    edges, feats, labels, _ = graph_data
    ds = flashgnn.open(root / "ds")
    assert (ds.num_nodes, ds.num_edges, ds.feature_dim, ds.feature_dtype) == (N, len(edges), D, "float32")
    assert len(ds) == N
    assert ds.num_classes == labels.max() + 1
    assert ds.manifest["labels"]["labeled"] == int((labels >= 0).sum())
    assert ds.manifest["degree"]["spilled_nodes"] >= 1 and ds.layout["overflow_pages"] >= 1


def test_reads_match_reference(built, graph_data):
    """Neighbors (incl. the hub spilling into overflow pages), features, labels and splits equal numpy."""
    root, _ = built
    assert_matches_reference(flashgnn.open(root / "ds"), *graph_data)


def test_scalar_and_list_forms(built, graph_data):
    """A scalar id returns one array; a list returns a list; neighbors_csr agrees with both."""
    root, _ = built
    ds = flashgnn.open(root / "ds")
    one = ds.neighbors(17)
    assert isinstance(one, np.ndarray)
    many = ds.neighbors([17, 3, 17])
    assert isinstance(many, list) and len(many) == 3
    np.testing.assert_array_equal(many[0], one)
    np.testing.assert_array_equal(many[2], one)
    ptr, idx = ds.neighbors_csr(np.array([17, 3, 17]))
    assert ptr.tolist() == [0, len(one), len(one) + len(many[1]), 2 * len(one) + len(many[1])]
    np.testing.assert_array_equal(idx[ptr[1] : ptr[2]], many[1])
    assert ds.features(5).shape == (1, D)
    assert ds.labels(np.uint32(5)).shape == (1,)


def test_float16_features_round_trip(tmp_path):
    """float16 input features are stored as float16 and read back bit-exactly."""
    data = random_graph(2, dtype=np.float16)
    inp = write_npy_dir(tmp_path / "in", *data)
    build(inp, tmp_path / "ds")
    ds = flashgnn.open(tmp_path / "ds")
    assert ds.feature_dtype == "float16"
    assert ds.features([0]).dtype == np.float16
    assert_matches_reference(ds, *data)


@pytest.mark.parametrize("src, dst", [(np.float32, "float16"), (np.float16, "float64"), (np.float64, "float32")])
def test_feature_dtype_conversion(tmp_path, src, dst):
    """feature_dtype converts on import: stored rows equal numpy's astype of the input."""
    edges, feats, labels, splits = random_graph(3, dtype=src)
    inp = write_npy_dir(tmp_path / "in", edges, feats, labels, splits)
    build(inp, tmp_path / "ds", feature_dtype=dst)
    ds = flashgnn.open(tmp_path / "ds")
    assert ds.feature_dtype == dst
    np.testing.assert_array_equal(ds.features(np.arange(N)), feats.astype(dst))


def test_page_size_8192(tmp_path):
    """page_size=8192 changes the layout (more slots per page) but not a single value read back."""
    data = random_graph(4)
    inp = write_npy_dir(tmp_path / "in", *data)
    build(inp, tmp_path / "ds", page_size=8192)
    ds = flashgnn.open(tmp_path / "ds")
    assert ds.manifest["page_size"] == ds.layout["page_size"] == 8192
    assert ds.layout["graph_file_bytes"] % 8192 == 0
    assert_matches_reference(ds, *data)
    flashgnn.verify(tmp_path / "ds", progress=False)


def test_separate_feature_placement(tmp_path):
    """1024-wide float32 rows go to features.fg (separate placement) and read back exactly."""
    data = random_graph(5, n=80, e=600, dim=1024, hub=None)
    inp = write_npy_dir(tmp_path / "in", *data)
    build(inp, tmp_path / "ds")
    ds = flashgnn.open(tmp_path / "ds")
    assert ds.manifest["features"]["placement"] == "separate"
    assert ds.layout["feature_stride"] == 4096
    assert_matches_reference(ds, *data, n=80)


def test_reorder_degree_returns_original_ids(tmp_path):
    """reorder='degree' relabels internally (hub first) but every API call takes and returns original ids."""
    data = random_graph(6)
    inp = write_npy_dir(tmp_path / "in", *data)
    build(inp, tmp_path / "ds", reorder="degree")
    ds = flashgnn.open(tmp_path / "ds")
    assert ds.manifest["reorder"] == "degree"
    order = np.load(tmp_path / "ds" / "node_order.npy")
    index = np.load(tmp_path / "ds" / "node_index.npy")
    np.testing.assert_array_equal(index[order], np.arange(N))
    assert order[0] == 17, "the hub (highest in-degree) gets internal id 0"
    assert_matches_reference(ds, *data)
    flashgnn.verify(tmp_path / "ds", progress=False)


def test_missing_dataset_path(tmp_path):
    """Opening a path that does not exist raises DatasetNotFoundError naming the path."""
    with pytest.raises(flashgnn.DatasetNotFoundError) as ei:
        flashgnn.open(tmp_path / "nope")
    assert_error(ei, str(tmp_path / "nope"), "no such dataset directory")


def test_directory_without_manifest(tmp_path):
    """A directory that is not a dataset raises DatasetNotFoundError naming manifest.json."""
    (tmp_path / "d").mkdir()
    with pytest.raises(flashgnn.DatasetNotFoundError) as ei:
        flashgnn.open(tmp_path / "d")
    assert_error(ei, "not a flashgnn dataset", "manifest.json")
    with pytest.raises(flashgnn.DatasetNotFoundError):
        flashgnn.verify(tmp_path / "d", progress=False)


def test_cli_on_missing_dataset(tmp_path):
    """`flashgnn info` and `verify` on a missing dataset exit 2 with one line naming the path."""
    for cmd in ("info", "verify"):
        r = run_cli(cmd, tmp_path / "nope")
        assert r.returncode == 2
        assert_error(r, f"flashgnn {cmd}: error:", str(tmp_path / "nope"))


@pytest.mark.parametrize("bad", [-1, N, N + 1000, 2**40])
def test_out_of_range_ids_raise_index_error(built, bad):
    """Ids outside [0, N) raise IndexError naming the id and the range, for every read."""
    root, _ = built
    ds = flashgnn.open(root / "ds")
    for call in (lambda: ds.neighbors(bad), lambda: ds.features([0, bad]), lambda: ds.labels([bad])):
        with pytest.raises(IndexError) as ei:
            call()
        assert_error(ei, f"node id {bad}", f"out of range [0, {N})")


def test_unknown_split_and_non_integer_ids(built):
    """An unknown split raises IndexError listing the available ones; float ids raise TypeError."""
    root, _ = built
    ds = flashgnn.open(root / "ds")
    with pytest.raises(IndexError) as ei:
        ds.split("holdout")
    assert_error(ei, '"holdout"', "train", "val", "test")
    with pytest.raises(TypeError):
        ds.neighbors(np.array([1.0, 2.0]))


def test_dataset_without_labels(tmp_path):
    """A dataset built without labels reports 0 classes and refuses label reads with IndexError."""
    edges, feats, _, _ = random_graph(7)
    inp = write_npy_dir(tmp_path / "in", edges, feats)
    build(inp, tmp_path / "ds")
    ds = flashgnn.open(tmp_path / "ds")
    assert ds.num_classes == 0 and ds.split_names == []
    with pytest.raises(IndexError) as ei:
        ds.labels([0])
    assert_error(ei, "labels.npy")


def test_make_splits_are_disjoint_and_seeded(tmp_path):
    """make_splits draws disjoint train/val/test sets whose sizes follow the fractions; the same seed repeats them."""
    edges, feats, labels, _ = random_graph(8)
    inp = write_npy_dir(tmp_path / "in", edges, feats, labels)
    build(inp, tmp_path / "a", make_splits=(0.5, 0.2, 0.1), seed=3)
    build(inp, tmp_path / "b", make_splits=(0.5, 0.2, 0.1), seed=3)
    a, b = flashgnn.open(tmp_path / "a"), flashgnn.open(tmp_path / "b")
    sets = {s: set(a.split(s).tolist()) for s in ("train", "val", "test")}
    assert not (sets["train"] & sets["val"]) and not (sets["train"] & sets["test"]) and not (sets["val"] & sets["test"])
    assert abs(len(sets["train"]) - 0.5 * N) < 0.15 * N
    for s in sets:
        np.testing.assert_array_equal(a.split(s), b.split(s))


def test_info_json_fields(built):
    """`flashgnn info --json`: counts, zero in-memory index bytes per node without reorder, overhead vs CSR."""
    root, _ = built
    r = run_cli("info", root / "ds", "--json")
    assert r.returncode == 0, r.stderr
    d = json.loads(r.stdout)
    assert (d["num_nodes"], d["reorder"]) == (N, "none")
    assert d["index_bytes_per_node"] == 0
    assert isinstance(d["overhead_vs_csr"], float)
    lay = d["layout"]
    assert d["overhead_vs_csr"] == pytest.approx(lay["stored_bytes"] / lay["csr_bytes"] - 1)
    assert "structure_overhead_vs_csr" in d
    assert d["bytes"]["files_total"] == sum(f["bytes"] for f in flashgnn.open(root / "ds").manifest["files"].values())
    assert d["degree"]["max"] >= 1500


def test_info_reports_index_bytes_with_reorder(tmp_path):
    """With reorder='degree' the id maps cost 8 B per node, and `info` says so (JSON and text)."""
    inp = write_npy_dir(tmp_path / "in", *random_graph(9))
    build(inp, tmp_path / "ds", reorder="degree")
    r = run_cli("info", tmp_path / "ds", "--json")
    assert r.returncode == 0, r.stderr
    assert json.loads(r.stdout)["index_bytes_per_node"] == 8
    r = run_cli("info", tmp_path / "ds")
    assert r.returncode == 0, r.stderr
    assert "index        8 B of in-memory index per node" in r.stdout


def test_verify_report_counts(built):
    """flashgnn.verify returns what it checked: every file, every slot, every overflow page."""
    root, _ = built
    ds = flashgnn.open(root / "ds")
    rep = flashgnn.verify(root / "ds", progress=False)
    assert rep["files"] == len(ds.manifest["files"])
    assert rep["slots"] == N
    assert rep["overflow_pages"] == ds.layout["overflow_pages"]
    assert rep["bytes"] == sum(f["bytes"] for f in ds.manifest["files"].values())


@pytest.mark.parametrize("call, bad, good", [
    (lambda tmp: flashgnn.build(tmp / "in", tmp / "out", progress=False, symetrize=True), "symetrize", "symmetrize"),
    (lambda tmp: flashgnn.generate(tmp / "g", progress=False, scale=4, edge_factr=2), "edge_factr", "edge_factor"),
])
def test_unknown_job_option_is_refused_before_any_work(tmp_path, call, bad, good):
    # A misspelt keyword used to be ignored silently (a build without
    # symmetrising); now it is refused, naming it and the accepted options,
    # before the job touches the disk.
    with pytest.raises(flashgnn.InputError) as e:
        call(tmp_path)
    msg = str(e.value)
    assert repr(bad).replace("'", '"') in msg and good in msg and "accepted" in msg
    assert list(tmp_path.iterdir()) == []
