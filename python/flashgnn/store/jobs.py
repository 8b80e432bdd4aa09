"""Run the long Rust jobs (build, generate, verify, scrub) with tqdm progress bars.

The Rust side runs on its own thread and publishes per-task counters; this
module polls them a few times a second, draws one bar per task, and turns
Ctrl-C into a cancellation (the build then removes its temporary files and
publishes nothing).
"""

from __future__ import annotations

import json
import os
from pathlib import Path
import re
import time

from tqdm.auto import tqdm

from flashgnn import _core, _progress

_POLL_SECONDS = 0.2


def _unit_scale(unit: str) -> dict:
    if unit == "B":
        return {"unit": "B", "unit_scale": True, "unit_divisor": 1024}
    return {"unit": f" {unit}", "unit_scale": True}


def run_job(job, progress: bool = True, desc: str = "") -> dict:
    bars: dict[str, tqdm] = {}
    try:
        while not job.wait(_POLL_SECONDS):
            if progress:
                _draw(job, bars, desc)
        if progress:
            _draw(job, bars, desc)
        return job.result()
    except KeyboardInterrupt:
        job.cancel()
        job.wait(600)
        raise
    finally:
        for b in bars.values():
            b.close()


def _draw(job, bars: dict, desc: str) -> None:
    for name, unit, done, total, finished in job.poll():
        bar = bars.get(name)
        if bar is None:
            if _progress.interactive():
                bar = tqdm(total=total or None, desc=f"{desc}{name}", position=len(bars), leave=True,
                           dynamic_ncols=True, **_unit_scale(unit))
            else:  # a log: plain periodic lines, no redraws
                bar = _progress.Lines(total=total or None, desc=f"{desc}{name}", unit=unit)
            bars[name] = bar
        if total and bar.total != total:
            bar.total = total
        bar.n = done
        bar.refresh()


def build(input, output, *, progress: bool = True, derive_features: str | None = None, **options) -> dict:
    """Import ``input`` into a dataset at ``output``; options mirror
    ``flashgnn build --help``. Returns the build report (incl. manifest).
    ``derive_features="mean"`` (typed npy input): node types without features get the mean of their typed
    neighbours' rows (:mod:`flashgnn.store.derive`)."""
    if derive_features is None:
        from flashgnn.store.ogb_link import find_link_split

        split = None
        if options.get("link_split") is None and options.get("link_split_files") is None:
            split = find_link_split(input, options.get("ogb_split"))
        if split is None:
            return run_job(_core.start_build(os.fspath(input), os.fspath(output), options), progress)
        return _build_ogb_link(input, output, split, progress, options)
    import shutil

    from flashgnn._durable import check_output, replace_durably
    from flashgnn.store.derive import stage_derived

    out = Path(output)
    check_output(out, bool(options.get("force")), (input,))
    staging = out.parent / f".{out.name}.derive-{os.getpid()}"
    try:
        notes = stage_derived(input, staging, derive_features, progress=progress)
        rep = run_job(_core.start_build(os.fspath(staging), os.fspath(output), options), progress)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    # The manifest names the real input and marks the derived rows (re-sealed, replaced durably).
    m = json.loads((out / _core.MANIFEST_FILE).read_text())
    m["build"]["source"] = os.fspath(input)
    derived = {n.split("'")[1] for n in notes}
    for t in m["types"]["node_types"]:
        if t["name"] in derived and t.get("features"):
            t["features"]["synthetic"] = True
    tmp = out / (_core.MANIFEST_FILE + ".tmp")
    tmp.write_text(_core.seal_manifest(json.dumps(m)))
    replace_durably(tmp, out / _core.MANIFEST_FILE)
    rep["manifest"] = json.loads((out / _core.MANIFEST_FILE).read_text())
    rep["notes"] = list(rep.get("notes", [])) + notes
    return rep


def _build_ogb_link(input, output, split, progress: bool, options: dict) -> dict:
    """An OGB link-prediction dataset: its ``.pt`` split staged as npy beside the output
    (:mod:`flashgnn.store.ogb_link`, removed afterwards), then built with ``link_split_files``."""
    import shutil

    from flashgnn._durable import check_output
    from flashgnn.store.ogb_link import num_nodes_of, stage_ogb_link_split

    out = Path(output)
    check_output(out, bool(options.get("force")), (input,))
    n = options.get("num_nodes") or num_nodes_of(input)
    if n is None:
        raise ValueError(f"{input}: OGB link split without raw/num-node-list.csv.gz: pass num_nodes (--num-nodes N)")
    staging = out.parent / f".{out.name}.ogb-link-{os.getpid()}"
    try:
        notes = stage_ogb_link_split(split, staging, int(n))
        rep = run_job(_core.start_build(os.fspath(input), os.fspath(output),
                                        {**options, "link_split_files": os.fspath(staging)}), progress)
    finally:
        shutil.rmtree(staging, ignore_errors=True)
    rep["notes"] = list(rep.get("notes", [])) + notes
    return rep


