"""The Python package's import graph: no cycles, and the command line sits on
top (the library never imports ``flashgnn.cli``).

Every ``import`` statement counts, also the ones inside functions: a lazy
import hides a cycle from the interpreter, not from a reader."""
from __future__ import annotations

import ast
from pathlib import Path

PKG = Path(__file__).resolve().parent.parent / "python" / "flashgnn"
# Entry points that exist to run the CLI.
CLI_USERS = {"flashgnn.__main__", "flashgnn.demo"}


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
    assert "flashgnn.loader" in edges["flashgnn.presample"]  # a lazy import inside a function counts
    assert cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles:\n" + "\n".join(" -> ".join(c) for c in found)


def test_library_does_not_import_the_cli():
    bad = [f"{m} imports {t}" for m, ts in import_graph().items() for t in ts
           if (t == "flashgnn.cli" or t.startswith("flashgnn.cli.")) and not m.startswith("flashgnn.cli")
           and m not in CLI_USERS]
    assert not bad, "\n".join(bad)
