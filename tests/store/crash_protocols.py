"""The update protocols whose power-loss crash states are checked, and the
check of each (docs/reliability.md § *Power-loss crash states*).

Each protocol prepares a starting tree (made durable before the run, so it
is the state a crash can always fall back to), a driver that runs flashgnn
and writes one line to an acknowledgement file each time flashgnn returned
a promise (a build published, a batch applied, a checkpoint saved), and a
check that a crash state keeps every promise:

- ``build``: ``flashgnn.build`` publishing a new dataset (rename) and
  replacing one (``--force``: ``RENAME_EXCHANGE``, then the old one
  removed). Each output is absent (only if it did not exist and the build
  was not acknowledged), the old dataset, or the new one; whatever is there
  opens and passes ``verify``; once acknowledged it is the new one.
- ``generate``: ``flashgnn generate`` into ``runs/a/raw`` under a root
  where ``runs/`` does not exist: nothing there until it returned, then the
  complete output (every file as the run wrote it).
- ``wal``: four threads applying batches of new edges to a
  ``MutableGraph`` (group commit: one ``pwrite`` + ``fdatasync`` for the
  batches that queued together). Every acknowledged batch is present; every
  batch is present whole or not at all; a writable open then verifies clean.
- ``compact``: the plan of ``test_mutable_crash.py`` (batches, two
  ``compact()`` and, in the long run, ``update_graph()``): the store equals
  the model after the acknowledged steps, or after one more (the step in
  flight may have become durable); a writable open removes every leftover
  and verifies clean.
- ``checkpoint``: ``flashgnn train --checkpoint`` over three epochs:
  ``checkpoint.pt`` is absent (only before the first save returned) or,
  byte for byte, one of the versions the run published, never older than
  the last acknowledged one.
- ``scrub``: a scrub pass checkpointing every 4 KiB; whatever
  ``.scrub/progress.json`` a crash leaves, ``scrub --resume`` completes and
  finds no damage (the dataset is clean).
- ``toy-*``: a 30-line writer of one file, in three variants, to prove the
  method catches what it must: ``toy-no-file-fsync`` renames before the
  data is durable, ``toy-no-dir-fsync`` acknowledges before the rename is
  durable (both must fail), ``toy-durable`` does both right (must pass).

``python tests/store/crash_protocols.py`` (``make crash-states``) runs them
all and prints one line per protocol and a summary; ``--json`` writes the
figures.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
for p in (HERE, HERE.parent):  # crashstates, test_mutable_crash, conftest
    if str(p) not in sys.path:
        sys.path.insert(0, str(p))

import numpy as np  # noqa: E402

import crashstates as cs  # noqa: E402
import flashgnn  # noqa: E402

# Crash-state budget: short = the default test run (about 15 s in all), long = `make crash-states`.
SAMPLES = {"short": 1, "long": 12}  # seeded random states per crash point
LIMIT = {"short": 15, "long": None}  # states checked per protocol and model (None: every distinct one)


def _env() -> dict:
    env = dict(os.environ)
    env.pop("FLASHGNN_FAULT", None)
    # The driver imports the same flashgnn as this process.
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)
    env.update(OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", MKL_NUM_THREADS="1")
    return env


def _fsync_tree(root: Path) -> None:
    """Make the starting tree durable: the state a crash falls back to."""
    for d, dirs, files in os.walk(root):
        for f in files:
            fd = os.open(os.path.join(d, f), os.O_RDONLY)
            os.fsync(fd)
            os.close(fd)
        fd = os.open(d, os.O_RDONLY)
        os.fsync(fd)
        os.close(fd)


def _acked(state) -> list[str]:
    return b"".join(state.acks).decode().split()


def _dataset_id(path: Path):
    return json.loads((path / "manifest.json").read_text())["dataset_id"]


def _tiny_dataset(d: Path, seed: int = 11) -> Path:
    """A 256-node symmetric dataset with 8-dim features, built once per work directory."""
    ds = d / f"tiny-{seed}"
    if not (ds / "manifest.json").exists():
        flashgnn.generate(d / f"tiny-{seed}-raw", progress=False, scale=8, edge_factor=4, dim=8, classes=3, seed=seed)
        flashgnn.build(d / f"tiny-{seed}-raw", ds, progress=False, symmetrize=True, dedup=True,
                       memory_budget=80 << 20)
    return ds


class Protocol:
    """``prepare(work)`` writes the starting tree under ``self.root`` and
    returns the driver's argv; ``expect(trace)`` reads what the check needs
    from the recorded run; ``check(path, state)`` raises AssertionError."""

    name = ""
    must_fail = False  # the toys that prove the checker can fail

    def record(self, work: Path) -> cs.Trace:
        self.work = work
        self.root = work / "root"
        self.ack = work / "ack"
        argv = self.prepare(work)
        _fsync_tree(self.root)
        tr = cs.record(argv, self.root, self.ack, work / "strace.txt", env=_env())
        self.expect(tr)
        return tr

    def expect(self, tr: cs.Trace) -> None:
        pass


# --- build -----------------------------------------------------------------

BUILD_DRIVER = r"""
import os, sys, flashgnn
raw, root, ack = sys.argv[1:4]
fd = os.open(ack, os.O_WRONLY | os.O_APPEND)
for out in ("new", "ds"):
    flashgnn.build(raw, os.path.join(root, out), progress=False, symmetrize=True, dedup=True, force=True,
                   memory_budget=80 << 20)
    os.write(fd, (out + "\n").encode())
