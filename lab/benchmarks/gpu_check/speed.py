"""Section b: the 8B-shaped model with random weights (LLaDA-8B's shape, models.SHAPE_8B) at
1024 x 1024 and 512 x 512, through the pack's own pipeline and denoiser: ms per full and per
cached call (the official ML-Cache: a call after one refresh, 10 % of the code slots
recomputed), eager for every weight layout and compiled (``pipe.compile()``, inductor) for
bf16 (run after section d, in what the budget has left); peak memory per layout while sampling two steps at 1024 (weights included), and with a
lean ML-Cache (a refresh every other call, four steps); the VQ decode at 1024 where the
machine has diffusers. Layouts: bf16 and tests.kit.variants' (fp8 storage, blocks streamed from
the CPU, ComfyUI fp8 / int8, GGUF Q8_0 / Q4_K_M), one at a time (the previous one released).
"""

from __future__ import annotations

import gc
import json
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch

from lab.benchmarks.common import RESULTS_DIR, median_ms, sync_device
from ladr_core.dimoo import MLCacheConfig
from ladr_core.dimoo.model.config import DiMOOIds, LLaDAConfig
from ladr_core.dimoo.model.offload import stream_blocks

from .models import IDS_8B, SHAPE_8B, SHAPE_TINY, TINY_IDS, random_model, shaped_pipeline

__all__ = ["LAYOUTS", "PREVIOUS", "SIZES", "build_layout", "compiled_section", "prompt", "release",
           "section_b", "shape"]

LAYOUTS = ("bf16", "fp8", "low_vram", "comfy_fp8", "int8", "q8_0", "q4_k_m")
SIZES = {"full": (1024, 512), "smoke": (128, 64)}  # px; the smoke's grids are 8 x 8 and 4 x 4
GIB = 2.0 ** 30
#: the last committed peaks (lab/results/gpu_nvidia_h100_80gb_hbm3.json, "memory")
PREVIOUS = RESULTS_DIR / "gpu_nvidia_h100_80gb_hbm3.json"
PREVIOUS_ROWS = {"bf16": "bf16", "bf16+ML-Cache": "ml_cache", "fp8": "fp8", "low_vram": "low_vram"}
REPS = 3  # timed calls per figure (their median), after one warm-up call
CACHED = MLCacheConfig(warmup_ratio=0.0, refresh_interval=10 ** 6)
LEAN = MLCacheConfig(warmup_ratio=0.0, refresh_interval=2)


def prompt() -> str:
    """A prompt of the built-in calibration list (a real Lumina-DiMOO prompt's length)."""
    from ladr_core.calibrate import BUILTIN_PROMPTS

    return BUILTIN_PROMPTS[0]


def shape(smoke: bool) -> tuple[LLaDAConfig, DiMOOIds, torch.dtype, tuple[int, int]]:
    """(config, ids, compute dtype, sizes) of the 8B-shaped run or of the smoke run."""
    if smoke:
        return LLaDAConfig(**SHAPE_TINY), TINY_IDS, torch.float32, SIZES["smoke"]
    return LLaDAConfig(**SHAPE_8B), IDS_8B, torch.bfloat16, SIZES["full"]


def build_layout(layout: str, config: LLaDAConfig, device: torch.device,
                 dtype: torch.dtype) -> Any:
    """One layout of random weights (tests.kit.variants); bf16 and the streamed blocks are filled
    on the device (a CPU fills 16 GB slowly) and, for streaming, the blocks moved to the CPU."""
    if layout in ("bf16", "low_vram"):
        model = random_model(config, device, dtype)
        if layout == "low_vram":
            model.model.transformer.blocks.to("cpu")
            stream_blocks(model, device)
        return model
    from tests.kit.variants import build_variant

    return build_variant(config, device, layout, dtype)


