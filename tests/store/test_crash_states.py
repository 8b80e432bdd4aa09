"""Power-loss crash states of flashgnn's update protocols (docs/reliability.md
§ *Power-loss crash states*; promises 1 and 2, train checkpoints, scrub
progress).

Each protocol of ``crash_protocols.py`` runs once under strace; the replayer
(``crashstates.py``) builds the states a power loss may leave under the ext4
``data=ordered`` model and under the stricter per-directory model, and the
protocol's check runs on each. The method is shown to fail where it must:
three toy writers (rename before the data is durable; acknowledge before the
rename is durable; both right) give failures exactly for the two broken
ones, and the recorder refuses a write it cannot see (a shared mmap) instead
of missing it. Default run: a seeded sample of 15 states per protocol and
model (about 15 s in all); ``-m slow`` and ``make crash-states``: every
distinct state with 12 random samples per crash point.
"""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

import crash_protocols as cp
import crashstates as cs


def _strace_works() -> str | None:
    if shutil.which("strace") is None:
        return "strace is not installed"
    r = subprocess.run(["strace", "-f", "-o", "/dev/null", "true"], capture_output=True, text=True)
    return None if r.returncode == 0 else f"strace cannot trace here: {r.stderr.strip()[:200]}"


pytestmark = pytest.mark.skipif(_strace_works() is not None, reason=str(_strace_works()))


@pytest.fixture(scope="module")
def recorded(tmp_path_factory):
    """Each short-mode protocol recorded once: name -> (protocol, trace, work dir)."""
    out = {}
    base = tmp_path_factory.mktemp("crash-states")
    for p in cp.protocols("short"):
        work = base / p.name
        work.mkdir()
        out[p.name] = (p, p.record(work), work)
    return out


def _explore(recorded, name, **kw):
    p, tr, work = recorded[name]
    d = work / f"states-{len(list(work.glob('states-*')))}"
    return cs.explore(tr, p.check, d, **{"samples": cp.SAMPLES["short"], "seed": 1, "limit": cp.LIMIT["short"], **kw})


def test_the_check_fails_on_broken_writers_and_passes_a_durable_one(recorded):
    """Renaming before the data is durable leaves an empty or torn file;
    acknowledging before the directory fsync loses an acknowledged version;
    the durable writer survives every state."""
    no_file = _explore(recorded, "toy-no-file-fsync", limit=None)
    no_dir = _explore(recorded, "toy-no-dir-fsync", limit=None)
    durable = _explore(recorded, "toy-durable", limit=None)
    assert no_file["failures"] and all("torn or empty" in f for f in no_file["failures"]), no_file
    assert no_dir["failures"] and any("was acknowledged" in f for f in no_dir["failures"]), no_dir
    assert durable["failures"] == [] and durable["states"] >= 10, durable


def test_the_recorder_refuses_what_it_cannot_see(tmp_path):
    """A shared writable mmap under the recorded root is refused by name, not
    silently missed; plain writes, pwrite, writev, lseek, O_TRUNC, ftruncate and
    RENAME_EXCHANGE are replayed to exactly the tree the run left."""
    root = tmp_path / "root"
    root.mkdir()
    (root / "a").write_bytes(b"old a")
    script = tmp_path / "w.py"
    script.write_text(r"""
import ctypes, mmap, os, sys
root, mode = sys.argv[1:3]
if mode == "mmap":
    f = os.open(os.path.join(root, "m"), os.O_RDWR | os.O_CREAT, 0o644)
    os.ftruncate(f, 4096)
    m = mmap.mmap(f, 4096, mmap.MAP_SHARED, mmap.PROT_WRITE | mmap.PROT_READ)
    m[:5] = b"hello"
    m.flush()
    sys.exit(0)
f = os.open(os.path.join(root, "b"), os.O_RDWR | os.O_CREAT | os.O_TRUNC, 0o644)
os.write(f, b"0123456789" * 100)
os.pwrite(f, b"XY", 3)
os.lseek(f, 10, os.SEEK_SET)
os.writev(f, [b"ab", b"cd"])
os.ftruncate(f, 700)
os.fsync(f)
g = os.open(os.path.join(root, "a"), os.O_WRONLY | os.O_TRUNC)
os.write(g, b"new a")
os.mkdir(os.path.join(root, "d"))
libc = ctypes.CDLL(None, use_errno=True)
assert libc.renameat2(-100, os.path.join(root, "a").encode(), -100, os.path.join(root, "b").encode(), 2) == 0
""")
    ack = tmp_path / "ack"
    tr = cs.record([sys.executable, str(script), str(root), "plain"], root, ack, tmp_path / "t1")
    assert {"link", "write", "trunc", "sync", "rename"} <= set(tr.summary())
    assert tr.final_tree() == cs.read_tree(root) and tr.final_tree()["b"] == b"new a"
    with pytest.raises(cs.Unsupported, match="shared writable mmap"):
        cs.record([sys.executable, str(script), str(root), "mmap"], root, ack, tmp_path / "t2")


