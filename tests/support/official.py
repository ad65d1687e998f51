"""The official DiMOO step loop, transcribed once: every parity test compares with it.

`reference_generate` follows Alpha-VLLM/Lumina-DiMOO `generate_image` (generators/
image_generation_generator.py) with `mask_by_random_topk` / `gumbel_max_sample` /
`cosine_schedule` (utils/generation_utils.py), written out step by step with the official
per-step host logic (Python loop, `.item()`, boolean-mask indexing) and no batching:

  keep_n = floor(vq_len * gamma((step + 1) / T)) clamped >= 1, 0 on the last step
  sampled = argmax(logits / temperature + Gumbel) over the masked rows (argmax at temperature 0)
  conf = softmax(logits)[sampled]; confidence = log(conf.clamp_min(1e-20)) + temperature * Gumbel
  re-mask the masked positions whose confidence is strictly below sorted(confidence)[clamp(keep_n,
  0, L - 1)].

Noise is drawn exactly like the official loop: Gumbel noise for the L masked rows only
(`torch.rand` of the masked logits' shape [1, L, K], row j = the j-th masked position in index
order), then re-mask noise [1, L]. So the fixed-noise equality with `sample` also proves that
the sampler consumes the same random numbers, in the same order and from the same generator, as
the official code. The one adaptation: where the official code draws re-mask noise at
temperature 0 and multiplies it by 0, this port skips the draw (the sampler draws nothing at
temperature 0).
"""

from __future__ import annotations

import math
from collections.abc import Callable

import torch


def gumbel(u: torch.Tensor) -> torch.Tensor:
    """The official Gumbel transform of uniforms u."""
    return -torch.log(-torch.log(u + 1e-20) + 1e-20)


def official_loop(x: torch.Tensor, vq_mask: torch.Tensor,
                  logits_of: Callable[[torch.Tensor, torch.Tensor], torch.Tensor], steps: int,
                  temperature: float, generator: torch.Generator | None, offset: int = 0,
                  mask_id: int = 0) -> tuple[torch.Tensor, int]:
    """The official step loop (``generate_image`` / ``generate_i2i``) on one sequence x [1, P]
    whose positions ``vq_mask`` [1, P] are still to generate. ``logits_of(x, vq_mask)`` returns
    the guided logits of the masked positions [1, L, K] in index order; a sampled code c is
    written as c + ``offset``, a re-masked position gets ``mask_id``. Returns (x, nfe)."""
    vq_len = vq_mask.sum(dim=1, keepdim=True)
    nfe = 0
    for step in range(steps):
        if vq_mask.sum().item() == 0:
            break
        if step < steps - 1:
            frac = torch.cos(0.5 * math.pi * torch.tensor([(step + 1) / steps]))
            keep_n = (vq_len.float() * frac).floor().clamp_min(1).long()
        else:
            keep_n = torch.zeros_like(vq_len)
        logits = logits_of(x, vq_mask)
        nfe += 1
        if temperature == 0:
            sampled = logits.argmax(dim=-1)
        else:
            g = gumbel(torch.rand(logits.shape, dtype=logits.dtype, generator=generator))
            sampled = (logits / temperature + g).argmax(dim=-1)
        probs = torch.softmax(logits, dim=-1)
        conf = probs.gather(-1, sampled.unsqueeze(-1)).squeeze(-1)  # [1, L]
        flat_idx = vq_mask.nonzero(as_tuple=False)[:, 1]
        x.view(-1)[flat_idx] = (sampled + offset).view(-1)
        noise = (torch.zeros_like(conf) if temperature == 0 else
                 gumbel(torch.rand(conf.shape, dtype=conf.dtype, generator=generator)))
        confidence = torch.log(conf.clamp_min(1e-20)) + temperature * noise
        sorted_conf = torch.sort(confidence, dim=-1).values
        k = keep_n.long().clamp(0, conf.shape[1] - 1)
        remask = flat_idx[(confidence < torch.gather(sorted_conf, 1, k)).view(-1)]
        x.view(-1)[remask] = mask_id
        vq_mask = torch.zeros_like(vq_mask)
        vq_mask.view(-1)[remask] = True
    return x, nfe


def reference_generate(
    denoise, n: int, steps: int, temperature: float, generator: torch.Generator | None,
    known: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, int]:
    """Official loop for one item of N tokens and a ``denoise(tokens, masked)`` callable (the
    sampler's contract); returns (tokens LongTensor [1, N], nfe).

    known: (codes [1, N], generate BoolTensor [1, N]) for the official painting mode
    (inference_t2i.py --painting_mode): the loop starts from the known codes with MASK only at
    the positions to generate, so vq_len (the schedule's count) is the count to generate."""
    x = torch.zeros(1, n, dtype=torch.long)
    vq_mask = torch.ones(1, n, dtype=torch.bool)
    if known is not None:
        x = known[0].clone().masked_fill(known[1], 0)
        vq_mask = known[1].clone()

    def logits_of(x: torch.Tensor, vq_mask: torch.Tensor) -> torch.Tensor:
        return denoise(x.masked_fill(vq_mask, 0), vq_mask.clone())[:, vq_mask[0]]

    return official_loop(x, vq_mask, logits_of, steps, temperature, generator)
