"""One linear layer of LLaDA-8B at a real checkpoint's magnitudes, for the low-precision tests.

The layer is ``ff_out`` (the MLP's down projection: 12288 in, ROWS of its 4096 rows out), with

* weights N(0, 0.02**2): LLaDA-8B's ``init_std`` 0.02 (its config.json), the spread LLaMA-style
  linears keep; per-channel fp8 scales follow from the tensor (``max|W_row| / 448``, about
  1.6e-4 to 2.2e-4 here);
* inputs of RMS 1 for ordinary tokens, and one token whose output carries a massive activation
  of 2500: LLaMA2-7B (the same width 4096 and SwiGLU blocks) writes values of about 2000-2600 into
  two fixed hidden dimensions of its first token through this projection (Sun et al., "Massive
  Activations in Large Language Models", COLM 2024, Fig. 1).
"""

from __future__ import annotations

import torch

__all__ = ["K", "MASSIVE", "ROWS", "layer_data", "reference"]

K, ROWS, MASSIVE = 12288, 64, 2500.0


def layer_data() -> tuple[torch.Tensor, torch.Tensor]:
    """(W [ROWS, K], x [3, K]) float32: two ordinary tokens, and one whose output row 0 is
    MASSIVE."""
    g = torch.Generator().manual_seed(0)
    w = torch.randn(ROWS, K, generator=g) * 0.02
    x = torch.randn(3, K, generator=g)
    x[2] = w[0] * (MASSIVE / float(w[0].square().sum()))
    return w, x


def reference(w: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    """``x @ w.T`` summed in float64, returned in float32."""
    return (x.double() @ w.double().t()).float()
