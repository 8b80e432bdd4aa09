"""GraphRunner (flashgnn.dfg): DFGs equal the PyTorch models they stand for,
the serialised form refuses every malformed field, devices are chosen by
priority, and plugins add devices and ops.

How: on a small generated dataset, each built-in DFG (GCN, GIN, GraphSAGE,
NGCF) is serialised, loaded back and run on one sampled batch; the same
batch (same seeds, same sampler seed) goes through the PyTorch model in eval
mode with PyG's per-hop trimming, and the outputs must agree to 1e-5. The
comparisons are shown to be able to fail: a perturbed weight changes the
DFG's output, and for GCN/NGCF normalising by the batch's own degrees
(instead of the whole graph's) gives a different answer. With fanout -1 on
every hop, each DFG's seed outputs equal the model's full-graph forward.
Ops are checked against PyG's own scatter / gcn_norm / trim_to_layer. Every
refusal test re-encodes a valid DFG with exactly one field broken (and a
correct CRC, so the field's own check is what fires).
"""

from __future__ import annotations

import json
import struct
import sys
import textwrap
import zlib

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

import flashgnn  # noqa: E402
import flashgnn.dfg as dfg  # noqa: E402
from flashgnn.dfg import graph as dfg_graph  # noqa: E402
from flashgnn.dfg.reference import NGCF  # noqa: E402
from flashgnn.nn.gcn import GCN  # noqa: E402
from flashgnn.nn.checkpoint import load_checkpoint, model_from_checkpoint  # noqa: E402
from flashgnn.nn.zoo import build_model, forward  # noqa: E402
from flashgnn.train.trainer import parser, run  # noqa: E402

from conftest import assert_error, generated_dataset  # noqa: E402

FANOUTS = [5, 3]
SEED = 11
DIM, CLASSES, HIDDEN = 16, 4, 12


@pytest.fixture(scope="module")
def ds_path(tmp_path_factory):
    return generated_dataset(tmp_path_factory.mktemp("dfg"), scale=10, edge_factor=8, dim=DIM, classes=CLASSES, seed=5,
                             split=(0.3, 0.1, 0.6))


@pytest.fixture(scope="module")
def ctx(ds_path):
    return dfg.SamplerContext(ds_path)


def seeds_of(n=40, step=13, num_nodes=1024):
    return np.arange(n, dtype=np.int64) * step % num_nodes


def reference_output(model, ds_path, seeds, fanouts=FANOUTS, seed=SEED, trim=True, degrees=True):
    """The PyTorch model on the batch flashgnn.Sampler returns for (seeds, seed);
    degree-normalised models (GCN, NGCF) get the whole-graph degrees unless
    ``degrees=False``."""
    b = flashgnn.Sampler(ds_path, fanouts, degrees=True).sample(seeds, seed)
    x = torch.from_numpy(b.x).float()
    ei = torch.from_numpy(np.stack([b.row, b.col]))
    kw = dict(num_sampled_nodes_per_hop=[int(v) for v in b.num_sampled_nodes],
              num_sampled_edges_per_hop=[int(v) for v in b.num_sampled_edges]) if trim else {}
    if degrees and isinstance(model, (NGCF, GCN)):
        kw["deg"] = torch.from_numpy(b.deg)
    with torch.no_grad():
        return model.eval()(x, ei, **kw)[: b.batch_size]


def full_graph_output(model, ds_path):
    """The PyTorch model's forward over the whole stored graph (every node)."""
    ds = flashgnn.open(ds_path)
    ptr, idx = ds.neighbors_csr(np.arange(ds.num_nodes))
    ei = torch.from_numpy(np.stack([idx, np.repeat(np.arange(ds.num_nodes), np.diff(ptr))]))
    x = torch.from_numpy(ds.features(np.arange(ds.num_nodes)).astype(np.float32))
    with torch.no_grad():
        return model.eval()(x, ei)


def random_model(name: str, num_layers: int = 2):
    torch.manual_seed({"sage": 1, "gcn": 2, "gin": 3, "ngcf": 4}[name])
    if name == "ngcf":
        m = NGCF(DIM, HIDDEN, num_layers)
    else:
        m = build_model(name, DIM, HIDDEN, CLASSES, num_layers, dropout=0.5)
    with torch.no_grad():  # GIN's eps is 0 at init: give it a value so (1 + eps) is exercised
        for k, v in m.state_dict().items():
            if k.endswith(".eps"):
                v.fill_(0.25)
    return m.eval()


def run_dfg(g, ctx, seeds, registry=None):
    r = dfg.Runner(registry=registry, context=ctx)
    return r.run(g, {"Batch": torch.from_numpy(seeds)})["Result"], r


# ---------------------------------------------------------------------------------------------
# Built-in DFGs equal the PyTorch models


