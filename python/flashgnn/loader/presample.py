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
epoch — a sequence of records, each a 32-byte header (magic ``FGPSBAT1``,
batch_size, num_nodes, num_edges, hops, payload bytes, CRC32 of the payload)
followed by the payload: ``n_id`` (int64), ``row``, ``col`` (int32),
``num_sampled_nodes``, ``num_sampled_edges`` (int32, ``hops + 1`` and ``hops``
entries), ``input_id`` (int64, batch_size) and ``y`` (int64, num_nodes).
Every field is checked against the header, the file size and the dataset's
node count before use; a corrupt record is a clean error naming the file,
byte offset, field, value and bound.
"""

from __future__ import annotations

import json
import os
import shutil
import struct
import time
import zlib
from pathlib import Path

import numpy as np

from flashgnn import _core
from flashgnn._durable import check_output, create_tmp_dir, open_regular, publish_dir, read_regular, remove_stale_tmps
from flashgnn.store.dataset import Dataset
from flashgnn.loader.window import BeladyRowCache, PresampleError, WindowGather  # noqa: F401 - BeladyRowCache re-exported

MAGIC = b"FGPSBAT1"
FORMAT = "flashgnn-presample"
VERSION = 1
_HDR = struct.Struct("<8sIIIIII")  # magic, batch_size, num_nodes, num_edges, hops, payload bytes, crc32(payload)
MAX_HOPS = _core.MAX_HOPS  # the sampler's own limit (flashgnn_sample::MAX_HOPS)


def _dataset_identity(ds: Dataset) -> dict:
    m = ds.manifest
    return {"path": os.path.abspath(ds.path), "num_nodes": int(m["num_nodes"]), "num_edges": int(m["num_edges"]),
            "graph_crc": m.get("files", {}).get(_core.GRAPH_FILE, {}).get("crc32c")}


def _record(b, input_id: np.ndarray) -> bytes:
    hops = len(b.num_sampled_edges)
    parts = [np.ascontiguousarray(b.n_id, np.int64), np.ascontiguousarray(b.row, np.int32),
             np.ascontiguousarray(b.col, np.int32), np.asarray(b.num_sampled_nodes, np.int32),
             np.asarray(b.num_sampled_edges, np.int32), np.ascontiguousarray(input_id, np.int64),
             np.ascontiguousarray(b.y, np.int64)]
    payload = b"".join(p.tobytes() for p in parts)
    return _HDR.pack(MAGIC, int(b.batch_size), len(b.n_id), len(b.row), hops, len(payload),
                     zlib.crc32(payload)) + payload


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
            n = 0
            with open(path, "wb") as f:
                it = sampler.iter_batches(order, batch_size, seed=_epoch_seed(seed, e), prefetch=4,
                                          drop_last=drop_last, workers=workers)
                for i, b in enumerate(it):
                    f.write(_record(b, pos[i * batch_size: i * batch_size + b.batch_size]))
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
    if meta.get("format") != FORMAT or meta.get("version") != VERSION:
        raise PresampleError(f"{mf}: format {meta.get('format')!r} version {meta.get('version')!r}; "
                             f"this flashgnn reads {FORMAT!r} version {VERSION}")
    want, have = _dataset_identity(dataset), meta.get("dataset", {})
    for k in ("num_nodes", "num_edges", "graph_crc"):
        if have.get(k) != want[k]:
            raise PresampleError(f"{mf}: sampled from a different dataset (dataset.{k} {have.get(k)!r}, "
                                 f"{dataset.path} has {want[k]!r})")
    return meta


def read_records(file: Path, num_nodes: int):
    """Yield (batch_size, n_id, row, col, nsn, nse, input_id, y) per record,
    every length and id checked before use."""
    with open_regular(file) as f:
        size = os.fstat(f.fileno()).st_size
        off = 0
        while off < size:
            hdr = f.read(_HDR.size)

            def bad(field, value, bound):
                return PresampleError(f"{file}: record at byte {off}: {field} {value} {bound}")

            if len(hdr) < _HDR.size:
                raise bad("header", f"{len(hdr)} bytes", f"< {_HDR.size} (truncated)")
            magic, bs, nn, ne, hops, plen, crc = _HDR.unpack(hdr)
            if magic != MAGIC:
                raise bad("magic", repr(magic), f"!= {MAGIC!r}")
            if hops > MAX_HOPS:
                raise bad("hops", hops, f"> {MAX_HOPS}")
            want = nn * 8 + 2 * ne * 4 + (hops + 1) * 4 + hops * 4 + bs * 8 + nn * 8
            if plen != want:
                raise bad("payload bytes", plen, f"!= {want} implied by the header")
            if off + _HDR.size + plen > size:
                raise bad("payload end", off + _HDR.size + plen, f"> file size {size} (truncated)")
            if bs > nn:
                raise bad("batch_size", bs, f"> num_nodes {nn}")
            payload = f.read(plen)
            if zlib.crc32(payload) != crc:
                raise bad("crc32", f"{zlib.crc32(payload):#010x}", f"!= stored {crc:#010x}")
            a = np.frombuffer(payload, np.uint8)
            o = 0

            def take(dtype, count):
                nonlocal o
                w = np.dtype(dtype).itemsize * count
                r = a[o:o + w].view(dtype)
                o += w
                return r

            n_id, row, col = take(np.int64, nn), take(np.int32, ne), take(np.int32, ne)
            nsn, nse, input_id, y = take(np.int32, hops + 1), take(np.int32, hops), take(np.int64, bs), take(np.int64, nn)
            if nn and (n_id.min() < 0 or n_id.max() >= num_nodes):
                raise bad("n_id", int(n_id.max() if n_id.max() >= num_nodes else n_id.min()), f"outside [0, {num_nodes})")
            if ne and (min(row.min(), col.min()) < 0 or max(row.max(), col.max()) >= nn):
                raise bad("row/col", int(max(row.max(), col.max())), f"outside [0, {nn}) local ids")
            if int(nsn.sum()) != nn or int(nse.sum()) != ne or (hops + 1 and nsn[0] != bs):
                raise bad("per-hop counts", f"{nsn.tolist()}/{nse.tolist()}", f"do not add up to {nn} nodes / {ne} edges")
            yield bs, n_id, row, col, nsn, nse, input_id, y
            off += _HDR.size + plen


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
                 depth: int = 256, belady_budget: int = 0, superbatch: int = 8, degrees: bool = False,
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
        # The process's one cache for this dataset, shared with any other loader on it (flashgnn.sample.budget).
        from flashgnn.sample.shared import loader_cache

        cache = loader_cache(cache, self.dataset, self.fanouts, self.batch_size, memory_budget, prefetch=self.prefetch,
                             quiet=quiet, who="flashgnn.PresampledLoader", engine=self.engine)
        self.cache = cache
        self.gather = Sampler(self.dataset.path, [0], engine=self.engine, depth=depth, dtype=dtype, labels=False,
                              cache=cache)
        # Whole-graph degrees (GCN, flashgnn.nn): one slot read per node of
        # the batch, since a pre-sample stores structure only.
        self.degree_sampler = Sampler(self.dataset.path, [0], engine=self.engine, depth=depth, labels=False,
                                      features=False, degrees=True) if degrees else None
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
        records = read_records(file, self.dataset.num_nodes)
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
            yield Data(x=torch.from_numpy(x), y=torch.from_numpy(y.copy()),
                       edge_index=torch.from_numpy(np.stack([row, col]).astype(np.int64)),
                       n_id=torch.from_numpy(n_id.copy()), input_id=torch.from_numpy(input_id.copy()),
                       batch_size=int(bs), num_sampled_nodes=[int(v) for v in nsn],
                       num_sampled_edges=[int(v) for v in nse],
                       **({"deg": torch.from_numpy(self.degree_sampler.sample(n_id, 0).deg)}
                          if self.degree_sampler is not None else {}))

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
