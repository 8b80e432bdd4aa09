"""``flashgnn serve`` and ``flashgnn query``: argument parsing and the two commands.

``python/flashgnn/cli`` calls :func:`add_parsers` and dispatches to
:func:`cmd_serve` / :func:`cmd_query`. Nothing here imports grpc at module
level, so ``flashgnn --help`` stays fast.
"""

from __future__ import annotations

import sys

LOOPBACK = ("127.0.0.1", "localhost", "[::1]", "::1")


def add_parsers(sub, parse_size) -> None:
    from .limits import Limits

    d = Limits()
    s = sub.add_parser("serve", help="serve a dataset over gRPC (GraphStore/GraphRunner RPCs, see docs/serving.md)")
    s.add_argument("dataset")
    s.add_argument("--listen", default="127.0.0.1:50051", help="host:port (port 0 picks a free one)")
    s.add_argument("--token-file", required=True, help="bearer token, one line; must not be readable by others")
    s.add_argument("--allow-plugins", action="store_true", help="accept Plugin RPCs (they run arbitrary Python code)")
    s.add_argument("--max-inflight", type=int, default=d.max_inflight, help=f"admitted requests; more get RESOURCE_EXHAUSTED (default {d.max_inflight})")
    s.add_argument("--max-message-bytes", type=parse_size, default=d.max_message_bytes, help="one gRPC message, either way (default 64MiB)")
    s.add_argument("--default-deadline", type=float, default=d.default_deadline_s, help=f"seconds, when the client sets none (default {d.default_deadline_s:g})")
    s.add_argument("--max-deadline", type=float, default=d.max_deadline_s, help=f"seconds: the longest deadline a client may set; calls end DEADLINE_EXCEEDED after it (default {d.max_deadline_s:g})")
    s.add_argument("--max-batch", type=int, default=d.max_batch, help=f"Run target nodes per request (default {d.max_batch})")
    s.add_argument("--max-fanout", type=int, default=d.max_fanout, help=f"per hop of a DFG's sampler (default {d.max_fanout})")
    s.add_argument("--workers", type=int, default=d.workers, help=f"threads doing the work (default {d.workers})")
    s.add_argument("--max-update-bytes", type=parse_size, default=d.max_update_bytes, help="one UpdateGraph stream as decoded arrays (default 1GiB)")
    s.add_argument("--max-batch-ops", type=int, default=d.max_batch_ops, help=f"unit ops in one ApplyBatch (default {d.max_batch_ops})")
    s.add_argument("--max-hops", type=int, default=d.max_hops, help=f"sampling hops of a served DFG (default {d.max_hops})")
    s.add_argument("--max-sampled-nodes", type=int, default=d.max_sampled_nodes,
                   help=f"Run: targets x (1 + f1 + f1*f2 + ...) over the DFG's sampling ops (default {d.max_sampled_nodes})")
    s.add_argument("--max-request-bytes", type=parse_size, default=d.max_request_bytes,
                   help="Run: one request's inferred peak memory (every node's shape inferred before any kernel "
                        "runs; default 1GiB)")
    s.add_argument("--max-inflight-bytes", type=parse_size, default=d.max_inflight_bytes,
                   help="Run: the same summed over the requests in flight; a Run waits up to 1 s for room, then "
                        "RESOURCE_EXHAUSTED (default 4GiB)")
    s.add_argument("--request-body-timeout", type=float, default=d.request_body_timeout_s,
                   help="seconds an admitted call may wait for its request message (UpdateGraph: each chunk) "
                        f"before DEADLINE_EXCEEDED (default {d.request_body_timeout_s:g})")
    s.add_argument("--grace", type=float, default=d.grace_s, help=f"seconds in-flight requests get on SIGTERM (default {d.grace_s:g})")
    s.add_argument("--group-commit-wait-us", type=int, default=0, help="WAL group-commit window (default 0)")
    from flashgnn.sample.budget import parse_budget

    s.add_argument("--memory-budget", type=parse_budget, default="auto",
                   help="one budget for the engine's buffers (per worker) and a DRAM cache shared by every Run's "
                        "sampler; the split is printed. auto: what the process may use less --max-inflight-bytes "
                        "and a reserve, capped at caching the whole dataset; 0 = no cache (default: auto)")
    from flashgnn._util import parse_rate

    s.add_argument("--scrub-rate", type=parse_rate, default=None,
                   help="run the scrubber (docs/scrub.md) in the background at this read rate, e.g. 20MB/s "
                   "(0 = unlimited); reported in Stats (graph_stats_json.scrub) and on the log")
    s.add_argument("--compact-delta", type=parse_size, default=None, metavar="SIZE",
                   help="compact in the background whenever the store's in-memory delta (every write since the "
                        "last compaction) holds SIZE, e.g. 64MiB; failures are logged and retried; reported in "
                        "Stats (graph_stats_json.compaction). Default: never (flashgnn compact does it offline)")
    s.add_argument("--recommend", metavar="EMBED_DIR", default=None,
                   help="serve Recommend: the directory `flashgnn embed` wrote for this dataset (its rows are the "
                        "candidates, held in memory; the model is the checkpoint its embed.json names)")
    s.add_argument("--recommend-checkpoint", default=None,
                   help="the model computing a queried node's embedding (default: the checkpoint embed.json names)")
    s.add_argument("--recommend-fanouts", default=None,
                   help="neighbours per hop when embedding a queried node (default: the checkpoint's training fanouts)")
    s.add_argument("--max-recommend-k", type=int, default=d.max_recommend_k,
                   help=f"Recommend: ids per answer (default {d.max_recommend_k})")
    s.add_argument("--no-preload", action="store_true",
                   help="do not import the GraphRunner (torch) at start; the first Run or Plugin does")

    q = sub.add_parser("query", help="call a running `flashgnn serve` (prints JSON or a one-line summary)")
    q.add_argument("address", help="host:port")
    q.add_argument("--token-file", help="bearer token file (not needed for health)")
    q.add_argument("--timeout", type=float, help="deadline in seconds (default: the server's)")
    q.add_argument("--json", action="store_true", help="print JSON")
    qs = q.add_subparsers(dest="op", required=True)
    qs.add_parser("health")
    qs.add_parser("stats")
    for name in ("get-neighbors", "get-embed", "delete-vertex"):
        qs.add_parser(name).add_argument("vid", type=int)
    for name in ("add-edge", "delete-edge"):
        e = qs.add_parser(name)
        e.add_argument("dst", type=int)
        e.add_argument("src", type=int)
    for name in ("add-vertex", "update-embed"):
        e = qs.add_parser(name)
        if name == "update-embed":
            e.add_argument("vid", type=int)
        src = e.add_mutually_exclusive_group(required=True)
        src.add_argument("--embed-zeros", action="store_true", help="a zero row of the dataset's width and dtype")
        src.add_argument("--embed-file", help=".npy file with one row")
        src.add_argument("--embed", help="comma-separated values")
    r = qs.add_parser("run", help="run a built-in DFG from a `flashgnn train` checkpoint")
    r.add_argument("--model", default="gcn",
                   help="must match the checkpoint; a model with a built-in DFG (flashgnn.dfg.models."
                        "checkpoint_models(); checked when the checkpoint loads)")
    r.add_argument("--checkpoint", required=True, help="directory written by `flashgnn train --checkpoint`")
    r.add_argument("--fanouts", default="10,5", help="neighbors per hop (default 10,5)")
    r.add_argument("--batch", required=True, help="target node ids, comma-separated")
    r.add_argument("--repeat", type=int, default=1, help="run this many times (the DFG is sent once)")
    rc = qs.add_parser("recommend", help="top-k nodes for a node (server needs --recommend)")
    rc.add_argument("node", type=int)
    rc.add_argument("--k", type=int, default=10, help="ids in the answer (default 10)")
    rc.add_argument("--exclude-seen", action="store_true", help="drop the node's current neighbours and itself")
    p = qs.add_parser("plugin", help="load a plugin (server needs --allow-plugins)")
    p.add_argument("name")
    p.add_argument("file", help="Python source file")


