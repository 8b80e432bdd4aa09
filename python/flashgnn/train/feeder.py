"""Host-to-device batch staging for CUDA training: :class:`DeviceFeeder`.

The copy of batch i+1 to the GPU overlaps the compute of batch i (a side
stream, pinned memory, an event the compute stream waits on). On CPU batches
pass through untouched, so the trainer wraps every loader in it.
"""

from __future__ import annotations


def _pinned(t):
    return t.pin_memory() if t.device.type == "cpu" else t


class DeviceFeeder:
    """Moves batches to a CUDA device ahead of use: a background thread
    (:func:`flashgnn.loader.neighbor.run_ahead`) pins each batch and issues its
    host-to-device copy on a side stream, so the copy of batch i+1 overlaps
    the compute of batch i. On CPU it passes batches through."""

    def __init__(self, it, device, depth: int = 2):
        self.it, self.device, self.depth = it, device, depth

    def __iter__(self):
        if self.device.type != "cuda":
            yield from self.it
            return
        import torch

        from flashgnn.loader.neighbor import run_ahead

        stream = torch.cuda.Stream(device=self.device)

        def staged():
            for data in self.it:
                with torch.cuda.stream(stream):
                    # Only host tensors are pinned: with a DeviceCache, x is already on the device.
                    data = data.apply(_pinned).to(self.device, non_blocking=True)
                    ev = torch.cuda.Event()
                    ev.record(stream)
                yield data, ev

        ahead = run_ahead(staged(), self.depth)
        try:
            for data, ev in ahead:
                cur = torch.cuda.current_stream(self.device)
                cur.wait_event(ev)
                for _, v in data:  # memory made on the side stream is used on this one
                    if torch.is_tensor(v):
                        v.record_stream(cur)
                yield data
        finally:
            ahead.close()
