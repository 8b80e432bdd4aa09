"""A reference node sampler for stock PyG's loaders in tests: pyg-lib and
torch-sparse do not exist here, so PyG's own NeighborLoader cannot sample.
This does what pyg-lib does (directional, not disjoint), so batches of
stock PyG and flashgnn can be compared; with -1 (every neighbour) the sample
is deterministic and comparable exactly."""

from __future__ import annotations

import numpy as np
import torch
from torch_geometric.data import Data
from torch_geometric.sampler import BaseSampler, SamplerOutput

import flashgnn


def stored_data(path) -> Data:
    """A homogeneous dataset as an in-memory PyG ``Data`` of every stored
    edge (``edge_index`` row = neighbour, col = node, as stored), float32
    ``x`` and ``y``."""
    ds = flashgnn.open(path)
    ids = np.arange(ds.num_nodes)
    ptr, idx = ds.neighbors_csr(ids)
    edge_index = torch.from_numpy(np.stack([idx, np.repeat(ids, np.diff(ptr))]))
    return Data(x=torch.from_numpy(ds.features(ids).astype(np.float32)), y=torch.from_numpy(ds.labels(ids)),
                edge_index=edge_index, num_nodes=ds.num_nodes)


class ReferenceSampler(BaseSampler):
    """pyg-lib's node sampling: per hop, each frontier node's neighbours (all
    for -1, else ``k`` drawn uniformly without replacement, in edge order),
    a node already in the batch keeping its local id."""

    def __init__(self, data, num_neighbors, seed: int = 0):
        self.num_neighbors = list(num_neighbors)
        self.gen = torch.Generator().manual_seed(seed)
        row, col = data.edge_index
        order = torch.argsort(col, stable=True)
        self.idx = row[order].tolist()
        self.ptr = [0] + torch.bincount(col, minlength=data.num_nodes).cumsum(0).tolist()

    def sample_from_nodes(self, inputs, **kwargs):
        n_id = inputs.node.tolist()
        local = {v: i for i, v in reversed(list(enumerate(n_id)))}
        row, col, nsn, nse = [], [], [len(n_id)], []
        frontier = range(len(n_id))
        for k in self.num_neighbors:
            start, e0 = len(n_id), len(row)
            for t in frontier:
                nbrs = self.idx[self.ptr[n_id[t]]:self.ptr[n_id[t] + 1]]
                if 0 <= k < len(nbrs):
                    pick = sorted(torch.randperm(len(nbrs), generator=self.gen)[:k].tolist())
                    nbrs = [nbrs[j] for j in pick]
                for u in nbrs:
                    if u not in local:
                        local[u] = len(n_id)
                        n_id.append(u)
                    row.append(local[u])
                    col.append(t)
            nsn.append(len(n_id) - start)
            nse.append(len(row) - e0)
            frontier = range(start, len(n_id))
        return SamplerOutput(node=torch.tensor(n_id), row=torch.tensor(row, dtype=torch.long),
                             col=torch.tensor(col, dtype=torch.long), edge=None, batch=None, num_sampled_nodes=nsn,
                             num_sampled_edges=nse, metadata=(inputs.input_id, None))

    def sample_from_edges(self, inputs, neg_sampling=None):
        raise NotImplementedError


class HeteroReferenceSampler(BaseSampler):
    """pyg-lib's heterogeneous node sampling (directional, not disjoint):
    per hop, edge type by edge type (in ``data.edge_types`` order), each
    destination node first reached in the previous hop takes its
    neighbours along that edge type (all for -1, else ``k`` drawn uniformly
    without replacement, in edge order); a node already in the batch keeps
    its local id within its type. Neighbours are in ``edge_index`` order;
    each sampled edge's id is its column in ``data[et].edge_index``, as
    pyg-lib's (mapped back through ``to_csc``'s permutation) are."""

    def __init__(self, data, num_neighbors: dict, seed: int = 0):
        self.node_types, self.edge_types = list(data.node_types), list(data.edge_types)
        self.num_nodes = {t: data[t].num_nodes for t in self.node_types}
        self.num_neighbors = num_neighbors
        self.gen = torch.Generator().manual_seed(seed)
        self.nbrs = {}
        for et in self.edge_types:
            row, col = data[et].edge_index
            lists: dict = {}
            for i, (a, b) in enumerate(zip(row.tolist(), col.tolist())):
                lists.setdefault(b, []).append((a, i))
            self.nbrs[et] = lists

    def sample_from_nodes(self, inputs, **kwargs):
        return self._sample({inputs.input_type: inputs.node}, inputs.input_id)

    def _sample(self, seed_dict: dict, input_id):
        """pyg-lib's sampling from seeds of one or more node types (a link batch's seed dict): each type's
        ``n_id`` starts with its own seeds."""
        from torch_geometric.sampler import HeteroSamplerOutput

        hops = len(next(iter(self.num_neighbors.values())))
        n_id = {t: [] for t in self.node_types}
        local = {t: {} for t in self.node_types}
        nsn = {t: [0] * (hops + 1) for t in self.node_types}
        for t, seeds in seed_dict.items():
            seeds = seeds.tolist()
            n_id[t] = list(seeds)
            local[t] = {v: i for i, v in reversed(list(enumerate(seeds)))}
            nsn[t][0] = len(seeds)
        row = {et: [] for et in self.edge_types}
        col = {et: [] for et in self.edge_types}
        eid = {et: [] for et in self.edge_types}
        nse = {et: [] for et in self.edge_types}
        frontier = {t: range(len(n_id[t])) for t in self.node_types}
        for h in range(hops):
            start = {t: len(n_id[t]) for t in self.node_types}
            for et in self.edge_types:
                s, _, d = et
                k, e0 = self.num_neighbors[et][h], len(row[et])
                for f in frontier[d]:
                    nbrs = self.nbrs[et].get(n_id[d][f], [])
                    if 0 <= k < len(nbrs):
                        pick = sorted(torch.randperm(len(nbrs), generator=self.gen)[:k].tolist())
                        nbrs = [nbrs[j] for j in pick]
                    for u, i in nbrs:
                        if u not in local[s]:
                            local[s][u] = len(n_id[s])
                            n_id[s].append(u)
                        row[et].append(local[s][u])
                        col[et].append(f)
                        eid[et].append(i)
                nse[et].append(len(row[et]) - e0)
            for t in self.node_types:
                nsn[t][h + 1] = len(n_id[t]) - start[t]
                frontier[t] = range(start[t], len(n_id[t]))
        long = lambda v: torch.tensor(v, dtype=torch.long)  # noqa: E731
        return HeteroSamplerOutput(node={t: long(v) for t, v in n_id.items()},
                                   row={et: long(v) for et, v in row.items()},
                                   col={et: long(v) for et, v in col.items()},
                                   edge={et: long(v) for et, v in eid.items()}, batch=None,
                                   num_sampled_nodes=nsn, num_sampled_edges=nse,
                                   metadata=(input_id, None))

    def sample_from_edges(self, inputs, neg_sampling=None):
        """PyG's own ``edge_sample`` (negatives, seed merging per node type, the label layout) around
        :meth:`_sample`: PyG's LinkNeighborLoader on ``HeteroData``."""
        from torch_geometric.sampler.neighbor_sampler import edge_sample

        return edge_sample(inputs, lambda seed_dict, seed_time: self._sample(seed_dict, None), self.num_nodes,
                           False, None, neg_sampling)