def generate(output, *, progress: bool = True, **options) -> dict:
    """Generate an R-MAT dataset in the npy-directory layout."""
    return run_job(_core.start_generate(os.fspath(output), options), progress)


def verify(path, *, progress: bool = True) -> dict:
    """Check every checksum, address and bound; raises CorruptDatasetError.

    For a dataset with a mutable store (``mut/``) this verifies the current
    generation's dataset (the directory ``mut/CURRENT`` names) and then the
    store's own files read-only: the free list and every WAL frame (CRC,
    sequence continuity, ops decodable and applicable when replayed against
    the generation). The report's ``mutable`` entry holds generation, frames,
    ops and torn-tail bytes; nothing is modified."""
    t = time.perf_counter()
    path = os.fspath(path)
    target = path
    if os.path.isdir(os.path.join(path, _core.MUT_DIR)):
        # Which generation to verify: read CURRENT (checked) before the
        # dataset pass; the log is replayed against it afterwards.
        target = _current_generation_dir(path)
    rep = run_job(_core.start_verify(target), progress)
    if target != path:
        rep["dataset"] = target
    mut = _core.verify_mutable(path)
    if mut is not None:
        rep["mutable"] = mut
    rep["seconds"] = time.perf_counter() - t
    return rep


def scrub(path, *, rate: int = 0, resume: bool = False, state=None, progress: bool = True, job_hook=None,
          replay_log: bool = True) -> dict:
    """Read every page of every file of a dataset at ``rate`` bytes/s (0 =
    unlimited) with O_DIRECT, check each as the reader does, and report every
    damaged page (docs/scrub.md). Damage is in the report (``damaged``,
    ``damaged_count``), never raised; errors are a missing dataset or a
    progress file (``state``/progress.json, default DATASET/.scrub/) that is
    corrupt or belongs to another dataset (``CorruptDatasetError``).

    ``resume``: continue the unfinished pass recorded in the progress file
    (bytes already checked are not read again; damage found so far is kept).
    With a mutable store, the current generation's dataset is scrubbed, the
    files directly under ``mut/`` are read too, and the store's log is then
    checked as ``verify`` does (a failure is one ``mutable store`` finding);
    ``replay_log=False`` checks its frames (CRC, sequence numbers, ops
    decodable) without applying them, which would rebuild a copy of the
    store's whole in-memory delta (what the live server's scrubber does: its
    store validated every op before logging it).
    ``job_hook(job)`` receives the running job (the server keeps it to cancel)."""
    t = time.perf_counter()
    path = os.fspath(path)
    target, extra = path, []
    mut = os.path.join(path, _core.MUT_DIR)
    if os.path.isdir(mut):
        target = _current_generation_dir(path)
        with os.scandir(mut) as it:
            extra = sorted(
                (f"{_core.MUT_DIR}/{e.name}", e.path) for e in it if e.is_file(follow_symlinks=False) and not e.name.startswith(".")
            )
    opts = {
        "rate": int(rate),
        "state": os.fspath(state) if state is not None else os.path.join(path, ".scrub"),
        "resume": bool(resume),
        "extra_files": extra,
    }
    job = _core.start_scrub(target, opts)
    if job_hook is not None:
        job_hook(job)
    rep = run_job(job, progress)
    if target != path:
        rep["generation_dataset"] = target
    if os.path.lexists(mut) and rep["complete"]:
        try:
            _core.verify_mutable(path, replay=replay_log)
        except Exception as e:  # CorruptDatasetError, OSError: damage of the store, reported like a page's
            m = re.search(r"byte offset (\d+)", str(e))
            f = re.match(r"(\S*mut\S*?):", str(e))
            rep["damaged"].append(
                {"file": f.group(1) if f else mut, "offset": int(m.group(1)) if m else None, "kind": "mutable store",
                 "index": None, "check": str(e)}
            )
            rep["damaged_count"] += 1
    rep["wall_seconds"] = time.perf_counter() - t
    return rep


def _current_generation_dir(path: str) -> str:
    cur = os.path.join(path, _core.MUT_DIR, _core.CURRENT_FILE)
    if not os.path.isfile(cur):
        # Missing, or not a regular file (never opened: a FIFO would block):
        # verify_mutable refuses the latter, naming it.
        return path
    try:
        from flashgnn._durable import read_regular

        gen = json.loads(read_regular(cur)).get("generation")
    except (OSError, ValueError, AttributeError):
        gen = None
    # A damaged CURRENT is reported (with its position) by verify_mutable.
    if not isinstance(gen, int) or gen <= 0:
        return path
    return os.path.join(path, _core.MUT_DIR, f"{_core.GEN_PREFIX}{gen}")