@pytest.mark.parametrize("name", ["sage", "gcn", "gin", "ngcf"])
def test_builtin_dfg_matches_pytorch_model(ds_path, ctx, name):
    model = random_model(name)
    seeds = seeds_of()
    ref = reference_output(model, ds_path, seeds)
    g = dfg.Graph.from_bytes(dfg.models.build(name, model, FANOUTS, seed=SEED).to_bytes())
    out, runner = run_dfg(g, ctx, seeds)
    assert out.shape == ref.shape and out.shape[0] == len(seeds)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    assert [p["seq"] for p in runner.last_profile] == [n.seq for n in g.nodes]
    # the comparison can fail: a changed weight changes the answer
    w = next(k for k in g.params if k.endswith(".W"))
    g.params[w] = g.params[w] + 0.01
    assert not torch.allclose(run_dfg(g, ctx, seeds)[0], ref, atol=1e-5)
    # trimmed or not, the same seed outputs (whole-graph degrees make GCN/NGCF trim-proof) ...
    torch.testing.assert_close(reference_output(model, ds_path, seeds, trim=False), ref, atol=1e-5, rtol=1e-5)
    if name in ("gcn", "ngcf"):  # ... while the batch's own degrees give another answer
        assert not torch.allclose(reference_output(model, ds_path, seeds, degrees=False), ref, atol=1e-4)


@pytest.mark.parametrize("name", ["sage", "gcn", "gin", "ngcf"])
def test_builtin_dfg_full_neighbourhood_equals_full_graph_forward(ds_path, ctx, name):
    """Fanout -1 on every hop: the DFG's seed outputs are the model's forward
    over the whole graph at those nodes (GCN normalised by the
    trimmed batch's degrees was up to 0.73 off)."""
    model = random_model(name)
    seeds = seeds_of(60, 17)
    want = full_graph_output(model, ds_path)[torch.from_numpy(seeds)]
    out, _ = run_dfg(dfg.models.build(name, model, [-1, -1], seed=SEED), ctx, seeds)
    torch.testing.assert_close(out, want, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("name,fanouts", [("sage", [-1]), ("gcn", [4, 3, 2]), ("ngcf", [3, -1])])
def test_builtin_dfg_other_depths_and_full_fanout(ds_path, ctx, name, fanouts):
    model = random_model(name, num_layers=len(fanouts))
    seeds = seeds_of(25, 7)
    ref = reference_output(model, ds_path, seeds, fanouts=fanouts)
    out, _ = run_dfg(dfg.models.build(name, model, fanouts, seed=SEED), ctx, seeds)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_ngcf_normalized_variant(ds_path, ctx):
    model = NGCF(DIM, HIDDEN, 2, normalize=True).eval()
    seeds = seeds_of()
    ref = reference_output(model, ds_path, seeds)
    out, _ = run_dfg(dfg.models.ngcf(model, FANOUTS, seed=SEED, normalize=True), ctx, seeds)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)


def test_builtin_dfg_refuses_mismatched_weights_and_fanouts():
    sage = random_model("sage")
    with pytest.raises(ValueError) as e:
        dfg.models.gcn(sage, FANOUTS)
    assert_error(e, "gcn", "convs.<i>.lin.weight")
    with pytest.raises(ValueError) as e:
        dfg.models.sage(sage, [5, 3, 2])
    assert_error(e, "2 layers need 2 fanouts", "[5, 3, 2]")
    sd = dict(sage.state_dict())
    sd["convs.0.norm.weight"] = torch.ones(3)
    with pytest.raises(ValueError) as e:
        dfg.models.sage(sd, FANOUTS)
    assert_error(e, "unexpected", "convs.0.norm.weight")
    with pytest.raises(ValueError, match="no built-in DFG"):
        dfg.models.build("gat", sd, FANOUTS)


@pytest.fixture(scope="module")
def checkpoints(ds_path, tmp_path_factory):
    out = {}
    for name in ("sage", "gcn", "gin"):
        ck = tmp_path_factory.mktemp(f"ck_{name}")
        run(parser().parse_args([str(ds_path), "--no-progress", "--model", name, "--fanout", "5,3", "--batch-size",
                                 "128", "--epochs", "1", "--hidden", "16", "--threads", "1", "--checkpoint", str(ck)]))
        out[name] = ck
    return out


@pytest.mark.parametrize("name", ["sage", "gcn", "gin"])
def test_checkpoint_dfg_matches_trained_model(ds_path, ctx, checkpoints, tmp_path, name):
    """A `flashgnn train` checkpoint as a DFG equals the trainer's own forward()."""
    from torch_geometric.data import Data

    state = load_checkpoint(checkpoints[name])
    model = model_from_checkpoint(state).eval()
    seeds = seeds_of(60, 17)
    b = flashgnn.Sampler(ds_path, state["model_config"]["fanouts"], degrees=True).sample(seeds, SEED)
    data = Data(x=torch.from_numpy(b.x), edge_index=torch.from_numpy(np.stack([b.row, b.col])),
                num_sampled_nodes=[int(v) for v in b.num_sampled_nodes],
                num_sampled_edges=[int(v) for v in b.num_sampled_edges], batch_size=b.batch_size,
                deg=torch.from_numpy(b.deg))
    with torch.no_grad():
        ref = forward(model, data)
    g = dfg.models.from_checkpoint(checkpoints[name], seed=SEED)
    assert g.meta["model"] == name and g.meta["fanouts"] == [5, 3] and g.meta["out_dim"] == CLASSES
    out, _ = run_dfg(g, ctx, seeds)
    torch.testing.assert_close(out, ref, atol=1e-5, rtol=1e-5)
    # the same weights from a torch.save'd state dict and from an .npz
    torch.save(model.state_dict(), tmp_path / "w.pt")
    np.savez(tmp_path / "w.npz", **{k: v.numpy() for k, v in model.state_dict().items()})
    for path in (tmp_path / "w.pt", tmp_path / "w.npz"):
        out2, _ = run_dfg(dfg.models.from_weights(path, name, [5, 3], seed=SEED), ctx, seeds)
        torch.testing.assert_close(out2, ref, atol=1e-5, rtol=1e-5)
    # and the checkpoint directory itself as the weights argument
    out3, _ = run_dfg(dfg.models.build(name, checkpoints[name], [5, 3], seed=SEED), ctx, seeds)
    torch.testing.assert_close(out3, ref, atol=1e-5, rtol=1e-5)


