"""The gRPC service (`flashgnn serve`, `flashgnn.Client`, `flashgnn query`): docs/reliability.md promise 5.

What is proved, and how: a real server runs in a subprocess (port 0, the
port read from its 'listening on' line) over a small generated R-MAT dataset
built with --symmetrize --dedup (the mutable store's requirement), and the
client talks to it over TCP:

- every RPC round-trips, and reads agree with the dataset on disk and with
  the mutations made before them;
- no token / a wrong token -> UNAUTHENTICATED on every RPC but Health;
  a token file readable by others -> the server refuses to start;
- a message over --max-message-bytes -> RESOURCE_EXHAUSTED; an id, batch or
  fanout over its bound -> INVALID_ARGUMENT naming the field, value, bound;
- with --max-inflight 1 and one slow request in flight (the server's test
  delay hook), a second request is refused RESOURCE_EXHAUSTED within
  milliseconds; a request exceeding --default-deadline -> DEADLINE_EXCEEDED;
- Plugin -> PERMISSION_DENIED without --allow-plugins, loads with it;
- SIGTERM with requests in flight: they complete OK, exit 0, one summary line;
- acknowledged mutations are visible after the server is SIGKILLed and
  restarted; the crash test (20 kills; 500 under -m slow) loses nothing and
  never shows half a batch.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from pathlib import Path

import numpy as np
import pytest

import flashgnn
from conftest import SERVE_TOKEN, generated_dataset, run_cli

grpc = pytest.importorskip("grpc")

from flashgnn.serve import flashgnn_pb2 as pb  # noqa: E402
from flashgnn.serve.client import ServerError, ops_request  # noqa: E402
from flashgnn.serve.codec import from_tensor, to_tensor  # noqa: E402
from flashgnn.serve.server import read_token_file  # noqa: E402

TOKEN = SERVE_TOKEN


# ---------------------------------------------------------------------------
# fixtures and helpers


@pytest.fixture(scope="module")
def base_dataset(tmp_path_factory) -> Path:
    return generated_dataset(tmp_path_factory.mktemp("serve"), scale=9, edge_factor=8, dim=8, classes=4, seed=3)




def code_of(excinfo) -> str:
    return excinfo.value.code_name


# ---------------------------------------------------------------------------
# no server needed


def test_tensor_codec_roundtrip_and_hostile_shapes():
    for a in (np.arange(6, dtype=np.float32).reshape(2, 3), np.zeros(0, np.float16), np.array([1, -2], np.int64)):
        b = from_tensor(to_tensor(a), "x")
        assert b.dtype == a.dtype and b.shape == a.shape and np.array_equal(a, b)
    with pytest.raises(ValueError, match=r"x.data: 8 bytes != 12 for shape \[3\] of float32"):
        from_tensor(pb.Tensor(dtype="float32", shape=[3], data=b"\0" * 8), "x")
    with pytest.raises(ValueError, match="x.dtype: 'object'"):
        from_tensor(pb.Tensor(dtype="object", shape=[1], data=b"\0" * 8), "x")
    with pytest.raises(ValueError, match="negative dimension"):
        from_tensor(pb.Tensor(dtype="float32", shape=[-1, -4], data=b"\0" * 16), "x")
    # a shape whose product overflows 64 bits is just "wrong length", never an allocation
    with pytest.raises(ValueError, match="bytes !="):
        from_tensor(pb.Tensor(dtype="float64", shape=[2**40, 2**40], data=b""), "x")


def test_ops_request_rejects_malformed_ops():
    req = ops_request([("add_edge", 1, 2), ("update_embed", 3, np.ones(4, np.float32)), ("delete_vertex", 5)])
    assert [o.WhichOneof("op") for o in req.ops] == ["add_edge", "update_embed", "delete_vertex"]
    with pytest.raises(ValueError, match=r"ops\[0\]: unknown operation 'frobnicate'"):
        ops_request([("frobnicate", 1)])
    with pytest.raises(ValueError, match=r"ops\[0\]: add_edge takes 2 argument"):
        ops_request([("add_edge", 1)])


def test_token_file_must_be_private(tmp_path):
    p = tmp_path / "tok"
    p.write_text(TOKEN)
    p.chmod(0o644)
    with pytest.raises(ValueError, match="readable or writable by others"):
        read_token_file(p)
    p.chmod(0o600)
    assert read_token_file(p) == TOKEN
    p.write_text("short")
    with pytest.raises(ValueError, match="< 16"):
        read_token_file(p)


def test_serve_refuses_world_readable_token_file(base_dataset, tmp_path):
    p = tmp_path / "tok"
    p.write_text(TOKEN)
    p.chmod(0o644)
    r = run_cli("serve", base_dataset, "--listen", "127.0.0.1:0", "--token-file", p, timeout=60)
    assert r.returncode == 2, r.stderr
    assert "chmod 600" in r.stderr and "listening" not in r.stdout


# ---------------------------------------------------------------------------
# with a server


def test_every_rpc_round_trips(server, base_dataset):
    srv = server()
    ds = flashgnn.open(base_dataset)
    n = len(ds)
    with srv.client() as c:
        h = c.health()
        assert h["status"] == "SERVING" and h["version"] == flashgnn.__version__
        for v in (0, 7, n - 1):
            assert sorted(c.get_neighbors(v).tolist()) == sorted(ds.neighbors([v])[0].tolist())
            e = c.get_embed(v)
            assert e.dtype == ds.features([v]).dtype and np.array_equal(e, ds.features([v])[0])
        dim, dt = ds.features([0]).shape[1], ds.features([0]).dtype

        new = c.add_vertex(np.full(dim, 0.5, dt))
        assert new == n
        assert np.array_equal(c.get_embed(new), np.full(dim, 0.5, dt))
        c.add_edge(new, 3)
        assert 3 in c.get_neighbors(new) and new in c.get_neighbors(3)  # undirected store
        c.update_embed(3, np.arange(dim, dtype=dt))
        assert np.array_equal(c.get_embed(3), np.arange(dim, dtype=dt))
        c.delete_edge(new, 3)
        assert 3 not in c.get_neighbors(new)

        res = c.apply([("add_vertex", np.ones(dim, dt)), ("add_edge", n + 1, 5), ("update_embed", 5, np.zeros(dim, dt))])
        assert res == [n + 1, None, None]
        assert 5 in c.get_neighbors(n + 1) and np.array_equal(c.get_embed(5), np.zeros(dim, dt))
        c.delete_vertex(n + 1)
        assert (n + 1) not in c.get_neighbors(5)

        # an invalid op anywhere refuses the whole batch: nothing of it is applied
        with pytest.raises(ServerError) as ei:
            c.apply([("add_edge", 1, 2), ("delete_edge", 1, 9999)])
        assert code_of(ei) == "INVALID_ARGUMENT" and "9999" in ei.value.details()

        st = c.stats()
        assert st["rpcs"]["GetNeighbors"]["ok"] >= 3 and st["rpcs"]["ApplyBatch"]["errors"] == {"INVALID_ARGUMENT": 1}
        assert st["rpcs"]["GetEmbed"]["latency_p99_ms"] >= st["rpcs"]["GetEmbed"]["latency_p50_ms"] > 0
        assert st["limits"]["max_inflight"] == 64 and st["max_inflight"] == 64 and st["in_flight"] == 0
        assert isinstance(st["graph"], dict) and st["graph"]


def test_update_graph_streams_chunks_and_replaces_the_graph(server):
    srv = server()
    n, dim = 20, 4
    src = np.arange(n, dtype=np.int64)
    dst = (src + 1) % n  # a ring; the importer symmetrizes it
    emb = np.arange(n * dim, dtype=np.float32).reshape(n, dim) / 8
    with srv.client() as c:
        c.add_edge(1, 100)  # superseded by the update
        rep = c.update_graph(src, dst, emb, labels=np.zeros(n, np.int64), chunk_rows=8)
        assert rep["chunks"] == 4 and rep["edges"] == n  # 3 data chunks + the commit chunk and rep["embedding_rows"] == n
        st = c.stats()["graph"]
        assert st["num_nodes"] == n and st["feature_dim"] == dim
        assert sorted(c.get_neighbors(0).tolist()) == [1, n - 1]
        assert np.array_equal(c.get_embed(7), emb[7])
        with pytest.raises(ServerError) as ei:
            c.get_neighbors(100)
        assert f"GetNeighbors.vid: 100 >= num_nodes {n}" in ei.value.details()
        with pytest.raises(ServerError) as ei:
            c.update_graph([0], [1])
        assert code_of(ei) == "INVALID_ARGUMENT" and "no embedding rows" in ei.value.details()


def test_auth_required_everywhere_but_health(server):
    srv = server()
    calls = {
        "stats": lambda c: c.stats(),
        "get_neighbors": lambda c: c.get_neighbors(0),
        "get_embed": lambda c: c.get_embed(0),
        "add_vertex": lambda c: c.add_vertex(np.zeros(8, np.float32)),
        "delete_vertex": lambda c: c.delete_vertex(1),
        "add_edge": lambda c: c.add_edge(1, 2),
        "delete_edge": lambda c: c.delete_edge(1, 2),
        "update_embed": lambda c: c.update_embed(1, np.zeros(8, np.float32)),
        "apply": lambda c: c.apply([("add_edge", 1, 2)]),
        "update_graph": lambda c: c.update_graph([1], [2]),
        "run": lambda c: c.run(b"not a dfg", [1]),
        "plugin": lambda c: c.plugin("p", "def register(r): pass"),
    }
    for token in (None, "wrong-" + "b" * 26, TOKEN[:-1]):
        with srv.client(token=token) as c:
            assert c.health()["status"] == "SERVING"
            for name, call in calls.items():
                with pytest.raises(ServerError) as ei:
                    call(c)
                assert code_of(ei) == "UNAUTHENTICATED", (name, ei.value)
    with srv.client() as c:
        st = c.stats()
        assert st["rejected"]["unauthenticated"] == 3 * len(calls)
        # nothing was changed by the refused mutations
        assert st["rpcs"]["AddEdge"]["ok"] == 0 and c.get_embed(1).any()


def test_limits_answer_with_the_field_value_and_bound(server):
    srv = server("--max-message-bytes", "64KiB", "--max-batch", "16", "--max-fanout", "20")
    import torch
    from torch_geometric.nn import GCN

    import flashgnn.dfg as dfg

    with srv.client() as c:
        n = c.stats()["graph"].get("num_nodes", 512)
        with pytest.raises(ServerError) as ei:
            c.get_neighbors(123456789)
        assert code_of(ei) == "INVALID_ARGUMENT" and f"GetNeighbors.vid: 123456789 >= num_nodes {n}" in ei.value.details()
        with pytest.raises(ServerError) as ei:
            c.add_edge(-1, 2)
        assert "AddEdge.dst: -1 < 0" in ei.value.details()
        with pytest.raises(ServerError) as ei:
            c.update_embed(1, np.zeros(5, np.float32))
        assert "UpdateEmbed.embed.shape: [5] != [feature_dim 8]" in ei.value.details()

        # 100 000 float32 = 400 kB > 64 KiB: refused by the transport, before any handler
        with pytest.raises(ServerError) as ei:
            c.update_embed(1, np.zeros(100_000, np.float32))
        assert code_of(ei) == "RESOURCE_EXHAUSTED" and "larger than max" in ei.value.details()

        torch.manual_seed(0)
        sd = GCN(8, 16, 2, 4).state_dict()
        with pytest.raises(ServerError) as ei:
            c.run(dfg.models.gcn(sd, [5, 3]), list(range(17)))
        assert code_of(ei) == "INVALID_ARGUMENT" and "Run.batch: 17 targets > --max-batch 16" in ei.value.details()
        with pytest.raises(ServerError) as ei:
            c.run(dfg.models.gcn(sd, [5, 500]), [1])
        assert "fanouts[1]: 500 > --max-fanout 20" in ei.value.details()
        with pytest.raises(ServerError) as ei:
            c.run(dfg.models.gcn(sd, [-1, 5]), [1])
        assert "fanouts[0]: -1 (all neighbors) is not allowed" in ei.value.details()
        with pytest.raises(ServerError) as ei:
            c.run(b"FLASHDFG garbage", [1])
        assert code_of(ei) == "INVALID_ARGUMENT" and ei.value.details().startswith("Run.dfg: ")
        with pytest.raises(ServerError) as ei:
            c.run(dfg.models.gcn(sd, [5, 3]), [n])
        assert f"Run.batch[0]: {n} >= num_nodes {n}" in ei.value.details()

        # a valid Run; the DFG travels once, then by id; an unknown id alone is NOT_FOUND
        g = dfg.models.gcn(sd, [5, 3])
        out = c.run(g, [1, 2, 3])
        assert out["Result"].shape == (3, 4) and [p["op"] for p in c.last_profile][0] == "BatchPre"
        assert np.array_equal(c.run(g, [1, 2, 3])["Result"], out["Result"])
        with pytest.raises(ServerError) as ei:
            c._rpc("Run", pb.RunRequest(dfg_id="ab" * 32, batch=[1]))
        assert code_of(ei) == "NOT_FOUND"
        assert c.stats()["rejected"]["invalid_argument"] == 8  # the oversized message never reached a handler


def test_inflight_cap_and_default_deadline(server):
    srv = server("--max-inflight", "1", "--default-deadline", "1.5", slow="GetNeighbors:5")
    assert "_slow_serve: slowed" in srv.stderr()
    with srv.client() as c, srv.client() as c2:
        slow: list = []
        th = threading.Thread(target=lambda: slow.append(pytest.raises(ServerError, c.get_neighbors, 1)))
        t0 = time.monotonic()
        th.start()
        time.sleep(0.3)
        t1 = time.monotonic()
        with pytest.raises(ServerError) as ei:
            c2.get_embed(1)
        assert code_of(ei) == "RESOURCE_EXHAUSTED" and "--max-inflight 1" in ei.value.details()
        # Queued behind the slow call it would wait >= 1.2 s (until that call's 1.5 s deadline).
        assert time.monotonic() - t1 < 1.0, "an over-cap request must be refused at once, not queued"
        assert c2.health()["status"] == "SERVING"  # Health and Stats are not metered
        assert c2.stats()["in_flight"] == 1
        th.join()
        # the slow one hit the server's default deadline (the client set none)
        assert slow[0].value.code_name == "DEADLINE_EXCEEDED" and "--default-deadline 1.5" in slow[0].value.details()
        assert 1.3 < time.monotonic() - t0 < 4
        # The expired call's slot is released within a bound (the work stops at its next check); on a loaded
        # machine that can come a little after the client saw DEADLINE_EXCEEDED, so wait for it first.
        t_free = time.monotonic()
        while c2.stats()["in_flight"] and time.monotonic() - t_free < 3.0:
            time.sleep(0.05)
        assert c2.stats()["in_flight"] == 0, "the expired call's slot was not released within 3 s"
        # a client deadline shorter than the default applies too
        with srv.client(timeout=0.3) as c3, pytest.raises(ServerError) as ei:
            c3.get_neighbors(1)
        assert code_of(ei) == "DEADLINE_EXCEEDED"
        time.sleep(0.5)
        st = c2.stats()
        assert st["rejected"]["overloaded"] == 1 and st["rejected"]["deadline_exceeded"] >= 1
        assert np.array_equal(c2.get_embed(1), c2.get_embed(1))  # slot freed again


def test_plugin_needs_allow_plugins(server, dataset, tmp_path):
    src = "def register(registry):\n    registry.register_device('TestAccel', 50)\n"
    srv = server()
    with srv.client() as c:
        with pytest.raises(ServerError) as ei:
            c.plugin("accel", src)
        assert code_of(ei) == "PERMISSION_DENIED" and "--allow-plugins" in ei.value.details()
    srv.stop()
    srv = server("--allow-plugins")
    assert "WARNING: --allow-plugins" in srv.stderr()
    with srv.client() as c:
        r = c.plugin("accel", src)
        assert "TestAccel" in r["devices"] and "GEMM" in r["ops"]
        with pytest.raises(ServerError) as ei:
            c.plugin("broken", "def register(registry):\n    raise RuntimeError('boom')\n")
        assert code_of(ei) == "INVALID_ARGUMENT" and "RuntimeError: boom" in ei.value.details()


def test_sigterm_drains_in_flight_requests(server):
    srv = server("--max-inflight", "8", slow="GetNeighbors:1.0")
    results: list = []

    def call(v):
        with srv.client() as c:
            try:
                results.append(("ok", c.get_neighbors(v)))
            except ServerError as e:
                results.append((e.code_name, e.details()))

    threads = [threading.Thread(target=call, args=(v,)) for v in range(4)]
    for t in threads:
        t.start()
    time.sleep(0.4)  # all four admitted and sleeping
    t0 = time.monotonic()
    rc, out = srv.stop(signal.SIGTERM)
    for t in threads:
        t.join()
    assert rc == 0, srv.stderr()
    assert [r[0] for r in results] == ["ok"] * 4, results
    assert time.monotonic() - t0 < 5
    assert "draining 4 in-flight" in srv.stderr()
    summary = [line for line in out.splitlines() if "stopped after" in line]
    assert len(summary) == 1 and "graph closed" in summary[0], out


def test_acknowledged_mutations_survive_kill_and_restart(server, dataset):
    srv = server()
    with srv.client() as c:
        dim = c.get_embed(0).shape[0]
        c.add_edge(1, 100)
        v = c.add_vertex(np.full(dim, 2.25, np.float32))
        c.update_embed(2, np.full(dim, -1.5, np.float32))
        c.apply([("add_edge", v, 7), ("add_edge", v, 8)])
    srv.stop(signal.SIGKILL)
    srv2 = server()
    with srv2.client() as c:
        assert 100 in c.get_neighbors(1) and 1 in c.get_neighbors(100)
        assert np.array_equal(c.get_embed(v), np.full(dim, 2.25, np.float32))
        assert np.array_equal(c.get_embed(2), np.full(dim, -1.5, np.float32))
        assert sorted(c.get_neighbors(v).tolist()) == [7, 8]
    assert srv2.stop()[0] == 0


def test_query_cli(server, token_file, base_dataset):
    srv = server()
    r = run_cli("query", srv.address, "health")
    assert r.returncode == 0 and "SERVING" in r.stdout, r.stderr
    r = run_cli("query", srv.address, "get-neighbors", "5")
    assert r.returncode == 2 and "UNAUTHENTICATED" in r.stderr
    q = ("query", srv.address, "--token-file", token_file)
    r = run_cli(*q, "add-edge", "3", "4")
    assert r.returncode == 0 and "durable" in r.stdout, r.stderr
    r = run_cli(*q, "--json", "get-neighbors", "3")
    assert 4 in json.loads(r.stdout)["neighbors"]
    r = run_cli(*q, "add-vertex", "--embed-zeros")
    assert r.returncode == 0 and "new vertex" in r.stdout, r.stderr
    r = run_cli(*q, "update-embed", "3", "--embed", ",".join(["1.5"] * 8))
    assert r.returncode == 0, r.stderr
    r = run_cli(*q, "--json", "get-embed", "3")
    assert json.loads(r.stdout)["embed"] == [1.5] * 8
    r = run_cli(*q, "get-neighbors", "99999999")
    assert r.returncode == 2 and "GetNeighbors.vid: 99999999 >= num_nodes" in r.stderr
    r = run_cli(*q, "stats")
    assert r.returncode == 0 and "requests" in r.stdout

    # run: the built-in GCN DFG from a `flashgnn train` checkpoint
    ck = token_file.parent / "ck"
    if not (ck / "checkpoint.pt").exists():
        t = run_cli("train", base_dataset, "--model", "gcn", "--epochs", "1", "--max-batches", "2", "--fanout", "5,3",
                    "--hidden", "16", "--checkpoint", ck, "--no-progress")
        assert t.returncode == 0, t.stderr
    r = run_cli(*q, "--json", "run", "--model", "gcn", "--checkpoint", ck, "--fanouts", "5,3", "--batch", "1,2,3",
                "--repeat", "3")
    assert r.returncode == 0, r.stderr
    out = json.loads(r.stdout)
    assert np.asarray(out["outputs"]["Result"]).shape == (3, 4) and len(out["latency_ms"]) == 3
    assert out["profile"][0]["op"] == "BatchPre"
    r = run_cli(*q, "run", "--model", "sage", "--checkpoint", ck, "--batch", "1")
    assert r.returncode == 2 and "holds a 'gcn' model" in r.stderr


def test_run_sees_acknowledged_mutations(server, base_dataset):
    import torch
    from torch_geometric.nn import GCN

    import flashgnn.dfg as dfg

    ds = flashgnn.open(base_dataset)
    deg = np.array([len(x) for x in ds.neighbors(np.arange(len(ds)))])
    v = int(np.flatnonzero((deg > 0) & (deg < 5))[0])  # fanout 5 takes all of v's neighbors
    far = next(u for u in range(len(ds) - 1, -1, -1) if u != v and u not in set(ds.neighbors([v])[0].tolist()))
    torch.manual_seed(0)
    g = dfg.models.gcn(GCN(8, 16, 2, 4).state_dict(), [5, 3])
    srv = server()
    with srv.client() as c:
        before = c.run(g, [v])["Result"]
        assert np.array_equal(c.run(g, [v])["Result"], before)  # deterministic sampling
        c.add_edge(v, far)
        after = c.run(g, [v])["Result"]
        assert not np.allclose(before, after), "Run must sample the graph with the acknowledged edge"
        assert c.stats()["dfg_cache_entries"] == 1


def _model(nbrs, rows):
    from benchmarks.crashtest import Model

    return Model([set(x) for x in nbrs], np.array(rows, np.float32), clients=1)


def test_crashtest_checker_catches_lost_and_partial_batches():
    """The crash test's checker itself: a lost acknowledged edge, a lost row and a
    half-visible pending batch each raise; whole-or-nothing pending batches resolve."""
    from benchmarks.crashtest import Violation, _check

    counts = dict(pending_applied=0, pending_absent=0, lost=0, nodes_checked=0)
    nbrs, rows = [[1], [0], [], []], [[0.0], [1.0], [2.0], [3.0]]

    def reader(state):
        return lambda nodes: {v: (set(state[v][0]), np.array(state[v][1], np.float32)) for v in nodes}

    m = _model(nbrs, rows)
    m.apply([("add_edge", 2, 3)])
    with pytest.raises(Violation, match="acknowledged neighbors missing"):
        _check(m, reader({v: (nbrs[v], rows[v]) for v in range(4)}), counts)
    m = _model(nbrs, rows)
    m.apply([("update_embed", 2, np.float32([9.0]))])
    with pytest.raises(Violation, match="feature row differs"):
        _check(m, reader({v: (nbrs[v], rows[v]) for v in range(4)}), counts)

    pend = [("add_edge", 2, 3), ("update_embed", 1, np.float32([7.0]))]
    half = {0: ([1], [0.0]), 1: ([0], [1.0]), 2: ([3], [2.0]), 3: ([2], [3.0])}  # edge there, row not
    m = _model(nbrs, rows)
    m.pending[0] = (5, pend)
    with pytest.raises(Violation, match="partially visible"):
        _check(m, reader(half), counts)
    for state, field in (({**half, 1: ([0], [7.0])}, "pending_applied"), ({v: (nbrs[v], rows[v]) for v in range(4)}, "pending_absent")):
        m = _model(nbrs, rows)
        m.pending[0] = (5, pend)
        before = counts[field]
        _check(m, reader(state), counts)
        assert counts[field] == before + 1 and not m.pending


def test_crashtest_20_kills(base_dataset):
    from benchmarks.crashtest import run

    rep = run(base_dataset, kills=20, seed=1, max_delay=0.3, progress=False)
    assert rep["lost"] == 0 and rep["kills"] == 20
    assert rep["acked"] > 20, rep  # the kills land while batches are streaming
    assert rep["verified"], rep


@pytest.mark.slow
def test_crashtest_500_kills(base_dataset):
    from benchmarks.crashtest import run

    rep = run(base_dataset, kills=500, seed=2, progress=False)
    assert rep["lost"] == 0 and rep["acked"] > 500, rep


def test_memory_budget_split_printed_and_cache_serves_runs(server, base_dataset):
    """--memory-budget: the split is printed at start, Run results equal an uncached server's, and the
    shared cache is used (hits in Stats) while staying within its budget."""
    import torch
    from torch_geometric.nn import GCN

    import flashgnn.dfg as dfg

    torch.manual_seed(0)
    g = dfg.models.gcn(GCN(8, 16, 2, 4).state_dict(), [5, 3])
    batch = list(range(0, 64, 3))
    plain = server(ds=base_dataset)
    with plain.client() as c:
        want = c.run(g, batch)["Result"]
    plain.stop()
    srv = server("--memory-budget", "160MiB", "--workers", "2", ds=base_dataset)
    assert "memory budget 160.0 MiB = engine" in srv.stderr() and "+ cache" in srv.stderr()
    with srv.client() as c:
        for _ in range(3):
            assert np.array_equal(c.run(g, batch)["Result"], want)
        cs = c.stats()["graph"]["cache"]
    assert cs["static_hits"] + cs["dynamic_hits"] > 0, cs
    assert cs["static_bytes"] + cs["dynamic_bytes"] <= cs["budget"], cs


def test_per_request_work_is_bounded(server, base_dataset):
    """ApplyBatch op count, DFG hops, sampled-node bound, seeds only from the request's Batch, UpdateGraph ids."""
    import torch
    from torch_geometric.nn import GCN

    import flashgnn.dfg as dfg

    srv = server("--max-batch-ops", "4", "--max-hops", "2", "--max-sampled-nodes", "1000", ds=base_dataset)
    torch.manual_seed(0)
    with srv.client() as c:
        with pytest.raises(ServerError) as ei:
            c.apply([("add_edge", 1, 2)] * 5)
        assert code_of(ei) == "INVALID_ARGUMENT" and "ApplyBatch.ops: 5 ops > --max-batch-ops 4" in ei.value.details()
        with pytest.raises(ServerError) as ei:
            c.run(dfg.models.gcn(GCN(8, 16, 3, 4).state_dict(), [2, 2, 2]), [1])
        assert "fanouts: 3 hops > --max-hops 2" in ei.value.details()
        sd = GCN(8, 16, 2, 4).state_dict()
        with pytest.raises(ServerError) as ei:
            c.run(dfg.models.gcn(sd, [20, 20]), list(range(16)))
        assert "16 targets x the DFG's fanouts may sample 6736 nodes > --max-sampled-nodes 1000" in ei.value.details()
        assert c.run(dfg.models.gcn(sd, [20, 20]), [1, 2])["Result"].shape == (2, 4)  # 842 <= 1000
        g = dfg.Graph()
        g.create_in("Batch")
        seeds = g.create_param("S", torch.arange(50))
        sub, x = g.create_op("BatchPre", [seeds], attrs={"fanouts": [2]})
        g.create_out("Result", x)
        with pytest.raises(ServerError) as ei:
            c.run(g, [1])
        assert "(BatchPre) input 0: 'S'" in ei.value.details() and "must be the graph input 'Batch'" in ei.value.details()
        n = c.stats()["graph"]["num_nodes"]
        with pytest.raises(ServerError) as ei:
            c.update_graph(np.array([0, 5]), np.array([1, 3]), np.zeros((4, 8), np.float32))
        assert code_of(ei) == "INVALID_ARGUMENT" and "UpdateGraph.src[1]: 5 >= 4 (the embedding rows)" in ei.value.details()
        assert c.stats()["graph"]["num_nodes"] == n  # nothing was applied
