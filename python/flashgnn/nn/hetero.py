"""Models for typed (heterogeneous) graphs, on ``torch_geometric.data.HeteroData`` mini-batches.

A batch is what PyG's hetero ``NeighborLoader`` yields: per node type ``x`` (absent for a type without
features), ``n_id`` (the global ids of the batch's rows) and ``num_sampled_nodes`` (rows per hop); per edge
type ``edge_index`` (local ids, row = source, col = destination) and ``num_sampled_edges``; and
``batch_size`` on the input node type, whose first ``batch_size`` rows are the seeds.

Three models, one calling convention:

- :class:`RGAT` — MLPerf Training's R-GAT for IGBH (its defaults are :data:`MLPERF_RGAT`).
- :class:`RGCN` — the R-GCN of Schlichtkrull et al. (per-relation weight, mean over each relation's
  neighbours, summed over relations, plus a root weight), i.e. PyG's ``RGCNConv`` on typed node sets.
- :func:`hetero_sage` — ``to_hetero(GraphSAGE(...), metadata, aggr="sum")``, what a PyG user writes.

Every model is called as ``model(x_dict, edge_index_dict, n_id_dict=None, num_sampled_nodes_dict=None,
num_sampled_edges_dict=None)`` and returns a dict ``{node type: output}`` (PyG's ``to_hetero`` convention);
a model built with ``target=T`` holds that type's logits under ``T``. :func:`seed_logits` runs a model on
a batch and returns ``out[input_type][:batch_size]``.

Node types without features: ``embed={ntype: num_nodes}`` gives that type a learnable
``torch.nn.Embedding(num_nodes, dim)`` whose rows are picked by the batch's ``n_id``; the table is refused
(``ValueError`` naming the type and the bytes it needs) above ``max_embedding_bytes``. A node type with
neither features (``in_dims``) nor an embedding takes no part: its edge types are left out, which is what
the MLPerf reference does with an edge type whose end has no representation.

:func:`flashgnn.nn.zoo.build_hetero_model` builds one by the ``--model`` name (``HETERO_MODEL_CLASSES``).

Every model's ``forward`` is a loop over its per-layer protocol (``num_layers``, ``input_dict``,
``layer(i, x_dict, edge_index_dict, types=None)``, ``layer_types``; see ``_HeteroBase``), which
``flashgnn.inference`` calls one layer at a time on a typed dataset (:mod:`flashgnn.nn.layerwise`).
"""

from __future__ import annotations

import importlib
import warnings
from typing import Dict, List, Mapping, Optional, Tuple, Union

import torch
import torch.nn.functional as F
from torch import Tensor, nn
from torch_geometric.nn import GATConv, GraphSAGE, HeteroConv, SAGEConv, to_hetero
from torch_geometric.utils import trim_to_layer

__all__ = [
    "DEFAULT_MAX_EMBEDDING_BYTES",
    "MLPERF_RGAT",
    "NodeInputs",
    "RGAT",
    "RGCN",
    "hetero_outputs",
    "hetero_sage",
    "seed_logits",
]

NodeType = str
EdgeType = Tuple[str, str, str]
Metadata = Tuple[List[NodeType], List[EdgeType]]

# A learnable table is dense float32 and Adam keeps two more of the same size: past a GiB the table
# belongs in a sharded/offloaded store, not in one module's parameters. Callers raise it (or pass None).
DEFAULT_MAX_EMBEDDING_BYTES = 1 << 30

# MLPerf Training's GNN benchmark (R-GAT on IGBH), from mlcommons/training, folder graph_neural_network
# (retired to retired_benchmarks/rgat in training v6.0): the model is `RGNN(model="rgat")` in rgnn.py; the
# values are train_rgnn_multi_gpu.py's argument defaults (--hidden_channels 512, --num_layers 3,
# --num_heads 4, --fan_out 15,10,5, --learning_rate 0.001 with Adam, --train_batch_size 1024) and its
# model construction (dropout=0.2, node_type="paper"). Fanout, batch size and learning rate belong to the
# trainer; they are listed so that one place holds the benchmark's configuration.
MLPERF_RGAT = dict(hidden=512, layers=3, heads=4, dropout=0.2, target="paper", fanout=(15, 10, 5),
                   batch_size=1024, lr=0.001)


