"""One source of truth for what the Rust side owns.

- Constants: every Python name that mirrors a Rust constant is assigned from
  `_core` (checked on the source, so re-typing the same value fails too) and
  equals it.
- Build options: `_core.BUILD_OPTIONS` (crates/flashgnn-python/src/job.rs)
  is exactly what `start_build` accepts, every listed choice parses, and the
  `flashgnn build` parser and `cmd_build` offer and pass exactly those
  options with the same defaults and choices.
- SSD designs: `_core.SSD_DESIGNS` is the simulator's own list
  (crates/flashgnn-sim/src/design.rs); `flashgnn simulate --design` offers
  exactly it and no Python module re-types it.
- Mutation operations: `_core.MUTATION_OPS` (crates/flashgnn-mutate OPS) is
  what `MutableGraph.apply` and the serve client accept, with those arities,
  and what the protocol's `Op` carries.
- Generate defaults: `_core.GENERATE_DEFAULTS` (`RmatOptions::default`,
  crates/flashgnn-datagen) names exactly what `start_generate` reads, and
  `flashgnn generate rmat` offers and passes those options with those
  defaults.
- On-disk names: the page files' names (flashgnn-format) and the mutable
  store's `mut/`, `CURRENT` and `gen-N` (flashgnn-mutate) are `_core`
  constants that Python reads and never types again.
- Pre-sample records (`.fgps`): encoded and decoded by flashgnn-format
  (`presample_encode` / `presample_decode`); the Python loader holds no
  struct layout, magic or checksum of its own.
"""
from __future__ import annotations

import argparse
import ast
import inspect
import re

import numpy as np
import pytest

import flashgnn
from flashgnn import _core

# (module, name, _core constant) for every Python mirror of a Rust constant.
MIRRORS = [
    ("flashgnn.sample.budget", "ENGINE_FIXED_PER_PRODUCER", "ENGINE_BYTES_PER_PRODUCER"),
    ("flashgnn.sample.sampler", "DEFAULT_HOT_FRACTION", "DEFAULT_HOT_FRACTION"),
    ("flashgnn.sample.sampler", "DEFAULT_DEPTH", "DEFAULT_DEPTH"),
    ("flashgnn.sample.sampler", "DEFAULT_POOL_THREADS", "DEFAULT_POOL_THREADS"),
    ("flashgnn.sample.budget", "LOOKAHEAD_SHARE", "LOOKAHEAD_SHARE"),
    ("flashgnn.sample.budget", "AUTO_LOOKAHEAD", "AUTO_LOOKAHEAD"),
    ("flashgnn.loader.presample", "FORMAT", "PRESAMPLE_FORMAT"),
    ("flashgnn.loader.presample", "VERSION", "PRESAMPLE_VERSION"),
    ("flashgnn.loader.presample", "VERSION_MIN", "PRESAMPLE_VERSION_MIN"),
    ("flashgnn.store.graph", "MAX_BATCH_OPS", "MAX_BATCH_OPS"),
]


def _assigned_value(module, name: str) -> ast.expr:
    tree = ast.parse(inspect.getsource(module))
    for node in ast.walk(tree):
        if isinstance(node, (ast.Assign, ast.AnnAssign)):
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            if any(isinstance(t, ast.Name) and t.id == name for t in targets) and node.value is not None:
                return node.value
    raise AssertionError(f"{module.__name__} assigns no {name}")


def _reads_core(expr: ast.expr) -> bool:
    return any(isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == "_core"
               for n in ast.walk(expr))


@pytest.mark.parametrize("modname,name,const", MIRRORS)
def test_python_derives_rust_constants(modname, name, const):
    import importlib

    mod = importlib.import_module(modname)
    value = _assigned_value(mod, name)
    assert _reads_core(value), f"{modname}.{name} re-types {ast.unparse(value)} instead of reading _core.{const}"
    got = getattr(mod, name) if hasattr(mod, name) else None
    if got is None:  # a class attribute (graph.MutableGraph.MAX_BATCH_OPS)
        got = next(getattr(c, name) for c in vars(mod).values() if isinstance(c, type) and hasattr(c, name))
    assert got == getattr(_core, const)


def test_engine_defaults_and_choices_are_not_retyped():
    """The engine's default depth and pool size and the `engine=` choices are
    defined once (flashgnn_io, then flashgnn.sample.sampler): no signature of
    the package types 256 or 64 for them, and no module rebuilds
    ("auto", *ENGINES)."""
    from pathlib import Path

    bad = []
    for f in Path(flashgnn.__file__).parent.rglob("*.py"):
        text = f.read_text()
        for pat in (r"depth: int = 256", r"depth=256", r"pool_threads: int = 64", r"\(\"auto\", \*[A-Za-z_.]*ENGINES\)"):
            for m in re.finditer(pat, text):
                if not (f.name == "sampler.py" and "ENGINE_CHOICES =" in text[max(0, m.start() - 20):m.start()]):
                    bad.append(f"{f.name}: {m.group(0)}")
    assert not bad, bad
    from flashgnn.sample import sampler

    assert sampler.ENGINE_CHOICES == ("auto", *_core.ENGINES) and sampler.DEFAULT_DEPTH == 256


