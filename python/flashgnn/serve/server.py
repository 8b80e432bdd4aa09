"""``flashgnn serve``: the gRPC server over a :class:`flashgnn.MutableGraph`, assembled from its parts.

Owns docs/reliability.md promise 5 through the parts it wires together:

- :mod:`flashgnn.serve.transport` — the gRPC server, the one gate every RPC
  passes (``Transport._serve_rpc``: token, in-flight slot, request message,
  deadline, error mapping), the metrics, and the drain on shutdown;
- :mod:`flashgnn.serve.call` — what an admitted call carries (status,
  deadline, cancellation, slot);
- :mod:`flashgnn.serve.graph_rpcs` — the GraphStore RPCs (updates, queries);
- :mod:`flashgnn.serve.runner_rpcs` — the GraphRunner RPCs (Run, Plugin);
- :mod:`flashgnn.serve.recommend_rpcs` — Recommend, over ``--recommend``'s embeddings.

Here: :class:`Service`, the servicer those parts make; Health and Stats,
which report on every part; and :func:`serve`, which opens the graph (with the
DRAM cache of ``--memory-budget``, the scrubber of ``--scrub-rate`` and the
compactor of ``--compact-delta``) and
serves it until SIGTERM/SIGINT. Every RPC's work reaches the worker through
``self._guarded``, so a wrapper set on ``Service._guarded`` sees all of them
(``tests/serve/_slow_serve.py``).
"""

from __future__ import annotations

import asyncio
import json
import time
from dataclasses import asdict

import flashgnn
from flashgnn._malloc import limit_arenas, trim

from . import flashgnn_pb2 as pb
from . import flashgnn_pb2_grpc as pb_grpc
from .call import Status, invalid  # noqa: F401 - re-exported
from .graph_rpcs import GraphRpcs
from .limits import Limits
from .recommend_rpcs import RecommendRpcs, load_recommender
from .runner_rpcs import DFG_CACHE_ENTRIES, RunnerRpcs  # noqa: F401 - re-exported
from .token import read_token_file  # noqa: F401 - re-exported (flashgnn serve, the tests)
from .transport import (  # noqa: F401 - re-exported
    CONNECTION_IDLE_S,
    HANDSHAKE_TIMEOUT_S,
    KEEPALIVE_S,
    KEEPALIVE_TIMEOUT_S,
    LATENCY_WINDOW,
    MAX_STREAMS_PER_CONNECTION,
    OPEN_RPCS,
    RPCS,
    UNMETERED,
    UNMETERED_INFLIGHT,
    UNMETERED_THREADS,
    Metrics,
    Transport,
    log,
    run_until_signalled,
    server_options,
)


class Service(RecommendRpcs, GraphRpcs, RunnerRpcs, Transport, pb_grpc.FlashGNNServicer):
    """The servicer. ``graph`` is an open, writable ``flashgnn.MutableGraph``; ``recommender`` what
    ``--recommend`` loaded (or None: Recommend answers FAILED_PRECONDITION)."""

    def __init__(self, graph, dataset: str, limits: Limits, token: str | None, allow_plugins: bool = False,
                 cache=None, recommender=None):
        limits.check()
        self.graph, self.dataset, self.limits = graph, str(dataset), limits
        self.cache = cache  # flashgnn.Cache shared by every BatchPre sampler (--memory-budget), or None
        self.allow_plugins = allow_plugins
        self.scrub = None  # serve/scrubber.BackgroundScrub under --scrub-rate
        self.compact = None  # serve/compactor.AutoCompact under --compact-delta
        self._init_transport(token)
        self._init_graph_rpcs()
        self._init_runner()
        self._init_recommend(recommender)

    def background(self) -> list:
        """The background threads (scrubber, compactor) the transport starts with the server and stops
        before the graph closes."""
        return [t for t in (self.scrub, self.compact) if t is not None]

    # -- Health and Stats (they report on every part) ----------------------

    def Health(self, request, context):
        def work(call):
            return pb.HealthReply(
                status="DRAINING" if self.draining else "SERVING",
                version=str(flashgnn.__version__), uptime_s=time.monotonic() - self.started,
            )

        return self._call("Health", context, work)

    def Stats(self, request, context):
        def work(call):
            rpcs, rejected = self.metrics.snapshot()
            reply = pb.StatsReply(
                rejected=rejected, in_flight=self.in_flight, max_inflight=self.limits.max_inflight,
                uptime_s=time.monotonic() - self.started, graph_stats_json=json.dumps(self._graph_stats()),
                limits_json=json.dumps(asdict(self.limits)), dfg_cache_entries=len(self._dfgs),
            )
            for name, r in rpcs.items():
                reply.rpcs[name].CopyFrom(pb.RpcStats(**r))
            return reply

        return self._call("Stats", context, work)

    def _graph_stats(self) -> dict:
        g = self.graph
        out = {**g.stats(), "num_nodes": int(g.num_nodes), "feature_dim": int(g.feature_dim),
               "feature_dtype": str(g.feature_dtype)}
        if self.scrub is not None:
            out["scrub"] = self.scrub.status()
        if self.compact is not None:
            out["compaction"] = self.compact.status()
        if self.cache is not None:
            out["cache"] = self.cache.stats()
        if self.recommender is not None:
            out["recommend"] = self.recommender.stats()
        return out


