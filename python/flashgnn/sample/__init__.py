"""Sampling and feature gathering: one engine call per mini-batch, and how much memory it may use.

- :mod:`~flashgnn.sample.sampler` — :class:`Sampler` and :class:`Cache` (numpy in, numpy out; no torch).
- :mod:`~flashgnn.sample.budget` — ``--memory-budget``: what the process may use and how it is split
  between engine buffers, prefetch window, cache and lookahead.
- :mod:`~flashgnn.sample.device` — :class:`DeviceCache`, the GPU tier.
"""
