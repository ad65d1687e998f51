"""The per-step preview must look like the decoded image (DiMOO-nano, deterministic run)."""

import pytest
import torch
import torch.nn.functional as F

import ladr_core
from ladr_core.dimoo.vq import build_preview_table, preview_from_table

pytestmark = pytest.mark.skipif(
    not (ladr_core.nano_model_path() / "model.safetensors").is_file(),
    reason="DiMOO-nano checkpoint not shipped in this checkout",
)


def _preview_error(pipe, res, table: torch.Tensor) -> float:
    prev = preview_from_table(table, res.tokens, None, res.grid).permute(0, 3, 1, 2)
    up = F.interpolate(prev, size=res.images.shape[1:3], mode="nearest").permute(0, 2, 3, 1)
    return float(((up - res.images) ** 2).mean())


def test_preview_table_matches_decoded_colours_better_than_isolated_codes() -> None:
    pipe = ladr_core.load_dimoo(ladr_core.nano_model_path(), dtype=torch.float32)
    res = pipe.generate(["a red circle left of a blue square", "two green triangles"],
                        steps=8, temperature=0.0, seed=3, strategy="baseline")
    shipped = _preview_error(pipe, res, pipe.preview_table())
    isolated = _preview_error(pipe, res, build_preview_table(pipe.vq, pipe.vq_factor, 4, context=1))
    assert shipped < 0.04, shipped
    assert shipped < isolated, (shipped, isolated)
