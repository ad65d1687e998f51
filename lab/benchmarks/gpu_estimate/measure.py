"""One layout's memory and FLOPs on the emulated CUDA device, through the pack's own code.

Inside ``emulated_cuda(storage="meta")`` (tests/kit/cuda_emu: tensors that say cuda:0 and hold
shapes only, device memory counted by a model of PyTorch's caching allocator):

1. a 32 MiB block stands for the cuBLAS workspace (the H100 run held it before any weight:
   ``allocated_before_build_gib`` 0.03125 in lab/results/gpu_nvidia_h100_80gb_hbm3.json);
2. the layout's weights are built on the device (gpu_check's ``build_layout``, as its section b
   does; streaming is composed instead, stream.py);
3. per size, batch and cache, ``pipe.generate(..., strategy="baseline", decode=False)`` runs its
   first step as on a GPU: the prompt rows, the denoiser's first call (a full call, or the
   ML-Cache's first refresh), the sampler's statistics and decision; it stops where the step
   loop makes its one host read (``SampleRun.sync_counts``, replaced by a stop for the call), which a
   shape-only run cannot make. The run's state is kept (the stopped frames), and the denoiser is
   called again with the sampler's tokens and masks while that state is alive: once more
   without a cache (two steps, as gpu_check and the H100 run measure), three more calls with
   the lean ML-Cache (a refresh every other call: cached, refresh, cached);
4. each call's peak allocated and reserved bytes, the pack's line where the allocated bytes
   peaked and its FLOPs (FlopCounterMode: matrix products and attention) are read; the case's
   peak is the largest.

A cached call recomputes ``ceil(0.1 N)`` code slots per row (the official cache ratio 0.9).
"""

from __future__ import annotations

import contextlib
import gc
import traceback
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import torch
from torch.utils.flop_counter import FlopCounterMode

from lab.benchmarks.common import REPO_ROOT
from lab.benchmarks.gpu_check.models import IDS_8B, SHAPE_8B, SHAPE_TINY, TINY_IDS, shaped_pipeline
from lab.benchmarks.gpu_check.speed import LEAN, build_layout, prompt
from ladr_core import sampling
from ladr_core.dimoo.model.config import DiMOOIds, LLaDAConfig
from tests.kit.cuda_emu.state import active

from .kernels import FLOP_FORMULAS

__all__ = ["CUBLAS_WORKSPACE", "measure_layout", "model_shape", "peak_site", "settle"]

CUBLAS_WORKSPACE = 32 * 2 ** 20


def model_shape(name: str) -> tuple[LLaDAConfig, DiMOOIds, torch.dtype]:
    if name == "tiny":
        return LLaDAConfig(**SHAPE_TINY), TINY_IDS, torch.float32
    return LLaDAConfig(**SHAPE_8B), IDS_8B, torch.bfloat16


def settle() -> None:
    """Free what is unreferenced, return cached segments, start the peaks from here."""
    gc.collect()
    torch.cuda.empty_cache()
    torch.cuda.reset_peak_memory_stats()


def _memory() -> dict[str, int]:
    return {"allocated": torch.cuda.memory_allocated(),
            "reserved": torch.cuda.memory_reserved(),
            "peak_allocated": torch.cuda.max_memory_allocated(),
            "peak_reserved": torch.cuda.max_memory_reserved()}


class _Stop(Exception):
    """Raised where sample()'s step loop would make its one host read."""


def _stop(run: Any) -> bool:
    raise _Stop


def _first_step(pipe: Any, text: str, px: int, batch: int, steps: int, cache: Any
                ) -> tuple[Any, _Stop]:
    """generate() up to the step loop's host read (``SampleRun.sync_counts``, replaced by a stop
    for the call, so real and shape-only storage stop at the same point): (the run's state,
    the stop, whose frames keep that state alive)."""
    try:
        with mock.patch.object(sampling.SampleRun, "sync_counts", _stop):
            pipe.generate(text, width=px, height=px, steps=steps, strategy="baseline",
                          cache=cache, decode=False, batch_size=batch, max_batch=batch)
    except _Stop as exc:
        tb = exc.__traceback__
        while tb is not None and tb.tb_frame.f_code is not sampling.sample.__code__:
            tb = tb.tb_next
        if tb is None:
            raise RuntimeError("the run stopped outside sample()") from exc
        return tb.tb_frame.f_locals["run"], exc
    raise RuntimeError("generate() finished without reaching the step loop's host read")


