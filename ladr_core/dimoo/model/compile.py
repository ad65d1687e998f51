"""Opt-in ``torch.compile`` of the transformer passes (like ComfyUI's TorchCompileModel node).

`CompiledPasses` wraps `packed.full_pass` and `packed.partial_pass` in `torch.compile`, compiled
on first use and reused while the object lives (`DiMOOPipeline.compile` keeps it on the
pipeline, which ComfyUI keeps across queue runs).

`dynamic=True` (the default) makes the packed sizes symbolic from the first call: the token
count, row lengths and starts, the partial pass's counts and the ML-Cache lengths change with
every prompt, rolling batch and cached pass, and reach the passes as Python ints too, which
`mark_dynamic` cannot mark. Parameters stay static (`force_parameter_static_shapes`), so
kernels still specialise on the model's widths; a new graph is compiled only for a new packing
structure (runs of equal-length rows, one row, the cache writer or not). `dynamic=False`
compiles one graph per shape.

At torch's recompile limit (`recompile_limit`, 8) torch would silently run the pass eagerly;
this module has it raise instead (`fail_on_recompile_limit_hit`, torch >= 2.6), warns once per
pass naming the limit and how to raise it, and runs that call eagerly (safe: a pass writes the
same K/V each time). A compiling call is timed (`compile_seconds`, per shape in `shapes`) and
logged once.
"""

from __future__ import annotations

import contextlib
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


def _limit_switch() -> tuple[dict[str, bool], tuple[type[BaseException], ...], str]:
    """(config patch making dynamo raise at its recompile limit, the exception it raises, the
    limit's config name) under this torch's names; an empty patch where torch has none."""
    cfg, exc = torch._dynamo.config, torch._dynamo.exc
    names = [("fail_on_recompile_limit_hit", "FailOnRecompileLimitHit", "recompile_limit"),
             ("fail_on_cache_limit_hit", "FailOnCacheLimitHit", "cache_size_limit")]
    for flag, error, limit in names:
        if hasattr(cfg, flag) and hasattr(exc, error):
            return {flag: True}, (getattr(exc, error),), limit
    return {}, (), "recompile_limit"


def _graphs() -> int:
    """Graphs dynamo has compiled in this process so far."""
    return int(torch._dynamo.utils.counters["stats"]["unique_graphs"])


class CompiledPasses:
    """Compiled ``full`` / ``partial`` passes with the packed.py signatures, timed per shape
    (module docstring; reported as ``GenerationResult.compile_seconds``)."""

    def __init__(self, backend: str = "inductor", mode: str = "default",
                 dynamic: bool = True) -> None:
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
        self.limit_hit: set[str] = set()  # passes that met the recompile limit (warned once)

    @property
    def compile_seconds(self) -> float:
        """Wall time of every call that compiled a graph so far (compile + that call's run)."""
        return sum(self.shapes.values())

    def full(self, model: LLaDAModel, input_ids: torch.Tensor, rows: PackedRows,
             kv_sink: KVSink | None = None) -> torch.Tensor:
        key = ("full", rows.lengths, kv_sink is not None, input_ids.device.type)
        return self._call(key, self._full, full_pass, model, input_ids, rows, kv_sink)

    def partial(self, model: LLaDAModel, ids: torch.Tensor, positions: torch.Tensor,
                counts: list[int], kv: list[LayerKV]) -> torch.Tensor:
        key = ("partial", tuple(counts), ids.device.type)
        return self._call(key, self._partial, partial_pass, model, ids, positions, counts, kv)

    def _call(self, key: tuple, fn: Any, eager: Any, *args: Any) -> Any:
        """``fn(*args)``, timed when it compiles; eager (with one warning) past the limit."""
        patch, limit_error, limit = _limit_switch()
        before, start = _graphs(), time.perf_counter()
        guard = torch._dynamo.config.patch(**patch) if patch else contextlib.nullcontext()
        try:
            with guard:
                out = fn(*args)
        except limit_error:
            self._warn_limit(key[0], limit)
            return eager(*args)
        if _graphs() > before:
            if args[1].device.type == "cuda":
                torch.cuda.synchronize(args[1].device)
            self.shapes[key] = self.shapes.get(key, 0.0) + time.perf_counter() - start
            log.info("LADR: compiled the DiMOO %s pass for rows %s (backend %s) in %.1f s",
                     key[0], key[1], self.backend, self.shapes[key])
        return out

    def _warn_limit(self, which: str, limit: str) -> None:
        if which in self.limit_hit:
            return
        self.limit_hit.add(which)
        log.warning("LADR: the compiled DiMOO %s pass reached torch._dynamo.config.%s (%s "
                    "graphs); calls with a shape not compiled yet now run eagerly (slower). "
                    "Raise torch._dynamo.config.%s, or compile with dynamic=True (one graph "
                    "per packing structure instead of per shape)", which, limit,
                    getattr(torch._dynamo.config, limit), limit)
