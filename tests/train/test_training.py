"""Training layer: flashgnn.NeighborLoader / RandomWalkLoader (PyG Data and
its invariants), the PyG remote backend under stock PyG loaders, `flashgnn
train` (accuracy, determinism, checkpoint/resume, DDP with torchrun) and
`flashgnn embed` (layer-wise inference equals a full-graph forward pass)."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

import flashgnn  # noqa: E402
from benchmarks.accuracy import train_flashgnn, train_stock_pyg  # noqa: E402
from flashgnn.nn.checkpoint import load_checkpoint  # noqa: E402
from flashgnn.nn.zoo import build_model, forward  # noqa: E402
from flashgnn.train import TrainError  # noqa: E402
from flashgnn.train.trainer import parser, run  # noqa: E402

from conftest import cli_env, generated_dataset, run_cli  # noqa: E402


@pytest.fixture(scope="module")
def ds_path(tmp_path_factory):
    return generated_dataset(tmp_path_factory.mktemp("train"), scale=13, edge_factor=8, dim=32, classes=4, seed=3,
                             split=(0.3, 0.1, 0.6))


def full_edge_index(ds) -> torch.Tensor:
    """Every stored edge as a [2, E] (row = neighbor, col = node) tensor."""
    ptr, idx = ds.neighbors_csr(np.arange(ds.num_nodes))
    col = np.repeat(np.arange(ds.num_nodes), np.diff(ptr))
    return torch.from_numpy(np.stack([idx, col]))


def edge_set(ds) -> set:
    ei = full_edge_index(ds).numpy()
    return set(zip(ei[0].tolist(), ei[1].tolist()))


# ---------------------------------------------------------------------------------------------
# NeighborLoader


def test_neighbor_loader_batches_obey_pyg_invariants(ds_path):
    from torch_geometric.nn import GraphSAGE

    ds = flashgnn.open(ds_path)
    train = ds.split("train")
    loader = flashgnn.NeighborLoader(ds_path, [5, 3], batch_size=200, split="train", seed=7)
    edges = edge_set(ds)
    labels = ds.labels(np.arange(ds.num_nodes))
    seen = []
    torch.manual_seed(0)
    model = GraphSAGE(ds.feature_dim, 16, 2, 4).eval()
    batches = list(loader)
    assert len(batches) == len(loader) == -(-len(train) // 200)
    for d in batches:
        bs = d.batch_size
        n_id = d.n_id.numpy()
        # seeds first, in order, and input_id points back into input_nodes
        np.testing.assert_array_equal(train[d.input_id.numpy()], n_id[:bs])
        seen.extend(n_id[:bs].tolist())
        assert len(np.unique(n_id)) == len(n_id)
        assert d.num_sampled_nodes[0] == bs and sum(d.num_sampled_nodes) == len(n_id)
        assert len(d.num_sampled_nodes) == 3 and len(d.num_sampled_edges) == 2
        assert sum(d.num_sampled_edges) == d.edge_index.shape[1]
        # edges per hop: hop h points from hop h+1 (or earlier) nodes toward hop h targets
        row, col = d.edge_index.numpy()
        bounds = np.cumsum([0] + list(d.num_sampled_nodes))
        e0 = 0
        for h, ne in enumerate(d.num_sampled_edges):
            c = col[e0 : e0 + ne]
            assert ((c >= bounds[h]) & (c < bounds[h + 1])).all()
            assert (row[e0 : e0 + ne] < bounds[h + 2]).all()
            e0 += ne
        for r, c in zip(row.tolist(), col.tolist()):
            assert (n_id[r], n_id[c]) in edges
        # features and labels of every node, as stored
        np.testing.assert_array_equal(d.x.numpy(), ds.features(n_id).astype(np.float32))
        np.testing.assert_array_equal(d.y.numpy(), labels[n_id])
        # PyG's per-layer trimming gives the same seed outputs as the full forward
        with torch.no_grad():
            full = model(d.x, d.edge_index)[:bs]
            trimmed = model(d.x, d.edge_index, num_sampled_nodes_per_hop=d.num_sampled_nodes,
                            num_sampled_edges_per_hop=d.num_sampled_edges)[:bs]
        torch.testing.assert_close(full, trimmed)
    assert sorted(seen) == sorted(train.tolist())  # every seed exactly once per epoch


@pytest.mark.parametrize("model", ["sage", "gcn", "gin", "gat", "mlp"])
def test_full_neighbourhood_batch_equals_full_graph_forward(ds_path, model):
    """With fanout -1,-1 a batch's seed outputs are the full-graph
    forward's, for every model `flashgnn train` offers, through the trainer's
    own forward() (trimmed per layer) and untrimmed. GCN normalises by the
    whole graph's degrees (data.deg); with the batch's own degrees — what
    stock PyG does on a sampled batch — it is far off, trimmed or not."""
    ds = flashgnn.open(ds_path)
    torch.manual_seed(5)
    net = build_model(model, ds.feature_dim, 16, 4, 2, dropout=0.0).eval()
    with torch.no_grad():
        for k, v in net.state_dict().items():
            if k.endswith(".eps"):  # GIN: exercise (1 + eps)
                v.fill_(0.25)
    x = torch.from_numpy(ds.features(np.arange(ds.num_nodes)).astype(np.float32))
    with torch.no_grad():
        want = net(x) if model == "mlp" else net(x, full_edge_index(ds))
    seeds = ds.split("train")[:96]
    loader = flashgnn.NeighborLoader(ds_path, [-1, -1], batch_size=48, input_nodes=seeds, shuffle=False,
                                     degrees=model == "gcn")
    checked = 0
    for data in loader:
        bs = data.batch_size
        ref = want[data.n_id[:bs]]
        with torch.no_grad():
            torch.testing.assert_close(forward(net, data), ref, atol=1e-5, rtol=1e-5)
            if model == "mlp":
                checked += bs
                continue
            kw = {"deg": data.deg} if model == "gcn" else {}
            torch.testing.assert_close(net(data.x, data.edge_index, **kw)[:bs], ref, atol=1e-5, rtol=1e-5)
            if model == "gcn":
                from torch_geometric.nn import GCN as StockGCN

                stock = StockGCN(ds.feature_dim, 16, 2, 4).eval()
                stock.load_state_dict(net.state_dict())
                for trim in (True, False):
                    kw = dict(num_sampled_nodes_per_hop=data.num_sampled_nodes,
                              num_sampled_edges_per_hop=data.num_sampled_edges) if trim else {}
                    assert (stock(data.x, data.edge_index, **kw)[:bs] - ref).abs().max() > 1e-2
        checked += bs
    assert checked == len(seeds)


@pytest.mark.parametrize("layout", ["inline", "separate"])
def test_batches_carry_whole_graph_degrees(ds_path, tmp_path, layout):
    """degrees=True: every node of a batch (last hop included, whose slot is
    otherwise not read when its features live apart or are not gathered)
    carries its stored degree; without it no degrees are read or returned."""
    flashgnn.build(ds_path.parent / "raw", tmp_path / "ds", progress=False, symmetrize=True, dedup=True,
                   feature_layout=layout)
    ds = flashgnn.open(tmp_path / "ds")
    deg = np.diff(ds.neighbors_csr(np.arange(ds.num_nodes))[0])
    seeds = ds.split("train")[:64]
    for features in (True, False):
        s = flashgnn.Sampler(tmp_path / "ds", [3, 2], features=features, degrees=True)
        b = s.sample(seeds, 1)
        assert b.num_sampled_nodes[-1] > 0
        np.testing.assert_array_equal(b.deg, deg[b.n_id])
    assert flashgnn.Sampler(tmp_path / "ds", [3, 2]).sample(seeds, 1).deg is None
    d = next(iter(flashgnn.NeighborLoader(tmp_path / "ds", [3, 2], batch_size=64, input_nodes=seeds, degrees=True)))
    np.testing.assert_array_equal(d.deg.numpy(), deg[d.n_id.numpy()])


def test_neighbor_loader_epochs_determinism_and_engines(ds_path):
    a = flashgnn.NeighborLoader(ds_path, [4, 2], batch_size=300, split="train", shuffle=True, seed=1)
    b = flashgnn.NeighborLoader(ds_path, [4, 2], batch_size=300, split="train", shuffle=True, seed=1, engine="memory",
                                num_workers=2)
    e0a, e1a = [d.n_id for d in a], [d.n_id for d in a]
    e0b = [d.n_id for d in b]
    assert all(torch.equal(x, y) for x, y in zip(e0a, e0b))  # other engine, other producer count: same batches
    assert not torch.equal(e0a[0][:300], e1a[0][:300])  # next epoch reshuffles
    a.set_epoch(1)
    assert all(torch.equal(x, y) for x, y in zip(e1a, [d.n_id for d in a]))  # set_epoch replays an epoch
    c = flashgnn.NeighborLoader(ds_path, [4, 2], batch_size=300, split="train", shuffle=True, seed=2)
    assert not torch.equal(e0a[0], next(iter(c)).n_id)


def test_pin_memory_is_ignored_without_cuda(ds_path):
    loader = flashgnn.NeighborLoader(ds_path, [2], batch_size=64, split="val", pin_memory=True)
    d = next(iter(loader))
    assert loader.pin_memory == torch.cuda.is_available()
    assert d.x.is_pinned() == torch.cuda.is_available()


def test_neighbor_loader_rank_shards(ds_path):
    n = len(flashgnn.open(ds_path).split("train"))
    shards = [flashgnn.NeighborLoader(ds_path, [2], batch_size=128, split="train", shuffle=True, seed=5, rank=r,
                                      world_size=3)
              for r in range(3)]
    ids = [torch.cat([d.n_id[: d.batch_size] for d in s]).tolist() for s in shards]
    assert len({len(x) for x in ids}) == 1 and len(ids[0]) == n // 3  # equal steps on every rank
    assert len(set(ids[0]) | set(ids[1]) | set(ids[2])) == 3 * (n // 3)  # disjoint
    assert len({len(s) for s in shards}) == 1
    ev = [flashgnn.NeighborLoader(ds_path, [2], batch_size=128, split="train", shuffle=False, rank=r, world_size=3,
                                  equal_shards=False) for r in range(3)]
    assert sum(len(torch.cat([d.n_id[: d.batch_size] for d in s])) for s in ev) == n  # eval covers all


def test_neighbor_loader_rejects_bad_arguments(ds_path):
    with pytest.raises(ValueError, match="split 'nope' not in dataset"):
        flashgnn.NeighborLoader(ds_path, [2], split="nope")
    with pytest.raises(IndexError, match=r"node id 99999999 out of range \[0, 8192\)"):
        flashgnn.NeighborLoader(ds_path, [2], input_nodes=[1, 99999999])
    with pytest.raises(ValueError, match="engine 'disk'"):
        flashgnn.NeighborLoader(ds_path, [2], engine="disk")
    with pytest.raises(ValueError, match="batch_size must be > 0"):
        flashgnn.NeighborLoader(ds_path, [2], batch_size=0)
    mask = np.zeros(8192, dtype=bool)
    mask[[3, 5]] = True
    d = next(iter(flashgnn.NeighborLoader(ds_path, [2], input_nodes=mask, batch_size=2)))
    assert d.n_id[:2].tolist() == [3, 5]


def test_random_walk_loader(ds_path):
    ds = flashgnn.open(ds_path)
    edges = edge_set(ds)
    train = set(ds.split("train").tolist())
    loader = flashgnn.RandomWalkLoader(ds_path, batch_size=100, walk_length=3, split="train", seed=4)
    batches = list(loader)
    assert len(batches) == len(loader)
    for d in batches[:5]:
        n_id = d.n_id.numpy()
        assert set(n_id[: d.batch_size].tolist()) <= train
        row, col = d.edge_index.numpy()
        got = {(n_id[r], n_id[c]) for r, c in zip(row.tolist(), col.tolist())}
        assert got <= edges
        # induced: every stored edge between two visited nodes is present
        vis = set(n_id.tolist())
        want = {(u, v) for (u, v) in edges if u in vis and v in vis}
        assert got == want
        np.testing.assert_array_equal(d.train_mask.numpy(), np.isin(n_id, list(train)))
        np.testing.assert_array_equal(d.x.numpy(), ds.features(n_id).astype(np.float32))
    again = list(flashgnn.RandomWalkLoader(ds_path, batch_size=100, walk_length=3, split="train", seed=4))
    assert all(torch.equal(a.n_id, b.n_id) for a, b in zip(batches, again))


# ---------------------------------------------------------------------------------------------
# PyG remote backend


@pytest.mark.parametrize("num_workers", [0, 2])
def test_remote_backend_under_stock_node_loader(ds_path, num_workers):
    from torch_geometric.loader import NodeLoader

    ds = flashgnn.open(ds_path)
    edges = edge_set(ds)
    fs, gs, sampler = flashgnn.pyg.remote_backend(ds_path, num_neighbors=[4, 2], seed=3)
    idx = torch.from_numpy(ds.split("val"))
    loader = NodeLoader((fs, gs), node_sampler=sampler, input_nodes=idx, batch_size=256, num_workers=num_workers)
    seen = []
    for d in loader:
        n_id = d.n_id.numpy()
        np.testing.assert_array_equal(n_id[: d.batch_size], idx[d.input_id].numpy())
        seen.extend(n_id[: d.batch_size].tolist())
        np.testing.assert_array_equal(d.x.numpy(), ds.features(n_id).astype(np.float32))
        np.testing.assert_array_equal(d.y.numpy(), ds.labels(n_id))
        row, col = d.edge_index.numpy()
        assert all((n_id[r], n_id[c]) in edges for r, c in zip(row.tolist(), col.tolist()))
        assert len(d.num_sampled_nodes) == 3
    assert sorted(seen) == sorted(idx.tolist())
    if num_workers == 0:
        # features came from the sampler's own pass: the store issued no second read
        assert fs.gather_calls == 0


def test_remote_backend_stores_and_refusals(ds_path):
    from torch_geometric.loader import NeighborLoader

    ds = flashgnn.open(ds_path)
    fs, gs, sampler = flashgnn.pyg.remote_backend(ds_path, num_neighbors=[3])
    ids = torch.tensor([5, 1, 5, 4000])
    np.testing.assert_array_equal(fs.get_tensor(group_name=None, attr_name="x", index=ids).numpy(), ds.features(ids.numpy()))
    assert fs.gather_calls == 1  # one batched engine read
    np.testing.assert_array_equal(fs.get_tensor(group_name=None, attr_name="y", index=ids).numpy(), ds.labels(ids.numpy()))
    assert fs.get_tensor_size(group_name=None, attr_name="x") == (ds.num_nodes, ds.feature_dim)
    assert gs.get_all_edge_attrs()[0].size == (ds.num_nodes, ds.num_nodes)
    with pytest.raises(RuntimeError, match="does not materialise its .* edges in RAM"):
        gs.get_edge_index(edge_type=None, layout="csc")
    with pytest.raises(NotImplementedError, match="read-only"):
        fs.put_tensor(torch.zeros(ds.num_nodes, ds.feature_dim), group_name=None, attr_name="x", index=None)
    with pytest.raises(IndexError, match=r"node id 8192 out of range"):
        fs.get_tensor(group_name=None, attr_name="x", index=torch.tensor([8192]))
    # flashgnn.pyg.NeighborLoader (PyG's, with the arguments passed on) works with our sampler
    loader = flashgnn.pyg.NeighborLoader((fs, gs), num_neighbors=[3], neighbor_sampler=sampler,
                                         input_nodes=torch.arange(50), batch_size=25)
    d = next(iter(loader))
    assert d.batch_size == 25 and d.n_id[:25].tolist() == list(range(25))
    # PyG's own never passes its num_neighbors to a given sampler: refused at the first batch
    with pytest.raises(ValueError, match="does not pass num_neighbors"):
        next(iter(NeighborLoader((fs, gs), num_neighbors=[3], neighbor_sampler=sampler,
                                 input_nodes=torch.arange(50), batch_size=25)))
    # without our sampler, PyG's would load every edge: the refusal is explicit
    with pytest.raises(RuntimeError, match="neighbor_sampler="):
        NeighborLoader((fs, gs), num_neighbors=[3], input_nodes=torch.arange(50), batch_size=25)


# ---------------------------------------------------------------------------------------------
# flashgnn train


def _args(ds_path, *extra):
    return parser().parse_args([str(ds_path), "--no-progress", "--fanout", "5,3", "--batch-size", "512", *extra])


def test_accuracy_sage_beats_mlp_and_agrees_across_engines_and_stock_pyg(ds_path):
    uring = train_flashgnn(ds_path, "sage", "uring", 5, "10,5")
    memory = train_flashgnn(ds_path, "sage", "memory", 5, "10,5")
    stock = train_stock_pyg(ds_path, [10, 5], 5)
    mlp = train_flashgnn(ds_path, "mlp", "uring", 5, "10,5")
    assert uring["test_acc"] - mlp["test_acc"] >= 0.10, (uring, mlp)
    assert abs(uring["test_acc"] - memory["test_acc"]) <= 0.01, (uring, memory)
    assert abs(uring["test_acc"] - stock["test_acc"]) <= 0.01, (uring, stock)


def test_train_is_deterministic_and_resume_equals_uninterrupted(ds_path, tmp_path, capsys):
    a = run(_args(ds_path, "--epochs", "2", "--dropout", "0.5", "--metrics-json", str(tmp_path / "m.json")))
    b = run(_args(ds_path, "--epochs", "1", "--dropout", "0.5", "--checkpoint", str(tmp_path / "ck")))
    c = run(_args(ds_path, "--epochs", "2", "--dropout", "0.5", "--checkpoint", str(tmp_path / "ck"), "--resume"))
    out = capsys.readouterr().out
    assert "resumed from" in out and "after epoch 1" in out
    # the resumed run reproduces the uninterrupted loss curve and weights
    assert [h["train_loss"] for h in c["history"]] == [h["train_loss"] for h in a["history"]]
    assert [h["test_acc"] for h in c["history"]] == [h["test_acc"] for h in a["history"]]
    sa, sc = a["model_obj"].state_dict(), c["model_obj"].state_dict()
    assert all(torch.equal(sa[k], sc[k]) for k in sa)
    assert b["test_acc"] != a["test_acc"] or b["train_loss"] != a["train_loss"]
    a2 = run(_args(ds_path, "--epochs", "2", "--dropout", "0.5"))
    assert all(torch.equal(sa[k], a2["model_obj"].state_dict()[k]) for k in sa)
    m = json.loads((tmp_path / "m.json").read_text())
    assert [e["epoch"] for e in m["epochs"]] == [1, 2]
    for key in ("train_loss", "val_acc", "test_acc", "data_wait", "seeds_per_s"):
        assert isinstance(m["epochs"][-1][key], float)
    assert 0.0 <= m["epochs"][-1]["data_wait"] <= 1.0
    st = load_checkpoint(tmp_path / "ck")
    assert st["epoch"] == 2 and st["model_config"]["model"] == "sage" and "optimizer" in st and "rng" in st
    # Plain torch.load(weights_only=True) into the stock PyG model gives the trained weights (docs/training.md).
    from torch_geometric.nn import GraphSAGE

    plain = torch.load(tmp_path / "ck" / "checkpoint.pt", weights_only=True)
    cfg = plain["model_config"]
    stock = GraphSAGE(cfg["in_dim"], cfg["hidden"], cfg["num_layers"], cfg["out_dim"], dropout=cfg["dropout"])
    stock.load_state_dict(plain["model"])
    assert all(torch.equal(sc[k], stock.state_dict()[k]) for k in sc)


def test_checkpoint_is_data_not_code(tmp_path):
    """load_checkpoint never unpickles code: a pickle that would run a callable is refused as unreadable."""
    import pickle

    class Evil:
        def __reduce__(self):
            return (os.system, ("touch " + str(tmp_path / "pwned"),))

    (tmp_path / "ck").mkdir()
    with open(tmp_path / "ck" / "checkpoint.pt", "wb") as f:
        pickle.dump({"format": "x", "payload": Evil()}, f, protocol=2)
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        load_checkpoint(tmp_path / "ck")
    assert not (tmp_path / "pwned").exists()


def test_best_validation_selection_and_patience(ds_path, tmp_path):
    """The run's model, its checkpoint and its reported test accuracy are the
    best-validation epoch's; --patience stops after that many epochs without
    a better validation accuracy."""
    r = run(_args(ds_path, "--epochs", "40", "--patience", "2", "--lr", "0.05", "--checkpoint", str(tmp_path / "ck")))
    h = r["history"]
    vals = [e["val_acc"] for e in h]
    best = vals.index(max(vals)) + 1  # the first epoch reaching the maximum
    assert r["best_epoch"] == best and r["val_acc"] == max(vals)
    assert r["test_acc"] == h[best - 1]["test_acc"] and r["final_test_acc"] == h[-1]["test_acc"]
    assert len(h) < 40, "patience 2 at lr 0.05 over 40 epochs should stop early"
    assert len(h) == best + 2  # stopped exactly when two epochs had passed without improvement
    st = load_checkpoint(tmp_path / "ck")
    assert st["best"]["epoch"] == best and st["epoch"] == len(h)
    ours = r["model_obj"].state_dict()
    assert all(torch.equal(ours[k], st["model"][k]) for k in ours)  # `model` = best weights
    assert any(not torch.equal(st["last"]["model"][k], st["model"][k]) for k in ours)  # `last` = latest, for --resume
    with pytest.raises(TrainError, match="--patience -1"):
        run(_args(ds_path, "--patience", "-1"))


def test_weight_decay_and_row_normalized_features(ds_path, tmp_path):
    from flashgnn.nn.zoo import normalize_features

    x = torch.tensor([[1.0, 3.0], [0.0, 0.0], [0.2, 0.3]])
    assert torch.allclose(normalize_features(x, "row"), torch.tensor([[0.25, 0.75], [0.0, 0.0], [0.2, 0.3]]))
    assert normalize_features(x, "none") is x
    plain = run(_args(ds_path, "--epochs", "2"))
    decayed = run(_args(ds_path, "--epochs", "2", "--weight-decay", "0.5"))
    norm = lambda m: sum(float(p.detach().norm()) ** 2 for p in m.parameters())  # noqa: E731
    assert norm(decayed["model_obj"]) < norm(plain["model_obj"])
    rowed = run(_args(ds_path, "--epochs", "2", "--normalize-features", "row", "--checkpoint", str(tmp_path / "ck")))
    assert rowed["history"][-1]["train_loss"] != plain["history"][-1]["train_loss"]
    st = load_checkpoint(tmp_path / "ck")
    assert st["model_config"]["normalize_features"] == "row"
    from flashgnn.dfg.models import from_checkpoint

    with pytest.raises(ValueError, match="--normalize-features row"):
        from_checkpoint(tmp_path / "ck")


def test_train_with_cache_trains_the_same_model(ds_path):
    """--cache-budget changes reads, not batches: the weights are bit for bit
    those of the uncached run; the cache's hits show in the epoch telemetry."""
    a = run(_args(ds_path, "--epochs", "2", "--memory-budget", "0"))
    c = run(_args(ds_path, "--epochs", "2", "--cache-budget", "2MiB"))
    sa, sc = a["model_obj"].state_dict(), c["model_obj"].state_dict()
    assert all(torch.equal(sa[k], sc[k]) for k in sa)
    tel = c["history"][-1]["telemetry"]
    assert tel["cache_static_hits"] + tel["cache_dynamic_hits"] > 0 and 0 < tel["cache_hit_rate"] <= 1
    assert c["history"][-1]["telemetry"]["reads"] < a["history"][-1]["telemetry"]["reads"]


