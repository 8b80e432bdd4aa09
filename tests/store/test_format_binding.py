"""Format version 2: checksums bound to the dataset id, version 1 still read, side files checked.

- Every per-page/per-slot checksum is bound to a random dataset id, so a page
  or file copied from another build of the same input is refused where it is
  read (point reads, the sampler), not only by a full verify; two builds get
  different ids; ``--dataset-id`` fixes it for byte-identical rebuilds.
- Datasets written by version 1 (``tests/fixtures/format-v1``) still open,
  read, verify and sample, with the values they held.
- ``open`` and ``verify`` check every side file's dtype, shape and value range
  against the manifest, not only its checksum.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import numpy as np
import pytest

import flashgnn
from flashgnn import _core
from conftest import build, run_cli, write_npy_dir
from test_corruption import crc32c

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "format-v1"


def _input(tmp: Path) -> Path:
    rng = np.random.default_rng(5)
    n = 80
    edges = np.vstack([rng.integers(0, n, (300, 2)), np.column_stack([rng.integers(0, n, 500), np.full(500, 7)])])
    return write_npy_dir(tmp / "in", edges, rng.standard_normal((n, 8)).astype(np.float32), rng.integers(0, 3, n),
                         {"train": np.arange(0, n, 2), "val": np.arange(1, n, 4)})


def _reseal(d: Path, *names: str) -> None:
    """Recompute the manifest's size and CRC32C of ``names`` and re-seal it: only the new checks stand."""
    man = json.loads((d / "manifest.json").read_text())
    for name in names:
        data = (d / name).read_bytes()
        man["files"][name] = {"bytes": len(data), "crc32c": crc32c(data)}
    (d / "manifest.json").write_text(_core.seal_manifest(json.dumps(man, indent=2)))


# -- version 1 is still read ---------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["inline", "separate"])
def test_version_1_fixture_reads_verifies_and_samples(name):
    path = FIXTURES / name
    exp = np.load(FIXTURES / f"{name}_expected.npz")
    ds = flashgnn.open(path)
    assert flashgnn.FORMAT_VERSION == 4 and ds.manifest["format_version"] == 1 and "dataset_id" not in ds.manifest
    n = ds.num_nodes
    nb = ds.neighbors(np.arange(n))
    got = np.concatenate(nb).astype(np.int64)
    assert np.array_equal(np.concatenate([[0], np.cumsum([len(x) for x in nb])]), exp["indptr"])
    assert np.array_equal(got, exp["indices"])
    assert np.array_equal(ds.features(np.arange(n)), exp["features"])
    assert np.array_equal(ds.labels(np.arange(n)), exp["labels"])
    for s in ds.split_names:
        assert np.array_equal(ds.split(s), exp[f"split_{s}"])
    flashgnn.verify(path, progress=False)
    b = flashgnn.Sampler(path, [-1], engine="pread").sample(np.arange(n), 0)
    assert b.batch_size == n and np.array_equal(b.x[:n], exp["features"])
    assert run_cli("verify", path).returncode == 0


# -- a page of another build is refused where it is read -----------------------------------------------


def test_two_builds_differ_and_a_fixed_id_rebuilds_identically(tmp_path):
    inp = _input(tmp_path)
    a = build(inp, tmp_path / "a", page_size=512)["manifest"]
    b = build(inp, tmp_path / "b", page_size=512)["manifest"]
    assert a["format_version"] == 2 and a["dataset_id"] != b["dataset_id"] and a["graph"] == b["graph"]
    for out in ("c", "d"):
        r = run_cli("build", inp, tmp_path / out, "--page-size", "512", "--dataset-id", "0xfeedface")
        assert r.returncode == 0, r.stderr
    for f in ("graph.fg", "overflow.fg"):
        assert (tmp_path / "c" / f).read_bytes() == (tmp_path / "d" / f).read_bytes()
    assert flashgnn.open(tmp_path / "c").manifest["dataset_id"] == 0xFEEDFACE


