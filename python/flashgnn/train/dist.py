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

# torchrun's switch that gives each rendezvous round its own worker store (see check_elastic_store).
OWN_STORE_VAR = "TORCH_DISABLE_SHARE_RDZV_TCP_STORE"


def check_elastic_store() -> None:
    """Refuse ``torchrun --max-restarts N`` (N > 0) with torchrun's shared store.

    By default torchrun's agents hand their workers the rendezvous's own TCP store
    (``TORCHELASTIC_USE_AGENT_STORE=True``), one store for the whole job, and
    ``init_process_group`` keys the ranks' addresses there without the attempt in
    the key. Workers started again after a failure (or a node joining) read the
    dead attempt's addresses: their gloo/NCCL set-up is refused or waits until its
    timeout (torch 2.15, seen in tests/train/test_distributed.py; upstream
    pytorch/pytorch#167288). ``TORCH_DISABLE_SHARE_RDZV_TCP_STORE=1`` in torchrun's
    environment makes rank 0 host a fresh store each round, and restarts work.
    The worker cannot repair this itself: nothing in its environment tells the
    round apart on every node (``TORCHELASTIC_RESTART_COUNT`` counts each node's
    own failures). So a run that asks for restarts without it is refused at start,
    with the fix, rather than hanging at its first restart."""
    if int(os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0") or 0) > 0 and \
            os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True":
        raise TrainError(f"torchrun --max-restarts {os.environ['TORCHELASTIC_MAX_RESTARTS']} needs {OWN_STORE_VAR}=1 "
                         "in torchrun's environment: with torchrun's shared store, restarted workers read the "
                         "previous attempt's addresses and fail to connect or wait out their timeout "
                         "(docs/training.md § Data-parallel training)")


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

            check_elastic_store()

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
        """Leave the process group (once; later collectives count this rank alone), after a barrier: a rank
        that tore its group down while rank 0 still wrote its summary was seen to abort at exit (gloo's
        "terminate called without an active exception") in two loaded full test runs."""
        if self.enabled:
            import torch.distributed as dist

            try:
                dist.barrier()
            finally:
                dist.destroy_process_group()
                self.enabled = False

