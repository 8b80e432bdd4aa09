"""Serving and update benchmarks against a real ``flashgnn serve`` process.

``serve`` mode: p50/p99 latency and throughput of ``Run(GCN DFG, batch)`` for
batches of 1, 64 and 1024 targets with 1, 4 and 16 concurrent clients (each
client its own process, so the client side is not one GIL), plus
``GetNeighbors``/``GetEmbed`` unit reads, and ``Recommend(node, k=10,
exclude_seen)`` over ``--recommend`` (a random-weight 2-layer GraphSAGE link
checkpoint embedded with ``flashgnn embed`` at start) against its baseline
measured in the same run: ``Run`` of that model's DFG on one target, which
is Recommend's first step. The server runs inside a cgroup
memory cap (``--memory-limit``) with the page cache dropped first, so an
out-of-core dataset is served from the SSD.

``updates`` mode: durable edge inserts per second (each ``AddEdge`` is
acknowledged only after its WAL frame is fsynced; concurrent clients share
fsyncs through group commit), and HolisticGNN's DBLP day — on average 365
vertex adds, 8.8 K edge adds, 16 vertex deletes and 713 edge deletes per day,
which GraphStore applied in 970 ms — replayed as unit RPCs from concurrent
clients against a copy of the dataset (the original is never mutated).

Figures are printed (and emitted as JSON with ``--json``); nothing here is a
timed assertion.
"""

from __future__ import annotations

import json
import multiprocessing as mp
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from flashgnn.ssd.bench import drop_caches, make_cgroup
from flashgnn._util import ArgumentParser  # negative-leading list values (--fanout -1,-1)
from flashgnn.serve.process import ServeProcess

DBLP_DAY = {"add_vertex": 365, "add_edge": 8800, "delete_vertex": 16, "delete_edge": 713}
DBLP_DAY_MS = 970.0  # HolisticGNN, Figure 20: average per-day latency of GraphStore


class Server(ServeProcess):
    """``flashgnn serve`` (:mod:`flashgnn.serve.process`) inside a memory cgroup when capped."""

    def __init__(self, dataset: Path, token_file: Path, memory_limit: int | None, extra: list[str] = ()):
        self.cg = preexec = None
        if memory_limit:
            self.cg, procs = make_cgroup(memory_limit)
            preexec = lambda: (self.cg / procs).write_text(str(os.getpid()))  # noqa: E731
        self._logdir = tempfile.TemporaryDirectory()
        super().__init__(dataset, token_file, *extra, stderr_path=Path(self._logdir.name) / "server.err",
                         timeout=120.0, preexec_fn=preexec)

    def stop(self) -> int:
        try:
            code, _ = super().stop()
        except subprocess.TimeoutExpired:
            self.kill()
            code = self.proc.returncode
        if self.cg is not None:
            try:
                self.cg.rmdir()
            except OSError:
                pass
        return code


def _pct(lat: list[float], q: float) -> float | None:
    return float(np.percentile(np.asarray(lat) * 1e3, q)) if lat else None


def _client_run(address, token, dfg_bytes, batch, num_nodes, seconds, seed, sync, q):
    """One client process: Run(dfg, batch) back to back for ``seconds``."""
    from flashgnn.serve.client import Client

    rng = np.random.default_rng(seed)
    lat, errors = [], {}
    with Client(address, token=token) as c:
        c.run(dfg_bytes, rng.integers(0, num_nodes, batch))  # uploads the DFG once
        _ready(sync)
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            ids = rng.integers(0, num_nodes, batch)
            t = time.perf_counter()
            try:
                c.run(dfg_bytes, ids)
                lat.append(time.perf_counter() - t)
            except Exception as e:  # noqa: BLE001 - counted by kind (e.g. RESOURCE_EXHAUSTED at the cap)
                k = getattr(e, "code_name", type(e).__name__)  # ServerError: the status code's name
                errors[k] = errors.get(k, 0) + 1
    q.put((lat, errors))


def _client_recommend(address, token, k, num_nodes, seconds, seed, sync, q):
    """Recommend(random node, k, exclude_seen=True) back to back for ``seconds``."""
    from flashgnn.serve.client import Client

    rng = np.random.default_rng(seed)
    lat, errors = [], {}
    with Client(address, token=token) as c:
        c.recommend(0, k)  # the first call pays for the runner's sampler
        _ready(sync)
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            v = int(rng.integers(0, num_nodes))
            t = time.perf_counter()
            try:
                c.recommend(v, k, exclude_seen=True)
                lat.append(time.perf_counter() - t)
            except Exception as e:  # noqa: BLE001
                k_ = getattr(e, "code_name", type(e).__name__)
                errors[k_] = errors.get(k_, 0) + 1
    q.put((lat, errors))


