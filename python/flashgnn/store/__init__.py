"""The on-disk store seen from Python: open, build, verify, scrub, mutate, stripe.

Everything here is a thin layer over the Rust crates (``flashgnn-format``,
``-store``, ``-build``, ``-mutate``) reached through ``flashgnn._core``:

- :mod:`~flashgnn.store.dataset` — :class:`Dataset`, read-only access to a built dataset.
- :mod:`~flashgnn.store.jobs` — ``build``, ``generate``, ``verify``, ``scrub``: long jobs with progress.
- :mod:`~flashgnn.store.graph` — :class:`MutableGraph`: unit updates (WAL, group commit, compaction).
- :mod:`~flashgnn.store.stripe` — a dataset's files spread over several directories (devices).
- :mod:`~flashgnn.store.ogb_link` — OGB link-prediction splits (``.pt``) staged for the build.
"""
