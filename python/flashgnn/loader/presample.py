"""Pre-sampled training: sample E epochs once, store the subgraphs, train
from them (the RDMA study's pre-sampled pipeline; DiskGNN's offline sampling).

``presample(dataset, out, fanouts, batch_size, epochs)`` runs exactly the
batches :class:`flashgnn.NeighborLoader` would run for ``split`` with the same
``seed`` (same epoch permutation, same per-batch sampler seed) and stores each
batch's *structure* — ``n_id``, local ``row``/``col``, per-hop counts, the
seeds' positions and labels — but not the feature rows: those are what makes
online sampling expensive to store (a batch touches ~40 K rows), and gathering
them is one engine call over known ids. :class:`PresampledLoader` reads the
stored batches sequentially, gathers ``x`` for each through the engine, and
yields the same ``Data`` as the online loader, so training from a presample
gives bit-identical weights to training online with the same seed.

On-disk form (``docs/format.md``, "Pre-sampled batches"): a directory
published atomically (written as ``.OUT.tmp-PID-N``, files fsynced, swapped
in with ``renameat2(RENAME_EXCHANGE)`` or renamed, parent fsynced; ``--force``
replaces only flashgnn output, see ``flashgnn._durable``) holding ``presample.json`` and one ``epoch-EEEE.fgps`` file per
epoch — a sequence of records, each a 32-byte header (magic ``FGPSBAT2``,
batch_size, num_nodes, num_edges, hops, payload bytes, CRC32C) followed by the
payload: ``n_id`` (int64), ``row``, ``col`` (int32), ``num_sampled_nodes``,
``num_sampled_edges`` (int32, ``hops + 1`` and ``hops`` entries), ``input_id``
(int64, batch_size) and ``y`` (int64, num_nodes). The records are encoded and
decoded by the Rust format crate (``flashgnn_format::presample``, through
``_core``); this module does the file I/O. Every field is checked against the
header, the file size and the dataset's node count before use; a corrupt
record is a clean error naming the file, byte offset, field, value and bound.
Version-1 pre-samples (``FGPSBAT1`` records, zlib CRC-32) are still read.
"""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import numpy as np

from flashgnn import _core
from flashgnn.sample.sampler import DEFAULT_DEPTH
from flashgnn._durable import check_output, create_tmp_dir, open_regular, publish_dir, read_regular, remove_stale_tmps
from flashgnn.store.dataset import Dataset
from flashgnn.loader.window import BeladyRowCache, PresampleError, WindowGather  # noqa: F401 - BeladyRowCache re-exported

# The pre-sample's own format name and versions (flashgnn_format::presample): written, and the range read.
FORMAT = _core.PRESAMPLE_FORMAT
VERSION = _core.PRESAMPLE_VERSION
VERSION_MIN = _core.PRESAMPLE_VERSION_MIN


def _dataset_identity(ds: Dataset) -> dict:
    m = ds.manifest
    return {"path": os.path.abspath(ds.path), "num_nodes": int(m["num_nodes"]), "num_edges": int(m["num_edges"]),
            "graph_crc": m.get("files", {}).get(_core.GRAPH_FILE, {}).get("crc32c")}


def _record(b, input_id: np.ndarray, offset: int) -> bytes:
    """The record of batch ``b``, to be written at byte ``offset`` of its file (its checksum is bound to it)."""
    return _core.presample_encode(
        int(b.batch_size), np.ascontiguousarray(b.n_id, np.int64), np.ascontiguousarray(b.row, np.int32),
        np.ascontiguousarray(b.col, np.int32), np.ascontiguousarray(b.num_sampled_nodes, np.int32),
        np.ascontiguousarray(b.num_sampled_edges, np.int32), np.ascontiguousarray(input_id, np.int64),
        np.ascontiguousarray(b.y, np.int64), offset)