def _recommend_model(dataset, work: Path, fanouts: list[int]):
    """A random-weight GraphSAGE link checkpoint (decoder dot) and its `flashgnn embed` table: what
    ``--recommend`` serves. Returns (embed dir, DFG bytes of the same model: the baseline's Run)."""
    import torch

    import flashgnn
    import flashgnn.dfg as dfg
    from flashgnn.embed import embed
    from flashgnn.nn.checkpoint import CHECKPOINT_FORMAT, CHECKPOINT_VERSION, encoder_state, save_checkpoint
    from flashgnn.nn.link import LinkModel

    ds = flashgnn.open(dataset)
    torch.manual_seed(0)
    m = LinkModel("sage", ds.feature_dim, 64, len(fanouts), 0.0, "dot")  # as `flashgnn train --task link` builds it
    cfg = dict(model="sage", in_dim=ds.feature_dim, hidden=64, out_dim=None, num_layers=len(fanouts), dropout=0.0,
               fanouts=fanouts, task="link", decoder="dot", num_embeddings=0)
    state = dict(format=CHECKPOINT_FORMAT, version=CHECKPOINT_VERSION, model_config=cfg, model=m.state_dict(), epoch=0)
    save_checkpoint(work / "ck", state)
    embed(dataset, work / "ck", work / "emb", progress=False, quiet=True)
    return work / "emb", dfg.models.from_checkpoint(encoder_state(state)).to_bytes()


def _client_unit(address, token, op, num_nodes, seconds, seed, sync, q):
    from flashgnn.serve.client import Client

    rng = np.random.default_rng(seed)
    lat, errors = [], {}
    with Client(address, token=token) as c:
        fn = getattr(c, op)
        c.health()
        _ready(sync)
        t_end = time.monotonic() + seconds
        while time.monotonic() < t_end:
            v = int(rng.integers(0, num_nodes))
            t = time.perf_counter()
            try:
                fn(v)
                lat.append(time.perf_counter() - t)
            except Exception as e:  # noqa: BLE001
                errors[type(e).__name__] = errors.get(type(e).__name__, 0) + 1
    q.put((lat, errors))


def _client_edges(address, token, num_nodes, seconds, count, seed, sync, q):
    """Durable AddEdge calls: for ``seconds``, or exactly ``count`` of them."""
    from flashgnn.serve.client import Client

    rng = np.random.default_rng(seed)
    lat = []
    with Client(address, token=token) as c:
        c.health()
        _ready(sync)
        t_end = time.monotonic() + seconds if seconds else None
        i = 0
        while (t_end is None and i < count) or (t_end is not None and time.monotonic() < t_end):
            a, b = (int(x) for x in rng.integers(0, num_nodes, 2))
            t = time.perf_counter()
            c.add_edge(a, b)
            lat.append(time.perf_counter() - t)
            i += 1
    q.put((lat, {}))


def _client_day(address, token, ops, batch, sync, q):
    """Replay one client's share of a DBLP day: unit RPCs (batch 0) or ApplyBatch of ``batch`` ops."""
    from flashgnn.serve.client import Client

    lat = []
    with Client(address, token=token) as c:
        c.health()
        _ready(sync)
        if batch:
            for i in range(0, len(ops), batch):
                t = time.perf_counter()
                c.apply(ops[i:i + batch])
                lat.append(time.perf_counter() - t)
        else:
            for op in ops:
                t = time.perf_counter()
                getattr(c, op[0])(*op[1:])
                lat.append(time.perf_counter() - t)
    q.put((lat, {}))


def _ready(sync) -> None:
    """Tell the parent this client is connected, then wait for the common start (spawning 16 Python
    processes takes seconds on 2 cores; it must not count as request time)."""
    ready, go = sync
    ready.put(1)
    go.wait()


