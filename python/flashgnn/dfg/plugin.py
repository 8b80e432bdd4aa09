"""Plugins: new devices and new ops without touching flashgnn (HolisticGNN's
XBuilder/Plugin interface, with a Python module in place of a shared object).

A plugin is a module with a ``register(registry)`` function:

    def register(registry):
        registry.register_device("MyAccel", 300)            # above CPU (100) and CUDA (200)
        registry.register_op("GEMM", "MyAccel", my_gemm, arity=(2, 3))
        registry.register_op("MyOp", "MyAccel", my_op, arity=1, doc="...")

A plugin is code and runs with the loading process's rights: loading one is
a decision of whoever starts the process (the server allows
:func:`load_plugin_source` only when started with plugins enabled). A load is
all-or-nothing: ``register`` works on a copy of the registry, which replaces
the real one only if it returns without raising.
"""

from __future__ import annotations

import importlib
import importlib.util
import os
import re
import sys
import types
from pathlib import Path

from flashgnn.dfg.registry import Registry, default_registry

MAX_PLUGIN_SOURCE_BYTES = 1 << 20
_MODULE_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)*$")


def _register(module: types.ModuleType, registry: Registry | None, what: str) -> types.ModuleType:
    fn = getattr(module, "register", None)
    if not callable(fn):
        raise ValueError(f"plugin {what}: has no register(registry) function")
    target = registry if registry is not None else default_registry()
    scratch = target.copy()
    fn(scratch)
    target._assign(scratch)
    return module


def load_plugin(module_or_path, registry: Registry | None = None) -> types.ModuleType:
    """Import a plugin by dotted module name or from a ``.py`` file and call
    its ``register(registry)`` (default: the process-wide registry)."""
    if isinstance(module_or_path, types.ModuleType):
        return _register(module_or_path, registry, module_or_path.__name__)
    text = os.fspath(module_or_path)
    path = Path(text)
    if text.endswith(".py") or os.sep in text or path.exists():
        if not path.is_file():
            raise ValueError(f"plugin {text!r}: no such file")
        name = f"flashgnn_dfg_plugin_{re.sub(r'[^A-Za-z0-9_]', '_', path.stem)}"
        spec = importlib.util.spec_from_file_location(name, path)
        if spec is None or spec.loader is None:
            raise ValueError(f"plugin {text!r}: cannot be imported as a Python module")
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return _register(module, registry, text)
    if not _MODULE_NAME_RE.match(text):
        raise ValueError(f"plugin {text!r}: neither a .py file nor a dotted module name")
    return _register(importlib.import_module(text), registry, text)


def load_plugin_source(name: str, source_text: str, registry: Registry | None = None) -> types.ModuleType:
    """Run ``source_text`` as module ``name`` and call its ``register``. For
    the server's plugin upload; whether to allow it is the caller's call."""
    if not isinstance(name, str) or not _MODULE_NAME_RE.match(name) or "." in name:
        raise ValueError(f"plugin name {name!r}: must be a Python identifier")
    if not isinstance(source_text, str):
        raise ValueError(f"plugin {name}: source must be text, got {type(source_text).__name__}")
    if len(source_text.encode()) > MAX_PLUGIN_SOURCE_BYTES:
        raise ValueError(f"plugin {name}: source is {len(source_text.encode())} bytes, limit {MAX_PLUGIN_SOURCE_BYTES}")
    code = compile(source_text, f"<flashgnn dfg plugin {name}>", "exec")
    module = types.ModuleType(f"flashgnn_dfg_plugin_{name}")
    module.__file__ = f"<flashgnn dfg plugin {name}>"
    # registered before exec, as an import would, so that e.g. dataclasses defined in it resolve their module
    sys.modules[module.__name__] = module
    exec(code, module.__dict__)  # noqa: S102 - a plugin is code by definition; gated by the caller
    return _register(module, registry, name)
