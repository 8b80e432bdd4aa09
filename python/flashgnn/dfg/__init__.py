"""GraphRunner: GNN inference programs as dataflow graphs (DFGs).

A DFG names its inputs (``create_in``), carries its weights (``create_param``),
chains ops (``create_op``) and names its outputs (``create_out``); it
serialises to a versioned, validated byte string (``to_bytes`` / ``save``)
that a server can accept from the network, because loading one runs no code.
A :class:`Runner` executes it: each node is bound to the kernel of the
highest-priority device that implements its op (the :class:`Registry`'s
device and operation tables), and plugins add devices and ops.

    import flashgnn.dfg as dfg
    g = dfg.models.from_checkpoint("ck/")
    out = dfg.Runner(context=dfg.SamplerContext("data/demo")).run(g, {"Batch": seeds})["Result"]

Before any kernel runs, every node's output shape and dtype is inferred
(:mod:`flashgnn.dfg.shapes`) and the run's peak memory bounded; see
``docs/graphrunner.md`` for the format, the op list and the plugin interface.
"""

from flashgnn.dfg import models
from flashgnn.dfg.graph import FORMAT_VERSION, MAGIC, DFGError, Graph, Handle, Node
from flashgnn.dfg.memory import ByteLedger, LedgerFull
from flashgnn.dfg.ops import SubGraph
from flashgnn.dfg.plugin import load_plugin, load_plugin_source
from flashgnn.dfg.registry import Device, KernelContext, OpDef, Registry, builtin_registry, default_registry
from flashgnn.dfg.runner import NodeError, Runner, SamplerContext, run
from flashgnn.dfg.shapes import Inferred, Plan, ShapeError, SubGraphSpec, TensorSpec

__all__ = [
    "ByteLedger", "DFGError", "Device", "FORMAT_VERSION", "Graph", "Handle", "Inferred", "KernelContext", "LedgerFull",
    "MAGIC", "Node", "NodeError", "OpDef", "Plan", "Registry", "Runner", "SamplerContext", "ShapeError", "SubGraph",
    "SubGraphSpec", "TensorSpec", "builtin_registry", "default_registry", "load_plugin", "load_plugin_source", "models",
    "run",
]