def _fan_out(target, args_per_client) -> tuple[list[float], dict, float]:
    ctx = mp.get_context("spawn")  # grpc channels do not survive fork
    q, ready, go = ctx.Queue(), ctx.Queue(), ctx.Event()
    procs = [ctx.Process(target=target, args=(*a, (ready, go), q)) for a in args_per_client]
    for p in procs:
        p.start()
    for _ in procs:  # every client connected (and its DFG uploaded): start the clock
        ready.get()
    t = time.perf_counter()
    go.set()
    lat, errors = [], {}
    for _ in procs:
        lt, er = q.get()
        lat += lt
        for k, v in er.items():
            errors[k] = errors.get(k, 0) + v
    for p in procs:
        p.join()
    return lat, errors, time.perf_counter() - t


def _gcn_dfg(feature_dim: int, fanouts: list[int]) -> bytes:
    import torch
    from torch_geometric.nn import GCN

    import flashgnn.dfg as dfg

    torch.manual_seed(0)
    model = GCN(feature_dim, 64, len(fanouts), 16).eval()
    return dfg.models.gcn(model.state_dict(), fanouts).to_bytes()


def bench_serve(a, token, token_file) -> dict:
    import flashgnn

    ds = flashgnn.open(a.dataset)
    n = ds.num_nodes
    fanouts = [int(f) for f in a.fanouts.split(",")]
    dfg_bytes = _gcn_dfg(ds.feature_dim, fanouts)
    rec_dir = tempfile.TemporaryDirectory(prefix="flashgnn-rec-", dir=a.work)
    extra = []
    if a.recommend_k:
        emb, sage_dfg = _recommend_model(a.dataset, Path(rec_dir.name), fanouts)
        extra = ["--recommend", str(emb)]
    drop_caches()
    srv = Server(a.dataset, token_file, a.memory_limit, ["--max-inflight", str(a.max_inflight), *extra])
    rows = []
    from tqdm import tqdm

    cases = [(b, c) for b in a.batches for c in a.clients]
    try:
        for op in ("get_neighbors", "get_embed"):
            for c in (1, 16):
                lat, err, el = _fan_out(_client_unit, [(srv.address, token, op, n, a.seconds, 100 + i)
                                                      for i in range(c)])
                rows.append({"rpc": op, "batch": 1, "clients": c, "requests": len(lat), "errors": err,
                             "p50_ms": _pct(lat, 50), "p99_ms": _pct(lat, 99), "req_per_s": len(lat) / el})
        if a.recommend_k:
            # Recommend and its baseline, interleaved per client count so both see the same machine state.
            for c in (1, 16):
                lat, err, el = _fan_out(_client_run, [(srv.address, token, sage_dfg, 1, n, a.seconds, 500 + i)
                                                     for i in range(c)])
                rows.append({"rpc": "run-sage(base)", "batch": 1, "clients": c, "requests": len(lat), "errors": err,
                             "p50_ms": _pct(lat, 50), "p99_ms": _pct(lat, 99), "req_per_s": len(lat) / el})
                lat, err, el = _fan_out(_client_recommend, [(srv.address, token, a.recommend_k, n, a.seconds,
                                                             600 + i) for i in range(c)])
                rows.append({"rpc": "recommend", "batch": 1, "clients": c, "requests": len(lat), "errors": err,
                             "p50_ms": _pct(lat, 50), "p99_ms": _pct(lat, 99), "req_per_s": len(lat) / el})
        for b, c in tqdm(cases, desc="serve", unit="case"):
            lat, err, el = _fan_out(_client_run, [(srv.address, token, dfg_bytes, b, n, a.seconds, 7 * b + i)
                                                 for i in range(c)])
            rows.append({"rpc": "run", "batch": b, "clients": c, "requests": len(lat), "errors": err,
                         "p50_ms": _pct(lat, 50), "p99_ms": _pct(lat, 99), "req_per_s": len(lat) / el,
                         "targets_per_s": len(lat) * b / el})
        from flashgnn.serve.client import Client

        with Client(srv.address, token=token) as cl:
            stats = cl.stats()
    finally:
        code = srv.stop()
        rec_dir.cleanup()
    return {"dataset": str(a.dataset), "num_nodes": n, "memory_limit": a.memory_limit, "fanouts": fanouts,
            "rows": rows, "server_stats": stats, "server_exit": code}


