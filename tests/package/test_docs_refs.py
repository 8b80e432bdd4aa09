"""Every Markdown file the repository's docs, sources and tests name exists in
the repository (a reference to a document the reader cannot open is a dead
end; project rules that live elsewhere are written into docs/ instead), and
ARCHITECTURE.md stays a map: at most 25 KB, and every `python/`, `crates/`,
`benchmarks/` and `docs/` path it names exists."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
REF = re.compile(r"(?<![\w/.-])((?:[\w.-]+/)*[\w.-]+\.md)\b")


def tracked() -> list[Path]:
    out = subprocess.run(["git", "ls-files", "*.md", "*.py", "*.rs", "*.toml", "Makefile"], cwd=ROOT,
                         capture_output=True, text=True, check=True).stdout
    return [ROOT / p for p in out.split()]


def resolves(ref: str, src: Path) -> bool:
    return any((base / ref).exists() for base in (ROOT, src.parent, ROOT / "docs"))


def test_every_named_markdown_file_exists():
    files = tracked()
    assert len(files) > 50, "git ls-files found too little: not a checkout?"
    dead = []
    for f in files:
        if not f.exists():
            continue
        for n, line in enumerate(f.read_text(errors="replace").splitlines(), 1):
            for ref in REF.findall(line):
                if not resolves(ref, f):
                    dead.append(f"{f.relative_to(ROOT)}:{n}: {ref}")
    assert not dead, "references to files the repository lacks:\n" + "\n".join(dead)


# ARCHITECTURE.md is a map, not a manual: details go to docs/ (at 66 KB it had gone stale in places).
ARCHITECTURE_BYTES_MAX = 25_000
# A path into the tree, as the map names them: `python/flashgnn/loader/neighbor.py:run_ahead`,
# `crates/flashgnn-io/src/`, `benchmarks/`, `docs/format.md` (a `:item` suffix is not part of the path).
TREE_PATH = re.compile(r"(?<![\w/.-])((?:python|crates|benchmarks|docs)/[\w./-]*)")


def named_paths(text: str) -> list[str]:
    return sorted({p.rstrip(".") for p in TREE_PATH.findall(text)})


def test_architecture_stays_a_map():
    size = (ROOT / "ARCHITECTURE.md").stat().st_size
    assert size <= ARCHITECTURE_BYTES_MAX, (
        f"ARCHITECTURE.md is {size} bytes (at most {ARCHITECTURE_BYTES_MAX}): move detail to docs/")


def test_architecture_names_only_paths_that_exist():
    paths = named_paths((ROOT / "ARCHITECTURE.md").read_text())
    assert len(paths) > 30, f"found only {len(paths)} paths: is the pattern still right?"
    missing = [p for p in paths if not (ROOT / p).exists()]
    assert not missing, "ARCHITECTURE.md names paths the repository lacks:\n" + "\n".join(missing)


def test_path_pattern_sees_what_the_map_writes():
    text = ("see `python/flashgnn/loader/neighbor.py:run_ahead`, `crates/flashgnn-io/src/` and "
            "benchmarks/. Also docs/format.md, not tests/x.py or my/python/y.py")
    assert named_paths(text) == ["benchmarks/", "crates/flashgnn-io/src/", "docs/format.md",
                                 "python/flashgnn/loader/neighbor.py"]
