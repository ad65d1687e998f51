"""The node path's VQ decode on the emulated device: the VQ-VAE's weights and one decode of a
whole batch in float32 (DiMOO VQ Decode, nodes/decode.py -> ``pipe.decode`` ->
``ladr_core.dimoo.model.vq.decode_codes``).

The VQ is diffusers' ``VQModel`` built from Lumina-DiMOO's VQ configuration (tests/kit/vq_8b.py,
which the emulation's put-back tests build too), with shape-only weights. Lumina-DiMOO's technical report (arXiv 2510.06308) names aMUSEd's VQ as its image
tokenizer (16 x 16 downsampling, 8192 codes); the numbers below are that VQ's configuration as
published with aMUSEd (huggingface.co/amused/amused-512, ``vqvae/config.json``; Meissonic ships
the same). They agree with what the pack reads from the official checkpoint: a VQ factor of
2 ** (len(block_out_channels) - 1) = 16 and ``num_vq_embeddings`` = DiMOO's codebook_size 8192.
The official ``Alpha-VLLM/Lumina-DiMOO`` ``vqvae/config.json`` itself was not reachable from the
machine that made this estimate.

``decode_codes`` is called with ``check_range=False``: its range check reads two values back to
the host, which a shape-only run cannot (it allocates nothing of note).
"""

from __future__ import annotations

from typing import Any

import torch
from torch.utils.flop_counter import FlopCounterMode

from tests.kit.vq_8b import VQ_CONFIG, VQ_SOURCE

from .kernels import FLOP_FORMULAS
from .measure import settle

__all__ = ["VQ_CONFIG", "VQ_SOURCE", "measure_vq"]

def _build() -> Any:
    from diffusers import VQModel

    with torch.device("meta"):
        vq = VQModel.from_config(VQ_CONFIG)
    return vq.to_empty(device="cuda").eval().requires_grad_(False)


def measure_vq(sizes: list[int], batches: list[int]) -> dict[str, Any]:
    """VQ weights on the device and, per size and batch, one decode's peaks and FLOPs."""
    from ladr_core.dimoo.model.vq import decode_codes

    settle()
    base = (torch.cuda.memory_allocated(), torch.cuda.memory_reserved())
    vq = _build()
    settle()
    out: dict[str, Any] = {"source": VQ_SOURCE, "config": VQ_CONFIG,
                           "base_allocated": base[0], "base_reserved": base[1],
                           "weights_bytes": torch.cuda.memory_allocated() - base[0],
                           "weights_reserved": torch.cuda.memory_reserved() - base[1],
                           "params": sum(p.numel() for p in vq.parameters()), "decode": {}}
    factor = 2 ** (len(VQ_CONFIG["block_out_channels"]) - 1)
    for px in sizes:
        for batch in batches:
            grid = (px // factor, px // factor)
            codes = torch.zeros(batch, grid[0] * grid[1], dtype=torch.long, device="cuda")
            settle()
            start = torch.cuda.memory_allocated()
            with FlopCounterMode(display=False, custom_mapping=FLOP_FORMULAS) as flops:
                images = decode_codes(vq, codes, grid, check_range=False)
            out["decode"][f"{px}/{batch}"] = {
                "start_allocated": start, "peak_allocated": torch.cuda.max_memory_allocated(),
                "peak_reserved": torch.cuda.max_memory_reserved(),
                "flops": int(flops.get_total_flops()), "shape": list(images.shape)}
            del codes, images
    del vq
    settle()
    return out