def bench_updates(a, token, token_file) -> dict:
    import flashgnn

    work = Path(tempfile.mkdtemp(prefix="flashgnn-updates-", dir=a.work))
    copy = work / "ds"
    shutil.copytree(a.update_dataset or a.dataset, copy)
    try:
        ds = flashgnn.open(copy)
        n, dim = ds.num_nodes, ds.feature_dim
        srv = Server(copy, token_file, a.memory_limit)
        res: dict = {"dataset": str(a.update_dataset or a.dataset), "num_nodes": n, "inserts": []}
        try:
            from flashgnn.serve.client import Client

            for c in a.update_clients:
                with Client(srv.address, token=token) as cl:
                    before = cl.stats()
                lat, _, el = _fan_out(_client_edges, [(srv.address, token, n, a.seconds, 0, 300 + i)
                                                     for i in range(c)])
                with Client(srv.address, token=token) as cl:
                    after = cl.stats()
                res["inserts"].append({"clients": c, "edges": len(lat), "edges_per_s": len(lat) / el,
                                       "p50_ms": _pct(lat, 50), "p99_ms": _pct(lat, 99),
                                       "ops_per_fsync": _ops_per_fsync(before, after)})
            # DBLP days: the day's ops shuffled over the clients (deletes of vertices the day itself adds are
            # not modelled; vertex deletes pick random existing vertices).
            rng = np.random.default_rng(11)
            days = []
            gone: set[int] = set()  # vertices deleted on earlier days
            for d in range(a.days):
                ops = [("add_vertex", np.zeros(dim, np.float32)) for _ in range(DBLP_DAY["add_vertex"])]
                alive = np.setdiff1d(np.arange(n), np.fromiter(gone, np.int64, len(gone)))
                ops += [("add_edge", *map(int, rng.choice(alive, 2))) for _ in range(DBLP_DAY["add_edge"])]
                pairs = [("add_edge", *map(int, rng.choice(alive, 2))) for _ in range(DBLP_DAY["delete_edge"])]
                with Client(srv.address, token=token) as cl:
                    cl.apply(pairs)  # edges that exist, so the day's deletes delete something
                ops += [("delete_edge", p[1], p[2]) for p in pairs]
                # Vertex deletes run concurrently with the day's edge ops: victims touch none of them (a
                # concurrent delete_vertex would remove an edge a delete_edge still expects).
                busy = {v for op in ops if op[0] != "add_vertex" for v in op[1:]} | gone
                victims = [int(v) for v in rng.permutation(n) if int(v) not in busy][: DBLP_DAY["delete_vertex"]]
                gone.update(victims)
                ops += [("delete_vertex", v) for v in victims]
                order = rng.permutation(len(ops))
                shares = [[ops[i] for i in order[k::a.day_clients]] for k in range(a.day_clients)]
                # Unit RPCs on even days, ApplyBatch of --day-batch ops on odd days (the same mix).
                batch = 0 if d % 2 == 0 else a.day_batch
                lat, _, el = _fan_out(_client_day, [(srv.address, token, s, batch) for s in shares])
                days.append({"day": d, "ops": len(ops), "batch": batch, "seconds": el, "p50_ms": _pct(lat, 50),
                             "p99_ms": _pct(lat, 99)})
            res["dblp_days"] = days
            unit = [d["seconds"] for d in days if not d["batch"]]
            batched = [d["seconds"] for d in days if d["batch"]]
            res["dblp_day_ms"] = float(np.mean(unit) * 1e3) if unit else None
            res["dblp_day_batched_ms"] = float(np.mean(batched) * 1e3) if batched else None
            res["holisticgnn_day_ms"] = DBLP_DAY_MS
            with Client(srv.address, token=token) as cl:
                res["server_stats"] = cl.stats()
        finally:
            res["server_exit"] = srv.stop()
        rep = flashgnn.verify(copy, progress=False)
        res["verify"] = "clean" if rep is not None else "?"
        return res
    finally:
        shutil.rmtree(work, ignore_errors=True)


def _ops_per_fsync(before: dict, after: dict) -> float | None:
    g0, g1 = before.get("graph", {}), after.get("graph", {})
    try:
        ops = g1["ops"] - g0["ops"]
        fs = g1["fsyncs"] - g0["fsyncs"]
    except (KeyError, TypeError):
        return None
    return ops / fs if fs else None