"""


class Build(Protocol):
    name = "build"

    def prepare(self, work):
        old = _tiny_dataset(work, seed=11)
        flashgnn.generate(work / "raw-new", progress=False, scale=8, edge_factor=4, dim=8, classes=3, seed=12)
        self.root.mkdir()
        shutil.copytree(old, self.root / "ds")
        self.old_id = _dataset_id(self.root / "ds")
        (work / "driver.py").write_text(BUILD_DRIVER)
        return [sys.executable, str(work / "driver.py"), str(work / "raw-new"), str(self.root), str(self.ack)]

    def expect(self, tr):
        final = tr.final_tree()
        self.new_ids = {out: json.loads(final[f"{out}/manifest.json"])["dataset_id"] for out in ("new", "ds")}
        assert self.new_ids["ds"] != self.old_id

    def check(self, path, state):
        acked = _acked(state)
        for out, old in (("new", None), ("ds", self.old_id)):
            p = path / out
            if not p.exists():
                why = "acknowledged" if out in acked else "had a dataset before"
                assert old is None and out not in acked, f"{out}: missing ({why})"
                continue
            assert (p / "manifest.json").is_file(), f"{out}: a directory without manifest.json: {sorted(os.listdir(p))}"
            got = _dataset_id(p)
            want = {self.new_ids[out]} if out in acked else {self.new_ids[out], old}
            assert got in want, f"{out}: dataset_id {got}, expected one of {sorted(x for x in want if x)}"
            flashgnn.verify(p, progress=False)  # raises CorruptDatasetError on a half-written dataset


# --- generate ------------------------------------------------------------------

GENERATE_DRIVER = r"""
import os, sys, flashgnn
out, ack = sys.argv[1:3]
fd = os.open(ack, os.O_WRONLY | os.O_APPEND)
flashgnn.generate(out, progress=False, scale=7, edge_factor=4, dim=8, seed=3)
os.write(fd, b"generated\n")
"""


class Generate(Protocol):
    """``flashgnn generate`` into a path whose parent directories do not exist
    yet (it creates them): absent until acknowledged, then complete."""

    name = "generate"
    rel = "runs/a/raw"

    def prepare(self, work):
        self.root.mkdir()
        (work / "driver.py").write_text(GENERATE_DRIVER)
        return [sys.executable, str(work / "driver.py"), str(self.root / self.rel), str(self.ack)]

    def expect(self, tr):
        final = tr.final_tree()
        self.files = {p: b for p, b in final.items() if p.startswith(self.rel + "/")}
        assert f"{self.rel}/generate.json" in self.files

    def check(self, path, state):
        out = path / self.rel
        if not out.exists():
            assert not _acked(state), f"{self.rel}: missing after generate returned"
            return
        got = {str(p.relative_to(path)): p.read_bytes() for p in out.rglob("*") if p.is_file()}
        assert got == self.files, f"{self.rel}: differs from the generated output: " \
            f"{sorted(k for k in set(got) | set(self.files) if got.get(k) != self.files.get(k))[:4]}"


# --- mutable store: group commit ---------------------------------------------

WAL_DRIVER = r"""
import json, os, sys, threading, flashgnn
root, plan, ack = sys.argv[1:4]
batches = json.load(open(plan))
fd = os.open(ack, os.O_WRONLY | os.O_APPEND)
g = flashgnn.MutableGraph(root)
def worker(t):
    for b, edges in enumerate(batches[t]):
        g.apply([("add_edge", a, c) for a, c in edges])
        os.write(fd, f"{t}.{b}\n".encode())
