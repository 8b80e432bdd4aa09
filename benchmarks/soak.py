"""`make soak`: a server under load and under faults for ``--minutes`` (default 10).

A real ``flashgnn serve`` (background scrub and background compaction on) serves a generated dataset
while client processes keep it busy — unit reads (``GetNeighbors``, ``GetEmbed``), durable writes
(``AddEdge``, each acknowledged pair remembered) and ``Run`` of a 2-layer GCN dataflow graph — through four
phases:

1. **normal** (the first 30 % of the run);
2. **disk full** (30-50 %): the file system holding the dataset and its write-ahead log is filled to the
   last block. Writes must fail cleanly (RESOURCE_EXHAUSTED: the store cuts its log back and refuses them)
   while reads and ``Run`` go on;
3. **space freed** (50-65 %): the filler is removed; writes must resume without a restart. A write sent
   before the store finished rolling back its last refused log write may still be refused (it was
   validated on top of the group that was not written; the server's ``Stats`` give when that rollback
   ended), but no log write begun after the space was freed may be refused;
4. **sector repaired** (the rest): the bad sector below reads again.

Until the repair, one 4 KiB page of ``graph.fg`` is a bad sector (``FLASHGNN_FAULT_READ``: every read of it
fails with EIO, in the server's engines and its store reads alike; ``FLASHGNN_FAULT_READ_WHILE`` ends it
when the soak removes a file). The nodes whose slots lie on it are found first, in a separate process under
the same fault: a ``GetNeighbors`` started before the repair must fail (DATA_LOSS) exactly for those, every
failed ``Run`` must name that page, and after the repair nothing may fail.

The server compacts whenever its delta holds ``--compact-delta`` bytes. A compaction must read the whole
base, so until the repair every one fails (and is retried after a back-off); one that succeeded then would
have folded a page it could not read: a wrong answer. After the repair compactions must succeed under the
load, and the memory they hand back is what the late window of the memory figures measures.

The file system is an ext4 image loop-mounted for the run (root and ``mount`` needed: a real ENOSPC from
a real file system); where that is not possible the disk-full phase is skipped and the report says so.

Checked and reported (nothing is a timed assertion; ``tests/serve/test_soak.py`` runs a short version and
asserts the invariants):

- requests, errors by status code, p50/p99 latency, per operation and phase;
- **lost acknowledged writes**: after a graceful stop the store is reopened and every acknowledged edge
  looked up (must be 0);
- **wrong answers**: a read failing for a healthy node, succeeding for a node on the bad page, a ``Run``
  failing for any other reason (must be 0);
- **stuck requests**: a call outliving its deadline by more than 2 s, and ``Stats.in_flight`` at the end
  (must be 0);
- **memory**: the server's RSS sampled every 2 s; drift = mean of the last tenth of the run against the
  mean of its second tenth (the first is warm-up; target < 5 %), and the mean of every minute (a late climb
  shows there even when the two windows agree). Every acknowledged write stays in the mutable store's
  in-memory delta until a compaction (``Stats`` ``delta_bytes``, sampled every 5 s), so the drift is also
  given net of the delta's growth: memory the added data explains is not a leak.
"""

from __future__ import annotations

import argparse
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

PAGE = 4096
DEADLINE_S = 10.0
STUCK_S = DEADLINE_S + 2.0
# When the file system is filled and freed and the bad sector repaired, as fractions of the run (the phases
# are then timed by the events).
FULL_AT, FREE_AT, REPAIR_AT = 0.30, 0.50, 0.65


def _say(msg: str) -> None:
    print(f"soak: {msg}", file=sys.stderr, flush=True)


# -- the file system ------------------------------------------------------------------------------------

def mount_image(work: Path, size: int) -> Path | None:
    """An ext4 image of ``size`` bytes (no reserved blocks) loop-mounted at ``work/mnt``; None where this
    process may not mount one."""
    img, mnt = work / "fs.img", work / "mnt"
    mnt.mkdir(parents=True, exist_ok=True)
    try:
        with open(img, "wb") as f:
            f.truncate(size)
        subprocess.run(["mkfs.ext4", "-q", "-F", "-m", "0", str(img)], check=True, capture_output=True)
        subprocess.run(["mount", "-o", "loop", str(img), str(mnt)], check=True, capture_output=True)
    except (OSError, subprocess.CalledProcessError) as e:
        detail = e.stderr.decode(errors="replace").strip() if isinstance(e, subprocess.CalledProcessError) else e
        _say(f"no loop-mounted file system ({detail}); the disk-full phase is skipped")
        img.unlink(missing_ok=True)
        return None
    return mnt


