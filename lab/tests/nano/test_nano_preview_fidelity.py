"""The per-step preview must look like the decoded image (DiMOO-nano, deterministic run)."""

import pytest
import torch
import torch.nn.functional as F

import ladr_core
from lab.nano.scenes import BACKGROUND, COLORS
from ladr_core.dimoo.model.vq import build_preview_table, fit_preview_table, preview_from_table

pytestmark = pytest.mark.skipif(
    not (ladr_core.nano_model_path() / "model.safetensors").is_file(),
    reason="DiMOO-nano checkpoint not shipped in this checkout",
)


@pytest.fixture(scope="module")
def pipe():
    return ladr_core.load_dimoo(ladr_core.nano_model_path(), dtype=torch.float32)


@pytest.fixture(scope="module")
def palette_run(pipe):
    """One image per palette colour, seeds the shipped table was not fitted on."""
    prompts = [f"a {c} square" for c in COLORS]
    return prompts, pipe.generate(prompts, steps=16, seed=7, strategy="baseline")


def _upsampled(res, table: torch.Tensor) -> torch.Tensor:
    prev = preview_from_table(table, res.tokens, None, res.grid).permute(0, 3, 1, 2)
    return F.interpolate(prev, size=res.images.shape[1:3], mode="nearest").permute(0, 2, 3, 1)


def _object_mask(image: torch.Tensor) -> torch.Tensor:
    """Pixels of the decoded image that are not background (the named shape)."""
    background = torch.tensor(BACKGROUND, dtype=torch.float32) / 255
    return (image - background).abs().amax(-1) > 0.25


def _object_colour_errors(res, table: torch.Tensor) -> list[float]:
    """Per image: max channel error of the preview's mean object colour vs the decode's."""
    up = _upsampled(res, table)
    errors = []
    for img, prev in zip(res.images, up, strict=True):
        mask = _object_mask(img)
        assert mask.sum() >= 16, "the nano model drew no shape"
        errors.append(float((img[mask].mean(0) - prev[mask].mean(0)).abs().max()))
    return errors


def test_preview_keeps_every_palette_colour_of_the_decode(pipe, palette_run) -> None:
    prompts, res = palette_run
    errors = _object_colour_errors(res, pipe.preview_table())
    assert max(errors) < 0.08, dict(zip(prompts, errors, strict=True))


def test_preview_has_no_grid_pattern_inside_shapes(pipe, palette_run) -> None:
    """Inside a flat shape the decode is flat; the preview must not add a per-token texture."""
    _, res = palette_run
    up = _upsampled(res, pipe.preview_table())
    for img, prev in zip(res.images, up, strict=True):
        inner = _object_mask(img)[None, None].float()
        inner = -F.max_pool2d(-inner, 5, stride=1, padding=2)[0, 0] > 0.5  # 2 px erosion
        if inner.sum() < 4:
            continue
        assert float(prev[inner].std(0).max()) <= float(img[inner].std(0).max()) + 0.03


def test_fit_takes_each_codes_mean_decoded_patch() -> None:
    """Synthetic decode, 2x2 tokens of 2x2 px: code 5 twice (red, then blue), code 1 once."""
    tokens = torch.tensor([[5, 1, 5, 0]])
    colours = torch.tensor([[1.0, 0, 0], [0, 1.0, 0], [0, 0, 1.0], [0.5, 0.5, 0.5]])
    image = colours.view(2, 2, 1, 1, 3).expand(2, 2, 2, 2, 3).permute(0, 2, 1, 3, 4)
    image = image.reshape(1, 4, 4, 3)
    base = torch.full((8, 1, 1, 3), -1.0)
    table, counts = fit_preview_table(tokens, image, (2, 2), base)
    assert counts.tolist() == [1, 1, 0, 0, 0, 2, 0, 0]
    assert table[5, 0, 0].tolist() == [0.5, 0.0, 0.5]  # mean of its two decoded patches
    assert table[1, 0, 0].tolist() == [0.0, 1.0, 0.0]
    assert table[2, 0, 0].tolist() == [-1.0, -1.0, -1.0]  # never seen: the base is kept


def test_probe_table_with_context_beats_isolated_codes(pipe) -> None:
    """The decoder-probe fallback (checkpoints without a fitted table): context 3 is kept."""
    res = pipe.generate(["a red circle left of a blue square", "two green triangles"],
                        steps=8, temperature=0.0, seed=3, strategy="baseline")

    def mse(table: torch.Tensor) -> float:
        return float(((_upsampled(res, table) - res.images) ** 2).mean())

    shipped = build_preview_table(pipe.vq, pipe.vq_factor, 4)
    isolated = build_preview_table(pipe.vq, pipe.vq_factor, 4, context=1)
    assert mse(shipped) < mse(isolated)