threads = [threading.Thread(target=worker, args=(t,)) for t in range(len(batches))]
[t.start() for t in threads]
[t.join() for t in threads]
print(json.dumps(g.stats()))
g.close()
"""


class Wal(Protocol):
    name = "wal"
    threads, batches, edges = 4, 5, 3

    def prepare(self, work):
        ds = _tiny_dataset(work)
        shutil.copytree(ds, self.root)
        g = flashgnn.MutableGraph(ds, writable=False)
        have = {(v, int(u)) for v in range(g.num_nodes) for u in g.get_neighbors(v)}
        n = g.num_nodes
        g.close()
        rng = np.random.default_rng(5)
        plan, used = [], set()
        for _ in range(self.threads):
            plan.append([])
            for _ in range(self.batches):
                es = []
                while len(es) < self.edges:
                    a, c = (int(x) for x in rng.integers(n, size=2))
                    if a != c and (a, c) not in have and (a, c) not in used:
                        used |= {(a, c), (c, a)}
                        es.append((a, c))
                plan[-1].append(es)
        self.plan = plan
        (work / "plan.json").write_text(json.dumps(plan))
        (work / "driver.py").write_text(WAL_DRIVER)
        return [sys.executable, str(work / "driver.py"), str(self.root), str(work / "plan.json"), str(self.ack)]

    def check(self, path, state):
        acked = set(_acked(state))
        g = flashgnn.MutableGraph(path, writable=False)
        try:
            nb = {}
            for t, bs in enumerate(self.plan):
                for b, es in enumerate(bs):
                    there = []
                    for a, c in es:
                        na = nb.setdefault(a, set(g.get_neighbors(a).tolist()))
                        nc = nb.setdefault(c, set(g.get_neighbors(c).tolist()))
                        assert (c in na) == (a in nc), f"edge ({a}, {c}) present in one direction only"
                        there.append(c in na)
                    assert all(there) or not any(there), f"batch {t}.{b} half visible: {there}"
                    assert all(there) or f"{t}.{b}" not in acked, f"acknowledged batch {t}.{b} lost"
        finally:
            g.close()
        _reopen_clean(path)


def _reopen_clean(path: Path) -> None:
    """A writable open (cuts a torn tail, removes leftovers) leaves a store that verifies clean."""
    if (path / "mut").exists():
        flashgnn.MutableGraph(path).close()
    rep = flashgnn.verify(path, progress=False)
    if "mutable" in rep:
        m = rep["mutable"]
        assert m["leftovers"] == [] and m["torn_tail_bytes"] == 0, f"after a writable open: {m}"


# --- mutable store: apply, compaction, update_graph ---------------------------


class Compact(Protocol):
    name = "compact"

    def __init__(self, layout: str = "BBCBBCB"):
        self.layout = layout

    def prepare(self, work):
        import test_mutable_crash as tmc

        ds = _tiny_dataset(work)
        shutil.copytree(ds, self.root)
        m0 = tmc.base_model(ds)
        self.steps, self.models = _plan(tmc, m0, self.layout, seed=3)
        (work / "plan.json").write_text(json.dumps(self.steps))
        (work / "driver.py").write_text(tmc.CHILD)
        return [sys.executable, str(work / "driver.py"), str(self.root), str(work / "plan.json"), str(self.ack)]

    def check(self, path, state):
        import test_mutable_crash as tmc

        k = len(_acked(state))
        cands = [j for j in (k, k + 1) if j < len(self.models)]
        g = flashgnn.MutableGraph(path, writable=False)
        errs = [tmc.matches(g, self.models[j]) for j in cands]
        g.close()
        assert None in errs, f"{k} steps acknowledged: the store matches neither model: {errs}"
        j = cands[errs.index(None)]
        if (path / "mut").exists():
            g = flashgnn.MutableGraph(path)
            gen = g.generation
            err = tmc.matches(g, self.models[j])
            g.close()
            assert err is None, f"after a writable open: {err}"
            want = {"CURRENT", "LOCK", f"wal-{gen}.log"} | ({f"gen-{gen}", f"free-{gen}.bin"} if gen else set())
            have = set(os.listdir(path / "mut"))
            assert have == want, f"leftovers after a writable open: {sorted(have)}"
        _reopen_clean(path)


def _plan(tmc, m0, layout: str, seed: int):
    """test_mutable_crash.make_plan for an arbitrary layout of B(atch), C(ompact), U(pdate_graph)."""
    return tmc.make_plan(m0, None, seed, layout=layout)


# --- train checkpoints -------------------------------------------------------

TRAIN_DRIVER = r"""
import os, sys
import flashgnn.train.trainer as trainer
from flashgnn.train.__main__ import main
ds, ck, ack = sys.argv[1:4]
fd = os.open(ack, os.O_WRONLY | os.O_APPEND)
real = trainer.save_checkpoint
def save(directory, state):
    out = real(directory, state)
    os.write(fd, f"{state['epoch']}\n".encode())
    return out
