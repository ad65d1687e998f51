"""A tiny DiMOO pipeline that honours ARCHITECTURE.md Sec. 2 and runs the REAL `ladr_core.sample`.

Used by the node tests until/unless the shipped nano checkpoint is present (those tests then also
run against `load_dimoo(nano_model_path())`). Only the network is fake: a deterministic denoiser
whose logits favour a per-prompt target image and the left/upper neighbours' tokens (so LADR's
frontier rescue has something local to find). Nothing here mocks torch, ladr_core or ComfyUI.
"""

from __future__ import annotations

import time
import zlib

import torch

import ladr_core
from ladr_core.dimoo.pipeline import GenerationResult

K = 16  # codebook size
PALETTE = torch.rand(K, 3, generator=torch.Generator().manual_seed(7))


# The fake returns the real result type, so the nodes are tested against the real contract.
FakeResult = GenerationResult


class FakeDiMOO:
    """Contract-shaped pipeline: generate / decode / preview / vq_factor / transformer / vq."""

    vq_factor = 16
    default_size = 64

    def __init__(self, device: str = "cpu", dtype: torch.dtype = torch.float32) -> None:
        self.transformer = torch.nn.Linear(K, K).to(device, dtype)
        self.vq = torch.nn.Linear(3, 3).to(device, dtype)
        self.calls: list[dict] = []

    def _denoiser(self, prompt: str, h: int, w: int):
        g = torch.Generator().manual_seed(zlib.crc32(prompt.encode()))
        target = torch.randn(h * w, K, generator=g) * 2.0

        def denoise(tokens: torch.Tensor, masked: torch.Tensor) -> torch.Tensor:
            grid = tokens.view(-1, h, w)
            known = (~masked).view(-1, h, w)
            bonus = torch.zeros(tokens.shape[0], h, w, K)
            left = torch.nn.functional.one_hot(grid[:, :, :-1], K).float()
            bonus[:, :, 1:] += 3.0 * left * known[:, :, :-1, None]
            up = torch.nn.functional.one_hot(grid[:, :-1, :], K).float()
            bonus[:, 1:, :] += 3.0 * up * known[:, :-1, :, None]
            return target + bonus.view(tokens.shape[0], h * w, K)

        return denoise

    def generate(self, prompt, negative_prompt=None, width=64, height=64, steps=16, cfg=4.0,
                 temperature=1.0, seed=0, strategy="ladr", policy=None, cache=None,
                 callback=None, batch_size=1, decode=True) -> FakeResult:
        prompts = [prompt] if isinstance(prompt, str) else list(prompt)
        width = self.default_size if width is None else width  # None = default, as the pipeline
        height = self.default_size if height is None else height
        if width % self.vq_factor or height % self.vq_factor:
            raise ValueError(f"width/height must be multiples of {self.vq_factor}")
        h, w = height // self.vq_factor, width // self.vq_factor
        self.calls.append({"prompts": prompts, "seed": seed, "strategy": strategy,
                           "policy": policy, "cache": cache, "batch_size": batch_size})
        t0 = time.perf_counter()
        outs, nfe, run = [], 0, 0
        for pi, text in enumerate(prompts):
            gens = [torch.Generator().manual_seed(seed + pi * batch_size + i)
                    for i in range(batch_size)]
            res = ladr_core.sample(self._denoiser(text, h, w), shape=(batch_size, h, w),
                                   steps=steps, strategy=strategy, policy=policy,
                                   temperature=temperature, generator=gens, callback=callback)
            outs.append(res.tokens)
            nfe, run = nfe + res.nfe, max(run, res.steps)
        tokens = torch.cat(outs)
        n = tokens.shape[0] * h * w
        return FakeResult(tokens, self.decode(tokens, (h, w)) if decode else None, nfe, run,
                          time.perf_counter() - t0, nfe * n // max(len(prompts), 1),
                          steps * n, (h, w))

    def decode(self, tokens: torch.Tensor, grid: tuple[int, int]) -> torch.Tensor:
        h, w = grid
        img = PALETTE[tokens.cpu()].view(-1, h, w, 3)
        f = self.vq_factor
        return img.repeat_interleave(f, 1).repeat_interleave(f, 2)

    def preview(self, tokens: torch.Tensor, masked: torch.Tensor, grid) -> torch.Tensor:
        h, w = grid
        img = PALETTE[tokens.cpu()].clone()
        img[masked.cpu()] = 0.5
        return img.view(-1, h, w, 3)
