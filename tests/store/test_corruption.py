"""Corruption suite (docs/reliability.md promise 3): a damaged dataset never crashes, hangs or fools the reader.

Three small datasets (inline features; separate features; degree-reordered
with node_order/node_index), each with a hub spilling into several overflow
pages, are damaged in many ways — bit flips across every file (header pages,
slots, page slack, overflow pages, feature rows, npy side files,
manifest.json), truncation at every page boundary, swapped pages, appended
garbage, deleted files, and "hostile" edits that re-seal the manifest's
whole-file checksums so only the per-page/per-slot checks stand between the
damage and the reader. Every case runs ``flashgnn.verify``, ``flashgnn.open``
plus a read of every node, and the ``flashgnn verify`` CLI, each in a forked
child with a timeout (see ``_corruption_worker.py``), plus the real console
script on a representative subset.
"""

from __future__ import annotations

import hashlib
import json
import os
import random
import re
import shutil
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import pytest

import flashgnn
from flashgnn import _core
from _corruption_worker import hetero_feature_rows
from conftest import build, cli_cmd, cli_env, write_npy_dir

WORKER = Path(__file__).with_name("_corruption_worker.py")
CASE_TIMEOUT_S = 20

# ---------------------------------------------------------------------------
# CRC32C (Castagnoli), pure Python: used only to re-seal the manifest of hostile cases.

_CRC_TABLE = []
for _i in range(256):
    _c = _i
    for _ in range(8):
        _c = (_c >> 1) ^ 0x82F63B78 if _c & 1 else _c >> 1
    _CRC_TABLE.append(_c)


