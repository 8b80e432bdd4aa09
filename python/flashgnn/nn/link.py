"""Link-prediction models: an encoder that embeds the nodes of a sampled batch and a decoder that scores
(source, destination) pairs — what ``flashgnn train --task link`` trains and its checkpoint rebuilds.

    model = LinkModel("sage", in_dim=64, hidden=128, num_layers=2, dropout=0.2, decoder="dot")
    for data in flashgnn.LinkNeighborLoader(DS, [15, 10], edge_label_index=..., neg_sampling="binary"):
        logits = model(data)                          # one per column of data.edge_label_index
        loss = F.binary_cross_entropy_with_logits(logits, data.edge_label)
    h = model.encode(node_batch)                      # embeddings of a NeighborLoader batch's seeds

Encoders (``LINK_MODELS``): ``sage``, ``gcn`` (:class:`flashgnn.nn.GCN`), ``gat`` — the zoo's models with
``out_channels = hidden``; ``lightgcn`` — ``torch_geometric.nn.models.LightGCN`` (its embedding table,
layer weights ``alpha`` and ``LGConv`` layers) run on the sampled subgraph; ``ngcf`` — NGCF (Wang et al.,
SIGIR 2019; PyG has none) as :class:`flashgnn.nn.ngcf.NGCF`, the model the DFG runner serves. Decoders
(``DECODERS``): ``dot`` = ``<h_s, h_d>`` (PyG's link-prediction examples), ``mlp`` = an MLP on ``h_s * h_d``
(OGB's ``LinkPredictor``).

Input features: the dataset's feature rows; a learnable embedding row per node instead where the dataset
has no features, and always for ``lightgcn`` (LightGCN is defined on ID embeddings). The table is indexed by
the batch's ``n_id`` (original node ids).

Degree-normalised layers (``gcn``, ``lightgcn``, ``ngcf``: ``DEGREE_LINK_MODELS``) take their weights from
whole-graph degrees (``data.deg``; load batches with ``degrees=True``), as :class:`flashgnn.nn.GCN` does:
with every neighbour sampled a batch computes the whole graph's layer (:mod:`flashgnn.nn.gcn`).

Typed graphs: :class:`HeteroLinkModel` scores the pairs of one edge type ``(src, rel, dst)`` with a typed
encoder (``sage`` = ``to_hetero(GraphSAGE)``, ``rgcn``, ``rgat``: :func:`flashgnn.nn.zoo.build_hetero_model`
without a target, every node type's output ``hidden`` wide) and the same decoders: the ``src`` type's row of
a pair's source against the ``dst`` type's row of its destination — what PyG's hetero link-prediction
examples write (``to_hetero`` encoder, a classifier on ``x_dict[src][i] * x_dict[dst][j]``). Featureless node
types learn an embedding per node (``embed``), as for typed node classification.

Invariant: :meth:`LinkModel.encode` returns exactly the rows of the batch's seeds
(``num_sampled_nodes[0]``, in ``n_id`` order) — for a link batch, the endpoints that
``edge_label_index`` points at; for a node batch, its ``batch_size`` seeds.
"""

from __future__ import annotations

import torch
from torch import nn

from flashgnn.nn.zoo import LINK_DECODERS as DECODERS
from flashgnn.nn.zoo import LINK_MODELS

DEGREE_LINK_MODELS = ("gcn", "lightgcn", "ngcf")
# Models whose input is always a learnable embedding per node (even where the dataset has features).
EMBEDDING_MODELS = ("lightgcn",)

__all__ = ["LinkModel", "HeteroLinkModel", "LINK_MODELS", "DECODERS", "DEGREE_LINK_MODELS", "EMBEDDING_MODELS",
           "embedding_width", "build_link_model"]


def uses_embedding(model: str, feature_dim: int) -> bool:
    """Whether ``model`` on a dataset of ``feature_dim`` features learns an embedding row per node."""
    return model in EMBEDDING_MODELS or feature_dim == 0


def embedding_width(model: str, in_dim: int, hidden: int, num_layers: int) -> int:
    """Width of the node embeddings ``encode`` returns (NGCF concatenates its input and every layer)."""
    return in_dim + num_layers * hidden if model == "ngcf" else hidden


