"""The guidance's memory (issue 61): from the rows' logits in the model's dtype, CFG makes one
float32 copy of each branch and combines them in place, the official ``(1 + s) * cond - s *
uncond`` (and editing's image guidance) bit for bit; before, a float32 copy of every row and
three new [A, N, K] results were alive at once."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from ladr_core.dimoo import DiMOOPipeline
from tests.kit.live_bytes import LiveBytes

PROMPTS = ["a red circle left of a blue square", "green"]


@pytest.mark.parametrize("image_cfg", [None, 1.5])
def test_guidance_holds_one_float32_copy_per_branch(pipe: DiMOOPipeline, image_cfg: Any,
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    den = pipe.make_denoiser(PROMPTS, None, width=16, height=12, cfg=3.0)
    if image_cfg is not None:  # an edit's three rows per item, guided the official way
        den.table.branches, den.image_cfg = 3, image_cfg
    a, n = len(PROMPTS), den.layout.n_codes
    branches = den.table.branches
    rows = torch.randn(branches * a, n, 512, generator=torch.Generator().manual_seed(0))
    rows = (rows * 8).to(torch.bfloat16)  # the model's dtype on a GPU, the whole vocabulary
    monkeypatch.setattr(den, "_full", lambda *args, **kw: rows.clone())
    f = rows.float()
    if image_cfg is None:
        want = (1.0 + 3.0) * f[:a] - 3.0 * f[a:]
    else:
        want = f[:a] + 3.0 * (f[:a] - f[a:2 * a]) + image_cfg * (f[:a] - f[2 * a:])
    tokens = torch.zeros(a, n, dtype=torch.long)
    masked = torch.ones(a, n, dtype=torch.bool)
    with LiveBytes() as mem:
        got = den(tokens, masked)
    assert got.dtype == torch.float32 and torch.equal(got, want)
    branch = a * n * 512 * 4  # one branch's float32 logits
    # the rows (bf16, the stand-in pass's output) and one float32 copy per branch, no more
    assert mem.peak <= rows.numel() * 2 + branches * branch + 4096, (mem.peak, branch)