def test_engine_constant_is_its_parts_and_serve_limit_derives():
    from flashgnn.serve.limits import Limits

    assert _core.ENGINE_BYTES_PER_PRODUCER == _core.BUF_POOL_BYTES + _core.BATCH_PAGE_CACHE_BYTES
    assert 0.0 < _core.DEFAULT_HOT_FRACTION <= 1.0
    assert Limits().max_batch_ops == _core.MAX_BATCH_OPS
    assert _reads_core(_assigned_value(__import__("flashgnn.serve.limits", fromlist=["x"]), "max_batch_ops"))


def test_budget_split_counts_the_engine_constant():
    from flashgnn.sample import budget

    sp = budget.split(1 << 30, None, [2], 8, workers=3, prefetch=1, per_batch=1000)
    assert sp["engine"] == 3 * (_core.ENGINE_BYTES_PER_PRODUCER + 1000)


def _names() -> list[str]:
    return [o["name"] for o in _core.BUILD_OPTIONS]


def test_build_options_are_what_start_build_accepts(tmp_path):
    names = _names()
    assert len(names) == len(set(names)) and names
    with pytest.raises(flashgnn.InputError) as e:
        _core.start_build(tmp_path / "in", tmp_path / "out", {"symetrize": True})
    m = re.search(r"unknown option \"symetrize\"; accepted: (.*)$", str(e.value))
    assert m, str(e.value)
    assert m.group(1).split(", ") == sorted(names)
    for o in _core.BUILD_OPTIONS:
        assert o["flag"] == "--" + o["name"].replace("_", "-") and o["help"]
        assert (o["kind"] == "choice") == bool(o["choices"]), o
        assert o["default"] is None or o["kind"] != "choice" or o["default"] in o["choices"], o
        # Every listed value parses (the job then fails on the missing input, not on the option).
        for c in o["choices"]:
            job = _core.start_build(tmp_path / "in", tmp_path / "out", {o["name"]: c})
            job.cancel()
            job.wait(30.0)
        if o["kind"] == "choice":
            with pytest.raises(flashgnn.InputError, match=re.escape(o["flag"])):
                _core.start_build(tmp_path / "in", tmp_path / "out", {o["name"]: "no-such-value"})


def _build_parser() -> argparse.ArgumentParser:
    from flashgnn import cli

    sub = next(a for a in cli._parser()._actions if isinstance(a, argparse._SubParsersAction))
    return sub.choices["build"]


# Build options that run in Python before the core build (flashgnn.store.derive), not core options.
PYTHON_BUILD_OPTIONS = ("derive_features",)


def test_cli_build_options_equal_core():
    b = _build_parser()
    acts = {a.dest: a for a in b._actions
            if a.option_strings and a.dest not in ("help", "json", "quiet", *PYTHON_BUILD_OPTIONS)}
    assert list(acts) == _names()
    for o in _core.BUILD_OPTIONS:
        a = acts[o["name"]]
        assert a.option_strings == [o["flag"]]
        assert a.default == o["default"], o["name"]
        assert tuple(a.choices or ()) == tuple(o["choices"]), o["name"]
        assert a.help == o["help"]


def test_cmd_build_passes_exactly_the_core_options(monkeypatch, tmp_path):
    from flashgnn import cli

    seen = {}

    def fake_build(inp, out, progress=True, **opts):
        seen.update(opts)
        raise SystemExit(0)

    monkeypatch.setattr(flashgnn, "build", fake_build)
    with pytest.raises(SystemExit):
        cli.main(["build", str(tmp_path / "in"), str(tmp_path / "out"), "--num-classes", "3", "--symmetrize"])
    assert set(seen) == set(_names()) | set(PYTHON_BUILD_OPTIONS)
    assert seen["derive_features"] is None
    assert seen["symmetrize"] is True and seen["num_classes"] == 3
    assert seen["page_size"] == _core.DEFAULT_PAGE_SIZE


def _sub_parser(*path: str) -> argparse.ArgumentParser:
    from flashgnn import cli

    p = cli._parser()
    for name in path:
        p = next(a for a in p._actions if isinstance(a, argparse._SubParsersAction)).choices[name]
    return p