@pytest.mark.parametrize("what", ["slot-page", "overflow-page"])
def test_foreign_page_refused_by_point_reads_and_sampler(tmp_path, what):
    inp = _input(tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    build(inp, a, page_size=512)
    build(inp, b, page_size=512)
    lay = flashgnn.open(a).layout
    p = lay["page_size"]
    name = "graph.fg" if what == "slot-page" else "overflow.fg"
    data = bytearray((a / name).read_bytes())
    data[p : 2 * p] = (b / name).read_bytes()[p : 2 * p]  # page 1 of the other build
    (a / name).write_bytes(bytes(data))
    _reseal(a, name)  # even with consistent whole-file checksums
    ds = flashgnn.open(a)
    errors = []
    for v in range(ds.num_nodes):
        try:
            ds.neighbors(v)
        except flashgnn.CorruptDatasetError as e:
            errors.append(str(e))
    assert errors, "a foreign page was served"
    import re

    offsets = [int(re.search(rf"{name}: byte offset (\d+): checksum mismatch", e).group(1)) for e in errors]
    if what == "slot-page":
        assert all(p <= o < 2 * p for o in offsets), errors[:3]  # each slot of page 1, at its own offset
    else:
        assert set(offsets) == {2 * p - 4}, errors[:3]  # page 1's checksum
    for engine in ("pread", "mmap", "memory"):
        with pytest.raises(flashgnn.CorruptDatasetError, match=rf"{name} at byte offset \d+|{name}: byte offset \d+"):
            flashgnn.Sampler(a, [-1], engine=engine).sample(np.arange(ds.num_nodes), 0)
    with pytest.raises(flashgnn.CorruptDatasetError, match=name):
        flashgnn.verify(a, progress=False)


def test_foreign_whole_file_refused_at_open(tmp_path):
    inp = _input(tmp_path)
    a, b = tmp_path / "a", tmp_path / "b"
    build(inp, a, page_size=512)
    mb = build(inp, b, page_size=512)["manifest"]
    shutil.copyfile(b / "graph.fg", a / "graph.fg")
    _reseal(a, "graph.fg")
    with pytest.raises(flashgnn.CorruptDatasetError, match=rf"graph.fg: byte offset 96: dataset_id = {mb['dataset_id']}"):
        flashgnn.open(a)


# -- side files' dtype, shape and value range ----------------------------------------------------------


@pytest.mark.parametrize(
    "name,change,fragment",
    [
        ("split_train.npy", lambda a: a.astype(np.int32), "byte offset 10: dtype = int32 is out of bounds (must be int64"),
        ("split_train.npy", lambda a: a.astype(np.float64), "dtype = float64"),
        ("split_train.npy", lambda a: a[:-1], "shape = [39] is out of bounds (must be [40]"),
        ("labels.npy", lambda a: a.astype(np.int32), "dtype = int32"),
        ("labels.npy", lambda a: a.reshape(-1, 1), "shape = [80, 1]"),
    ],
)
def test_side_file_of_wrong_dtype_or_shape_refused_by_open_and_verify(tmp_path, name, change, fragment):
    d = tmp_path / "ds"
    build(_input(tmp_path), d, page_size=512)
    np.save(d / name, change(np.load(d / name)))
    _reseal(d, name)
    for fn in (flashgnn.open, lambda p: flashgnn.verify(p, progress=False)):
        with pytest.raises(flashgnn.CorruptDatasetError) as e:
            fn(d)
        assert name in str(e.value) and fragment in str(e.value), str(e.value)
    r = run_cli("verify", d)
    assert r.returncode == 2 and fragment in r.stderr


def test_side_values_out_of_range_refused_at_first_use_and_by_verify(tmp_path):
    d = tmp_path / "ds"
    m = build(_input(tmp_path), d, page_size=512)["manifest"]
    labels = np.load(d / "labels.npy")
    labels[5] = 99
    np.save(d / "labels.npy", labels)
    _reseal(d, "labels.npy")
    ds = flashgnn.open(d)  # dtype and shape are right: open is cheap and succeeds
    want = f"labels.npy: byte offset {128 + 5 * 8}: label = 99 at index 5 is out of bounds (must be in [0, num_classes {m['labels']['num_classes']}) or -1"
    with pytest.raises(flashgnn.CorruptDatasetError, match=want.replace("(", r"\(").replace(")", r"\)").replace("[", r"\[")):
        ds.labels([0])
    with pytest.raises(flashgnn.CorruptDatasetError, match="label = 99"):
        flashgnn.verify(d, progress=False)