@contextlib.contextmanager
def peak_site(out: dict[str, Any], depth: int = 3) -> Iterator[None]:
    """Record in ``out["peak_site"]`` the pack's ``depth`` innermost lines (ladr_core/) on the
    stack when the allocated bytes of the active emulation last reached a new peak."""
    memory = active().memory
    malloc = memory.malloc

    def tracked(nbytes: int) -> int:
        handle = malloc(nbytes)
        if memory.allocated >= memory.peak_allocated:
            out["peak_site"] = [f"{Path(f.filename).relative_to(REPO_ROOT)}:{f.lineno} "
                                f"({f.name})" for f in traceback.extract_stack()
                                if f"{REPO_ROOT}/ladr_core/" in f.filename][-depth:]
        return handle

    memory.malloc = tracked  # type: ignore[method-assign]
    try:
        yield
    finally:
        del memory.malloc


def _call(den: Any, run: Any) -> dict[str, Any]:
    """One more denoiser call with the run's tokens and masks: its kind, peaks and FLOPs."""
    before = (den.stats.refresh_steps, den.stats.cached_steps)
    start = torch.cuda.memory_allocated()
    torch.cuda.reset_peak_memory_stats()
    where: dict[str, Any] = {}
    with FlopCounterMode(display=False, custom_mapping=FLOP_FORMULAS) as flops, \
            peak_site(where):
        den(run.tokens, run.masked)
    kind = "full" if den.caches is None else \
        "refresh" if den.stats.refresh_steps > before[0] else "cached"
    assert den.caches is None or den.stats.cached_steps > before[1] or kind == "refresh"
    return {"kind": kind, "start_allocated": start, **_memory(),
            "flops": int(flops.get_total_flops()), **where}


def _cache_bytes(caches: Any) -> int:
    """Bytes of the distinct storages the ML-Cache holds (``ItemCaches.nbytes`` reads data
    pointers, which an emulated tensor has none of: its inner tensor's storage instead)."""
    if caches is None:
        return 0
    seen: dict[int, int] = {}
    for cache, _ in caches.entries.values():
        tensors = [t for pair in (cache.kv or []) for t in pair]
        tensors += [t for t in (cache.logits, cache.next_index, cache.codes, cache.max_logit)
                    if t is not None]
        for t in tensors:
            st = getattr(t, "inner", t).untyped_storage()
            seen[st._cdata] = st.nbytes()
    return sum(seen.values())


def measure_case(pipe: Any, px: int, batch: int, cached: bool, text: str | None = None
                 ) -> dict[str, Any]:
    """Sampling memory and per-call FLOPs of one size, batch and cache (module docstring);
    ``text``: the prompt (None: gpu_check's, the first built-in calibration prompt)."""
    settle()
    base = torch.cuda.memory_allocated()
    where: dict[str, Any] = {}
    with peak_site(where):
        run, stop = _first_step(pipe, prompt() if text is None else text, px, batch,
                                4 if cached else 2, LEAN if cached else None)
    den = run.args.denoiser
    step0 = {"kind": "full" if den.caches is None else "refresh", **_memory(),
             "held_after": torch.cuda.memory_allocated() - base, **where}
    calls = [_call(den, run) for _ in range(3 if cached else 1)]
    out = {"steps": [step0, *calls],
           "peak_allocated": max(c["peak_allocated"] for c in [step0, *calls]),
           "peak_reserved": max(c["peak_reserved"] for c in [step0, *calls]),
           "real_tokens": den.real_tokens,
           "row_lengths": list(den.pack(den.all_items).rows.lengths),
           "n_codes": den.layout.n_codes, "codebook_size": den.ids.codebook_size,
           "cache_bytes": _cache_bytes(den.caches)}
    del run, stop, den
    settle()
    return out


def measure_layout(layout: str, shape: str, sizes: list[int], batches: list[int],
                   caches: list[str], extra: Any = None) -> dict[str, Any]:
    """Build one layout on the emulated device and measure every case of it; ``extra(layout,
    model, pipe)``, when given, adds what it returns under "extra" (h100.py's reruns)."""
    config, ids, dtype = model_shape(shape)
    settle()
    before = torch.cuda.memory_allocated()
    model = build_layout(layout, config, torch.device("cuda"), dtype)
    settle()
    row: dict[str, Any] = {"weights_bytes": torch.cuda.memory_allocated() - before,
                           "resident_allocated": torch.cuda.memory_allocated(),
                           "resident_reserved": torch.cuda.memory_reserved(), "cases": {}}
    pipe = shaped_pipeline(model, config, ids, max(sizes))
    for px in sizes:
        for batch in batches:
            for cache in caches:
                key = f"{px}/{batch}/{cache}"
                row["cases"][key] = measure_case(pipe, px, batch, cache == "ml-cache")
                print(f"  {layout} {key}: peak "
                      f"{row['cases'][key]['peak_allocated'] / 2 ** 30:.2f} GiB", flush=True)
    if extra is not None:
        row["extra"] = extra(layout, model, pipe)
    del pipe, model
    settle()
    return row
