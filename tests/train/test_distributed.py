"""`torchrun` failures across processes and nodes (docs/training.md § *Data-parallel training*):

- two torchrun agents on loopback (``--nnodes 2``, a c10d rendezvous, each node with its own copy of the
  dataset) train to the same weights, optimizer state and best-epoch model, bit for bit, as one node running
  the same world size (default run);
- a damaged slot page in one node's copy ends the whole job: both agents exit non-zero well inside a bound (no
  rank left waiting in a collective) and the failing node's stderr names the file and the checksum (default
  run); so does ENOSPC writing rank 0's checkpoint (a 4 KiB tmpfs; root only, skipped elsewhere), its stderr
  naming errno and file (``slow``; tests/nn/test_checkpoint.py checks the error itself in the default run);
- a worker rank (rank 0, the writer, or rank 1) SIGKILLed after the first checkpoint is restarted by torchrun (``--max-restarts 1``), resumes
  with ``--resume`` from the last checkpoint (losing at most the epochs since it) and ends with the weights of
  an uninterrupted run, bit for bit (``slow``);
- a whole node (its agent's process group) SIGKILLed and started again with the same command rejoins the
  rendezvous; the job resumes from the checkpoint and ends with the uninterrupted run's weights (``slow``).

How: a scale-10 generated graph with dropout on (the default 0.2, so every rank's RNG state matters on
resume), gloo on CPU, one thread per rank. Every agent runs in its own process group with its output in a
file; every wait has a bound and a failed test kills the groups it started. Weights are compared from the
checkpoint rank 0 writes (``last``: the latest epoch's model, ``model``: the best epoch's, ``optimizer``).
"""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

import flashgnn  # noqa: E402
from flashgnn.nn.checkpoint import CHECKPOINT_FILE, load_checkpoint  # noqa: E402
from flashgnn.train import TrainError  # noqa: E402
from flashgnn.train.dist import OWN_STORE_VAR, Dist  # noqa: E402

from conftest import cli_env, generated_dataset  # noqa: E402

# Small and quick: 1,024 nodes, batches of 64 seeds, 16 hidden units (an epoch with evaluation takes ~50 ms).
TRAIN = ["--fanout", "5,3", "--batch-size", "64", "--hidden", "16", "--no-progress", "--threads", "1",
         "--workers", "1", "--resume"]
# torchrun's start (python, torch import, rendezvous) dominates: ~6 s per agent on 2 cores. Bounds are ~10x that.
RUN_TIMEOUT_S = 120