def test_train_resume_refuses_mismatched_model(ds_path, tmp_path):
    run(_args(ds_path, "--epochs", "1", "--checkpoint", str(tmp_path / "ck"), "--max-batches", "1"))
    with pytest.raises(TrainError, match="model_config.hidden is 128, this run asks for 64"):
        run(_args(ds_path, "--epochs", "2", "--hidden", "64", "--checkpoint", str(tmp_path / "ck"), "--resume"))
    (tmp_path / "bad").mkdir()
    (tmp_path / "bad" / "checkpoint.pt").write_bytes(b"not a checkpoint")
    with pytest.raises(ValueError, match="not a readable checkpoint"):
        load_checkpoint(tmp_path / "bad")


@pytest.mark.parametrize("model", ["gcn", "gin", "gat"])
def test_train_other_models(ds_path, model):
    s = run(_args(ds_path, "--model", model, "--epochs", "1", "--hidden", "32"))
    assert 0.0 <= s["test_acc"] <= 1.0 and s["epochs"] == 1


def test_train_cli_progress_and_summary(ds_path, tmp_path):
    p = run_cli("train", ds_path, "--epochs", "1", "--fanout", "4,2", "--batch-size", "512", timeout=300)
    assert p.returncode == 0, p.stderr
    assert "seeds/s" in p.stderr and "data-wait" in p.stderr  # tqdm bar with live figures
    p = run_cli("train", ds_path, "--epochs", "1", "--fanout", "4,2", "--batch-size", "512", "--cache-budget", "1MiB",
                timeout=300)
    assert p.returncode == 0, p.stderr
    # The hot set by default is auto: touches on a homogeneous dataset.
    assert "cache: 1 MiB (s3fifo), static hot set by touches" in p.stdout and "| cache " in p.stderr
    last = p.stdout.strip().splitlines()[-1]
    assert last.startswith("trained sage on") and "test acc" in last and "data wait" in last


