"""Named GPU profiles the emulation runs as: what a card holds and which kernels it takes.

    with emulated_cuda(card="rtx3060") as emu: ...      # 12 GB, compute capability 8.6
    with emulated_cuda(card=card("rtx4090", context_bytes=0)) as emu: ...

A profile gives ``torch.cuda`` its answers (``get_device_properties``, ``get_device_capability``,
``is_bf16_supported``, ``mem_get_info``), the allocator model its capacity (an allocation that
does not fit raises ``torch.OutOfMemoryError`` with CUDA's message, memory.py / oom.py) and the
kernel rules their architecture (rules.py: ``_scaled_mm``, ``_int_mm``, attention backends,
bf16).

Sources of the figures: capacities are the cards' nominal sizes in GiB (a real card reports a
little less, which is not modelled); compute capabilities and bf16 / fp8 support are NVIDIA's
published ones (bf16 tensor cores from sm 8.0, fp8 from sm 8.9); ``workspace_bytes`` is cuBLAS's
recommended workspace (4 MiB before Hopper, 32 MiB from sm 9.0; the H100 run held 32 MiB
before any weight, docs/reports/GPU.md), allocated through the caching allocator at the first
matrix product; ``context_bytes`` (the CUDA context and the kernels it loads, outside the
allocator) is an assumption, 0.5 GiB on every card, not a measurement. ``sdpa`` lists the
attention backends torch builds for that architecture (flash from sm 8.0, cuDNN here on
sm 9.0 only). The default device of ``emulated_cuda()`` without ``card`` is the ``h100``
profile with neither context nor workspace (the emulation as it was before profiles).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

__all__ = ["CARDS", "Card", "UnknownCardError", "card"]

GIB, MIB = 1024 ** 3, 1024 ** 2
BACKENDS = ("flash", "efficient", "cudnn", "math")


class UnknownCardError(ValueError):
    """An unknown card name or profile field; the message lists the profiles."""


@dataclass(frozen=True)
class Card:
    name: str
    label: str  # what get_device_name() says
    total_memory: int  # bytes
    capability: tuple[int, int]
    bf16: bool  # bf16 tensor cores (sm 8.0+)
    fp8: bool  # fp8 tensor cores, torch._scaled_mm (sm 8.9+)
    int8: bool  # int8 tensor cores, torch._int_mm (sm 7.5+)
    context_bytes: int = GIB // 2
    workspace_bytes: int = 4 * MIB
    sdpa: tuple[str, ...] = ("flash", "efficient", "math")
    multi_processor_count: int = 0

    @property
    def nominal_gb(self) -> int:
        return round(self.total_memory / GIB)


CARDS: dict[str, Card] = {c.name: c for c in (
    Card("rtx2080", "NVIDIA GeForce RTX 2080 (emulated)", 8 * GIB, (7, 5), bf16=False,
         fp8=False, int8=True, sdpa=("efficient", "math"), multi_processor_count=46),
    Card("rtx3060", "NVIDIA GeForce RTX 3060 (emulated)", 12 * GIB, (8, 6), bf16=True,
         fp8=False, int8=True, multi_processor_count=28),
    Card("rtx4080", "NVIDIA GeForce RTX 4080 (emulated)", 16 * GIB, (8, 9), bf16=True,
         fp8=True, int8=True, multi_processor_count=76),
    Card("rtx4090", "NVIDIA GeForce RTX 4090 (emulated)", 24 * GIB, (8, 9), bf16=True,
         fp8=True, int8=True, multi_processor_count=128),
    Card("h100", "NVIDIA H100 80GB HBM3 (emulated)", 80 * GIB, (9, 0), bf16=True, fp8=True,
         int8=True, workspace_bytes=32 * MIB, sdpa=("flash", "efficient", "cudnn", "math"),
         multi_processor_count=132),
)}

#: the device of emulated_cuda() without a card: H100 rules, memory counted from zero
DEFAULT = dataclasses.replace(CARDS["h100"], name="default", context_bytes=0, workspace_bytes=0)


def _listing() -> str:
    return "; ".join(f"{c.name} ({c.nominal_gb} GB, sm {c.capability[0]}.{c.capability[1]}"
                     f"{'' if c.bf16 else ', no bf16'})" for c in CARDS.values())


def card(which: str | Card | None = None, **fields: object) -> Card:
    """The profile named ``which`` (or ``which`` itself, or the default device), with
    ``fields`` replaced; an unknown name or field raises UnknownCardError listing the
    profiles and fields."""
    if which is None:
        base = DEFAULT
    elif isinstance(which, Card):
        base = which
    elif which in CARDS:
        base = CARDS[which]
    else:
        raise UnknownCardError(f"card {which!r} is not an emulated profile; choose one of: "
                               f"{_listing()}")
    known = [f.name for f in dataclasses.fields(Card)]
    bad = sorted(set(fields) - set(known))
    if bad:
        raise UnknownCardError(f"card field {bad[0]!r} is not a profile field (fields: "
                               f"{', '.join(known)}); profiles: {_listing()}")
    if "sdpa" in fields and not set(fields["sdpa"]) <= set(BACKENDS):  # type: ignore[arg-type]
        raise UnknownCardError(f"card field 'sdpa' takes backends of {', '.join(BACKENDS)}, "
                               f"got {fields['sdpa']!r}; profiles: {_listing()}")
    return dataclasses.replace(base, **fields) if fields else base
