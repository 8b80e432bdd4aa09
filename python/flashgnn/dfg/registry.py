"""The device table and the operation table (HolisticGNN's GraphRunner).

A *device* is a name, a priority and the torch device its kernels take their
tensors on. An *op* is a name with an arity, an output count and one kernel
per device that implements it. To run a node, the runner takes the op's
kernel on the **highest-priority device that has one** — registering a new
accelerator is registering a device with a higher priority and kernels for
the ops it speeds up; ops it lacks keep running where they did.

    reg = Registry()                      # empty; default_registry() has the built-ins
    reg.register_device("CPU", 100)
    reg.register_op("GEMM", "CPU", gemm_kernel, arity=(2, 3), doc="A @ B (+ bias)")

Kernel calling convention: ``kernel(ctx, *inputs, **attrs)`` returning one
value or a tuple of ``num_outputs`` values (torch tensors or
:class:`flashgnn.dfg.SubGraph`). ``ctx`` is a :class:`KernelContext`.

Invariants: priorities are unique (a tie would make the choice depend on
registration order); an op's arity and output count are fixed by its first
registration and every later kernel must agree; a kernel names a registered
device. Mutations hold a lock, so a server may load a plugin while requests
run (a run binds each node when it reaches it).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any, Callable

import torch

from flashgnn.dfg.limits import MAX_NAME_BYTES, MAX_NODE_INPUTS, MAX_NODE_OUTPUTS, DFGError, _NAME_RE

PRIORITY_MAX = 1_000_000
CPU_PRIORITY = 100
CUDA_PRIORITY = 200


@dataclass(frozen=True)
class Device:
    name: str
    priority: int
    torch_device: str = "cpu"


@dataclass
class OpDef:
    name: str
    min_inputs: int
    max_inputs: int | None  # None: variadic
    num_outputs: int
    doc: str = ""
    kernels: dict[str, Callable] = field(default_factory=dict)  # device name -> kernel
    # shape(sctx, *input_specs, **attrs) -> output specs (flashgnn.dfg.shapes); one per op, whatever the
    # device: every kernel of the op must produce outputs that fit it (the runner checks)
    shape: Callable | None = None

    @property
    def arity(self) -> str:
        if self.max_inputs == self.min_inputs:
            return str(self.min_inputs)
        return f"{self.min_inputs}..{'' if self.max_inputs is None else self.max_inputs}"


@dataclass
class KernelContext:
    """What a kernel knows about its call: the device it was bound to, the
    runner's context (e.g. a :class:`flashgnn.dfg.SamplerContext`), the
    node (for error messages), and ``check``: the run's deadline /
    cancellation check (None when the caller gave none). A kernel that can
    run long calls :meth:`stop_point` between pieces of its work, so an
    expired request stops inside the kernel, not only at the next node."""

    device: Device
    torch_device: torch.device
    context: Any
    seq: int
    op: str
    check: Callable | None = None

    def stop_point(self) -> None:
        """Raise the run's check error here if the request has expired or was cancelled."""
        if self.check is not None:
            self.check()


def _parse_arity(arity) -> tuple[int, int | None]:
    if isinstance(arity, int) and not isinstance(arity, bool):
        lo, hi = arity, arity
    elif isinstance(arity, tuple) and len(arity) == 2:
        lo, hi = arity
    else:
        raise ValueError(f"arity {arity!r}: expected an int or a (min, max) tuple (max None = variadic)")
    if not (isinstance(lo, int) and 0 <= lo <= MAX_NODE_INPUTS):
        raise ValueError(f"arity {arity!r}: min must be 0..{MAX_NODE_INPUTS}")
    if hi is not None and not (isinstance(hi, int) and lo <= hi <= MAX_NODE_INPUTS):
        raise ValueError(f"arity {arity!r}: max must be min..{MAX_NODE_INPUTS} or None")
    return lo, hi