# ---------------------------------------------------------------------------------------------
# Graph building, serialisation and its refusals


def small_graph():
    g = dfg.Graph()
    x = g.create_in("X")
    w = g.create_param("W", torch.arange(12, dtype=torch.float32).reshape(3, 4))
    b = g.create_param("b", torch.tensor([1.0, -1.0, 0.5, 0.0]))
    h = g.create_op("GEMM", [x, w, b])
    g.create_out("Result", g.create_op("ReLU", [h]))
    return g


def reencode(blob: bytes, edit=None, blob_bytes=None, version=None, flags=0) -> bytes:
    """Rebuild a serialised DFG after ``edit(doc)``, with consistent lengths and CRC."""
    magic, ver, _, jl, bl = struct.unpack_from("<8sIIQQ", blob, 0)
    doc = json.loads(blob[32: 32 + jl])
    params = blob[32 + jl: 32 + jl + bl] if blob_bytes is None else blob_bytes
    if edit is not None:
        edit(doc)
    js = json.dumps(doc).encode()
    body = struct.pack("<8sIIQQ", magic, ver if version is None else version, flags, len(js), len(params)) + js + params
    return body + struct.pack("<I", zlib.crc32(body))


def test_round_trip_save_load_and_markup(tmp_path):
    g = small_graph()
    g.create_param("half", torch.tensor([1.5, -2.0], dtype=torch.float16))
    g.create_param("bf", torch.tensor([[3.0]], dtype=torch.bfloat16))
    g.create_param("ids", torch.tensor([1, 2**40], dtype=torch.int64))
    g.create_param("mask", torch.tensor([True, False]))
    data = g.to_bytes()
    assert data[:8] == dfg.MAGIC
    g2 = dfg.Graph.from_bytes(data)
    assert g2.to_bytes() == data
    for k, v in g.params.items():
        assert g2.params[k].dtype == v.dtype and torch.equal(g2.params[k], v)
    g.save(tmp_path / "g.dfg")
    g3 = dfg.Graph.load(tmp_path / "g.dfg")
    x = torch.randn(5, 3)
    want = torch.relu(x @ g.params["W"] + g.params["b"])
    torch.testing.assert_close(dfg.Runner().run(g3, {"X": x})["Result"], want)
    doc = g.to_json()
    assert doc["nodes"][1] == {"seq": 2, "op": "ReLU", "inputs": ["1_0"], "outputs": ["2_0"], "attrs": {}}
    assert doc["nodes"][0]["inputs"] == ["X", "W", "b"]
    assert '1: "GEMM"  in={X, W, b}  out={1_0}' in g.describe()


def test_load_sorts_nodes_topologically():
    data = small_graph().to_bytes()
    g = dfg.Graph.from_bytes(reencode(data, lambda d: d["nodes"].reverse()))
    assert [n.op for n in g.nodes] == ["GEMM", "ReLU"]
    assert dfg.Runner().run(g, {"X": torch.ones(1, 3)})["Result"].shape == (1, 4)


def _set(path, value):
    def edit(doc):
        o = doc
        for p in path[:-1]:
            o = o[p]
        o[path[-1]] = value
    return edit