def cmd_serve(a) -> int:
    from .limits import Limits
    from .server import read_token_file, serve

    limits = Limits(
        max_inflight=a.max_inflight, max_message_bytes=a.max_message_bytes, default_deadline_s=a.default_deadline,
        max_deadline_s=a.max_deadline, max_batch=a.max_batch, max_fanout=a.max_fanout, workers=a.workers, max_update_bytes=a.max_update_bytes,
        max_batch_ops=a.max_batch_ops, max_hops=a.max_hops, max_sampled_nodes=a.max_sampled_nodes,
        max_request_bytes=a.max_request_bytes, max_inflight_bytes=a.max_inflight_bytes, request_body_timeout_s=a.request_body_timeout,
        grace_s=a.grace, max_recommend_k=a.max_recommend_k,
    )
    limits.check()
    token = read_token_file(a.token_file)
    host = a.listen.rsplit(":", 1)[0]
    if host not in LOOPBACK:
        print(
            f"flashgnn serve: WARNING: listening on {a.listen} without TLS; the bearer token and the graph travel "
            "in clear text. Put the server behind a TLS-terminating proxy or an SSH tunnel.",
            file=sys.stderr, flush=True,
        )
    if a.allow_plugins:
        print("flashgnn serve: WARNING: --allow-plugins: any client holding the token can run Python code in this process",
              file=sys.stderr, flush=True)

    def ready(port):
        print(
            f"flashgnn serve: listening on {host}:{port} dataset={a.dataset} max_inflight={limits.max_inflight} "
            f"max_message_bytes={limits.max_message_bytes} default_deadline={limits.default_deadline_s:g}s max_deadline={limits.max_deadline_s:g}s "
            f"max_batch={limits.max_batch} max_fanout={limits.max_fanout} workers={limits.workers} "
            f"plugins={'on' if a.allow_plugins else 'off'}",
            flush=True,
        )

    return serve(a.dataset, a.listen, token=token, limits=limits, allow_plugins=a.allow_plugins,
                 group_commit_wait_us=a.group_commit_wait_us, preload=not a.no_preload, ready=ready,
                 memory_budget=a.memory_budget, scrub_rate=a.scrub_rate, compact_delta=a.compact_delta, recommend=a.recommend,
                 recommend_checkpoint=a.recommend_checkpoint,
                 recommend_fanouts=_ints(a.recommend_fanouts, "--recommend-fanouts") if a.recommend_fanouts else None)


