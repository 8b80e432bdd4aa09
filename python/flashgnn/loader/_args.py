"""PyG's loader and sampler arguments: parsed with PyG's meanings, honoured
where the flashgnn engine does what they ask, refused by name where it does
not. Shared by :class:`flashgnn.NeighborLoader` and the remote backend
(:mod:`flashgnn.pyg`), so both accept and refuse exactly the same things.

What the engine does (``crates/flashgnn-sample``: ``rng::sample_indices``,
``NeighborSampler::canonical``), and hence what is honoured:

- uniform sampling *without* replacement, ``-1`` = every neighbour
  (PyG's ``replace=False``);
- one shared subgraph per batch, a node reached from two seeds appears once
  (PyG's ``disjoint=False``);
- only the sampled edges, row = neighbour, col = target
  (PyG's ``subgraph_type='directional'``, ``directed=True``);
- no time or weight attributes (no temporal or weighted sampling).

Invariant: an argument is either honoured with PyG's meaning or refused with
an error naming it and its value; nothing is silently ignored.
"""

from __future__ import annotations

import warnings

import numpy as np

# The Rust sampler's hop limit (NeighborSampler::open_dataset).
HOPS_MAX = 16

# torch.utils.data.DataLoader arguments PyG's loaders pass through **kwargs
# that flashgnn's own loader does not take (it is not a DataLoader: batches
# come from the engine's producer threads), each with the reason given.
_DATALOADER_REFUSED = {
    "sampler": "the seed order comes from shuffle= and seed= (and rank=/world_size= for DDP)",
    "batch_sampler": "batches are cut from the seed order by batch_size= and drop_last=",
    "collate_fn": "batches are built by the engine; use transform= to change them",
    "timeout": "there are no worker processes to time out",
    "worker_init_fn": "there are no worker processes (producers are threads in this process)",
    "multiprocessing_context": "there are no worker processes (producers are threads in this process)",
    "generator": "the shuffle order comes from seed= (reproducible per epoch)",
    "prefetch_factor": "use prefetch= (batches prepared ahead)",
    "pin_memory_device": "pin_memory=True pins for the current CUDA device",
    "in_order": "batches always arrive in seed order",
    "input_id": "input_id is computed from input_nodes, as in PyG's NeighborLoader",
    "custom_cls": "a typed dataset's batches are torch_geometric.data.HeteroData (flashgnn.loader.hetero)",
}


def refuse_unknown(who: str, kwargs: dict, accepted) -> None:
    """Refuse leftover keyword arguments: a DataLoader one with its reason,
    anything else as unknown, naming the accepted ones."""
    for k, v in kwargs.items():
        if k in _DATALOADER_REFUSED:
            raise ValueError(f"{who}: {k}={v!r} is not supported: {_DATALOADER_REFUSED[k]}")
    if kwargs:
        names = ", ".join(sorted(kwargs))
        raise TypeError(f"{who}: unexpected keyword argument(s) {names}; accepted: {', '.join(accepted)}")


def renamed(who: str, old: str, new: str, old_value, new_value, unset):
    """The value of a renamed argument: the new name's, or the old name's
    with a DeprecationWarning; both given is an error."""
    if old_value is unset:
        return new_value
    if new_value is not unset:
        raise TypeError(f"{who}: give {new}= or its deprecated name {old}=, not both (got {new}={_short(new_value)} "
                        f"and {old}={_short(old_value)})")
    warnings.warn(f"{who}: {old}= is deprecated and will be removed in the next release; use {new}= (PyG's name)",
                  DeprecationWarning, stacklevel=3)
    return old_value


def _short(value, limit: int = 60) -> str:
    """``repr(value)`` cut to ``limit`` characters, for error messages."""
    r = repr(value)
    return r if len(r) <= limit else r[: limit - 3] + "..."