@pytest.mark.gpu
@pytest.mark.parametrize("device_cache", ["0", "64KiB"])
def test_cuda_device(ds_path, device_cache):
    # With --device-cache, x arrives on the device already: the feeder pins and copies only host tensors
    # (it once pinned every tensor, and CUDA's x made the first batch fail).
    s = run(_args(ds_path, "--epochs", "1", "--device", "cuda", "--device-cache", device_cache))
    assert s["model_obj"].convs[0].lin_l.weight.is_cuda
    assert s["epochs"] == 1 and s["history"][0]["train_acc"] > 0


def test_cuda_requested_without_a_device(ds_path):
    if torch.cuda.is_available():
        pytest.skip("a CUDA device exists here")
    p = run_cli("train", ds_path, "--epochs", "1", "--device", "cuda", timeout=120)
    assert p.returncode == 2 and "flashgnn train: error: --device cuda requested but no CUDA device is available" in p.stderr


def test_ddp_two_processes_with_torchrun(ds_path, tmp_path):
    metrics = tmp_path / "ddp.json"
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", "2", "-m",
           "flashgnn.train", str(ds_path), "--epochs", "2", "--fanout", "5,3", "--batch-size", "256",
           "--no-progress", "--threads", "1", "--metrics-json", str(metrics), "--checkpoint", str(tmp_path / "ck")]
    p = subprocess.run(cmd, capture_output=True, text=True, env=cli_env(), timeout=600)
    assert p.returncode == 0, p.stderr[-3000:]
    assert p.stdout.count("trained sage on") == 1  # rank 0 logs
    assert "(uring, 2 processes)" in p.stdout
    m = json.loads(metrics.read_text())
    n = len(flashgnn.open(ds_path).split("train"))
    assert m["summary"]["world_size"] == 2
    assert m["epochs"][0]["seeds"] == n - n % 2  # both ranks' shards, counted once
    assert m["summary"]["test_acc"] > 0.5
    digests = m["summary"]["rank_weight_digests"]
    assert len(digests) == 2 and digests[0] == digests[1] and m["summary"]["ranks_agree"]
    assert load_checkpoint(tmp_path / "ck")["epoch"] == 2


