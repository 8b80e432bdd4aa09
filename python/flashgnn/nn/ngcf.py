"""NGCF (Wang et al., SIGIR 2019) as a plain ``torch.nn.Module``.

PyG has no NGCF model; this one is what ``flashgnn train --task link --model
ngcf`` trains (:mod:`flashgnn.nn.link`) and the yardstick the NGCF DFG
(:func:`flashgnn.dfg.models.ngcf`) is tested against (re-exported as
``flashgnn.dfg.reference``), written with PyG's own building blocks
(``MessagePassing``, ``gcn_norm``, ``trim_to_layer``) so that it shares no
kernel code with the DFG ops.

One layer, for node u with neighbours N(u) and p_ui = 1/sqrt(|N(u)| |N(i)|)
(``gcn_norm`` without self-loops; on a sampled batch pass ``deg``, the
whole-graph degrees, and the weights are :func:`flashgnn.nn.degree_norm`'s,
so the batch computes the whole graph's NGCF):

    s_u  = sum_i p_ui e_i
    e_u' = LeakyReLU( W1 (e_u + s_u) + W2 (s_u * e_u) )

The output concatenates e^(0) (the input features) with every layer's output
(each L2-normalised when ``normalize=True``, as NGCF's reference code does).
Dropout (message and node) is a training-time device and absent here.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class NGCFConv(nn.Module):
    def __init__(self, in_dim: int, out_dim: int, negative_slope: float = 0.2):
        super().__init__()
        self.W1 = nn.Linear(in_dim, out_dim)
        self.W2 = nn.Linear(in_dim, out_dim)
        self.negative_slope = negative_slope

    def forward(self, x: torch.Tensor, edge_index: torch.Tensor, deg: torch.Tensor | None = None) -> torch.Tensor:
        from torch_geometric.nn.conv.gcn_conv import gcn_norm
        from torch_geometric.utils import scatter

        if deg is None:
            ei, w = gcn_norm(edge_index, None, x.size(0), add_self_loops=False)
        else:
            from flashgnn.nn.gcn import degree_norm

            ei, w, _ = degree_norm(edge_index, x.size(0), deg, add_self_loops=False)
        s = scatter(w.view(-1, 1) * x[ei[0]], ei[1], dim=0, dim_size=x.size(0), reduce="sum")
        return F.leaky_relu(self.W1(x + s) + self.W2(s * x), self.negative_slope)


class NGCF(nn.Module):
    """``NGCF(in_dim, hidden, num_layers)``; output width in_dim + num_layers * hidden."""

    def __init__(self, in_dim: int, hidden: int, num_layers: int, negative_slope: float = 0.2,
                 normalize: bool = False):
        super().__init__()
        dims = [in_dim] + [hidden] * num_layers
        self.convs = nn.ModuleList(NGCFConv(dims[i], dims[i + 1], negative_slope) for i in range(num_layers))
        self.normalize = normalize
        self.out_dim = in_dim + num_layers * hidden

    def forward(self, x, edge_index, num_sampled_nodes_per_hop=None, num_sampled_edges_per_hop=None, deg=None):
        from torch_geometric.utils import trim_to_layer

        xs = [x]
        for i, conv in enumerate(self.convs):
            if num_sampled_nodes_per_hop is not None:
                x, edge_index, _ = trim_to_layer(i, list(num_sampled_nodes_per_hop),
                                                 list(num_sampled_edges_per_hop), x, edge_index)
            x = conv(x, edge_index, deg)
            xs.append(F.normalize(x, p=2.0, dim=-1) if self.normalize else x)
        n = xs[-1].size(0)  # rows the last layer computed (trimming shrinks layer by layer)
        return torch.cat([h[:n] for h in xs], dim=-1)
