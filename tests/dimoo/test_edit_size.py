"""The official editing size (ladr_core/dimoo/tasks/edit_size.py): the same 512 px-area buckets and
the same bucket choice as the official image-to-image script, and the image scaled to cover
its bucket and centre-cropped."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from support.official_i2i import crop_size_list, var_crop_size

from ladr_core.dimoo import official_edit_size
from ladr_core.dimoo.tasks.edit_size import buckets, pick_bucket


def test_buckets_and_choice_equal_the_official_ones() -> None:
    official = crop_size_list()
    assert buckets() == official and (512, 512) in official
    assert all(w * h <= 512 * 512 and w % 32 == 0 == h % 32 for w, h in official)
    for w, h in [(1024, 768), (768, 1024), (1920, 1080), (512, 512), (300, 1200), (4000, 500),
                 (640, 480), (33, 31), (1080, 1350)]:
        assert pick_bucket(w, h) == var_crop_size(w, h, official), (w, h)
    assert pick_bucket(1024, 768) == (576, 448)


def test_an_image_at_its_bucket_is_left_alone() -> None:
    image = torch.rand(1, 448, 576, 3)
    assert official_edit_size(image) is image


def test_halving_then_centre_crop() -> None:
    """1152 x 896 is twice the 576 x 448 bucket: one box halving gives exactly the bucket."""
    image = torch.rand(2, 896, 1152, 3)
    out = official_edit_size(image)
    ref = F.avg_pool2d(image.permute(0, 3, 1, 2), 2).permute(0, 2, 3, 1)
    assert out.shape == (2, 448, 576, 3) and torch.allclose(out, ref, atol=1e-6)


@pytest.mark.parametrize(("h", "w", "bucket"), [(768, 1024, (448, 576)), (500, 4000, (256, 1024)),
                                                (100, 90, (544, 480))])
def test_any_image_comes_out_at_its_bucket_in_range(h: int, w: int, bucket) -> None:
    image = torch.rand(1, h, w, 3)
    out = official_edit_size(image)
    assert out.shape[1:3] == bucket and 0.0 <= float(out.min()) <= float(out.max()) <= 1.0
    # the middle of the picture stays in the middle: a bright centre dot survives the crop
    dot = torch.zeros(1, h, w, 3)
    dot[:, h // 2 - h // 8:h // 2 + h // 8, w // 2 - w // 8:w // 2 + w // 8] = 1.0
    centre = official_edit_size(dot)[0, bucket[0] // 2, bucket[1] // 2]
    assert torch.allclose(centre, torch.ones(3), atol=0.05)