def test_ssd_designs_are_the_simulators():
    designs = _core.SSD_DESIGNS
    assert designs and len(set(designs)) == len(designs) and "all" not in designs
    # The simulator's refusal of an unknown design (before the trace is opened) lists its own designs.
    with pytest.raises(flashgnn.FlashgnnError, match="is not a design") as e:
        _core.simulate("/nonexistent.fgt", "beacongnn-table2", ["no-such-design"])
    assert re.search(r"one of: (.*), all\)", str(e.value)).group(1).split(", ") == designs
    sm = _sub_parser("simulate")
    acts = {a.dest: a for a in sm._actions}
    assert acts["design"].help == "|".join([*designs, "all"]) + " (comma list ok)"
    assert acts["config"].help.endswith(", ".join(sorted(_core.SSD_BUILTIN_CONFIGS)))
    import flashgnn.ssd.simulate as sim

    src = inspect.getsource(sim)
    assert not any(f'"{d}", "' in src for d in designs if d != "host"), "ssd/simulate.py re-types the design list"


def test_mutation_ops_are_the_stores():
    from flashgnn.serve import client
    from flashgnn.serve import flashgnn_pb2 as pb
    from flashgnn.store import graph

    ops = _core.MUTATION_OPS
    assert list(ops) == ["add_vertex", "delete_vertex", "add_edge", "delete_edge", "update_embed"]
    assert graph._OPS == tuple(ops) and _reads_core(_assigned_value(graph, "_OPS"))
    # The protocol's Op carries the same operations with the same fields.
    oneof = pb.Op.DESCRIPTOR.oneofs_by_name["op"]
    assert [f.name for f in oneof.fields] == list(ops)
    for f in oneof.fields:
        assert tuple(x.name for x in f.message_type.fields) == ops[f.name], f.name
    # The client encodes exactly these arities and refuses others, naming the store's list.
    val = {"embed": np.zeros(2), "vid": 1, "dst": 2, "src": 3}
    for name, fields in ops.items():
        req = client.ops_request([(name, *(val[f] for f in fields))])
        assert req.ops[0].WhichOneof("op") == name
        with pytest.raises(ValueError, match=f"{name} takes {len(fields)} argument"):
            client.ops_request([(name, *(val[f] for f in fields), 0)])
    with pytest.raises(ValueError, match=re.escape(f"({', '.join(ops)})")):
        client.ops_request([("add_vertx", 1)])
    assert "add_vertex\": 1" not in inspect.getsource(client)


def test_mutable_graph_apply_checks_the_store_arities(tmp_path):
    """The binding's refusal of a wrong arity or an unknown name comes from the same table."""
    from conftest import generated_dataset
    from flashgnn.store.graph import MutableGraph

    ds = generated_dataset(tmp_path, scale=4, edge_factor=2, dim=2, classes=2)
    g = MutableGraph(ds)
    try:
        for name, fields in _core.MUTATION_OPS.items():
            with pytest.raises(ValueError, match=f"{name} takes {len(fields)} arguments, got {len(fields) + 1}"):
                g._core.apply([(name, *([0] * (len(fields) + 1)))])
        with pytest.raises(ValueError, match=re.escape(f"(expected {', '.join(_core.MUTATION_OPS)})")):
            g._core.apply([("add_vertx", np.zeros(2))])
    finally:
        g.close()


def test_generate_defaults_are_rmat_options_default(monkeypatch, tmp_path):
    from flashgnn import cli

    gd = _core.GENERATE_DEFAULTS
    with pytest.raises(flashgnn.InputError) as e:
        _core.start_generate(tmp_path / "out", {"scael": 3})
    # `model` picks the generator (rmat, the default, or igbh); the rest are R-MAT's options.
    assert re.search(r"accepted: (.*)$", str(e.value)).group(1).split(", ") == sorted([*gd, "model"])
    r = _sub_parser("generate", "rmat")
    acts = {a.dest: a for a in r._actions if a.option_strings and a.dest not in ("help", "json", "quiet")}
    assert set(acts) == set(gd)
    for name, default in gd.items():
        assert acts[name].default == default, name
        assert acts[name].option_strings == ["--" + name.replace("_", "-")]
    assert gd["split"] == (0.1, 0.05, 0.05) and gd["force"] is False
    # The dtypes the CLI offers are the ones the generator writes.
    assert acts["dtype"].choices == _core.GENERATE_CHOICES["dtype"] == ["float16", "float32", "float64"]
    assert acts["edge_dtype"].choices == _core.GENERATE_CHOICES["edge_dtype"] == ["int64", "int32", "uint32"]
    assert gd["dtype"] in acts["dtype"].choices and gd["edge_dtype"] in acts["edge_dtype"].choices
    # Every default is read from _core, not typed beside it.
    src = inspect.getsource(cli._parser)
    assert not re.search(r'"--(scale|edge-factor|dim|classes|homophily|split)".*default=[0-9(]', src)
    seen = {}

    def fake_generate(out, progress=True, **opts):
        seen.update(opts)
        raise SystemExit(0)

    monkeypatch.setattr(flashgnn, "generate", fake_generate)
    with pytest.raises(SystemExit):
        cli.main(["generate", "rmat", str(tmp_path / "g")])
    assert seen == gd


