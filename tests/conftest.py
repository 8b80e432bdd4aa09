"""Shared fixtures and helpers for the flashgnn Python test suite.

- tiny valid-graph writers for every input layout (npy directory, IGB, OGB
  with gzip, SNAP text), so each bad-input test starts from a known-good input
  and breaks exactly one thing;
- ``assert_error``: one place that checks an error message (exception, CLI
  result or plain text) contains every expected fragment;
- ``run_cli``: the ``flashgnn`` console script in a subprocess, with a timeout;
- a session-wide report (``suite_report``) whose lines are printed in the
  terminal summary (the corruption suite's one-line figure).
"""

from __future__ import annotations

import gzip
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

import flashgnn

# ---------------------------------------------------------------------------
# CLI

VENV_BIN = Path(sys.executable).parent
FLASHGNN_BIN = str(VENV_BIN / "flashgnn") if (VENV_BIN / "flashgnn").exists() else shutil.which("flashgnn")

# Errors the library promises to raise for bad input / bad datasets.
CLEAN_ERRORS = (flashgnn.InputError, flashgnn.CorruptDatasetError, flashgnn.DatasetNotFoundError)


def cli_env(**extra: str) -> dict:
    """Environment for CLI subprocesses: no colour/progress noise, 1 BLAS thread."""
    env = dict(os.environ)
    env.pop("FLASHGNN_FAULT", None)
    env.update(OPENBLAS_NUM_THREADS="1", OMP_NUM_THREADS="1", PYTHONDONTWRITEBYTECODE="1")
    # `python -m benchmarks.NAME` (not installed) resolves from the repository root.
    root = str(Path(__file__).resolve().parent.parent)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (root, env.get("PYTHONPATH", "")) if p)
    env.update(extra)
    return env


def cli_cmd(*args) -> list[str]:
    if FLASHGNN_BIN:
        return [FLASHGNN_BIN, *map(str, args)]
    return [sys.executable, "-m", "flashgnn.cli", *map(str, args)]


def run_cli(*args, env: dict | None = None, timeout: float = 120) -> subprocess.CompletedProcess:
    """Run ``flashgnn ARGS...`` in a subprocess and return the completed process."""
    return subprocess.run(cli_cmd(*args), capture_output=True, text=True, env=env or cli_env(), timeout=timeout)


def assert_no_crash(proc: subprocess.CompletedProcess) -> None:
    """A subprocess must exit normally: no signal (segfault/abort), no Rust panic."""
    assert proc.returncode >= 0, f"killed by signal {-proc.returncode}: {proc.stderr[-2000:]}"
    assert "panicked" not in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]


# ---------------------------------------------------------------------------
# Error-message assertions


def error_text(exc_or_stderr) -> str:
    if isinstance(exc_or_stderr, pytest.ExceptionInfo):
        return str(exc_or_stderr.value)
    if isinstance(exc_or_stderr, BaseException):
        return str(exc_or_stderr)
    if isinstance(exc_or_stderr, subprocess.CompletedProcess):
        return exc_or_stderr.stderr or ""
    return str(exc_or_stderr)


def assert_error(exc_or_stderr, *fragments) -> str:
    """Assert that an error message contains every fragment.

    ``exc_or_stderr`` may be an exception, a ``pytest.ExceptionInfo``, a
    ``CompletedProcess`` (its stderr is used) or a string. A fragment is a
    plain substring, or a compiled regex that must ``search`` the message.
    Returns the message for further checks.
    """
    text = error_text(exc_or_stderr)
    assert text, "expected an error message, got an empty one"
    for f in fragments:
        if isinstance(f, re.Pattern):
            assert f.search(text), f"pattern {f.pattern!r} not in error message:\n{text}"
        else:
            assert str(f) in text, f"{str(f)!r} not in error message:\n{text}"
    return text


def build(inp, out, **opts) -> dict:
    """flashgnn.build without progress bars."""
    return flashgnn.build(inp, out, progress=False, **opts)


def generated_dataset(d: Path, build_opts: dict | None = None, **gen) -> Path:
    """An R-MAT graph generated into ``d/raw`` and built (symmetrized,
    deduplicated) into ``d/ds``; ``gen`` are ``flashgnn.generate`` options."""
    flashgnn.generate(d / "raw", progress=False, **gen)
    flashgnn.build(d / "raw", d / "ds", progress=False, symmetrize=True, dedup=True, **(build_opts or {}))
    return d / "ds"


def tmp_leftovers(parent: Path, outname: str) -> list[str]:
    """Temporary build directories ('.<outname>.tmp-*') left in ``parent``."""
    return sorted(p.name for p in Path(parent).iterdir() if p.name.startswith(f".{outname}.tmp-"))