def _human(n: int) -> str:
    for unit, size in (("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


class NodeInputs(nn.Module):
    """The layer-0 input of every node type: its features as given, or rows of its learnable embedding.

    ``dims`` maps every node type that has an input to its width; ``embed`` maps the featureless types
    that get a table to their node counts (the table is ``num_nodes x dims[type]``). A batch's rows of an
    embedded type are ``table[n_id]``: the batch's global ids index the table, so a node keeps its row
    whichever batch it lands in."""

    def __init__(self, dims: Mapping[NodeType, int], embed: Optional[Mapping[NodeType, int]] = None,
                 max_embedding_bytes: Optional[int] = DEFAULT_MAX_EMBEDDING_BYTES):
        super().__init__()
        self.dims = dict(dims)
        self.tables = nn.ModuleDict()
        itemsize = torch.empty((), dtype=torch.get_default_dtype()).element_size()
        total = 0
        for ntype, num_nodes in (embed or {}).items():
            if isinstance(num_nodes, bool) or not isinstance(num_nodes, int) or num_nodes < 1:
                raise ValueError(f"embed[{ntype!r}] = {num_nodes!r}: expected the node type's number of nodes "
                                 "(a positive int)")
            dim = self.dims[ntype]
            need = num_nodes * dim * itemsize
            total += need
            # Checked before allocating: the point is to refuse a table that would not fit, not to fail
            # inside torch after trying.
            if max_embedding_bytes is not None and need > max_embedding_bytes:
                raise ValueError(
                    f"node type {ntype!r} has no input features and its embedding table ({num_nodes} nodes x "
                    f"{dim} x {itemsize} bytes) needs {need} bytes ({_human(need)}; Adam's state adds twice "
                    f"as much), over max_embedding_bytes={max_embedding_bytes} ({_human(max_embedding_bytes)}): "
                    f"give {ntype!r} features, leave it out of embed, or raise max_embedding_bytes")
            if max_embedding_bytes is not None and total > max_embedding_bytes:
                raise ValueError(
                    f"the embedding tables of node types {sorted(embed)!r} need {total} bytes together so far "
                    f"({_human(total)}, reached at {ntype!r}), over max_embedding_bytes={max_embedding_bytes}")
            self.tables[ntype] = nn.Embedding(num_nodes, dim)

    def forward(self, x_dict: Mapping[NodeType, Tensor],
                n_id_dict: Optional[Mapping[NodeType, Tensor]] = None) -> Dict[NodeType, Tensor]:
        out = {t: x for t, x in x_dict.items() if t in self.dims}
        for ntype, table in self.tables.items():
            if ntype in x_dict:
                raise ValueError(f"node type {ntype!r} has an embedding table and the batch also gives it "
                                 "features (x): one or the other")
            n_id = None if n_id_dict is None else n_id_dict.get(ntype)
            if n_id is None:
                raise ValueError(f"node type {ntype!r} is embedded: pass the batch's global node ids "
                                 f"(n_id_dict[{ntype!r}], batch[{ntype!r}].n_id; on a whole graph "
                                 f"torch.arange({table.num_embeddings}))")
            out[ntype] = table(n_id.to(table.weight.device))
        return out


def _input_dims(metadata: Metadata, in_dims: Union[int, Mapping[NodeType, int]], hidden: int,
                embed: Optional[Mapping[NodeType, int]]) -> Dict[NodeType, int]:
    """Layer-0 width of every node type that has an input: ``in_dims`` (an int: every type not in
    ``embed``) for featured types, ``in_dims.get(type, hidden)`` for embedded ones."""
    node_types = list(metadata[0])
    embed = dict(embed or {})
    unknown = sorted(set(embed) - set(node_types))
    if unknown:
        raise ValueError(f"embed names node types {unknown} that the metadata lacks (node types: {node_types})")
    if isinstance(in_dims, int):
        dims = {t: in_dims for t in node_types if t not in embed}
    else:
        unknown = sorted(set(in_dims) - set(node_types))
        if unknown:
            raise ValueError(f"in_dims names node types {unknown} that the metadata lacks (node types: "
                             f"{node_types})")
        dims = {t: int(d) for t, d in in_dims.items()}
    for t in embed:
        dims.setdefault(t, hidden)
    left_out = [t for t in node_types if t not in dims]
    if left_out:
        warnings.warn(f"node types {left_out} have no input features and no embedding: they and their edge "
                      "types take no part (pass embed={type: num_nodes} to learn one)", UserWarning, stacklevel=3)
    return dims


def _check_target(target: Optional[NodeType], metadata: Metadata) -> None:
    if target is not None and target not in metadata[0]:
        raise ValueError(f"target node type {target!r} is not in the metadata (node types: {list(metadata[0])})")


def _keep_edges(edge_index_dict: Mapping[EdgeType, Tensor], x_dict: Mapping[NodeType, Tensor]
                ) -> Dict[EdgeType, Tensor]:
    # An edge type whose source or destination has no representation at this layer cannot pass a message
    # (GAT's attention reads both ends); the reference drops it the same way before every layer.
    return {k: v for k, v in edge_index_dict.items() if k[0] in x_dict and k[-1] in x_dict}


class _HeteroBase(nn.Module):
    """Shared by the three models: inputs (features or embeddings), optional per-layer trimming, and the
    per-layer protocol that ``forward`` is built from and layer-wise inference (``flashgnn.inference``,
    :mod:`flashgnn.nn.layerwise`) calls one layer at a time:

    - ``num_layers``: the number of message-passing layers (hops);
    - ``input_dict(x_dict, n_id_dict)``: layer 0's input per node type (features, or embedding rows by
      ``n_id``; :class:`NodeInputs`);
    - ``layer(i, x_dict, edge_index_dict, types=None)``: layer ``i``'s output per node type, everything
      applied after the convolution included (activation and dropout between layers; after the last layer
      of a ``target`` model, the ``Linear``); ``types`` restricts the node types computed (``None``: all
      the layer computes);
    - ``layer_types(i)``: the node types whose rows layer ``i`` outputs (on a whole graph).
    """

    target: Optional[NodeType]
    inputs: NodeInputs

    def _start(self, x_dict, n_id_dict):
        return self.inputs(x_dict, n_id_dict)

    def input_dict(self, x_dict: Mapping[NodeType, Tensor],
                   n_id_dict: Optional[Mapping[NodeType, Tensor]] = None) -> Dict[NodeType, Tensor]:
        """Layer 0's input of every node type that has one (features as given, embedding rows by id)."""
        return self.inputs(x_dict, n_id_dict)

    def layer_types(self, i: int) -> List[NodeType]:
        raise NotImplementedError

    def layer(self, i: int, x_dict: Mapping[NodeType, Tensor], edge_index_dict: Mapping[EdgeType, Tensor],
              types=None) -> Dict[NodeType, Tensor]:
        raise NotImplementedError

    def forward(self, x_dict: Mapping[NodeType, Tensor], edge_index_dict: Mapping[EdgeType, Tensor],
                n_id_dict: Optional[Mapping[NodeType, Tensor]] = None,
                num_sampled_nodes_dict: Optional[Mapping[NodeType, List[int]]] = None,
                num_sampled_edges_dict: Optional[Mapping[EdgeType, List[int]]] = None) -> Dict[NodeType, Tensor]:
        x_dict = self._start(x_dict, n_id_dict)
        edge_index_dict = dict(edge_index_dict)
        for i in range(self.num_layers):
            x_dict, edge_index_dict = self._trim(i, x_dict, edge_index_dict, num_sampled_nodes_dict,
                                                 num_sampled_edges_dict)
            x_dict = self.layer(i, x_dict, edge_index_dict)
        return x_dict

    @staticmethod
    def _trim(i, x_dict, edge_index_dict, num_sampled_nodes_dict, num_sampled_edges_dict):
        # Layer i only has to produce the rows that layers i+1.. still read: each layer drops the
        # outermost hop (PyG's trim_to_layer). The seeds' outputs are the same with or without it.
        if num_sampled_nodes_dict is None or num_sampled_edges_dict is None:
            return x_dict, edge_index_dict
        x_dict, edge_index_dict, _ = trim_to_layer(i, num_sampled_nodes_dict, num_sampled_edges_dict, x_dict,
                                                   edge_index_dict)
        return x_dict, edge_index_dict


class RGAT(_HeteroBase):
    """Relational GAT as MLPerf Training's GNN benchmark (R-GAT on IGBH) defines it.

    Source: mlcommons/training, ``graph_neural_network/rgnn.py`` (now ``retired_benchmarks/rgat/rgnn.py``),
    class ``RGNN`` with ``model="rgat"``, built by ``train_rgnn_multi_gpu.py``. The definition, re-written:

    - ``layers`` layers, each a ``HeteroConv`` with sum aggregation over edge types (PyG's default) of one
      ``GATConv(in, hidden // heads, heads=heads, add_self_loops=False)`` per edge type: heads concatenated
      (width ``hidden``), no attention dropout, negative slope 0.2, with bias;
    - between layers (not after the last): ``leaky_relu`` (slope 0.01), then ``Dropout(dropout)``;
    - with ``target`` (node classification, as MLPerf runs it: ``node_type="paper"``): every layer is
      ``hidden`` wide and a ``Linear(hidden, out_channels)`` maps the target type's last-layer output to
      logits; without it the last layer is ``out_channels`` wide and every type's output is returned;
    - before each layer, edge types whose source or destination type has no representation are dropped
      (a type that is no edge type's destination has none after layer 0).

    Defaults (:data:`MLPERF_RGAT`, from ``train_rgnn_multi_gpu.py``): ``hidden=512``, ``layers=3``,
    ``heads=4``, ``dropout=0.2``; MLPerf passes ``target="paper"`` (default here ``None``: this module does
    not know the dataset). In the reference every node type has the same input width (IGBH's 1024); with
    widths that differ by type a ``GATConv`` gets ``(src, dst)`` widths, i.e. separate source and destination
    projections where the reference shares one (it shares one here too whenever the widths agree).

    The modules sit under the reference's attribute names (``convs[i]`` a ``HeteroConv`` keyed by edge type,
    ``lin``), so with every type featured and the same PyG version the two state dicts have the same keys.
    Two departures, neither changing an output: in the last layer of a ``target`` model only the edge types
    into ``target`` run (the rest would be computed and thrown away), and an edge type whose end has no input
    at a layer gets no ``GATConv`` there (it could never run; the reference builds one anyway).

    ``hidden`` must be a multiple of ``heads`` (the reference silently rounds it down).
    """

    def __init__(self, metadata: Metadata, in_dims: Union[int, Mapping[NodeType, int]], out_channels: int, *,
                 hidden: int = MLPERF_RGAT["hidden"], layers: int = MLPERF_RGAT["layers"],
                 heads: int = MLPERF_RGAT["heads"], dropout: float = MLPERF_RGAT["dropout"],
                 target: Optional[NodeType] = None, embed: Optional[Mapping[NodeType, int]] = None,
                 max_embedding_bytes: Optional[int] = DEFAULT_MAX_EMBEDDING_BYTES):
        super().__init__()
        if layers < 1:
            raise ValueError(f"layers = {layers}: expected at least 1")
        if heads < 1 or hidden % heads:
            raise ValueError(f"hidden = {hidden} is not a multiple of heads = {heads} (each head is hidden // heads "
                             "wide and the heads are concatenated)")
        if target is None and out_channels % heads:
            # Without a target the last GAT layer is the output: its heads must split out_channels too.
            raise ValueError(f"out_channels = {out_channels} is not a multiple of heads = {heads} (a model "
                             "without target ends in a GAT layer; give target to end in a Linear)")
        _check_target(target, metadata)
        self.target = target
        dims = _input_dims(metadata, in_dims, hidden, embed)
        self.inputs = NodeInputs(dims, embed, max_embedding_bytes)

        self.convs = nn.ModuleList()
        for i in range(layers):
            width = out_channels if (i == layers - 1 and target is None) else hidden
            convs = {}
            for et in metadata[1]:
                src, _, dst = et
                if src in dims and dst in dims:
                    # One shared projection when both ends are as wide (the reference's GATConv(int, ...)),
                    # separate ones otherwise.
                    ins = dims[src] if dims[src] == dims[dst] else (dims[src], dims[dst])
                    convs[et] = GATConv(ins, width // heads, heads=heads, add_self_loops=False)
            if not convs:
                raise ValueError(f"RGAT layer {i}: no edge type joins two node types that have a representation "
                                 f"(node types with one: {sorted(dims)})")
            self.convs.append(HeteroConv(convs, aggr="sum"))
            dims = {et[-1]: width for et in convs}
        if target is not None:
            if target not in dims:
                raise ValueError(f"target node type {target!r} is no destination of an edge type in the last layer: "
                                 "it would have no output")
            self.lin = nn.Linear(hidden, out_channels)
        self.dropout = nn.Dropout(dropout)

    @property
    def num_layers(self) -> int:
        return len(self.convs)

    def layer_types(self, i: int) -> List[NodeType]:
        dsts = {et[-1] for et in self.convs[i].convs.keys()}
        if i == len(self.convs) - 1 and self.target is not None:
            return [self.target]
        return sorted(dsts)

    def layer(self, i: int, x_dict: Mapping[NodeType, Tensor], edge_index_dict: Mapping[EdgeType, Tensor],
              types=None) -> Dict[NodeType, Tensor]:
        last = i == len(self.convs) - 1
        edges = _keep_edges(edge_index_dict, x_dict)
        if last and self.target is not None:
            edges = {k: v for k, v in edges.items() if k[-1] == self.target}
        if types is not None:
            edges = {k: v for k, v in edges.items() if k[-1] in types}
        x_dict = self.convs[i](x_dict, edges)
        if not last:
            return {t: self.dropout(F.leaky_relu(x)) for t, x in x_dict.items()}
        if self.target is not None:
            return {self.target: self.lin(x_dict[self.target])} if self.target in x_dict else {}
        return x_dict


class RGCN(_HeteroBase):
    """Relational GCN (Schlichtkrull et al., 2018, https://arxiv.org/abs/1703.06103) on typed node sets.

    Layer ``l`` computes, for every node ``i`` of type ``t``::

        h_i' = W_0^t h_i + b^t + sum_r  mean_{j in N_r(i)}  W_r h_j

    one weight ``W_r`` per edge type (relation), the mean over that relation's in-neighbours (the paper's
    ``1 / c_{i,r}`` with ``c_{i,r} = |N_r(i)|``), summed over relations, plus the self-connection ``W_0``.
    This is PyG's ``RGCNConv`` (``aggr="mean"``, ``root_weight=True``, ``bias=True``) except that node types
    may differ in width, so the root weight and bias are per node type (``RGCNConv`` has one of each, its
    nodes being one set). Built as ``HeteroConv(aggr="sum")`` of ``SAGEConv(aggr="mean",
    root_weight=False, bias=False)`` per relation (exactly ``mean_j W_r h_j``) plus a ``Linear`` per node type.

    ReLU and ``Dropout(dropout)`` between layers, as in the paper; the last layer is ``out_channels`` wide
    (the paper's softmax layer). With ``target`` only the target type's output is computed and returned.
    Defaults (``hidden=128``, ``layers=2``, ``dropout=0.2``) are ``flashgnn train``'s.
    """

    def __init__(self, metadata: Metadata, in_dims: Union[int, Mapping[NodeType, int]], out_channels: int, *,
                 hidden: int = 128, layers: int = 2, dropout: float = 0.2, target: Optional[NodeType] = None,
                 embed: Optional[Mapping[NodeType, int]] = None,
                 max_embedding_bytes: Optional[int] = DEFAULT_MAX_EMBEDDING_BYTES):
        super().__init__()
        if layers < 1:
            raise ValueError(f"layers = {layers}: expected at least 1")
        _check_target(target, metadata)
        self.target = target
        dims = _input_dims(metadata, in_dims, hidden, embed)
        self.inputs = NodeInputs(dims, embed, max_embedding_bytes)

        self.convs = nn.ModuleList()
        self.roots = nn.ModuleList()
        if target is not None and target not in dims:
            raise ValueError(f"target node type {target!r} has no input features and no embedding")
        for i in range(layers):
            last = i == layers - 1
            width = out_channels if last else hidden
            # The last layer of a target model only has to produce the target's rows.
            outs = [target] if (last and target is not None) else list(dims)
            convs = {et: SAGEConv((dims[et[0]], dims[et[-1]]), width, aggr="mean", root_weight=False, bias=False)
                     for et in metadata[1] if et[0] in dims and et[-1] in outs}
            if convs:
                with warnings.catch_warnings():
                    # HeteroConv warns of source types that are no destination ("not updated"): here the
                    # root term updates every type, and the last layer of a target model means it.
                    warnings.filterwarnings("ignore", message="There exist node types", category=UserWarning)
                    self.convs.append(HeteroConv(convs, aggr="sum"))
            else:
                # No relation at all (a graph of isolated typed nodes) still has the root term.
                self.convs.append(nn.Identity())
            self.roots.append(nn.ModuleDict({t: nn.Linear(dims[t], width) for t in outs}))
            dims = {t: width for t in outs}
        self.dropout = nn.Dropout(dropout)

    @property
    def num_layers(self) -> int:
        return len(self.convs)

    def layer_types(self, i: int) -> List[NodeType]:
        return list(self.roots[i].keys())

    def layer(self, i: int, x_dict: Mapping[NodeType, Tensor], edge_index_dict: Mapping[EdgeType, Tensor],
              types=None) -> Dict[NodeType, Tensor]:
        conv, roots = self.convs[i], self.roots[i]
        msgs = {}
        if isinstance(conv, HeteroConv):
            # HeteroConv runs only its own edge types (in the last layer of a target model: those
            # into the target) and skips those the batch lacks.
            edges = _keep_edges(edge_index_dict, x_dict)
            if types is not None:
                edges = {k: v for k, v in edges.items() if k[-1] in types}
            msgs = conv(x_dict, edges)
        out = {}
        for t, root in roots.items():
            if t in x_dict and (types is None or t in types):
                out[t] = root(x_dict[t]) + msgs[t] if t in msgs else root(x_dict[t])
        if i != len(self.convs) - 1:
            out = {t: self.dropout(F.relu(x)) for t, x in out.items()}
        return out


class HeteroSAGE(_HeteroBase):
    """``to_hetero(GraphSAGE(...), metadata, aggr="sum")`` behind :class:`NodeInputs` (see
    :func:`hetero_sage`); the PyG module is ``.gnn``.

    ``forward`` runs ``gnn``'s modules layer by layer (:meth:`layer`) rather than the code ``to_hetero``
    generated, so that layer-wise inference can run one layer at a time: per layer, every edge type's
    ``SAGEConv`` summed into its destination type in ``metadata`` order (the generated code's
    ``torch.add`` chain), then (not after the last layer) that type's norm, activation and dropout. The
    outputs are the generated code's (tests/nn/test_hetero_inference.py compares them)."""

    def __init__(self, gnn: nn.Module, inputs: NodeInputs, target: Optional[NodeType],
                 metadata: Optional[Metadata] = None):
        super().__init__()
        self.inputs = inputs
        self.gnn = gnn
        self.target = target
        if metadata is None:
            # to_hetero's keys are "src__rel__dst"
            keys = list(gnn.convs[0].keys())
            ets = [tuple(k.split("__")) for k in keys]
            metadata = (list(dict.fromkeys(t for et in ets for t in (et[0], et[-1]))), ets)
        self.node_types_ = [t for t in metadata[0]]
        self.edge_types_ = [tuple(et) for et in metadata[1]]
        if getattr(gnn, "jk_mode", None) not in (None, "last") or getattr(gnn, "act_first", False):
            raise ValueError("HeteroSAGE: expected GraphSAGE with jk=None and act_first=False")

    @property
    def num_layers(self) -> int:
        return len(self.gnn.convs)

    def layer_types(self, i: int) -> List[NodeType]:
        return sorted({et[-1] for et in self.edge_types_})

    def layer(self, i: int, x_dict: Mapping[NodeType, Tensor], edge_index_dict: Mapping[EdgeType, Tensor],
              types=None) -> Dict[NodeType, Tensor]:
        g = self.gnn
        convs = g.convs[i]
        out: Dict[NodeType, Tensor] = {}
        for et in self.edge_types_:
            src, _, dst = et
            if (types is not None and dst not in types) or et not in edge_index_dict \
                    or src not in x_dict or dst not in x_dict:
                continue
            x = x_dict[src] if src == dst else (x_dict[src], x_dict[dst])
            h = convs["__".join(et)](x, edge_index_dict[et])
            out[dst] = h if dst not in out else torch.add(out[dst], h)
        if i == len(g.convs) - 1:
            return out
        norms = g.norms[i] if g.norms is not None else None
        res = {}
        for t in self.node_types_:  # the generated code's order (dropout draws)
            if t not in out:
                continue
            h = out[t]
            if norms is not None:
                h = norms[t](h) if isinstance(norms, nn.ModuleDict) else norms(h)
            if g.act is not None:
                h = g.act[t](h) if isinstance(g.act, nn.ModuleDict) else g.act(h)
            res[t] = g.dropout[t](h) if isinstance(g.dropout, nn.ModuleDict) else g.dropout(h)
        return res


def hetero_sage(metadata: Metadata, in_dims: Union[int, Mapping[NodeType, int]], out_channels: int, *,
                hidden: int = 128, layers: int = 2, dropout: float = 0.2, target: Optional[NodeType] = None,
                embed: Optional[Mapping[NodeType, int]] = None,
                max_embedding_bytes: Optional[int] = DEFAULT_MAX_EMBEDDING_BYTES) -> HeteroSAGE:
    """GraphSAGE on a typed graph the way PyG's documentation writes it:
    ``to_hetero(GraphSAGE(-1, hidden, layers, out_channels, dropout=dropout), metadata, aggr="sum")`` —
    per edge type a ``SAGEConv`` (mean, with root weight), summed over the edge types into each node type,
    ReLU and dropout between layers. Returns every node type's output (``target`` is only recorded for
    :func:`seed_logits`).

    The ``-1`` input widths are lazy: they are resolved here by one forward pass over a one-node-per-type
    graph of the given widths, so the returned module's parameters all exist before an optimizer is made."""
    _check_target(target, metadata)
    dims = _input_dims(metadata, in_dims, hidden, embed)
    if target is not None and target not in dims:
        raise ValueError(f"target node type {target!r} has no input features and no embedding")
    meta = ([t for t in metadata[0] if t in dims], [et for et in metadata[1] if et[0] in dims and et[-1] in dims])
    if not meta[1]:
        raise ValueError(f"no edge type joins two node types that have an input (node types with one: {sorted(dims)})")
    # to_hetero gives every node type its own copy of each layer's per-node modules and cannot for a type that
    # receives no messages; say so here rather than let the graph transform fail with a generated name.
    sources_only = sorted(set(meta[0]) - {et[-1] for et in meta[1]})
    if sources_only:
        raise ValueError(f"to_hetero(GraphSAGE) needs every node type to be an edge type's destination; "
                         f"{sources_only} are not: add the reverse edge types (torch_geometric.transforms."
                         "ToUndirected) or use rgat/rgcn")
    inputs = NodeInputs(dims, embed, max_embedding_bytes)  # refuses an oversized table before any work
    gnn = to_hetero(GraphSAGE(-1, hidden, layers, out_channels, dropout=dropout), meta, aggr="sum")
    with torch.no_grad():
        one = torch.zeros(2, 1, dtype=torch.long)
        gnn({t: torch.zeros(1, d) for t, d in dims.items()}, {et: one for et in meta[1]})
    return HeteroSAGE(gnn, inputs, target, meta)


def hetero_outputs(model: nn.Module, batch, trim: bool = True) -> Dict[NodeType, Tensor]:
    """``model(x_dict, edge_index_dict, n_id_dict, ...)`` on a ``HeteroData`` batch: every node type's
    output rows (with ``trim``: each type's seeds, the first ``num_sampled_nodes[0]`` rows).

    Embedded types take their rows by the batch's ``n_id`` (a whole graph without ``n_id``: every row, in
    order). With ``trim`` and per-hop counts in the batch, each layer drops the hops later layers no longer
    read."""
    inner = getattr(model, "module", model)  # DistributedDataParallel
    n_id_dict = {}
    tables = inner.inputs.tables if isinstance(getattr(inner, "inputs", None), NodeInputs) else {}
    for t in tables:
        n_id = getattr(batch[t], "n_id", None) if t in batch.node_types else None
        if n_id is None and t in batch.node_types and batch[t].num_nodes == tables[t].num_embeddings:
            n_id = torch.arange(tables[t].num_embeddings)
        if n_id is not None:
            n_id_dict[t] = n_id
    kw = {}
    if trim and all("num_sampled_nodes" in batch[t] for t in batch.node_types) \
            and all("num_sampled_edges" in batch[e] for e in batch.edge_types):
        kw = dict(num_sampled_nodes_dict=batch.num_sampled_nodes_dict,
                  num_sampled_edges_dict=batch.num_sampled_edges_dict)
    return model(batch.x_dict, batch.edge_index_dict, n_id_dict, **kw)


def seed_logits(model: nn.Module, batch, input_type: Optional[NodeType] = None, trim: bool = True) -> Tensor:
    """``model(...)[input_type][:batch_size]`` on a ``HeteroData`` batch: the seeds' outputs
    (:func:`hetero_outputs`).

    ``input_type`` defaults to the model's ``target``. A batch without ``batch_size`` (a whole graph)
    returns every row of ``input_type``."""
    inner = getattr(model, "module", model)  # DistributedDataParallel
    input_type = input_type if input_type is not None else getattr(inner, "target", None)
    if input_type is None:
        raise ValueError("seed_logits: the model has no target node type; pass input_type")
    out = hetero_outputs(model, batch, trim)[input_type]
    bs = getattr(batch[input_type], "batch_size", None)
    return out if bs is None else out[:bs]