def unmount(mnt: Path) -> None:
    """Unmount ``mnt`` (lazily if something still holds it, so no mount outlives the run)."""
    import gc

    gc.collect()  # datasets and graphs this process opened hold their files until collected
    if subprocess.run(["umount", str(mnt)], capture_output=True).returncode:
        r = subprocess.run(["umount", "-l", str(mnt)], capture_output=True, text=True)
        _say(f"{mnt} was busy at the end; detached lazily ({r.stderr.strip() or 'ok'})")


def fill(mnt: Path) -> int:
    """Fill the file system at ``mnt`` to its last block; returns the filler's bytes."""
    path = mnt / "filler"
    n = 0
    with open(path, "wb") as f:
        for chunk in (1 << 24, 1 << 20, PAGE):
            while True:
                try:
                    os.posix_fallocate(f.fileno(), n, chunk)
                    n += chunk
                except OSError:
                    break
        f.flush()
        os.fsync(f.fileno())
    return n


# -- the clients (one process each: grpc channels do not survive fork) -------------------------------------

def _client(kind, address, token, num_nodes, bad, t_end, seed, dfg, q):
    from flashgnn.serve.client import Client

    rng = np.random.default_rng(seed)
    bad = set(bad)
    good = np.setdiff1d(np.arange(num_nodes), np.fromiter(bad, np.int64, len(bad)))
    rec, acked = [], []
    with Client(address, token=token, timeout=DEADLINE_S) as c:
        while time.time() < t_end:
            t0 = time.time()
            code, note = "OK", None
            try:
                if kind == "get_neighbors":
                    note = int(rng.integers(0, num_nodes))
                    c.get_neighbors(note)
                elif kind == "get_embed":
                    c.get_embed(int(good[rng.integers(0, len(good))]))
                elif kind == "add_edge":
                    dst, src = (int(good[i]) for i in rng.integers(0, len(good), 2))
                    c.add_edge(dst, src)
                    acked.append((dst, src))
                else:
                    c.run(dfg, good[rng.integers(0, len(good), 8)])
            except Exception as e:  # noqa: BLE001 - every failure is recorded by its status code
                code = getattr(e, "code_name", type(e).__name__)  # a ServerError's status code, else the type
                note = (note, str(e))
            rec.append((kind, t0, time.time() - t0, code, note))
    q.put((rec, acked))


# -- the run ------------------------------------------------------------------------------------------------

def bad_nodes(ds: Path, fault: str) -> list[int]:
    """The nodes whose stored neighbour lists cannot be read under ``fault`` (found in a child process that
    reads every node's slot with the fault set, as the server will)."""
    code = ("import flashgnn, sys\n"
            "ds = flashgnn.open(sys.argv[1])\n"
            "bad = []\n"
            "for v in range(ds.num_nodes):\n"
            "    try:\n"
            "        ds.neighbors(v)\n"
            "    except OSError:\n"
            "        bad.append(v)\n"
            "print(' '.join(map(str, bad)))\n")
    env = dict(os.environ, FLASHGNN_FAULT_READ=fault)
    out = subprocess.run([sys.executable, "-c", code, str(ds)], env=env, check=True, capture_output=True, text=True)
    return [int(x) for x in out.stdout.split()]


def _rss(pid: int) -> tuple[int, int] | None:
    """(VmRSS, RssAnon) of ``pid`` in bytes: the anonymous part is the heap (what a leak grows); the rest is
    file pages the process maps (reclaimable)."""
    try:
        f = {line.split(":")[0]: int(line.split()[1]) * 1024
             for line in Path(f"/proc/{pid}/status").read_text().splitlines() if line.startswith(("VmRSS", "RssAnon"))}
    except OSError:
        return None
    return (f["VmRSS"], f["RssAnon"]) if "VmRSS" in f and "RssAnon" in f else None


def _gcn_dfg(feature_dim: int) -> bytes:
    import torch
    from torch_geometric.nn import GCN

    import flashgnn.dfg as dfg

    torch.manual_seed(0)
    return dfg.models.gcn(GCN(feature_dim, 32, 2, 8).eval().state_dict(), [5, 5]).to_bytes()


