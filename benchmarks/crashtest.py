"""Kill ``flashgnn serve`` at random points; check no acknowledged batch is lost
and no batch is half-applied (docs/reliability.md promise 2, through the RPC path).

    python -m benchmarks.crashtest DATASET --kills 20 --seed 1 [--json]

How it works (the RocksDB "kill at random points against an expected-state
model" method, process crashes only):

1. DATASET (built with ``--symmetrize``; the mutable store requires it) is
   copied to a work directory, so the input is never touched. An in-memory
   model holds every node's neighbor *set* and feature row, read from it.
2. Each round starts the server (port 0, token file mode 600) and
   ``--clients`` threads stream ``ApplyBatch`` calls. Client ``t`` owns the
   nodes ``v % clients == t`` and only adds/deletes edges between, and updates
   rows of, its own nodes, so every node's expected state depends on one
   client's acknowledged batches (writers stay below node id ``--nodes``, so
   the read-back after each kill stays small). A batch holds ``--edges`` add_edge ops on
   non-edges, up to ``--edges // 2`` delete_edge ops on existing edges and
   ``--embeds`` update_embed ops whose rows are derived from (seed, batch id,
   node) — every op's effect is checkable.
3. A batch enters the model when its reply arrives (acknowledged). The one
   batch per client in flight when the server dies is *pending*.
4. After a random delay (``--max-delay``) the server gets SIGKILL. The next
   round restarts it and, before any new write, reads back every node any
   batch touched: a node must match the model, except the nodes of a pending
   batch, which must match either "pending batch fully applied" or "not
   applied at all" — consistently over all its ops. A node matching neither,
   or a batch visible in part, is a failure; an acknowledged batch missing is
   ``lost``.
5. After the last round the server is stopped with SIGTERM (must exit 0), the
   graph is compacted in-process into a new generation, ``flashgnn.verify``
   checks that generation's files, and the model is checked once more.

Limits: SIGKILL loses the process, not the page cache, so this proves the
server and WAL recover from a process crash at any instant; power loss
(unsynced data dropped) is the store's own fault-injection tests' job.
"""

from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

from flashgnn.serve.process import ServeProcess, ServeStartError

# How long one server start may take before the round fails (imports + WAL replay).
START_TIMEOUT_S = 60.0
# Per-RPC deadline of the stress clients: a hung server fails the test instead of hanging it.
RPC_TIMEOUT_S = 20.0
# Concurrent read-back calls after each restart (overlaps RPC round trips).
READ_THREADS = 8


class Violation(AssertionError):
    pass


def _row(seed: int, batch_id: int, vid: int, dim: int, dtype) -> np.ndarray:
    """The feature row batch ``batch_id`` writes to ``vid`` (exactly representable in ``dtype``)."""
    rng = np.random.default_rng([seed, batch_id, vid])
    return rng.uniform(-4, 4, dim).round(2).astype(dtype)


class Model:
    """Expected neighbor sets and feature rows, plus the batch each client has in flight."""

    def __init__(self, neighbors: list[set], rows: np.ndarray, clients: int):
        self.nbrs = neighbors
        self.rows = rows
        self.clients = clients
        self.pending: dict[int, tuple[int, list[tuple]]] = {}  # client -> (batch id, ops)
        self.touched: set[int] = set()

    @staticmethod
    def effect(ops) -> tuple[dict, dict]:
        """(neighbor changes as {v: (added, removed)}, row writes {v: row}) of a batch."""
        adj: dict[int, tuple[set, set]] = {}
        rows: dict[int, np.ndarray] = {}
        for op in ops:
            if op[0] in ("add_edge", "delete_edge"):
                _, d, s = op
                for a, b in ((d, s), (s, d)):
                    add, rem = adj.setdefault(a, (set(), set()))
                    (add if op[0] == "add_edge" else rem).add(b)
            elif op[0] == "update_embed":
                rows[op[1]] = op[2]
        return adj, rows

    def apply(self, ops) -> None:
        adj, rows = self.effect(ops)
        for v, (add, rem) in adj.items():
            self.nbrs[v] = (self.nbrs[v] - rem) | add
            self.touched.add(v)
        for v, r in rows.items():
            self.rows[v] = r
            self.touched.add(v)


