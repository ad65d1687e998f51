"""Device memory a run needs beyond the weights, from the configs and the job's shape: what a
host must keep free when it loads the weights (ComfyUI's ``memory_required``).

`working_memory`: sampling with `batch` images in flight, each with `branches` rows (cond,
uncond, image-uncond) of at most `seq_len` tokens (T = batch * branches * seq_len packed
tokens), `n_codes` image codes per row and a codebook of K:

* a full pass (packed.py) at its widest moment, per token: the RoPE of q or k (x, the norm
  output, the rotated q, k as projected and as rotated, and the rotation's float32 copy,
  negated half and rotated copy, combined in place: 2.5 float32 widths); the attention (x, q, k, v
  and up to three outputs' widths while the runs of equal-length rows are gathered); or the
  MLP (x, the norm output, gate and up, their product written into gate), the largest (the
  RoPE on the 8B model in bf16). q, k, v and the attention output are released before the
  MLP and the next layer (before d5c6dc6: the last layer's q, k, v, kept alive by their names, and
  the out-of-place product and rotation made a pass peak at twice these bytes); plus the
  float32 RoPE tables [T, head_dim] x 2 for the whole pass;
* after it, the code slots' logits: the gathered hidden states and logits [R, N, K] in the
  compute dtype, and a float32 copy of each branch, combined in place by the guidance (no
  float32 copy of all rows beside three new [B, N, K] results);
* all along, the sampler's two [N, K] float32 work buffers (ladr_core/sampling.py) and, with
  an ML-Cache, each image's K/V of every layer and its code-slot logits (denoise/cache.py),
  for the images in flight only: an image's cache is released when it leaves the batch.

On the 8B shape at 1024 px in bf16 this is 0.91 GiB per image in flight without a cache (1.49
GiB before), so on a 24 GB card holding the bf16 weights (24 GiB less 0.5 GiB of context and
16.2 GB of weights free) `images_in_flight` grants 7 images instead of 4; with the ML-Cache
5.19 GiB (5.78), still 1 (docs/reports/GPU.md section 7).

`decode_memory`: the VQ decoder on one image (model/vq.py decodes one at a time): its largest
activations are at the output resolution, where up to four tensors of the wider of the last
two levels' channels are alive in a resnet block (input, normed, activated; input, output, sum
and scaled sum), plus a dozen float32 values per pixel for the output image's copies.

`answer_memory` (understanding: `pipe.understand_memory(job, answers)`, what DiMOO Caption /
Ask ask for with one answer, and what chooses the answers in flight): each answer in flight's
row in one packed pass (the full pass above, plus the residual stream twice over:
the packed pass keeps the embedding output and the attention sum beside the widest layer), then
each item's window (its answer so far; the last block's is the whole answer) projected onto the
whole vocabulary in the compute dtype, and sampled the official way in float64
(tasks/answering.py): the window's uniform noise drawn whole at temperature > 0, then
`SAMPLE_CHUNK` (256) rows at a time up to four [rows, V] float64 temporaries, and a dozen
8-byte values per position for the step's tables. On the 8B model (V = 134,656) a 1,024-token
answer's float64 softmax alone is 1.1 GB; sampled whole it would need about four times that.
A quantized (GGUF) head is dequantized `HEAD_CHUNK` (8,192) vocabulary rows at a time
(model/transformer.py), and `head_memory` adds one chunk's raw bytes, codes, float32 values and
compute-dtype copy (the whole 8B head at once would be about 3 GiB more). The compute dtype of
every estimate is the load's `dtype` (`pipe.compute_dtype`), not the weights' storage (a GGUF
embedding holds uint8 bytes). `lab/benchmarks/answer_memory.py` runs one pass of the answer loop
of the 8B shape on the emulated device (shapes only) and compares its peak with this grant.

Sampling and the decode do not overlap (the decode follows the run), nor does building the
preview table (`pipe.preview_bytes()`, while the pipeline has none: `PREVIEW_CHUNK` codes per
decoder call, before the first step of a run with a callback), so a run needs the largest.
Checked against LiveBytes on the nano checkpoint (tests/dimoo/test_memory.py): never below
the measured peak, at most 1.5 x above. What a fused kernel allocates inside itself (SDPA's
scratch) is not counted, by the measurement or here.
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
    """Bytes of one forward pass over ``tokens`` tokens in an ``e``-byte compute dtype: the
    widest moment of a layer (the RoPE of q or k, the attention or the MLP), as working_memory
    counts them (module docstring)."""
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
    """Bytes the VQ decoder needs for one ``height`` x ``width`` px image (module
    docstring); ``vq_config``: the diffusers VQModel config (``block_out_channels``), ``dtype``
    the VQ's."""
    channels = list(vq_config.block_out_channels)
    widest = max(channels[:2])
    return int(height * width * (4 * widest * max(dtype.itemsize, 2) + 12 * F32))
