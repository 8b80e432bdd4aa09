"""GCN edge weights from whole-graph degrees (the arithmetic; why, and the
models that use it: :mod:`flashgnn.nn`). A module of its own so that the
layer-wise engine (:mod:`flashgnn.nn.layerwise`) can weigh a stock PyG
``GCNConv`` without importing the models (which call that engine)."""

from __future__ import annotations

import torch


def degree_norm(edge_index: torch.Tensor, num_nodes: int, deg: torch.Tensor | None = None,
                num_sampled_nodes_per_hop=None, num_sampled_edges_per_hop=None, add_self_loops: bool = True,
                fill: float = 1.0):
    """GCN edge weights from whole-graph degrees (see the module docs).

    ``edge_index``: local ``[row = neighbor, col = target]``; ``deg``: per
    node, its degree in the whole graph (None: the in-degree in
    ``edge_index``, i.e. ``edge_index`` is the whole graph). Returns
    ``(edge_index, edge_weight, num_sampled_edges_per_hop)``: with per-hop
    counts, the self-loops of hop ``k - 1``'s nodes are placed in edge block
    ``k`` (whose edges target them), so PyG's per-layer trimming keeps each
    self-loop exactly as long as its node; without counts they are appended.
    """
    dev = edge_index.device
    row, col = edge_index[0], edge_index[1]
    ones = torch.ones(col.numel(), device=dev)
    sampled = torch.zeros(num_nodes, device=dev).index_add_(0, col, ones)
    if deg is None:
        deg = sampled
    deg = deg.to(device=dev, dtype=torch.float32).reshape(-1)
    if deg.numel() < num_nodes:
        raise ValueError(f"deg has {deg.numel()} entries, the batch has {num_nodes} nodes")
    deg = deg[:num_nodes]
    dhat = deg + fill if add_self_loops else deg
    dis = dhat.pow(-0.5)
    dis = dis.masked_fill(torch.isinf(dis), 0.0)
    w = dis[row] * dis[col] * (deg[col] / sampled[col].clamp(min=1))
    if not add_self_loops:
        return edge_index, w, num_sampled_edges_per_hop
    loop_w = torch.where(dhat > 0, fill / dhat.clamp(min=1e-30), torch.zeros_like(dhat))
    if num_sampled_nodes_per_hop is None:
        loops = torch.arange(num_nodes, device=dev)
        return (torch.cat([edge_index, torch.stack([loops, loops])], dim=1), torch.cat([w, loop_w]),
                None)
    nodes = [int(v) for v in num_sampled_nodes_per_hop]
    edges = [int(v) for v in num_sampled_edges_per_hop]
    if sum(edges) != col.numel() or len(nodes) != len(edges) + 1:
        raise ValueError(f"per-hop counts (nodes {nodes}, edges {edges}) do not describe {col.numel()} edges")
    parts_e, parts_w, counts = [], [], []
    e0 = n0 = 0
    for k, ek in enumerate(edges):
        loops = torch.arange(n0, n0 + nodes[k], device=dev)
        parts_e += [edge_index[:, e0:e0 + ek], torch.stack([loops, loops])]
        parts_w += [w[e0:e0 + ek], loop_w[n0:n0 + nodes[k]]]
        counts.append(ek + nodes[k])
        e0 += ek
        n0 += nodes[k]
    return torch.cat(parts_e, dim=1), torch.cat(parts_w), counts
