"""PyTorch data loading: PyG ``Data`` batches from the sampling layer.

- :mod:`~flashgnn.loader.neighbor` — :class:`NeighborLoader` / :class:`RandomWalkLoader` (PyG's names,
  arguments and defaults; ``_args`` maps and refuses PyG arguments), ``run_ahead``.
- :mod:`~flashgnn.loader.link` — :class:`LinkNeighborLoader` (PyG's link-prediction batches: seed edges and
  negatives in one engine request).
- :mod:`~flashgnn.loader.window` — the prefetch window's row gathering and Belady row cache.
- :mod:`~flashgnn.loader.presample` — ``flashgnn presample`` and :class:`PresampledLoader`.
"""
