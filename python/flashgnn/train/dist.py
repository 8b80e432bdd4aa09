"""Data-parallel training: the ``torch.distributed`` context a run takes from
``torchrun``'s environment (``WORLD_SIZE``, ``RANK``, ``LOCAL_RANK``,
``LOCAL_WORLD_SIZE``), or a one-process stand-in when there is none.

DDP uses gloo on CPU and NCCL on CUDA. Every collective is a no-op in one
process, so the trainer calls them unconditionally. Errors (no CUDA device,
an unknown ``--device``) raise :class:`~flashgnn.train.config.TrainError`.
"""

from __future__ import annotations

import os

from flashgnn.train.config import TrainError


class Dist:
    """torch.distributed context from torchrun's environment (or none)."""

    def __init__(self, device_arg: str):
        import torch

        self.world = int(os.environ.get("WORLD_SIZE", "1"))
        self.rank = int(os.environ.get("RANK", "0"))
        self.local_rank = int(os.environ.get("LOCAL_RANK", "0"))
        self.local_world = int(os.environ.get("LOCAL_WORLD_SIZE", str(self.world)))
        if device_arg.startswith("cuda"):
            if not torch.cuda.is_available():
                raise TrainError("--device cuda requested but no CUDA device is available "
                                 "(torch.cuda.is_available() is False); use --device cpu")
            try:
                idx = self.local_rank if self.world > 1 and device_arg == "cuda" else (
                    int(device_arg.split(":")[1]) if ":" in device_arg else 0)
            except ValueError:
                raise TrainError(f"--device {device_arg!r}: expected cpu, cuda or cuda:N") from None
            self.device = torch.device("cuda", idx)
            torch.cuda.set_device(self.device)
        elif device_arg == "cpu":
            self.device = torch.device("cpu")
        else:
            raise TrainError(f"--device {device_arg!r}: expected cpu, cuda or cuda:N")
        self.enabled = self.world > 1
        if self.enabled:
            import torch.distributed as dist

            dist.init_process_group(backend="nccl" if self.device.type == "cuda" else "gloo")

    @property
    def main(self) -> bool:
        return self.rank == 0

    def sum(self, values: list[float]) -> list[float]:
        if not self.enabled:
            return values
        import torch
        import torch.distributed as dist

        t = torch.tensor(values, dtype=torch.float64, device=self.device)
        dist.all_reduce(t)
        return t.tolist()

    def max(self, value: float) -> float:
        if not self.enabled:
            return value
        import torch
        import torch.distributed as dist

        t = torch.tensor([value], dtype=torch.float64, device=self.device)
        dist.all_reduce(t, op=dist.ReduceOp.MAX)
        return float(t.item())

    def gather(self, obj) -> list:
        if not self.enabled:
            return [obj]
        import torch.distributed as dist

        out = [None] * self.world
        dist.all_gather_object(out, obj)
        return out

    def broadcast(self, obj):
        """Rank 0's ``obj`` on every rank (pickled; for small things and a resumed checkpoint)."""
        if not self.enabled:
            return obj
        import torch.distributed as dist

        box = [obj if self.main else None]
        dist.broadcast_object_list(box, src=0, device=self.device)
        return box[0]

    def barrier(self) -> None:
        if self.enabled:
            import torch.distributed as dist

            dist.barrier()

    def close(self) -> None:
        """Leave the process group (once; later collectives count this rank alone)."""
        if self.enabled:
            import torch.distributed as dist

            dist.destroy_process_group()
            self.enabled = False

