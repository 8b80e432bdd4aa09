"""PyG's NeighborLoader arguments on flashgnn: every
argument is honoured with PyG's meaning or refused by name, on
flashgnn.NeighborLoader and on the remote backend (flashgnn.pyg).

How: PyG's own loader (torch_geometric.loader.NeighborLoader) runs on the
same small graph held in memory. Stock PyG cannot sample without pyg-lib or
torch-sparse (neither exists here), so it is given a reference sampler that
does what pyg-lib does with num_neighbors = -1 (every neighbour: the sample
is deterministic, so batches can be compared exactly); everything else —
input_nodes, input_id, batch_size, shuffle=False order, drop_last, transform,
the Data fields — is PyG's code. Refusals are checked by the argument's name
in the error. Old names must warn (DeprecationWarning naming the new name)
and still work; old and new together are an error.
"""

from __future__ import annotations

import inspect

import numpy as np
import pytest

torch = pytest.importorskip("torch")
pytest.importorskip("torch_geometric")

from torch_geometric.data import Data  # noqa: E402
from torch_geometric.loader import NeighborLoader as PygNeighborLoader  # noqa: E402
from torch_geometric.loader import NodeLoader  # noqa: E402
from torch_geometric.sampler.base import NumNeighbors, SubgraphType  # noqa: E402

import flashgnn  # noqa: E402
import flashgnn.pyg.backend  # noqa: E402

from conftest import generated_dataset  # noqa: E402
from pyg_reference import ReferenceSampler, stored_data  # noqa: E402


@pytest.fixture(scope="module")
def ds_path(tmp_path_factory):
    return generated_dataset(tmp_path_factory.mktemp("pygargs"), scale=8, edge_factor=4, dim=8, classes=3, seed=5,
                             split=(0.5, 0.2, 0.3))


@pytest.fixture(scope="module")
def graph(ds_path):
    """The dataset as an in-memory PyG Data: edge_index row = neighbour, col = node (as stored)."""
    return stored_data(ds_path)


def FullNeighbourhood(data: Data, hops: int) -> ReferenceSampler:
    """pyg-lib's node sampling with every neighbour at every hop (deterministic)."""
    return ReferenceSampler(data, [-1] * hops)


def pyg_batches(graph, hops, **kw):
    return list(PygNeighborLoader(graph, num_neighbors=[-1] * hops, neighbor_sampler=FullNeighbourhood(graph, hops),
                                  **kw))


def assert_same_batches(ours, theirs):
    assert len(ours) == len(theirs) > 0
    for a, b in zip(ours, theirs):
        assert a.batch_size == b.batch_size
        assert torch.equal(a.input_id, b.input_id)
        assert a.num_sampled_nodes == list(b.num_sampled_nodes)
        assert a.num_sampled_edges == list(b.num_sampled_edges)
        assert torch.equal(a.n_id, b.n_id)
        assert torch.equal(a.edge_index, b.edge_index)
        assert torch.equal(a.x, b.x) and torch.equal(a.y, b.y)
        assert "e_id" not in a  # the store has no global edge ids: none are made up


# ---------------------------------------------------------------------------------------------
# Honoured, with PyG's meaning: same batches as PyG's own loader


@pytest.mark.parametrize("form", ["index", "mask", "none"])
def test_input_nodes_batch_size_and_unshuffled_order_match_pyg(ds_path, graph, form):
    n = graph.num_nodes
    idx = torch.tensor([17, 3, 250, 9, 64, 128, 1, 77, 200, 5, 33])
    mask = torch.zeros(n, dtype=torch.bool)
    mask[idx] = True
    input_nodes = {"index": idx, "mask": mask, "none": None}[form]
    bs = 64 if form == "none" else 4
    ours = list(flashgnn.NeighborLoader(ds_path, [-1, -1], input_nodes=input_nodes, batch_size=bs))
    assert_same_batches(ours, pyg_batches(graph, 2, input_nodes=input_nodes, batch_size=bs))


def test_defaults_are_pygs(ds_path, graph):
    """batch_size=1 and shuffle=False (seeds in input order) unless given, as in PyG."""
    idx = torch.tensor([40, 2, 99])
    ours = list(flashgnn.NeighborLoader(ds_path, [-1], input_nodes=idx))
    assert [d.batch_size for d in ours] == [1, 1, 1]
    assert [int(d.n_id[0]) for d in ours] == idx.tolist()
    assert_same_batches(ours, pyg_batches(graph, 1, input_nodes=idx))
    ours_sig = inspect.signature(flashgnn.NeighborLoader.__init__).parameters
    for name, p in inspect.signature(PygNeighborLoader.__init__).parameters.items():
        if p.default is not inspect.Parameter.empty and name in ours_sig:
            assert ours_sig[name].default == p.default, name


