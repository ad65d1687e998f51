"""HostLag: a few device values read on the host one call later, without waiting for the device.

The ML-Cache needs a few counts per call; reading them where they are computed is a host sync
per call. ``post`` starts an asynchronous copy into a host buffer (pinned on CUDA) and ``read``
returns the values at the next call, when the sampler's own per-step sync has completed it.
If it has not (a caller that never syncs), ``read`` waits on the copy's event and counts it in
``waits``, so a hidden sync shows in the stats.
"""

from __future__ import annotations

import torch

__all__ = ["HostLag"]


class HostLag:
    """One small integer tensor copied to the host per call, read at the next call."""

    def __init__(self) -> None:
        self.host: torch.Tensor | None = None
        self.event: torch.cuda.Event | None = None
        self.fresh = False  # a value was posted and not read yet
        self.waits = 0  # reads that had to wait for the device (0 when driven by sample())

    def post(self, values: torch.Tensor) -> None:
        """Start copying ``values`` (a small 1-D integer tensor on the compute device) to the
        host."""
        cuda = values.device.type == "cuda"
        if self.host is None or self.host.shape != values.shape:
            self.host = torch.empty(values.shape, dtype=values.dtype, device="cpu",
                                    pin_memory=cuda)
        if cuda or values.device.type == "cpu":
            # async on CUDA (pinned buffer); on a CPU run the same call, done at once
            self.host.copy_(values, non_blocking=True)
            if cuda:
                self.event = torch.cuda.Event()
                self.event.record()
        else:  # other accelerators: a plain copy, which waits, counted as such
            self.host.copy_(values)
            self.waits += 1
        self.fresh = True

    def read(self) -> list[int] | None:
        """The values posted by the previous call, or None when nothing was posted since the
        last read."""
        if not self.fresh or self.host is None:
            return None
        if self.event is not None and not self.event.query():
            self.waits += 1
            self.event.synchronize()
        self.fresh = False
        return [int(v) for v in self.host.tolist()]
