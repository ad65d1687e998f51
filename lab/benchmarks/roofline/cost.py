"""A card's time for a list of kernels: per kernel, the larger of its FLOPs over the card's
dense peak for its operand kind and its bytes over the card's memory bandwidth, plus the card's
launch cost (tests/kit/cuda_emu/cards.py: the spec-sheet values and their sources). Nothing here
is fitted to a measurement.

Kernels are kept as a table of distinct (op, kind, FLOPs, bytes) with a count: a call of the
8B model repeats its 32 blocks' kernels, so the table is short and the sum exact.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from typing import Any

from tests.kit.cuda_emu import Card

from .ops import Kernel

__all__ = ["seconds", "table"]


def table(kernels: Iterable[Kernel]) -> list[list[Any]]:
    """[op, kind, flops, nbytes, count] per distinct kernel, the most time-consuming kinds
    first (by bytes, then FLOPs, for a stable order)."""
    counts = Counter((k.op, k.kind, k.flops, k.nbytes) for k in kernels)
    rows = [[op, kind, flops, nbytes, n] for (op, kind, flops, nbytes), n in counts.items()]
    return sorted(rows, key=lambda r: (-r[2] * r[4], -r[3] * r[4], r[0]))


def _peak(card: Card, kind: str) -> float:
    """The card's peak for ``kind``; a kind it has no units for runs at its float32 rate."""
    return card.peak(kind) or card.peak("float32")


def seconds(rows: list[list[Any]], card: Card) -> dict[str, Any]:
    """The roofline time of a kernel table on ``card`` and its parts: ``compute_s`` and
    ``memory_s`` (the sums of each bound alone), ``bound_s`` (the sum of the larger per
    kernel), ``launch_s`` (kernels x launch cost) and ``seconds`` = bound + launch."""
    compute = memory = bound = 0.0
    kernels = 0
    for _op, kind, flops, nbytes, n in rows:
        c = flops / _peak(card, kind) if flops else 0.0
        m = nbytes / card.bandwidth
        compute += n * c
        memory += n * m
        bound += n * max(c, m)
        kernels += n
    launch = kernels * card.launch_s
    return {"seconds": bound + launch, "compute_s": compute, "memory_s": memory,
            "bound_s": bound, "launch_s": launch, "kernels": kernels,
            "flops": sum(r[2] * r[4] for r in rows), "nbytes": sum(r[3] * r[4] for r in rows)}
