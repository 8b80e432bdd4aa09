"""The storage engineer's view: how flashgnn's reads stress a device, measured and modelled.

- :mod:`~flashgnn.ssd.bench` — ``flashgnn bench``: every read engine measured on the user's own dataset,
  CPU per extent, cache hits and misses (a product command, like ``fio`` for this workload; the
  comparative benchmarks in the repository's ``benchmarks/`` directory are not installed).
- :mod:`~flashgnn.ssd.reuse` — the cross-batch reuse report ``flashgnn bench`` prints.
- :mod:`~flashgnn.ssd.simulate` — ``flashgnn trace`` / ``simulate`` / ``fit-ssd``: traces of real runs
  replayed by the SSD design simulator (the Rust crate ``flashgnn-sim``).
- :mod:`~flashgnn.ssd.plots` — PNG figures (matplotlib, the ``plots`` extra).
"""