@pytest.mark.parametrize("edit,fragments", [
    (_set(["nodes", 1, "inputs"], ["7_0"]), ["node 2 (ReLU)", "'7_0'", "dangling"]),
    (_set(["nodes", 0, "inputs"], ["X", "Nope", "b"]), ["node 1 (GEMM)", "'Nope'", "dangling"]),
    (_set(["nodes", 0, "inputs"], ["2_0", "W", "b"]), ["cycle", "[1, 2]"]),
    (_set(["nodes", 1, "seq"], 1), ["nodes[1].seq 1", "duplicate"]),
    (_set(["nodes", 1, "outputs"], ["9_0"]), ["nodes[1].outputs", "'2_0'"]),
    (_set(["inputs"], ["X", "X"]), ["inputs[1]", "duplicate"]),
    (_set(["params", 1, "name"], "W"), ["params[1].name 'W'", "duplicate"]),
    (_set(["outputs", 0, "name"], "X"), ["output 'X'", "duplicate"]),
    (_set(["outputs", 0, "from"], "5_0"), ["output 'Result'", "dangling"]),
    (_set(["params", 0, "dtype"], "complex64"), ["params[0].dtype", "complex64"]),
    (_set(["params", 0, "shape"], [3, 5]), ["params[0].nbytes = 48", "needs 60"]),
    (_set(["params", 0, "shape"], [1] * 9), ["params[0].shape", "limit 8"]),
    (_set(["params", 0, "shape"], [-3, -4]), ["params[0].shape[0] = -3"]),
    (_set(["params", 1, "offset"], 10**6), ["params[1].offset = 1000000", "outside"]),
    (_set(["params", 1, "offset"], 120), ["params[1].offset 120 + nbytes 16 = 136", "past blob_len 128"]),
    (_set(["params", 0, "offset"], 2), ["params[0].offset 2", "multiple"]),
    (_set(["version"], 2), ["version: JSON says 2"]),
    (_set(["format"], "other"), ["format 'other'"]),
    (_set(["surprise"], 1), ["unknown field(s) surprise"]),
    (_set(["nodes", 0, "attrs"], {"alpha": [[[[[1]]]]]}), ["nested deeper"]),
    (_set(["nodes", 0, "attrs"], {"s": "x" * 5000}), ["5000-byte string", "limit 1024"]),
    (_set(["nodes", 0, "op"], "GE MM"), ["nodes[0].op 'GE MM'"]),
    (_set(["inputs"], ["1_0"]), ["inputs[0] '1_0'", "names must match"]),
    (_set(["nodes"], [{"seq": i + 1, "op": "ReLU", "inputs": ["X"], "outputs": [f"{i + 1}_0"]}
                      for i in range(dfg_graph.MAX_NODES + 1)]), ["nodes:", "limit 4096"]),
])
def test_load_refuses_malformed_json_fields(edit, fragments):
    with pytest.raises(ValueError) as e:
        dfg.Graph.from_bytes(reencode(small_graph().to_bytes(), edit))
    assert_error(e, *fragments)


def test_load_refuses_malformed_header_and_payload():
    data = small_graph().to_bytes()
    cases = [
        (b"NOTADFG!" + data[8:], ["magic", "not a flashgnn DFG"]),
        (reencode(data, version=7), ["version 7", "unsupported"]),
        (reencode(data, flags=1), ["flags = 0x1"]),
        (data[:-1], ["bytes, but the payload is"]),
        (data[:20], ["shorter than header"]),
        (data + b"\0", ["bytes, but the payload is"]),
        (data[:40] + bytes([data[40] ^ 1]) + data[41:], ["crc32", "corrupt"]),
        (reencode(data, blob_bytes=b""), ["past blob_len 0"]),
    ]
    hdr = bytearray(data)
    struct.pack_into("<Q", hdr, 16, dfg_graph.MAX_JSON_BYTES + 1)
    cases.append((bytes(hdr), ["json_len", "MAX_JSON_BYTES"]))
    body = struct.pack("<8sIIQQ", dfg.MAGIC, 1, 0, 5, 0) + b"[[[[["
    cases.append((body + struct.pack("<I", zlib.crc32(body)), ["JSON"]))
    deep = b"[" * 100000 + b"]" * 100000
    body = struct.pack("<8sIIQQ", dfg.MAGIC, 1, 0, len(deep), 0) + deep
    cases.append((body + struct.pack("<I", zlib.crc32(body)), ["JSON"]))
    nan = reencode(data, _set(["nodes", 0, "attrs"], {"a": 1}))
    nan = nan.replace(b'"a": 1', b'"a": NaN')
    nan = nan[:-4] + struct.pack("<I", zlib.crc32(nan[:-4]))
    body = bytearray(nan[:-4])
    struct.pack_into("<Q", body, 16, len(body) - 32 - struct.unpack_from("<Q", body, 24)[0])
    cases.append((bytes(body) + struct.pack("<I", zlib.crc32(bytes(body))), ["NaN"]))
    for blob, fragments in cases:
        with pytest.raises(ValueError) as e:
            dfg.Graph.from_bytes(blob)
        assert_error(e, *fragments)
    with pytest.raises(ValueError) as e:
        dfg.Graph.from_bytes(data, max_bytes=100)
    assert_error(e, f"{len(data)} bytes, limit 100")


def test_validation_against_registry_unknown_op_and_arity():
    g = dfg.Graph()
    x = g.create_in("X")
    g.create_out("A", g.create_op("NoSuchOp", [x]))
    g2 = dfg.Graph.from_bytes(g.to_bytes())  # unknown ops are only refused against a registry
    with pytest.raises(ValueError) as e:
        dfg.Runner().run(g2, {"X": torch.ones(2)})
    assert_error(e, "node 1 (NoSuchOp)", "unknown op 'NoSuchOp'")
    g = dfg.Graph()
    x = g.create_in("X")
    g.create_out("A", g.create_op("ReLU", [x, x]))
    with pytest.raises(ValueError) as e:
        dfg.Runner().run(dfg.Graph.from_bytes(g.to_bytes()), {"X": torch.ones(2)})
    assert_error(e, "node 1 (ReLU)", "2 inputs", "takes 1")
    g = dfg.Graph()
    x = g.create_in("X")
    g.create_out("A", g.create_op("ReLU", [x], num_outputs=1))
    data = reencode(g.to_bytes(), _set(["nodes", 0, "outputs"], ["1_0", "1_1"]))
    with pytest.raises(ValueError) as e:
        dfg.Graph.from_bytes(data).validate(dfg.default_registry())
    assert_error(e, "declares 2 outputs", "produces 1")


