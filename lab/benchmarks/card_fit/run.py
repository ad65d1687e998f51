"""One card, weight layout and size of the 8B model, run on the emulated card instead of
estimated (tests/kit/cuda_emu cards.py: the card's capacity less its CUDA context, its cuBLAS
workspace, its attention backends and kernel rules).

The model is the 8B shape at full width and depth with shape-only weights (``storage="meta"``:
nothing is materialised, every allocation is counted by the caching-allocator model as it
would be on the card, so memory is exact to that model). As the node path holds it
(nodes/sampler.py, nodes/decode.py, ComfyUI moving whole models): the VQ-VAE's weights on the
device first (``force_full_load``), then the layout's weights, then one image's sampling
(gpu_estimate's ``measure_case``: the first step and one more full denoiser call, no ML-Cache),
then the transformer offloaded and one image decoded by the VQ at that size. A phase that runs
out of the card raises torch.OutOfMemoryError: the case does not fit, and the phase, CUDA's
message and the line that asked are kept. Not run: the streamed layout (block streaming cannot
run on shape-only weights yet) and ComfyUI's partial loading, which is what a card too small
for a layout falls back to inside ComfyUI.
"""

from __future__ import annotations

import time
from typing import Any

import torch

from lab.benchmarks.gpu_check.models import shaped_pipeline
from lab.benchmarks.gpu_check.speed import build_layout
from lab.benchmarks.gpu_estimate.kernels import fp8_probe_passes
from lab.benchmarks.gpu_estimate.measure import measure_case, model_shape, settle
from lab.benchmarks.gpu_estimate.vqdecode import VQ_CONFIG, _build
from tests.kit.cuda_emu import emulated_cuda

__all__ = ["fit_case"]

GIB = 2 ** 30


def _decode(vq: Any, px: int) -> int:
    """One image decoded at ``px``; the decode's peak reserved bytes."""
    from ladr_core.dimoo.model.vq import decode_codes

    factor = 2 ** (len(VQ_CONFIG["block_out_channels"]) - 1)
    grid = (px // factor, px // factor)
    codes = torch.zeros(1, grid[0] * grid[1], dtype=torch.long, device="cuda")
    decode_codes(vq, codes, grid, check_range=False)
    return torch.cuda.max_memory_reserved()


def _phases(layout: str, px: int, out: dict[str, Any]) -> None:
    """Run the node path's phases, recording each one's peak reserved bytes in ``out``."""
    config, ids, dtype = model_shape("8b")
    out["phase"] = "VQ weights"
    vq = _build()
    out["phase"] = "weights"
    model = build_layout(layout, config, torch.device("cuda"), dtype)
    settle()  # what stays: the weights (building them cached temporaries a load would not)
    out["resident_reserved"] = torch.cuda.memory_reserved()
    out["phase"] = "sampling"
    case = measure_case(shaped_pipeline(model, config, ids, px), px, 1, False)
    out["sampling_reserved"] = case["peak_reserved"]
    out["phase"] = "decode"
    del model
    settle()  # the host offloads the transformer for the decode
    out["decode_reserved"] = _decode(vq, px)
    del out["phase"]


def fit_case(card: str, layout: str, px: int) -> dict[str, Any]:
    """Whether ``layout`` at ``px`` fits ``card`` (module docstring), with its peaks, the
    attention backends taken and the fallbacks reported."""
    start = time.perf_counter()
    out: dict[str, Any] = {}
    with emulated_cuda(card=card, storage="meta") as emu, fp8_probe_passes():
        try:
            _phases(layout, px, out)
            out["fits"] = True
        except torch.OutOfMemoryError as exc:
            out.update(fits=False, failed=out.pop("phase"),
                       oom=str(exc).split(" If reserved")[0], at=list(exc.__notes__))
        out["peak_reserved"] = max(out.get(k, 0) for k in
                                   ("resident_reserved", "sampling_reserved", "decode_reserved"))
        out["attention"] = sorted({k.split(":")[1] for k, _ in emu.kernels
                                   if k.startswith("attention:")})
        out["fallbacks"] = sorted({what.split(" (")[0] for what, _ in emu.fallbacks})
    out["seconds"] = round(time.perf_counter() - start, 1)
    return out