# ---------------------------------------------------------------------------
# Tiny valid inputs, one writer per layout


class TinyGraph:
    """A 6-node graph with features, labels and splits (all valid).

    Edges are (src, dst); node 5 is isolated; there is one self-loop (2, 2)
    and one duplicate (0, 1) so that normalisation flags have something to do.
    """

    num_nodes = 6
    edges = np.array([[0, 1], [0, 1], [1, 2], [2, 2], [2, 3], [3, 0], [4, 0], [1, 4]], dtype=np.int64)
    dim = 3

    def __init__(self):
        rng = np.random.default_rng(7)
        self.features = rng.standard_normal((self.num_nodes, self.dim)).astype(np.float32)
        self.labels = np.array([0, 1, 2, 1, 0, 2], dtype=np.int64)
        self.splits = {"train": np.array([0, 1, 2]), "val": np.array([3]), "test": np.array([4, 5])}


@pytest.fixture
def tiny() -> TinyGraph:
    return TinyGraph()


def write_npy_dir(
    root: Path,
    edges,
    features=None,
    labels=None,
    splits: dict | None = None,
    edge_dtype=np.int64,
    transposed: bool = False,
) -> Path:
    """npy-directory layout: edge_index.npy [E,2] (or [2,E]), node_feat.npy, node_label.npy, *_idx.npy."""
    root = Path(root)
    root.mkdir(parents=True, exist_ok=True)
    e = np.asarray(edges).astype(edge_dtype, copy=False)
    if e.size == 0:
        e = e.reshape(0, 2)
    np.save(root / "edge_index.npy", np.ascontiguousarray(e.T if transposed else e))
    if features is not None:
        np.save(root / "node_feat.npy", features)
    if labels is not None:
        np.save(root / "node_label.npy", labels)
    for name, ids in (splits or {}).items():
        np.save(root / f"{name}_idx.npy", np.asarray(ids, dtype=np.int64))
    return root


def write_igb(root: Path, edges, features, labels=None, headerless: bool = False, classes: str = "19") -> Path:
    """IGB layout: processed/paper/node_feat.npy, node_label_19.npy, processed/paper__cites__paper/edge_index.npy.

    ``headerless`` writes the feature and label files as raw arrays (IGB large/full style).
    """
    root = Path(root)
    paper = root / "processed" / "paper"
    cites = root / "processed" / "paper__cites__paper"
    paper.mkdir(parents=True, exist_ok=True)
    cites.mkdir(parents=True, exist_ok=True)
    np.save(cites / "edge_index.npy", np.asarray(edges, dtype=np.int64))
    if features is not None:
        if headerless:
            np.ascontiguousarray(features).tofile(paper / "node_feat.npy")
        else:
            np.save(paper / "node_feat.npy", features)
    if labels is not None:
        lab = np.asarray(labels, dtype=np.float32)
        if headerless:
            lab.tofile(paper / f"node_label_{classes}.npy")
        else:
            np.save(paper / f"node_label_{classes}.npy", lab)
    return root


def write_gz_text(path: Path, text: str) -> Path:
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    with gzip.open(path, "wt") as f:
        f.write(text)
    return path


def csv_rows(rows) -> str:
    return "".join(",".join(str(x) for x in np.atleast_1d(r)) + "\n" for r in rows)


def write_ogb(
    root: Path,
    edges,
    num_nodes: int | None,
    features=None,
    labels=None,
    splits: dict | None = None,
    split_name: str = "time",
) -> Path:
    """OGB layout (gzip): raw/edge.csv.gz, raw/num-node-list.csv.gz, raw/node-feat.csv.gz,
    raw/node-label.csv.gz, split/<name>/{train,valid,test}.csv.gz."""
    root = Path(root)
    raw = root / "raw"
    write_gz_text(raw / "edge.csv.gz", csv_rows(np.asarray(edges)))
    if num_nodes is not None:
        write_gz_text(raw / "num-node-list.csv.gz", f"{num_nodes}\n")
    if features is not None:
        write_gz_text(raw / "node-feat.csv.gz", csv_rows(features))
    if labels is not None:
        write_gz_text(raw / "node-label.csv.gz", "".join(f"{x}\n" for x in labels))
    for ours, theirs in (("train", "train"), ("val", "valid"), ("test", "test")):
        if splits and ours in splits:
            write_gz_text(root / "split" / split_name / f"{theirs}.csv.gz", "".join(f"{x}\n" for x in splits[ours]))
    return root