# A small typed graph both typed-loader test modules compare against PyG: 3 node types (one without
# features), 4 edge types (one src == dst, one reverse), hubs whose lists overflow a 512-B page.
HETERO_COUNTS = {"paper": 40, "author": 25, "fos": 8}
HETERO_DIMS = {"paper": 6, "author": 3, "fos": None}
HETERO_CLASSES = {"paper": 3, "author": None, "fos": None}
HETERO_EDGE_TYPES = [("paper", "cites", "paper"), ("author", "writes", "paper"), ("paper", "rev_writes", "author"),
                     ("fos", "topic", "paper")]


def write_hetero_graph(path, seed: int):
    """Write the typed test graph (edges drawn with ``seed``) to ``path`` with the test-only writer and
    return it as the same in-memory ``HeteroData`` (node i of a type has x = its global id + column/1000)."""
    import numpy as np
    from torch_geometric.data import HeteroData

    from flashgnn import _core

    rng = np.random.default_rng(seed)
    edges = {}
    for e, (s, r, d) in enumerate(HETERO_EDGE_TYPES):
        n_s, n_d = HETERO_COUNTS[s], HETERO_COUNTS[d]
        pairs = {(int(a), int(b)) for a, b in zip(rng.integers(0, n_s, 2 * n_d), rng.integers(0, n_d, 2 * n_d))}
        pairs |= {(a, e % 2) for a in range(min(n_s, 9 + e))}  # hubs: lists overflow
        edges[(s, r, d)] = np.array(sorted(pairs, key=lambda p: (p[1], p[0])), dtype=np.int64).reshape(-1, 2)
    _core._write_typed_dataset(str(path), [(t, HETERO_COUNTS[t], HETERO_DIMS[t], HETERO_CLASSES[t])
                                           for t in HETERO_COUNTS],
                               [(s, r, d, edges[(s, r, d)][:, 0].copy(), edges[(s, r, d)][:, 1].copy())
                                for s, r, d in HETERO_EDGE_TYPES])
    data = HeteroData()
    offset = 0
    for t, n in HETERO_COUNTS.items():
        if HETERO_DIMS[t]:
            v = np.arange(offset, offset + n, dtype=np.float32)[:, None]
            data[t].x = torch.from_numpy(v + np.arange(HETERO_DIMS[t], dtype=np.float32)[None, :] / 1000)
        else:
            data[t].num_nodes = n
        if HETERO_CLASSES[t]:
            i = np.arange(n)
            data[t].y = torch.from_numpy(np.where(i % 5 == 4, -1, i % HETERO_CLASSES[t]).astype(np.int64))
        offset += n
    for et in HETERO_EDGE_TYPES:
        data[et].edge_index = torch.from_numpy(edges[et].T.copy())
    return data


class LinkReferenceSampler(ReferenceSampler):
    """:class:`ReferenceSampler` for PyG's link loaders: ``sample_from_edges``
    is PyG's own ``edge_sample`` (negatives, seed merging with
    ``torch.unique``, the label layout) around this node sampler, so
    everything but the neighbour draws is PyG's code."""

    def __init__(self, data, num_neighbors, seed: int = 0):
        super().__init__(data, num_neighbors, seed)
        self.num_nodes = data.num_nodes

    def sample_from_edges(self, inputs, neg_sampling=None):
        from torch_geometric.sampler import NodeSamplerInput
        from torch_geometric.sampler.neighbor_sampler import edge_sample

        def sample_fn(seed, seed_time):
            return self.sample_from_nodes(NodeSamplerInput(input_id=None, node=seed))

        return edge_sample(inputs, sample_fn, self.num_nodes, False, None, neg_sampling)