# ---------------------------------------------------------------------------------------------
# flashgnn embed


@pytest.mark.parametrize("model", ["sage", "gcn", "gin", "gat", "mlp"])
def test_embed_matches_full_graph_forward(ds_path, tmp_path, model):
    ck = tmp_path / "ck"
    run(_args(ds_path, "--model", model, "--epochs", "1", "--hidden", "32", "--checkpoint", str(ck),
              "--max-batches", "2"))
    ds = flashgnn.open(ds_path)
    from flashgnn.embed import embed
    from flashgnn.nn.checkpoint import model_from_checkpoint

    meta = embed(ds_path, ck, tmp_path / "out", batch_size=1000, progress=False)
    emb = np.load(tmp_path / "out" / "embeddings.npy")
    pred = np.load(tmp_path / "out" / "predictions.npy")
    assert emb.shape == (ds.num_nodes, 4) and meta["num_nodes"] == ds.num_nodes
    net = model_from_checkpoint(load_checkpoint(ck)).eval()
    x = torch.from_numpy(ds.features(np.arange(ds.num_nodes)).astype(np.float32))
    with torch.no_grad():
        want = net(x) if model == "mlp" else net(x, full_edge_index(ds))
    np.testing.assert_allclose(emb, want.numpy(), rtol=1e-4, atol=1e-4)
    np.testing.assert_array_equal(pred, emb.argmax(1))
    assert not [p for p in tmp_path.iterdir() if p.name.startswith(".out.tmp")]


