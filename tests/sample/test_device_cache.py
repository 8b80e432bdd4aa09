"""The GPU tier (flashgnn.DeviceCache): resident rows are gathered from the
device table, never read; batches equal the plain ones. Runs on the CPU in CI
(device="cpu" exercises the same code) and on CUDA when present."""

import numpy as np
import pytest
import torch

import flashgnn
from flashgnn.sample.device import DeviceCache, DeviceUnavailable

from conftest import generated_dataset

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.fixture(scope="module", params=["inline", "separate"])
def ds_path(request, tmp_path_factory):
    d = tmp_path_factory.mktemp(f"devcache-{request.param}")
    return generated_dataset(d, {"feature_layout": request.param}, scale=11, edge_factor=8, dim=24, classes=4)


@pytest.mark.parametrize("device", DEVICES)
def test_device_tier_gives_the_plain_batches_with_fewer_reads(ds_path, device):
    row = 24 * 4
    dc = DeviceCache(ds_path, 400 * row, device=device)
    assert dc.rows == 400 and tuple(dc.table.shape) == (400, 24) and dc.table.device.type == device
    degrees = flashgnn._core.Resident(str(ds_path), 400).degrees()
    assert np.all(np.diff(degrees) <= 0), "highest degree first"
    plain = flashgnn.Sampler(ds_path, [10, 5], dtype=np.float32)
    tier = flashgnn.Sampler(ds_path, [10, 5], dtype=np.float32, device_cache=dc)
    rng = np.random.default_rng(3)
    n = flashgnn.open(ds_path).num_nodes
    for b in range(5):
        seeds = rng.choice(n, 128, replace=False)
        want, got = plain.sample(seeds, b), tier.sample(seeds, b)
        np.testing.assert_array_equal(got.n_id, want.n_id)
        np.testing.assert_array_equal(got.row, want.row)
        assert got.resident is not None and (got.resident >= 0).any()
        assert not got.x[got.resident >= 0].any(), "resident rows are not copied on the host"
        x = dc.gather(got)
        assert x.device.type == device
        np.testing.assert_array_equal(x.cpu().numpy(), want.x)
    assert tier.telemetry()["reads"] <= plain.telemetry()["reads"]
    s = dc.stats()
    assert s["hits"] > 0 and 0 < s["hit_rate"] < 1 and s["bytes"] == 400 * row


@pytest.mark.parametrize("device", DEVICES)
def test_loader_with_device_tier_yields_x_on_the_device(ds_path, device):
    dc = DeviceCache(ds_path, 1 << 16, device=device)
    # pin_memory pins the host tensors only (x is built on the device); a no-op without CUDA, as in PyG.
    a = flashgnn.NeighborLoader(ds_path, [5, 5], batch_size=64, split="train", shuffle=False, device_cache=dc,
                                pin_memory=True)
    b = flashgnn.NeighborLoader(ds_path, [5, 5], batch_size=64, split="train", shuffle=False)
    for da, db in zip(a, b):
        assert da.x.device.type == device and da.edge_index.device.type == "cpu"
        assert da.edge_index.is_pinned() == torch.cuda.is_available()
        assert torch.equal(da.x.cpu(), db.x) and torch.equal(da.edge_index, db.edge_index)
    assert dc.stats()["hits"] > 0


def test_zero_budget_and_no_cuda():
    if not torch.cuda.is_available():
        with pytest.raises(DeviceUnavailable):
            DeviceCache("/nonexistent", 1 << 20)
    with pytest.raises(ValueError):
        DeviceCache("/nonexistent", -1, device="cpu")
