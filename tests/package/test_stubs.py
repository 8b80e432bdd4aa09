"""`flashgnn/_core.pyi` describes the built extension: every public object of
`flashgnn._core` is in the stub with the same parameter names and defaults
count, every class lists the same methods and properties, and the exception
classes have the same bases. `py.typed` ships beside it, and the lazily
imported names of `flashgnn` are visible to type checkers."""
from __future__ import annotations

import ast
import inspect
from pathlib import Path

import flashgnn
import flashgnn._core as core

PKG = Path(flashgnn.__file__).resolve().parent
STUB = ast.parse((PKG / "_core.pyi").read_text())


def public(obj) -> set[str]:
    return {n for n in vars(obj) if not n.startswith("_") or n in ("__iter__", "__next__", "__len__")} - {"__version__"}


def runtime_params(obj) -> list[str] | None:
    sig = getattr(obj, "__text_signature__", None)
    if sig is None:
        return None
    params = list(inspect.signature(obj).parameters) if not sig.startswith("($self") else [
        p for p in sig.strip("()").replace("$", "").split(",")]
    return [p.split("=")[0].strip() for p in params if p.strip() and p.strip() not in ("/", "*")]


def stub_params(fn: ast.FunctionDef) -> list[str]:
    return [a.arg for a in fn.args.posonlyargs + fn.args.args + fn.args.kwonlyargs]


def stub_defs():
    out = {}
    for node in STUB.body:
        if isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            out[node.name] = node
        elif isinstance(node, ast.AnnAssign):
            out[node.target.id] = node
    return out


def test_stub_names_every_public_object():
    defs = stub_defs()
    names = {n for n in dir(core) if not n.startswith("__")} | {"__version__"}
    assert names - set(defs) == set(), "in _core but not in _core.pyi"
    assert {n for n in defs if not n.startswith("_") or n in names} - names <= {"_Path", "_Ids"}, \
        "in _core.pyi but not in _core: " + str({n for n in defs if not n.startswith("_")} - names)


def test_stub_signatures_match():
    defs = stub_defs()
    bad = []
    for name, node in defs.items():
        obj = getattr(core, name, None)
        if obj is None:
            continue
        if isinstance(node, ast.FunctionDef):
            want = runtime_params(obj)
            if want is not None and stub_params(node) != want:
                bad.append(f"{name}: stub {stub_params(node)} vs runtime {want}")
        elif isinstance(node, ast.ClassDef):
            if issubclass(obj, BaseException):
                bases = [b.id for b in node.bases]
                if bases != [c.__name__ for c in obj.__bases__]:
                    bad.append(f"{name}: stub bases {bases} vs runtime {[c.__name__ for c in obj.__bases__]}")
                continue
            members = {m.name: m for m in node.body if isinstance(m, ast.FunctionDef)}
            init = members.pop("__init__", None)
            want = runtime_params(obj)
            if want is not None:
                got = stub_params(init)[1:] if init else None
                if got != want:
                    bad.append(f"{name}(): stub {got} vs runtime {want}")
            if set(members) != public(obj):
                bad.append(f"{name}: stub members {sorted(set(members) ^ public(obj))} differ from runtime")
            for m, fn in members.items():
                w = runtime_params(getattr(obj, m))
                if w is not None and stub_params(fn) != w:
                    bad.append(f"{name}.{m}: stub {stub_params(fn)} vs runtime {w}")
    assert not bad, "\n".join(bad)


def test_typed_package_and_lazy_names_visible():
    assert (PKG / "py.typed").exists()
    init = ast.parse((PKG / "__init__.py").read_text())
    guarded = set()
    for node in ast.walk(init):
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            for sub in ast.walk(node):
                if isinstance(sub, (ast.ImportFrom, ast.Import)):
                    guarded |= {a.asname or a.name for a in sub.names}
    assert set(flashgnn._LAZY) <= guarded, f"lazy names hidden from type checkers: {set(flashgnn._LAZY) - guarded}"