def test_embed_hidden_cli_and_refusals(ds_path, tmp_path):
    ck = tmp_path / "ck"
    run(_args(ds_path, "--epochs", "1", "--hidden", "24", "--checkpoint", str(ck), "--max-batches", "1"))
    p = run_cli("embed", ds_path, tmp_path / "h", "--checkpoint", ck, "--output", "hidden", "--batch-size", "3000")
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip().splitlines()[-1].startswith("embedded 8,192 nodes x 24")
    assert np.load(tmp_path / "h" / "embeddings.npy").shape == (8192, 24)
    assert not (tmp_path / "h" / "predictions.npy").exists()
    p = run_cli("embed", ds_path, tmp_path / "h", "--checkpoint", ck)
    assert p.returncode == 2 and "already exists; pass --force" in p.stderr
    p = run_cli("embed", ds_path, tmp_path / "x", "--checkpoint", tmp_path / "none")
    assert p.returncode != 0 and "no checkpoint" in p.stderr


def test_training_on_a_mutated_graph(ds_path, tmp_path):
    """A dataset with acknowledged mutations in its log trains: the loaders
    replay the log read-only and sample base + delta (new vertices carry
    label -1, which the loss ignores)."""
    import shutil

    d = tmp_path / "mut"
    shutil.copytree(ds_path, d)
    ds = flashgnn.open(d)
    train = ds.split("train")
    with flashgnn.MutableGraph(d) as g:
        new = [g.add_vertex(np.full(g.feature_dim, 9.0, np.float32)) for _ in range(3)]
        for i, v in enumerate(new):
            g.add_edge(int(train[i]), v)
        old = g.get_neighbors(int(train[5]))
        g.delete_edge(int(train[5]), int(old[0]))
    loader = flashgnn.NeighborLoader(d, [-1], batch_size=8, input_nodes=train[:8], shuffle=False)
    data = next(iter(loader))
    n_id = data.n_id.tolist()
    for v in new:  # each new vertex is a sampled neighbor of its seed, with its features and label -1
        j = n_id.index(v)
        assert torch.all(data.x[j] == 9.0) and int(data.y[j]) == -1
    e = set(zip(data.edge_index[0].tolist(), data.edge_index[1].tolist()))
    assert (n_id.index(int(old[0])) if int(old[0]) in n_id else -1, 5) not in e  # the deleted edge is gone
    s = run(_args(d, "--epochs", "1"))
    assert s["epochs"] == 1 and np.isfinite(s["train_loss"])
    # With lookahead (the Belady window's node-sized arrays grow past the base's node count) and without a cache.
    la = run(_args(d, "--epochs", "1", "--lookahead", "2", "--memory-budget", "64MiB"))
    plain = run(_args(d, "--epochs", "1", "--memory-budget", "0"))
    assert la["train_loss"] == plain["train_loss"]  # lookahead fills rows, never changes batches