trainer.save_checkpoint = save
sys.exit(main([ds, "--no-progress", "--epochs", "3", "--fanout", "4,2", "--batch-size", "64", "--hidden", "8",
               "--engine", "pread", "--checkpoint", ck]))
"""


SAVE_DRIVER = r"""
import os, sys, torch
from flashgnn.nn.checkpoint import save_checkpoint
ck, ack = sys.argv[1:3]
fd = os.open(ack, os.O_WRONLY | os.O_APPEND)
for epoch in (1, 2, 3):
    torch.manual_seed(epoch)
    save_checkpoint(ck, {"epoch": epoch, "model": {"w": torch.randn(64, 16), "b": torch.randn(16)}})
    os.write(fd, f"{epoch}\n".encode())
"""


class Checkpoint(Protocol):
    """``full``: a real ``flashgnn train`` run (about 9 s under strace: the
    long exploration); else the same ``save_checkpoint`` calls the trainer
    makes, on a small state (the default run)."""

    name = "checkpoint"

    def __init__(self, full: bool = True):
        self.full = full

    def prepare(self, work):
        self.root.mkdir()
        if self.full:
            (work / "driver.py").write_text(TRAIN_DRIVER)
            return [sys.executable, str(work / "driver.py"), str(_tiny_dataset(work)), str(self.root / "ck"),
                    str(self.ack)]
        # Two directories to create: the run directory and the checkpoint directory in it.
        self.root.joinpath("runs").mkdir(exist_ok=True)
        (work / "driver.py").write_text(SAVE_DRIVER)
        return [sys.executable, str(work / "driver.py"), str(self.root / "runs" / "a" / "ck"), str(self.ack)]

    @property
    def rel(self) -> str:
        return "ck/checkpoint.pt" if self.full else "runs/a/ck/checkpoint.pt"

    def expect(self, tr):
        import torch

        # Every version the run published: the file's bytes at each rename onto checkpoint.pt.
        self.versions = []
        for i, op in enumerate(tr.ops):
            if op[0] == "rename" and op[4] == "checkpoint.pt":
                self.versions.append(cs.materialise_tree(tr, i + 1, None, None)[self.rel])
        assert len(self.versions) == 3, f"{len(self.versions)} checkpoints published, expected 3"
        for v in self.versions:
            import io

            assert torch.load(io.BytesIO(v), weights_only=True)["epoch"] >= 1

    def check(self, path, state):
        acked = [int(e) for e in _acked(state)]
        f = path / self.rel
        if not f.exists():
            assert not acked, f"checkpoint.pt missing after epoch {acked[-1]}'s save returned"
            return
        b = f.read_bytes()
        assert b in self.versions, \
            f"checkpoint.pt ({len(b)} bytes) is none of the {len(self.versions)} versions published (torn)"
        got = self.versions.index(b) + 1
        assert not acked or got >= acked[-1], f"checkpoint.pt is epoch {got}'s after epoch {acked[-1]}'s save returned"


# --- scrub --resume state ------------------------------------------------------

SCRUB_DRIVER = r"""
import os, sys
from flashgnn import _core
from flashgnn.store.jobs import run_job
ds, ack = sys.argv[1:3]
fd = os.open(ack, os.O_WRONLY | os.O_APPEND)
rep = run_job(_core.start_scrub(ds, {"state": os.path.join(ds, ".scrub"), "checkpoint_bytes": 4096}), False)
assert rep["complete"] and rep["damaged_count"] == 0, rep
os.write(fd, b"done\n")
"""


class Scrub(Protocol):
    name = "scrub"

    def prepare(self, work):
        shutil.copytree(_tiny_dataset(work), self.root)
        (work / "driver.py").write_text(SCRUB_DRIVER)
        return [sys.executable, str(work / "driver.py"), str(self.root), str(self.ack)]

    def expect(self, tr):
        saves = sum(1 for op in tr.ops if op[0] == "rename" and op[4] == "progress.json")
        assert saves >= 5, f"the pass saved its progress {saves} times; the check wants several"

    def check(self, path, state):
        rep = flashgnn.scrub(path, resume=True, progress=False)
        assert rep["complete"] and rep["damaged_count"] == 0, f"scrub --resume: {rep['damaged'][:3]}"


# --- toys that prove the method ------------------------------------------------

TOY_DRIVER = r"""
import os, sys
root, ack, variant = sys.argv[1:4]
fd = os.open(ack, os.O_WRONLY | os.O_APPEND)
final = os.path.join(root, "value")
for v in range(1, 4):
    tmp = final + ".tmp"
    f = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
    os.write(f, (f"version {v} " * 300).encode())   # 3.6 KB: several sectors
    if variant != "no-file-fsync":
        os.fsync(f)
    os.close(f)
    os.rename(tmp, final)
    if variant != "no-dir-fsync":
        d = os.open(root, os.O_RDONLY)
        os.fsync(d)
        os.close(d)
    os.write(fd, f"{v}\n".encode())
