"""The image-size check must admit the official default 1024x1024 on the real checkpoint."""

import pytest

from ladr_core.dimoo import DIMOO_ROPE_CONTEXT
from ladr_core.dimoo.denoise.prompt import check_image_size
from ladr_core.dimoo.model.config import DiMOOIds, LLaDAConfig, context_length

LLADA_8B = LLaDAConfig(d_model=4096, n_heads=32, n_layers=32, vocab_size=126464,
                       max_sequence_length=4096, rope_theta=500000.0)
PROMPT_TOKENS = 40  # "<system>...</system><user>a cat</user>" is well under this


def test_real_ids_admit_official_1024_square_beyond_max_sequence_length() -> None:
    context = context_length(LLADA_8B, DiMOOIds())
    assert context == DIMOO_ROPE_CONTEXT > LLADA_8B.max_sequence_length
    layout = check_image_size(1024, 1024, 16, context, PROMPT_TOKENS)
    assert (layout.h, layout.w) == (64, 64)
    assert PROMPT_TOKENS + layout.length > LLADA_8B.max_sequence_length  # would fail at 4096


def test_real_ids_still_refuse_sizes_past_the_rope_floor() -> None:
    with pytest.raises(ValueError, match="nearest valid size"):
        check_image_size(1536, 1536, 16, context_length(LLADA_8B, DiMOOIds()), PROMPT_TOKENS)


def test_compact_ids_keep_their_own_max_sequence_length() -> None:
    nano_ids = DiMOOIds(mask=3, newline=4, image_offset=100, boa=5, eoa=6, boi=7, eoi=8,
                        uncondition=9, codebook_size=64)
    config = LLaDAConfig(d_model=32, n_heads=4, n_layers=1, vocab_size=164,
                         max_sequence_length=320)
    assert context_length(config, nano_ids) == 320


def test_a_padded_head_keeps_the_official_context() -> None:
    """A head 134656 wide without id keys (the official offset 126356, 108 padding rows) is
    still the real checkpoint: the same context as the default ids."""
    ids = DiMOOIds.from_config_dict({}, width=134656)
    assert ids.image_offset == 126356
    assert context_length(LLADA_8B, ids) == context_length(LLADA_8B, DiMOOIds())
