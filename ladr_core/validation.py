"""Argument and denoiser-output validation for sample(): every bad input is a ValueError that
names the argument, the allowed range and (where useful) the fix.

`device`: the device of the first `tokens` / `masked` handed to `denoise` (default: the
generator's, else the CPU); afterwards all state lives on the device of the returned logits.

`known` (inpainting, outpainting, a late start; `KnownTokens(tokens [B, N], generate [B, N],
region [B, N] | None)`): the loop starts from the known codes with only the `generate`
positions masked (Algorithm 1 lines 1-2 with a starting state, as the official painting mode
starts from a prompt holding the known codes and MASK elsewhere). Known positions never change:
no strategy can commit or re-mask a position that is not masked. Every schedule runs over each
item's count to generate (`RunInfo.total`; `region` at a late start), not over N, as the
official keep counts use the MASK count of its prompt. A full mask is text to image (same
tokens); with nothing to generate anywhere the loop makes no call; an item with nothing to
generate rides along unchanged. Checked: tensors [B, N], integer codes >= 0, a bool mask; codes
< K at the first call (K comes from the logits), with one host transfer before the loop."""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from numbers import Real

import torch

from .noise import generators_for
from .registry import resolve_strategy
from .schedules import Schedule, StepSchedule, get_schedule
from .step import Strategy

Denoise = Callable[[torch.Tensor, torch.Tensor], torch.Tensor]


@dataclass(frozen=True)
class KnownTokens:
    """Tokens fixed before sampling (module docstring): codes [B, N] in [0, K) at the known
    positions; `generate` [B, N] True where the sampler generates; `region` [B, N] what each
    schedule counts over at a late start (ladr_core.strength; None: `generate`)."""

    tokens: torch.Tensor
    generate: torch.Tensor
    region: torch.Tensor | None = None


def check_known(known: object, batch: int, n: int) -> KnownTokens | None:
    """sample()'s `known`: None, or a KnownTokens of tensors [B, N] (integer tokens, bool mask)."""
    if known is None:
        return None
    if not isinstance(known, KnownTokens):
        raise ValueError(f"known must be None or a ladr_core.KnownTokens(tokens, generate); got "
                         f"{type(known).__name__}")
    parts = [("tokens", known.tokens), ("generate", known.generate)]
    for name, value in parts + ([("region", known.region)] if known.region is not None else []):
        if not isinstance(value, torch.Tensor) or tuple(value.shape) != (batch, n):
            got = tuple(value.shape) if isinstance(value, torch.Tensor) else type(value).__name__
            raise ValueError(f"known.{name} must be a tensor [B={batch}, N={n}]; got {got}")
    if known.tokens.is_floating_point() or known.tokens.is_complex() \
            or known.tokens.dtype == torch.bool:
        raise ValueError(f"known.tokens must hold integer codes; got dtype {known.tokens.dtype}")
    for name, value in parts[1:] + [("region", known.region)]:
        if value is not None and value.dtype != torch.bool:
            raise ValueError(f"known.{name} must be a BoolTensor (True = generate); got dtype "
                             f"{value.dtype}")
    return known


@dataclass(frozen=True)
class SampleArgs:
    """sample()'s arguments, checked and normalised (defaults filled in)."""

    denoiser: Denoise
    shape: tuple[int, int, int]  # (B, H, W)
    plan: StepSchedule  # T and the step the run starts from
    strategy: Strategy
    temperature: float
    generators: list[torch.Generator | None]  # one per item (None = the default generator)
    schedule: Schedule
    device: torch.device  # where the first tokens / masked passed to denoise live
    cuda_graph: bool  # replay a step-invariant rule as a CUDA graph (graphs.py)
    known: KnownTokens | None = None  # the starting state (None: everything masked)
    max_batch: int = 1  # items in flight at once (B unless the batch rolls)
    takes_items: bool = False  # denoise(tokens, masked, items=...): finished items leave


def takes_items(denoiser: object) -> bool:
    """True when `denoiser` accepts the keyword `items` (the items of the rows it is sent)."""
    try:
        params = inspect.signature(denoiser).parameters  # type: ignore[arg-type]
    except (TypeError, ValueError):  # a builtin without a signature: the plain contract
        return False
    return "items" in params or any(p.kind is p.VAR_KEYWORD for p in params.values())


def check_max_batch(max_batch: object, batch: int, items: bool) -> int:
    """sample()'s `max_batch`: None = B; an int >= 1 (above B it is B). Below B the batch
    rolls, which needs a denoiser that takes `items=`."""
    if max_batch is None:
        return batch
    if not isinstance(max_batch, int) or isinstance(max_batch, bool) or max_batch < 1:
        raise ValueError(f"max_batch must be None or an int >= 1 (items in flight at once); "
                         f"got {max_batch!r}")
    if max_batch < batch and not items:
        raise ValueError(f"max_batch={max_batch} < B={batch} makes a rolling batch, which needs "
                         "a denoiser that takes items= (DiMOODenoiser does); pass max_batch=None "
                         "to run all B items together")
    return min(max_batch, batch)