def _make_batch(model: Model, client: int, batch_id: int, rng: random.Random, a, dim: int, dtype) -> list[tuple]:
    own = range(client, min(a.nodes, len(model.nbrs)), model.clients)
    ops: list[tuple] = []
    used: set[frozenset] = set()
    for _ in range(a.edges):
        for _try in range(20):
            d, s = rng.choice(own), rng.choice(own)
            key = frozenset((d, s))
            if d != s and s not in model.nbrs[d] and key not in used:
                used.add(key)
                ops.append(("add_edge", d, s))
                break
    for _ in range(a.edges // 2):
        d = rng.choice(own)
        cands = [s for s in model.nbrs[d] if s % model.clients == client and s != d and frozenset((d, s)) not in used]
        if cands:
            s = rng.choice(sorted(cands))
            used.add(frozenset((d, s)))
            ops.append(("delete_edge", d, s))
    for v in rng.sample(list(own), min(a.embeds, len(own))):
        ops.append(("update_embed", v, _row(a.seed, batch_id, v, dim, dtype)))
    rng.shuffle(ops)
    return ops


def _start_server(ds: Path, token_file: Path, log: Path, extra: list[str]) -> ServeProcess:
    env = dict(os.environ)
    try:
        return ServeProcess(ds, token_file, *extra, stderr_path=log, env=env, timeout=START_TIMEOUT_S)
    except ServeStartError as e:
        raise Violation(f"{e} (log: {log}; a log that does not replay?)") from None


def _check(model: Model, read, counts: dict) -> None:
    """Compare the server's state with the model; resolve each pending batch as applied or not.

    ``read(nodes) -> {v: (neighbor set, feature row)}`` reads all nodes to check in one go."""
    pending = sorted(model.pending.items())
    effects = [(client, bid, ops, *Model.effect(ops)) for client, (bid, ops) in pending]
    pend_nodes = set().union(*[set(adj) | set(rows) for *_, adj, rows in effects]) if effects else set()
    state = read(sorted(model.touched | pend_nodes))
    for client, bid, ops, adj, rows in effects:
        verdicts = {}
        for v in sorted(set(adj) | set(rows)):
            got_n, got_r = state[v]
            before_n, before_r = model.nbrs[v], model.rows[v]
            add, rem = adj.get(v, (set(), set()))
            after_n = (before_n - rem) | add
            after_r = rows.get(v, before_r)
            is_before = got_n == before_n and np.array_equal(got_r, before_r)
            is_after = got_n == after_n and np.array_equal(got_r, after_r)
            if is_before and is_after:
                continue  # this node cannot tell (no op changes it observably)
            if not (is_before or is_after):
                raise Violation(f"node {v}: state matches neither before nor after pending batch {bid} of client {client} "
                                f"(neighbors {sorted(got_n)[:20]}..., expected before {sorted(before_n)[:20]}..., after {sorted(after_n)[:20]}...)")
            verdicts[v] = is_after
        if len(set(verdicts.values())) > 1:
            raise Violation(f"batch {bid} of client {client} is partially visible: applied at {[v for v, x in verdicts.items() if x]}, "
                            f"missing at {[v for v, x in verdicts.items() if not x]}")
        applied = bool(verdicts) and next(iter(verdicts.values()))
        counts["pending_applied" if applied else "pending_absent"] += 1
        if applied:
            model.apply(ops)
    model.pending.clear()
    for v in sorted(model.touched - pend_nodes):
        got_n, got_r = state[v]
        if got_n != model.nbrs[v]:
            missing, extra = sorted(model.nbrs[v] - got_n), sorted(got_n - model.nbrs[v])
            counts["lost"] += len(missing)
            raise Violation(f"node {v}: acknowledged neighbors missing {missing[:20]}, unexpected {extra[:20]}")
        if not np.array_equal(got_r, model.rows[v]):
            counts["lost"] += 1
            raise Violation(f"node {v}: feature row differs from the last acknowledged update_embed")
    counts["nodes_checked"] += len(state)


def _reader(get_neighbors, get_embed, threads: int = 1):
    """read(nodes) over per-node calls, ``threads`` at a time (RPC round trips overlap)."""

    def retrying(fn, v):
        # RESOURCE_EXHAUSTED means "retry later" (the in-flight cap, or gRPC's own concurrency limit while a
        # loaded machine is slow to retire finished calls); the read-back is not what is being tested there.
        from flashgnn.serve.client import ServerError

        for attempt in range(50):
            try:
                return fn(v)
            except ServerError as e:
                if e.code_name != "RESOURCE_EXHAUSTED" or attempt == 49:
                    raise
                time.sleep(min(0.5, 0.01 * 2**attempt))

    def one(v):
        return v, (set(int(x) for x in retrying(get_neighbors, v)), np.asarray(retrying(get_embed, v)))

    def read(nodes):
        if threads <= 1:
            return dict(map(one, nodes))
        from concurrent.futures import ThreadPoolExecutor

        with ThreadPoolExecutor(threads) as ex:
            return dict(ex.map(one, nodes))

    return read


def _client_loop(addr, token, model, lock, client, a, dim, dtype, next_id, counts, stop):
    from flashgnn.serve.client import Client, ServerError

    rng = random.Random(a.seed * 1000003 + client * 7919 + counts["rounds"])
    with Client(addr, token=token, timeout=RPC_TIMEOUT_S) as c:
        while not stop.is_set():
            with lock:
                bid = next_id[0]
                next_id[0] += 1
                ops = _make_batch(model, client, bid, rng, a, dim, dtype)
                model.pending[client] = (bid, ops)
            try:
                c.apply(ops)
            except ServerError as e:
                if e.code_name in ("UNAVAILABLE", "CANCELLED", "DEADLINE_EXCEEDED", "UNKNOWN", "INTERNAL"):
                    return  # the server died under us: the batch stays pending
                raise Violation(f"client {client}: batch {bid} refused: {e}") from None
            with lock:
                model.apply(ops)
                del model.pending[client]
                counts["acked"] += 1
                counts["ops_acked"] += len(ops)


def run(dataset, *, kills: int = 20, seed: int = 0, clients: int = 4, edges: int = 4, embeds: int = 2, nodes: int = 128,
        max_delay: float = 0.4, workdir=None, compact: bool = True, progress: bool = True) -> dict:
    """The crash test; returns the report (raises Violation on the first inconsistency)."""
    import flashgnn
    from flashgnn.serve.client import Client

    a = argparse.Namespace(seed=seed, edges=edges, embeds=embeds, nodes=nodes)
    if nodes < 2 * clients:
        raise ValueError(f"nodes: {nodes} < 2 x clients {clients} (each client needs two nodes of its own)")
    t0 = time.perf_counter()
    own_tmp = workdir is None
    work = Path(tempfile.mkdtemp(prefix="flashgnn-crashtest-")) if own_tmp else Path(workdir)
    ds = work / "dataset"
    if ds.exists():
        shutil.rmtree(ds)
    shutil.copytree(dataset, ds)
    token = os.urandom(16).hex()
    token_file = work / "token"
    token_file.write_text(token + "\n")
    token_file.chmod(0o600)
    log = work / "server.log"

    base = flashgnn.open(ds)
    n = len(base)
    nb = base.neighbors(np.arange(n))
    rows = base.features(np.arange(n))
    model = Model([set(int(x) for x in l) for l in nb], np.array(rows), clients)
    dim, dtype = rows.shape[1], rows.dtype
    del base
    rnd = random.Random(seed)
    counts = dict(rounds=0, acked=0, ops_acked=0, pending_applied=0, pending_absent=0, lost=0, nodes_checked=0)
    lock = threading.Lock()
    next_id = [1]
    bar = None
    if progress:
        from tqdm import tqdm

        bar = tqdm(total=kills, desc="crashtest", unit="kill")

    def verify_via(client):
        _check(model, _reader(client.get_neighbors, client.get_embed, READ_THREADS), counts)

    try:
        for k in range(kills + 1):
            srv = _start_server(ds, token_file, log, ["--max-inflight", str(clients + 4), "--no-preload"])
            with Client(srv.address, token=token, timeout=RPC_TIMEOUT_S) as c:
                verify_via(c)
            if k == kills:
                rc, out = srv.stop()
                if rc != 0 or "stopped after" not in out:
                    raise Violation(f"server exited {rc} on SIGTERM (want 0 and a summary line): {out[-500:]}")
                break
            counts["rounds"] += 1
            stop = threading.Event()
            errors: list[BaseException] = []

            def body(t):
                try:
                    _client_loop(srv.address, token, model, lock, t, a, dim, dtype, next_id, counts, stop)
                except BaseException as e:  # noqa: BLE001 - re-raised in the main thread
                    errors.append(e)

            threads = [threading.Thread(target=body, args=(t,)) for t in range(clients)]
            for th in threads:
                th.start()
            time.sleep(rnd.uniform(0.0, max_delay))
            srv.kill()
            stop.set()
            for th in threads:
                th.join()
            if errors:
                raise errors[0]
            if bar is not None:
                bar.update(1)
                bar.set_postfix(acked=counts["acked"], applied_at_kill=counts["pending_applied"])
    finally:
        if bar is not None:
            bar.close()

    report = dict(counts, kills=kills, seed=seed, clients=clients, num_nodes=n, workdir=str(work))
    if compact:
        g = flashgnn.MutableGraph(str(ds), writable=True)
        try:
            _check(model, _reader(g.get_neighbors, g.get_embed), counts)
            rep = g.compact(progress=False)
            gen = int(g.generation)
            _check(model, _reader(g.get_neighbors, g.get_embed), counts)
        finally:
            g.close()
        gen_dir = ds if gen == 0 else ds / "mut" / f"gen-{gen}"
        flashgnn.verify(gen_dir, progress=False)
        report.update(generation=gen, verified=str(gen_dir.relative_to(work)), compact=rep)
    report["lost"] = counts["lost"]
    report["seconds"] = time.perf_counter() - t0
    if own_tmp and report["lost"] == 0:
        shutil.rmtree(work, ignore_errors=True)
        report["workdir"] = None
    return report


def main(argv=None) -> int:
    p = argparse.ArgumentParser(prog="python -m benchmarks.crashtest", description=__doc__.split("\n\n")[0])
    p.add_argument("dataset", help="a dataset built with --symmetrize (it is copied, never modified)")
    p.add_argument("--kills", type=int, default=20)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--clients", type=int, default=4, help="concurrent writers (group commit)")
    p.add_argument("--edges", type=int, default=4, help="add_edge ops per batch (plus up to half as many delete_edge)")
    p.add_argument("--embeds", type=int, default=2, help="update_embed ops per batch")
    p.add_argument("--nodes", type=int, default=128,
                   help="writers touch node ids below this (the read-back after each kill checks all of them)")
    p.add_argument("--max-delay", type=float, default=0.4, help="seconds of writes before each SIGKILL, drawn uniformly")
    p.add_argument("--workdir", help="keep the copy and server log here (default: a temp dir, removed on success)")
    p.add_argument("--no-compact", action="store_true", help="skip the final compaction + verify")
    p.add_argument("--json", action="store_true")
    a = p.parse_args(argv)
    try:
        rep = run(a.dataset, kills=a.kills, seed=a.seed, clients=a.clients, edges=a.edges, embeds=a.embeds, nodes=a.nodes,
                  max_delay=a.max_delay, workdir=a.workdir, compact=not a.no_compact, progress=not a.json)
    except Violation as e:
        print(f"crashtest: FAILED (seed {a.seed}): {e}", file=sys.stderr)
        return 1
    if a.json:
        from flashgnn._util import print_json as _print_json

        _print_json(rep)
    else:
        print(
            f"crashtest: {rep['kills']} kills, {rep['acked']} batches acked ({rep['ops_acked']} ops), "
            f"{rep['pending_applied'] + rep['pending_absent']} in flight at a kill ({rep['pending_applied']} applied whole, "
            f"{rep['pending_absent']} absent whole), lost={rep['lost']}, partial=0"
            + (f", compacted to generation {rep['generation']} and verified" if "generation" in rep else "")
            + f" in {rep['seconds']:.1f} s (seed {a.seed})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