def presample(dataset, out, fanouts, batch_size: int = 1024, epochs: int = 1, seed: int = 0, split: str = "train",
              engine: str = "auto", workers: int = 1, drop_last: bool = False, force: bool = False,
              progress: bool = True) -> dict:
    """Sample ``epochs`` epochs of ``split`` as NeighborLoader(shuffle=True, seed=seed)
    would and store them under ``out``. Returns the summary (bytes, seconds)."""
    from flashgnn import _progress
    from flashgnn.loader.neighbor import _Base, _epoch_seed, resolve_engine
    from flashgnn.sample.sampler import Sampler

    out = Path(out)
    check_output(out, force, (dataset,))  # the --force rule of every publishing command, before any work
    if epochs < 1:
        raise ValueError(f"epochs must be >= 1, got {epochs}")
    # The loaders' own seed-order logic: the epoch order exactly as training will see it.
    loader = _Base(dataset, batch_size, None, split, True, drop_last, seed, 0, 1)
    ds = loader.dataset
    sampler = Sampler(ds.path, fanouts, engine=resolve_engine(engine), labels=True, features=False)
    out.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_tmps(out)
    tmp = create_tmp_dir(out)
    t0 = time.perf_counter()
    per_epoch = []
    total_batches = epochs * len(loader)
    bar = _progress.bar(total=total_batches, desc="presample", unit="batch", disable=not progress)
    try:
        for e in range(epochs):
            pos = loader._positions(e)
            order = loader.input_nodes[pos]
            te = time.perf_counter()
            path = tmp / f"epoch-{e:04d}.fgps"
            n = off = 0
            with open(path, "wb") as f:
                it = sampler.iter_batches(order, batch_size, seed=_epoch_seed(seed, e), prefetch=4,
                                          drop_last=drop_last, workers=workers)
                for i, b in enumerate(it):
                    rec = _record(b, pos[i * batch_size: i * batch_size + b.batch_size], off)
                    f.write(rec)
                    off += len(rec)
                    n += 1
                    bar.update(1)
                f.flush()
                os.fsync(f.fileno())
            per_epoch.append({"epoch": e, "batches": n, "bytes": path.stat().st_size,
                              "seconds": time.perf_counter() - te})
        meta = {"flashgnn_output": "presample", "format": FORMAT, "version": VERSION, "dataset": _dataset_identity(ds), "fanouts": list(fanouts),
                "batch_size": int(batch_size), "seed": int(seed), "split": split, "drop_last": bool(drop_last),
                "epochs": per_epoch, "seconds": time.perf_counter() - t0}
        (tmp / "presample.json").write_text(json.dumps(meta, indent=2))
        with open(tmp / "presample.json", "rb") as f:
            os.fsync(f.fileno())
        publish_dir(tmp, out)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    finally:
        bar.close()
    total = sum(p["bytes"] for p in per_epoch)
    ds_bytes = sum(f.stat().st_size for f in Path(ds.path).iterdir() if f.is_file())
    return dict(meta, out=str(out), bytes=total, dataset_bytes=ds_bytes, bytes_per_epoch=total / epochs,
                seconds_per_epoch=meta["seconds"] / epochs)


def open_presample(path, dataset) -> dict:
    """Read and check ``presample.json`` against ``dataset``."""
    path = Path(path)
    mf = path / "presample.json"
    if not mf.exists():
        raise FileNotFoundError(f"{mf}: not a pre-sample directory (run `flashgnn presample` first)")
    try:
        meta = json.loads(read_regular(mf))
    except ValueError as e:
        raise PresampleError(f"{mf}: not valid JSON ({e})") from None
    version = meta.get("version")
    if meta.get("format") != FORMAT or not isinstance(version, int) or not VERSION_MIN <= version <= VERSION:
        raise PresampleError(f"{mf}: format {meta.get('format')!r} version {version!r}; "
                             f"this flashgnn reads {FORMAT!r} versions {VERSION_MIN} to {VERSION}")
    want, have = _dataset_identity(dataset), meta.get("dataset", {})
    for k in ("num_nodes", "num_edges", "graph_crc"):
        if have.get(k) != want[k]:
            raise PresampleError(f"{mf}: sampled from a different dataset (dataset.{k} {have.get(k)!r}, "
                                 f"{dataset.path} has {want[k]!r})")
    return meta


def read_records(file: Path, num_nodes: int, version: int = VERSION):
    """Yield (batch_size, n_id, row, col, nsn, nse, input_id, y) per record of pre-sample ``version``
    (``presample.json``'s), every length and id checked before use (``flashgnn_format::presample``)."""
    with open_regular(file) as f:
        size = os.fstat(f.fileno()).st_size
        off = 0
        while off < size:
            hdr = f.read(_core.PRESAMPLE_HEADER_BYTES)
            try:
                n = _core.presample_record_size(str(file), hdr, off, size, version)
                rec = hdr + f.read(n - len(hdr))
                r = _core.presample_decode(str(file), rec, off, version, num_nodes)
            except _core.CorruptDatasetError as e:
                raise PresampleError(str(e)) from None
            yield r
            off += n


