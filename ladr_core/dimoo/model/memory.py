"""Device memory a run needs beyond the weights, from the configs and the job's shape: what a
host must keep free when it loads the weights (ComfyUI's ``memory_required``).

``working_memory``: sampling with ``batch`` images in flight, each with ``branches`` rows (cond,
uncond, image-uncond) of at most ``seq_len`` tokens (T = batch * branches * seq_len packed
tokens), ``n_codes`` image codes per row and a codebook of K:

* a full pass (packed.py) at its larger peak, per token: at the MLP three [T, hidden] (gate, up,
  their product) beside the residual stream, the attention output, its sum, the norm output
  and q, k, v; or at the RoPE of k, x, the norm output, this layer's q (as projected and
  rotated), k, v, the last layer's q, k, v (released only when their names are rebound) and
  five float32 temporaries (the larger on the 8B model in bf16; traced on nano in bf16); plus
  the float32 RoPE tables [T, head_dim] x 2 for the whole pass;
* after it, the code slots' logits: the gathered hidden states and logits [R, N, K] in the
  compute dtype, then in float32, and the guidance's three [B, N, K] float32 temporaries;
* all along, the sampler's two [N, K] float32 work buffers (ladr_core/sampling.py) and, with
  an ML-Cache, each image's K/V of every layer and its code-slot logits (denoise/cache.py).

``decode_memory``: the VQ decoder on one image (model/vq.py decodes one at a time): its largest
activations are at the output resolution, where up to four tensors of the wider of the last
two levels' channels are alive in a resnet block (input, normed, activated; input, output, sum
and scaled sum), plus a dozen float32 values per pixel for the output image's copies.

Sampling and the decode do not overlap (the decode follows the run), so a run needs the larger.
Checked against LiveBytes on the nano checkpoint (tests/dimoo/test_memory.py): never below
the measured peak, at most 1.5 x above. What a fused kernel allocates inside itself (SDPA's
scratch) is not counted, by the measurement or here.
"""

from __future__ import annotations

from typing import Any

import torch

from .config import LLaDAConfig

__all__ = ["decode_memory", "working_memory"]

F32 = 4


def working_memory(config: LLaDAConfig, batch: int, seq_len: int, n_codes: int,
                   codebook_size: int, *, branches: int = 2, cache: bool = False,
                   dtype: torch.dtype = torch.bfloat16) -> int:
    """Bytes of sampling beyond the weights (module docstring); ``dtype``: the compute dtype
    (at least 2 bytes are counted: 8-bit weights compute in a 16-bit dtype)."""
    e = max(dtype.itemsize, 2)
    d, hidden, hd = config.d_model, config.hidden_size, config.head_dim
    kv = config.effective_n_kv_heads * hd
    rows = batch * branches
    tokens = rows * seq_len
    mlp = e * (3 * hidden + 5 * d + 2 * kv)
    rope = e * (5 * d + 4 * kv) + F32 * 5 * d
    passes = tokens * (max(mlp, rope) + 2 * F32 * hd)
    slots = rows * n_codes
    logits = slots * (d * e + codebook_size * (e + F32)) + 3 * batch * n_codes * codebook_size * F32
    total = max(passes, logits) + 2 * n_codes * codebook_size * F32
    if cache:
        total += rows * (2 * config.n_layers * seq_len * kv * e + n_codes * (codebook_size + 1) * e
                         + 2 * n_codes * 8)
    return int(total)


def decode_memory(vq_config: Any, height: int, width: int,
                  dtype: torch.dtype = torch.float32) -> int:
    """Bytes the VQ decoder needs for one ``height`` x ``width`` px image (module docstring);
    ``vq_config``: the diffusers VQModel config (``block_out_channels``), ``dtype`` the VQ's."""
    channels = list(vq_config.block_out_channels)
    widest = max(channels[:2])
    return int(height * width * (4 * widest * max(dtype.itemsize, 2) + 12 * F32))
