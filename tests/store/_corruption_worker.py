"""Fork server for the corruption suite (run as a script, not collected by pytest).

Reads ``{"cases": [...], "timeout": seconds}`` as JSON on stdin. For every case
it forks two children, so a crash (segfault, abort, Rust panic) or a hang in
one case is isolated, attributed and cannot take the test run down:

- API child: ``flashgnn.verify(path)``, then ``flashgnn.open(path)`` and a read
  of every node's neighbors, features and labels and every split, compared
  with the pristine dataset's values (``ref``, an .npz);
- CLI child (when ``cli`` is true): ``flashgnn.cli.main(["verify", path])`` —
  the console script's entry point — with stdout/stderr captured;
- when ``sampler`` is true (datasets with a mutable store), the API child also
  opens ``flashgnn.Sampler`` on the path and samples every base node, and
  iterates a ``flashgnn.NeighborLoader`` over it: both replay ``mut/``;
- when ``hetero`` is true (a typed dataset), the API child reads every node
  type's feature rows through the typed ``NeighborLoader`` and compares them
  with the reference (labels and splits are the labeled type's, by local id;
  a link split's ``src``/``dst``/``neg`` are read by ``Dataset.link_split``).

Each child arms ``alarm(timeout)`` with the default action, so a hang ends as
SIGALRM. One JSON line per case is written to stdout. Forking (instead of a
fresh interpreter per case) keeps a case at a few milliseconds instead of
~200 ms of interpreter and numpy start-up.
"""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import traceback

import numpy as np

import flashgnn
import flashgnn.cli
import flashgnn.cli.commands  # noqa: F401 - imported once here, not in every child

CLEAN = (flashgnn.InputError, flashgnn.CorruptDatasetError, flashgnn.DatasetNotFoundError)


def classify(e: BaseException) -> list:
    if isinstance(e, CLEAN):
        kind = "clean"
    elif isinstance(e, IndexError):
        kind = "index"
    elif isinstance(e, OSError):
        kind = "oserror"
    elif isinstance(e, Exception):
        kind = "unclean"
    else:  # pyo3's PanicException derives from BaseException
        kind = "panic"
    return [kind, type(e).__name__, str(e)[:600]]


def hetero_feature_rows(ds, ref=None) -> tuple[dict, int]:
    """Every node type's feature rows as a typed NeighborLoader (fanouts -1, over the labeled type) delivers
    them: ``({type: {local id: row}}, rows differing from ref's tx_<type>)``."""
    loader = flashgnn.NeighborLoader(ds.path, {et: [-1, -1] for et in ds.edge_types}, input_nodes=("paper", None),
                                     batch_size=64, engine="pread", shuffle=False, prefetch=1)
    got: dict = {}
    wrong = 0
    for b in loader:
        for t in b.node_types:
            if "x" not in b[t]:
                continue
            x, nid = b[t].x.numpy(), b[t].n_id.numpy()
            if ref is not None and not np.array_equal(x, ref[f"tx_{t}"][nid]):
                wrong += 1
            got.setdefault(t, {}).update(zip(nid.tolist(), x))
    return got, wrong


def api_checks(path: str, ref_path: str, hetero: bool = False) -> dict:
    res: dict = {}
    try:
        flashgnn.verify(path, progress=False)
        res["verify"] = ["ok", "", ""]
    except BaseException as e:  # noqa: BLE001 - classification is the point
        res["verify"] = classify(e)
    try:
        ds = flashgnn.open(path)
        res["open"] = ["ok", "", ""]
    except BaseException as e:  # noqa: BLE001
        res["open"] = classify(e)
        return res
    ref = np.load(ref_path)
    n = int(ref["num_nodes"])
    indptr, indices = ref["indptr"], ref["indices"]
    feats = ref["features"] if "features" in ref.files else None
    labels = ref["labels"] if "labels" in ref.files else None
    errors: dict[str, int] = {}
    wrong = {"neighbors": 0, "features": 0, "labels": 0, "splits": 0}
    ok = {"neighbors": 0, "features": 0, "labels": 0, "splits": 0}
    samples: list = []

    def attempt(kind, fn, want):
        try:
            got = fn()
        except BaseException as e:  # noqa: BLE001
            c = classify(e)
            errors[c[0]] = errors.get(c[0], 0) + 1
            if len(samples) < 3 or c[0] not in ("clean", "index"):
                samples.append(c)
            return
        ok[kind] += 1
        if not np.array_equal(np.asarray(got), want):
            wrong[kind] += 1

    for v in range(n):
        attempt("neighbors", lambda: ds.neighbors(v), indices[indptr[v] : indptr[v + 1]])
        if feats is not None:
            attempt("features", lambda: ds.features([v]).view(np.uint8).reshape(-1), feats[v])
    for v in range(0 if labels is None else len(labels)):  # a typed dataset's: its labeled type's, by local id
        attempt("labels", lambda: ds.labels([v]), labels[v : v + 1])
    for key in ref.files:
        if key.startswith("split_"):
            attempt("splits", lambda: ds.split(key[6:]), ref[key])
        if key.startswith("link_") and key.endswith("_src"):
            s = key[5:-4]
            want = np.concatenate([ref[key], ref[f"link_{s}_dst"]] +
                                  ([ref[f"link_{s}_neg"].ravel()] if f"link_{s}_neg" in ref.files else []))

            def link(s=s):
                ls = ds.link_split(s)
                return np.concatenate([ls.src, ls.dst] + ([] if ls.neg is None else [ls.neg.ravel()]))

            attempt("splits", link, want)
    if hetero:  # a typed dataset's feature tables, as the typed loader reads them
        def rows():
            got, bad = hetero_feature_rows(ds, ref)
            return bad

        attempt("features", rows, 0)
    res["reads"] = {"errors": errors, "wrong": wrong, "ok": ok, "samples": samples}
    return res