def _embed_arg(a, client):
    import numpy as np

    if a.embed_file:
        from flashgnn._durable import load_npy

        return load_npy(a.embed_file)
    if a.embed is not None:
        try:
            return np.asarray([float(x) for x in a.embed.split(",")], dtype=np.float32)
        except ValueError:
            raise ValueError(f"--embed: expected comma-separated numbers, got {a.embed!r}") from None
    g = client.stats()["graph"]  # the server always reports the row's width and dtype
    return np.zeros(int(g["feature_dim"]), dtype=str(g["feature_dtype"]))


def _ints(text: str, flag: str) -> list[int]:
    try:
        return [int(x) for x in text.split(",") if x.strip()]
    except ValueError:
        raise ValueError(f"{flag}: expected comma-separated integers, got {text!r}") from None


def build_dfg(model: str, checkpoint: str, fanouts: list[int]):
    """The built-in DFG of a `flashgnn train --model MODEL --checkpoint DIR` model."""
    from flashgnn.dfg import models
    from flashgnn.nn.checkpoint import load_checkpoint

    state = load_checkpoint(checkpoint)
    kind = state.get("model_config", {}).get("model")
    if model not in models.checkpoint_models():
        raise ValueError(f"--model {model}: no built-in DFG; expected one of {', '.join(models.checkpoint_models())}")
    if kind != model:
        raise ValueError(f"--checkpoint {checkpoint}: holds a {kind!r} model, not --model {model}")
    return models.from_checkpoint(state, fanouts)


