"""Layer-wise inference for any model: flashgnn.inference,
PyG's own model.inference(loader) on flashgnn.NeighborLoader, and
`flashgnn embed --model-class` on a user's checkpoint.

How: on a small generated graph (self-loops dropped, so PyG's GCNConv and
the stored degrees agree), every model's layer-wise output over the dataset
on disk is compared with torch.allclose to the same model's forward pass over
the whole graph held in memory (x and edge_index read back from the store).
Chunking is proven by a per-layer-protocol module that records the targets of
every call (several chunks per layer, none larger than batch_size). Errors
are checked by the names they must carry.
"""

from __future__ import annotations

import json
import os
import pickle

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from torch_geometric.nn import GAT, GCN, GIN, GraphSAGE, SAGEConv  # noqa: E402

import flashgnn  # noqa: E402
import flashgnn.nn.gcn  # noqa: E402

from conftest import cli_env, generated_dataset, run_cli  # noqa: E402

DIM, CLASSES = 12, 3


@pytest.fixture(scope="module")
def ds_path(tmp_path_factory):
    return generated_dataset(tmp_path_factory.mktemp("infer"), build_opts=dict(self_loops="drop"), scale=9,
                             edge_factor=6, dim=DIM, classes=CLASSES, seed=7, split=(0.5, 0.2, 0.3))


@pytest.fixture(scope="module")
def whole(ds_path):
    """(x, edge_index) of the whole graph in memory: row = neighbor, col = node."""
    ds = flashgnn.open(ds_path)
    ids = np.arange(ds.num_nodes)
    ptr, idx = ds.neighbors_csr(ids)
    ei = torch.from_numpy(np.stack([idx, np.repeat(ids, np.diff(ptr))]))
    return torch.from_numpy(ds.features(ids).astype(np.float32)), ei


class TwoSage(torch.nn.Module):
    """A user's model with the per-layer protocol: num_layers + layer(i, x, edge_index)."""

    def __init__(self, in_channels: int, hidden: int, out_channels: int):
        super().__init__()
        self.c1, self.c2 = SAGEConv(in_channels, hidden), SAGEConv(hidden, out_channels)
        self.num_layers = 2
        self.calls: list[tuple[int, int]] = []  # (layer, targets) per call

    def layer(self, i, x, edge_index):
        self.calls.append((i, int(edge_index[1].max()) + 1 if edge_index.numel() else 0))
        return torch.tanh(self.c1(x, edge_index)) if i == 0 else self.c2(x, edge_index)

    def forward(self, x, edge_index):
        return self.c2(torch.tanh(self.c1(x, edge_index)), edge_index)


def _models():
    torch.manual_seed(0)
    return {
        "sage": GraphSAGE(DIM, 16, 2, CLASSES),
        "gcn-flashgnn": flashgnn.nn.GCN(DIM, 16, 2, CLASSES),
        "gcn-pyg": GCN(DIM, 16, 3, CLASSES),
        "gin": GIN(DIM, 16, 2, CLASSES),
        "gat": GAT(DIM, 8, 2, CLASSES, heads=2),
        "sage-jk-last-norm": GraphSAGE(DIM, 16, 2, CLASSES, jk="last", norm="batch_norm"),
        "protocol": TwoSage(DIM, 16, CLASSES),
    }


@pytest.mark.parametrize("name", list(_models()))
def test_inference_equals_full_graph_forward(ds_path, whole, name, monkeypatch):
    model = _models()[name].eval()
    x, ei = whole
    with torch.no_grad():
        want = model(x, ei)
    got = flashgnn.inference(model, ds_path, batch_size=100, progress_bar=False)
    assert got.shape == want.shape and got.dtype == torch.float32
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-4), (got - want).abs().max()
    if name in ("sage", "gcn-flashgnn"):
        # Input rows that do not fit (max_bytes): the input table is read once into a memory map beside the
        # layers' tables instead of memory; the same outputs. (The outputs, 3 KiB here, still fit 16 KiB.)
        from flashgnn.nn import layerwise

        made = []
        tables = layerwise._tables
        monkeypatch.setattr(layerwise, "_tables", lambda tmp, nm, *a, **k: made.append(nm) or tables(tmp, nm, *a, **k))
        low = flashgnn.inference(model, ds_path, batch_size=100, progress_bar=False, max_bytes=16 << 10)
        assert torch.allclose(low, want, atol=1e-5, rtol=1e-4), (low - want).abs().max()
        assert made[0] == "input.f32", made
        flashgnn.inference(model, ds_path, batch_size=100, progress_bar=False)
        assert made.count("input.f32") == 1  # it fits: in memory