def main(argv: list[str] | None = None) -> int:
    from flashgnn._util import human_bytes, parse_size

    p = ArgumentParser(prog="python -m benchmarks.serving", description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", type=Path)
    p.add_argument("--mode", choices=["serve", "updates", "all"], default="all")
    p.add_argument("--memory-limit", type=parse_size, default=None, help="cgroup cap on the server, e.g. 1GiB")
    p.add_argument("--fanouts", default="10,5")
    p.add_argument("--batches", type=lambda s: [int(x) for x in s.split(",")], default=[1, 64, 1024])
    p.add_argument("--clients", type=lambda s: [int(x) for x in s.split(",")], default=[1, 4, 16])
    p.add_argument("--seconds", type=float, default=5.0, help="per case")
    p.add_argument("--max-inflight", type=int, default=64)
    p.add_argument("--recommend-k", type=int, default=10, help="k of the Recommend rows (0: skip them)")
    p.add_argument("--update-dataset", type=Path, default=None,
                   help="dataset copied for the update runs (default: DATASET); the copy is deleted afterwards")
    p.add_argument("--update-clients", type=lambda s: [int(x) for x in s.split(",")], default=[1, 16])
    p.add_argument("--days", type=int, default=4)
    p.add_argument("--day-clients", type=int, default=16)
    p.add_argument("--day-batch", type=int, default=64, help="ops per ApplyBatch on the batched days")
    p.add_argument("--work", default=None, help="directory for the dataset copy (default: system temp)")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)

    token = os.urandom(16).hex()
    with tempfile.TemporaryDirectory() as td:
        token_file = Path(td) / "token"
        token_file.write_text(token)
        token_file.chmod(0o600)
        out: dict = {}
        if a.mode in ("serve", "all"):
            out["serve"] = bench_serve(a, token, token_file)
        if a.mode in ("updates", "all"):
            out["updates"] = bench_updates(a, token, token_file)
    if a.json:
        print(json.dumps(out, indent=2, default=str))
        return 0
    if "serve" in out:
        s = out["serve"]
        cap = human_bytes(s["memory_limit"]) if s["memory_limit"] else "none"
        print(f"serve {s['dataset']} ({s['num_nodes']:,} nodes), server cap {cap}, fanouts {a.fanouts}")
        print(f"  {'rpc':<14}{'batch':>6}{'clients':>8}{'p50 ms':>9}{'p99 ms':>9}{'req/s':>9}{'targets/s':>11}  errors")
        for r in s["rows"]:
            tps = f"{r['targets_per_s']:>11,.0f}" if "targets_per_s" in r else f"{'':>11}"
            p50 = f"{r['p50_ms']:>9.2f}" if r["p50_ms"] is not None else f"{'-':>9}"
            p99 = f"{r['p99_ms']:>9.2f}" if r["p99_ms"] is not None else f"{'-':>9}"
            print(f"  {r['rpc']:<14}{r['batch']:>6}{r['clients']:>8}{p50}{p99}{r['req_per_s']:>9.1f}{tps}  "
                  f"{r['errors'] or ''}")
        base = {r["clients"]: r for r in s["rows"] if r["rpc"] == "run-sage(base)"}
        for r in s["rows"]:
            b = base.get(r["clients"])
            if r["rpc"] == "recommend" and b and b["p50_ms"] and r["p50_ms"]:
                print(f"recommend k={a.recommend_k} exclude_seen, {r['clients']} client(s): p50 {r['p50_ms']:.2f} ms, "
                      f"p99 {r['p99_ms']:.2f} ms = {r['p50_ms'] / b['p50_ms']:.2f}x / {r['p99_ms'] / b['p99_ms']:.2f}x "
                      f"the same model's Run on 1 target (p50 {b['p50_ms']:.2f} ms, p99 {b['p99_ms']:.2f} ms), "
                      f"over {s['num_nodes']:,} candidates")
    if "updates" in out:
        u = out["updates"]
        for r in u["inserts"]:
            print(f"updates: {r['clients']:>2} clients: {r['edges_per_s']:,.0f} durable edge inserts/s, "
                  f"p50 {r['p50_ms']:.2f} ms, p99 {r['p99_ms']:.2f} ms, {r['ops_per_fsync'] or 0:.1f} ops per fsync")
        if u.get("dblp_day_ms") is not None:
            print(f"updates: DBLP day ({sum(DBLP_DAY.values()):,} unit ops, {a.day_clients} clients): "
                  f"{u['dblp_day_ms']:.0f} ms per day vs HolisticGNN {DBLP_DAY_MS:.0f} ms "
                  f"({DBLP_DAY_MS / u['dblp_day_ms']:.2f}x)"
                  + (f"; as ApplyBatch of {a.day_batch}: {u['dblp_day_batched_ms']:.0f} ms "
                     f"({DBLP_DAY_MS / u['dblp_day_batched_ms']:.2f}x)" if u.get("dblp_day_batched_ms") else "")
                  + f"; verify after: {u['verify']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