def sampler_checks(path: str, ref_path: str) -> dict:
    """flashgnn.Sampler and NeighborLoader on ``path``: "ok" or the classified error."""
    res: dict = {}
    n = int(np.load(ref_path)["num_nodes"])
    try:
        s = flashgnn.Sampler(path, [4, 4], engine="pread")
        s.sample(np.arange(n, dtype=np.int64), 1)
        res["sampler"] = ["ok", "", ""]
    except BaseException as e:  # noqa: BLE001
        res["sampler"] = classify(e)
    try:
        loader = flashgnn.NeighborLoader(path, [4, 4], batch_size=64, engine="pread", shuffle=False, prefetch=1)
        for _ in loader:
            pass
        res["loader"] = ["ok", "", ""]
    except BaseException as e:  # noqa: BLE001
        res["loader"] = classify(e)
    return res


def start_child(fn, timeout: float) -> int:
    """Fork a child running ``fn`` (its return value is the exit code) under ``alarm(timeout)``."""
    sys.stdout.flush()
    sys.stderr.flush()
    pid = os.fork()
    if pid == 0:
        signal.signal(signal.SIGALRM, signal.SIG_DFL)
        signal.alarm(int(timeout))
        code = 0
        try:
            code = fn()
        except BaseException:  # noqa: BLE001
            traceback.print_exc()
            code = 99
        finally:
            try:
                sys.stdout.flush()
                sys.stderr.flush()
            finally:
                os._exit(code)
    return pid


def wait_child(pid: int) -> int:
    return os.waitpid(pid, 0)[1]


def status_fields(status: int) -> dict:
    if os.WIFSIGNALED(status):
        return {"signal": os.WTERMSIG(status), "rc": None}
    return {"signal": None, "rc": os.WEXITSTATUS(status)}


def main() -> None:
    job = json.load(sys.stdin)
    timeout = job.get("timeout", 20)
    if any(c.get("sampler") or c.get("hetero") for c in job["cases"]):
        import flashgnn.loader.neighbor  # noqa: F401 - torch imported once here, not in every child
    scratch = tempfile.mkdtemp(prefix="fgnn-corrupt-")
    real_stdout = os.dup(1)
    out = os.fdopen(real_stdout, "w", buffering=1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)  # stray prints of children must not corrupt the protocol stream
    for case in job["cases"]:
        res_path = os.path.join(scratch, "api.json")
        o_path, e_path = os.path.join(scratch, "o.txt"), os.path.join(scratch, "e.txt")
        for f in (res_path, o_path, e_path):
            if os.path.exists(f):
                os.remove(f)

        def api_child():
            r = api_checks(case["path"], case["ref"], case.get("hetero", False))
            if case.get("sampler"):
                r.update(sampler_checks(case["path"], case["ref"]))
            with open(res_path, "w") as f:
                json.dump(r, f)
            return 0

        def cli_child():
            fo = os.open(o_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            fe = os.open(e_path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
            os.dup2(fo, 1)
            os.dup2(fe, 2)
            try:
                return flashgnn.cli.main(["verify", case["path"]])
            except SystemExit as e:
                return e.code if isinstance(e.code, int) else 98

        # Both children run at once: most of a verify is waiting on the job thread.
        api_pid = start_child(api_child, timeout)
        cli_pid = start_child(cli_child, timeout) if case.get("cli") else None
        rec = {"id": case["id"], "api_status": status_fields(wait_child(api_pid))}
        if os.path.exists(res_path):
            with open(res_path) as f:
                rec["api"] = json.load(f)
        if cli_pid is not None:
            rec["cli_status"] = status_fields(wait_child(cli_pid))
            with open(o_path, errors="replace") as f:
                rec["cli_stdout"] = f.read()[-1000:]
            with open(e_path, errors="replace") as f:
                rec["cli_stderr"] = f.read()[-3000:]
        out.write(json.dumps(rec) + "\n")
        out.flush()


if __name__ == "__main__":
    # Children inherit fd 1; keep the protocol stream separate from any stray prints.
    main()
