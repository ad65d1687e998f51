"""Device memory a run needs beyond the weights, from the configs and the job's shape: what a
host must keep free when it loads the weights (ComfyUI's ``memory_required``).

How and why: docs/ARCHITECTURE.md section 8, dimoo/model/memory.py.
"""

from __future__ import annotations

from typing import Any

import torch

from .config import LLaDAConfig
from .transformer import HEAD_CHUNK, LLaDAModel

__all__ = ["answer_memory", "answers_in_flight", "decode_memory", "head_memory",
           "model_compute_dtype", "working_memory"]

F32 = 4


def working_memory(config: LLaDAConfig, batch: int, seq_len: int, n_codes: int,
                   codebook_size: int, *, branches: int = 2, cache: bool = False,
                   dtype: torch.dtype = torch.bfloat16) -> int:
    """Bytes of sampling beyond the weights (docs/ARCHITECTURE.md section 8); ``dtype``: the
    compute dtype (at least 2 bytes are counted: 8-bit weights compute in a 16-bit dtype)."""
    e = max(dtype.itemsize, 2)
    d, hd = config.d_model, config.head_dim
    kv = config.effective_n_kv_heads * hd
    rows = batch * branches
    passes = pass_memory(config, rows * seq_len, e)
    slots = rows * n_codes
    logits = slots * (d * e + codebook_size * (e + F32))
    total = max(passes, logits) + 2 * n_codes * codebook_size * F32
    if cache:
        total += rows * (2 * config.n_layers * seq_len * kv * e + n_codes * (codebook_size + 1) * e
                         + 2 * n_codes * 8)
    return int(total)


def pass_memory(config: LLaDAConfig, tokens: int, e: int) -> int:
    """Bytes of one forward pass over ``tokens`` tokens in an ``e``-byte compute dtype: the
    widest moment of a layer (the RoPE of q or k, the attention or the MLP), as working_memory
    counts them (docs/ARCHITECTURE.md section 8)."""
    d, hidden, hd = config.d_model, config.hidden_size, config.head_dim
    kv = config.effective_n_kv_heads * hd
    rope = e * (3 * d + 2 * kv) + F32 * 5 * max(d, kv) // 2
    attention = e * (5 * d + 2 * kv)
    mlp = e * (2 * hidden + 2 * d)
    return tokens * (max(rope, attention, mlp) + 2 * F32 * hd)


def model_compute_dtype(model: LLaDAModel) -> torch.dtype:
    """The dtype a model computes in, read from its layers when the load's setting is not at
    hand: a quantized embedding's ``compute_dtype`` (a GGUF embedding stores raw uint8 bytes),
    else the embedding weight's floating dtype."""
    wte = model.model.transformer.wte
    dtype = getattr(wte, "compute_dtype", None)
    if isinstance(dtype, torch.dtype):
        return dtype
    weight = wte.weight
    return weight.dtype if weight.is_floating_point() else torch.float32


def head_memory(model: LLaDAModel, dtype: torch.dtype) -> int:
    """Bytes a projection onto the whole vocabulary holds beside its logits for the head's
    weights: 0 for a float head (used as it is), else one HEAD_CHUNK of rows of a quantized
    head (transformer.py ``_chunked_head``) as its raw bytes, unpacked codes, float32 values
    and compute-dtype copy."""
    t = model.model.transformer
    head = t.wte if model.config.weight_tying else t.ff_out
    if getattr(head, "weight_rows", None) is None:
        return 0
    rows = min(HEAD_CHUNK, model.config.n_embeddings)
    return rows * model.config.d_model * (2 + F32 + max(dtype.itemsize, 2))


def answer_memory(config: LLaDAConfig, rows: int, seq_len: int, window: int, *,
                  noise: bool, entropy: bool, chunk: int,
                  dtype: torch.dtype = torch.bfloat16, head: int = 0) -> int:
    """Bytes of answering beyond the weights (tasks/answering.py): ``rows`` items of up to
    ``seq_len`` tokens in one packed pass, then each item's ``window`` positions projected on
    the whole vocabulary and sampled in float64, ``chunk`` rows at a time (the uniform noise of
    a window drawn whole with ``noise``, i.e. temperature > 0). Float64 temporaries alive at
    once per chunk row: 4 with noise or entropy (logits, their exp, the noise's power and the
    quotient; or logits, softmax, log-softmax and their product), else 2, and one float64
    vocabulary row more (measured, not yet traced to its line, at the 8B head by
    lab/benchmarks/answer_memory.py --layout q4_k_m --layers 1 --images 1). The packed pass
    (model/packed.py) holds the residual stream twice over beside the widest layer (2 d per
    token more than the padded pass working_memory counts). ``head``: what the projection holds
    for a quantized head's weights (``head_memory``)."""
    e = max(dtype.itemsize, 2)
    d, vocab = config.d_model, config.n_embeddings
    tokens = rows * seq_len
    packed = pass_memory(config, tokens, e) + tokens * 2 * d * e
    project = tokens * d * e + rows * window * (d + vocab) * e + head
    wide = 4 if noise or entropy else 2
    step = rows * window * 96  # per position: _step's tables and sample_window's results, 12 x 8 B
    sample = (rows * window * vocab * e + (window * vocab * 8 if noise else 0)
              + (min(window, chunk) * wide + 1) * vocab * 8 + step)
    return int(max(packed, project, sample))


def answers_in_flight(items: int, budget: int, per_pass: Any) -> int:
    """The most of ``items`` answers (at least one) whose pass ``per_pass(k)`` (bytes, rising
    with k: ``answer_memory`` at k rows) fits ``budget`` bytes."""
    fit = 1
    for k in range(2, items + 1):
        if per_pass(k) > budget:
            break
        fit = k
    return fit


def decode_memory(vq_config: Any, height: int, width: int,
                  dtype: torch.dtype = torch.float32) -> int:
    """Bytes the VQ decoder needs for one ``height`` x ``width`` px image (docs/ARCHITECTURE.md
    section 8); ``vq_config``: the diffusers VQModel config (``block_out_channels``), ``dtype``
    the VQ's."""
    channels = list(vq_config.block_out_channels)
    widest = max(channels[:2])
    return int(height * width * (4 * widest * max(dtype.itemsize, 2) + 12 * F32))
