"""The dataflow graph (DFG): building, validating and (de)serialising it.

    g = Graph()
    batch = g.create_in("Batch")
    w = g.create_param("W0", torch.randn(16, 8))
    sub, x = g.create_op("BatchPre", [batch], attrs={"fanouts": [5, 3]})
    h = g.create_op("GEMM", [g.create_op("SpMM_Mean", [sub, x]), w])
    g.create_out("Result", h)
    blob = g.to_bytes(); g2 = Graph.from_bytes(blob)

A node's outputs are named ``"<seq>_<k>"`` (node ``seq``'s k-th output,
HolisticGNN's notation); graph inputs and params are referenced by name.

Invariants kept here:

- A :class:`Graph` is always acyclic and every reference resolves: the
  builder only accepts handles and names that already exist, and
  :meth:`Graph.from_bytes` checks the same before returning.
- Loading never executes code: the format is a fixed binary header, a JSON
  document (parsed by :mod:`json`, nothing else) and raw little-endian tensor
  bytes. Every length, count, name, shape and dtype is checked against a
  named limit below, and the error names the field, the value and the bound.
- Nodes are stored in topological order (Kahn's algorithm, ties broken by
  ascending ``seq``) whichever order they were created or listed in.

Op names are *not* checked against a registry here (a plugin op may exist
only on the server); :meth:`Graph.validate` with a registry does that, and
:class:`flashgnn.dfg.Runner` calls it before every run.

The byte layout is described field by field in ``docs/graphrunner.md``.
"""

from __future__ import annotations

import json
import math
import os
import re
import struct
import zlib
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import torch

from flashgnn.dfg.limits import (  # noqa: F401 - re-exported: flashgnn.dfg.graph.MAX_* and DFGError stay valid
    MAX_DFG_BYTES,
    MAX_JSON_BYTES,
    MAX_NODES,
    MAX_PARAMS,
    MAX_GRAPH_INPUTS,
    MAX_GRAPH_OUTPUTS,
    MAX_NODE_INPUTS,
    MAX_NODE_OUTPUTS,
    MAX_NAME_BYTES,
    MAX_NDIM,
    MAX_DIM,
    MAX_ATTRS_PER_NODE,
    MAX_ATTR_LIST_LEN,
    MAX_ATTR_STR_BYTES,
    MAX_ATTR_DEPTH,
    MAX_SEQ,
    DFGError,
    _NAME_RE,
)

FORMAT_NAME = "flashgnn-dfg"
FORMAT_VERSION = 1
SUPPORTED_VERSIONS = (1,)
MAGIC = b"FLASHDFG"  # 8 bytes, so the header's u32/u64 fields that follow are naturally aligned

# magic (8) + version u32 + flags u32 + json_len u64 + blob_len u64 = 32 bytes.
_HEADER = struct.Struct("<8sIIQQ")
_TRAILER = struct.Struct("<I")  # zlib CRC-32 of every byte before it
PARAM_ALIGN = 64  # param offsets in the blob are multiples of this (cache-line, and any dtype's alignment)

# dtype name -> (little-endian numpy dtype used to decode the bytes, torch dtype).
# bfloat16 has no numpy type: its bytes are read as int16 and reinterpreted.
DTYPES: dict[str, tuple[str, torch.dtype]] = {
    "float32": ("<f4", torch.float32),
    "float64": ("<f8", torch.float64),
    "float16": ("<f2", torch.float16),
    "bfloat16": ("<i2", torch.bfloat16),
    "int64": ("<i8", torch.int64),
    "int32": ("<i4", torch.int32),
    "int16": ("<i2", torch.int16),
    "int8": ("<i1", torch.int8),
    "uint8": ("<u1", torch.uint8),
    "bool": ("<u1", torch.bool),
}
_TORCH_TO_NAME = {t: n for n, (_, t) in DTYPES.items()}

_REF_RE = re.compile(r"^([1-9][0-9]{0,9})_([0-9]{1,5})$")



@dataclass(frozen=True)
class Handle:
    """A value inside a :class:`Graph`: a graph input, a param or one output
    of a node. ``ref`` is how the serialised form names it."""

    ref: str
    graph_id: int = field(repr=False, compare=False)