def num_neighbors(who: str, value) -> list[int]:
    """PyG's ``num_neighbors`` (a list per hop; -1 = all neighbours) as ints."""
    values = value
    if type(value).__name__ == "NumNeighbors":  # torch_geometric.sampler.NumNeighbors: its list or dict
        values = value.values
    if isinstance(values, dict):
        raise ValueError(f"{who}: num_neighbors as a dict (per edge type, for heterogeneous graphs) is not "
                         f"supported on this dataset: it is homogeneous (one node and one edge type); pass a list "
                         f"per hop, e.g. num_neighbors=[25, 10]")
    if values is None:
        raise TypeError(f"{who}: num_neighbors is required (a list per hop, -1 = all neighbours; e.g. [25, 10])")
    if isinstance(values, (str, bytes)) or not hasattr(values, "__iter__"):
        raise TypeError(f"{who}: num_neighbors must be a list per hop (-1 = all neighbours), got {values!r}")
    out = []
    for hop, v in enumerate(values):
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{who}: num_neighbors[{hop}] = {v!r} is not an integer")
        if v < -1:
            raise ValueError(f"{who}: num_neighbors[{hop}] = {v} is out of range: >= 0, or -1 for all neighbours")
        out.append(int(v))
    if len(out) > HOPS_MAX:
        raise ValueError(f"{who}: num_neighbors has {len(out)} hops; at most {HOPS_MAX} are supported")
    return out


def check_input_nodes(who: str, input_nodes) -> None:
    """Refuse PyG's heterogeneous forms of ``input_nodes`` (a node type, or
    a ``(node_type, nodes)`` tuple); the homogeneous forms are parsed by the
    caller."""
    if isinstance(input_nodes, str):
        raise ValueError(f"{who}: input_nodes={input_nodes!r} names a node type (heterogeneous graphs); "
                         "this dataset is homogeneous (one node type): pass a node-id tensor, a boolean mask or None")
    if (isinstance(input_nodes, tuple) and len(input_nodes) == 2 and isinstance(input_nodes[0], str)):
        raise ValueError(f"{who}: input_nodes=({input_nodes[0]!r}, ...) is a (node_type, nodes) tuple for "
                         "heterogeneous graphs; this dataset is homogeneous (one node type): pass the nodes alone")


def check_sampling(who: str, *, replace=False, subgraph_type="directional", disjoint=False,
                   temporal_strategy="uniform", time_attr=None, weight_attr=None, input_time=None,
                   directed=True) -> None:
    """Refuse, by name and value, every PyG sampling option the engine does
    not implement (see the module docs for what it does)."""
    if replace:
        raise ValueError(f"{who}: replace={replace!r} is not supported: flashgnn samples uniformly without "
                         "replacement (PyG's replace=False)")
    st = getattr(subgraph_type, "value", subgraph_type)  # torch_geometric.sampler.SubgraphType
    if st != "directional":
        raise ValueError(f"{who}: subgraph_type={st!r} is not supported: a batch holds the sampled edges only "
                         "(PyG's subgraph_type='directional')")
    if not directed:
        raise ValueError(f"{who}: directed={directed!r} (PyG's subgraph_type='bidirectional') is not supported: a "
                         "batch holds the sampled edges only (directed=True)")
    if disjoint:
        raise ValueError(f"{who}: disjoint={disjoint!r} is not supported: a batch is one subgraph shared by its "
                         "seeds (PyG's disjoint=False); there is no per-seed data.batch vector")
    if input_time is not None:
        raise ValueError(f"{who}: input_time is not supported: temporal sampling needs time attributes, which a "
                         "flashgnn dataset does not store")
    if time_attr is not None:
        raise ValueError(f"{who}: time_attr={time_attr!r} is not supported: a flashgnn dataset stores no time "
                         "attributes (no temporal sampling)")
    if temporal_strategy != "uniform":
        raise ValueError(f"{who}: temporal_strategy={temporal_strategy!r} is not supported (no temporal sampling)")
    if weight_attr is not None:
        raise ValueError(f"{who}: weight_attr={weight_attr!r} is not supported: a flashgnn dataset stores no edge "
                         "weights; sampling is uniform")
