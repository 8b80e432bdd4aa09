"""Comparative benchmarks, crash harnesses and the demo: run from the repository root by ``make bench*``
and ``make demo`` (``python -m benchmarks.NAME``); not part of the installed package."""
