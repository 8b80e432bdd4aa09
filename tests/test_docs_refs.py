"""Every Markdown file the repository's docs, sources and tests name exists in
the repository (a reference to a document the reader cannot open is a dead
end; project rules that live elsewhere are written into docs/ instead)."""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
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