def test_builder_refuses_duplicates_dangling_and_foreign_handles():
    g = dfg.Graph()
    x = g.create_in("X")
    with pytest.raises(ValueError, match="duplicate name"):
        g.create_param("X", torch.ones(1))
    with pytest.raises(ValueError, match="dangling"):
        g.create_op("ReLU", ["3_0"])
    with pytest.raises(ValueError, match="dangling"):
        g.create_op("ReLU", ["Y"])
    with pytest.raises(ValueError, match="another graph"):
        dfg.Graph().create_op("ReLU", [x])
    with pytest.raises(ValueError, match="only finite floats"):
        g.create_op("LeakyReLU", [x], attrs={"negative_slope": float("nan")})
    with pytest.raises(ValueError, match="bad name"):
        g.create_in("bad name")
    a, b = g.create_op("BatchPre", [x], attrs={"fanouts": [2]})  # two outputs, from the registry
    assert (a.ref, b.ref) == ("1_0", "1_1")


# ---------------------------------------------------------------------------------------------
# Runner, profile, sampler context


def test_runner_refuses_oversized_values(monkeypatch):
    g = dfg.Graph()
    x = g.create_in("X")
    for _ in range(4):  # each Concat doubles the width
        x = g.create_op("Concat", [x, x])
    g.create_out("Y", x)
    assert dfg.Runner().run(g, {"X": torch.ones(1, 2)})["Y"].shape == (1, 32)
    monkeypatch.setattr("flashgnn.dfg.runner.MAX_VALUE_ELEMENTS", 10)
    with pytest.raises(dfg.NodeError) as e:
        dfg.Runner().run(g, {"X": torch.ones(1, 2)})
    assert_error(e, "node 3 (Concat", "16 elements, limit MAX_VALUE_ELEMENTS 10")


def test_runner_inputs_errors_and_profile():
    g = small_graph()
    r = dfg.Runner()
    with pytest.raises(ValueError, match="missing input"):
        r.run(g, {})
    with pytest.raises(ValueError, match="unknown input"):
        r.run(g, {"X": torch.ones(1, 3), "Y": 1})
    with pytest.raises(dfg.NodeError) as e:
        r.run(g, {"X": torch.ones(2, 5)})
    assert e.value.seq == 1 and e.value.op == "GEMM"
    assert_error(e, "node 1 (GEMM on", "do not chain")
    out = r.run(g, {"X": np.ones((2, 3), np.float32)})["Result"]
    assert out.shape == (2, 4)
    assert [(p["seq"], p["op"]) for p in r.last_profile] == [(1, "GEMM"), (2, "ReLU")]
    best = r.registry.devices()[0].name
    assert all(p["device"] == best and p["ms"] >= 0 and p["kernel"].startswith("flashgnn.dfg.ops.")
               for p in r.last_profile)


def test_batchpre_needs_context_and_seed_input_overrides(ds_path, ctx):
    g = dfg.Graph()
    batch, seed = g.create_in("Batch"), g.create_in("Seed")
    sub, x = g.create_op("BatchPre", [batch, seed], attrs={"fanouts": [4, 2], "seed": 0})
    g.create_out("N", g.create_op("Reduce", [x], attrs={"op": "sum", "dim": 1}))
    seeds = torch.from_numpy(seeds_of(20))
    with pytest.raises(ValueError, match="SamplerContext"):
        dfg.Runner().run(g, {"Batch": seeds, "Seed": torch.tensor(3)})
    r = dfg.Runner(context=ctx)
    got = r.run(g, {"Batch": seeds, "Seed": torch.tensor(3)})["N"]
    b = flashgnn.Sampler(ds_path, [4, 2]).sample(seeds.numpy(), 3)
    torch.testing.assert_close(got, torch.from_numpy(b.x).sum(1))
    with pytest.raises(ValueError, match=r"fanouts\[0\] = -5"):
        g2 = dfg.Graph()
        s2, _ = g2.create_op("BatchPre", [g2.create_in("Batch")], attrs={"fanouts": [-5]})
        g2.create_out("S", g2.create_op("Features", [s2]))
        r.run(g2, {"Batch": seeds})
    with pytest.raises(ValueError, match="unknown attr"):
        g3 = dfg.Graph()
        g3.create_op("BatchPre", [g3.create_in("Batch")], attrs={"fanouts": [1], "bogus": 1})
        g3.create_out("S", "1_1")
        r.run(g3, {"Batch": seeds})