def test_on_disk_names_come_from_the_crates_that_own_them():
    """`manifest.json`, `graph.fg`, `overflow.fg`, `features.fg` (flashgnn-format), `stripes.json`
    (flashgnn-io), `mut`, `CURRENT` and `gen-N` (flashgnn-mutate) are read from `_core`; no Python module
    types them as a string of its own."""
    from pathlib import Path

    assert (_core.GRAPH_FILE, _core.OVERFLOW_FILE, _core.FEATURES_FILE) == ("graph.fg", "overflow.fg", "features.fg")
    assert (_core.MUT_DIR, _core.CURRENT_FILE, _core.GEN_PREFIX) == ("mut", "CURRENT", "gen-")
    from flashgnn.store import jobs, stripe

    assert stripe.DATA_FILES == (_core.GRAPH_FILE, _core.OVERFLOW_FILE, _core.FEATURES_FILE)
    assert jobs._current_generation_dir("/nonexistent") == "/nonexistent"
    assert (_core.MANIFEST_FILE, _core.STRIPES_FILE) == ("manifest.json", "stripes.json")
    names = {_core.GRAPH_FILE, _core.OVERFLOW_FILE, _core.FEATURES_FILE, _core.MUT_DIR, _core.CURRENT_FILE,
             _core.MUT_DIR + "/", _core.MANIFEST_FILE, _core.STRIPES_FILE}
    root = Path(flashgnn.__file__).resolve().parent
    bad = []
    for f in sorted(root.rglob("*.py")):
        rel = f.relative_to(root).as_posix()
        if rel.endswith("_pb2.py"):
            continue
        for node in ast.walk(ast.parse(f.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and (
                    node.value in names or node.value.startswith(_core.GEN_PREFIX)):
                bad.append(f"{rel}:{node.lineno}: {node.value!r}")
    assert not bad, "on-disk names typed in Python instead of read from _core:\n" + "\n".join(bad)


def test_current_generation_dir_is_the_stores(tmp_path):
    import json

    from flashgnn.store.jobs import _current_generation_dir

    (tmp_path / _core.MUT_DIR).mkdir()
    (tmp_path / _core.MUT_DIR / _core.CURRENT_FILE).write_text(json.dumps({"generation": 3}))
    assert _current_generation_dir(str(tmp_path)) == str(tmp_path / _core.MUT_DIR / f"{_core.GEN_PREFIX}3")


def test_presample_records_are_the_format_crates():
    import flashgnn.loader.presample as ps

    src = inspect.getsource(ps)
    for token in ("import struct", "import zlib", "crc32(", "MAGIC", "frombuffer"):
        assert token not in src, f"loader/presample.py still encodes records itself ({token})"
    n_id, row = np.array([4, 1, 2], np.int64), np.array([1, 2], np.int32)
    rec = _core.presample_encode(1, n_id, row, np.array([0, 0], np.int32), np.array([1, 2], np.int32),
                                 np.array([2], np.int32), np.array([0], np.int64), np.array([1, 0, 1], np.int64), 64)
    assert len(rec) == _core.presample_record_size("f", rec[:_core.PRESAMPLE_HEADER_BYTES], 64, 64 + len(rec),
                                                   _core.PRESAMPLE_VERSION)
    got = _core.presample_decode("f", rec, 64, _core.PRESAMPLE_VERSION, 5)
    assert got[0] == 1 and got[1].tolist() == [4, 1, 2] and got[2].tolist() == [1, 2] and got[5].tolist() == [2] and got[6].tolist() == [0]
    with pytest.raises(flashgnn.CorruptDatasetError, match="n_id 4 outside"):
        _core.presample_decode("f", rec, 64, _core.PRESAMPLE_VERSION, 4)


def test_sweep_aliases_are_the_simulators():
    """`flashgnn simulate`'s short sweep names resolve through the simulator's own table
    (`flashgnn_sim::config::SWEEP_ALIASES`), the same in the Python utilisation figures."""
    from flashgnn.ssd import simulate

    assert simulate._ALIASES is _core.SSD_SWEEP_ALIASES or simulate._ALIASES == _core.SSD_SWEEP_ALIASES
    assert _core.SSD_SWEEP_ALIASES["planes"] == "flash.planes" and _core.SSD_SWEEP_ALIASES["tr"] == "flash.read_ns"