def cmd_query(a) -> int:
    import time

    import numpy as np

    from flashgnn._util import print_json as _print_json

    from .client import Client, ServerError

    out: object
    try:
        with Client(a.address, timeout=a.timeout, token_file=a.token_file) as c:
            op = a.op
            if op == "health":
                out = c.health()
                line = f"{a.address}: {out['status']} (flashgnn {out['version']}, up {out['uptime_s']:.1f} s)"
            elif op == "stats":
                out = c.stats()
                n = sum(r["requests"] for r in out["rpcs"].values())
                line = (f"{a.address}: {n} requests, {sum(out['rejected'].values())} rejected, "
                        f"{out['in_flight']}/{out['max_inflight']} in flight, up {out['uptime_s']:.1f} s")
            elif op == "get-neighbors":
                nb = c.get_neighbors(a.vid)
                out = {"vid": a.vid, "neighbors": nb.tolist()}
                line = f"{a.vid}: {nb.size} neighbors: {nb.tolist()}"
            elif op == "get-embed":
                e = c.get_embed(a.vid)
                out = {"vid": a.vid, "dtype": e.dtype.name, "embed": e.tolist()}
                line = f"{a.vid}: {e.dtype.name}[{e.size}] {np.array2string(e, precision=4, threshold=16)}"
            elif op in ("add-edge", "delete-edge"):
                seq = getattr(c, op.replace("-", "_"))(a.dst, a.src)
                out = {"op": op, "dst": a.dst, "src": a.src, "seq": seq}
                line = f"{op} {a.dst} <- {a.src}: durable at seq {seq}"
            elif op == "delete-vertex":
                seq = c.delete_vertex(a.vid)
                out = {"op": op, "vid": a.vid, "seq": seq}
                line = f"delete-vertex {a.vid}: durable at seq {seq}"
            elif op == "add-vertex":
                vid = c.add_vertex(_embed_arg(a, c))
                out = {"op": op, "vid": vid}
                line = f"add-vertex: new vertex {vid} (durable)"
            elif op == "update-embed":
                seq = c.update_embed(a.vid, _embed_arg(a, c))
                out = {"op": op, "vid": a.vid, "seq": seq}
                line = f"update-embed {a.vid}: durable at seq {seq}"
            elif op == "run":
                dfg = build_dfg(a.model, a.checkpoint, _ints(a.fanouts, "--fanouts")).to_bytes()  # encoded once
                batch = _ints(a.batch, "--batch")
                times = []
                for _ in range(max(1, a.repeat)):
                    t0 = time.perf_counter()
                    res = c.run(dfg, batch)
                    times.append(time.perf_counter() - t0)
                out = {"outputs": {k: v.tolist() for k, v in res.items()}, "profile": c.last_profile,
                       "latency_ms": [t * 1e3 for t in times]}
                shapes = ", ".join(f"{k}: {v.dtype.name}{list(v.shape)}" for k, v in res.items())
                line = (f"run {a.model} on {len(batch)} targets: {shapes}; latency first {times[0] * 1e3:.1f} ms"
                        + (f", median of the rest {np.median(times[1:]) * 1e3:.1f} ms" if len(times) > 1 else ""))
            elif op == "recommend":
                t0 = time.perf_counter()
                ids, scores = c.recommend(a.node, a.k, a.exclude_seen)
                ms = (time.perf_counter() - t0) * 1e3
                out = {"node": a.node, "ids": ids.tolist(), "scores": scores.tolist(), **c.last_recommend,
                       "latency_ms": ms}
                line = (f"recommend {a.node}: {ids.tolist()} (scores {np.array2string(scores, precision=3)}; "
                        f"seq {c.last_recommend['seq']}, {ms:.1f} ms)")
            elif op == "plugin":
                with open(a.file, encoding="utf-8") as f:
                    res = c.plugin(a.name, f.read())
                out = {"plugin": a.name, "result": res}
                line = f"plugin {a.name}: loaded ({res})"
            else:  # argparse restricts op; kept for safety
                raise ValueError(f"unknown query {op!r}")
    except ServerError as e:
        print(f"flashgnn query: {e}", file=sys.stderr)
        return 2 if e.code_name in ("INVALID_ARGUMENT", "NOT_FOUND", "PERMISSION_DENIED", "UNAUTHENTICATED") else 1
    if a.json:
        _print_json(out)
    else:
        print(line)
    return 0