def test_sampler_context_caches_per_fanout_and_passes_graph(ds_path, monkeypatch):
    made = []

    def factory(fanouts):
        made.append(list(fanouts))
        return flashgnn.Sampler(ds_path, fanouts)

    c = dfg.SamplerContext(factory)
    c.sample(np.arange(4), [2, 2], 0)
    c.sample(np.arange(4), [2, 2], 1)
    c.sample(np.arange(4), [3], 0)
    assert made == [[2, 2], [3]]

    seen = {}
    real = flashgnn.Sampler

    class FakeSampler:
        def __init__(self, path, fanouts, graph=None, **kw):
            seen.update(path=path, fanouts=fanouts, graph=graph, kw=kw)

        def sample(self, seeds, seed):
            return real(ds_path, seen["fanouts"]).sample(seeds, seed)

    monkeypatch.setattr(flashgnn, "Sampler", FakeSampler)
    marker = object()
    c = dfg.SamplerContext(ds_path, graph=marker)
    assert c.graph_passed
    c.sample(np.arange(3), [2], 0)
    assert seen["graph"] is marker and seen["fanouts"] == [2] and seen["kw"] == {"labels": False}


# ---------------------------------------------------------------------------------------------
# Ops against PyG's own primitives


def one_op(op, inputs: list, attrs=None, registry=None, num_outputs=None):
    g = dfg.Graph()
    hs = [g.create_in(f"in{i}") for i in range(len(inputs))]
    g.create_out("Out", g.create_op(op, hs, attrs=attrs or {}, num_outputs=num_outputs))
    return dfg.Runner(registry=registry).run(g, {f"in{i}": v for i, v in enumerate(inputs)})["Out"]


def random_subgraph(seed=0):
    """A synthetic 2-hop sampled subgraph: 4 seeds, 6 hop-1 nodes, 8 hop-2 nodes."""
    gen = torch.Generator().manual_seed(seed)
    nodes = [4, 6, 8]
    bounds = np.cumsum([0] + nodes)
    rows, cols, ecount = [], [], []
    for h in range(2):
        e = 15 + 5 * h
        cols.append(torch.randint(int(bounds[h]), int(bounds[h + 1]), (e,), generator=gen))
        rows.append(torch.randint(0, int(bounds[h + 2]), (e,), generator=gen))
        ecount.append(e)
    ei = torch.stack([torch.cat(rows), torch.cat(cols)])
    ei[:, 3] = ei[1, 3]  # one self-loop
    sub = dfg.SubGraph(torch.arange(sum(nodes)), ei, nodes, ecount, 4)
    return sub, torch.randn(sum(nodes), 5, generator=gen)


@pytest.mark.parametrize("layer", [None, 0, 1])
def test_spmm_matches_pyg_scatter_with_trimming(layer):
    from torch_geometric.utils import scatter, trim_to_layer

    sub, x = random_subgraph()
    xt, eit, _ = trim_to_layer(layer or 0, sub.num_sampled_nodes, sub.num_sampled_edges, x, sub.edge_index)
    attrs = {} if layer is None else {"layer": layer}
    for op, reduce in (("SpMM_Sum", "sum"), ("SpMM_Mean", "mean")):
        want = scatter(xt[eit[0]], eit[1], dim=0, dim_size=xt.size(0), reduce=reduce)
        torch.testing.assert_close(one_op(op, [sub, x], attrs), want)
    torch.testing.assert_close(one_op("Trim", [sub, x], {"layer": layer or 0}), xt)


@pytest.mark.parametrize("self_loops", [True, False])
def test_gcn_norm_matches_pyg(self_loops):
    from torch_geometric.nn.conv.gcn_conv import gcn_norm
    from torch_geometric.utils import to_dense_adj

    sub, _ = random_subgraph(1)
    for layer in (0, 1):
        ei, _, n = sub.trimmed(layer)
        want_ei, want_w = gcn_norm(ei, None, n, add_self_loops=self_loops)
        got = one_op("GCNNorm", [sub], {"layer": layer, "self_loops": self_loops})
        assert got.num_nodes == n
        torch.testing.assert_close(to_dense_adj(got.edge_index, edge_attr=got.edge_weight, max_num_nodes=n),
                                   to_dense_adj(want_ei, edge_attr=want_w, max_num_nodes=n))


def test_run_check_stops_a_long_gemm_between_row_blocks(monkeypatch):
    """The run's ``check`` is called before each node and, for a GEMM on CPU over GEMM_BLOCK_MACS, between
    its row blocks: a check that starts failing mid-product ends the run inside the kernel with the check's
    own exception (not a NodeError), and with a passing check the blocked product equals ``a @ b``."""
    from flashgnn.dfg import ops

    monkeypatch.setattr(ops, "GEMM_BLOCK_MACS", 64 * 50 * 40)  # one block per GEMM_MIN_BLOCK_ROWS (64) rows
    gen = torch.Generator().manual_seed(4)
    a, b = torch.randn(640, 50, generator=gen), torch.randn(50, 40, generator=gen)
    g = dfg.Graph()
    x, w = g.create_in("A"), g.create_in("B")
    g.create_out("Out", g.create_op("GEMM", [x, w]))
    calls = []

    class Expired(Exception):
        pass

    def check(fail_at=None):
        calls.append(1)
        if fail_at is not None and len(calls) >= fail_at:
            raise Expired(f"expired at check {len(calls)}")

    out = dfg.Runner().run(g, {"A": a, "B": b}, check=check)["Out"]
    torch.testing.assert_close(out, a @ b)
    assert len(calls) == 1 + 10  # before the node, then one per 64-row block
    calls.clear()
    with pytest.raises(Expired, match="expired at check 4"):
        dfg.Runner().run(g, {"A": a, "B": b}, check=lambda: check(fail_at=4))
    assert len(calls) == 4  # stopped in the third block of ten


