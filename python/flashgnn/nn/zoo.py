"""The one list of models flashgnn builds by name (``train --model``, ``embed``, ``serve``, the DFG
converters): adding a model is one entry in ``MODEL_CLASSES`` (plus ``DEGREE_MODELS`` when its layers
normalise by degree)."""

from __future__ import annotations

# The models `train` builds: name -> (module, class, extra keyword arguments). The one list: MODELS, the
# --model choices, build_model and the serving/embedding consumers derive from it.
MODEL_CLASSES = {
    "sage": ("torch_geometric.nn", "GraphSAGE", {}),
    "gcn": ("flashgnn.nn", "GCN", {}),  # PyG's GCN normalised by whole-graph degrees
    "gin": ("torch_geometric.nn", "GIN", {}),
    "gat": ("torch_geometric.nn", "GAT", {"heads": 4}),
    "mlp": ("torch_geometric.nn", "MLP", {}),  # the seeds' features alone: the baseline
}
MODELS = tuple(MODEL_CLASSES)
# The models built for a typed (heterogeneous) dataset, by the same --model names: name -> (module, callable,
# extra keyword arguments), built by build_hetero_model. Kept apart from MODEL_CLASSES so
# that the homogeneous choices and build_model stay as they are.
HETERO_MODEL_CLASSES = {
    "rgat": ("flashgnn.nn.hetero", "RGAT", {}),  # MLPerf Training's R-GAT (IGBH)
    "rgcn": ("flashgnn.nn.hetero", "RGCN", {}),
    "sage": ("flashgnn.nn.hetero", "hetero_sage", {}),  # to_hetero(GraphSAGE(...), metadata, aggr="sum")
}
HETERO_MODELS = tuple(HETERO_MODEL_CLASSES)
# Every --model name, homogeneous ones first.
ALL_MODELS = MODELS + tuple(m for m in HETERO_MODELS if m not in MODELS)
# --task link (flashgnn.nn.link): the encoders, and the names only link prediction builds (LightGCN learns an
# embedding per node, NGCF is a recommender). Repeated from flashgnn.nn.link, which imports torch.
LINK_MODELS = ("sage", "gcn", "gat", "lightgcn", "ngcf")
LINK_ONLY_MODELS = tuple(m for m in LINK_MODELS if m not in ALL_MODELS)
# How a link model scores a pair from its endpoints' embeddings (flashgnn.nn.link.LinkModel.decode).
LINK_DECODERS = ("dot", "mlp")
# Models whose layers normalise by node degrees: their batches carry every
# node's whole-graph degree (`data.deg`), see flashgnn.nn.
DEGREE_MODELS = ("gcn",)
NORMALIZE_FEATURES = ("none", "row")


def build_model(name: str, in_dim: int, hidden: int, out_dim: int, num_layers: int, dropout: float):
    """A stock ``torch_geometric.nn`` model (GCN: :class:`flashgnn.nn.GCN`,
    PyG's GCN normalised by whole-graph degrees); ``num_layers`` = number of hops."""
    import importlib

    if name not in MODEL_CLASSES:
        raise ValueError(f"model {name!r}: expected one of {', '.join(MODELS)}")
    module, cls_name, kw = MODEL_CLASSES[name]
    cls = getattr(importlib.import_module(module), cls_name)
    if name == "mlp":
        return cls(in_channels=in_dim, hidden_channels=hidden, out_channels=out_dim, num_layers=max(num_layers, 1),
                   dropout=dropout, norm=None)
    return cls(in_dim, hidden, num_layers, out_dim, dropout=dropout, **kw)


def is_hetero(data) -> bool:
    """Whether a batch is a ``HeteroData`` (a typed dataset's)."""
    return type(data).__name__ == "HeteroData"


def input_type(data) -> str:
    """The node type a ``HeteroData`` batch's seeds are of: the one store that has ``batch_size``."""
    for nt in data.node_types:
        if "batch_size" in data[nt]:
            return nt
    raise ValueError("HeteroData batch without batch_size on any node type (not a NeighborLoader batch)")


def seed_labels(data):
    """Labels of the batch's seeds (``y[:batch_size]``, of the input type for a ``HeteroData``)."""
    if is_hetero(data):
        st = data[input_type(data)]
        return st.y[: st.batch_size]
    return data.y[: data.batch_size]


def seed_count(data) -> int:
    """Seeds in a batch (``batch_size``, of the input type for a ``HeteroData``)."""
    return int(data[input_type(data)].batch_size if is_hetero(data) else data.batch_size)


def normalize_batch(data, how: str):
    """:func:`normalize_features` on a batch's rows (every node type's, for a ``HeteroData``)."""
    if how == "none":
        return data
    if is_hetero(data):
        for nt in data.node_types:
            if "x" in data[nt]:
                data[nt].x = normalize_features(data[nt].x, how)
    else:
        data.x = normalize_features(data.x, how)
    return data


def build_hetero_model(name: str, metadata, in_dims, hidden: int,
                       out: int, layers: int, heads: int, dropout: float,
                       embed=None, *, target=None,
                       max_embedding_bytes: int | None = 1 << 30):
    """The typed-graph model ``flashgnn train --model NAME`` builds (names: ``HETERO_MODELS``:
    ``rgat``, ``rgcn``, ``sage``). ``heads`` is read by ``rgat`` only; ``layers`` = number of hops."""
    import importlib

    if name not in HETERO_MODEL_CLASSES:
        raise ValueError(f"model {name!r} on a typed graph: expected one of {', '.join(HETERO_MODELS)}")
    module, attr, kw = HETERO_MODEL_CLASSES[name]
    build = getattr(importlib.import_module(module), attr)
    if name == "rgat":
        kw = dict(kw, heads=heads)
    return build(metadata, in_dims, out, hidden=hidden, layers=layers, dropout=dropout, target=target, embed=embed,
                 max_embedding_bytes=max_embedding_bytes, **kw)


def forward(model, data):
    """Logits of the batch's seeds; GNNs trim the sampled subgraph per layer
    (GCN normalised by the whole graph's degrees, ``data.deg``: trimmed or
    not, a full-neighbourhood batch gives the full-graph outputs). A
    ``HeteroData`` batch goes through :func:`flashgnn.nn.hetero.seed_logits`."""
    from torch_geometric.nn import MLP

    from flashgnn.nn.gcn import GCN

    if is_hetero(data):
        from flashgnn.nn.hetero import seed_logits

        return seed_logits(model, data, input_type(data))
    inner = getattr(model, "module", model)
    bs = data.batch_size
    if isinstance(inner, MLP):
        return model(data.x[:bs])
    kw = {}
    if isinstance(inner, GCN):
        deg = getattr(data, "deg", None)
        if deg is None:
            raise ValueError("GCN batch without node degrees (data.deg): load it with NeighborLoader(..., "
                             "degrees=True)")
        kw["deg"] = deg
    return model(data.x, data.edge_index, num_sampled_nodes_per_hop=data.num_sampled_nodes,
                 num_sampled_edges_per_hop=data.num_sampled_edges, **kw)[:bs]


def normalize_features(x, how: str):
    """Feature rows as the model was trained on them: ``row`` divides each
    row by its sum, clamped at 1 (PyG's ``NormalizeFeatures`` on
    non-negative features), ``none`` leaves them. Row-wise, so applying it
    per batch equals applying it to the whole table."""
    if how == "none":
        return x
    if how == "row":
        return x / x.sum(dim=-1, keepdim=True).clamp(min=1.0)
    raise ValueError(f"normalize_features {how!r}: expected one of {', '.join(NORMALIZE_FEATURES)}")


