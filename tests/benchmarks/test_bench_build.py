"""`make bench-build`'s input planning: both shapes reach the target size."""

import json
import subprocess
import sys

import pytest

import flashgnn
from benchmarks.build_ooc import SHAPES, plan_input
from conftest import cli_env


@pytest.mark.parametrize("target", [1 << 30, 4 << 30, 8 << 30])
def test_inputs_reach_the_target_and_igb_is_feature_dominated(target):
    for shape in SHAPES:
        scale, edge_factor, dim = plan_input(shape, target)
        n = 1 << scale
        features, edges = n * dim * 4, n * edge_factor * 16
        assert features + edges + n * 8 >= target, shape
        if shape == "igb":
            assert (dim, edge_factor) == (1024, 13)
            assert features > 0.9 * (features + edges), "IGB's bytes are nearly all features"
            # The smallest power-of-two graph that reaches the target.
            assert (n // 2) * (dim * 4 + 8 + 16 * edge_factor) < target
        else:
            assert edges > 2 * features, "the edges shape is edge-dominated"


def test_io_floor_is_the_device_bytes_at_the_probed_bandwidths():
    from benchmarks.build_ooc import io_floor

    res = {"device_read_bytes": 3_000_000_000, "device_write_bytes": 2_000_000_000, "disk_seq_read_MBps": 1500.0,
           "disk_seq_write_MBps": 2000.0, "raw_input_bytes": 1_200_000_000, "build_seconds": 12.0}
    f = io_floor(res)
    assert f["io_floor_seconds"] == pytest.approx(2.0 + 1.0)
    # 1.2 GB in 3 s = 400 MB/s = 0.27x of 1500 MB/s read, whatever the CPU.
    assert f["io_floor_ratio_read"] == pytest.approx(400 / 1500)
    assert f["of_io_floor"] == pytest.approx(3.0 / 12.0)


def test_a_build_reports_the_bytes_it_made_the_device_move(tmp_path):
    """End to end on a tiny input: the device wrote at least the dataset (its files go out with O_DIRECT or
    dirty the page cache, which the block-I/O accounting counts either way)."""
    raw = tmp_path / "raw"
    flashgnn.generate(raw, scale=12, edge_factor=8, dim=16, progress=False)
    out = tmp_path / "out.json"
    cmd = [sys.executable, "-m", "benchmarks.build_ooc", "--raw", str(raw), "--data", str(tmp_path / "b"),
           "--budget", "128MiB", "--probe", "8MiB", "--verify", "encoded", "--json", str(out)]
    p = subprocess.run(cmd, capture_output=True, text=True, env=cli_env(), timeout=300)
    assert p.returncode == 0, p.stderr + p.stdout
    r = json.loads(out.read_text())["runs"][0]
    if r["device_write_bytes"] == 0:
        pytest.skip("no block-I/O accounting here (tmpfs?)")
    assert r["device_write_bytes"] >= r["dataset_bytes"] * 0.9, r
    assert r["io_floor_seconds"] > 0 and 0 < r["io_floor_ratio_read"], r
    assert "I/O floor" in p.stdout.splitlines()[-1], p.stdout