class LinkModel(nn.Module):
    """``LinkModel(model, in_dim, hidden, num_layers, dropout, decoder, num_nodes=0)``; ``num_nodes`` > 0
    gives the learnable input embedding (``in_dim`` is then ``hidden``; see the module docs)."""

    def __init__(self, model: str, in_dim: int, hidden: int, num_layers: int, dropout: float = 0.0,
                 decoder: str = "dot", num_nodes: int = 0):
        super().__init__()
        if model not in LINK_MODELS:
            raise ValueError(f"link model {model!r}: expected one of {', '.join(LINK_MODELS)}")
        if decoder not in DECODERS:
            raise ValueError(f"decoder {decoder!r}: expected one of {', '.join(DECODERS)}")
        if model in EMBEDDING_MODELS and not num_nodes:
            raise ValueError(f"link model {model!r} learns an embedding per node: give num_nodes")
        self.kind, self.decoder_kind = model, decoder
        self.embedding = None
        if model == "lightgcn":
            from torch_geometric.nn.models import LightGCN

            # normalize=False: the layers get the whole-graph-degree weights of degree_norm (module docs).
            self.encoder = LightGCN(num_nodes, hidden, num_layers, normalize=False)
            in_dim = hidden
        else:
            if num_nodes:
                self.embedding = nn.Embedding(num_nodes, hidden)
                nn.init.xavier_uniform_(self.embedding.weight)
                in_dim = hidden
            if model == "ngcf":
                from flashgnn.nn.ngcf import NGCF

                self.encoder = NGCF(in_dim, hidden, num_layers)
            else:
                from flashgnn.nn.zoo import build_model

                self.encoder = build_model(model, in_dim, hidden, hidden, num_layers, dropout)
        self.out_dim = embedding_width(model, in_dim, hidden, num_layers)
        self.decoder = _mlp_decoder(self.out_dim, hidden, dropout) if decoder == "mlp" else None

    def _input(self, data) -> torch.Tensor:
        if self.kind == "lightgcn":
            return self.encoder.embedding(data.n_id.to(self.encoder.embedding.weight.device))
        if self.embedding is not None:
            return self.embedding(data.n_id.to(self.embedding.weight.device))
        return data.x

    def encode(self, data) -> torch.Tensor:
        """Embeddings ``[num_sampled_nodes[0], out_dim]`` of a batch's seeds (of every node of a batch
        without ``num_sampled_nodes``)."""
        x = self._input(data)
        if getattr(data, "num_sampled_nodes", None) is None:
            # A batch without per-hop counts (PyG's loader on torch-sparse, a whole graph): every row, untrimmed.
            nodes = edges = None
            n0 = x.size(0)
        else:
            nodes, edges = list(data.num_sampled_nodes), list(data.num_sampled_edges)
            n0 = int(nodes[0])
        ei = data.edge_index
        if self.kind in DEGREE_LINK_MODELS:
            deg = getattr(data, "deg", None)
            if deg is None:
                raise ValueError(f"link model {self.kind!r}: batch without node degrees (data.deg): load it with "
                                 "degrees=True")
        if self.kind == "lightgcn":
            return self._lightgcn(x, ei, deg, nodes, edges)[:n0]
        kw = {"deg": deg} if self.kind in DEGREE_LINK_MODELS else {}
        return self.encoder(x, ei, num_sampled_nodes_per_hop=nodes, num_sampled_edges_per_hop=edges, **kw)[:n0]

    def _lightgcn(self, x, edge_index, deg, nodes, edges):
        """LightGCN's ``get_embedding`` on a sampled subgraph: the layers trimmed per hop (PyG's
        ``trim_to_layer``), normalised by whole-graph degrees (no self-loops, as LightGCN's ``LGConv``)."""
        from torch_geometric.utils import trim_to_layer

        from flashgnn.nn.degnorm import degree_norm

        lg = self.encoder
        # Weights over the whole batch first: trimming drops only edges into dropped nodes, so each kept
        # target's sampled count (degree_norm's s_i) is unchanged.
        ei, w, _ = degree_norm(edge_index, x.size(0), deg, add_self_loops=False)
        out = x * lg.alpha[0]
        for i, conv in enumerate(lg.convs):
            if nodes is not None:
                x, ei, w = trim_to_layer(i, nodes, edges, x, ei, w)
            x = conv(x, ei, w)
            out = out[: x.size(0)] + x * lg.alpha[i + 1]
        return out

    def decode(self, hs: torch.Tensor, hd: torch.Tensor) -> torch.Tensor:
        """One logit per pair of embedding rows."""
        return _decode(self.decoder, hs, hd)

    def forward(self, data) -> torch.Tensor:
        """Logits of a link batch's ``edge_label_index`` pairs (binary negatives included)."""
        h = self.encode(data)
        s, d = data.edge_label_index
        return self.decode(h[s], h[d])