@pytest.mark.parametrize("drop_last", [False, True])
def test_drop_last_matches_pyg(ds_path, graph, drop_last):
    idx = torch.arange(10, 31)
    ours = list(flashgnn.NeighborLoader(ds_path, [-1], input_nodes=idx, batch_size=8, drop_last=drop_last))
    assert [d.batch_size for d in ours] == ([8, 8] if drop_last else [8, 8, 5])
    assert_same_batches(ours, pyg_batches(graph, 1, input_nodes=idx, batch_size=8, drop_last=drop_last))


def test_shuffle_true_permutes_reproducibly(ds_path):
    idx = np.arange(0, 200, 2)
    ld = flashgnn.NeighborLoader(ds_path, [2], input_nodes=idx, batch_size=16, shuffle=True, seed=4)
    e0 = torch.cat([d.n_id[: d.batch_size] for d in ld]).numpy()
    e1 = torch.cat([d.n_id[: d.batch_size] for d in ld]).numpy()
    assert sorted(e0) == sorted(e1) == idx.tolist()  # every seed once per epoch
    assert not np.array_equal(e0, idx) and not np.array_equal(e0, e1)  # shuffled, and anew each epoch
    ld.set_epoch(0)
    assert np.array_equal(torch.cat([d.n_id[: d.batch_size] for d in ld]).numpy(), e0)


def test_num_neighbors_is_per_hop_without_replacement(ds_path):
    ds = flashgnn.open(ds_path)
    seeds = np.arange(40)
    deg = np.diff(ds.neighbors_csr(np.arange(ds.num_nodes))[0])
    for nn in ([3], [3, 2], NumNeighbors([4, 1])):
        values = list(getattr(nn, "values", nn))
        d = next(iter(flashgnn.NeighborLoader(ds_path, nn, input_nodes=seeds, batch_size=40)))
        assert len(d.num_sampled_nodes) == len(values) + 1 and len(d.num_sampled_edges) == len(values)
        row, col = d.edge_index
        bounds = np.cumsum([0] + d.num_sampled_nodes)
        e0 = 0
        for h, k in enumerate(values):
            r, c = row[e0 : e0 + d.num_sampled_edges[h]], col[e0 : e0 + d.num_sampled_edges[h]]
            for t in range(bounds[h], bounds[h + 1]):  # each target: min(k, degree) distinct neighbours
                nb = r[c == t].tolist()
                assert len(nb) == len(set(nb)) == min(k, deg[int(d.n_id[t])])
            e0 += d.num_sampled_edges[h]


@pytest.mark.parametrize("kw", [dict(replace=False), dict(disjoint=False), dict(subgraph_type="directional"),
                                dict(subgraph_type=SubgraphType.directional), dict(directed=True),
                                dict(is_sorted=True), dict(filter_per_worker=True), dict(filter_per_worker=False),
                                dict(num_workers=2), dict(num_workers=2, persistent_workers=True),
                                dict(temporal_strategy="uniform")])
def test_supported_values_give_the_same_batches(ds_path, kw):
    """What the engine does anyway (sampling without replacement, one shared
    subgraph, sampled edges only) and what only moves work around (producer
    threads, where features are gathered) leaves the batches unchanged."""
    base = list(flashgnn.NeighborLoader(ds_path, [4, 2], split="train", batch_size=32, shuffle=True, seed=2))
    got = list(flashgnn.NeighborLoader(ds_path, [4, 2], split="train", batch_size=32, shuffle=True, seed=2, **kw))
    assert len(got) == len(base)
    for a, b in zip(got, base):
        assert torch.equal(a.n_id, b.n_id) and torch.equal(a.edge_index, b.edge_index)


def test_transform_is_applied_to_each_batch_as_in_pyg(ds_path, graph):
    def tf(d):
        d.mark = d.n_id[: d.batch_size] * 2
        return d

    idx = torch.tensor([5, 6, 7])
    ours = list(flashgnn.NeighborLoader(ds_path, [-1], input_nodes=idx, batch_size=2, transform=tf))
    theirs = pyg_batches(graph, 1, input_nodes=idx, batch_size=2, transform=tf)
    assert [d.mark.tolist() for d in ours] == [d.mark.tolist() for d in theirs] == [[10, 12], [14]]


