"""`flashgnn scrub` (docs/scrub.md): every damaged page is found and placed, a clean dataset is clean,
a SIGKILLed pass resumes without re-reading finished bytes and ends with the same findings, and a progress
file of another dataset (or a corrupt one) is refused by name.

How: the corruption suite's own datasets and mutations (tests/store/test_corruption.py: bit flips in header
pages, slots, page slack, overflow pages, feature rows, .npy side files and the manifest; swapped pages;
damage re-sealed into the manifest so only the per-page checks can see it; damage under mut/) are applied
to copies and scrubbed. The expected places are derived by diffing each damaged copy against its pristine
dataset — every changed page (row, for features.fg) must be reported with that file and a byte offset
inside it — not hard-coded. Rates are reported, never asserted (see `python -m benchmarks.scrub`).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
from pathlib import Path

import numpy as np
import pytest

import flashgnn
from conftest import assert_error, cli_cmd, cli_env, generated_dataset, run_cli
from test_corruption import (
    DATASET_SPECS,
    MUTABLE,
    _make_mutable,
    _make_pristine,
    _npy_data_offset,
    generate_cases,
    generate_mut_cases,
)

# Categories whose damage keeps every file's length: the changed bytes say which pages must be reported.
PLACED = [
    "flip-graph-header", "flip-slots", "flip-page-slack", "flip-overflow", "flip-features", "flip-npy",
    "flip-manifest", "swap-graph-pages", "swap-overflow-pages", "resealed", "foreign-pages",
]


@pytest.fixture(scope="module")
def pristine(tmp_path_factory):
    root = tmp_path_factory.mktemp("scrub-pristine")
    out = {name: _make_pristine(root, name) for name in DATASET_SPECS}
    out[MUTABLE] = _make_mutable(root)
    return out


def scrub(path, **kw) -> dict:
    kw.setdefault("state", Path(path).parent / f".{Path(path).name}-scrub-state")
    return flashgnn.scrub(path, progress=False, **kw)


def damaged_places(pristine_dir: Path, copy: Path, layout: dict) -> list[tuple[str, int, int]]:
    """(file, lo, hi) byte ranges that must each hold a reported offset: the changed pages of .fg files
    (rows of features.fg), or the whole file for the others."""
    out = []
    for f in sorted(pristine_dir.iterdir()):
        if not f.is_file():
            continue
        a, b = f.read_bytes(), (copy / f.name).read_bytes()
        if a == b or f.name == "manifest.json":  # (a re-sealed manifest is rewritten, not placed damage)
            continue
        assert len(a) == len(b), f"{f.name}: {PLACED} mutations keep lengths"
        diff = np.flatnonzero(np.frombuffer(a, np.uint8) != np.frombuffer(b, np.uint8))
        p, stride = layout["page_size"], layout["feature_stride"]
        if f.name == "features.fg":  # header page, then one range per row
            units = {(0, p) if i < p else (p + (i - p) // stride * stride, p + ((i - p) // stride + 1) * stride) for i in diff}
        elif f.suffix == ".fg":  # pages
            units = {(i // p * p, (i // p + 1) * p) for i in diff}
        else:  # side files, manifest: no pages
            units = {(0, len(a))}
        out += [(f.name, int(lo), int(hi)) for lo, hi in sorted(units)]
    return out


def _apply(case, pr, d: Path) -> Path:
    shutil.copytree(pr.path, d, symlinks=True)
    case.mutate(d)
    return d


@pytest.mark.parametrize("name", list(DATASET_SPECS))
def test_clean_dataset_reports_no_damage(pristine, tmp_path, name):
    rep = scrub(pristine[name].path)
    assert rep["complete"] and not rep["resumed"]
    assert rep["damaged_count"] == 0, rep["damaged"]
    assert rep["bytes_done"] == rep["bytes_total"] == sum(
        f.stat().st_size for f in pristine[name].path.iterdir() if f.is_file())
    assert rep["bytes_read"] >= rep["bytes_total"]
    lay = pristine[name].layout
    assert rep["pages"] == 2 + lay["slot_pages"] + lay["overflow_pages"] + (name == "separate")


@pytest.mark.parametrize("name", list(DATASET_SPECS))
def test_every_damaged_page_is_reported_with_file_and_offset(pristine, tmp_path, name):
    pr = pristine[name]
    cases = [c for c in generate_cases(pr) if c.fast and c.category in PLACED]
    assert len(cases) > 50
    missed = []
    for i, case in enumerate(cases):
        d = _apply(case, pr, tmp_path / f"c{i}")
        rep = scrub(d)
        found = rep["damaged"]
        if not found:
            missed.append(f"{case.id}: nothing reported")
            continue
        if any(x["kind"] == "open" for x in found):
            # Damage that stops the dataset from opening (headers, manifest, npy headers): one finding,
            # naming one of the files the case allows.
            if not any(Path(x["file"]).name in case.files or any(f in x["check"] for f in case.files) for x in found):
                missed.append(f"{case.id}: open error names {[x['file'] for x in found]}, not {case.files}")
            continue
        for fname, lo, hi in damaged_places(pr.path, d, pr.layout):
            # A side file checked against another (node_index <-> node_order, feature_crc.npy <->
            # features.fg rows) may be reported through the other: any finding in a file the case names.
            others = set(case.files) - {fname} if not fname.endswith(".fg") else set()
            hit = [x for x in found if x["offset"] is not None and (
                (Path(x["file"]).name == fname and lo <= x["offset"] < hi) or Path(x["file"]).name in others)]
            if not hit:
                missed.append(f"{case.id}: no report in {fname} [{lo}, {hi}); got {[(x['file'], x['offset'], x['kind']) for x in found]}")
        shutil.rmtree(d)
    assert not missed, "\n".join(missed[:20])


def test_several_damaged_pages_are_all_reported(pristine, tmp_path):
    """verify stops at the first failure; scrub reports each page (and goes on past them)."""
    pr = pristine["separate"]
    d = tmp_path / "multi"
    shutil.copytree(pr.path, d)
    lay = pr.layout
    p, stride = lay["page_size"], lay["feature_stride"]
    flips = [("graph.fg", p + 9), ("overflow.fg", 2 * p + 40), ("overflow.fg", 3 * p + 7),
             ("features.fg", p + 5 * stride + 3), ("features.fg", p + 40 * stride)]
    for name, off in flips:
        b = bytearray((d / name).read_bytes())
        b[off] ^= 0x10
        (d / name).write_bytes(bytes(b))
    rep = scrub(d)
    got = {(Path(x["file"]).name, x["kind"], x["index"]) for x in rep["damaged"]}
    assert got >= {("graph.fg", "slot page", 1), ("overflow.fg", "overflow page", 2), ("overflow.fg", "overflow page", 3),
                   ("features.fg", "feature row", 5), ("features.fg", "feature row", 40)}, rep["damaged"]
    # Page-level damage is not repeated as a whole-file finding of the same file.
    assert not any(x["kind"] == "whole file" for x in rep["damaged"]), rep["damaged"]
    assert rep["damaged_count"] == len(rep["damaged"]) == 5
    with pytest.raises(flashgnn.CorruptDatasetError):
        flashgnn.verify(d, progress=False)


def test_side_file_values_are_placed(pristine, tmp_path):
    """A label flipped out of range is reported at its element's byte offset; one flipped to another valid
    label can only be caught by the whole-file CRC32C (side files have no per-page checksums)."""
    pr = pristine["inline"]
    d = tmp_path / "labels"
    shutil.copytree(pr.path, d)
    data = bytearray((d / "labels.npy").read_bytes())
    d0 = _npy_data_offset(bytes(data))
    data[d0 + 8 * 3 + 7] ^= 0x40  # element 3 becomes huge (negative): out of range
    (d / "labels.npy").write_bytes(bytes(data))
    rep = scrub(d)
    assert [(Path(x["file"]).name, x["offset"], x["kind"]) for x in rep["damaged"]] == [("labels.npy", d0 + 24, "side file")]
    data[d0 + 8 * 3 + 7] ^= 0x40
    data[d0 + 8 * 5] ^= 0x01  # 0..6 -> still a valid label
    (d / "labels.npy").write_bytes(bytes(data))
    rep = scrub(d)
    assert [(Path(x["file"]).name, x["offset"], x["kind"]) for x in rep["damaged"]] == [("labels.npy", 0, "whole file")]


def test_mutable_store_damage_is_reported(pristine, tmp_path):
    pr = pristine[MUTABLE]
    clean = scrub(pr.path)
    assert clean["damaged_count"] == 0, clean["damaged"]
    assert clean["generation_dataset"].endswith("gen-1")
    names = {Path(f).name for f in os.listdir(pr.path / "mut")}
    assert clean["files"] > len(names) - 2  # the dataset's files + manifest + mut/ files
    missed = []
    for i, case in enumerate(generate_mut_cases(pr)):
        d = _apply(case, pr, tmp_path / f"m{i}")
        rep = scrub(d)
        text = " ".join(f"{x['file']} {x['check']}" for x in rep["damaged"])
        if rep["damaged_count"] == 0 or not any(f in text for f in case.files):
            missed.append(f"{case.id}: {rep['damaged']}")
        shutil.rmtree(d)
    assert not missed, "\n".join(missed[:10])


def test_the_servers_background_scrubber_checks_the_log_without_replaying_it(pristine, tmp_path, monkeypatch):
    """`flashgnn serve --scrub-rate` checks its store's log frame by frame after every pass: a replay would
    rebuild a second copy of the store's whole in-memory delta each pass, back to back, and that copy grows
    with every write until a compaction (the soak's climbing memory, docs/reliability.md, *Soak*). The frame
    check still reports a damaged frame as a ``mutable store`` finding."""
    from flashgnn import _core
    from flashgnn.serve.scrubber import BackgroundScrub

    d = tmp_path / "ds"
    shutil.copytree(pristine[MUTABLE].path, d)
    calls = []
    real = _core.verify_mutable

    def spy(path, *args, **kw):
        calls.append((args, kw))
        return real(path, *args, **kw)

    monkeypatch.setattr(_core, "verify_mutable", spy)

    def one_pass():
        s = BackgroundScrub(str(d), 0, lambda msg: None, state=str(tmp_path / "state"))
        s.start()
        for _ in range(1200):  # a bound on polls, not a timing assertion
            if s.passes:
                break
            time.sleep(0.05)
        s.stop()
        assert s.passes >= 1, s.status()
        return s.last_pass

    assert one_pass()["damaged_count"] == 0
    assert calls and all(kw.get("replay") is False or args == (False,) for args, kw in calls), calls
    frames = real(d, replay=False)
    full = real(d)
    assert not frames["replayed"] and full["replayed"] and full["delta_nodes"] > 0 and frames["delta_nodes"] == 0
    assert (frames["frames"], frames["ops"], frames["last_seq"]) == (full["frames"], full["ops"], full["last_seq"])

    wal = Path(full["wal"])
    b = bytearray(wal.read_bytes())
    b[40 + 16 + 2] ^= 0x10  # the first frame's ops (header 40 B, frame header 16 B); frames follow it
    wal.write_bytes(bytes(b))
    last = one_pass()
    assert [x["kind"] for x in last["damaged"]] == ["mutable store"], last["damaged"]
    assert wal.name in last["damaged"][0]["file"] + last["damaged"][0]["check"]


# ---------------------------------------------------------------------------
# Resume, progress files


@pytest.fixture(scope="module")
def bigger(tmp_path_factory) -> Path:
    """~6.5 MiB: a 2 MiB/s pass takes ~3 s, long enough to be killed half-way."""
    return generated_dataset(tmp_path_factory.mktemp("scrub-big"), scale=14, dim=64)


def _damage(ds: Path, flips) -> None:
    for name, off in flips:
        b = bytearray((ds / name).read_bytes())
        b[off] ^= 0x04
        (ds / name).write_bytes(bytes(b))


def _places(rep) -> list:
    return sorted((x["file"], x["offset"], x["kind"], x["index"], x["check"]) for x in rep["damaged"])


def test_resume_after_sigkill_reads_less_and_finds_the_same(bigger, tmp_path):
    ds = tmp_path / "ds"
    shutil.copytree(bigger, ds)
    size = (ds / "graph.fg").stat().st_size
    # One damaged page early (found before the kill, kept by the checkpoint), one late.
    _damage(ds, [("graph.fg", 4096 * 2 + 17), ("graph.fg", size - 4096 * 3 + 5)])
    state = tmp_path / "state"
    proc = subprocess.Popen(cli_cmd("scrub", ds, "--rate", "2MB/s", "--state", state, "--json"), env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    prog = state / "progress.json"
    t_end = time.monotonic() + 60
    body = None
    while time.monotonic() < t_end and proc.poll() is None:
        if prog.exists():
            body = json.loads(prog.read_text())["body"]
            if body["bytes_done"] > 0 and body["damaged_count"] >= 1:
                break
        time.sleep(0.05)
    assert proc.poll() is None, "the pass ended before it could be killed (rate not applied?)"
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    body = json.loads(prog.read_text())["body"]
    assert not body["complete"] and 0 < body["bytes_done"]

    r = run_cli("scrub", ds, "--rate", "0", "--state", state, "--resume", "--json")
    assert r.returncode == 3, r.stderr
    resumed = json.loads(r.stdout)
    assert resumed["resumed"] and resumed["complete"]
    assert resumed["bytes_skipped"] == body["bytes_done"]
    assert resumed["bytes_read"] < resumed["bytes_total"]

    full = scrub(ds, state=tmp_path / "fresh")
    assert not full["resumed"] and full["bytes_read"] >= full["bytes_total"]
    assert _places(resumed) == _places(full)
    assert len(full["damaged"]) == 2 and {x["kind"] for x in full["damaged"]} == {"slot page"}
    assert resumed["pages"] == full["pages"] and resumed["bytes_done"] == full["bytes_done"]


def test_progress_file_of_another_dataset_is_refused(pristine, tmp_path):
    pr = pristine["inline"]
    state = tmp_path / "state"
    scrub(pr.path, state=state)
    r = run_cli("scrub", pr.twin, "--state", state, "--resume", "--json")
    assert r.returncode == 2
    assert_error(r.stderr, str(state / "progress.json"), "another dataset")
    # Without --resume the old file is not read: a new pass replaces it.
    r = run_cli("scrub", pr.twin, "--state", state, "--json")
    assert r.returncode == 0, r.stderr


@pytest.mark.parametrize("damage", ["garbage", "body-edited", "empty"])
def test_corrupt_progress_file_is_an_error_naming_it(pristine, tmp_path, damage):
    pr = pristine["inline"]
    state = tmp_path / "state"
    scrub(pr.path, state=state)
    prog = state / "progress.json"
    if damage == "garbage":
        prog.write_bytes(b"\x00\xffnot json")
    elif damage == "empty":
        prog.write_bytes(b"")
    else:
        doc = json.loads(prog.read_text())
        doc["body"]["offset"] += 4096  # valid JSON, but its own CRC no longer matches
        prog.write_text(json.dumps(doc))
    r = run_cli("scrub", pr.path, "--state", state, "--resume")
    assert r.returncode == 2
    assert_error(r.stderr, str(prog), "corrupt scrub progress file")


def test_cli_text_report_and_exit_codes(pristine, tmp_path):
    pr = pristine["inline"]
    r = run_cli("scrub", pr.path, "--state", tmp_path / "s1", "--rate", "50MB/s")
    assert r.returncode == 0, r.stderr
    line = r.stdout.strip().splitlines()[-1]
    assert line.startswith(f"scrubbed {pr.path}:") and "0 damaged" in line and "MiB/s achieved vs 50.0 MiB/s rate" in line
    d = tmp_path / "bad"
    shutil.copytree(pr.path, d)
    _damage(d, [("overflow.fg", pr.layout["page_size"] + 3)])
    r = run_cli("scrub", d, "--state", tmp_path / "s2", "--rate", "0")
    assert r.returncode == 3
    assert f"DAMAGED {d / 'overflow.fg'} at byte offset " in r.stdout and "1 damaged" in r.stdout
    r = run_cli("scrub", tmp_path / "nope")
    assert r.returncode == 2 and "no such dataset" in r.stderr
    r = run_cli("scrub", pr.path, "--rate", "fast")
    assert r.returncode == 2 and "cannot parse rate" in r.stderr


def test_json_reports_the_achieved_rate(pristine, tmp_path):
    """The achieved rate is reported (bytes read / seconds) for the bench to compare with the target;
    it is not asserted against wall time here."""
    rep = scrub(pristine["separate"].path, rate=8 << 20)
    assert rep["rate_target_bytes_per_s"] == 8 << 20
    assert rep["rate_achieved_bytes_per_s"] == pytest.approx(rep["bytes_read"] / rep["seconds"], rel=1e-6)
    assert rep["direct"] in (True, False)


def test_serve_scrub_rate_reports_damage_in_stats_and_log(bigger, tmp_path):
    """`flashgnn serve --scrub-rate`: the background scrubber's finished pass (with the damaged page) is in
    Stats (graph_stats_json["scrub"]) and on the server's log; the server drains and exits 0."""
    from flashgnn.serve.client import Client
    from flashgnn.serve.process import ServeProcess

    d = tmp_path / "served"  # (serve needs a symmetrized dataset)
    shutil.copytree(bigger, d)
    _damage(d, [("overflow.fg", 2 * flashgnn.open(d).layout["page_size"] + 11)])
    token = "0123456789abcdef0123"
    tf = tmp_path / "token"
    tf.write_text(token)
    tf.chmod(0o600)
    srv = ServeProcess(d, tf, "--scrub-rate", "20MB/s", stderr_path=tmp_path / "server.err", env=cli_env())
    try:
        with Client(srv.address, token=token) as c:
            c.wait_ready()
            status = None
            for _ in range(600):  # a bound on polls, not a timing assertion
                status = c.stats()["graph"]["scrub"]
                if status["last_pass"] is not None:
                    break
                time.sleep(0.05)
            assert status["rate_bytes_per_s"] == 20 << 20 and status["passes"] >= 1, status
            last = status["last_pass"]
            assert last["damaged_count"] == 1
            assert (Path(last["damaged"][0]["file"]).name, last["damaged"][0]["index"]) == ("overflow.fg", 2)
            assert len(c.get_neighbors(0)) >= 0  # still serving
    finally:
        rc, _ = srv.stop()
    assert rc == 0
    log = srv.stderr()
    assert "scrub: DAMAGED" in log and "overflow.fg" in log and "scrub: pass 1 done" in log


def test_striped_dataset_damage_is_reported_at_its_logical_offset(bigger, tmp_path):
    """A striped file is scrubbed through its parts; damage in a part is reported at the dataset file's
    logical offset (part k holds chunks k, k+n, ...)."""
    d = tmp_path / "ds"
    shutil.copytree(bigger, d)
    dirs = [tmp_path / "p0", tmp_path / "p1"]
    for x in dirs:
        x.mkdir()
    r = run_cli("stripe", d, *dirs, "--chunk", "64KiB")
    assert r.returncode == 0, r.stderr
    assert scrub(d)["damaged_count"] == 0
    stripes = json.loads((d / "stripes.json").read_text())
    part1 = Path(stripes["files"]["graph.fg"]["parts"][1])
    _damage(part1.parent, [(part1.name, 5000)])  # part 1, chunk 0 = logical chunk 1
    rep = scrub(d)
    p = flashgnn.open(d).layout["page_size"]
    assert [(Path(x["file"]).name, x["index"]) for x in rep["damaged"]] == [("graph.fg", (65536 + 5000) // p)]


def test_ctrl_c_stops_at_a_chunk_boundary_with_progress_saved(bigger, tmp_path):
    state = tmp_path / "state"
    proc = subprocess.Popen(cli_cmd("scrub", bigger, "--rate", "2MB/s", "--state", state), env=cli_env(),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    prog = state / "progress.json"
    for _ in range(1200):  # a bound on polls, not a timing assertion
        if prog.exists() or proc.poll() is not None:
            break
        time.sleep(0.05)
    assert proc.poll() is None, "the pass ended before it could be interrupted"
    proc.send_signal(signal.SIGINT)
    _, err = proc.communicate(timeout=60)
    assert proc.returncode == 130 and "progress saved; continue with --resume" in err, err
    body = json.loads(prog.read_text())["body"]
    assert not body["complete"] and body["bytes_done"] > 0
    rep = scrub(bigger, state=state, resume=True)
    assert rep["complete"] and rep["resumed"] and rep["bytes_skipped"] == body["bytes_done"]
    assert rep["damaged_count"] == 0


def test_an_unreadable_page_is_reported_alone_at_its_offset(bigger, tmp_path):
    """A bad sector (FLASHGNN_FAULT_READ: every read of those bytes fails with EIO, as a device reports a page
    it cannot read) in the middle of a 1 MiB scrub chunk: the scrubber reads the chunk again page by page and
    reports exactly that page, as a read error at its offset; every other page is still checked, and nothing
    else is reported (before, the chunk was skipped whole and the overflow tiling check then failed on the
    next slot page: damage that is not there)."""
    size = (bigger / "graph.fg").stat().st_size
    page = (size // 2) // 4096 * 4096
    r = run_cli("scrub", bigger, "--state", tmp_path / "s", "--rate", "0", "--json",
                env=cli_env(FLASHGNN_FAULT_READ=f"graph.fg@{page}+4096"))
    assert r.returncode == 3, r.stderr
    rep = json.loads(r.stdout)
    assert [(x["file"], x["offset"], x["kind"]) for x in rep["damaged"]] == [(str(bigger / "graph.fg"), page, "read")]
    assert "Input/output error" in rep["damaged"][0]["check"]
