"""Test-only helpers: a plain B=1 port of the official DiMOO loop and deterministic fake denoisers.

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

import torch
import torch.nn.functional as F


def _gumbel(u: torch.Tensor) -> torch.Tensor:
    return -torch.log(-torch.log(u + 1e-20) + 1e-20)


def reference_generate(
    denoise, n: int, steps: int, temperature: float, generator: torch.Generator | None,
    known: tuple[torch.Tensor, torch.Tensor] | None = None,
) -> tuple[torch.Tensor, int]:
    """Official loop for one item of N tokens; returns (tokens LongTensor [1, N], nfe).

    known: (codes [1, N], generate BoolTensor [1, N]) for the official painting mode
    (inference_t2i.py --painting_mode): the loop starts from the known codes with MASK only at
    the positions to generate, so vq_len (the schedule's count) is the count to generate."""
    x = torch.zeros(1, n, dtype=torch.long)
    vq_mask = torch.ones(1, n, dtype=torch.bool)
    if known is not None:
        x = known[0].clone().masked_fill(known[1], 0)
        vq_mask = known[1].clone()
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
        full = denoise(x.masked_fill(vq_mask, 0), vq_mask.clone())
        nfe += 1
        logits = full[:, vq_mask[0]]  # [1, L, K], the official layout
        if temperature == 0:
            sampled = logits.argmax(dim=-1)
        else:
            g = _gumbel(torch.rand(logits.shape, dtype=logits.dtype, generator=generator))
            sampled = (logits / temperature + g).argmax(dim=-1)
        probs = torch.softmax(logits, dim=-1)
        conf = probs.gather(-1, sampled.unsqueeze(-1)).squeeze(-1)  # [1, L]
        flat_idx = vq_mask.nonzero(as_tuple=False)[:, 1]
        x.view(-1)[flat_idx] = sampled.view(-1)
        if temperature == 0:
            g2 = torch.zeros_like(conf)
        else:
            g2 = _gumbel(torch.rand(conf.shape, dtype=conf.dtype, generator=generator))
        confidence = torch.log(conf.clamp_min(1e-20)) + temperature * g2
        sorted_conf = torch.sort(confidence, dim=-1).values
        k = keep_n.long().clamp(0, conf.shape[1] - 1)
        cut_off = torch.gather(sorted_conf, 1, k)
        mask_sel = confidence < cut_off
        new_mask = torch.zeros_like(vq_mask)
        new_mask.view(-1)[flat_idx[mask_sel.view(-1)]] = True
        vq_mask = new_mask
    return x, nfe


class LocalityDenoiser:
    """Deterministic fake denoiser whose logits depend on decoded neighbours.

    logits[b, i] = table[b, i] + coupling * (one-hot counts of the decoded tokens in the 3 x 3
    window around i), so decoded regions make their neighbours confident (the locality LADR
    exploits). table: FloatTensor [B, N, K]. Sync-free (scatter + avg-pool), so it does not
    disturb host-sync counting. Records every call's inputs and output in `calls`.
    """

    def __init__(self, table: torch.Tensor, grid: tuple[int, int], coupling: float = 1.5) -> None:
        self.table, self.grid, self.coupling = table, grid, coupling
        self.calls: list[tuple[torch.Tensor, torch.Tensor, torch.Tensor]] = []

    def __call__(self, tokens: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
        b, n = tokens.shape
        k = self.table.shape[-1]
        h, w = self.grid
        onehot = torch.zeros(b, n, k).scatter_(-1, tokens.unsqueeze(-1), 1.0)
        onehot = onehot * (~masked).unsqueeze(-1)
        img = onehot.transpose(1, 2).reshape(b, k, h, w)
        counts = F.avg_pool2d(img, 3, stride=1, padding=1, count_include_pad=True) * 9.0
        logits = self.table + self.coupling * counts.reshape(b, k, n).transpose(1, 2)
        self.calls.append((tokens.clone(), masked.clone(), logits.clone()))
        return logits

    def item(self, i: int) -> LocalityDenoiser:
        """The same denoiser restricted to batch item i (for batch-vs-single comparisons)."""
        return LocalityDenoiser(self.table[i : i + 1], self.grid, self.coupling)


def make_table(batch: int, n: int, k: int, seed: int = 0, scale: float = 2.0) -> torch.Tensor:
    """Fixed random logit table [B, N, K] from its own generator."""
    g = torch.Generator().manual_seed(seed)
    return torch.randn(batch, n, k, generator=g) * scale
