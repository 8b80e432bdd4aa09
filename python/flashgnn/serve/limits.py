"""The server's limits, one named bound per resource (no grpc import: the CLI parser reads the defaults)."""

from __future__ import annotations

from dataclasses import dataclass

from flashgnn import _core

# How long a Run waits for room under --max-inflight-bytes before RESOURCE_EXHAUSTED (capped by its deadline).
# Short on purpose: a waiting Run holds one of the --workers threads.
INFLIGHT_BYTES_WAIT_S = 1.0


@dataclass
class Limits:
    """Every bound the server enforces; the CLI flags have the same names."""

    max_inflight: int = 64  # admitted requests (running or queued for a worker)
    max_message_bytes: int = 64 << 20  # one gRPC message, either direction (64 MiB)
    default_deadline_s: float = 30.0  # when the client sets none
    # The longest deadline a client may ask for: past it a call is answered DEADLINE_EXCEEDED whatever deadline
    # the client set, so an authenticated client trickling UpdateGraph chunks (each within
    # --request-body-timeout) holds its slot at most this long. 600 s moves a whole --max-update-bytes 1 GiB
    # stream at 1.8 MB/s.
    max_deadline_s: float = 600.0
    max_batch: int = 4096  # Run target nodes per request
    max_fanout: int = 100  # per hop of a DFG's sampling op; -1 (all neighbors) is refused
    workers: int = 16  # threads doing the work
    max_update_bytes: int = 1 << 30  # one UpdateGraph stream, all chunks together, as decoded arrays (1 GiB)
    max_batch_ops: int = _core.MAX_BATCH_OPS  # unit ops in one ApplyBatch: the store's own maximum
    max_hops: int = 3  # sampling hops of a DFG's BatchPre
    max_sampled_nodes: int = 1 << 22  # Run: targets x (1 + f1 + f1*f2 + ...) summed over the DFG's BatchPre nodes
    # Run: inferred peak live bytes of one request's DFG (+ its reply), checked before any kernel runs. 1 GiB
    # admits a 2-layer GCN (128 features -> 128 hidden) at --max-batch 4096 targets and fanouts 10,5, whose
    # inferred peak is 867 MiB (SpMM over <= 249,856 nodes x 128 float32 plus its [245,760 edges x 128] messages).
    max_request_bytes: int = 1 << 30
    # Run: the same bytes summed over every Run in flight (reserved before the first kernel, released after the
    # reply is built): 4 GiB = four maximum-size requests at once (of --workers 16); smaller ones share it.
    max_inflight_bytes: int = 4 << 30
    # Seconds a call may wait for its request message (UpdateGraph: for each chunk) after it was
    # authenticated and admitted; an idle call is then answered DEADLINE_EXCEEDED and its slot freed.
    request_body_timeout_s: float = 10.0
    grace_s: float = 10.0  # drain time for in-flight requests on SIGTERM
    # Recommend: ids per answer. Scoring reads every candidate row whatever k is; k bounds the reply and the
    # selection (1000 ids + float32 scores: ~12 KiB).
    max_recommend_k: int = 1000

    def check(self) -> None:
        for name in ("max_inflight", "max_message_bytes", "max_batch", "max_fanout", "workers", "max_update_bytes",
                     "max_batch_ops", "max_hops", "max_sampled_nodes", "max_request_bytes", "max_inflight_bytes",
                     "max_recommend_k"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')}: {getattr(self, name)} < 1")
        if self.max_request_bytes > self.max_inflight_bytes:
            raise ValueError(f"--max-request-bytes {self.max_request_bytes} > --max-inflight-bytes "
                             f"{self.max_inflight_bytes}: such a request could never run")
        if not self.default_deadline_s > 0:
            raise ValueError(f"--default-deadline: {self.default_deadline_s} must be > 0")
        if not self.default_deadline_s <= self.max_deadline_s:
            raise ValueError(f"--default-deadline {self.default_deadline_s:g} > --max-deadline {self.max_deadline_s:g}")
        if not self.request_body_timeout_s > 0:
            raise ValueError(f"--request-body-timeout: {self.request_body_timeout_s} must be > 0")
        if self.grace_s < 0:
            raise ValueError(f"--grace: {self.grace_s} < 0")
