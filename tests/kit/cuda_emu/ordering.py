"""Out-of-order completion: ``emulated_cuda(completion="late")``.

By default the emulation runs work when it is issued, so every stream wait is already met and a
missing one cannot show. In the late mode an asynchronous copy (``non_blocking=True`` from or
into pinned host memory) completes only when something demands it: until then its destination
holds poison (NaN, or the integer type's lowest value) and its values wait here.

A pending copy lands when
- an op on the stream that issued it uses the destination (work on one stream runs in order);
- a stream waits for an event recorded after it on that stream (``wait_event``, ``Event.wait``)
  or waits for that stream (``wait_stream``);
- the host waits for the device: ``synchronize()``, ``Event.synchronize()``, a blocking read
  (device-to-host reads wait for the current stream's work).
``Event.query()`` is True only once the copies recorded before it have landed.

An op on another stream that uses a destination whose copy has not landed is a violation of
kind ``order`` at its file and line (with raise_on_violation=False it computes on the poison,
and the tokens come out wrong). Compute itself still runs when issued, so a block overwritten
before its last use (a missing wait on the *consumer's* event) is not modelled.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["Ordering"]


def _poison(t: torch.Tensor) -> None:
    if t.dtype.is_floating_point:
        t.fill_(float("nan"))
    elif t.dtype == torch.bool:
        t.fill_(True)
    else:
        t.fill_(torch.iinfo(t.dtype).min)


class _Copy:
    __slots__ = ("dst", "stream", "values")

    def __init__(self, dst: torch.Tensor, stream: Any) -> None:
        self.dst, self.stream, self.values = dst, stream, dst.clone()


class Ordering:
    """The copies issued and not yet landed, by destination storage."""

    def __init__(self, current: Any) -> None:
        self.current = current  # () -> the current stream
        self.pending: dict[int, list[_Copy]] = {}

    @staticmethod
    def key(t: torch.Tensor) -> int:
        return t.untyped_storage()._cdata

    def defer(self, dst: torch.Tensor) -> None:
        """``dst`` (an inner or host tensor) was just written by an asynchronous copy on the
        current stream: hold its values back until the copy is demanded."""
        self.pending.setdefault(self.key(dst), []).append(_Copy(dst, self.current()))
        _poison(dst)

    def _land(self, keep: Any) -> None:
        for key in list(self.pending):
            copies = self.pending[key]
            left = [c for c in copies if keep(c)]
            for c in copies:
                if not keep(c):
                    c.dst.copy_(c.values)
            if left:
                self.pending[key] = left
            else:
                del self.pending[key]

    def land_all(self) -> None:
        self._land(lambda c: False)

    def land_stream(self, stream: Any) -> None:
        self._land(lambda c: c.stream is not stream)

    def recorded(self, stream: Any) -> set[int]:
        """The copies an event recorded now on ``stream`` stands for (their ids)."""
        return {id(c) for cs in self.pending.values() for c in cs if c.stream is stream}

    def land_ids(self, ids: set[int]) -> None:
        self._land(lambda c: id(c) not in ids)

    def done(self, ids: set[int]) -> bool:
        return not any(id(c) in ids for cs in self.pending.values() for c in cs)

    def before_op(self, state: Any, inners: list[torch.Tensor]) -> None:
        """An op on the current stream is about to use ``inners``."""
        stream = self.current()
        for t in inners:
            copies = self.pending.get(self.key(t))
            if not copies:
                continue
            if any(c.stream is not stream for c in copies):
                state.violate("order", f"a {tuple(t.shape)} tensor is used on one stream while "
                                       "its asynchronous copy on another has not been waited "
                                       "for (wait_event / wait_stream missing)")
            mine = {id(c) for c in copies if c.stream is stream}
            self._land(lambda c, mine=mine: id(c) not in mine)