def _check_shape(shape: object) -> tuple[int, int, int]:
    ok = isinstance(shape, (tuple, list, torch.Size)) and len(shape) == 3
    ok = ok and all(isinstance(v, int) and not isinstance(v, bool) and v > 0 for v in shape)
    if not ok:
        raise ValueError(f"shape must be 3 positive ints (B, H, W); got {shape!r}")
    return tuple(int(v) for v in shape)  # type: ignore[return-value]


def _check_generator(generator: object, batch: int) -> None:
    if generator is None or isinstance(generator, torch.Generator):
        return
    if isinstance(generator, (list, tuple)):
        if len(generator) != batch or not all(isinstance(g, torch.Generator) for g in generator):
            raise ValueError(
                f"generator list must hold exactly B={batch} torch.Generator objects "
                f"(one per item); got {len(generator)} entries"
            )
        return
    raise ValueError(
        "generator must be None, a torch.Generator or a list of B torch.Generator; "
        f"got {type(generator).__name__}"
    )


def _default_device(device: object, generator: object) -> torch.device:
    if device is not None:
        try:
            return torch.device(device)  # type: ignore[arg-type]
        except (RuntimeError, TypeError) as exc:
            raise ValueError(
                f"device must be a torch.device or a name like 'cpu'; got {device!r}"
            ) from exc
    if isinstance(generator, torch.Generator):
        return generator.device
    if isinstance(generator, (list, tuple)) and generator:
        return generator[0].device
    return torch.device("cpu")


def validate_arguments(
    denoiser: Denoise,
    shape: Sequence[int],
    steps: int | StepSchedule | None,
    strategy: str | Strategy,
    temperature: float,
    generator: object,
    callback: object,
    schedule: str | Schedule,
    device: object,
    cuda_graph: object,
    known: object = None,
    max_batch: object = None,
) -> SampleArgs:
    """Check every sample() argument; return them normalised as SampleArgs (the strategy
    resolved once, through ladr_core.registry)."""
    chosen = resolve_strategy(strategy)
    if not callable(denoiser):
        raise ValueError(
            "denoise must be callable: denoise(tokens [B, N], masked [B, N]) -> [B, N, K]"
        )
    shape = _check_shape(shape)
    plan = StepSchedule.of(steps)
    ok = isinstance(temperature, Real) and not isinstance(temperature, bool)
    if not ok or not math.isfinite(float(temperature)) or float(temperature) < 0:
        raise ValueError(
            f"temperature must be a finite number >= 0 (0 = greedy); got {temperature!r}"
        )
    _check_generator(generator, shape[0])
    if callback is not None and not callable(callback):
        raise ValueError("callback must be None or callable(record: dict)")
    if not isinstance(cuda_graph, bool):
        raise ValueError(f"cuda_graph must be True or False; got {cuda_graph!r}")
    known = check_known(known, shape[0], shape[1] * shape[2])
    if plan.start and (known is None or plan.left == 0):
        raise ValueError(f"steps: a schedule started at step {plan.start} of {plan.steps} "
                         f"(denoise {plan.denoise:g}) needs known tokens (the picture's codes) "
                         "and at least one step to run; pass known=, or a larger denoise")
    items = takes_items(denoiser)
    width = check_max_batch(max_batch, shape[0], items)
    return SampleArgs(denoiser, shape, plan, chosen, float(temperature),
                      generators_for(generator, shape[0]), get_schedule(schedule),
                      _default_device(device, generator), cuda_graph, known, width, items)


def check_logits(logits: object, batch: int, n: int, k: int | None) -> int:
    """Validate one denoise output ([B, N, K] floating, K >= 2 and fixed); return K."""
    if not isinstance(logits, torch.Tensor):
        raise ValueError(
            f"denoise must return a torch.Tensor of logits [B, N, K]; got {type(logits).__name__}"
        )
    expected = f"(B={batch}, N={n}, K)" if k is None else f"(B={batch}, N={n}, K={k})"
    shape = tuple(logits.shape)
    if logits.dim() != 3 or shape[:2] != (batch, n) or (k is not None and shape[2] != k):
        raise ValueError(
            f"denoise returned shape {shape}; expected {expected} with K fixed across steps"
        )
    if not logits.is_floating_point():
        raise ValueError(
            f"denoise returned dtype {logits.dtype}; expected floating-point logits {expected}"
        )
    if shape[2] < 2:
        raise ValueError(f"denoise returned K={shape[2]} classes; expected K >= 2 (codebook size)")
    return shape[2]
