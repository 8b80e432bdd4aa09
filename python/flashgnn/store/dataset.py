"""`flashgnn.open(path)` -> :class:`Dataset`: simple, checked reads.

These calls are correct and convenient, not fast: each id is one positional
read. Mini-batch sampling with deep-queue direct I/O is the engine's job.
Every id is an *original* (user-facing) id, whatever ``--reorder`` did.
"""

from __future__ import annotations

import os
from functools import cached_property
from typing import NamedTuple

import numpy as np

from flashgnn import _core

_NP_DTYPES = {"float16": np.float16, "float32": np.float32, "float64": np.float64}


def _ids(ids) -> np.ndarray:
    a = np.asarray(ids)
    if a.ndim == 0:
        a = a.reshape(1)
    if a.dtype.kind not in "iu":
        raise TypeError(f"node ids must be integers, got dtype {a.dtype}")
    return np.ascontiguousarray(a, dtype=np.int64)


# What `flashgnn build` imports, by the file that identifies each layout (docs/input.md).
_RAW_MARKERS = (("edge_index.npy", "an npy input directory"), ("processed/paper", "an IGB root"),
                ("raw/edge.csv.gz", "an OGB raw directory"), ("raw/edge.csv", "an OGB raw directory"))


def raw_input_hint(path) -> str | None:
    """When ``path`` is an input `flashgnn build` imports rather than a
    built dataset, the advice that says so; else None."""
    p = os.fspath(path)
    if os.path.isfile(p):
        return f"{p} is a file: if it is an edge list, import it first with `flashgnn build {p} OUT` (docs/input.md)"
    for marker, what in _RAW_MARKERS:
        if os.path.exists(os.path.join(p, marker)):
            return f"{p} looks like {what} (it holds {marker}): import it first with `flashgnn build {p} OUT`"
    return None


