"""The server's limits, one named bound per resource (no grpc import: the CLI parser reads the defaults)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass
class Limits:
    """Every bound the server enforces; the CLI flags have the same names."""

    max_inflight: int = 64  # admitted requests (running or queued for a worker)
    max_message_bytes: int = 64 << 20  # one gRPC message, either direction (64 MiB)
    default_deadline_s: float = 30.0  # when the client sets none
    max_batch: int = 4096  # Run target nodes per request
    max_fanout: int = 100  # per hop of a DFG's sampling op; -1 (all neighbors) is refused
    workers: int = 16  # threads doing the work
    max_update_bytes: int = 1 << 30  # one UpdateGraph stream, all chunks together, as decoded arrays (1 GiB)
    max_batch_ops: int = 65536  # unit ops in one ApplyBatch
    max_hops: int = 3  # sampling hops of a DFG's BatchPre
    max_sampled_nodes: int = 1 << 22  # Run: targets x (1 + f1 + f1*f2 + ...) summed over the DFG's BatchPre nodes
    grace_s: float = 10.0  # drain time for in-flight requests on SIGTERM

    def check(self) -> None:
        for name in ("max_inflight", "max_message_bytes", "max_batch", "max_fanout", "workers", "max_update_bytes",
                     "max_batch_ops", "max_hops", "max_sampled_nodes"):
            if getattr(self, name) < 1:
                raise ValueError(f"--{name.replace('_', '-')}: {getattr(self, name)} < 1")
        if not self.default_deadline_s > 0:
            raise ValueError(f"--default-deadline: {self.default_deadline_s} must be > 0")
        if self.grace_s < 0:
            raise ValueError(f"--grace: {self.grace_s} < 0")
