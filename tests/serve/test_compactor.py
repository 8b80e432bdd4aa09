"""``flashgnn serve --compact-delta``: compaction in the background of a live server (serve/compactor.py).

- Under writes and reads, the server folds its delta into new generations; every acknowledged write is in
  the store afterwards (reopened, and ``flashgnn verify`` clean), and Runs sample through a cache rebuilt on
  the new generation (its hit counters move; the old cache's keys name the old generation's files).
- A compaction that cannot read a page of the base (``FLASHGNN_FAULT_READ``) fails, is logged with the file
  and the page's offset (not the start of the chunk the scan read it in) and retried, while writes go on;
  once the page reads again (``FLASHGNN_FAULT_READ_WHILE``'s file removed) the next try succeeds, with
  nothing acknowledged lost.
"""

from __future__ import annotations

import threading
import time
from pathlib import Path

import numpy as np
import pytest

import flashgnn
from conftest import SERVE_TOKEN, cli_env, generated_dataset, run_cli

pytest.importorskip("grpc")

from flashgnn.serve.client import Client, ServerError  # noqa: E402
from flashgnn.serve.process import ServeProcess  # noqa: E402

POLLS = 1200  # a bound on polls of 0.05 s, never a timing assertion


@pytest.fixture(scope="module")
def base(tmp_path_factory) -> Path:
    return generated_dataset(tmp_path_factory.mktemp("compactor"), scale=9, edge_factor=8, dim=8, classes=4, seed=5)


def _copy(base: Path, tmp_path: Path) -> tuple[Path, Path]:
    import shutil

    d = tmp_path / "ds"
    shutil.copytree(base, d)
    tf = tmp_path / "token"
    tf.write_text(SERVE_TOKEN)
    tf.chmod(0o600)
    return d, tf


def _write(c: Client, n: int, count: int, seed: int, refused: list | None = None) -> list[tuple[int, int]]:
    """``count`` random AddEdges; the acknowledged pairs. With ``refused``, a write needing an unreadable page
    may fail DATA_LOSS (it is recorded there, and not acknowledged); any other failure raises."""
    rng = np.random.default_rng(seed)
    acked = []
    for _ in range(count):
        dst, src = (int(x) for x in rng.integers(0, n, 2))
        try:
            c.add_edge(dst, src)
        except ServerError as e:
            if refused is None or e.code_name != "DATA_LOSS":
                raise
            refused.append((dst, src, str(e)))
            continue
        acked.append((dst, src))
    return acked


def _wait(c: Client, done) -> dict:
    st = None
    for _ in range(POLLS):
        st = c.stats()["graph"]
        if done(st):
            return st
        time.sleep(0.05)
    raise AssertionError(f"not reached; last Stats: {st}")


def _all_present(d: Path, acked) -> None:
    g = flashgnn.MutableGraph(d, writable=False)
    try:
        missing = [(a, b) for a, b in acked if b not in set(g.get_neighbors(a).tolist())]
    finally:
        g.close()
    assert not missing, f"{len(missing)} acknowledged edges lost, e.g. {missing[:3]}"


