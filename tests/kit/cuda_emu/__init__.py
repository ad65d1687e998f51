"""A CUDA emulation on the CPU, for the tests and the estimates: the GPU code paths of the pack
run end to end with tensors that report device ``cuda:0`` while their data stays on the CPU (or,
for memory and FLOP estimates of the 8B model, on the meta device: shapes only).

    from tests.kit.cuda_emu import emulated_cuda
    with emulated_cuda() as emu:          # raises CudaEmulationError at the first violation
        pipe = ladr_core.load_dimoo(path, device="cuda")
        pipe.generate("a red circle", seed=0)
    emu.reads, emu.loop_reads, emu.memory.peak_allocated

It raises, naming file and line, where a real GPU run would fail or break the sampler's
contract (state.py): a host tensor meeting a device tensor (0-dim host scalars allowed, as CUDA
allows them), a device-to-host read or a blocking host-to-device copy inside ``sample()``'s step
loop beyond the loop's documented read, float64 on the device.

Why this design (docs/reports/GPU.md, "CUDA emulation"): torch's FakeTensorMode catches device mismatches
but holds no values, so the sampler's per-step read, and with it any real run, cannot finish;
a wrapper tensor subclass (``_make_wrapper_subclass`` with device cuda) keeps real CPU data
behind a CUDA device and sees every aten op, so the same runs the CPU tests make run here
with the same tokens. A CPU-only torch refuses to put a device guard around a CUDA tensor, so a
one-line C++ extension registers c10's no-op guard for CUDA (guard.cpp, built once).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import torch

from .cards import CARDS, Card, UnknownCardError, card
from .guard import GuardBuildError, load_guard
from .kernels import register as register_kernels
from .state import _ACTIVE, KINDS, CudaEmulationError, EmulationState, Violation
from .tensor import DEVICE, EmuTensor
from .torch_cuda import EmuGenerator, Generator, api

__all__ = ["CARDS", "DEVICE", "KINDS", "Card", "CudaEmulationError", "EmuGenerator",
           "EmuTensor", "EmulationState", "GuardBuildError", "UnknownCardError", "Violation",
           "card", "emulated_cuda"]
FALLBACKS = ("report", "raise")


@contextlib.contextmanager
def emulated_cuda(storage: str = "cpu", raise_on_violation: bool = True,
                  card: str | Card | None = None, fallbacks: str = "report",
                  completion: str = "issue") -> Iterator[EmulationState]:
    """Emulate one CUDA device while the block runs. storage "cpu" keeps real values; "meta"
    keeps shapes only (memory and FLOP estimates). ``card``: a profile of cards.py (its name or
    a Card): its capacity (an allocation beyond it raises torch.OutOfMemoryError), context and
    workspace, capability and kernel rules; None: H100 rules with memory counted from zero
    and no capacity limit. ``fallbacks``: "report" counts kernel refusals and fallbacks in
    ``state.fallbacks``, "raise" raises them (rules.py). ``completion``: "issue" runs work
    when issued; "late" holds asynchronous copies back until a wait demands them
    (ordering.py; real values only)."""
    if storage not in ("cpu", "meta"):
        raise ValueError(f"storage must be 'cpu' or 'meta', got {storage!r}")
    if completion not in ("issue", "late") or (completion == "late" and storage != "cpu"):
        raise ValueError(f"completion must be 'issue' or 'late' (late with storage 'cpu'), "
                         f"got {completion!r} with storage {storage!r}")
    if fallbacks not in FALLBACKS:
        raise ValueError(f"fallbacks must be one of {', '.join(FALLBACKS)}, got {fallbacks!r}")
    from .functions import EmulatedFunctions

    profile = _profile(card)
    load_guard()
    register_kernels()
    state = EmulationState(storage=storage, raise_on_violation=raise_on_violation,
                           card=profile, fallback_mode=fallbacks)
    state.memory.total = profile.total_memory
    if card is not None:
        state.memory.limit(profile.total_memory, profile.context_bytes)
    _ACTIVE.append(state)
    replacements = api(state)
    if completion == "late":
        from .ordering import Ordering

        state.ordering = Ordering(state.current_stream, state.violate)
    saved = {name: getattr(torch.cuda, name, None) for name in replacements}
    saved_generator = torch.Generator
    saved_swap = torch.__future__.get_swap_module_params_on_conversion()
    try:
        for name, value in replacements.items():
            setattr(torch.cuda, name, value)
        torch.Generator = Generator  # type: ignore[misc, assignment]
        # Module.to() swaps each parameter for its emulated copy, keeping the Parameter object
        # (its identity, as on a GPU); the default `param.data = moved` would leave a tensor
        # that says cuda and holds no data
        torch.__future__.set_swap_module_params_on_conversion(True)
        with EmulatedFunctions(state):
            yield state
    finally:
        torch.Generator = saved_generator  # type: ignore[misc]
        torch.__future__.set_swap_module_params_on_conversion(saved_swap)
        for name, value in saved.items():
            if value is None:
                delattr(torch.cuda, name)
            else:
                setattr(torch.cuda, name, value)
        _ACTIVE.remove(state)


def _profile(which: str | Card | None) -> Card:
    return card(which)