# ---------------------------------------------------------------------------------------------
# GCN against PyG full-batch training


def _planetoid_like(tmp, classes=5, per_class=20, val=500, test=1000):
    """A generated graph with a Planetoid-style split: `per_class` training
    nodes of every class, `val` validation and `test` test nodes; built
    symmetrized, deduplicated and without self-loops (where flashgnn's GCN
    and PyG's GCNConv agree exactly, see flashgnn.nn)."""
    raw = tmp / "raw"
    flashgnn.generate(raw, progress=False, scale=11, edge_factor=6, dim=24, classes=classes, seed=4,
                      split=(0.1, 0.05, 0.05), homophily=0.7, feature_signal=0.4)
    y = np.load(raw / "node_label.npy")
    rng = np.random.default_rng(0)
    train = np.concatenate([rng.choice(np.flatnonzero(y == c), per_class, replace=False) for c in range(classes)])
    rest = rng.permutation(np.setdiff1d(np.arange(len(y)), train))
    for name, ids in (("train", np.sort(train)), ("val", np.sort(rest[:val])), ("test", np.sort(rest[val:val + test]))):
        np.save(raw / f"{name}_idx.npy", ids.astype(np.int64))
    flashgnn.build(raw, tmp / "ds", progress=False, symmetrize=True, dedup=True, self_loops="drop")
    return tmp / "ds"