class Dataset:
    """A built flashgnn dataset directory (see ``docs/format.md``)."""

    def __init__(self, path: str | os.PathLike):
        try:
            self._core = _core.Dataset(os.fspath(path))
        except _core.DatasetNotFoundError as e:
            hint = raw_input_hint(path)
            if hint is None:
                raise
            raise _core.DatasetNotFoundError(f"{e}; {hint}") from None

    path = property(lambda self: self._core.path)
    num_nodes = property(lambda self: self._core.num_nodes)
    num_edges = property(lambda self: self._core.num_edges, doc="Stored directed neighbor entries.")
    feature_dim = property(lambda self: self._core.feature_dim)
    feature_dtype = property(lambda self: self._core.feature_dtype, doc="numpy dtype name of stored features.")

    @cached_property
    def manifest(self) -> dict:
        return self._core.manifest

    @cached_property
    def layout(self) -> dict:
        return self._core.layout()

    # -- node and edge types (docs/format.md, "Typed graphs") ------------------------------------------
    # A homogeneous dataset is the one-type case: node type "node", edge type ("node", "to", "node").
    # Splits, labels and the class count of a typed dataset are those of its *target* type: the node type
    # with labels and a train split (the one being classified), unless ``target_type`` is set.

    @property
    def is_typed(self) -> bool:
        return self.manifest.get("types") is not None

    @cached_property
    def types(self) -> dict:
        """The manifest's ``types`` section (``node_types``, ``edge_types``), or the one-type view."""
        if self.is_typed:
            return self.manifest["types"]
        m = self.manifest
        feats = {"dim": m["features"]["dim"], "dtype": m["features"]["dtype"]} if m["features"]["dim"] else None
        return {"node_types": [{"name": "node", "count": m["num_nodes"], "features": feats, "labels": m.get("labels"),
                                "splits": m.get("splits", {})}],
                "edge_types": [{"src": "node", "rel": "to", "dst": "node", "num_edges": m["num_edges"]}]}

    @property
    def node_types(self) -> list[str]:
        return [t["name"] for t in self.types["node_types"]]

    @property
    def edge_types(self) -> list[tuple[str, str, str]]:
        return [(e["src"], e["rel"], e["dst"]) for e in self.types["edge_types"]]

    def metadata(self) -> tuple[list[str], list[tuple[str, str, str]]]:
        """PyG's ``(node_types, edge_types)``, as ``HeteroData.metadata()``."""
        return self.node_types, self.edge_types

    def node_type(self, name: str) -> dict:
        """The manifest entry of node type ``name`` (count, features, labels, splits)."""
        for t in self.types["node_types"]:
            if t["name"] == name:
                return t
        raise KeyError(f"{self.path}: no node type {name!r} (node types: {', '.join(self.node_types)})")

    def type_offset(self, name: str) -> int:
        """The first global id of node type ``name`` (the engine's ids: a type's nodes follow the types
        declared before it)."""
        i = self.node_types.index(self.node_type(name)["name"])
        return sum(int(t["count"]) for t in self.types["node_types"][:i])

    target_type_override: str | None = None

    @property
    def target_type(self) -> str:
        """The node type whose labels and splits :meth:`split`, :meth:`labels` and :attr:`num_classes` give:
        ``target_type_override`` when set, else the only type with labels and a train split (else the first
        with labels)."""
        if self.target_type_override is not None:
            self.node_type(self.target_type_override)
            return self.target_type_override
        nts = self.types["node_types"]
        trained = [t["name"] for t in nts if t.get("labels") and "train" in (t.get("splits") or {})]
        labeled = [t["name"] for t in nts if t.get("labels")]
        return (trained or labeled or [nts[0]["name"]])[0]

    def _target(self) -> tuple[int, dict]:
        name = self.target_type
        return self.node_types.index(name), self.node_type(name)

    @property
    def num_classes(self) -> int:
        labels = self._target()[1].get("labels") if self.is_typed else self.manifest.get("labels")
        return int(labels["num_classes"]) if labels else 0

    @property
    def split_names(self) -> list[str]:
        if self.is_typed:
            return sorted((self._target()[1].get("splits") or {}).keys())
        return self._core.split_names()

    def split(self, name: str) -> np.ndarray:
        """Seed node ids of split ``name`` ("train", "val", "test"), int64 (a typed dataset: ids within its
        target type)."""
        if self.is_typed:
            t, _ = self._target()
            return self._core.type_split(t, name)
        return self._core.split(name)

    def link_split(self, name: str, mmap: bool = False) -> LinkSplit:
        """Link-prediction split ``name`` ("train", "val", "test") as ``(src, dst, neg)``, int64 original ids
        (a typed dataset: local ids of :attr:`link_edge_type`'s source and destination types):
        positive edges ``src[i] -> dst[i]`` and ``neg`` [n_pos, K], the K fixed negative destinations of
        positive i (each paired with ``src[i]``), or None (the train split; a given split whose negatives are
        free pairs: :meth:`link_negative_pairs`). Every file is checked (CRC, ids) on first use; a dataset
        without a link split is refused naming it (docs/format.md, *Link splits*).

        ``mmap=True``: the arrays are read-only ``np.memmap`` views of the files, after the same checks made
        chunk by chunk — nothing the size of the split is held (a drawn split's ``train`` lists every
        message-passing pair: 16 B per edge, 16 GB at 10^9 edges; ``flashgnn train --task link`` reads it
        so)."""
        part = ((self.link_split_info or {}).get("splits") or {}).get(name)
        if not mmap or part is None:
            # No split (or not this one): the core refuses it, naming the dataset and the splits it has.
            src, dst, neg, k, _, _ = self._core.link_split(name)
            return LinkSplit(src, dst, None if neg is None else neg.reshape(len(src), int(k)))
        n, k = int(part.get("positives", 0)), int(part.get("neg_per_positive", 0))

        def mapped(which: str, length: int):
            if not length:
                return np.empty(0, np.int64)
            f = f"link_{name}_{which}.npy"
            self._core.check_side_file(f)  # CRC32C, dtype, shape against the manifest, ids: once per process
            path = os.path.join(self.path, f)
            # The check read the file twice (CRC, then ids), which marks a small file's pages active: a memory
            # budget measured next (train's --memory-budget auto: a cgroup's usage less its inactive file
            # pages) would count them as held. Dropped; the map reads back what the batches touch.
            fd = os.open(path, os.O_RDONLY)
            try:
                os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
            finally:
                os.close(fd)
            return np.load(path, mmap_mode="r")

        neg = mapped("neg", n * k) if k else None
        return LinkSplit(mapped("src", n), mapped("dst", n), None if neg is None else neg.reshape(n, k))

    def link_negative_pairs(self, name: str) -> tuple[np.ndarray, np.ndarray] | None:
        """Free negative pairs ``(neg_src, neg_dst)`` of link split ``name`` (OGB's ``edge_neg``), or None."""
        _, _, _, _, ns, nd = self._core.link_split(name)
        return None if ns is None else (ns, nd)

    @property
    def link_split_info(self) -> dict | None:
        """The manifest's ``link_split`` section (origin, counts, fractions, seed), or None."""
        return self.manifest.get("link_split")

    @property
    def link_edge_type(self) -> tuple[str, str, str] | None:
        """The edge type ``(src, rel, dst)`` a typed dataset's link split is of (``--link-edge-type``), or None
        (no split, or a homogeneous dataset). Its :meth:`link_split` arrays then hold local ids: sources of
        ``src``, destinations and negatives of ``dst`` (PyG's ``edge_label_index`` of that edge type)."""
        key = (self.link_split_info or {}).get("edge_type")
        return None if key is None else tuple(key.split("__"))

    def split_size(self, name: str) -> int:
        """How many ids split ``name`` holds, from the manifest: no read of
        its 8 B per id (which at 10^8 training nodes is most of a GiB)."""
        splits = self._target()[1].get("splits") if self.is_typed else self.manifest["splits"]
        return int(splits[name])

    def neighbors(self, ids) -> list[np.ndarray] | np.ndarray:
        """Neighbor ids of each node (sources of edges into it), int64.

        A scalar id returns one array; a sequence returns a list of arrays.
        """
        scalar = np.ndim(ids) == 0
        ptr, idx = self._core.neighbors(_ids(ids))
        out = [idx[ptr[i] : ptr[i + 1]] for i in range(len(ptr) - 1)]
        return out[0] if scalar else out

    def neighbors_csr(self, ids) -> tuple[np.ndarray, np.ndarray]:
        """Neighbors of ``ids`` as (indptr, indices)."""
        return self._core.neighbors(_ids(ids))

    def features(self, ids) -> np.ndarray:
        """Feature rows ``[len(ids), feature_dim]`` in the stored dtype."""
        raw = self._core.feature_bytes(_ids(ids))
        dt = _NP_DTYPES[self.feature_dtype]
        return raw.view(dt).reshape(raw.shape[0], self.feature_dim)

    def labels(self, ids) -> np.ndarray:
        """Class ids (int64, -1 = unlabeled); a typed dataset: of its target type, by id within the type."""
        if self.is_typed:
            return self._core.type_labels(self._target()[0], _ids(ids))
        return self._core.labels(_ids(ids))

    @property
    def labels_file(self) -> str:
        """The file :meth:`labels` reads."""
        name = f"t{self._target()[0]}.labels.npy" if self.is_typed else "labels.npy"
        return os.path.join(self.path, name)

    def __len__(self) -> int:
        return self.num_nodes

    def __repr__(self) -> str:
        return repr(self._core)


def open(path: str | os.PathLike) -> Dataset:  # noqa: A001 - mirrors builtins.open by design
    """Open a dataset; raises :class:`flashgnn.DatasetNotFoundError` or
    :class:`flashgnn.CorruptDatasetError` with the file and offset at fault."""
    return Dataset(path)



class LinkSplit(NamedTuple):
    """One link-prediction split (:meth:`Dataset.link_split`)."""

    src: np.ndarray
    dst: np.ndarray
    neg: np.ndarray | None