@pytest.mark.parametrize("name", ["sage", "sage-sum-normalized", "sage-jk-last-norm", "gat"])
def test_sage_layers_beyond_the_room_go_source_block_by_source_block(ds_path, whole, tmp_path, name, monkeypatch):
    # Input tables beyond half the room (max_bytes; 512 nodes x 12-16 floats against 8 KiB): an all-SAGE
    # model sums each destination block's neighbours source block by source block instead of gathering its
    # rows chunk by chunk (64-row blocks here, so 8 x 8 tiles a layer); the same outputs. Other models keep
    # the per-chunk gather.
    from flashgnn.nn import layerwise

    torch.manual_seed(0)
    model = (GraphSAGE(DIM, 16, 2, CLASSES, aggr="sum", normalize=True, root_weight=False)
             if name == "sage-sum-normalized" else _models()[name]).eval()
    with torch.no_grad():
        want = model(*whole)
    gathered = []
    rows = layerwise._rows
    monkeypatch.setattr(layerwise, "_rows", lambda t, ids: gathered.append(len(ids)) or rows(t, ids))
    meta = flashgnn.inference(model, ds_path, tmp_path / "emb", batch_size=64, progress_bar=False,
                              max_bytes=16 << 10)
    got = torch.from_numpy(np.load(tmp_path / "emb" / "embeddings.npy"))
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-4), (got - want).abs().max()
    tiled = name != "gat"
    assert meta["tiled_layers"] == (2 if tiled else 0), meta
    assert (not gathered) == tiled, f"{len(gathered)} per-chunk gathers"


