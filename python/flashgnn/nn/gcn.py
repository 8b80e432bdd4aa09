"""GNN layers whose output depends on node degrees, made exact on sampled batches.

GCN normalises a message from ``j`` to ``i`` by ``1 / sqrt(deg_i deg_j)``.
On a sampled batch, PyG's ``GCNConv`` takes those degrees from the batch's
edges: a last-hop node has no in-edge there (degree 1, its self-loop), and
with per-layer trimming (``num_sampled_nodes_per_hop``) the nodes of every
hop the layer drops look the same. So a batch's seed outputs are not the
whole graph's GCN, whatever the fanout, trimmed or not (up to 0.73 apart
with fanout -1,-1 on a real graph).

Not trimming does not fix it (the last hop's degrees are still wrong). The
fix is to take the degrees from where they are true: every node's slot holds
its degree in the whole graph, and the sampler hands them over
(``NeighborLoader(..., degrees=True)`` → ``data.deg``). :class:`GCN` then
weighs a sampled edge ``j → i`` by

    (d_i / s_i) / sqrt((d_i + 1) (d_j + 1))          self-loop i → i: 1 / (d_i + 1)

where ``d`` is the whole-graph degree and ``s_i`` the number of ``i``'s
neighbors the batch sampled. With every neighbor sampled (fanout -1)
``s_i = d_i`` and this is exactly the whole graph's GCN at every node whose
neighbors were all sampled, trimmed or not (tested per model); with a
smaller fanout it is the usual unbiased estimate of that sum (each sampled
neighbor stands for ``d_i / s_i`` of them).

A self-loop stored in the graph counts as a neighbor (as it does in the
stored degree); the added self-loop comes on top. PyG's ``GCNConv`` instead
merges a stored self-loop into the added one: the two agree on graphs
without stored self-loops (``flashgnn build --self-loops drop``).

Other models need nothing of the kind: GraphSAGE (mean), GIN (sum) and GAT
(softmax over the in-edges) read only a node's own in-edges, which a batch
with fanout -1 holds in full for every node a layer keeps.
"""

from __future__ import annotations

from torch_geometric.nn import GCN as _PygGCN

from flashgnn.nn.degnorm import degree_norm

__all__ = ["GCN", "degree_norm"]


class GCN(_PygGCN):
    """``torch_geometric.nn.GCN`` normalised by whole-graph degrees.

    Same parameters (and state-dict keys) as PyG's ``GCN``; its ``GCNConv``
    layers run with ``normalize=False`` and get the weights of
    :func:`degree_norm`. ``forward(x, edge_index, deg=data.deg,
    num_sampled_nodes_per_hop=..., num_sampled_edges_per_hop=...)`` on a
    batch of ``NeighborLoader(..., degrees=True)``; on a whole graph
    ``deg`` may be left out (the in-degrees of ``edge_index`` are then the
    whole graph's)."""

    whole_graph_degrees = True  # flashgnn.inference passes every node's whole-graph degree to conv()

    def __init__(self, in_channels, hidden_channels, num_layers, out_channels=None, **kwargs):
        for k in ("normalize", "add_self_loops", "improved", "cached"):
            if k in kwargs:
                raise ValueError(f"flashgnn.nn.GCN: {k}= is fixed (self-loops added, normalised by whole-graph "
                                 "degrees)")
        super().__init__(in_channels, hidden_channels, num_layers, out_channels, normalize=False, **kwargs)

    def forward(self, x, edge_index, edge_weight=None, edge_attr=None, batch=None, batch_size=None,
                num_sampled_nodes_per_hop=None, num_sampled_edges_per_hop=None, deg=None):
        if edge_weight is not None:
            raise ValueError("flashgnn.nn.GCN: edge weights are computed from the degrees; pass deg, not edge_weight")
        ei, w, per_hop = degree_norm(edge_index, x.size(0), deg, num_sampled_nodes_per_hop,
                                     num_sampled_edges_per_hop)
        return super().forward(x, ei, edge_weight=w, edge_attr=edge_attr, batch=batch, batch_size=batch_size,
                               num_sampled_nodes_per_hop=num_sampled_nodes_per_hop,
                               num_sampled_edges_per_hop=per_hop)

    def conv(self, i: int, x, edge_index, deg=None):
        """Layer ``i``'s convolution alone (layer-wise inference, ``flashgnn embed``)."""
        ei, w, _ = degree_norm(edge_index, x.size(0), deg)
        return self.convs[i](x, ei, w)

    def inference(self, loader, device=None, embedding_device="cpu", progress_bar: bool = False, cache: bool = False):
        """PyG's ``model.inference(loader)``, run by :func:`flashgnn.inference`
        over the loader's dataset: PyG's loop would call the convs without the
        whole-graph degree weights (they run with ``normalize=False``)."""
        from flashgnn.loader.neighbor import NeighborLoader

        if not isinstance(loader, NeighborLoader):
            raise ValueError("flashgnn.nn.GCN.inference(loader) needs a flashgnn.NeighborLoader (its weights come "
                             "from whole-graph degrees); on an in-memory graph call model(data.x, data.edge_index)")
        from flashgnn.nn.layerwise import inference

        return inference(self, loader.dataset, batch_size=loader.batch_size, device=device, engine=loader.engine,
                         progress_bar=progress_bar).to(embedding_device)
