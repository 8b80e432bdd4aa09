"""Typed (heterogeneous) build from the CLI: a typed npy directory (node type
folders, ``<src>__<rel>__<dst>`` edge folders, ``num_nodes.json``) builds with
``flashgnn build --add-reverse``; ``flashgnn info`` lists every node type and
edge type; ``flashgnn verify`` passes; an id beyond its type's count is refused
naming the file, the edge, the value and the type, and nothing is published."""

from __future__ import annotations

import json
import subprocess
import sys

import numpy as np

CLI = [sys.executable, "-m", "flashgnn.cli"]


def run(*args) -> subprocess.CompletedProcess:
    return subprocess.run([*CLI, *map(str, args)], capture_output=True, text=True, timeout=120)


def typed_input(d):
    rng = np.random.default_rng(3)
    (d / "paper").mkdir(parents=True)
    (d / "author").mkdir()
    np.save(d / "paper" / "node_feat.npy", rng.standard_normal((30, 4)).astype(np.float32))
    np.save(d / "paper" / "node_label_19.npy", rng.integers(0, 19, 30))
    np.save(d / "paper" / "train_idx.npy", np.arange(0, 30, 2))
    np.save(d / "author" / "node_feat.npy", rng.standard_normal((10, 2)).astype(np.float16))
    (d / "num_nodes.json").write_text(json.dumps({"fos": 5}))
    edges = {
        "paper__cites__paper": np.column_stack([rng.integers(0, 30, 80), rng.integers(0, 30, 80)]),
        "author__writes__paper": np.column_stack([rng.integers(0, 10, 50), rng.integers(0, 30, 50)]),
        "paper__topic__fos": np.column_stack([np.arange(30), np.arange(30) % 5]),
    }
    for k, e in edges.items():
        (d / k).mkdir()
        np.save(d / k / "edge_index.npy", e.astype(np.int64))
    return edges


def test_typed_build_info_verify(tmp_path):
    inp = tmp_path / "in"
    typed_input(inp)
    out = tmp_path / "out"
    r = run("build", inp, out, "--add-reverse", "--page-size", "512", "-q")
    assert r.returncode == 0, r.stderr
    m = json.loads((out / "manifest.json").read_text())
    assert m["format_version"] == 4  # edge bases in the slots: e_id per edge type
    t = m["types"]
    assert [n["name"] for n in t["node_types"]] == ["author", "fos", "paper"]
    keys = [(e["src"], e["rel"], e["dst"]) for e in t["edge_types"]]
    assert keys == [
        ("author", "writes", "paper"),
        ("paper", "cites", "paper"),
        ("paper", "topic", "fos"),
        ("paper", "rev_writes", "author"),
        ("fos", "rev_topic", "paper"),
    ]
    paper = t["node_types"][2]
    assert paper["labels"]["num_classes"] == 19 and paper["splits"] == {"train": 15}
    assert t["node_types"][1]["features"] is None
    info = run("info", out)
    assert info.returncode == 0, info.stderr
    assert "node type    paper: 30 nodes; features 4 x float32" in info.stdout, info.stdout
    assert "edge type    (paper, rev_writes, author): 50 edges" in info.stdout, info.stdout
    assert "edge ids     e_id per edge type (format 4" in info.stdout, info.stdout
    v = run("verify", out)
    assert v.returncode == 0, v.stderr
    s = run("scrub", out, "--state", tmp_path / "scrub")
    assert s.returncode == 0, s.stderr + s.stdout
    # --no-edge-ids: version-3 slots (smaller), still verified.
    r = run("build", inp, tmp_path / "v3", "--add-reverse", "--page-size", "512", "--no-edge-ids", "-q")
    assert r.returncode == 0, r.stderr
    m3 = json.loads((tmp_path / "v3" / "manifest.json").read_text())
    assert m3["format_version"] == 3 and m3["graph"]["slot_bytes"] < m["graph"]["slot_bytes"]
    assert run("verify", tmp_path / "v3").returncode == 0
    assert "edge ids     none (format 3" in run("info", tmp_path / "v3").stdout


def test_typed_build_refuses_an_id_beyond_its_type(tmp_path):
    inp = tmp_path / "in"
    typed_input(inp)
    e = np.array([[0, 1], [10, 2]], dtype=np.int64)
    np.save(inp / "author__writes__paper" / "edge_index.npy", e)
    out = tmp_path / "out"
    r = run("build", inp, out)
    assert r.returncode != 0
    msg = r.stderr
    assert "author__writes__paper/edge_index.npy" in msg and "edge 1, column 0" in msg, msg
    assert "node id 10 >= 10" in msg and '"author"' in msg, msg
    assert not out.exists()


def test_generated_igbh_builds_and_verifies(tmp_path):
    """`flashgnn generate igbh`'s typed npy directory (num_nodes.json, typed folders) builds as typed-npy."""
    g = run("generate", "igbh", tmp_path / "igbh", "--scale", "300", "--feature-dim", "8", "-q")
    assert g.returncode == 0, g.stderr
    out = tmp_path / "out"
    r = run("build", tmp_path / "igbh", out, "--add-reverse", "--dedup", "-q")
    assert r.returncode == 0, r.stderr
    m = json.loads((out / "manifest.json").read_text())
    assert m["build"]["source_format"] == "typed-npy" and m["build"]["add_reverse"]
    names = {n["name"]: n for n in m["types"]["node_types"]}
    assert names["paper"]["labels"]["num_classes"] <= 19 and names["paper"]["splits"]  # node_label.npy: as found
    assert any(e["rel"].startswith("rev_") for e in m["types"]["edge_types"])
    v = run("verify", out)
    assert v.returncode == 0, v.stderr
