"""The process's one cache per dataset: loaders, the PyG backend and
``embed`` built without an explicit ``cache=`` share the
:class:`flashgnn.Cache` registered here for their dataset, sized once by
:mod:`flashgnn.sample.budget` with the first caller's fanouts, batch size and
producers.

Invariant: one cache per (process, canonical directory, dataset id) at a
time; held weakly, so it goes when its last loader goes, and a rebuild in
place (another dataset id) gets its own.
"""

from __future__ import annotations

import os
import threading
import weakref

from flashgnn.sample import budget as _budget
from flashgnn.sample.sampler import DEFAULT_HOT_FRACTION

# One cache per dataset per process. Loaders built without an explicit
# ``cache=`` take the cache registered for their dataset here, so a train and a
# val loader (and the PyG remote backend's feature store and sampler) share one
# budget instead of each claiming all available memory. Keyed by process id,
# canonical directory and the manifest's dataset_id (a rebuild in place is
# another dataset); held weakly, so the cache goes when its last loader goes.
_SHARED: dict[tuple, "weakref.ref"] = {}
_SHARED_LOCK = threading.Lock()


def _dataset_key(path) -> tuple:
    from flashgnn.store.dataset import Dataset

    ds = path if isinstance(path, Dataset) else Dataset(os.fspath(path))
    return (os.getpid(), os.path.realpath(ds.path), ds.manifest.get("dataset_id"))


def loader_cache(cache, path, fanouts, batch_size: int, memory_budget="auto", *, device_cache=None,
                 given_name: str = "cache=", who: str = "flashgnn", **kw):
    """A loader's host cache: the process's :func:`shared_cache` for the
    dataset, unless the caller brought its own tier (``cache`` or
    ``device_cache``, returned as given): then an explicit ``memory_budget``
    is refused, since that tier is already sized."""
    if cache is None and device_cache is None:
        return shared_cache(path, fanouts, batch_size, memory_budget, who=who, **kw)
    if memory_budget not in ("auto", 0, None):
        raise ValueError(f"{who}: memory_budget={memory_budget!r} and {given_name} both given: the cache passed in is "
                         "already sized; leave memory_budget out")
    codec = kw.get("row_codec", "none")
    if codec != "none" and codec != getattr(cache, "row_codec", "none"):
        raise ValueError(f"{who}: row_codec={codec!r} and {given_name} both given: the cache passed in holds rows as "
                         f"{getattr(cache, 'row_codec', 'none')!r}; give row_codec to flashgnn.Cache instead")
    return cache


def shared_cache(path, fanouts, batch_size: int, memory_budget="auto", *, workers: int = 1, prefetch: int = 4,
                 quiet: bool = False, who: str = "flashgnn", engine: str | None = None, sampler=None, pool=None,
                 row_codec: str = "none"):
    """The :class:`flashgnn.Cache` every loader on dataset ``path`` in this
    process shares, made on first use; None for ``memory_budget`` 0/None.

    ``memory_budget``: ``"auto"`` (:func:`auto`, without lookahead: the
    loader's own window is not part of the shared cache) or a size in bytes
    (:func:`split`; refused with the minimum when below engine + window). The
    first loader on a dataset sizes the cache with its fanouts, batch size and
    producers; later ones reuse it as it is (a different explicit size is
    reported, not applied). One line describing the split is printed to
    stderr when the cache is made, unless ``quiet``. ``sampler``: the
    caller's own :class:`flashgnn.Sampler`, which then measures the batches
    and chooses the hot set (no sampler is opened for either); the caller
    attaches the cache to it. ``pool``: the seeds the caller's batches
    draw from (:func:`flashgnn.sample.budget.batch_bytes`). ``row_codec``: how
    the cache's static set holds float32 rows (:class:`flashgnn.Cache`); the
    budget then counts rows at that size. A later loader asking for another
    codec than the shared cache's is refused, naming both."""
    import sys

    if memory_budget in (0, None):
        return None
    if isinstance(memory_budget, str):
        memory_budget = _budget.parse_budget(memory_budget)
        if memory_budget == 0:
            return None
    key = _dataset_key(path)
    with _SHARED_LOCK:
        ref = _SHARED.get(key)
        cache = ref() if ref is not None else None
        if cache is not None:
            if row_codec != cache.row_codec:
                raise ValueError(f"{who}: row_codec={row_codec!r}, but this process's cache for {key[1]} holds rows "
                                 f"as {cache.row_codec!r}: one cache per dataset per process")
            if memory_budget != "auto" and memory_budget != cache.requested and not quiet:
                print(f"{who}: {key[1]}: sharing the cache already made for this dataset in this process "
                      f"({cache.budget:,} bytes, memory_budget={cache.requested!r}); memory_budget={memory_budget!r} "
                      "is not applied", file=sys.stderr, flush=True)
            return cache
        from flashgnn.sample.sampler import Cache

        ds_path = key[1]
        per = None if sampler is None else _budget.batch_bytes(ds_path, fanouts, batch_size, sampler=sampler,
                                                               pool=pool)
        if memory_budget == "auto":
            s = _budget.auto(ds_path, fanouts, batch_size, workers=workers, prefetch=prefetch, lookahead=0,
                             training=False, engine=engine, per_batch=per, row_codec=row_codec)
        else:
            s = _budget.split(memory_budget, ds_path, fanouts, batch_size, workers=workers, prefetch=prefetch,
                              per_batch=per, row_codec=row_codec)
        if not quiet:
            print(f"{who}: {ds_path}: {_budget.describe(s)}; one cache per dataset per process, shared by its loaders",
                  file=sys.stderr, flush=True)
        if not s.get("cache"):
            return None
        if sampler is not None:
            cache = Cache.for_sampler(sampler, s["cache"], hot_fraction=DEFAULT_HOT_FRACTION, batch_size=batch_size,
                                      row_codec=row_codec)
        else:
            cache = Cache(ds_path, fanouts, s["cache"], hot_fraction=DEFAULT_HOT_FRACTION, batch_size=batch_size,
                          row_codec=row_codec)
        cache.requested, cache.split = memory_budget, s
        _SHARED[key] = weakref.ref(cache)
        return cache


