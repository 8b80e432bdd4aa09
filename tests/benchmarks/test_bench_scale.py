"""`make bench-scale`'s planning: the disk check refuses with the numbers,
the feature width follows the documented rule, and the size plan reaches the
requested edge count. (The benchmark itself is `make bench-scale`.)"""

import pytest

from benchmarks.scale import DIMS, choose_dim, estimate, extrapolate, plan_sizes

GiB = 1 << 30


def test_plan_reaches_the_edge_count():
    for edges, degree in [(10**9, 16), (10**8, 16), (12345, 3)]:
        scale, ef, e = plan_sizes(edges, degree)
        assert e == ef << scale and e >= edges
        assert e - edges < 1 << scale  # at most one edge per node beyond the target


def test_disk_check_refuses_with_the_numbers():
    n, e = 1 << 26, 15 << 26
    with pytest.raises(SystemExit, match=r"not enough disk: .*need .*GiB at peak.*free"):
        choose_dim(n, e, free=20 * GiB, reserve=4 * GiB, probe=GiB, ram=24 * GiB, cap=4 * GiB, dim="auto")
    with pytest.raises(SystemExit, match=r"not enough disk: .*dim 64 need"):
        choose_dim(n, e, free=40 * GiB, reserve=4 * GiB, probe=GiB, ram=24 * GiB, cap=4 * GiB, dim="64")


def test_dim_exceeds_ram_when_the_disk_allows_else_four_times_the_cap():
    n, e = 1 << 23, 12 << 23
    d, why = choose_dim(n, e, free=10**13, reserve=4 * GiB, probe=GiB, ram=24 * GiB, cap=GiB, dim="auto")
    assert estimate(n, e, d)["dataset"] > 24 * GiB and "exceeds RAM" in why
    smaller = [x for x in DIMS if x < d]
    assert not smaller or estimate(n, e, smaller[-1])["dataset"] <= 24 * GiB
    d, why = choose_dim(n, e, free=40 * GiB, reserve=4 * GiB, probe=GiB, ram=24 * GiB, cap=GiB, dim="auto")
    assert estimate(n, e, d)["dataset"] >= 4 * GiB and "4x" in why
    assert estimate(n, e, d)["peak"] <= 35 * GiB
    with pytest.raises(SystemExit, match=r"under 4x the training cap"):
        choose_dim(n, e, free=40 * GiB, reserve=4 * GiB, probe=GiB, ram=24 * GiB, cap=8 * GiB, dim="auto")


def test_extrapolation_arithmetic_and_id_width():
    disk = {"read_MBps": 500.0, "write_MBps": 1000.0}
    x = extrapolate("g", 1000, 16000, 8, 64.0, 4, 70e-9, disk, 2.0, 0.1, 10)
    assert x["disk_bytes"] == 1000 * (64 + 32) + 16000 * 4
    # Edges at the measured cost per edge, feature rows read and written once.
    assert x["build_seconds"] == pytest.approx(16000 * 70e-9 + 1000 * 32 / 500e6 + 1000 * 32 / 1000e6)
    assert x["epoch_seconds"] == pytest.approx(0.1 * 1000 / 10 / 2.0)
    big = extrapolate("h", 5 << 32, 10**11, 8, 64.0, 4, 70e-9, disk, 2.0, 0.1, 10)
    assert not big["ids_fit_u32"] and "8-byte ids" in big["arithmetic"]
    assert big["disk_bytes"] == (5 << 32) * (64 + 32) + 10**11 * 8


def test_link_task_plans_the_split_and_trains_link_prediction(tmp_path):
    """--task link: the disk plan adds the split's files (training positives in the dataset, staged edges
    through the build, the split's own peak), and the training command is link prediction with a bounded
    evaluation."""
    from benchmarks.scale import LINK_PAIR_BYTES, LINK_STAGED_BYTES, LINK_TRAIN_BYTES, train_cmd

    n, e = 1 << 26, 15 << 26
    node, link = estimate(n, e, 8), estimate(n, e, 8, link=True)
    assert link["dataset"] == node["dataset"] + LINK_TRAIN_BYTES * e
    assert link["link_split_peak"] == link["raw"] + (LINK_PAIR_BYTES + LINK_STAGED_BYTES + LINK_TRAIN_BYTES) * e
    assert link["peak"] >= max(link["link_split_peak"], node["peak"] + LINK_STAGED_BYTES * e + LINK_TRAIN_BYTES * e)
    with pytest.raises(SystemExit, match=r"link split's own peak"):
        choose_dim(n, e, free=40 * GiB, reserve=4 * GiB, probe=GiB, ram=24 * GiB, cap=2 * GiB, dim="8", link=True)
    cmd = train_cmd(tmp_path, 20, 256, "25,10", tmp_path / "m.json", "link", 8)
    assert cmd[cmd.index("--task") + 1] == "link" and cmd[cmd.index("--eval-batches") + 1] == "8"
    assert "--task" not in train_cmd(tmp_path, 20, 1024, "25,10", tmp_path / "m.json")
