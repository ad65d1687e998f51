"""The base under the live preview (ladr_core/dimoo/tasks/preview.py): an inpainting's known tokens
in the input's own pixels (the plan's tokens, per image of a batch), the tokens being generated
left to the colour table, an edit's reference faded under the masked tokens."""

from __future__ import annotations

import torch

from ladr_core.dimoo import PaintOptions
from ladr_core.dimoo.model.vq import MASK_GREY
from ladr_core.dimoo.tasks.painting import plan_painting, token_mask
from ladr_core.dimoo.tasks.preview import FADE, edit_base, painting_base, pool_to_preview

F, GRID = 4, (3, 4)  # VQ factor 4, 3 x 4 tokens: 12 x 16 px


def _images(n: int) -> torch.Tensor:
    return torch.rand(n, GRID[0] * F, GRID[1] * F, 3, generator=torch.Generator().manual_seed(n))


def _cells(bits: torch.Tensor, p: int) -> torch.Tensor:
    return bits.view(*GRID).repeat_interleave(p, 0).repeat_interleave(p, 1)


def test_known_tokens_show_the_input_and_the_rest_stays_the_tables() -> None:
    image = _images(1)
    mask = torch.zeros(1, 12, 16)
    mask[:, 4:8, 4:12] = 1.0  # tokens (1, 1) and (1, 2)
    base = painting_base(plan_painting(["x"], image, mask, None, 1, F))
    region, _ = token_mask(mask, F)
    for p in (4, 2):  # at the image's resolution, and a table of 2 x 2 px per token
        table = torch.rand(GRID[0] * p, GRID[1] * p, 3)
        out = base.apply(table, region[0], item=0)
        known = _cells(~region[0], p)
        want = pool_to_preview(image, GRID, p)[0]
        assert torch.equal(out[known], want[known]) and torch.equal(out[~known], table[~known])
    assert torch.equal(pool_to_preview(image, GRID, F), image)


def test_each_image_of_a_batch_gets_its_own_picture_and_mask() -> None:
    """Two images, one mask each, batch_size 2: items 0-1 show image 0 with mask 0, items
    2-3 image 1 with mask 1 (painting.plan_painting's order)."""
    images = _images(2)
    masks = torch.zeros(2, 12, 16)
    masks[0, :4] = 1.0  # first token row
    masks[1, 8:] = 1.0  # last token row
    base = painting_base(plan_painting(["x"], images, masks, PaintOptions(), 2, F))
    region, _ = token_mask(masks, F)
    grey = torch.full((12, 16, 3), MASK_GREY)
    for item in range(4):
        k = item // 2
        out = base.apply(grey, region[k], item)
        known = _cells(~region[k], F)
        assert torch.equal(out[known], images[k][known]) and (out[~known] == MASK_GREY).all()


def test_an_edit_shows_its_reference_faded_under_the_masked_tokens() -> None:
    ref = _images(1)
    base = edit_base(ref, GRID, F)
    masked = torch.zeros(12, dtype=torch.bool)
    masked[6:] = True
    table = torch.rand(12, 16, 3)
    out = base.apply(table, masked, item=0)
    under = _cells(masked, F)
    torch.testing.assert_close(out[under], ref[0][under] * FADE + MASK_GREY * (1 - FADE))
    assert torch.equal(out[~under], table[~under])
    assert edit_base(ref, (GRID[0], GRID[1] + 1), F) is None  # style: output of another size


def test_the_base_goes_to_the_previews_device_once_per_run() -> None:
    """The known tokens and pooled pixels are copied to the preview's device at the first step
    and kept: later steps copy nothing from the host (a blocking copy per step before). The
    meta device stands for a GPU."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class Copies(TorchDispatchMode):
        def __init__(self) -> None:
            super().__init__()
            self.count = 0

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001
            if "_to_copy" in str(func) or "copy_" in str(func):
                self.count += 1
            return func(*args, **(kwargs or {}))

    mask = torch.zeros(2, 12, 16)
    mask[:, 4:8, 4:12] = 1.0
    base = painting_base(plan_painting(["x", "y"], _images(2), mask, None, 1, F))
    meta = torch.device("meta")
    preview = torch.rand(12, 16, 3).to(meta)
    masked = torch.ones(12, dtype=torch.bool).to(meta)
    first = base.apply(preview, masked, item=0)
    assert first.device == meta
    with Copies() as copies:
        for item in (0, 1, 0):
            assert base.apply(preview, masked, item=item).device == meta
    assert copies.count == 0
