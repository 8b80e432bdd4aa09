"""The Python package's import graph: no cycles, and the command line sits on
top (the library never imports ``flashgnn.cli``).

Every ``import`` statement counts, also the ones inside functions: a lazy
import hides a cycle from the interpreter, not from a reader."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parents[2] / "python" / "flashgnn"
# Entry points that exist to run the CLI.
CLI_USERS = {"flashgnn.__main__"}


def modules() -> dict[str, Path]:
    out = {}
    for f in PKG.rglob("*.py"):
        parts = list(f.relative_to(PKG.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out[".".join(parts)] = f
    return out


def import_graph() -> dict[str, set[str]]:
    mods = modules()
    edges: dict[str, set[str]] = {m: set() for m in mods}
    for m, f in mods.items():
        pkg = m.split(".") if f.name == "__init__.py" else m.split(".")[:-1]
        for node in ast.walk(ast.parse(f.read_text(), str(f))):
            targets = []
            if isinstance(node, ast.ImportFrom):
                base = (".".join(pkg[: len(pkg) - node.level + 1] + ([node.module] if node.module else []))
                        if node.level else node.module)
                for a in node.names:
                    targets.append(f"{base}.{a.name}" if f"{base}.{a.name}" in mods else base)
            elif isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            for t in targets:
                # A package's own submodules importing it (or it them) is not a cycle of layers.
                if t in mods and t != m and not m.startswith(t + "."):
                    edges[m].add(t)
    return edges


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    found = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(edges[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(edges):
        if v not in index:
            visit(v)
    return found


def test_walker_sees_the_package():
    edges = import_graph()
    assert len(edges) > 40
    assert "flashgnn.loader.neighbor" in edges["flashgnn.loader.presample"]  # a lazy import inside a function counts
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_library_does_not_import_the_cli():
    bad = [f"{m} imports {t}" for m, ts in import_graph().items() for t in ts
           if (t == "flashgnn.cli" or t.startswith("flashgnn.cli.")) and not m.startswith("flashgnn.cli")
           and m not in CLI_USERS]
    assert not bad, "\n".join(bad)


# The layers, lowest first: a module may import its own layer and the layers below it, never above.
# Private helpers (`flashgnn._*`) are the ground floor. The order is the one ARCHITECTURE.md draws.
LAYERS = [
    {"flashgnn._core", "flashgnn._util", "flashgnn._durable", "flashgnn._progress", "flashgnn._malloc"},
    {"flashgnn.store"},
    {"flashgnn.sample"},
    {"flashgnn.loader"},
    {"flashgnn.pyg", "flashgnn.nn"},
    {"flashgnn.embed", "flashgnn.recommend", "flashgnn.train", "flashgnn.ssd"},
    {"flashgnn.dfg"},
    {"flashgnn.serve"},
    {"flashgnn.cli", "flashgnn.__main__"},
]


def layer_of(module: str) -> int | None:
    parts = module.split(".")
    for n in range(len(parts), 1, -1):
        head = ".".join(parts[:n])
        for i, layer in enumerate(LAYERS):
            if head in layer:
                return i
    return None


def test_every_module_has_a_layer():
    missing = sorted(m for m in import_graph() if m != "flashgnn" and layer_of(m) is None)
    assert not missing, f"modules outside every layer (add them to LAYERS and ARCHITECTURE.md): {missing}"


def test_imports_point_down_the_layers():
    up = [f"{m} (layer {layer_of(m)}) imports {t} (layer {layer_of(t)})" for m, ts in import_graph().items()
          if m != "flashgnn" for t in ts if t != "flashgnn" and layer_of(t) > layer_of(m)]
    assert not up, "\n".join(up)


def test_layer_check_can_fail():
    assert layer_of("flashgnn.store.dataset") < layer_of("flashgnn.loader.neighbor") < layer_of("flashgnn.cli.commands")
    assert layer_of("flashgnn.nosuch") is None


def test_benchmarks_are_not_installed():
    """Benchmarks, crash harnesses and the demo live in the repository's `benchmarks/`, outside the package."""
    assert not (PKG / "bench").exists() and not (PKG / "demo.py").exists()
    assert not (PKG / "serve" / "crashtest.py").exists()
    leaked = [str(f) for f in PKG.rglob("*.py") if "from benchmarks" in f.read_text() or "import benchmarks" in f.read_text()]
    assert not leaked, leaked


def test_import_flashgnn_stays_light():
    """`import flashgnn` (the CLI, the builder, `flashgnn build`) loads neither torch nor grpc: they load on first
    use of a loader, a model or the client."""
    import subprocess
    import sys

    code = "import flashgnn, sys; print(sorted(m for m in ('torch', 'torch_geometric', 'grpc') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[]", f"import flashgnn loaded {out}"
