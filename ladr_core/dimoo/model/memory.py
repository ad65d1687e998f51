"""Device memory a run needs beyond the weights, from the configs and the job's shape: what a
host must keep free when it loads the weights (ComfyUI's ``memory_required``).

`working_memory`: sampling `batch` images, each with `branches` rows (cond, uncond,
image-uncond) of at most `seq_len` tokens (T = batch * branches * seq_len packed tokens),
`n_codes` image codes per row, a codebook of K. The largest of:

* a full pass (packed.py) at a layer's widest moment, per token: the RoPE of q or k (x, the
  norm output, q, k as projected and rotated, and the rotation's float32 copies combined in
  place: 2.5 float32 widths), the attention (x, q, k, v and up to three outputs' widths while
  equal-length runs are gathered) or the MLP (x, the norm output, gate and up, the product
  written into gate); plus the float32 RoPE tables [T, head_dim] x 2;
* after it, the code slots' logits [R, N, K] in the compute dtype and a float32 copy of each
  branch, combined in place by the guidance;
* all along, the sampler's two [N, K] float32 work buffers and, with an ML-Cache, each
  in-flight image's K/V of every layer and code-slot logits (denoise/cache.py).

The figures this grants on the 8B shape (images in flight per card) are in
docs/reports/GPU.md section 7.

`decode_memory`: the VQ decoder on one image (model/vq.py decodes one at a time): up to four
tensors of the wider of the last two levels' channels at the output resolution (a resnet
block's input, normed, activated, sum), plus a dozen float32 values per pixel of output.

`answer_memory` (understanding, `pipe.understand_memory(job, answers)`): each answer's row in
one packed pass (the full pass plus the residual stream twice over), then each item's window
projected on the whole vocabulary in the compute dtype and sampled the official way in float64
(tasks/answering.py), `SAMPLE_CHUNK` rows at a time (on the 8B model, V = 134,656, a
1,024-token answer's float64 softmax alone is 1.1 GB; sampled whole, four times that). A
quantized (GGUF) head is dequantized `HEAD_CHUNK` rows at a time (model/transformer.py);
`head_memory` adds one chunk. Every estimate uses the load's compute dtype
(`pipe.compute_dtype`), not the weights' storage (a GGUF embedding holds uint8 bytes).
`lab/benchmarks/answer_memory.py` compares one emulated 8B answer pass with this grant.

Sampling, the decode and building the preview table (`pipe.preview_bytes()`) never overlap,
so a run needs the largest. Checked against LiveBytes on the nano checkpoint
(tests/dimoo/test_memory.py): never below the measured peak, at most 1.5 x above. A fused
kernel's own scratch (SDPA's) is counted by neither.
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
    """Bytes of sampling beyond the weights (module docstring); ``dtype``: the
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
    """Bytes of one forward pass over ``tokens`` tokens in an ``e``-byte dtype: a layer's
    widest moment (module docstring)."""
    d, hidden, hd = config.d_model, config.hidden_size, config.head_dim
    kv = config.effective_n_kv_heads * hd
    rope = e * (3 * d + 2 * kv) + F32 * 5 * max(d, kv) // 2
    attention = e * (5 * d + 2 * kv)
    mlp = e * (2 * hidden + 2 * d)
    return tokens * (max(rope, attention, mlp) + 2 * F32 * hd)


def model_compute_dtype(model: LLaDAModel) -> torch.dtype:
    """The dtype a model computes in, from its layers: a quantized embedding's
    ``compute_dtype`` (a GGUF one stores uint8 bytes), else the embedding's floating dtype."""
    wte = model.model.transformer.wte
    dtype = getattr(wte, "compute_dtype", None)
    if isinstance(dtype, torch.dtype):
        return dtype
    weight = wte.weight
    return weight.dtype if weight.is_floating_point() else torch.float32


def head_memory(model: LLaDAModel, dtype: torch.dtype) -> int:
    """Bytes the head's weights add to a projection on the whole vocabulary: 0 for a float
    head, else one HEAD_CHUNK of a quantized head's rows (transformer.py ``_chunked_head``) as
    raw bytes, codes, float32 values and a compute-dtype copy."""
    t = model.model.transformer
    head = t.wte if model.config.weight_tying else t.ff_out
    if getattr(head, "weight_rows", None) is None:
        return 0
    rows = min(HEAD_CHUNK, model.config.n_embeddings)
    return rows * model.config.d_model * (2 + F32 + max(dtype.itemsize, 2))


def answer_memory(config: LLaDAConfig, rows: int, seq_len: int, window: int, *,
                  noise: bool, entropy: bool, chunk: int,
                  dtype: torch.dtype = torch.bfloat16, head: int = 0) -> int:
    """Bytes of answering beyond the weights (module docstring): ``rows`` items of up to
    ``seq_len`` tokens, each item's ``window`` positions sampled in float64 ``chunk`` rows at
    a time (``noise``: temperature > 0, the window's noise drawn whole). Float64 temporaries
    per chunk row: 4 with noise or entropy (logits, exp, the noise's power, the quotient; or
    logits, softmax, log-softmax, product), else 2, plus one vocabulary row measured by
    lab/benchmarks/answer_memory.py --layout q4_k_m --layers 1 --images 1 (not yet traced to
    its line). ``head``: ``head_memory``."""
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
    """Bytes the VQ decoder (diffusers VQModel config) needs for one image (module docstring)."""
    channels = list(vq_config.block_out_channels)
    widest = max(channels[:2])
    return int(height * width * (4 * widest * max(dtype.itemsize, 2) + 12 * F32))