@dataclass
class Node:
    seq: int
    op: str
    inputs: list[str]
    num_outputs: int
    attrs: dict

    @property
    def outputs(self) -> list[str]:
        return [f"{self.seq}_{k}" for k in range(self.num_outputs)]


def _check_name(name, what: str) -> str:
    if not isinstance(name, str):
        raise DFGError(f"{what}: expected a string name, got {type(name).__name__}")
    if len(name.encode()) > MAX_NAME_BYTES:
        raise DFGError(f"{what} {name[:40]!r}...: name is {len(name.encode())} bytes, limit {MAX_NAME_BYTES}")
    # A name starts with a letter or '_', so it can never be read as a '<seq>_<k>' node output.
    if not _NAME_RE.match(name):
        raise DFGError(f"{what} {name!r}: names must match {_NAME_RE.pattern}")
    return name


def check_attrs(attrs, where: str) -> dict:
    """Attributes are JSON data: str keys; values None, bool, int (int64),
    finite float, str, or lists/dicts of those, nested at most MAX_ATTR_DEPTH."""
    if attrs is None:
        return {}
    if not isinstance(attrs, dict):
        raise DFGError(f"{where}: attrs must be an object, got {type(attrs).__name__}")
    if len(attrs) > MAX_ATTRS_PER_NODE:
        raise DFGError(f"{where}: {len(attrs)} attrs, limit {MAX_ATTRS_PER_NODE}")

    def check(v, path: str, depth: int):
        if depth > MAX_ATTR_DEPTH:
            raise DFGError(f"{where}: attr {path} nested deeper than {MAX_ATTR_DEPTH}")
        if v is None or isinstance(v, bool):
            return v
        if isinstance(v, (int, np.integer)):
            v = int(v)
            if not -(2**63) <= v < 2**63:
                raise DFGError(f"{where}: attr {path} = {v} is outside int64")
            return v
        if isinstance(v, (float, np.floating)):
            if not math.isfinite(v):
                raise DFGError(f"{where}: attr {path} = {v}: only finite floats are allowed")
            return float(v)
        if isinstance(v, str):
            if len(v.encode()) > MAX_ATTR_STR_BYTES:
                raise DFGError(f"{where}: attr {path} is a {len(v.encode())}-byte string, limit {MAX_ATTR_STR_BYTES}")
            return v
        if isinstance(v, (list, tuple)):
            if len(v) > MAX_ATTR_LIST_LEN:
                raise DFGError(f"{where}: attr {path} has {len(v)} elements, limit {MAX_ATTR_LIST_LEN}")
            return [check(e, f"{path}[{i}]", depth + 1) for i, e in enumerate(v)]
        if isinstance(v, dict):
            if len(v) > MAX_ATTRS_PER_NODE:
                raise DFGError(f"{where}: attr {path} has {len(v)} keys, limit {MAX_ATTRS_PER_NODE}")
            out = {}
            for k, e in v.items():
                if not isinstance(k, str) or len(k.encode()) > MAX_NAME_BYTES:
                    raise DFGError(f"{where}: attr {path} has a key that is not a string of <= {MAX_NAME_BYTES} bytes")
                out[k] = check(e, f"{path}.{k}", depth + 1)
            return out
        raise DFGError(f"{where}: attr {path} has type {type(v).__name__}; allowed: null, bool, int, float, str, "
                       "list, object")

    out = {}
    for k, v in attrs.items():
        if not isinstance(k, str) or not k or len(k.encode()) > MAX_NAME_BYTES:
            raise DFGError(f"{where}: attr name {k!r} must be a non-empty string of <= {MAX_NAME_BYTES} bytes")
        out[k] = check(v, k, 1)
    return out


def _default_num_outputs(op: str) -> int:
    from flashgnn.dfg.registry import default_registry

    d = default_registry().find(op)
    return d.num_outputs if d is not None else 1