def test_loader_is_a_pyg_neighbor_loader_and_runs_pyg_inference(ds_path, graph):
    """PyG's BasicGNN.inference(loader) runs on flashgnn.NeighborLoader (over loader.data.x) and
    equals the model over the whole in-memory graph; the remote backend says what to use instead."""
    from torch_geometric.nn import GraphSAGE

    ld = flashgnn.NeighborLoader(ds_path, [-1], batch_size=64)
    assert isinstance(ld, PygNeighborLoader)
    torch.manual_seed(0)
    model = GraphSAGE(8, 8, 1, 3).eval()
    with torch.no_grad():
        want = model(graph.x, graph.edge_index)
    assert torch.allclose(model.inference(ld), want, atol=1e-5)
    remote = flashgnn.pyg.NeighborLoader(ds_path, [-1], batch_size=64)
    with pytest.raises(AttributeError, match="not an in-memory graph, so it has no .num_nodes.*flashgnn.inference"):
        model.inference(remote)
    assert len(list(remote)) == len(remote)  # PyG's own use of loader.data (the two stores) still works


def test_one_loader_class_and_one_sampler_name(ds_path):
    """flashgnn has one NeighborLoader class; flashgnn.pyg.NeighborLoader is an adapter returning PyG's own
    loader (stock class, flashgnn sampler), and the remote backend's sampler is NeighborSampler — the old
    name flashgnn.pyg.Sampler warns and is the same class."""
    import flashgnn.pyg.backend as backend

    remote = flashgnn.pyg.NeighborLoader(ds_path, [2], batch_size=16)
    assert type(remote) is PygNeighborLoader and isinstance(remote.node_sampler, flashgnn.pyg.NeighborSampler)
    assert not inspect.isclass(flashgnn.pyg.NeighborLoader)
    assert next(iter(remote)).batch_size == 16
    with pytest.warns(DeprecationWarning, match="NeighborSampler"):
        assert flashgnn.pyg.Sampler is flashgnn.pyg.NeighborSampler
    from flashgnn import _core
    from flashgnn.sample.shared import _SHARED

    _SHARED.clear()  # the adapter then makes the shared cache itself
    before = _core.samplers_opened()
    one = flashgnn.pyg.NeighborLoader(ds_path, [2], batch_size=16, quiet=True)
    assert _core.samplers_opened() - before == 1  # the cache's sizing, its hot set, sampling and the store's reads
    fs = one.data[0]
    x, y = fs._read(np.array([3, 1, 3]))
    assert torch.equal(x[0], x[2]) and torch.equal(y[0], y[2]) and _core.samplers_opened() - before == 1
    import flashgnn.loader.neighbor as native

    loaders = {v for m in (native, backend) for v in vars(m).values()
               if inspect.isclass(v) and v.__name__ == "NeighborLoader" and v.__module__.startswith("flashgnn")}
    assert loaders == {flashgnn.NeighborLoader} and flashgnn.NeighborLoader.__module__ == native.__name__


# ---------------------------------------------------------------------------------------------
# Refused, by name


REFUSED = [
    (dict(replace=True), "replace=True"),
    (dict(disjoint=True), "disjoint=True"),
    (dict(subgraph_type="bidirectional"), "subgraph_type='bidirectional'"),
    (dict(subgraph_type=SubgraphType.induced), "subgraph_type='induced'"),
    (dict(directed=False), "directed=False"),
    (dict(time_attr="t"), "time_attr='t'"),
    (dict(temporal_strategy="last"), "temporal_strategy='last'"),
    (dict(weight_attr="w"), "weight_attr='w'"),
]