def test_dense_ops():
    gen = torch.Generator().manual_seed(3)
    a, b = torch.randn(4, 3, generator=gen), torch.randn(3, 5, generator=gen)
    torch.testing.assert_close(one_op("GEMM", [a, b]), a @ b)
    torch.testing.assert_close(one_op("GEMM", [a, b.t().contiguous()], {"transpose_b": True}), a @ b)
    torch.testing.assert_close(one_op("ElementWise", [a, a * 2], {"op": "sub"}), -a)
    torch.testing.assert_close(one_op("ElementWise", [a, torch.tensor([2.0])], {"op": "mul"}), a * 2)
    torch.testing.assert_close(one_op("Reduce", [a], {"op": "max", "dim": 1}), a.max(1).values)
    torch.testing.assert_close(one_op("Reduce", [a], {"op": "mean"}), a.mean(0))
    torch.testing.assert_close(one_op("Slice", [a], {"start": 1, "stop": 3}), a[1:3])
    torch.testing.assert_close(one_op("Take", [a, torch.tensor([3, 0])]), a[[3, 0]])
    torch.testing.assert_close(one_op("Concat", [a, a, a]), torch.cat([a, a, a], -1))
    torch.testing.assert_close(one_op("LogSoftmax", [a]), torch.log_softmax(a, -1))
    torch.testing.assert_close(one_op("Softmax", [a], {"dim": 0}), torch.softmax(a, 0))
    torch.testing.assert_close(one_op("L2Normalize", [a]), torch.nn.functional.normalize(a, dim=-1))
    torch.testing.assert_close(one_op("LeakyReLU", [a], {"negative_slope": 0.3}),
                               torch.nn.functional.leaky_relu(a, 0.3))
    sub, x = random_subgraph(2)
    y = torch.randn_like(x)
    ei = sub.edge_index
    torch.testing.assert_close(one_op("SDDMM", [sub, x, y]), (x[ei[0]] * y[ei[1]]).sum(-1))
    torch.testing.assert_close(one_op("SDDMM", [sub, x, y], {"op": "add", "layer": 1}),
                               x[ei[0, :15]] + y[ei[1, :15]])
    torch.testing.assert_close(one_op("Take", [x, sub]), x[:4])
    for op, ins, attrs, frag in [
        ("ElementWise", [a, a], {"op": "pow"}, "attr op = 'pow'"),
        ("Reduce", [a], {"dim": 5}, "attr dim = 5"),
        ("Slice", [a], {"start": 9}, "attr start = 9"),
        ("Take", [a, torch.tensor([4])], {}, "outside 0..3"),
        ("Bias", [a, torch.ones(2)], {}, "bias of shape [2]"),
        ("ReLU", [a], {"inplace": True}, "unknown attr(s) inplace"),
        ("SpMM_Sum", [sub, x], {"layer": 2}, "attr layer = 2: this subgraph has 2 hops"),
        ("SpMM_Sum", [sub, x[:5]], {}, "5 rows"),
        ("Trim", [a, a], {}, "expected a SubGraph"),
        ("GEMM", [torch.ones(1 << 15, 1), torch.ones(1, 1 << 15)], {}, "limit MAX_VALUE_ELEMENTS"),
        ("ElementWise", [torch.ones(1 << 15, 1), torch.ones(1 << 15)], {"op": "mul"}, "limit MAX_VALUE_ELEMENTS"),
    ]:
        with pytest.raises(dfg.NodeError) as e:
            one_op(op, ins, attrs)
        assert_error(e, frag)


# ---------------------------------------------------------------------------------------------
# Device table, priorities and plugins


def test_registry_tables_and_priority_rules():
    reg = dfg.builtin_registry()
    names = [d.name for d in reg.devices()]
    assert names == (["CUDA", "CPU"] if torch.cuda.is_available() else ["CPU"])
    for op in ("BatchPre", "SpMM_Mean", "SpMM_Sum", "GEMM", "ElementWise", "ReLU", "Reduce", "SDDMM", "Slice",
               "Take", "Concat", "Bias", "Add", "GCNNorm", "Softmax", "LogSoftmax"):
        assert op in reg.ops()
    assert reg.select("BatchPre")[0].name == "CPU"
    with pytest.raises(ValueError, match="priority 100 is already 'CPU'"):
        reg.register_device("Other", 100)
    with pytest.raises(ValueError, match="not registered"):
        reg.register_op("GEMM", "Nowhere", lambda ctx, a, b: a)
    reg.register_device("Vec", 150)
    with pytest.raises(ValueError, match="disagree"):
        reg.register_op("GEMM", "Vec", lambda ctx, a, b: a, arity=2)
    reg.register_op("GEMM", "Vec", lambda ctx, a, b, bias=None: a @ b, arity=(2, 3))
    assert reg.select("GEMM")[0].name == ("CUDA" if torch.cuda.is_available() else "Vec")
    reg.register_device("Vec", 1000)  # re-registering changes the priority
    assert reg.select("GEMM")[0].name == "Vec" and reg.select("ReLU")[0].name != "Vec"
    table = reg.table()
    gemm = next(o for o in table["ops"] if o["name"] == "GEMM")
    assert gemm["devices"][0] == "Vec" and gemm["arity"] == "2..3"
    reg.unregister_device("Vec")
    assert reg.select("GEMM")[0].name != "Vec"