class Graph:
    """A GNN inference program: named inputs, named params (constant tensors
    shipped with the DFG, e.g. weights), op nodes and named outputs."""

    def __init__(self):
        self.inputs: list[str] = []
        self.params: dict[str, torch.Tensor] = {}
        self.nodes: list[Node] = []
        self.outputs: dict[str, str] = {}
        self.meta: dict = {}
        self._next_seq = 1
        self._producers: dict[str, int] = {}  # seq -> num_outputs, for ref checks
        # (name, device) -> (the param, its copy on device): shared by every Runner of this graph.
        self._on_device: dict[tuple[str, torch.device], tuple[torch.Tensor, torch.Tensor]] = {}

    def param_on(self, name: str, device: torch.device) -> torch.Tensor:
        """Param ``name`` on ``device``, copied there once per graph — not once per node, run or
        runner (a server builds a Runner per request; the weights of a cached DFG stay on the GPU)."""
        t = self.params[name]
        if t.device == device:
            return t
        cached = self._on_device.get((name, device))
        if cached is None or cached[0] is not t:  # a param replaced since: copy again
            cached = self._on_device[(name, device)] = (t, t.to(device))
        return cached[1]

    # -- building ----------------------------------------------------------------------------

    def _taken(self, name: str, what: str) -> None:
        if name in self.params or name in self.inputs or name in self.outputs:
            raise DFGError(f"{what} {name!r}: duplicate name (already an input, param or output of this graph)")

    def create_in(self, name: str) -> Handle:
        """A named input, bound at run time (``Runner.run(g, {name: tensor})``)."""
        _check_name(name, "input")
        self._taken(name, "input")
        if len(self.inputs) >= MAX_GRAPH_INPUTS:
            raise DFGError(f"input {name!r}: graph already has {MAX_GRAPH_INPUTS} inputs (limit)")
        self.inputs.append(name)
        return Handle(name, id(self))

    def create_param(self, name: str, tensor) -> Handle:
        """A named constant stored inside the DFG (weights, biases, eps)."""
        _check_name(name, "param")
        self._taken(name, "param")
        if len(self.params) >= MAX_PARAMS:
            raise DFGError(f"param {name!r}: graph already has {MAX_PARAMS} params (limit)")
        t = torch.as_tensor(tensor).detach().to("cpu").contiguous()
        if t.dtype not in _TORCH_TO_NAME:
            raise DFGError(f"param {name!r}: dtype {t.dtype} is not one of {', '.join(DTYPES)}")
        if t.dim() > MAX_NDIM:
            raise DFGError(f"param {name!r}: {t.dim()} dimensions, limit {MAX_NDIM}")
        self.params[name] = t.clone()
        return Handle(name, id(self))

    def _resolve(self, v, where: str) -> str:
        if isinstance(v, Handle):
            if v.graph_id != id(self):
                raise DFGError(f"{where}: handle {v.ref!r} belongs to another graph")
            return v.ref
        if isinstance(v, str):
            m = _REF_RE.match(v)
            if m:
                seq, k = int(m.group(1)), int(m.group(2))
                if seq not in self._producers or k >= self._producers[seq]:
                    raise DFGError(f"{where}: input {v!r} refers to no existing node output (dangling input)")
                return v
            if v in self.inputs or v in self.params:
                return v
            raise DFGError(f"{where}: input {v!r} is not an input, param or node output of this graph "
                           "(dangling input)")
        raise DFGError(f"{where}: expected a Handle or a name, got {type(v).__name__}")

    def create_op(self, op: str, inputs, attrs: dict | None = None, num_outputs: int | None = None):
        """Add a node running ``op`` on ``inputs`` (handles or names).

        Returns one :class:`Handle` when the op has one output, else a tuple.
        ``num_outputs`` defaults to what the default registry says about
        ``op`` (1 for an op it does not know, e.g. a plugin op)."""
        if not isinstance(op, str) or not op or len(op.encode()) > MAX_NAME_BYTES or not _NAME_RE.match(op):
            raise DFGError(f"op name {op!r}: must match {_NAME_RE.pattern} and be <= {MAX_NAME_BYTES} bytes")
        if len(self.nodes) >= MAX_NODES:
            raise DFGError(f"op {op!r}: graph already has {MAX_NODES} nodes (limit)")
        seq = self._next_seq
        where = f"node {seq} ({op})"
        if isinstance(inputs, (Handle, str)):
            inputs = [inputs]
        inputs = list(inputs)
        if len(inputs) > MAX_NODE_INPUTS:
            raise DFGError(f"{where}: {len(inputs)} inputs, limit {MAX_NODE_INPUTS}")
        refs = [self._resolve(v, where) for v in inputs]
        n_out = _default_num_outputs(op) if num_outputs is None else int(num_outputs)
        if not 1 <= n_out <= MAX_NODE_OUTPUTS:
            raise DFGError(f"{where}: num_outputs {n_out} outside 1..{MAX_NODE_OUTPUTS}")
        node = Node(seq, op, refs, n_out, check_attrs(dict(attrs or {}), where))
        self.nodes.append(node)
        self._producers[seq] = n_out
        self._next_seq += 1
        hs = tuple(Handle(r, id(self)) for r in node.outputs)
        return hs[0] if n_out == 1 else hs

    def create_out(self, name: str, value) -> None:
        """Name ``value`` as a graph output (returned by ``Runner.run``)."""
        _check_name(name, "output")
        self._taken(name, "output")
        if len(self.outputs) >= MAX_GRAPH_OUTPUTS:
            raise DFGError(f"output {name!r}: graph already has {MAX_GRAPH_OUTPUTS} outputs (limit)")
        self.outputs[name] = self._resolve(value, f"output {name!r}")

    # -- checking ----------------------------------------------------------------------------

    def validate(self, registry=None) -> "Graph":
        """Structural checks (always hold for a Graph built or loaded here)
        and, with a registry, that every op exists there with this arity and
        output count. Raises :class:`DFGError` (a ValueError)."""
        _check_structure(self.inputs, self.params, self.nodes, self.outputs)
        if registry is not None:
            for n in self.nodes:
                registry.check_node(n.seq, n.op, len(n.inputs), n.num_outputs)
        return self

    def op_names(self) -> list[str]:
        return sorted({n.op for n in self.nodes})

    def __repr__(self) -> str:
        return (f"Graph(inputs={self.inputs}, params={len(self.params)}, nodes={len(self.nodes)}, "
                f"outputs={list(self.outputs)})")

    def describe(self) -> str:
        """The node list in HolisticGNN's markup style, one node per block."""
        lines = []
        for n in self.nodes:
            lines.append(f'{n.seq}: "{n.op}"  in={{{", ".join(n.inputs)}}}  out={{{", ".join(n.outputs)}}}'
                         + (f"  attrs={json.dumps(n.attrs, sort_keys=True)}" if n.attrs else ""))
        lines.extend(f"out {k} <- {v}" for k, v in self.outputs.items())
        return "\n".join(lines)

    # -- serialising -------------------------------------------------------------------------

    def to_json(self) -> dict:
        """The JSON document of the serialised form (param offsets included)."""
        self.validate()
        params, _ = self._param_layout()
        return {
            "format": FORMAT_NAME,
            "version": FORMAT_VERSION,
            "inputs": list(self.inputs),
            "params": params,
            "nodes": [{"seq": n.seq, "op": n.op, "inputs": list(n.inputs), "outputs": n.outputs, "attrs": n.attrs}
                      for n in _toposort(self.nodes)],
            "outputs": [{"name": k, "from": v} for k, v in self.outputs.items()],
            "meta": self.meta,
        }

    def _param_layout(self) -> tuple[list[dict], int]:
        out, off = [], 0
        for name, t in self.params.items():
            nbytes = t.numel() * t.element_size()
            out.append({"name": name, "dtype": _TORCH_TO_NAME[t.dtype], "shape": list(t.shape), "offset": off,
                        "nbytes": nbytes})
            off += -(-nbytes // PARAM_ALIGN) * PARAM_ALIGN
        return out, off

    def to_bytes(self) -> bytes:
        doc = self.to_json()
        doc["meta"] = check_attrs(self.meta, "meta")
        js = json.dumps(doc, separators=(",", ":"), sort_keys=False, allow_nan=False).encode()
        _, blob_len = self._param_layout()
        blob = bytearray(blob_len)
        for p in doc["params"]:
            t = self.params[p["name"]]
            raw = _tensor_bytes(t)
            blob[p["offset"]: p["offset"] + len(raw)] = raw
        body = _HEADER.pack(MAGIC, FORMAT_VERSION, 0, len(js), blob_len) + js + bytes(blob)
        out = body + _TRAILER.pack(zlib.crc32(body))
        if len(out) > MAX_DFG_BYTES:
            raise DFGError(f"serialised DFG is {len(out)} bytes, limit MAX_DFG_BYTES {MAX_DFG_BYTES}")
        return out

    def save(self, path) -> Path:
        """Write :meth:`to_bytes` to ``path`` atomically (temp file, fsync, rename, fsync of the directory)."""
        from flashgnn._durable import replace_durably

        path = Path(path)
        data = self.to_bytes()
        tmp = path.with_name(f".{path.name}.tmp{os.getpid()}")
        with open(tmp, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        replace_durably(tmp, path)
        return path

    @classmethod
    def load(cls, path, max_bytes: int = MAX_DFG_BYTES) -> "Graph":
        path = Path(path)
        size = path.stat().st_size
        if size > max_bytes:
            raise DFGError(f"{path}: file is {size} bytes, limit {max_bytes}")
        try:
            return cls.from_bytes(path.read_bytes(), max_bytes=max_bytes)
        except DFGError as e:
            raise DFGError(f"{path}: {e}") from None

    @classmethod
    def from_bytes(cls, data, max_bytes: int = MAX_DFG_BYTES) -> "Graph":
        """Decode and validate a serialised DFG (never executes code)."""
        return _decode(memoryview(data).cast("B"), max_bytes)


def _tensor_bytes(t: torch.Tensor) -> bytes:
    if t.dtype == torch.bfloat16:
        t = t.view(torch.int16)
    a = t.numpy()
    return a.astype(a.dtype.newbyteorder("<"), copy=False).tobytes()


def _toposort(nodes: list[Node]) -> list[Node]:
    """Kahn's algorithm; among ready nodes the smallest seq goes first, so a
    graph built in program order keeps that order. Raises on a cycle."""
    import heapq

    by_seq = {n.seq: n for n in nodes}
    indeg = {n.seq: 0 for n in nodes}
    users: dict[int, list[int]] = {n.seq: [] for n in nodes}
    for n in nodes:
        deps = set()
        for r in n.inputs:
            m = _REF_RE.match(r)
            if m:
                deps.add(int(m.group(1)))
        for d in deps:
            indeg[n.seq] += 1
            users[d].append(n.seq)
    ready = [s for s, d in indeg.items() if d == 0]
    heapq.heapify(ready)
    order = []
    while ready:
        s = heapq.heappop(ready)
        order.append(by_seq[s])
        for u in users[s]:
            indeg[u] -= 1
            if indeg[u] == 0:
                heapq.heappush(ready, u)
    if len(order) != len(nodes):
        stuck = sorted(s for s, d in indeg.items() if d > 0)
        raise DFGError(f"nodes {stuck[:10]}{'...' if len(stuck) > 10 else ''} form a cycle (or depend on one)")
    return order


def _check_structure(inputs, params, nodes, outputs) -> list[Node]:
    names = set()
    for what, seq in (("input", inputs), ("param", params), ("output", outputs)):
        for n in seq:
            _check_name(n, what)
            if n in names:
                raise DFGError(f"{what} {n!r}: duplicate name (already an input, param or output)")
            names.add(n)
    producers = {}
    for n in nodes:
        if n.seq in producers:
            raise DFGError(f"node seq {n.seq}: duplicate seq")
        producers[n.seq] = n.num_outputs

    def check_ref(r, where):
        if not isinstance(r, str):
            raise DFGError(f"{where}: input must be a string, got {type(r).__name__}")
        m = _REF_RE.match(r)
        if m:
            seq, k = int(m.group(1)), int(m.group(2))
            if seq not in producers or k >= producers[seq]:
                raise DFGError(f"{where}: input {r!r} refers to no node output (dangling input)")
        elif r not in inputs and r not in params:
            raise DFGError(f"{where}: input {r!r} is not an input, param or node output (dangling input)")

    for n in nodes:
        for r in n.inputs:
            check_ref(r, f"node {n.seq} ({n.op})")
    for name, r in outputs.items():
        check_ref(r, f"output {name!r}")
    return _toposort(nodes)


# -- decoding ----------------------------------------------------------------------------------


def _expect(cond: bool, msg: str) -> None:
    if not cond:
        raise DFGError(msg)


def _int_field(v, field_name: str, lo: int, hi: int) -> int:
    _expect(isinstance(v, int) and not isinstance(v, bool), f"{field_name}: expected an integer, got {v!r}")
    _expect(lo <= v <= hi, f"{field_name} = {v}: outside {lo}..{hi}")
    return v


def _list_field(v, field_name: str, limit: int) -> list:
    _expect(isinstance(v, list), f"{field_name}: expected a list, got {type(v).__name__}")
    _expect(len(v) <= limit, f"{field_name}: {len(v)} entries, limit {limit}")
    return v


def _keys(obj, field_name: str, required: set, optional: set = frozenset()) -> None:
    _expect(isinstance(obj, dict), f"{field_name}: expected an object, got {type(obj).__name__}")
    missing = required - obj.keys()
    _expect(not missing, f"{field_name}: missing field(s) {', '.join(sorted(missing))}")
    extra = obj.keys() - required - optional
    _expect(not extra, f"{field_name}: unknown field(s) {', '.join(sorted(extra))}")


def _reject_constant(c):
    raise DFGError(f"JSON: non-finite number {c} is not allowed")


def _decode(buf: memoryview, max_bytes: int) -> Graph:
    total = len(buf)
    _expect(total <= max_bytes, f"DFG payload is {total} bytes, limit {max_bytes}")
    _expect(total >= _HEADER.size + _TRAILER.size,
            f"DFG payload is {total} bytes, shorter than header + trailer ({_HEADER.size + _TRAILER.size})")
    magic, version, flags, json_len, blob_len = _HEADER.unpack_from(buf, 0)
    _expect(magic == MAGIC, f"magic {bytes(magic)!r}: not a flashgnn DFG (expected {MAGIC!r})")
    _expect(version in SUPPORTED_VERSIONS,
            f"version {version}: unsupported (this flashgnn reads DFG versions {list(SUPPORTED_VERSIONS)})")
    _expect(flags == 0, f"flags = {flags:#x}: no flags are defined in version {version} (expected 0)")
    _expect(json_len <= MAX_JSON_BYTES, f"json_len = {json_len}: limit MAX_JSON_BYTES {MAX_JSON_BYTES}")
    expect_total = _HEADER.size + json_len + blob_len + _TRAILER.size
    _expect(expect_total == total,
            f"json_len {json_len} + blob_len {blob_len} + header/trailer {_HEADER.size + _TRAILER.size} = "
            f"{expect_total} bytes, but the payload is {total} bytes")
    (crc,) = _TRAILER.unpack_from(buf, total - _TRAILER.size)
    actual = zlib.crc32(buf[: total - _TRAILER.size])
    _expect(crc == actual, f"crc32 = {crc:#010x} but the bytes hash to {actual:#010x} (corrupt or truncated DFG)")
    js_bytes = bytes(buf[_HEADER.size: _HEADER.size + json_len])
    blob = buf[_HEADER.size + json_len: _HEADER.size + json_len + blob_len]
    try:
        doc = json.loads(js_bytes.decode("utf-8"), parse_constant=_reject_constant)
    except DFGError:
        raise
    except RecursionError:
        raise DFGError("JSON: nested too deeply") from None
    except (UnicodeDecodeError, ValueError) as e:
        raise DFGError(f"JSON: not valid UTF-8 JSON ({e})") from None

    _keys(doc, "document", {"format", "version", "inputs", "params", "nodes", "outputs"}, {"meta"})
    _expect(doc["format"] == FORMAT_NAME, f"format {doc['format']!r}: expected {FORMAT_NAME!r}")
    _expect(doc["version"] == version, f"version: JSON says {doc['version']!r}, header says {version}")

    g = Graph()
    for i, name in enumerate(_list_field(doc["inputs"], "inputs", MAX_GRAPH_INPUTS)):
        _check_name(name, f"inputs[{i}]")
        _expect(name not in g.inputs, f"inputs[{i}] {name!r}: duplicate name")
        g.inputs.append(name)

    for i, p in enumerate(_list_field(doc["params"], "params", MAX_PARAMS)):
        where = f"params[{i}]"
        _keys(p, where, {"name", "dtype", "shape", "offset", "nbytes"})
        name = _check_name(p["name"], f"{where}.name")
        _expect(name not in g.params and name not in g.inputs, f"{where}.name {name!r}: duplicate name")
        _expect(isinstance(p["dtype"], str) and p["dtype"] in DTYPES,
                f"{where}.dtype {p['dtype']!r}: expected one of {', '.join(DTYPES)}")
        np_dtype, t_dtype = DTYPES[p["dtype"]]
        shape = _list_field(p["shape"], f"{where}.shape", MAX_NDIM)
        numel = 1
        for d, s in enumerate(shape):
            numel *= _int_field(s, f"{where}.shape[{d}]", 0, MAX_DIM)
        itemsize = np.dtype(np_dtype).itemsize
        nbytes = _int_field(p["nbytes"], f"{where}.nbytes", 0, MAX_DFG_BYTES)
        _expect(nbytes <= blob_len, f"{where}.nbytes = {nbytes}: past blob_len {blob_len}")
        _expect(nbytes == numel * itemsize,
                f"{where}.nbytes = {nbytes}, but shape {shape} of {p['dtype']} needs {numel * itemsize}")
        off = _int_field(p["offset"], f"{where}.offset", 0, blob_len)
        _expect(off + nbytes <= blob_len,
                f"{where}.offset {off} + nbytes {nbytes} = {off + nbytes}: past blob_len {blob_len}")
        _expect(off % itemsize == 0, f"{where}.offset {off}: not a multiple of the {p['dtype']} size {itemsize}")
        a = np.frombuffer(blob[off: off + nbytes], dtype=np.dtype(np_dtype), count=numel).reshape(shape)
        t = torch.from_numpy(a.astype(a.dtype.newbyteorder("="), copy=True))
        if t_dtype in (torch.bfloat16, torch.bool):
            if t_dtype == torch.bool:
                _expect(bool((a <= 1).all()), f"{where}: bool param holds bytes other than 0/1")
            t = t.view(t_dtype)
        g.params[name] = t

    seen = set()
    nodes = []
    for i, n in enumerate(_list_field(doc["nodes"], "nodes", MAX_NODES)):
        where = f"nodes[{i}]"
        _keys(n, where, {"seq", "op", "inputs", "outputs"}, {"attrs"})
        seq = _int_field(n["seq"], f"{where}.seq", 1, MAX_SEQ)
        _expect(seq not in seen, f"{where}.seq {seq}: duplicate seq")
        seen.add(seq)
        op = n["op"]
        _expect(isinstance(op, str) and bool(_NAME_RE.match(op)) and len(op.encode()) <= MAX_NAME_BYTES,
                f"{where}.op {op!r}: must match {_NAME_RE.pattern} and be <= {MAX_NAME_BYTES} bytes")
        ins = _list_field(n["inputs"], f"{where}.inputs", MAX_NODE_INPUTS)
        for j, r in enumerate(ins):
            _expect(isinstance(r, str) and len(r.encode()) <= MAX_NAME_BYTES,
                    f"{where}.inputs[{j}]: expected a name of <= {MAX_NAME_BYTES} bytes, got {r!r}")
        outs = _list_field(n["outputs"], f"{where}.outputs", MAX_NODE_OUTPUTS)
        _expect(len(outs) >= 1, f"{where}.outputs: a node has at least one output")
        want = [f"{seq}_{k}" for k in range(len(outs))]
        _expect(outs == want, f"{where}.outputs {outs!r}: node {seq}'s outputs must be named {want!r}")
        nodes.append(Node(seq, op, list(ins), len(outs), check_attrs(n.get("attrs", {}), f"{where} ({op})")))

    for i, o in enumerate(_list_field(doc["outputs"], "outputs", MAX_GRAPH_OUTPUTS)):
        _keys(o, f"outputs[{i}]", {"name", "from"})
        name = _check_name(o["name"], f"outputs[{i}].name")
        _expect(name not in g.outputs, f"outputs[{i}].name {name!r}: duplicate name")
        _expect(isinstance(o["from"], str), f"outputs[{i}].from: expected a string, got {o['from']!r}")
        g.outputs[name] = o["from"]

    g.nodes = _check_structure(g.inputs, g.params, nodes, g.outputs)
    g._producers = {n.seq: n.num_outputs for n in g.nodes}
    g._next_seq = max(g._producers, default=0) + 1
    g.meta = check_attrs(doc.get("meta", {}), "meta")
    return g