"""


class Toy(Protocol):
    def __init__(self, variant: str):
        self.variant = variant
        self.name = f"toy-{variant}"
        self.must_fail = variant != "durable"

    def prepare(self, work):
        self.root.mkdir()
        (self.root / "value").write_bytes(("version 0 " * 300).encode())
        (work / "driver.py").write_text(TOY_DRIVER)
        return [sys.executable, str(work / "driver.py"), str(self.root), str(self.ack), self.variant]

    def check(self, path, state):
        acked = [int(v) for v in _acked(state)]
        b = (path / "value").read_bytes()
        versions = [(f"version {v} " * 300).encode() for v in range(4)]
        assert b in versions, f"value is torn or empty ({len(b)} bytes)"
        got = versions.index(b)
        assert not acked or got >= acked[-1], f"value is version {got} after version {acked[-1]} was acknowledged"


def protocols(mode: str) -> list[Protocol]:
    compact = Compact("BBCBBCB" if mode == "short" else "BBBCBBUBBCB")
    return [Toy("no-file-fsync"), Toy("no-dir-fsync"), Toy("durable"), Build(), Generate(), Wal(), compact,
            Checkpoint(full=mode == "long"), Scrub()]


def run_protocol(p: Protocol, work: Path, mode: str, seed: int) -> dict:
    """Record ``p`` once and check its crash states; figures and failures."""
    t0 = time.perf_counter()
    tr = p.record(work)
    t1 = time.perf_counter()
    stats = cs.explore(tr, p.check, work / "states", samples=SAMPLES[mode], seed=seed, limit=LIMIT[mode])
    stats.update(protocol=p.name, ops=len(tr.ops), syncs=sum(1 for op in tr.ops if op[0] in ("sync", "syncall")),
                 acks=len(tr.acks(len(tr.ops))), must_fail=p.must_fail,
                 record_seconds=round(t1 - t0, 2), check_seconds=round(time.perf_counter() - t1, 2))
    stats["ok"] = bool(stats["failures"]) == p.must_fail
    return stats


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description="Power-loss crash states of flashgnn's update protocols "
                                             "(docs/reliability.md § Power-loss crash states).")
    ap.add_argument("--long", action="store_true", help="every distinct state, 12 random samples per crash point")
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--protocol", action="append", help="run only these (repeatable)")
    ap.add_argument("--json", help="write the figures to this file")
    a = ap.parse_args(argv)
    mode = "long" if a.long else "short"
    results = []
    with tempfile.TemporaryDirectory(prefix="crash-states-") as tmp:
        for p in protocols(mode):
            if a.protocol and p.name not in a.protocol:
                continue
            work = Path(tmp) / p.name
            work.mkdir()
            s = run_protocol(p, work, mode, a.seed)
            results.append(s)
            verdict = "ok" if s["ok"] else "FAILED"
            expect = " (expected to fail: proves the check)" if p.must_fail else ""
            print(f"{p.name:18} {s['states']:5} states ({s['ext4']} ext4, {s['strict']} strict; "
                  f"{s['distinct']} distinct) "
                  f"at {s['points']:3} crash points, {s['ops']} ops, "
                  f"{s['syncs']} syncs, {s['acks']} acks; {len(s['failures'])} failing{expect}: {verdict} "
                  f"({s['record_seconds']} s recording, {s['check_seconds']} s checking)", flush=True)
            for f in s["failures"][:2]:
                print(f"    {f}", flush=True)
    bad = [s["protocol"] for s in results if not s["ok"]]
    real = [s for s in results if not s["must_fail"]]
    per = ", ".join(f"{s['protocol']} {s['states']}" for s in results)
    print(f"crash states: {sum(s['states'] for s in results)} explored ({per}); "
          f"failures in real protocols: {sum(len(s['failures']) for s in real)}; "
          f"{'all as expected' if not bad else 'NOT as expected: ' + ', '.join(bad)}")
    if a.json:
        Path(a.json).write_text(json.dumps({"mode": mode, "seed": a.seed, "protocols": results}, indent=1))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
