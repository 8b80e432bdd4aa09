"""`make demo` on a small dataset: the training benchmark's engine child
(benchmarks.train._child, what the demo's mmap comparison runs per engine)
must work when the train split holds fewer batches than asked for.

How: a 512-node dataset whose train split makes 4 batches of 16 is measured
with --batches 6 (the demo's default), in process (drop_caches patched out:
the test must not flush the machine's page cache). Before the fix the child
fetched batches+1 = 7 and died on StopIteration; now it times the batches
the split has (reported in `batches`), refuses a split of a single batch
with a message naming the split and --batch-size, and the demo picks a batch
size that gives its comparison the batches it times. The whole demo at a
tiny scale runs under the slow marker.
"""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

pytest.importorskip("torch")

import benchmarks.train as bt  # noqa: E402
import flashgnn  # noqa: E402
from benchmarks.demo import compare_batch_size  # noqa: E402

from conftest import cli_env, generated_dataset  # noqa: E402


@pytest.fixture(scope="module")
def small(tmp_path_factory):
    return generated_dataset(tmp_path_factory.mktemp("benchtrain"), scale=9, edge_factor=4, dim=8, classes=3, seed=2,
                             split=(0.12, 0.1, 0.1))


def _args(ds, engine, batches=6, batch_size=16):
    return argparse.Namespace(dataset=str(ds), engine=engine, batches=batches, batch_size=batch_size, fanout="3,2",
                              model="sage", hidden=8, workers=1, prefetch=2, threads=1, seed=0,
                              cache_budget=1 << 20, lookahead=2)


@pytest.mark.parametrize("engine", ["uring", "mmap"])
def test_child_times_the_batches_a_small_split_has(small, monkeypatch, engine):
    monkeypatch.setattr(bt, "drop_caches", lambda: False)
    train = len(flashgnn.open(small).split("train"))
    batches = -(-train // 16)
    assert 2 <= batches < 6 + 1, train  # the case the demo met: fewer batches than --batches + 1
    r = bt._child(_args(small, engine))
    assert r["engine"] == engine
    assert r["batches"] == batches - 1
    assert r["epoch_seconds"] > 0 and r["prep_seconds"] > 0 and 0 <= r["data_wait"] <= 1


def test_child_refuses_a_split_of_one_batch_by_name(small, monkeypatch):
    monkeypatch.setattr(bt, "drop_caches", lambda: False)
    with pytest.raises(SystemExit, match=r"the train split \([0-9,]+ nodes\) makes 1 batch\(es\) of 4096; timing "
                                         r"needs at least 2 \(lower --batch-size\)"):
        bt._child(_args(small, "uring", batch_size=4096))


def test_demo_comparison_batch_size_leaves_enough_batches():
    assert compare_batch_size(50_000, 6) == 1024  # the default demo (scale 19): unchanged
    for train in (1_660, 100, 7, 3):  # scale 14's train split, and smaller
        bs = compare_batch_size(train, 6)
        assert 1 <= bs <= 1024
        assert train // bs >= min(7, train), (train, bs)


@pytest.mark.slow
def test_demo_runs_at_a_tiny_scale(tmp_path):
    p = subprocess.run([sys.executable, "-m", "benchmarks.demo", "--data", str(tmp_path), "--scale", "11",
                        "--dim", "16", "--compare-batches", "3"], capture_output=True, text=True, env=cli_env(),
                       timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    last = p.stdout.strip().splitlines()[-1]
    assert "mmap comparison unavailable" not in last, p.stdout[-3000:] + p.stderr[-3000:]
    assert "3 training batches of" in last
    assert "FutureWarning" not in p.stderr and "Traceback" not in p.stderr