def _state(pipe: Any, px: int) -> tuple[torch.Tensor, torch.Tensor]:
    n = (px // pipe.vq_factor) ** 2
    g = torch.Generator().manual_seed(0)
    masked = torch.rand(1, n, generator=g) < 0.5
    tokens = torch.randint(0, pipe.ids.codebook_size, (1, n), generator=g)
    return tokens.masked_fill(masked, 0).to(pipe.device), masked.to(pipe.device)


def call_ms(pipe: Any, px: int, reps: int, cached: bool) -> dict[str, Any]:
    """ms of one full call (half the image masked), or of one cached call after a refresh."""
    den = pipe.make_denoiser(prompt(), width=px, height=px, cache=CACHED if cached else None,
                             steps=64)
    tokens, masked = _state(pipe, px)
    start = time.perf_counter()
    den(tokens, masked)  # the first call: the refresh that fills the cache / a compile
    sync_device(pipe.device)
    first = time.perf_counter() - start
    ms = median_ms(lambda: den(tokens, masked), pipe.device, reps)
    return {"ms": ms, "first_call_s": first, "real_tokens": den.real_tokens}


def peak_gib(pipe: Any, px: int, cache: MLCacheConfig | None) -> float:
    """Peak memory while sampling (2 steps; 4 with a cache): CUDA's allocator peak, weights
    included; on a CPU the run's own allocations (tests.kit.live_bytes, weights excluded)."""
    steps = 4 if cache else 2

    def run() -> None:
        pipe.generate(prompt(), width=px, height=px, steps=steps, strategy="baseline",
                      cache=cache, decode=False, max_batch=1)

    if pipe.device.type != "cuda":
        from tests.kit.live_bytes import LiveBytes

        with LiveBytes() as mem:
            run()
        return mem.peak / GIB
    sync_device(pipe.device)
    torch.cuda.reset_peak_memory_stats(pipe.device)
    run()
    sync_device(pipe.device)
    return torch.cuda.max_memory_allocated(pipe.device) / GIB


def release(device: torch.device) -> float | None:
    """Collect what is unreferenced; GiB still allocated on the device (None on a CPU)."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()
        return torch.cuda.memory_allocated(device) / GIB
    return None


def layout_row(layout: str, device: torch.device, smoke: bool, reps: int) -> dict[str, Any]:
    """Build one layout, time its calls (eager), read its peaks."""
    config, ids, dtype, sizes = shape(smoke)
    row: dict[str, Any] = {"allocated_before_gib": release(device)}
    start = time.perf_counter()
    model = build_layout(layout, config, device, dtype)
    sync_device(device)
    row["build_s"] = time.perf_counter() - start
    row["resident_gib"] = (torch.cuda.memory_allocated(device) / GIB if device.type == "cuda"
                           else None)
    pipe = shaped_pipeline(model, config, ids, sizes[0])
    params = sum(p.numel() for p in model.parameters())
    row["eager"] = {str(px): {"full": call_ms(pipe, px, reps, False),
                              "cached": call_ms(pipe, px, reps, True)} for px in sizes}
    full = row["eager"][str(sizes[0])]["full"]
    if layout == "bf16":
        row["tflops_full"] = 2.0 * params * full["real_tokens"] / (full["ms"] / 1e3) / 1e12
    row["peak_gib"] = peak_gib(pipe, sizes[0], None)
    row["peak_ml_cache_gib"] = peak_gib(pipe, sizes[0], LEAN)
    row["status"] = "measured"
    del pipe, model
    release(device)
    return row


def compiled_rows(device: torch.device, smoke: bool, reps: int, deadline: Callable[[], float],
                  compile_s: float, backend: str, out: dict[str, Any] | None = None
                  ) -> dict[str, Any]:
    """bf16 through pipe.compile(): ms per full and cached call at each size, one compile per
    shape, each started only while ``deadline()`` covers the larger of ``compile_s`` and 1.5x
    the longest compile so far. Rows go into ``out`` as they are measured (what a caller
    stopping this keeps)."""
    config, ids, dtype, sizes = shape(smoke)
    release(device)
    model = random_model(config, device, dtype)
    view = shaped_pipeline(model, config, ids, sizes[0]).compile(backend=backend)
    out = {} if out is None else out
    out.update({"backend": backend, "layout": "bf16"})
    longest = 0.0
    for px in sizes:
        for kind in ("full", "cached"):
            key = f"{px}/{kind}"
            if deadline() < max(compile_s, 1.5 * longest):
                out[key] = {"status": "not measured: budget"}
                continue
            row = call_ms(view, px, reps, kind == "cached")
            longest = max(longest, row["first_call_s"])
            out[key] = {**row, "compile_s": row["first_call_s"], "status": "measured"}
    del view, model
    release(device)
    return out


def vq_decode(vq_config: Path | None, device: torch.device, smoke: bool) -> dict[str, Any]:
    """The VQ decode of 64 x 64 codes (1024 px): only where diffusers is installed and a
    Lumina-DiMOO vqvae/config.json is given (the project ships none; random weights)."""
    try:
        from diffusers import VQModel
    except ImportError:
        return {"status": "not measured: no diffusers"}
    if vq_config is None:
        return {"status": "not measured: no Lumina-DiMOO vqvae/config.json given (--vq-config)"}
    vq = VQModel.from_config(json.loads(Path(vq_config).read_text())).to(device).eval()
    grid = 8 if smoke else 64
    codes = torch.randint(0, vq.config.num_vq_embeddings, (1, grid, grid), device=device)
    shape_ = (1, grid, grid, vq.config.vq_embed_dim or vq.config.latent_channels)
    with torch.no_grad():
        ms = median_ms(lambda: vq.decode(codes, force_not_quantize=True, shape=shape_),
                    device, 3)
    return {"status": "measured", "ms": ms, "grid": grid, "config": str(vq_config)}


def previous() -> dict[str, Any]:
    """The last committed peaks (GiB) and the commit they ran on."""
    try:
        doc = json.loads(PREVIOUS.read_text())
    except (OSError, ValueError):
        return {}
    mem = doc.get("memory", {})
    peaks = {name: mem[key]["peak_gib"] for name, key in PREVIOUS_ROWS.items()
             if isinstance(mem.get(key), dict) and mem[key].get("peak_gib")}
    return {"file": str(PREVIOUS.relative_to(RESULTS_DIR.parents[1])),
            "commit": doc.get("env", {}).get("git_commit"), "peak_gib": peaks}


def compiled_section(device: torch.device, smoke: bool, deadline: Callable[[], float],
                     compile_s: float, out: dict[str, Any] | None = None) -> dict[str, Any]:
    """Section b's compiled shapes, run last (after d) so that a compile longer than assumed
    takes no time from c and d; inductor on a GPU, torch's eager backend in the smoke run.
    The shapes measured so far are in ``out`` if the caller stops it."""
    backend = "inductor" if device.type == "cuda" else "eager"
    try:
        return compiled_rows(device, smoke, 1 if smoke else REPS, deadline, compile_s, backend,
                             out)
    except Exception as exc:  # noqa: BLE001 - recorded in the JSON
        release(device)
        return {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:600]}


def section_b(device: torch.device, smoke: bool, deadline: Callable[[], float],
              layout_s: float, vq_config: Path | None) -> dict[str, Any]:
    """Every layout, eager, while ``deadline()`` (seconds left for this section) covers
    ``layout_s``; the compiled shapes come later (compiled_section)."""
    config, _, dtype, sizes = shape(smoke)
    out: dict[str, Any] = {"config": config.to_dict(), "dtype": str(dtype).removeprefix("torch."),
                           "sizes": list(sizes), "prompt": prompt(), "layouts": {}}
    reps = 1 if smoke else REPS
    for layout in LAYOUTS:
        if deadline() < layout_s:
            out["layouts"][layout] = {"status": "not measured: budget"}
            continue
        try:
            out["layouts"][layout] = layout_row(layout, device, smoke, reps)
        except Exception as exc:  # noqa: BLE001 - a layout that fails is a finding
            out["layouts"][layout] = {"status": "error",
                                      "error": f"{type(exc).__name__}: {exc}"[:600]}
            release(device)
        print(f"  b: {layout}: {out['layouts'][layout].get('status')}", flush=True)
    out["compiled"] = {"status": "pending: runs after section d (compiled_section)"}
    try:
        out["vq_decode"] = vq_decode(vq_config, device, smoke)
    except Exception as exc:  # noqa: BLE001 - a finding (failures.py), the layouts kept
        out["vq_decode"] = {"status": "error", "error": f"{type(exc).__name__}: {exc}"[:600]}
        release(device)
    out["previous"] = previous()
    return out
