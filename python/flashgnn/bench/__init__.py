"""Benchmarks (`make bench*`). Each prints ratios against a baseline measured
in the same run and can emit JSON with ``--json FILE``."""
