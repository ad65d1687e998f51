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

``pinned_bytes`` limits the page-locked host memory (``pin_memory``) a run may hold, beyond
which CUDA's host allocation fails; it is the host's limit (its RAM, what else is pinned), not
the card's, so no profile sets one: a test sets it to show what a limit does.

Speed (lab/benchmarks/roofline): ``peaks`` are dense tensor-core peaks per operand kind in
FLOP/s (OP/s for int8; no 2:4 sparsity; half-precision and fp8 with float32 accumulation, as
PyTorch's GEMMs accumulate; "float32": the plain FP32 rate, as PyTorch leaves TF32 off for
matmuls), ``bandwidth`` the memory bandwidth in bytes/s. Sources, per card:

- rtx2080: NVIDIA Turing GPU Architecture whitepaper, appendix table of the GeForce RTX 2080
  (reference clocks, not Founders Edition): FP16 tensor with FP32 accumulate 40.3 TFLOPS,
  INT8 161.1 TOPS, FP32 10.1 TFLOPS, 448 GB/s. No bf16, no fp8.
- rtx3060: derived, not printed by NVIDIA: its spec page gives 112 third-generation tensor
  cores at 1.777 GHz boost, 3584 CUDA cores, 192-bit GDDR6 at 15 Gbps (360 GB/s); the Ampere
  GA102 whitepaper gives GA10x's dense rate per tensor core and clock (128 FP16/BF16 FLOPs with
  FP32 accumulate, 4x that for INT8): 25.5 TFLOPS, 101.9 TOPS, FP32 12.7 TFLOPS.
- rtx4080, rtx4090: NVIDIA Ada GPU Architecture whitepaper (v2.1), appendix: FP16 / BF16 tensor
  with FP32 accumulate 97.5 / 165.2 TFLOPS, FP8 with FP32 accumulate 194.9 / 330.3, INT8 389.9
  / 660.6 TOPS, FP32 48.7 / 82.6 TFLOPS, 716.8 / 1008 GB/s.
- h100: NVIDIA H100 Tensor Core GPU datasheet, the **SXM5** column (the committed H100 run names
  its card "NVIDIA H100 80GB HBM3", the SXM5 board's name; the PCIe board reports "H100 PCIe"
  and has 756 TFLOPS bf16 and 2.0 TB/s): BF16 / FP16 1,979 and FP8 / INT8 3,958 with sparsity,
  so 989.5 and 1,979 dense; FP32 67 TFLOPS; 3.35 TB/s.

``launch_s`` is no spec-sheet figure: the one launch-bound rate this project measured,
1.105 ms per step for 59.75 kernels of the baseline sampler alone in eager mode (18.5 us per
kernel, Python and the launch together) on the H100's host
(lab/results/h100/sampler_overhead_ab_new2_9994e80.json, ``baseline@T=1``), used for every card
(it is the host's cost more than the card's; lab/tests/bench/test_roofline.py holds it to the
file).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

__all__ = ["CARDS", "Card", "UnknownCardError", "card"]

GIB, MIB = 1024 ** 3, 1024 ** 2
BACKENDS = ("flash", "efficient", "cudnn", "math")
T, GB = 1e12, 1e9
LAUNCH_S = 1.1049972500032368e-3 / 59.75  # module docstring


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
    peaks: tuple[tuple[str, float], ...] = ()  # (operand kind, dense FLOP/s): module docstring
    bandwidth: float = 0.0  # memory bandwidth, bytes/s
    launch_s: float = LAUNCH_S  # per kernel
    pinned_bytes: int | None = None  # page-locked host memory the run may take; None: no limit

    def peak(self, kind: str) -> float:
        """Dense FLOP/s for operands of ``kind`` ("bfloat16", "float16", "float8", "int8",
        "float32"); 0.0 where the card has no such units."""
        return dict(self.peaks).get(kind, 0.0)

    @property
    def nominal_gb(self) -> int:
        return round(self.total_memory / GIB)


CARDS: dict[str, Card] = {c.name: c for c in (
    Card("rtx2080", "NVIDIA GeForce RTX 2080 (emulated)", 8 * GIB, (7, 5), bf16=False,
         fp8=False, int8=True, sdpa=("efficient", "math"), multi_processor_count=46,
         peaks=(("float16", 40.3 * T), ("int8", 161.1 * T), ("float32", 10.1 * T)),
         bandwidth=448 * GB),
    Card("rtx3060", "NVIDIA GeForce RTX 3060 (emulated)", 12 * GIB, (8, 6), bf16=True,
         fp8=False, int8=True, multi_processor_count=28,
         peaks=(("bfloat16", 25.5 * T), ("float16", 25.5 * T), ("int8", 101.9 * T),
                ("float32", 12.7 * T)), bandwidth=360 * GB),
    Card("rtx4080", "NVIDIA GeForce RTX 4080 (emulated)", 16 * GIB, (8, 9), bf16=True,
         fp8=True, int8=True, multi_processor_count=76,
         peaks=(("bfloat16", 97.5 * T), ("float16", 97.5 * T), ("float8", 194.9 * T),
                ("int8", 389.9 * T), ("float32", 48.7 * T)), bandwidth=716.8 * GB),
    Card("rtx4090", "NVIDIA GeForce RTX 4090 (emulated)", 24 * GIB, (8, 9), bf16=True,
         fp8=True, int8=True, multi_processor_count=128,
         peaks=(("bfloat16", 165.2 * T), ("float16", 165.2 * T), ("float8", 330.3 * T),
                ("int8", 660.6 * T), ("float32", 82.6 * T)), bandwidth=1008 * GB),
    Card("h100", "NVIDIA H100 80GB HBM3 (emulated)", 80 * GIB, (9, 0), bf16=True, fp8=True,
         int8=True, workspace_bytes=32 * MIB, sdpa=("flash", "efficient", "cudnn", "math"),
         multi_processor_count=132,
         peaks=(("bfloat16", 989.5 * T), ("float16", 989.5 * T), ("float8", 1979 * T),
                ("int8", 1979 * T), ("float32", 67 * T)), bandwidth=3.35e12),
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