@pytest.mark.parametrize("name", ["build", "generate", "wal", "compact", "checkpoint", "scrub"])
def test_power_loss_states_keep_every_promise(recorded, name, suite_report):
    """No crash state of the protocol breaks its promise (see crash_protocols.py)."""
    s = _explore(recorded, name)
    p, tr, _ = recorded[name]
    suite_report.append(f"power-loss crash states, {name}: {s['states']} checked ({s['ext4']} ext4, "
                        f"{s['strict']} per-directory) of {s['distinct']} distinct, {s['points']} crash points; "
                        f"failures: {len(s['failures'])}")
    assert s["failures"] == [], "\n".join(s["failures"])
    assert s["states"] >= 10 and tr.acks(len(tr.ops)), s


def test_found_an_acknowledged_checkpoint_lost_with_its_new_directory(recorded):
    """Regression: ``save_checkpoint`` created ``--checkpoint`` (and its
    parents) without an fsync of their parents; under the per-directory
    model the state "only what the fsyncs forced" after the first save
    returned had no ``ck/`` at all. Every deterministic state of both models
    is checked here, and the states that would show the bug are there."""
    p, tr, _ = recorded["checkpoint"]
    s = _explore(recorded, "checkpoint", samples=0, limit=None)
    assert s["failures"] == [], "\n".join(s["failures"])
    # The run creates two directories; each is made durable in its parent by an fsync of the parent.
    made = [op for op in tr.ops if op[0] == "link" and op[4] == "d"]
    synced = {op[1] for op in tr.ops if op[0] == "sync"}
    assert len(made) == 2 and all(parent in synced for _, parent, _, _, _ in made)


def test_found_a_generate_output_lost_with_its_new_parent(recorded):
    """Regression: ``flashgnn generate`` created the missing parents of its
    output with a plain ``create_dir_all``; under the per-directory model the
    state "only what the fsyncs forced" at the end of the run (acknowledged)
    had no ``runs/``. ``flashgnn_io::create_dir_all_durable`` fsyncs each new
    directory's parent; every deterministic state of both models passes."""
    s = _explore(recorded, "generate", samples=0, limit=None)
    assert s["failures"] == [], "\n".join(s["failures"])
    _, tr, _ = recorded["generate"]
    made = [op for op in tr.ops if op[0] == "link" and op[4] == "d" and not op[2].startswith(".")]
    synced = {op[1] for op in tr.ops if op[0] == "sync"}
    # `raw` itself is the temporary directory renamed into place (its parent fsynced by publish_dir).
    assert [op[2] for op in made] == ["runs", "a"] and all(op[1] in synced for op in made)


def test_found_an_old_generation_left_without_its_manifest(recorded):
    """Regression: removing an old generation renamed ``gen-K`` to
    ``.gen-K.removing`` and removed its files without making the rename
    durable first. Under the per-directory model (``mut/``'s operations lost
    back to its last fsync, ``gen-K``'s own kept) a crash left a ``gen-K``
    without its manifest, which no later open recognises as its own: a
    leftover for ever (found by ``make crash-states``, seed 1). Now the rename
    is fsynced before the removal; every deterministic per-directory state
    from the first such rename on is checked."""
    p, tr, _ = recorded["compact"]
    renames = [i for i, op in enumerate(tr.ops) if op[0] == "rename" and op[4].endswith(".removing")]
    assert renames, "the plan removes no old generation"
    s = _explore(recorded, "compact", samples=0, limit=None, models=("strict",), points=lambda i: i > renames[0])
    assert s["failures"] == [], "\n".join(s["failures"])
    assert s["states"] >= 5, s


@pytest.mark.slow
def test_power_loss_states_long(tmp_path):
    """Every distinct state, 12 random samples per crash point, the full
    ``flashgnn train`` and a plan with update_graph (``make crash-states``)."""
    assert cp.main(["--long", "--json", str(tmp_path / "crash.json")]) == 0