class PresampledLoader:
    """Training batches read from a pre-sample instead of sampled online.

    Same interface as :class:`flashgnn.NeighborLoader` for training
    (``len``, ``set_epoch``, iteration yielding ``Data``, ``telemetry``,
    ``engine``): the structure comes from ``epoch-EEEE.fgps`` (sequential
    reads), ``x`` is gathered per batch through the engine (one call over the
    batch's ``n_id``), ``prefetch`` batches ahead on a background thread.

    ``belady_budget`` > 0 adds a :class:`BeladyRowCache` of that many bytes:
    the loader reads ``superbatch`` records ahead, serves cached rows from it
    and gathers only the rest. ``cache`` (a :class:`flashgnn.Cache`) is the
    online alternative (S3-FIFO/CLOCK, no knowledge of the future); the two
    are compared in docs/benchmarks.md. Without ``cache``, ``memory_budget``
    (``"auto"``, the default, a size, or 0 for none) sizes the process's one
    cache for the dataset (:func:`flashgnn.sample.shared.shared_cache`), shared with
    every other loader on it; its split is printed once unless ``quiet``."""

    def __init__(self, path, dataset, engine: str = "auto", prefetch: int = 4, dtype=np.float32, cache=None,
                 depth: int = DEFAULT_DEPTH, belady_budget: int = 0, superbatch: int = 8, degrees: bool = False,
                 memory_budget="auto", quiet: bool = False):
        from flashgnn.loader.neighbor import as_dataset, resolve_engine
        from flashgnn.sample.sampler import Sampler

        self.dataset = as_dataset(dataset)
        self.path = Path(path)
        self.meta = open_presample(self.path, self.dataset)
        self.engine = resolve_engine(engine)
        self.prefetch = max(1, int(prefetch))
        self.batch_size = self.meta["batch_size"]
        self.fanouts = self.meta["fanouts"]
        self.epochs = len(self.meta["epochs"])
        self.memory_budget = memory_budget
        # The process's one cache for this dataset, shared with any other loader on it (flashgnn.sample.shared).
        from flashgnn.sample.shared import loader_cache

        # The loader's one engine sampler: it sizes a new shared cache with the pre-sample's fanouts, picks its
        # hot set, and gathers each batch's rows (and, for GCN, whole-graph degrees: one slot read per node,
        # since a pre-sample stores structure only).
        self.gather = Sampler(self.dataset.path, self.fanouts, engine=self.engine, depth=depth, dtype=dtype,
                              labels=False, cache=cache)
        shared = loader_cache(cache, self.dataset, self.fanouts, self.batch_size, memory_budget,
                              prefetch=self.prefetch, quiet=quiet, who="flashgnn.PresampledLoader", engine=self.engine,
                              sampler=self.gather)
        if shared is not cache:
            self.gather.attach_cache(shared)
        self.cache = shared
        self.degrees = bool(degrees)
        self.epoch = 0
        self.telemetry: dict = {}
        self.bytes_read = 0
        self.superbatch = max(1, int(superbatch))
        self.window = WindowGather(self.gather, belady_budget, self.dataset.num_nodes)

    @property
    def belady(self) -> BeladyRowCache | None:
        return self.window.belady

    @property
    def rows_gathered(self) -> int:
        return self.window.rows_gathered

    def set_epoch(self, epoch: int) -> None:
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.meta["epochs"][min(self.epoch, self.epochs - 1)]["batches"]

    def _batches(self, epoch: int):
        import torch
        from torch_geometric.data import Data

        from collections import deque

        file = self.path / f"epoch-{epoch:04d}.fgps"
        records = read_records(file, self.dataset.num_nodes, self.meta["version"])
        ahead: deque = deque()
        done = False
        while True:
            # Superbatch lookahead: the next `superbatch` records are known before the current one is served.
            while not done and len(ahead) < (self.superbatch + 1 if self.belady else 1):
                r = next(records, None)
                if r is None:
                    done = True
                else:
                    ahead.append(r)
            if not ahead:
                return
            bs, n_id, row, col, nsn, nse, input_id, y = ahead.popleft()
            x = self.window.fill(n_id, None, None, [r[1] for r in ahead], where=file)
            self.bytes_read += n_id.nbytes + row.nbytes * 2 + y.nbytes
            yield Data(x=torch.from_numpy(x), y=torch.from_numpy(y),
                       edge_index=torch.from_numpy(np.stack([row, col]).astype(np.int64)),
                       n_id=torch.from_numpy(n_id), input_id=torch.from_numpy(input_id),
                       batch_size=int(bs), num_sampled_nodes=[int(v) for v in nsn],
                       num_sampled_edges=[int(v) for v in nse],
                       **({"deg": torch.from_numpy(self.gather.gather(n_id, features=False, degrees=True).deg)}
                          if self.degrees else {}))

    def __iter__(self):
        from flashgnn.loader.neighbor import run_ahead

        e = self.epoch
        self.epoch = e + 1
        if e >= self.epochs:
            raise PresampleError(f"{self.path}: holds {self.epochs} epoch(s); epoch {e + 1} was asked for "
                                 f"(presample with --epochs {e + 1} or more)")
        self.gather.reset_telemetry()
        yield from run_ahead(self._batches(e), self.prefetch)
        self.telemetry = self.gather.telemetry()