@pytest.mark.parametrize("kw,name", REFUSED + [
    (dict(input_time=torch.zeros(3)), "input_time"),
    (dict(transform_sampler_output=lambda o: o), "transform_sampler_output"),
    (dict(neighbor_sampler=object()), "neighbor_sampler=object"),
    (dict(input_nodes=("paper", None)), r"input_nodes=\('paper'"),
    (dict(input_nodes="paper"), "input_nodes='paper'"),
    (dict(persistent_workers=True), "persistent_workers=True needs num_workers > 0"),
    (dict(generator=torch.Generator()), "generator="),
    (dict(collate_fn=list), "collate_fn="),
    (dict(num_neighbors={("a", "to", "b"): [2]}), "num_neighbors as a dict"),
    (dict(num_neighbors=[3, -2]), r"num_neighbors\[1\] = -2"),
])
def test_native_loader_refuses_by_name(ds_path, kw, name):
    kw = {"num_neighbors": [3], **kw}
    with pytest.raises((ValueError, TypeError), match=name):
        flashgnn.NeighborLoader(ds_path, **kw)


def test_unknown_keyword_is_refused_naming_the_accepted_ones(ds_path):
    with pytest.raises(TypeError, match=r"unexpected keyword argument\(s\) numneighbours; accepted: .*num_neighbors"):
        flashgnn.NeighborLoader(ds_path, [3], numneighbours=[3])
    with pytest.raises(TypeError, match=r"bogus; accepted: dataset, num_neighbors"):
        flashgnn.pyg.remote_backend(ds_path, bogus=1)
    with pytest.raises(TypeError, match=r"bogus; accepted: .*num_neighbors"):
        flashgnn.pyg.NeighborSampler(ds_path, [3], bogus=1)
    with pytest.raises(TypeError, match=r"bogus; accepted: .*shuffle"):
        flashgnn.pyg.NeighborLoader(ds_path, [3], bogus=1)


@pytest.mark.parametrize("kw,name", REFUSED)
def test_remote_backend_refuses_by_name(ds_path, kw, name):
    with pytest.raises(ValueError, match=name):
        flashgnn.pyg.remote_backend(ds_path, num_neighbors=[3], **kw)
    with pytest.raises(ValueError, match=name):
        flashgnn.pyg.NeighborLoader(ds_path, num_neighbors=[3], **kw)


# ---------------------------------------------------------------------------------------------
# Remote backend: num_neighbors reaches the sampler


def test_remote_backend_samples_the_hops_it_is_asked_for(ds_path, graph):
    """Under PyG's NeighborLoader a sampler built for 2 hops kept
    2 hops when the loader asked for 1. Now: the sampler samples its own
    num_neighbors, flashgnn.pyg.NeighborLoader builds it from the loader's,
    and PyG's loader with a given sampler is refused (it drops them)."""
    idx = torch.arange(0, 40, 3)
    fs, gs, sampler = flashgnn.pyg.remote_backend(ds_path, num_neighbors=[-1])
    d = next(iter(NodeLoader((fs, gs), node_sampler=sampler, input_nodes=idx, batch_size=8)))
    assert len(d.num_sampled_nodes) == 2 and len(d.num_sampled_edges) == 1
    ours = list(flashgnn.pyg.NeighborLoader(ds_path, num_neighbors=[-1], input_nodes=idx, batch_size=8))
    assert_same_batches(ours, pyg_batches(graph, 1, input_nodes=idx, batch_size=8))
    two_hop = flashgnn.pyg.remote_backend(ds_path, num_neighbors=[5, 5])[2]
    with pytest.raises(ValueError, match=r"num_neighbors=\[-1\] but neighbor_sampler samples num_neighbors=\[5, 5\]"):
        flashgnn.pyg.NeighborLoader((fs, gs), num_neighbors=[-1], neighbor_sampler=two_hop, input_nodes=idx)
    with pytest.raises(ValueError, match="does not pass num_neighbors, disjoint"):
        next(iter(PygNeighborLoader((fs, gs), num_neighbors=[-1], neighbor_sampler=two_hop, input_nodes=idx)))


def test_remote_neighbor_loader_defaults_and_workers(ds_path):
    ld = flashgnn.pyg.NeighborLoader(ds_path, num_neighbors=[2], input_nodes=torch.tensor([9, 4, 7]))
    assert [int(d.n_id[0]) for d in ld] == [9, 4, 7]  # batch_size=1, shuffle=False: PyG's defaults
    assert len(flashgnn.pyg.NeighborLoader(ds_path, num_neighbors=[2])) == flashgnn.open(ds_path).num_nodes
    a = list(flashgnn.pyg.NeighborLoader(ds_path, [3, 2], input_nodes=torch.arange(60), batch_size=20))
    b = list(flashgnn.pyg.NeighborLoader(ds_path, [3, 2], input_nodes=torch.arange(60), batch_size=20,
                                         num_workers=2, persistent_workers=True))
    assert all(torch.equal(x.n_id, y.n_id) for x, y in zip(a, b)) and len(a) == 3