PLUGIN = '''
"""Test plugin: an accelerator above CPU/CUDA with its own GEMM, and an op of its own."""
import torch

CALLS = {"GEMM": 0}


def accel_gemm(ctx, a, b, bias=None, **attrs):
    CALLS["GEMM"] += 1
    out = a @ b
    return out if bias is None else out + bias


def affine(ctx, x, alpha=2.0, beta=1.0):
    return x * alpha + beta


def register(registry):
    registry.register_device("MyAccel", 300, "cpu")
    registry.register_op("GEMM", "MyAccel", accel_gemm, arity=(2, 3), doc="GEMM on the test accelerator")
    registry.register_op("Affine", "MyAccel", affine, arity=1, doc="x * alpha + beta")
'''


def test_plugin_device_wins_gemm_and_plugin_op_runs(ds_path, ctx, tmp_path):
    (tmp_path / "accel_plugin.py").write_text(PLUGIN)
    reg = dfg.builtin_registry()
    mod = dfg.load_plugin(tmp_path / "accel_plugin.py", registry=reg)
    assert reg.devices()[0].name == "MyAccel"
    model = random_model("sage")
    seeds = seeds_of()
    g = dfg.models.sage(model, FANOUTS, seed=SEED)
    out, runner = run_dfg(g, ctx, seeds, registry=reg)
    torch.testing.assert_close(out, reference_output(model, ds_path, seeds), atol=1e-5, rtol=1e-5)
    by_op = {}
    for p in runner.last_profile:
        by_op.setdefault(p["op"], set()).add(p["device"])
    assert by_op["GEMM"] == {"MyAccel"} and "MyAccel" not in by_op["SpMM_Mean"] | by_op["BatchPre"]
    gemm_nodes = sum(1 for n in g.nodes if n.op == "GEMM")
    assert mod.CALLS["GEMM"] == gemm_nodes == 4
    assert all(p["kernel"].endswith("accel_gemm") for p in runner.last_profile if p["op"] == "GEMM")

    # a plugin-defined op inside a DFG (through the wire format)
    g = dfg.Graph()
    x = g.create_in("X")
    g.create_out("Y", g.create_op("Affine", [g.create_op("ReLU", [x])], attrs={"alpha": 3.0, "beta": -1.0}))
    g = dfg.Graph.from_bytes(g.to_bytes())
    xin = torch.tensor([[-1.0, 2.0]])
    torch.testing.assert_close(dfg.Runner(registry=reg).run(g, {"X": xin})["Y"], torch.tensor([[-1.0, 5.0]]))
    with pytest.raises(ValueError, match="unknown op 'Affine'"):
        dfg.Runner(registry=dfg.builtin_registry()).run(g, {"X": xin})


def test_plugin_by_module_name_and_from_source(tmp_path, monkeypatch):
    (tmp_path / "dfg_test_plugin_mod.py").write_text(PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    reg = dfg.builtin_registry()
    dfg.load_plugin("dfg_test_plugin_mod", registry=reg)
    assert "Affine" in reg.ops()
    sys.modules.pop("dfg_test_plugin_mod", None)

    reg2 = dfg.builtin_registry()
    dfg.load_plugin_source("accel", PLUGIN, registry=reg2)
    assert reg2.select("GEMM")[0].name == "MyAccel"
    assert one_op("Affine", [torch.tensor([1.0])], registry=reg2).item() == 3.0

    # all or nothing: a register() that fails half-way leaves the registry as it was
    bad = PLUGIN + textwrap.dedent('''
        def register(registry):
            registry.register_device("Half", 400)
            registry.register_op("GEMM", "Half", accel_gemm, arity=(2, 3))
            raise RuntimeError("plugin failed")
    ''')
    reg3 = dfg.builtin_registry()
    before = reg3.table()
    with pytest.raises(RuntimeError, match="plugin failed"):
        dfg.load_plugin_source("half", bad, registry=reg3)
    assert reg3.table() == before
    with pytest.raises(ValueError, match="no register"):
        dfg.load_plugin_source("empty", "x = 1", registry=reg3)
    with pytest.raises(ValueError, match="identifier"):
        dfg.load_plugin_source("../evil", PLUGIN, registry=reg3)
    with pytest.raises(ValueError, match="no such file"):
        dfg.load_plugin(tmp_path / "missing.py", registry=reg3)