def soak(work: Path, minutes: float, scale: int, clients: dict, scrub_rate: str, loop: bool = True,
         compact_delta: str = "2MiB") -> dict:
    import flashgnn
    from flashgnn.serve.process import ServeProcess
    from flashgnn.serve.token import read_token_file

    work.mkdir(parents=True, exist_ok=True)
    raw = work / "raw"
    subprocess.run([sys.executable, "-m", "flashgnn.cli", "generate", "rmat", str(raw), "--scale", str(scale),
                    "--edge-factor", "8", "--dim", "32", "--seed", "3", "--force"], check=True, capture_output=True)
    staged = work / "built"
    flashgnn.build(raw, staged, symmetrize=True, dedup=True, force=True, progress=False)
    size = sum(f.stat().st_size for f in staged.rglob("*") if f.is_file())
    # Room for the log, the scrubber's state and the copy's slack: the filler takes the rest when it fills.
    mnt = mount_image(work, max(64 << 20, 2 * size + (64 << 20))) if loop else None
    root = mnt if mnt is not None else work / "plain"
    try:
        ds = root / "ds"
        if ds.exists():
            shutil.rmtree(ds)
        shutil.copytree(staged, ds)
        graph = ds / "graph.fg"
        page = (graph.stat().st_size // 2) // PAGE * PAGE
        fault = f"graph.fg@{page}+{PAGE}"
        bad = bad_nodes(ds, fault)
        _say(f"dataset {ds} ({size / 2**20:.1f} MiB), bad sector {fault}: {len(bad)} node(s) on it")
        opened = flashgnn.open(ds)
        n, dfg = opened.num_nodes, _gcn_dfg(opened.feature_dim)
        del opened  # its files stay open until collected: the mount must be released at the end
        token_file = work / "token"
        token_file.write_text("soak-token-0123456789abcdef\n")
        token_file.chmod(0o600)
        sector_bad = work / "sector-bad"  # the bad sector lasts while this file exists
        sector_bad.touch()
        env = dict(os.environ, FLASHGNN_FAULT_READ=fault, FLASHGNN_FAULT_READ_WHILE=str(sector_bad))
        server = ServeProcess(ds, token_file, "--scrub-rate", scrub_rate, "--compact-delta", compact_delta,
                              stderr_path=work / "server.err", env=env, timeout=120.0)
        token = read_token_file(token_file)
        seconds = 60.0 * minutes
        t_start = time.time()
        t_end = t_start + seconds
        ctx = mp.get_context("spawn")
        q = ctx.Queue()
        procs = []
        for kind, count in clients.items():
            for i in range(count):
                p = ctx.Process(target=_client, args=(kind, server.address, token, n, bad, t_end, 100 + len(procs),
                                                      dfg, q))
                p.start()
                procs.append(p)
        rss, delta, filled, freed, repaired, filler = [], [], None, None, None, 0
        compaction, scrub_damage = [], set()  # (t, generation, compactions, failures); damage any pass reported
        stats_client = server.client()
        last_print = last_stats = -1e9
        while time.time() < t_end:
            now = time.time() - t_start
            r = _rss(server.proc.pid)
            if r is not None:
                rss.append((now, *r))
            if now - last_stats >= 5:  # the mutable store's in-memory delta (data the writers added), compactions
                last_stats = now
                g = stats_client.stats().get("graph") or {}
                delta.append((now, int(g.get("delta_bytes") or 0)))
                compaction.append(_compaction_sample(now, g))
                for d in ((g.get("scrub") or {}).get("last_pass") or {}).get("damaged") or []:
                    scrub_damage.add((Path(d["file"]).name, d["kind"], d["offset"]))
            if mnt is not None and filled is None and now >= FULL_AT * seconds:
                filler = fill(mnt)
                filled = now
                _say(f"{now:6.1f} s: file system full ({filler / 2**20:.1f} MiB filler)")
            if filled is not None and freed is None and now >= FREE_AT * seconds:
                (mnt / "filler").unlink()
                os.sync()  # ext4 reuses freed blocks only once the journal commits the free
                freed = time.time() - t_start
                _say(f"{now:6.1f} s: space freed")
            if repaired is None and now >= REPAIR_AT * seconds:
                sector_bad.unlink()
                repaired = time.time() - t_start
                _say(f"{now:6.1f} s: bad sector repaired")
            if now - last_print >= 30:
                last_print = now
                _say(f"{now:6.1f} s of {seconds:.0f}: server RSS {rss[-1][1] / 2**20:.1f} MiB (anonymous "
                     f"{rss[-1][2] / 2**20:.1f})" if rss else "")
            time.sleep(2.0)
        recs, acked = [], []
        for _ in procs:
            rc, ac = q.get()
            recs += rc
            acked += ac
        for p in procs:
            p.join()
        st = stats_client.stats()
        compaction.append(_compaction_sample(time.time() - t_start, st.get("graph") or {}))
        stats_client.close()
        code, _ = server.stop()
        scrub = (st.get("graph") or {}).get("scrub")
        # Every acknowledged write is in the store after a restart (the log replayed).
        g = flashgnn.MutableGraph(ds, writable=False)
        lost = sum(1 for dst, src in acked if src not in set(g.get_neighbors(dst).tolist()))
        g.close()
        del g
    finally:
        if mnt is not None:
            unmount(mnt)
    return _report(recs, acked, lost, bad, fault, rss, delta, seconds, t_start, filled, freed, repaired, compaction,
                   st, scrub, scrub_damage, code, mnt is not None, work / "server.err")


def _compaction_sample(t: float, graph_stats: dict) -> tuple:
    """(t, generation, compactions, failed tries) from Stats' ``graph`` entry."""
    c = graph_stats.get("compaction") or {}
    return t, graph_stats.get("generation"), c.get("compactions"), c.get("failures")


def _phase(t: float, filled: float | None, freed: float | None, repaired: float | None) -> str:
    """The phase a request started in, by when the file system was filled and freed and the sector repaired
    (None: not yet)."""
    if repaired is not None and t >= repaired:
        return "sector repaired"
    if freed is not None and t >= freed:
        return "space freed"
    return "disk full" if filled is not None and t >= filled else "normal"


def _report(recs, acked, lost, bad, fault, rss, delta, seconds, t_start, filled, freed, repaired, compaction, st,
            scrub, scrub_damage, code, full, server_err) -> dict:
    bad = set(bad)
    page = fault.split("@")[1].split("+")[0]  # the bad page's offset, as a Run's error names it
    ops: dict = {}
    wrong = []
    stuck = 0
    refusal = (st.get("graph") or {}).get("last_space_refusal") or {}
    rolled_back = refusal.get("rolled_back_at", 0.0) - t_start  # the last rollback, on the run's clock
    if freed is not None and refusal and refusal["write_at"] - t_start >= freed:
        wrong.append(("add_edge", "RESOURCE_EXHAUSTED", f"a log write begun {refusal['write_at'] - t_start:.2f} s "
                      f"into the run was refused for space, after it was freed at {freed:.2f} s"))
    # Compactions (the generation) before the repair: each would have folded a page it could not read.
    unreadable_gen = max((x[1] or 0 for x in compaction if repaired is None or x[0] < repaired), default=0)
    if unreadable_gen:
        wrong.append(("compaction", f"generation {unreadable_gen} published while a page of the base could not be "
                      "read"))
    for kind, t0, lat, status, note in recs:
        ph = _phase(t0 - t_start, filled, freed, repaired)
        # A request that started before the repair and ended after it may see either state of the sector.
        either = repaired is not None and t0 - t_start < repaired <= t0 - t_start + lat
        bad_now = repaired is None or t0 - t_start < repaired
        o = ops.setdefault(ph, {}).setdefault(kind, {"requests": 0, "errors": {}, "lat": []})
        o["requests"] += 1
        if status == "OK":
            o["lat"].append(lat)
        else:
            o["errors"][status] = o["errors"].get(status, 0) + 1
        stuck += lat > STUCK_S
        if kind == "get_neighbors":
            v = note if status == "OK" else note[0]
            if not either and (status == "OK") == (bad_now and v in bad):
                wrong.append((kind, v, status))
        elif kind == "run" and status != "OK" and not (status == "DATA_LOSS" and page in note[1] and (bad_now or either)):
            wrong.append((kind, status, note[1][:200]))
        elif kind in ("get_embed",) and status != "OK":
            wrong.append((kind, status, note[1][:200]))
        elif kind == "add_edge" and status != "OK" and not (
                status == "RESOURCE_EXHAUSTED" and (ph == "disk full" or t0 - t_start < rolled_back)):
            wrong.append((kind, status, note[1][:200]))
    for ph in ops.values():
        for o in ph.values():
            lat = np.asarray(o.pop("lat")) * 1e3
            o["ok"] = int(len(lat))
            o["p50_ms"] = float(np.percentile(lat, 50)) if len(lat) else None
            o["p99_ms"] = float(np.percentile(lat, 99)) if len(lat) else None
    t = np.array([x[0] for x in rss])
    v = np.array([x[1] for x in rss], dtype=np.float64)
    anon = np.array([x[2] for x in rss], dtype=np.float64)
    win_early, win_late = (t >= 0.1 * seconds) & (t < 0.2 * seconds), t >= 0.9 * seconds
    early, late = v[win_early], v[win_late]
    drift = float(late.mean() / early.mean() - 1) if len(early) and len(late) else None
    anon_drift = float(anon[win_late].mean() / anon[win_early].mean() - 1) if len(early) and len(late) else None
    # The delta holds every acknowledged write in memory until a compaction folds it into a new generation:
    # growth it explains is data, not a leak. Net drift: RSS growth beyond the delta's growth.
    dt = np.array([x[0] for x in delta])
    dv = np.array([x[1] for x in delta], dtype=np.float64)
    d_early, d_late = dv[(dt >= 0.1 * seconds) & (dt < 0.2 * seconds)], dv[dt >= 0.9 * seconds]
    net = (float((late.mean() - (d_late.mean() - d_early.mean())) / early.mean() - 1)
           if drift is not None and len(d_early) and len(d_late) else None)
    return {
        "seconds": seconds, "bad_sector": fault, "bad_nodes": len(bad), "disk_full_phase": full,
        "filled_at_s": filled, "freed_at_s": freed, "repaired_at_s": repaired, "phases": ops,
        "compaction": {"threshold_bytes": ((st.get("graph") or {}).get("compaction") or {}).get("threshold_bytes"),
                       "generation_at_repair": unreadable_gen,
                       "generation_at_end": (st.get("graph") or {}).get("generation"),
                       "failures": compaction[-1][3] if compaction else None,
                       "last_error": ((st.get("graph") or {}).get("compaction") or {}).get("error"),
                       "samples": compaction},
        "scrub_damage_seen": sorted(scrub_damage),
        "acknowledged_writes": len(acked), "lost_acknowledged_writes": lost, "wrong_answers": len(wrong),
        "wrong_examples": wrong[:5], "stuck_requests": stuck, "in_flight_at_end": st.get("in_flight"),
        "rss_mib": {"min": float(v.min() / 2**20) if len(v) else None,
                    "max": float(v.max() / 2**20) if len(v) else None,
                    "early_mean": float(early.mean() / 2**20) if len(early) else None,
                    "late_mean": float(late.mean() / 2**20) if len(late) else None},
        "rss_drift": drift, "rss_drift_net_of_delta": net, "anon_drift": anon_drift,
        "anon_mib": {"early_mean": float(anon[win_early].mean() / 2**20) if len(early) else None,
                     "late_mean": float(anon[win_late].mean() / 2**20) if len(late) else None},
        "delta_mib": {"early_mean": float(d_early.mean() / 2**20) if len(d_early) else None,
                      "late_mean": float(d_late.mean() / 2**20) if len(d_late) else None},
        "anon_mib_per_minute": _per_minute(t, anon, seconds), "rss_mib_per_minute": _per_minute(t, v, seconds),
        "rss_samples": [(float(a), int(b), int(c)) for a, b, c in rss], "delta_samples": delta,
        "log_space_rollbacks": (st.get("graph") or {}).get("log_space_rollbacks"),
        "last_rollback_at_s": rolled_back if refusal else None,
        "scrub": scrub, "server_exit": code,
        "server_stderr_lines": len(Path(server_err).read_text(errors="replace").splitlines()),
    }


def _per_minute(t: np.ndarray, x: np.ndarray, seconds: float) -> list:
    """Mean of the samples ``x`` (bytes, taken at ``t`` s) in each minute of the run, in MiB (None: no sample)."""
    out = []
    for m in range(int(np.ceil(seconds / 60))):
        w = (t >= 60 * m) & (t < 60 * (m + 1))
        out.append(round(float(x[w].mean() / 2**20), 1) if w.any() else None)
    return out


def print_report(r: dict) -> None:
    print(f"{'phase':<12} {'op':<14} {'requests':>9} {'ok':>9} {'p50 ms':>8} {'p99 ms':>8}  errors")
    for ph, ops in r["phases"].items():
        for kind, o in sorted(ops.items()):
            f = lambda x: f"{x:8.2f}" if x is not None else "       -"  # noqa: E731
            print(f"{ph:<12} {kind:<14} {o['requests']:>9,} {o['ok']:>9,} {f(o['p50_ms'])} {f(o['p99_ms'])}  "
                  f"{o['errors'] or ''}")
    rs = r["rss_mib"]
    drift = f"{100 * r['rss_drift']:+.1f} %" if r["rss_drift"] is not None else "n/a"
    net = r["rss_drift_net_of_delta"]
    net = f"{100 * net:+.1f} %" if net is not None else "n/a"
    dm = r["delta_mib"]
    print(f"server RSS: {rs['early_mean']:.1f} MiB (second tenth) -> {rs['late_mean']:.1f} MiB (last tenth), drift "
          f"{drift}; min {rs['min']:.1f}, max {rs['max']:.1f} MiB; the store's delta {dm['early_mean'] or 0:.1f} -> "
          f"{dm['late_mean'] or 0:.1f} MiB; drift net of the delta {net}; anonymous memory "
          f"{r['anon_mib']['early_mean'] or 0:.1f} -> {r['anon_mib']['late_mean'] or 0:.1f} MiB"
          if rs["early_mean"] else "server RSS: too short")
    print(f"anonymous memory per minute (MiB): {r['anon_mib_per_minute']}")
    requests = sum(o["requests"] for ph in r["phases"].values() for o in ph.values())
    full = "run" if r["disk_full_phase"] else "skipped"
    comp = r["compaction"]
    print(f"compaction: generation {comp['generation_at_repair']} at the repair, {comp['generation_at_end']} at the "
          f"end; {comp['failures']} failed tries (last error: {comp['last_error']})")
    print(f"summary: {r['seconds'] / 60:.1f} min, {requests:,} "
          f"requests; {r['acknowledged_writes']:,} acknowledged writes, {r['lost_acknowledged_writes']} lost; "
          f"{r['wrong_answers']} wrong answers; {r['stuck_requests']} stuck; in flight at end {r['in_flight_at_end']}; "
          f"RSS drift {drift} ({net} net of the delta's growth); disk-full phase {full} "
          f"({r['log_space_rollbacks']} log rollbacks); bad sector {r['bad_sector']} ({r['bad_nodes']} nodes, repaired at "
          f"{r['repaired_at_s'] or 0:.0f} s); {comp['generation_at_end']} compactions")


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m benchmarks.soak", description=__doc__.split("\n\n")[0])
    ap.add_argument("--minutes", type=float, default=10.0)
    ap.add_argument("--scale", type=int, default=15, help="R-MAT scale of the served graph (2^scale nodes)")
    ap.add_argument("--work", type=Path, default=None, help="work directory (default: a temporary one)")
    ap.add_argument("--readers", type=int, default=2)
    ap.add_argument("--writers", type=int, default=2)
    ap.add_argument("--runners", type=int, default=1)
    ap.add_argument("--scrub-rate", default="20MB/s")
    ap.add_argument("--compact-delta", default="2MiB", help="the server's --compact-delta")
    ap.add_argument("--no-loop", action="store_true", help="skip the loop-mounted file system (no disk-full phase)")
    ap.add_argument("--json", action="store_true")
    a = ap.parse_args(argv)
    clients = {"get_neighbors": a.readers, "get_embed": 1, "add_edge": a.writers, "run": a.runners}
    with tempfile.TemporaryDirectory(prefix="flashgnn-soak-") as tmp:
        r = soak(a.work or Path(tmp), a.minutes, a.scale, clients, a.scrub_rate, loop=not a.no_loop,
                 compact_delta=a.compact_delta)
    if a.json:
        print(json.dumps(r, indent=2, default=str))
    else:
        print_report(r)
    return 0


if __name__ == "__main__":
    sys.exit(main())