def test_train_gcn_matches_pyg_full_batch_gcn(tmp_path):
    """`flashgnn train --model gcn --fanout -1,-1` (one batch holding every
    training node) lands within 1 point of PyG's full-batch GCN trained in
    this test with the same settings (seed, dropout 0, epochs, lr, hidden).
    The old trainer (PyG GCNConv on the trimmed batch) was 3.4 points under
    on a real graph."""
    import torch.nn.functional as F
    from torch_geometric.nn import GCN as StockGCN

    ds_path = _planetoid_like(tmp_path)
    ds = flashgnn.open(ds_path)
    epochs, lr, hidden, seed = 60, 0.01, 16, 0
    metrics = tmp_path / "m.json"
    p = run_cli("train", ds_path, "--model", "gcn", "--fanout", "-1,-1", "--batch-size", "4096", "--epochs", epochs,
                "--lr", lr, "--hidden", hidden, "--dropout", "0", "--seed", seed, "--no-progress", "--threads", "1",
                "--metrics-json", metrics, timeout=300)
    assert p.returncode == 0, p.stderr[-3000:]
    ours = json.loads(metrics.read_text())["summary"]["test_acc"]

    x = torch.from_numpy(ds.features(np.arange(ds.num_nodes)).astype(np.float32))
    y = torch.from_numpy(ds.labels(np.arange(ds.num_nodes)).astype(np.int64))
    ei = full_edge_index(ds)
    train, val, test = (torch.from_numpy(ds.split(s)) for s in ("train", "val", "test"))
    torch.manual_seed(seed)
    model = StockGCN(ds.feature_dim, hidden, 2, ds.num_classes, dropout=0.0)
    opt = torch.optim.Adam(model.parameters(), lr=lr)
    best_val = pyg = -1.0  # the practitioner's protocol, as `train` does it: test accuracy at the best validation epoch
    for _ in range(epochs):
        model.train()
        opt.zero_grad()
        F.cross_entropy(model(x, ei)[train], y[train]).backward()
        opt.step()
        model.eval()
        with torch.no_grad():
            pred = model(x, ei).argmax(-1)
        v = float((pred[val] == y[val]).float().mean())
        if v > best_val:
            best_val, pyg = v, float((pred[test] == y[test]).float().mean())
    print(f"GCN test accuracy at the best validation epoch: flashgnn train {ours:.4f}, PyG full-batch GCNConv {pyg:.4f}")
    assert pyg > 1.5 / ds.num_classes  # the task is learnable: well above chance
    assert abs(ours - pyg) <= 0.01, (ours, pyg)


