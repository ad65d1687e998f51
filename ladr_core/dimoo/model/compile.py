"""Opt-in ``torch.compile`` of the transformer passes (like ComfyUI's TorchCompileModel node).

``CompiledPasses`` wraps the two passes the denoiser runs (``packed.full_pass``,
``packed.partial_pass``) in ``torch.compile`` with ``dynamic=False`` by default: one graph per
shape (prompt lengths, grid, cache on/off), compiled on the first call with that shape and
reused by every later call and run, as long as the object lives (``DiMOOPipeline.compile``
keeps it on the pipeline, which ComfyUI keeps across queue runs). Each first call is timed
(``compile_seconds``, per shape in ``shapes``) and logged once, so the one-time cost is visible.
torch's own recompile limit applies (``torch._dynamo.config.recompile_limit``, 8 by default):
past it a new shape runs eagerly with a torch warning.
"""

from __future__ import annotations

import logging
import time
from typing import Any

import torch

from .packed import KVSink, PackedRows, full_pass, partial_pass
from .transformer import LayerKV, LLaDAModel

__all__ = ["CompiledPasses", "COMPILE_BACKENDS", "COMPILE_MODES"]

log = logging.getLogger("ladr_core")

COMPILE_BACKENDS = ("inductor", "aot_eager", "eager")
#: modes without CUDA graphs: the cache is written in place between calls
COMPILE_MODES = ("default", "max-autotune-no-cudagraphs")


class CompiledPasses:
    """Compiled ``full`` / ``partial`` passes with the packed.py signatures, timed per shape."""

    def __init__(self, backend: str = "inductor", mode: str = "default",
                 dynamic: bool = False) -> None:
        if backend not in COMPILE_BACKENDS:
            raise ValueError(f"compile backend must be one of {COMPILE_BACKENDS} (got {backend!r})")
        if mode not in COMPILE_MODES:
            raise ValueError(f"compile mode must be one of {COMPILE_MODES} (got {mode!r}); "
                             "CUDA-graph modes are not supported (the ML-Cache is updated in place)")
        if not isinstance(dynamic, bool):
            raise ValueError(f"dynamic must be a bool (got {dynamic!r})")
        self.backend, self.mode, self.dynamic = backend, mode, dynamic
        options: dict[str, Any] = {"backend": backend, "dynamic": dynamic}
        if backend == "inductor" and mode != "default":
            options["mode"] = mode
        self._full = torch.compile(full_pass, **options)
        self._partial = torch.compile(partial_pass, **options)
        self.shapes: dict[tuple, float] = {}

    @property
    def compile_seconds(self) -> float:
        """Wall time of every first call of a shape so far (compile + that call's run)."""
        return sum(self.shapes.values())

    def full(self, model: LLaDAModel, input_ids: torch.Tensor, rows: PackedRows,
             kv_sink: KVSink | None = None) -> torch.Tensor:
        key = ("full", rows.lengths, kv_sink is not None, input_ids.device.type)
        return self._timed(key, self._full, model, input_ids, rows, kv_sink)

    def partial(self, model: LLaDAModel, ids: torch.Tensor, positions: torch.Tensor,
                counts: list[int], kv: list[LayerKV]) -> torch.Tensor:
        key = ("partial", tuple(counts), ids.device.type)
        return self._timed(key, self._partial, model, ids, positions, counts, kv)

    def _timed(self, key: tuple, fn: Any, *args: Any) -> Any:
        if key in self.shapes:
            return fn(*args)
        start = time.perf_counter()
        out = fn(*args)
        if args[1].device.type == "cuda":
            torch.cuda.synchronize(args[1].device)
        self.shapes[key] = time.perf_counter() - start
        log.info("LADR: compiled the DiMOO %s pass for rows %s (backend %s) in %.1f s; later "
                 "calls with this shape reuse it", key[0], key[1], self.backend, self.shapes[key])
        return out