def test_remote_neighbor_loader_runs_pygs_pipeline(ds_path):
    """transform_sampler_output (refused by the native loader, which builds no
    SamplerOutput) and filter_per_worker keep PyG's meaning here."""
    seen = []

    def tso(out):
        seen.append(out.num_sampled_nodes[0])
        return out

    idx = torch.arange(30)
    ld = flashgnn.pyg.NeighborLoader(ds_path, [2], input_nodes=idx, batch_size=10, transform_sampler_output=tso)
    assert [d.batch_size for d in ld] == seen == [10, 10, 10]
    fs, gs, _ = flashgnn.pyg.remote_backend(ds_path, num_neighbors=[2])
    a = list(flashgnn.pyg.NeighborLoader((fs, gs), [2], input_nodes=idx, batch_size=10, filter_per_worker=False))
    b = list(flashgnn.pyg.NeighborLoader((fs, gs), [2], input_nodes=idx, batch_size=10, filter_per_worker=True))
    assert all(torch.equal(x.n_id, y.n_id) and torch.equal(x.x, y.x) for x, y in zip(a, b))


# ---------------------------------------------------------------------------------------------
# Deprecated names: one more release, with a warning naming the new one


def test_old_names_warn_and_still_work(ds_path):
    want = [d.n_id for d in flashgnn.NeighborLoader(ds_path, num_neighbors=[3], split="val", batch_size=50,
                                                    num_workers=2)]
    with pytest.warns(DeprecationWarning, match="fanouts= is deprecated .* use num_neighbors="):
        a = flashgnn.NeighborLoader(ds_path, fanouts=[3], split="val", batch_size=50)
    with pytest.warns(DeprecationWarning, match="dataset= is deprecated .* use data="):
        b = flashgnn.NeighborLoader(dataset=ds_path, num_neighbors=[3], split="val", batch_size=50)
    with pytest.warns(DeprecationWarning, match="workers= is deprecated .* use num_workers="):
        c = flashgnn.NeighborLoader(ds_path, [3], split="val", batch_size=50, workers=2)
    with pytest.warns(DeprecationWarning, match="batch_size as the third positional argument"):
        d = flashgnn.NeighborLoader(ds_path, [3], 50, split="val")
    for ld in (a, b, c, d):
        assert all(torch.equal(x.n_id, y) for x, y in zip(ld, want))
    with pytest.warns(DeprecationWarning, match="fanouts= is deprecated"):
        fs, gs, s = flashgnn.pyg.remote_backend(ds_path, fanouts=[3])
    assert s.num_neighbors == [3]
    with pytest.warns(DeprecationWarning, match="fanouts= is deprecated"):
        assert flashgnn.pyg.NeighborSampler(ds_path, fanouts=[2]).num_neighbors == [2]
    with pytest.warns(DeprecationWarning, match="fanouts= is deprecated"):
        flashgnn.pyg.NeighborLoader(ds_path, fanouts=[2])


# Every (deprecated, PyG) name pair, by the callable that accepts it: (who, old, new, call with both).
def _both(ds_path):
    nl, pyg = flashgnn.NeighborLoader, flashgnn.pyg
    return {
        ("flashgnn.NeighborLoader", "fanouts", "num_neighbors"): lambda: nl(ds_path, [3], fanouts=[2]),
        ("flashgnn.NeighborLoader", "dataset", "data"): lambda: nl(ds_path, [3], dataset=ds_path),
        ("flashgnn.NeighborLoader", "workers", "num_workers"): lambda: nl(ds_path, [3], num_workers=1, workers=2),
        ("flashgnn.pyg.NeighborSampler", "fanouts", "num_neighbors"): lambda: pyg.NeighborSampler(ds_path, [3], fanouts=[2]),
        ("flashgnn.pyg.remote_backend", "fanouts", "num_neighbors"):
            lambda: pyg.remote_backend(ds_path, num_neighbors=[3], fanouts=[2]),
        ("flashgnn.pyg.NeighborLoader", "fanouts", "num_neighbors"):
            lambda: pyg.NeighborLoader(ds_path, [3], fanouts=[2]),
        ("flashgnn.inference", "progress", "progress_bar"):
            lambda: flashgnn.inference(_Identity(), ds_path, progress=False, progress_bar=False),
    }


