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
and the tokens come out wrong).

Compute itself still runs when issued, so a copy that overwrites memory an op on another
stream may still be reading cannot change a value here; it is a violation of kind ``order``
too, named at the copy: an asynchronous copy on stream S into device memory whose last use was
an op on stream C is in order only if S waited for an event C recorded after that use
(``wait_event``), for C itself (``wait_stream``), or the host waited for the device since.
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
    """The copies issued and not yet landed, by destination storage; and which op on which
    stream last used each device storage, and what each stream waited for (the copies'
    write-after-read check)."""

    def __init__(self, current: Any, violate: Any) -> None:
        self.current = current  # () -> the current stream
        self.violate = violate  # (kind, message) -> None: EmulationState.violate
        self.pending: dict[int, list[_Copy]] = {}
        self.ops = 0  # ops issued so far
        self.last_use: dict[int, tuple[int, int]] = {}  # storage -> (id(stream), op number)
        self.waited: dict[tuple[int, int], int] = {}  # (id(waiter), id(stream)) -> op number
        self.synced = 0  # the op number the host last waited for the whole device at

    @staticmethod
    def key(t: torch.Tensor) -> int:
        return t.untyped_storage()._cdata

    def defer(self, dst: torch.Tensor) -> None:
        """``dst`` (an inner or host tensor) was just written by an asynchronous copy on the
        current stream: hold its values back until the copy is demanded. The copy is refused
        (``order``) where an op on another stream used ``dst`` after the last wait for it."""
        stream = id(self.current())
        user, op = self.last_use.get(self.key(dst), (stream, 0))
        if user != stream and op > max(self.synced, self.waited.get((stream, user), 0)):
            self.violate("order", f"an asynchronous copy overwrites a {tuple(dst.shape)} "
                                  "tensor that an op on another stream used and may still be "
                                  "reading (wait_event on that stream's event missing)")
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
        self.synced = self.ops

    def mark(self, stream: Any) -> tuple[int, int]:
        """What an event recorded now on ``stream`` stands for: the ops issued so far."""
        return id(stream or self.current()), self.ops

    def wait_for(self, waiter: Any, mark: tuple[int, int] | None) -> None:
        """Stream ``waiter`` waits for an event's ``mark`` (its work runs after those ops)."""
        if mark is not None:
            key = (id(waiter or self.current()), mark[0])
            self.waited[key] = max(self.waited.get(key, 0), mark[1])

    def used(self, inners: list[torch.Tensor]) -> None:
        """One op on the current stream used ``inners`` (after before_op and the op)."""
        self.ops += 1
        stream = id(self.current())
        for t in inners:
            self.last_use[self.key(t)] = (stream, self.ops)

    def forget(self, key: int) -> None:
        """A device storage was freed: its uses go with it (its address may come back)."""
        self.last_use.pop(key, None)

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