def crc32c(data: bytes) -> int:
    crc = 0xFFFFFFFF
    t = _CRC_TABLE
    for b in data:
        crc = t[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


def save_reference(ds, n: int, path: Path) -> Path:
    """Write the values every read of ``ds`` must return (neighbors as CSR, feature bytes, labels, splits)."""
    ids = np.arange(n)
    nb = ds.neighbors(ids)
    ref = {
        "num_nodes": np.array(n),
        "indptr": np.concatenate([[0], np.cumsum([len(x) for x in nb])]),
        "indices": np.concatenate(nb).astype(np.int64),
        "features": ds.features(ids).view(np.uint8).reshape(n, -1),
        "labels": ds.labels(ids),
    }
    for sname in ds.split_names:
        ref[f"split_{sname}"] = ds.split(sname)
    np.savez(path, **ref)
    return path


# ---------------------------------------------------------------------------
# Pristine datasets


@dataclass
class Pristine:
    name: str
    path: Path
    manifest: dict
    layout: dict
    ref: Path  # .npz with the values every read must return
    degrees: list[int]  # per internal node, parsed from graph.fg
    digest: dict[str, str]  # sha256 per file: cases hard-link untouched files, so pristine must never change
    twin: Path | None = None  # a second build of the same input and options (another dataset id)

    @property
    def files(self) -> list[str]:
        return sorted(self.manifest["files"]) + ["manifest.json"]

    def size(self, name: str) -> int:
        return (self.path / name).stat().st_size


DATASET_SPECS = {
    # name: (nodes, random edges, feature dim, hub in-degree, build options)
    "inline": (200, 1500, 8, 2600, {}),
    "separate": (48, 600, 1000, 2300, {"feature_layout": "separate"}),
    "reorder": (200, 1500, 8, 2600, {"reorder": "degree"}),
}


def _make_pristine(root: Path, name: str) -> Pristine:
    n, e, dim, hub_deg, opts = DATASET_SPECS[name]
    rng = np.random.default_rng(list(DATASET_SPECS).index(name) + 11)
    edges = rng.integers(0, n, (e, 2))
    hub = np.column_stack([rng.integers(0, n, hub_deg), np.full(hub_deg, n // 3)])
    inp = write_npy_dir(
        root / f"{name}_in",
        np.vstack([edges, hub]),
        rng.standard_normal((n, dim)).astype(np.float32),
        rng.integers(0, 7, n),
        {"train": np.arange(0, n, 3), "val": np.arange(1, n, 5), "test": np.arange(2, n, 7)},
    )
    out = root / name
    m = build(inp, out, **opts)["manifest"]
    twin = root / f"{name}_twin"
    assert build(inp, twin, **opts)["manifest"]["dataset_id"] != m["dataset_id"], "two builds, two dataset ids"
    ds = flashgnn.open(out)
    lay = ds.layout
    assert lay["overflow_pages"] >= 3, "the hub must spill over several overflow pages"
    assert m["features"]["placement"] == ("separate" if name == "separate" else "inline")
    ref_path = save_reference(ds, n, root / f"{name}_ref.npz")
    g = (out / "graph.fg").read_bytes()
    p, spp, sb = lay["page_size"], lay["slots_per_page"], lay["slot_bytes"]
    degrees = [
        int.from_bytes(g[p + (v // spp) * p + (v % spp) * sb + 4 : p + (v // spp) * p + (v % spp) * sb + 8], "little")
        for v in range(n)
    ]
    return Pristine(name, out, m, lay, ref_path, degrees, _digest(out), twin)


def _digest(d: Path) -> dict[str, str]:
    return {str(f.relative_to(d)): hashlib.sha256(f.read_bytes()).hexdigest() for f in sorted(d.rglob("*")) if f.is_file()}


# A dataset with a mutable store: generation 0 + a compaction (mut/gen-1, its free list) + a log of later batches.
MUTABLE = "mutable"


def _make_mutable(root: Path) -> Pristine:
    n, dim = 120, 8
    rng = np.random.default_rng(29)
    inp = write_npy_dir(
        root / f"{MUTABLE}_in",
        rng.integers(0, n, (500, 2)),
        rng.standard_normal((n, dim)).astype(np.float32),
        rng.integers(0, 4, n),
        {"train": np.arange(0, n, 2), "val": np.arange(1, n, 4), "test": np.arange(3, n, 4)},
    )
    out = root / MUTABLE
    m = build(inp, out, symmetrize=True, page_size=512)["manifest"]

    def mutate(path: Path):
        g = flashgnn.MutableGraph(path)
        for i in range(4):
            g.apply([("add_edge", i, i + 50), ("update_embed", i + 1, np.full(dim, float(i)))])
        g.delete_vertex(n - 1)
        g.compact()
        for i in range(5):
            g.apply([("add_edge", i + 10, i + 70)])
        v = g.add_vertex(np.ones(dim, dtype=np.float32))
        g.add_edge(v, 3)
        g.close()

    mutate(out)
    # A second build of the same input with the same operations (another dataset id): its mut/ is the
    # whole store of another dataset, consistent with itself (case mut-of-another-dataset).
    twin = root / f"{MUTABLE}_twin"
    assert build(inp, twin, symmetrize=True, page_size=512)["manifest"]["dataset_id"] != m["dataset_id"]
    mutate(twin)
    ds = flashgnn.open(out)  # generation 0, what flashgnn.open reads (it does not replay mut/)
    ref_path = save_reference(ds, n, root / f"{MUTABLE}_ref.npz")
    # The store is sound before any damage: the sampler replays it and verify passes.
    assert flashgnn.verify(out, progress=False)["mutable"]["generation"] == 1
    flashgnn.Sampler(out, [2], engine="pread").sample(np.arange(4), 0)
    return Pristine(MUTABLE, out, m, ds.layout, ref_path, [], _digest(out), twin)


# A typed dataset (format version 3: per-type feature tables, labels and splits, relation counts in every
# slot), a homogeneous one with a drawn link split (link_<split>_<part>.npy, manifest.link_split), and a
# typed one with a drawn link split of one edge type (local ids of its two node types, link_split.edge_type).
TYPED, LINK, TYPED_LINK = "typed", "link", "typed-link"
NEW_KINDS = {TYPED: ["typed-files"], LINK: ["link-files"], TYPED_LINK: ["typed-link-files"]}
TYPED_LINK_EDGE = ("author", "writes", "paper")


def _typed_input(d: Path) -> None:
    """Three node types (paper: float32 features, labels, a train split; author: float16 features; fos:
    nothing), three edge types plus reverses, and a hub paper whose list spills into overflow pages."""
    rng = np.random.default_rng(3)
    for t in ("paper", "author"):
        (d / t).mkdir(parents=True)
    np.save(d / "paper" / "node_feat.npy", rng.standard_normal((30, 4)).astype(np.float32))
    np.save(d / "paper" / "node_label_19.npy", rng.integers(0, 19, 30))
    np.save(d / "paper" / "train_idx.npy", np.arange(0, 30, 2))
    np.save(d / "author" / "node_feat.npy", rng.standard_normal((10, 2)).astype(np.float16))
    (d / "num_nodes.json").write_text(json.dumps({"fos": 5}))
    cites = np.column_stack([rng.integers(0, 30, 80), rng.integers(0, 30, 80)])
    hub = np.column_stack([np.arange(30).repeat(8), np.full(240, 7)])
    edges = {
        "paper__cites__paper": np.vstack([cites, hub]),
        "author__writes__paper": np.column_stack([rng.integers(0, 10, 50), rng.integers(0, 30, 50)]),
        "paper__topic__fos": np.column_stack([np.arange(30), np.arange(30) % 5]),
    }
    for k, e in edges.items():
        (d / k).mkdir()
        np.save(d / k / "edge_index.npy", e.astype(np.int64))


def save_typed_reference(ds, path: Path) -> Path:
    n = ds.num_nodes
    nb = ds.neighbors(np.arange(n))
    count = ds.node_type(ds.target_type)["count"]
    ref = {
        "num_nodes": np.array(n),
        "indptr": np.concatenate([[0], np.cumsum([len(x) for x in nb])]),
        "indices": np.concatenate(nb).astype(np.int64),
        "labels": ds.labels(np.arange(count)),
        "split_train": ds.split("train"),
    }
    for t, rows in hetero_feature_rows(ds)[0].items():
        dim = next(iter(rows.values())).shape[0]
        a = np.zeros((ds.node_type(t)["count"], dim), next(iter(rows.values())).dtype)
        for i, r in rows.items():
            a[i] = r
        ref[f"tx_{t}"] = a
    np.savez(path, **ref)
    return path


def _make_typed(root: Path) -> Pristine:
    inp = root / f"{TYPED}_in"
    _typed_input(inp)
    out = root / TYPED
    r = subprocess.run(cli_cmd("build", inp, out, "--add-reverse", "--page-size", "512", "-q"), capture_output=True,
                       text=True, env=cli_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    ds = flashgnn.open(out)
    assert ds.is_typed and ds.layout["overflow_pages"] >= 1
    ref = save_typed_reference(ds, root / f"{TYPED}_ref.npz")
    return Pristine(TYPED, out, ds.manifest, ds.layout, ref, [], _digest(out))


def _make_link(root: Path) -> Pristine:
    n, rng = 120, np.random.default_rng(5)
    e = rng.integers(0, n, size=(500, 2))
    e = e[e[:, 0] != e[:, 1]]
    inp = root / f"{LINK}_in"
    inp.mkdir()
    np.save(inp / "edge_index.npy", np.concatenate([e, e[:, ::-1]]).astype(np.int64))
    np.save(inp / "node_feat.npy", rng.standard_normal((n, 4)).astype(np.float32))
    out = root / LINK
    flashgnn.build(inp, out, progress=False, link_split=(0.1, 0.2), neg_per_pos=2, link_split_seed=3)
    ds = flashgnn.open(out)
    ref = {"num_nodes": np.array(n)}
    nb = ds.neighbors(np.arange(n))
    ref["indptr"] = np.concatenate([[0], np.cumsum([len(x) for x in nb])])
    ref["indices"] = np.concatenate(nb).astype(np.int64)
    ref["features"] = ds.features(np.arange(n)).view(np.uint8).reshape(n, -1)
    for s in ("train", "val", "test"):
        ls = ds.link_split(s)
        ref[f"link_{s}_src"], ref[f"link_{s}_dst"] = ls.src, ls.dst
        if ls.neg is not None:
            ref[f"link_{s}_neg"] = ls.neg
    np.savez(root / f"{LINK}_ref.npz", **ref)
    return Pristine(LINK, out, ds.manifest, ds.layout, root / f"{LINK}_ref.npz", [], _digest(out))


def _make_typed_link(root: Path) -> Pristine:
    inp = root / f"{TYPED_LINK}_in"
    _typed_input(inp)
    out = root / TYPED_LINK
    flashgnn.build(inp, out, add_reverse=True, page_size=512, link_split=(0.1, 0.2), neg_per_pos=2,
                   link_split_seed=3, link_edge_type="__".join(TYPED_LINK_EDGE), progress=False)
    ds = flashgnn.open(out)
    assert ds.link_edge_type == TYPED_LINK_EDGE
    path = save_typed_reference(ds, root / f"{TYPED_LINK}_ref.npz")
    ref = dict(np.load(path))
    for s in ("train", "val", "test"):
        ls = ds.link_split(s)
        ref[f"link_{s}_src"], ref[f"link_{s}_dst"] = ls.src, ls.dst
        if ls.neg is not None:
            ref[f"link_{s}_neg"] = ls.neg
    np.savez(path, **ref)
    return Pristine(TYPED_LINK, out, ds.manifest, ds.layout, path, [], _digest(out))


@pytest.fixture(scope="session")
def pristine(tmp_path_factory) -> dict[str, Pristine]:
    root = tmp_path_factory.mktemp("pristine")
    out = {name: _make_pristine(root, name) for name in DATASET_SPECS}
    out[MUTABLE] = _make_mutable(root)
    out[TYPED] = _make_typed(root)
    out[LINK] = _make_link(root)
    out[TYPED_LINK] = _make_typed_link(root)
    return out


# ---------------------------------------------------------------------------
# Cases

CATEGORIES = [
    "flip-graph-header",
    "flip-slots",
    "flip-page-slack",
    "flip-overflow",
    "flip-features",
    "flip-npy",
    "flip-manifest",
    "truncate-graph",
    "truncate-overflow",
    "truncate-other",
    "swap-graph-pages",
    "swap-overflow-pages",
    "append-garbage",
    "delete-file",
    "resealed",
    "hostile-manifest",
    "foreign-pages",
    "side-files",
]
# Categories of the mutable-store dataset (MUTABLE): damage under mut/, read by the sampler and loader too.
MUT_CATEGORIES = ["mut-damage"]
# Categories of the typed and link-split datasets (NEW_KINDS below).
NEW_CATEGORIES = ["typed-files", "link-files", "typed-link-files"]
ALL_CATEGORIES = CATEGORIES + MUT_CATEGORIES + NEW_CATEGORIES


@dataclass
class Case:
    id: str
    dataset: str
    category: str
    files: tuple[str, ...]  # file names an error message may name (the damaged one, or where it is detected)
    touch: tuple[str, ...]  # files the mutation rewrites (copied; the rest are hard links)
    mutate: Callable[[Path], None]
    fast: bool = True
    position_required: bool = True
    sampler: bool = False  # also open flashgnn.Sampler / NeighborLoader (they replay mut/): must refuse cleanly
    # A broken promise that only `verify` checks (a link split's leakage and distinct negatives: reads check
    # checksums and ids, docs/format.md § Link splits): verify must refuse it; reads may return the values.
    verify_only: bool = False


def _flip(name: str, off: int, bit: int):
    def m(d: Path):
        b = bytearray((d / name).read_bytes())
        b[off] ^= 1 << bit
        (d / name).write_bytes(bytes(b))

    return m


def _truncate(name: str, length: int):
    def m(d: Path):
        b = (d / name).read_bytes()
        (d / name).write_bytes(b[:length])

    return m


def _swap(name: str, i: int, j: int, p: int):
    def m(d: Path):
        b = bytearray((d / name).read_bytes())
        a, c = bytes(b[i * p : (i + 1) * p]), bytes(b[j * p : (j + 1) * p])
        b[i * p : (i + 1) * p], b[j * p : (j + 1) * p] = c, a
        (d / name).write_bytes(bytes(b))

    return m


def _append(name: str, data: bytes):
    def m(d: Path):
        with open(d / name, "ab") as f:
            f.write(data)

    return m


def _delete(name: str):
    return lambda d: (d / name).unlink()


def _reseal(*names: str):
    """Recompute the manifest's size and CRC32C for ``names`` (a hostile file with consistent whole-file checksums)."""

    def m(d: Path):
        man = json.loads((d / "manifest.json").read_text())
        for n in names:
            data = (d / n).read_bytes()
            man["files"][n] = {"bytes": len(data), "crc32c": crc32c(data)}
        # Re-seal the manifest's own checksum too, so only the per-slot/page
        # checks stand between this file and a wrong answer.
        (d / "manifest.json").write_text(_core.seal_manifest(json.dumps(man, indent=2)))

    return m


def _then(*muts):
    def m(d: Path):
        for f in muts:
            f(d)

    return m


def _edit_manifest(fn):
    def m(d: Path):
        man = json.loads((d / "manifest.json").read_text())
        fn(man)
        # Sealed: the edit must be caught by structural checks, not the checksum.
        (d / "manifest.json").write_text(_core.seal_manifest(json.dumps(man, indent=2)))

    return m


def _npy_data_offset(data: bytes) -> int:
    if data[6] == 1:
        return 10 + int.from_bytes(data[8:10], "little")
    return 12 + int.from_bytes(data[8:12], "little")


def _pages_differ(data: bytes, i: int, j: int, p: int) -> bool:
    return data[i * p : (i + 1) * p] != data[j * p : (j + 1) * p]


def generate_cases(pr: Pristine) -> list[Case]:
    """All cases for one dataset; ``fast`` ones form the default run, the rest run under -m slow."""
    cases: list[Case] = []
    lay, ds = pr.layout, pr.name
    p, spp, sb = lay["page_size"], lay["slots_per_page"], lay["slot_bytes"]
    n, cap = pr.manifest["num_nodes"], lay["inline_cap"]
    inline = pr.manifest["features"]["placement"] == "inline"
    row_bytes = lay["row_bytes"]
    io = 24 + (row_bytes if inline else 0)
    slot_pages, ovp = lay["slot_pages"], lay["overflow_pages"]
    rnd = random.Random(f"corrupt-{ds}")
    bits = iter(range(10**9))

    seen: set[str] = set()

    def add(cat, cid, files, touch, mut, fast=True, position=True):
        if f"{cat}:{cid}" in seen:
            return
        seen.add(f"{cat}:{cid}")
        cases.append(Case(f"{ds}:{cat}:{cid}", ds, cat, tuple(files), tuple(touch), mut, fast, position))

    def flip(cat, name, off, fast=True, bit=None, also=()):
        b = next(bits) % 8 if bit is None else bit
        add(cat, f"{name}@{off}.{b}", (name, *also), (name,), _flip(name, off, b), fast)

    # --- graph.fg header page
    header_fast = {0, 8, 12, 16, 24, 40, 64, 88, 96, 700, p - 4, p - 1}
    for off in sorted(header_fast | {7, 11, 13, 32, 48, 56, 72, 80, p - 5}):
        flip("flip-graph-header", "graph.fg", off, fast=off in header_fast)

    # --- slots: a spread of nodes, every field of the slot
    def slot_off(v):
        return p + (v // spp) * p + (v % spp) * sb

    hub = max(range(n), key=lambda v: pr.degrees[v])
    small = min(range(n), key=lambda v: pr.degrees[v])
    fast_nodes = [0, hub, n - 1]
    slow_nodes = sorted({small, 1, spp - 1, min(spp, n - 1), n // 2, n - 2} - set(fast_nodes))
    for v in fast_nodes + slow_nodes:
        deg = pr.degrees[v]
        ids_end = io + 4 * min(deg, cap)
        offs = [0, 3, 4, 7, 8, 15, 16, 23, io, max(io, ids_end - 1), sb - 1]
        if inline:
            offs.append(24 + row_bytes // 2)
        if ids_end < sb:
            offs.append(ids_end)  # first padding byte after the inline ids
        for o in sorted(set(offs)):
            fast = v in (0, hub) or (v in fast_nodes and o in (0, 4, 8, io))
            flip("flip-slots", "graph.fg", slot_off(v) + o, fast=fast)

    # --- page slack (bytes after the last slot of a page)
    for pg in range(slot_pages):
        count = min(spp, n - pg * spp)
        used = count * sb
        if used < p:
            fast = pg in (0, slot_pages - 1)
            flip("flip-page-slack", "graph.fg", (pg + 1) * p + used, fast=fast)
            flip("flip-page-slack", "graph.fg", (pg + 2) * p - 1, fast=fast)

    # --- overflow.fg: header and every page (ids, padding, trailer)
    per = (p - 8) // 4
    entries = lay.get("overflow_entries", pr.manifest["graph"]["overflow_entries"])
    for off in [0, 8, 12, 16, 24, 31, 32, 1000, p - 4, p - 1]:
        flip("flip-overflow", "overflow.fg", off)
    for pg in range(1, ovp + 1):
        here = min(per, entries - (pg - 1) * per)
        base = pg * p
        offs = [0, 4 * (here // 2), 4 * here - 1, p - 8, p - 5, p - 4, p - 1]
        if 4 * here < p - 8:
            offs.append(4 * here)  # padding
        for o in offs:
            flip("flip-overflow", "overflow.fg", base + o, fast=pg in (1, ovp))

    # --- features.fg (separate placement): header, rows, row padding
    if not inline:
        stride = lay["feature_stride"]
        for off in [0, 8, 12, 16, 24, 32, 40, p - 4]:
            flip("flip-features", "features.fg", off)
        for v in [0, n // 2, n - 1]:
            start = p + v * stride
            for o in [0, row_bytes // 2, row_bytes - 1, row_bytes, stride - 1]:
                flip("flip-features", "features.fg", start + o)
    else:
        # inline feature bytes live in slots: flip the middle of several rows
        for v in [0, n // 2, n - 1]:
            flip("flip-features", "graph.fg", slot_off(v) + 24 + row_bytes - 1)

    # --- npy side files: magic, version, header length, header text, data
    for name in pr.files:
        if not name.endswith(".npy"):
            continue
        data = (pr.path / name).read_bytes()
        d0 = _npy_data_offset(data)
        descr = data.find(b"descr") + 9
        shape = data.find(b"shape") + 10
        alts = ("features.fg",) if name == "feature_crc.npy" else ()
        fast = name in ("labels.npy", "feature_crc.npy", "node_order.npy", "node_index.npy")
        for off in [0, 5, 6, 8, descr, shape, d0 - 1, d0, len(data) - 1]:
            flip("flip-npy", name, off, fast=fast or off in (0, d0), also=alts)

    # --- manifest.json: spread positions
    mtext = (pr.path / "manifest.json").read_bytes()
    step_fast, step_slow = max(1, len(mtext) // 22), max(1, len(mtext) // 110)
    for off in range(0, len(mtext), step_slow):
        flip("flip-manifest", "manifest.json", off, fast=off % step_fast < step_slow)
    for key in [b'"num_nodes"', b'"crc32c"', b'"page_size"', b'"inline_cap"']:
        k = mtext.find(key)
        flip("flip-manifest", "manifest.json", k + len(key) + 2, bit=0)

    # --- truncation at every page boundary
    gsize, osize = pr.size("graph.fg"), pr.size("overflow.fg")
    for k in range(gsize // p):
        add("truncate-graph", f"graph.fg:{k * p}", ("graph.fg",), ("graph.fg",), _truncate("graph.fg", k * p))
    for length in [p // 2, gsize - 1, gsize - p // 2]:
        add("truncate-graph", f"graph.fg:{length}", ("graph.fg",), ("graph.fg",), _truncate("graph.fg", length))
    for k in range(osize // p):
        add("truncate-overflow", f"overflow.fg:{k * p}", ("overflow.fg",), ("overflow.fg",), _truncate("overflow.fg", k * p))
    add("truncate-overflow", f"overflow.fg:{osize - 1}", ("overflow.fg",), ("overflow.fg",), _truncate("overflow.fg", osize - 1))
    for name in pr.files:
        size = pr.size(name)
        lengths = {size - 1, size // 2, 0}
        if name == "features.fg":
            lengths |= {p, p + lay["feature_stride"] * 3}
        for length in sorted(lengths):
            add("truncate-other", f"{name}:{length}", (name,), (name,), _truncate(name, length), fast=length == size - 1 or name in ("features.fg", "manifest.json"))

    # --- swapped pages
    gdata, odata = (pr.path / "graph.fg").read_bytes(), (pr.path / "overflow.fg").read_bytes()
    gpages, opages = gsize // p, osize // p
    fast_pairs = {(0, 1), (1, 2), (1, gpages - 1), (2, gpages - 1)}
    for i in range(gpages):
        for j in range(i + 1, gpages):
            if _pages_differ(gdata, i, j, p):
                add("swap-graph-pages", f"{i}<->{j}", ("graph.fg",), ("graph.fg",), _swap("graph.fg", i, j, p), fast=(i, j) in fast_pairs)
    for i in range(opages):
        for j in range(i + 1, opages):
            if _pages_differ(odata, i, j, p):
                add("swap-overflow-pages", f"{i}<->{j}", ("overflow.fg",), ("overflow.fg",), _swap("overflow.fg", i, j, p))

    # --- appended garbage
    for name in pr.files:
        add("append-garbage", f"{name}+1", (name,), (name,), _append(name, b"\x01"), fast=not name.startswith("split_"))
        add("append-garbage", f"{name}+512", (name,), (name,), _append(name, rnd.randbytes(512)), fast=name in ("graph.fg", "manifest.json"))

    # --- deleted files
    for name in pr.files:
        add("delete-file", name, (name,), (name,), _delete(name), position=False)

    # --- hostile: damage + re-sealed manifest, so only structural checks can catch it
    def hostile(cid, name, mut, files=None):
        add("resealed", cid, files or (name,), (name, "manifest.json"), _then(mut, _reseal(name)))

    for v in [0, hub]:
        for o in [4, 8, 16, io]:
            hostile(f"slot{v}+{o}", "graph.fg", _flip("graph.fg", slot_off(v) + o, 1))
    last_count = n - (slot_pages - 1) * spp
    if last_count * sb < p:
        hostile("slack", "graph.fg", _flip("graph.fg", slot_pages * p + last_count * sb, 0))
    for o in [16, 8, 48, 64, 88]:
        hostile(f"graph-header+{o}", "graph.fg", _flip("graph.fg", o, 0))
    hostile("graph-swap-1-2", "graph.fg", _swap("graph.fg", 1, 2, p))
    hostile("graph-drop-last-page", "graph.fg", _truncate("graph.fg", gsize - p))
    hostile("graph-extra-page", "graph.fg", _append("graph.fg", bytes(p)))
    for o in [p, p + 5, 2 * p - 8, 2 * p - 1, 16]:
        hostile(f"overflow+{o}", "overflow.fg", _flip("overflow.fg", o, 2))
    hostile("overflow-swap-1-2", "overflow.fg", _swap("overflow.fg", 1, 2, p))
    hostile("overflow-drop-last-page", "overflow.fg", _truncate("overflow.fg", osize - p))
    if not inline:
        for o in [p + 3, p + lay["feature_stride"] * 5 + 17, p + row_bytes, 24]:
            hostile(f"features+{o}", "features.fg", _flip("features.fg", o, 4))
        d0 = _npy_data_offset((pr.path / "feature_crc.npy").read_bytes())
        hostile("feature_crc", "feature_crc.npy", _flip("feature_crc.npy", d0 + 4, 0), files=("feature_crc.npy", "features.fg"))
    if pr.manifest["reorder"] != "none":
        for name in ["node_order.npy", "node_index.npy"]:
            d0 = _npy_data_offset((pr.path / name).read_bytes())
            hostile(name, name, _flip(name, d0 + 8 * 5, 0), files=("node_order.npy", "node_index.npy"))

    # --- hostile manifests: every edit is inconsistent with the files it describes
    def edit(cid, fn, files=("manifest.json",)):
        add("hostile-manifest", cid, files + ("manifest.json",), ("manifest.json",), _edit_manifest(fn))

    def inc(*path, by=1):
        def f(m):
            o = m
            for k in path[:-1]:
                o = o[k]
            o[path[-1]] += by

        return f

    edit("num_nodes+1", inc("num_nodes"), ("graph.fg",))
    edit("num_nodes-1", inc("num_nodes", by=-1), ("graph.fg",))
    edit("num_edges+1", inc("num_edges"), ("graph.fg",))
    edit("inline_cap+1", inc("graph", "inline_cap"), ("graph.fg",))
    edit("overflow_entries+1", inc("graph", "overflow_entries"), ("graph.fg", "overflow.fg"))
    edit("dim+1", inc("features", "dim"), ("graph.fg",))
    edit("page_size*2", lambda m: m.update(page_size=m["page_size"] * 2), ("graph.fg",))
    edit("page_size-odd", lambda m: m.update(page_size=3000))
    edit("format_version", lambda m: m.update(format_version=3))
    edit("format_version-1", lambda m: m.update(format_version=1))  # a v1 manifest carries no dataset id
    edit("dataset_id+1", inc("dataset_id"), ("graph.fg",))
    edit("dataset_id-missing", lambda m: m.pop("dataset_id"))
    edit("magic", lambda m: m.update(magic="flashgnn-datasex"))
    edit("id_bytes", lambda m: m.update(id_bytes=8), ("graph.fg",))
    edit("placement", lambda m: m["features"].update(placement="inline" if not inline else "separate"), ("graph.fg", "features.fg"))
    edit("dtype", lambda m: m["features"].update(dtype="float16"), ("graph.fg", "features.fg"))
    edit("graph-bytes", inc("files", "graph.fg", "bytes", by=p), ("graph.fg",))
    edit("graph-crc", inc("files", "graph.fg", "crc32c"), ("graph.fg",))
    edit("labels-crc", inc("files", "labels.npy", "crc32c"), ("labels.npy",))
    edit("split-count", inc("splits", "train"), ("split_train.npy",))
    edit("escape", lambda m: m["files"].update({"../escape.npy": {"bytes": 1, "crc32c": 0}}), ("../escape.npy",))
    edit("reorder", lambda m: m.update(reorder="none" if m["reorder"] != "none" else "degree"), ("node_order.npy", "node_index.npy", "graph.fg"))

    # --- foreign-dataset pages: copied from a second build of the same input and options (same layout,
    # same data, another dataset id). Raw (the manifest's whole-file CRC also disagrees) and re-sealed
    # (only the per-page binding stands between the page and the reader).
    twin = pr.twin

    def foreign(cid, name, lo, length, files=None):
        mine, theirs = (pr.path / name).read_bytes(), (twin / name).read_bytes()
        assert len(mine) == len(theirs), f"{name}: the twin must have the same layout"
        if mine[lo : lo + length] == theirs[lo : lo + length]:
            return  # identical bytes: nothing to detect

        def m(d: Path):
            b = bytearray((d / name).read_bytes())
            b[lo : lo + length] = theirs[lo : lo + length]
            (d / name).write_bytes(bytes(b))

        add("foreign-pages", cid, files or (name,), (name,), m)
        add("foreign-pages", f"{cid}+resealed", files or (name,), (name, "manifest.json"), _then(m, _reseal(name)))

    foreign("graph-header", "graph.fg", 0, p)
    for pg in sorted({1, (slot_pages + 1) // 2, slot_pages}):
        foreign(f"graph-page-{pg}", "graph.fg", pg * p, p)
    foreign("graph-one-slot", "graph.fg", slot_off(hub), sb)
    foreign("graph-whole", "graph.fg", 0, gsize)
    foreign("overflow-header", "overflow.fg", 0, p)
    for pg in sorted({1, ovp}):
        foreign(f"overflow-page-{pg}", "overflow.fg", pg * p, p)
    foreign("overflow-whole", "overflow.fg", 0, osize)
    if not inline:
        fsize = pr.size("features.fg")
        foreign("features-header", "features.fg", 0, p)
        foreign("features-whole", "features.fg", 0, fsize)
        csize = pr.size("feature_crc.npy")
        foreign("feature_crc-whole", "feature_crc.npy", 0, csize, files=("feature_crc.npy", "features.fg"))
        foreign("features+crc-whole", "features.fg", 0, fsize)  # the rows are identical: only the header differs

    # --- side files of the wrong dtype, shape or value range, with the manifest re-sealed so that only
    # the dtype/shape/range checks stand (verify and open must refuse them; reads must never use them).
    def side(cid, name, fn):
        def m(d: Path):
            a = np.load(d / name)
            (d / name).unlink()  # hard-linked to the pristine file: never write through it
            np.save(d / name, fn(a.copy()))

        add("side-files", cid, (name,), (name, "manifest.json"), _then(m, _reseal(name)))

    def setat(i, value):
        def f(a):
            a[i] = value
            return a

        return f

    num_classes = pr.manifest["labels"]["num_classes"]
    side("split-int32", "split_train.npy", lambda a: a.astype(np.int32))
    side("split-uint8", "split_train.npy", lambda a: a.astype(np.uint8))
    side("split-float64", "split_train.npy", lambda a: a.astype(np.float64))
    side("split-2d", "split_train.npy", lambda a: a.reshape(-1, 1))
    side("split-short", "split_val.npy", lambda a: a[:-1])
    side("split-id=N", "split_val.npy", setat(0, n))
    side("split-id=-1", "split_test.npy", setat(-1, -1))
    side("labels-int32", "labels.npy", lambda a: a.astype(np.int32))
    side("labels-float64", "labels.npy", lambda a: a.astype(np.float64))
    side("labels-2d", "labels.npy", lambda a: a.reshape(-1, 1))
    side("labels-long", "labels.npy", lambda a: np.append(a, 0))
    side("labels=num_classes", "labels.npy", setat(n // 2, num_classes))
    side("labels=-2", "labels.npy", setat(1, -2))
    if pr.manifest["reorder"] != "none":
        side("node_order-int32", "node_order.npy", lambda a: a.astype(np.int32))
        side("node_index-uint64", "node_index.npy", lambda a: a.astype(np.uint64))
        side("node_order-short", "node_order.npy", lambda a: a[:-1])
        side("node_order=N", "node_order.npy", setat(3, n))
    if not inline:
        side("feature_crc-int64", "feature_crc.npy", lambda a: a.astype(np.int64))
        side("feature_crc-uint64", "feature_crc.npy", lambda a: a.astype(np.uint64))
        side("feature_crc-2d", "feature_crc.npy", lambda a: a.reshape(-1, 1))
    return cases


def _wal_frames(data: bytes) -> list[tuple[int, int]]:
    """(offset, total bytes) of every frame of a WAL (header 40 B; frame = 16 B header + payload)."""
    out, off = [], 40
    while off + 16 <= len(data):
        length = int.from_bytes(data[off : off + 4], "little") & ((1 << 27) - 1)
        out.append((off, 16 + length))
        off += 16 + length
    return out


def generate_mut_cases(pr: Pristine) -> list[Case]:
    """Damage under mut/ of the mutable dataset: log, CURRENT, free list, the current generation's base,
    and mut/ entries of the wrong kind. Each must end in a clean error of the corruption type — from
    verify (API and CLI) and from flashgnn.Sampler and NeighborLoader, which replay mut/."""
    cases: list[Case] = []
    ds, cat = pr.name, "mut-damage"
    mdir = pr.path / "mut"
    cur = json.loads((mdir / "CURRENT").read_text())
    gen = cur["generation"]
    wal, free = f"mut/wal-{gen}.log", f"mut/free-{gen}.bin"

    def add(cid, files, touch, mut):
        cases.append(Case(f"{ds}:{cat}:{cid}", ds, cat, tuple(files), tuple(touch), mut, sampler=True))

    # The log: header fields, and every field of every frame but the last (damage to the last frame is
    # indistinguishable from a torn write of an unacknowledged batch: reported, not refused).
    data = (pr.path / wal).read_bytes()
    frames = _wal_frames(data)
    assert len(frames) >= 4, frames
    for off in [0, 9, 16, 24, 32]:
        add(f"wal-header@{off}", (f"wal-{gen}.log",), (wal,), _flip(wal, off, 1))
    for k, (fo, size) in enumerate(frames[:-1]):
        for o in sorted({0, 5, 9, 16, size - 1}):
            add(f"wal-frame{k}@{fo + o}", (f"wal-{gen}.log",), (wal,), _flip(wal, fo + o, 2))
    # The log of another dataset (same generation, base_seq and frames; its header bound to another
    # dataset id, as a copied mut/ or wal file is): refused at byte 36, never replayed onto this base.
    def foreign_wal(d: Path):
        b = bytearray((d / wal).read_bytes())
        b[36:40] = crc32c((0x0123_4567_89AB_CDEF).to_bytes(8, "little") + bytes(b[:32])).to_bytes(4, "little")
        (d / wal).write_bytes(bytes(b))

    assert int.from_bytes(data[8:12], "little") >= 3, "the pristine store writes bound (version 3) logs"
    add("wal-of-another-dataset", (f"wal-{gen}.log",), (wal,), foreign_wal)
    ctext = (mdir / "CURRENT").read_bytes()
    for off in sorted({0, 5, ctext.find(b"generation") + 14, ctext.find(b"crc32c") + 10, len(ctext) // 2}):
        add(f"CURRENT@{off}", ("CURRENT",), ("mut/CURRENT",), _flip("mut/CURRENT", off, 0))
    if (pr.path / free).exists():
        fsize = (pr.path / free).stat().st_size
        for off in [0, 8, 16, fsize - 1]:
            add(f"free@{off}", (f"free-{gen}.bin",), (free,), _flip(free, off, 0))
    # The current generation's base (a complete dataset under mut/gen-G): a slot and an overflow page.
    gbase = f"mut/gen-{gen}"
    glay = flashgnn.open(pr.path / gbase).layout
    gp = glay["page_size"]
    add("gen-slot", ("graph.fg",), (f"{gbase}/graph.fg",), _flip(f"{gbase}/graph.fg", gp + 6, 3))
    add("gen-header", ("graph.fg",), (f"{gbase}/graph.fg",), _flip(f"{gbase}/graph.fg", 20, 0))

    # mut/ entries of the wrong kind: refused, naming them — never ignored.
    def replace_mut_with_file(content: bytes):
        def m(d: Path):
            shutil.rmtree(d / "mut")
            (d / "mut").write_bytes(content)

        return m

    def replace_with_dir(rel: str):
        def m(d: Path):
            (d / rel).unlink()
            (d / rel).mkdir()

        return m

    # The whole mut/ of another dataset after a compaction (CURRENT, gen-G, its free list and log from a
    # second build with the same operations: consistent with each other, each gen/log pair bound to its
    # own generation's id): refused at CURRENT's root_dataset_id, never replayed onto this dataset.
    def foreign_mut(d: Path):
        shutil.rmtree(d / "mut")
        shutil.copytree(pr.twin / "mut", d / "mut")

    assert pr.twin is not None and json.loads((pr.twin / "mut" / "CURRENT").read_text())["generation"] == gen >= 1
    add("mut-of-another-dataset", ("CURRENT",), (), foreign_mut)
    add("mut-is-a-file", ("mut",), (), replace_mut_with_file(b"not a directory\n"))
    add("mut-is-an-empty-file", ("mut",), (), replace_mut_with_file(b""))
    add("CURRENT-is-a-dir", ("CURRENT",), (), replace_with_dir("mut/CURRENT"))
    add("wal-is-a-dir", (f"wal-{gen}.log",), (), replace_with_dir(wal))
    # Files CURRENT requires, deleted: corruption naming them (not a bare FileNotFoundError).
    add("wal-missing", (f"wal-{gen}.log",), (), _delete(wal))
    if (pr.path / free).exists():
        add("free-missing", (f"free-{gen}.bin",), (), _delete(free))
    return cases


def _side(name: str, fn):
    """Rewrite side file ``name`` as ``fn(array)`` (a private copy: the original is a hard link) and re-seal
    its whole-file checksum, so only the dtype/shape/range checks stand."""

    def m(d: Path):
        a = np.load(d / name)
        (d / name).unlink()
        np.save(d / name, fn(a.copy()))

    return _then(m, _reseal(name))


def _setat(i, value):
    def f(a):
        a[i] = value
        return a

    return f


def generate_typed_cases(pr: Pristine) -> list[Case]:
    """Damage to what a typed dataset adds: per-type feature tables and their row CRCs, labels and splits
    (dtype, shape, values), the relation counts in slots, and the manifest's `types` section (re-sealed)."""
    cases: list[Case] = []
    ds, cat = pr.name, "typed-files"
    man, lay = pr.manifest, pr.layout
    p, spp, sb, n = lay["page_size"], lay["slots_per_page"], lay["slot_bytes"], man["num_nodes"]
    nts = man["types"]["node_types"]
    tlab = next(i for i, t in enumerate(nts) if t["labels"])
    tfeat = [i for i, t in enumerate(nts) if t["features"]]
    assert len(tfeat) >= 2 and man["graph"]["rel_counts"] >= 2

    def add(cid, files, touch, mut, fast=True, position=True):
        cases.append(Case(f"{ds}:{cat}:{cid}", ds, cat, tuple(files), tuple(touch), mut, fast, position))

    labels, split = f"t{tlab}.labels.npy", f"t{tlab}.split_train.npy"
    # Feature tables: header fields, first/middle/last row, the zero tail; raw and re-sealed; truncated.
    for t in tfeat:
        name, crc = f"t{t}.features.fg", f"t{t}.feature_crc.npy"
        size = pr.size(name)
        for off in [0, 8, 16, 24, 32, 48, p - 4, p, p + 3, size - 1]:
            add(f"{name}@{off}", (name,), (name,), _flip(name, off, off % 8), fast=off in (0, 16, p, size - 1))
            add(f"{name}@{off}+resealed", (name,), (name, "manifest.json"), _then(_flip(name, off, 1), _reseal(name)))
        add(f"{name}:truncate-{p}", (name,), (name,), _truncate(name, p))
        add(f"{name}:truncate-{p}+resealed", (name,), (name, "manifest.json"), _then(_truncate(name, p), _reseal(name)))
        add(f"{name}:append+resealed", (name,), (name, "manifest.json"), _then(_append(name, bytes(512)), _reseal(name)))
        add(f"{name}:delete", (name,), (name,), _delete(name), position=False)
        d0 = _npy_data_offset((pr.path / crc).read_bytes())
        add(f"{crc}@{d0}", (crc, name), (crc,), _flip(crc, d0, 0))
        add(f"{crc}@{d0}+resealed", (crc, name), (crc, "manifest.json"), _then(_flip(crc, d0, 0), _reseal(crc)))
        add(f"{crc}:int64", (crc,), (crc, "manifest.json"), _side(crc, lambda a: a.astype(np.int64)))
        add(f"{crc}:2d", (crc,), (crc, "manifest.json"), _side(crc, lambda a: a.reshape(-1, 1)))
        add(f"{crc}:short", (crc,), (crc, "manifest.json"), _side(crc, lambda a: a[:-1]))
    # One type's table (and CRCs) in place of another's: rows bound to other global ids, other widths.
    a, b = tfeat[0], tfeat[1]

    def swap_tables(d: Path):
        for kind in ("features.fg", "feature_crc.npy"):
            x, y = d / f"t{a}.{kind}", d / f"t{b}.{kind}"
            tmp = d / "swap.tmp"
            os.rename(x, tmp)
            os.rename(y, x)
            os.rename(tmp, y)

    both = (f"t{a}.features.fg", f"t{b}.features.fg", f"t{a}.feature_crc.npy", f"t{b}.feature_crc.npy")
    add("swap-type-tables+resealed", both, ("manifest.json",), _then(swap_tables, _reseal(*both)))
    # Labels and splits: dtype, shape, values.
    for cid, name, fn in [
        ("labels-int32", labels, lambda x: x.astype(np.int32)),
        ("labels-float64", labels, lambda x: x.astype(np.float64)),
        ("labels-2d", labels, lambda x: x.reshape(-1, 1)),
        ("labels-short", labels, lambda x: x[:-1]),
        ("labels=num_classes", labels, _setat(3, nts[tlab]["labels"]["num_classes"])),
        ("labels=-2", labels, _setat(3, -2)),
        ("split-int32", split, lambda x: x.astype(np.int32)),
        ("split-float64", split, lambda x: x.astype(np.float64)),
        ("split-long", split, lambda x: np.append(x, 0)),
        ("split=count", split, _setat(0, nts[tlab]["count"])),
        ("split=-1", split, _setat(-1, -1)),
    ]:
        add(cid, (name,), (name, "manifest.json"), _side(name, fn))
    for name in (labels, split):
        d0 = _npy_data_offset((pr.path / name).read_bytes())
        add(f"{name}@{d0}", (name,), (name,), _flip(name, d0, 0))
        add(f"{name}@{d0 + 7}", (name,), (name,), _flip(name, d0 + 7, 7))
    # Relation counts (bytes 24.. of a slot) of the first, a middle and the last node: raw and re-sealed.
    for v in sorted({0, n // 2, n - 1}):
        base = p + (v // spp) * p + (v % spp) * sb
        for o in (24, 28, 24 + 4 * man["graph"]["rel_counts"] - 1):
            add(f"relcount-{v}+{o}", ("graph.fg",), ("graph.fg",), _flip("graph.fg", base + o, 0), fast=o == 24)
            add(f"relcount-{v}+{o}+resealed", ("graph.fg",), ("graph.fg", "manifest.json"),
                _then(_flip("graph.fg", base + o, 0), _reseal("graph.fg")))

    # The `types` section, re-sealed: every edit disagrees with the files it describes.
    def edit(cid, fn, files=()):
        add(f"types:{cid}", files + ("manifest.json",), ("manifest.json",), _edit_manifest(lambda m: fn(m["types"])),
            position=False)

    def nt(i, key, value):
        return lambda t: t["node_types"][i].__setitem__(key, value)

    edit("count+1", lambda t: t["node_types"][0].update(count=t["node_types"][0]["count"] + 1))
    edit("count-huge", nt(tlab, "count", 2**63))
    edit("dim+1", lambda t: t["node_types"][tlab]["features"].update(dim=t["node_types"][tlab]["features"]["dim"] + 1))
    edit("dim-huge", lambda t: t["node_types"][tlab]["features"].update(dim=2**40))
    edit("dtype-float16", lambda t: t["node_types"][tlab]["features"].update(dtype="float16"), (f"t{tlab}.features.fg",))
    edit("dtype-int64", lambda t: t["node_types"][tlab]["features"].update(dtype="int64"))
    edit("features-dropped", nt(tlab, "features", None))
    edit("features-added", nt(next(i for i, t in enumerate(nts) if not t["features"]), "features",
                              {"dim": 2, "dtype": "float32", "synthetic": False}))
    edit("labels-dropped", nt(tlab, "labels", None))
    edit("num_classes=0", lambda t: t["node_types"][tlab]["labels"].update(num_classes=0), (labels,))
    edit("labeled+1", lambda t: t["node_types"][tlab]["labels"].update(labeled=t["node_types"][tlab]["labels"]["labeled"] + 1),
         (labels,))
    edit("split-count+1", lambda t: t["node_types"][tlab]["splits"].update(train=t["node_types"][tlab]["splits"]["train"] + 1),
         (split,))
    edit("split-added", lambda t: t["node_types"][tlab]["splits"].update(val=3))
    edit("split-dropped", lambda t: t["node_types"][tlab]["splits"].pop("train"))
    edit("name-duplicate", nt(1, "name", nts[0]["name"]))
    edit("name-escape", nt(1, "name", "../x"))
    edit("name-separator", nt(1, "name", "a__b"))
    edit("node_types-empty", lambda t: t.update(node_types=[]))
    edit("node_types-reordered", lambda t: t["node_types"].reverse(), ("graph.fg",))
    edit("edge-src-unknown", lambda t: t["edge_types"][0].update(src="nope"))
    edit("edge-dst-changed", lambda t: t["edge_types"][0].update(dst=nts[0]["name"] if t["edge_types"][0]["dst"] != nts[0]["name"] else nts[1]["name"]),
         ("graph.fg",))
    edit("edge-num+1", lambda t: t["edge_types"][0].update(num_edges=t["edge_types"][0]["num_edges"] + 1))
    edit("edge-dropped", lambda t: t["edge_types"].pop())
    edit("edge-duplicated", lambda t: t["edge_types"].append(dict(t["edge_types"][0])))
    edit("edges-swapped", lambda t: t["edge_types"].__setitem__(slice(0, 2), t["edge_types"][1::-1]), ("graph.fg",))
    add("types:null", ("manifest.json",), ("manifest.json",), _edit_manifest(lambda m: m.update(types=None)), position=False)
    add("types:string", ("manifest.json",), ("manifest.json",), _edit_manifest(lambda m: m.update(types="x")), position=False)
    add("types:format_version=2", ("manifest.json",), ("manifest.json",),
        _edit_manifest(lambda m: m.update(format_version=2)), position=False)
    add("types:rel_counts+1", ("manifest.json",), ("manifest.json",),
        _edit_manifest(lambda m: m["graph"].update(rel_counts=m["graph"]["rel_counts"] + 1)), position=False)
    add("types:link_split-added", ("manifest.json",), ("manifest.json",), _edit_manifest(lambda m: m.update(
        link_split={"origin": "given", "undirected": False, "seed": 0, "val_fraction": 0.0, "test_fraction": 0.0,
                    "disjoint_train_ratio": 0.0, "input_pairs": 0, "held_out_edges": 0, "splits": {}})),
        position=False)
    return cases


def generate_link_cases(pr: Pristine) -> list[Case]:
    """Damage to a link split: every `link_<split>_<part>.npy` (dtype, shape, ids, bytes, deleted) and the
    manifest's `link_split` section (counts, origin, fractions; re-sealed), plus splits that break the
    drawn split's promises (a held-out edge still in the graph, a repeated negative)."""
    cases: list[Case] = []
    ds, cat = pr.name, "link-files"
    n = pr.manifest["num_nodes"]
    names = sorted(f for f in pr.manifest["files"] if f.startswith("link_"))
    assert len(names) == 8, names

    def add(cid, files, touch, mut, fast=True, position=True):
        cases.append(Case(f"{ds}:{cat}:{cid}", ds, cat, tuple(files), tuple(touch), mut, fast, position))

    for name in names:
        fast = name.startswith("link_val")
        data = (pr.path / name).read_bytes()
        d0 = _npy_data_offset(data)
        for off in [0, 8, data.find(b"shape") + 10, d0, len(data) - 1]:
            add(f"{name}@{off}", (name,), (name,), _flip(name, off, 2), fast=fast or off == d0)
        for cid, fn in [
            ("int32", lambda a: a.astype(np.int32)),
            ("uint64", lambda a: a.astype(np.uint64)),
            ("float64", lambda a: a.astype(np.float64)),
            ("2d", lambda a: a.reshape(-1, 1)),
            ("short", lambda a: a[:-1]),
            ("=N", _setat(0, n)),
            ("=-1", _setat(-1, -1)),
            ("=2^40", _setat(1, 2**40)),
        ]:
            add(f"{name}:{cid}", (name,), (name, "manifest.json"), _side(name, fn), fast=fast or cid in ("=N", "short"))
        add(f"{name}:truncate", (name,), (name,), _truncate(name, len(data) - 8), fast=fast)
        add(f"{name}:delete", (name,), (name,), _delete(name), position=False, fast=fast)

    def edit(cid, fn, files=()):
        add(f"link_split:{cid}", files + ("manifest.json",), ("manifest.json",),
            _edit_manifest(lambda m: fn(m["link_split"])), position=False)

    def part(s, key, value):
        return lambda ls: ls["splits"][s].__setitem__(key, value)

    vpos = pr.manifest["link_split"]["splits"]["val"]["positives"]
    edit("positives+1", part("val", "positives", vpos + 1), ("link_val_src.npy",))
    edit("positives-huge", part("val", "positives", 2**62), ("link_val_src.npy",))
    edit("neg_per_positive+1", part("val", "neg_per_positive", 3), ("link_val_neg.npy",))
    edit("neg_per_positive-huge", part("val", "neg_per_positive", 2**62), ("link_val_neg.npy",))
    edit("neg_per_positive=0", part("val", "neg_per_positive", 0), ("link_val_neg.npy",))
    edit("neg_pairs+1", part("test", "neg_pairs", 1), ("link_test_neg_src.npy",))
    edit("split-dropped", lambda ls: ls["splits"].pop("test"))
    edit("split-unknown", lambda ls: ls["splits"].update(bogus={"positives": 1, "neg_per_positive": 0, "neg_pairs": 0}))
    edit("origin-unknown", lambda ls: ls.update(origin="weird"))
    edit("origin-given", lambda ls: ls.update(origin="given"))
    edit("val_fraction=2", lambda ls: ls.update(val_fraction=2.0))
    edit("val_fraction<0", lambda ls: ls.update(val_fraction=-0.1))
    edit("fractions-sum-1", lambda ls: ls.update(val_fraction=0.5, test_fraction=0.5))
    edit("disjoint_train_ratio=1", lambda ls: ls.update(disjoint_train_ratio=1.0))
    edit("splits-string", lambda ls: ls.update(splits="x"))
    edit("seed-negative", lambda ls: ls.update(seed=-1))
    add("link_split:null", ("manifest.json",), ("manifest.json",), _edit_manifest(lambda m: m.update(link_split=None)),
        position=False)
    add("link_split:list", ("manifest.json",), ("manifest.json",), _edit_manifest(lambda m: m.update(link_split=[])),
        position=False)
    add("link_split:files-extra", ("manifest.json",), ("manifest.json",), _edit_manifest(
        lambda m: m["files"].update({"link_train_neg.npy": dict(m["files"]["link_val_neg.npy"])})), position=False)

    # Broken promises with consistent checksums: a validation positive that is a stored edge (leakage);
    # a negative repeated (negatives must be distinct).
    def leak(d: Path):
        g = flashgnn.open(d)
        u = int(g.neighbors(5)[0])
        for nm, v in (("link_val_src.npy", u), ("link_val_dst.npy", 5)):
            a = np.load(d / nm)
            (d / nm).unlink()
            a[0] = v
            np.save(d / nm, a)

    add("held-out-edge-in-graph", ("link_val_src.npy", "graph.fg"), ("link_val_src.npy", "link_val_dst.npy", "manifest.json"),
        _then(leak, _reseal("link_val_src.npy", "link_val_dst.npy")))
    add("negative-repeated", ("link_val_neg.npy",), ("link_val_neg.npy", "manifest.json"),
        _side("link_val_neg.npy", lambda a: np.concatenate([a[1:2], a[1:]])))
    ts, tn = np.load(pr.path / "link_test_src.npy"), np.load(pr.path / "link_test_neg.npy")
    k = len(tn) // len(ts)
    tr = list(zip(np.load(pr.path / "link_train_src.npy").tolist(), np.load(pr.path / "link_train_dst.npy").tolist()))
    i, w = next((i, b if a == u else a) for i, u in enumerate(ts.tolist()) for a, b in tr if u in (a, b))
    add("negative-is-a-positive", ("link_test_neg.npy",), ("link_test_neg.npy", "manifest.json"),
        _side("link_test_neg.npy", _setat(i * k, w)))
    for c in cases[-3:]:
        c.verify_only = True
    return cases


def generate_typed_link_cases(pr: Pristine) -> list[Case]:
    """Damage to what a typed link split adds: ids bounded by their own node type's count (an id valid for the
    dataset but past its type), the manifest's `link_split.edge_type` (unknown, missing, not a string), bytes
    of every split file, and a held-out edge still stored in its edge type (leakage: verify's to find)."""
    cases: list[Case] = []
    ds, cat = pr.name, "typed-link-files"
    counts = {t["name"]: t["count"] for t in pr.manifest["types"]["node_types"]}
    src_t, _, dst_t = TYPED_LINK_EDGE
    names = sorted(f for f in pr.manifest["files"] if f.startswith("link_"))

    def add(cid, files, touch, mut, position=True, verify_only=False):
        cases.append(Case(f"{ds}:{cat}:{cid}", ds, cat, tuple(files), tuple(touch), mut, True, position,
                          verify_only=verify_only))

    for name in names:
        data = (pr.path / name).read_bytes()
        add(f"{name}@data", (name,), (name,), _flip(name, _npy_data_offset(data), 3))
        add(f"{name}:truncate", (name,), (name,), _truncate(name, len(data) - 8))
        # Within the dataset's node count, one past its own type's: only the per-type bound refuses it.
        bound = counts[src_t] if name.endswith("_src.npy") else counts[dst_t]
        add(f"{name}:=type-count", (name,), (name, "manifest.json"), _side(name, _setat(0, bound)))

    def edit(cid, fn):
        add(f"link_split:{cid}", ("manifest.json",), ("manifest.json",),
            _edit_manifest(lambda m: fn(m["link_split"])), position=False)

    edit("edge_type-unknown", lambda ls: ls.update(edge_type="author__reads__paper"))
    edit("edge_type-missing", lambda ls: ls.pop("edge_type"))
    edit("edge_type-number", lambda ls: ls.update(edge_type=5))

    def leak(d: Path):
        # A stored author -> paper edge (the paper's list along `writes`) planted as validation positive 0.
        g = flashgnn.open(d)
        off = {t: g.type_offset(t) for t in (src_t, dst_t)}
        for v in range(counts[dst_t]):
            u = [x - off[src_t] for x in g.neighbors(v + off[dst_t]).tolist()
                 if off[src_t] <= x < off[src_t] + counts[src_t]]
            if u:
                break
        for nm, val in (("link_val_src.npy", u[0]), ("link_val_dst.npy", v)):
            a = np.load(d / nm)
            (d / nm).unlink()
            a[0] = val
            np.save(d / nm, a)

    add("held-out-edge-in-graph", ("link_val_src.npy", "graph.fg"),
        ("link_val_src.npy", "link_val_dst.npy", "manifest.json"),
        _then(leak, _reseal("link_val_src.npy", "link_val_dst.npy")), verify_only=True)
    return cases


# ---------------------------------------------------------------------------
# Running cases


def prepare(pr: Pristine, case: Case, root: Path) -> Path:
    d = root / re.sub(r"[^A-Za-z0-9_.+-]", "_", case.id)
    # Hard links for every file (subdirectories such as mut/ included), then private copies of the
    # files the case rewrites (``touch``: paths relative to the dataset).
    shutil.copytree(pr.path, d, copy_function=os.link)
    for rel in case.touch:
        if (pr.path / rel).is_file():
            (d / rel).unlink()
            shutil.copyfile(pr.path / rel, d / rel)
            (d / rel).chmod(0o644)
    case.mutate(d)
    return d


def run_cases(pristine: dict[str, Pristine], cases: list[Case], root: Path, workers: int = 3) -> dict[str, dict]:
    """Materialise every case and run it through fork-server workers; returns results by case id."""
    jobs = []
    for c in cases:
        pr = pristine[c.dataset]
        jobs.append({"id": c.id, "path": str(prepare(pr, c, root)), "ref": str(pr.ref), "cli": True,
                     "sampler": c.sampler, "hetero": c.dataset in (TYPED, TYPED_LINK)})
    chunks = [jobs[i::workers] for i in range(workers)]

    def one(chunk):
        if not chunk:
            return {}
        proc = subprocess.run(
            [sys.executable, str(WORKER)],
            input=json.dumps({"cases": chunk, "timeout": CASE_TIMEOUT_S}),
            capture_output=True,
            text=True,
            env=cli_env(),
            timeout=CASE_TIMEOUT_S * 2 * len(chunk) + 60,
        )
        got = {}
        for line in proc.stdout.splitlines():
            r = json.loads(line)
            got[r["id"]] = r
        for j in chunk:  # a worker that died mid-run loses the rest: reported as crashes
            got.setdefault(j["id"], {"id": j["id"], "lost": True, "worker_rc": proc.returncode, "worker_stderr": proc.stderr[-2000:]})
        return got

    results: dict[str, dict] = {}
    with ThreadPoolExecutor(workers) as ex:
        for got in ex.map(one, chunks):
            results.update(got)
    for j in jobs:
        results[j["id"]]["path"] = j["path"]
    return results


# ---------------------------------------------------------------------------
# Checks (each returns a list of problems, one string per offending case)


def _last_line(text: str) -> str:
    lines = [ln for ln in (text or "").splitlines() if ln.strip()]
    return lines[-1] if lines else ""


def problems_crash(c: Case, r: dict) -> list[str]:
    out = []
    if r.get("lost"):
        return [f"{c.id}: worker died (rc {r.get('worker_rc')}): {r.get('worker_stderr', '')[-300:]}"]
    st = r["api_status"]
    if st["signal"] == 14:
        out.append(f"{c.id}: API hang (no result in {CASE_TIMEOUT_S} s)")
    elif st["signal"] is not None or st["rc"] != 0 or "api" not in r:
        out.append(f"{c.id}: API child crashed: {st}")
    api = r.get("api", {})
    kinds = [api.get("verify", [""])[0], api.get("open", [""])[0]] + [s[0] for s in api.get("reads", {}).get("samples", [])]
    if "panic" in kinds:
        out.append(f"{c.id}: Rust panic surfaced: {api}")
    cs = r.get("cli_status", {})
    if cs.get("signal") == 14:
        out.append(f"{c.id}: CLI hang")
    elif cs.get("signal") is not None:
        out.append(f"{c.id}: CLI killed by signal {cs['signal']}")
    if "panicked" in r.get("cli_stderr", ""):
        out.append(f"{c.id}: CLI panicked: {_last_line(r['cli_stderr'])}")
    return out


def problems_verify_ok(c: Case, r: dict) -> list[str]:
    out = []
    if r.get("api", {}).get("verify", [""])[0] == "ok":
        out.append(f"{c.id}: flashgnn.verify reported OK on a modified dataset")
    if r.get("cli_status", {}).get("rc") == 0:
        out.append(f"{c.id}: `flashgnn verify` exited 0 on a modified dataset: {_last_line(r.get('cli_stdout', ''))}")
    return out


def problems_unclean(c: Case, r: dict) -> list[str]:
    out = []
    api = r.get("api")
    if not api:
        return out
    v = api["verify"]
    if v[0] not in ("ok", "clean"):
        out.append(f"{c.id}: verify raised {v[1]} (not a flashgnn error): {v[2]}")
    o = api["open"]
    if o[0] not in ("ok", "clean"):
        out.append(f"{c.id}: open raised {o[1]} (not a flashgnn error): {o[2]}")
    reads = api.get("reads")
    if reads:
        bad = {k: n for k, n in reads["errors"].items() if k not in ("clean", "index")}
        if bad:
            out.append(f"{c.id}: reads raised non-flashgnn errors {bad}: {reads['samples']}")
    rc = r.get("cli_status", {}).get("rc")
    if rc not in (0, 2, None):
        out.append(f"{c.id}: `flashgnn verify` exit code {rc} (want 2): {_last_line(r.get('cli_stderr', ''))}")
    return out


_POSITION = re.compile(r"byte offset \d+|offset \d+")
# manifest.json is text: a line/column, or the JSON field or entry at fault, locates the damage.
_MANIFEST_POSITION = re.compile(
    r"line \d+,? column \d+|byte offset \d+|`\w+`|\bentry\b|format version \d+|magic|file name|\w+(\.\w+)* = \d+|placement"
)


def problems_message(c: Case, r: dict) -> list[str]:
    out = []
    api = r.get("api", {})
    msgs = []
    if api.get("verify", [""])[0] != "ok":
        msgs.append(("verify", api.get("verify", ["", "", ""])[2]))
    if r.get("cli_status", {}).get("rc") not in (0, None):
        msgs.append(("cli", _last_line(r.get("cli_stderr", ""))))
    for who, msg in msgs:
        if not any(f in msg for f in c.files):
            out.append(f"{c.id}: {who} message names none of {list(c.files)}: {msg}")
        elif c.position_required:
            # The file the message is about is the path before the first ": " (after the CLI's prefix).
            subject = msg.removeprefix("flashgnn verify: error: ").split(": ", 1)[0]
            if subject.endswith("/manifest.json"):
                ok = _MANIFEST_POSITION.search(msg)
            else:
                ok = _POSITION.search(msg)
            if not ok:
                out.append(f"{c.id}: {who} message has no byte offset: {msg}")
    return out


def problems_sampler(c: Case, r: dict) -> list[str]:
    """Cases with ``sampler``: flashgnn.Sampler and NeighborLoader refuse the damage with the corruption
    error type (never IndexError, never success), naming a file and a byte offset."""
    if not c.sampler:
        return []
    out = []
    api = r.get("api", {})
    for who in ("sampler", "loader"):
        got = api.get(who)
        if got is None:
            out.append(f"{c.id}: {who} did not run")
        elif got[0] == "ok":
            out.append(f"{c.id}: {who} served a damaged mutable store without an error")
        elif got[1] != "CorruptDatasetError":
            out.append(f"{c.id}: {who} raised {got[1]} (want CorruptDatasetError): {got[2]}")
        elif not any(f in got[2] for f in c.files) or not _POSITION.search(got[2]):
            out.append(f"{c.id}: {who} message names none of {list(c.files)} or no byte offset: {got[2]}")
    return out


def silent_wrong(c: Case, r: dict, kind: str) -> int:
    if c.verify_only:
        return 0
    return r.get("api", {}).get("reads", {}).get("wrong", {}).get(kind, 0)


CHECKS = {"crash": problems_crash, "verify_ok": problems_verify_ok, "unclean": problems_unclean, "message": problems_message,
          "sampler": problems_sampler}


def summarise(cases: list[Case], results: dict[str, dict]) -> dict:
    crashes = sum(1 for c in cases if problems_crash(c, results[c.id]))
    verify_ok = sum(1 for c in cases if problems_verify_ok(c, results[c.id]))
    unclean = sum(1 for c in cases if problems_unclean(c, results[c.id]))
    clean = sum(
        1
        for c in cases
        if not problems_crash(c, results[c.id])
        and not problems_verify_ok(c, results[c.id])
        and not problems_unclean(c, results[c.id])
        and not problems_sampler(c, results[c.id])
    )
    wrong = {k: sum(silent_wrong(c, results[c.id], k) > 0 for c in cases) for k in ("neighbors", "features", "labels", "splits")}
    return {"cases": len(cases), "clean": clean, "crashes": crashes, "verify_ok": verify_ok, "unclean": unclean, "wrong": wrong}


def summary_line(label: str, s: dict) -> str:
    w = s["wrong"]
    return (
        f"{label}: {s['cases']} cases, {s['clean']} clean errors, {s['crashes']} crashes/hangs, "
        f"{s['verify_ok']} verified OK though modified, {s['unclean']} non-flashgnn errors; "
        f"reads returning unchecked wrong data: neighbors {w['neighbors']}, features {w['features']}, "
        f"labels {w['labels']}, splits {w['splits']}"
    )


# ---------------------------------------------------------------------------
# Fixtures


@pytest.fixture(scope="session")
def all_cases(pristine) -> list[Case]:
    cases = [c for name in DATASET_SPECS for c in generate_cases(pristine[name])]
    cases += generate_mut_cases(pristine[MUTABLE])
    cases += generate_typed_cases(pristine[TYPED]) + generate_link_cases(pristine[LINK])
    cases += generate_typed_link_cases(pristine[TYPED_LINK])
    ids = [c.id for c in cases]
    assert len(ids) == len(set(ids)), "case ids must be unique"
    return cases


@pytest.fixture(scope="session")
def fast_run(pristine, all_cases, tmp_path_factory, suite_report):
    """Run the default (fast) subset once; every test below inspects the results."""
    cases = [c for c in all_cases if c.fast]
    controls = [Case(f"{name}:control:unmodified", name, "control", (), (), lambda d: None) for name in DATASET_SPECS]
    controls.append(Case(f"{MUTABLE}:control:unmodified", MUTABLE, "control", (), (), lambda d: None, sampler=True))
    controls += [Case(f"{name}:control:unmodified", name, "control", (), (), lambda d: None) for name in NEW_KINDS]
    results = run_cases(pristine, cases + controls, tmp_path_factory.mktemp("cases"))
    s = summarise(cases, results)
    suite_report.append(summary_line("corruption suite", s))
    return cases, results, controls


def _by_category(fast_run, category):
    cases, results, _ = fast_run
    sel = [c for c in cases if c.category == category]
    return sel, results


def _fail_if(problems: list[str], what: str):
    if problems:
        shown = "\n  ".join(problems[:25])
        more = f"\n  ... and {len(problems) - 25} more" if len(problems) > 25 else ""
        pytest.fail(f"{len(problems)} {what}:\n  {shown}{more}")


# ---------------------------------------------------------------------------
# Tests


def test_case_inventory(all_cases):
    """Every category has cases on every dataset where it applies, and the default run is a real subset."""
    cats = {(c.dataset, c.category) for c in all_cases}
    for ds in DATASET_SPECS:
        for cat in CATEGORIES:
            assert (ds, cat) in cats, f"no {cat} cases for {ds}"
    for cat in MUT_CATEGORIES:
        assert (MUTABLE, cat) in cats, f"no {cat} cases for {MUTABLE}"
    for ds, kinds in NEW_KINDS.items():
        for cat in kinds:
            assert (ds, cat) in cats, f"no {cat} cases for {ds}"
    fast = sum(c.fast for c in all_cases)
    assert 300 <= fast < len(all_cases)


def test_unmodified_copies_pass_every_check(pristine, fast_run):
    """Control: an unmodified copy verifies OK (API and CLI) and every read returns the original values,
    so the refusals counted below are caused by the damage, not by the harness."""
    _, results, controls = fast_run
    for c in controls:
        r = results[c.id]
        assert r["api_status"] == {"signal": None, "rc": 0}
        assert r["api"]["verify"][0] == "ok", r["api"]["verify"]
        assert r["api"]["open"][0] == "ok"
        reads = r["api"]["reads"]
        assert reads["errors"] == {} and not any(reads["wrong"].values()), reads
        n = int(np.load(pristine[c.dataset].ref)["num_nodes"])
        assert reads["ok"]["neighbors"] == n
        if c.sampler:
            assert r["api"]["sampler"][0] == "ok" and r["api"]["loader"][0] == "ok", r["api"]
        if c.dataset in (TYPED, TYPED_LINK):
            assert reads["ok"]["features"] >= 1 and reads["ok"]["labels"] == 30, reads
        if c.dataset in (LINK, TYPED_LINK):  # three link splits (and the typed one's node split)
            assert reads["ok"]["splits"] == 3 + (c.dataset == TYPED_LINK), reads
        assert r["cli_status"] == {"signal": None, "rc": 0}, r.get("cli_stderr")
        assert "OK" in r["cli_stdout"]


def test_pristine_datasets_untouched(pristine, fast_run):
    """Cases hard-link the files they do not damage: the pristine datasets must be byte-identical afterwards."""
    for pr in pristine.values():
        assert _digest(pr.path) == pr.digest, f"{pr.name} was modified by a case"


@pytest.mark.parametrize("category", ALL_CATEGORIES)
def test_no_crash_no_hang(fast_run, category):
    """No case crashes (signal, panic) or hangs, through the API or the CLI."""
    cases, results = _by_category(fast_run, category)
    assert cases
    _fail_if([p for c in cases for p in problems_crash(c, results[c.id])], "crashes/hangs")


@pytest.mark.parametrize("category", ALL_CATEGORIES)
def test_verify_never_passes_a_modified_dataset(fast_run, category):
    """flashgnn.verify and `flashgnn verify` refuse every modified dataset."""
    cases, results = _by_category(fast_run, category)
    _fail_if([p for c in cases for p in problems_verify_ok(c, results[c.id])], "modified datasets verified OK")


@pytest.mark.parametrize("category", ALL_CATEGORIES)
def test_errors_are_clean_flashgnn_errors(fast_run, category):
    """verify/open/read raise only flashgnn errors (or IndexError for a shrunk id range) and the CLI exits 2."""
    cases, results = _by_category(fast_run, category)
    _fail_if([p for c in cases for p in problems_unclean(c, results[c.id])], "unclean errors")


@pytest.mark.parametrize("category", ALL_CATEGORIES)
def test_error_messages_name_file_and_offset(fast_run, category):
    """Each verify error (API and CLI) names the damaged file and a byte offset (line/column for manifest JSON)."""
    cases, results = _by_category(fast_run, category)
    _fail_if([p for c in cases for p in problems_message(c, results[c.id])], "messages without file/offset")


@pytest.mark.parametrize("category", MUT_CATEGORIES)
def test_sampler_and_loader_refuse_a_damaged_mutable_store(fast_run, category):
    """flashgnn.Sampler and NeighborLoader on a dataset whose mut/ is damaged (log, CURRENT, free list, the
    generation's base, mut/ entries of the wrong kind) raise CorruptDatasetError naming the file and a byte
    offset — not IndexError, not success."""
    cases, results = _by_category(fast_run, category)
    assert len(cases) >= 20
    _fail_if([p for c in cases for p in problems_sampler(c, results[c.id])], "sampler/loader problems")


@pytest.mark.parametrize(
    "kind",
    ["neighbors", "features", "labels", "splits"],
)
def test_reads_never_return_wrong_data(fast_run, kind):
    """After open() succeeds on a damaged dataset, a read either raises a clean error or returns the original value."""
    cases, results, _ = fast_run
    bad = [
        f"{c.id}: {silent_wrong(c, results[c.id], kind)} {kind} reads returned wrong values without an error"
        for c in cases
        if silent_wrong(c, results[c.id], kind)
    ]
    _fail_if(bad, f"cases with silently wrong {kind}")


def test_reads_are_exercised(fast_run):
    """Sanity: the read path really ran on cases whose damage open() does not see (otherwise the read checks prove nothing)."""
    cases, results, _ = fast_run
    opened = [c for c in cases if results[c.id].get("api", {}).get("open", [""])[0] == "ok"]
    assert len(opened) >= 50
    assert sum(results[c.id]["api"]["reads"]["ok"]["neighbors"] for c in opened) > 1000
    errors = sum(results[c.id]["api"]["reads"]["errors"].get("clean", 0) for c in opened)
    assert errors > 0, "no read ever detected damage"


def _run_real_cli(paths: list[str]) -> list[subprocess.CompletedProcess | str]:
    def one(p):
        try:
            return subprocess.run(cli_cmd("verify", p), capture_output=True, text=True, env=cli_env(), timeout=60)
        except subprocess.TimeoutExpired:
            return "timeout"

    with ThreadPoolExecutor(2) as ex:
        return list(ex.map(one, paths))


def _real_cli_problems(cases, results) -> list[str]:
    """Run the installed console script on each case: it must not crash or hang, and must agree with the
    forked run of the same entry point (exit code and error line), which the per-category tests judge."""
    procs = _run_real_cli([results[c.id]["path"] for c in cases])
    bad = []
    for c, pr in zip(cases, procs):
        if pr == "timeout":
            bad.append(f"{c.id}: `flashgnn verify` hung")
            continue
        if pr.returncode < 0 or "panicked" in pr.stderr:
            bad.append(f"{c.id}: `flashgnn verify` crashed (rc {pr.returncode}): {pr.stderr[-300:]}")
            continue
        forked = results[c.id].get("cli_status", {}).get("rc")
        if pr.returncode != forked:
            bad.append(f"{c.id}: console script exit {pr.returncode}, forked entry point exit {forked}")
        elif pr.returncode != 0 and _last_line(pr.stderr) != _last_line(results[c.id].get("cli_stderr", "")):
            bad.append(f"{c.id}: console script said {_last_line(pr.stderr)!r}, forked entry point said "
                       f"{_last_line(results[c.id].get('cli_stderr', ''))!r}")
    return bad


def test_real_console_script_agrees_with_forked_runs(fast_run):
    """The installed `flashgnn verify` (exec'd, not forked) on two cases per dataset and category: no crash, no hang,
    and the same exit code and error line as the forked run the other tests judge."""
    cases, results, _ = fast_run
    picked, seen = [], {}
    for c in cases:
        k = (c.dataset, c.category)
        if seen.get(k, 0) < 2:
            seen[k] = seen.get(k, 0) + 1
            picked.append(c)
    assert len(picked) >= 2 * len(CATEGORIES)
    exit_codes = {results[c.id].get("cli_status", {}).get("rc") for c in picked}
    assert 2 in exit_codes
    _fail_if(_real_cli_problems(picked, results), "console-script disagreements")


@pytest.mark.slow
def test_full_corruption_suite(pristine, all_cases, tmp_path_factory, suite_report):
    """Every generated case (incl. the slow-only positions and page pairs), with the real console script on each."""
    results = run_cases(pristine, all_cases, tmp_path_factory.mktemp("all_cases"))
    suite_report.append(summary_line("corruption suite (full)", summarise(all_cases, results)))
    problems = [p for c in all_cases for check in CHECKS.values() for p in check(c, results[c.id])]
    problems += _real_cli_problems(all_cases, results)
    for kind in ("neighbors", "features"):
        problems += [f"{c.id}: silently wrong {kind}" for c in all_cases if silent_wrong(c, results[c.id], kind)]
    _fail_if(problems, "problems")


@pytest.mark.parametrize("name, extra", [("labels.npy", 7), ("split_train.npy", 1), ("labels.npy", -8)])
def test_side_file_length_error_says_what_is_wrong(tmp_path, name, extra):
    """A side file longer than its npy header accounts for (checksums re-sealed) is named as having trailing
    bytes at the offset where its data ends, not as 'truncated ... only N available' with N > needed."""
    from conftest import generated_dataset

    ds = generated_dataset(tmp_path, scale=6, edge_factor=2, dim=4, classes=3, seed=1)
    data = (ds / name).read_bytes()
    (ds / name).unlink()
    (ds / name).write_bytes(data + b"\x00" * extra if extra > 0 else data[:extra])
    _reseal(name)(ds)
    with pytest.raises(flashgnn.CorruptDatasetError) as e:
        flashgnn.open(ds).__getattribute__("labels" if name == "labels.npy" else "num_nodes")
        flashgnn.verify(ds, progress=False)
    msg = str(e.value)
    assert name in msg, msg
    if extra > 0:
        assert f"{extra} trailing bytes at byte offset {len(data)}" in msg and "truncated" not in msg, msg
    else:
        assert f"truncated at byte offset {len(data) + extra}" in msg, msg
