"""Prompt template and token layout (official t2i layout, left-padded batches, size checks)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from ladr_core.dimoo import load_dimoo
from ladr_core.dimoo.denoise.prompt import (
    ImageLayout,
    build_prompt_batch,
    check_image_size,
    cond_text,
    uncond_text,
)
from ladr_core.dimoo.model.config import DIMOO_DEFAULT_IDS as IDS


def test_template_text_is_official() -> None:
    system = "<system>Generate an image according to the text prompt.</system>"
    assert cond_text("a cat") == system + "<user>a cat</user>"
    assert uncond_text() == system + "<user><uncondition></user>"
    assert uncond_text("blurry") == system + "<user>blurry</user>"


def test_image_part_rows_newlines_and_markers() -> None:
    layout = ImageLayout(h=3, w=4)
    toks = layout.tokens(IDS)
    assert layout.length == len(toks) == 3 * 5 + 4
    assert toks[:2] == [126354, 126349] and toks[-2:] == [126350, 126355]  # BOA BOI ... EOI EOA
    newline_at = [i for i, t in enumerate(toks) if t == 126084]
    assert newline_at == [2 + 4, 2 + 9, 2 + 14]  # after every row of w mask tokens
    offsets = layout.code_offsets()
    assert offsets.tolist() == [2, 3, 4, 5, 7, 8, 9, 10, 12, 13, 14, 15]
    assert all(toks[i] == 126336 for i in offsets.tolist())
    assert sum(t == 126336 for t in toks) == 12


def _encode(text: str) -> list[int]:
    return [ord(c) for c in text]  # 1 token per character: lengths differ per prompt


def test_batch_is_left_padded_with_aligned_image_part() -> None:
    layout = ImageLayout(2, 3)
    batch = build_prompt_batch(_encode, IDS, ["a", "a longer prompt"], None, layout, with_uncond=True)
    ids, mask = batch.input_ids, batch.attention_mask
    assert ids.shape[0] == 4 and batch.batch == 2
    image = torch.tensor(layout.tokens(IDS))
    for row in range(4):
        assert torch.equal(ids[row, -layout.length:], image)
    for row, text in enumerate([cond_text("a"), cond_text("a longer prompt"), uncond_text(), uncond_text()]):
        n = len(text) + layout.length
        assert mask[row].sum() == n and mask[row, -n:].all() and not mask[row, :-n].any()
        assert ids[row, -n:-layout.length].tolist() == _encode(text)  # uncond = uncond prompt + image
    assert (ids[:, batch.code_index] == 126336).all()
    assert batch.code_index.tolist() == (ids.shape[1] - layout.length + layout.code_offsets()).tolist()
    only_cond = build_prompt_batch(_encode, IDS, ["a"], "bad", layout, with_uncond=False)
    assert only_cond.input_ids.shape[0] == 1
    neg = build_prompt_batch(_encode, IDS, ["a"], "bad", layout, with_uncond=True)
    assert neg.input_ids[1, neg.attention_mask[1].bool()][: len(uncond_text("bad"))].tolist() == _encode(uncond_text("bad"))


def test_size_errors_name_nearest_valid_sizes() -> None:
    assert check_image_size(1024, 512, 16, 4096, 40) == ImageLayout(32, 64)
    with pytest.raises(ValueError, match="width=1000 .*nearest valid width: 992 or 1008"):
        check_image_size(1000, 512, 16, 4096, 40)
    with pytest.raises(ValueError, match="height=8 .*nearest valid height: 16"):
        check_image_size(512, 8, 16, 4096, 40)
    with pytest.raises(ValueError, match="width must be a positive int"):
        check_image_size(0, 512, 16, 4096, 40)
    with pytest.raises(ValueError, match=r"needs? \d+ tokens.*max_sequence_length\) is 4096.*width=\d+, height=\d+") as info:
        check_image_size(2048, 2048, 16, 4096, 40)
    found = re.search(r"aspect ratio: width=(\d+), height=(\d+)", str(info.value))
    assert found is not None
    w, h = int(found.group(1)), int(found.group(2))
    assert w % 16 == 0 and h % 16 == 0 and w == h
    assert 40 + ImageLayout(h // 16, w // 16).length <= 4096  # the suggestion really fits


def test_pipeline_layout_uses_checkpoint_tokenizer(dimoo_checkpoint: Path) -> None:
    pipe = load_dimoo(dimoo_checkpoint, dtype=torch.float32)
    for token in ("<system>", "</system>", "<user>", "</user>"):
        assert len(pipe.tokenizer.encode(token, add_special_tokens=False).ids) == 1
    den = pipe.make_denoiser(["a red circle", "blue"], width=16, height=12, cfg=2.0)
    assert den.layout == ImageLayout(3, 4)
    seq = den.input_ids
    expected = pipe.encode(cond_text("a red circle")) + ImageLayout(3, 4).tokens(pipe.ids)
    assert seq[0, -len(expected):].tolist() == expected
    uncond = pipe.encode(uncond_text()) + ImageLayout(3, 4).tokens(pipe.ids)
    assert seq[2, -len(uncond):].tolist() == uncond and pipe.ids.uncondition in seq[2].tolist()
    with pytest.raises(ValueError, match=r"width=18 is not a multiple of 4 \(one token per 4 x 4 pixels\); nearest valid width: 16 or 20"):
        pipe.make_denoiser("a", width=18, height=16)
    with pytest.raises(ValueError, match="max_sequence_length"):
        pipe.make_denoiser("a", width=64, height=64)


def test_encode_equals_hugging_face_fast_tokenizer_call(dimoo_checkpoint: Path) -> None:
    """Official code tokenizes with ``tokenizer(text)["input_ids"]`` (HF fast tokenizer)."""
    from transformers import PreTrainedTokenizerFast

    pipe = load_dimoo(dimoo_checkpoint, dtype=torch.float32)
    hf = PreTrainedTokenizerFast(tokenizer_file=str(dimoo_checkpoint / "tokenizer.json"))
    for text in (cond_text("a red circle left of a blue square"), uncond_text(), uncond_text("blue")):
        assert pipe.encode(text) == hf(text)["input_ids"]
    assert pipe.encode(uncond_text()).count(pipe.ids.uncondition) == 1
