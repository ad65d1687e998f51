"""The context-length error: suggested sizes the node accepts, and the field that is too long."""

from __future__ import annotations

import re

import pytest
import torch

import ladr_core
from ladr_core.dimoo.denoise.prompt import check_image_size, suggest_size

STEP = 16  # the sampler node's size step (nodes/sampler.py SIZE_MULTIPLE)


def _suggested(msg: str) -> tuple[int, int]:
    m = re.search(r"width=(\d+), height=(\d+);", msg)
    assert m, msg
    return int(m[1]), int(m[2])


@pytest.mark.parametrize(("width", "height", "ratio"), [
    (96, 96, 1.0), (2048, 2048, 1.0), (1008, 48, 21.0), (48, 1008, 1 / 21), (160, 96, 5 / 3)])
def test_suggestion_is_a_node_size_that_fits_with_the_aspect_ratio(width, height, ratio) -> None:
    """nano-like numbers: VQ factor 4, context 512, a 40-token prompt."""
    with pytest.raises(ValueError, match="max_sequence_length") as err:
        check_image_size(width, height, 4, 512, 40, step=STEP)
    w, h = _suggested(str(err.value))
    assert w % STEP == 0 and h % STEP == 0 and w <= width and h <= height
    check_image_size(w, h, 4, 512, 40, step=STEP)  # it fits
    assert abs(w / h - ratio) / ratio < 0.25, (w, h)


def test_square_requests_get_square_suggestions() -> None:
    assert suggest_size(96, 96, 16, 4, 512 - 44) == (80, 80)
    assert suggest_size(2048, 2048, 16, 4, 512 - 44) == (80, 80)
    assert suggest_size(1008, 48, 16, 4, 512 - 44) == (336, 16)


def test_no_size_fits_names_the_field() -> None:
    with pytest.raises(ValueError, match="shorten the negative_prompt") as err:
        check_image_size(16, 16, 4, 64, 60, field="negative_prompt", step=STEP)
    assert "(negative_prompt 60 + image" in str(err.value)


@pytest.mark.skipif(not (ladr_core.nano_model_path() / "model.safetensors").is_file(),
                    reason="DiMOO-nano checkpoint not shipped")
def test_pipeline_names_the_negative_prompt_when_it_is_the_long_one() -> None:
    pipe = ladr_core.load_dimoo(ladr_core.nano_model_path(), dtype=torch.float32)
    with pytest.raises(ValueError, match=r"negative_prompt \d+ \+ image") as err:
        pipe.layout(48, 48, ["a red circle"], "red " * 600)
    assert "shorten the negative_prompt" in str(err.value)
    with pytest.raises(ValueError, match=r"\(prompt \d+ \+ image") as err:
        pipe.layout(48, 48, ["red " * 600], "blue")
    assert "shorten the prompt" in str(err.value)
    with pytest.raises(ValueError) as err:
        pipe.layout(96, 96, ["a red circle"])
    w, h = _suggested(str(err.value))
    assert (w, h) == (80, 80)
    pipe.layout(w, h, ["a red circle"])


@pytest.mark.skipif(not (ladr_core.nano_model_path() / "model.safetensors").is_file(),
                    reason="DiMOO-nano checkpoint not shipped")
def test_too_many_tokens_names_the_input_that_causes_it_and_a_size_that_fits() -> None:
    """Issue 63: 2048 x 48 on nano said "shorten the prompt"; the image alone is too large, and
    only a narrower width makes it fit: the message names width and a width that fits (so
    height for 48 x 2048); a prompt too long beside a small image is the prompt's."""
    pipe = ladr_core.load_dimoo(ladr_core.nano_model_path(), dtype=torch.float32)
    for (w, h), side in (((2048, 48), "width"), ((48, 2048), "height")):
        with pytest.raises(ValueError) as err:
            pipe.layout(w, h, ["a red circle"])
        msg = str(err.value)
        assert msg.startswith(f"{side}={max(w, h)} makes the image too large: "), msg
        assert "shorten the prompt" not in msg, msg
        fit = int(re.search(rf"set {side} to at most (\d+) \(at ", msg)[1])
        pipe.layout(*((fit, h) if side == "width" else (w, fit)), ["a red circle"])  # it fits
    with pytest.raises(ValueError) as err:
        pipe.layout(48, 48, ["red " * 600])
    msg = str(err.value)
    over = int(re.search(r"shorten the prompt by at least (\d+) tokens", msg)[1])
    assert msg.startswith("prompt is too long beside a 48 x 48 px image"), msg
    words = 600 - over  # a token per word or more: this many fewer words fit
    pipe.layout(48, 48, ["red " * words])
