"""Device memory a run needs beyond the weights, from the configs and the job's shape: what a
host must keep free when it loads the weights (ComfyUI's ``memory_required``).

How and why: docs/ARCHITECTURE.md section 8, dimoo/model/memory.py.
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
    """Bytes of sampling beyond the weights (docs/ARCHITECTURE.md section 8); ``dtype``: the
    compute dtype (at least 2 bytes are counted: 8-bit weights compute in a 16-bit dtype)."""
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
    """Bytes the VQ decoder needs for one ``height`` x ``width`` px image (docs/ARCHITECTURE.md
    section 8); ``vq_config``: the diffusers VQModel config (``block_out_channels``), ``dtype``
    the VQ's."""
    channels = list(vq_config.block_out_channels)
    widest = max(channels[:2])
    return int(height * width * (4 * widest * max(dtype.itemsize, 2) + 12 * F32))