def test_the_server_compacts_under_load_and_runs_use_a_cache_of_the_new_generation(base, tmp_path):
    import torch
    from torch_geometric.nn import GCN

    import flashgnn.dfg as dfg

    d, tf = _copy(base, tmp_path)
    n = flashgnn.open(d).num_nodes
    srv = ServeProcess(d, tf, "--compact-delta", "16KiB",
                       stderr_path=tmp_path / "server.err", env=cli_env())
    torch.manual_seed(0)
    g = dfg.models.gcn(GCN(8, 16, 2, 4).eval().state_dict(), [5, 3])
    acked, errors = [], []
    stop = threading.Event()

    def reader():  # reads beside the writes and the compactions: every one must succeed
        with Client(srv.address, token=SERVE_TOKEN) as r:
            rng = np.random.default_rng(1)
            while not stop.is_set():
                try:
                    r.get_neighbors(int(rng.integers(0, n)))
                except Exception as e:  # noqa: BLE001 - collected and asserted below
                    errors.append(e)

    try:
        with Client(srv.address, token=SERVE_TOKEN) as c:
            c.wait_ready()
            t = threading.Thread(target=reader)
            t.start()
            try:
                for round_ in range(2):  # two compactions: the second folds the first one's successors
                    acked += _write(c, n, 400, seed=round_)
                    st = _wait(c, lambda s, k=round_ + 1: s["compaction"]["compactions"] >= k
                               and not s["compaction"]["running"])
                    c.run(g, list(range(32)))
            finally:
                stop.set()
                t.join()
            assert not errors, errors[:3]
            # Writes stopped: the compactor folds what the last writes left until the delta is under its mark.
            st = _wait(c, lambda s: s["delta_bytes"] < 16 << 10 and not s["compaction"]["running"])
            comp = st["compaction"]
            assert comp["failures"] == 0 and comp["error"] is None, comp
            assert st["generation"] == comp["compactions"] >= 2, st
            # The Run cache was rebuilt on the new generation: a Run now hits it.
            hits = lambda s: s["cache"]["static_hits"] + s["cache"]["dynamic_hits"]  # noqa: E731
            before = _wait(c, lambda s: "cache" in s)
            out = c.run(g, list(range(64)))["Result"]
            assert out.shape == (64, 4) and np.isfinite(out).all()
            assert hits(c.stats()["graph"]) > hits(before)
    finally:
        rc, _ = srv.stop()
    assert rc == 0
    log = srv.stderr()
    assert "compact: generation 1 from" in log and "compact: generation 2 from" in log, log[-2000:]
    _all_present(d, acked)
    assert run_cli("verify", str(d)).returncode == 0


def test_a_compaction_that_cannot_read_the_base_is_retried_and_loses_nothing(base, tmp_path):
    d, tf = _copy(base, tmp_path)
    n = flashgnn.open(d).num_nodes
    flag = tmp_path / "sector-bad"
    flag.touch()
    p = flashgnn.open(d).layout["page_size"]
    page = 3 * p  # the third slot page: inside the compaction's first sequential chunk, not at its start
    env = cli_env(FLASHGNN_FAULT_READ=f"graph.fg@{page}+{p}", FLASHGNN_FAULT_READ_WHILE=str(flag))
    srv = ServeProcess(d, tf, "--compact-delta", "16KiB", "--memory-budget", "0", stderr_path=tmp_path / "server.err",
                       env=env)
    try:
        with Client(srv.address, token=SERVE_TOKEN) as c:
            c.wait_ready()
            refused: list = []
            acked = _write(c, n, 400, seed=7, refused=refused)
            assert all("graph.fg" in e for _, _, e in refused) and len(acked) > 300, refused[:3]
            st = _wait(c, lambda s: s["compaction"]["failures"] >= 1)
            comp = st["compaction"]
            assert comp["compactions"] == 0 and st["generation"] == 0, comp
            # The error names the page a point read would name, not the start of the chunk it was read in.
            assert "graph.fg at byte offset " + str(page) in comp["error"], comp["error"]
            acked += _write(c, n, 50, seed=8, refused=refused)  # writes go on after the failure
            flag.unlink()  # the sector reads again: the next try (after the back-off) succeeds
            st = _wait(c, lambda s: s["compaction"]["compactions"] >= 1)
            assert st["generation"] == 1 and st["compaction"]["error"] is None, st["compaction"]
    finally:
        rc, _ = srv.stop()
    assert rc == 0
    log = srv.stderr()
    assert "compact: error:" in log and "next try in" in log and "compact: generation 1 from" in log, log[-2000:]
    _all_present(d, acked)
    assert run_cli("verify", str(d)).returncode == 0