BUDGET_FANOUTS = [10, 5]  # the batch the --memory-budget split is measured with (the query CLI's default)


def serve(
    dataset: str,
    listen: str,
    *,
    token: str | None,
    limits: Limits | None = None,
    allow_plugins: bool = False,
    group_commit_wait_us: int = 0,
    preload: bool = True,
    ready=None,
    memory_budget: int | str = 0,
    scrub_rate: int | None = None,
    compact_delta: int | None = None,
    recommend: str | None = None,
    recommend_checkpoint: str | None = None,
    recommend_fanouts: list[int] | None = None,
) -> int:
    """Open the graph, serve until SIGTERM/SIGINT, drain, close. Returns the exit status.

    ``ready(port)`` is called once the port is bound (the CLI prints the
    'listening' line there; tests read the port from it). ``scrub_rate``
    (bytes/s, 0 = unlimited; None = off): run the scrubber in a background
    thread (serve/scrubber.py), reported in Stats' graph_stats_json["scrub"]. ``compact_delta`` (bytes;
    None = off): compact in a background thread whenever the store's delta holds that much
    (serve/compactor.py; the Run cache is rebuilt on the new generation), reported under
    graph_stats_json["compaction"]. ``recommend`` (an embed
    output directory), with the checkpoint its embed.json names (or ``recommend_checkpoint``) and that
    model's fanouts (or ``recommend_fanouts``): serve Recommend (serve/recommend_rpcs.py), loaded and checked
    before the port opens.
    """
    limits = limits or Limits()
    limits.check()
    limit_arenas()  # before the server starts its threads (flashgnn._malloc.SERVER_ARENAS)
    graph = flashgnn.MutableGraph(dataset, writable=True, group_commit_wait_us=group_commit_wait_us)
    cache = _open_cache(dataset, limits, memory_budget)
    recommender = None
    if recommend is not None:
        try:
            recommender = load_recommender(dataset, recommend, recommend_checkpoint, recommend_fanouts, limits, graph)
        except BaseException:
            graph.close()
            raise
    service = Service(graph, dataset, limits, token, allow_plugins, cache=cache, recommender=recommender)
    if scrub_rate is not None:
        from .scrubber import BackgroundScrub

        service.scrub = BackgroundScrub(dataset, scrub_rate, log)
    if compact_delta is not None:
        from .compactor import AutoCompact

        def after_switch(report):
            if memory_budget:  # (also where the last generation's cache could not be built)
                service.set_cache(None)  # let the old one go first: "auto" sizes the new one by what is free
                service.set_cache(_open_cache(dataset, limits, memory_budget))
            trim()  # the folded delta's records, freed all over the heap (flashgnn._malloc)

        service.compact = AutoCompact(graph, compact_delta, log, on_switch=after_switch)
    return asyncio.run(run_until_signalled(service, graph, listen, limits, preload, ready))


def _open_cache(dataset, limits: Limits, memory_budget):
    """:func:`_serve_cache`, or None for a budget of 0; with ``auto``, also None (logged) where the dataset's
    pages cannot be read: the default must not keep a server from starting where it started without a cache
    (damaged pages are the requests' problem, each gets a clean error, and the scrubber's to report)."""
    if not memory_budget:
        return None
    try:
        return _serve_cache(dataset, limits, memory_budget)
    except (flashgnn.CorruptDatasetError, OSError) as e:
        if memory_budget != "auto":
            raise
        log(f"memory budget auto: running without a cache ({type(e).__name__}: {e})")
        return None


def _serve_cache(dataset, limits: Limits, memory_budget):
    """The DRAM cache shared by every Run's sampler, sized by ``--memory-budget`` (a size or ``auto``); None when
    the budget leaves nothing for it. One budget: per worker thread the engine's buffers and one request's batch
    (measured at BUDGET_FANOUTS and min(--max-batch, 1024) targets); no prefetch window (requests are not known
    ahead); the cache gets the rest."""
    from flashgnn.sample import budget

    if memory_budget == "auto":
        # What the process may use, less what in-flight Runs may hold (--max-inflight-bytes) and the
        # reserve; capped at caching the whole dataset.
        split = budget.auto(dataset, BUDGET_FANOUTS, min(limits.max_batch, 1024), workers=limits.workers,
                            prefetch=1, lookahead=0, training=False,
                            available=max(budget.available_memory() - limits.max_inflight_bytes, 0))
    else:
        split = budget.split(memory_budget, dataset, BUDGET_FANOUTS, min(limits.max_batch, 1024),
                             workers=limits.workers, prefetch=1)
    cache = None
    if split["budget"]:
        split["cache"] += split["window"]
        split["cache_static"] = split["cache"] // 2
        split["cache_dynamic"] = split["cache"] - split["cache_static"]
        split["window"], split["prefetch"] = 0, 0
        cache = flashgnn.Cache(dataset, BUDGET_FANOUTS, split["cache"], hot="degree")
    log(budget.describe(split))
    return cache