@pytest.fixture(scope="module")
def ds_path(tmp_path_factory):
    return generated_dataset(tmp_path_factory.mktemp("dist"), scale=10, edge_factor=8, dim=16, classes=4, seed=3,
                             split=(0.5, 0.1, 0.4))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Agent:
    """One ``torchrun`` agent (a "node") in its own process group, its stdout/stderr in files."""

    def __init__(self, log_dir: Path, name: str, args: list, env: dict | None = None):
        self.out, self.err = log_dir / f"{name}.out", log_dir / f"{name}.err"
        self.args = [str(a) for a in args]
        self.env = env or {}
        with open(self.out, "w") as o, open(self.err, "w") as e:
            self.proc = subprocess.Popen([sys.executable, "-m", "torch.distributed.run", *self.args], stdout=o,
                                         stderr=e, env=cli_env(**self.env), start_new_session=True)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout=timeout)

    def kill(self) -> None:
        """SIGKILL the agent and its workers (the whole node). torchrun starts each worker in a session of its
        own, so the agent's process group does not hold them: every descendant is killed by pid, the workers
        first (the agent would otherwise notice and start new ones)."""
        for pid in [*_descendants(self.proc.pid), self.proc.pid]:
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        try:
            os.killpg(self.proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.proc.wait(timeout=30)

    def workers(self) -> dict[int, int]:
        """{RANK: pid} of the agent's live worker processes."""
        out = {}
        for pid in _children(self.proc.pid):
            try:
                env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            rank = [e[5:] for e in env if e.startswith(b"RANK=")]
            if rank:
                out[int(rank[0])] = pid
        return out

    def stdout(self) -> str:
        return self.out.read_text()

    def stderr(self) -> str:
        return self.err.read_text()


def _descendants(pid: int) -> list[int]:
    """Every process below ``pid``, deepest first."""
    out = []
    for kid in _children(pid):
        out += [*_descendants(kid), kid]
    return out


def _children(pid: int) -> list[int]:
    kids = []
    for task in Path(f"/proc/{pid}/task").glob("*"):
        try:
            kids += [int(k) for k in (task / "children").read_text().split()]
        except OSError:
            pass
    return kids


@pytest.fixture
def agents(tmp_path):
    """``start(name, torchrun_args)`` → :class:`Agent`; every agent still running at the end is killed."""
    started: list[Agent] = []

    def start(name, args, env=None):
        a = Agent(tmp_path, name, args, env)
        started.append(a)
        return a

    yield start
    for a in started:
        if a.proc.poll() is None:
            a.kill()


# What elastic restarts need from torchrun's environment (flashgnn.train.dist.check_elastic_store).
ELASTIC_ENV = {OWN_STORE_VAR: "1"}


def rdzv(nnodes: int, nproc: int, port: int, run_id: str, restarts: int = 0) -> list:
    # join_timeout: a rendezvous that cannot complete fails in a minute instead of torchrun's 600 s.
    return ["--nnodes", nnodes, "--nproc-per-node", nproc, "--rdzv-backend", "c10d", "--rdzv-endpoint",
            f"127.0.0.1:{port}", "--rdzv-id", run_id, "--rdzv-conf", "join_timeout=60", "--max-restarts", restarts,
            "--monitor-interval", "0.1"]


def train_args(ds, ck, epochs: int) -> list:
    return ["-m", "flashgnn.train", ds, "--epochs", epochs, "--checkpoint", ck, *TRAIN]


def finish(agent: Agent, timeout: float = RUN_TIMEOUT_S) -> None:
    rc = agent.wait(timeout)
    assert rc == 0, f"rc {rc}\n{agent.stdout()[-2000:]}\n{agent.stderr()[-4000:]}"


def one_node(agents, ds, ck, epochs: int) -> Agent:
    """The reference: one agent, 2 processes, uninterrupted."""
    a = agents("one", [*rdzv(1, 2, free_port(), "one"), *train_args(ds, ck, epochs)])
    finish(a)
    return a


def assert_same_training(ck_a: Path, ck_b: Path) -> None:
    a, b = load_checkpoint(ck_a), load_checkpoint(ck_b)
    assert a["epoch"] == b["epoch"]
    for part in ("last", "best_model"):
        ta = a["last"]["model"] if part == "last" else a["model"]
        tb = b["last"]["model"] if part == "last" else b["model"]
        assert ta.keys() == tb.keys()
        for k in ta:
            assert torch.equal(ta[k], tb[k]), f"{part}: {k} differs"
    sa, sb = a["optimizer"]["state"], b["optimizer"]["state"]
    assert sa.keys() == sb.keys()
    for i in sa:
        for k in ("exp_avg", "exp_avg_sq"):
            assert torch.equal(sa[i][k], sb[i][k]), f"optimizer state {i}.{k} differs"
    assert [e["train_loss"] for e in a["history"]] == [e["train_loss"] for e in b["history"]]


def copy_dataset(ds: Path, to: Path) -> Path:
    shutil.copytree(ds, to)
    return to


def start_two_nodes(agents, nodes: list[tuple[Path, Path]], epochs: int, run_id: str, restarts: int = 0,
                    port: int | None = None) -> list[Agent]:
    """Two agents, one process each; the first is started alone and hosts the rendezvous store (torchrun: the
    first agent to bind the endpoint), so that the test knows which one it may kill without ending the job."""
    port = port or free_port()
    env = ELASTIC_ENV if restarts else None
    first = agents("node0", [*rdzv(2, 1, port, run_id, restarts), *train_args(*nodes[0], epochs)], env)
    _wait_listening(port, first)
    second = agents("node1", [*rdzv(2, 1, port, run_id, restarts), *train_args(*nodes[1], epochs)], env)
    return [first, second]


def _wait_listening(port: int, agent: Agent, timeout: float = 60) -> None:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        assert agent.proc.poll() is None, agent.stderr()[-3000:]
        with socket.socket() as s:
            if s.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise AssertionError(f"no rendezvous store on port {port} after {timeout} s")


def _wait_checkpoint(ck: Path, agents_: list[Agent], timeout: float = RUN_TIMEOUT_S) -> dict:
    """Poll until ``ck`` holds a checkpoint; return it (published atomically: never torn)."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if (ck / CHECKPOINT_FILE).exists():
            return load_checkpoint(ck)
        for a in agents_:
            assert a.proc.poll() is None, f"agent ended before the first checkpoint\n{a.stderr()[-3000:]}"
        time.sleep(0.01)
    raise AssertionError(f"no checkpoint in {ck} after {timeout} s")


# ---------------------------------------------------------------------------------------------------------------


def test_restarts_with_torchruns_shared_store_are_refused_at_start(monkeypatch):
    """torchrun's default shared store hands restarted workers the dead attempt's addresses (they fail to connect
    or hang): a run asking for restarts without ELASTIC_ENV is refused before the process group, naming the fix."""
    for k, v in dict(WORLD_SIZE="2", RANK="0", TORCHELASTIC_MAX_RESTARTS="1",
                     TORCHELASTIC_USE_AGENT_STORE="True").items():
        monkeypatch.setenv(k, v)
    with pytest.raises(TrainError, match=f"--max-restarts 1 needs {OWN_STORE_VAR}=1"):
        Dist("cpu")


def test_two_nodes_on_loopback_train_as_one_node(ds_path, tmp_path, agents):
    one_node(agents, ds_path, tmp_path / "ck1", 3)
    nodes = [(copy_dataset(ds_path, tmp_path / f"ds{i}"), tmp_path / f"ck-node{i}") for i in range(2)]
    a, b = start_two_nodes(agents, nodes, 3, "two")
    finish(a)
    finish(b)
    # Rank 0 writes the checkpoint, on whichever node the rendezvous gave it.
    written = [ck for _, ck in nodes if (ck / CHECKPOINT_FILE).exists()]
    assert len(written) == 1, written
    out = a.stdout() + b.stdout()
    assert out.count("trained sage on") == 1 and "(uring, 2 processes)" in out
    state = load_checkpoint(written[0])
    assert state["dataset"] in {str(d) for d, _ in nodes}  # rank 0 read its node's own copy
    assert len(state["rng_ranks"]) == 2
    assert_same_training(tmp_path / "ck1", written[0])


def test_a_damaged_page_on_one_node_ends_the_whole_job(ds_path, tmp_path, agents):
    good = copy_dataset(ds_path, tmp_path / "good")
    bad = copy_dataset(ds_path, tmp_path / "bad")
    lay = flashgnn.open(bad).layout
    p = lay["page_size"]
    off = p * (1 + lay["slot_pages"] // 2) + p // 2  # the middle of a slot page (page 0 is the header)
    with open(bad / "graph.fg", "r+b") as f:
        f.seek(off)
        byte = f.read(1)[0]
        f.seek(off)
        f.write(bytes([byte ^ 0x10]))
    t0 = time.monotonic()
    nodes = start_two_nodes(agents, [(good, tmp_path / "ck0"), (bad, tmp_path / "ck1")], 3, "damaged")
    rcs = [n.wait(RUN_TIMEOUT_S) for n in nodes]
    took = time.monotonic() - t0
    assert all(rc != 0 for rc in rcs), rcs
    err = nodes[1].stderr()
    assert f"flashgnn train: error: {bad / 'graph.fg'}: byte offset" in err and "checksum mismatch" in err, err[-3000:]
    assert "flashgnn train: error" not in nodes[0].stderr()  # the good node: its rank lost its peer, nothing else
    assert took < RUN_TIMEOUT_S / 2, f"{took:.0f} s: a rank waited on a dead peer"


@pytest.fixture
def full_fs(tmp_path):
    """A 4 KiB tmpfs (a checkpoint does not fit): root only; skipped where mounting is not allowed."""
    d = tmp_path / "full"
    d.mkdir()
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4k", "tmpfs", str(d)], capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"cannot mount a small tmpfs here ({r.stderr.strip() or r.returncode})")
    yield d
    subprocess.run(["umount", "-l", str(d)], check=False)


@pytest.mark.slow
def test_enospc_writing_rank_0s_checkpoint_ends_the_whole_job(ds_path, full_fs, agents):
    """Rank 0 alone writes checkpoints: its disk full must end every rank, with the error and the file named."""
    t0 = time.monotonic()
    job = agents("enospc", [*rdzv(1, 2, free_port(), "enospc"), *train_args(ds_path, full_fs / "ck", 3)])
    rc = job.wait(RUN_TIMEOUT_S)
    took = time.monotonic() - t0
    err = job.stderr()
    assert rc != 0, job.stdout()[-2000:]
    assert (f"flashgnn train: I/O error: [Errno 28] writing the checkpoint: No space left on device: "
            f"'{full_fs / 'ck' / CHECKPOINT_FILE}'") in err, err[-3000:]
    assert "epoch 2:" not in job.stdout()  # no rank trained on past the failed save
    assert os.listdir(full_fs) == []  # no temporary, no directory left on the full disk
    assert took < RUN_TIMEOUT_S / 2, f"{took:.0f} s: a rank waited on a dead peer"


@pytest.mark.slow
@pytest.mark.parametrize("victim", [0, 1])
def test_a_killed_rank_is_restarted_and_resumes_from_the_checkpoint(ds_path, tmp_path, agents, victim):
    """Rank 0 is the checkpoint's writer: killed at a random point of its loop, sometimes inside a save, it
    leaves the previous checkpoint or the new one, which the restart then loads."""
    epochs = 30
    one_node(agents, ds_path, tmp_path / "ref", epochs)
    ck = tmp_path / "ck"
    job = agents("elastic", [*rdzv(1, 2, free_port(), "kill-rank", restarts=1), *train_args(ds_path, ck, epochs)],
                 ELASTIC_ENV)
    before = _wait_checkpoint(ck, [job])
    victims = job.workers()
    assert set(victims) == {0, 1}, victims
    os.kill(victims[victim], signal.SIGKILL)
    finish(job)
    out = job.stdout()
    resumed = [int(line.rsplit(" ", 1)[1]) for line in out.splitlines() if line.startswith("resumed from ")]
    assert len(resumed) == 1, out[-3000:]
    # What was lost: the epochs after the checkpoint seen before the kill, at most.
    assert before["epoch"] <= resumed[0] < epochs
    assert out.count("trained sage on") == 1
    assert not [f for f in os.listdir(ck) if f != CHECKPOINT_FILE]  # no temporary left by a killed writer
    assert_same_training(tmp_path / "ref", ck)


@pytest.mark.slow
def test_a_killed_node_rejoins_and_the_job_resumes(ds_path, tmp_path, agents):
    """Both nodes' ``--checkpoint`` is one directory, as on a shared filesystem: after the restart rank 0 may be
    on either node, and it resumes from the file it sees."""
    epochs = 30
    one_node(agents, ds_path, tmp_path / "ref", epochs)
    ck = tmp_path / "ck"
    port = free_port()
    nodes = [(copy_dataset(ds_path, tmp_path / f"ds{i}"), ck) for i in range(2)]
    head, other = start_two_nodes(agents, nodes, epochs, "kill-node", restarts=1, port=port)
    before = _wait_checkpoint(ck, [head, other])
    other.kill()
    # The same command again, as a cluster manager would restart the node.
    again = agents("node1-again", other.args, other.env)
    finish(head)
    finish(again)
    out = head.stdout() + again.stdout()
    resumed = [int(line.rsplit(" ", 1)[1]) for line in out.splitlines() if line.startswith("resumed from ")]
    assert len(resumed) == 1 and before["epoch"] <= resumed[0] < epochs, out[-3000:]
    assert out.count("trained sage on") == 1
    assert_same_training(tmp_path / "ref", ck)