def write_snap(path: Path, edges=None, text: str | None = None, gz: bool = False, sep: str = "\t") -> Path:
    """SNAP text edge list (plain or .gz) with a '#' comment header; ``text`` overrides ``edges``."""
    path = Path(path)
    if text is None:
        text = "# Directed graph\n# FromNodeId\tToNodeId\n" + "".join(f"{s}{sep}{d}\n" for s, d in np.asarray(edges))
    if gz:
        return write_gz_text(path, text)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text)
    return path


@pytest.fixture
def npy_input(tmp_path, tiny) -> Path:
    return write_npy_dir(tmp_path / "npy_in", tiny.edges, tiny.features, tiny.labels, tiny.splits)


@pytest.fixture
def igb_input(tmp_path, tiny) -> Path:
    return write_igb(tmp_path / "igb_in", tiny.edges, tiny.features, tiny.labels)


@pytest.fixture
def ogb_input(tmp_path, tiny) -> Path:
    return write_ogb(tmp_path / "ogb_in", tiny.edges, tiny.num_nodes, tiny.features, tiny.labels, tiny.splits)


@pytest.fixture
def snap_input(tmp_path, tiny) -> Path:
    return write_snap(tmp_path / "graph.txt", tiny.edges)


def expected_neighbors(edges, num_nodes: int) -> list[np.ndarray]:
    """Reference adjacency: neighbors(v) = sorted sources of edges into v (duplicates kept)."""
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    out = [[] for _ in range(num_nodes)]
    for s, d in e:
        out[d].append(s)
    return [np.sort(np.asarray(x, dtype=np.int64)) for x in out]


# ---------------------------------------------------------------------------
# Session report (printed in the terminal summary)

_REPORT_LINES: list[str] = []


# --- `flashgnn serve` in a child process (tests/serve, tests/dfg) ----------------------------

SERVE_TOKEN = "t0k3n-" + "a" * 26


@pytest.fixture(scope="module")
def token_file(tmp_path_factory) -> Path:
    """A token file (mode 0600) holding SERVE_TOKEN."""
    p = tmp_path_factory.mktemp("tok") / "token"
    p.write_text(SERVE_TOKEN + "\n")
    p.chmod(0o600)
    return p


def start_server(dataset, token_file, *args, env: dict | None = None, slow: str | None = None, timeout: float = 60):
    """`flashgnn serve DATASET` listening on a free port; ``slow="Rpc:seconds,..."`` starts it through
    tests/serve/_slow_serve.py, which slows those RPCs down (the server has no test hook of its own)."""
    from flashgnn.serve.process import ServeProcess

    launcher = [sys.executable, str(Path(__file__).parent / "serve" / "_slow_serve.py"), slow] if slow else None
    return ServeProcess(dataset, token_file, *args, env=cli_env(**(env or {})), timeout=timeout, launcher=launcher,
                        stderr_path=Path(dataset).parent / f"server-{time.monotonic_ns()}.err")


@pytest.fixture
def dataset(base_dataset, tmp_path) -> Path:
    """A private copy of the module's ``base_dataset``: servers write their log under DATASET/mut/."""
    return Path(shutil.copytree(base_dataset, tmp_path / "ds"))


@pytest.fixture
def server(dataset, token_file):
    """``server(*args, env=, slow=, ds=)`` starts `flashgnn serve` on the module's ``dataset`` fixture (or ``ds``);
    every server it started is killed at the end of the test."""
    started = []

    def start(*args, env=None, slow=None, ds=None):
        s = start_server(ds or dataset, token_file, *args, env=env, slow=slow)
        started.append(s)
        return s

    yield start
    for s in started:
        if s.proc.poll() is None:
            s.proc.kill()
            s.proc.wait()


@pytest.fixture(scope="session")
def suite_report() -> list[str]:
    """Append one-line figures here; they are printed at the end of the run."""
    return _REPORT_LINES


def pytest_collection_modifyitems(config, items):
    """`@pytest.mark.gpu` tests skip cleanly, saying why, where no CUDA device exists."""
    gpu = [it for it in items if it.get_closest_marker("gpu")]
    if not gpu:
        return
    try:
        import torch

        has_cuda = torch.cuda.is_available()
    except ImportError:
        has_cuda = False
    if not has_cuda:
        skip = pytest.mark.skip(reason="gpu: no CUDA device (torch.cuda.is_available() is False)")
        for it in gpu:
            it.add_marker(skip)


def pytest_terminal_summary(terminalreporter):
    for line in _REPORT_LINES:
        terminalreporter.write_line(line)
