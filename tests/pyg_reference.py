"""A reference node sampler for stock PyG's loaders in tests: pyg-lib and
torch-sparse do not exist here, so PyG's own NeighborLoader cannot sample.
This does what pyg-lib does (directional, not disjoint), so batches of
stock PyG and flashgnn can be compared; with -1 (every neighbour) the sample
is deterministic and comparable exactly."""

from __future__ import annotations

import torch
from torch_geometric.sampler import BaseSampler, SamplerOutput


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