def _check_registry_name(name, what: str) -> str:
    if not isinstance(name, str) or not _NAME_RE.match(name) or len(name.encode()) > MAX_NAME_BYTES:
        raise ValueError(f"{what} {name!r}: must match {_NAME_RE.pattern} and be <= {MAX_NAME_BYTES} bytes")
    return name


class Registry:
    """Device table + operation table. Empty when constructed; see
    :func:`default_registry` / :func:`builtin_registry` for the built-ins."""

    def __init__(self):
        self._lock = threading.RLock()
        self._devices: dict[str, Device] = {}
        self._ops: dict[str, OpDef] = {}

    # -- registration ---------------------------------------------------------------------------

    def register_device(self, name: str, priority: int, torch_device: str = "cpu") -> Device:
        """Add a device, or change an existing device's priority/torch device.
        Higher priority wins; two devices may not share a priority."""
        _check_registry_name(name, "device")
        if not (isinstance(priority, int) and not isinstance(priority, bool) and 0 <= priority <= PRIORITY_MAX):
            raise ValueError(f"device {name!r}: priority {priority!r} must be an integer in 0..{PRIORITY_MAX}")
        td = torch.device(torch_device)  # raises on a malformed device string
        with self._lock:
            for d in self._devices.values():
                if d.priority == priority and d.name != name:
                    raise ValueError(f"device {name!r}: priority {priority} is already {d.name!r}'s; priorities must "
                                     "be unique so that the choice of kernel is well defined")
            dev = Device(name, priority, str(td))
            self._devices[name] = dev
            return dev

    def register_op(self, op_name: str, device: str, kernel: Callable, arity=1, num_outputs: int = 1,
                    doc: str = "", shape: Callable | None = None) -> OpDef:
        """Register ``kernel`` as ``op_name``'s implementation on ``device``.

        ``arity``: number of inputs, or ``(min, max)`` with ``max=None`` for
        variadic ops. A second registration of the same op on another device
        adds a kernel (same arity and output count required); on the same
        device it replaces the kernel. ``shape``: the op's shape function
        (see :mod:`flashgnn.dfg.shapes`); a runner with a memory bound refuses
        a node whose op has none."""
        _check_registry_name(op_name, "op")
        if not callable(kernel):
            raise ValueError(f"op {op_name!r} on {device!r}: kernel {kernel!r} is not callable")
        lo, hi = _parse_arity(arity)
        if not (isinstance(num_outputs, int) and 1 <= num_outputs <= MAX_NODE_OUTPUTS):
            raise ValueError(f"op {op_name!r}: num_outputs {num_outputs!r} outside 1..{MAX_NODE_OUTPUTS}")
        if shape is not None and not callable(shape):
            raise ValueError(f"op {op_name!r}: shape function {shape!r} is not callable")
        with self._lock:
            if device not in self._devices:
                raise ValueError(f"op {op_name!r}: device {device!r} is not registered "
                                 f"(registered: {', '.join(self._devices) or 'none'}); call register_device first")
            d = self._ops.get(op_name)
            if d is None:
                d = self._ops[op_name] = OpDef(op_name, lo, hi, num_outputs, doc)
            elif (d.min_inputs, d.max_inputs, d.num_outputs) != (lo, hi, num_outputs):
                raise ValueError(f"op {op_name!r} on {device!r}: arity {arity!r}/num_outputs {num_outputs} disagree "
                                 f"with its existing definition (arity {d.arity}, num_outputs {d.num_outputs})")
            if doc and not d.doc:
                d.doc = doc
            if shape is not None:
                d.shape = shape
            d.kernels[device] = kernel
            return d

    def register_shape(self, op_name: str, shape: Callable) -> OpDef:
        """Set (or replace) the shape function of a registered op."""
        if not callable(shape):
            raise ValueError(f"op {op_name!r}: shape function {shape!r} is not callable")
        with self._lock:
            d = self.op(op_name)
            d.shape = shape
            return d

    def unregister_device(self, name: str) -> None:
        """Remove a device and its kernels (ops left without kernels are removed)."""
        with self._lock:
            if name not in self._devices:
                raise ValueError(f"device {name!r} is not registered")
            del self._devices[name]
            for op in list(self._ops):
                self._ops[op].kernels.pop(name, None)
                if not self._ops[op].kernels:
                    del self._ops[op]

    # -- lookup -----------------------------------------------------------------------------------

    def devices(self) -> list[Device]:
        """The device table, highest priority first."""
        with self._lock:
            return sorted(self._devices.values(), key=lambda d: -d.priority)

    def device(self, name: str) -> Device:
        with self._lock:
            if name not in self._devices:
                raise ValueError(f"device {name!r} is not registered")
            return self._devices[name]

    def ops(self) -> list[str]:
        with self._lock:
            return sorted(self._ops)

    def find(self, op_name: str) -> OpDef | None:
        with self._lock:
            return self._ops.get(op_name)

    def op(self, op_name: str) -> OpDef:
        d = self.find(op_name)
        if d is None:
            raise DFGError(f"op {op_name!r} is not registered (known ops: {', '.join(self.ops())})")
        return d

    def select(self, op_name: str) -> tuple[Device, Callable]:
        """The (device, kernel) a node running ``op_name`` is bound to."""
        with self._lock:
            d = self.op(op_name)
            best = max(d.kernels, key=lambda dev: self._devices[dev].priority)
            return self._devices[best], d.kernels[best]

    def check_node(self, seq: int, op_name: str, n_inputs: int, n_outputs: int) -> None:
        """Raise :class:`DFGError` unless a node with these counts can run here."""
        d = self.find(op_name)
        where = f"node {seq} ({op_name})"
        if d is None:
            raise DFGError(f"{where}: unknown op {op_name!r} (registered ops: {', '.join(self.ops())})")
        if n_inputs < d.min_inputs or (d.max_inputs is not None and n_inputs > d.max_inputs):
            raise DFGError(f"{where}: {n_inputs} inputs, but {op_name} takes {d.arity}")
        if n_outputs != d.num_outputs:
            raise DFGError(f"{where}: declares {n_outputs} outputs, but {op_name} produces {d.num_outputs}")

    def table(self) -> dict:
        """Both tables as plain data (for ``flashgnn`` server reports)."""
        with self._lock:
            return {
                "devices": [{"name": d.name, "priority": d.priority, "torch_device": d.torch_device}
                            for d in self.devices()],
                "ops": [{"name": d.name, "arity": d.arity, "num_outputs": d.num_outputs, "doc": d.doc,
                         "shape": d.shape is not None,
                         "devices": sorted(d.kernels, key=lambda k: -self._devices[k].priority)}
                        for _, d in sorted(self._ops.items())],
            }

    def copy(self) -> "Registry":
        with self._lock:
            r = Registry()
            r._devices = dict(self._devices)
            r._ops = {k: OpDef(d.name, d.min_inputs, d.max_inputs, d.num_outputs, d.doc, dict(d.kernels), d.shape)
                      for k, d in self._ops.items()}
            return r

    def _assign(self, other: "Registry") -> None:
        """Take ``other``'s tables (used to make a plugin load all-or-nothing)."""
        with self._lock:
            self._devices = dict(other._devices)
            self._ops = other.copy()._ops


def builtin_registry() -> Registry:
    """A fresh registry holding the built-in devices and ops: "CPU" (priority
    100) always, "CUDA" (priority 200) when ``torch.cuda.is_available()``."""
    from flashgnn.dfg import ops
    from flashgnn.dfg.shapes import SHAPES  # every built-in op has a shape function (tests check the table)

    r = Registry()
    r.register_device("CPU", CPU_PRIORITY, "cpu")
    if torch.cuda.is_available():
        r.register_device("CUDA", CUDA_PRIORITY, "cuda")
    ops.register_builtins(r, SHAPES)
    return r


_DEFAULT: Registry | None = None
_DEFAULT_LOCK = threading.Lock()


def default_registry() -> Registry:
    """The process-wide registry that :class:`Runner` and :func:`load_plugin`
    use when given none (created with the built-ins on first use)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = builtin_registry()
        return _DEFAULT