def test_striped_dataset_trains_identical_weights(ds_path, tmp_path):
    """build -> stripe over two directories -> train: the same batches, so the
    same loss curve and bit-identical weights as the unstriped dataset."""
    import shutil

    root = tmp_path / "striped"
    shutil.copytree(ds_path, root)
    r = subprocess.run([sys.executable, "-m", "flashgnn.cli", "stripe", str(root), str(tmp_path / "dev0"),
                        str(tmp_path / "dev1"), "--chunk", "4KiB"], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    assert not (root / "graph.fg").exists() and any((tmp_path / "dev1").iterdir())
    a = run(_args(ds_path, "--epochs", "2"))
    b = run(_args(root, "--epochs", "2"))
    assert [h["train_loss"] for h in a["history"]] == [h["train_loss"] for h in b["history"]]
    sa, sb = a["model_obj"].state_dict(), b["model_obj"].state_dict()
    assert all(torch.equal(sa[k], sb[k]) for k in sa)


def _with_splits(ds_path, tmp_path, keep: tuple[str, ...]):
    """The module's dataset rebuilt from its raw input with only the ``keep`` splits."""
    import shutil

    raw = tmp_path / "raw"
    shutil.copytree(ds_path.parent / "raw", raw)
    for s in ("train", "val", "test"):
        if s not in keep:
            (raw / f"{s}_idx.npy").unlink()
    flashgnn.build(raw, tmp_path / "ds", progress=False, symmetrize=True, dedup=True)
    assert sorted(flashgnn.open(tmp_path / "ds").split_names) == sorted(keep)
    return tmp_path / "ds"


def test_train_split_only_trains_and_selects_by_train_accuracy(ds_path, tmp_path, capsys):
    """Without val and test a run trains (as a PyG loop would), evaluates nothing, says so in one line, selects
    the best epoch (and counts --patience) by train accuracy, and reports None for the absent splits."""
    ds = _with_splits(ds_path, tmp_path, ("train",))
    s = run(_args(ds, "--epochs", "2", "--patience", "1", "--metrics-json", str(tmp_path / "m.json"),
                  "--checkpoint", str(tmp_path / "ck")))
    out = capsys.readouterr().out
    assert "no 'val' or 'test' split: training on 'train' without evaluation; best-epoch selection and --patience " \
           "use train accuracy" in out
    assert s["eval_splits"] == [] and s["selected_by"] == "train_acc"
    assert s["val_acc"] is None and s["test_acc"] is None
    assert s["final_val_acc"] is None and s["final_test_acc"] is None
    h = s["history"]
    assert all(e["val_acc"] is None and e["test_acc"] is None for e in h)
    train_accs = [e["train_acc"] for e in h]
    assert s["best_epoch"] == train_accs.index(max(train_accs)) + 1
    last = out.strip().splitlines()[-1]
    assert last.startswith("trained sage on") and "best train acc" in last and "test acc" not in last
    m = json.loads((tmp_path / "m.json").read_text())
    assert m["summary"]["test_acc"] is None and m["epochs"][0]["val_acc"] is None
    assert load_checkpoint(tmp_path / "ck")["best"]["epoch"] == s["best_epoch"]
    # The best epoch's weights are the run's model (as with a val split).
    ours = s["model_obj"].state_dict()
    assert all(torch.equal(ours[k], load_checkpoint(tmp_path / "ck")["model"][k]) for k in ours)
    with pytest.raises(TrainError, match="no 'val' split"):
        from flashgnn.train import Trainer, TrainConfig

        t = Trainer(TrainConfig(str(ds), epochs=1, max_batches=1, fanout="5,3", batch_size=512, no_progress=True,
                                quiet=True))
        t.evaluate("val")


def test_train_and_test_splits_evaluate_on_test_and_select_by_train_accuracy(ds_path, tmp_path, capsys):
    """train + test: test accuracy is measured every epoch and reported at the best epoch, which train accuracy
    (never test accuracy) selects; the weights are those of the same run on the full dataset (splits do not
    change training)."""
    ds = _with_splits(ds_path, tmp_path, ("train", "test"))
    s = run(_args(ds, "--epochs", "2"))
    out = capsys.readouterr().out
    assert "no 'val' split: evaluating on 'test'; best-epoch selection and --patience use train accuracy" in out
    assert s["eval_splits"] == ["test"] and s["selected_by"] == "train_acc" and s["val_acc"] is None
    h = s["history"]
    assert all(e["val_acc"] is None and 0.0 <= e["test_acc"] <= 1.0 for e in h)
    train_accs = [e["train_acc"] for e in h]
    best = train_accs.index(max(train_accs)) + 1
    assert s["best_epoch"] == best and s["test_acc"] == h[best - 1]["test_acc"]
    assert "val acc" not in out and f"test acc {h[0]['test_acc']:.4f}" in out
    full = run(_args(ds_path, "--epochs", "2"))
    assert [e["train_loss"] for e in full["history"]] == [e["train_loss"] for e in h]
    # A dataset without `train` is still refused, naming the split.
    with pytest.raises(TrainError, match="no 'train' split"):
        run(_args(_with_splits(ds_path, tmp_path / "t", ("val", "test")), "--epochs", "1"))
