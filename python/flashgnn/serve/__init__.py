"""flashgnn's gRPC service: HolisticGNN-style GraphStore / GraphRunner RPCs.

- :mod:`flashgnn.serve.server` — ``flashgnn serve``: the servicer over a
  :class:`flashgnn.MutableGraph`, with authentication, limits, deadlines and
  a graceful drain (docs/reliability.md promise 5), assembled from
  :mod:`~flashgnn.serve.transport` (the gRPC server, the gate every RPC
  passes, metrics, the drain), :mod:`~flashgnn.serve.call` (an admitted
  call's status, deadline and slot), :mod:`~flashgnn.serve.graph_rpcs` (the
  GraphStore RPCs) and :mod:`~flashgnn.serve.runner_rpcs` (Run, Plugin).
- :mod:`flashgnn.serve.client` — :class:`Client`, one method per RPC, and
  :class:`ServerError`.
- :mod:`flashgnn.serve.token` — the token file's rules (a regular file, one
  line), shared by the server and the client.
- :mod:`benchmarks.crashtest` — kill the server at random points and check
  that every acknowledged batch survived and no batch is half-applied.
- ``flashgnn_pb2*.py`` — stubs generated from ``proto/flashgnn.proto`` by
  ``gen_proto.sh`` (committed; do not edit).

Nothing here is imported by ``import flashgnn``: grpc loads only when a
server or client is used.
"""