class _Identity(torch.nn.Module):
    """A model flashgnn.inference accepts (never run here: the arguments are refused first)."""

    def forward(self, x, edge_index):
        return x


PAIRS = [("flashgnn.NeighborLoader", "fanouts", "num_neighbors"), ("flashgnn.NeighborLoader", "dataset", "data"),
         ("flashgnn.NeighborLoader", "workers", "num_workers"), ("flashgnn.pyg.NeighborSampler", "fanouts", "num_neighbors"),
         ("flashgnn.pyg.remote_backend", "fanouts", "num_neighbors"),
         ("flashgnn.pyg.NeighborLoader", "fanouts", "num_neighbors"), ("flashgnn.inference", "progress", "progress_bar")]


@pytest.mark.parametrize("who,old,new", PAIRS)
def test_old_and_new_name_together_is_an_error_naming_both(ds_path, who, old, new):
    """Both names given: refused before any work, naming the callable, both
    names and both values (never one silently winning)."""
    with pytest.raises(TypeError) as e:
        _both(ds_path)[(who, old, new)]()
    msg = str(e.value)
    assert msg.startswith(f"{who}: give {new}= or its deprecated name {old}=, not both"), msg
    assert f" {new}=" in msg.split("(got")[1] and f" {old}=" in msg.split("(got")[1], msg


def test_every_renamed_argument_is_tested_together_with_its_new_name():
    """The pairs above are every call of loader._args.renamed in the package
    (found in the source), so an alias added later without a test fails here."""
    import ast
    from pathlib import Path

    found = set()
    for f in Path(flashgnn.__file__).parent.rglob("*.py"):
        tree = ast.parse(f.read_text())
        for node in ast.walk(tree):
            if (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "renamed"
                    and len(node.args) >= 3):
                found.add((f.name, node.args[1].value, node.args[2].value))
    module = {"flashgnn.NeighborLoader": "neighbor.py", "flashgnn.inference": "layerwise.py"}
    tested = {(module.get(who, "backend.py"), old, new) for who, old, new in PAIRS}
    assert found == tested
    assert set(_both("unused")) == set(PAIRS)


def test_positional_batch_size_and_batch_size_keyword_is_an_error_naming_both(ds_path):
    """The old signature's third positional argument was batch_size (PyG's is
    input_nodes): an integer there together with batch_size= is refused."""
    with pytest.raises(TypeError, match=r"input_nodes=7 is a single integer: as the deprecated positional "
                                        r"batch_size it conflicts with batch_size=4"):
        flashgnn.NeighborLoader(ds_path, [3], 7, batch_size=4)


# ---------------------------------------------------------------------------------------------
# What a PyG user porting an example passes by mistake: refused by name, never reinterpreted


@pytest.mark.parametrize("bs", [2.5, "4", True, 0, -3])
def test_batch_size_must_be_a_positive_integer_as_in_torch(ds_path, bs):
    """torch's DataLoader refuses these; flashgnn used to truncate 2.5 to 2 and take True as 1."""
    with pytest.raises(ValueError, match=r"batch_size must be > 0 and an integer .*got batch_size="):
        flashgnn.NeighborLoader(ds_path, [3], batch_size=bs)


@pytest.mark.parametrize("nodes", [torch.arange(6).reshape(2, 3), torch.tensor(5), np.ones((2, 256), dtype=bool)])
def test_input_nodes_must_be_one_dimensional(ds_path, nodes):
    """A 2-D index or a 0-d tensor is refused (it used to be flattened silently)."""
    with pytest.raises(ValueError, match=r"input_nodes has shape \(.*\): expected a 1-D tensor"):
        flashgnn.NeighborLoader(ds_path, [3], input_nodes=nodes, batch_size=4)


def test_an_in_memory_graph_as_data_points_at_from_pyg(ds_path, graph):
    """The first thing a port does: pass the PyG Data itself. Refused naming data, the type and the fix."""
    with pytest.raises(TypeError, match=r"data must be a flashgnn dataset directory .*torch_geometric.data.data.Data "
                                        r"held in memory: write it to disk once with flashgnn.from_pyg"):
        flashgnn.NeighborLoader(graph, num_neighbors=[3])
    with pytest.raises(TypeError, match=r"data must be a flashgnn dataset directory .*got builtins.NoneType$"):
        flashgnn.NeighborLoader(None, num_neighbors=[3])