def _mlp_decoder(width: int, hidden: int, dropout: float):
    """``--decoder mlp``: OGB's ``LinkPredictor``, an MLP on ``h_s * h_d``."""
    from torch_geometric.nn import MLP

    return MLP([width, hidden, 1], dropout=dropout, norm=None)


def _decode(decoder, hs: torch.Tensor, hd: torch.Tensor) -> torch.Tensor:
    if decoder is None:
        return (hs * hd).sum(-1)
    return decoder(hs * hd).view(-1)


class HeteroLinkModel(nn.Module):
    """``HeteroLinkModel(model, metadata, edge_type, in_dims, hidden, num_layers, dropout, decoder, embed=None,
    heads=4)``: link prediction on edge type ``edge_type`` of a typed graph (module docs). ``in_dims`` maps
    each featured node type to its width, ``embed`` each featureless one to its node count."""

    def __init__(self, model: str, metadata, edge_type, in_dims, hidden: int, num_layers: int,
                 dropout: float = 0.0, decoder: str = "dot", embed=None, heads: int = 4,
                 max_embedding_bytes: int | None = 1 << 30):
        super().__init__()
        from flashgnn.nn.zoo import HETERO_MODELS, build_hetero_model

        if model not in HETERO_MODELS:
            raise ValueError(f"typed link model {model!r}: expected one of {', '.join(HETERO_MODELS)}")
        if decoder not in DECODERS:
            raise ValueError(f"decoder {decoder!r}: expected one of {', '.join(DECODERS)}")
        self.edge_type = tuple(edge_type)
        if self.edge_type not in [tuple(e) for e in metadata[1]]:
            raise ValueError(f"edge type {self.edge_type} is not in the metadata")
        self.kind, self.decoder_kind = model, decoder
        self.encoder = build_hetero_model(model, metadata, in_dims, hidden, hidden, num_layers, heads, dropout,
                                          embed=embed or None, target=None, max_embedding_bytes=max_embedding_bytes)
        for t in (self.edge_type[0], self.edge_type[-1]):
            if t not in self.encoder.layer_types(num_layers - 1):
                raise ValueError(f"node type {t!r} of edge type {'__'.join(self.edge_type)} gets no output from the "
                                 f"last layer (no edge type into it): add the reverse edge types (build with "
                                 "--add-reverse)")
        self.out_dim = hidden
        self.decoder = _mlp_decoder(hidden, hidden, dropout) if decoder == "mlp" else None

    def encode_types(self, data) -> dict:
        """Every node type's output rows on a ``HeteroData`` batch (trimmed: each type's seeds first)."""
        from flashgnn.nn.hetero import hetero_outputs

        return hetero_outputs(self.encoder, data)

    def encode(self, data, node_type: str) -> torch.Tensor:
        """Embeddings of a typed ``NeighborLoader`` batch's seeds of ``node_type`` (its ``batch_size``
        rows)."""
        h = self.encode_types(data)[node_type]
        return h[: int(data[node_type].batch_size)]

    def decode(self, hs: torch.Tensor, hd: torch.Tensor) -> torch.Tensor:
        """One logit per pair of embedding rows (a ``src``-type row against a ``dst``-type row)."""
        return _decode(self.decoder, hs, hd)

    def forward(self, data) -> torch.Tensor:
        """Logits of a typed link batch's ``data[edge_type].edge_label_index`` pairs."""
        h = self.encode_types(data)
        src, _, dst = self.edge_type
        s, d = data[self.edge_type].edge_label_index
        return self.decode(h[src][s], h[dst][d])


def build_link_model(config: dict, metadata=None):
    """The :class:`LinkModel` (or, with an ``edge_type``, :class:`HeteroLinkModel`) a checkpoint's
    ``model_config`` describes (``task == "link"``); ``metadata``: a typed config's, as PyG's tuples
    (:func:`flashgnn.nn.checkpoint.checkpoint_metadata`)."""
    if config.get("edge_type"):
        return HeteroLinkModel(config["model"], metadata or config["metadata"], tuple(config["edge_type"]),
                               dict(config["in_dim"]), int(config["hidden"]), int(config["num_layers"]),
                               float(config["dropout"]), config["decoder"], embed=dict(config.get("embed") or {}),
                               heads=int(config.get("heads") or 4), max_embedding_bytes=None)
    return LinkModel(config["model"], int(config["in_dim"]), int(config["hidden"]), int(config["num_layers"]),
                     float(config["dropout"]), config["decoder"], int(config.get("num_embeddings") or 0))
