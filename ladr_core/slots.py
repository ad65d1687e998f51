"""Which item runs in which slot of the sampling loop: finished items leave, waiting ones join.

The loop (ladr_core.sampling) works on S slots ([S, N] tokens and masks on the device): S = B
for a plain batch, slot i holding item i; S = `max_batch` < B for a rolling batch, where the
next waiting item takes a finished item's slot at its own step 0. This is the host side of it:
plain lists read from the one per-step transfer of the masked counts, so no extra host sync.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field

__all__ = ["Slots"]


@dataclass
class Slots:
    """Per slot s: item[s] (-1 = free), counts[s] its masked count at the last sync (0: none
    left), ran[s] its steps; per item i: item_counts[i] at its start, item_nfe[i]; queue: items
    not started; done: items finished."""

    item: list[int]
    counts: list[int]
    ran: list[int]
    queue: deque[int]
    item_counts: list[int]
    item_nfe: list[int] = field(default_factory=list)
    done: int = 0

    @classmethod
    def start(cls, item_counts: list[int], width: int) -> Slots:
        """Items 0 .. width - 1 in slots 0 .. width - 1, the rest waiting."""
        return cls(list(range(width)), list(item_counts[:width]), [0] * width,
                   deque(range(width, len(item_counts))), list(item_counts),
                   [0] * len(item_counts))

    @property
    def rolling(self) -> bool:
        """More items than slots: slots are reused, items join while others run."""
        return len(self.item_counts) > len(self.item)

    def active(self) -> list[int]:
        """Slots whose item still has masked tokens, in slot order."""
        return [s for s, c in enumerate(self.counts) if c > 0]

    def stepped(self, active: list[int]) -> None:
        """After a denoise call over `active` slots: each of their items ran one step more."""
        for s in active:
            self.ran[s] += 1
            self.item_nfe[self.item[s]] += 1

    def last_step(self, steps: int) -> bool:
        """True when every active slot has just run its item's last step (step T - 1) and no
        item waits: the loop is over without reading the counts again."""
        return not self.queue and all(self.ran[s] >= steps for s in self.active())

    def turnover(self) -> list[tuple[int, int, int | None]]:
        """Retire every finished item and admit waiting ones into the freed slots, in slot
        order: [(slot, finished item, joining item or None)]. An item with nothing to generate
        finishes on admission (it joins and leaves in the same turnover)."""
        moves = []
        for s, item in enumerate(self.item):
            while item >= 0 and self.counts[s] == 0:
                self.done += 1
                nxt = self.queue.popleft() if self.queue else None
                moves.append((s, item, nxt))
                item = -1 if nxt is None else nxt
                self.item[s], self.ran[s] = item, 0
                self.counts[s] = 0 if nxt is None else self.item_counts[nxt]
        return moves