def test_chunks_bounded_and_written_through_embed(ds_path, whole, tmp_path):
    model = _models()["protocol"].eval()
    n = flashgnn.open(ds_path).num_nodes
    meta = flashgnn.inference(model, ds_path, tmp_path / "emb", batch_size=128, progress_bar=False, predictions=True)
    per_layer = [[t for i, t in model.calls if i == k] for k in (0, 1)]
    assert [len(c) for c in per_layer] == [-(-n // 128)] * 2 and len(per_layer[0]) > 1
    assert max(max(c) for c in per_layer) <= 128  # targets of one call never exceed batch_size
    assert meta["chunks"] == len(per_layer[0]) and meta["layers"] == 2 and meta["model"] == "TwoSage"
    on_disk = json.loads((tmp_path / "emb" / "embed.json").read_text())
    assert on_disk["flashgnn_output"] == "embed" and on_disk["num_nodes"] == n
    emb = np.load(tmp_path / "emb" / "embeddings.npy")
    with torch.no_grad():
        want = model(*whole).numpy()
    np.testing.assert_allclose(emb, want, atol=1e-5, rtol=1e-4)
    np.testing.assert_array_equal(np.load(tmp_path / "emb" / "predictions.npy"), emb.argmax(1))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["emb"]  # no temporary left beside it


def test_hidden_layers_and_refusals(ds_path, whole):
    model = _models()["sage"].eval()
    x, ei = whole
    with torch.no_grad():
        want = model.act(model.convs[0](x, ei))
    got = flashgnn.inference(model, ds_path, batch_size=200, progress_bar=False, layers=1)
    assert torch.allclose(got, want, atol=1e-5, rtol=1e-4)
    with pytest.raises(ValueError, match=r"layers=3: GraphSAGE has 2 layer\(s\)"):
        flashgnn.inference(model, ds_path, layers=3, progress_bar=False)
    n = x.shape[0]
    with pytest.raises(MemoryError, match=rf"{n:,} nodes x 3 float32 = {n * 12:,} bytes.*more than the 1,000 bytes"):
        flashgnn.inference(model, ds_path, progress_bar=False, max_bytes=1000)
    with pytest.raises(TypeError, match="torch.nn.modules.linear.Linear is not a torch_geometric BasicGNN"):
        flashgnn.inference(torch.nn.Linear(DIM, 3), ds_path, progress_bar=False)
    with pytest.raises(ValueError, match="jk='cat'"):
        flashgnn.inference(GraphSAGE(DIM, 8, 2, 3, jk="cat"), ds_path, progress_bar=False)
    with pytest.raises(ValueError, match="batch_size must be an integer > 0, got 0"):
        flashgnn.inference(model, ds_path, batch_size=0, progress_bar=False)
    assert not model.training
    model.train()
    flashgnn.inference(model, ds_path, progress_bar=False)
    assert model.training  # mode restored


def test_pyg_model_inference_on_a_flashgnn_loader(ds_path, whole):
    """PyG's own pattern: model.inference(loader) over loader.data.x."""
    x, ei = whole
    ld = flashgnn.NeighborLoader(ds_path, num_neighbors=[-1], batch_size=100, input_nodes=None)
    data = ld.data
    assert data.num_nodes == x.shape[0] and torch.equal(data.x, x) and data.edge_index is None
    assert int(data.train_mask.sum()) == len(flashgnn.open(ds_path).split("train"))
    for name in ("sage", "gin", "gcn-flashgnn"):
        model = _models()[name].eval()
        with torch.no_grad():
            want = model(x, ei)
        got = model.inference(ld)
        assert torch.allclose(got, want, atol=1e-5, rtol=1e-4), name
    # Once PyG's inference has read node_sampler, batches come as structure: no x, the same edges, and the
    # engine reads less (no row per neighbour).
    full = flashgnn.NeighborLoader(ds_path, num_neighbors=[-1], batch_size=100, input_nodes=None)
    for a, b in zip(ld, full, strict=True):
        assert "x" not in a and "x" in b
        assert torch.equal(a.n_id, b.n_id) and torch.equal(a.edge_index, b.edge_index)
    assert ld.telemetry["bytes_used"] < full.telemetry["bytes_used"], (ld.telemetry, full.telemetry)
    model = _models()["sage"].eval()
    for kw, what in ((dict(num_neighbors=[-1, -1]), r"num_neighbors=\[-1, -1\]"), (dict(shuffle=True), "shuffle=True"),
                     (dict(input_nodes=torch.arange(10)), "input_nodes selects 10 of")):
        bad = flashgnn.NeighborLoader(ds_path, **{"num_neighbors": [-1], "batch_size": 100, **kw})
        with pytest.raises(ValueError, match=f"model.inference\\(loader\\) needs a loader over every node.*{what}"):
            model.inference(bad)
    remote = flashgnn.pyg.NeighborLoader(ds_path, [-1], batch_size=64)
    with pytest.raises(AttributeError, match=r"no \.num_nodes.*flashgnn.inference\(model, DATASET"):
        _models()["sage"].eval().inference(remote)


def test_a_layer_pass_is_kept_and_later_passes_are_copies(ds_path, monkeypatch):
    """PyG's inference makes one structure pass per layer, each the same: the first is kept (it fits) and the
    next ones are copies of it, with no engine call; a consumer writing into a batch changes nothing kept;
    without room nothing is kept and the engine samples every pass."""
    fresh = flashgnn.NeighborLoader(ds_path, num_neighbors=[-1], batch_size=100, input_nodes=None)
    fresh.node_sampler  # noqa: B018  (what PyG's inference reads)
    want = list(fresh)
    ld = flashgnn.NeighborLoader(ds_path, num_neighbors=[-1], batch_size=100, input_nodes=None)
    ld.node_sampler  # noqa: B018
    first = list(ld)
    assert not ld.telemetry.get("replayed")
    for d in first:
        d.edge_index.zero_()
        d.n_id.zero_()
    for again in range(2):
        got = list(ld)
        assert ld.telemetry.get("replayed") is True
        assert len(got) == len(want)
        for a, b in zip(got, want, strict=True):
            assert sorted(a.keys()) == sorted(b.keys()) and "x" not in a
            for k in b.keys():
                va, vb = a[k], b[k]
                assert torch.equal(va, vb) if isinstance(vb, torch.Tensor) else va == vb, (again, k)
    monkeypatch.setattr("flashgnn.sample.budget.available_memory", lambda: 4 * 1000)
    tight = flashgnn.NeighborLoader(ds_path, num_neighbors=[-1], batch_size=100, input_nodes=None)
    tight.node_sampler  # noqa: B018
    for _ in range(2):
        got = list(tight)
        assert not tight.telemetry.get("replayed") and tight.telemetry["bytes_used"] > 0
        assert all(torch.equal(a.edge_index, b.edge_index) for a, b in zip(got, want, strict=True))


def test_loader_data_is_read_into_memory_when_it_fits_else_a_memory_map(ds_path, whole, tmp_path, monkeypatch):
    """loader.data.x: in memory when x fits half the room, else a memory map in a temporary directory that
    goes with the data; the same rows either way."""
    import tempfile

    x, _ = whole
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    roomy = flashgnn.NeighborLoader(ds_path, num_neighbors=[-1], batch_size=100).data
    assert torch.equal(roomy.x, x) and not list(tmp_path.glob("flashgnn-loader-data-*"))
    monkeypatch.setattr("flashgnn.sample.budget.available_memory", lambda: x.numel() * 4)  # x is twice half of it
    mapped = flashgnn.NeighborLoader(ds_path, num_neighbors=[-1], batch_size=100).data
    assert torch.equal(mapped.x, x) and torch.equal(mapped.y, roomy.y)
    assert [p.name for p in next(tmp_path.glob("flashgnn-loader-data-*")).iterdir()] != []
    del mapped
    import gc

    gc.collect()
    assert not list(tmp_path.glob("flashgnn-loader-data-*"))  # removed with the data


# ---------------------------------------------------------------------------------------------
# flashgnn embed --model-class

USER_MODULE = '''
import torch
from torch_geometric.nn import SAGEConv


class Net(torch.nn.Module):
    def __init__(self, in_channels, hidden, out_channels):
        super().__init__()
        self.c1, self.c2 = SAGEConv(in_channels, hidden), SAGEConv(hidden, out_channels)
        self.num_layers = 2

    def layer(self, i, x, edge_index):
        return torch.tanh(self.c1(x, edge_index)) if i == 0 else self.c2(x, edge_index)

    def forward(self, x, edge_index):
        return self.c2(torch.tanh(self.c1(x, edge_index)), edge_index)


NOT_A_CLASS = 3
'''


def _env(tmp_path):
    return cli_env(PYTHONPATH=os.pathsep.join([str(tmp_path / "mods"), os.environ.get("PYTHONPATH", "")]))


def test_embed_model_class_on_a_users_state_dict(ds_path, whole, tmp_path):
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "usernet.py").write_text(USER_MODULE)
    env = _env(tmp_path)
    # A stock PyG class, kwargs on the command line, weights from torch.save(model.state_dict()).
    sage = _models()["sage"].eval()
    torch.save(sage.state_dict(), tmp_path / "sage.pt")
    kw = json.dumps(dict(in_channels=DIM, hidden_channels=16, num_layers=2, out_channels=CLASSES))
    p = run_cli("embed", ds_path, tmp_path / "o1", "--checkpoint", tmp_path / "sage.pt", "--model-class",
                "torch_geometric.nn:GraphSAGE", "--model-kwargs", kw, "--batch-size", "300", env=env)
    assert p.returncode == 0, p.stderr
    with torch.no_grad():
        want = sage(*whole).numpy()
    np.testing.assert_allclose(np.load(tmp_path / "o1" / "embeddings.npy"), want, atol=1e-5, rtol=1e-4)
    assert json.loads((tmp_path / "o1" / "embed.json").read_text())["model"] == "torch_geometric.nn:GraphSAGE"
    # A user's own class (per-layer protocol), kwargs from model_kwargs.json beside the weights.
    import importlib.util

    spec = importlib.util.spec_from_file_location("usernet", tmp_path / "mods" / "usernet.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    torch.manual_seed(1)
    net = mod.Net(DIM, 8, CLASSES).eval()
    (tmp_path / "w").mkdir()
    torch.save(net.state_dict(), tmp_path / "w" / "net.pt")
    (tmp_path / "w" / "model_kwargs.json").write_text(json.dumps(dict(in_channels=DIM, hidden=8,
                                                                       out_channels=CLASSES)))
    p = run_cli("embed", ds_path, tmp_path / "o2", "--checkpoint", tmp_path / "w", "--model-class", "usernet:Net",
                "--output", "hidden", env=env)
    assert p.returncode == 0, p.stderr
    with torch.no_grad():
        want = torch.tanh(net.c1(*whole)).numpy()
    np.testing.assert_allclose(np.load(tmp_path / "o2" / "embeddings.npy"), want, atol=1e-5, rtol=1e-4)


class Evil:
    def __reduce__(self):
        return (print, ("never run",))


@pytest.mark.parametrize("case", ["no-colon", "no-module", "no-class", "not-a-module", "bad-json", "json-list",
                                  "bad-kwargs", "mismatch", "pickle", "kwargs-alone", "file-without-class"])
def test_embed_model_class_errors_name_what_failed(ds_path, tmp_path, case, capsys, monkeypatch):
    """In process (the CLI's main), so ten cases stay fast; exit 2 and the name of what failed, nothing written."""
    from flashgnn.cli import main

    monkeypatch.syspath_prepend(str(tmp_path / "mods"))
    monkeypatch.delitem(__import__("sys").modules, "usernet", raising=False)
    (tmp_path / "mods").mkdir()
    (tmp_path / "mods" / "usernet.py").write_text(USER_MODULE)
    torch.manual_seed(0)
    torch.save(GraphSAGE(DIM, 16, 2, CLASSES).state_dict(), tmp_path / "w.pt")
    good = json.dumps(dict(in_channels=DIM, hidden=16, out_channels=CLASSES))
    args = {"no-colon": ["--model-class", "usernet.Net"],
            "no-module": ["--model-class", "nosuchpkg.mod:Net"],
            "no-class": ["--model-class", "usernet:Nope", "--model-kwargs", good],
            "not-a-module": ["--model-class", "usernet:NOT_A_CLASS"],
            "bad-json": ["--model-class", "usernet:Net", "--model-kwargs", "{in_channels: 3}"],
            "json-list": ["--model-class", "usernet:Net", "--model-kwargs", "[1, 2]"],
            "bad-kwargs": ["--model-class", "usernet:Net", "--model-kwargs", '{"in_chanels": 3}'],
            "mismatch": ["--model-class", "usernet:Net", "--model-kwargs", good],
            "pickle": ["--model-class", "usernet:Net", "--model-kwargs", good],
            "kwargs-alone": ["--model-kwargs", good],
            "file-without-class": []}[case]
    ck = tmp_path / "w.pt"
    if case == "pickle":
        ck = tmp_path / "evil.pt"
        ck.write_bytes(pickle.dumps({"x": Evil()}, protocol=2))
    want = {"no-colon": "'usernet.Net': expected package.module:ClassName",
            "no-module": r"cannot import module 'nosuchpkg.mod' \(ModuleNotFoundError",
            "no-class": "module 'usernet' .* has no attribute 'Nope'",
            "not-a-module": "NOT_A_CLASS is a int, not a torch.nn.Module subclass",
            "bad-json": "--model-kwargs: not valid JSON at line 1 column 2",
            "json-list": "--model-kwargs: expected a JSON object",
            "bad-kwargs": r"Net\(\*\*\{'in_chanels': 3\}\) \(--model-kwargs\) failed: TypeError",
            "mismatch": r"w.pt: the state dict does not fit usernet:Net\(in_channels=12.*Missing key.*c1",
            "pickle": r"evil.pt: not loadable with torch.load\(weights_only=True\)",
            "kwargs-alone": "--model-kwargs needs --model-class",
            "file-without-class": r"w.pt is a file: .*name the model's class with --model-class"}[case]
    rc = main(["embed", str(ds_path), str(tmp_path / "out"), "--checkpoint", str(ck), *args])
    out, err = capsys.readouterr()
    assert rc == 2, (rc, err)
    assert "never run" not in out
    import re

    assert re.search(want, err, re.S), err
    assert not (tmp_path / "out").exists()


def test_embed_model_class_on_a_flashgnn_checkpoint(ds_path, tmp_path):
    """A flashgnn train checkpoint loads into the stock PyG class named by --model-class (its `model` entry,
    its normalize_features applied) and gives what embed gives without --model-class."""
    ck = tmp_path / "ck"
    p = run_cli("train", ds_path, "--epochs", "1", "--max-batches", "1", "--hidden", "16", "--fanout", "3,3",
                "--normalize-features", "row", "--checkpoint", ck, "--no-progress")
    assert p.returncode == 0, p.stderr
    p = run_cli("embed", ds_path, tmp_path / "builtin", "--checkpoint", ck)
    assert p.returncode == 0, p.stderr
    kw = json.dumps(dict(in_channels=DIM, hidden_channels=16, num_layers=2, out_channels=CLASSES))
    p = run_cli("embed", ds_path, tmp_path / "user", "--checkpoint", ck, "--model-class",
                "torch_geometric.nn:GraphSAGE", "--model-kwargs", kw)
    assert p.returncode == 0, p.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "user" / "embeddings.npy"),
                                  np.load(tmp_path / "builtin" / "embeddings.npy"))
    # --memory-budget auto (the default) read the layer passes through a cache, said so in one line, and
    # recorded its split; 0 runs uncached with the same output.
    meta = json.loads((tmp_path / "builtin" / "embed.json").read_text())
    assert meta["memory_budget"]["cache"] > 0
    p = run_cli("embed", ds_path, tmp_path / "nocache", "--checkpoint", ck, "--memory-budget", "0")
    assert p.returncode == 0, p.stderr
    assert json.loads((tmp_path / "nocache" / "embed.json").read_text())["memory_budget"] == 0
    assert "memory budget" not in p.stderr
    np.testing.assert_array_equal(np.load(tmp_path / "nocache" / "embeddings.npy"),
                                  np.load(tmp_path / "builtin" / "embeddings.npy"))
